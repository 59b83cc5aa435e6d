//! Human-readable counters, rendered from the JSON snapshot (the same text for
//! the exit report and for `softswitch stats`).
//!
//! A time-dilated run (`dilation` in the snapshot) is reported in emulated
//! time and rates — elapsed time, Mbit/s, sojourns, AQM and R-AQM times —
//! except the fidelity guard's figures (each port's backlogged and lost
//! link time, the loop's passes and stalls, the verdict), which are what
//! the machine did, in real time; the text says which is which.

use serde_json::Value;

use crate::fidelity::human_time;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn human_bytes(b: u64) -> String {
    if b >= 10_000_000_000 {
        format!("{:.1} GB", b as f64 / 1e9)
    } else if b >= 10_000_000 {
        format!("{:.1} MB", b as f64 / 1e6)
    } else if b >= 10_000 {
        format!("{:.1} KB", b as f64 / 1e3)
    } else {
        format!("{b} B")
    }
}

/// Non-zero entries of a `{reason: {pkts, bytes}}` map as `reason=pkts`.
fn reasons(v: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = v.as_object() {
        for (k, c) in m {
            let p = u(&c["pkts"]);
            if p > 0 {
                parts.push(format!("{k}={p}"));
            }
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" ")
    }
}

/// The per-flow classifier's moves and DiffECN's N_flow / K_p (empty for
/// other ports).
fn diffecn_lines(p: &Value) -> String {
    let mut out = String::new();
    let c = &p["classifier"]["counters"];
    if c.is_object() {
        out.push_str(&format!(
            "  flows: new to empty queue {}, to temporary queue {}, to shortest queue {} | moved out of the temporary queue: probe {}, pass limit {} | expired {} | index collisions {}\n",
            u(&c["new_to_empty"]),
            u(&c["new_to_temp"]),
            u(&c["new_to_shortest"]),
            u(&c["moved_probe"]),
            u(&c["moved_pass_limit"]),
            u(&c["expired"]),
            u(&c["collisions"]),
        ));
    }
    let a = &p["aqm"];
    if a["kind"].as_str() == Some("diffecn") {
        out.push_str(&format!(
            "  diffecn: N_flow {} (last period {}, this one {}, max {}) K_p {} B | {} periods | marks {} of {} packets\n",
            u(&a["n_flow"]),
            u(&a["n_last"]),
            u(&a["n_now"]),
            u(&a["counters"]["max_n_flow"]),
            u(&a["k_p_bytes"]),
            u(&a["periods"]),
            u(&a["counters"]["marks"]),
            u(&a["counters"]["packets"]),
        ));
    }
    out
}

/// What to do about a NOT FAITHFUL verdict, printed under its reasons.
pub const FIDELITY_HINT: &str = "  what to do: keep the rate and slow the experiment down with a larger --dilation (`softswitch-exp calibrate SCENARIO` finds the smallest D this machine holds; README, \"Time dilation\") or run at a lower --rate (`calibrate --by rate`), and keep builds and other load off the machine while it runs; the limits are --max-lost, --max-stall and --max-stalled\n";

/// Renders a snapshot ([`crate::dataplane::Snapshot::to_json`], plus
/// what the data path adds) as a table.
pub fn render(snap: &Value) -> String {
    let mut out = String::new();
    let elapsed = snap["elapsed_s"].as_f64().unwrap_or(0.0);
    // Time dilation: what is real time is labelled so.
    let real = match snap["dilation"].as_f64() {
        Some(d) => {
            out.push_str(&format!(
                "softswitch counters after {elapsed:.1} s emulated ({:.1} s real; time dilation D = {d}: \
                 rates and times are emulated, the fidelity guard's figures real time)\n",
                snap["real_elapsed_s"].as_f64().unwrap_or(elapsed * d),
            ));
            " (real time)"
        }
        None => {
            out.push_str(&format!("softswitch counters after {elapsed:.1} s\n"));
            ""
        }
    };
    for p in snap["ports"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or(&[])
    {
        port_section(&mut out, p, elapsed, real);
    }
    if let Some(f) = snap.get("fabric") {
        fabric_section(&mut out, f);
    }
    if let Some(l) = snap.get("loop") {
        loop_section(&mut out, l, real);
    }
    if let Some(v) = snap.get("fidelity") {
        fidelity_section(&mut out, v, real);
    }
    if let Some(m) = snap.get("umem") {
        umem_section(&mut out, m);
    }
    if let Some(c) = snap.get("conservation") {
        conservation_section(&mut out, c);
    }
    out
}

/// One port: traffic, link state, egress, queues, AQM, sojourn, host link,
/// R-AQM, link fidelity (`real`: the label of its time under dilation).
fn port_section(out: &mut String, p: &Value, elapsed: f64, real: &str) {
    let io = &p["io"];
    let eg = &p["egress"]["port"];
    let tx_bytes = u(&io["tx_bytes"]);
    let rate = if elapsed > 0.0 {
        tx_bytes as f64 * 8.0 / elapsed / 1e6
    } else {
        0.0
    };
    out.push_str(&format!(
        "port {}: rx {} pkts {} | tx {} pkts {} ({rate:.1} Mbit/s avg) | backlog {} B {} pkts\n",
        p["name"].as_str().unwrap_or("?"),
        u(&io["rx_packets"]),
        human_bytes(u(&io["rx_bytes"])),
        u(&io["tx_packets"]),
        human_bytes(tx_bytes),
        u(&p["backlog_bytes"]),
        u(&p["backlog_pkts"]),
    ));
    let link_drops = u(&io["link_down_drops"]);
    if link_drops > 0 || p["link_state"].as_str().is_some_and(|s| s != "up") {
        out.push_str(&format!(
            "  link {}: {link_drops} frames for it released unsent while it was down or gone\n",
            p["link_state"].as_str().unwrap_or("?"),
        ));
    }
    out.push_str(&format!(
        "  egress: enqueued {} dequeued {} | drops: {} | marks: {} | flooded {} | L2 only {} | ingress drops: {}\n",
        u(&eg["enqueued"]["pkts"]),
        u(&eg["dequeued"]["pkts"]),
        reasons(&eg["dropped"]),
        reasons(&eg["marked"]),
        u(&io["flooded"]),
        u(&io["l2_only"]),
        ingress_drops(&io["ingress_drops"]),
    ));
    let k = &p["kernel"];
    if u(&k["rx_lost"]) > 0 || u(&k["tx_invalid_descs"]) > 0 {
        out.push_str(&format!(
            "  kernel: {} frames dropped before the switch saw them (no free frame {}, rx ring full {}, invalid {}){}\n",
            u(&k["rx_lost"]),
            u(&k["rx_dropped"]),
            u(&k["rx_ring_full"]),
            u(&k["rx_invalid_descs"]),
            match u(&k["tx_invalid_descs"]) {
                0 => String::new(),
                n => format!("; {n} tx descriptors refused"),
            }
        ));
    }
    queue_lines(out, &p["egress"]["queues"]);
    if let Some(sum) = p["aqm"]["summary"].as_str() {
        out.push_str(&format!("  {sum}\n"));
    }
    out.push_str(&diffecn_lines(p));
    let s = &eg["sojourn"];
    out.push_str(&format!(
        "  sojourn: p50 {:.1} us p99 {:.1} us max {:.1} us | max backlog {} B\n",
        s["p50_us"].as_f64().unwrap_or(0.0),
        s["p99_us"].as_f64().unwrap_or(0.0),
        s["max_us"].as_f64().unwrap_or(0.0),
        u(&eg["max_backlog_bytes"]),
    ));
    ingress_link_line(out, &p["ingress_link"]);
    raqm_line(out, &p["raqm"]);
    link_fidelity_line(out, &p["link"], real);
}

/// Non-zero entries of the `ingress_drops` array (indexed by drop reason)
/// as `reason=pkts`.
fn ingress_drops(a: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(a) = a.as_array() {
        for (r, c) in crate::aqm::DropReason::ALL.iter().zip(a) {
            if u(c) > 0 {
                parts.push(format!("{}={}", r.name(), u(c)));
            }
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(" ")
    }
}

/// One line per queue that saw traffic (ports with more than one queue).
fn queue_lines(out: &mut String, queues: &Value) {
    let Some(qs) = queues.as_array().filter(|qs| qs.len() > 1) else {
        return;
    };
    for (i, q) in qs.iter().enumerate() {
        if u(&q["arrived"]["pkts"]) == 0 {
            continue;
        }
        out.push_str(&format!(
            "    q{i}: dequeued {} ({}) drops {} marks {} backlog {} B max {} B sojourn p50 {:.1} p99 {:.1} us\n",
            u(&q["dequeued"]["pkts"]),
            human_bytes(u(&q["dequeued"]["bytes"])),
            reasons(&q["dropped"]),
            reasons(&q["marked"]),
            u(&q["backlog_bytes"]),
            u(&q["max_backlog_bytes"]),
            q["sojourn"]["p50_us"].as_f64().unwrap_or(0.0),
            q["sojourn"]["p99_us"].as_f64().unwrap_or(0.0),
        ));
    }
}

/// The emulated host link (`--ingress-rate`), if the port has one.
fn ingress_link_line(out: &mut String, il: &Value) {
    if !il.is_object() {
        return;
    }
    out.push_str(&format!(
        "  ingress link ({}, emulated host NIC): released {} | waited for the wire {} (total {:.1} ms) | max waiting {} | dropped full {}\n",
        il["rate"].as_str().unwrap_or("?"),
        u(&il["released"]),
        u(&il["delayed"]),
        il["waited_ms"].as_f64().unwrap_or(0.0),
        u(&il["max_backlog_pkts"]),
        u(&il["dropped_full"]),
    ));
}

/// R-AQM on the port, if on.
fn raqm_line(out: &mut String, r: &Value) {
    if !r.is_object() {
        return;
    }
    let f = |k: &str| r["state_ms"][k].as_f64().unwrap_or(0.0);
    out.push_str(&format!(
        "  r-aqm: {} | ACKs seen {} passed {} held {} released {} | dropped stale {} viq-full {} | VIQ {} (max {}) | rewrites ece {} rwnd {} (scale unknown {}) | NS {:.1} ms DS {:.1} ms CS {:.1} ms\n",
        r["state"].as_str().unwrap_or("?"),
        u(&r["acks_seen"]),
        u(&r["acks_passed"]),
        u(&r["acks_held"]),
        u(&r["acks_released"]),
        u(&r["dropped_stale"]),
        u(&r["dropped_viq_full"]),
        u(&r["viq_pkts"]),
        u(&r["viq_max"]),
        u(&r["rewrites"]["ece"]),
        u(&r["rewrites"]["rwnd"]),
        u(&r["rewrites"]["rwnd_unknown_scale"]),
        f("normal"),
        f("draining"),
        f("congested"),
    ));
}

/// Link time lost while backlogged, and bursts above the envelope.
fn link_fidelity_line(out: &mut String, l: &Value, real: &str) {
    if u(&l["busy_ns"]) == 0 {
        return;
    }
    out.push_str(&format!(
        "  link{real}: backlogged {}, lost {} ({:.2} % of it){}\n",
        human_time(u(&l["busy_ns"])),
        human_time(u(&l["lost_ns"])),
        l["lost_fraction"].as_f64().unwrap_or(0.0) * 100.0,
        match u(&l["excess_pkts"]) {
            0 => String::new(),
            n => format!(
                ", {n} frames ({} B) above rate + bucket",
                u(&l["excess_bytes"])
            ),
        },
    ));
}

/// The data path's loop: pass intervals, stalls, adaptive poll.
fn loop_section(out: &mut String, l: &Value, real: &str) {
    let f = |k: &str| l[k].as_f64().unwrap_or(0.0);
    out.push_str(&format!(
        "data path{real}: {} passes, interval p50 {:.1} us p99 {:.1} us p99.9 {:.1} us max {:.1} us, {} over 100 us\n",
        u(&l["passes"]),
        f("p50_us"),
        f("p99_us"),
        f("p999_us"),
        f("max_us"),
        u(&l["over_100us"]),
    ));
    if l.get("stalls").is_some() {
        out.push_str(&format!(
            "  stalls while frames waited: {}, {:.1} ms in all ({:.1} ms inside tx kicks, \
             {:.1} ms after yielding, {:.1} ms waiting for a CPU), longest {:.1} us \
             ({:.1} us inside tx kicks, {:.1} us after yielding, {:.1} us waiting); \
             longest tx kick {:.1} us\n",
            u(&l["stalls"]),
            f("stalled_ms"),
            f("stalled_in_kicks_ms"),
            f("stalled_in_yield_ms"),
            f("stalled_waiting_ms"),
            f("max_stall_us"),
            f("max_stall_in_kicks_us"),
            f("max_stall_in_yield_us"),
            f("max_stall_waiting_us"),
            f("max_kick_us"),
        ));
        if let Some(w) = l["thread_waited_ms"].as_f64() {
            out.push_str(&format!(
                "  the data-path thread waited {w:.1} ms in all for a CPU (other tasks ran on it)\n"
            ));
        }
        if let Some(st) = l["thread_stolen_ms"].as_f64() {
            out.push_str(&format!(
                "  its vCPU was stolen {st:.1} ms in all (steal: the hypervisor ran other work), \
                 {:.1} ms of it in stalls, longest stall's {:.1} us\n",
                f("stalled_stolen_ms"),
                f("max_stall_stolen_us"),
            ));
        }
    }
    if let Some(k) = l.get("tx_kicks") {
        let g = |key: &str| k[key].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "  tx kicks: {} sendto, longest {:.1} us ({} frames), at most {} frames in one, \
             at most {} per flush\n",
            u(&k["sendtos"]),
            g("max_sendto_us"),
            u(&k["frames_in_max_sendto"]),
            u(&k["max_frames_per_sendto"]),
            u(&k["max_sendtos_per_flush"]),
        ));
    }
    if let Some(t) = l.get("tx_thread") {
        let g = |k: &str| t[k].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "  tx thread (--tx-thread): {} batches published, longest wait for a kick {:.1} us; \
             {} waited over 100 us, a frame late for {:.1} ms in all\n",
            u(&t["batches"]),
            g("max_wait_us"),
            u(&t["late"]),
            g("late_ms"),
        ));
    }
    if let Some(p) = l.get("poll") {
        let g = |k: &str| p[k].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "  adaptive poll: {} sleeps, {:.1} ms asleep, woke {:.1} us late on average (max {:.1} us)\n",
            u(&p["sleeps"]),
            g("slept_ms"),
            g("mean_late_us"),
            g("max_late_us"),
        ));
    }
}

/// The fidelity guard's verdict and, if not faithful, its reasons.
fn fidelity_section(out: &mut String, v: &Value, real: &str) {
    if v["faithful"].as_bool() == Some(true) {
        out.push_str(&format!("fidelity{real}: faithful (no port lost link time beyond the limit, no burst above rate + bucket, no long stall)\n"));
    } else {
        out.push_str(&format!(
            "fidelity{real}: NOT FAITHFUL — the machine did not emulate the link:\n"
        ));
        for r in v["reasons"].as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
            out.push_str(&format!("  - {}\n", r.as_str().unwrap_or("?")));
        }
        out.push_str(FIDELITY_HINT);
    }
}

/// Where the UMEM's frames are.
fn umem_section(out: &mut String, m: &Value) {
    let rings = match m.get("on_rings") {
        Some(r) if m["rings_match"].as_bool() == Some(false) => {
            format!(" (FILL + RX RINGS HOLD {}, NOT {})", u(r), u(&m["in_fill"]))
        }
        Some(r) => format!(" (fill + rx rings hold {})", u(r)),
        None => String::new(),
    };
    let ok = m["balanced"].as_bool() == Some(true) && m["rings_match"].as_bool() != Some(false);
    out.push_str(&format!(
        "umem: {} frames: free {}, lent to the kernel for rx {}{rings}, held {}, in tx {}{}\n",
        u(&m["frames"]),
        u(&m["free"]),
        u(&m["in_fill"]),
        u(&m["held_by_app"]),
        u(&m["in_tx"]),
        if ok {
            " — every frame accounted for"
        } else {
            " — FRAMES UNACCOUNTED"
        },
    ));
}

/// A fabric (`--topology`): what each switch's routes decided, per next
/// hop what it carried and how many TCP connections were hashed onto it
/// (ECMP), and the link directions that marked or dropped.
fn fabric_section(out: &mut String, f: &Value) {
    let list = |v: &Value| v.as_array().map(|a| a.to_vec()).unwrap_or_default();
    for s in list(&f["switches"]) {
        let r = &s["routes"];
        out.push_str(&format!(
            "fabric switch {}: local {}, routed {}, no route {}, ARP answered {}, flooded {}\n",
            s["name"].as_str().unwrap_or("?"),
            u(&r["local"]),
            u(&r["routed"]),
            u(&r["no_route"]),
            u(&r["arp_answered"]),
            u(&r["flooded"]),
        ));
        for g in list(&s["next_hops"]) {
            let hops: Vec<String> = list(&g["names"])
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    format!(
                        "{} {} pkts {} flows",
                        n.as_str().unwrap_or("?"),
                        u(&g["packets"][i]),
                        u(&g["flows"][i])
                    )
                })
                .collect();
            out.push_str(&format!(
                "  to {}: {}\n",
                g["to"].as_str().unwrap_or("?"),
                hops.join(" | ")
            ));
        }
    }
    let busy: Vec<String> = list(&f["links"])
        .iter()
        .filter(|l| u(&l["marked_packets"]) + u(&l["dropped_packets"]) > 0)
        .map(|l| {
            format!(
                "{} (marked {}, dropped {})",
                l["name"].as_str().unwrap_or("?"),
                u(&l["marked_packets"]),
                u(&l["dropped_packets"])
            )
        })
        .collect();
    out.push_str(&format!(
        "fabric links that marked or dropped: {}\n",
        if busy.is_empty() {
            "none".to_string()
        } else {
            busy.join(", ")
        }
    ));
}

/// Whether the counter identities hold, and which do not.
fn conservation_section(out: &mut String, c: &Value) {
    let sw = &c["switch"];
    if c["holds"].as_bool() == Some(true) {
        out.push_str(&format!(
            "counters add up: rx + flood copies = tx + drops + filtered + held + drained = {} frames switch-wide; per port ingress and egress (frames, bytes) too\n",
            u(&sw["input"]),
        ));
    } else {
        out.push_str("counters DO NOT ADD UP:\n");
        for f in c["failures"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or(&[])
        {
            out.push_str(&format!("  - {}\n", f.as_str().unwrap_or("?")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_nonzero_reasons() {
        let snap = serde_json::json!({
            "elapsed_s": 2.0,
            "ports": [{
                "name": "veth0",
                "io": {"rx_packets": 10, "rx_bytes": 15000, "tx_packets": 9, "tx_bytes": 250_000_000u64,
                       "flooded": 1, "filtered": 0, "ingress_drops": [0, 0, 0, 0, 2, 0, 0, 0]},
                "egress": {"port": {"enqueued": {"pkts": 9, "bytes": 1}, "dequeued": {"pkts": 9, "bytes": 1},
                                    "dropped": {"buffer_full": {"pkts": 3, "bytes": 4500}, "aqm": {"pkts": 0, "bytes": 0}},
                                    "marked": {"sojourn": {"pkts": 5, "bytes": 7500}},
                                    "sojourn": {"p50_us": 12.5, "p99_us": 80.0, "max_us": 100.0}, "max_backlog_bytes": 3000},
                           "queues": []},
                "backlog_bytes": 0, "backlog_pkts": 0
            }],
            "umem": {"frames": 16, "free": 8, "in_fill": 8, "held_by_app": 0, "in_tx": 0, "balanced": true},
            "loop": {"passes": 1000, "p50_us": 1.5, "p99_us": 9.0, "p999_us": 40.0, "max_us": 900.0, "over_100us": 3}
        });
        let mut snap = snap;
        snap["ports"][0]["link"] = serde_json::json!({"busy_ns": 1_500_000_000u64, "lost_ns": 30_000_000u64,
            "lost_fraction": 0.02, "excess_bytes": 0, "excess_pkts": 0});
        snap["fidelity"] = serde_json::json!({"faithful": false, "reasons": ["port veth0 lost 2.0 % of its backlogged link time"]});
        let t = render(&snap);
        assert!(t.contains("data path: 1000 passes, interval p50 1.5 us p99 9.0 us p99.9 40.0 us max 900.0 us, 3 over 100 us"), "{t}");
        assert!(t.contains("port veth0: rx 10 pkts 15.0 KB"), "{t}");
        assert!(t.contains("(1000.0 Mbit/s avg)"), "{t}");
        assert!(t.contains("drops: buffer_full=3 |"), "{t}");
        assert!(t.contains("marks: sojourn=5"), "{t}");
        assert!(t.contains("ingress drops: malformed=2"), "{t}");
        assert!(t.contains("every frame accounted for"), "{t}");
        assert!(!t.contains("add up"), "{t}");
        // The kernel's socket drops: a line only when there are some.
        assert!(!t.contains("kernel:"), "{t}");
        let mut k = snap.clone();
        k["ports"][0]["kernel"] = serde_json::json!({"rx_lost": 7, "rx_dropped": 2, "rx_ring_full": 5,
            "rx_invalid_descs": 0, "rx_fill_ring_empty": 40, "tx_invalid_descs": 0});
        let t = render(&k);
        assert!(t.contains("  kernel: 7 frames dropped before the switch saw them (no free frame 2, rx ring full 5, invalid 0)\n"), "{t}");
        k["ports"][0]["kernel"] =
            serde_json::json!({"rx_lost": 0, "rx_fill_ring_empty": 40, "tx_invalid_descs": 0});
        assert!(
            !render(&k).contains("kernel:"),
            "fill-ring-empty events alone lose nothing"
        );
        let mut ok = snap.clone();
        ok["conservation"] = serde_json::json!({"switch": {"input": 12, "output": 12}, "holds": true, "failures": []});
        ok["umem"]["on_rings"] = serde_json::json!(8);
        ok["umem"]["rings_match"] = serde_json::json!(true);
        let t = render(&ok);
        assert!(t.contains("counters add up: rx + flood copies = tx + drops + filtered + held + drained = 12 frames switch-wide"), "{t}");
        assert!(t.contains("lent to the kernel for rx 8 (fill + rx rings hold 8), held 0, in tx 0 — every frame accounted for"), "{t}");
        ok["conservation"] = serde_json::json!({"switch": {"input": 12, "output": 11}, "holds": false,
            "failures": ["switch frames: rx + flood copies 12 != tx + drops + filtered + held + drained 11"]});
        ok["umem"]["on_rings"] = serde_json::json!(7);
        ok["umem"]["rings_match"] = serde_json::json!(false);
        let t = render(&ok);
        assert!(
            t.contains("counters DO NOT ADD UP:\n  - switch frames: rx + flood copies 12 != "),
            "{t}"
        );
        assert!(
            t.contains("(FILL + RX RINGS HOLD 7, NOT 8)") && t.contains("FRAMES UNACCOUNTED"),
            "{t}"
        );
        assert!(
            t.contains("link: backlogged 1.50 s, lost 30.0 ms (2.00 % of it)\n"),
            "{t}"
        );
        assert!(t.contains("fidelity: NOT FAITHFUL"), "{t}");
        assert!(
            t.contains(
                "  what to do: keep the rate and slow the experiment down with a larger --dilation"
            ),
            "{t}"
        );
        assert!(!t.contains("diffecn") && !t.contains("flows:"), "{t}");
        snap["ports"][0]["classifier"] = serde_json::json!({"kind": "flow", "counters": {
            "new_to_empty": 5, "new_to_temp": 2, "new_to_shortest": 0, "moved_probe": 1,
            "moved_pass_limit": 1, "expired": 3, "collisions": 0, "non_ip": 0}});
        snap["ports"][0]["aqm"] = serde_json::json!({"kind": "diffecn", "n_flow": 4, "n_last": 4,
            "n_now": 2, "k_p_bytes": 1328, "periods": 100, "counters": {"packets": 900, "marks": 30, "max_n_flow": 5}});
        let t = render(&snap);
        assert!(t.contains("  flows: new to empty queue 5, to temporary queue 2, to shortest queue 0 | moved out of the temporary queue: probe 1, pass limit 1 | expired 3"), "{t}");
        assert!(t.contains("  diffecn: N_flow 4 (last period 4, this one 2, max 5) K_p 1328 B | 100 periods | marks 30 of 900 packets"), "{t}");
        assert!(t.contains("  - port veth0 lost 2.0 %"), "{t}");
        assert!(!t.contains("ingress link"), "{t}");
        snap["ports"][0]["ingress_link"] = serde_json::json!({"rate": "500mbit", "backlog_pkts": 0,
            "released": 900, "delayed": 300, "dropped_full": 0, "max_backlog_pkts": 12, "waited_ms": 4.25});
        let t = render(&snap);
        assert!(t.contains("  ingress link (500mbit, emulated host NIC): released 900 | waited for the wire 300 (total 4.2 ms) | max waiting 12 | dropped full 0"), "{t}");
        assert!(!t.contains("real time") && !t.contains("emulated ("), "{t}");

        // Time dilation: emulated time and rates, the guard's figures real.
        snap["dilation"] = serde_json::json!(4.0);
        snap["real_elapsed_s"] = serde_json::json!(8.0);
        snap["fidelity"] = serde_json::json!({"faithful": true, "reasons": [], "time": "real"});
        let t = render(&snap);
        assert!(t.starts_with("softswitch counters after 2.0 s emulated (8.0 s real; time dilation D = 4: rates and times are emulated, the fidelity guard's figures real time)\n"), "{t}");
        assert!(t.contains("(1000.0 Mbit/s avg)"), "emulated rate: {t}");
        assert!(t.contains("  link (real time): backlogged 1.50 s"), "{t}");
        assert!(t.contains("data path (real time): 1000 passes"), "{t}");
        assert!(t.contains("fidelity (real time): faithful"), "{t}");
    }
}

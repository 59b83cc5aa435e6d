//! Root integration tests of the real switch: `softswitch --ports ...` over
//! the host namespaces of `softswitch::topo`. Skipped unless root.
//!
//! Every test that starts a switch holds [`common::switch_serial`]: the
//! switch busy-polls a CPU, and CI runs `--test-threads=2` on 2 vCPUs.

mod common;

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::{
    iperf_receiver_bps, iperf_retransmits, measure, ping, run_ok, skip_unless_root,
    skip_unless_tools, stats_socket, switch_serial, tcp_ext_counter, wait_no_xdp, xdp_attached,
    CpuUse, CpuWatch, SwitchProc, TestTopo, Verdict,
};
use softswitch::topo::Host;

/// Starts the switch on all hosts of `t` with `args`; `bound` is the
/// `--duration` safety bound.
fn switch(t: &TestTopo, tag: &str, args: &[&str], bound: Duration) -> SwitchProc {
    SwitchProc::start(&t.switch_ifs(), args, &stats_socket(&t.prefix, tag), bound)
}

/// `n` of `counters.ports[port].egress.port.<kind>.<reason>.pkts`.
fn port_count(j: &serde_json::Value, port: usize, kind: &str, reason: &str) -> u64 {
    j["ports"][port]["egress"]["port"][kind][reason]["pkts"]
        .as_u64()
        .unwrap_or_else(|| panic!("no ports[{port}].egress.port.{kind}.{reason}.pkts in {j}"))
}

/// Sum of all drop reasons of every port, for failure messages.
fn drops_summary(j: &serde_json::Value) -> String {
    let mut out = String::new();
    for p in j["ports"].as_array().into_iter().flatten() {
        let dropped = &p["egress"]["port"]["dropped"];
        let nonzero: Vec<String> = dropped
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| v["pkts"].as_u64().unwrap_or(0) > 0)
            .map(|(k, v)| format!("{k}={}", v["pkts"]))
            .collect();
        out.push_str(&format!(
            "{}: rx {} tx {} dequeued {} drops [{}] marks {} sojourn {}\n",
            p["name"],
            p["io"]["rx_packets"],
            p["io"]["tx_packets"],
            p["egress"]["port"]["dequeued"]["pkts"],
            nonzero.join(" "),
            p["egress"]["port"]["marked"],
            p["egress"]["port"]["sojourn"],
        ));
    }
    out
}

/// An IPv6 address of `host`'s eth0 with `scope` (`link` or `global`).
fn ipv6_addr(host: &Host, scope: &str) -> Option<String> {
    let out = run_ok(&mut host.exec(&[
        "ip",
        "-6",
        "-o",
        "addr",
        "show",
        "dev",
        &host.host_if,
        "scope",
        scope,
    ]));
    out.split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .map(|a| a.split('/').next().unwrap_or(a).to_owned())
}

/// Runs `iperf3 -c` from `from` to `to` for `secs` seconds with `-J` plus
/// `extra`. Returns the client's JSON.
fn iperf(t: &mut TestTopo, from: usize, to: usize, secs: u32, extra: &[&str]) -> String {
    let mut args = vec!["-J"];
    args.extend_from_slice(extra);
    t.iperf(from, to, secs, &args)
}

#[test]
fn ping_through_switch() {
    let name = "ping_through_switch";
    if skip_unless_root(name) || skip_unless_tools(name, &["ping"]) {
        return;
    }
    let _serial = switch_serial();
    let t = TestTopo::new(2);
    // `--cpu last`: pinned to the highest-numbered CPU (checked below).
    let sw = switch(
        &t,
        "",
        &["--rate", "1gbit", "--cpu", "last"],
        Duration::from_secs(30),
    );

    // ARP resolves through the switch (flooded broadcast, learned replies).
    ping(&t.hosts[0], t.hosts[1].ip);
    ping(&t.hosts[1], t.hosts[0].ip);

    // IPv6: topo leaves IPv6 on in the hosts (DAD off), so eth0 has a
    // link-local address; ND (multicast solicitation) must cross the switch.
    if std::path::Path::new("/proc/sys/net/ipv6").exists() {
        let ll = ipv6_addr(&t.hosts[1], "link")
            .expect("h2 has no IPv6 link-local address (topo keeps IPv6 on in hosts)");
        let dst = format!("{ll}%{}", t.hosts[0].host_if);
        run_ok(&mut t.hosts[0].exec(&["ping", "-6", "-c", "1", "-w", "3", "-q", &dst]));
        // And a ULA pair (global scope, no DAD delay).
        for (i, h) in t.hosts.iter().enumerate() {
            let a = format!("fd00:99::{}/64", i + 1);
            run_ok(&mut h.exec(&["ip", "-6", "addr", "add", &a, "dev", &h.host_if, "nodad"]));
        }
        run_ok(&mut t.hosts[0].exec(&["ping", "-6", "-c", "1", "-w", "3", "-q", "fd00:99::2"]));
        run_ok(&mut t.hosts[1].exec(&["ping", "-6", "-c", "1", "-w", "3", "-q", "fd00:99::1"]));
    } else {
        eprintln!("{name}: kernel without IPv6, IPv6 part skipped");
    }

    // The data path (the main thread) is pinned to the last CPU, when there
    // are two or more.
    let allowed = softswitch::cpu::allowed_cpus().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{0}/task/{0}/status", sw.pid())).unwrap();
    let pinned = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| softswitch::cpu::parse_cpu_list(l).unwrap())
        .unwrap();
    if allowed.len() >= 2 {
        assert_eq!(
            pinned,
            vec![*allowed.iter().max().unwrap()],
            "{}",
            sw.stderr_so_far()
        );
        assert!(
            sw.stderr_so_far().contains("pinned to CPU"),
            "{}",
            sw.stderr_so_far()
        );
    }

    let j = sw.stop().assert_clean();
    // The loop measured its own regularity.
    assert!(
        j["loop"]["passes"].as_u64().unwrap_or(0) > 1000,
        "{}",
        j["loop"]
    );
    assert!(j["loop"]["p50_us"].as_f64().unwrap() > 0.0, "{}", j["loop"]);
    // It counted its tx kicks (the pings' replies went out by them), each
    // flush's, and knows how much of the run its vCPU was stolen.
    let k = &j["loop"]["tx_kicks"];
    assert!(k["sendtos"].as_u64().unwrap_or(0) > 0, "{k}");
    assert!(k["max_sendtos_per_flush"].as_u64().unwrap_or(0) >= 1, "{k}");
    assert!(k["max_frames_per_sendto"].as_u64().unwrap_or(0) >= 1, "{k}");
    assert!(k["max_sendto_us"].as_f64().unwrap_or(0.0) > 0.0, "{k}");
    // Every port reports what its kernel socket dropped before the switch
    // saw it (pings at this rate: nothing).
    for p in j["ports"].as_array().unwrap() {
        let k = &p["kernel"];
        assert_eq!(k["rx_lost"].as_u64(), Some(0), "{}: {k}", p["name"]);
        assert!(k["rx_fill_ring_empty"].as_u64().is_some(), "{k}");
    }
    let stolen = j["loop"]["thread_stolen_ms"].as_f64();
    // Undilated: the counters' time is real time.
    let elapsed_ms = j["elapsed_s"].as_f64().unwrap() * 1e3;
    assert!(
        stolen.is_some_and(|s| (0.0..elapsed_ms).contains(&s)),
        "thread_stolen_ms {stolen:?} of a {elapsed_ms} ms run"
    );
    assert!(
        j["mac_entries"].as_u64().unwrap_or(0) >= 2,
        "switch learned fewer than 2 MACs: {}",
        j["mac_entries"]
    );
    assert!(
        xdp_attached(&t.switch_ifs()).is_empty(),
        "XDP left after SIGINT"
    );
}

#[test]
fn dctcp_transfer_negotiates_ecn() {
    let name = "dctcp_transfer_negotiates_ecn";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(2);
    let sw = switch(
        &t,
        "",
        &["--rate", "1gbit", "--aqm", "tcn"],
        Duration::from_secs(30),
    );
    let server_ip = t.hosts[1].ip.to_string();
    let client = t.iperf_start(0, 1, 5201, 3, &["-J"]);
    // Sample `ss -tino` of the sender while the transfer runs.
    let mut seen = None;
    let mut last = String::new();
    for _ in 0..10 {
        sleep(Duration::from_millis(250));
        last = run_ok(&mut t.hosts[0].exec(&["ss", "-tino", "dst", &server_ip]));
        // The bulk connection: the line with most bytes_acked.
        let bulk = last
            .lines()
            .filter(|l| l.contains("bytes_acked:"))
            .max_by_key(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("bytes_acked:"))
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            });
        if let Some(l) = bulk {
            if l.split_whitespace().any(|w| w == "ecn") && l.contains(&t.cc) {
                seen = Some(l.to_owned());
            }
        }
    }
    let out = t.wait(client, Duration::from_secs(20));
    let bps = iperf_receiver_bps(&out);
    let j = sw.stop().assert_clean();
    eprintln!(
        "{name}: cc {}, goodput {:.0} Mbit/s, retransmits {}\n{}",
        t.cc,
        bps / 1e6,
        iperf_retransmits(&out),
        drops_summary(&j)
    );
    assert!(
        t.cc == "bpf_dctcp" || t.cc == "dctcp",
        "hosts use {:?}, not DCTCP",
        t.cc
    );
    let line = seen.unwrap_or_else(|| {
        panic!(
            "`ss -tino` never showed {} with ecn on the bulk connection; last sample:\n{last}",
            t.cc
        )
    });
    eprintln!("{name}: {line}");
    assert!(bps > 100e6, "goodput only {:.1} Mbit/s", bps / 1e6);
}

/// `--tx-thread`: the kicks leave the data path for a thread of their own,
/// kept off the data path's CPU; TCP runs through it, every frame is
/// accounted for, the data path spends no time in kicks, and the report
/// says how long frames waited on the tx rings.
#[test]
fn tx_thread_kicks_off_the_data_path() {
    let name = "tx_thread_kicks_off_the_data_path";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ping"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(2);
    let sw = switch(
        &t,
        "",
        &[
            "--rate",
            "500mbit",
            "--aqm",
            "tcn",
            "--cpu",
            "last",
            "--tx-thread",
        ],
        Duration::from_secs(30),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    // The tx thread runs beside the data path (the main thread), on the
    // other CPUs.
    let pid = sw.pid();
    let task = |tid: &str| -> (String, Vec<u32>) {
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        let cpus =
            softswitch::cpu::parse_cpu_list(&field("Cpus_allowed_list:")).unwrap_or_default();
        (field("Name:"), cpus)
    };
    let tx_task = || {
        let tasks: Vec<(String, Vec<u32>)> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| Some(task(e.ok()?.file_name().to_str()?)))
            .collect();
        let tx = tasks.iter().find(|(n, _)| n == "softswitch-tx").cloned();
        tx.unwrap_or_else(|| panic!("no softswitch-tx thread in {tasks:?}"))
    };
    let (_, main_cpus) = task(&pid.to_string());
    if softswitch::cpu::allowed_cpus().unwrap().len() >= 2 {
        assert_eq!(main_cpus.len(), 1, "data path not pinned: {main_cpus:?}");
        // The thread sets its own CPUs as it starts: give it a moment.
        let mut tx_cpus = tx_task().1;
        for _ in 0..20 {
            if !tx_cpus.contains(&main_cpus[0]) {
                break;
            }
            sleep(Duration::from_millis(50));
            tx_cpus = tx_task().1;
        }
        assert!(
            !tx_cpus.is_empty() && !tx_cpus.contains(&main_cpus[0]),
            "tx thread on {tx_cpus:?}, data path on {main_cpus:?}"
        );
    } else {
        tx_task();
    }
    let out = iperf(&mut t, 0, 1, 3, &[]);
    let bps = iperf_receiver_bps(&out);
    let j = sw.stop().assert_clean();
    let l = &j["loop"];
    eprintln!(
        "{name}: goodput {:.0} Mbit/s, tx kicks {}, tx thread {}",
        bps / 1e6,
        l["tx_kicks"],
        l["tx_thread"]
    );
    assert!(bps > 100e6, "goodput only {:.1} Mbit/s", bps / 1e6);
    // The kicks happened, in the tx thread: none inside the data path's
    // passes.
    assert!(l["tx_kicks"]["sendtos"].as_u64().unwrap_or(0) > 1000, "{l}");
    assert_eq!(l["stalled_in_kicks_ms"].as_f64(), Some(0.0), "{l}");
    // Each batch the data path published was timed until the kernel took
    // it: about one per frame sent at this rate, every one taken.
    let tt = &l["tx_thread"];
    let batches = tt["batches"].as_u64().unwrap_or(0);
    assert!(batches > 1000, "{tt}");
    assert!(tt["max_wait_us"].as_f64().unwrap_or(0.0) > 0.0, "{tt}");
    assert!(tt["late"].as_u64().unwrap() <= batches, "{tt}");
    let elapsed_ms = j["elapsed_s"].as_f64().unwrap() * 1e3;
    assert!(tt["late_ms"].as_f64().unwrap() <= elapsed_ms, "{tt}");
}

/// One 10 s transfer h1 -> h2 through a switch at `--rate 500mbit` with
/// `aqm`: receiver goodput (bit/s, slow start omitted), the switch's CPU
/// use during the transfer, and a summary of its counters.
fn shaped_run(aqm: &str) -> ((f64, String, Verdict), CpuUse) {
    let mut t = TestTopo::new(2);
    let sw = switch(
        &t,
        "",
        &["--rate", "500mbit", "--aqm", aqm],
        Duration::from_secs(40),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    let watch = CpuWatch::start(sw.pid());
    // -O 1: leave slow start out of the average.
    let out = iperf(&mut t, 0, 1, 10, &["-O", "1"]);
    let cpu = watch.read();
    let bps = iperf_receiver_bps(&out);
    let exit = sw.stop();
    let j = exit.assert_clean();
    let summary = format!(
        "--aqm {aqm}: goodput {:.1} Mbit/s = {:.1} % of 500 Mbit/s, retransmits {}; {cpu}\n{}",
        bps / 1e6,
        bps / 5e6,
        iperf_retransmits(&out),
        drops_summary(&j)
    );
    eprintln!("{summary}");
    ((bps, summary, Verdict::of(&j)), cpu)
}

#[test]
fn shaped_goodput_500mbit() {
    let name = "shaped_goodput_500mbit";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    // What 500 Mbit/s of wire carries as TCP payload: 1448 B per 1514 B
    // frame + the 24 B preamble/FCS/gap the shaper counts = 94.1 %.
    let rate = 500e6;
    let in_range = |r: &(f64, String, Verdict)| (0.85..=1.0).contains(&(r.0 / rate));
    let ((bps, summary, verdict), cpu) = measure(name, 3, || shaped_run("tcn"), in_range);
    let share = bps / rate;
    // The goodput says what the shaper and TCN do only on a run the
    // machine held: when the fidelity guard says it did not (lost link
    // time, stalls), a short goodput is the machine's, and the run proves
    // nothing either way. A run the guard calls faithful must deliver.
    if !(0.85..=1.0).contains(&share) && !verdict.faithful {
        eprintln!(
            "{name}: INCONCLUSIVE — goodput {:.1} % of 500 Mbit/s on runs the fidelity guard \
             judged NOT FAITHFUL (this machine did not hold 500 Mbit/s): {:?}",
            share * 100.0,
            verdict.reasons
        );
        return;
    }
    assert!(
        (0.85..=1.0).contains(&share),
        "goodput {:.1} Mbit/s is {:.1} % of 500 Mbit/s, expected 85–100 % (ideal 94.1 %){}\n{summary}",
        bps / 1e6,
        share * 100.0,
        if cpu.starved() {
            "; THE SWITCH WAS STARVED OF CPU by other load on this machine"
        } else {
            ""
        }
    );
    // For comparison (printed, loosely checked): drop-tail at the same
    // rate fills the 96 KB buffer, drops and retransmits; on a loaded
    // 2-vCPU machine it measured 75–79 % where TCN measured 67–86 %.
    let ((bps, summary, _), _) = shaped_run("droptail");
    assert!(bps > 0.5 * rate, "drop-tail: {summary}");
}

#[test]
fn host_link_emulation_spreads_bursts() {
    let name = "host_link_emulation_spreads_bursts";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    // Hosts behind emulated 1 Gbit/s NICs, a 300 Mbit/s egress port: the
    // port stays the bottleneck, the host link only spreads bursts.
    let mut t = TestTopo::new(2);
    let sw = switch(
        &t,
        "",
        &["--rate", "300mbit", "--ingress-rate", "1gbit"],
        Duration::from_secs(30),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    let out = iperf(&mut t, 0, 1, 3, &["-O", "1"]);
    let bps = iperf_receiver_bps(&out);
    let exit = sw.stop();
    let j = exit.assert_clean();
    let l = &j["ports"][0]["ingress_link"];
    eprintln!(
        "goodput {:.1} Mbit/s, h1's link: {l}\n{}",
        bps / 1e6,
        drops_summary(&j)
    );
    assert_eq!(l["rate"], "1gbit", "{l}");
    let released = l["released"].as_u64().unwrap_or(0);
    assert_eq!(
        released,
        j["ports"][0]["io"]["rx_packets"].as_u64().unwrap_or(0),
        "every frame h1 sent entered the switch through its link: {l}"
    );
    assert!(released > 50_000, "{l}");
    assert!(
        l["delayed"].as_u64().unwrap_or(0) > 0,
        "h1's bursts found its wire busy: {l}"
    );
    assert_eq!(l["dropped_full"], 0, "{l}");
    // 81 % measured with two other builds and a soak on this 2-vCPU
    // machine; the bound only catches a host link that breaks the transfer.
    // On a run the fidelity guard did not hold (the VM's host took the
    // switch's CPU) the machine sets the goodput as much as the port: half
    // the rate still tells a working host link from a broken one.
    let verdict = Verdict::of(&j);
    let floor = if verdict.faithful { 0.7 } else { 0.5 };
    assert!(
        (floor..=1.0).contains(&(bps / 300e6)),
        "goodput {:.1} Mbit/s of 300 Mbit/s, expected {:.0}-100 % on a run the guard called \
         {}: the egress port, not the host link, must set it",
        bps / 1e6,
        floor * 100.0,
        softswitch::fidelity::label(verdict.faithful)
    );
}

/// A 3 s transfer h1 -> h2 through a switch started with `args`; returns
/// h1's `TcpExtTCPDeliveredCE` increase and the switch's counters.
fn ce_run(args: &[&str]) -> (u64, serde_json::Value) {
    let mut t = TestTopo::new(2);
    let sw = switch(&t, "", args, Duration::from_secs(30));
    ping(&t.hosts[0], t.hosts[1].ip);
    let before = tcp_ext_counter(&t.hosts[0], "TCPDeliveredCE");
    let out = iperf(&mut t, 0, 1, 3, &[]);
    let ce = tcp_ext_counter(&t.hosts[0], "TCPDeliveredCE") - before;
    let j = sw.stop().assert_clean();
    eprintln!(
        "switch {args:?}: goodput {:.0} Mbit/s, sender TCPDeliveredCE +{ce}\n{}",
        iperf_receiver_bps(&out) / 1e6,
        drops_summary(&j)
    );
    (ce, j)
}

#[test]
fn forced_marks_reach_the_sender() {
    let name = "forced_marks_reach_the_sender";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    // Port 1 is h2's: the data direction's egress.
    let (ce, j) = ce_run(&["--rate", "0", "--mark-every", "10"]);
    let forced = port_count(&j, 1, "marked", "forced");
    let dequeued = j["ports"][1]["egress"]["port"]["dequeued"]["pkts"]
        .as_u64()
        .unwrap_or(0);
    assert!(forced > 0, "marked.forced is 0 with --mark-every 10");
    // Every 10th ECT packet; almost every data packet is ECT.
    assert!(
        forced * 10 <= dequeued + 10 && forced * 20 >= dequeued,
        "forced marks {forced} are not ~1/10 of {dequeued} dequeued packets"
    );
    assert!(ce > 0, "sender's TCPDeliveredCE did not rise");

    let (ce, j) = ce_run(&["--rate", "0"]);
    let marks: u64 = j["ports"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["egress"]["port"]["marked"].as_object().unwrap().values())
        .map(|v| v["pkts"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(marks, 0, "switch marked without --mark-every");
    assert_eq!(ce, 0, "CE reached the sender without marking");
}

#[test]
fn kill_9_leaves_no_xdp() {
    let name = "kill_9_leaves_no_xdp";
    if skip_unless_root(name) || skip_unless_tools(name, &["ping"]) {
        return;
    }
    let _serial = switch_serial();
    let t = TestTopo::new(2);
    let ports = t.switch_ifs();
    let socket = stats_socket(&t.prefix, "");
    let mut sw = SwitchProc::start(&ports, &[], &socket, Duration::from_secs(30));
    assert_eq!(
        xdp_attached(&ports),
        ports,
        "XDP not shown on the ports while the switch runs"
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    sw.signal(nix::sys::signal::Signal::SIGKILL);
    let exit = sw.wait_exit(Duration::from_secs(5));
    assert_eq!(exit.code, None, "not killed by the signal: {exit:?}");
    // Leave its stats socket behind, as a crash does.
    assert!(
        std::path::Path::new(&socket).exists(),
        "no stats socket {socket} while it ran"
    );
    sw.socket.clear();
    drop(sw);
    let t0 = Instant::now();
    let left = wait_no_xdp(&ports, Duration::from_secs(3));
    assert!(
        left.is_empty(),
        "XDP still attached after kill -9 on {left:?}:\n{}",
        run_ok(Command::new("ip").args(["-d", "link", "show", "dev", &left[0]]))
    );
    eprintln!("{name}: XDP gone {:?} after the kill", t0.elapsed());

    // A new switch starts on the same ports (and the same, stale, stats
    // socket) right away, and forwards.
    let sw = SwitchProc::start(&ports, &[], &socket, Duration::from_secs(30));
    ping(&t.hosts[0], t.hosts[1].ip);
    ping(&t.hosts[1], t.hosts[0].ip);
    sw.stop().assert_clean();
    assert!(wait_no_xdp(&ports, Duration::from_secs(2)).is_empty());
}

#[test]
fn bad_input_errors() {
    let name = "bad_input_errors";
    if skip_unless_root(name) {
        return;
    }
    let _serial = switch_serial();
    let t = TestTopo::new(2);
    let ports = t.switch_ifs();
    let socket = stats_socket(&t.prefix, "");
    let missing = format!("{}-nope", t.prefix);

    let expect_error = |ports: &[String], args: &[&str], advice: &[&str]| {
        let mut sw = SwitchProc::spawn(ports, args, &socket, Duration::from_secs(5));
        let exit = sw.wait_exit(Duration::from_secs(10));
        drop(sw);
        eprintln!(
            "{name}: {args:?} -> {:?}: {}",
            exit.code,
            exit.stderr.trim()
        );
        assert!(
            exit.code.is_some_and(|c| c != 0),
            "switch {ports:?} {args:?} did not fail: {exit:?}"
        );
        for a in advice {
            assert!(
                exit.stderr.contains(a),
                "{args:?}: stderr lacks {a:?}:\n{}",
                exit.stderr
            );
        }
        assert!(
            !exit.stderr.contains("forwarding between"),
            "{args:?}: started forwarding"
        );
        let left = xdp_attached(&t.switch_ifs());
        assert!(left.is_empty(), "{args:?}: XDP left on {left:?}");
    };

    // Missing interface (listed after a good one: nothing may stay attached).
    expect_error(
        &[ports[0].clone(), missing.clone()],
        &[],
        &[&missing, "ip link"],
    );
    // An interface that is down.
    run_ok(Command::new("ip").args(["link", "set", &ports[1], "down"]));
    expect_error(&ports, &[], &["is down", "ip link set"]);
    run_ok(Command::new("ip").args(["link", "set", &ports[1], "up"]));
    // A buffer smaller than one frame.
    expect_error(&ports, &["--buffer", "1000b"], &["--buffer"]);
    // A rate in unknown units.
    expect_error(&ports, &["--rate", "1gigabit"], &["1gbit"]);
    // MQ-ECN needs a round-robin scheduler.
    expect_error(
        &ports,
        &["--aqm", "mq-ecn", "--sched", "wfq", "--queues", "2"],
        &["round-robin"],
    );
    // A CPU that does not exist (checked before anything is attached).
    expect_error(&ports, &["--cpu", "4095"], &["CPU 4095", "none"]);
    expect_error(&ports, &["--cpu", "auto"], &["last", "none"]);
    // And after all that, a good switch starts on the same ports.
    let sw = SwitchProc::start(&ports, &[], &socket, Duration::from_secs(20));
    ping(&t.hosts[0], t.hosts[1].ip);
    sw.stop().assert_clean();
}

/// A hog on the switch's CPU: a SCHED_FIFO thread pinned to `cpu` that
/// spins `busy` then sleeps `idle`, until `stop` is set. While it spins the
/// pinned data path cannot run at all: a stall of `busy`, by construction.
fn rt_hog(
    cpu: u32,
    busy: Duration,
    idle: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        // SAFETY: plain syscalls on this thread with valid, initialised arguments.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0,
                "pin the hog to CPU {cpu}"
            );
            let p = libc::sched_param { sched_priority: 50 };
            assert_eq!(
                libc::sched_setscheduler(0, libc::SCHED_FIFO, &p),
                0,
                "make the hog SCHED_FIFO"
            );
        }
        let mut bursts = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let t = Instant::now();
            while t.elapsed() < busy {
                std::hint::spin_loop();
            }
            bursts += 1;
            sleep(idle);
        }
        bursts
    })
}

/// One 4 s transfer h1 -> h2 through a 250 Mbit/s TCN port pinned to the
/// last CPU (at 500 Mbit/s three unloaded runs in a row lost 1.1–3.0 % of
/// their backlogged link time on a fresh VM of this kind: the receiving
/// host's stack runs inside the switch's tx kicks), with or without an RT hog stalling that CPU for 20 ms of every
/// 100 ms: the switch's exit JSON and its CPU use.
fn guarded_run(hog: bool) -> (serde_json::Value, CpuUse) {
    let cpu = *softswitch::cpu::allowed_cpus()
        .unwrap()
        .iter()
        .max()
        .unwrap();
    let cpu_arg = cpu.to_string();
    let mut t = TestTopo::new(2);
    let sw = switch(
        &t,
        "",
        &["--rate", "250mbit", "--aqm", "tcn", "--cpu", &cpu_arg],
        Duration::from_secs(30),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h = hog.then(|| {
        rt_hog(
            cpu,
            Duration::from_millis(20),
            Duration::from_millis(80),
            stop.clone(),
        )
    });
    let watch = CpuWatch::start(sw.pid());
    let out = iperf(&mut t, 0, 1, 4, &[]);
    let use_ = watch.read();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = h {
        let bursts = h.join().unwrap();
        assert!(bursts >= 20, "the hog ran only {bursts} bursts");
    }
    assert!(iperf_receiver_bps(&out) > 0.0, "no transfer: {out}");
    (sw.stop().assert_clean(), use_)
}

#[test]
fn fidelity_guard_flags_a_starved_data_path() {
    let name = "fidelity_guard_flags_a_starved_data_path";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    if softswitch::cpu::allowed_cpus().unwrap().len() < 2 {
        eprintln!("{name}: skipped, needs 2 CPUs (the hog must leave the hosts one)");
        return;
    }
    let _serial = switch_serial();

    // Starved: 20 ms of every 100 ms the data path cannot run, while TCP
    // keeps the port backlogged. The guard must say so, with the reasons.
    let (j, _) = guarded_run(true);
    let f = &j["fidelity"];
    assert_eq!(f["faithful"], false, "a starved run passed the guard: {f}");
    let reasons = f["reasons"].to_string();
    assert!(
        reasons.contains("stall"),
        "no stall among the reasons: {reasons}"
    );
    // The hog takes the switch's CPU away from its thread, which waits for
    // it: the guard must say so, not blame the hosts' stacks.
    assert!(
        reasons.contains("at once") && reasons.contains("of it waiting for a CPU"),
        "the hog's stall is not put down to waiting for a CPU: {reasons}"
    );
    let max_stall_us = j["loop"]["max_stall_us"]
        .as_f64()
        .unwrap_or_else(|| panic!("no loop.max_stall_us in {}", j["loop"]));
    assert!(
        max_stall_us >= 15_000.0,
        "the hog stalls the loop for 20 ms, the guard saw at most {max_stall_us} µs"
    );
    let lost: f64 = j["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["link"]["lost_ns"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(
        lost > 1e6,
        "backlogged ports lost no link time: {}",
        j["ports"]
    );

    // Idle: the same run without the hog is faithful. Tried up to 3 times
    // whatever the cause of a failure: on this kind of VM an unloaded run
    // can really stall (a CI run saw one 8.3 ms stall while the switch's
    // thread "ran 100 %, waited 0 %", so the guest's scheduler could not
    // tell why) and the guard is right to flag it. What this half tests is
    // that the guard does not flag an unloaded run *as a rule*: three
    // flagged runs in a row fail.
    let mut seen = Vec::new();
    let mut kick_floor = Vec::new();
    for attempt in 1..=3 {
        let (j, cpu) = guarded_run(false);
        if j["fidelity"]["faithful"] == true {
            return;
        }
        eprintln!(
            "{name}: unloaded attempt {attempt} failed the guard: {}; loop {}; {cpu}",
            j["fidelity"], j["loop"]
        );
        // The time the loop spent inside tx kicks against the largest link
        // time a port lost: a run that lost no more than twice its kick
        // time lost it to the kicks.
        let kicks_ms = j["loop"]["stalled_in_kicks_ms"].as_f64().unwrap_or(0.0);
        let lost_ms = j["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["link"]["lost_ns"].as_f64())
            .fold(0.0, f64::max)
            / 1e6;
        // Likewise for time the VM's host took: the switch's own count of
        // its vCPU stolen inside stalls, or the machine's steal (`starved`).
        let stolen_ms = j["loop"]["stalled_stolen_ms"].as_f64().unwrap_or(0.0);
        kick_floor.push(
            cpu.starved()
                || (kicks_ms + stolen_ms > 0.0 && lost_ms <= 2.0 * (kicks_ms + stolen_ms)),
        );
        seen.push(format!(
            "{} ({cpu}; {kicks_ms:.1} ms inside tx kicks, {stolen_ms:.1} ms stolen in stalls, \
             {lost_ms:.1} ms of link time lost)",
            j["fidelity"]["reasons"]
        ));
    }
    // Flagged every time, for time lost to the kernel work a copy-mode
    // AF_XDP kick runs on the switch's CPU (the hosts' stacks) or to the
    // VM's host: that is this machine's floor above the limit, measured,
    // not a false flag (BENCHMARKS.md: 2026-11-27 lost 1-3 % at any rate
    // and D; 2026-11-28 a CI-like VM's host stole 5-25 % of its CPUs for
    // minutes). The test cannot tell a false flag from it then, and says so. (A run can lose
    // link time to kicks without its stalls passing their own limit, so
    // the kick time is compared with the lost time, not the reasons read.)
    if kick_floor.iter().all(|&k| k) {
        eprintln!(
            "{name}: INCONCLUSIVE — every unloaded run lost link time to tx kicks or to the \
             VM's host on this machine, so whether the guard flags an unloaded run as a rule \
             cannot be told:\n{}",
            seen.join("\n")
        );
        return;
    }
    panic!(
        "three unloaded runs in a row failed the guard:\n{}",
        seen.join("\n")
    );
}

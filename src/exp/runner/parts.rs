//! A fabric split over parts (`[fabric] parts`, [`crate::fabric::split`]),
//! run on this machine: one softswitch process per part, each running its
//! switches (`--switches`) and its hosts' ports, and the links between
//! parts as wires the runner makes once per run (`<prefix>-w<i>a` /
//! `-w<i>b`), each end named to its process by the link's egress port
//! there (`--link-ifaces`): a veth pair between two parts on one machine
//! ([`topo::add_wire`]), a VXLAN tunnel between two machines
//! ([`topo::add_tunnel_end`]; machines are network namespaces here, see
//! [`crate::exp::placement`]), whose parts' softswitch runs inside the
//! machine's namespace with its hosts' switch-side interfaces moved there.
//!
//! Every part is started and answers on its stats socket before any host
//! sends (a frame sent on a wire before the far end's socket is bound is
//! lost outside both processes). The parts' exit reports are merged into
//! one ([`merge_exits`], the combination's `switch.json`) with every port
//! of every part, every part's fidelity verdict and reasons, so the
//! combination's result, its per-hop numbers and its verdict read as for
//! one process; each part's own report is kept as `switch-<part>.json`.
//!
//! Clocks: each part's switch starts its emulated clock when it starts, a
//! few milliseconds apart. The runner's sampler reads every part at the
//! same instants and takes each part's offset from its first snapshot, so
//! the queue time series of all parts share one axis: emulated time since
//! the runner started sampling, just before the traffic.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::exp::placement::Placement;
use crate::fabric::split::{Part, WireEnd};
use crate::topo::{self, Topology};

/// One end of a wire: its interface and the namespace it is in (None:
/// the runner's).
struct End {
    ns: Option<String>,
    name: String,
}

/// The run's wires, removed when dropped: a veth pair between parts on one
/// machine (or both on this one), a VXLAN tunnel between two machines;
/// and the hosts' ports moved onto machines.
pub(super) struct Wires {
    ends: Vec<End>,
}

/// The VXLAN network identifier of wire `w` in a run with `prefix`: one of
/// its own per run (a hash of the prefix) and per wire, so that two runs
/// between the same machines do not share one.
fn vni(prefix: &str, w: usize) -> u32 {
    let h = prefix.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    ((h % 0xffff) << 8 | (w as u32 & 0xff)) + 1
}

impl Wires {
    /// Makes every wire of `p` (MTU `mtu`, the hosts' links'), after
    /// moving the hosts' ports of parts on machines there
    /// ([`Wires::move_host_ports`]).
    pub(super) fn up(prefix: &str, p: &Placement, mtu: u32, topo: &Topology) -> Result<Wires> {
        let mut w = Wires { ends: Vec::new() };
        w.move_host_ports(p, topo)?;
        for (i, wire) in p.split.wires.iter().enumerate() {
            let what = || format!("making the wire {} — {}", wire.a_port, wire.b_port);
            let (ma, mb) = (&p.machines[wire.parts.0], &p.machines[wire.parts.1]);
            let (a, b) = topo::wire_names(prefix, i);
            if !p.tunnels(i) {
                let ns = ma.as_ref().map(|m| m.netns.clone());
                topo::add_wire(prefix, i, mtu, ns.as_deref()).with_context(what)?;
                // The peer goes with it.
                w.ends.push(End { ns, name: a });
                continue;
            }
            let (Some(ma), Some(mb)) = (ma, mb) else {
                bail!("{}: a tunnel needs a machine at both ends", what());
            };
            for (m, other, name) in [(ma, mb, a), (mb, ma, b)] {
                topo::add_tunnel_end(
                    &m.netns,
                    &name,
                    vni(prefix, i),
                    m.address,
                    other.address,
                    mtu,
                )
                .with_context(what)?;
                w.ends.push(End {
                    ns: Some(m.netns.clone()),
                    name,
                });
            }
        }
        Ok(w)
    }
}

impl Drop for Wires {
    fn drop(&mut self) {
        for e in &self.ends {
            if let Err(err) = topo::del_link_in(e.ns.as_deref(), &e.name) {
                eprintln!("softswitch-exp: removing wire end {}: {err}", e.name);
            }
        }
    }
}

impl Wires {
    /// Moves the switch-side interface of every host of a part that runs
    /// on a machine into that machine's namespace (where its softswitch
    /// runs), and removes it from there when dropped: a host namespace's
    /// devices go only when the kernel frees it, which may be after the
    /// run has ended (its sockets hold it).
    pub(super) fn move_host_ports(&mut self, p: &Placement, topo: &Topology) -> Result<()> {
        for (part, m) in p.split.parts.iter().zip(&p.machines) {
            let Some(m) = m else { continue };
            for port in part_ports(part, topo) {
                topo::move_link(&port, &m.netns)
                    .with_context(|| format!("moving {port} into namespace {}", m.netns))?;
                self.ends.push(End {
                    ns: Some(m.netns.clone()),
                    name: port,
                });
            }
        }
        Ok(())
    }
}

/// `--ports` of part `p`'s process: its hosts' switch-side interfaces, in
/// the hosts' order.
pub(super) fn part_ports(p: &Part, topo: &Topology) -> Vec<String> {
    p.hosts
        .iter()
        .filter_map(|&h| topo.hosts.get(h.wrapping_sub(1)))
        .map(|h| h.switch_if.clone())
        .collect()
}

/// `--switches` and `--link-ifaces` of part `p`'s process in a run whose
/// prefix is `prefix`.
pub(super) fn part_args(p: &Part, prefix: &str) -> Vec<String> {
    let ifaces: Vec<String> = p
        .wire_ends
        .iter()
        .map(|(port, w, end)| {
            let (a, b) = topo::wire_names(prefix, *w);
            let iface = match end {
                WireEnd::A => a,
                WireEnd::B => b,
            };
            format!("{port}={iface}")
        })
        .collect();
    vec![
        "--switches".into(),
        p.switches.join(","),
        "--link-ifaces".into(),
        ifaces.join(","),
    ]
}

/// One exit report from the parts' (name, exit JSON), in the parts' order:
/// every part's ports, its switches' routes, a fidelity verdict that holds
/// only when every part's does (each reason names its part), the data
/// paths' stalls summed and the longest of them; everything else as the
/// first part reports it. `parts` lists each part with its own verdict.
pub(super) fn merge_exits(parts: &[(String, Value)]) -> Value {
    let Some((_, first)) = parts.first() else {
        return Value::Null;
    };
    let mut out = first.clone();
    let mut ports = Vec::new();
    let mut switches = Vec::new();
    let mut reasons = Vec::new();
    let mut faithful = true;
    let (mut stalls, mut max_stall_us) = (0u64, 0f64);
    let mut listed = Vec::new();
    for (name, v) in parts {
        ports.extend(v["ports"].as_array().cloned().unwrap_or_default());
        switches.extend(
            v["fabric"]["switches"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        let f = &v["fidelity"];
        match f["faithful"].as_bool() {
            Some(ok) => faithful &= ok,
            None => {
                faithful = false;
                reasons.push(json!(format!("part {name}: no fidelity verdict")));
            }
        }
        for r in f["reasons"].as_array().into_iter().flatten() {
            reasons.push(json!(format!("part {name}: {}", r.as_str().unwrap_or(""))));
        }
        stalls += v["loop"]["stalls"].as_u64().unwrap_or(0);
        max_stall_us = max_stall_us.max(v["loop"]["max_stall_us"].as_f64().unwrap_or(0.0));
        listed.push(json!({"name": name, "faithful": f["faithful"]}));
    }
    out["ports"] = json!(ports);
    if out["fabric"].is_object() {
        out["fabric"]["switches"] = json!(switches);
    }
    if !out["fidelity"].is_object() {
        out["fidelity"] = json!({});
    }
    out["fidelity"]["faithful"] = json!(faithful);
    out["fidelity"]["reasons"] = json!(reasons);
    if out["loop"].is_object() {
        out["loop"]["stalls"] = json!(stalls);
        out["loop"]["max_stall_us"] = json!(max_stall_us);
    }
    out["parts"] = json!(listed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::results::{Fidelity, HopResult, SwitchTotals};
    use crate::fabric::split::split;
    use crate::fabric::FabricDesc;

    fn exit(port: &str, faithful: bool, reasons: &[&str], stalls: u64, max_us: f64) -> Value {
        json!({
            "elapsed_s": 1.0,
            "ports": [{"name": port, "io": {"tx_packets": 10},
                       "egress": {"port": {"dropped": {"buffer": {"pkts": 2, "bytes": 3000}},
                                           "marked": {"ce": {"pkts": 5, "bytes": 7500}},
                                           "dequeued": {"bytes": 15000},
                                           "max_backlog_bytes": 4500,
                                           "sojourn": {"count": 10, "p50_us": 5.0, "p99_us": 9.0}}},
                       "link": {"lost_ns": 0, "lost_fraction": 0.0}}],
            "fabric": {"switches": [{"name": port.split(':').next().unwrap()}]},
            "fidelity": {"faithful": faithful, "reasons": reasons,
                         "thresholds": {"max_stall_ns": 1_000_000}},
            "loop": {"stalls": stalls, "max_stall_us": max_us},
        })
    }

    #[test]
    fn the_merged_report_has_every_part_and_holds_only_when_each_does() {
        let m = merge_exits(&[
            ("a".into(), exit("leaf1:spine2", true, &[], 3, 20.0)),
            (
                "b".into(),
                exit("spine2:leaf1", false, &["port x lost 2 %"], 4, 50.0),
            ),
        ]);
        let names: Vec<&str> = m["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["leaf1:spine2", "spine2:leaf1"]);
        assert_eq!(m["fabric"]["switches"].as_array().unwrap().len(), 2);
        let f = Fidelity::from_snapshot(&m);
        assert!(!f.faithful);
        assert_eq!(f.reasons, ["part b: port x lost 2 %"]);
        assert_eq!(f.stalls, 7);
        assert_eq!(f.max_stall_us, 50.0);
        // Counters add over the parts; each hop is there once.
        let t = SwitchTotals::from_snapshot(&m);
        assert_eq!((t.dropped_pkts, t.marked_pkts), (4, 10));
        assert_eq!(HopResult::from_snapshot(&m).len(), 2);
        assert_eq!(m["parts"][1]["name"], "b");
        // Both faithful: the merge is.
        let ok = merge_exits(&[
            ("a".into(), exit("p", true, &[], 0, 0.0)),
            ("b".into(), exit("q", true, &[], 0, 0.0)),
        ]);
        assert!(Fidelity::from_snapshot(&ok).faithful);
        // A part without a verdict is not faithful, and says which.
        let mut none = exit("q", true, &[], 0, 0.0);
        none["fidelity"] = json!({});
        let m = merge_exits(&[
            ("a".into(), exit("p", true, &[], 0, 0.0)),
            ("b".into(), none),
        ]);
        assert!(!Fidelity::from_snapshot(&m).faithful);
        assert_eq!(m["fidelity"]["reasons"][0], "part b: no fidelity verdict");
    }

    #[test]
    fn each_part_names_its_hosts_switches_and_wire_ends() {
        let d = FabricDesc::parse("[leaf_spine]\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n")
            .unwrap();
        let parts = [
            (
                "a".to_string(),
                vec!["leaf1".to_string(), "spine1".to_string()],
            ),
            (
                "b".to_string(),
                vec!["leaf2".to_string(), "spine2".to_string()],
            ),
        ]
        .into_iter()
        .collect();
        let s = split(&d, &parts).unwrap();
        let a = part_args(&s.parts[0], "xab12");
        assert_eq!(a[0..2], ["--switches", "leaf1,spine1"]);
        assert_eq!(a[2], "--link-ifaces");
        // Each wire's ends: A at the link's first switch, B at the other.
        let (wa, wb) = (a[3].clone(), part_args(&s.parts[1], "xab12")[3].clone());
        for (i, w) in s.wires.iter().enumerate() {
            let (ea, eb) = topo::wire_names("xab12", i);
            let (here, there) = if w.parts.0 == 0 {
                (&wa, &wb)
            } else {
                (&wb, &wa)
            };
            assert!(here.contains(&format!("{}={ea}", w.a_port)), "{here}");
            assert!(there.contains(&format!("{}={eb}", w.b_port)), "{there}");
        }
    }
}

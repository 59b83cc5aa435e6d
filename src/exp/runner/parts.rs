//! A fabric split over parts (`[fabric] parts`, [`crate::fabric::split`]),
//! run on this machine: one softswitch process per part, each running its
//! switches (`--switches`) and its hosts' ports, and the links between
//! parts as wires the runner makes once per run (`<prefix>-w<i>a` /
//! `-w<i>b`), each end named to its process by the link's egress port
//! there (`--link-ifaces`): a veth pair between two parts on one machine
//! ([`topo::add_wire`]), a VXLAN tunnel between two machines
//! ([`topo::add_tunnel_end`]; a machine is a network namespace standing in
//! for one, or another machine over SSH, see [`crate::exp::placement`]).
//! A part in a namespace runs its softswitch there with its hosts'
//! switch-side interfaces moved in; a part over SSH runs it there
//! ([`RemoteSwitch`]) with its hosts' links carried by tunnels from here,
//! where the hosts stay.
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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::exp::placement::{Machine, Placement};
use crate::fabric::split::{Part, WireEnd};
use crate::topo::site::{shell_line, shell_quote};
use crate::topo::{self, Site, Topology};

/// One end of a wire (or of a host's tunnel): its interface and where it
/// is.
struct End {
    site: Site,
    name: String,
}

/// The run's wires, removed when dropped: a veth pair between parts on one
/// machine (or both on this one), a VXLAN tunnel between two machines;
/// the hosts' ports moved onto machines that are namespaces here, and
/// carried by tunnels to machines reached over SSH; and the run's files
/// on those machines.
pub(super) struct Wires {
    ends: Vec<End>,
    /// Machines over SSH and the run's directory there.
    remote_dirs: Vec<(Site, String)>,
}

/// The VXLAN network identifier of tunnel `index` in a run with `prefix`:
/// one of its own per run (a hash of the prefix) and per tunnel (a wire's
/// index, or [`HOST_VNI`] + a host's), so that two runs between the same
/// machines, or two tunnels ending on one machine, do not share one.
fn vni(prefix: &str, index: usize) -> u32 {
    let h = prefix.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    ((h % 0xfff) << 12 | (index as u32 & 0xfff)) + 1
}

/// Where host tunnels' indices start in [`vni`] (wires count from 0).
const HOST_VNI: usize = 2048;

/// The directory a run with `prefix` keeps its files in on a machine
/// reached over SSH (the switch's config, fabric, stats socket and time
/// series; removed at the end).
pub(super) fn remote_dir(prefix: &str) -> String {
    format!("/tmp/softswitch-exp-{prefix}")
}

impl Wires {
    /// Makes every wire of `p` (MTU `mtu`, the hosts' links'), after
    /// carrying the hosts' ports of parts on machines there
    /// ([`Wires::carry_host_ports`]).
    pub(super) fn up(prefix: &str, p: &Placement, mtu: u32, topo: &Topology) -> Result<Wires> {
        let mut w = Wires {
            ends: Vec::new(),
            remote_dirs: Vec::new(),
        };
        for m in p.machines.iter().flatten() {
            if m.site.is_remote() && !w.remote_dirs.iter().any(|(s, _)| *s == m.site) {
                let dir = remote_dir(prefix);
                topo::cmd_run(
                    &mut m.site.command(&["mkdir", "-p", &dir]),
                    "the machine must accept the SSH login",
                )
                .with_context(|| format!("making {dir} on {}", m.site))?;
                w.remote_dirs.push((m.site.clone(), dir));
            }
        }
        w.carry_host_ports(prefix, p, mtu, topo)?;
        for (i, wire) in p.split.wires.iter().enumerate() {
            let what = || format!("making the wire {} — {}", wire.a_port, wire.b_port);
            let (ma, mb) = (&p.machines[wire.parts.0], &p.machines[wire.parts.1]);
            let (a, b) = topo::wire_names(prefix, i);
            if !p.tunnels(i) {
                let site = ma.as_ref().map_or(Site::Here, |m| m.site.clone());
                topo::add_wire(prefix, i, mtu, &site).with_context(what)?;
                // The peer goes with it.
                w.ends.push(End { site, name: a });
                continue;
            }
            let (Some(ma), Some(mb)) = (ma, mb) else {
                bail!("{}: a tunnel needs a machine at both ends", what());
            };
            for (m, other, name) in [(ma, mb, a), (mb, ma, b)] {
                topo::add_tunnel_end(
                    &m.site,
                    &name,
                    vni(prefix, i),
                    m.address,
                    other.address,
                    mtu,
                )
                .with_context(what)?;
                w.ends.push(End {
                    site: m.site.clone(),
                    name,
                });
            }
        }
        Ok(w)
    }

    /// The switch-side interface of every host of a part that runs on a
    /// machine, made that machine's: on a namespace standing in for one,
    /// moved into it; on a machine over SSH, carried there by a VXLAN
    /// tunnel from this machine (bridged here to the interface, named as
    /// the interface there, so the part's `--ports` are the same either
    /// way). Removed when dropped: a host namespace's devices go only
    /// when the kernel frees it, which may be after the run has ended (its
    /// sockets hold it).
    fn carry_host_ports(
        &mut self,
        prefix: &str,
        p: &Placement,
        mtu: u32,
        topo: &Topology,
    ) -> Result<()> {
        for (part, m) in p.split.parts.iter().zip(&p.machines) {
            let Some(m) = m else { continue };
            let local = match &m.site {
                Site::Ssh { .. } => Some(topo::source_address(m.address).with_context(|| {
                    format!(
                        "finding this machine's address towards {} ({})",
                        m.site, m.address
                    )
                })?),
                _ => None,
            };
            for (&h, port) in part.hosts.iter().zip(part_ports(part, topo)) {
                match (&m.site, local) {
                    (Site::Netns(ns), _) => {
                        topo::move_link(&port, ns)
                            .with_context(|| format!("moving {port} into namespace {ns}"))?;
                        self.ends.push(End {
                            site: m.site.clone(),
                            name: port,
                        });
                    }
                    (_, Some(local)) => self.carry_over_ssh(prefix, m, h, port, local, mtu)?,
                    _ => bail!("part {}: a machine is a namespace or SSH", part.name),
                }
            }
        }
        Ok(())
    }

    /// Host `h`'s switch-side interface `port` carried to machine `m` over
    /// SSH: a tunnel from `local` here, bridged to `port`, to an end named
    /// `port` there.
    fn carry_over_ssh(
        &mut self,
        prefix: &str,
        m: &Machine,
        h: usize,
        port: String,
        local: std::net::Ipv4Addr,
        mtu: u32,
    ) -> Result<()> {
        let (tunnel, bridge) = topo::host_tunnel_names(prefix, h);
        let id = vni(prefix, HOST_VNI + h);
        let what = || format!("carrying {port} to {} ({})", m.site, m.address);
        // Listed before it is made: a half-made one is removed too.
        self.ends.push(End {
            site: Site::Here,
            name: bridge.clone(),
        });
        self.ends.push(End {
            site: Site::Here,
            name: tunnel.clone(),
        });
        topo::add_host_tunnel(&port, &tunnel, &bridge, id, local, m.address, mtu)
            .with_context(what)?;
        self.ends.push(End {
            site: m.site.clone(),
            name: port.clone(),
        });
        topo::add_tunnel_end(&m.site, &port, id, m.address, local, mtu).with_context(what)?;
        Ok(())
    }
}

impl Drop for Wires {
    fn drop(&mut self) {
        for e in &self.ends {
            if let Err(err) = topo::del_link_at(&e.site, &e.name) {
                eprintln!("softswitch-exp: removing {} on {}: {err}", e.name, e.site);
            }
        }
        for (site, dir) in &self.remote_dirs {
            let mut c = site.command(&["rm", "-rf", dir]);
            if let Err(err) = topo::cmd_run(&mut c, "") {
                eprintln!("softswitch-exp: removing {dir} on {site}: {err}");
            }
            site.close_shared();
        }
    }
}

/// A part's softswitch on a machine reached over SSH: `ssh` runs it
/// there until this side closes its stdin (then SIGINT, so that it writes
/// its exit report, which comes back on ssh's stdout), with its stats
/// socket forwarded to `socket` here. The switch's input files (config,
/// fabric) are copied into the run's directory there first; its time
/// series is written there and fetched by [`RemoteSwitch::fetch`].
pub(super) struct RemoteSwitch {
    site: Site,
    /// (there, here) of each file the switch writes.
    outputs: Vec<(String, PathBuf)>,
}

/// Flags whose value is a file the switch reads.
const SWITCH_INPUTS: [&str; 2] = ["--config", "--topology"];
/// Flags whose value is a file the switch writes.
const SWITCH_OUTPUTS: [&str; 1] = ["--timeseries"];

impl RemoteSwitch {
    /// `args` (as for a switch here, with local paths) for a switch on `m`
    /// in a run with `prefix`, its files there named after `tag` (one per
    /// combination and part); the stats socket `socket` here is forwarded
    /// to one there. The command that runs it, and what to fetch after.
    pub(super) fn new(
        m: &Machine,
        prefix: &str,
        tag: &str,
        args: &[String],
        socket: &Path,
    ) -> Result<(Command, Self)> {
        let site = m.site.clone();
        let dir = remote_dir(prefix);
        let there_socket = format!("{dir}/{tag}.sock");
        let mut remote_args = Vec::with_capacity(args.len());
        let mut outputs = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            remote_args.push(a.clone());
            let flag = a.as_str();
            if !(SWITCH_INPUTS.contains(&flag)
                || SWITCH_OUTPUTS.contains(&flag)
                || flag == "--stats-socket")
            {
                continue;
            }
            let Some(value) = it.next() else { break };
            let here = PathBuf::from(value);
            let name = here
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let there = format!("{dir}/{tag}-{name}");
            if SWITCH_INPUTS.contains(&flag) {
                upload(&site, &here, &there)?;
                remote_args.push(there);
            } else if flag == "--stats-socket" {
                remote_args.push(there_socket.clone());
            } else {
                outputs.push((there.clone(), here));
                remote_args.push(there);
            }
        }
        let bin = m.softswitch.clone().unwrap_or_else(|| "softswitch".into());
        // The switch runs until ssh's stdin (fd 3 here) closes — the
        // runner stops it so, or its end of the connection went — then
        // gets SIGINT and writes its report; ssh ends with its status.
        let script = "exec 3<&0; \"$0\" \"$@\" </dev/null & p=$!; \
                      { read -r _ <&3; kill -INT $p; } >/dev/null 2>&1 & r=$!; \
                      wait $p; s=$?; kill $r 2>/dev/null; exit $s";
        let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned(), bin];
        argv.extend(remote_args);
        let forward = format!("{}:{there_socket}", socket.display());
        let extra: Vec<String> = [
            "-o",
            "ControlMaster=no",
            "-o",
            "ControlPath=none",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "StreamLocalBindUnlink=yes",
            "-L",
            &forward,
        ]
        .map(String::from)
        .to_vec();
        let command = site.shell(&extra, &shell_line(&argv));
        Ok((command, RemoteSwitch { site, outputs }))
    }

    /// Copies what the switch wrote there to where it would have written
    /// it here.
    pub(super) fn fetch(&self) -> Result<()> {
        for (there, here) in &self.outputs {
            let out = File::create(here).with_context(|| format!("creating {}", here.display()))?;
            let st = self
                .site
                .command(&["cat", there])
                .stdin(Stdio::null())
                .stdout(out)
                .status()
                .with_context(|| format!("fetching {there} from {}", self.site))?;
            if !st.success() {
                bail!("fetching {there} from {}: {st}", self.site);
            }
        }
        Ok(())
    }
}

/// Copies file `here` to `there` on `site`.
fn upload(site: &Site, here: &Path, there: &str) -> Result<()> {
    let file = File::open(here).with_context(|| format!("reading {}", here.display()))?;
    let out = site
        .shell(&[], &format!("cat > {}", shell_quote(there)))
        .stdin(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("copying {} to {site}", here.display()))?;
    if !out.status.success() {
        bail!(
            "copying {} to {there} on {site}: {}",
            here.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
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

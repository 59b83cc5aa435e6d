//! Root integration tests of a fabric in the data path: `softswitch
//! --topology` running a 2 × 2 leaf-spine (leaf1: h1, h2; leaf2: h3, h4;
//! every leaf linked to both spines) over four host namespaces, real
//! DCTCP hosts, one process, one UMEM; the links between switches are in
//! memory. Skipped unless root.
//!
//! * every host pair pings (proxy ARP at the edge, routes across spines);
//! * 16 TCP connections from leaf1 to leaf2 are spread over both spines
//!   by ECMP (the per-next-hop flow counts of leaf1's route to leaf2);
//! * with 100 Mbit/s spine links under 1 Gbit/s host links, leaf1's
//!   uplinks queue, DCTCP marks there (CE reaches the senders), the host
//!   ports do not mark, and the report names the marking link;
//! * capture (`--pcap`) writes every hop's rx and tx files under the
//!   port's fabric name, each holding what that port's counters say it
//!   received and sent, and a link's two ends agree.
//!
//! Every test holds [`common::switch_serial`]; hosts, the switch and the
//! topology file are removed when the test ends, also on failure.

mod common;

use std::time::Duration;

use common::{
    iperf_receiver_bps, measure, ping, skip_unless_root, skip_unless_tools, stats_socket,
    switch_serial, tcp_ext_counter, CpuUse, CpuWatch, SwitchProc, TestTopo,
};

/// A topology file in the temporary directory, removed when dropped.
struct TopoFile(tempfile::NamedTempFile);

impl TopoFile {
    fn new(prefix: &str, text: &str) -> Self {
        let mut f = tempfile::Builder::new()
            .prefix(&format!("softswitch-{prefix}-fabric-"))
            .suffix(".toml")
            .tempfile()
            .unwrap_or_else(|e| panic!("a temporary topology file: {e}"));
        std::io::Write::write_all(&mut f, text.as_bytes())
            .unwrap_or_else(|e| panic!("writing {}: {e}", f.path().display()));
        TopoFile(f)
    }
    fn arg(&self) -> String {
        self.0.path().display().to_string()
    }
}

/// 2 leaves × 2 spines, 2 hosts per leaf, host links at `host`, spine
/// links at `fabric`.
fn leaf_spine(host: &str, fabric: &str) -> String {
    format!(
        "seed = 1\n[leaf_spine]\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n\
         host_rate = \"{host}\"\nfabric_rate = \"{fabric}\"\ndelay = \"5us\"\n"
    )
}

/// The fabric running over the four hosts of `t`.
fn start(t: &TestTopo, topo: &TopoFile, args: &[&str], bound: Duration) -> SwitchProc {
    let path = topo.arg();
    let mut all = vec!["--topology", path.as_str()];
    all.extend_from_slice(args);
    SwitchProc::start(&t.switch_ifs(), &all, &stats_socket(&t.prefix, ""), bound)
}

/// The exit counters' report of switch `name`.
fn switch<'j>(j: &'j serde_json::Value, name: &str) -> &'j serde_json::Value {
    j["fabric"]["switches"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no switch {name} in {}", j["fabric"]))
}

/// Leaf1's next hops towards leaf2: (port names, TCP connections, packets).
fn leaf1_to_leaf2(j: &serde_json::Value) -> (Vec<String>, Vec<u64>, Vec<u64>) {
    let g = switch(j, "leaf1")["next_hops"]
        .as_array()
        .and_then(|a| a.iter().find(|g| g["to"] == "leaf2"))
        .unwrap_or_else(|| panic!("leaf1 has no route to leaf2: {}", j["fabric"]));
    let nums = |k: &str| -> Vec<u64> {
        g[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let names = g["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    (names, nums("flows"), nums("packets"))
}

/// Exit counters that must hold after any fabric run: a clean exit, the
/// identities of every switch and link, a port per switch port.
fn assert_sound(exit: &common::SwitchExit) -> serde_json::Value {
    let j = exit.assert_clean();
    assert_eq!(
        j["conservation"]["holds"], true,
        "counters do not add up: {}",
        j["conservation"]
    );
    // 4 host ports + 8 link directions, the hosts' first, with their interface.
    let ports = j["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 12, "{}", j["ports"]);
    assert_eq!(ports[0]["name"], "leaf1:h1");
    assert!(ports[0]["interface"]
        .as_str()
        .is_some_and(|i| i.ends_with("-h1-sw")));
    assert_eq!(ports[4]["name"], "leaf1:spine1");
    j
}

#[test]
fn every_host_pair_pings_and_flows_spread_over_both_spines() {
    let name = "every_host_pair_pings_and_flows_spread_over_both_spines";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(4);
    let topo = TopoFile::new(&t.prefix, &leaf_spine("500mbit", "500mbit"));
    let sw = start(&t, &topo, &["--aqm", "dctcp"], Duration::from_secs(90));
    for a in 0..4 {
        for b in 0..4 {
            if a != b {
                ping(&t.hosts[a], t.hosts[b].ip);
            }
        }
    }
    // 16 connections h1 → h3 (plus iperf3's control connection): each
    // hashed onto one spine by its 5-tuple; all on one spine by chance has
    // probability 2^-16.
    let c = t.iperf_start(0, 2, 5201, 3, &["-P", "16"]);
    t.wait(c, Duration::from_secs(30));
    let j = assert_sound(&sw.stop());
    let (names, flows, packets) = leaf1_to_leaf2(&j);
    eprintln!("leaf1 → leaf2 next hops {names:?}: flows {flows:?}, packets {packets:?}");
    assert_eq!(names, ["leaf1:spine1", "leaf1:spine2"]);
    assert!(
        flows.iter().sum::<u64>() >= 17,
        "fewer connections counted than opened: {flows:?}"
    );
    assert!(
        flows.iter().all(|&f| f > 0) && packets.iter().all(|&p| p > 0),
        "ECMP used one spine only: flows {flows:?}, packets {packets:?}"
    );
    // Both spines carried leaf1's traffic to leaf2 (and what came back).
    for s in ["spine1", "spine2"] {
        let r = &switch(&j, s)["routes"];
        assert!(r["routed"].as_u64().unwrap() > 0, "{s} routed nothing: {r}");
    }
    // Every ping's ARP was answered at the edge: no ARP crossed a spine.
    for l in ["leaf1", "leaf2"] {
        let r = &switch(&j, l)["routes"];
        assert!(r["arp_answered"].as_u64().unwrap() >= 2, "{l}: {r}");
    }
}

#[derive(Debug)]
struct Congested {
    /// Goodput of h1 → h3 and h2 → h4, bit/s.
    bps: [f64; 2],
    /// CE marks h1 and h2 saw echoed.
    ce: [u64; 2],
    j: serde_json::Value,
}

/// h1 → h3 and h2 → h4, 4 connections each, for 4 s through 100 Mbit/s
/// spine links.
fn congested_run() -> (Congested, CpuUse) {
    let mut t = TestTopo::new(4);
    let topo = TopoFile::new(&t.prefix, &leaf_spine("1gbit", "100mbit"));
    let sw = start(&t, &topo, &["--aqm", "dctcp"], Duration::from_secs(90));
    ping(&t.hosts[0], t.hosts[2].ip);
    ping(&t.hosts[1], t.hosts[3].ip);
    let ce0 = [0, 1].map(|h| tcp_ext_counter(&t.hosts[h], "TCPDeliveredCE"));
    let watch = CpuWatch::start(sw.pid());
    let c1 = t.iperf_start(0, 2, 5201, 4, &["-P", "4", "-J"]);
    let c2 = t.iperf_start(1, 3, 5202, 4, &["-P", "4", "-J"]);
    let out1 = t.wait(c1, Duration::from_secs(30));
    let out2 = t.wait(c2, Duration::from_secs(30));
    let cpu = watch.read();
    let ce = [0, 1].map(|h| tcp_ext_counter(&t.hosts[h], "TCPDeliveredCE") - ce0[h]);
    let j = assert_sound(&sw.stop());
    let r = Congested {
        bps: [iperf_receiver_bps(&out1), iperf_receiver_bps(&out2)],
        ce,
        j,
    };
    eprintln!(
        "congested fabric: goodput {:.0} + {:.0} Mbit/s, CE at senders {:?}, links {}; {cpu}",
        r.bps[0] / 1e6,
        r.bps[1] / 1e6,
        r.ce,
        r.j["fabric"]["links"]
    );
    (r, cpu)
}

#[test]
fn a_slow_spine_link_marks_and_the_report_names_it() {
    let name = "a_slow_spine_link_marks_and_the_report_names_it";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    // leaf1 sends over two 100 Mbit/s uplinks: at most 200 Mbit/s together.
    let uplinks_bps = 200e6;
    let ok = |r: &Congested| r.bps.iter().sum::<f64>() > 0.4 * uplinks_bps;
    let (r, cpu) = measure(name, 3, congested_run, ok);
    let links = r.j["fabric"]["links"].as_array().expect("links");
    let marked = |n: &str| {
        links
            .iter()
            .find(|l| l["name"] == n)
            .and_then(|l| l["marked_packets"].as_u64())
            .unwrap_or_else(|| panic!("no link {n}: {links:?}"))
    };
    let uplink_marks = marked("leaf1:spine1") + marked("leaf1:spine2");
    assert!(uplink_marks > 0, "leaf1's uplinks did not mark: {links:?}");
    // Nothing queues on the way back (ACKs) or at the 1 Gbit/s host ports.
    for n in ["leaf2:spine1", "leaf2:spine2"] {
        assert_eq!(marked(n), 0, "{n} marked: {links:?}");
    }
    for (i, p) in r.j["ports"].as_array().unwrap()[..4].iter().enumerate() {
        let m = &p["egress"]["port"]["marked"];
        let total: u64 = m
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, v)| v["pkts"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(total, 0, "host port {i} ({}) marked: {m}", p["name"]);
    }
    // The senders saw the marks: DCTCP reacted to the fabric's congestion.
    assert!(
        r.ce[0] > 0 && r.ce[1] > 0,
        "CE did not reach both senders: {:?}",
        r.ce
    );
    // The human report names the marking link.
    let text = softswitch::report::render(&r.j);
    let line = text
        .lines()
        .find(|l| l.starts_with("fabric links that marked or dropped:"))
        .unwrap_or_else(|| panic!("no fabric line in the report:\n{text}"));
    assert!(line.contains("leaf1:spine"), "{line}");
    // Shaped: leaf1's two uplinks carry at most 200 Mbit/s, and were used.
    let total: f64 = r.bps.iter().sum();
    assert!(
        total < 1.02 * uplinks_bps,
        "{:?} Mbit/s",
        r.bps.map(|b| b / 1e6)
    );
    assert!(
        ok(&r),
        "goodput too low: {:?} Mbit/s; {cpu}",
        r.bps.map(|b| b / 1e6)
    );
}

#[test]
fn capture_writes_every_hop_and_a_links_ends_agree() {
    let name = "capture_writes_every_hop_and_a_links_ends_agree";
    if skip_unless_root(name) {
        return;
    }
    let _serial = switch_serial();
    let t = TestTopo::new(4);
    let topo = TopoFile::new(&t.prefix, &leaf_spine("500mbit", "500mbit"));
    let dir = tempfile::Builder::new()
        .prefix(&format!("softswitch-{}-cap-", t.prefix))
        .tempdir()
        .unwrap_or_else(|e| panic!("a temporary capture directory: {e}"));
    let dir_s = dir.path().display().to_string();
    let sw = start(
        &t,
        &topo,
        &["--aqm", "dctcp", "--pcap", &dir_s, "--pcap-snaplen", "64"],
        Duration::from_secs(60),
    );
    for a in 0..4 {
        for b in 0..4 {
            if a != b {
                ping(&t.hosts[a], t.hosts[b].ip);
            }
        }
    }
    let exit = sw.stop();
    let j = assert_sound(&exit);
    let files = j["capture"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no capture summary in the counters: {j}"))
        .clone();
    assert_eq!(files.len(), 24, "rx and tx for 12 fabric ports: {files:?}");
    let file = |port: &str, d: &str| -> u64 {
        let f = files
            .iter()
            .find(|f| f["port"] == port && f["dir"] == d)
            .unwrap_or_else(|| panic!("no {port} {d} file: {files:?}"));
        assert_eq!(f["lost"], 0, "{f}");
        assert_eq!(f["truncated"], 0, "{f}");
        assert_eq!(f["written"], f["seen"], "{f}");
        let path = f["path"].as_str().unwrap();
        let name = format!("{port}-{d}.pcapng");
        assert!(path.ends_with(&name), "{path}");
        let len = std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .len();
        assert_eq!(len, f["bytes"].as_u64().unwrap(), "{path}");
        f["written"].as_u64().unwrap()
    };
    let mut on_links = 0;
    for p in j["ports"].as_array().unwrap() {
        let n = p["name"].as_str().unwrap();
        assert_eq!(
            file(n, "rx"),
            p["io"]["rx_packets"].as_u64().unwrap(),
            "{n} rx"
        );
        assert_eq!(
            file(n, "tx"),
            p["io"]["tx_packets"].as_u64().unwrap(),
            "{n} tx"
        );
        // A link direction a:b sends what b:a receives.
        if let Some((a, b)) = n.split_once(':') {
            if !b.starts_with('h') {
                let back = format!("{b}:{a}");
                assert_eq!(file(n, "tx"), file(&back, "rx"), "{n} tx vs {back} rx");
                on_links += file(n, "tx");
            }
        }
    }
    // h1 and h2 reach h3 and h4 only over a spine: the links carried pings.
    assert!(on_links >= 8 * 2, "{on_links} frames on links");
}

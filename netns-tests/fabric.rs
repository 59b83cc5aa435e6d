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
//! * two leaves joined to one spine by two parallel links each carry 16
//!   connections over both links, more than one link could;
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

#[test]
fn parallel_links_share_the_flows_and_carry_more_than_one_link() {
    let name = "parallel_links_share_the_flows_and_carry_more_than_one_link";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(4);
    // Two leaves, one spine, two 100 Mbit/s links between each leaf and
    // the spine, 500 Mbit/s host links: one link holds 94 Mbit/s of TCP
    // payload, both 188.
    let topo = TopoFile::new(
        &t.prefix,
        "seed = 1\n[leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 2\n\
         links_per_pair = 2\nhost_rate = \"500mbit\"\nfabric_rate = \"100mbit\"\n\
         delay = \"5us\"\n",
    );
    let sw = start(&t, &topo, &["--aqm", "dctcp"], Duration::from_secs(90));
    ping(&t.hosts[0], t.hosts[2].ip);
    let c = t.iperf_start(0, 2, 5201, 4, &["-P", "16", "-J"]);
    let out = t.wait(c, Duration::from_secs(30));
    let bps = iperf_receiver_bps(&out);
    let j = assert_sound(&sw.stop());
    let (names, flows, packets) = leaf1_to_leaf2(&j);
    eprintln!(
        "leaf1 → leaf2 next hops {names:?}: flows {flows:?}, packets {packets:?}; \
         h1 → h3 {:.0} Mbit/s",
        bps / 1e6
    );
    assert_eq!(names, ["leaf1:spine1", "leaf1:spine1#2"]);
    let ports: Vec<&str> = j["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap_or(""))
        .collect();
    for n in ["spine1:leaf2", "spine1:leaf2#2", "leaf2:spine1#2"] {
        assert!(ports.contains(&n), "no port {n} in {ports:?}");
    }
    assert!(
        flows.iter().all(|&f| f > 0) && packets.iter().all(|&p| p > 0),
        "ECMP used one of the parallel links only: flows {flows:?}, packets {packets:?}"
    );
    assert!(
        bps > 110e6,
        "{:.0} Mbit/s: no more than one 100 Mbit/s link carries",
        bps / 1e6
    );
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

/// Veth pairs in the root namespace joining two softswitch processes (L2
/// only: no IPv6, so the kernel sends nothing on them); removed on drop.
struct Wires(Vec<(String, String)>);

impl Wires {
    fn new(prefix: &str, n: usize) -> Self {
        let mut w = Wires(Vec::new());
        for i in 0..n {
            let (a, b) = (format!("{prefix}-w{i}a"), format!("{prefix}-w{i}b"));
            common::run_ok(
                std::process::Command::new("ip")
                    .args(["link", "add", &a, "type", "veth", "peer", "name", &b]),
            );
            w.0.push((a.clone(), b.clone()));
            for x in [&a, &b] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{x}/disable_ipv6"), "1");
                common::run_ok(std::process::Command::new("ip").args(["link", "set", x, "up"]));
            }
        }
        w
    }
}

impl Drop for Wires {
    fn drop(&mut self) {
        for (a, _) in &self.0 {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", a])
                .status();
        }
    }
}

/// One port's counter by name in a process's exit counters.
fn port<'j>(j: &'j serde_json::Value, name: &str) -> &'j serde_json::Value {
    j["ports"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no port {name}: {}", j["ports"]))
}

#[test]
fn a_fabric_runs_across_two_processes_joined_by_veth_wires() {
    let name = "a_fabric_runs_across_two_processes_joined_by_veth_wires";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(4);
    let topo = TopoFile::new(&t.prefix, &leaf_spine("500mbit", "500mbit"));
    // Process A runs leaf1 and spine1, process B leaf2 and spine2: each
    // leaf reaches the other over one in-process link and one wire.
    let w = Wires::new(&t.prefix, 2);
    let path = topo.arg();
    let ifs = t.switch_ifs();
    let a_links = format!("leaf1:spine2={},spine1:leaf2={}", w.0[0].0, w.0[1].0);
    let b_links = format!("spine2:leaf1={},leaf2:spine1={}", w.0[0].1, w.0[1].1);
    let bound = Duration::from_secs(90);
    let a = SwitchProc::start(
        &ifs[..2],
        &[
            "--topology",
            &path,
            "--switches",
            "leaf1,spine1",
            "--link-ifaces",
            &a_links,
            "--aqm",
            "dctcp",
        ],
        &stats_socket(&t.prefix, "a"),
        bound,
    );
    let b = SwitchProc::start(
        &ifs[2..],
        &[
            "--topology",
            &path,
            "--switches",
            "leaf2,spine2",
            "--link-ifaces",
            &b_links,
            "--aqm",
            "dctcp",
        ],
        &stats_socket(&t.prefix, "b"),
        bound,
    );
    // The wires' counters once both ends are up and the hosts' start-up
    // chatter (MLD reports, flooded) is over: what A sent on a wire before
    // B's socket was bound never reached B.
    std::thread::sleep(Duration::from_millis(1500));
    let snap = |p: &SwitchProc| -> serde_json::Value {
        let text = softswitch::stats::fetch(std::path::Path::new(&p.socket))
            .unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let (base_a, base_b) = (snap(&a), snap(&b));
    for x in 0..4 {
        for y in 0..4 {
            if x != y {
                ping(&t.hosts[x], t.hosts[y].ip);
            }
        }
    }
    // 16 connections h1 → h3 hashed over both spines: one path stays in
    // process A up to the wire spine1 → leaf2, the other crosses the wire
    // leaf1 → spine2 first.
    let c = t.iperf_start(0, 2, 5201, 3, &["-P", "16", "-J"]);
    let out = t.wait(c, Duration::from_secs(30));
    let bps = iperf_receiver_bps(&out);
    let ja = a.stop().assert_clean();
    let jb = b.stop().assert_clean();
    eprintln!("two processes: h1 → h3 {:.0} Mbit/s", bps / 1e6);
    for (j, who) in [(&ja, "A"), (&jb, "B")] {
        assert_eq!(
            j["conservation"]["holds"], true,
            "{who}: {}",
            j["conservation"]
        );
    }
    // Each process reports its own ports: its hosts, its wires (with their
    // interfaces), then its in-process links.
    let names = |j: &serde_json::Value| -> Vec<String> {
        j["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&ja),
        [
            "leaf1:h1",
            "leaf1:h2",
            "leaf1:spine2",
            "spine1:leaf2",
            "leaf1:spine1",
            "spine1:leaf1"
        ]
    );
    assert_eq!(
        names(&jb),
        [
            "leaf2:h3",
            "leaf2:h4",
            "leaf2:spine1",
            "spine2:leaf1",
            "leaf2:spine2",
            "spine2:leaf2"
        ]
    );
    assert_eq!(port(&ja, "leaf1:spine2")["interface"], w.0[0].0.as_str());
    // ECMP used both spines, so both wires carried data.
    let (next, flows, _) = leaf1_to_leaf2(&ja);
    assert_eq!(next, ["leaf1:spine1", "leaf1:spine2"]);
    assert!(
        flows.iter().all(|&f| f > 0),
        "ECMP used one spine: {flows:?}"
    );
    assert!(switch(&ja, "spine1")["routes"]["routed"].as_u64().unwrap() > 0);
    assert!(switch(&jb, "spine2")["routes"]["routed"].as_u64().unwrap() > 0);
    // A wire's two ends agree: what one process sent on it, the other
    // received, in both directions of both wires.
    let io = |j: &serde_json::Value, p: &str, k: &str| port(j, p)["io"][k].as_u64().unwrap();
    let since = |end: &serde_json::Value, base: &serde_json::Value, p: &str, k: &str| {
        io(end, p, k) - io(base, p, k)
    };
    for (pa, pb) in [
        ("leaf1:spine2", "spine2:leaf1"),
        ("spine1:leaf2", "leaf2:spine1"),
    ] {
        // Frames the receiving kernel dropped before the socket (its rx
        // ring full, no free frame) are counted there, not lost silently.
        let lost = |end: &serde_json::Value, base: &serde_json::Value, p: &str| {
            let k = |j: &serde_json::Value| {
                port(j, p)["kernel"]["rx_lost"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{p}: no kernel counters: {}", port(j, p)))
            };
            k(end) - k(base)
        };
        let sent = since(&ja, &base_a, pa, "tx_packets");
        let got = since(&jb, &base_b, pb, "rx_packets") + lost(&jb, &base_b, pb);
        assert!(sent > 1000, "{pa} carried {sent} frames");
        assert_eq!(
            sent, got,
            "{pa} sent {sent}, {pb} received or its kernel dropped {got}"
        );
        let back = since(&jb, &base_b, pb, "tx_packets");
        let got_back = since(&ja, &base_a, pa, "rx_packets") + lost(&ja, &base_a, pa);
        assert_eq!(back, got_back, "{pb} → {pa}");
    }
    // Real TCP across both processes at a fair share of the 500 Mbit/s path.
    assert!(bps > 100e6, "h1 → h3 only {:.0} Mbit/s", bps / 1e6);
}

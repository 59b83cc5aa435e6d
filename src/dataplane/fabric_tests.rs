//! The data path's core over a fabric (`--topology`), without sockets:
//! settings from the command line, the fabric they build, frames in and
//! out at the data path's port numbers (the hosts), the counters' port
//! names and the time series' numbering; and the configuration's errors.

use std::sync::Arc;

use clap::Parser;

use super::core::{Core, FabricCore};
use super::Snapshot;
use crate::config::Settings;
use crate::packet::VecStore;
use crate::switch::Switch;
use crate::timebase::Dilation;
use crate::timeseries::Batch;
use crate::units::{Nanos, Rate, MS, US};

/// 2 leaves × 2 spines, 2 hosts per leaf, 1 Gbit/s to the hosts, slow
/// spine links.
const LEAF_SPINE: &str = r#"
[leaf_spine]
leaves = 2
spines = 2
hosts_per_leaf = 2
host_rate = "1gbit"
fabric_rate = "100mbit"
delay = "10us"
"#;

/// A topology file in the temporary directory, removed when dropped.
struct TopoFile(tempfile::NamedTempFile);

impl TopoFile {
    fn new(text: &str) -> Self {
        let mut f = tempfile::Builder::new()
            .prefix("softswitch-fabric-test-")
            .suffix(".toml")
            .tempfile()
            .unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        TopoFile(f)
    }
    fn arg(&self) -> String {
        self.0.path().display().to_string()
    }
}

fn resolve(args: &[&str]) -> Result<Settings, String> {
    let mut v = vec!["softswitch"];
    v.extend_from_slice(args);
    let cli = crate::cli::Cli::try_parse_from(v).map_err(|e| e.to_string())?;
    crate::config::resolve(&cli.run).map_err(|e| e.to_string())
}

fn fabric_settings(topo: &TopoFile, extra: &[&str]) -> Settings {
    let t = topo.arg();
    let mut args = vec![
        "--topology",
        &t,
        "--ports",
        "ss-h1-sw,ss-h2-sw,ss-h3-sw,ss-h4-sw",
    ];
    args.extend_from_slice(extra);
    resolve(&args).unwrap_or_else(|e| panic!("{e}"))
}

/// Ethernet + IPv4 (ECT(0)) + UDP from host `src` to host `dst` (as `topo
/// up` addresses and MACs them), source port `sport`.
fn udp(src: u8, dst: u8, sport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[15] = 0x02;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 99, 0, src]);
    f[30..34].copy_from_slice(&[10, 99, 0, dst]);
    let sum = crate::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

fn send(c: &mut FabricCore, st: &mut VecStore, port: u16, bytes: Vec<u8>, now: Nanos) {
    let len = bytes.len() as u32;
    let id = st.insert(bytes);
    c.ingress(port, id, len, now, st);
}

/// Polls every 10 µs from `from` to `to`; what left at each data-path port.
fn run(c: &mut FabricCore, st: &mut VecStore, from: Nanos, to: Nanos) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let mut now = from;
    while now <= to {
        c.poll(now, st, |p, pkt| out.push((p, pkt.frame)));
        now += 10 * US;
    }
    out.into_iter().map(|(p, f)| (p, st.take(f))).collect()
}

#[test]
fn hosts_are_the_data_path_ports_and_links_stay_inside() {
    let topo = TopoFile::new(LEAF_SPINE);
    let s = fabric_settings(&topo, &["--aqm", "dctcp"]);
    let mut c = FabricCore::build(&s).unwrap();
    let ifaces: Vec<String> = s.ports.iter().map(|p| p.name.clone()).collect();
    assert_eq!(ifaces, ["ss-h1-sw", "ss-h2-sw", "ss-h3-sw", "ss-h4-sw"]);
    let names = c.port_names(&ifaces);
    assert_eq!(
        names,
        [
            "leaf1:h1",
            "leaf1:h2",
            "leaf2:h3",
            "leaf2:h4",
            "leaf1:spine1",
            "leaf1:spine2",
            "leaf2:spine1",
            "leaf2:spine2",
            "spine1:leaf1",
            "spine1:leaf2",
            "spine2:leaf1",
            "spine2:leaf2",
        ]
    );
    // The topology's rates: hosts 1 Gbit/s, links 100 Mbit/s; its delay.
    let f = c.fabric();
    let leaf1 = &f.switches()[0].ports();
    assert_eq!(leaf1[0].egress.config().rate, Rate::gbit(1));
    assert_eq!(leaf1[2].egress.config().rate, Rate::mbit(100));
    assert_eq!(leaf1[2].wire.delay_ns(), 10 * US);
    // h1 (port 0) → h3 (port 2) and h4 → h2: each out at its host's port
    // only, unchanged, after three hops.
    let mut st = VecStore::default();
    let a = udp(1, 3, 1000, 200);
    let b = udp(4, 2, 1001, 300);
    send(&mut c, &mut st, 0, a.clone(), 0);
    send(&mut c, &mut st, 3, b.clone(), 0);
    let out = run(&mut c, &mut st, 0, MS);
    assert_eq!(
        out.len(),
        2,
        "{:?}",
        out.iter().map(|o| o.0).collect::<Vec<_>>()
    );
    assert!(out.contains(&(2, a)));
    assert!(out.contains(&(1, b)));
    assert_eq!(c.held_packets(), 0);
    // The counters name every port; the route and link report is there.
    let names: Arc<[String]> = names.into();
    let j = c.snapshot(&names, MS, &s.guard).to_json();
    assert_eq!(j["ports"].as_array().unwrap().len(), 12);
    assert_eq!(j["ports"][2]["name"], "leaf2:h3");
    assert_eq!(j["ports"][2]["io"]["tx_packets"], 1);
    assert_eq!(j["conservation"]["holds"], true, "{}", j["conservation"]);
    assert!(j.get("mac_entries").is_none());
    let sw = j["fabric"]["switches"].as_array().unwrap();
    assert_eq!(sw.len(), 4);
    assert_eq!(sw[0]["name"], "leaf1");
    assert_eq!(sw[0]["routes"]["routed"], 1);
    assert_eq!(sw[0]["routes"]["local"], 1);
    let text = crate::report::render(&j);
    assert!(
        text.contains("fabric switch leaf1: local 1, routed 1"),
        "{text}"
    );
    // The time series numbers the ports as the counters do.
    let mut batch = Batch::default();
    c.sample(MS, Dilation::NONE, None, &mut batch);
    let mut ports: Vec<u16> = batch.queues.iter().map(|q| q.port).collect();
    ports.dedup();
    assert_eq!(ports, (0..12).collect::<Vec<u16>>());
}

#[test]
fn a_congested_link_marks_and_the_counters_name_it() {
    let topo = TopoFile::new(LEAF_SPINE);
    let s = fabric_settings(&topo, &["--aqm", "dctcp", "--aqm-opt", "k=30kb"]);
    let mut c = FabricCore::build(&s).unwrap();
    let mut st = VecStore::default();
    // One flow h1 → h3 of 60 full frames at once: 90 KB onto one 100 Mbit/s
    // uplink of leaf1 (the 1 Gbit/s host link is not in its way: frames
    // enter the fabric as they arrive).
    for _ in 0..60 {
        send(&mut c, &mut st, 0, udp(1, 3, 5000, 1500), 0);
    }
    let out = run(&mut c, &mut st, 0, 20 * MS);
    assert_eq!(out.len(), 60);
    assert!(out.iter().all(|(p, _)| *p == 2));
    let ce = out.iter().filter(|(_, f)| f[15] & 3 == 3).count();
    assert!(ce > 0, "no CE mark");
    let names: Arc<[String]> = c.port_names(&[]).into();
    let j = c.snapshot(&names, 20 * MS, &s.guard).to_json();
    let marked: Vec<&str> = j["fabric"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["marked_packets"].as_u64().unwrap() > 0)
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(marked.len(), 1, "{}", j["fabric"]["links"]);
    assert!(marked[0].starts_with("leaf1:spine"), "{marked:?}");
    assert_eq!(j["conservation"]["holds"], true);
    let text = crate::report::render(&j);
    assert!(
        text.contains(&format!(
            "fabric links that marked or dropped: {}",
            marked[0]
        )),
        "{text}"
    );
    // softswitch-exp's per-hop results read the same hop from the snapshot,
    // with every mark the receiver saw as CE.
    let hops = crate::exp::results::HopResult::from_snapshot(&j);
    assert_eq!(hops.len(), names.len());
    let marking: Vec<_> = hops.iter().filter(|h| h.marked_pkts > 0).collect();
    assert_eq!(marking.len(), 1, "{hops:?}");
    assert_eq!(marking[0].name, marked[0]);
    assert_eq!(marking[0].marked_pkts, ce as u64);
    assert_eq!(marking[0].tx_pkts, 60);
    assert!(marking[0].max_backlog_bytes > 30_000, "{hops:?}");
}

#[test]
fn the_umem_holds_every_ports_buffer_links_included() {
    let topo = TopoFile::new(LEAF_SPINE);
    let fab = fabric_settings(&topo, &[]);
    let one = resolve(&["--ports", "ss-h1-sw,ss-h2-sw,ss-h3-sw,ss-h4-sw"]).unwrap();
    let opts = crate::xsk::XskOptions::default();
    let (f, s) = (
        super::frames_needed(&fab, 4, &opts),
        super::frames_needed(&one, 4, &opts),
    );
    // 8 more ports of 96 KB buffers (1536 frames each), and the link wires.
    assert!(f >= s + 8 * 1536, "{f} vs {s}");
}

#[test]
fn a_single_switch_snapshot_keeps_its_mac_table_and_no_fabric() {
    let s = resolve(&["--ports", "a,b"]).unwrap();
    let sw: Switch<crate::aqm::AqmKind> = Core::build(&s).unwrap();
    let names: Arc<[String]> = sw.port_names(&["a".into(), "b".into()]).into();
    let j = sw.snapshot(&names, 0, &s.guard).to_json();
    assert_eq!(j["mac_entries"], 0);
    assert!(j.get("fabric").is_none());
    let _ = Snapshot::take(&sw, &names, 0, &s.guard);
}

fn err(args: &[&str]) -> String {
    match resolve(args) {
        Ok(_) => panic!("{args:?} resolved"),
        Err(e) => e,
    }
}

#[test]
fn topologies_that_cannot_run_say_why() {
    let topo = TopoFile::new(LEAF_SPINE);
    let t = topo.arg();
    let e = err(&["--topology", &t, "--ports", "a,b,c"]);
    assert!(
        e.contains("has 4 hosts (h1, h2, h3, h4) but --ports names 3 interfaces"),
        "{e}"
    );
    assert!(e.contains("topo up --topology"), "{e}");
    let e = err(&[
        "--topology",
        &t,
        "--ports",
        "x-h2-sw,x-h1-sw,x-h3-sw,x-h4-sw",
    ]);
    assert!(
        e.contains("interface x-h2-sw (host h2 of `topo up`) is in the place of host h1"),
        "{e}"
    );
    let four = "a,b,c,d";
    for (extra, what) in [
        (&["--rate", "1gbit"][..], "--rate with --topology"),
        (&["--delay", "1us"][..], "--delay with --topology"),
        (
            &["--port-rate", "a=1gbit"][..],
            "--port-rate a=... with --topology",
        ),
    ] {
        let mut args = vec!["--topology", &t, "--ports", four];
        args.extend_from_slice(extra);
        let e = err(&args);
        assert!(e.contains(what), "{extra:?}: {e}");
    }
    let e = err(&["--topology", "/nonexistent/t.toml", "--ports", four]);
    assert!(
        e.contains("--topology /nonexistent/t.toml: cannot read it"),
        "{e}"
    );
    let bad = TopoFile::new("[leaf_spine]\nleaves = 0\nspines = 1\nhosts_per_leaf = 1\n");
    let e = err(&["--topology", &bad.arg(), "--ports", "a"]);
    assert!(
        e.contains("line 2: leaf_spine.leaves must be at least 1"),
        "{e}"
    );
    // An AQM that needs per-flow queues on some ports only.
    let mixed = TopoFile::new(&format!("{LEAF_SPINE}[defaults]\naqm = \"diffecn\"\n"));
    let e = err(&[
        "--topology",
        &mixed.arg(),
        "--ports",
        four,
        "--aqm",
        "dctcp",
    ]);
    assert!(e.contains("needs other queues than --aqm dctcp"), "{e}");
    // One host: nothing to forward.
    let one = TopoFile::new("[[switch]]\nname = \"s\"\nhosts = [\"h1\"]\n");
    let s = resolve(&["--topology", &one.arg(), "--ports", "a"]).unwrap();
    let e = s.check_runnable().unwrap_err().to_string();
    assert!(
        e.contains("a fabric of one host (a) forwards nothing"),
        "{e}"
    );
}

#[test]
fn the_topology_gives_each_port_its_aqm_and_buffer() {
    let topo = TopoFile::new(&format!(
        "{LEAF_SPINE}[defaults]\naqm = \"tcn\"\naqm_opts = {{ threshold = \"70us\" }}\nbuffer = \"200kb\"\n"
    ));
    let s = fabric_settings(&topo, &["--aqm", "dctcp", "--buffer", "50kb"]);
    let f = s.fabric.as_ref().unwrap();
    let link = &f.ports[0][2];
    assert_eq!(link.name, "leaf1:spine1");
    assert_eq!(link.port.buffer_bytes, 200 * 1024);
    assert!(
        link.aqm.describe().contains("70us"),
        "{}",
        link.aqm.describe()
    );
    // What the topology leaves to the flags: --buffer where it names none.
    let plain = TopoFile::new(LEAF_SPINE);
    let s = fabric_settings(&plain, &["--aqm", "dctcp", "--buffer", "50kb"]);
    let p = &s.fabric.as_ref().unwrap().ports[0][0];
    assert_eq!(p.port.buffer_bytes, 50 * 1024);
    assert!(
        p.aqm.describe().starts_with("dctcp"),
        "{}",
        p.aqm.describe()
    );
    assert!(s
        .describe()
        .contains("host h3 (10.99.0.3) = interface ss-h3-sw on port leaf2:h3"));
}

/// Capture in a fabric: every switch records its own ports under their
/// fabric names, so one flow h1 → h3 shows at each hop, rx and tx, with
/// that hop's fate (and the marking uplink's CE) in the comments.
#[test]
fn capture_follows_a_flow_through_every_hop() {
    use crate::capture::{comment, Batch as Cap, CaptureConfig, Dir, Fate};
    let topo = TopoFile::new(LEAF_SPINE);
    let s = fabric_settings(
        &topo,
        &[
            "--aqm",
            "dctcp",
            "--aqm-opt",
            "k=30kb",
            "--pcap",
            "/nonexistent-cap",
        ],
    );
    let p = s.pcap.as_ref().unwrap();
    assert_eq!(p.ports.len(), 12, "every fabric port, links included");
    let mut c = FabricCore::build(&s).unwrap();
    let names = c.port_names(&[]);
    c.enable_capture(CaptureConfig {
        snaplen: p.snaplen,
        ports: p.ports.clone(),
    });
    let mut st = VecStore::default();
    for _ in 0..60 {
        send(&mut c, &mut st, 0, udp(1, 3, 5000, 1500), 0);
    }
    // Taken in several batches, one per ms, as the data path does.
    let mut got = Cap::default();
    for ms in 0..=20 {
        run(&mut c, &mut st, ms * MS, ms * MS + MS - 10 * US);
        got.append(&c.take_capture(Cap::default()));
    }
    assert_eq!(c.captured(), 0);
    let count = |name: &str, dir: Dir| {
        let g = names.iter().position(|n| n == name).unwrap() as u16;
        got.records
            .iter()
            .filter(|r| r.port == g && r.dir == dir)
            .count()
    };
    // Host port in, one uplink per flow (ECMP), the spine, leaf2, host port out.
    assert_eq!(count("leaf1:h1", Dir::Rx), 60);
    let up: Vec<&str> = ["leaf1:spine1", "leaf1:spine2"]
        .into_iter()
        .filter(|n| count(n, Dir::Tx) > 0)
        .collect();
    assert_eq!(up.len(), 1, "one flow takes one uplink: {up:?}");
    let spine = &up[0]["leaf1:".len()..];
    assert_eq!(count(up[0], Dir::Tx), 60);
    assert_eq!(count(&format!("{spine}:leaf1"), Dir::Rx), 60);
    assert_eq!(count(&format!("{spine}:leaf2"), Dir::Tx), 60);
    assert_eq!(count(&format!("leaf2:{spine}"), Dir::Rx), 60);
    assert_eq!(count("leaf2:h3", Dir::Tx), 60);
    assert_eq!(got.records.len(), 360);
    assert!(got.lost.iter().all(|l| l == &[0, 0]));
    // Fates name the fabric's ports: leaf1 enqueued h1's frames on the uplink.
    let mut text = String::new();
    let first_rx = got.records.iter().find(|r| r.dir == Dir::Rx).unwrap();
    comment(got.fates_of(first_rx), &names, &mut text);
    assert_eq!(text, format!("{} q0: enqueued", up[0]));
    // The uplink (100 Mbit/s, K = 30 KB) marked some; its tx records say so
    // and carry the CE bytes; the spine's rx of the same frames sees CE.
    let g_up = names.iter().position(|n| n == up[0]).unwrap() as u16;
    let marked = got
        .records
        .iter()
        .filter(|r| r.port == g_up && r.dir == Dir::Tx)
        .filter(|r| {
            matches!(got.fates_of(r), [Fate::Sent { ce: true, .. }]) && got.data(r)[15] & 3 == 3
        })
        .count();
    assert!(marked > 0 && marked < 60, "{marked} marked on {}", up[0]);
    // Per-record time order within each port and direction.
    for g in 0..names.len() as u16 {
        for dir in [Dir::Rx, Dir::Tx] {
            let t: Vec<Nanos> = got
                .records
                .iter()
                .filter(|r| r.port == g && r.dir == dir)
                .map(|r| r.t_ns)
                .collect();
            assert!(
                t.windows(2).all(|w| w[0] <= w[1]),
                "{} {dir:?}",
                names[g as usize]
            );
        }
    }
}

#[test]
fn capture_in_a_fabric_takes_port_names_and_refuses_others() {
    let topo = TopoFile::new(LEAF_SPINE);
    let s = fabric_settings(
        &topo,
        &[
            "--pcap",
            "/nonexistent-cap",
            "--pcap-ports",
            "spine1:leaf2,leaf2:h3",
        ],
    );
    let on: Vec<usize> = s
        .pcap
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .enumerate()
        .filter(|(_, &b)| b)
        .map(|(i, _)| i)
        .collect();
    let c = FabricCore::build(&s).unwrap();
    let names = c.port_names(&[]);
    assert_eq!(
        on.iter().map(|&i| names[i].as_str()).collect::<Vec<_>>(),
        ["leaf2:h3", "spine1:leaf2"]
    );
    let t = topo.arg();
    let e = err(&[
        "--topology",
        &t,
        "--ports",
        "a,b,c,d",
        "--pcap",
        "/nonexistent-cap",
        "--pcap-ports",
        "a",
    ]);
    assert!(
        e.contains("--pcap-ports \"a\": not one of the switch's ports (leaf1:h1,"),
        "{e}"
    );
}

/// R-AQM in a fabric: every port of every switch has its own R-AQM, scaled
/// to its link; an incast h1, h2 → h3 across the spine congests leaf2's
/// port towards h3, and the ACKs h3 sends back are held in that port's VIQ
/// and leave paced, while the data never waits for them.
#[test]
fn raqm_in_a_fabric_holds_the_acks_of_a_congested_host_port() {
    use crate::raqm::tests::{tcp_frame, tcp_frame_with_payload};
    use crate::raqm::State;
    use crate::wire::tcp::flags;
    // The frames' addresses are 10.0.0.i; h3's port is slower than the spine.
    let topo = TopoFile::new(
        "subnet = \"10.0.0.0/24\"\n[leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 2\n\
         host_rate = \"1gbit\"\nfabric_rate = \"10gbit\"\ndelay = \"1us\"\n",
    );
    let s = fabric_settings(&topo, &["--aqm", "r-aqm", "--queues", "2"]);
    let mut c = FabricCore::build(&s).unwrap();
    let names = c.port_names(&[]);
    // Each port's R-AQM is scaled to its own link: K_min = C · RTT in frames.
    let f = c.fabric();
    let leaf2 = f.switch("leaf2").unwrap();
    let k_min = |sw: &crate::switch::Switch<_, _>, p: usize| {
        sw.ports()[p].raqm.as_ref().unwrap().config().k_min_pkts
    };
    let leaf2_h3 = 0; // leaf2's first host port is h3's
    let leaf2_up = 2;
    assert!(
        k_min(leaf2, leaf2_up) > 9 * k_min(leaf2, leaf2_h3),
        "10 Gbit/s link: {} vs 1 Gbit/s host port: {}",
        k_min(leaf2, leaf2_up),
        k_min(leaf2, leaf2_h3)
    );
    let mut st = VecStore::default();
    let mut txs: Vec<(Nanos, u16, Vec<u8>)> = Vec::new();
    let mut now: Nanos = 0;
    let run_until =
        |c: &mut FabricCore, st: &mut VecStore, txs: &mut Vec<_>, now: &mut Nanos, until: Nanos| {
            loop {
                let mut sent = Vec::new();
                c.poll(*now, st, |p, pkt| sent.push((p, pkt)));
                for (p, pkt) in sent {
                    txs.push((*now, p, st.take(pkt.frame)));
                }
                match c.next_event(*now) {
                    Some(t) if t <= until => *now = t.max(*now + 1),
                    _ => break,
                }
            }
            *now = until;
        };
    // Handshakes teach every switch on the path the window scales.
    let ws = [1, 3, 3, 7];
    for h in [1u8, 2] {
        let sport = 40000 + h as u16;
        send(
            &mut c,
            &mut st,
            (h - 1) as u16,
            tcp_frame(false, (h, 3), (sport, 5201), flags::SYN, 64240, &ws),
            0,
        );
        send(
            &mut c,
            &mut st,
            2,
            tcp_frame(
                false,
                (3, h),
                (5201, sport),
                flags::SYN | flags::ACK,
                65160,
                &ws,
            ),
            0,
        );
    }
    run_until(&mut c, &mut st, &mut txs, &mut now, 50 * US);
    let interval = c.fabric().switch("leaf2").unwrap().ports()[leaf2_h3]
        .raqm
        .as_ref()
        .unwrap()
        .config()
        .interval;
    // Incast: 40 full frames, 20 from each sender, one every 2 µs (six
    // times what h3's 1 Gbit/s port sends), from just before T to past 2T:
    // the queue rises at every sample instant of [T, 2T] → CS at 2T.
    let t0 = 60 * US;
    assert!(t0 < interval && t0 + 78 * US > 2 * interval);
    for k in 0..40u8 {
        run_until(
            &mut c,
            &mut st,
            &mut txs,
            &mut now,
            t0 + u64::from(k) * 2 * US,
        );
        let h = 1 + k % 2;
        let f = tcp_frame_with_payload(
            false,
            (h, 3),
            (40000 + h as u16, 5201),
            flags::ACK,
            502,
            &[],
            1460,
        );
        send(&mut c, &mut st, (h - 1) as u16, f, now);
    }
    // Just after the last frame, in CS until the decision at 3T.
    let t_ack = t0 + 79 * US;
    assert!(t_ack < 3 * interval);
    run_until(&mut c, &mut st, &mut txs, &mut now, t_ack);
    let delivered = txs.iter().filter(|t| t.1 == 2 && t.2.len() == 1514).count();
    assert!(
        delivered > 0 && delivered < 40,
        "{delivered} delivered by the first ACK"
    );
    for k in 0..delivered as u32 {
        let h = 1 + (k % 2) as u8;
        send(
            &mut c,
            &mut st,
            2,
            tcp_frame(
                false,
                (3, h),
                (5201, 40000 + h as u16),
                flags::ACK,
                0x7fff,
                &[],
            ),
            now,
        );
    }
    let r = c.fabric().switch("leaf2").unwrap().ports()[leaf2_h3]
        .raqm
        .as_ref()
        .unwrap();
    assert_eq!(r.state(), State::Congested, "{}", names[2]);
    assert_eq!(r.viq_len(), delivered, "every ACK held at {}", names[2]);
    run_until(&mut c, &mut st, &mut txs, &mut now, 20 * MS);
    assert_eq!(c.held_packets(), 0);
    // Every data frame reached h3, every ACK its sender, paced.
    assert_eq!(
        txs.iter().filter(|t| t.1 == 2 && t.2.len() == 1514).count(),
        40
    );
    let acks: Vec<Nanos> = txs
        .iter()
        .filter(|t| t.0 >= t_ack - 1_000 && t.1 < 2 && t.2.len() == 54)
        .map(|t| t.0)
        .collect();
    assert_eq!(acks.len(), delivered, "no ACK lost");
    assert!(
        acks.last().unwrap() - acks[0] > 10 * US,
        "ACKs paced: {acks:?}"
    );
    let r = c.fabric().switch("leaf2").unwrap().ports()[leaf2_h3]
        .raqm
        .as_ref()
        .unwrap();
    assert_eq!(r.counters.acks_held as usize, delivered);
    assert_eq!(r.counters.acks_released as usize, delivered);
    // The snapshot reports every port's R-AQM under the fabric's names.
    let names: Arc<[String]> = names.into();
    let j = c.snapshot(&names, 20 * MS, &s.guard).to_json();
    assert_eq!(j["ports"][2]["name"], "leaf2:h3");
    assert_eq!(
        j["ports"][2]["raqm"]["acks_held"], delivered as u64,
        "{}",
        j["ports"][2]["raqm"]
    );
    assert_eq!(j["conservation"]["holds"], true, "{}", j["conservation"]);
}

/// `--switches` and `--link-ifaces` for process A of a two-process
/// leaf-spine (leaf1 and spine1).
fn part_a(topo: &TopoFile, extra: &[&str]) -> Result<Settings, String> {
    let t = topo.arg();
    let mut args = vec![
        "--topology",
        &t,
        "--switches",
        "leaf1,spine1",
        "--ports",
        "ss-h1-sw,ss-h2-sw",
        "--link-ifaces",
        "spine1:leaf2=w1,leaf1:spine2=w0",
    ];
    args.extend_from_slice(extra);
    resolve(&args)
}

#[test]
fn part_of_a_fabric_sends_and_receives_on_its_wires() {
    let topo = TopoFile::new(LEAF_SPINE);
    let s = part_a(&topo, &["--aqm", "dctcp"]).unwrap_or_else(|e| panic!("{e}"));
    let mut c = FabricCore::build(&s).unwrap();
    // The data path's interfaces: this part's hosts, then its wires in
    // port order (whatever order --link-ifaces gave them in).
    let ifaces: Vec<String> = s.ports.iter().map(|p| p.name.clone()).collect();
    assert_eq!(ifaces, ["ss-h1-sw", "ss-h2-sw", "w0", "w1"]);
    assert_eq!(
        c.port_names(&ifaces),
        [
            "leaf1:h1",
            "leaf1:h2",
            "leaf1:spine2",
            "spine1:leaf2",
            "leaf1:spine1",
            "spine1:leaf1"
        ]
    );
    // A wire's port is the link's: its rate and delay.
    assert_eq!(s.ports[2].port.rate, Rate::mbit(100));
    assert_eq!(s.ports[2].delay_ns, 10 * US);
    let text = s.describe();
    assert!(
        text.contains(
            "this process runs leaf1, spine1; leaf2, spine2 run elsewhere, over 2 wire(s)"
        ),
        "{text}"
    );
    assert!(text.contains("wire leaf1:spine2 = interface w0"), "{text}");
    assert!(!text.contains("host h3"), "{text}");
    // h1 → h3 (on leaf2, another process's): out by a wire, over either
    // spine (ECMP) — by spine2 straight from leaf1 (port 2), or by spine1
    // and then its wire to leaf2 (port 3).
    let mut st = VecStore::new();
    let mut by_port = [0u32; 4];
    for sport in 0..64 {
        send(&mut c, &mut st, 0, udp(1, 3, sport, 200), 0);
    }
    for (p, f) in run(&mut c, &mut st, 0, 2 * MS) {
        assert_eq!(f[0..6], [2, 0, 0, 0, 0, 3], "to h3");
        by_port[p as usize] += 1;
    }
    assert_eq!(by_port[..2], [0, 0], "{by_port:?}");
    assert!(
        by_port[2] > 0 && by_port[3] > 0,
        "ECMP used one spine: {by_port:?}"
    );
    assert_eq!(by_port[2] + by_port[3], 64);
    // h3 → h1 arriving on a wire (from spine2 into leaf1): delivered to h1.
    send(&mut c, &mut st, 2, udp(3, 1, 9, 200), 3 * MS);
    let out = run(&mut c, &mut st, 3 * MS, 4 * MS);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0, "h1's port");
    // And from leaf2 into spine1 (wire port 3): spine1 sends it down to leaf1.
    send(&mut c, &mut st, 3, udp(3, 2, 9, 200), 5 * MS);
    let out = run(&mut c, &mut st, 5 * MS, 6 * MS);
    assert_eq!(
        out.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        [1],
        "h2's port"
    );
    assert_eq!(st.live, 0);
    assert!(c.fabric().conservation().holds);
}

#[test]
fn part_of_a_fabric_refuses_wires_it_cannot_place() {
    let topo = TopoFile::new(LEAF_SPINE);
    let t = topo.arg();
    let base = |extra: &[&str]| -> String {
        let mut args = vec!["--topology", t.as_str()];
        args.extend_from_slice(extra);
        err(&args)
    };
    let e = base(&["--switches", "leaf1,spine9", "--ports", "a,b"]);
    assert!(e.contains("--switches spine9: --topology"), "{e}");
    assert!(
        e.contains("its switches are leaf1, leaf2, spine1, spine2"),
        "{e}"
    );
    // A wire without an interface.
    let e = base(&[
        "--switches",
        "leaf1,spine1",
        "--ports",
        "a,b",
        "--link-ifaces",
        "leaf1:spine2=w0",
    ]);
    assert!(
        e.contains("the links spine1:leaf2 lead to switches another process runs"),
        "{e}"
    );
    assert!(e.contains("--link-ifaces spine1:leaf2=IFACE"), "{e}");
    // A port that is not a wire, a wire named twice, no '='.
    let two = "leaf1:spine2=w0,spine1:leaf2=w1";
    for (ifaces, what) in [
        (
            format!("{two},leaf1:spine1=w2"),
            "leaf1:spine1 is not a wire of this process; its wires",
        ),
        (
            format!("{two},leaf1:spine2=w3"),
            "leaf1:spine2 is named twice",
        ),
        (format!("{two},w4"), "--link-ifaces w4: write PORT=IFACE"),
    ] {
        let e = base(&[
            "--switches",
            "leaf1,spine1",
            "--ports",
            "a,b",
            "--link-ifaces",
            &ifaces,
        ]);
        assert!(e.contains(what), "{ifaces}: {e}");
    }
    // Hosts: one interface per host of *this* part.
    let e = base(&[
        "--switches",
        "leaf1,spine1",
        "--ports",
        "a,b,c",
        "--link-ifaces",
        two,
    ]);
    assert!(
        e.contains("the switches --switches names in --topology")
            && e.contains("have 2 hosts (h1, h2)"),
        "{e}"
    );
    // Wires in a whole fabric: there are none.
    let e = base(&["--ports", "a,b,c,d", "--link-ifaces", "leaf1:spine2=w0"]);
    assert!(e.contains("has no wires"), "{e}");
    // A process running only spines has no hosts: --ports may be empty.
    let s = resolve(&[
        "--topology",
        &t,
        "--switches",
        "spine1",
        "--link-ifaces",
        "spine1:leaf1=w0,spine1:leaf2=w1",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let ifaces: Vec<&str> = s.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(ifaces, ["w0", "w1"]);
}

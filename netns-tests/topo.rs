//! Root integration tests of the host namespaces (`softswitch::topo`), with
//! a Linux bridge standing in for the switch. Skipped unless root.

mod common;

use std::sync::Mutex;
use std::thread::sleep;
use std::time::Duration;

use common::{
    attach_ce_marker, leftovers, ping, run_ok, skip_unless_root, skip_unless_tools,
    tcp_ext_counter, TestTopo,
};
use softswitch::topo::{self, CongestionControl, TopoConfig, TopoError};

/// The tests check machine-wide state (registered struct_ops, allowed cc
/// list), so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn available_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap()
}

fn allowed_cc() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap()
}

fn switch_rx(ifname: &str) -> (u64, u64) {
    let read = |stat: &str| -> u64 {
        std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/{stat}"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    (read("rx_packets"), read("rx_bytes"))
}

/// Runs a 3 s iperf3 transfer h1 -> h2; returns `ss -tino` of h1 sampled
/// every 0.25 s during it (10 samples), and the iperf3 client's output.
fn transfer(t: &mut TestTopo) -> (Vec<String>, String) {
    let server_ip = t.hosts[1].ip.to_string();
    let client = t.iperf_start(0, 1, 5201, 3, &[]);
    let mut samples = Vec::new();
    for _ in 0..10 {
        sleep(Duration::from_millis(250));
        samples.push(run_ok(
            &mut t.hosts[0].exec(&["ss", "-tino", "dst", &server_ip]),
        ));
    }
    let out = t.wait(client, Duration::from_secs(10));
    (samples, out)
}

/// The info line of the bulk connection in `ss -tino` output (iperf3 also
/// keeps an idle control connection): the one with most bytes sent.
fn data_conn(ss: &str) -> Option<String> {
    ss.lines()
        .filter(|l| l.contains("bytes_sent:"))
        .max_by_key(|l| field(l, "bytes_sent:").unwrap_or(0))
        .map(str::to_owned)
}

/// `name<number>` in an ss info line, e.g. `cwnd:`.
fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name))
        .and_then(|v| v.parse().ok())
}

/// Sysctl `key` inside `h`'s namespace, read through `ip netns exec`.
fn sysctl_in(h: &topo::Host, key: &str) -> String {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    run_ok(&mut h.exec(&["cat", &path])).trim().to_owned()
}

fn mean(v: &[u64]) -> u64 {
    v.iter().sum::<u64>() / (v.len().max(1) as u64)
}

#[test]
fn tcp_through_a_bridge_uses_dctcp_with_ecn_and_down_removes_everything() {
    let name = "tcp_through_a_bridge_uses_dctcp_with_ecn_and_down_removes_everything";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = serial();
    let cc_before = available_cc();
    let allowed_before = allowed_cc();

    let mut t = TestTopo::with(|c| {
        c.hosts = 2;
        c.rto_min = Some(Duration::from_millis(5));
        c.initcwnd = Some(4);
        c.gso_segs = Some(1);
        c.rps = "0".parse().unwrap();
    });
    let prefix = t.prefix.clone();
    assert!(
        t.cc == "bpf_dctcp" || t.cc == "dctcp",
        "DCTCP expected, got {}",
        t.cc
    );
    let we_registered = t.cc == topo::BPF_DCTCP && !cc_before.contains(topo::BPF_DCTCP);
    if we_registered {
        // Registered through a struct_ops link that outlives `up` by its pin.
        assert!(
            std::path::Path::new(topo::DCTCP_LINK_PIN).exists(),
            "no pinned link at {}",
            topo::DCTCP_LINK_PIN
        );
    }
    assert_eq!(t.hosts[0].ns, format!("{prefix}-h1"));
    assert_eq!(t.hosts[1].switch_if, format!("{prefix}-h2-sw"));
    assert_eq!(t.hosts[1].ip.to_string(), "10.99.0.2");
    assert_eq!(t.hosts[1].mac, [2, 0, 0, 0, 0, 2]);
    let route = run_ok(&mut t.hosts[0].exec(&["ip", "route", "show", "10.99.0.0/24"]));
    assert!(
        route.contains("rto_min") && route.contains("5ms"),
        "{route}"
    );
    assert!(route.contains("initcwnd 4"), "{route}");
    let link = run_ok(&mut t.hosts[0].exec(&["ip", "-d", "link", "show", "eth0"]));
    assert!(link.contains("gso_max_segs 1 "), "{link}");
    // `--rps 0`: the hosts' receive processing is steered to CPU 0.
    let rps = run_ok(&mut t.hosts[0].exec(&["cat", "/sys/class/net/eth0/queues/rx-0/rps_cpus"]));
    let mask = u64::from_str_radix(&rps.trim().replace(',', ""), 16).unwrap_or(0);
    assert_eq!(mask, 1, "rps_cpus {rps}");
    // `up` writes the sysctls from a thread inside each namespace (setns);
    // `ip netns exec` reads them back there, and the root keeps its own.
    for h in &t.hosts {
        for (key, want) in [
            ("net.ipv4.tcp_ecn", "1"),
            ("net.ipv4.tcp_congestion_control", t.cc.as_str()),
            ("net.ipv4.tcp_no_metrics_save", "1"),
            ("net.ipv6.conf.all.accept_dad", "0"),
            ("net.ipv6.conf.default.accept_dad", "0"),
            ("net.ipv6.conf.default.router_solicitations", "0"),
            ("net.ipv6.conf.eth0.router_solicitations", "0"),
        ] {
            assert_eq!(sysctl_in(h, key), want, "{key} in {}", h.ns);
        }
    }

    t.bridge_all();
    ping(&t.hosts[0], t.hosts[1].ip);
    let sw = t.hosts[0].switch_if.clone();
    let (pkts0, bytes0) = switch_rx(&sw);
    let (samples, iperf) = transfer(&mut t);
    let ss = &samples[4];
    eprintln!("ss -tino on h1:\n{ss}\niperf3:\n{iperf}");
    let data_conn = data_conn(ss).expect("the bulk connection in ss output");
    assert!(
        data_conn.contains(&format!(" {} ", t.cc)),
        "ss does not show {}: {data_conn}",
        t.cc
    );
    assert!(
        data_conn.contains(" ecn "),
        "ss does not show ecn: {data_conn}"
    );

    // Frames on the wire are MTU-sized (no TSO super-packets).
    let (pkts1, bytes1) = switch_rx(&sw);
    let avg = (bytes1 - bytes0) / (pkts1 - pkts0).max(1);
    assert!(pkts1 - pkts0 > 10_000, "too few frames: {}", pkts1 - pkts0);
    assert!(avg <= 1514, "average frame {avg} B > MTU + Ethernet header");

    let report = t.down();
    eprintln!("down: {report}");
    assert!(
        report.namespaces.len() == 2 && report.links.len() == 2,
        "{report}"
    );
    assert!(leftovers(&prefix).is_empty(), "{:?}", leftovers(&prefix));
    assert!(!topo::list().iter().any(|r| r.prefix == prefix));
    if topo::list().is_empty() {
        // Nothing else uses it: the registration and allowed list are back.
        assert_eq!(available_cc(), cc_before);
        assert_eq!(allowed_cc(), allowed_before);
        if we_registered {
            assert!(!std::path::Path::new(topo::DCTCP_LINK_PIN).exists());
        }
    }
    // Idempotent.
    assert!(topo::down(&prefix).unwrap().is_empty());
}

#[test]
fn failed_up_cleans_up_what_it_made_and_the_first_topology_keeps_working() {
    let name = "failed_up_cleans_up_what_it_made_and_the_first_topology_keeps_working";
    if skip_unless_root(name) || skip_unless_tools(name, &["ping"]) {
        return;
    }
    let _serial = serial();
    let mut first = TestTopo::new(2);
    first.bridge_all();
    ping(&first.hosts[0], first.hosts[1].ip);

    // Same prefix again: refused before anything is made.
    let again = TopoConfig {
        prefix: first.prefix.clone(),
        hosts: 3,
        ..TopoConfig::default()
    };
    match topo::up(&again) {
        Err(e @ TopoError::NamesInUse { .. }) => {
            assert!(e.to_string().contains("topo down --prefix"), "{e}")
        }
        other => panic!("expected NamesInUse, got {other:?}"),
    }

    // A failure half-way (after host 1 of 3): everything of that call goes.
    let other = TopoConfig {
        prefix: common::unique_prefix(),
        hosts: 3,
        ..TopoConfig::default()
    };
    match topo::up_with_fault(&other, 1) {
        Err(TopoError::InjectedFault(1)) => {}
        r => panic!("expected InjectedFault, got {r:?}"),
    }
    assert!(
        leftovers(&other.prefix).is_empty(),
        "{:?}",
        leftovers(&other.prefix)
    );
    assert!(!topo::list().iter().any(|r| r.prefix == other.prefix));

    // The first topology is untouched: its hosts, its cc, its traffic.
    assert_eq!(leftovers(&first.prefix).len(), 4);
    assert!(available_cc().split_whitespace().any(|n| n == first.cc));
    ping(&first.hosts[1], first.hosts[0].ip);
    let cc = run_ok(&mut first.hosts[0].exec(&["sysctl", "-n", "net.ipv4.tcp_congestion_control"]));
    assert_eq!(cc.trim(), first.cc);
}

#[test]
fn named_cc_gives_a_plain_ecn_baseline() {
    let name = "named_cc_gives_a_plain_ecn_baseline";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = serial();
    let allowed_before = allowed_cc();
    let mut t = TestTopo::with(|c| c.cc = CongestionControl::Named("cubic".into()));
    assert_eq!(t.cc, "cubic");
    assert!(allowed_cc().split_whitespace().any(|n| n == "cubic"));
    t.bridge_all();
    let (samples, _) = transfer(&mut t);
    let ss = data_conn(&samples[4]).expect("the bulk connection in ss output");
    assert!(ss.contains(" cubic "), "{ss}");
    assert!(ss.contains(" ecn "), "{ss}");
    let prefix = t.prefix.clone();
    t.down();
    assert!(leftovers(&prefix).is_empty());
    if topo::list().is_empty() {
        assert_eq!(allowed_cc(), allowed_before);
    }
}

#[test]
fn down_of_an_unknown_prefix_is_a_no_op() {
    if skip_unless_root("down_of_an_unknown_prefix_is_a_no_op") {
        return;
    }
    let _serial = serial();
    let report = topo::down(&common::unique_prefix()).unwrap();
    assert!(
        report.namespaces.is_empty() && report.links.is_empty(),
        "{report}"
    );
}

#[test]
fn unknown_cc_is_refused_with_the_available_list() {
    if skip_unless_root("unknown_cc_is_refused_with_the_available_list") {
        return;
    }
    let _serial = serial();
    let cfg = TopoConfig {
        prefix: common::unique_prefix(),
        cc: CongestionControl::Named("nosuchcc".into()),
        ..TopoConfig::default()
    };
    match topo::up(&cfg) {
        Err(e @ TopoError::CcUnavailable { .. }) => assert!(e.to_string().contains("reno"), "{e}"),
        r => panic!("expected CcUnavailable, got {r:?}"),
    }
    assert!(leftovers(&cfg.prefix).is_empty());
    assert!(!topo::list().iter().any(|r| r.prefix == cfg.prefix));
}

/// Result of one marked transfer: share of delivered packets the sender saw
/// as CE-echoed, and the mean of the sampled cwnd of the bulk connection.
struct MarkedRun {
    cc: String,
    ce_share: f64,
    mean_cwnd: u64,
}

fn marked_transfer(cc: CongestionControl, per_mille: u32) -> MarkedRun {
    let mut t = TestTopo::with(|c| c.cc = cc);
    t.bridge_all();
    attach_ce_marker(&t.hosts[1], per_mille);
    let (samples, iperf) = transfer(&mut t);
    let cwnds: Vec<u64> = samples
        .iter()
        .filter_map(|s| data_conn(s).and_then(|l| field(&l, "cwnd:")))
        .collect();
    assert!(cwnds.len() >= 6, "too few ss samples: {samples:?}");
    let delivered = tcp_ext_counter(&t.hosts[0], "TCPDelivered");
    let delivered_ce = tcp_ext_counter(&t.hosts[0], "TCPDeliveredCE");
    let run = MarkedRun {
        cc: t.cc.clone(),
        ce_share: delivered_ce as f64 / delivered.max(1) as f64,
        mean_cwnd: mean(&cwnds),
    };
    eprintln!(
        "{}: delivered {delivered}, CE-echoed {delivered_ce} ({:.2} %), cwnd samples {cwnds:?}\n{iperf}",
        run.cc,
        100.0 * run.ce_share
    );
    run
}

/// The DCTCP receiver echoes each CE mark exactly (ECE mirrors the CE state
/// of the data, with the delayed-ACK handling of the CE state machine), so
/// the sender sees about the marked share; an RFC 3168 receiver holds ECE
/// until CWR, so the sender sees far more. And DCTCP cuts by alpha/2 rather
/// than halving, so under light marking its window stays several times
/// larger than cubic's.
#[test]
fn dctcp_echoes_ce_exactly_and_keeps_its_window_under_light_marking() {
    let name = "dctcp_echoes_ce_exactly_and_keeps_its_window_under_light_marking";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss", "clang", "tc"]) {
        return;
    }
    let _serial = serial();
    let dctcp = marked_transfer(CongestionControl::Dctcp, 10);
    let cubic = marked_transfer(CongestionControl::Named("cubic".into()), 10);

    assert!(
        (0.004..0.03).contains(&dctcp.ce_share),
        "{}: {:.3} % of deliveries CE-echoed with 1 % marked",
        dctcp.cc,
        100.0 * dctcp.ce_share
    );
    assert!(
        cubic.ce_share > 0.03,
        "cubic (RFC 3168 echo): only {:.3} % CE-echoed",
        100.0 * cubic.ce_share
    );
    assert!(
        dctcp.mean_cwnd > 2 * cubic.mean_cwnd,
        "mean sampled cwnd {} {} vs cubic {}",
        dctcp.cc,
        dctcp.mean_cwnd,
        cubic.mean_cwnd
    );
}

/// Like the kernel's dctcp, bpf_dctcp falls back to Reno without ECT when
/// the peer does not negotiate ECN.
#[test]
fn dctcp_falls_back_to_reno_when_the_peer_refuses_ecn() {
    let name = "dctcp_falls_back_to_reno_when_the_peer_refuses_ecn";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = serial();
    let mut t = TestTopo::new(2);
    t.bridge_all();
    run_ok(&mut t.hosts[1].exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.tcp_ecn=0",
        "net.ipv4.tcp_congestion_control=reno",
    ]));
    let (samples, _) = transfer(&mut t);
    let ss = data_conn(&samples[4]).expect("the bulk connection in ss output");
    // "reno" for bpf_dctcp, "dctcp-reno" for the kernel's dctcp.
    assert!(ss.contains("reno "), "{ss}");
    assert!(!ss.contains(" ecn "), "{ss}");
    assert!(!ss.contains(&format!(" {} ", t.cc)), "{ss}");
}

#[test]
fn test_topo_is_removed_when_the_test_panics() {
    if skip_unless_root("test_topo_is_removed_when_the_test_panics") {
        return;
    }
    let _serial = serial();
    let prefix = std::sync::Mutex::new(String::new());
    let result = std::panic::catch_unwind(|| {
        let mut t = TestTopo::new(2);
        t.bridge_all();
        *prefix.lock().unwrap() = t.prefix.clone();
        t.spawn(0, &["sleep", "30"]);
        panic!("deliberate");
    });
    assert!(result.is_err());
    let prefix = prefix.into_inner().unwrap();
    assert!(!prefix.is_empty());
    assert!(leftovers(&prefix).is_empty(), "{:?}", leftovers(&prefix));
    assert!(!std::path::Path::new("/sys/class/net")
        .join(format!("{prefix}br"))
        .exists());
    assert!(!topo::list().iter().any(|r| r.prefix == prefix));
}

/// `down` needs nothing but the prefix: the process that ran `up` may be
/// gone (here: its `Topology` is leaked, as in a crash).
#[test]
fn down_works_from_the_prefix_alone_after_a_crash() {
    if skip_unless_root("down_works_from_the_prefix_alone_after_a_crash") {
        return;
    }
    let _serial = serial();
    let cfg = TopoConfig {
        prefix: common::unique_prefix(),
        hosts: 3,
        ..TopoConfig::default()
    };
    let t = topo::up(&cfg).unwrap();
    std::mem::forget(t);
    assert_eq!(leftovers(&cfg.prefix).len(), 6);
    assert!(topo::list()
        .iter()
        .any(|r| r.prefix == cfg.prefix && r.hosts == 3));
    let report = topo::down(&cfg.prefix).unwrap();
    assert_eq!(report.namespaces.len(), 3, "{report}");
    assert_eq!(report.links.len(), 3, "{report}");
    assert!(leftovers(&cfg.prefix).is_empty());
    assert!(topo::down(&cfg.prefix).unwrap().is_empty());
}

/// The struct_ops DCTCP loads with libbpf-rs (no bpftool, no clang at run
/// time), registers through a BPF link that outlives this call by its pin,
/// and unregisters when the pin is removed. Under a name of its own, so it
/// does not collide with a `bpf_dctcp` another topology registered.
#[test]
fn struct_ops_dctcp_registers_by_a_pinned_link_and_unpinning_unregisters_it() {
    let name = "struct_ops_dctcp_registers_by_a_pinned_link_and_unpinning_unregisters_it";
    if skip_unless_root(name) {
        return;
    }
    let _serial = serial();
    let cc = format!("ss_dctcp_{}", std::process::id() % 100_000);
    let pin = std::path::PathBuf::from(format!("/sys/fs/bpf/softswitch/test_{cc}"));
    struct Unpin(std::path::PathBuf);
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    topo::register_struct_ops_as(&cc, &pin).expect("load and register the BPF DCTCP");
    let _unpin = Unpin(pin.clone());
    assert!(pin.exists());
    assert!(
        available_cc().split_whitespace().any(|n| n == cc),
        "{}",
        available_cc()
    );
    std::fs::remove_file(&pin).unwrap();
    // The link's last reference is gone: the kernel unregisters it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while available_cc().split_whitespace().any(|n| n == cc) {
        assert!(
            std::time::Instant::now() < deadline,
            "{cc} still registered after unpinning"
        );
        sleep(Duration::from_millis(50));
    }
}

/// `down` returns only once the kernel has dropped the `bpf_dctcp` it
/// unregistered, so an `up` right after it never picks a congestion control
/// that is about to vanish ("sysctl net.ipv4.tcp_congestion_control=bpf_dctcp:
/// No such file or directory", which failed the suite on fresh machines).
/// Back-to-back cycles in one process, as the tests that build one topology
/// after another do.
#[test]
fn up_right_after_down_selects_dctcp_every_time() {
    let name = "up_right_after_down_selects_dctcp_every_time";
    if skip_unless_root(name) {
        return;
    }
    let _serial = serial();
    for cycle in 0..8 {
        let t = TestTopo::new(1);
        let cc = t.cc.clone();
        assert!(cc == "bpf_dctcp" || cc == "dctcp", "cycle {cycle}: {cc}");
        let t0 = std::time::Instant::now();
        let report = t.down();
        let took = t0.elapsed();
        if report.unregistered.is_some() {
            assert!(
                !available_cc()
                    .split_whitespace()
                    .any(|n| n == topo::BPF_DCTCP),
                "cycle {cycle}: down unregistered bpf_dctcp but it is still listed: {}",
                available_cc()
            );
            eprintln!("{name}: cycle {cycle}: down (with unregister) took {took:?}");
        }
    }
}

/// `name:<number>` in an ss info line as a float (`rto:800.5`).
fn float_field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name))
        .and_then(|v| v.parse().ok())
}

/// Where a SYN goes and is never answered: an address of the topology's
/// subnet that no host has, with a permanent neighbour entry so the SYN is
/// sent (into an unbridged veth) instead of waiting for ARP.
const BLACKHOLE: &str = "10.99.0.200";

fn blackhole(h: &topo::Host) {
    run_ok(&mut h.exec(&[
        "ip",
        "neigh",
        "replace",
        BLACKHOLE,
        "lladdr",
        "02:00:00:00:00:c8",
        "dev",
        "eth0",
        "nud",
        "permanent",
    ]));
}

/// Connects from inside `h`'s namespace to the blackhole, giving up after
/// `wait`, on a thread of its own.
fn syn_into_blackhole(h: &topo::Host, wait: Duration) -> std::thread::JoinHandle<()> {
    let ns = h.ns.clone();
    let to: std::net::SocketAddr = format!("{BLACKHOLE}:9").parse().unwrap();
    std::thread::spawn(move || {
        let r = topo::netns::in_netns(&ns, || {
            Ok(std::net::TcpStream::connect_timeout(&to, wait).is_ok())
        });
        assert_eq!(r.ok(), Some(false), "a connect to {to} in {ns} succeeded");
    })
}

/// `topo up --dilation 4` sets every host timer it claims, in every host
/// namespace and only there: the sysctls read back ×4, each namespace's
/// cookie in the sock_ops program's map, a SYN's initial RTO of 4 s that
/// retransmits after 4 s (an undilated topology up at the same time keeps
/// Linux's 1 s), RTO_min 4 × 200 ms on an established connection, the
/// SYN-ACK's timer set too; and `down` takes the namespaces out of the map
/// and the last one removes the pins and the program. Run it twice in a
/// row: its first check catches what an earlier run left behind.
#[test]
fn dilated_hosts_stretch_their_timers_and_down_removes_the_sockops_program() {
    let name = "dilated_hosts_stretch_their_timers_and_down_removes_the_sockops_program";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = serial();
    use softswitch::timebase::Dilation;
    use softswitch::topo::dilation::{self, DILATION_LINK_PIN, DILATION_MAP_PIN};
    let pinned = || {
        [DILATION_LINK_PIN, DILATION_MAP_PIN]
            .iter()
            .filter(|p| std::path::Path::new(p).exists())
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
    };
    if topo::list().is_empty() {
        assert!(
            pinned().is_empty(),
            "left by an earlier run: {:?}",
            pinned()
        );
    }
    let d4 = Dilation::new(4.0).unwrap();
    let mut dilated = TestTopo::with(|c| {
        c.hosts = 2;
        c.dilation = d4;
        c.rto_min = None;
    });
    let plain = TestTopo::new(1);
    assert!(pinned().len() == 2, "pins: {:?}", pinned());
    let map_id = dilation::pinned_map_id().expect("the pinned map's id");

    // Every sysctl it claims, read back in each namespace; the undilated
    // namespace keeps Linux's.
    let want = topo::HostTimers::new(d4, None);
    let cookie = |h: &topo::Host| topo::netns::netns_cookie(&h.ns).unwrap();
    for h in &dilated.hosts {
        for s in want.sysctls() {
            assert_eq!(sysctl_in(h, &s.key), s.value, "{} in {}", s.key, h.ns);
        }
        let (syn_rto_us, _) = dilation::lookup_netns(cookie(h))
            .unwrap()
            .unwrap_or_else(|| panic!("{} is not in the map", h.ns));
        assert_eq!(syn_rto_us, 4_000_000, "{}", h.ns);
    }
    assert_eq!(want.sysctls()[0].value, "800000");
    assert_eq!(
        sysctl_in(&plain.hosts[0], "net.ipv4.tcp_rto_min_us"),
        "200000"
    );
    assert_eq!(
        dilation::lookup_netns(cookie(&plain.hosts[0])).unwrap(),
        None
    );

    // Behaviour: a SYN into a blackhole in each topology at once. Its
    // initial RTO (ss) and its first retransmission (TcpExt:TCPSynRetrans).
    let (dh, ph) = (&dilated.hosts[0], &plain.hosts[0]);
    blackhole(dh);
    blackhole(ph);
    let before = [
        tcp_ext_counter(dh, "TCPSynRetrans"),
        tcp_ext_counter(ph, "TCPSynRetrans"),
    ];
    let t0 = std::time::Instant::now();
    let conns = [
        syn_into_blackhole(dh, Duration::from_secs(6)),
        syn_into_blackhole(ph, Duration::from_secs(6)),
    ];
    sleep(Duration::from_millis(200));
    for (h, rto_ms) in [(dh, 4000.0), (ph, 1000.0)] {
        let ss = run_ok(&mut h.exec(&["ss", "-tinH", "state", "syn-sent", "dst", BLACKHOLE]));
        let rto = float_field(&ss, "rto:");
        assert_eq!(rto, Some(rto_ms), "SYN's RTO in {}: {ss}", h.ns);
    }
    let mut first: [Option<Duration>; 2] = [None, None];
    while t0.elapsed() < Duration::from_secs(6) && first.iter().any(Option::is_none) {
        for (i, h) in [dh, ph].into_iter().enumerate() {
            if first[i].is_none() && tcp_ext_counter(h, "TCPSynRetrans") > before[i] {
                first[i] = Some(t0.elapsed());
            }
        }
        sleep(Duration::from_millis(20));
    }
    for c in conns {
        c.join().unwrap();
    }
    eprintln!(
        "{name}: first SYN retransmission: D = 4 after {:?}, D = 1 after {:?}",
        first[0], first[1]
    );
    let (dil, undil) = (
        first[0].expect("no SYN retransmission at D = 4"),
        first[1].unwrap(),
    );
    assert!(
        (Duration::from_millis(3_900)..Duration::from_millis(5_000)).contains(&dil),
        "D = 4: first SYN retransmission after {dil:?}, expected ~4 s"
    );
    assert!(
        (Duration::from_millis(900)..Duration::from_millis(2_000)).contains(&undil),
        "D = 1: first SYN retransmission after {undil:?}, expected ~1 s"
    );
    let (_, answered_h1) = dilation::lookup_netns(cookie(dh)).unwrap().unwrap();
    assert!(answered_h1 >= 1, "the program never answered for {}", dh.ns);

    // An established connection: RTO_min 800 ms (rto = srtt + RTO_min
    // here); the SYN-ACK's timer was set in the server's namespace.
    dilated.bridge_all();
    let server_ip = dilated.hosts[1].ip.to_string();
    let client = dilated.iperf_start(0, 1, 5201, 2, &[]);
    sleep(Duration::from_millis(1_000));
    let ss = run_ok(&mut dilated.hosts[0].exec(&["ss", "-tinH", "dst", &server_ip]));
    dilated.wait(client, Duration::from_secs(15));
    let conn = data_conn(&ss).expect("the bulk connection in ss output");
    let rto = float_field(&conn, "rto:").expect("rto in ss");
    assert!((800.0..900.0).contains(&rto), "rto {rto} ms: {conn}");
    let (_, answered_h2) = dilation::lookup_netns(cookie(&dilated.hosts[1]))
        .unwrap()
        .unwrap();
    assert!(
        answered_h2 >= 2,
        "SYN-ACKs of iperf3's two connections: {answered_h2}"
    );

    // down: the first takes its namespaces out of the map, the program
    // stays for the undilated topology; the last removes pins and program.
    let cookies: Vec<u64> = dilated.hosts.iter().map(cookie).collect();
    let prefixes = [dilated.prefix.clone(), plain.prefix.clone()];
    let report = dilated.down();
    for c in &cookies {
        assert_eq!(dilation::lookup_netns(*c).unwrap(), None, "{report}");
    }
    assert!(!report.dilation_detached, "{report}");
    assert_eq!(pinned().len(), 2);
    let report = plain.down();
    eprintln!("{name}: down: {report}");
    if topo::list().is_empty() {
        assert!(report.dilation_detached, "{report}");
        assert!(pinned().is_empty(), "{:?}", pinned());
        assert!(!dilation::map_exists(map_id), "map {map_id} outlived down");
    }
    for p in prefixes {
        assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    }
}

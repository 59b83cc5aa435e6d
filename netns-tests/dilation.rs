//! Root integration test of time dilation (`--dilation D`): the same
//! experiment at an emulated rate this machine holds undilated, run at
//! D = 1 and D = 4, gives the same emulated results — the method's proof
//! by invariance (Gupta et al., "To Infinity and Beyond: Time-Warped
//! Network Emulation", NSDI 2006; SELENA, ANCS 2014). Skipped unless root.
//!
//! The case: one long DCTCP flow h1 → h2 through a 250 Mbit/s (emulated)
//! port with DCTCP marking above K = 30 KB and 100 µs (emulated) of delay
//! on every port. At D = 4 the wire runs at 62.5 Mbit/s and the delay is
//! 400 µs of real time; the switch reports emulated times and rates.
//!
//! The hosts are dilated with the switch (`topo up --dilation D`: their
//! RTO_min, SYN RTO, SACK compression, … last D times longer) and send
//! segment by segment (`--gso-segs 1`): Linux sizes its GSO bursts to
//! ~1 ms of *real* time's data, which no timer dilation stretches
//! (BENCHMARKS.md, "Why a dilated run queued more"). For a long flow in
//! steady state the hosts' timers hardly matter; the second test,
//! [`dilated_hosts_keep_rto_bound_incast_completion_times`], is the one
//! that fails when they are not stretched. What stays undilated is the
//! hosts' own latency (their stacks and veths, tens of µs of real time:
//! 1/4 as much emulated time at D = 4), small against the 200 µs emulated
//! base RTT.
//!
//! Compared, in emulated units: goodput (iperf3's receiver bytes over its
//! real duration × D), the receiver port's median sojourn, and CE marks per
//! packet dequeued there. Each run must be sound (under 1 % of its
//! backlogged link time lost, ≥ 80 % of the rate carried); an unsound run
//! is repeated up to three times and then the test fails, saying why — a
//! machine that cannot hold the link cannot show invariance, and a pass
//! that judged nothing would hide a broken dilation. Before the hosts were
//! dilated here and the runs allowed to be inconclusive: on a loaded
//! machine (CPU pressure 67–100 %, 2026-11-25) no run was
//! faithful, and the unsound runs gave median sojourns of 700–774 µs
//! (D = 1) against 877–1139 µs (D = 4) emulated and 0.089–0.095 against
//! 0.104–0.121 marks per packet. On an idle machine (PSI 0-2 %,
//! 2026-11-25, three runs of each D, Linux's GSO): goodput 226-235 Mbit/s
//! at both D, median sojourn 729-737 vs 872-877 µs, marks per packet
//! 0.084-0.085 vs 0.096-0.097, lost 0.2-0.6 % vs 0.05-0.22 %; the D = 4
//! queue ~18 % longer, which segment-by-segment senders remove
//! (BENCHMARKS.md, "Dilation invariance through `report --compare`": 2–9 %
//! at D = 2, 4 and 8). The ±25 % bounds are a first choice.

mod common;

use std::time::Duration;

use common::{
    iperf_receiver_bps, iperf_retransmits, measure_judged, ping, run_ok, skip_unless_root,
    skip_unless_tools, stats_socket, switch_serial, tcp_ext_counter, wait_listening, CpuUse,
    CpuWatch, SwitchProc, TestTopo, Verdict,
};
use softswitch::timebase::Dilation;

/// Emulated link rate, held undilated on this machine (BENCHMARKS.md,
/// "Headroom": 500 Mbit/s holds).
const RATE: &str = "250mbit";
const RATE_BPS: f64 = 250e6;
/// Real seconds iperf3 sends (the first 2 omitted: slow start).
const SECS: u32 = 10;
/// Largest relative difference of the emulated goodputs.
const GOODPUT_BOUND: f64 = 0.10;
/// Largest relative difference of the emulated median sojourns (see the
/// module header).
const SOJOURN_BOUND: f64 = 0.25;
/// Largest relative difference of the marks per packet.
const MARKS_BOUND: f64 = 0.25;

/// What one run measured, in emulated units.
#[derive(Debug)]
struct Emulated {
    d: u32,
    /// iperf3 receiver goodput × D, bit/s.
    goodput_bps: f64,
    /// The receiver port's median sojourn, µs (emulated: the switch's own).
    p50_us: f64,
    /// CE marks per packet dequeued at the receiver port.
    marks_per_pkt: f64,
    /// The receiver port's share of backlogged link time lost (real time).
    lost: f64,
    retransmits: u64,
}

fn one_flow(d: u32) -> (Emulated, CpuUse, Verdict) {
    let mut t = TestTopo::with(|c| {
        c.hosts = 2;
        c.dilation = Dilation::new(d as f64).expect("valid D");
        c.gso_segs = Some(1);
    });
    let d_s = d.to_string();
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &[
            "--rate",
            RATE,
            "--aqm",
            "dctcp",
            "--aqm-opt",
            "k=30kb",
            "--delay",
            "100us",
            "--dilation",
            &d_s,
        ],
        &stats_socket(&t.prefix, ""),
        Duration::from_secs(90),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    let watch = CpuWatch::start(sw.pid());
    let c = t.iperf_start(0, 1, 5201, SECS, &["-O", "2", "-J"]);
    let out = t.wait(c, Duration::from_secs(SECS as u64 + 20));
    let cpu = watch.read();
    let exit = sw.stop();
    let j = exit.assert_clean();
    if d > 1 {
        assert_eq!(j["dilation"], d as f64, "the JSON states D: {j}");
        assert!(
            exit.stderr.contains(&format!("time dilation D = {d}")),
            "{}",
            exit.stderr
        );
    }
    let p = &j["ports"][1];
    let eg = &p["egress"]["port"];
    let marks: u64 = eg["marked"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, v)| v["pkts"].as_u64().unwrap_or(0))
        .sum();
    let dequeued = eg["dequeued"]["pkts"].as_u64().unwrap_or(0).max(1);
    let e = Emulated {
        d,
        goodput_bps: iperf_receiver_bps(&out) * d as f64,
        p50_us: eg["sojourn"]["p50_us"].as_f64().unwrap_or(0.0),
        marks_per_pkt: marks as f64 / dequeued as f64,
        lost: p["link"]["lost_fraction"].as_f64().unwrap_or(1.0),
        retransmits: iperf_retransmits(&out),
    };
    let verdict = Verdict::of(&j);
    eprintln!(
        "D = {}: goodput {:.1} Mbit/s emulated ({:.1} on the wire), median sojourn {:.0} us \
         emulated, {:.4} marks per packet, {} retransmits; lost {:.2} % of backlogged link time, \
         {} {}; {cpu}",
        e.d,
        e.goodput_bps / 1e6,
        e.goodput_bps / 1e6 / d as f64,
        e.p50_us,
        e.marks_per_pkt,
        e.retransmits,
        e.lost * 100.0,
        softswitch::fidelity::label(verdict.faithful),
        j["fidelity"]["reasons"],
    );
    (e, cpu, verdict)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.max(b)
}

#[test]
fn dilation_keeps_emulated_goodput_sojourn_and_marks() {
    let name = "dilation_keeps_emulated_goodput_sojourn_and_marks";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = switch_serial();
    // Each run must keep its link (lost share under the guard's 1 % limit)
    // and the port busy, or the comparison is about the machine's load. The
    // guard's other limit, no single stall over 5 ms, is not required: on
    // an idle machine (PSI 0-2 %) single 5-9 ms stalls (tx kicks, a yield,
    // the vCPU paused) came in most 10 s runs at either D, while what is
    // compared here are 10 s aggregates that one such stall moves by < 0.1 %.
    let sound = |e: &Emulated| e.lost < 0.01 && e.goodput_bps > 0.8 * RATE_BPS;
    // A run is repeated (up to 3 times) when it was unsound through the
    // machine: the switch starved of a CPU, or paused outside its loop.
    let run = |d: u32| measure_judged(&format!("{name}: D = {d}"), 3, || one_flow(d), sound);
    let (one, cpu1, guard1) = run(1);
    let (four, cpu4, guard4) = run(4);
    let both = format!("{one:?}\n{four:?}\nD = 1: {cpu1}; {guard1:?}\nD = 4: {cpu4}; {guard4:?}");
    // Runs the machine did not hold after the retries compare the machine,
    // not the emulation: the test fails and says so (the manual-clock
    // tests, dataplane::dilation_tests, judge the switch side exactly).
    assert!(
        sound(&one) && sound(&four),
        "{name}: this machine did not hold the link at D = 1 and D = 4 after the retries (a \
         run lost over 1 % of its backlogged link time or carried under 80 % of the rate), so \
         invariance could not be judged — run it again with nothing else on the machine:\n{both}"
    );
    assert!(
        one.marks_per_pkt > 0.001 && four.marks_per_pkt > 0.001,
        "DCTCP did not mark: the queue never reached K:\n{both}"
    );
    assert!(
        rel(one.goodput_bps, four.goodput_bps) <= GOODPUT_BOUND,
        "emulated goodput differs by more than {:.0} %:\n{both}",
        GOODPUT_BOUND * 100.0
    );
    assert!(
        rel(one.p50_us, four.p50_us) <= SOJOURN_BOUND,
        "emulated median sojourn differs by more than {:.0} %:\n{both}",
        SOJOURN_BOUND * 100.0
    );
    assert!(
        rel(one.marks_per_pkt, four.marks_per_pkt) <= MARKS_BOUND,
        "marks per packet differ by more than {:.0} %:\n{both}",
        MARKS_BOUND * 100.0
    );
}

// ---------------------------------------------------------------------------
// RTO-bound incast: the test that fails when the hosts' timers are not
// dilated.
//
// Four senders answer one receiver at once with 4 000 B each (three
// segments) into a 100 Mbit/s (emulated) drop-tail port with a 6 KB buffer
// (four frames): twelve segments meet four frames, and most senders lose
// one or two. A window of three segments cannot produce the three
// duplicate ACKs fast retransmit needs, so every loss comes back only by
// the retransmission timer, RTO = srtt + RTO_min with RTO_min 40 ms
// emulated: the query completion time (QCT) is governed by a host timer.
// (With 10-segment responses into a 10-frame buffer, measured here, the
// losses left holes that SACK repaired in one RTT: 2 RTOs in 8 queries.)
// Two recovery mechanisms whose constants dilation cannot stretch are
// switched off in the hosts, so that the test judges what `topo up
// --dilation` does stretch: the tail-loss probe (`tcp_early_retrans = 0`;
// its floor 2·srtt + 2 ms is a kernel constant) and RACK
// (`tcp_recovery = 0`; its reordering timer adds 2 ms). The receiver ACKs
// every segment (`quickack`), the senders send segment by segment.
//
// Run at D = 1, at D = 8 with the hosts dilated (the emulated experiment),
// and at D = 8 with the switch and the generator dilated but the hosts not
// (the negative control). At D = 8 the emulated RTO is 40 ms only if the
// hosts' RTO_min is 320 ms of real time; undilated it is 40 ms real, 5 ms
// emulated, and the QCT falls accordingly. Expected: the median QCT at
// D = 8 with dilated hosts within QCT_BOUND of D = 1 (jiffy rounding adds
// up to 4 ms to the RTO at D = 1 and 0.5 ms emulated at D = 8), and the
// negative control's under CONTROL_BELOW of D = 1's, which proves the
// comparison can fail.

/// Emulated link rate: held undilated on this machine.
const INCAST_RATE: &str = "100mbit";
/// The four senders are h1..h4, the receiver h5.
const SENDERS: usize = 4;
/// Bytes per sender per query: three segments of 1448 B.
const RESPONSE: &str = "4000b";
/// The receiver's port buffer: four frames.
const BUFFER: &str = "6kb";
/// Queries per run, and their start-to-start spacing (emulated): longer
/// than a query that waits for one RTO and a backed-off one.
const QUERIES: usize = 16;
const INTERVAL: &str = "150ms";
/// The hosts' RTO_min, emulated.
const RTO_MIN_MS: u64 = 40;
/// Largest relative difference of the median QCTs at D = 1 and D = 8.
const QCT_BOUND: f64 = 0.25;
/// The negative control's median QCT must be below this share of D = 1's.
const CONTROL_BELOW: f64 = 0.5;
/// Attempts per run while the fidelity guard calls it unfaithful.
const ATTEMPTS: usize = 3;

/// What one incast run measured (emulated µs).
#[derive(Debug)]
struct IncastRun {
    label: String,
    /// Every query's completion time.
    qcts_us: Vec<u64>,
    /// Their median.
    median_us: u64,
    /// RTOs of the senders (`TcpExtTCPTimeouts`).
    rtos: u64,
    /// Tail-loss probes of the senders (`TcpExtTCPLossProbes`): none, with TLP off.
    loss_probes: u64,
    /// Packets the switch dropped.
    drops: u64,
    verdict: Verdict,
}

fn senders_counter(t: &TestTopo, name: &str) -> u64 {
    t.hosts[..SENDERS]
        .iter()
        .map(|h| tcp_ext_counter(h, name))
        .sum()
}

/// Packets the switch dropped, from its exit JSON.
fn switch_drops(j: &serde_json::Value) -> u64 {
    j["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| {
            p["egress"]["port"]["dropped"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, v)| v["pkts"].as_u64().unwrap_or(0))
        })
        .sum()
}

/// One run: the hosts at `host_d`, the switch and the generators at `d`.
fn incast_run(label: &str, d: u32, host_d: u32) -> IncastRun {
    let mut t = TestTopo::with(|c| {
        c.hosts = SENDERS + 1;
        c.dilation = Dilation::new(host_d as f64).expect("valid D");
        c.rto_min = Some(Duration::from_millis(RTO_MIN_MS));
        c.quickack = true;
        c.gso_segs = Some(1);
    });
    for h in &t.hosts {
        run_ok(&mut h.exec(&[
            "sysctl",
            "-qw",
            "net.ipv4.tcp_early_retrans=0",
            "net.ipv4.tcp_recovery=0",
        ]));
    }
    let d_s = d.to_string();
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &[
            "--rate",
            INCAST_RATE,
            "--aqm",
            "droptail",
            "--buffer",
            BUFFER,
            "--dilation",
            &d_s,
        ],
        &stats_socket(&t.prefix, ""),
        Duration::from_secs(120),
    );
    let receiver = SENDERS;
    for s in 0..SENDERS {
        ping(&t.hosts[receiver], t.hosts[s].ip);
    }
    let tg = env!("CARGO_BIN_EXE_softswitch-tg");
    for s in 0..SENDERS {
        t.spawn(s, &[tg, "--dilation", &d_s, "server", "--port", "5001"]);
        wait_listening(&t.hosts[s], 5001);
    }
    let servers: Vec<String> = t.hosts[..SENDERS]
        .iter()
        .map(|h| format!("{}:5001", h.ip))
        .collect();
    let dir = std::env::temp_dir().join(format!("softswitch-dilation-{}", t.prefix));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let file = |n: &str| dir.join(n).display().to_string();
    let (json, flows, queries) = (file("incast.json"), file("flows.txt"), file("queries.txt"));
    let (rtos0, tlp0) = (
        senders_counter(&t, "TCPTimeouts"),
        senders_counter(&t, "TCPLossProbes"),
    );
    let n = QUERIES.to_string();
    let client = t.spawn(
        receiver,
        &[
            tg,
            "--dilation",
            &d_s,
            "incast",
            "--servers",
            &servers.join(","),
            "--size",
            RESPONSE,
            "--queries",
            &n,
            "--interval",
            INTERVAL,
            "--fresh",
            "--json",
            &json,
            "--out",
            &flows,
            "--qct-out",
            &queries,
        ],
    );
    t.wait(client, Duration::from_secs(90));
    let rtos = senders_counter(&t, "TCPTimeouts") - rtos0;
    let loss_probes = senders_counter(&t, "TCPLossProbes") - tlp0;
    let exit = sw.stop();
    let j = exit.assert_clean();
    let text = std::fs::read_to_string(&json);
    let _ = std::fs::remove_dir_all(&dir);
    let report: serde_json::Value =
        serde_json::from_str(&text.expect("incast JSON")).expect("incast JSON parses");
    let qcts_us: Vec<u64> = report["report"]["queries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| q["qct_us"].as_u64())
        .collect();
    assert!(
        report["report"]["error"].is_null() && qcts_us.len() == QUERIES,
        "{label}: the incast did not complete: {}",
        report["report"]
    );
    let mut sorted = qcts_us.clone();
    sorted.sort_unstable();
    let r = IncastRun {
        label: label.to_owned(),
        median_us: sorted[sorted.len() / 2],
        qcts_us,
        rtos,
        loss_probes,
        drops: switch_drops(&j),
        verdict: Verdict::of(&j),
    };
    eprintln!(
        "{label}: median QCT {:.1} ms emulated (all, ms: {:?}), {} RTOs, {} TLPs, {} drops at \
         the switch; {} {:?}",
        r.median_us as f64 / 1e3,
        r.qcts_us.iter().map(|q| q / 1_000).collect::<Vec<_>>(),
        r.rtos,
        r.loss_probes,
        r.drops,
        softswitch::fidelity::label(r.verdict.faithful),
        r.verdict.reasons,
    );
    r
}

/// [`incast_run`] until the fidelity guard calls it faithful, at most
/// [`ATTEMPTS`] times; then fails, naming the guard's reasons.
fn faithful_incast_run(label: &str, d: u32, host_d: u32) -> IncastRun {
    let mut attempt = 1;
    loop {
        let r = incast_run(label, d, host_d);
        if r.verdict.faithful {
            return r;
        }
        assert!(
            attempt < ATTEMPTS,
            "{label}: NOT FAITHFUL in {ATTEMPTS} attempts ({:?}): this machine did not hold the \
             {INCAST_RATE} port, so the run cannot judge the hosts' timers — run it again with \
             nothing else on the machine",
            r.verdict.reasons
        );
        eprintln!("{label}: attempt {attempt} of {ATTEMPTS} NOT FAITHFUL, once more");
        attempt += 1;
    }
}

#[test]
fn dilated_hosts_keep_rto_bound_incast_completion_times() {
    let name = "dilated_hosts_keep_rto_bound_incast_completion_times";
    if skip_unless_root(name) || skip_unless_tools(name, &["ping", "sysctl", "ss"]) {
        return;
    }
    if softswitch::topo::dilation::DILATION_BPF_OBJECT.is_empty() {
        eprintln!(
            "SKIP {name}: this build has no time-dilation sock_ops program (clang and bpftool \
             were missing at build time: `sudo scripts/setup.sh`, then rebuild)"
        );
        return;
    }
    let _serial = switch_serial();
    let one = faithful_incast_run("D = 1", 1, 1);
    let eight = faithful_incast_run("D = 8, hosts dilated", 8, 8);
    let control = faithful_incast_run("D = 8, hosts NOT dilated (negative control)", 8, 1);
    let all = format!("{one:?}\n{eight:?}\n{control:?}");
    // The case must be what it claims: drops at the switch, recovered by
    // RTOs, no tail-loss probe.
    for r in [&one, &eight, &control] {
        assert!(
            r.drops > 0 && r.rtos > 0,
            "{}: no drop or no RTO — the incast is not RTO-bound:\n{all}",
            r.label
        );
        assert_eq!(
            r.loss_probes, 0,
            "{}: TLP is off in the hosts:\n{all}",
            r.label
        );
    }
    // An RTO of 40 ms emulated sets the typical query's time.
    assert!(
        one.median_us >= RTO_MIN_MS * 1_000,
        "D = 1: median QCT {} us is below RTO_min: most queries did not wait for an RTO:\n{all}",
        one.median_us
    );
    let rel = (eight.median_us as f64 - one.median_us as f64).abs()
        / (one.median_us.max(eight.median_us) as f64);
    assert!(
        rel <= QCT_BOUND,
        "the median QCT at D = 8 with dilated hosts ({} us) differs from D = 1's ({} us) by \
         {:.0} % > {:.0} %:\n{all}",
        eight.median_us,
        one.median_us,
        rel * 100.0,
        QCT_BOUND * 100.0
    );
    assert!(
        (control.median_us as f64) < CONTROL_BELOW * one.median_us as f64,
        "the negative control (hosts not dilated) did not differ: median QCT {} us against {} us \
         at D = 1 — the comparison above cannot tell dilated hosts from undilated ones:\n{all}",
        control.median_us,
        one.median_us
    );
}

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
//! Only the switch is dilated here: the hosts' timers (RTO_min, delayed
//! ACKs, the initial RTO, TLP) stay in real time. For a long flow in steady
//! state they do not matter — DCTCP's marking keeps the queue below the
//! buffer, so no loss fires a retransmission timer, the receiver ACKs every
//! second segment of a stream without waiting for its delayed-ACK timer,
//! and DCTCP's α update and TCP's pacing follow the RTT, which is dilated
//! with the switch. What stays undilated is the hosts' own latency (their
//! stacks and veths, tens of µs of real time: 1/4 as much emulated time at
//! D = 4), small against the 200 µs emulated base RTT.
//!
//! Compared, in emulated units: goodput (iperf3's receiver bytes over its
//! real duration × D), the receiver port's median sojourn, and CE marks per
//! packet dequeued there. Each run must be faithful: on a loaded machine
//! (CPU pressure 67–100 %, 2026-11-25) no run was, the test failed as it
//! should, and the unsound runs gave median sojourns of 700–774 µs
//! (D = 1) against 877–1139 µs (D = 4) emulated and 0.089–0.095 against
//! 0.104–0.121 marks per packet. A third run, on a quieter machine (PSI
//! 61–70 %), came close: D = 4 was faithful in all but its lost share
//! (1.33–2.72 %), D = 1 likewise (1.31–4.34 %), and the emulated numbers
//! were tight within each D — goodput 184–229 vs 229–233 Mbit/s, median
//! sojourn 717–741 vs 872–877 µs, 0.087–0.092 vs 0.098–0.099 marks per
//! packet: D = 4 runs ~18 % longer queues, consistently. The cause, found
//! on 2026-11-27, is the hosts' GSO sizing: Linux puts ~1 ms of real time's
//! data at the pacing rate into one GSO packet, so at D = 4 the bursts are
//! 4 times smaller; with segment-by-segment senders (`--gso-segs 1`) the
//! gap closes (BENCHMARKS.md, "Why a dilated run queued more"). The ±25 % bounds are a
//! first choice, to be set from repeated runs on an idle machine. On an
//! idle machine (PSI 0-2 %, 2026-11-25, three runs of each D): goodput
//! 226-235 Mbit/s at both D, median sojourn 729-737 vs 872-877 µs, marks
//! per packet 0.084-0.085 vs 0.096-0.097, lost 0.2-0.6 % vs 0.05-0.22 %;
//! the D = 4 queue ~18 % longer again. Runs count as sound by their lost
//! share, not the whole verdict (see the test).

mod common;

use std::time::Duration;

use common::{
    iperf_receiver_bps, iperf_retransmits, measure_judged, ping, skip_unless_root,
    skip_unless_tools, stats_socket, switch_serial, CpuUse, CpuWatch, SwitchProc, TestTopo,
    Verdict,
};

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
    let mut t = TestTopo::new(2);
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
    // Runs the machine did not hold (the guard's lost link time over its
    // limit, after the retries) compare the machine, not the emulation:
    // the test cannot judge invariance then, and says so loudly. The
    // manual-clock tests (dataplane::dilation_tests) judge it exactly.
    if !(sound(&one) && sound(&four)) {
        eprintln!(
            "{name}: INCONCLUSIVE — this machine did not hold the link at D = 1 and D = 4 \
             (a run lost over 1 % of its backlogged link time or carried under 80 % of the \
             rate), so invariance could not be judged:\n{both}"
        );
        return;
    }
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

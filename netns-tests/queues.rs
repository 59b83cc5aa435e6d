//! Root integration tests of the switch's multi-queue egress: two traffic
//! classes (DSCP 0 and DSCP 8) from two senders into one 500 Mbit/s port,
//! shared by DWRR or by strict priority. Skipped unless root.

mod common;

use std::time::Duration;

use common::{
    iperf_receiver_bps, iperf_retransmits, measure, ping, skip_unless_root, skip_unless_tools,
    stats_socket, switch_serial, CpuUse, CpuWatch, SwitchProc, TestTopo,
};

/// Seconds each class sends.
const SECS: u32 = 10;
/// The port's rate. 500 Mbit/s, not the testbeds' 1 Gbit/s: these tests are
/// about the scheduler's shares, and on 2 vCPUs (one busy-polling switch,
/// three hosts' TCP) the five senders do not keep both queues of a
/// 1 Gbit/s port backlogged — measured on an idle machine: the port at
/// 86–88 %, the single flow's queue empty often enough that DWRR gave it
/// 31 % and SP's low queue 11 % (BENCHMARKS.md, "Headroom").
const RATE: &str = "500mbit";
const RATE_BPS: f64 = 500e6;

/// What one two-class run measured.
#[derive(Debug)]
struct Shares {
    /// Goodput of class A (h1, 1 flow, TOS 0x20 = DSCP 8), bit/s.
    a_bps: f64,
    /// Goodput of class B (h2, 4 flows, DSCP 0), bit/s.
    b_bps: f64,
    /// Bytes the receiver's port dequeued from queue 0 and queue 1.
    queue_bytes: [u64; 2],
    /// TCN marks (sojourn over the threshold) in queue 0 and queue 1: > 0
    /// shows the queue was backlogged, i.e. the scheduler had a choice.
    queue_marks: [u64; 2],
}

impl Shares {
    fn a_share(&self) -> f64 {
        self.a_bps / (self.a_bps + self.b_bps)
    }
    fn queue1_share(&self) -> f64 {
        self.queue_bytes[1] as f64 / (self.queue_bytes[0] + self.queue_bytes[1]).max(1) as f64
    }
    /// Class A's goodput as a share of the port's rate.
    fn a_of_port(&self) -> f64 {
        self.a_bps / RATE_BPS
    }
    /// Queue 1's dequeued bytes as a share of what the port can send in
    /// class A's transfer (`SECS` plus iperf3's omitted first second).
    fn queue1_of_port(&self) -> f64 {
        self.queue_bytes[1] as f64 * 8.0 / (RATE_BPS * (SECS + 1) as f64)
    }
}

/// h1 (class A: 1 flow, `-S 0x20`) and h2 (class B: `-P 4`, DSCP 0) send
/// to h3 at once for [`SECS`] s through a switch whose ports run `sched`
/// over 2 queues with DSCP 8 → queue 1 (DSCP 0 → queue 0).
fn two_classes(sched: &[&str]) -> (Shares, CpuUse) {
    let mut t = TestTopo::new(3);
    let mut args = vec![
        "--rate",
        RATE,
        "--queues",
        "2",
        "--aqm",
        "tcn",
        "--dscp-map",
        "0=0,8=1",
    ];
    args.extend_from_slice(sched);
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &args,
        &stats_socket(&t.prefix, ""),
        Duration::from_secs(60),
    );
    ping(&t.hosts[0], t.hosts[2].ip);
    ping(&t.hosts[1], t.hosts[2].ip);
    let watch = CpuWatch::start(sw.pid());
    let ca = t.iperf_start(0, 2, 5201, SECS, &["-O", "1", "-J", "-S", "0x20"]);
    let cb = t.iperf_start(1, 2, 5202, SECS, &["-O", "1", "-J", "-P", "4"]);
    let timeout = Duration::from_secs(SECS as u64 + 20);
    let out_a = t.wait(ca, timeout);
    let out_b = t.wait(cb, timeout);
    let cpu = watch.read();
    let exit = sw.stop();
    let j = exit.assert_clean();
    let q = &j["ports"][2]["egress"]["queues"];
    let bytes = |i: usize| {
        q[i]["dequeued"]["bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("no ports[2].egress.queues[{i}].dequeued.bytes in {j}"))
    };
    let marks = |i: usize| {
        q[i]["marked"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, v)| v["pkts"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let s = Shares {
        a_bps: iperf_receiver_bps(&out_a),
        b_bps: iperf_receiver_bps(&out_b),
        queue_bytes: [bytes(0), bytes(1)],
        queue_marks: [marks(0), marks(1)],
    };
    eprintln!(
        "{sched:?}: class A (q1, 1 flow) {:.1} Mbit/s, {} retx; class B (q0, 4 flows) {:.1} Mbit/s, {} retx; \
         A share {:.1} %, port {:.0} % of {RATE}; switch q0 {} B q1 {} B (q1 share {:.1} %); port 2 drops {} marks {}; {cpu}",
        s.a_bps / 1e6,
        iperf_retransmits(&out_a),
        s.b_bps / 1e6,
        iperf_retransmits(&out_b),
        s.a_share() * 100.0,
        (s.a_bps + s.b_bps) / RATE_BPS * 100.0,
        s.queue_bytes[0],
        s.queue_bytes[1],
        s.queue1_share() * 100.0,
        j["ports"][2]["egress"]["port"]["dropped"],
        j["ports"][2]["egress"]["port"]["marked"],
    );
    (s, cpu)
}

#[test]
fn dwrr_shares_two_classes() {
    let name = "dwrr_shares_two_classes";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = switch_serial();
    // Equal quanta: each class half the port, although B has 4 flows to A's 1.
    let fair =
        |s: &Shares| (0.4..=0.6).contains(&s.a_share()) && (0.4..=0.6).contains(&s.queue1_share());
    let (s, cpu) = measure(name, 3, || two_classes(&["--sched", "dwrr"]), fair);
    // Both queues were backlogged (marked), so DWRR, not the senders, set
    // the shares. (The total is printed, not asserted: on 2 vCPUs the
    // busy-polling switch, five flows and three hosts' softirqs share the
    // CPUs and the port is rarely kept at line rate; see the report.)
    assert!(
        s.queue_marks[0] > 0 && s.queue_marks[1] > 0 && s.a_bps + s.b_bps > 200e6,
        "DWRR: the port was not congested by both classes: {s:?}; {cpu}"
    );
    assert!(
        (0.4..=0.6).contains(&s.a_share()),
        "DWRR: class A got {:.1} % (expected 50 ± 10 %): {s:?}; {cpu}",
        s.a_share() * 100.0
    );
    // The switch's own per-queue bytes (whole run, incl. slow start) agree.
    assert!(
        (0.4..=0.6).contains(&s.queue1_share()),
        "DWRR: queue 1 dequeued {:.1} % of the bytes: {s:?}; {cpu}",
        s.queue1_share() * 100.0
    );
}

#[test]
fn strict_priority_queue_takes_the_port() {
    let name = "strict_priority_queue_takes_the_port";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3", "ss"]) {
        return;
    }
    let _serial = switch_serial();
    // Queue 0 (class B, DSCP 0, 4 flows) strictly above queue 1.
    let b_wins = |s: &Shares| 1.0 - s.a_share() >= 0.9 && 1.0 - s.queue1_share() >= 0.9;
    let (s, cpu) = measure(
        name,
        3,
        || two_classes(&["--sched", "sp", "--strict", "0"]),
        b_wins,
    );
    assert!(
        1.0 - s.a_share() >= 0.9,
        "SP: strict queue 0 (class B) got only {:.1} %: {s:?}; {cpu}",
        (1.0 - s.a_share()) * 100.0
    );
    assert!(
        1.0 - s.queue1_share() >= 0.9,
        "SP: switch dequeued only {:.1} % from strict queue 0: {s:?}; {cpu}",
        (1.0 - s.queue1_share()) * 100.0
    );
    // And the other way round: the single flow of class A in the strict
    // queue 1 must beat the 4 flows of class B by far (DWRR would give it
    // half). The starved low queue would otherwise fill the whole shared
    // buffer and make the strict flow lose packets at admission (a real
    // shared-buffer switch does the same), so each queue may hold at most
    // half the buffer. Bound: 75 %, not 90 %: one sender process and its
    // softirq share 2 vCPUs with the switch, the receiver and 4 other flows,
    // and one flow alone does not always keep its queue backlogged (measured
    // 77–93 %); the 90 % requirement is checked above with 4 flows.
    //
    // Here A's share is of the port, not of A + B: class B's iperf3 control
    // connection is in the starved queue 0, so B's transfer can run seconds
    // outside A's, alone on the port, and its rate covers another window
    // (seen: A 469 Mbit/s, B 175 Mbit/s, "129 % of the port"; the port
    // dequeued 14.4 s of its rate in A's 11 s transfer). Class B must
    // still have contended: its queue was backlogged (marked).
    let a_wins = |s: &Shares| s.a_of_port() >= 0.75 && s.queue1_of_port() >= 0.75;
    let (s, cpu) = measure(
        name,
        3,
        || two_classes(&["--sched", "sp", "--strict", "1,0", "--queue-limit", "48kb"]),
        a_wins,
    );
    assert!(
        s.queue_marks[0] > 0,
        "SP: class B's queue 0 was never backlogged, so nothing contended with A: {s:?}; {cpu}"
    );
    assert!(
        s.a_of_port() >= 0.75,
        "SP: strict queue 1 (class A, 1 flow) got only {:.1} % of the port: {s:?}; {cpu}",
        s.a_of_port() * 100.0
    );
    assert!(
        s.queue1_of_port() >= 0.75,
        "SP: switch dequeued from strict queue 1 only {:.1} % of what the port sends in A's transfer: {s:?}; {cpu}",
        s.queue1_of_port() * 100.0
    );
}

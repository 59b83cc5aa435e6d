//! The port with the per-flow classifier (DiffECN's QMU, `flowmap`) and the
//! DiffECN SMU: clock-driven scenarios and random operation sequences.

use super::tests::{header_ok, tcp_frame};
use super::*;
use crate::aqm::diffecn::{self, DiffEcn};
use crate::packet::VecStore;
use crate::sched::{SchedConfig, SchedName};
use crate::units::{Rate, US};
use proptest::prelude::*;

fn flow_pkt(store: &mut VecStore, flow: u32, len: u32) -> Packet {
    let (bytes, mut l3) = tcp_frame(len, 0, Ecn::Ect0);
    l3.flow_hash = flow;
    Packet::new(store.insert(bytes), len, Some(l3), 0)
}

fn flow_cfg(queues: usize, rate: Rate) -> PortConfig {
    PortConfig {
        rate,
        queues,
        sched: SchedConfig::new(SchedName::SpDwrr),
        classifier: Classifier::Flow(FlowClassConfig::default()),
        ..Default::default()
    }
}

/// An AQM that does nothing.
#[derive(Debug, Default)]
struct Nothing;
impl Aqm for Nothing {}

#[test]
fn flows_get_their_own_queues_and_lose_them_when_drained() {
    let mut s = VecStore::new();
    let mut p = EgressPort::new(flow_cfg(8, Rate::from_bps(0)), Nothing, 0, 1).unwrap();
    for f in [101u32, 202, 303] {
        p.enqueue(flow_pkt(&mut s, f, 1000), 0, &mut s);
        p.enqueue(flow_pkt(&mut s, f, 1000), 0, &mut s);
    }
    let fm = p.flows().unwrap();
    assert_eq!(
        [101, 202, 303].map(|f| fm.queue_of(f, 0)),
        [Some(1), Some(2), Some(3)]
    );
    assert_eq!(p.queue_backlog(1), (2000, 2));
    assert_eq!(p.queue_backlog(0), (0, 0), "the temporary queue is unused");
    // Drain queue 1 only partly: flow 101 keeps it.
    let k = p.dequeue(1, &mut s).unwrap();
    s.take(k.frame);
    assert_eq!(p.flows().unwrap().queue_of(101, 1), Some(1));
    // Drain everything: every assignment expires.
    while let Some(k) = p.dequeue(2, &mut s) {
        s.take(k.frame);
    }
    assert_eq!(p.flows().unwrap().queue_of(101, 2), None);
    // Flow 303 comes back first and takes its old queue (still empty).
    p.enqueue(flow_pkt(&mut s, 303, 1000), 3, &mut s);
    assert_eq!(p.queue_backlog(3), (1000, 1));
    assert_eq!(p.flows().unwrap().counters().expired, 1);
    p.invariants();
    p.drain(&mut s);
    assert_eq!(s.live, 0);
}

#[test]
fn a_dropped_first_packet_does_not_claim_a_queue() {
    let mut s = VecStore::new();
    let mut p = EgressPort::new(flow_cfg(8, Rate::from_bps(0)), Nothing, 0, 1).unwrap();
    // Flow 1's first frame is too big: dropped, queue 1 stays free.
    p.enqueue(flow_pkt(&mut s, 1, 2000), 0, &mut s);
    assert_eq!(p.counters().port.dropped.total().pkts, 1);
    p.enqueue(flow_pkt(&mut s, 2, 1000), 0, &mut s);
    assert_eq!(p.queue_backlog(1), (1000, 1), "flow 2 got the free queue 1");
    p.enqueue(flow_pkt(&mut s, 1, 1000), 0, &mut s);
    assert_eq!(p.queue_backlog(2), (1000, 1), "flow 1 did not join flow 2");
    p.invariants();
    p.drain(&mut s);
    assert_eq!(s.live, 0);
}

#[test]
fn the_temporary_queue_is_served_first_and_released_by_the_pass_limit() {
    // 3 queues: temporary queue 0 and two ordinary ones, both taken.
    let mut s = VecStore::new();
    let mut cfg = flow_cfg(3, Rate::from_bps(0));
    cfg.classifier = Classifier::Flow(FlowClassConfig {
        pass_limit_bytes: 2000,
        ..Default::default()
    });
    let mut p = EgressPort::new(cfg, Nothing, 0, 1).unwrap();
    for _ in 0..3 {
        p.enqueue(flow_pkt(&mut s, 1, 1000), 0, &mut s);
    }
    for _ in 0..2 {
        p.enqueue(flow_pkt(&mut s, 2, 1000), 0, &mut s);
    }
    // Flow 3: two packets in the temporary queue, the third to the shortest (queue 2).
    for _ in 0..3 {
        p.enqueue(flow_pkt(&mut s, 3, 1000), 0, &mut s);
    }
    assert_eq!(p.queue_backlog(0), (2000, 2));
    assert_eq!(p.queue_backlog(2), (3000, 3));
    assert_eq!(p.flows().unwrap().counters().moved_pass_limit, 1);
    // Strict priority: flow 3's temporary-queue packets leave first.
    for _ in 0..2 {
        let k = p.dequeue(1, &mut s).unwrap();
        assert_eq!((k.queue, k.flow_hash()), (0, 3));
        s.take(k.frame);
    }
    p.invariants();
    p.drain(&mut s);
}

#[test]
fn config_errors_name_the_option() {
    let mut c = flow_cfg(8, Rate::gbit(1));
    c.sched = SchedConfig::new(SchedName::Dwrr);
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("--sched sp+dwrr") && e.contains("temp=none"),
        "{e}"
    );
    c.sched = SchedConfig::new(SchedName::SpDwrr);
    c.sched.strict = vec![3];
    assert!(c.validate().unwrap_err().to_string().contains("queue 3"));
    let c = flow_cfg(1, Rate::gbit(1));
    assert!(c.validate().unwrap_err().to_string().contains("at least 2"));
    // Without a temporary queue any scheduler will do.
    let mut c = flow_cfg(8, Rate::gbit(1));
    c.sched = SchedConfig::new(SchedName::Dwrr);
    c.classifier = Classifier::Flow(FlowClassConfig {
        temp_queue: false,
        ..Default::default()
    });
    c.validate().unwrap();

    let f = |s: &str| Classifier::classify_from_cli(s, Classifier::DscpMod, 300 * US);
    assert_eq!(f("dscp").unwrap(), Classifier::DscpMod);
    let Classifier::Flow(fc) = f("flow").unwrap() else {
        panic!()
    };
    assert_eq!(
        (fc.temp_queue, fc.pass_limit_bytes, fc.idle_timeout_ns),
        (true, 15_140, 300 * US)
    );
    let Classifier::Flow(fc) = f("flow, temp=none, pass-limit=3kb, timeout=1ms").unwrap() else {
        panic!()
    };
    assert_eq!(
        (fc.temp_queue, fc.pass_limit_bytes, fc.idle_timeout_ns),
        (false, 3_072, 1_000_000)
    );
    for bad in [
        "fifo",
        "flow,temp=3",
        "flow,limit=1",
        "flow,pass-limit=lots",
        "dscp,x=1",
    ] {
        let e = f(bad).unwrap_err().to_string();
        assert!(e.starts_with("--classify"), "{bad}: {e}");
    }
}

/// DiffECN paper §IV-C with a manual clock: a heavy flow (a 12-packet burst)
/// and a light one (2 packets) share a 1 Gbit/s port, each in its own
/// queue. N_flow = 2, K_p = K/2 = 3 000 B: only the heavy flow's packets
/// leave more than K_p behind in their queue and are marked.
#[test]
fn diffecn_marks_only_the_flow_above_its_share() {
    let mut s = VecStore::new();
    let aqm = DiffEcn::new(
        diffecn::Config {
            k: 6_000,
            period: 1_000 * US,
            ..Default::default()
        },
        8,
        0,
    );
    let mut p = EgressPort::new(flow_cfg(8, Rate::gbit(1)), aqm, 0, 1).unwrap();
    for _ in 0..12 {
        p.enqueue(flow_pkt(&mut s, 1, 1500), 0, &mut s);
    }
    for _ in 0..2 {
        p.enqueue(flow_pkt(&mut s, 2, 1500), 0, &mut s);
    }
    let mut marked = [0u32; 3];
    let mut sent = [0u32; 3];
    let mut now = 0;
    while p.backlog_pkts() > 0 {
        now = p.next_ready(now).unwrap().max(now);
        while let Some(k) = p.dequeue(now, &mut s) {
            let b = s.take(k.frame);
            assert!(header_ok(&b));
            let f = k.flow_hash() as usize;
            sent[f] += 1;
            if b[15] & 3 == 3 {
                marked[f] += 1;
            }
        }
    }
    assert_eq!(sent, [0, 12, 2]);
    // DWRR alternates: both flows seen by the second departure, so N = 2
    // from then on. Flow 1 leaves > 3 000 B (≥ 3 packets) behind for its
    // first 9 departures, but its first one was decided at N = 1 (K_p =
    // 6 000 B, 16 500 B behind: marked too).
    assert_eq!(marked, [0, 9, 0]);
    assert_eq!(p.aqm().n_flow(), 2);
    assert_eq!(p.counters().port.marked.total().pkts, 9);
    assert_eq!(
        p.counters()
            .port
            .marked
            .get(crate::aqm::MarkReason::Dynamic)
            .pkts,
        9
    );
    p.invariants();
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue { flow: u32, len: u32 },
    Dequeue,
    Advance(Nanos),
}

fn op(flows: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..flows, 60u32..1515).prop_map(|(flow, len)| Op::Enqueue { flow, len }),
        4 => Just(Op::Dequeue),
        1 => (1u64..200_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Any number of flows: bytes are conserved, every packet lands in a
    /// queue of the port, and a flow is placed into an occupied queue (or
    /// kept in the temporary queue) only when no ordinary queue is empty.
    #[test]
    fn per_flow_allocation_invariants(
        queues in prop_oneof![Just(8usize), Just(32), Just(128)],
        flows in 1u32..300,
        ops in prop::collection::vec(op(300), 1..400),
        temp in any::<bool>(),
        pass_limit in 0u64..20_000,
        k in 1_500u64..40_000,
        shaped in any::<bool>(),
        buffer in 3_000u64..200_000,
    ) {
        let cfg = PortConfig {
            rate: if shaped { Rate::gbit(1) } else { Rate::from_bps(0) },
            buffer_bytes: buffer,
            queues,
            sched: SchedConfig::new(SchedName::SpDwrr),
            classifier: Classifier::Flow(FlowClassConfig {
                temp_queue: temp,
                pass_limit_bytes: pass_limit,
                idle_timeout_ns: 300 * US,
            }),
            ..Default::default()
        };
        let aqm = DiffEcn::new(diffecn::Config { k, period: 200 * US, ..Default::default() }, queues, 0);
        let mut p = EgressPort::new(cfg, aqm, 0, 3).unwrap();
        let mut s = VecStore::new();
        let (mut now, mut inserted, mut sent) = (0, 0u64, 0u64);
        let ordinary = |q: usize| !(temp && q == 0);
        for op in ops {
            match op {
                Op::Enqueue { flow, len } => {
                    let hash = (flow % flows).wrapping_mul(0x9e37_79b1);
                    let before: Vec<u32> = (0..queues).map(|q| p.queue_backlog(q).1).collect();
                    let arrived: Vec<u64> = p.counters().queues.iter().map(|c| c.arrived.pkts).collect();
                    let any_empty = (0..queues).any(|q| ordinary(q) && before[q] == 0);
                    let prev = p.flows().unwrap().queue_of(hash, now);
                    p.enqueue(flow_pkt(&mut s, hash, len), now, &mut s);
                    inserted += 1;
                    let q = (0..queues)
                        .find(|&q| p.counters().queues[q].arrived.pkts != arrived[q]);
                    prop_assert!(q.is_some(), "packet counted in no queue of {}", queues);
                    let q = q.unwrap();
                    if temp && q == 0 {
                        prop_assert!(!any_empty, "kept in the temporary queue while a queue was empty");
                    }
                    if ordinary(q) && prev != Some(q) && before[q] > 0 {
                        prop_assert!(!any_empty, "placed into occupied queue {} while a queue was empty", q);
                    }
                }
                Op::Dequeue => {
                    if let Some(k) = p.dequeue(now, &mut s) {
                        prop_assert!(header_ok(&s.take(k.frame)));
                        sent += 1;
                    }
                }
                Op::Advance(dt) => {
                    now += dt;
                    p.tick(now);
                }
            }
            p.invariants();
            let c = &p.counters().port;
            prop_assert_eq!(s.live as u64, p.backlog_pkts() as u64);
            prop_assert_eq!(inserted, s.live as u64 + sent + c.dropped.total().pkts);
        }
        p.drain(&mut s);
        prop_assert_eq!(s.live, 0);
    }

    /// No more flows than ordinary queues: no queue ever holds two flows'
    /// packets (DiffECN paper §IV-B: "each active flow is allocated a separate
    /// queue"), and each queue stays FIFO.
    #[test]
    fn a_queue_per_flow_while_queues_suffice(
        queues in prop_oneof![Just(8usize), Just(32), Just(128)],
        flows in 1u32..128,
        ops in prop::collection::vec(op(128), 1..400),
        temp in any::<bool>(),
    ) {
        let ordinary_count = if temp { queues - 1 } else { queues } as u32;
        let flows = flows.min(ordinary_count);
        let mut cfg = flow_cfg(queues, Rate::gbit(1));
        cfg.buffer_bytes = 1 << 20;
        cfg.classifier = Classifier::Flow(FlowClassConfig { temp_queue: temp, ..Default::default() });
        let mut p = EgressPort::new(cfg, Nothing, 0, 3).unwrap();
        let mut s = VecStore::new();
        let mut model: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); queues];
        let mut now = 0;
        for op in ops {
            match op {
                Op::Enqueue { flow, len } => {
                    let f = flow % flows;
                    let enq = p.counters().port.enqueued.pkts;
                    let arrived: Vec<u64> = p.counters().queues.iter().map(|c| c.arrived.pkts).collect();
                    p.enqueue(flow_pkt(&mut s, f, len), now, &mut s);
                    if p.counters().port.enqueued.pkts > enq {
                        let q = (0..queues).find(|&q| p.counters().queues[q].arrived.pkts != arrived[q]).unwrap();
                        prop_assert!(!(temp && q == 0), "temporary queue used with enough queues");
                        prop_assert!(model[q].iter().all(|&g| g == f),
                            "queue {} holds flows {:?} and now {}", q, model[q], f);
                        model[q].push_back(f);
                    }
                }
                Op::Dequeue => {
                    if let Some(k) = p.dequeue(now, &mut s) {
                        s.take(k.frame);
                        prop_assert_eq!(model[k.queue as usize].pop_front(), Some(k.flow_hash()));
                    }
                }
                Op::Advance(dt) => now += dt,
            }
        }
        p.drain(&mut s);
        prop_assert_eq!(s.live, 0);
    }
}

//! Random operation sequences (enqueue, dequeue, round, idle, time passing)
//! run against every AQM through [`AqmKind`], with invariants checked after
//! every step (s2n-quic style). The queues are modelled exactly (FIFO per
//! queue, byte and packet backlog), so every `QueueCtx` the AQMs see is true.

use super::config::{AqmConfig, AqmEnv, AqmKind, AQM_NAMES};
use super::util::testutil::{ect, not_ect};
use super::{Aqm, DropReason, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{Nanos, Rate, US};
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Clone, Debug)]
enum Op {
    Enqueue { queue: usize, len: u32, ect: bool },
    Dequeue { queue: usize },
    Advance(Nanos),
    Round(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 64u32..=1514, any::<bool>()).prop_map(|(queue, len, ect)| Op::Enqueue { queue, len, ect }),
        3 => (0..3usize).prop_map(|queue| Op::Dequeue { queue }),
        2 => (0u64..300_000).prop_map(Op::Advance),
        1 => (0..3usize).prop_map(Op::Round),
    ]
}

struct Model {
    queues: Vec<VecDeque<Packet>>,
}

impl Model {
    fn ctx(&self, queue: usize) -> QueueCtx {
        let q = &self.queues[queue];
        QueueCtx {
            queue,
            queue_bytes: q.iter().map(|p| p.len as u64).sum(),
            queue_pkts: q.len() as u32,
            port_bytes: self.queues.iter().flatten().map(|p| p.len as u64).sum(),
            port_pkts: self.queues.iter().map(|q| q.len() as u32).sum(),
            active_queues: self.queues.iter().filter(|q| !q.is_empty()).count() as u32,
        }
    }
}

fn check_state(name: &str, r: &serde_json::Value, now: Nanos) {
    match name {
        "ecn-sharp" => {
            for v in r["queues"].as_array().unwrap() {
                if v["marking_state"].as_bool().unwrap() {
                    assert!(v["marking_count"].as_u64().unwrap() >= 1);
                }
                assert!(v["first_above_time"].as_u64().unwrap() <= now);
            }
        }
        "codel" => {
            for v in r["queues"].as_array().unwrap() {
                if v["dropping"].as_bool().unwrap() {
                    assert!(v["count"].as_u64().unwrap() >= 1);
                }
            }
        }
        "mq-ecn" => {
            assert!(r["t_round_ns"].as_f64().unwrap() >= 0.0);
            for k in r["k_bytes"].as_array().unwrap() {
                let k = k.as_u64().unwrap();
                assert!(k > 0 && k <= 31_250, "{k}");
            }
        }
        "pred" => {
            let p = &r["params"];
            let (lmin, lmax) = (
                p["lambda_min"].as_f64().unwrap(),
                p["lambda_max"].as_f64().unwrap(),
            );
            let l = r["setting"]["lambda"].as_f64().unwrap();
            assert!(l >= lmin - 1e-9 && l <= lmax + 1e-9, "{l}");
            let trial = &r["trial"]["setting"];
            let n = r["flows"]["n"].as_u64().unwrap().max(1) as f64;
            let slope = r["slope"].as_f64().unwrap();
            assert!((slope - trial["lambda"].as_f64().unwrap() * n).abs() < 1e-9);
            let min_k = r["min_k"].as_u64().unwrap();
            assert!(min_k >= p["min_k"].as_u64().unwrap() && min_k < p["max_k"].as_u64().unwrap());
            assert!(r["trial"]["index"].as_u64().unwrap() < 4);
            assert!(r["last_period"]["q_avg_pkts"].as_f64().unwrap() >= 0.0);
        }
        "red" => {
            for v in r["slots"].as_array().unwrap() {
                assert!(v["count"].as_i64().unwrap() >= -1);
                assert!(v["avg_bytes"].as_f64().unwrap() >= 0.0);
            }
        }
        _ => {}
    }
}

fn run(name: &str, ops: &[Op]) {
    let env = AqmEnv {
        rate: Rate::gbit(1),
        rtt_ns: 250 * US,
        num_queues: 3,
        mtu_bytes: 1500,
        quanta: Some(vec![1500, 3000, 1500]),
    };
    let cfg = AqmConfig::defaults_for(name, &env).unwrap();
    let mut aqm: AqmKind = cfg.build(&env).unwrap();
    let mut rng = SimRng::new(7);
    let mut model = Model {
        queues: vec![VecDeque::new(); 3],
    };
    let mut now: Nanos = 1_000_000;
    let mut max_port_bytes = 0u64;
    for op in ops {
        match *op {
            Op::Advance(d) => {
                now += d;
                aqm.on_tick(now);
            }
            Op::Round(q) => {
                if !model.queues[q].is_empty() {
                    aqm.on_round(q, now)
                }
            }
            Op::Enqueue { queue, len, ect: e } => {
                let mut p = if e { ect(len, now) } else { not_ect(len, now) };
                p.queue = queue as u16;
                let c = model.ctx(queue);
                let v = aqm.on_enqueue(&p, &c, now, &mut rng);
                if let (AqmConfig::Dctcp(d), Verdict::Mark(_)) = (&cfg, v) {
                    assert!(c.queue_bytes + len as u64 > d.k);
                }
                if !matches!(v, Verdict::Drop(_)) {
                    model.queues[queue].push_back(p);
                }
                max_port_bytes = max_port_bytes.max(model.ctx(0).port_bytes);
            }
            Op::Dequeue { queue } => {
                let Some(p) = model.queues[queue].pop_front() else {
                    continue;
                };
                let c = model.ctx(queue);
                let v = aqm.on_dequeue(&p, &c, now, &mut rng);
                let sojourn = now - p.enqueue_ns;
                match (&cfg, v) {
                    (AqmConfig::Tcn(t), Verdict::Mark(_)) => {
                        assert!(sojourn > t.t_min.min(t.threshold))
                    }
                    (AqmConfig::EcnSharp(s), Verdict::Mark(MarkReason::Sojourn)) => {
                        assert!(sojourn > s.ins_target)
                    }
                    (AqmConfig::Codel(_), Verdict::Drop(r)) => {
                        assert_eq!(r, DropReason::Aqm);
                        assert!(!p.is_ect(), "CoDel with ecn=true marks ECT packets");
                    }
                    (AqmConfig::Codel(_), Verdict::Mark(_)) => assert!(p.is_ect()),
                    _ => {}
                }
                if c.port_pkts == 0 {
                    aqm.on_idle(now);
                }
            }
        }
        let r = aqm.report();
        check_state(name, &r, now);
        if name == "red" {
            for v in r["slots"].as_array().unwrap() {
                assert!(v["avg_bytes"].as_f64().unwrap() <= max_port_bytes as f64 + 1e-6);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_aqm_keeps_its_invariants(ops in proptest::collection::vec(op(), 1..400)) {
        for name in AQM_NAMES {
            run(name, &ops);
        }
    }
}

//! DiffECN's Selective Marking Unit (SMU): per-flow ECN marking with a
//! threshold that shrinks with the number of active flows.
//!
//! Huang et al., "DiffECN: Differential ECN Marking for Datacenter
//! Networks", IEEE/ACM ToN 2024. The Queue Mapping Unit that
//! gives each active flow its own queue is the port's per-flow classifier
//! (`port::flowmap`, `--classify flow`); this AQM is the SMU, at egress
//! (Algorithm 1 lines 26–43):
//!
//! ```text
//! K   = λ · C · RTT                                 (Eq. 1)
//! K_p = λ · C · RTT / N_flow                        (Eq. 2, §IV-C2)
//! N_flow = min(max(N_last, N_now), Q_num)          (§IV-C3, Alg. 1 line 39)
//! on dequeue of P from queue q:  count P's flow in this period (lines 26–38)
//!                                mark iff Queue_len(q) > K_p[N_flow] (lines 40–42)
//! every T_period (≈ 1.5 RTT, §VI-B2): N_last ← N_now, N_now ← 0
//! ```
//!
//! Units: K in bytes of frames (the paper's Tofino counts 80-byte cells:
//! 510 cells = 40.8 KB at 10 Gbit/s and 0.19 ms base RTT, §VI-B1, i.e.
//! λ ≈ 0.17, the value it quotes for DCTCP from [30]); the period in ns.
//!
//! Defaults (the testbed prototype, §VI-B): K = 0.17 · C · RTT, T_period =
//! 1.5 · RTT, a 2^14-slot flow-count table (§V-B), N capped at the port's
//! number of queues (Q_num).
//!
//! Choices where the paper leaves room (each a parameter):
//! * **Which length.** "Before the packet is dequeued, the length Queue_len
//!   of the corresponding queue is read" (§V-B). We compare what the packet
//!   leaves behind (`count_departing = false`, like the dequeue variant of
//!   DCTCP-ECN here); with `true` the departing packet counts too. With
//!   K_p below one frame the first reading would mark every packet of a
//!   flow whatever its backlog.
//! * **Periods** end on the port's tick as well as on packets (the shared
//!   `aqm::flowcount` counter), so N falls when flows stop.
//! * Non-IP frames are not counted as flows; they are still compared with
//!   K_p (the port never CE-marks them).

use super::flowcount::{FlowCounter, MAX_INDEX_BITS};
use super::params::{AqmConfigError, AqmEnv, AqmParams, PortNeeds};
use super::util::{de_duration, de_size, scale_ns, ser_duration, ser_size};
use super::{Aqm, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos, Rate};
use serde::{Deserialize, Serialize};

/// λ of the paper's testbed (510 cells of 80 B at 10 Gbit/s, 0.19 ms RTT).
pub const DEFAULT_LAMBDA: f64 = 0.17;
/// T_period / RTT (§VI-B2: "setting T_period to 1.5RTT is reasonable").
pub const PERIOD_RTTS: f64 = 1.5;
/// log2 of the flow-count slots (§V-B: "2^14 uints").
pub const DEFAULT_INDEX_BITS: u32 = 14;

/// DiffECN SMU parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Port threshold K = λ·C·RTT in bytes; K_p = K / N_flow.
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub k: u64,
    /// Flow-counting period T_period.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub period: Nanos,
    /// log2 of the flow-count table size.
    pub index_bits: u32,
    /// Cap on N_flow; 0 = the port's number of queues (Q_num, §IV-C3).
    pub max_flows: u32,
    /// Count the departing packet in Queue_len.
    pub count_departing: bool,
}

impl Default for Config {
    /// 1 Gbit/s, RTT 250 µs.
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000)
    }
}

/// K = λ · C · RTT (Eq. 1), bytes.
pub fn port_threshold_bytes(rate: Rate, rtt_ns: Nanos, lambda: f64) -> u64 {
    (rate.bytes_in(rtt_ns) as f64 * lambda).round() as u64
}

/// K_p = K / N_flow (Eq. 2), bytes; N below 1 counts as 1.
pub fn per_flow_threshold_bytes(k: u64, n_flow: u32) -> u64 {
    k / n_flow.max(1) as u64
}

impl Config {
    /// The prototype's defaults for a link: K = 0.17·C·RTT, T = 1.5·RTT.
    pub fn for_link(rate: Rate, rtt_ns: Nanos) -> Self {
        Config {
            k: port_threshold_bytes(rate, rtt_ns, DEFAULT_LAMBDA),
            period: scale_ns(rtt_ns, PERIOD_RTTS),
            index_bits: DEFAULT_INDEX_BITS,
            max_flows: 0,
            count_departing: false,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.k == 0 {
            return Err(
                "diffecn: k = 0 would mark every packet; give K = λ·C·RTT such as k=5kb".into(),
            );
        }
        if self.period == 0 {
            return Err("diffecn: period must be > 0 (default 1.5 RTT, e.g. period=375us)".into());
        }
        if !(1..=MAX_INDEX_BITS).contains(&self.index_bits) {
            return Err(format!(
                "diffecn: index_bits {} out of range; use 1..={MAX_INDEX_BITS} (default {DEFAULT_INDEX_BITS})",
                self.index_bits
            ));
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        let cap = if self.max_flows == 0 {
            "Q_num".to_string()
        } else {
            self.max_flows.to_string()
        };
        format!(
            "diffecn: mark at dequeue iff queue length{} > K_p = K / N_flow, K = {} B, N_flow = max(N_last, N_now) counted per period {} (cap {cap}, 2^{} slots) (DiffECN paper Eq. 2, Alg. 1)",
            if self.count_departing { " (incl. the departing packet)" } else { "" },
            self.k,
            fmt_duration(self.period),
            self.index_bits
        )
    }
}

/// Counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Packets decided on.
    pub packets: u64,
    /// Marks (K_p exceeded).
    pub marks: u64,
    /// Largest N_flow used for a decision.
    pub max_n_flow: u32,
}

/// The SMU of one port.
#[derive(Clone, Debug)]
pub struct DiffEcn {
    params: Config,
    /// K_p for N = 0..=cap (the P4 match table of §V-B).
    k_by_n: Vec<u64>,
    flows: FlowCounter,
    counters: Counters,
}

impl DiffEcn {
    /// Builds from a validated config for a port of `queues` queues.
    pub fn new(params: Config, queues: usize, now: Nanos) -> Self {
        let cap = if params.max_flows == 0 {
            queues.max(1) as u32
        } else {
            params.max_flows
        };
        let k_by_n = (0..=cap)
            .map(|n| per_flow_threshold_bytes(params.k, n))
            .collect();
        DiffEcn {
            flows: FlowCounter::new(params.period, params.index_bits, now),
            params,
            k_by_n,
            counters: Counters::default(),
        }
    }
    /// N_flow as the marking uses it: max(N_last, N_now), at least 1, capped.
    pub fn n_flow(&self) -> u32 {
        self.flows.flows().clamp(1, (self.k_by_n.len() - 1) as u32)
    }
    /// The current per-flow threshold K_p, bytes.
    pub fn k_p(&self) -> u64 {
        self.k_by_n[self.n_flow() as usize]
    }
    /// The flow counter.
    pub fn flow_counter(&self) -> &FlowCounter {
        &self.flows
    }
    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// Internal state for the live counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "diffecn",
            "params": self.params,
            "n_flow": self.n_flow(),
            "n_last": self.flows.n_last(),
            "n_now": self.flows.n_now(),
            "k_p_bytes": self.k_p(),
            "periods": self.flows.periods(),
            "counters": self.counters,
        })
    }
}

impl Aqm for DiffEcn {
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, _rng: &mut SimRng) -> Verdict {
        if let Some(l3) = &pkt.l3 {
            self.flows.observe(l3.flow_hash, now);
        } else {
            self.flows.tick(now);
        }
        let n = self.n_flow();
        self.counters.packets += 1;
        self.counters.max_n_flow = self.counters.max_n_flow.max(n);
        let mut len = q.queue_bytes;
        if self.params.count_departing {
            len += pkt.len as u64;
        }
        if len > self.k_by_n[n as usize] {
            self.counters.marks += 1;
            Verdict::Mark(MarkReason::Dynamic)
        } else {
            Verdict::Pass
        }
    }
    #[inline]
    fn on_tick(&mut self, now: Nanos) {
        self.flows.tick(now);
    }
    fn next_tick(&self) -> Option<Nanos> {
        Some(self.flows.period_end().saturating_add(1))
    }
    fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        emit("diffecn_n_flow", self.n_flow() as f64);
        emit("diffecn_n_last", self.flows.n_last() as f64);
        emit("diffecn_n_now", self.flows.n_now() as f64);
        emit("diffecn_k_p_bytes", self.k_p() as f64);
        emit("diffecn_marks", self.counters.marks as f64);
    }
}

impl AqmParams for Config {
    type Instance = DiffEcn;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("k", "port threshold K = λ·C·RTT (K_p = K/N_flow), bytes"),
        ("period", "flow-counting period T_period, time"),
        ("index_bits", "log2 of the flow-count table's slots"),
        (
            "max_flows",
            "cap on N_flow; 0 = the port's number of queues",
        ),
        (
            "count_departing",
            "true: the departing packet counts in its queue's length",
        ),
    ];
    const LENGTH_KEYS: &'static [&'static str] = &["k"];
    const SIZE_KEYS: &'static [&'static str] = &["k"];
    const NEEDS: PortNeeds = PortNeeds {
        per_flow_queues: Some(
            "--aqm diffecn marks each flow by its own queue's length and needs \
             --classify flow (the default with diffecn; DiffECN paper §IV-B)",
        ),
        // The prototype's Tofino1 port: "Each egress port has 32 queues"
        // (DiffECN paper §VI-B; §VI-C4 sweeps 8 to 32).
        queues: Some(32),
    };
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_link(env.rate, env.rtt_ns)
    }
    fn build(&self, env: &AqmEnv) -> Result<DiffEcn, AqmConfigError> {
        Ok(DiffEcn::new(self.clone(), env.num_queues.max(1), 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};
    use crate::units::US;

    fn pkt(flow: u32, len: u32) -> Packet {
        let mut p = ect(len, 0);
        p.l3.as_mut().unwrap().flow_hash = flow;
        p
    }

    #[test]
    fn defaults_follow_the_testbed() {
        // §VI-B1: 10 Gbit/s, 0.19 ms → 510 cells × 80 B = 40.8 KB ≈ 0.17·C·RTT.
        let c = Config::for_link(Rate::gbit(10), 190 * US);
        assert_eq!(c.k, 40_375);
        assert!((c.k as f64 - 40_800.0).abs() / 40_800.0 < 0.02);
        assert_eq!(c.period, 285 * US);
        // "the threshold is set as 510 cells when there is one active flow and 255 cells under two"
        assert_eq!(per_flow_threshold_bytes(40_800, 1), 40_800);
        assert_eq!(per_flow_threshold_bytes(40_800, 2), 20_400);
        let d = Config::default();
        assert_eq!((d.k, d.period), (5_313, 375 * US));
        assert!(d.describe().contains("K = 5313 B"), "{}", d.describe());
        assert!(Config { k: 0, ..d.clone() }.validate().is_err());
        assert!(Config {
            period: 0,
            ..d.clone()
        }
        .validate()
        .is_err());
        assert!(Config {
            index_bits: 21,
            ..d
        }
        .validate()
        .is_err());
    }

    /// Algorithm 1 lines 26–43 step by step: K = 12 000 B, T = 100 µs, 8 queues.
    #[test]
    fn threshold_follows_flow_count_across_periods() {
        let cfg = Config {
            k: 12_000,
            period: 100 * US,
            ..Config::default()
        };
        let mut a = DiffEcn::new(cfg, 8, 0);
        let mut rng = SimRng::new(1);
        // Period 0: one flow. N = 1, K_p = 12 000: 12 000 left behind is not > K_p.
        assert_eq!(
            a.on_dequeue(&pkt(1, 1500), &ctx(1, 12_000, 8), 10 * US, &mut rng),
            Verdict::Pass
        );
        assert_eq!((a.n_flow(), a.k_p()), (1, 12_000));
        // A second and third flow in the same period: N_now = 3, K_p = 4 000.
        a.on_dequeue(&pkt(2, 1500), &ctx(2, 0, 0), 20 * US, &mut rng);
        a.on_dequeue(&pkt(3, 1500), &ctx(3, 0, 0), 30 * US, &mut rng);
        assert_eq!((a.n_flow(), a.k_p()), (3, 4_000));
        // Flow 1 with 4 500 B left in its queue is now above K_p: marked.
        assert_eq!(
            a.on_dequeue(&pkt(1, 1500), &ctx(1, 4_500, 3), 40 * US, &mut rng),
            Verdict::Mark(MarkReason::Dynamic)
        );
        // Flow 2 with 3 000 B is below: its own queue protects it.
        assert_eq!(
            a.on_dequeue(&pkt(2, 1500), &ctx(2, 3_000, 2), 50 * US, &mut rng),
            Verdict::Pass
        );
        // Period boundary by the tick (no packet): N_last = 3, N_now = 0, N = 3.
        a.on_tick(100 * US + 1);
        assert_eq!(
            (a.flow_counter().n_last(), a.flow_counter().n_now()),
            (3, 0)
        );
        assert_eq!(a.k_p(), 4_000);
        assert_eq!(a.next_tick(), Some(200 * US + 2));
        // Period 1: only flow 1 sends. N = max(3, 1) = 3 still.
        a.on_dequeue(&pkt(1, 1500), &ctx(1, 0, 0), 150 * US, &mut rng);
        assert_eq!(a.n_flow(), 3);
        // Period 2: N_last = 1 → K_p back to 12 000.
        a.on_tick(200 * US + 2);
        assert_eq!((a.n_flow(), a.k_p()), (1, 12_000));
        // A period with no packet at all: N_now = 0, N_flow floors at 1.
        a.on_tick(300 * US + 3);
        assert_eq!(a.flow_counter().flows(), 0);
        assert_eq!((a.n_flow(), a.k_p()), (1, 12_000));
        assert_eq!(a.counters().marks, 1);
    }

    #[test]
    fn n_flow_is_capped_at_the_number_of_queues() {
        // §IV-C3: more active flows than queues → N_flow = Q_num.
        let cfg = Config {
            k: 8_000,
            period: 1_000 * US,
            ..Config::default()
        };
        let mut a = DiffEcn::new(cfg.clone(), 4, 0);
        let mut rng = SimRng::new(1);
        for f in 0..10u32 {
            a.on_dequeue(&pkt(f * 7919 + 1, 100), &ctx(0, 0, 0), US, &mut rng);
        }
        assert_eq!(a.flow_counter().flows(), 10);
        assert_eq!((a.n_flow(), a.k_p()), (4, 2_000));
        let mut b = DiffEcn::new(
            Config {
                max_flows: 16,
                ..cfg
            },
            4,
            0,
        );
        for f in 0..10u32 {
            b.on_dequeue(&pkt(f * 7919 + 1, 100), &ctx(0, 0, 0), US, &mut rng);
        }
        assert_eq!((b.n_flow(), b.k_p()), (10, 800));
        assert_eq!(b.counters().max_n_flow, 10);
    }

    #[test]
    fn count_departing_option() {
        let cfg = Config {
            k: 3_000,
            count_departing: true,
            ..Config::default()
        };
        let mut a = DiffEcn::new(cfg, 8, 0);
        let mut rng = SimRng::new(1);
        // 1 500 left + 1 500 departing = 3 000: not > 3 000; one byte more is.
        assert_eq!(
            a.on_dequeue(&pkt(1, 1500), &ctx(1, 1_500, 1), US, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            a.on_dequeue(&pkt(1, 1501), &ctx(1, 1_500, 1), US, &mut rng),
            Verdict::Mark(MarkReason::Dynamic)
        );
    }

    #[test]
    fn gauges_name_n_and_k_p() {
        let mut a = DiffEcn::new(
            Config {
                k: 6_000,
                ..Config::default()
            },
            8,
            0,
        );
        let mut rng = SimRng::new(1);
        a.on_dequeue(&pkt(1, 100), &ctx(0, 0, 0), 1, &mut rng);
        a.on_dequeue(&pkt(2, 100), &ctx(0, 0, 0), 2, &mut rng);
        let mut got = Vec::new();
        a.gauges(&mut |n, v| got.push((n, v)));
        assert!(got.contains(&("diffecn_n_flow", 2.0)), "{got:?}");
        assert!(got.contains(&("diffecn_k_p_bytes", 3_000.0)), "{got:?}");
        assert_eq!(a.report()["k_p_bytes"], 3_000);
    }
}

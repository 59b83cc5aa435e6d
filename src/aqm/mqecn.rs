//! MQ-ECN — dynamic per-queue ECN thresholds for round-robin schedulers.
//!
//! Wei Bai, Li Chen, Kai Chen, Haitao Wu, "Enabling ECN in Multi-Service
//! Multi-Queue Data Centers", USENIX NSDI 2016; summarised in TCN paper §3.3
//! and configured as in TCN paper §6 ("β = 0.75 and T_idle = the transmission
//! time of a MTU").
//!
//! In a round-robin scheduler (DWRR/WRR) a backlogged queue i sends at most
//! quantum_i per round, so quantum_i / T_round estimates its capacity C_i and
//! the ideal per-queue threshold (TCN paper Eq. 2, K_i = C_i × RTT × λ) becomes
//!
//! ```text
//!     K_i = min(quantum_i / T_round, C) × RTT × λ          (MQ-ECN)
//!     T_round ← β · T_round + (1 − β) · sample,  β = 0.75
//! ```
//!
//! * **Round samples.** T_round is "the total time to serve all the queues
//!   once" (TCN paper §3.3 footnote 4); the prototype keeps "a timestamp for each
//!   queue to track round time" (§5). We take one sample per `on_round(i, now)`
//!   call: the time since queue i last started a round, provided queue i stayed
//!   backlogged in between (a queue that empties leaves the active list and its
//!   timestamp is forgotten — the gap would include idle time, not a round).
//!   One T_round is shared by the port. (The authors' `sch_dwrr` measures
//!   from the moment a queue re-joins the tail of the active list to its last
//!   packet of the next turn; both span exactly one round of the others.)
//! * **Idle.** After the port has been idle, T_round is stale. As in the
//!   authors' prototype, each whole T_idle of idleness counts as a zero
//!   sample: T_round ← β^n · T_round with n = ⌊idle / T_idle⌋, and T_round is
//!   reset to 0 when n exceeds `idle_reset_slots` (10 there). T_round = 0
//!   means "no estimate": K_i = C × RTT × λ, the standard threshold. The idle
//!   start comes from `on_idle` (or a dequeue leaving the port empty); the
//!   correction is applied at the next enqueue into the empty port, using its
//!   `now`.
//! * **Marking.** At enqueue, per-queue occupancy *including* the arriving
//!   packet strictly larger than K_i (the prototype's `len_bytes > thresh`).
//!
//! * **Queues outside the round** (strict-priority queues of SP+DWRR) are
//!   given quantum 0 by the scheduler: they have no round share to estimate,
//!   so they keep the standard threshold C × RTT × λ.
//!
//! * **Units.** quantum_i / T_round must be a rate in the unit of C. The
//!   prototype counts both in wire bytes: its DWRR charges `skb_size()`
//!   (frame + FCS + preamble + gap) against quanta in those bytes, and its
//!   round time is link time of the same bytes at the shaped rate
//!   (HKUST-SING/MQ-ECN-Software `sch_dwrr/main.c`:
//!   `min(cl->quantum * 8000000000 / q->round_time_ns, rate_bps) *
//!   PORT_THRESH_BYTES / rate_bps`). Here T_round is the port shaper's
//!   link time (frame + `--overhead` bytes at C), and by default DWRR
//!   charges the same frame + overhead bytes (`--sched-bytes wire`), so the
//!   quanta we are given are wire bytes and quantum_i / T_round is exactly
//!   queue i's share of C. With `--sched-bytes frame` (the option kept from
//!   before) the quanta are frame bytes and K_i comes out low by
//!   frame/(frame + overhead).
//!
//! Units: quanta in the scheduler's bytes (wire by default), K in bytes, C
//! from the port rate, times in ns. Occupancy is compared in frame bytes
//! (the port's buffer unit; the prototype's `len_bytes` are wire bytes, a
//! 1.6 % difference for MTU frames).
//! Defaults: λ = 1, RTT = `--rtt`, β = 0.75, T_idle = MTU time at C.

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_duration, ser_duration};
use super::{Aqm, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos, Rate, SEC};
use serde::{Deserialize, Serialize};

/// MQ-ECN parameters (quanta and C come from the port, see [`MqEcn::new`]).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Base RTT used in K_i, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub rtt: Nanos,
    /// λ of the transport (1 for DCTCP as in TCN paper §6.1, 1 for ECN*).
    pub lambda: f64,
    /// EWMA weight of the old T_round (0.75, TCN paper §6).
    pub beta: f64,
    /// Idle slot T_idle, ns (one MTU time at C, TCN paper §6).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub t_idle: Nanos,
    /// Idle slots after which T_round is reset to 0 (prototype: 10).
    pub idle_reset_slots: u32,
}

impl Default for Config {
    /// 1 Gbit/s, MTU 1500, RTT 250 µs.
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000, 1500)
    }
}

impl Config {
    /// Defaults for a link.
    pub fn for_link(rate: Rate, rtt_ns: Nanos, mtu_bytes: u32) -> Self {
        Config {
            rtt: rtt_ns,
            lambda: 1.0,
            beta: 0.75,
            t_idle: rate.tx_time_ns(mtu_bytes as u64),
            idle_reset_slots: 10,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..1.0).contains(&self.beta) {
            return Err(format!("mq-ecn: beta must be in [0, 1), got {}", self.beta));
        }
        if self.lambda.is_nan() || self.lambda <= 0.0 {
            return Err(format!("mq-ecn: lambda must be > 0, got {}", self.lambda));
        }
        if self.rtt == 0 {
            return Err("mq-ecn: rtt must be > 0 (e.g. rtt=250us)".into());
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        format!(
            "mq-ecn: K_i = min(quantum_i/T_round, C)·RTT·λ with RTT = {}, λ = {}, β = {}, T_idle = {} (reset after {} idle slots) (TCN paper §3.3, §6)",
            fmt_duration(self.rtt),
            self.lambda,
            self.beta,
            fmt_duration(self.t_idle),
            self.idle_reset_slots
        )
    }
}

/// T_round ← β·T_round + (1 − β)·sample (MQ-ECN EWMA).
pub fn smooth_round(t_round_ns: f64, sample_ns: f64, beta: f64) -> f64 {
    beta * t_round_ns + (1.0 - beta) * sample_ns
}

/// K_i = min(quantum_i / T_round, C) × RTT × λ, bytes; T_round = 0 (no
/// estimate) or quantum 0 (queue outside the round) → C × RTT × λ.
pub fn threshold_bytes(
    quantum_bytes: u64,
    t_round_ns: f64,
    rate: Rate,
    rtt_ns: Nanos,
    lambda: f64,
) -> f64 {
    let c = rate.bytes_per_sec();
    let ci = if t_round_ns > 0.0 && quantum_bytes > 0 {
        (quantum_bytes as f64 * SEC as f64 / t_round_ns).min(c)
    } else {
        c
    };
    ci * rtt_ns as f64 / SEC as f64 * lambda
}

/// Running variables.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Vars {
    /// Smoothed round time, ns (0 = no estimate).
    pub t_round_ns: f64,
    /// When each queue last started a round while backlogged.
    pub round_start: Vec<Option<Nanos>>,
    /// When the port last became idle (None while busy or already applied).
    pub idle_since: Option<Nanos>,
}

/// Counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Round-time samples taken.
    pub samples: u64,
    /// Idle corrections applied.
    pub idle_decays: u64,
    /// Full resets after idle.
    pub idle_resets: u64,
    /// Marks per queue.
    pub marks: Vec<u64>,
}

/// An MQ-ECN instance for one port.
#[derive(Clone, Debug)]
pub struct MqEcn {
    params: Config,
    quanta: Vec<u64>,
    rate: Rate,
    vars: Vars,
    counters: Counters,
}

impl MqEcn {
    /// Builds from a validated config, the scheduler's per-queue quanta
    /// (bytes) and the port rate C.
    pub fn new(params: Config, quanta: Vec<u64>, rate: Rate) -> Self {
        let n = quanta.len();
        MqEcn {
            params,
            quanta,
            rate,
            vars: Vars {
                t_round_ns: 0.0,
                round_start: vec![None; n],
                idle_since: None,
            },
            counters: Counters {
                marks: vec![0; n],
                ..Counters::default()
            },
        }
    }
    /// Current smoothed T_round, ns.
    pub fn t_round_ns(&self) -> f64 {
        self.vars.t_round_ns
    }
    /// Current K_i of `queue`, bytes.
    pub fn threshold(&self, queue: usize) -> f64 {
        let quantum = self.quanta.get(queue).copied().unwrap_or(0);
        threshold_bytes(
            quantum,
            self.vars.t_round_ns,
            self.rate,
            self.params.rtt,
            self.params.lambda,
        )
    }
    /// T_round, every K_i and the counters.
    pub fn report(&self) -> serde_json::Value {
        let k: Vec<u64> = (0..self.quanta.len())
            .map(|i| self.threshold(i) as u64)
            .collect();
        serde_json::json!({
            "kind": "mq-ecn",
            "params": self.params,
            "quanta_bytes": self.quanta,
            "t_round_ns": self.vars.t_round_ns,
            "k_bytes": k,
            "counters": self.counters,
        })
    }
    fn apply_idle(&mut self, now: Nanos) {
        if let Some(since) = self.vars.idle_since.take() {
            let idle = now.saturating_sub(since);
            let p = &self.params;
            let slots = idle.checked_div(p.t_idle).unwrap_or(u64::MAX);
            if slots > p.idle_reset_slots as u64 {
                self.vars.t_round_ns = 0.0;
                self.counters.idle_resets += 1;
            } else if slots > 0 {
                self.vars.t_round_ns *= p.beta.powi(slots as i32);
                self.counters.idle_decays += 1;
            }
        }
    }
}

impl Aqm for MqEcn {
    fn on_enqueue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, _rng: &mut SimRng) -> Verdict {
        if q.port_pkts == 0 {
            self.apply_idle(now);
        }
        if q.queue >= self.quanta.len() {
            return Verdict::Pass;
        }
        let occupancy = q.queue_bytes + pkt.len as u64;
        if occupancy as f64 > self.threshold(q.queue) {
            self.counters.marks[q.queue] += 1;
            Verdict::Mark(MarkReason::Dynamic)
        } else {
            Verdict::Pass
        }
    }
    fn on_dequeue(
        &mut self,
        _pkt: &Packet,
        q: &QueueCtx,
        now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        if q.queue_pkts == 0 {
            if let Some(s) = self.vars.round_start.get_mut(q.queue) {
                *s = None;
            }
        }
        if q.port_pkts == 0 {
            self.vars.idle_since = Some(now);
        }
        Verdict::Pass
    }
    fn on_round(&mut self, queue: usize, now: Nanos) {
        if self.quanta.get(queue).is_none_or(|&q| q == 0) {
            return;
        }
        let Some(start) = self.vars.round_start.get_mut(queue) else {
            return;
        };
        if let Some(prev) = start.replace(now) {
            let sample = now.saturating_sub(prev) as f64;
            self.vars.t_round_ns = smooth_round(self.vars.t_round_ns, sample, self.params.beta);
            self.counters.samples += 1;
        }
    }
    fn on_idle(&mut self, now: Nanos) {
        self.vars.idle_since = Some(now);
    }
}

impl AqmParams for Config {
    type Instance = MqEcn;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        (
            "rtt",
            "base RTT in K_i = min(quantum_i/T_round, C)·RTT·λ, time",
        ),
        ("lambda", "λ of the transport (1 for DCTCP)"),
        ("beta", "EWMA weight of the old T_round"),
        ("t_idle", "idle slot T_idle (one MTU time at C), time"),
        (
            "idle_reset_slots",
            "idle slots after which T_round is reset to 0, count",
        ),
    ];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_link(env.rate, env.rtt_ns, env.mtu_bytes)
    }
    fn build(&self, env: &AqmEnv) -> Result<MqEcn, AqmConfigError> {
        let queues = env.num_queues.max(1);
        let quanta = env.quanta.clone().ok_or(AqmConfigError::NeedsRoundRobin)?;
        if quanta.len() != queues {
            return Err(AqmConfigError::QuantaMismatch {
                quanta: quanta.len(),
                queues,
            });
        }
        Ok(MqEcn::new(self.clone(), quanta, env.rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::ect;
    use crate::units::US;

    const RTT: Nanos = 250 * US;

    fn mq(nq: usize) -> MqEcn {
        let c = Config::for_link(Rate::gbit(1), RTT, 1500);
        c.validate().unwrap();
        assert_eq!(c.t_idle, 12 * US);
        MqEcn::new(c, vec![1500; nq], Rate::gbit(1))
    }

    /// Serves `queues` round-robin, one 1500-byte quantum (12 µs at 1 Gbit/s)
    /// each, for `rounds` rounds starting at `t`; returns the end time.
    fn serve(a: &mut MqEcn, queues: &[usize], rounds: usize, mut t: Nanos) -> Nanos {
        for _ in 0..rounds {
            for &i in queues {
                a.on_round(i, t);
                t += 12 * US;
            }
        }
        t
    }

    /// The prototype's formula, by hand: quantum 1538 wire bytes, T_round =
    /// two 1538 B quanta at 1 Gbit/s = 24 608 ns, port threshold 30 000 B
    /// (= C·RTT·λ with RTT 240 µs): min(1538 · 8e9 / 24 608, 1e9) = 5e8 bit/s,
    /// × 30 000 / 1e9 = 15 000 B.
    #[test]
    fn threshold_is_the_prototypes_formula() {
        let k = threshold_bytes(1538, 24_608.0, Rate::gbit(1), 240 * US, 1.0);
        assert!((k - 15_000.0).abs() < 1e-6, "{k}");
        // One queue alone: min(1538 · 8e9 / 12 304, C) = C → 30 000 B.
        let k = threshold_bytes(1538, 12_304.0, Rate::gbit(1), 240 * US, 1.0);
        assert!((k - 30_000.0).abs() < 1e-6, "{k}");
    }

    #[test]
    fn no_estimate_means_standard_threshold() {
        let a = mq(2);
        assert_eq!(a.threshold(0).round() as u64, 31_250); // C·RTT·λ
    }

    #[test]
    fn two_busy_queues_halve_the_threshold() {
        let mut one = mq(2);
        serve(&mut one, &[0], 100, 1_000_000);
        // T_round → 12 µs: quantum/T_round = C, K = C·RTT·λ.
        assert!((one.t_round_ns() - 12_000.0).abs() < 1.0);
        assert!((one.threshold(0) - 31_250.0).abs() < 5.0);

        let mut two = mq(2);
        serve(&mut two, &[0, 1], 100, 1_000_000);
        // T_round doubles → K halves.
        assert!(
            (two.t_round_ns() - 24_000.0).abs() < 1.0,
            "{}",
            two.t_round_ns()
        );
        assert!((two.threshold(0) - 15_625.0).abs() < 5.0);
        assert!((two.threshold(1) - 15_625.0).abs() < 5.0);

        // Marking against K_i with the arriving packet counted, strictly greater.
        let mut rng = SimRng::new(1);
        let k = two.threshold(0);
        let below = QueueCtx {
            queue: 0,
            queue_bytes: (k as u64) - 1500 - 1,
            queue_pkts: 10,
            port_bytes: 40_000,
            port_pkts: 20,
            active_queues: 2,
        };
        assert_eq!(
            two.on_enqueue(&ect(1500, 0), &below, 3_000_000, &mut rng),
            Verdict::Pass
        );
        let above = QueueCtx {
            queue_bytes: k as u64,
            ..below
        };
        assert_eq!(
            two.on_enqueue(&ect(1500, 0), &above, 3_000_000, &mut rng),
            Verdict::Mark(MarkReason::Dynamic)
        );
    }

    #[test]
    fn strict_priority_queue_keeps_standard_threshold() {
        let mut a = MqEcn::new(Config::default(), vec![0, 1500, 1500], Rate::gbit(1));
        // The SP queue also sends 12 µs per cycle: the DWRR round lasts 36 µs.
        serve(&mut a, &[0, 1, 2], 50, 1_000_000);
        assert!((a.t_round_ns() - 36_000.0).abs() < 1.0);
        assert!((a.threshold(0) - 31_250.0).abs() < 1e-3);
        assert!((a.threshold(1) - 31_250.0 / 3.0).abs() < 5.0);
    }

    #[test]
    fn ewma_follows_beta() {
        let mut a = mq(1);
        a.on_round(0, 0);
        a.on_round(0, 40_000);
        assert_eq!(a.t_round_ns(), 0.25 * 40_000.0);
        a.on_round(0, 80_000);
        assert_eq!(a.t_round_ns(), 0.75 * 10_000.0 + 0.25 * 40_000.0);
    }

    #[test]
    fn emptied_queue_gives_no_sample() {
        let mut a = mq(1);
        let mut rng = SimRng::new(1);
        a.on_round(0, 0);
        // The queue empties (port too) and comes back much later.
        let empty = QueueCtx::default();
        a.on_dequeue(&ect(1500, 0), &empty, 12_000, &mut rng);
        a.on_round(0, 5_000_000);
        assert_eq!(a.counters.samples, 0);
        assert_eq!(a.t_round_ns(), 0.0);
    }

    #[test]
    fn idle_decays_then_resets() {
        let mut a = mq(2);
        let t = serve(&mut a, &[0, 1], 100, 1_000_000);
        let tr = a.t_round_ns();
        let mut rng = SimRng::new(1);
        let empty = QueueCtx::default();
        // Idle for 2.5 T_idle: two zero samples, T_round·β².
        a.on_idle(t);
        a.on_enqueue(&ect(1500, 0), &empty, t + 30 * US, &mut rng);
        assert!((a.t_round_ns() - tr * 0.75 * 0.75).abs() < 1e-6);
        // A busy-port enqueue does nothing.
        let busy = QueueCtx {
            port_pkts: 3,
            ..empty
        };
        a.on_enqueue(&ect(1500, 0), &busy, t + 100 * US, &mut rng);
        assert!((a.t_round_ns() - tr * 0.5625).abs() < 1e-6);
        // Idle longer than 10 T_idle: reset, K back to the standard threshold.
        a.on_idle(t + 200 * US);
        a.on_enqueue(&ect(1500, 0), &empty, t + 200 * US + 11 * 12 * US, &mut rng);
        assert_eq!(a.t_round_ns(), 0.0);
        assert_eq!(a.threshold(1).round() as u64, 31_250);
        assert_eq!(a.counters.idle_resets, 1);
    }
}

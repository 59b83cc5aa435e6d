//! RED — Random Early Detection, and its point-slope form.
//!
//! S. Floyd, V. Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance", IEEE/ACM ToN 1(4), 1993 — the algorithm of its Figure 2
//! (§4), with "gentle" RED (Floyd, 2000) and the point-slope form of
//! PRED paper §II-A (PRED, Performance-oriented RED).
//!
//! Per packet arrival (Floyd Fig. 2):
//!
//! ```text
//!   queue non-empty:  avg ← (1 − w_q)·avg + w_q·q                      (EWMA)
//!   queue empty:      m ← (now − q_time)/s ;  avg ← (1 − w_q)^m · avg   (idle)
//!   min_th ≤ avg < max_th:  count ← count + 1
//!                           p_b ← max_p·(avg − min_th)/(max_th − min_th)
//!                           p_a ← p_b / (1 − count·p_b)       (1 once count·p_b ≥ 1)
//!                           mark with probability p_a; on mark count ← 0
//!   gentle, max_th ≤ avg < 2·max_th:
//!                           p_b ← max_p + (1 − max_p)·(avg − max_th)/max_th
//!                           (same count rule)
//!   above:                  mark; count ← 0
//!   below min_th:           count ← −1
//! ```
//!
//! * `w_q = 1` is the instantaneous queue (DCTCP-style, TCN paper §2.1).
//! * Idle correction: `s` is the transmission time at C of a typical packet
//!   of `avpkt` bytes (Floyd: "a typical transmission time for a small
//!   packet"; tc-red(8)'s `avpkt`, 1000 bytes by default). `q_time` is when
//!   the measured queue (queue or port) went empty — seen at the dequeue that
//!   left it empty, or `on_idle`. A fractional m is used as is. After the
//!   correction q_time moves to `now`, so an arrival that is dropped on an
//!   empty queue does not make the next arrival decay the same idle time twice.
//! * Count-based spacing (`count_based = true`, Floyd §4): marks are spread
//!   uniformly between 1 and 1/p_b packets apart; `false` uses p_b directly.
//! * Point-slope form (PRED paper §II-A): `λ = max_p/(max_K − min_K)` and
//!   `p = λ·(q − min_K)` for min_K < q < max_K, mark if q ≥ max_K, where q is
//!   `avg` (the instantaneous queue with w_q = 1, as PRED uses). No count
//!   correction: PRED paper defines p itself as the marking probability, as
//!   commodity switches apply it. λ is a probability *per unit of q* — per byte
//!   or per packet as `unit` says (PRED paper's §II-A example is per MB: 0.1 /
//!   0.195 MB ≈ 0.5; its evaluation counts packets). PRED's controller changes
//!   λ and min_K at run time with [`Red::set_slope`], [`Red::set_min_k`],
//!   [`Red::set_point_slope`].
//! * Units: thresholds in bytes or packets (`unit`), times in ns.
//! * Mark (ECN) or drop mode (`action`); per-queue or per-port occupancy.
//!
//! Defaults (`config::AqmConfig::defaults_for("red", ..)`): max_th = C·RTT
//! (the standard threshold, TCN paper Eq. 1, λ = 1), min_th = max_th/3 (ns-2's
//! 5/15 packets ratio; Floyd §6 wants max_th − min_th larger than the typical
//! rise of avg in one RTT), max_p = 0.1 and gentle on (Floyd's later
//! recommendations for RED), w_q = 1 − exp(−s/RTT) so that the average
//! forgets over about one RTT of `avpkt`-sized arrivals (Floyd §10 bounds
//! w_q by the burst it must absorb; the 1993 value 0.002 would average over
//! tens of RTTs in a datacenter). Point-slope: max_K = 500 KB (PRED paper §IV),
//! λ = the two-point line's slope, min_K = min_th.

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_size, ser_size};
use super::{Aqm, DropReason, LengthUnit, MarkReason, Occupancy, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos, Rate};
use serde::{Deserialize, Serialize};

/// The two ways of drawing RED's probability line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Form {
    /// Floyd: (min_th, 0) to (max_th, max_p), count-based, optional gentle.
    #[default]
    TwoPoint,
    /// PRED paper §II-A: p = λ·(q − min_K), mark at q ≥ max_K.
    PointSlope,
}

/// What RED does to a selected packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// ECN-mark (Not-ECT packets pass or are dropped, per `--not-ect`).
    #[default]
    Mark,
    /// Drop.
    Drop,
}

/// RED parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `two-point` (Floyd) or `point-slope` (PRED).
    pub form: Form,
    /// `mark` or `drop`.
    pub action: Action,
    /// `bytes` or `packets`.
    pub unit: LengthUnit,
    /// `queue` or `port` occupancy.
    pub occupancy: Occupancy,
    /// EWMA weight w_q in (0, 1]; 1 = instantaneous queue.
    pub w_q: f64,
    /// min_th (bytes or packets).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub min_th: u64,
    /// max_th (bytes or packets).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub max_th: u64,
    /// max_p in (0, 1].
    pub max_p: f64,
    /// Gentle RED: p rises from max_p to 1 between max_th and 2·max_th.
    pub gentle: bool,
    /// Floyd's p_a = p_b/(1 − count·p_b) spacing.
    pub count_based: bool,
    /// Point-slope λ: probability per byte (or per packet).
    pub lambda: f64,
    /// Point-slope min_K (bytes or packets).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub min_k: u64,
    /// Point-slope max_K (bytes or packets).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub max_k: u64,
    /// Typical packet size for the idle-time correction, bytes.
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub avpkt: u64,
}

impl Default for Config {
    /// 1 Gbit/s, RTT 250 µs.
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000)
    }
}

impl Config {
    /// Defaults scaled to a link (see the module header).
    pub fn for_link(rate: Rate, rtt_ns: Nanos) -> Self {
        let max_th = rate.bytes_in(rtt_ns).max(3);
        let min_th = max_th / 3;
        let max_p = 0.1;
        let avpkt = 1000;
        let s = rate.tx_time_ns(avpkt).max(1) as f64;
        Config {
            form: Form::TwoPoint,
            action: Action::Mark,
            unit: LengthUnit::Bytes,
            occupancy: Occupancy::Queue,
            w_q: ewma_weight_for(s, rtt_ns.max(1) as f64),
            min_th,
            max_th,
            max_p,
            gentle: true,
            count_based: true,
            lambda: slope(max_p, min_th as f64, max_th as f64),
            min_k: min_th,
            max_k: 500 * 1024,
            avpkt,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.w_q > 0.0 && self.w_q <= 1.0) {
            return Err(format!(
                "red: w_q must be in (0, 1] (1 = instantaneous), got {}",
                self.w_q
            ));
        }
        match self.form {
            Form::TwoPoint => {
                if self.min_th >= self.max_th {
                    return Err(format!(
                        "red: min_th ({}) must be below max_th ({})",
                        self.min_th, self.max_th
                    ));
                }
                if !(self.max_p > 0.0 && self.max_p <= 1.0) {
                    return Err(format!("red: max_p must be in (0, 1], got {}", self.max_p));
                }
            }
            Form::PointSlope => {
                if !(self.lambda > 0.0 && self.lambda.is_finite()) {
                    return Err(format!(
                        "red: lambda (slope) must be > 0, got {}",
                        self.lambda
                    ));
                }
                if self.min_k >= self.max_k {
                    return Err(format!(
                        "red: min_k ({}) must be below max_k ({})",
                        self.min_k, self.max_k
                    ));
                }
            }
        }
        if self.avpkt == 0 {
            return Err("red: avpkt must be > 0 bytes".into());
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        let unit = match self.unit {
            LengthUnit::Bytes => "B",
            LengthUnit::Packets => "pkts",
        };
        let occ = match self.occupancy {
            Occupancy::Queue => "per-queue",
            Occupancy::Port => "per-port",
        };
        let act = match self.action {
            Action::Mark => "mark",
            Action::Drop => "drop",
        };
        match self.form {
            Form::TwoPoint => format!(
                "red ({occ}, {act}): w_q = {}, min_th = {} {unit}, max_th = {} {unit}, max_p = {}, gentle = {}, count-based = {} (Floyd 1993 Fig. 2)",
                self.w_q, self.min_th, self.max_th, self.max_p, self.gentle, self.count_based
            ),
            Form::PointSlope => format!(
                "red point-slope ({occ}, {act}): p = λ·(q − min_K), λ = {} per {unit}, min_K = {} {unit}, max_K = {} {unit}, w_q = {} (PRED paper §II-A)",
                self.lambda, self.min_k, self.max_k, self.w_q
            ),
        }
    }
}

/// w_q whose EWMA time constant is `horizon_ns` when samples arrive every
/// `sample_ns`: w_q = 1 − exp(−sample/horizon).
pub fn ewma_weight_for(sample_ns: f64, horizon_ns: f64) -> f64 {
    (1.0 - (-sample_ns / horizon_ns).exp()).clamp(1e-6, 1.0)
}

/// avg ← (1 − w_q)·avg + w_q·q (Floyd Fig. 2, non-empty queue).
pub fn red_ewma(avg: f64, q: f64, w_q: f64) -> f64 {
    (1.0 - w_q) * avg + w_q * q
}

/// avg ← (1 − w_q)^m · avg, m = idle/s (Floyd Fig. 2, empty queue).
pub fn red_idle_decay(avg: f64, w_q: f64, idle_ns: Nanos, s_ns: Nanos) -> f64 {
    let m = idle_ns as f64 / s_ns.max(1) as f64;
    avg * (1.0 - w_q).powf(m)
}

/// p_b = max_p·(avg − min_th)/(max_th − min_th) (Floyd Fig. 2).
pub fn red_pb(avg: f64, min_th: f64, max_th: f64, max_p: f64) -> f64 {
    max_p * (avg - min_th) / (max_th - min_th)
}

/// Gentle RED: p_b = max_p + (1 − max_p)·(avg − max_th)/max_th for max_th ≤ avg < 2·max_th.
pub fn gentle_pb(avg: f64, max_th: f64, max_p: f64) -> f64 {
    max_p + (1.0 - max_p) * (avg - max_th) / max_th
}

/// p_a = p_b/(1 − count·p_b), 1 once count·p_b ≥ 1 (Floyd Fig. 2, §4).
pub fn red_pa(pb: f64, count: i64) -> f64 {
    let c = count.max(0) as f64;
    if c * pb >= 1.0 {
        1.0
    } else {
        (pb / (1.0 - c * pb)).min(1.0)
    }
}

/// λ = max_p/(max_K − min_K) (PRED paper §II-A).
pub fn slope(max_p: f64, min_k: f64, max_k: f64) -> f64 {
    max_p / (max_k - min_k)
}

/// p = λ·(q − min_K), clamped to [0, 1] (PRED paper §II-A).
pub fn point_slope_p(q: f64, lambda: f64, min_k: f64) -> f64 {
    (lambda * (q - min_k)).clamp(0.0, 1.0)
}

/// Running variables of one measured queue (a queue, or the port).
#[derive(Clone, Debug, Serialize)]
pub struct Vars {
    /// EWMA of the occupancy in bytes.
    pub avg_bytes: f64,
    /// EWMA of the occupancy in packets.
    pub avg_pkts: f64,
    /// Packets since the last mark (−1: below min_th).
    pub count: i64,
    /// Start of the current idle period (q_time), if empty.
    pub q_time: Option<Nanos>,
}

impl Default for Vars {
    fn default() -> Self {
        Vars {
            avg_bytes: 0.0,
            avg_pkts: 0.0,
            count: -1,
            q_time: None,
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Packets decided on.
    pub packets: u64,
    /// Probabilistic marks/drops.
    pub probabilistic: u64,
    /// Forced marks/drops (above max_th, 2·max_th, or max_K).
    pub forced: u64,
}

/// A RED instance for one port.
#[derive(Clone, Debug)]
pub struct Red {
    params: Config,
    /// s: transmission time of an `avpkt` packet at C, ns.
    s_ns: Nanos,
    vars: Vec<Vars>,
    counters: Counters,
}

impl Red {
    /// Builds from a validated config, `num_queues` and the port rate C.
    pub fn new(params: Config, num_queues: usize, rate: Rate) -> Self {
        let slots = match params.occupancy {
            Occupancy::Queue => num_queues.max(1),
            Occupancy::Port => 1,
        };
        Red {
            s_ns: rate.tx_time_ns(params.avpkt).max(1),
            params,
            vars: vec![Vars::default(); slots],
            counters: Counters::default(),
        }
    }
    /// The parameters in force.
    pub fn params(&self) -> &Config {
        &self.params
    }
    /// Point-slope: set λ (probability per unit of `unit`).
    pub fn set_slope(&mut self, lambda: f64) {
        self.params.form = Form::PointSlope;
        self.params.lambda = lambda.max(0.0);
    }
    /// Point-slope: set min_K (in `unit`).
    pub fn set_min_k(&mut self, min_k: u64) {
        self.params.form = Form::PointSlope;
        self.params.min_k = min_k;
    }
    /// Point-slope with λ in probability per **byte** and min_K in bytes.
    /// If this RED counts packets, both are converted with `avpkt`
    /// (λ_pkt = λ·avpkt, min_K = min_K_bytes/avpkt); use
    /// [`Red::set_slope`]/[`Red::set_min_k`] for exact packet values.
    pub fn set_point_slope(&mut self, lambda: f64, min_k_bytes: u64) {
        match self.params.unit {
            LengthUnit::Bytes => {
                self.set_slope(lambda);
                self.set_min_k(min_k_bytes);
            }
            LengthUnit::Packets => {
                let a = self.params.avpkt.max(1);
                self.set_slope(lambda * a as f64);
                self.set_min_k(min_k_bytes / a);
            }
        }
    }
    /// The average of `slot` in the configured unit.
    pub fn avg(&self, slot: usize) -> f64 {
        let v = &self.vars[slot];
        match self.params.unit {
            LengthUnit::Bytes => v.avg_bytes,
            LengthUnit::Packets => v.avg_pkts,
        }
    }
    /// Per-slot averages and counts, and counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "red",
            "params": self.params,
            "idle_s": fmt_duration(self.s_ns),
            "slots": self.vars,
            "counters": self.counters,
        })
    }
    fn slot(&self, queue: usize) -> usize {
        match self.params.occupancy {
            Occupancy::Queue => queue.min(self.vars.len() - 1),
            Occupancy::Port => 0,
        }
    }
    fn update_avg(&mut self, slot: usize, q: &QueueCtx, now: Nanos) {
        let p = &self.params;
        let v = &mut self.vars[slot];
        let qb = q.length(p.occupancy, LengthUnit::Bytes) as f64;
        let qp = q.length(p.occupancy, LengthUnit::Packets) as f64;
        if p.w_q >= 1.0 {
            v.avg_bytes = qb;
            v.avg_pkts = qp;
            return;
        }
        if qp > 0.0 {
            v.avg_bytes = red_ewma(v.avg_bytes, qb, p.w_q);
            v.avg_pkts = red_ewma(v.avg_pkts, qp, p.w_q);
            v.q_time = None;
        } else {
            if let Some(t) = v.q_time {
                let idle = now.saturating_sub(t);
                v.avg_bytes = red_idle_decay(v.avg_bytes, p.w_q, idle, self.s_ns);
                v.avg_pkts = red_idle_decay(v.avg_pkts, p.w_q, idle, self.s_ns);
            }
            v.q_time = Some(now);
        }
    }
    fn act(&mut self, reason: MarkReason) -> Verdict {
        if reason == MarkReason::Threshold {
            self.counters.forced += 1;
        } else {
            self.counters.probabilistic += 1;
        }
        match self.params.action {
            Action::Mark => Verdict::Mark(reason),
            Action::Drop => Verdict::Drop(DropReason::Aqm),
        }
    }
}

impl Aqm for Red {
    fn on_enqueue(&mut self, _pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        let slot = self.slot(q.queue);
        self.update_avg(slot, q, now);
        self.counters.packets += 1;
        let avg = self.avg(slot);
        let p = self.params.clone();
        match p.form {
            Form::PointSlope => {
                let (min_k, max_k) = (p.min_k as f64, p.max_k as f64);
                if avg >= max_k {
                    self.act(MarkReason::Threshold)
                } else if avg > min_k && rng.bernoulli(point_slope_p(avg, p.lambda, min_k)) {
                    self.act(MarkReason::Probabilistic)
                } else {
                    Verdict::Pass
                }
            }
            Form::TwoPoint => {
                let (min_th, max_th) = (p.min_th as f64, p.max_th as f64);
                let pb = if avg < min_th {
                    self.vars[slot].count = -1;
                    return Verdict::Pass;
                } else if avg < max_th {
                    red_pb(avg, min_th, max_th, p.max_p)
                } else if p.gentle && avg < 2.0 * max_th {
                    gentle_pb(avg, max_th, p.max_p)
                } else {
                    self.vars[slot].count = 0;
                    return self.act(MarkReason::Threshold);
                };
                let v = &mut self.vars[slot];
                v.count += 1;
                let pa = if p.count_based {
                    red_pa(pb, v.count)
                } else {
                    pb
                };
                if rng.bernoulli(pa) {
                    v.count = 0;
                    self.act(MarkReason::Probabilistic)
                } else {
                    Verdict::Pass
                }
            }
        }
    }
    fn on_dequeue(
        &mut self,
        _pkt: &Packet,
        q: &QueueCtx,
        now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        if q.length(self.params.occupancy, LengthUnit::Packets) == 0 {
            let slot = self.slot(q.queue);
            self.vars[slot].q_time = Some(now);
        }
        Verdict::Pass
    }
    fn on_idle(&mut self, now: Nanos) {
        for v in &mut self.vars {
            if v.q_time.is_none() {
                v.q_time = Some(now);
            }
        }
    }
}

impl AqmParams for Config {
    type Instance = Red;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        (
            "form",
            "two-point (Floyd) or point-slope (p = λ·(q − min_k), PRED paper §II-A)",
        ),
        ("action", "mark (ECN) or drop"),
        (
            "unit",
            "bytes or packets: the unit of min_th, max_th, min_k, max_k and λ",
        ),
        (
            "occupancy",
            "queue (the packet's queue) or port (the whole buffer)",
        ),
        (
            "w_q",
            "EWMA weight of the average queue, in (0, 1]; 1 = instantaneous queue",
        ),
        ("min_th", "two-point lower threshold, bytes (or packets)"),
        ("max_th", "two-point upper threshold, bytes (or packets)"),
        ("max_p", "marking probability at max_th, in (0, 1]"),
        (
            "gentle",
            "true: p rises from max_p to 1 between max_th and 2·max_th",
        ),
        (
            "count_based",
            "true: Floyd's p_a = p_b/(1 − count·p_b) spacing of marks",
        ),
        (
            "lambda",
            "point-slope λ, probability per byte (or packet) above min_k",
        ),
        ("min_k", "point-slope min_K, bytes (or packets)"),
        (
            "max_k",
            "point-slope max_K: mark every packet at or above it, bytes (or packets)",
        ),
        (
            "avpkt",
            "typical packet for the idle-time correction, bytes",
        ),
    ];
    const LENGTH_KEYS: &'static [&'static str] = &["min_th", "max_th", "min_k", "max_k"];
    const SIZE_KEYS: &'static [&'static str] = &["min_th", "max_th", "min_k", "max_k", "avpkt"];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_link(env.rate, env.rtt_ns)
    }
    fn build(&self, env: &AqmEnv) -> Result<Red, AqmConfigError> {
        Ok(Red::new(self.clone(), env.num_queues.max(1), env.rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};
    use crate::units::US;

    fn cfg(min_th: u64, max_th: u64, max_p: f64, w_q: f64) -> Config {
        Config {
            unit: LengthUnit::Packets,
            min_th,
            max_th,
            max_p,
            w_q,
            gentle: false,
            ..Config::default()
        }
    }

    #[test]
    fn ewma_converges_as_the_formula_says() {
        let c = cfg(5, 15, 0.1, 0.002);
        c.validate().unwrap();
        let mut r = Red::new(c, 1, Rate::gbit(1));
        let mut rng = SimRng::new(1);
        // Constant q = 10: avg_n = 10·(1 − (1 − w)^n).
        for n in 1..=2000u32 {
            r.on_enqueue(&ect(1000, 0), &ctx(0, 10_000, 10), 0, &mut rng);
            let expect = 10.0 * (1.0 - (1.0f64 - 0.002).powi(n as i32));
            assert!((r.avg(0) - expect).abs() < 1e-9, "n={n}");
        }
    }

    #[test]
    fn idle_time_decays_the_average() {
        let c = cfg(5, 15, 0.1, 0.02);
        let mut r = Red::new(c, 1, Rate::gbit(1)); // s = 8 µs for avpkt 1000
        let mut rng = SimRng::new(1);
        for _ in 0..500 {
            r.on_enqueue(&ect(1000, 0), &ctx(0, 10_000, 10), 0, &mut rng);
        }
        let a0 = r.avg(0);
        // The queue empties at 1 ms, next arrival at 1 ms + 80 µs: m = 10.
        r.on_dequeue(&ect(1000, 0), &ctx(0, 0, 0), 1_000_000, &mut rng);
        r.on_enqueue(&ect(1000, 0), &ctx(0, 0, 0), 1_080_000, &mut rng);
        assert!((r.avg(0) - a0 * 0.98f64.powi(10)).abs() < 1e-9);
        assert_eq!(r.s_ns, 8 * US);
    }

    #[test]
    fn probability_between_thresholds_and_count_spacing() {
        // Instantaneous, q = 10 between 5 and 15: p_b = 0.1·5/10 = 0.05.
        let c = cfg(5, 15, 0.1, 1.0);
        let mut r = Red::new(c, 1, Rate::gbit(1));
        let mut rng = SimRng::new(9);
        assert!((red_pb(10.0, 5.0, 15.0, 0.1) - 0.05).abs() < 1e-12);
        let mut gaps = vec![];
        let mut since = 0;
        for _ in 0..200_000 {
            since += 1;
            if r.on_enqueue(&ect(1000, 0), &ctx(0, 10_000, 10), 0, &mut rng) != Verdict::Pass {
                gaps.push(since);
                since = 0;
            }
        }
        // Floyd Fig. 2 taken literally (count ← count + 1 before p_a, count ← 0
        // on a mark): P[gap = n] = p_b/(1 − p_b) for n = 1 .. 1/p_b − 1, i.e.
        // uniform on 1..=19 here, mean 10 (Floyd §7 states 1..1/p_b, counting
        // the marked packet's predecessor differently).
        assert!(gaps.iter().all(|&g| (1..=19).contains(&g)));
        let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        assert!((mean - 10.0).abs() < 0.2, "{mean}");
        let ones = gaps.iter().filter(|&&g| g == 1).count() as f64 / gaps.len() as f64;
        assert!((ones - 1.0 / 19.0).abs() < 0.01, "{ones}");
        // Below min_th never, at/above max_th always (non-gentle).
        assert_eq!(
            r.on_enqueue(&ect(1000, 0), &ctx(0, 4000, 4), 0, &mut rng),
            Verdict::Pass
        );
        assert_eq!(r.vars[0].count, -1);
        assert_eq!(
            r.on_enqueue(&ect(1000, 0), &ctx(0, 15_000, 15), 0, &mut rng),
            Verdict::Mark(MarkReason::Threshold)
        );
    }

    #[test]
    fn pa_formula() {
        assert_eq!(red_pa(0.05, 0), 0.05);
        assert!((red_pa(0.05, 10) - 0.1).abs() < 1e-12);
        assert_eq!(red_pa(0.05, 19), 1.0);
        assert_eq!(red_pa(0.05, 25), 1.0);
    }

    #[test]
    fn gentle_region_ramps_to_one() {
        let mut c = cfg(5, 15, 0.1, 1.0);
        c.gentle = true;
        c.count_based = false;
        let mut r = Red::new(c, 1, Rate::gbit(1));
        let mut rng = SimRng::new(3);
        assert!((gentle_pb(22.5, 15.0, 0.1) - 0.55).abs() < 1e-12);
        let n = 100_000;
        let hits = (0..n)
            .filter(|_| r.on_enqueue(&ect(1000, 0), &ctx(0, 0, 22), 0, &mut rng) != Verdict::Pass)
            .count() as f64;
        // q = 22 → p = 0.1 + 0.9·7/15 = 0.52.
        assert!((hits / n as f64 - 0.52).abs() < 0.01);
        assert_eq!(
            r.on_enqueue(&ect(1000, 0), &ctx(0, 0, 30), 0, &mut rng),
            Verdict::Mark(MarkReason::Threshold)
        );
    }

    #[test]
    fn point_slope_form() {
        // PRED paper §II-A example: 0.1/(0.2 MB − 0.005 MB) ≈ 0.513 per MB.
        assert!((slope(0.1, 0.005, 0.2) - 0.5128).abs() < 1e-3);
        let mut r = Red::new(
            Config {
                w_q: 1.0,
                ..Config::default()
            },
            2,
            Rate::gbit(1),
        );
        // λ = 1e-5 per byte, min_K = 10 000 B: at q = 40 000 B, p = 0.3.
        r.set_point_slope(1e-5, 10_000);
        r.params.validate().unwrap();
        assert!((point_slope_p(40_000.0, 1e-5, 10_000.0) - 0.3).abs() < 1e-12);
        let mut rng = SimRng::new(5);
        let n = 100_000;
        let hits = (0..n)
            .filter(|_| {
                r.on_enqueue(&ect(1500, 0), &ctx(1, 40_000, 27), 0, &mut rng) != Verdict::Pass
            })
            .count() as f64;
        assert!((hits / n as f64 - 0.3).abs() < 0.01);
        assert_eq!(
            r.on_enqueue(&ect(1500, 0), &ctx(1, 10_000, 7), 0, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            r.on_enqueue(&ect(1500, 0), &ctx(1, 500 * 1024, 400), 0, &mut rng),
            Verdict::Mark(MarkReason::Threshold)
        );
        // The controller moves the line at run time.
        r.set_min_k(40_000);
        assert_eq!(
            r.on_enqueue(&ect(1500, 0), &ctx(1, 40_000, 27), 0, &mut rng),
            Verdict::Pass
        );
    }

    #[test]
    fn per_port_and_drop_mode() {
        let mut c = cfg(5, 15, 0.1, 1.0);
        c.occupancy = Occupancy::Port;
        c.action = Action::Drop;
        let mut r = Red::new(c, 4, Rate::gbit(1));
        let mut rng = SimRng::new(1);
        let q = QueueCtx {
            queue: 3,
            queue_bytes: 0,
            queue_pkts: 0,
            port_bytes: 30_000,
            port_pkts: 20,
            active_queues: 2,
        };
        assert_eq!(
            r.on_enqueue(&ect(1000, 0), &q, 0, &mut rng),
            Verdict::Drop(DropReason::Aqm)
        );
    }

    #[test]
    fn validate_errors() {
        assert!(cfg(15, 5, 0.1, 1.0)
            .validate()
            .unwrap_err()
            .contains("min_th"));
        assert!(cfg(5, 15, 0.0, 1.0)
            .validate()
            .unwrap_err()
            .contains("max_p"));
        assert!(cfg(5, 15, 0.1, 0.0).validate().unwrap_err().contains("w_q"));
    }
}

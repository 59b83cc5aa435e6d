//! PRED — Performance-oriented RED: RED in point-slope form whose slope
//! follows the number of flows (FCS) and whose operating point is A/B tested
//! (QLA).
//!
//! Tong Li, Xinle Du et al., "Revisiting Random Early Detection Tuning for
//! High-Performance Datacenter Networks", IEEE/ACM ToN 2025.
//!
//! ```text
//! RED, point-slope (§II-A):   p = λ·(q − min_K),  min_K < q < max_K;  mark if q ≥ max_K
//! FCS (§IV-A, §V-B Alg. 1):   every T_FCS: n_last ← n, n ← 0;  a flow's first packet
//!                             in a period: n ← n + 1;  N = max(n_last, n)
//!                             λ = λ_QLA · f(N),  f(N) = N   (√N, N² selectable)
//! QLA (§IV-B):                every T_QLA: U = β·R/C + (1 − β)·Φ(q̄)
//!                             four periods: λ_QLA + Δλ, λ_QLA − Δλ, λ_QLA − Δλ, λ_QLA + Δλ
//!                             → U1, U2, U3, U4 (Fig. 10(b); the P4 of Fig. 12 adds the
//!                             step in windows 0 and 3, subtracts it in 1 and 2)
//!                             U1 > U2 and U4 > U3: λ_QLA += Δλ
//!                             U2 > U1 and U3 > U4: λ_QLA −= Δλ
//!                             otherwise (inconclusive): stay
//!                             below λ_min: λ stays λ_min and min_K moves by Δmin_K instead
//! ```
//!
//! Choices where the paper leaves room (each a parameter or written here):
//!
//! * **λ's unit: marking probability per packet of queue**, q and min_K in
//!   packets, instantaneous queue (RED w_q = 1, as PRED's evaluation: RED "is
//!   based on instantaneous ECN marking", §VI-A). The §II-A example
//!   (0.1/0.195 MB ≈ 0.5) reads λ per MB, but every parameter of the
//!   evaluation is in packets (min_K 10, q_left 15, Δmin_K 5 packets, §IV-C),
//!   and only a per-packet λ makes λ_min = 0.05 and Δλ = 0.025 meaningful
//!   next to max_K = 500 KB: per MB, λ_min would mark at most 2.5 % of the
//!   packets below max_K. With DCTCP (a flow halves its window by α/2 once per
//!   window, α ≈ p, window W = (C·d + q)/N) the steady state is
//!   λ_QLA·f(N)·(q − min_K)·(q + C·d) = 2N in packets, so f(N) = N makes q
//!   independent of N — the paper's experimental finding (§VI-B, Fig. 13).
//!   A per-packet probability is not rescaled to the link.
//! * **Scaling to the emulated link.** T_FCS = 1.25·RTT and T_QLA = 5·RTT
//!   (§IV-C, the data-plane recommendation) follow `--rtt`. The queue
//!   thresholds the paper gives in packets (min_K = 10, q_left = 15,
//!   Δmin_K = 5) and max_K = 500 KB belong to its 10 Gbit/s, 80 µs-RTT
//!   simulation (Fig. 25: bandwidth-delay product 100 KB ≈ 67 packets); they
//!   are scaled by C·RTT / 100 KB and rounded (at least 1 packet).
//!   At 1 Gbit/s and 250 µs that is min_K = 3, q_left = 5, Δmin_K = 2,
//!   max_K = 107 packets. λ_QLA starts at 0.1 (the §VI-B testbed: "λ in FCS(N)
//!   and PRED is 0.1").
//! * **Φ(q̄)** (Fig. 10(a) is a figure only): 1 for q̄ ≤ q_left, then falling
//!   linearly to 0 at `q_right` (default max_K) — the P4 reward of Fig. 12 is
//!   linear in the remaining queue, capped. R is the frame bytes dequeued in
//!   the period over C × (period length); q̄ is the time average of the
//!   port's backlog in packets over the period (the Tofino samples the depth
//!   and divides, §V-B; the time average is the same without sampling bias).
//!   With per-queue occupancy and several queues the port's backlog and
//!   departures are used: one (λ, min_K) line serves the whole port, as FCS
//!   counts the flows of the port.
//! * **min_K mode** (§IV-B "Adjustment of minK"): a "less aggressive" step
//!   from λ_QLA ≤ λ_min keeps λ_QLA = λ_min and raises min_K by Δmin_K; a
//!   "more aggressive" step while min_K is above its start lowers min_K first,
//!   and λ moves again once min_K is back at its start. The trials of each
//!   four-period round test the two neighbours of the current setting along
//!   this one ladder (more aggressive / less aggressive). λ_QLA is capped at
//!   `lambda_max` (robustness option, default 1 per packet: above that every
//!   packet one packet above min_K is marked) and min_K below max_K.
//! * A period is closed by the port's tick as well as by packets, so it ends
//!   while no packet arrives (see `flowcount`); T_QLA periods likewise.
//!   Packets the buffer refuses are not seen (the AQM runs after admission),
//!   so they are not counted as flows; non-IP frames are not counted.
//! * `fcs = "off"` and `qla = false` give the paper's "Only QLA" and
//!   "Only FCS" variants (§VI-A).

use super::flowcount::{FlowCounter, MAX_INDEX_BITS};
use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::red::{self, Red};
use super::util::{de_duration, scale_ns, ser_duration};
use super::{Aqm, LengthUnit, Occupancy, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos, Rate};
use serde::{Deserialize, Serialize};

/// The bandwidth-delay product of the paper's simulation (10 Gbit/s, RTT
/// 80 µs, Fig. 25), to which its packet thresholds belong, bytes.
pub const PAPER_BDP_BYTES: f64 = 100_000.0;

/// f(N), the FCS multiplier of λ (§IV-A "Selection of f(N)").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowScaling {
    /// f(N) = N (the paper's choice).
    #[default]
    N,
    /// f(N) = √N (what Eq. 1 asks for).
    Sqrt,
    /// f(N) = N² (tested in Fig. 13, too aggressive).
    Square,
    /// f(N) = 1: FCS off ("Only QLA").
    Off,
}

/// f(N) for `n` flows (n ≥ 1).
pub fn flow_factor(f: FlowScaling, n: u32) -> f64 {
    let n = n.max(1) as f64;
    match f {
        FlowScaling::N => n,
        FlowScaling::Sqrt => n.sqrt(),
        FlowScaling::Square => n * n,
        FlowScaling::Off => 1.0,
    }
}

/// PRED parameters. Queue quantities in packets, λ per packet, times in ns.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Initial λ_QLA, marking probability per packet above min_K.
    pub lambda: f64,
    /// QLA trial step Δλ.
    pub delta_lambda: f64,
    /// λ_min: below it QLA moves min_K instead.
    pub lambda_min: f64,
    /// Robustness option: largest λ_QLA.
    pub lambda_max: f64,
    /// Initial (and smallest) min_K, packets.
    pub min_k: u64,
    /// QLA min_K step Δmin_K, packets.
    pub delta_min_k: u64,
    /// max_K, packets: mark every packet at or above it.
    pub max_k: u64,
    /// q_left: Φ = 1 at or below this average queue, packets.
    pub q_left: u64,
    /// Φ = 0 at or above this average queue, packets.
    pub q_right: u64,
    /// β, the weight of goodput in the utility.
    pub beta: f64,
    /// T_FCS, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub t_fcs: Nanos,
    /// T_QLA, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub t_qla: Nanos,
    /// f(N): `n`, `sqrt`, `square`, `off`.
    pub fcs: FlowScaling,
    /// Run the Queue Length Adjuster.
    pub qla: bool,
    /// log2 of the flow counter's slots (IndexSize).
    pub index_bits: u32,
    /// `queue` or `port` occupancy for the RED decision.
    pub occupancy: Occupancy,
    /// Robustness option (not in the paper, default 0): a trial wins a pair
    /// only by more than this utility difference, so measurement noise alone
    /// does not walk λ_QLA.
    pub min_gain: f64,
}

impl Default for Config {
    /// 1 Gbit/s, RTT 250 µs, 1500-byte MTU.
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000, 1500)
    }
}

fn scaled_pkts(paper_pkts: f64, s: f64) -> u64 {
    ((paper_pkts * s).round() as u64).max(1)
}

impl Config {
    /// The paper's parameters scaled to a link of rate `rate`, base RTT
    /// `rtt_ns` and `mtu_bytes` frames (see the module header).
    pub fn for_link(rate: Rate, rtt_ns: Nanos, mtu_bytes: u32) -> Self {
        let s = rate.bytes_in(rtt_ns) as f64 / PAPER_BDP_BYTES;
        let mtu = mtu_bytes.max(64) as f64;
        let max_k = scaled_pkts(500.0 * 1024.0 / mtu, s).max(4);
        Config {
            lambda: 0.1,
            delta_lambda: 0.025,
            lambda_min: 0.05,
            lambda_max: 1.0,
            min_k: scaled_pkts(10.0, s),
            delta_min_k: scaled_pkts(5.0, s),
            max_k,
            q_left: scaled_pkts(15.0, s),
            q_right: max_k,
            beta: 0.4,
            t_fcs: scale_ns(rtt_ns, 1.25),
            t_qla: scale_ns(rtt_ns, 5.0),
            fcs: FlowScaling::N,
            qla: true,
            index_bits: 12,
            occupancy: Occupancy::Queue,
            min_gain: 0.0,
        }
    }

    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64| v > 0.0 && v.is_finite();
        if !pos(self.lambda) {
            return Err(format!(
                "pred: lambda must be > 0 (per packet), got {}",
                self.lambda
            ));
        }
        if !pos(self.lambda_min) || !pos(self.lambda_max) || self.lambda_min > self.lambda_max {
            return Err(format!(
                "pred: need 0 < lambda_min ({}) ≤ lambda_max ({})",
                self.lambda_min, self.lambda_max
            ));
        }
        if !(self.lambda >= self.lambda_min && self.lambda <= self.lambda_max) {
            return Err(format!(
                "pred: lambda ({}) must lie in [lambda_min, lambda_max] = [{}, {}]",
                self.lambda, self.lambda_min, self.lambda_max
            ));
        }
        if !(self.delta_lambda >= 0.0 && self.delta_lambda.is_finite()) {
            return Err(format!(
                "pred: delta_lambda must be ≥ 0, got {}",
                self.delta_lambda
            ));
        }
        if self.min_k >= self.max_k {
            return Err(format!(
                "pred: min_k ({}) must be below max_k ({}) (packets)",
                self.min_k, self.max_k
            ));
        }
        if self.q_left >= self.q_right {
            return Err(format!(
                "pred: q_left ({}) must be below q_right ({}) (packets)",
                self.q_left, self.q_right
            ));
        }
        if !(self.min_gain >= 0.0 && self.min_gain < 1.0) {
            return Err(format!(
                "pred: min_gain must be in [0, 1), got {}",
                self.min_gain
            ));
        }
        if !(0.0..=1.0).contains(&self.beta) {
            return Err(format!("pred: beta must be in [0, 1], got {}", self.beta));
        }
        if self.t_fcs == 0 || self.t_qla == 0 {
            return Err("pred: t_fcs and t_qla must be > 0 (e.g. t_fcs=300us)".into());
        }
        if !(1..=MAX_INDEX_BITS).contains(&self.index_bits) {
            return Err(format!(
                "pred: index_bits must be in 1..={MAX_INDEX_BITS}, got {}",
                self.index_bits
            ));
        }
        Ok(())
    }

    /// One line with the effective values.
    pub fn describe(&self) -> String {
        let occ = match self.occupancy {
            Occupancy::Queue => "per-queue",
            Occupancy::Port => "per-port",
        };
        let f = match self.fcs {
            FlowScaling::N => "N",
            FlowScaling::Sqrt => "√N",
            FlowScaling::Square => "N²",
            FlowScaling::Off => "1 (FCS off)",
        };
        let qla = if self.qla {
            format!(
                "QLA every T_QLA = {}: β = {}, q_left = {} pkts, q_right = {} pkts, Δλ = {}, λ_min = {}, λ_max = {}, Δmin_K = {} pkts, min_gain = {}",
                fmt_duration(self.t_qla),
                self.beta,
                self.q_left,
                self.q_right,
                self.delta_lambda,
                self.lambda_min,
                self.lambda_max,
                self.delta_min_k,
                self.min_gain
            )
        } else {
            "QLA off".into()
        };
        format!(
            "pred ({occ}, mark): p = λ_QLA·f(N)·(q − min_K) per packet, λ_QLA = {}, f(N) = {f}, N counted per T_FCS = {} (2^{} slots), min_K = {} pkts, max_K = {} pkts; {qla} (PRED paper §IV)",
            self.lambda,
            fmt_duration(self.t_fcs),
            self.index_bits,
            self.min_k,
            self.max_k,
        )
    }

    fn red_config(&self, mtu_bytes: u32) -> red::Config {
        red::Config {
            form: red::Form::PointSlope,
            action: red::Action::Mark,
            unit: LengthUnit::Packets,
            occupancy: self.occupancy,
            w_q: 1.0,
            lambda: self.lambda,
            min_k: self.min_k,
            max_k: self.max_k,
            avpkt: mtu_bytes.max(1) as u64,
            ..red::Config::default()
        }
    }
}

/// Φ(q̄): 1 up to q_left, linear to 0 at q_right (Fig. 10(a)).
pub fn phi(q_avg: f64, q_left: f64, q_right: f64) -> f64 {
    if q_avg <= q_left {
        1.0
    } else if q_avg >= q_right {
        0.0
    } else {
        (q_right - q_avg) / (q_right - q_left)
    }
}

/// U = β·R/C + (1 − β)·Φ(q̄) (§IV-B, utility function).
pub fn utility(beta: f64, goodput_frac: f64, phi: f64) -> f64 {
    beta * goodput_frac + (1.0 - beta) * phi
}

/// A QLA operating point: λ_QLA and min_K (packets).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Setting {
    /// λ_QLA, per packet.
    pub lambda: f64,
    /// min_K, packets.
    pub min_k: u64,
}

/// The QLA's decision after four trials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The more aggressive neighbour won both pairs (λ + Δλ, or min_K − Δmin_K).
    More,
    /// The less aggressive neighbour won both pairs (λ − Δλ, or min_K + Δmin_K).
    Less,
    /// Inconclusive: stay.
    Stay,
}

/// U1 > U2 and U4 > U3 → More; U2 > U1 and U3 > U4 → Less; else Stay, where
/// U1, U4 were measured with the more aggressive setting (§IV-B, Decision
/// Maker). `min_gain` (0 in the paper) is the margin a win needs.
pub fn decide(u: [f64; 4], min_gain: f64) -> Decision {
    if u[0] > u[1] + min_gain && u[3] > u[2] + min_gain {
        Decision::More
    } else if u[1] > u[0] + min_gain && u[2] > u[3] + min_gain {
        Decision::Less
    } else {
        Decision::Stay
    }
}

/// Which trial of a round uses the more aggressive setting: +, −, −, +.
pub const TRIAL_MORE: [bool; 4] = [true, false, false, true];

/// Measurements of one T_QLA period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PeriodStats {
    /// R/C: bytes dequeued over C × period.
    pub goodput_frac: f64,
    /// q̄, time-average port backlog, packets.
    pub q_avg_pkts: f64,
    /// Utility U.
    pub utility: f64,
}

/// Counters of one port.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// QLA periods (trials) closed.
    pub qla_periods: u64,
    /// QLA decisions: more aggressive (λ + Δλ or min_K − Δmin_K).
    pub decisions_more: u64,
    /// QLA decisions: less aggressive (λ − Δλ or min_K + Δmin_K).
    pub decisions_less: u64,
    /// QLA decisions: inconclusive, stayed.
    pub decisions_stay: u64,
    /// Largest N seen.
    pub max_flows: u32,
}

/// A PRED instance for one port.
#[derive(Clone, Debug)]
pub struct Pred {
    params: Config,
    /// The RED it drives (point-slope, packets, w_q = 1).
    red: Red,
    /// FCS flow counter.
    fcs: FlowCounter,
    /// C, bytes per second.
    rate_bps: f64,
    /// Running: current QLA operating point.
    base: Setting,
    /// Running: the setting under trial in this T_QLA period.
    trial: Setting,
    /// Running: index of the trial in its round, 0..4.
    trial_idx: usize,
    /// Running: utilities of the round so far.
    u: [f64; 4],
    /// Running: N the RED slope was last set for (0: not yet).
    slope_n: u32,
    /// Running: whether the first event has been seen (periods start there).
    started: bool,
    /// Running: start of the current T_QLA period.
    qla_start: Nanos,
    /// Running: time of the last queue event, for the time average.
    last_t: Nanos,
    /// Running: port backlog (packets) since the last event.
    level: u64,
    /// Running: ∫ backlog dt over the period, packet·ns.
    area: f64,
    /// Running: bytes dequeued in the period.
    bytes: u64,
    /// Last closed period.
    last: PeriodStats,
    /// Utilities of the last complete round.
    last_round: [f64; 4],
    /// Last decision.
    last_decision: Option<Decision>,
    counters: Counters,
}

impl Pred {
    /// Builds from a validated config for `num_queues` queues, a port of rate
    /// `rate` (> 0) and `mtu_bytes` frames.
    pub fn new(params: Config, num_queues: usize, rate: Rate, mtu_bytes: u32) -> Self {
        let red = Red::new(params.red_config(mtu_bytes), num_queues, rate);
        let base = Setting {
            lambda: params.lambda,
            min_k: params.min_k,
        };
        let mut p = Pred {
            fcs: FlowCounter::new(params.t_fcs, params.index_bits, 0),
            red,
            rate_bps: rate.bytes_per_sec(),
            base,
            trial: base,
            trial_idx: 0,
            u: [0.0; 4],
            slope_n: 0,
            started: false,
            qla_start: 0,
            last_t: 0,
            level: 0,
            area: 0.0,
            bytes: 0,
            last: PeriodStats::default(),
            last_round: [0.0; 4],
            last_decision: None,
            counters: Counters::default(),
            params,
        };
        p.trial = p.trial_setting(0);
        p.red.set_min_k(p.trial.min_k);
        p
    }

    /// The parameters in force.
    pub fn params(&self) -> &Config {
        &self.params
    }
    /// N = max(n_last, n_now).
    pub fn flows(&self) -> u32 {
        self.fcs.flows()
    }
    /// The QLA operating point.
    pub fn setting(&self) -> Setting {
        self.base
    }
    /// The setting in force in this T_QLA period.
    pub fn trial(&self) -> Setting {
        self.trial
    }
    /// The slope RED uses now: λ_trial · f(N), per packet.
    pub fn slope(&self) -> f64 {
        self.trial.lambda * flow_factor(self.params.fcs, self.fcs.flows())
    }
    /// min_K in force, packets.
    pub fn min_k(&self) -> u64 {
        self.trial.min_k
    }
    /// The last closed T_QLA period.
    pub fn last_period(&self) -> PeriodStats {
        self.last
    }
    /// Counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// The RED it drives.
    pub fn red(&self) -> &Red {
        &self.red
    }

    /// The more aggressive neighbour of `s` on the (λ, min_K) ladder.
    pub fn more(&self, s: Setting) -> Setting {
        let p = &self.params;
        if s.min_k > p.min_k {
            Setting {
                lambda: s.lambda,
                min_k: s.min_k.saturating_sub(p.delta_min_k).max(p.min_k),
            }
        } else {
            Setting {
                lambda: (s.lambda + p.delta_lambda).min(p.lambda_max),
                min_k: s.min_k,
            }
        }
    }
    /// The less aggressive neighbour of `s`: λ − Δλ down to λ_min, then
    /// min_K + Δmin_K with λ = λ_min (§IV-B "Adjustment of minK").
    pub fn less(&self, s: Setting) -> Setting {
        let p = &self.params;
        // A tolerance so that 0.1 − 2 × 0.025 counts as reaching 0.05.
        if s.lambda > p.lambda_min + 1e-12 {
            Setting {
                lambda: (s.lambda - p.delta_lambda).max(p.lambda_min),
                min_k: s.min_k,
            }
        } else {
            Setting {
                lambda: p.lambda_min,
                min_k: (s.min_k + p.delta_min_k).min(p.max_k - 1),
            }
        }
    }

    fn trial_setting(&self, idx: usize) -> Setting {
        if !self.params.qla {
            self.base
        } else if TRIAL_MORE[idx] {
            self.more(self.base)
        } else {
            self.less(self.base)
        }
    }

    fn start(&mut self, now: Nanos) {
        self.started = true;
        self.qla_start = now;
        self.last_t = now;
        self.fcs = FlowCounter::new(self.params.t_fcs, self.params.index_bits, now);
    }

    /// Adds the backlog held since the last event up to `t`.
    #[inline]
    fn integrate(&mut self, t: Nanos) {
        if t > self.last_t {
            self.area += self.level as f64 * (t - self.last_t) as f64;
            self.last_t = t;
        }
    }

    /// Applies λ_trial·f(N) and min_K of the trial to RED.
    #[inline]
    fn apply_slope(&mut self) {
        let n = self.fcs.flows().max(1);
        if n != self.slope_n {
            self.slope_n = n;
            self.counters.max_flows = self.counters.max_flows.max(n);
            self.red
                .set_slope(self.trial.lambda * flow_factor(self.params.fcs, n));
        }
    }

    /// Closes every period that is over at `now` (FCS and QLA).
    fn advance(&mut self, now: Nanos) {
        if !self.started {
            self.start(now);
        }
        self.fcs.tick(now);
        if now.saturating_sub(self.qla_start) > self.params.t_qla {
            self.close_qla_period(now);
        }
    }

    /// One T_QLA period is over: its utility, and after four, a decision.
    fn close_qla_period(&mut self, now: Nanos) {
        self.integrate(now);
        let len = now.saturating_sub(self.qla_start).max(1) as f64;
        let goodput_frac = if self.rate_bps > 0.0 {
            self.bytes as f64 / (self.rate_bps * len / 1e9)
        } else {
            0.0
        };
        let q_avg = self.area / len;
        let p = &self.params;
        let u = utility(
            p.beta,
            goodput_frac,
            phi(q_avg, p.q_left as f64, p.q_right as f64),
        );
        self.last = PeriodStats {
            goodput_frac,
            q_avg_pkts: q_avg,
            utility: u,
        };
        self.counters.qla_periods += 1;
        self.u[self.trial_idx] = u;
        self.trial_idx += 1;
        if self.trial_idx == 4 {
            self.trial_idx = 0;
            self.last_round = self.u;
            let d = decide(self.u, self.params.min_gain);
            self.last_decision = Some(d);
            if self.params.qla {
                match d {
                    Decision::More => {
                        self.counters.decisions_more += 1;
                        self.base = self.more(self.base);
                    }
                    Decision::Less => {
                        self.counters.decisions_less += 1;
                        self.base = self.less(self.base);
                    }
                    Decision::Stay => self.counters.decisions_stay += 1,
                }
            }
        }
        self.trial = self.trial_setting(self.trial_idx);
        self.red.set_min_k(self.trial.min_k);
        self.slope_n = 0; // re-apply the slope with the new λ
        self.apply_slope();
        self.qla_start = now;
        self.area = 0.0;
        self.bytes = 0;
    }

    /// State and counters as JSON.
    pub fn report(&self) -> serde_json::Value {
        let n = self.fcs.flows();
        serde_json::json!({
            "kind": "pred",
            "params": self.params,
            "flows": {
                "n": n,
                "n_last": self.fcs.n_last(),
                "n_now": self.fcs.n_now(),
                "periods": self.fcs.periods(),
            },
            "slope": self.slope(),
            "min_k": self.trial.min_k,
            "setting": self.base,
            "trial": {"index": self.trial_idx, "setting": self.trial},
            "last_period": self.last,
            "last_round": self.last_round,
            "last_decision": self.last_decision,
            "counters": self.counters,
            "red": self.red.report()["counters"],
            "summary": format!(
                "pred: N = {n} (n_last {}, periods {}, max {}), λ_QLA = {:.3}, slope = {:.3}/pkt, min_K = {} pkts | QLA: {} periods, decisions more {} less {} stay {}, last U = {:.3} (R/C {:.3}, q̄ {:.1} pkts)",
                self.fcs.n_last(),
                self.fcs.periods(),
                self.counters.max_flows,
                self.base.lambda,
                self.slope(),
                self.trial.min_k,
                self.counters.qla_periods,
                self.counters.decisions_more,
                self.counters.decisions_less,
                self.counters.decisions_stay,
                self.last.utility,
                self.last.goodput_frac,
                self.last.q_avg_pkts,
            ),
        })
    }
}

impl Aqm for Pred {
    #[inline]
    fn on_enqueue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        self.advance(now);
        // The context is the backlog before the arrival: resynchronise, then
        // count the arrival (admitted or not: the next event resynchronises).
        self.level = q.port_pkts as u64;
        self.integrate(now);
        self.level = q.port_pkts as u64 + 1;
        if pkt.l3.is_some() {
            self.fcs.observe(pkt.flow_hash(), now);
        }
        self.apply_slope();
        self.red.on_enqueue(pkt, q, now, rng)
    }
    #[inline]
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        self.advance(now);
        // Before the departure the port held this packet as well.
        self.level = q.port_pkts as u64 + 1;
        self.integrate(now);
        self.level = q.port_pkts as u64;
        self.bytes += pkt.len as u64;
        self.red.on_dequeue(pkt, q, now, rng)
    }
    fn on_idle(&mut self, now: Nanos) {
        self.integrate(now);
        self.level = 0;
        self.red.on_idle(now);
    }
    #[inline]
    fn on_tick(&mut self, now: Nanos) {
        if self.started && now <= self.fcs.period_end() && now <= self.qla_start + self.params.t_qla
        {
            return;
        }
        self.advance(now);
        // A period without packets: N may have fallen.
        self.apply_slope();
    }
    fn next_tick(&self) -> Option<Nanos> {
        if !self.started {
            return None;
        }
        Some((self.fcs.period_end() + 1).min(self.qla_start + self.params.t_qla + 1))
    }
    fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        emit("pred_n_flows", self.fcs.flows() as f64);
        emit("pred_n_last", self.fcs.n_last() as f64);
        emit("pred_lambda_qla", self.base.lambda);
        emit("pred_slope", self.slope());
        emit("pred_min_k", self.trial.min_k as f64);
        emit("pred_utility", self.last.utility);
        emit("pred_goodput_frac", self.last.goodput_frac);
        emit("pred_q_avg_pkts", self.last.q_avg_pkts);
        emit("pred_decisions_more", self.counters.decisions_more as f64);
        emit("pred_decisions_less", self.counters.decisions_less as f64);
        emit("pred_decisions_stay", self.counters.decisions_stay as f64);
    }
}

impl AqmParams for Config {
    type Instance = Box<Pred>;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        (
            "lambda",
            "initial λ_QLA, marking probability per packet above min_k",
        ),
        ("delta_lambda", "QLA trial step Δλ"),
        ("lambda_min", "λ_min: below it QLA moves min_k instead"),
        ("lambda_max", "robustness option: largest λ_QLA"),
        ("min_k", "initial (and smallest) min_K, packets"),
        ("delta_min_k", "QLA min_K step Δmin_K, packets"),
        ("max_k", "max_K: mark every packet at or above it, packets"),
        ("q_left", "Φ = 1 at or below this average queue, packets"),
        ("q_right", "Φ = 0 at or above this average queue, packets"),
        ("beta", "β, the weight of goodput in QLA's utility"),
        ("t_fcs", "flow-counting period T_FCS, time"),
        ("t_qla", "QLA trial period T_QLA, time"),
        (
            "fcs",
            "f(N) of the slope λ_QLA·f(N): n, sqrt, square or off",
        ),
        ("qla", "true: run the Queue Length Adjuster"),
        ("index_bits", "log2 of the flow counter's slots"),
        ("occupancy", "queue or port occupancy for the RED decision"),
        (
            "min_gain",
            "robustness option: utility margin a QLA trial must win by",
        ),
    ];
    const LENGTH_KEYS: &'static [&'static str] =
        &["min_k", "delta_min_k", "max_k", "q_left", "q_right"];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_link(env.rate, env.rtt_ns, env.mtu_bytes)
    }
    fn build(&self, env: &AqmEnv) -> Result<Box<Pred>, AqmConfigError> {
        if env.rate.bps() == 0 {
            return Err(AqmConfigError::NeedsRate);
        }
        let queues = env.num_queues.max(1);
        Ok(Box::new(Pred::new(
            self.clone(),
            queues,
            env.rate,
            env.mtu_bytes,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};
    use crate::aqm::MarkReason;
    use crate::units::{MS, US};

    /// An ECT packet of flow `flow`.
    fn pkt(flow: u32) -> Packet {
        let mut p = ect(1500, 0);
        if let Some(l3) = p.l3.as_mut() {
            l3.flow_hash = flow;
        }
        p
    }

    fn cfg() -> Config {
        Config {
            t_fcs: 100 * US,
            t_qla: MS,
            min_k: 3,
            delta_min_k: 2,
            max_k: 100,
            q_left: 5,
            q_right: 105,
            ..Config::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn defaults_are_the_papers_scaled_by_the_bdp() {
        // §IV-C at the paper's own 10 Gbit/s, 80 µs: min_K 10, q_left 15,
        // Δmin_K 5 packets, max_K 500 KB; T_FCS = 1.25 RTT, T_QLA = 5 RTT.
        let c = Config::for_link(Rate::gbit(10), 80 * US, 1500);
        assert_eq!(
            (c.min_k, c.q_left, c.delta_min_k, c.max_k),
            (10, 15, 5, 341)
        );
        assert_eq!((c.t_fcs, c.t_qla), (100 * US, 400 * US));
        assert_eq!(
            (c.lambda, c.delta_lambda, c.lambda_min, c.beta),
            (0.1, 0.025, 0.05, 0.4)
        );
        // 1 Gbit/s, 250 µs: C·RTT = 31 250 B, scale 0.3125.
        let c = Config::default();
        assert_eq!((c.min_k, c.q_left, c.delta_min_k, c.max_k), (3, 5, 2, 107));
        assert_eq!((c.t_fcs, c.t_qla), (312_500, 1_250 * US));
        assert_eq!(c.q_right, c.max_k);
        c.validate().unwrap();
        assert!(c.describe().contains("T_FCS = 312.5us"), "{}", c.describe());
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut Config)| {
            let mut c = Config::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.lambda = 0.0).contains("lambda"));
        assert!(bad(|c| c.lambda = 0.01).contains("lambda_min"));
        assert!(bad(|c| c.min_k = 500).contains("min_k"));
        assert!(bad(|c| c.q_left = 500).contains("q_left"));
        assert!(bad(|c| c.beta = 1.5).contains("beta"));
        assert!(bad(|c| c.t_qla = 0).contains("t_qla"));
        assert!(bad(|c| c.index_bits = 30).contains("index_bits"));
    }

    #[test]
    fn fcs_counts_flows_per_period_and_sets_the_slope() {
        // §IV-A, Fig. 8(b) and Alg. 1: n counted per T_FCS, N = max(n_last, n),
        // λ = λ_QLA·N. QLA off so that λ_QLA stays 0.1.
        let mut c = cfg();
        c.qla = false;
        let mut p = Pred::new(c, 1, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(1);
        let q = ctx(0, 0, 0);
        p.on_tick(0); // the port's first poll starts the periods
        for f in [1, 2, 3] {
            p.on_enqueue(&pkt(f), &q, 10 * US, &mut rng);
        }
        p.on_enqueue(&pkt(2), &q, 20 * US, &mut rng);
        assert_eq!(p.flows(), 3);
        assert!(close(p.slope(), 0.3));
        assert!(close(p.red().params().lambda, 0.3), "RED got the slope");
        // T1 (Fig. 8(b)): the counter restarts at 0, N = max(3, 0) = 3.
        p.on_tick(100 * US + 1);
        assert_eq!((p.fcs.n_last(), p.fcs.n_now(), p.flows()), (3, 0, 3));
        p.on_enqueue(&pkt(1), &q, 150 * US, &mut rng);
        assert!(close(p.slope(), 0.3), "max(n_last = 3, n = 1)");
        // T2: only flow 1 was seen in the last period → N = 1, λ = 0.1.
        p.on_tick(200 * US + 2);
        assert_eq!(p.flows(), 1);
        assert!(close(p.red().params().lambda, 0.1));
        // A period with no packet still ends (the port's tick): N = 0, and
        // the slope uses f(max(N, 1)).
        assert_eq!(p.next_tick(), Some(300 * US + 3));
        p.on_tick(300 * US + 3);
        assert_eq!(p.flows(), 0);
        assert!(close(p.slope(), 0.1));
        assert_eq!(p.fcs.periods(), 3);
        // Four new flows arrive: the slope follows at once (N = n = 4).
        for f in 10..14 {
            p.on_enqueue(&pkt(f), &q, 310 * US, &mut rng);
        }
        assert!(close(p.red().params().lambda, 0.4));
        assert_eq!(p.counters().max_flows, 4);
    }

    #[test]
    fn f_of_n_variants() {
        assert_eq!(flow_factor(FlowScaling::N, 9), 9.0);
        assert_eq!(flow_factor(FlowScaling::Sqrt, 9), 3.0);
        assert_eq!(flow_factor(FlowScaling::Square, 9), 81.0);
        assert_eq!(flow_factor(FlowScaling::Off, 9), 1.0);
        assert_eq!(flow_factor(FlowScaling::N, 0), 1.0);
    }

    #[test]
    fn marks_with_p_equal_lambda_n_times_excess_queue() {
        // N = 4 flows, λ_QLA = 0.05, min_K = 3: at q = 5 packets
        // p = 0.05·4·(5 − 3) = 0.4 (§II-A with λ = λ_QLA·f(N)).
        let mut c = cfg();
        c.qla = false;
        c.lambda = 0.05;
        c.t_fcs = 10 * MS;
        let mut p = Pred::new(c, 1, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(3);
        p.on_tick(0);
        for f in 1..=4 {
            p.on_enqueue(&pkt(f), &ctx(0, 0, 0), 1, &mut rng);
        }
        assert_eq!(p.flows(), 4);
        let n = 50_000;
        let marks = (0..n)
            .filter(|i| {
                p.on_enqueue(&pkt(1 + i % 4), &ctx(0, 7500, 5), 2, &mut rng)
                    == Verdict::Mark(MarkReason::Probabilistic)
            })
            .count() as f64;
        assert!(
            (marks / n as f64 - 0.4).abs() < 0.01,
            "{}",
            marks / n as f64
        );
        // At or below min_K never; at max_K always (Threshold).
        assert_eq!(
            p.on_enqueue(&pkt(0), &ctx(0, 4500, 3), 3, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            p.on_enqueue(&pkt(0), &ctx(0, 150_000, 100), 3, &mut rng),
            Verdict::Mark(MarkReason::Threshold)
        );
    }

    #[test]
    fn utility_and_phi() {
        assert_eq!(phi(3.0, 5.0, 105.0), 1.0);
        assert_eq!(phi(5.0, 5.0, 105.0), 1.0);
        assert!(close(phi(55.0, 5.0, 105.0), 0.5));
        assert_eq!(phi(200.0, 5.0, 105.0), 0.0);
        assert!(close(utility(0.4, 1.0, 0.5), 0.7));
        assert!(close(utility(0.4, 0.5, 1.0), 0.8));
    }

    #[test]
    fn decision_maker_needs_two_consistent_pairs() {
        // §IV-B: U1, U4 with λ + Δλ; U2, U3 with λ − Δλ.
        assert_eq!(decide([0.9, 0.8, 0.7, 0.75], 0.0), Decision::More);
        assert_eq!(decide([0.8, 0.9, 0.75, 0.7], 0.0), Decision::Less);
        assert_eq!(decide([0.9, 0.8, 0.75, 0.7], 0.0), Decision::Stay);
        assert_eq!(
            decide([0.8, 0.8, 0.7, 0.9], 0.0),
            Decision::Stay,
            "a tie is no win"
        );
        // The robustness margin: 0.05 in the second pair is not enough.
        assert_eq!(decide([0.9, 0.8, 0.7, 0.75], 0.06), Decision::Stay);
        assert_eq!(decide([0.9, 0.8, 0.7, 0.8], 0.06), Decision::More);
    }

    /// One T_QLA period from `t0` (= the period's start) of `k` departures of
    /// 1500 B while the port holds `level` packets; closed by the tick at
    /// t0 + T_QLA + 1. Returns that time.
    fn period(p: &mut Pred, t0: Nanos, k: u64, level: u32, rng: &mut SimRng) -> Nanos {
        let t_qla = p.params.t_qla;
        p.on_enqueue(&pkt(1), &ctx(0, 0, level.saturating_sub(1)), t0, rng);
        for i in 0..k {
            let t = t0 + 1 + i * (t_qla / (k + 1));
            p.on_dequeue(&pkt(1), &ctx(0, 0, level.saturating_sub(1)), t, rng);
            p.on_enqueue(&pkt(1), &ctx(0, 0, level.saturating_sub(1)), t, rng);
        }
        let end = t0 + t_qla + 1;
        p.on_tick(end);
        end
    }

    #[test]
    fn qla_trials_and_decisions_follow_fig_10() {
        // T_QLA = 1 ms at 1 Gbit/s: 125 000 B per period; 50 departures of
        // 1500 B = R/C ≈ 0.6, 80 = 0.96. The queue stays at 5 packets ≤ q_left
        // (Φ = 1), so goodput alone decides.
        let mut p = Pred::new(cfg(), 1, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(1);
        p.on_tick(0);
        let mut t = 0;
        // Round 1: trials + − − +; the more aggressive setting wins twice.
        let lambdas: Vec<f64> = (0..4)
            .map(|i| {
                let l = p.trial().lambda;
                t = period(&mut p, t, if TRIAL_MORE[i] { 80 } else { 50 }, 5, &mut rng);
                l
            })
            .collect();
        assert!(close(lambdas[0], 0.125) && close(lambdas[1], 0.075));
        assert!(close(lambdas[2], 0.075) && close(lambdas[3], 0.125));
        let u = p.last_round;
        assert!(u[0] > u[1] && u[3] > u[2], "{u:?}");
        assert!(
            (p.last_period().goodput_frac - 0.96).abs() < 0.01,
            "{:?}",
            p.last_period()
        );
        assert!((p.last_period().q_avg_pkts - 5.0).abs() < 0.1);
        assert!(close(p.setting().lambda, 0.125), "λ_QLA += Δλ");
        assert_eq!(p.counters().decisions_more, 1);
        // The next round tests around the new point: 0.15 first.
        assert!(close(p.trial().lambda, 0.15));
        assert!(close(p.red().params().lambda, 0.15), "N = 1");
        // Round 2: the less aggressive setting wins twice → back to 0.1.
        for more in TRIAL_MORE {
            t = period(&mut p, t, if more { 50 } else { 80 }, 5, &mut rng);
        }
        assert!(close(p.setting().lambda, 0.1));
        assert_eq!(p.counters().decisions_less, 1);
        // Round 3: inconclusive (first pair says more, second says less).
        for k in [80, 50, 80, 50] {
            t = period(&mut p, t, k, 5, &mut rng);
        }
        assert!(close(p.setting().lambda, 0.1));
        assert_eq!(p.counters().decisions_stay, 1);
        // Round 4: same goodput, but the more aggressive trials keep a
        // shorter queue (Φ): 40 vs 80 packets → more wins.
        for more in TRIAL_MORE {
            let level = if more { 40 } else { 80 };
            t = period(&mut p, t, 50, level, &mut rng);
        }
        assert!(close(p.setting().lambda, 0.125));
        assert_eq!(p.counters().qla_periods, 16);
    }

    #[test]
    fn below_lambda_min_qla_moves_min_k() {
        // §IV-B "Adjustment of minK": λ stays λ_min, min_K steps by Δmin_K.
        let p = Pred::new(cfg(), 1, Rate::gbit(1), 1500);
        let s = |lambda, min_k| Setting { lambda, min_k };
        let same = |a: Setting, b: Setting| close(a.lambda, b.lambda) && a.min_k == b.min_k;
        assert!(same(p.less(s(0.1, 3)), s(0.075, 3)));
        assert!(close(p.less(s(0.075, 3)).lambda, 0.05));
        assert!(same(p.less(s(0.05, 3)), s(0.05, 5)));
        assert!(same(p.less(s(0.05, 5)), s(0.05, 7)));
        assert!(same(p.more(s(0.05, 7)), s(0.05, 5)));
        assert!(same(p.more(s(0.05, 5)), s(0.05, 3)));
        assert!(
            same(p.more(s(0.05, 3)), s(0.075, 3)),
            "min_K back at its start: λ moves"
        );
        assert!(
            same(p.less(s(0.05, 99)), s(0.05, 99)),
            "min_K stays below max_K"
        );
        assert!(same(p.more(s(1.0, 3)), s(1.0, 3)), "λ_max");

        // Driven through the clock: start at λ_min; the less aggressive trial
        // (min_K + 2) wins twice → min_K = 5 and trials around it use min_K.
        let mut c = cfg();
        c.lambda = 0.05;
        let mut p = Pred::new(c, 1, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(1);
        p.on_tick(0);
        let mut t = 0;
        let mut seen = vec![];
        for more in TRIAL_MORE {
            seen.push(p.trial());
            t = period(&mut p, t, if more { 50 } else { 80 }, 4, &mut rng);
        }
        assert!(same(seen[0], s(0.075, 3)));
        assert!(same(seen[1], s(0.05, 5)));
        assert!(same(p.setting(), s(0.05, 5)));
        assert!(same(p.trial(), s(0.05, 3)) && p.min_k() == 3);
        t = period(&mut p, t, 80, 4, &mut rng);
        assert!(same(p.trial(), s(0.05, 7)));
        assert_eq!(p.red().params().min_k, 7, "RED got min_K");
        let _ = t;
    }

    #[test]
    fn idle_periods_advance_and_change_nothing() {
        // No packet at all: periods still close on the tick; equal utilities
        // (R = 0, q̄ = 0) are inconclusive, λ_QLA stays.
        let mut p = Pred::new(cfg(), 1, Rate::gbit(1), 1500);
        p.on_tick(0);
        let mut now = 0;
        while let Some(t) = p.next_tick() {
            if t > 10 * MS {
                break;
            }
            now = t;
            p.on_tick(now);
        }
        assert!(now > 9 * MS);
        assert!(p.counters().qla_periods >= 9, "{:?}", p.counters());
        assert_eq!(p.counters().decisions_stay, p.counters().qla_periods / 4);
        assert!(close(p.setting().lambda, 0.1));
        assert!(close(p.last_period().utility, 0.6));
        assert!(p.fcs.periods() >= 90);
    }

    #[test]
    fn time_average_of_the_backlog() {
        // Each event's context is the backlog before it: 1 packet for
        // 0.25 ms, 2 for 0.5 ms, 1 for 0.125 ms, then empty, in a 1 ms period:
        // q̄ = (0.25 + 1 + 0.125) / 1 = 1.375 packets; 2 × 1500 B departed.
        let mut c = cfg();
        c.qla = false;
        let mut p = Pred::new(c, 1, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(1);
        p.on_tick(0);
        p.on_enqueue(&pkt(1), &ctx(0, 0, 0), 0, &mut rng);
        p.on_enqueue(&pkt(1), &ctx(0, 0, 1), 250 * US, &mut rng);
        p.on_dequeue(&pkt(1), &ctx(0, 0, 1), 750 * US, &mut rng);
        p.on_dequeue(&pkt(1), &ctx(0, 0, 0), 875 * US, &mut rng);
        p.on_idle(875 * US);
        p.on_tick(MS + 1);
        let len = (MS + 1) as f64;
        let last = p.last_period();
        assert!(close(last.q_avg_pkts, 1.375e6 / len), "{last:?}");
        assert!(close(last.goodput_frac, 3000.0 / (125e6 * len / 1e9)));
    }

    #[test]
    fn report_and_gauges() {
        let mut p = Pred::new(cfg(), 2, Rate::gbit(1), 1500);
        let mut rng = SimRng::new(1);
        p.on_tick(0);
        p.on_enqueue(&pkt(5), &ctx(1, 0, 0), 1, &mut rng);
        let r = p.report();
        assert_eq!(r["kind"], "pred");
        assert_eq!(r["flows"]["n"], 1);
        assert!(r["summary"].as_str().unwrap().contains("N = 1"));
        let mut names = vec![];
        p.gauges(&mut |n, v| {
            assert!(v.is_finite());
            names.push(n)
        });
        assert!(names.contains(&"pred_n_flows") && names.contains(&"pred_slope"));
    }
}

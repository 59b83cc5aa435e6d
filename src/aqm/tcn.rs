//! TCN — Time-based Congestion Notification.
//!
//! Wei Bai, Kai Chen, Li Chen, Changhoon Kim, Haitao Wu, "Enabling ECN over
//! Generic Packet Scheduling", ACM CoNEXT 2016.
//!
//! * §4.1: a *departing* packet is ECN-marked when its sojourn time
//!   (dequeue time − enqueue time) is larger than the threshold
//!   `T = RTT × λ` (Eq. 3). "Larger than" is strict: sojourn == T passes,
//!   T + 1 ns is marked. Stateless: no per-queue state at all (§4.2), which
//!   is why one threshold serves every queue and any scheduler.
//! * §4.3 "RED-like, probabilistic TCN marking": thresholds `T_min`, `T_max`
//!   and `P_max`: sojourn < T_min → no mark, sojourn > T_max → mark, otherwise
//!   mark with a probability in (0, P_max). The paper does not give the curve;
//!   like RED's two-point form we use the straight line
//!   `p = P_max · (sojourn − T_min) / (T_max − T_min)`.
//!
//! Units: all times in ns (`Nanos`), written `"250us"` in configs.
//! Defaults: `T = λ·RTT` with λ = 1 (the testbed of §6.1 uses 256 µs for a
//! ~250 µs base RTT; [`super::config`] scales it from `--rtt`). Probabilistic
//! defaults (paper silent): T_min = T/2, T_max = T, P_max = 0.1 (our choice,
//! so that the probabilistic curve ends where the cut-off threshold sits).

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_duration, scale_ns, ser_duration};
use super::{Aqm, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos};
use serde::{Deserialize, Serialize};

/// Cut-off (§4.1) or RED-like probabilistic (§4.3) marking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Mark iff sojourn > `threshold`.
    #[default]
    Threshold,
    /// Probabilistic between `t_min` and `t_max`.
    Probabilistic,
}

/// TCN parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `threshold` or `probabilistic`.
    pub mode: Mode,
    /// T = λ·RTT (Eq. 3), ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub threshold: Nanos,
    /// T_min of the probabilistic variant, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub t_min: Nanos,
    /// T_max of the probabilistic variant, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub t_max: Nanos,
    /// P_max of the probabilistic variant, in (0, 1].
    pub p_max: f64,
}

impl Default for Config {
    /// The §6.1 testbed: RTT ≈ 250 µs, λ = 1.
    fn default() -> Self {
        Config::for_rtt(250_000, 1.0)
    }
}

impl Config {
    /// Defaults for a base RTT: T = λ·RTT (Eq. 3); T_min = T/2, T_max = T, P_max = 0.1.
    pub fn for_rtt(rtt_ns: Nanos, lambda: f64) -> Self {
        let t = threshold_ns(rtt_ns, lambda);
        Config {
            mode: Mode::Threshold,
            threshold: t,
            t_min: t / 2,
            t_max: t,
            p_max: 0.1,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.mode == Mode::Probabilistic {
            if self.t_min >= self.t_max {
                return Err(format!(
                    "tcn: t_min ({}) must be below t_max ({})",
                    fmt_duration(self.t_min),
                    fmt_duration(self.t_max)
                ));
            }
            if !(self.p_max > 0.0 && self.p_max <= 1.0) {
                return Err(format!("tcn: p_max must be in (0, 1], got {}", self.p_max));
            }
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        match self.mode {
            Mode::Threshold => format!(
                "tcn: mark at dequeue iff sojourn > T = {} (TCN paper §4.1 Eq. 3)",
                fmt_duration(self.threshold)
            ),
            Mode::Probabilistic => format!(
                "tcn (probabilistic, TCN paper §4.3): sojourn < {} pass, > {} mark, else p rising linearly to p_max = {}",
                fmt_duration(self.t_min),
                fmt_duration(self.t_max),
                self.p_max
            ),
        }
    }
}

/// T = RTT × λ (TCN paper Eq. 3).
pub fn threshold_ns(rtt_ns: Nanos, lambda: f64) -> Nanos {
    scale_ns(rtt_ns, lambda)
}

/// Marking probability of the probabilistic variant (§4.3) for a sojourn
/// between T_min and T_max: p = P_max·(s − T_min)/(T_max − T_min).
pub fn probabilistic_p(sojourn: Nanos, t_min: Nanos, t_max: Nanos, p_max: f64) -> f64 {
    if sojourn < t_min {
        0.0
    } else if sojourn > t_max {
        1.0
    } else {
        p_max * (sojourn - t_min) as f64 / (t_max - t_min) as f64
    }
}

/// Counters (TCN keeps no running variables: it is stateless, §4.2).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Packets seen at dequeue.
    pub packets: u64,
    /// Marks because sojourn > T (or > T_max).
    pub marks_threshold: u64,
    /// Probabilistic marks between T_min and T_max.
    pub marks_probabilistic: u64,
    /// Largest sojourn seen, ns.
    pub max_sojourn_ns: Nanos,
}

/// A TCN instance for one port.
#[derive(Clone, Debug)]
pub struct Tcn {
    params: Config,
    counters: Counters,
}

impl Tcn {
    /// Builds from a validated config.
    pub fn new(params: Config) -> Self {
        Tcn {
            params,
            counters: Counters::default(),
        }
    }
    /// Internal state for the live counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "tcn", "params": self.params, "counters": self.counters })
    }
}

impl Aqm for Tcn {
    fn on_dequeue(&mut self, pkt: &Packet, _q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        let sojourn = now.saturating_sub(pkt.enqueue_ns);
        let c = &mut self.counters;
        c.packets += 1;
        c.max_sojourn_ns = c.max_sojourn_ns.max(sojourn);
        let p = &self.params;
        match p.mode {
            Mode::Threshold => {
                if sojourn > p.threshold {
                    c.marks_threshold += 1;
                    return Verdict::Mark(MarkReason::Sojourn);
                }
            }
            Mode::Probabilistic => {
                if sojourn > p.t_max {
                    c.marks_threshold += 1;
                    return Verdict::Mark(MarkReason::Sojourn);
                }
                if sojourn >= p.t_min
                    && rng.bernoulli(probabilistic_p(sojourn, p.t_min, p.t_max, p.p_max))
                {
                    c.marks_probabilistic += 1;
                    return Verdict::Mark(MarkReason::Probabilistic);
                }
            }
        }
        Verdict::Pass
    }
}

impl AqmParams for Config {
    type Instance = Tcn;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("mode", "threshold (cut-off, §4.1) or probabilistic (§4.3)"),
        (
            "threshold",
            "T = λ·RTT: mark a packet whose sojourn exceeds it, time",
        ),
        ("t_min", "probabilistic: no mark below this sojourn, time"),
        (
            "t_max",
            "probabilistic: mark every packet above this sojourn, time",
        ),
        (
            "p_max",
            "probabilistic: marking probability at t_max, in (0, 1]",
        ),
    ];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_rtt(env.rtt_ns, 1.0)
    }
    fn build(&self, _env: &AqmEnv) -> Result<Tcn, AqmConfigError> {
        Ok(Tcn::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};
    use crate::units::US;

    #[test]
    fn sojourn_equal_to_t_is_not_marked_t_plus_one_is() {
        let mut a = Tcn::new(Config::for_rtt(250 * US, 1.0));
        let mut rng = SimRng::new(1);
        let q = ctx(0, 0, 0);
        let enq = 1_000_000;
        let t = 250 * US;
        assert_eq!(
            a.on_dequeue(&ect(1500, enq), &q, enq + t, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            a.on_dequeue(&ect(1500, enq), &q, enq + t + 1, &mut rng),
            Verdict::Mark(MarkReason::Sojourn)
        );
        assert_eq!(
            a.on_dequeue(&ect(1500, enq), &q, enq + 10, &mut rng),
            Verdict::Pass
        );
        assert_eq!(a.counters.marks_threshold, 1);
    }

    #[test]
    fn probabilistic_frequency_follows_the_line() {
        let cfg = Config {
            mode: Mode::Probabilistic,
            t_min: 100 * US,
            t_max: 200 * US,
            p_max: 0.2,
            ..Config::default()
        };
        cfg.validate().unwrap();
        let mut a = Tcn::new(cfg);
        let mut rng = SimRng::new(42);
        let q = ctx(0, 0, 0);
        let n = 100_000;
        // Sojourn 150 µs: halfway, p = 0.1.
        let marks = (0..n)
            .filter(|_| a.on_dequeue(&ect(1500, 0), &q, 150 * US, &mut rng) != Verdict::Pass)
            .count();
        let f = marks as f64 / n as f64;
        assert!((f - 0.1).abs() < 0.005, "{f}");
        // Below T_min never, above T_max always, at T_max p = P_max.
        for _ in 0..1000 {
            assert_eq!(
                a.on_dequeue(&ect(1500, 0), &q, 99 * US, &mut rng),
                Verdict::Pass
            );
            assert_eq!(
                a.on_dequeue(&ect(1500, 0), &q, 200 * US + 1, &mut rng),
                Verdict::Mark(MarkReason::Sojourn)
            );
        }
        assert!((probabilistic_p(200 * US, 100 * US, 200 * US, 0.2) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn validate_rejects_inverted_thresholds() {
        let cfg = Config {
            mode: Mode::Probabilistic,
            t_min: 200 * US,
            t_max: 100 * US,
            ..Config::default()
        };
        assert!(cfg.validate().unwrap_err().contains("t_min"));
    }
}

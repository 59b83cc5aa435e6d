//! Poisson flow arrivals at a target load of the bottleneck link.
//!
//! Flows arrive as a Poisson process of rate λ flows/s, so the gaps between
//! arrivals are exponential with mean `1/λ`. To offer `load` (a fraction of
//! the bottleneck's `link_rate`) with flows of mean size `E[S]` bytes:
//!
//! ```text
//! λ · E[S] · 8 = load · link_rate      ⇒   mean gap = E[S] · 8 / (load · link_rate)  [s]
//! ```
//!
//! (The papers' setup: TCN §6, ECN♯ §5, DiffECN §VI, PRED §VI. This offers the
//! load in application bytes; TrafficGenerator additionally divides by a
//! goodput ratio to account for header overhead — we do not, so the wire load
//! is a few per cent above `load`.)
//!
//! Gaps are drawn by inverse transform, `gap = −mean · ln(1 − U)`, U uniform in
//! [0, 1), from the seeded [`SimRng`], so a seed fixes the whole schedule.

use crate::rng::SimRng;
use crate::units::{Nanos, Rate};

/// Why arrival parameters were rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PoissonError {
    /// Load outside (0, 1].
    #[error("load {0} must be in (0, 1] (a fraction of the bottleneck rate, e.g. 0.5)")]
    Load(f64),
    /// Zero link rate.
    #[error("the link rate must be above 0 (e.g. --rate 1gbit)")]
    Rate,
    /// Mean flow size not positive.
    #[error("the mean flow size must be above 0 bytes")]
    MeanSize,
}

/// Exponential inter-arrival times for a target load.
#[derive(Clone, Debug, PartialEq)]
pub struct PoissonArrivals {
    mean_gap_ns: f64,
}

impl PoissonArrivals {
    /// Arrivals offering `load` of `link_rate` with flows of `mean_flow_bytes`.
    pub fn for_load(
        mean_flow_bytes: f64,
        load: f64,
        link_rate: Rate,
    ) -> Result<Self, PoissonError> {
        if !(load > 0.0 && load <= 1.0) {
            return Err(PoissonError::Load(load));
        }
        if link_rate.bps() == 0 {
            return Err(PoissonError::Rate);
        }
        if !(mean_flow_bytes > 0.0 && mean_flow_bytes.is_finite()) {
            return Err(PoissonError::MeanSize);
        }
        Ok(PoissonArrivals {
            mean_gap_ns: mean_gap_ns(mean_flow_bytes, load, link_rate),
        })
    }

    /// Mean inter-arrival time in nanoseconds.
    pub fn mean_gap_ns(&self) -> f64 {
        self.mean_gap_ns
    }

    /// Arrival rate λ in flows per second.
    pub fn flows_per_sec(&self) -> f64 {
        1e9 / self.mean_gap_ns
    }

    /// Draws the next gap in nanoseconds (fractional).
    pub fn next_gap_ns_f64(&self, rng: &mut SimRng) -> f64 {
        -self.mean_gap_ns * (1.0 - rng.uniform()).ln()
    }

    /// Draws the next gap in whole nanoseconds.
    pub fn next_gap(&self, rng: &mut SimRng) -> Nanos {
        self.next_gap_ns_f64(rng).round() as Nanos
    }
}

/// `E[S]·8 / (load · link_rate)` in nanoseconds (module header).
pub fn mean_gap_ns(mean_flow_bytes: f64, load: f64, link_rate: Rate) -> f64 {
    mean_flow_bytes * 8.0 / (load * link_rate.bps() as f64) * 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_gap_formula() {
        // 1.71125 MB at 50 % of 1 Gbit/s: 1711250·8 / 5e8 s = 27.38 ms.
        let g = mean_gap_ns(1_711_250.0, 0.5, Rate::gbit(1));
        assert!((g - 27_380_000.0).abs() < 1e-3, "{g}");
    }

    #[test]
    fn empirical_mean_gap_within_1_percent() {
        // Exponential: σ = mean, so the standard error over 10^6 is 0.1 %.
        let p = PoissonArrivals::for_load(64_000.0, 0.7, Rate::gbit(10)).unwrap();
        let mut rng = SimRng::new(11);
        let n = 1_000_000;
        let sum: f64 = (0..n).map(|_| p.next_gap_ns_f64(&mut rng)).sum();
        let m = sum / n as f64;
        let rel = (m - p.mean_gap_ns()).abs() / p.mean_gap_ns();
        assert!(rel < 0.01, "mean {m} vs {}", p.mean_gap_ns());
        // And the offered load it implies.
        let offered = 64_000.0 * 8.0 / (m * 1e-9) / 1e10;
        assert!((offered - 0.7).abs() < 0.007, "{offered}");
    }

    #[test]
    fn gaps_are_exponential_not_just_right_on_average() {
        // P(gap > mean) = e^-1 for an exponential.
        let p = PoissonArrivals::for_load(1500.0, 0.5, Rate::gbit(1)).unwrap();
        let mut rng = SimRng::new(5);
        let n = 200_000;
        let above = (0..n)
            .filter(|_| p.next_gap_ns_f64(&mut rng) > p.mean_gap_ns())
            .count();
        let f = above as f64 / n as f64;
        assert!((f - (-1.0f64).exp()).abs() < 0.005, "{f}");
    }

    #[test]
    fn bad_parameters_rejected() {
        assert_eq!(
            PoissonArrivals::for_load(1.0, 0.0, Rate::gbit(1)),
            Err(PoissonError::Load(0.0))
        );
        assert_eq!(
            PoissonArrivals::for_load(1.0, 1.5, Rate::gbit(1)),
            Err(PoissonError::Load(1.5))
        );
        assert_eq!(
            PoissonArrivals::for_load(1.0, 0.5, Rate::from_bps(0)),
            Err(PoissonError::Rate)
        );
        assert_eq!(
            PoissonArrivals::for_load(0.0, 0.5, Rate::gbit(1)),
            Err(PoissonError::MeanSize)
        );
    }
}

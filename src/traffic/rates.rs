//! Per-flow sending rates drawn by weight, as TrafficGenerator's
//! `rate <value>Mbps <weight>` config lines: each flow asks the server to
//! pace its response at a rate chosen with probability proportional to the
//! weight; a rate of 0 means not rate-limited.
//!
//! Written on the command line as `--flow-rate 500mbit` (every flow) or
//! `--flow-rate 0:10,500mbit:30,800mbit:60` (`rate:weight`, tc units, `0`
//! = unpaced, weights non-negative integers, not all 0).

use crate::rng::SimRng;
use crate::units::parse_rate;

/// A weighted set of per-flow sending rates, bit/s (0 = unpaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRateMix {
    classes: Vec<(u64, u64)>,
    total: u64,
}

impl Default for FlowRateMix {
    /// Every flow unpaced.
    fn default() -> Self {
        FlowRateMix::single(0)
    }
}

impl FlowRateMix {
    /// Every flow at `bps` (0 = unpaced).
    pub fn single(bps: u64) -> Self {
        FlowRateMix {
            classes: vec![(bps, 1)],
            total: 1,
        }
    }

    /// `(bit/s, weight)` pairs, total weight > 0.
    pub fn weighted(classes: Vec<(u64, u64)>) -> Result<Self, String> {
        let total: u64 = classes.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return Err("give at least one flow rate with a weight above 0".into());
        }
        Ok(FlowRateMix { classes, total })
    }

    /// The rates (bit/s) and their weights.
    pub fn classes(&self) -> &[(u64, u64)] {
        &self.classes
    }

    /// True when every flow gets the same rate (no random draw needed).
    pub fn is_single(&self) -> bool {
        self.classes.iter().filter(|(_, w)| *w > 0).count() == 1
    }

    /// The same weights with every rate mapped by `f` (e.g. emulated to real).
    pub fn map_rates(&self, f: impl Fn(u64) -> u64) -> Self {
        FlowRateMix {
            classes: self.classes.iter().map(|&(r, w)| (f(r), w)).collect(),
            total: self.total,
        }
    }

    /// Draws one rate in bit/s (no draw from `rng` when there is a single class).
    pub fn sample(&self, rng: &mut SimRng) -> u64 {
        if self.is_single() {
            return self.classes.iter().find(|(_, w)| *w > 0).map_or(0, |c| c.0);
        }
        let mut x = rng.next_u64() % self.total;
        for &(r, w) in &self.classes {
            if x < w {
                return r;
            }
            x -= w;
        }
        self.classes.last().map_or(0, |c| c.0)
    }
}

impl std::str::FromStr for FlowRateMix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let hint = "write --flow-rate 500mbit, or rate:weight pairs such as \
                    --flow-rate 0:10,500mbit:30 (tc units; 0 = unpaced)";
        let mut classes = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (r, w) = part.split_once(':').unwrap_or((part, "1"));
            let bps = match r.trim() {
                "0" => 0,
                r => parse_rate(r).map_err(|e| format!("{e}; {hint}"))?.bps(),
            };
            let w: u64 = w
                .trim()
                .parse()
                .map_err(|_| format!("weight {w:?} is not a whole number; {hint}"))?;
            classes.push((bps, w));
        }
        if classes.is_empty() {
            return Err(format!("no flow rate given; {hint}"));
        }
        FlowRateMix::weighted(classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_weighted() {
        assert_eq!(
            "500mbit".parse::<FlowRateMix>().unwrap(),
            FlowRateMix::single(500_000_000)
        );
        let m: FlowRateMix = "0:10, 500mbit:30,800mbit:60".parse().unwrap();
        assert_eq!(
            m.classes(),
            &[(0, 10), (500_000_000, 30), (800_000_000, 60)]
        );
        assert!("0:0".parse::<FlowRateMix>().is_err());
        assert!("fast".parse::<FlowRateMix>().is_err());
        assert!("500mbit:x".parse::<FlowRateMix>().is_err());
        assert!("".parse::<FlowRateMix>().is_err());
    }

    #[test]
    fn draws_follow_the_weights_and_single_draws_nothing() {
        let m: FlowRateMix = "0:10,500mbit:30,800mbit:60".parse().unwrap();
        let mut rng = SimRng::new(3);
        let n = 100_000;
        let draws: Vec<u64> = (0..n).map(|_| m.sample(&mut rng)).collect();
        let frac = |r: u64| draws.iter().filter(|&&d| d == r).count() as f64 / n as f64;
        assert!((frac(0) - 0.1).abs() < 0.01);
        assert!((frac(500_000_000) - 0.3).abs() < 0.01);
        assert!((frac(800_000_000) - 0.6).abs() < 0.01);
        let mut r2 = SimRng::new(4);
        let before = r2.clone().next_u64();
        assert_eq!(FlowRateMix::single(7).sample(&mut r2), 7);
        assert_eq!(r2.next_u64(), before);
        assert_eq!(
            m.map_rates(|r| r / 4).classes(),
            &[(0, 10), (125_000_000, 30), (200_000_000, 60)]
        );
    }
}

//! Per-flow DSCP choice, as TrafficGenerator's `dscp <value> <weight>`
//! config lines: each flow draws its DSCP with probability proportional to
//! the weight. TCN §6.1.2 maps each web-search flow uniformly at random to
//! one of 4 service queues this way.
//!
//! Written on the command line as `--dscp 0` (every flow), `--dscp 0,8,16,24`
//! (uniform) or `--dscp 0:25,8:75` (`value:weight`, weights non-negative
//! integers, not all 0).

use crate::rng::SimRng;

/// A weighted set of DSCP values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DscpMix {
    classes: Vec<(u8, u64)>,
    total: u64,
}

impl DscpMix {
    /// Every flow gets `dscp`.
    pub fn single(dscp: u8) -> Self {
        DscpMix {
            classes: vec![(dscp & 0x3f, 1)],
            total: 1,
        }
    }

    /// `(value, weight)` pairs; values 0..=63, total weight > 0.
    pub fn weighted(classes: Vec<(u8, u64)>) -> Result<Self, String> {
        if let Some((v, _)) = classes.iter().find(|(v, _)| *v > 63) {
            return Err(format!("DSCP {v} is out of range: DSCP is 6 bits (0..=63)"));
        }
        let total: u64 = classes.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return Err("give at least one DSCP with a weight above 0".into());
        }
        Ok(DscpMix { classes, total })
    }

    /// The classes and their weights.
    pub fn classes(&self) -> &[(u8, u64)] {
        &self.classes
    }

    /// True when every flow gets the same DSCP (no random draw needed).
    pub fn is_single(&self) -> bool {
        self.classes.iter().filter(|(_, w)| *w > 0).count() == 1
    }

    /// Draws one DSCP (no draw from `rng` when there is a single class).
    pub fn sample(&self, rng: &mut SimRng) -> u8 {
        if self.is_single() {
            return self.classes.iter().find(|(_, w)| *w > 0).map_or(0, |c| c.0);
        }
        let mut x = rng.next_u64() % self.total;
        for &(v, w) in &self.classes {
            if x < w {
                return v;
            }
            x -= w;
        }
        self.classes.last().map_or(0, |c| c.0)
    }
}

impl std::str::FromStr for DscpMix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let hint = "write --dscp 0, --dscp 0,8,16,24 (uniform) or --dscp 0:25,8:75 (value:weight)";
        let mut classes = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (v, w) = match part.split_once(':') {
                Some((v, w)) => (v, w),
                None => (part, "1"),
            };
            let v: u8 = v
                .trim()
                .parse()
                .map_err(|_| format!("DSCP {v:?} is not a number 0..=63; {hint}"))?;
            let w: u64 = w
                .trim()
                .parse()
                .map_err(|_| format!("weight {w:?} is not a whole number; {hint}"))?;
            classes.push((v, w));
        }
        if classes.is_empty() {
            return Err(format!("no DSCP given; {hint}"));
        }
        DscpMix::weighted(classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!("8".parse::<DscpMix>().unwrap(), DscpMix::single(8));
        let u: DscpMix = "0,8,16,24".parse().unwrap();
        assert_eq!(u.classes(), &[(0, 1), (8, 1), (16, 1), (24, 1)]);
        let w: DscpMix = "0:25, 8:75".parse().unwrap();
        assert_eq!(w.classes(), &[(0, 25), (8, 75)]);
        assert!("64".parse::<DscpMix>().unwrap_err().contains("0..=63"));
        assert!("0:0".parse::<DscpMix>().is_err());
        assert!("x".parse::<DscpMix>().is_err());
        assert!("".parse::<DscpMix>().is_err());
    }

    #[test]
    fn draws_follow_the_weights() {
        let w: DscpMix = "0:25,8:75".parse().unwrap();
        let mut rng = SimRng::new(4);
        let n = 100_000;
        let eights = (0..n).filter(|_| w.sample(&mut rng) == 8).count();
        assert!((eights as f64 / n as f64 - 0.75).abs() < 0.01, "{eights}");
        let mut r2 = SimRng::new(4);
        let before = r2.clone().next_u64();
        assert_eq!(DscpMix::single(3).sample(&mut r2), 3);
        assert_eq!(r2.next_u64(), before, "a single class draws nothing");
    }
}

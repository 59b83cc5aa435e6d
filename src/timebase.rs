//! Time as experiments see it: the emulated timebase of a time-dilated
//! experiment ([`Dilation`]).
//!
//! # Time dilation
//!
//! Gupta et al., "To Infinity and Beyond: Time-Warped Network Emulation"
//! (NSDI 2006), and SELENA (ANCS 2014): with factor D, an experiment at
//! emulated rate C runs at C / D on the wire and everything it depends on
//! runs D times slower, so every count of packets, bytes and windows is the
//! emulated one. Every time a user gives is emulated and becomes D times
//! longer in real time; every rate a user gives is emulated and becomes D
//! times lower on the wire; every time reported is emulated (real / D) and
//! every rate reported is emulated (wire × D). Sizes and counts do not
//! change. [`Dilation`] is that conversion, in one place.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::units::Rate;

/// Largest dilation factor accepted: at 1000 a 10 Gbit/s link runs at
/// 10 Mbit/s and a 200 ms minimum RTO lasts 200 s.
pub const MAX_DILATION: f64 = 1000.0;

/// A time-dilation factor D ≥ 1 (1 = real time), with the conversions
/// between emulated and real time and rate.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Dilation(f64);

// `new` admits only finite numbers, so equality is an equivalence.
impl Eq for Dilation {}

impl Default for Dilation {
    fn default() -> Self {
        Dilation::NONE
    }
}

impl Dilation {
    /// Real time (D = 1).
    pub const NONE: Dilation = Dilation(1.0);

    /// D, which must be finite and in `1..=`[`MAX_DILATION`].
    pub fn new(d: f64) -> Result<Self, String> {
        if d.is_finite() && (1.0..=MAX_DILATION).contains(&d) {
            Ok(Dilation(d))
        } else {
            Err(format!(
                "dilation {d} is outside 1..={MAX_DILATION} (D = 4 runs an emulated 10 Gbit/s \
                 link at 2.5 Gbit/s on the wire and every time constant 4 times longer)"
            ))
        }
    }

    /// D.
    pub fn factor(self) -> f64 {
        self.0
    }

    /// Whether this is real time (D = 1).
    pub fn is_none(self) -> bool {
        self.0 == 1.0
    }

    /// D as a whole number, when it is one (exact integer conversions).
    fn whole(self) -> Option<u64> {
        (self.0.fract() == 0.0).then_some(self.0 as u64)
    }

    /// Real nanoseconds of `emulated_ns` emulated ones: × D, rounded.
    pub fn to_real_ns(self, emulated_ns: u64) -> u64 {
        match self.whole() {
            Some(d) => emulated_ns.saturating_mul(d),
            None => (emulated_ns as f64 * self.0).round() as u64,
        }
    }

    /// Emulated nanoseconds of `real_ns` real ones: / D, rounded.
    pub fn to_emulated_ns(self, real_ns: u64) -> u64 {
        match self.whole() {
            Some(d) => (real_ns + d / 2) / d,
            None => (real_ns as f64 / self.0).round() as u64,
        }
    }

    /// How long emulated time `emulated` lasts in real time (× D).
    pub fn to_real(self, emulated: Duration) -> Duration {
        Duration::from_nanos(self.to_real_ns(saturating_ns(emulated)))
    }

    /// The emulated time a real `real` stands for (/ D).
    pub fn to_emulated(self, real: Duration) -> Duration {
        Duration::from_nanos(self.to_emulated_ns(saturating_ns(real)))
    }

    /// [`Self::to_emulated`] in whole microseconds, as reports write times.
    pub fn emulated_us(self, real: Duration) -> u64 {
        self.to_emulated_ns(saturating_ns(real)) / 1_000
    }

    /// The wire rate of emulated rate `emulated`: / D, rounded.
    pub fn wire_rate(self, emulated: Rate) -> Rate {
        Rate::from_bps(self.wire_bps(emulated.bps()))
    }

    /// [`Self::wire_rate`] in bit/s (0, unlimited, stays 0).
    pub fn wire_bps(self, emulated_bps: u64) -> u64 {
        match self.whole() {
            Some(d) => (emulated_bps + d / 2) / d,
            None => (emulated_bps as f64 / self.0).round() as u64,
        }
    }

    /// The emulated rate a wire rate `wire_bps` stands for (× D).
    pub fn emulated_bps(self, wire_bps: f64) -> f64 {
        wire_bps * self.0
    }
}

fn saturating_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Display for Dilation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for Dilation {
    type Err = String;

    /// `4`, `2.5`.
    fn from_str(s: &str) -> Result<Self, String> {
        let d: f64 = s.trim().parse().map_err(|_| {
            format!("dilation `{s}` is not a number (e.g. 4: every time 4 times longer, every rate 4 times lower)")
        })?;
        Dilation::new(d)
    }
}

impl Serialize for Dilation {
    /// As the number D.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_stretch_and_rates_shrink_by_d() {
        let d: Dilation = "4".parse().unwrap();
        assert_eq!(d.factor(), 4.0);
        // A 200 ms RTO_min lasts 800 ms; 800 ms of real time is 200 ms emulated.
        assert_eq!(
            d.to_real(Duration::from_millis(200)),
            Duration::from_millis(800)
        );
        assert_eq!(
            d.to_emulated(Duration::from_millis(800)),
            Duration::from_millis(200)
        );
        assert_eq!(d.emulated_us(Duration::from_micros(1_000_002)), 250_000);
        // An emulated 10 Gbit/s link runs at 2.5 Gbit/s on the wire.
        assert_eq!(d.wire_rate(Rate::gbit(10)), Rate::from_bps(2_500_000_000));
        assert_eq!(d.wire_bps(0), 0, "unlimited stays unlimited");
        assert_eq!(d.emulated_bps(2.5e9), 1e10);
        // Round trips are exact for whole D.
        for ns in [0, 1, 3, 999, 1_000_000_007] {
            assert_eq!(d.to_emulated_ns(d.to_real_ns(ns)), ns);
        }
        // Fractional D rounds to the nearest nanosecond / bit.
        let f = Dilation::new(2.5).unwrap();
        assert_eq!(f.to_real_ns(1_000), 2_500);
        assert_eq!(f.to_emulated_ns(1_000), 400);
        assert_eq!(f.wire_bps(1_000_000_000), 400_000_000);
        assert_eq!(f.to_string(), "2.5");
        assert_eq!(serde_json::to_string(&f).unwrap(), "2.5");
    }

    #[test]
    fn no_dilation_changes_nothing() {
        let d = Dilation::default();
        assert!(d.is_none());
        assert_eq!(d, Dilation::NONE);
        for ns in [0u64, 1, 123_456_789] {
            assert_eq!(d.to_real_ns(ns), ns);
            assert_eq!(d.to_emulated_ns(ns), ns);
        }
        assert_eq!(d.wire_rate(Rate::gbit(1)), Rate::gbit(1));
    }

    #[test]
    fn out_of_range_factors_say_what_d_means() {
        for bad in ["0.5", "0", "-1", "1001", "inf", "NaN", "x"] {
            let e = bad.parse::<Dilation>().unwrap_err();
            assert!(e.contains("dilation"), "{bad}: {e}");
        }
        assert!("1".parse::<Dilation>().unwrap().is_none());
        assert_eq!("1000".parse::<Dilation>().unwrap().factor(), MAX_DILATION);
    }
}

//! Units used everywhere: time in nanoseconds, link rates in bits per second,
//! sizes in bytes — and the tc-style strings users type for them
//! (`1gbit`, `96kb`, `250us`).
//!
//! Parsing follows tc(8): rates `bit`, `kbit`, `mbit`, `gbit`, `tbit` (×1000),
//! `kibit`.. (×1024), `bps` = bytes per second (`mbps` = 8 Mbit/s); sizes `b`,
//! `kb`/`k`, `mb`/`m`, `gb`/`g` (×1024, as tc does for buffer sizes), `kbit`..
//! for sizes given in bits; times `s`, `ms`, `us`, `ns` (bare number = µs, as tc).

use std::fmt;

/// Monotonic time or a duration, in nanoseconds. Nothing in the core reads a
/// clock: every algorithm takes `now: Nanos` as an argument.
pub type Nanos = u64;

/// One microsecond in [`Nanos`].
pub const US: Nanos = 1_000;
/// One millisecond in [`Nanos`].
pub const MS: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SEC: Nanos = 1_000_000_000;

/// A link rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate {
    bits_per_sec: u64,
}

impl Rate {
    /// A rate of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Rate { bits_per_sec: bps }
    }
    /// `n` Gbit/s.
    pub const fn gbit(n: u64) -> Self {
        Rate::from_bps(n * 1_000_000_000)
    }
    /// `n` Mbit/s.
    pub const fn mbit(n: u64) -> Self {
        Rate::from_bps(n * 1_000_000)
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.bits_per_sec
    }
    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.bits_per_sec as f64 / 8.0
    }
    /// Time to serialise `bytes` at this rate, rounded up (0 for a zero rate).
    pub fn tx_time_ns(self, bytes: u64) -> Nanos {
        if self.bits_per_sec == 0 {
            return 0;
        }
        let num = bytes as u128 * 8 * SEC as u128;
        num.div_ceil(self.bits_per_sec as u128) as Nanos
    }
    /// Bytes this rate carries in `ns` (rounded down): the bandwidth-delay product.
    pub fn bytes_in(self, ns: Nanos) -> u64 {
        (self.bits_per_sec as u128 * ns as u128 / (8 * SEC as u128)) as u64
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_sec;
        if b >= 1_000_000_000 && b.is_multiple_of(1_000_000) {
            write!(f, "{}gbit", b as f64 / 1e9)
        } else if b >= 1_000_000 && b.is_multiple_of(1_000) {
            write!(f, "{}mbit", b as f64 / 1e6)
        } else if b >= 1_000 {
            write!(f, "{}kbit", b as f64 / 1e3)
        } else {
            write!(f, "{b}bit")
        }
    }
}

/// A unit string the user typed that we could not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {what} {input:?}: {hint}")]
pub struct UnitError {
    what: &'static str,
    input: String,
    hint: &'static str,
}

fn split_number(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v, unit.trim().to_ascii_lowercase()))
}

/// Parses a tc-style rate: `100mbit`, `1gbit`, `10gbit`, `2.5gbit`, `125mbps` (bytes/s).
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    const HINT: &str = "write a number and a unit, e.g. 100mbit, 1gbit, 10gbit (tc units; 'mbps' means megabytes/s)";
    let err = || UnitError {
        what: "rate",
        input: s.to_string(),
        hint: HINT,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "bit" | "" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(err()),
    };
    if unit.is_empty() {
        return Err(err());
    }
    let bps = v * mult;
    if !(1.0..=1e13).contains(&bps) {
        return Err(UnitError {
            what: "rate",
            input: s.to_string(),
            hint: "rate must be between 1bit and 10tbit",
        });
    }
    Ok(Rate::from_bps(bps.round() as u64))
}

/// Parses a tc-style size in bytes: `96kb`, `1500b`, `1500`, `2mb`, `300kbit`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    const HINT: &str =
        "write a number of bytes with an optional unit, e.g. 1500, 96kb, 2mb (k = 1024 bytes)";
    let err = || UnitError {
        what: "size",
        input: s.to_string(),
        hint: HINT,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1024.0 / 8.0,
        "mbit" => 1024.0 * 1024.0 / 8.0,
        _ => return Err(err()),
    };
    let bytes = v * mult;
    if bytes > 1e12 {
        return Err(UnitError {
            what: "size",
            input: s.to_string(),
            hint: "size must be below 1 TB",
        });
    }
    Ok(bytes.round() as u64)
}

/// Parses a tc-style time: `250us`, `1ms`, `0`, `1.5ms`, `500ns`, `2s`. A bare
/// number other than 0 is rejected (tc would read µs; we ask the user to say).
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    const HINT: &str = "write a number and a unit, e.g. 50us, 1ms, 0 (units: s, ms, us, ns)";
    let err = || UnitError {
        what: "time",
        input: s.to_string(),
        hint: HINT,
    };
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "" if v == 0.0 => 0.0,
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" | "µs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        _ => return Err(err()),
    };
    let ns = v * mult;
    if ns > 1e13 {
        return Err(UnitError {
            what: "time",
            input: s.to_string(),
            hint: "time must be below 10000s",
        });
    }
    Ok(ns.round() as Nanos)
}

/// Formats nanoseconds for people: `250us`, `1.5ms`.
pub fn fmt_duration(ns: Nanos) -> String {
    if ns == 0 {
        "0".into()
    } else if ns.is_multiple_of(SEC) {
        format!("{}s", ns / SEC)
    } else if ns >= MS && ns.is_multiple_of(1000) {
        format!("{}ms", ns as f64 / 1e6)
    } else if ns >= US && ns.is_multiple_of(10) {
        format!("{}us", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_tc() {
        assert_eq!(parse_rate("1gbit").unwrap(), Rate::gbit(1));
        assert_eq!(parse_rate("100mbit").unwrap(), Rate::mbit(100));
        assert_eq!(parse_rate("10Gbit").unwrap(), Rate::gbit(10));
        assert_eq!(parse_rate("2.5gbit").unwrap().bps(), 2_500_000_000);
        assert_eq!(parse_rate("125mbps").unwrap(), Rate::gbit(1));
        assert!(parse_rate("1g").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("").is_err());
        assert!(parse_rate("-1gbit").is_err());
        let e = parse_rate("1gigabit").unwrap_err().to_string();
        assert!(e.contains("1gbit"), "{e}");
    }

    #[test]
    fn sizes_follow_tc() {
        assert_eq!(parse_size("96kb").unwrap(), 96 * 1024);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("1500b").unwrap(), 1500);
        assert_eq!(parse_size("2mb").unwrap(), 2 * 1024 * 1024);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250us").unwrap(), 250_000);
        assert_eq!(parse_duration("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert_eq!(parse_duration("3s").unwrap(), 3 * SEC);
        assert!(parse_duration("50").is_err());
        assert_eq!(fmt_duration(250_000), "250us");
        assert_eq!(fmt_duration(1_500_000), "1.5ms");
    }

    #[test]
    fn rate_arithmetic() {
        let r = Rate::gbit(1);
        assert_eq!(r.tx_time_ns(1500), 12_000);
        assert_eq!(r.tx_time_ns(1), 8);
        assert_eq!(r.bytes_in(100 * US), 12_500);
        assert_eq!(Rate::gbit(10).tx_time_ns(64), 52); // 51.2 rounded up
        assert_eq!(r.to_string(), "1gbit");
        assert_eq!(Rate::mbit(500).to_string(), "500mbit");
    }
}

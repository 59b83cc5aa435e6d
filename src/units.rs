//! Units used everywhere: time in nanoseconds, link rates in bits per second,
//! sizes in bytes — and the tc-style strings users type for them
//! (`1gbit`, `96kb`, `250us`).
//!
//! Parsing follows tc(8): rates `bit`, `kbit`, `mbit`, `gbit`, `tbit` (×1000),
//! `kibit`.. (×1024), `bps` = bytes per second (`mbps` = 8 Mbit/s); sizes `b`,
//! `kb`/`k`, `mb`/`m`, `gb`/`g` (×1024, as tc does for buffer sizes), `kbit`..
//! for sizes given in bits; times `s`, `ms`, `us`, `ns`.
//!
//! # One rule: a time, a size or a rate needs a unit
//!
//! A bare number (`100`) is refused wherever a time, a size or a rate is
//! read — flags, config files, scenario files, fabric topology files, AQM
//! and R-AQM options alike — with a message that says how to write it
//! (`a time needs a unit — write 100us (or 100ns, 100ms)`). A bare number
//! means different things in different tools: tc reads a time as µs, a
//! size as bytes and a rate as bit/s, and softswitch's AQM options once
//! read a time as ns, so `threshold=100` silently meant 100 ns. Only a
//! time or a size of `0` may be bare: it is the same in every unit (a rate
//! of `0` means "unshaped" where a setting says so: `--rate`, a topology's
//! `rate`).
//!
//! Settings that are counts take bare numbers: packets (`unit = packets`
//! thresholds, R-AQM's `*_pkts`, PRED's thresholds), flows, queues, weights;
//! and so do the few whose unit is fixed by their documentation and never
//! another: `--quantum` (bytes per DWRR round, as tc's `quantum`),
//! `--overhead` (bytes), `--pcap-snaplen` (bytes), `--pcap-max-mb`,
//! R-AQM's byte counts (`bucket_bytes`, `alpha_*`), and `softswitch-tg`'s
//! TrafficGenerator letters and config lines (`-b` Mbit/s, `-t` seconds,
//! `rate 500Mbps`), whose units are TrafficGenerator's.

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

/// What a unit string stands for, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A time (`250us`).
    Time,
    /// A size in bytes (`96kb`).
    Size,
    /// A link rate (`1gbit`).
    Rate,
}

impl Quantity {
    fn name(self) -> &'static str {
        match self {
            Quantity::Time => "time",
            Quantity::Size => "size",
            Quantity::Rate => "rate",
        }
    }

    /// How to write `n` of this quantity with a unit: `100us (or 100ns, 100ms)`.
    pub fn with_units(self, n: &str) -> String {
        match self {
            Quantity::Time => format!("{n}us (or {n}ns, {n}ms)"),
            Quantity::Size => format!("{n}b for bytes (or {n}kb, k = 1024 bytes)"),
            Quantity::Rate => format!("{n}mbit (or {n}kbit, {n}gbit)"),
        }
    }
}

/// A unit string the user typed that we could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    what: Quantity,
    input: String,
    hint: String,
    /// A number without a unit (the message is then "needs a unit").
    bare: bool,
}

impl UnitError {
    fn new(what: Quantity, input: &str, hint: impl Into<String>) -> Self {
        UnitError {
            what,
            input: input.to_string(),
            hint: hint.into(),
            bare: false,
        }
    }

    /// `input`, a bare number, is a `what` without its unit: the error that
    /// says how to write it.
    pub fn needs_unit(what: Quantity, input: &str) -> Self {
        let n = input.trim();
        UnitError {
            what,
            input: n.to_string(),
            hint: what.with_units(n),
            bare: true,
        }
    }

    /// Whether the input was a number without a unit.
    pub fn is_bare_number(&self) -> bool {
        self.bare
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.bare {
            write!(
                f,
                "a {} needs a unit — write {}",
                self.what.name(),
                self.hint
            )
        } else {
            write!(
                f,
                "cannot read {} {:?}: {}",
                self.what.name(),
                self.input,
                self.hint
            )
        }
    }
}

impl std::error::Error for UnitError {}

/// Whether `s` is a number alone (`100`, `2.5`, ` 0 `): no unit.
pub fn is_bare_number(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty() && t.parse::<f64>().is_ok_and(f64::is_finite)
}

/// `s` as a bare number that may stand alone: zero, the same in any unit.
fn is_zero(s: &str) -> bool {
    s.trim().parse::<f64>() == Ok(0.0)
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

/// Parses a tc-style rate: `100mbit`, `1gbit`, `10gbit`, `2.5gbit`, `125mbps`
/// (bytes/s). A bare number is refused (tc would read bit/s).
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    const HINT: &str = "write a number and a unit, e.g. 100mbit, 1gbit, 10gbit (tc units; 'mbps' means megabytes/s)";
    if is_bare_number(s) {
        return Err(UnitError::needs_unit(Quantity::Rate, s));
    }
    let err = || UnitError::new(Quantity::Rate, s, HINT);
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "bit" => 1.0,
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
    let bps = v * mult;
    if !(1.0..=1e13).contains(&bps) {
        return Err(UnitError::new(
            Quantity::Rate,
            s,
            "rate must be between 1bit and 10tbit",
        ));
    }
    Ok(Rate::from_bps(bps.round() as u64))
}

/// Parses a tc-style size in bytes: `96kb`, `1500b`, `2mb`, `300kbit`, `0`.
/// A bare number other than 0 is refused (tc would read bytes; we ask the
/// user to say).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    const HINT: &str = "write a number and a unit, e.g. 1500b, 96kb, 2mb (k = 1024 bytes)";
    if is_bare_number(s) && !is_zero(s) {
        return Err(UnitError::needs_unit(Quantity::Size, s));
    }
    let err = || UnitError::new(Quantity::Size, s, HINT);
    let (v, unit) = split_number(s).ok_or_else(err)?;
    let mult: f64 = match unit.as_str() {
        "" if v == 0.0 => 0.0,
        "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kbit" => 1024.0 / 8.0,
        "mbit" => 1024.0 * 1024.0 / 8.0,
        _ => return Err(err()),
    };
    let bytes = v * mult;
    if bytes > 1e12 {
        return Err(UnitError::new(Quantity::Size, s, "size must be below 1 TB"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a tc-style time: `250us`, `1ms`, `0`, `1.5ms`, `500ns`, `2s`. A bare
/// number other than 0 is refused (tc would read µs; we ask the user to say).
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    const HINT: &str = "write a number and a unit, e.g. 50us, 1ms, 0 (units: s, ms, us, ns)";
    if is_bare_number(s) && !is_zero(s) {
        return Err(UnitError::needs_unit(Quantity::Time, s));
    }
    let err = || UnitError::new(Quantity::Time, s, HINT);
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
        return Err(UnitError::new(
            Quantity::Time,
            s,
            "time must be below 10000s",
        ));
    }
    Ok(ns.round() as Nanos)
}

/// Formats a size in bytes as [`parse_size`] reads it back: `96kb`, `1500b`.
pub fn fmt_size(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}kb", bytes / 1024)
    } else {
        format!("{bytes}b")
    }
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
        assert_eq!(parse_size("1500b").unwrap(), 1500);
        assert_eq!(parse_size("0").unwrap(), 0);
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
        assert_eq!(parse_duration("0.0").unwrap(), 0);
        assert_eq!(fmt_duration(250_000), "250us");
        assert_eq!(fmt_duration(1_500_000), "1.5ms");
    }

    /// A bare number is refused for a time, a size and a rate alike, and
    /// the message says how to write it.
    #[test]
    fn a_bare_number_needs_a_unit() {
        let e = parse_duration("100").unwrap_err();
        assert!(e.is_bare_number());
        assert_eq!(
            e.to_string(),
            "a time needs a unit — write 100us (or 100ns, 100ms)"
        );
        let e = parse_size("1500").unwrap_err();
        assert!(e.is_bare_number());
        assert_eq!(
            e.to_string(),
            "a size needs a unit — write 1500b for bytes (or 1500kb, k = 1024 bytes)"
        );
        let e = parse_rate(" 1000 ").unwrap_err();
        assert!(e.is_bare_number());
        assert_eq!(
            e.to_string(),
            "a rate needs a unit — write 1000mbit (or 1000kbit, 1000gbit)"
        );
        assert!(parse_duration("2.5").unwrap_err().is_bare_number());
        // A rate of 0 is no rate: refused like any bare rate (the settings
        // that take 0 for "unshaped" say so themselves).
        assert!(parse_rate("0").unwrap_err().is_bare_number());
        // Something else than a number is not a bare number.
        let e = parse_size("lots").unwrap_err();
        assert!(!e.is_bare_number() && e.to_string().contains("96kb"), "{e}");
        assert!(is_bare_number("7") && is_bare_number(" 0.5") && !is_bare_number("7b"));
    }

    #[test]
    fn sizes_format_as_they_read_back() {
        for b in [0, 1, 1500, 1024, 96 * 1024, 1_000_000] {
            assert_eq!(parse_size(&fmt_size(b)).unwrap(), b, "{}", fmt_size(b));
        }
        assert_eq!(fmt_size(96 * 1024), "96kb");
        assert_eq!(fmt_size(1500), "1500b");
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

//! `--poll`: what the data path does between departures of a shaped port.
//!
//! A shaped port that holds packets but has no tokens has nothing to do until
//! its next departure (12.3 µs per 1514-byte frame at 1 Gbit/s). The busy
//! loop spins through that time on one of the machine's two vCPUs — the CPU
//! whose other tenants are every host's TCP stack and iperf3.
//!
//! * `busy` (default): spin; yield only when the switch holds nothing due
//!   within 20 µs (the behaviour measured in BENCHMARKS.md).
//! * `adaptive`: when the switch holds packets and its next event is far
//!   enough away, sleep until just before it (a high-resolution sleep with a
//!   1 ns timer slack), learning how late this machine wakes up and waking
//!   that much earlier. The strict token bucket allows `bucket` bytes of
//!   credit (≈ 1.67 MTU, 20 µs at 1 Gbit/s), so a wake-up up to
//!   bucket − frame late loses no link time; the fidelity guard measures
//!   whether it did. Frames that arrive during a sleep wait in the RX ring
//!   for at most the sleep (< one frame time).
//!
//! [`Waiter`] is the decision and the lateness estimate, pure and driven by
//! the caller's clock; [`sleep_ns`] is the syscall.

use crate::units::Nanos;

/// The data path's waiting policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PollMode {
    /// Spin (yield only when idle).
    #[default]
    Busy,
    /// Sleep until just before the next departure while backlogged.
    Adaptive,
}

impl std::str::FromStr for PollMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "busy" => Ok(Self::Busy),
            "adaptive" => Ok(Self::Adaptive),
            o => Err(format!(
                "poll mode `{o}`: use `busy` (spin between departures) or `adaptive` (sleep until just before the next one)"
            )),
        }
    }
}

impl std::fmt::Display for PollMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Busy => "busy",
            Self::Adaptive => "adaptive",
        })
    }
}

/// Shortest sleep worth taking: below this the syscall and the context
/// switch cost more than spinning.
pub const MIN_SLEEP_NS: Nanos = 4_000;
/// First guess of how late a sleep wakes up (learned from then on).
pub const INITIAL_LATENESS_NS: Nanos = 8_000;

/// When to sleep and for how long; learns the wake-up lateness.
#[derive(Clone, Debug)]
pub struct Waiter {
    /// Exponentially weighted estimate of the lateness (ns, ×16 fixed point
    /// folded into an f64 for simplicity).
    lateness: f64,
    /// Sleeps taken.
    pub sleeps: u64,
    /// Total time asked for, ns.
    pub asked_ns: Nanos,
    /// Total time slept (wake − start), ns.
    pub slept_ns: Nanos,
    /// Largest lateness seen, ns.
    pub max_late_ns: Nanos,
}

impl Default for Waiter {
    fn default() -> Self {
        Waiter {
            lateness: INITIAL_LATENESS_NS as f64,
            sleeps: 0,
            asked_ns: 0,
            slept_ns: 0,
            max_late_ns: 0,
        }
    }
}

impl Waiter {
    /// The current lateness estimate, ns (what a sleep is shortened by).
    pub fn margin(&self) -> Nanos {
        // Twice the average lateness covers most of its spread.
        (2.0 * self.lateness) as Nanos
    }

    /// How long to sleep at `now` when the next event is `next` and the
    /// switch holds packets (`held`); None: keep polling.
    pub fn plan(&self, now: Nanos, next: Option<Nanos>, held: bool) -> Option<Nanos> {
        if !held {
            return None;
        }
        let wait = next?.saturating_sub(now).saturating_sub(self.margin());
        (wait >= MIN_SLEEP_NS).then_some(wait)
    }

    /// Records a sleep of `asked` ns that took `took` ns.
    pub fn record(&mut self, asked: Nanos, took: Nanos) {
        let late = took.saturating_sub(asked);
        self.lateness += (late as f64 - self.lateness) / 16.0;
        self.sleeps += 1;
        self.asked_ns += asked;
        self.slept_ns += took;
        self.max_late_ns = self.max_late_ns.max(late);
    }

    /// Counters for the exit report and the JSON.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "sleeps": self.sleeps,
            "slept_ms": self.slept_ns as f64 / 1e6,
            "mean_late_us": if self.sleeps == 0 { 0.0 } else {
                (self.slept_ns.saturating_sub(self.asked_ns)) as f64 / self.sleeps as f64 / 1e3
            },
            "max_late_us": self.max_late_ns as f64 / 1e3,
            "margin_us": self.margin() as f64 / 1e3,
        })
    }
}

/// Sets this thread's timer slack to 1 ns (the default 50 µs would make
/// every short sleep 50 µs late).
pub fn tighten_timer_slack() {
    if let Err(e) = nix::sys::prctl::set_timerslack(1) {
        eprintln!("softswitch: could not set the timer slack ({e}); adaptive sleeps wake late");
    }
}

/// Sleeps `ns` nanoseconds (high-resolution timer).
pub fn sleep_ns(ns: Nanos) {
    std::thread::sleep(std::time::Duration::from_nanos(ns));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_only_while_holding_packets_and_far_enough_from_the_next_event() {
        let w = Waiter::default();
        let m = w.margin();
        assert_eq!(m, 2 * INITIAL_LATENESS_NS);
        assert_eq!(
            w.plan(0, Some(100_000), false),
            None,
            "idle: the busy loop's yield applies"
        );
        assert_eq!(w.plan(0, None, true), None, "nothing due: poll");
        assert_eq!(
            w.plan(1_000, Some(1_000 + m + MIN_SLEEP_NS - 1), true),
            None
        );
        assert_eq!(
            w.plan(1_000, Some(1_000 + m + MIN_SLEEP_NS), true),
            Some(MIN_SLEEP_NS)
        );
        assert_eq!(w.plan(50_000, Some(10_000), true), None, "overdue");
    }

    #[test]
    fn learns_the_lateness_and_wakes_that_much_earlier() {
        let mut w = Waiter::default();
        // This machine wakes 2 µs late every time.
        for _ in 0..200 {
            w.record(10_000, 12_000);
        }
        assert!((w.margin() as i64 - 4_000).abs() <= 10, "{}", w.margin());
        assert_eq!(w.max_late_ns, 2_000);
        // One 30 µs hiccup moves the estimate by 1/16 of the difference.
        w.record(10_000, 40_000);
        let expect = 2.0 * (2_000.0 + (30_000.0 - 2_000.0) / 16.0);
        assert!((w.margin() as f64 - expect).abs() < 20.0, "{}", w.margin());
        assert_eq!(w.max_late_ns, 30_000);
        assert_eq!(w.sleeps, 201);
        let r = w.report();
        assert_eq!(r["sleeps"], 201);
        assert!((r["max_late_us"].as_f64().unwrap() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn modes_parse_and_name_the_choices() {
        assert_eq!("busy".parse::<PollMode>(), Ok(PollMode::Busy));
        assert_eq!("adaptive".parse::<PollMode>(), Ok(PollMode::Adaptive));
        let e = "lazy".parse::<PollMode>().unwrap_err();
        assert!(e.contains("busy") && e.contains("adaptive"), "{e}");
        assert_eq!(PollMode::default().to_string(), "busy");
    }

    #[test]
    fn a_real_sleep_is_not_early() {
        tighten_timer_slack();
        let t = std::time::Instant::now();
        sleep_ns(200_000);
        assert!(t.elapsed() >= std::time::Duration::from_micros(200));
    }
}

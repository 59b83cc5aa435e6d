//! How regularly the data path looks at its rings: the guard's measurements
//! of the loop itself, in real time (what the machine did), never in the
//! switch core's time.

use serde_json::json;

use super::{LoopStalls, StallTime};
use crate::units::{Nanos, SEC};

/// An interval between passes longer than this is a stall (no frame moved).
pub const STALL_NS: Nanos = 100_000;

/// How regularly the data path looks at its rings: the interval between
/// the starts of successive loop passes. A long interval is time in which
/// no frame moved — the thread was descheduled, or a syscall (a tx kick
/// that ran a host's TCP stack in softirq) took that long — and shapers and
/// AQMs saw the clock jump.
///
/// For the fidelity guard a long interval is a *stall* only when frames were
/// waiting for the data path at its end: the pass that followed received
/// frames, or the switch held packets. An idle switch that gave its CPU away
/// delayed nothing.
///
/// Each interval also carries where the pass it covers spent its time
/// ([`StallTime`]), so that a stall can be put down to its cause
/// ([`super::stall_cause`]): inside tx kicks (the one syscall on
/// the data path: in copy mode the kernel delivers the frames to the
/// receiving veth there, and may run that host's stack in softirq before
/// returning), inside a yield (the idle switch gave its CPU away), waiting
/// for a CPU (other tasks ran on the switch's), or none of these.
pub struct PassIntervals {
    hist: hdrhistogram::Histogram<u64>,
    over_100us: u64,
    stalls: u64,
    stalled_ns: Nanos,
    max_stall_ns: Nanos,
    within: StallTime,
    max_within: StallTime,
    max_kick_ns: Nanos,
    thread_waited_ns: Option<Nanos>,
    thread_stolen_ns: Option<Nanos>,
}

impl Default for PassIntervals {
    fn default() -> Self {
        Self {
            hist: hdrhistogram::Histogram::new_with_bounds(1, 100 * SEC, 2)
                .expect("valid histogram bounds"),
            over_100us: 0,
            stalls: 0,
            stalled_ns: 0,
            max_stall_ns: 0,
            within: StallTime::default(),
            max_within: StallTime::default(),
            max_kick_ns: 0,
            thread_waited_ns: None,
            thread_stolen_ns: None,
        }
    }
}

impl PassIntervals {
    /// Records one interval; `delayed_frames`: frames were waiting at its
    /// end; `spent`: where the pass it covers spent its time (each part
    /// clamped to the interval, [`StallTime::clamped`]).
    pub fn record(&mut self, ns: Nanos, delayed_frames: bool, spent: StallTime) {
        let spent = spent.clamped(ns);
        self.hist.saturating_record(ns.max(1));
        self.max_kick_ns = self.max_kick_ns.max(spent.kicks_ns);
        if ns > STALL_NS {
            self.over_100us += 1;
            if delayed_frames {
                self.stalls += 1;
                self.stalled_ns += ns;
                self.within.add(spent);
                if ns > self.max_stall_ns {
                    self.max_stall_ns = ns;
                    self.max_within = spent;
                }
            }
        }
    }

    /// How long the data-path thread has waited for a CPU since the run
    /// started (from its schedstat), for the report.
    pub fn set_thread_waited(&mut self, ns: Nanos) {
        self.thread_waited_ns = Some(ns);
    }
    /// How long the data-path thread's vCPU was stolen since the run
    /// started ([`StallTime::stolen_ns`]), for the report.
    pub fn set_thread_stolen(&mut self, ns: Nanos) {
        self.thread_stolen_ns = Some(ns);
    }

    /// The stalls of a run `elapsed_ns` long, for the fidelity guard.
    pub fn stalls(&self, elapsed_ns: Nanos) -> LoopStalls {
        LoopStalls {
            elapsed_ns,
            count: self.stalls,
            stalled_ns: self.stalled_ns,
            max_ns: self.max_stall_ns,
            within: self.within,
            max_within: self.max_within,
        }
    }

    /// JSON for the counters.
    pub fn report(&self) -> serde_json::Value {
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1e3;
        json!({
            "passes": self.hist.len(),
            "p50_us": us(0.5),
            "p99_us": us(0.99),
            "p999_us": us(0.999),
            "max_us": self.hist.max() as f64 / 1e3,
            "over_100us": self.over_100us,
            "stalls": self.stalls,
            "stalled_ms": self.stalled_ns as f64 / 1e6,
            "max_stall_us": self.max_stall_ns as f64 / 1e3,
            "stalled_in_kicks_ms": self.within.kicks_ns as f64 / 1e6,
            "stalled_in_yield_ms": self.within.yield_ns as f64 / 1e6,
            "stalled_waiting_ms": self.within.waited_ns as f64 / 1e6,
            "max_stall_in_kicks_us": self.max_within.kicks_ns as f64 / 1e3,
            "max_stall_in_yield_us": self.max_within.yield_ns as f64 / 1e3,
            "max_stall_waiting_us": self.max_within.waited_ns as f64 / 1e3,
            "stalled_stolen_ms": self.within.stolen_ns as f64 / 1e6,
            "max_stall_stolen_us": self.max_within.stolen_ns as f64 / 1e3,
            "thread_stolen_ms": self.thread_stolen_ns.map(|n| n as f64 / 1e6),
            "max_kick_us": self.max_kick_ns as f64 / 1e3,
            "thread_waited_ms": self.thread_waited_ns.map(|n| n as f64 / 1e6),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_intervals_count_stalls() {
        let mut p = PassIntervals::default();
        let t = |kicks_ns, yield_ns, waited_ns| StallTime {
            kicks_ns,
            yield_ns,
            waited_ns,
            stolen_ns: 0,
        };
        for _ in 0..997 {
            p.record(2_000, true, t(1_000, 0, 0));
        }
        p.record(150_000, true, t(100_000, 0, 0));
        // The longest stall: 2.5 ms of its 3 ms inside tx kicks, 0.4 ms in a
        // yield, which the thread spent waiting for a CPU.
        p.record(3_000_000, true, t(2_500_000, 400_000, 400_000));
        // An idle switch that yielded its CPU for 5 ms delayed no frame.
        p.record(5_000_000, false, t(0, 5_000_000, 5_000_000));
        // Times larger than their interval (clock skew, a wait read over a
        // longer span) count as the interval, kicks first.
        p.record(120_000, true, t(100_000, 400_000, 1_000_000));
        let r = p.report();
        assert_eq!(r["passes"], 1001);
        assert_eq!(r["over_100us"], 4);
        assert_eq!(r["stalls"], 3);
        assert!(
            (r["stalled_ms"].as_f64().unwrap() - 3.27).abs() < 1e-9,
            "{r}"
        );
        let s = p.stalls(10 * SEC);
        assert_eq!((s.count, s.stalled_ns, s.max_ns), (3, 3_270_000, 3_000_000));
        assert_eq!(s.within, t(2_700_000, 420_000, 520_000));
        assert_eq!(s.max_within, t(2_500_000, 400_000, 400_000));
        assert_eq!(r["max_kick_us"], 2500.0);
        assert_eq!(r["max_stall_in_kicks_us"], 2500.0);
        assert_eq!(r["max_stall_in_yield_us"], 400.0);
        assert_eq!(r["thread_waited_ms"], serde_json::Value::Null);
        p.set_thread_waited(7_500_000);
        assert_eq!(p.report()["thread_waited_ms"], 7.5);
        assert!((r["p50_us"].as_f64().unwrap() - 2.0).abs() < 0.05, "{r}");
        assert!((r["max_us"].as_f64().unwrap() - 5000.0).abs() < 50.0, "{r}");
        assert!(r["p999_us"].as_f64().unwrap() >= 149.0, "{r}");
    }
}

//! What the machine did in each loop pass, in real time, for the fidelity
//! guard: the interval since the previous pass, and where the pass it
//! covers spent its time (tx kicks, a yield, waiting for a CPU; see
//! [`PassIntervals`]). None of this is the switch core's time.

use crate::fidelity::{PassIntervals, StallTime, STALL_NS};
use crate::units::Nanos;

/// The data-path thread's time waiting for a CPU (runnable, not running),
/// read from its `/proc/thread-self/schedstat` (second field, ns). Only on a
/// stall and every publish, never per pass. Without the file (no
/// CONFIG_SCHED_INFO) every reading is 0 and no total is reported.
pub(super) struct ThreadWait {
    file: Option<std::fs::File>,
    start: Option<Nanos>,
    last: Nanos,
}

impl ThreadWait {
    /// Opens the calling thread's schedstat: call it on the data-path thread.
    pub(super) fn open() -> Self {
        let mut w = ThreadWait {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
            start: None,
            last: 0,
        };
        w.start = w.read();
        w.last = w.start.unwrap_or(0);
        w
    }

    fn read(&self) -> Option<Nanos> {
        use std::os::unix::fs::FileExt;
        let f = self.file.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        let (_run, wait) = crate::cpu::parse_schedstat(std::str::from_utf8(&buf[..n]).ok()?)?;
        Some(wait)
    }

    /// Wait since the previous call (or since opening).
    pub(super) fn since_last(&mut self) -> Nanos {
        match self.read() {
            Some(now) => {
                let d = now.saturating_sub(self.last);
                self.last = now;
                d
            }
            None => 0,
        }
    }

    /// Wait since opening, as of the last reading.
    pub(super) fn total(&self) -> Option<Nanos> {
        Some(self.last.saturating_sub(self.start?))
    }
}

/// The loop's real-time measurements: pass intervals, and where the
/// current pass spends its time.
pub(super) struct LoopWatch {
    /// Every interval so far.
    pub(super) intervals: PassIntervals,
    /// Where the pass under way has spent its time so far.
    spent: StallTime,
    thread_wait: ThreadWait,
    /// When the previous pass started (real time).
    last_pass_ns: Nanos,
}

impl LoopWatch {
    /// Starts watching at real time `real_ns`; call it on the data-path thread.
    pub(super) fn start(real_ns: Nanos) -> Self {
        LoopWatch {
            intervals: PassIntervals::default(),
            spent: StallTime::default(),
            thread_wait: ThreadWait::open(),
            last_pass_ns: real_ns,
        }
    }

    /// A pass starts at real time `real_ns`; returns the interval since the
    /// previous one.
    #[inline]
    pub(super) fn pass_starts(&mut self, real_ns: Nanos) -> Nanos {
        let interval = real_ns - self.last_pass_ns;
        self.last_pass_ns = real_ns;
        interval
    }

    /// Records the interval before this pass; `delayed`: frames were
    /// waiting (received now, or held by the switch) at its end.
    pub(super) fn record(&mut self, interval: Nanos, delayed: bool) {
        if interval > STALL_NS && delayed {
            // Rare (a stall): read how long the thread waited for a CPU since
            // the last stall or publish, at most one publish period ago.
            self.spent.waited_ns = self.thread_wait.since_last();
        }
        self.intervals.record(interval, delayed, self.spent);
        self.spent = StallTime::default();
    }

    /// Time spent inside a tx kick.
    #[inline]
    pub(super) fn kicked(&mut self, ns: Nanos) {
        self.spent.kicks_ns += ns;
    }

    /// Time spent inside a yield.
    #[inline]
    pub(super) fn yielded(&mut self, ns: Nanos) {
        self.spent.yield_ns += ns;
    }

    /// A planned sleep of `ns` is not a stall (waking late is).
    pub(super) fn slept(&mut self, ns: Nanos) {
        self.last_pass_ns += ns;
    }

    /// Every publish: the baseline for the next stall's wait, and the run's
    /// total wait so far.
    pub(super) fn publish(&mut self) {
        self.thread_wait.since_last();
        if let Some(total) = self.thread_wait.total() {
            self.intervals.set_thread_waited(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_is_read_run_then_wait() {
        use crate::cpu::parse_schedstat;
        assert_eq!(
            parse_schedstat("123456789 4242 17\n"),
            Some((123456789, 4242))
        );
        assert_eq!(parse_schedstat("123\n"), None);
        assert_eq!(parse_schedstat("x 5 1"), None);
        assert_eq!(parse_schedstat(""), None);
        // This thread's own file, where the kernel has one.
        let mut w = ThreadWait::open();
        if w.file.is_some() {
            assert!(w.start.is_some(), "unparsable /proc/thread-self/schedstat");
            std::thread::yield_now();
            let _ = w.since_last();
            assert!(w.total().is_some());
        }
    }

    #[test]
    fn a_stall_carries_the_time_its_pass_spent_in_kicks_and_a_planned_sleep_is_none() {
        let mut w = LoopWatch::start(0);
        assert_eq!(w.pass_starts(5_000), 5_000);
        w.record(5_000, true);
        w.kicked(300_000);
        // The next pass starts 400 µs later: a stall, 300 µs of it in a kick.
        let i = w.pass_starts(405_000);
        w.record(i, true);
        let s = w.intervals.stalls(1_000_000);
        assert_eq!(
            (s.count, s.max_ns, s.within.kicks_ns),
            (1, 400_000, 300_000)
        );
        // A planned 1 ms sleep and a pass 10 µs after it wakes.
        w.slept(1_000_000);
        assert_eq!(w.pass_starts(1_415_000), 10_000);
    }
}

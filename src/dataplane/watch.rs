//! What the machine did in each loop pass, in real time, for the fidelity
//! guard: the interval since the previous pass, and where the pass it
//! covers spent its time (tx kicks, a yield, waiting for a CPU; see
//! [`PassIntervals`]). None of this is the switch core's time.

use crate::fidelity::{PassIntervals, StallTime, STALL_NS};
use crate::units::Nanos;

/// The data-path thread's time waiting for a CPU (runnable, not running),
/// read from its `/proc/thread-self/schedstat` (second field, ns), and its
/// stolen time: real time minus its CPU time (`CLOCK_THREAD_CPUTIME_ID`,
/// which excludes steal under paravirt steal accounting) minus that wait
/// minus planned sleeps. Read only on a stall and every publish, never per
/// pass; the readings partition the run, so the windows' stolen times add
/// up to the run's. Without the schedstat file (no CONFIG_SCHED_INFO)
/// nothing is reported.
pub(super) struct ThreadTime {
    file: Option<std::fs::File>,
    /// The first reading: (wait, stolen so far = 0).
    started: bool,
    start_wait: Nanos,
    last: Reading,
    /// Planned sleeps since the last reading (neither CPU nor wait).
    asleep_ns: Nanos,
    stolen_total: Nanos,
}

/// One reading: real time (the data path's clock), wait, CPU time.
#[derive(Clone, Copy, Debug, Default)]
struct Reading {
    real_ns: Nanos,
    wait_ns: Nanos,
    cpu_ns: Nanos,
}

/// What the thread did since the previous reading, beyond running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Away {
    /// Waiting for a CPU.
    pub(super) waited_ns: Nanos,
    /// Stolen (its vCPU not running).
    pub(super) stolen_ns: Nanos,
}

impl ThreadTime {
    /// Opens the calling thread's schedstat at real time `real_ns`: call it
    /// on the data-path thread.
    pub(super) fn open(real_ns: Nanos) -> Self {
        let mut w = ThreadTime {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
            started: false,
            start_wait: 0,
            last: Reading::default(),
            asleep_ns: 0,
            stolen_total: 0,
        };
        if let Some(r) = w.read(real_ns) {
            w.started = true;
            w.start_wait = r.wait_ns;
            w.last = r;
        }
        w
    }

    fn read(&self, real_ns: Nanos) -> Option<Reading> {
        use std::os::unix::fs::FileExt;
        let f = self.file.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        let (_run, wait_ns) = crate::cpu::parse_schedstat(std::str::from_utf8(&buf[..n]).ok()?)?;
        Some(Reading {
            real_ns,
            wait_ns,
            cpu_ns: crate::cpu::thread_cpu_ns()?,
        })
    }

    /// A planned sleep of `ns` (not stolen).
    pub(super) fn slept(&mut self, ns: Nanos) {
        self.asleep_ns += ns;
    }

    /// What the thread did since the previous reading (or opening), at
    /// real time `real_ns`.
    pub(super) fn since_last(&mut self, real_ns: Nanos) -> Away {
        if !self.started {
            return Away::default();
        }
        let Some(now) = self.read(real_ns) else {
            return Away::default();
        };
        let away = away(&self.last, &now, std::mem::take(&mut self.asleep_ns));
        self.last = now;
        self.stolen_total += away.stolen_ns;
        away
    }

    /// Wait since opening, as of the last reading.
    pub(super) fn total_wait(&self) -> Option<Nanos> {
        self.started
            .then(|| self.last.wait_ns.saturating_sub(self.start_wait))
    }

    /// Stolen time since opening, as of the last reading.
    pub(super) fn total_stolen(&self) -> Option<Nanos> {
        self.started.then_some(self.stolen_total)
    }
}

/// Between two readings: the wait, and the real time that was neither CPU
/// time, wait nor a planned sleep.
fn away(a: &Reading, b: &Reading, asleep_ns: Nanos) -> Away {
    let waited_ns = b.wait_ns.saturating_sub(a.wait_ns);
    let real = b.real_ns.saturating_sub(a.real_ns);
    let cpu = b.cpu_ns.saturating_sub(a.cpu_ns);
    Away {
        waited_ns,
        stolen_ns: real.saturating_sub(cpu + waited_ns + asleep_ns),
    }
}

/// The loop's real-time measurements: pass intervals, and where the
/// current pass spends its time.
pub(super) struct LoopWatch {
    /// Every interval so far.
    pub(super) intervals: PassIntervals,
    /// Where the pass under way has spent its time so far.
    spent: StallTime,
    thread: ThreadTime,
    /// When the previous pass started (real time).
    last_pass_ns: Nanos,
}

impl LoopWatch {
    /// Starts watching at real time `real_ns`; call it on the data-path thread.
    pub(super) fn start(real_ns: Nanos) -> Self {
        LoopWatch {
            intervals: PassIntervals::default(),
            spent: StallTime::default(),
            thread: ThreadTime::open(real_ns),
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
            // Rare (a stall): read how long the thread waited for a CPU, and
            // was stolen, since the last stall or publish, at most one
            // publish period ago.
            let away = self.thread.since_last(self.last_pass_ns);
            self.spent.waited_ns = away.waited_ns;
            self.spent.stolen_ns = away.stolen_ns;
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
        self.thread.slept(ns);
    }

    /// Every publish, at real time `real_ns`: the baseline for the next
    /// stall's wait and stolen time, and the run's totals so far.
    pub(super) fn publish(&mut self, real_ns: Nanos) {
        self.thread.since_last(real_ns);
        if let Some(total) = self.thread.total_wait() {
            self.intervals.set_thread_waited(total);
        }
        if let Some(total) = self.thread.total_stolen() {
            self.intervals.set_thread_stolen(total);
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
        let t0 = std::time::Instant::now();
        let mut w = ThreadTime::open(0);
        if w.file.is_some() {
            assert!(w.started, "unparsable /proc/thread-self/schedstat");
            std::thread::yield_now();
            let _ = w.since_last(t0.elapsed().as_nanos() as Nanos);
            assert!(w.total_wait().is_some());
            assert!(w.total_stolen().is_some());
        }
    }

    #[test]
    fn stolen_time_is_real_time_neither_on_a_cpu_waiting_nor_asleep() {
        let r = |real_ns, wait_ns, cpu_ns| Reading {
            real_ns,
            wait_ns,
            cpu_ns,
        };
        // 10 ms of real time: 6 ms on a CPU, 1 ms waiting, 2 ms asleep.
        let a = away(
            &r(1_000_000, 500, 7_000),
            &r(11_000_000, 1_000_500, 6_007_000),
            2_000_000,
        );
        assert_eq!(
            a,
            Away {
                waited_ns: 1_000_000,
                stolen_ns: 1_000_000
            }
        );
        // Never negative: CPU time read a little after the real time.
        let b = away(&r(0, 0, 0), &r(1_000, 0, 1_200), 0);
        assert_eq!(b.stolen_ns, 0);
    }

    #[test]
    fn a_busy_thread_is_not_stolen_from_on_an_idle_machine() {
        // Spin 20 ms: real time ≈ CPU time + wait; what is left (stolen)
        // stays well under the spin (a loaded CI machine may steal some).
        let t0 = std::time::Instant::now();
        let mut w = ThreadTime::open(0);
        if !w.started {
            return;
        }
        while t0.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let a = w.since_last(t0.elapsed().as_nanos() as Nanos);
        assert!(a.stolen_ns < 20_000_000, "{a:?}");
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

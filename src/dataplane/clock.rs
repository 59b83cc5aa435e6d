//! The data path's two times, and the one place they meet.
//!
//! * **Core time** is the `now` the switch core is given: frames arrive and
//!   leave at it, shapers earn credit by it, MAC entries age in it, the time
//!   series is sampled in it, and a run's `--duration` is measured in it.
//! * **Real time** is what the machine did: the intervals between loop
//!   passes and their stalls, the time inside tx kicks, yields and sleeps,
//!   the thread's wait for a CPU (the fidelity guard judges these), and the
//!   periods of the data path's own chores (publishing the counters, link
//!   checks, handing capture batches to the writer).
//!
//! Both count nanoseconds since the data path started, and today they are
//! equal. Time dilation — the core running D times slower than the machine,
//! so that a shaper sends at rate / D in real time while the guard keeps
//! judging real time — changes [`Clock::core_at`] and [`Clock::real_span`]
//! and nothing else.

use std::time::Instant;

use crate::units::Nanos;

/// One reading of the clock in both times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Real time, ns since start.
    pub real_ns: Nanos,
    /// Core time, ns since start: the `now` the switch is given.
    pub core_ns: Nanos,
}

/// The data path's clock (see the module header).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose both times start at 0 now.
    pub fn start() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Real time since start, ns.
    #[inline]
    pub fn real_ns(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    /// Both times, now.
    #[inline]
    pub fn now(&self) -> Now {
        let real_ns = self.real_ns();
        Now {
            real_ns,
            core_ns: self.core_at(real_ns),
        }
    }

    /// Core time at real time `real_ns` (dilation: `real_ns / D`).
    #[inline]
    pub fn core_at(&self, real_ns: Nanos) -> Nanos {
        real_ns
    }

    /// The real time a span of `core_ns` of core time takes (dilation:
    /// `core_ns · D`).
    #[inline]
    pub fn real_span(&self, core_ns: Nanos) -> Nanos {
        core_ns
    }

    /// When, in real time, core time `core_ns` comes, as seen from `now`
    /// (a core time already past: now).
    #[inline]
    pub fn real_when(&self, now: Now, core_ns: Nanos) -> Nanos {
        now.real_ns + self.real_span(core_ns.saturating_sub(now.core_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_times_advance_together_and_convert_in_one_place() {
        let c = Clock::start();
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = c.now();
        assert!(b.real_ns >= a.real_ns + 1_000_000);
        assert_eq!(b.core_ns, c.core_at(b.real_ns));
        // A core deadline 5 µs ahead comes 5 µs of real time ahead (no
        // dilation); one already past comes now.
        assert_eq!(c.real_when(b, b.core_ns + 5_000), b.real_ns + 5_000);
        assert_eq!(c.real_when(b, a.core_ns), b.real_ns);
    }
}

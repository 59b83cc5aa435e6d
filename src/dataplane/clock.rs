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
//! Both count nanoseconds since the data path started. With time dilation
//! D (`--dilation`; Gupta et al., "To Infinity and Beyond: Time-Warped
//! Network Emulation", NSDI 2006; SELENA, ANCS 2014) core time is the
//! emulated time, real elapsed / D: a shaper that earns credit at its
//! emulated rate C per core second sends C / D per real second, and every
//! time constant the core keeps (delay lines, AQM intervals, flow expiry,
//! R-AQM's intervals, `--duration`) lasts D times longer on the wire. The
//! guard keeps judging real time. [`Clock::core_at`] and
//! [`Clock::real_span`] are the only conversions; a real-time wait for a
//! core-time event goes through [`Clock::real_when`]. With D = 1 both times
//! are equal.

use std::time::Instant;

use crate::timebase::Dilation;
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
    dilation: Dilation,
}

impl Clock {
    /// A clock whose both times start at 0 now, core time running D times
    /// slower than real time.
    pub fn start(dilation: Dilation) -> Self {
        Clock {
            start: Instant::now(),
            dilation,
        }
    }

    /// D.
    pub fn dilation(&self) -> Dilation {
        self.dilation
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

    /// Core time at real time `real_ns`: `real_ns / D`, to the nearest ns.
    #[inline]
    pub fn core_at(&self, real_ns: Nanos) -> Nanos {
        self.dilation.to_emulated_ns(real_ns)
    }

    /// The real time a span of `core_ns` of core time takes: `core_ns · D`.
    #[inline]
    pub fn real_span(&self, core_ns: Nanos) -> Nanos {
        self.dilation.to_real_ns(core_ns)
    }

    /// When, in real time, core time `core_ns` comes, as seen from `now`
    /// (a core time already past: now; one beyond the end of time: never,
    /// `Nanos::MAX`).
    #[inline]
    pub fn real_when(&self, now: Now, core_ns: Nanos) -> Nanos {
        now.real_ns
            .saturating_add(self.real_span(core_ns.saturating_sub(now.core_ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_times_advance_together_and_convert_in_one_place() {
        let c = Clock::start(Dilation::NONE);
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

    #[test]
    fn dilated_core_time_runs_d_times_slower() {
        let c = Clock::start(Dilation::new(4.0).unwrap());
        // 1 ms of real time is 250 µs of emulated time ...
        assert_eq!(c.core_at(1_000_000), 250_000);
        // ... and an emulated 12.3 µs frame time lasts 49.2 µs on the wire.
        assert_eq!(c.real_span(12_300), 49_200);
        // A departure 10 µs of core time ahead of a reading is 40 µs of
        // real time ahead, and core time has reached it then.
        let now = Now {
            real_ns: 1_000_002,
            core_ns: c.core_at(1_000_002),
        };
        assert_eq!(now.core_ns, 250_001);
        let when = c.real_when(now, now.core_ns + 10_000);
        assert_eq!(when, 1_040_002);
        assert_eq!(c.core_at(when), now.core_ns + 10_000);
        assert_eq!(c.real_when(now, Nanos::MAX), Nanos::MAX, "never is never");
        // Real time read from the machine: core time follows at 1/D.
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = c.now();
        let (real, core) = (b.real_ns - a.real_ns, b.core_ns - a.core_ns);
        assert!(
            real >= 2_000_000 && core.abs_diff(real / 4) <= 1,
            "{real} {core}"
        );
        // A fractional D: 2.5 ms of real time is 1 ms emulated.
        let f = Clock::start(Dilation::new(2.5).unwrap());
        assert_eq!(f.core_at(2_500_000), 1_000_000);
        assert_eq!(f.real_span(1_000_000), 2_500_000);
        assert_eq!(f.dilation().factor(), 2.5);
    }
}

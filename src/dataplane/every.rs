//! The data path's periodic chores (publishing the counters, ageing MAC
//! entries, checking links, sampling the time series, handing capture
//! batches to the writer) share one timer.

use crate::units::Nanos;

/// A chore due every `period` (in whichever time its caller passes, see
/// [`super::clock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Every {
    next: Nanos,
    period: Nanos,
    /// Next due one period after the previous due time rather than one
    /// period after the run (but never before the run).
    on_grid: bool,
}

impl Every {
    /// First due at `first`, then `period` after each time it is done.
    pub const fn after(first: Nanos, period: Nanos) -> Self {
        Every {
            next: first,
            period,
            on_grid: false,
        }
    }

    /// First due at `first`, then one period after the previous due time:
    /// a run a little late keeps the grid `first + k·period`; a run later
    /// than a whole period moves the next due time to the run itself.
    pub const fn on_grid(first: Nanos, period: Nanos) -> Self {
        Every {
            next: first,
            period,
            on_grid: true,
        }
    }

    /// Never due.
    pub const fn never() -> Self {
        Every::after(Nanos::MAX, Nanos::MAX)
    }

    /// Whether it is due at `now`.
    #[inline]
    pub fn is_due(&self, now: Nanos) -> bool {
        now >= self.next
    }

    /// It ran at `now`: schedules the next time.
    #[inline]
    pub fn done(&mut self, now: Nanos) {
        self.next = if self.on_grid {
            self.next.saturating_add(self.period).max(now)
        } else {
            now.saturating_add(self.period)
        };
    }

    /// If due at `now`, marks it done and says so.
    #[inline]
    pub fn tick(&mut self, now: Nanos) -> bool {
        let due = self.is_due(now);
        if due {
            self.done(now);
        }
        due
    }

    /// Makes it due at `now` (an event that cannot wait for the period).
    pub fn due_at(&mut self, now: Nanos) {
        self.next = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_counts_the_period_from_the_run_and_on_grid_from_the_grid() {
        let mut a = Every::after(10, 100);
        assert!(!a.tick(9));
        assert!(a.tick(15));
        assert!(!a.tick(114));
        assert!(a.tick(115));
        let mut g = Every::on_grid(0, 100);
        assert!(g.tick(30));
        assert!(!g.is_due(99));
        assert!(g.tick(100));
        // A little late: the grid holds.
        assert!(g.tick(230));
        assert!(!g.is_due(299) && g.is_due(300));
        // Late by 1.5 periods: due again at once, then a period after that.
        assert!(g.tick(450));
        assert!(g.tick(451));
        assert!(!g.is_due(549) && g.is_due(550));
        let mut n = Every::never();
        assert!(!n.tick(Nanos::MAX - 1));
        n.due_at(7);
        assert!(n.is_due(7));
    }
}

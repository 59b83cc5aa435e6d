//! Strict priority (SP): always serve the highest-priority non-empty queue.
//!
//! Priority order is a list of queues, highest first (from `--strict`; by
//! default queue 0 highest, then 1, ...). Queues of one priority level do not
//! exist: every queue has its own level, so there is nothing to break ties.
//! A lower class is served only while every higher one is empty (TCN paper §5,
//! "SP/WFQ and SP/DWRR ... based on priorities").
//!
//! Cost: when the order is the identity (the default) selection is one
//! `trailing_zeros` on the non-empty mask; otherwise a walk of the order list.

use super::{mask_of, QueuesView, Scheduler};
use crate::units::Nanos;

/// Strict priority over a fixed list of queues.
#[derive(Clone, Debug)]
pub struct Sp {
    /// Queues, highest priority first.
    order: Vec<usize>,
    /// Bits of the queues in `order`.
    members: u128,
    /// `order` is 0, 1, 2, ... (fast path).
    identity: bool,
}

impl Sp {
    /// SP over `order` (highest priority first).
    pub fn new(order: Vec<usize>) -> Self {
        let identity = order.iter().enumerate().all(|(i, &q)| i == q);
        Sp {
            members: mask_of(order.iter().copied()),
            order,
            identity,
        }
    }
    /// Queues served, highest priority first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }
    /// Bit mask of the queues this SP serves.
    pub fn members(&self) -> u128 {
        self.members
    }
    /// Rank of `queue` (0 = highest), None if not served here.
    pub fn rank(&self, queue: usize) -> Option<usize> {
        self.order.iter().position(|&q| q == queue)
    }

    /// Highest-priority queue in `nonempty` (already masked to members).
    #[inline]
    pub(crate) fn pick(&self, nonempty: u128) -> Option<usize> {
        let m = nonempty & self.members;
        if m == 0 {
            None
        } else if self.identity {
            Some(m.trailing_zeros() as usize)
        } else {
            self.order.iter().copied().find(|&q| m & (1 << q) != 0)
        }
    }
}

impl Scheduler for Sp {
    #[inline]
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, _now: Nanos) -> Option<usize> {
        self.pick(queues.nonempty_mask())
    }
    #[inline]
    fn peek<V: QueuesView + ?Sized>(&self, queues: &V) -> Option<usize> {
        self.pick(queues.nonempty_mask())
    }
    #[inline]
    fn commit(&mut self, _queue: usize, _len: u32, _next_len: Option<u32>, _now: Nanos) {}
    #[inline]
    fn on_enqueue(&mut self, _queue: usize, _len: u32, _was_empty: bool, _now: Nanos) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SimQueues;

    #[test]
    fn lowest_index_first_by_default() {
        let mut s = Sp::new(vec![0, 1, 2]);
        let mut qs = SimQueues::new(3);
        qs.push(&mut s, 2, 100, 0);
        qs.push(&mut s, 1, 200, 0);
        qs.push(&mut s, 2, 101, 0);
        qs.push(&mut s, 0, 300, 0);
        let order: Vec<_> = std::iter::from_fn(|| qs.serve(&mut s, 0)).collect();
        assert_eq!(order, vec![(0, 300), (1, 200), (2, 100), (2, 101)]);
    }

    #[test]
    fn explicit_order_and_preemption() {
        // --strict 2: queue 2 first, then 0, then 1.
        let mut s = Sp::new(vec![2, 0, 1]);
        let mut qs = SimQueues::new(3);
        qs.push(&mut s, 0, 1, 0);
        qs.push(&mut s, 1, 2, 0);
        assert_eq!(qs.serve(&mut s, 0), Some((0, 1)));
        qs.push(&mut s, 2, 3, 0);
        qs.push(&mut s, 0, 4, 0);
        assert_eq!(qs.serve(&mut s, 0), Some((2, 3)));
        assert_eq!(qs.serve(&mut s, 0), Some((0, 4)));
        assert_eq!(qs.serve(&mut s, 0), Some((1, 2)));
        assert_eq!(qs.serve(&mut s, 0), None);
        assert_eq!(s.rank(1), Some(2));
    }
}

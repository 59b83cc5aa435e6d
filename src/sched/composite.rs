//! SP+DWRR and SP+WFQ: strict-priority queues above one DWRR / WFQ group
//! (TCN paper §5, "SP/WFQ and SP/DWRR"): "they first try to schedule packets
//! from strict higher priority queues based on priorities; only when all the
//! higher priority queues are empty, they start to schedule packets on the
//! lowest priority according to WFQ/DWRR."
//!
//! The group keeps its state while strict traffic preempts it (a DWRR head
//! granted its quantum stays granted), exactly as if its service were paused.
//! The group only learns of its own queues' arrivals and departures.

use super::{QueuesView, Scheduler, Sp};
use crate::units::Nanos;

/// Strict priority over `strict` queues, then group `G` (DWRR or WFQ).
#[derive(Clone, Debug)]
pub struct SpOver<G> {
    strict: Sp,
    group: G,
}

impl<G> SpOver<G> {
    /// `strict` queues, highest priority first, above `group`.
    pub fn new(strict: Vec<usize>, group: G) -> Self {
        SpOver {
            strict: Sp::new(strict),
            group,
        }
    }
    /// The strict part.
    pub fn strict(&self) -> &Sp {
        &self.strict
    }
    /// The lowest-priority group.
    pub fn group(&self) -> &G {
        &self.group
    }
    #[inline]
    fn is_strict(&self, q: usize) -> bool {
        self.strict.members() & (1 << q) != 0
    }
}

impl<G: Scheduler> Scheduler for SpOver<G> {
    #[inline]
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, now: Nanos) -> Option<usize> {
        match self.strict.pick(queues.nonempty_mask()) {
            Some(q) => Some(q),
            None => self.group.select(queues, now),
        }
    }
    #[inline]
    fn peek<V: QueuesView + ?Sized>(&self, queues: &V) -> Option<usize> {
        match self.strict.pick(queues.nonempty_mask()) {
            Some(q) => Some(q),
            None => self.group.peek(queues),
        }
    }
    #[inline]
    fn commit(&mut self, queue: usize, len: u32, next_len: Option<u32>, now: Nanos) {
        if !self.is_strict(queue) {
            self.group.commit(queue, len, next_len, now);
        }
    }
    #[inline]
    fn on_enqueue(&mut self, queue: usize, len: u32, was_empty: bool, now: Nanos) {
        if !self.is_strict(queue) {
            self.group.on_enqueue(queue, len, was_empty, now);
        }
    }
    #[inline]
    fn take_round_event(&mut self) -> Option<usize> {
        self.group.take_round_event()
    }
    fn invariants<V: QueuesView + ?Sized>(&self, queues: &V, mtu_bytes: u32) {
        self.group.invariants(queues, mtu_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{mask_of, Dwrr, SimQueues, Wfq, WfqVtime};

    #[test]
    fn sp_over_dwrr() {
        // Queue 0 strict; 1 and 2 DWRR with equal quanta.
        let mut s = SpOver::new(vec![0], Dwrr::new(&[1514; 3], mask_of([1, 2])));
        let mut qs = SimQueues::new(3);
        for _ in 0..3 {
            qs.push(&mut s, 1, 1000, 0);
            qs.push(&mut s, 2, 1000, 0);
        }
        assert_eq!(qs.serve(&mut s, 0), Some((1, 1000)));
        // Strict arrivals preempt the group at once.
        qs.push(&mut s, 0, 64, 0);
        qs.push(&mut s, 0, 64, 0);
        assert_eq!(qs.serve(&mut s, 0), Some((0, 64)));
        assert_eq!(qs.serve(&mut s, 0), Some((0, 64)));
        // Group resumes where it was: q1 has 514 B left < 1000 → q2 (1514,
        // sends one, 514 left) → q1 (514 + 1514: sends its last two) → q2.
        let rest: Vec<usize> = (0..5).map(|_| qs.serve(&mut s, 0).unwrap().0).collect();
        assert_eq!(rest, vec![2, 1, 1, 2, 2]);
        s.invariants(&qs, 1514);
    }

    #[test]
    fn sp_over_wfq_two_strict_levels() {
        // Strict 1 then 0, then the WFQ group {2 (w 1), 3 (w 2)}. SCFQ tags
        // q2 = 0 + 500, q3 = 0 + 250; the prototype's V moves at each arrival:
        // q2 = 500 (V = 500), q3 = 500 + 250.
        for (rule, group) in [(WfqVtime::Scfq, [3, 2]), (WfqVtime::Prototype, [2, 3])] {
            let wfq = Wfq::new(&[1, 1, 1, 2], mask_of([2, 3]), rule);
            let mut s = SpOver::new(vec![1, 0], wfq);
            let mut qs = SimQueues::new(4);
            for q in 0..4 {
                qs.push(&mut s, q, 500, 0);
            }
            let order: Vec<usize> = (0..4).map(|_| qs.serve(&mut s, 0).unwrap().0).collect();
            assert_eq!(order, vec![1, 0, group[0], group[1]], "{rule:?}");
        }
    }
}

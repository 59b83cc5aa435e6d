//! Weighted fair queueing with self-clocked virtual time (SCFQ).
//!
//! tcn.txt §5 ("WFQ"): "we maintain a virtual time for the head packet of
//! each queue. The WFQ scheduler chooses the head packet with the smallest
//! virtual time to transmit." The paper does not say how the system virtual
//! time V is kept. We pick **SCFQ** (Golestani, "A self-clocked fair queueing
//! scheme for broadband applications", INFOCOM 1994):
//!
//! ```text
//! F_i = max(V, F_i,prev) + len / w_i      (finish tag of queue i's head)
//! V   = F of the packet last sent          (self-clocked virtual time)
//! serve argmin_i F_i                       (ties: lowest queue index)
//! ```
//!
//! Why SCFQ rather than GPS-emulating WFQ (Parekh–Gallager V(t)) or WF²Q+:
//! it needs no fluid simulation and no per-packet division by the number of
//! active queues, is O(1) per packet apart from the arg-min, is what
//! software/kernel prototypes of "virtual time per head packet" (like the
//! paper's qdisc) do, and its long-run shares under saturation equal the
//! weights — the property the experiments rely on. Its known cost is a
//! larger worst-case delay bound than WF²Q for a newly active flow.
//!
//! Head stamping: only head packets carry a tag. For a backlogged queue the
//! next head's tag is `F_prev + len/w` (since then `F_prev ≥ V`), and for an
//! arrival at an empty queue it is `max(V, F_prev) + len/w`: the same tags
//! per-packet SCFQ would give, without storing one tag per packet. A head
//! behind a departed packet is stamped lazily in the next `select` (V cannot
//! change between a commit and the next select, because every commit
//! follows a select).
//!
//! Units: virtual time in bytes / weight, as a `u128` in units of
//! 1/`scale` byte, `scale` = lcm of the weights (so `len · scale / w` is an
//! exact integer and equal finish times tie exactly; no division per packet);
//! if the lcm exceeds 2^40, `scale` = 2^32 and per-byte costs are rounded
//! down (< 2^-32 relative). V never wraps in practice (2^88+ bytes).
//!
//! Selection: a binary min-heap of (head tag, queue) over stamped heads,
//! O(log active queues) per packet, no allocation after construction.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{pop_lowest, QueuesView, Scheduler};
use crate::units::Nanos;

const FRAC_BITS: u32 = 32;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Virtual time per weight-1 byte: the least common multiple of the weights
/// when it is ≤ 2^40 — then every per-byte cost `scale / w` is an exact
/// integer and equal finish times tie exactly — else 2^32 (costs rounded
/// down, < 2^-32 relative error per byte).
fn vt_scale(weights: &[u32]) -> u64 {
    let mut l: u64 = 1;
    for &w in weights.iter().filter(|&&w| w > 0) {
        let w = w as u64;
        l = l / gcd(l, w) * w;
        if l > 1 << 40 {
            return 1 << FRAC_BITS;
        }
    }
    l
}

/// Virtual service of `len` bytes at per-byte cost `unit` (≤ 2^40 · 2^32
/// for any frame < 4 GB: fits easily in u128).
#[inline]
fn cost(len: u32, unit: u64) -> u128 {
    len as u128 * unit as u128
}

/// SCFQ over the queues in `members`.
#[derive(Clone, Debug)]
pub struct Wfq {
    /// Parameter: weight per queue (0 for queues not served here).
    weights: Vec<u32>,
    /// Derived: virtual time per byte of each queue (scale / weight).
    unit: Vec<u64>,
    /// Derived: virtual time of one byte at weight 1.
    scale: u64,
    /// Running: system virtual time V (tag of the last packet sent).
    vtime: u128,
    /// Finish tag of the current head of each queue (valid if stamped).
    head_tag: Vec<u128>,
    /// Tag of the last packet stamped in each queue (F_i,prev).
    last_tag: Vec<u128>,
    /// Queues whose head carries a valid tag.
    stamped: u128,
    /// Min-heap of (head tag, queue) of the stamped queues: O(log n)
    /// selection (ties: lowest index, as the key order says).
    heap: BinaryHeap<Reverse<(u128, u16)>>,
    /// Queues this WFQ serves.
    members: u128,
}

impl Wfq {
    /// WFQ with `weights[q]` for each queue whose bit is set in `members`.
    pub fn new(weights: &[u32], members: u128) -> Self {
        let n = weights.len();
        let weights: Vec<u32> = (0..n)
            .map(|q| {
                if members & (1 << q) != 0 {
                    weights[q].max(1)
                } else {
                    0
                }
            })
            .collect();
        let scale = vt_scale(&weights);
        Wfq {
            unit: weights.iter().map(|&w| scale / w.max(1) as u64).collect(),
            scale,
            weights,
            vtime: 0,
            head_tag: vec![0; n],
            last_tag: vec![0; n],
            stamped: 0,
            heap: BinaryHeap::with_capacity(n),
            members,
        }
    }

    /// Weight per queue (0 for queues not served here).
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }
    /// System virtual time V in bytes/weight.
    pub fn virtual_time(&self) -> f64 {
        self.vtime as f64 / self.scale as f64
    }

    #[inline]
    fn tag_for(&self, q: usize, len: u32) -> u128 {
        self.vtime.max(self.last_tag[q]) + cost(len, self.unit[q])
    }

    #[inline]
    fn stamp(&mut self, q: usize, len: u32) {
        let t = self.tag_for(q, len);
        self.head_tag[q] = t;
        self.last_tag[q] = t;
        self.stamped |= 1 << q;
        self.heap.push(Reverse((t, q as u16)));
    }
}

impl Scheduler for Wfq {
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, _now: Nanos) -> Option<usize> {
        let live = queues.nonempty_mask() & self.members;
        let mut unstamped = live & !self.stamped;
        while let Some(q) = pop_lowest(&mut unstamped) {
            let len = queues.head_len(q).expect("non-empty queue has a head");
            self.stamp(q, len);
        }
        self.heap.peek().map(|Reverse((_, q))| *q as usize)
    }

    fn peek<V: QueuesView + ?Sized>(&self, queues: &V) -> Option<usize> {
        // The heap's top among stamped heads, against the (usually at most
        // one) heads select would stamp first.
        let live = queues.nonempty_mask() & self.members;
        let mut best = self.heap.peek().map(|Reverse((t, q))| (*t, *q as usize));
        let mut unstamped = live & !self.stamped;
        while let Some(q) = pop_lowest(&mut unstamped) {
            let t = self.tag_for(q, queues.head_len(q).unwrap_or(0));
            if best.is_none_or(|b| (t, q) < b) {
                best = Some((t, q));
            }
        }
        best.map(|(_, q)| q)
    }

    fn commit(&mut self, queue: usize, _len: u32, _left_empty: bool, _now: Nanos) {
        debug_assert!(
            self.stamped & (1 << queue) != 0,
            "commit of an unselected queue"
        );
        let top = self.heap.pop();
        debug_assert_eq!(top.map(|Reverse((_, q))| q as usize), Some(queue));
        // SCFQ: V is the tag of the packet just sent.
        self.vtime = self.head_tag[queue];
        self.stamped &= !(1 << queue);
    }

    fn on_enqueue(&mut self, queue: usize, len: u32, was_empty: bool, _now: Nanos) {
        if was_empty && self.members & (1 << queue) != 0 {
            self.stamp(queue, len);
        }
    }

    fn invariants<V: QueuesView + ?Sized>(&self, queues: &V, _mtu_bytes: u32) {
        let live = queues.nonempty_mask() & self.members;
        assert_eq!(self.stamped & !live, 0, "tag on an empty queue");
        assert_eq!(
            self.heap.len(),
            self.stamped.count_ones() as usize,
            "heap size"
        );
        for Reverse((t, q)) in self.heap.iter() {
            assert!(
                self.stamped & (1 << q) != 0 && self.head_tag[*q as usize] == *t,
                "heap entry"
            );
        }
        let mut m = self.stamped;
        while let Some(q) = pop_lowest(&mut m) {
            assert!(self.head_tag[q] >= self.vtime, "head tag of {q} below V");
            assert_eq!(self.head_tag[q], self.last_tag[q]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{mask_of, saturated_shares, within_one_percent, SimQueues};

    fn wfq(w: &[u32]) -> Wfq {
        Wfq::new(w, mask_of(0..w.len()))
    }

    #[test]
    fn smallest_finish_time_first_with_unequal_weights() {
        // Weights 1 and 3, 300 B packets: tags q0 = 300, 600, ...; q1 = 100,
        // 200, 300, 400, ... → q1 q1 q0(300 tie, lower index first) q1 ...
        let mut s = wfq(&[1, 3]);
        let mut qs = SimQueues::new(2);
        for _ in 0..4 {
            qs.push(&mut s, 0, 300, 0);
            qs.push(&mut s, 1, 300, 0);
        }
        let order: Vec<usize> = (0..8).map(|_| qs.serve(&mut s, 0).unwrap().0).collect();
        assert_eq!(order, vec![1, 1, 0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn length_matters() {
        // Equal weights: a 1500 B head finishes after three 500 B packets.
        let mut s = wfq(&[1, 1]);
        let mut qs = SimQueues::new(2);
        qs.push(&mut s, 0, 1500, 0);
        for _ in 0..3 {
            qs.push(&mut s, 1, 500, 0);
        }
        let order: Vec<usize> = (0..4).map(|_| qs.serve(&mut s, 0).unwrap().0).collect();
        assert_eq!(order, vec![1, 1, 0, 1]);
    }

    #[test]
    fn newly_active_queue_starts_at_virtual_time() {
        // q0 alone sends 10 packets (V = 10·1000); q1 then arrives and gets
        // max(V, 0) + 1000 — it does not claim the service it missed.
        let mut s = wfq(&[1, 1]);
        let mut qs = SimQueues::new(2);
        for _ in 0..20 {
            qs.push(&mut s, 0, 1000, 0);
        }
        for _ in 0..10 {
            qs.serve(&mut s, 0);
        }
        assert_eq!(s.virtual_time(), 10_000.0);
        for _ in 0..5 {
            qs.push(&mut s, 1, 1000, 0);
        }
        let order: Vec<usize> = (0..6).map(|_| qs.serve(&mut s, 0).unwrap().0).collect();
        assert_eq!(order, vec![0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn shares_follow_weights() {
        let mut s = wfq(&[1, 2, 3]);
        let sizes = [64u32, 1514, 700, 1514, 300, 1000, 9000];
        let mut k = 0;
        let shares = saturated_shares(&mut s, 3, 100_000, 9000, || {
            k += 1;
            sizes[k % sizes.len()]
        });
        assert!(within_one_percent(&shares, &[1.0, 2.0, 3.0]), "{shares:?}");
    }
}

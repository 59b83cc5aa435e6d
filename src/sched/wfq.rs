//! Weighted fair queueing with the TCN prototype's virtual time (default) or
//! self-clocked virtual time (SCFQ, option).
//!
//! TCN paper §5 ("WFQ"): "we maintain a virtual time for the head packet of
//! each queue. The WFQ scheduler chooses the head packet with the smallest
//! virtual time to transmit." The paper does not say how the system virtual
//! time V is kept; the authors' qdisc does (HKUST-SING/TCN-Software
//! `sch_wfq/main.c`, identical in baiwei0427/MQ-ECN
//! `kernel modules/sch_wfq/main.c`), and that is the default here:
//!
//! ```text
//! wfq_enqueue, packet arrives at an empty queue i:
//!     F_i = V + len / w_i ;  V = F_i
//! wfq_dequeue: serve argmin_i F_i (ties: lowest queue index); then, if
//! queue i still has packets, for its new head:
//!     F_i = F_i + len / w_i ;  if V < F_i then V = F_i
//! ```
//!
//! i.e. **V is the largest finish tag assigned so far** (`--wfq-vtime
//! prototype`). V never moves when a queue empties, and a queue that becomes
//! active is tagged behind every tag already handed out.
//!
//! The option `--wfq-vtime scfq` is self-clocked fair queueing (Golestani,
//! "A self-clocked fair queueing scheme for broadband applications",
//! INFOCOM 1994), what softswitch did before it followed the prototype:
//!
//! ```text
//! F_i = max(V, F_i,prev) + len / w_i      (finish tag of queue i's head)
//! V   = F of the packet last sent          (self-clocked virtual time)
//! ```
//!
//! Both give long-run shares equal to the weights for backlogged queues;
//! they differ in where a newly active queue starts (prototype: behind every
//! assigned tag; SCFQ: at the tag of the packet in service).
//!
//! Head stamping: only head packets carry a tag, as in the prototype. The
//! next head of a backlogged queue gets `F_prev + len/w` in `commit` (the
//! port passes its length), an arrival at an empty queue gets
//! `max(V, F_prev) + len/w` in `on_enqueue` (for the prototype rule V ≥
//! every tag, so this is `V + len/w`).
//!
//! Lengths: the prototype charges `skb_size()`, the bytes on the wire; by
//! default we charge frame + the port's wire overhead (`extra`, see
//! [`SchedBytes`](super::SchedBytes)); `--sched-bytes frame` charges frames. The prototype divides
//! `len / w` in integers (`div_u64`); we keep exact tags (below), so a
//! weight that does not divide the length is not rounded down — a rounding
//! artefact of the kernel code, not part of its rule.
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

use serde::Deserialize;

use super::{pop_lowest, QueuesView, Scheduler};
use crate::units::Nanos;

/// How WFQ advances its system virtual time V (`--wfq-vtime`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WfqVtime {
    /// V = the largest finish tag assigned (TCN prototype `sch_wfq`; default).
    #[default]
    Prototype,
    /// V = the finish tag of the packet last sent (SCFQ; option).
    Scfq,
}

impl WfqVtime {
    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            WfqVtime::Prototype => "prototype",
            WfqVtime::Scfq => "scfq",
        }
    }
    /// From `--wfq-vtime prototype|scfq`.
    pub fn from_cli(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "prototype" => Some(WfqVtime::Prototype),
            "scfq" => Some(WfqVtime::Scfq),
            _ => None,
        }
    }
}

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

/// WFQ over the queues in `members`.
#[derive(Clone, Debug)]
pub struct Wfq {
    /// Parameter: how V advances.
    vtime_rule: WfqVtime,
    /// Parameter: weight per queue (0 for queues not served here).
    weights: Vec<u32>,
    /// Derived: virtual time per byte of each queue (scale / weight).
    unit: Vec<u64>,
    /// Derived: virtual time of one byte at weight 1.
    scale: u64,
    /// Running: system virtual time V (largest tag assigned, or, for SCFQ,
    /// tag of the last packet sent).
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
    /// Parameter: bytes added to each frame's length (wire overhead, or 0).
    extra: u32,
}

impl Wfq {
    /// WFQ with `weights[q]` for each queue whose bit is set in `members`,
    /// virtual time advanced by `vtime_rule`.
    pub fn new(weights: &[u32], members: u128, vtime_rule: WfqVtime) -> Self {
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
            vtime_rule,
            unit: weights.iter().map(|&w| scale / w.max(1) as u64).collect(),
            scale,
            weights,
            vtime: 0,
            head_tag: vec![0; n],
            last_tag: vec![0; n],
            stamped: 0,
            heap: BinaryHeap::with_capacity(n),
            members,
            extra: 0,
        }
    }

    /// Weight per queue (0 for queues not served here).
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }
    /// Charges every packet `extra` bytes beyond its frame length (the wire
    /// overhead, see [`SchedBytes`](super::SchedBytes)).
    pub fn with_extra(mut self, extra: u32) -> Self {
        self.extra = extra;
        self
    }
    /// How V advances.
    pub fn vtime_rule(&self) -> WfqVtime {
        self.vtime_rule
    }
    /// System virtual time V in bytes/weight.
    pub fn virtual_time(&self) -> f64 {
        self.vtime as f64 / self.scale as f64
    }

    #[inline]
    fn stamp(&mut self, q: usize, tag: u128) {
        self.head_tag[q] = tag;
        self.last_tag[q] = tag;
        self.stamped |= 1 << q;
        self.heap.push(Reverse((tag, q as u16)));
        if self.vtime_rule == WfqVtime::Prototype {
            // `if (wfq_time_before(q->virtual_time[prio], cl->head_fin_time))
            //      q->virtual_time[prio] = cl->head_fin_time;`
            self.vtime = self.vtime.max(tag);
        }
    }
}

impl Scheduler for Wfq {
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, _now: Nanos) -> Option<usize> {
        self.peek(queues)
    }

    fn peek<V: QueuesView + ?Sized>(&self, _queues: &V) -> Option<usize> {
        // Every non-empty member queue's head is stamped (on_enqueue /
        // commit), so the heap's top is the smallest finish tag.
        self.heap.peek().map(|Reverse((_, q))| *q as usize)
    }

    fn commit(&mut self, queue: usize, _len: u32, next_len: Option<u32>, _now: Nanos) {
        debug_assert!(
            self.stamped & (1 << queue) != 0,
            "commit of an unselected queue"
        );
        let top = self.heap.pop();
        debug_assert_eq!(top.map(|Reverse((_, q))| q as usize), Some(queue));
        self.stamped &= !(1 << queue);
        if self.vtime_rule == WfqVtime::Scfq {
            // SCFQ: V is the tag of the packet just sent.
            self.vtime = self.head_tag[queue];
        }
        if let Some(len) = next_len {
            // The new head finishes len/w after the one that left (both
            // rules: for SCFQ that one's tag is V, so max(V, F_prev) = F_prev).
            let tag = self.last_tag[queue] + cost(len + self.extra, self.unit[queue]);
            self.stamp(queue, tag);
        }
    }

    fn on_enqueue(&mut self, queue: usize, len: u32, was_empty: bool, _now: Nanos) {
        if was_empty && self.members & (1 << queue) != 0 {
            let tag =
                self.vtime.max(self.last_tag[queue]) + cost(len + self.extra, self.unit[queue]);
            self.stamp(queue, tag);
        }
    }

    fn invariants<V: QueuesView + ?Sized>(&self, queues: &V, _mtu_bytes: u32) {
        let live = queues.nonempty_mask() & self.members;
        assert_eq!(self.stamped, live, "every non-empty queue's head has a tag");
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
            match self.vtime_rule {
                WfqVtime::Scfq => {
                    assert!(self.head_tag[q] >= self.vtime, "head tag of {q} below V")
                }
                WfqVtime::Prototype => assert!(
                    self.head_tag[q] <= self.vtime,
                    "head tag of {q} above V (V = largest tag assigned)"
                ),
            }
            assert_eq!(self.head_tag[q], self.last_tag[q]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{mask_of, saturated_shares, within_one_percent, SimQueues};

    fn wfq(w: &[u32], rule: WfqVtime) -> Wfq {
        Wfq::new(w, mask_of(0..w.len()), rule)
    }

    fn order(s: &mut Wfq, qs: &mut SimQueues, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| {
                let q = qs.serve(s, 0).unwrap().0;
                s.invariants(qs, 1514);
                q
            })
            .collect()
    }

    #[test]
    fn smallest_finish_time_first_with_unequal_weights() {
        // Weights 1 and 3, 300 B packets, pushed q0, q1, q0, q1, ...
        // Prototype: q0's first arrival F0 = 0 + 300, V = 300; q1's
        // F1 = V + 100 = 400, V = 400. Then: q0 300 (next 600, V 600), q1 400
        // (500), q1 500 (600), q0 600 tie → lower index (900, V 900), q1 600
        // (700), q1 700 (empty), q0 900, q0 1200.
        let mut s = wfq(&[1, 3], WfqVtime::Prototype);
        let mut qs = SimQueues::new(2);
        for _ in 0..4 {
            qs.push(&mut s, 0, 300, 0);
            qs.push(&mut s, 1, 300, 0);
        }
        assert_eq!(s.virtual_time(), 400.0);
        assert_eq!(order(&mut s, &mut qs, 8), vec![0, 1, 1, 0, 1, 1, 0, 0]);
        assert_eq!(s.virtual_time(), 1200.0);
        // SCFQ: tags q0 = 300, 600, ...; q1 = 100, 200, 300, 400, ... (V = 0
        // at both arrivals) → q1 q1 q0 (300 tie, lower index first) q1 ...
        let mut s = wfq(&[1, 3], WfqVtime::Scfq);
        let mut qs = SimQueues::new(2);
        for _ in 0..4 {
            qs.push(&mut s, 0, 300, 0);
            qs.push(&mut s, 1, 300, 0);
        }
        assert_eq!(order(&mut s, &mut qs, 8), vec![1, 1, 0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn length_matters() {
        // Equal weights: a 1500 B head finishes after three 500 B packets.
        for rule in [WfqVtime::Prototype, WfqVtime::Scfq] {
            let mut s = wfq(&[1, 1], rule);
            let mut qs = SimQueues::new(2);
            qs.push(&mut s, 0, 1500, 0);
            for _ in 0..3 {
                qs.push(&mut s, 1, 500, 0);
            }
            // Prototype: F0 = 1500 (V 1500), F1 = 2000: q0 first, then q1.
            // SCFQ: F0 = 1500, F1 = 500, 1000, 1500 (tie → q0 first).
            let want = match rule {
                WfqVtime::Prototype => vec![0, 1, 1, 1],
                WfqVtime::Scfq => vec![1, 1, 0, 1],
            };
            assert_eq!(order(&mut s, &mut qs, 4), want, "{rule:?}");
        }
    }

    /// A hand-computed schedule of the prototype's rule (`sch_wfq/main.c`
    /// `wfq_enqueue` / `wfq_dequeue`), against SCFQ on the same arrivals:
    /// weights 1 and 2, 1000 B packets; q0 has 4 packets, q1's 3 arrive
    /// after q0 has sent two.
    #[test]
    fn prototype_schedule_by_hand() {
        let mut s = wfq(&[1, 2], WfqVtime::Prototype);
        let mut qs = SimQueues::new(2);
        for _ in 0..4 {
            qs.push(&mut s, 0, 1000, 0);
        }
        // Arrival at empty q0: F0 = V + 1000/1 = 1000, V = F0 = 1000.
        assert_eq!(s.virtual_time(), 1000.0);
        // Send q0 (1000); its new head: F0 = 2000, V = 2000.
        assert_eq!(order(&mut s, &mut qs, 1), vec![0]);
        assert_eq!(s.virtual_time(), 2000.0);
        // Send q0 (2000); F0 = 3000, V = 3000.
        assert_eq!(order(&mut s, &mut qs, 1), vec![0]);
        assert_eq!(s.virtual_time(), 3000.0);
        // q1 becomes active: F1 = V + 1000/2 = 3500, V = 3500 — behind q0's head.
        for _ in 0..3 {
            qs.push(&mut s, 1, 1000, 0);
        }
        assert_eq!(s.virtual_time(), 3500.0);
        // q0 3000 (F0 = 4000, V = 4000); q1 3500 (F1 = 4000, V stays);
        // tie at 4000 → q0 (lower index; q0 now empty, V stays 4000);
        // q1 4000 (F1 = 4500, V = 4500); q1 4500.
        assert_eq!(order(&mut s, &mut qs, 5), vec![0, 1, 0, 1, 1]);
        assert_eq!(s.virtual_time(), 4500.0);
        assert_eq!(qs.serve(&mut s, 0), None);

        // SCFQ on the same arrivals: V = 2000 when q1 arrives, F1 = 2500 —
        // ahead of q0's head (3000); then q0 3000 ties q1 3000 (q0 first),
        // q1 3000 → 3500, q1 3500, q0 4000.
        let mut s = wfq(&[1, 2], WfqVtime::Scfq);
        let mut qs = SimQueues::new(2);
        for _ in 0..4 {
            qs.push(&mut s, 0, 1000, 0);
        }
        assert_eq!(order(&mut s, &mut qs, 2), vec![0, 0]);
        assert_eq!(s.virtual_time(), 2000.0);
        for _ in 0..3 {
            qs.push(&mut s, 1, 1000, 0);
        }
        assert_eq!(order(&mut s, &mut qs, 5), vec![1, 0, 1, 1, 0]);
        assert_eq!(s.virtual_time(), 4000.0);
    }

    #[test]
    fn newly_active_queue_does_not_claim_missed_service() {
        // q0 alone sends 10 packets; q1 then arrives. SCFQ: V = 10 000 (the
        // tag sent last), q1 gets 11 000 and alternates with q0 at once.
        // Prototype: V = 11 000 (q0's head), q1 gets 12 000: q0 sends its
        // 11 000 and 12 000 (tie, lower index) first.
        for (rule, v, want) in [
            (WfqVtime::Scfq, 10_000.0, vec![0, 1, 0, 1, 0, 1]),
            (WfqVtime::Prototype, 11_000.0, vec![0, 0, 1, 0, 1, 0]),
        ] {
            let mut s = wfq(&[1, 1], rule);
            let mut qs = SimQueues::new(2);
            for _ in 0..20 {
                qs.push(&mut s, 0, 1000, 0);
            }
            order(&mut s, &mut qs, 10);
            assert_eq!(s.virtual_time(), v, "{rule:?}");
            for _ in 0..5 {
                qs.push(&mut s, 1, 1000, 0);
            }
            assert_eq!(order(&mut s, &mut qs, 6), want, "{rule:?}");
        }
    }

    #[test]
    fn shares_follow_weights() {
        for rule in [WfqVtime::Prototype, WfqVtime::Scfq] {
            let mut s = wfq(&[1, 2, 3], rule);
            let sizes = [64u32, 1514, 700, 1514, 300, 1000, 9000];
            let mut k = 0;
            let shares = saturated_shares(&mut s, 3, 100_000, 9000, || {
                k += 1;
                sizes[k % sizes.len()]
            });
            assert!(
                within_one_percent(&shares, &[1.0, 2.0, 3.0]),
                "{rule:?} {shares:?}"
            );
        }
    }

    #[test]
    fn cli_names() {
        assert_eq!(WfqVtime::default(), WfqVtime::Prototype);
        assert_eq!(WfqVtime::from_cli("SCFQ"), Some(WfqVtime::Scfq));
        assert_eq!(WfqVtime::from_cli("prototype"), Some(WfqVtime::Prototype));
        assert_eq!(WfqVtime::from_cli("gps"), None);
    }
}

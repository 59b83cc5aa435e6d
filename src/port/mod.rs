//! The egress port, as a switch ASIC has it (TCN paper §5):
//!
//! ```text
//! enqueue: classify (DSCP → queue, or per flow: `flowmap`) → size check (TooBig) → shared-buffer
//!          admission (BufferFull) → per-queue limit (QueueLimit)
//!          → enqueue AQM verdict → queue (scheduler told)
//! dequeue: scheduler selects a queue → shaper gates its head
//!          → pop, scheduler charged → dequeue AQM verdict (+ mark_every hook)
//!          → tokens taken → out          (a dequeue drop: go round again)
//! ```
//!
//! **Verdicts are applied in exactly one place** (`EgressPort::apply`):
//! `Mark` sets CE in the frame bytes (IPv4 checksum updated incrementally) on
//! an ECN-capable packet, or drops it (`NotEctMark`) / lets it pass on a
//! Not-ECT one, per [`NotEctPolicy`]; `Drop` releases the frame to the store
//! and counts the reason. Every frame given to `enqueue` leaves exactly once:
//! returned by `dequeue`, released as a counted drop, or released by `drain`.
//!
//! **Shaper and dequeue AQM ordering.** The scheduler picks a head; the
//! shaper is asked whether that head may go *now* (`ready_at ≤ now`) without
//! taking tokens; only then is the head popped, the scheduler charged and the
//! dequeue AQM consulted; tokens are taken only for a packet that is really
//! transmitted. A packet dropped by the dequeue AQM therefore consumes no
//! link time — as in a switch, where the dequeue-side drop happens before the
//! wire — and the next head is tried at once. (Taking tokens first and
//! wasting them on drops would leave a one-frame hole on the link per drop.)
//! No change to `TokenBucket` was needed for this.
//!
//! **AQM context.** The enqueue AQM sees [`QueueCtx`] without the arriving
//! packet; the dequeue AQM sees it without the departing one. `on_round` is
//! called for each DWRR round event (a queue granted its quantum) at the
//! time the shaper lets the selected packet go — when the round's service
//! really starts on the wire, not at an earlier poll the shaper refused — so
//! MQ-ECN's T_round does not depend on how often the I/O loop polls.
//! `on_idle` is called when the port's buffer becomes empty at dequeue.
//!
//! **Hot path.** No allocation after warm-up: queues are `VecDeque`s
//! pre-sized for the buffer (up to 1024 descriptors each; they grow only if
//! a queue ever holds more), counters are arrays indexed by reason, the
//! non-empty set is a `u128`.

mod config;
mod counters;
pub mod flowmap;
#[cfg(test)]
mod flowtests;
mod outcome;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

pub use config::{
    Classifier, NotEctPolicy, PortConfig, PortConfigError, DEFAULT_BUFFER_BYTES,
    DEFAULT_MTU_FRAME_BYTES, DEFAULT_QUEUES, MIN_FRAME_BYTES,
};
pub use counters::{
    DropCounts, MarkCounts, PktBytes, PortCounters, QueueCounters, Sojourn, SojournSummary,
};
pub use flowmap::{FlowClassConfig, FlowCounters, FlowMap};
pub use outcome::{Admission, Departure};

use crate::aqm::{Aqm, DropReason, MarkReason, QueueCtx, Verdict};
use crate::packet::{FrameStore, Packet};
use crate::rng::SimRng;
use crate::sched::{QueuesView, SchedKind, Scheduler};
use crate::shaper::TokenBucket;
use crate::units::Nanos;
use crate::wire::ecn::{set_ce, MarkOutcome};
use crate::wire::Ecn;

/// Sees each packet the port drops, with its frame bytes, just before the
/// frame is released (capture copies the bytes of the dequeue AQM's drops).
pub trait DropWitness: FnMut(&Packet, DropReason, &[u8]) {}
impl<F: FnMut(&Packet, DropReason, &[u8])> DropWitness for F {}

/// The witness that looks away.
#[inline]
pub fn no_witness(_: &Packet, _: DropReason, _: &[u8]) {}

/// The packets of a port's queues, as the scheduler sees them.
#[derive(Debug)]
struct Queues {
    q: Vec<VecDeque<Packet>>,
    bytes: Vec<u64>,
    nonempty: u128,
}

impl QueuesView for Queues {
    #[inline]
    fn nonempty_mask(&self) -> u128 {
        self.nonempty
    }
    #[inline]
    fn head_len(&self, q: usize) -> Option<u32> {
        self.q[q].front().map(|p| p.len)
    }
}

/// One egress port: queues, shared buffer, scheduler, AQM `A`, shaper.
#[derive(Debug)]
pub struct EgressPort<A: Aqm> {
    cfg: PortConfig,
    aqm: A,
    rng: SimRng,
    tb: TokenBucket,
    sched: SchedKind,
    classify: [u16; 64],
    /// Per-flow allocation (`Classifier::Flow`), told when a queue empties.
    flows: Option<FlowMap>,
    queues: Queues,
    backlog_bytes: u64,
    backlog_pkts: u32,
    counters: PortCounters,
    /// ECT packets seen at dequeue (for `mark_every`).
    ect_dequeued: u64,
}

impl<A: Aqm> EgressPort<A> {
    /// A port in its empty state at `now`, with a full token bucket; `seed`
    /// seeds the random generator handed to the AQM.
    pub fn new(cfg: PortConfig, aqm: A, now: Nanos, seed: u64) -> Result<Self, PortConfigError> {
        cfg.validate()?;
        let sched = cfg.sched.build(cfg.queues, cfg.overhead_bytes)?;
        let per_queue = cfg
            .queue_limit_bytes
            .unwrap_or(cfg.buffer_bytes)
            .min(cfg.buffer_bytes);
        let cap = (per_queue / 64 + 1).min(1024) as usize;
        Ok(EgressPort {
            tb: TokenBucket::new(cfg.rate, cfg.bucket_bytes, cfg.overhead_bytes, now)
                .with_catchup(cfg.catchup_ns),
            classify: cfg.classifier.table(cfg.queues),
            flows: match &cfg.classifier {
                Classifier::Flow(f) => Some(FlowMap::new(*f, cfg.queues)),
                _ => None,
            },
            queues: Queues {
                q: (0..cfg.queues)
                    .map(|_| VecDeque::with_capacity(cap))
                    .collect(),
                bytes: vec![0; cfg.queues],
                nonempty: 0,
            },
            counters: PortCounters::new(cfg.queues),
            sched,
            aqm,
            rng: SimRng::new(seed),
            backlog_bytes: 0,
            backlog_pkts: 0,
            ect_dequeued: 0,
            cfg,
        })
    }

    /// Queue a frame, or drop it (frame released to `store`, counted by
    /// reason); says which. Sets `pkt.queue` and `pkt.enqueue_ns = now`.
    pub fn enqueue<S: FrameStore>(&mut self, pkt: Packet, now: Nanos, store: &mut S) -> Admission {
        let q = match &mut self.flows {
            Some(f) => f.classify(
                pkt.l3.map(|l| l.flow_hash),
                pkt.len,
                now,
                self.queues.nonempty,
                &self.queues.bytes,
            ),
            None => self.classify[(pkt.dscp() & 63) as usize] as usize,
        };
        self.enqueue_to(pkt, q, now, store)
    }

    /// Like [`enqueue`](Self::enqueue) into queue `q` chosen by the caller
    /// (per-flow queue allocation such as DiffECN's QMU, or queues beyond
    /// the 64 a DSCP map can reach). Panics if `q` is not a queue of this port.
    pub fn enqueue_to<S: FrameStore>(
        &mut self,
        mut pkt: Packet,
        q: usize,
        now: Nanos,
        store: &mut S,
    ) -> Admission {
        assert!(q < self.queues.q.len(), "queue {q} out of range");
        pkt.queue = q as u16;
        pkt.enqueue_ns = now;
        let len = pkt.len;
        self.counters.count(q, |c| c.arrived.add(len));

        let reject = if len < MIN_FRAME_BYTES {
            Some(DropReason::Malformed)
        } else if len > self.cfg.mtu_frame_bytes || !self.tb.fits(len) {
            Some(DropReason::TooBig)
        } else if self.backlog_bytes + len as u64 > self.cfg.buffer_bytes {
            Some(DropReason::BufferFull)
        } else if self
            .cfg
            .queue_limit_bytes
            .is_some_and(|lim| self.queues.bytes[q] + len as u64 > lim)
        {
            Some(DropReason::QueueLimit)
        } else {
            None
        };
        let queue = q as u16;
        if let Some(reason) = reject {
            self.drop_frame(&pkt, reason, store, &mut no_witness);
            self.unclaim_if_empty(q);
            return Admission::Dropped { queue, reason };
        }

        let ctx = self.ctx(q);
        let verdict = self.aqm.on_enqueue(&pkt, &ctx, now, &mut self.rng);
        if let Err(reason) = self.apply(&mut pkt, verdict, store, &mut no_witness) {
            self.unclaim_if_empty(q);
            return Admission::Dropped { queue, reason };
        }
        let admitted = Admission::Queued {
            queue,
            mark: outcome::mark_of(verdict),
            ce: outcome::carries_ce(&pkt),
        };

        let was_empty = self.queues.q[q].is_empty();
        self.queues.q[q].push_back(pkt);
        self.queues.bytes[q] += len as u64;
        self.queues.nonempty |= 1 << q;
        self.backlog_bytes += len as u64;
        self.backlog_pkts += 1;
        if self.backlog_pkts == 1 {
            self.tb.set_busy(true, now);
        }
        self.counters.count(q, |c| {
            c.enqueued.add(len);
            c.grow(len);
        });
        self.sched.on_enqueue(q, len, was_empty, now);
        admitted
    }

    /// The next packet the shaper lets go at `now`, with the dequeue AQM
    /// applied (packets it drops are released and the next one is tried);
    /// a CE mark is already written into the frame bytes.
    #[inline]
    pub fn dequeue<S: FrameStore>(&mut self, now: Nanos, store: &mut S) -> Option<Packet> {
        self.dequeue_with(now, store, &mut no_witness)
            .map(|d| d.pkt)
    }

    /// [`dequeue`](Self::dequeue), saying what happened: the packet let go
    /// with its mark verdict, and each packet the dequeue AQM dropped on
    /// the way shown to `dropped(packet, reason, frame bytes)` just before
    /// its frame is released (capture copies the bytes).
    pub fn dequeue_with<S: FrameStore, W: DropWitness>(
        &mut self,
        now: Nanos,
        store: &mut S,
        dropped: &mut W,
    ) -> Option<Departure> {
        loop {
            let q = self.sched.select(&self.queues, now)?;
            let len = self
                .queues
                .head_len(q)
                .expect("scheduler selected an empty queue");
            if self.tb.ready_at(len, now) > now {
                // Round events stay pending in the scheduler (select is
                // idempotent) until a packet really leaves.
                return None;
            }
            while let Some(r) = self.sched.take_round_event() {
                self.counters.count(r, |c| c.rounds += 1);
                self.aqm.on_round(r, now);
            }

            // When the poll loop ran late, the packet would have left a
            // stall-free link `lateness` ago: that is its departure time.
            let depart = now - self.tb.lateness_ns(now).min(now);
            let mut pkt = self.queues.q[q].pop_front().expect("head exists");
            let left_empty = self.queues.q[q].is_empty();
            self.queues.bytes[q] -= len as u64;
            if left_empty {
                self.queues.nonempty &= !(1 << q);
                if let Some(f) = &mut self.flows {
                    f.on_queue_empty(q);
                }
            }
            self.backlog_bytes -= len as u64;
            self.backlog_pkts -= 1;
            if self.backlog_pkts == 0 {
                self.tb.set_busy(false, now);
            }
            self.counters.count(q, |c| c.shrink(len));
            let next_len = self.queues.head_len(q);
            self.sched.commit(q, len, next_len, now);

            let sojourn = depart.saturating_sub(pkt.enqueue_ns);
            self.counters.count(q, |c| c.sojourn.record(sojourn));

            let ctx = self.ctx(q);
            let mut verdict = self.aqm.on_dequeue(&pkt, &ctx, depart, &mut self.rng);
            if let Some(n) = self.cfg.mark_every {
                if pkt.is_ect() {
                    self.ect_dequeued += 1;
                    if self.ect_dequeued.is_multiple_of(n as u64) && verdict == Verdict::Pass {
                        verdict = Verdict::Mark(MarkReason::Forced);
                    }
                }
            }
            let keep = self.apply(&mut pkt, verdict, store, dropped).is_ok();
            if self.backlog_pkts == 0 {
                self.aqm.on_idle(now);
            }
            if keep {
                let took = self.tb.try_take(len, now);
                debug_assert!(took, "shaper refused a frame it said was ready");
                self.counters.count(q, |c| c.dequeued.add(len));
                return Some(Departure {
                    pkt,
                    mark: outcome::mark_of(verdict),
                });
            }
        }
    }

    /// Lets time pass at `now` for the AQM's periods (see `Aqm::on_tick`);
    /// the switch calls it on every poll.
    #[inline]
    pub fn tick(&mut self, now: Nanos) {
        self.aqm.on_tick(now);
    }

    /// Earliest time `dequeue` may return a packet (≤ now: at once; None:
    /// the port is empty). A hint for the I/O loop: a dequeue-AQM drop may
    /// make the real next departure later.
    pub fn next_ready(&self, now: Nanos) -> Option<Nanos> {
        let q = self.sched.peek(&self.queues)?;
        let len = self.queues.head_len(q)?;
        Some(self.tb.ready_at(len, now))
    }

    /// Bytes queued in the whole port.
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    /// Packets queued in the whole port.
    pub fn backlog_pkts(&self) -> u32 {
        self.backlog_pkts
    }
    /// (bytes, packets) queued in queue `q`.
    pub fn queue_backlog(&self, q: usize) -> (u64, u32) {
        (self.queues.bytes[q], self.queues.q[q].len() as u32)
    }
    /// Counters.
    pub fn counters(&self) -> &PortCounters {
        &self.counters
    }
    /// Counters, to clear them between experiment phases.
    pub fn counters_mut(&mut self) -> &mut PortCounters {
        &mut self.counters
    }
    /// The AQM.
    pub fn aqm(&self) -> &A {
        &self.aqm
    }
    /// The AQM, mutable (to reconfigure or read its state).
    pub fn aqm_mut(&mut self) -> &mut A {
        &mut self.aqm
    }
    /// The scheduler (round-robin check and quanta for MQ-ECN, status).
    pub fn sched(&self) -> &SchedKind {
        &self.sched
    }
    /// The shaper.
    pub fn shaper(&self) -> &TokenBucket {
        &self.tb
    }
    /// The shaper's start-of-busy-period grace (see
    /// [`TokenBucket::set_start_grace`]).
    pub fn set_start_grace(&mut self, grace_ns: Nanos) {
        self.tb.set_start_grace(grace_ns);
    }
    /// The configuration the port runs with.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }
    /// The per-flow classifier's table and counters (`Classifier::Flow`).
    pub fn flows(&self) -> Option<&FlowMap> {
        self.flows.as_ref()
    }
    /// JSON of the classifier for the stats snapshot (None: DSCP classifier).
    pub fn classifier_report(&self) -> Option<serde_json::Value> {
        self.flows.as_ref().map(|f| f.report())
    }

    /// A packet the classifier placed in `q` was dropped: if `q` holds
    /// nothing, the flow assigned to it has no packet there, so the
    /// assignment expires (another flow may take the empty queue).
    #[inline]
    fn unclaim_if_empty(&mut self, q: usize) {
        if let Some(f) = &mut self.flows {
            if self.queues.q[q].is_empty() {
                f.on_queue_empty(q);
            }
        }
    }

    /// The queue a packet with `dscp` goes to.
    pub fn queue_of_dscp(&self, dscp: u8) -> usize {
        self.classify[(dscp & 63) as usize] as usize
    }

    /// Shutdown: releases every queued frame (counted as `drained`, not as
    /// drops) and resets the scheduler.
    pub fn drain<S: FrameStore>(&mut self, store: &mut S) {
        for q in 0..self.queues.q.len() {
            while let Some(p) = self.queues.q[q].pop_front() {
                store.release(p.frame);
                self.counters.count(q, |c| c.drained.add(p.len));
            }
            self.queues.bytes[q] = 0;
            self.counters.queues[q].reset_backlog();
            if let Some(f) = &mut self.flows {
                f.on_queue_empty(q);
            }
        }
        self.counters.port.reset_backlog();
        self.queues.nonempty = 0;
        self.backlog_bytes = 0;
        self.backlog_pkts = 0;
        self.sched = self
            .cfg
            .sched
            .build(self.cfg.queues, self.cfg.overhead_bytes)
            .expect("validated at new");
    }

    /// Occupancy for the AQM of queue `q` (as it stands now).
    #[inline]
    fn ctx(&self, q: usize) -> QueueCtx {
        QueueCtx {
            queue: q,
            queue_bytes: self.queues.bytes[q],
            queue_pkts: self.queues.q[q].len() as u32,
            port_bytes: self.backlog_bytes,
            port_pkts: self.backlog_pkts,
            active_queues: self.queues.nonempty.count_ones(),
        }
    }

    /// Releases a frame and counts the drop (after showing it to `witness`).
    #[inline]
    fn drop_frame<S: FrameStore, W: DropWitness>(
        &mut self,
        pkt: &Packet,
        r: DropReason,
        store: &mut S,
        witness: &mut W,
    ) {
        witness(pkt, r, store.bytes_mut(pkt.frame, pkt.len));
        store.release(pkt.frame);
        let len = pkt.len;
        self.counters
            .count(pkt.queue as usize, |c| c.dropped.add(r, len));
    }

    /// The one place verdicts take effect. Ok: the packet goes on; Err:
    /// released (shown to `witness` first) and counted, for that reason.
    #[inline]
    fn apply<S: FrameStore, W: DropWitness>(
        &mut self,
        pkt: &mut Packet,
        v: Verdict,
        store: &mut S,
        witness: &mut W,
    ) -> Result<(), DropReason> {
        match v {
            Verdict::Pass => Ok(()),
            Verdict::Drop(r) => {
                self.drop_frame(pkt, r, store, witness);
                Err(r)
            }
            // A non-IP frame (ARP, LLDP, ...) has no ECN field and a switch's
            // ECN/WRED profile applies to IP only: a mark leaves it alone.
            Verdict::Mark(_) if pkt.l3.is_none() => {
                self.counters
                    .count(pkt.queue as usize, |c| c.non_ip_unmarked.add(pkt.len));
                Ok(())
            }
            Verdict::Mark(reason) => {
                let outcome = match pkt.l3.as_mut() {
                    Some(l3) if l3.ecn.is_ect() => {
                        let o = set_ce(store.bytes_mut(pkt.frame, pkt.len), l3);
                        if o == MarkOutcome::Marked {
                            l3.ecn = Ecn::Ce;
                        }
                        o
                    }
                    _ => MarkOutcome::NotEct,
                };
                let (q, len) = (pkt.queue as usize, pkt.len);
                match outcome {
                    MarkOutcome::Marked | MarkOutcome::AlreadyCe => {
                        self.counters.count(q, |c| {
                            c.marked.add(reason, len);
                            if outcome == MarkOutcome::AlreadyCe {
                                c.already_ce.add(len);
                            }
                        });
                        Ok(())
                    }
                    // Invalid: the bytes do not match what ingress parsed;
                    // we cannot mark, so treat it as Not-ECT.
                    MarkOutcome::NotEct | MarkOutcome::Invalid => match self.cfg.not_ect {
                        NotEctPolicy::Drop => {
                            self.drop_frame(pkt, DropReason::NotEctMark, store, witness);
                            Err(DropReason::NotEctMark)
                        }
                        NotEctPolicy::Pass => {
                            self.counters.count(q, |c| c.not_ect_passed.add(len));
                            Ok(())
                        }
                    },
                }
            }
        }
    }

    /// Checks every invariant of the port; panics with a description. For
    /// tests and the fuzz harness (`harness`), not the data path.
    pub fn invariants(&self) {
        let mut total_b = 0u64;
        let mut total_p = 0u32;
        let mut mask = 0u128;
        for (i, q) in self.queues.q.iter().enumerate() {
            let b: u64 = q.iter().map(|p| p.len as u64).sum();
            assert_eq!(b, self.queues.bytes[i], "queue {i} byte count");
            assert!(
                q.iter().all(|p| p.queue as usize == i),
                "packet in wrong queue {i}"
            );
            let c = &self.counters.queues[i];
            assert_eq!((c.backlog_bytes, c.backlog_pkts), (b, q.len() as u32));
            if let Some(lim) = self.cfg.queue_limit_bytes {
                assert!(b <= lim, "queue {i} over its limit");
            }
            let gone = c.dequeued.plus(c.dropped.total()).plus(c.drained);
            assert_eq!(
                c.arrived.pkts,
                gone.pkts + q.len() as u64,
                "queue {i} lost/duplicated packets"
            );
            assert_eq!(
                c.arrived.bytes,
                gone.bytes + b,
                "queue {i} lost/duplicated bytes"
            );
            if !q.is_empty() {
                mask |= 1 << i;
            }
            total_b += b;
            total_p += q.len() as u32;
        }
        assert_eq!(mask, self.queues.nonempty, "non-empty mask");
        assert_eq!(
            (total_b, total_p),
            (self.backlog_bytes, self.backlog_pkts),
            "backlog != sum of queues"
        );
        assert_eq!(
            (
                self.counters.port.backlog_bytes,
                self.counters.port.backlog_pkts
            ),
            (total_b, total_p)
        );
        assert!(
            self.backlog_bytes <= self.cfg.buffer_bytes,
            "buffer overrun"
        );
        let c = &self.counters.port;
        let gone = c.dequeued.plus(c.dropped.total()).plus(c.drained);
        assert_eq!(
            c.arrived.pkts,
            gone.pkts + total_p as u64,
            "port lost/duplicated packets"
        );
        self.sched
            .invariants(&self.queues, self.cfg.mtu_frame_bytes);
        self.tb.invariants();
    }
}

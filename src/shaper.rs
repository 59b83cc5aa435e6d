//! Token-bucket shaper: the emulated link, and its fidelity accounting.
//!
//! The TCN prototype (TCN paper §5, "Rate Limiter") shapes the qdisc's output
//! with a token bucket of ≈ 1.67 MTU (2.5 KB) so that the queue builds in the
//! qdisc, where the AQM sees it, and not in driver rings. We do the same at
//! `--rate`: a frame of `len` bytes may leave when the bucket holds
//! `len + overhead` bytes of credit; credit accrues at the link rate and is
//! capped at the bucket size. Hence over any interval of length t the port
//! sends at most `bucket + rate·t` bytes (checked by `invariants` and tests).
//! This strict bucket is the default, as in the prototype.
//!
//! Units: credit is kept in picoseconds of transmission time so that 64-byte
//! frames at 10–100 Gbit/s cost an exact integer amount.
//!
//! **What a real link never does** (the fidelity guard). A
//! busy-polling switch thread is sometimes late — a kick that runs the
//! receiver's TCP stack, or a preempted CPU. While the port holds packets
//! ("busy"), credit that would overflow the bucket is link time a real
//! link would have used and this one did not: [`TokenBucket::fidelity`]
//! reports it as `lost_ns`, next to `busy_ns` (time the port held packets),
//! so `lost_ns / busy_ns` is the share of link time the machine could not
//! deliver. Idle time is never counted as lost. Neither are the first
//! [`START_GRACE_NS`] of each busy period: a frame that arrives at an idle
//! port leaves on the data path's next pass, and that forwarding latency
//! (one pass of RX processing, p99 ≈ 10 µs on the development machine) is
//! the switch's pipeline delay, not link capacity the machine failed to
//! deliver — without it a port carrying only ACKs would "lose" nearly all of
//! the little time it is ever backlogged. That grace is the machine's, so
//! under time dilation it is 20 µs of real time ([`TokenBucket::set_start_grace`]:
//! 20 µs / D of the core time the bucket runs on).
//!
//! **Catch-up** (software robustness, an option, not in the prototype;
//! `--catchup T`, default 0). While the port is busy, credit may accrue
//! beyond the bucket up to `catchup` worth of link time, so a stall costs
//! no throughput; the moment the port is idle the cap is the bucket again.
//! The price is that the stall turns into a burst above `rate + bucket`,
//! which queue-length AQMs read as a drained queue and receivers see as a
//! line-rate-violating burst. So catch-up is off by default, and when it is
//! on the guard meters every departure against the strict bucket and counts
//! what exceeds it (`excess_bytes`, `excess_pkts`). Over any interval the
//! port sends at most `max(bucket, catchup·rate) + rate·t`, never more than
//! its backlog. Frames sent from banked credit would have left a stall-free
//! link earlier: [`TokenBucket::lateness_ns`] says how much, and the port
//! gives dequeue-side AQMs (TCN, CoDel, ECN#) that departure time (accurate
//! to one bucket). With the strict default the lateness is always 0: the
//! link really paused, and the packets really waited.
//!
//! `overhead` is the per-frame wire overhead counted against the rate:
//! 24 bytes by default (preamble + SFD 8, FCS 4, inter-frame gap 12), so a
//! `1gbit` port carries what a real 1 GbE link carries.

use crate::units::{Nanos, Rate};

/// Ethernet preamble + SFD (8) + FCS (4) + inter-frame gap (12).
pub const ETHERNET_WIRE_OVERHEAD: u32 = 24;

/// Default bucket size: ≈ 1.67 MTU as in the TCN prototype (TCN paper §5).
pub const DEFAULT_BUCKET_BYTES: u64 = 2_500;

const PS_PER_NS: u128 = 1_000;

/// The start of each busy period that is the data path's forwarding
/// latency rather than lost link time (see the module header).
pub const START_GRACE_NS: Nanos = 20_000;

/// What the link did that a real link would not, since the port was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkFidelity {
    /// Time the port held packets (was backlogged), ns.
    pub busy_ns: u64,
    /// Link time lost while backlogged: credit the bucket could not hold
    /// because the port was not served in time, ns.
    pub lost_ns: u64,
    /// Wire bytes sent above the strict `rate + bucket` envelope (catch-up).
    pub excess_bytes: u64,
    /// Frames that left above that envelope.
    pub excess_pkts: u64,
}

impl LinkFidelity {
    /// These counters, kept in the emulated time of a time-dilated core,
    /// as real time (× D): the link time the machine lost on the wire, at
    /// the wire rate rate / D. The lost share does not change.
    pub fn in_real_time(self, d: crate::timebase::Dilation) -> Self {
        LinkFidelity {
            busy_ns: d.to_real_ns(self.busy_ns),
            lost_ns: d.to_real_ns(self.lost_ns),
            ..self
        }
    }

    /// Lost link time as a share of the time the port was backlogged.
    pub fn lost_fraction(&self) -> f64 {
        if self.busy_ns == 0 {
            0.0
        } else {
            self.lost_ns as f64 / self.busy_ns as f64
        }
    }
}

/// Credit capped at a depth: the arithmetic of every token bucket in
/// softswitch — the link shaper's below (credit in picoseconds of link time,
/// fed by the clock) and R-AQM's ACK release (credit in bytes of departed
/// frames, fed by departures, [`crate::raqm`]). Credit never exceeds the
/// depth, and a take never leaves it below zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    tokens: u128,
    depth: u128,
}

impl Bucket {
    /// An empty bucket `depth` deep.
    pub const fn empty(depth: u128) -> Self {
        Bucket { tokens: 0, depth }
    }
    /// A full bucket `depth` deep.
    pub const fn full(depth: u128) -> Self {
        Bucket {
            tokens: depth,
            depth,
        }
    }
    /// Credit now.
    #[inline]
    pub fn tokens(&self) -> u128 {
        self.tokens
    }
    /// The most credit it holds.
    #[inline]
    pub fn depth(&self) -> u128 {
        self.depth
    }
    /// Adds `amount`, up to the depth; returns what did not fit.
    #[inline]
    pub fn credit(&mut self, amount: u128) -> u128 {
        let full = self.tokens.saturating_add(amount);
        self.tokens = full.min(self.depth);
        full - self.tokens
    }
    /// The credit it would hold after `amount` more (nothing changes).
    #[inline]
    pub fn with_credit(&self, amount: u128) -> u128 {
        self.tokens.saturating_add(amount).min(self.depth)
    }
    /// What `amount` more credit would overflow (nothing changes).
    #[inline]
    pub fn overflow_of(&self, amount: u128) -> u128 {
        self.tokens
            .saturating_add(amount)
            .saturating_sub(self.depth)
    }
    /// Takes `amount` if it holds that much.
    #[inline]
    pub fn take(&mut self, amount: u128) -> bool {
        if self.tokens >= amount {
            self.tokens -= amount;
            true
        } else {
            false
        }
    }
    /// Fills it to the depth.
    #[inline]
    pub fn fill(&mut self) {
        self.tokens = self.depth;
    }
    /// Empties it.
    #[inline]
    pub fn drain(&mut self) {
        self.tokens = 0;
    }
    /// Changes the depth; credit above the new depth is gone.
    #[inline]
    pub fn set_depth(&mut self, depth: u128) {
        self.depth = depth;
        self.tokens = self.tokens.min(depth);
    }
    /// Panics unless credit ≤ depth (for tests and the fuzz harness).
    pub fn invariants(&self) {
        assert!(
            self.tokens <= self.depth,
            "bucket holds {} > depth {}",
            self.tokens,
            self.depth
        );
    }
}

/// A token bucket metering bytes against a link rate.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: Rate,
    bucket_bytes: u64,
    overhead: u32,
    bucket_ps: u128,
    catchup_ps: u128,
    busy: bool,
    /// Credit, ps; its depth is [`cap`](Self::cap).
    tokens: Bucket,
    last_ns: Nanos,
    /// Fidelity: busy time accumulated before `busy_since`, ns.
    busy_ns: u64,
    /// Fidelity: when the current busy period began.
    busy_since: Nanos,
    /// Fidelity: credit that overflowed the cap while busy, ps.
    lost_ps: u128,
    /// Fidelity: the start of each busy period not counted as lost, ns.
    grace_ns: Nanos,
    /// Fidelity: a strict bucket (no catch-up) metering departures, ps.
    meter: Bucket,
    /// Fidelity: when the meter was last refilled.
    meter_last: Nanos,
    /// Fidelity: departures above the strict envelope.
    excess_bytes: u64,
    excess_pkts: u64,
}

impl TokenBucket {
    /// A full bucket of `bucket_bytes` at `rate`; `Rate::from_bps(0)` means unshaped.
    pub fn new(rate: Rate, bucket_bytes: u64, overhead: u32, now: Nanos) -> Self {
        let mut tb = TokenBucket {
            rate,
            bucket_bytes,
            overhead,
            bucket_ps: 0,
            catchup_ps: 0,
            busy: false,
            tokens: Bucket::default(),
            last_ns: now,
            busy_ns: 0,
            busy_since: now,
            lost_ps: 0,
            grace_ns: START_GRACE_NS,
            meter: Bucket::default(),
            meter_last: now,
            excess_bytes: 0,
            excess_pkts: 0,
        };
        tb.bucket_ps = tb.cost_ps(bucket_bytes);
        tb.tokens = Bucket::full(tb.bucket_ps);
        tb.meter = Bucket::full(tb.bucket_ps);
        tb
    }

    /// Link rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }
    /// Bucket size in bytes.
    pub fn bucket_bytes(&self) -> u64 {
        self.bucket_bytes
    }
    /// Per-frame overhead counted against the rate.
    pub fn overhead(&self) -> u32 {
        self.overhead
    }
    /// Whether the bucket meters at all.
    pub fn is_shaping(&self) -> bool {
        self.rate.bps() > 0
    }

    fn cost_ps(&self, bytes: u64) -> u128 {
        if self.rate.bps() == 0 {
            return 0;
        }
        // bytes·8 bits / (bits/s) in ps = bytes·8·1e12 / bps.
        (bytes as u128 * 8 * 1_000_000_000_000).div_ceil(self.rate.bps() as u128)
    }

    fn frame_cost_ps(&self, len: u32) -> u128 {
        self.cost_ps(len as u64 + self.overhead as u64)
    }

    /// Lets credit build up to `catchup_ns` of link time while the port is busy.
    pub fn with_catchup(mut self, catchup_ns: Nanos) -> Self {
        self.catchup_ps = catchup_ns as u128 * PS_PER_NS;
        self
    }

    /// The start of each busy period that is forwarding latency rather than
    /// lost link time, in the bucket's time ([`START_GRACE_NS`] by default;
    /// a time-dilated data path gives it `START_GRACE_NS / D`, so the grace
    /// stays 20 µs of the machine's real time).
    pub fn set_start_grace(&mut self, grace_ns: Nanos) {
        self.grace_ns = grace_ns;
    }

    fn cap(&self) -> u128 {
        if self.busy {
            self.bucket_ps.max(self.catchup_ps)
        } else {
            self.bucket_ps
        }
    }

    /// Of `overflow_ps` of credit that overflowed the cap just before `now`
    /// (the last `overflow_ps` of time: credit grows linearly and stops at
    /// the cap), the part outside the busy period's start grace.
    fn counted_overflow(&self, overflow_ps: u128, now: Nanos) -> u128 {
        let now_ps = now as u128 * PS_PER_NS;
        let from = now_ps.saturating_sub(overflow_ps);
        let busy_ps = self.busy_since as u128 * PS_PER_NS;
        let grace_end = busy_ps + self.grace_ns as u128 * PS_PER_NS;
        let excused = now_ps.min(grace_end).saturating_sub(from.max(busy_ps));
        overflow_ps - excused.min(overflow_ps)
    }

    fn refill(&mut self, now: Nanos) {
        if now > self.last_ns {
            let add = (now - self.last_ns) as u128 * PS_PER_NS;
            let overflow = self.tokens.credit(add);
            if self.busy && self.is_shaping() && overflow > 0 {
                self.lost_ps += self.counted_overflow(overflow, now);
            }
            self.last_ns = now;
        }
    }

    /// Whether credit can exceed the bucket (catch-up on): only then can a
    /// departure leave the strict envelope, so only then is it metered.
    fn catches_up(&self) -> bool {
        self.catchup_ps > self.bucket_ps && self.is_shaping()
    }

    /// The port became busy (holds packets) or idle at `now`. Credit up to
    /// `now` accrues under the old state; an idle port keeps at most a bucket.
    pub fn set_busy(&mut self, busy: bool, now: Nanos) {
        if busy == self.busy {
            return;
        }
        self.refill(now);
        if busy {
            self.busy_since = now;
        } else {
            self.busy_ns += now.saturating_sub(self.busy_since);
        }
        self.busy = busy;
        self.tokens.set_depth(self.cap());
    }

    /// Takes credit for a `len`-byte frame if the bucket holds enough at `now`.
    pub fn try_take(&mut self, len: u32, now: Nanos) -> bool {
        if !self.is_shaping() {
            return true;
        }
        self.refill(now);
        let c = self.frame_cost_ps(len);
        if self.tokens.take(c) {
            if self.catches_up() {
                self.meter(c, len, now);
            }
            true
        } else {
            false
        }
    }

    /// Charges a departure of cost `c` to the strict meter; what it cannot
    /// cover left above `rate + bucket` and is counted as excess.
    fn meter(&mut self, c: u128, len: u32, now: Nanos) {
        if now > self.meter_last {
            self.meter
                .credit((now - self.meter_last) as u128 * PS_PER_NS);
            self.meter_last = now;
        }
        if !self.meter.take(c) {
            self.meter.drain();
            self.excess_pkts += 1;
            self.excess_bytes += len as u64 + self.overhead as u64;
        }
    }

    /// The fidelity counters as of `now` (see the module header).
    pub fn fidelity(&self, now: Nanos) -> LinkFidelity {
        let mut lost = self.lost_ps;
        let mut busy = self.busy_ns;
        if self.busy {
            busy += now.saturating_sub(self.busy_since);
            if self.is_shaping() {
                let add = now.saturating_sub(self.last_ns) as u128 * PS_PER_NS;
                lost += self.counted_overflow(self.tokens.overflow_of(add), now);
            }
        }
        LinkFidelity {
            busy_ns: busy,
            lost_ns: (lost / PS_PER_NS) as u64,
            excess_bytes: self.excess_bytes,
            excess_pkts: self.excess_pkts,
        }
    }

    /// How late the link is at `now`: credit banked beyond one bucket while
    /// busy, as link time (ns). A frame sent now would have left that much
    /// earlier on a link that never stalls; dequeue-side AQMs measure sojourn
    /// against `now − lateness` so a stall of the poll loop does not look like
    /// queueing delay (up to `catchup`).
    pub fn lateness_ns(&self, now: Nanos) -> Nanos {
        if !self.busy || !self.is_shaping() {
            return 0;
        }
        let elapsed = now.saturating_sub(self.last_ns) as u128 * PS_PER_NS;
        let have = self.tokens.with_credit(elapsed);
        (have.saturating_sub(self.bucket_ps) / PS_PER_NS) as Nanos
    }

    /// The earliest time at which a `len`-byte frame could be sent (≤ now: at once).
    pub fn ready_at(&self, len: u32, now: Nanos) -> Nanos {
        if !self.is_shaping() {
            return now;
        }
        let elapsed = now.saturating_sub(self.last_ns) as u128 * PS_PER_NS;
        let have = self.tokens.with_credit(elapsed);
        let need = self.frame_cost_ps(len);
        if have >= need {
            now
        } else {
            now + (need - have).div_ceil(PS_PER_NS) as Nanos
        }
    }

    /// Whether a frame of `len` bytes can ever pass (bucket ≥ frame + overhead).
    pub fn fits(&self, len: u32) -> bool {
        !self.is_shaping() || self.frame_cost_ps(len) <= self.bucket_ps
    }

    /// Panics unless credit is within the cap (the bucket when idle) and
    /// the strict meter within the bucket (tests and the fuzz harness).
    pub fn invariants(&self) {
        self.tokens.invariants();
        assert_eq!(self.tokens.depth(), self.cap(), "credit capped elsewhere");
        self.meter.invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{MS, US};

    #[test]
    fn full_bucket_then_rate() {
        // 1 Gbit/s, bucket 2500 B, no overhead: 1500 B passes, a second does not
        // until 1500 - 1000 = 500 B more credit (4 µs) has accrued.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        assert!(tb.try_take(1500, 0));
        assert!(!tb.try_take(1500, 0));
        assert_eq!(tb.ready_at(1500, 0), 4 * US);
        assert!(!tb.try_take(1500, 4 * US - 1));
        assert!(tb.try_take(1500, 4 * US));
    }

    #[test]
    fn credit_is_capped_at_bucket() {
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        // Idle for a second: still only one bucket of burst.
        let t = 1_000 * MS;
        assert!(tb.try_take(1500, t));
        assert!(tb.try_take(1000, t));
        assert!(!tb.try_take(1, t));
        tb.invariants();
    }

    #[test]
    fn overhead_counts_against_rate() {
        let tb = TokenBucket::new(Rate::gbit(1), 3_000, 24, 0);
        let mut tb2 = tb.clone();
        assert!(tb2.try_take(1476, 0)); // 1500 B of credit
        assert_eq!(tb2.ready_at(1476, 0), 0); // 1500 left of 3000
        assert!(tb2.try_take(1476, 0));
        assert_eq!(tb2.ready_at(1476, 0), 12 * US); // 1500 B at 1 Gbit/s
        assert!(tb.fits(1514));
        assert!(!TokenBucket::new(Rate::gbit(1), 1_000, 24, 0).fits(1514));
    }

    #[test]
    fn unshaped_always_passes() {
        let mut tb = TokenBucket::new(Rate::from_bps(0), 0, 24, 0);
        for _ in 0..1000 {
            assert!(tb.try_take(9000, 0));
        }
        assert_eq!(tb.ready_at(9000, 5), 5);
    }

    #[test]
    fn exact_for_small_frames_at_10g() {
        // 64 B + 24 B at 10 Gbit/s = 70.4 ns per frame; 1000 frames = 70.4 µs
        // of credit, of which the initial bucket (200 B = 160 ns) was free.
        let mut tb = TokenBucket::new(Rate::gbit(10), 200, 24, 0);
        let mut now = 0;
        let mut sent = 0;
        while sent < 1000 {
            now = tb.ready_at(64, now);
            assert!(tb.try_take(64, now));
            sent += 1;
        }
        // No fractional credit is lost to rounding: last send at 70400 − 160 ns.
        assert_eq!(now, 70_400 - 160);
    }

    #[test]
    fn busy_port_catches_up_idle_port_does_not() {
        // 1 Gbit/s, 2500 B bucket, 100 µs catch-up (12.5 KB), no overhead.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0).with_catchup(100 * US);
        tb.set_busy(true, 0);
        assert!(tb.try_take(1500, 0));
        assert!(tb.try_take(1000, 0));
        // The poll loop is 50 µs late: a busy link would have sent 6250 B.
        assert_eq!(tb.ready_at(1500, 50 * US), 50 * US);
        let mut sent = 0;
        while tb.try_take(1250, 50 * US) {
            sent += 1250;
        }
        assert_eq!(sent, 6_250);
        // Late by 1 ms: only 100 µs worth (12.5 KB) is made up.
        let mut sent = 0;
        while tb.try_take(1250, 1_050 * US) {
            sent += 1250;
        }
        assert_eq!(sent, 12_500);
        tb.invariants();
        // Idle: back to one bucket, however long.
        tb.set_busy(false, 1_050 * US);
        let mut sent = 0;
        while tb.try_take(500, 5_000 * US) {
            sent += 500;
        }
        assert_eq!(sent, 2_500);
    }

    #[test]
    fn lateness_is_banked_credit_beyond_the_bucket() {
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0).with_catchup(100 * US);
        assert_eq!(tb.lateness_ns(50 * US), 0, "idle port is never late");
        tb.set_busy(true, 0);
        assert!(tb.try_take(2_500, 0));
        assert_eq!(
            tb.lateness_ns(10 * US),
            0,
            "1250 B of credit: within the bucket"
        );
        // 50 µs late: 6250 B banked, 3750 B beyond the bucket = 30 µs.
        assert_eq!(tb.lateness_ns(50 * US), 30 * US);
        // Each frame sent moves the virtual clock forward by its time on the wire.
        assert!(tb.try_take(1_250, 50 * US));
        assert_eq!(tb.lateness_ns(50 * US), 20 * US);
        // Capped by the catch-up horizon.
        assert_eq!(tb.lateness_ns(10_000 * US), 100 * US - 20 * US);
        // Strict bucket (no catch-up): never late.
        let mut strict = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        strict.set_busy(true, 0);
        assert_eq!(strict.lateness_ns(1_000 * US), 0);
    }

    #[test]
    fn going_idle_clamps_credit_to_the_bucket() {
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0).with_catchup(100 * US);
        tb.set_busy(true, 0);
        tb.set_busy(false, 80 * US); // 10 KB accrued while busy, clamped to 2.5 KB
        assert!(tb.try_take(2_500, 80 * US));
        assert!(!tb.try_take(1, 80 * US));
        tb.invariants();
    }

    #[test]
    fn a_late_poll_while_backlogged_is_lost_link_time() {
        // 1 Gbit/s (8 ns per byte), 2500 B bucket (20 µs), no overhead.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        tb.set_busy(true, 0);
        assert!(tb.try_take(2_500, 0)); // bucket empty at t = 0
                                        // The poll loop comes back at 50 µs: 20 µs refill the bucket, 30 µs
                                        // of link time had nowhere to go.
        assert_eq!(tb.fidelity(50 * US).lost_ns, 30 * US, "read before refill");
        assert!(tb.try_take(1_250, 50 * US));
        let f = tb.fidelity(50 * US);
        assert_eq!((f.busy_ns, f.lost_ns), (50 * US, 30 * US));
        // Polled on time from now on (every 10 µs, a 1250 B frame each): nothing more lost.
        for i in 1..=10 {
            assert!(tb.try_take(1_250, 50 * US + i * 10 * US));
        }
        assert_eq!(tb.fidelity(150 * US).lost_ns, 30 * US);
        assert!((tb.fidelity(150 * US).lost_fraction() - 0.2).abs() < 1e-9);
        // Idle time is never lost, however long.
        tb.set_busy(false, 150 * US);
        let f = tb.fidelity(10_000 * US);
        assert_eq!((f.busy_ns, f.lost_ns), (150 * US, 30 * US));
        // A new busy period accrues on top.
        tb.set_busy(true, 10_000 * US);
        let f = tb.fidelity(10_100 * US);
        assert_eq!(f.busy_ns, 250 * US);
        assert_eq!(
            f.lost_ns,
            30 * US + 100 * US - START_GRACE_NS,
            "the bucket was already full: all 100 µs unserved but the start grace are lost"
        );
        assert_eq!((f.excess_bytes, f.excess_pkts), (0, 0));
    }

    #[test]
    fn a_frame_at_an_idle_port_served_on_the_next_pass_loses_nothing() {
        // An ACK arrives at an idle port with a full bucket; the next pass
        // (8 µs later) sends it: forwarding latency, not lost link time.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        tb.set_busy(true, 1_000 * US);
        assert_eq!(tb.fidelity(1_008 * US).lost_ns, 0);
        assert!(tb.try_take(66, 1_008 * US));
        tb.set_busy(false, 1_008 * US);
        assert_eq!(tb.fidelity(1_008 * US).lost_ns, 0);
        // The next one waits 50 µs (a stall): all but the grace is lost,
        // whether read live or after the refill.
        tb.set_busy(true, 2_000 * US);
        assert_eq!(tb.fidelity(2_050 * US).lost_ns, 50 * US - START_GRACE_NS);
        assert!(tb.try_take(66, 2_050 * US));
        assert_eq!(tb.fidelity(2_050 * US).lost_ns, 50 * US - START_GRACE_NS);
        // An empty bucket at the start of the busy period: the grace overlaps
        // the refill, nothing beyond it is excused twice.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0);
        assert!(tb.try_take(2_500, 0));
        tb.set_busy(true, 0);
        // Full again at 20 µs; polled at 45 µs: 25 µs overflowed, all after the grace.
        assert_eq!(tb.fidelity(45 * US).lost_ns, 25 * US);
    }

    #[test]
    fn catch_up_turns_lost_time_into_counted_excess() {
        // Same link with 100 µs catch-up: a 50 µs stall is made up at once,
        // nothing is lost, but what leaves above rate + bucket is counted.
        let mut tb = TokenBucket::new(Rate::gbit(1), 2_500, 0, 0).with_catchup(100 * US);
        tb.set_busy(true, 0);
        assert!(tb.try_take(2_500, 0));
        let mut sent = 0;
        while tb.try_take(1_250, 50 * US) {
            sent += 1;
        }
        assert_eq!(sent, 5); // 6250 B banked
        let f = tb.fidelity(50 * US);
        assert_eq!(f.lost_ns, 0);
        // The strict meter held 2500 B at 50 µs: two frames conform, three exceed.
        assert_eq!((f.excess_pkts, f.excess_bytes), (3, 3_750));
        // A stall longer than the catch-up loses the rest.
        assert!(tb.fidelity(200 * US).lost_ns == 50 * US);
    }

    #[test]
    fn unshaped_ports_lose_nothing() {
        let mut tb = TokenBucket::new(Rate::from_bps(0), 0, 24, 0);
        tb.set_busy(true, 0);
        assert!(tb.try_take(1500, 1_000 * US));
        let f = tb.fidelity(2_000 * US);
        assert_eq!((f.busy_ns, f.lost_ns, f.excess_pkts), (2_000 * US, 0, 0));
    }

    proptest::proptest! {
        /// Over any window, bytes sent ≤ bucket + rate·window.
        #[test]
        fn never_exceeds_rate_plus_bucket(
            steps in proptest::collection::vec((0u64..20_000, 64u32..1515), 1..400),
            rate_mbit in 10u64..10_000,
        ) {
            let rate = Rate::mbit(rate_mbit);
            let bucket = 2_500u64;
            let mut tb = TokenBucket::new(rate, bucket, 0, 0);
            let mut now = 0u64;
            let mut log: Vec<(u64, u64)> = Vec::new();
            for (dt, len) in steps {
                now += dt;
                if tb.try_take(len, now) {
                    log.push((now, len as u64));
                }
                tb.invariants();
            }
            for i in 0..log.len() {
                let mut bytes = 0u64;
                for j in i..log.len() {
                    bytes += log[j].1;
                    let window = log[j].0 - log[i].0;
                    let allowed = bucket as u128 + rate.bps() as u128 * window as u128 / 8_000_000_000;
                    proptest::prop_assert!(bytes as u128 <= allowed + 1,
                        "{} bytes in {} ns > {}", bytes, window, allowed);
                }
            }
        }
    }
}

//! Per-period flow counting with an interval-sequence hash — the flow
//! counter PRED and DiffECN share.
//!
//! PRED paper §V-B, Algorithm 1 (the FCS data plane, lines 1–14) and
//! DiffECN paper §V, Algorithm 1 lines 26–39 describe the same register
//! design: a switch pipeline cannot bulk-reset a bitmap every period, so the
//! period's sequence number is hashed together with the flow's 5-tuple and
//! each slot keeps the last hash written to it:
//!
//! ```text
//! on packet P at now:
//!   if now − T_start > T:                     (period over)
//!       T_start ← now; n_last ← n_now; n_now ← 0; seq ← seq + 1
//!   H_new ← Hash(5-tuple(P), seq)
//!   S_id  ← H_new mod 2^IndexSize
//!   H_old ← slot[S_id]; slot[S_id] ← H_new
//!   if H_new ≠ H_old: n_now ← n_now + 1       (first packet of this flow in this period)
//!   N = max(n_last, n_now)                    (line 14; DiffECN §IV-C)
//! ```
//!
//! A flow is counted once per period in which it sends, whatever its size:
//! "new-arrival counting" (PRED paper §IV-A, DiffECN paper §IV-C), which avoids
//! missing flows whose start or end falls outside the period.
//!
//! Choices where the papers leave room (each a parameter or noted here):
//! * **Periods end without packets.** In the P4 pipeline only a packet can
//!   close a period. Here the port's tick ([`FlowCounter::tick`]) closes it
//!   as well, at the first tick after `T_start + T`, so `n_last` of a period
//!   that saw no packet is 0 instead of the count of the last busy period.
//!   T_start becomes the time the period was closed (the paper's "T_start ←
//!   now"); with a tick per data-path pass that is within microseconds of
//!   `T_start + T`.
//! * **The packet that closes a period is counted** in the new period.
//!   Algorithm 1 puts the reset and the count in the two branches of one
//!   if/else — a pipeline artefact: the packet's flow is counted at its next
//!   packet. With the tick closing periods this case is rare; counting it at
//!   once is what the algorithm means.
//! * **Hash**: the 32-bit 5-tuple hash the parser computes once per packet
//!   (`wire::flow_hash`), mixed with the sequence number by a MurmurHash3
//!   finaliser; the slot index is its low `index_bits` bits (DiffECN's P4
//!   code uses 2^14 slots; PRED's T1 prototype 120 bits of register). Slots
//!   start at 0, so a flow whose mixed hash is exactly 0 is missed in that
//!   period (probability 2^-32 per flow and period).
//! * Non-IP frames have no 5-tuple and are not counted (callers skip them).

use crate::units::Nanos;

/// Largest slot table: 2^20 entries (4 MB).
pub const MAX_INDEX_BITS: u32 = 20;

/// The per-period flow counter.
#[derive(Clone, Debug)]
pub struct FlowCounter {
    /// Parameter: period length T (T_FCS, T_period), ns.
    period_ns: Nanos,
    /// Parameter: log2 of the number of slots (IndexSize).
    index_bits: u32,
    /// Running: the hash last written to each slot.
    slots: Vec<u32>,
    /// Running: sequence number of the current period.
    seq: u32,
    /// Running: when the current period started.
    start_ns: Nanos,
    /// Running: flows counted in the last closed period.
    n_last: u32,
    /// Running: flows counted so far in the current period.
    n_now: u32,
    /// Counter: periods closed since start.
    periods: u64,
}

#[inline]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

impl FlowCounter {
    /// A counter with periods of `period_ns` and 2^`index_bits` slots,
    /// whose first period starts at `now`. `period_ns` must be > 0 and
    /// `index_bits` in 1..=[`MAX_INDEX_BITS`] (callers validate their config).
    pub fn new(period_ns: Nanos, index_bits: u32, now: Nanos) -> Self {
        let index_bits = index_bits.clamp(1, MAX_INDEX_BITS);
        FlowCounter {
            period_ns: period_ns.max(1),
            index_bits,
            slots: vec![0; 1 << index_bits],
            seq: 0,
            start_ns: now,
            n_last: 0,
            n_now: 0,
            periods: 0,
        }
    }

    /// Closes the current period if it is over at `now` (Algorithm 1
    /// lines 1–5). Returns whether a period was closed.
    #[inline]
    pub fn tick(&mut self, now: Nanos) -> bool {
        if now.saturating_sub(self.start_ns) > self.period_ns {
            self.start_ns = now;
            self.n_last = self.n_now;
            self.n_now = 0;
            self.seq = self.seq.wrapping_add(1);
            self.periods += 1;
            true
        } else {
            false
        }
    }

    /// A packet of the flow with 5-tuple hash `flow_hash` passes at `now`
    /// (lines 7–11, after closing a finished period). Returns whether it is
    /// the flow's first packet in this period.
    #[inline]
    pub fn observe(&mut self, flow_hash: u32, now: Nanos) -> bool {
        self.tick(now);
        let h = fmix32(flow_hash ^ self.seq.wrapping_mul(0x9e37_79b9));
        let slot = &mut self.slots[(h & ((1u32 << self.index_bits) - 1)) as usize];
        let new = *slot != h;
        *slot = h;
        if new {
            self.n_now += 1;
        }
        new
    }

    /// N = max(n_last, n_now) (Algorithm 1 line 14).
    #[inline]
    pub fn flows(&self) -> u32 {
        self.n_last.max(self.n_now)
    }
    /// Flows counted in the last closed period.
    pub fn n_last(&self) -> u32 {
        self.n_last
    }
    /// Flows counted so far in the current period.
    pub fn n_now(&self) -> u32 {
        self.n_now
    }
    /// Periods closed since start.
    pub fn periods(&self) -> u64 {
        self.periods
    }
    /// Period length, ns.
    pub fn period_ns(&self) -> Nanos {
        self.period_ns
    }
    /// When the current period will be over: the first tick after this closes it.
    pub fn period_end(&self) -> Nanos {
        self.start_ns.saturating_add(self.period_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::US;

    #[test]
    fn counts_each_flow_once_per_period() {
        let mut c = FlowCounter::new(100 * US, 14, 0);
        for t in 0..10u64 {
            for f in [11u32, 22, 33] {
                c.observe(f, t * US);
            }
        }
        assert_eq!((c.n_now(), c.n_last(), c.flows()), (3, 0, 3));
    }

    #[test]
    fn period_boundaries_follow_algorithm_1() {
        // T = 100 µs. Period 0: flows 1, 2, 3. Period 1 (after a tick past
        // 100 µs): only flow 1 so far → N = max(3, 1) = 3.
        let mut c = FlowCounter::new(100 * US, 14, 0);
        for f in [1, 2, 3] {
            assert!(c.observe(f, 10 * US));
        }
        assert!(!c.observe(2, 50 * US), "same flow, same period");
        assert!(!c.tick(100 * US), "now − T_start = T is not > T");
        assert!(c.tick(100 * US + 1));
        assert_eq!((c.n_last(), c.n_now()), (3, 0));
        assert!(
            c.observe(1, 120 * US),
            "a flow is new again in a new period"
        );
        assert_eq!(c.flows(), 3);
        // Period 2 starts at the tick (T_start ← now) ...
        assert!(!c.tick(200 * US));
        assert!(c.tick(200 * US + 2));
        assert_eq!((c.n_last(), c.n_now(), c.flows()), (1, 0, 1));
        // ... and a period without any packet still ends: N falls to 0.
        assert!(c.tick(300 * US + 3));
        assert_eq!(c.flows(), 0);
        assert_eq!(c.periods(), 3);
        assert_eq!(c.period_end(), 400 * US + 3);
    }

    #[test]
    fn a_packet_after_the_boundary_closes_the_period_and_is_counted() {
        let mut c = FlowCounter::new(100 * US, 14, 0);
        c.observe(7, 0);
        c.observe(8, 0);
        // No tick: the packet at 150 µs closes period 0 and counts in period 1.
        assert!(c.observe(7, 150 * US));
        assert_eq!((c.n_last(), c.n_now()), (2, 1));
    }

    #[test]
    fn many_flows_are_counted_close_to_exactly() {
        // 200 distinct flows in 2^14 slots: position conflicts are rare.
        let mut c = FlowCounter::new(1_000 * US, 14, 0);
        for f in 0..200u32 {
            c.observe(f.wrapping_mul(2_654_435_761), 0);
            c.observe(f.wrapping_mul(2_654_435_761), 1);
        }
        assert!((198..=200).contains(&c.n_now()), "{}", c.n_now());
        // A tiny table overcounts: conflicting flows overwrite each other's slot.
        let mut small = FlowCounter::new(1_000 * US, 2, 0);
        for _ in 0..10 {
            for f in 0..16u32 {
                small.observe(f * 7919, 0);
            }
        }
        assert!(small.n_now() > 16, "{}", small.n_now());
    }
}

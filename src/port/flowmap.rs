//! Per-flow queue allocation: DiffECN's Queue Mapping Unit (QMU).
//!
//! DiffECN paper §IV-B (Fig. 9) and §V-A (Algorithm 1, ingress lines 2–23):
//! flows, identified by their 5-tuple (`wire::flow_hash`), are given queues
//! dynamically instead of by DSCP, so that as far as the port has queues
//! every *active* flow (one with packets queued, §IV-B step 1) has a queue of
//! its own and the per-queue length is the flow's own buffer occupancy.
//!
//! ```text
//! on packet P of flow F (index = hash(F) mod table size):
//!   entry live?                                     (see "expiry" below)
//!     no  → new flow: the lowest-index empty ordinary queue       (line 15)
//!           else the temporary queue T (queue 0, strict priority)  (line 17)
//!           (without T: the shortest ordinary queue)
//!     yes, in an ordinary queue → that queue                      (line 24)
//!     yes, in T: passed(F) + len(P) ≤ pass_limit → probe: an empty
//!           ordinary queue if one exists (move), else stay in T     (line 9)
//!         otherwise → the shortest ordinary queue (move)           (line 11)
//! ```
//!
//! Choices where the paper leaves room (each a parameter or written here):
//! * **Expiry** (DiffECN paper §IV-B). "As soon as the last packet in a queue is
//!   scheduled out, this queue status is reset" (§IV-B): the port calls
//!   [`FlowMap::on_queue_empty`] and the queue's *generation* number goes up;
//!   an entry records the generation of its queue when it was assigned, so
//!   every flow mapped to a queue that has since emptied is stale and its
//!   next packet is a new flow. That is what makes a flow leave a queue only
//!   when none of its packets are in it (no reordering), and lets an emptied
//!   queue go to a new flow without two flows sharing it.
//! * **Entries in the temporary queue** do not expire when T empties (T is
//!   strict-priority and empties after almost every packet, which would reset
//!   the pass counter and make the pass limit unreachable). They expire when
//!   the flow has sent nothing for `idle_timeout` — §VII-B: "if the flow is
//!   stalled for a time greater than T_period, then its subsequent packets
//!   are treated as a new flow"; default 1.5 RTT, DiffECN's T_period.
//! * **Pass limit** counts frame bytes through T, at most `pass_limit` bytes
//!   pass (Fig. 8: with a limit of 2 packets, F1's third packet moves);
//!   default 10 MTU (§VI-C.4, Fig. 21: "setting this limit to 10 MTU is a
//!   good choice").
//! * **Table** of 512 × queues entries (§IV-B3), rounded up to a power of two,
//!   indexed by the low bits of the hash. Two flows on one index share the
//!   entry and its queue, as in the P4 flowmap; the full hash is kept as a tag
//!   only to count such collisions.
//! * A stale flow whose old ordinary queue is still empty gets it back (same
//!   as any empty queue for the one-flow-per-queue rule, but fewer moves).
//! * Non-IP frames (no 5-tuple) go to queue 0 and create no entry.

use crate::units::Nanos;
use serde::Serialize;

/// Entries per queue (DiffECN paper §IV-B3: "512 times the number of available queues").
pub const ENTRIES_PER_QUEUE: usize = 512;
/// Default pass limit: 10 MTU-sized frames (§VI-C.4).
pub const DEFAULT_PASS_LIMIT_BYTES: u64 = 10 * 1514;
/// Default idle timeout of entries in the temporary queue when no RTT is
/// known: 1.5 × 250 µs (T_period at the default `--rtt`).
pub const DEFAULT_IDLE_TIMEOUT_NS: Nanos = 375_000;

/// Parameters of the per-flow classifier (`--classify flow,...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlowClassConfig {
    /// Reserve queue 0 as the strict-priority temporary queue for new flows
    /// when no ordinary queue is empty (DiffECN). Without it, such a flow
    /// goes to the shortest queue at once.
    pub temp_queue: bool,
    /// Bytes a flow may pass through the temporary queue before it is moved
    /// to the shortest ordinary queue.
    pub pass_limit_bytes: u64,
    /// Entries in the temporary queue expire after this long without a packet.
    pub idle_timeout_ns: Nanos,
}

impl Default for FlowClassConfig {
    fn default() -> Self {
        FlowClassConfig {
            temp_queue: true,
            pass_limit_bytes: DEFAULT_PASS_LIMIT_BYTES,
            idle_timeout_ns: DEFAULT_IDLE_TIMEOUT_NS,
        }
    }
}

/// What happened to flows, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowCounters {
    /// New flows given an empty ordinary queue.
    pub new_to_empty: u64,
    /// New flows sent to the temporary queue (no ordinary queue empty).
    pub new_to_temp: u64,
    /// New flows sent to the shortest queue (no empty queue, no temporary queue).
    pub new_to_shortest: u64,
    /// Flows moved out of the temporary queue to an empty queue (probing).
    pub moved_probe: u64,
    /// Flows moved out of the temporary queue to the shortest queue (pass limit).
    pub moved_pass_limit: u64,
    /// Entries found stale (their queue emptied, or idle in the temporary queue).
    pub expired: u64,
    /// Packets of a flow that found another flow's live entry at its index.
    pub collisions: u64,
    /// Non-IP frames (no 5-tuple), sent to queue 0.
    pub non_ip: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    in_use: bool,
    queue: u16,
    tag: u32,
    gen: u32,
    passed_bytes: u64,
    last_ns: Nanos,
}

/// The flow table of one port.
#[derive(Clone, Debug)]
pub struct FlowMap {
    cfg: FlowClassConfig,
    entries: Vec<Entry>,
    index_mask: u32,
    /// Generation of each queue (bumped when it empties).
    gens: Vec<u32>,
    /// Bit set of the ordinary (non-temporary) queues.
    ordinary: u128,
    counters: FlowCounters,
}

/// The temporary queue's index.
pub const TEMP_QUEUE: usize = 0;

impl FlowMap {
    /// A table for a port of `queues` queues (1..=128; ≥ 2 with a temporary
    /// queue — the port config validates).
    pub fn new(cfg: FlowClassConfig, queues: usize) -> Self {
        let size = (ENTRIES_PER_QUEUE * queues.max(1)).next_power_of_two();
        let all = if queues >= 128 {
            u128::MAX
        } else {
            (1u128 << queues) - 1
        };
        let ordinary = if cfg.temp_queue && queues > 1 {
            all & !(1 << TEMP_QUEUE)
        } else {
            all
        };
        FlowMap {
            cfg,
            entries: vec![Entry::default(); size],
            index_mask: (size - 1) as u32,
            gens: vec![0; queues.max(1)],
            ordinary,
            counters: FlowCounters::default(),
        }
    }

    /// The queue for a packet of `len` bytes of the flow with 5-tuple hash
    /// `hash` (None: not IP) at `now`, given which queues hold packets
    /// (`nonempty`, bit q = queue q) and their bytes.
    #[inline]
    pub fn classify(
        &mut self,
        hash: Option<u32>,
        len: u32,
        now: Nanos,
        nonempty: u128,
        bytes: &[u64],
    ) -> usize {
        let Some(hash) = hash else {
            self.counters.non_ip += 1;
            return 0;
        };
        let temp = self.cfg.temp_queue && self.ordinary & 1 == 0;
        let empty = self.ordinary & !nonempty;
        let e = &mut self.entries[(hash & self.index_mask) as usize];
        let in_temp = temp && e.queue as usize == TEMP_QUEUE;
        let live = e.in_use
            && if in_temp {
                now.saturating_sub(e.last_ns) <= self.cfg.idle_timeout_ns
            } else {
                self.gens[e.queue as usize] == e.gen
            };
        if live {
            if e.tag != hash {
                self.counters.collisions += 1;
            }
            e.last_ns = now;
            if !in_temp {
                return e.queue as usize;
            }
            // Algorithm 1 lines 6–11.
            let q = if e.passed_bytes + len as u64 <= self.cfg.pass_limit_bytes {
                if empty == 0 {
                    e.passed_bytes += len as u64;
                    return TEMP_QUEUE;
                }
                self.counters.moved_probe += 1;
                empty.trailing_zeros() as usize
            } else {
                self.counters.moved_pass_limit += 1;
                shortest(self.ordinary, bytes)
            };
            e.queue = q as u16;
            e.gen = self.gens[q];
            return q;
        }
        // A new flow (lines 13–22).
        if e.in_use {
            self.counters.expired += 1;
        }
        let old = e.queue as usize;
        let q = if empty != 0 {
            self.counters.new_to_empty += 1;
            if e.in_use && empty & (1 << old) != 0 {
                old
            } else {
                empty.trailing_zeros() as usize
            }
        } else if temp {
            self.counters.new_to_temp += 1;
            TEMP_QUEUE
        } else {
            self.counters.new_to_shortest += 1;
            shortest(self.ordinary, bytes)
        };
        *e = Entry {
            in_use: true,
            queue: q as u16,
            tag: hash,
            gen: self.gens[q],
            passed_bytes: if q == TEMP_QUEUE && temp {
                len as u64
            } else {
                0
            },
            last_ns: now,
        };
        q
    }

    /// The queue of the flow with hash `hash` if its entry is live at `now`
    /// (a flow sharing its index with another one sees that one's entry).
    pub fn queue_of(&self, hash: u32, now: Nanos) -> Option<usize> {
        let e = &self.entries[(hash & self.index_mask) as usize];
        self.is_live(e, now).then_some(e.queue as usize)
    }

    #[inline]
    fn is_live(&self, e: &Entry, now: Nanos) -> bool {
        e.in_use
            && if self.cfg.temp_queue && self.ordinary & 1 == 0 && e.queue as usize == TEMP_QUEUE {
                now.saturating_sub(e.last_ns) <= self.cfg.idle_timeout_ns
            } else {
                self.gens[e.queue as usize] == e.gen
            }
    }

    /// Queue `q` has just become empty: every flow assigned to it before is
    /// no longer active there.
    #[inline]
    pub fn on_queue_empty(&mut self, q: usize) {
        self.gens[q] = self.gens[q].wrapping_add(1);
    }

    /// Counters.
    pub fn counters(&self) -> &FlowCounters {
        &self.counters
    }
    /// Parameters.
    pub fn config(&self) -> &FlowClassConfig {
        &self.cfg
    }
    /// Table size (entries).
    pub fn table_entries(&self) -> usize {
        self.entries.len()
    }
    /// Flows whose entries are live at `now` (a scan of the table: for
    /// reports, not the packet path).
    pub fn live_flows(&self, now: Nanos) -> u32 {
        self.entries.iter().filter(|e| self.is_live(e, now)).count() as u32
    }
    /// JSON for the stats snapshot.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "flow",
            "params": self.cfg,
            "table_entries": self.entries.len(),
            "counters": self.counters,
        })
    }
    /// Gauges for the time series (cumulative counters; differences give rates).
    pub fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        let c = &self.counters;
        emit("flow_new_to_empty", c.new_to_empty as f64);
        emit("flow_new_to_temp", c.new_to_temp as f64);
        emit("flow_new_to_shortest", c.new_to_shortest as f64);
        emit("flow_moved_probe", c.moved_probe as f64);
        emit("flow_moved_pass_limit", c.moved_pass_limit as f64);
        emit("flow_expired", c.expired as f64);
    }
}

/// The ordinary queue with the fewest bytes (lowest index on a tie).
#[inline]
fn shortest(ordinary: u128, bytes: &[u64]) -> usize {
    let mut best = ordinary.trailing_zeros() as usize;
    let mut m = ordinary;
    while m != 0 {
        let q = m.trailing_zeros() as usize;
        m &= m - 1;
        if bytes[q] < bytes[best] {
            best = q;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::US;

    const Q8: u128 = 0xff;

    fn map(temp: bool, pass_limit: u64) -> FlowMap {
        FlowMap::new(
            FlowClassConfig {
                temp_queue: temp,
                pass_limit_bytes: pass_limit,
                idle_timeout_ns: 100 * US,
            },
            8,
        )
    }

    #[test]
    fn new_flows_take_the_lowest_empty_queue_but_not_the_temporary_one() {
        // §V-A: "ternary matching always finds the empty queue with the
        // smallest sequence number"; queue 0 is the temporary queue.
        let mut m = map(true, 15_140);
        let bytes = [0u64; 8];
        assert_eq!(m.classify(Some(11), 1500, 0, 0, &bytes), 1);
        // Queue 1 now holds flow 11's packet.
        assert_eq!(m.classify(Some(22), 1500, 0, 0b10, &bytes), 2);
        // Flow 11 stays in its queue.
        assert_eq!(m.classify(Some(11), 1500, 1, 0b110, &bytes), 1);
        assert_eq!(m.counters().new_to_empty, 2);
        assert_eq!(m.queue_of(22, 1), Some(2));
        assert_eq!(m.queue_of(33, 1), None);
        assert_eq!(m.table_entries(), 4096);
    }

    /// Fig. 8: pass limit of 2 packets; every ordinary queue is busy.
    #[test]
    fn pass_limit_moves_a_flow_to_the_shortest_queue() {
        let mut m = map(true, 2 * 1000);
        let full = Q8 & !1;
        let mut bytes = [0u64, 9000, 3000, 8000, 2000, 7000, 6000, 5000];
        // F1's first two packets go through the temporary queue ...
        assert_eq!(m.classify(Some(1), 1000, 0, full, &bytes), TEMP_QUEUE);
        assert_eq!(m.classify(Some(1), 1000, 1, full | 1, &bytes), TEMP_QUEUE);
        // ... the third would exceed the limit: the shortest queue (4, 2000 B).
        assert_eq!(m.classify(Some(1), 1000, 2, full | 1, &bytes), 4);
        assert_eq!(m.counters().moved_pass_limit, 1);
        // F1 stays there even when another queue becomes shorter.
        bytes[2] = 100;
        assert_eq!(m.classify(Some(1), 1000, 3, full, &bytes), 4);
        // F2 (two packets) is handled entirely in the temporary queue.
        assert_eq!(m.classify(Some(2), 1000, 4, full, &bytes), TEMP_QUEUE);
        assert_eq!(m.classify(Some(2), 1000, 5, full | 1, &bytes), TEMP_QUEUE);
        assert_eq!(m.counters().new_to_temp, 2);
    }

    #[test]
    fn probing_moves_a_flow_out_of_the_temporary_queue_when_a_queue_empties() {
        let mut m = map(true, 15_140);
        let bytes = [0u64; 8];
        let full = Q8 & !1;
        assert_eq!(m.classify(Some(5), 1500, 0, full, &bytes), TEMP_QUEUE);
        assert_eq!(m.classify(Some(5), 1500, 1, full | 1, &bytes), TEMP_QUEUE);
        // Queue 6 empties: the next packet probes and moves (line 9).
        assert_eq!(m.classify(Some(5), 1500, 2, full & !(1 << 6), &bytes), 6);
        assert_eq!(m.counters().moved_probe, 1);
        assert_eq!(m.queue_of(5, 2), Some(6));
    }

    #[test]
    fn a_queue_that_empties_expires_its_flows() {
        let mut m = map(true, 15_140);
        let bytes = [0u64; 8];
        assert_eq!(m.classify(Some(7), 1500, 0, 0, &bytes), 1);
        // Queue 1 drains: flow 7 is no longer active there.
        m.on_queue_empty(1);
        assert_eq!(m.queue_of(7, 1), None);
        // A new flow takes queue 1; flow 7's next packet is a new flow too and
        // must not share it: it gets queue 2.
        assert_eq!(m.classify(Some(8), 1500, 1, 0, &bytes), 1);
        assert_eq!(m.classify(Some(7), 1500, 2, 0b10, &bytes), 2);
        assert_eq!(m.counters().expired, 1);
        // When its old queue is still empty, a returning flow gets it back.
        m.on_queue_empty(2);
        assert_eq!(m.classify(Some(7), 1500, 3, 0b10, &bytes), 2);
        assert_eq!(m.counters().expired, 2);
    }

    #[test]
    fn temporary_queue_entries_expire_when_the_flow_is_idle() {
        // §VII-B: a flow stalled longer than the timeout is a new flow.
        let mut m = map(true, 2 * 1500);
        let full = Q8 & !1;
        let bytes = [0u64, 1, 1, 1, 1, 1, 1, 1];
        assert_eq!(m.classify(Some(9), 1500, 0, full, &bytes), TEMP_QUEUE);
        // T emptying does not reset the pass counter ...
        m.on_queue_empty(TEMP_QUEUE);
        assert_eq!(m.classify(Some(9), 1500, 50 * US, full, &bytes), TEMP_QUEUE);
        assert_eq!(m.classify(Some(9), 1500, 60 * US, full, &bytes), 1);
        // ... but 100 µs of silence does.
        let mut m = map(true, 2 * 1500);
        m.classify(Some(9), 1500, 0, full, &bytes);
        assert_eq!(m.queue_of(9, 100 * US), Some(TEMP_QUEUE));
        assert_eq!(m.queue_of(9, 100 * US + 1), None);
        assert_eq!(
            m.classify(Some(9), 1500, 100 * US + 1, full, &bytes),
            TEMP_QUEUE
        );
        assert_eq!(
            m.classify(Some(9), 1500, 100 * US + 2, full, &bytes),
            TEMP_QUEUE
        );
        assert_eq!(m.counters().expired, 1);
        assert_eq!(m.counters().moved_pass_limit, 0);
    }

    #[test]
    fn without_a_temporary_queue_new_flows_go_to_the_shortest_queue() {
        let mut m = map(false, 0);
        let bytes = [500u64, 400, 300, 200, 100, 600, 700, 800];
        assert_eq!(
            m.classify(Some(1), 100, 0, 0, &bytes),
            0,
            "queue 0 is ordinary"
        );
        assert_eq!(m.classify(Some(2), 100, 0, Q8, &bytes), 4);
        assert_eq!(m.counters().new_to_shortest, 1);
    }

    #[test]
    fn non_ip_and_collisions() {
        let mut m = map(true, 15_140);
        let bytes = [0u64; 8];
        assert_eq!(m.classify(None, 60, 0, 0, &bytes), 0);
        assert_eq!(m.counters().non_ip, 1);
        // Two hashes with the same low 12 bits share an entry and its queue.
        assert_eq!(m.classify(Some(0x0000_0abc), 100, 0, 0, &bytes), 1);
        assert_eq!(m.classify(Some(0x1000_0abc), 100, 0, 0b10, &bytes), 1);
        assert_eq!(m.counters().collisions, 1);
    }

    #[test]
    fn works_with_128_queues() {
        let mut m = FlowMap::new(FlowClassConfig::default(), 128);
        assert_eq!(m.table_entries(), 65_536);
        let bytes = [0u64; 128];
        let mut nonempty = 0u128;
        for f in 0..127u32 {
            let q = m.classify(Some(f), 100, 0, nonempty, &bytes);
            assert_eq!(q, f as usize + 1);
            nonempty |= 1 << q;
        }
        assert_eq!(m.classify(Some(500), 100, 0, nonempty, &bytes), TEMP_QUEUE);
        assert_eq!(m.live_flows(0), 128);
    }
}

//! Typed per-port and per-queue counters (STYLE.md §6): drop and mark reasons
//! index plain arrays; nothing on the per-packet path allocates, hashes or
//! formats. Serialised (serde) as JSON with reason names as keys.
//!
//! Sojourn time is recorded per queue in an HdrHistogram (ns, 1 ns .. 100 s,
//! 2 significant digits — ≈ 1 % resolution, ≈ 30 KB per queue) for every
//! packet that leaves a queue, including those the dequeue AQM then drops:
//! it is the queue's delay, which is what sojourn-based AQMs see.

use hdrhistogram::Histogram;
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::aqm::{DropReason, MarkReason};
use crate::units::{Nanos, SEC};

/// A packet count and its bytes (frame bytes, no wire overhead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PktBytes {
    /// Packets.
    pub pkts: u64,
    /// Bytes.
    pub bytes: u64,
}

impl PktBytes {
    /// Counts one `len`-byte packet.
    #[inline]
    pub fn add(&mut self, len: u32) {
        self.pkts += 1;
        self.bytes += len as u64;
    }
    /// Sum of two counts.
    pub fn plus(self, o: PktBytes) -> PktBytes {
        PktBytes {
            pkts: self.pkts + o.pkts,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// A `[PktBytes; N]` indexed by a reason enum (`reason as usize`),
/// serialised as a map from reason name to count.
macro_rules! reason_counts {
    ($(#[$doc:meta])* $name:ident, $reason:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(pub [PktBytes; $reason::COUNT]);

        impl $name {
            /// Count for one reason.
            pub fn get(&self, r: $reason) -> PktBytes {
                self.0[r as usize]
            }
            /// All reasons together.
            pub fn total(&self) -> PktBytes {
                self.0.iter().fold(PktBytes::default(), |a, &b| a.plus(b))
            }
            #[inline]
            pub(crate) fn add(&mut self, r: $reason, len: u32) {
                self.0[r as usize].add(len);
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some($reason::COUNT))?;
                for r in $reason::ALL {
                    m.serialize_entry(r.name(), &self.get(r))?;
                }
                m.end()
            }
        }
    };
}

reason_counts!(
    /// Drops by [`DropReason`].
    DropCounts,
    DropReason
);
reason_counts!(
    /// Marks by [`MarkReason`].
    MarkCounts,
    MarkReason
);

/// Sojourn-time histogram (ns); serialises as count / p50 / p99 / max in µs.
#[derive(Clone, Debug)]
pub struct Sojourn(Histogram<u64>);

impl Default for Sojourn {
    fn default() -> Self {
        Sojourn(Histogram::new_with_bounds(1, 100 * SEC, 2).expect("valid histogram bounds"))
    }
}

impl Sojourn {
    /// Records one sojourn (values beyond 100 s are clamped).
    #[inline]
    pub fn record(&mut self, ns: Nanos) {
        self.0.saturating_record(ns.max(1));
    }
    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }
    /// Quantile `q` (0..=1) in µs (0 when empty).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.value_at_quantile(q) as f64 / 1e3
        }
    }
    /// Median in µs.
    pub fn p50_us(&self) -> f64 {
        self.quantile_us(0.5)
    }
    /// 99th percentile in µs.
    pub fn p99_us(&self) -> f64 {
        self.quantile_us(0.99)
    }
    /// Maximum in µs (within the histogram's 1 % resolution).
    pub fn max_us(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.max() as f64 / 1e3
        }
    }
    /// The histogram itself (ns).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.0
    }
    fn clear(&mut self) {
        self.0.reset();
    }
}

/// A sojourn histogram reduced to what the counters report (µs): the copy the
/// data path publishes instead of the histogram itself, which is too large to
/// copy and too slow to turn into JSON on the data path's thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SojournSummary {
    /// Number of samples.
    pub count: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
}

impl Sojourn {
    /// The summary the counters report.
    pub fn summary(&self) -> SojournSummary {
        SojournSummary {
            count: self.count(),
            p50_us: self.p50_us(),
            p99_us: self.p99_us(),
            max_us: self.max_us(),
        }
    }
}

impl Serialize for Sojourn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Sojourn", 4)?;
        st.serialize_field("count", &self.count())?;
        st.serialize_field("p50_us", &self.p50_us())?;
        st.serialize_field("p99_us", &self.p99_us())?;
        st.serialize_field("max_us", &self.max_us())?;
        st.end()
    }
}

/// Counters of one queue, or of the whole port (sums over its queues).
///
/// `S` is how sojourn times are kept: the live histogram on the data path,
/// or its [`SojournSummary`] in a published copy ([`QueueCounters::summary`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct QueueCounters<S = Sojourn> {
    /// Frames handed to `enqueue` (admitted or not).
    pub arrived: PktBytes,
    /// Frames admitted into the queue.
    pub enqueued: PktBytes,
    /// Frames transmitted (returned by `dequeue`).
    pub dequeued: PktBytes,
    /// Frames dropped, by reason (at enqueue and at dequeue).
    pub dropped: DropCounts,
    /// AQM mark verdicts applied as CE, by reason (including packets that
    /// were already CE, also counted in `already_ce`).
    pub marked: MarkCounts,
    /// Mark verdicts on packets that already carried CE.
    pub already_ce: PktBytes,
    /// Mark verdicts on Not-ECT packets let through (`NotEctPolicy::Pass`).
    pub not_ect_passed: PktBytes,
    /// Non-IP frames (ARP, ...) an AQM wanted marked: passed unmarked.
    pub non_ip_unmarked: PktBytes,
    /// Frames released by `drain` at shutdown (not drops).
    pub drained: PktBytes,
    /// DWRR round events (the queue was granted its quantum).
    pub rounds: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_pkts: u32,
    /// Largest backlog seen, bytes.
    pub max_backlog_bytes: u64,
    /// Largest backlog seen, packets.
    pub max_backlog_pkts: u32,
    /// Sojourn time of packets leaving the queue.
    pub sojourn: S,
}

impl QueueCounters {
    #[inline]
    pub(crate) fn grow(&mut self, len: u32) {
        self.backlog_bytes += len as u64;
        self.backlog_pkts += 1;
        self.max_backlog_bytes = self.max_backlog_bytes.max(self.backlog_bytes);
        self.max_backlog_pkts = self.max_backlog_pkts.max(self.backlog_pkts);
    }
    #[inline]
    pub(crate) fn shrink(&mut self, len: u32) {
        self.backlog_bytes -= len as u64;
        self.backlog_pkts -= 1;
    }
    pub(crate) fn reset_backlog(&mut self) {
        self.backlog_bytes = 0;
        self.backlog_pkts = 0;
    }
    /// A copy with the sojourn histogram reduced to its summary: what the
    /// data path publishes (same JSON).
    pub fn summary(&self) -> QueueCounters<SojournSummary> {
        QueueCounters {
            arrived: self.arrived,
            enqueued: self.enqueued,
            dequeued: self.dequeued,
            dropped: self.dropped,
            marked: self.marked,
            already_ce: self.already_ce,
            not_ect_passed: self.not_ect_passed,
            non_ip_unmarked: self.non_ip_unmarked,
            drained: self.drained,
            rounds: self.rounds,
            backlog_bytes: self.backlog_bytes,
            backlog_pkts: self.backlog_pkts,
            max_backlog_bytes: self.max_backlog_bytes,
            max_backlog_pkts: self.max_backlog_pkts,
            sojourn: self.sojourn.summary(),
        }
    }
    /// Zeroes the statistics (not the current backlog).
    pub fn clear(&mut self) {
        let (b, p) = (self.backlog_bytes, self.backlog_pkts);
        self.sojourn.clear();
        let sojourn = std::mem::take(&mut self.sojourn);
        *self = QueueCounters {
            backlog_bytes: b,
            backlog_pkts: p,
            max_backlog_bytes: b,
            max_backlog_pkts: p,
            sojourn,
            ..Default::default()
        };
    }
}

/// All counters of an egress port (`S`: as in [`QueueCounters`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PortCounters<S = Sojourn> {
    /// The whole port.
    pub port: QueueCounters<S>,
    /// Per queue.
    pub queues: Vec<QueueCounters<S>>,
}

impl PortCounters {
    pub(crate) fn new(queues: usize) -> Self {
        PortCounters {
            port: QueueCounters::default(),
            queues: vec![QueueCounters::default(); queues],
        }
    }
    /// Applies `f` to the counters of queue `q` and to the port's.
    #[inline]
    pub(crate) fn count(&mut self, q: usize, f: impl Fn(&mut QueueCounters)) {
        f(&mut self.queues[q]);
        f(&mut self.port);
    }
    /// The published copy: every sojourn histogram reduced to its summary.
    pub fn summary(&self) -> PortCounters<SojournSummary> {
        PortCounters {
            port: self.port.summary(),
            queues: self.queues.iter().map(QueueCounters::summary).collect(),
        }
    }
    /// Zeroes the statistics of the port and every queue (not the backlog).
    pub fn clear(&mut self) {
        self.port.clear();
        self.queues.iter_mut().for_each(QueueCounters::clear);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_reason_names_and_sojourn() {
        let mut c: QueueCounters = QueueCounters::default();
        c.dropped.add(DropReason::BufferFull, 1500);
        c.marked.add(MarkReason::Sojourn, 100);
        for ns in [1_000, 2_000, 100_000] {
            c.sojourn.record(ns);
        }
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["dropped"]["buffer_full"]["bytes"], 1500);
        assert_eq!(j["marked"]["sojourn"]["pkts"], 1);
        assert_eq!(j["sojourn"]["count"], 3);
        let p50 = j["sojourn"]["p50_us"].as_f64().unwrap();
        assert!((p50 - 2.0).abs() < 0.05, "{p50}");
        let max = j["sojourn"]["max_us"].as_f64().unwrap();
        assert!((max - 100.0).abs() < 1.0, "{max}");
        assert_eq!(c.dropped.total().pkts, 1);
        // The published summary renders the same JSON.
        assert_eq!(serde_json::to_value(c.summary()).unwrap(), j);
        let mut p = PortCounters::new(2);
        p.count(1, |q| q.sojourn.record(5_000));
        p.count(1, |q| q.enqueued.add(100));
        let full = serde_json::to_value(&p).unwrap();
        assert_eq!(serde_json::to_value(p.summary()).unwrap(), full);
        assert_eq!(full["queues"][1]["sojourn"]["count"], 1);
    }
}

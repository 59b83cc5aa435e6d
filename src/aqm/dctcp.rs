//! DCTCP-style single-threshold ECN marking ("DCTCP-RED").
//!
//! Alizadeh et al., "Data Center TCP", SIGCOMM 2010, as summarised in
//! TCN paper §2.1: RED with instantaneous occupancy and K_min = K_max = K;
//! "an arriving packet gets ECN marked only when the instantaneous buffer
//! occupancy is larger than K" — strictly larger. The standard threshold is
//!
//! ```text
//!     K = C × RTT × λ            (TCN paper Eq. 1; ECN♯ paper Eq. 1)
//! ```
//!
//! with λ = 1 by default (TCN paper §6.1 testbed: 32 KB for 1 Gbit/s, 250 µs).
//!
//! * Occupancy: per-queue or per-port (TCN paper §3.2.1 / §3.2.2).
//! * Which bytes count: the authors' prototype (the MQ-ECN/TCN `sch_dwrr`
//!   qdisc) compares *after* adding the arriving packet (`len_bytes > K`), so
//!   by default the occupancy is what is queued **plus** the arriving packet;
//!   `count_arriving = false` compares only what was already queued.
//! * Dequeue variant (Wu et al., "Tuning ECN for data center networks",
//!   CoNEXT 2012, discussed in TCN paper §4.3): the departing packet is marked
//!   when the queue it leaves behind is larger than K.
//!
//! Units: K in bytes (or packets with `unit = "packets"`).

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_size, ser_size};
use super::{Aqm, LengthUnit, MarkReason, Occupancy, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{Nanos, Rate};
use serde::{Deserialize, Serialize};

/// Where the decision is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// On arrival (DCTCP).
    #[default]
    Enqueue,
    /// On departure (dequeue marking, Wu et al.).
    Dequeue,
}

/// DCTCP-ECN parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Marking threshold K (bytes, or packets).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub k: u64,
    /// `bytes` or `packets`.
    pub unit: LengthUnit,
    /// `queue` (per-queue) or `port` (per-port) occupancy.
    pub occupancy: Occupancy,
    /// `enqueue` (default) or `dequeue`.
    pub side: Side,
    /// At enqueue, count the arriving packet in the occupancy (prototype behaviour).
    pub count_arriving: bool,
}

impl Default for Config {
    /// 1 Gbit/s, RTT 250 µs, λ = 1: K = 31 250 bytes.
    fn default() -> Self {
        Config::for_link(Rate::gbit(1), 250_000, 1.0)
    }
}

/// K = C × RTT × λ (TCN paper Eq. 1), in bytes.
pub fn standard_threshold_bytes(rate: Rate, rtt_ns: Nanos, lambda: f64) -> u64 {
    (rate.bytes_in(rtt_ns) as f64 * lambda).round() as u64
}

impl Config {
    /// Defaults for a link: K = λ·C·RTT bytes, per-queue, at enqueue.
    pub fn for_link(rate: Rate, rtt_ns: Nanos, lambda: f64) -> Self {
        Config {
            k: standard_threshold_bytes(rate, rtt_ns, lambda),
            unit: LengthUnit::Bytes,
            occupancy: Occupancy::Queue,
            side: Side::Enqueue,
            count_arriving: true,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.k == 0 {
            return Err(
                "dctcp: k = 0 would mark every packet; give a threshold such as k=32kb".into(),
            );
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        let side = match self.side {
            Side::Enqueue => "enqueue",
            Side::Dequeue => "dequeue",
        };
        let occ = match self.occupancy {
            Occupancy::Queue => "queue",
            Occupancy::Port => "port",
        };
        let unit = match self.unit {
            LengthUnit::Bytes => "B",
            LengthUnit::Packets => "pkts",
        };
        let arriving = if self.count_arriving && self.side == Side::Enqueue {
            " (incl. the arriving packet)"
        } else {
            ""
        };
        format!(
            "dctcp: mark at {side} iff {occ} occupancy{arriving} > K = {} {unit} (TCN paper §2.1 Eq. 1)",
            self.k
        )
    }
}

/// Counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Packets decided on.
    pub packets: u64,
    /// Marks.
    pub marks: u64,
}

/// A DCTCP-ECN instance for one port (stateless but for counters).
#[derive(Clone, Debug)]
pub struct Dctcp {
    params: Config,
    counters: Counters,
}

impl Dctcp {
    /// Builds from a validated config.
    pub fn new(params: Config) -> Self {
        Dctcp {
            params,
            counters: Counters::default(),
        }
    }
    /// Internal state for the live counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "dctcp", "params": self.params, "counters": self.counters })
    }
    fn decide(&mut self, occupancy: u64) -> Verdict {
        self.counters.packets += 1;
        if occupancy > self.params.k {
            self.counters.marks += 1;
            Verdict::Mark(MarkReason::Threshold)
        } else {
            Verdict::Pass
        }
    }
}

impl Aqm for Dctcp {
    fn on_enqueue(
        &mut self,
        pkt: &Packet,
        q: &QueueCtx,
        _now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        if self.params.side != Side::Enqueue {
            return Verdict::Pass;
        }
        let mut occ = q.length(self.params.occupancy, self.params.unit);
        if self.params.count_arriving {
            occ += match self.params.unit {
                LengthUnit::Bytes => pkt.len as u64,
                LengthUnit::Packets => 1,
            };
        }
        self.decide(occ)
    }
    fn on_dequeue(
        &mut self,
        _pkt: &Packet,
        q: &QueueCtx,
        _now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        if self.params.side != Side::Dequeue {
            return Verdict::Pass;
        }
        let occ = q.length(self.params.occupancy, self.params.unit);
        self.decide(occ)
    }
}

impl AqmParams for Config {
    type Instance = Dctcp;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("k", "marking threshold K = λ·C·RTT, bytes (or packets)"),
        ("unit", "bytes or packets: the unit of k"),
        (
            "occupancy",
            "queue (per-queue) or port (per-port) occupancy",
        ),
        (
            "side",
            "enqueue (the arriving packet) or dequeue (what the departing one leaves)",
        ),
        (
            "count_arriving",
            "true: at enqueue the arriving packet counts in the occupancy (prototype)",
        ),
    ];
    const LENGTH_KEYS: &'static [&'static str] = &["k"];
    const SIZE_KEYS: &'static [&'static str] = &["k"];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_link(env.rate, env.rtt_ns, 1.0)
    }
    fn build(&self, _env: &AqmEnv) -> Result<Dctcp, AqmConfigError> {
        Ok(Dctcp::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};

    #[test]
    fn standard_threshold_matches_tcn_testbed() {
        // TCN paper §6.1: 1 Gbit/s, RTT ≈ 250 µs → ~32 KB.
        assert_eq!(
            standard_threshold_bytes(Rate::gbit(1), 250_000, 1.0),
            31_250
        );
        // §3.3: 10 Gbit/s × 100 µs = 125 KB.
        assert_eq!(
            standard_threshold_bytes(Rate::gbit(10), 100_000, 1.0),
            125_000
        );
    }

    #[test]
    fn strictly_larger_than_k_including_arrival() {
        let mut a = Dctcp::new(Config {
            k: 30_000,
            ..Config::default()
        });
        let mut rng = SimRng::new(1);
        // 28 500 queued + 1500 arriving = 30 000 = K: not marked.
        assert_eq!(
            a.on_enqueue(&ect(1500, 0), &ctx(0, 28_500, 19), 0, &mut rng),
            Verdict::Pass
        );
        // One more byte: marked.
        assert_eq!(
            a.on_enqueue(&ect(1500, 0), &ctx(0, 28_501, 20), 0, &mut rng),
            Verdict::Mark(MarkReason::Threshold)
        );
        // Without counting the arriving packet, 30 000 queued is still not > K.
        let mut b = Dctcp::new(Config {
            k: 30_000,
            count_arriving: false,
            ..Config::default()
        });
        assert_eq!(
            b.on_enqueue(&ect(1500, 0), &ctx(0, 30_000, 20), 0, &mut rng),
            Verdict::Pass
        );
        assert_ne!(
            b.on_enqueue(&ect(1500, 0), &ctx(0, 30_001, 20), 0, &mut rng),
            Verdict::Pass
        );
    }

    #[test]
    fn per_port_vs_per_queue_occupancy() {
        let mut rng = SimRng::new(1);
        // Queue 1 holds little, the port holds a lot (queue 0 is backlogged).
        let q = QueueCtx {
            queue: 1,
            queue_bytes: 3000,
            queue_pkts: 2,
            port_bytes: 60_000,
            port_pkts: 40,
            active_queues: 2,
        };
        let mut per_queue = Dctcp::new(Config {
            k: 30_000,
            ..Config::default()
        });
        let mut per_port = Dctcp::new(Config {
            k: 30_000,
            occupancy: Occupancy::Port,
            ..Config::default()
        });
        assert_eq!(
            per_queue.on_enqueue(&ect(1500, 0), &q, 0, &mut rng),
            Verdict::Pass
        );
        // TCN paper §3.2.2: per-port marks queue 1 because of queue 0's backlog.
        assert_ne!(
            per_port.on_enqueue(&ect(1500, 0), &q, 0, &mut rng),
            Verdict::Pass
        );
    }

    #[test]
    fn dequeue_variant_reads_what_is_left() {
        let mut rng = SimRng::new(1);
        let mut a = Dctcp::new(Config {
            k: 10,
            unit: LengthUnit::Packets,
            side: Side::Dequeue,
            ..Config::default()
        });
        assert_eq!(
            a.on_enqueue(&ect(1500, 0), &ctx(0, 0, 50), 0, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            a.on_dequeue(&ect(1500, 0), &ctx(0, 0, 10), 0, &mut rng),
            Verdict::Pass
        );
        assert_ne!(
            a.on_dequeue(&ect(1500, 0), &ctx(0, 0, 11), 0, &mut rng),
            Verdict::Pass
        );
    }
}

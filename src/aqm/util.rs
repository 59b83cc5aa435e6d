//! Serde helpers shared by the AQM configs: durations and sizes are written
//! as tc-style strings (`"50us"`, `"32kb"`) and parsed with [`crate::units`];
//! a bare integer is accepted too (nanoseconds / bytes) so that a config can
//! be serialised and read back.

use crate::units::{fmt_duration, parse_duration, parse_size, Nanos};
use serde::{de, Deserialize, Deserializer, Serializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrInt {
    S(String),
    I(u64),
}

/// Reads a duration: `"250us"`, `"1.5ms"`, or an integer number of ns.
pub fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::S(s) => parse_duration(&s).map_err(de::Error::custom),
        StrOrInt::I(i) => Ok(i),
    }
}

/// Writes a duration as a tc-style string that [`de_duration`] reads back.
pub fn ser_duration<S: Serializer>(v: &Nanos, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fmt_duration(*v))
}

/// Reads a size: `"32kb"`, `"1500"`, or an integer number of bytes (packets
/// when the AQM counts packets).
pub fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::S(s) => parse_size(&s).map_err(de::Error::custom),
        StrOrInt::I(i) => Ok(i),
    }
}

/// Writes a size as an integer (bytes, or packets).
pub fn ser_size<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(*v)
}

/// Scales a duration by a real factor, rounding to the nearest ns.
pub fn scale_ns(ns: Nanos, factor: f64) -> Nanos {
    (ns as f64 * factor).round() as Nanos
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Packet and context builders for the clock-driven AQM tests.
    use crate::aqm::QueueCtx;
    use crate::packet::Packet;
    use crate::units::Nanos;
    use crate::wire::{Ecn, IpVersion, L3Info};

    /// An ECT(0) IPv4 TCP packet of `len` bytes enqueued at `enq`.
    pub fn ect(len: u32, enq: Nanos) -> Packet {
        with_ecn(len, enq, Ecn::Ect0)
    }
    /// A Not-ECT IPv4 packet of `len` bytes enqueued at `enq`.
    pub fn not_ect(len: u32, enq: Nanos) -> Packet {
        with_ecn(len, enq, Ecn::NotEct)
    }
    fn with_ecn(len: u32, enq: Nanos, ecn: Ecn) -> Packet {
        let l3 = L3Info {
            version: IpVersion::V4,
            offset: 14,
            dscp: 0,
            ecn,
            protocol: 6,
            flow_hash: 1,
            tcp: None,
        };
        let mut p = Packet::new(0, len, Some(l3), 0);
        p.enqueue_ns = enq;
        p
    }
    /// Context for queue `queue` holding `bytes` / `pkts`, port likewise.
    pub fn ctx(queue: usize, bytes: u64, pkts: u32) -> QueueCtx {
        QueueCtx {
            queue,
            queue_bytes: bytes,
            queue_pkts: pkts,
            port_bytes: bytes,
            port_pkts: pkts,
            active_queues: 1,
        }
    }
}

//! Serde helpers shared by the AQM configs: durations and sizes are written
//! as tc-style strings (`"50us"`, `"32kb"`) and parsed with [`crate::units`].
//!
//! A time must carry its unit (`crate::units`, "One rule"): a bare number
//! other than 0 is refused here, whichever way it came (`--aqm-opt`, a
//! config file, a scenario, a topology file). A size is serialised as a
//! plain integer (bytes, or packets where the AQM counts packets) so a
//! config reads back; whether a bare number given by the user may stand —
//! only as a count of packets — is decided where the options are applied
//! (`aqm::config::apply`), which knows the AQM's `unit`.

use crate::units::{fmt_duration, parse_duration, parse_size, Nanos, Quantity, UnitError};
use serde::{de, Deserialize, Deserializer, Serializer};

/// What an option's value can be in TOML.
#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrNum {
    S(String),
    I(i64),
    F(f64),
}

/// Reads a duration: `"250us"`, `"1.5ms"`, `"0"` or `0`. A bare number
/// other than 0 is refused with a message that says how to write it.
pub fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
    match StrOrNum::deserialize(d)? {
        StrOrNum::S(s) => parse_duration(&s).map_err(de::Error::custom),
        StrOrNum::I(0) => Ok(0),
        StrOrNum::I(i) => Err(de::Error::custom(UnitError::needs_unit(
            Quantity::Time,
            &i.to_string(),
        ))),
        StrOrNum::F(0.0) => Ok(0),
        StrOrNum::F(f) => Err(de::Error::custom(UnitError::needs_unit(
            Quantity::Time,
            &f.to_string(),
        ))),
    }
}

/// Writes a duration as a tc-style string that [`de_duration`] reads back.
pub fn ser_duration<S: Serializer>(v: &Nanos, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fmt_duration(*v))
}

/// Reads a size: `"32kb"`, `"1500b"`, or a whole number — bytes as
/// serialised, or packets where the AQM counts packets (the user's bare
/// numbers are checked before this, by `aqm::config::apply`).
pub fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match StrOrNum::deserialize(d)? {
        StrOrNum::S(s) => parse_size(&s).map_err(de::Error::custom),
        StrOrNum::I(i) => u64::try_from(i)
            .map_err(|_| de::Error::custom(format!("{i} is negative: give a size such as 32kb"))),
        StrOrNum::F(f) => Err(de::Error::custom(format!(
            "{f} is not a whole number: give a size such as 32kb, or a whole number of packets"
        ))),
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

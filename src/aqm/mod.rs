//! Active queue management: the trait every AQM implements, its verdicts and
//! the typed reasons that index the drop / mark counters.
//!
//! An AQM only *decides*. It returns a [`Verdict`]; the egress port applies it
//! in one place (`port`): `Mark` becomes CE on an ECN-capable packet; a Not-ECT
//! one passes unmarked (the prototypes' behaviour, the default) or is dropped
//! (`DropReason::NotEctMark`) with `--not-ect drop`; `Drop` frees the frame and
//! counts the reason.
//!
//! Time and randomness are arguments (`now`, `rng`); an AQM never reads a clock.
//! One instance serves a whole port and keeps per-queue state itself, because
//! some schemes are per-port (DCTCP port occupancy) and some per-queue.

use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::Nanos;

/// What an AQM wants done with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Leave it alone.
    Pass,
    /// Set CE (a Not-ECT packet passes, or is dropped with `--not-ect drop`).
    Mark(MarkReason),
    /// Drop it.
    Drop(DropReason),
}

/// Why a packet was CE-marked. Indexes plain counter arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MarkReason {
    /// Occupancy above a fixed threshold (DCTCP-ECN K, RED above max_th).
    Threshold = 0,
    /// A RED-style probabilistic decision (RED, PRED, probabilistic TCN).
    Probabilistic,
    /// Sojourn time above a threshold (TCN, ECN# instantaneous).
    Sojourn,
    /// A standing queue (ECN# persistent-queue logic, CoDel control law).
    Persistent,
    /// Above a dynamically computed threshold (MQ-ECN K_i, DiffECN K_p).
    Dynamic,
    /// A test hook marking every n-th packet (`--mark-every`).
    Forced,
}

impl MarkReason {
    /// Number of reasons (size of counter arrays).
    pub const COUNT: usize = 6;
    /// All reasons, in index order.
    pub const ALL: [MarkReason; Self::COUNT] = [
        MarkReason::Threshold,
        MarkReason::Probabilistic,
        MarkReason::Sojourn,
        MarkReason::Persistent,
        MarkReason::Dynamic,
        MarkReason::Forced,
    ];
    /// Short name for counters output.
    pub fn name(self) -> &'static str {
        match self {
            MarkReason::Threshold => "threshold",
            MarkReason::Probabilistic => "probabilistic",
            MarkReason::Sojourn => "sojourn",
            MarkReason::Persistent => "persistent",
            MarkReason::Dynamic => "dynamic",
            MarkReason::Forced => "forced",
        }
    }
}

/// Why a frame was dropped. Indexes plain counter arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// The port's shared buffer had no room (drop-tail).
    BufferFull = 0,
    /// The queue's own limit was reached.
    QueueLimit,
    /// The AQM decided to drop (RED in drop mode, CoDel on Not-ECT, ...).
    Aqm,
    /// The AQM asked for a mark but the packet is Not-ECT.
    NotEctMark,
    /// Shorter than an Ethernet header / unusable.
    Malformed,
    /// Larger than the port can carry (frame > UMEM frame or MTU).
    TooBig,
    /// No UMEM frame free to copy a flooded frame into.
    NoFrame,
    /// Held too long (R-AQM: ACKs older than 5 ms in the VIQ).
    Stale,
    /// The emulated host link's queue was full (`--ingress-rate`).
    IngressFull,
    /// R-AQM's virtual input queue was full (a pure ACK, at ingress).
    ViqFull,
}

impl DropReason {
    /// Number of reasons (size of counter arrays).
    pub const COUNT: usize = 10;
    /// All reasons, in index order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::BufferFull,
        DropReason::QueueLimit,
        DropReason::Aqm,
        DropReason::NotEctMark,
        DropReason::Malformed,
        DropReason::TooBig,
        DropReason::NoFrame,
        DropReason::Stale,
        DropReason::IngressFull,
        DropReason::ViqFull,
    ];
    /// Short name for counters output.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::BufferFull => "buffer_full",
            DropReason::QueueLimit => "queue_limit",
            DropReason::Aqm => "aqm",
            DropReason::NotEctMark => "not_ect_mark",
            DropReason::Malformed => "malformed",
            DropReason::TooBig => "too_big",
            DropReason::NoFrame => "no_frame",
            DropReason::Stale => "stale",
            DropReason::IngressFull => "ingress_full",
            DropReason::ViqFull => "viq_full",
        }
    }
}

/// Occupancy an AQM may read when it decides.
///
/// At enqueue the numbers exclude the arriving packet; at dequeue they exclude
/// the departing one (what is left behind it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCtx {
    /// Queue index within the port.
    pub queue: usize,
    /// Bytes in this queue.
    pub queue_bytes: u64,
    /// Packets in this queue.
    pub queue_pkts: u32,
    /// Bytes in the whole port buffer (all queues).
    pub port_bytes: u64,
    /// Packets in the whole port buffer.
    pub port_pkts: u32,
    /// Queues on this port that currently hold packets.
    pub active_queues: u32,
}

/// The hooks an AQM may implement; every hook has a do-nothing default.
pub trait Aqm {
    /// A packet is about to join queue `q.queue`.
    fn on_enqueue(
        &mut self,
        _pkt: &Packet,
        _q: &QueueCtx,
        _now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        Verdict::Pass
    }
    /// A packet has left queue `q.queue` and is about to be transmitted.
    fn on_dequeue(
        &mut self,
        _pkt: &Packet,
        _q: &QueueCtx,
        _now: Nanos,
        _rng: &mut SimRng,
    ) -> Verdict {
        Verdict::Pass
    }
    /// A round-robin scheduler started serving `queue` in a new round
    /// (it was given its quantum). MQ-ECN measures T_round from these.
    fn on_round(&mut self, _queue: usize, _now: Nanos) {}
    /// The port's buffer became empty at `now`.
    fn on_idle(&mut self, _now: Nanos) {}
    /// Time passes, with or without packets: the port calls this on every
    /// switch poll (at least once per data-path pass). AQMs with measurement
    /// periods (PRED's FCS and QLA, DiffECN's flow counting) close their
    /// periods here, so a period that sees no packet still ends. Must be cheap
    /// when nothing is due (compare `now` with the next boundary).
    fn on_tick(&mut self, _now: Nanos) {}
    /// The next time `on_tick` has work (a period boundary); an event-driven
    /// data path wakes up for it. None: nothing scheduled.
    fn next_tick(&self) -> Option<Nanos> {
        None
    }
    /// Internal state worth plotting over time (N_flow, K_p, slope, ...), as
    /// `(name, value)` pairs; sampled into the switch's per-port time series.
    /// Names are fixed strings (snake_case); the same set every call.
    fn gauges(&self, _emit: &mut dyn FnMut(&'static str, f64)) {}
}

/// A boxed AQM is an AQM (PRED's instance is boxed to keep [`AqmKind`] small).
impl<A: Aqm + ?Sized> Aqm for Box<A> {
    #[inline]
    fn on_enqueue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        (**self).on_enqueue(pkt, q, now, rng)
    }
    #[inline]
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        (**self).on_dequeue(pkt, q, now, rng)
    }
    #[inline]
    fn on_round(&mut self, queue: usize, now: Nanos) {
        (**self).on_round(queue, now)
    }
    #[inline]
    fn on_idle(&mut self, now: Nanos) {
        (**self).on_idle(now)
    }
    #[inline]
    fn on_tick(&mut self, now: Nanos) {
        (**self).on_tick(now)
    }
    #[inline]
    fn next_tick(&self) -> Option<Nanos> {
        (**self).next_tick()
    }
    fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        (**self).gauges(emit)
    }
}

pub mod codel;
pub mod config;
pub mod dctcp;
pub mod diffecn;
pub mod droptail;
pub mod ecnsharp;
pub mod flowcount;
#[cfg(test)]
mod invariants;
pub mod mqecn;
pub mod params;
pub mod pred;
pub mod red;
pub mod tcn;
pub mod util;

pub use config::{AqmConfig, AqmKind};
pub use params::{AqmConfigError, AqmEnv, AqmParams, PortNeeds};

/// Which occupancy a queue-length AQM compares with its threshold
/// (TCN paper §3.2: per-queue vs per-port ECN/RED).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Occupancy {
    /// The packet's own queue (`QueueCtx::queue_bytes` / `queue_pkts`).
    #[default]
    Queue,
    /// The whole port buffer (`QueueCtx::port_bytes` / `port_pkts`).
    Port,
}

/// Unit in which a queue length is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LengthUnit {
    /// Bytes of frames.
    #[default]
    Bytes,
    /// Packets (frames).
    Packets,
}

impl QueueCtx {
    /// The occupancy `occ` counted in `unit` (what is queued, excluding the
    /// packet being decided on).
    pub fn length(&self, occ: Occupancy, unit: LengthUnit) -> u64 {
        match (occ, unit) {
            (Occupancy::Queue, LengthUnit::Bytes) => self.queue_bytes,
            (Occupancy::Queue, LengthUnit::Packets) => self.queue_pkts as u64,
            (Occupancy::Port, LengthUnit::Bytes) => self.port_bytes,
            (Occupancy::Port, LengthUnit::Packets) => self.port_pkts as u64,
        }
    }
}

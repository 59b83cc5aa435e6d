//! What an AQM's file supplies to the registry (`config.rs`) and what it is
//! told: the [`AqmParams`] trait its `Config` implements, the port it runs
//! on ([`AqmEnv`]), what it needs from that port ([`PortNeeds`]) and the
//! setup errors ([`AqmConfigError`]).
//!
//! The AQM files import these from here and nothing from the registry; the
//! registry imports both, so the arrows run one way.

use super::Aqm;
use crate::units::{Nanos, Rate};
use serde::{de::DeserializeOwned, Serialize};

/// What the registry needs from an AQM's parameters (its `Config`), besides
/// the inherent `validate(&self) -> Result<(), String>` and
/// `describe(&self) -> String` every AQM file has.
pub trait AqmParams: Clone + Serialize + DeserializeOwned {
    /// What the port runs: the AQM's state, built from these parameters.
    type Instance: Aqm;
    /// Every `--aqm-opt` key with what it is and its unit, in the order
    /// `--aqm-opt help=1` lists them (a test checks they are exactly the
    /// keys of the parameters).
    const KEYS: &'static [(&'static str, &'static str)];
    /// The keys that are queue lengths (bytes, or packets where the AQM
    /// counts packets): scaling a scenario to another link rate multiplies
    /// them with the rate so a threshold keeps its drain time
    /// (`softswitch-exp run --rate`). Times, probabilities, slopes, weights
    /// and table sizes are not lengths.
    const LENGTH_KEYS: &'static [&'static str] = &[];
    /// The keys that are sizes read with tc units (`32kb`, `1514b`): in
    /// bytes, or — the ones that are also [`Self::LENGTH_KEYS`] — in
    /// packets when the AQM's `unit` is `packets`. A bare number is refused
    /// for them unless it counts packets (`crate::units`, "One rule").
    const SIZE_KEYS: &'static [&'static str] = &[];
    /// What the AQM needs from its port beyond queues and a scheduler.
    const NEEDS: PortNeeds = PortNeeds::NOTHING;
    /// The paper's defaults scaled to the port (see the file's header).
    fn for_port(env: &AqmEnv) -> Self;
    /// The port's instance (the parameters are already validated); refuses
    /// a port it cannot run on, e.g. MQ-ECN without a round-robin scheduler.
    fn build(&self, env: &AqmEnv) -> Result<Self::Instance, AqmConfigError>;
}

/// What an AQM needs from its port, declared by the AQM ([`AqmParams::NEEDS`])
/// so that the configuration never names one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortNeeds {
    /// A queue per flow (`--classify flow`): the classifier the port gets by
    /// default with this AQM, and an error with any other. The text is that
    /// error: what the AQM does that needs them.
    pub per_flow_queues: Option<&'static str>,
    /// Queues per port when `--queues` is not given, if the AQM's paper
    /// names a count (None: 8 with per-flow queues, else 1).
    pub queues: Option<usize>,
}

impl PortNeeds {
    /// Nothing beyond queues and a scheduler.
    pub const NOTHING: PortNeeds = PortNeeds {
        per_flow_queues: None,
        queues: None,
    };
}

/// What port the AQM runs on, and what it is told about it.
#[derive(Clone, Debug, PartialEq)]
pub struct AqmEnv {
    /// Emulated link rate C.
    pub rate: Rate,
    /// Base RTT the thresholds are derived from (`--rtt`), ns.
    pub rtt_ns: Nanos,
    /// Queues on the port.
    pub num_queues: usize,
    /// MTU-sized frame, bytes (T_idle, CoDel MAXPACKET).
    pub mtu_bytes: u32,
    /// Per-queue quanta in bytes — `Some` only for round-robin schedulers.
    pub quanta: Option<Vec<u64>>,
}

/// A setup mistake, with what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AqmConfigError {
    /// `--aqm` name not known.
    #[error("unknown AQM {name:?}; choose one of: {list}", list = known.join(", "))]
    UnknownAqm {
        /// The name given (trimmed, lower case).
        name: String,
        /// The names there are (`config::AQM_NAMES`).
        known: &'static [&'static str],
    },
    /// Override key not a parameter of this AQM.
    #[error("{aqm} has no parameter {key:?}; valid keys: {valid}", valid = if valid.is_empty() { "(none)".to_string() } else { valid.join(", ") })]
    UnknownKey {
        /// AQM name.
        aqm: &'static str,
        /// The key given.
        key: String,
        /// The keys it has.
        valid: Vec<String>,
    },
    /// A value that does not parse for its key.
    #[error("{aqm}: {key}={value}: {msg}")]
    BadValue {
        /// AQM name.
        aqm: &'static str,
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// Why, and what to write instead.
        msg: String,
    },
    /// `validate()` refused the combination.
    #[error("{0}")]
    Invalid(String),
    /// MQ-ECN without a round-robin scheduler.
    #[error("mq-ecn needs a round-robin scheduler (--sched dwrr or sp+dwrr); WFQ and SP have no round (TCN paper §3.3)")]
    NeedsRoundRobin,
    /// PRED on an unshaped port.
    #[error("pred needs a shaped port (--rate): QLA's utility divides the goodput by the link rate C (PRED paper §IV-B)")]
    NeedsRate,
    /// Quanta given for a different number of queues.
    #[error("mq-ecn: {quanta} quanta given for {queues} queues")]
    QuantaMismatch {
        /// Quanta count.
        quanta: usize,
        /// Queue count.
        queues: usize,
    },
}

//! Packet schedulers of an egress port: SP, DWRR, WFQ and the composites
//! SP+DWRR / SP+WFQ, modelled on the TCN software prototype (TCN paper §5,
//! "Packet Schedulers").
//!
//! # Contract with the port (and the shaper)
//!
//! The port owns the queues; a scheduler only sees them through
//! [`QueuesView`] (which queues hold packets, the length of each head).
//! Sending one packet is a two-step transaction, because the token-bucket
//! shaper may refuse the chosen head:
//!
//! 1. [`Scheduler::select`] names the queue whose head goes next. It may do
//!    round-robin bookkeeping (DWRR: grant the quantum to the head of the
//!    active list, rotate a queue that cannot afford its head) but charges
//!    nothing. Calling it again without a commit returns the same queue
//!    (idempotent) as long as no packet arrived in between.
//! 2. [`Scheduler::commit`] charges the packet that left (DWRR deficit,
//!    WFQ virtual time and the next head's finish tag) — called after the
//!    port popped the head, with the length of the new head.
//!
//! [`Scheduler::peek`] answers "which queue would `select` pick?" without
//! changing anything, so `EgressPort::next_ready(&self)` can ask the shaper
//! when that head may go.
//!
//! [`Scheduler::on_enqueue`] tells the scheduler a packet joined a queue
//! (DWRR appends a newly active queue to the active list, WFQ stamps the
//! finish time of a new head).
//!
//! Round events (MQ-ECN, TCN paper §3.3): whenever DWRR grants a queue its
//! quantum — the start of that queue's service in a new round — it records
//! an event; the port drains them with [`Scheduler::take_round_event`] after
//! each `select` and calls `Aqm::on_round(queue, now)`.
//!
//! Queue indices are `0..queues` with at most [`MAX_QUEUES`] queues, so the
//! set of non-empty queues is one `u128` bit mask.
//!
//! Dispatch: [`SchedKind`] is an enum over the five schedulers (no `Box<dyn>`
//! on the per-packet path).

pub mod composite;
pub mod dwrr;
pub mod sp;
pub mod wfq;

use serde::Deserialize;

use crate::units::{parse_size, Nanos};

pub use composite::SpOver;
pub use dwrr::Dwrr;
pub use sp::Sp;
pub use wfq::{Wfq, WfqVtime};

/// Most queues a port may have (the non-empty set is a `u128`).
pub const MAX_QUEUES: usize = 128;

/// Default DWRR quantum in frame bytes: one MTU-sized Ethernet frame (1500 B
/// IP packet + 14 B header). TCN paper §6 uses "equal quantum (1.5KB)" queues.
/// With the default wire-byte accounting ([`SchedBytes::Wire`]) the default
/// quantum is this plus the port's wire overhead: 1538 B with 24 B, the
/// prototype's default (`dwrr_queue_quantum[i] = dwrr_max_pkt_bytes` = 1538,
/// HKUST-SING/TCN-Software `sch_dwrr/params.c`).
pub const DEFAULT_QUANTUM_BYTES: u64 = 1514;

/// What a scheduler charges a packet: DWRR deficits, quanta and WFQ finish
/// tags are in these bytes (`--sched-bytes`).
///
/// The prototypes charge `skb_size(skb) = max(len + 4, 64) + 20` — the bytes
/// the frame takes on the wire (HKUST-SING/TCN-Software and
/// HKUST-SING/MQ-ECN-Software `sch_dwrr/main.c`, `sch_wfq/main.c`) — the same
/// unit as the token bucket's time and so as MQ-ECN's round time. `Wire`
/// (default) charges `len + overhead`, the port shaper's own per-frame cost
/// (`--overhead`, 24 B: preamble + SFD 8, FCS 4, gap 12), so quanta, round
/// time and the link rate C are one unit. (The shaper does not pad frames
/// under 60 B to the Ethernet minimum, so neither do we.) `Frame` charges
/// the frame bytes alone, what softswitch did before: then a quantum in
/// frame bytes is divided by a round time in wire time, and MQ-ECN's
/// quantum/T_round falls short of a queue's real share by frame/(frame +
/// overhead) — 1.6 % for 1514 B frames, 27 % for 64 B.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedBytes {
    /// Frame + the port's wire overhead (the prototypes' `skb_size`; default).
    #[default]
    Wire,
    /// Frame bytes only (option; softswitch's earlier accounting).
    Frame,
}

impl SchedBytes {
    /// The name users type.
    pub fn as_str(self) -> &'static str {
        match self {
            SchedBytes::Wire => "wire",
            SchedBytes::Frame => "frame",
        }
    }
    /// Bytes added to each frame's length for a port with `overhead_bytes`.
    pub fn extra(self, overhead_bytes: u32) -> u32 {
        match self {
            SchedBytes::Wire => overhead_bytes,
            SchedBytes::Frame => 0,
        }
    }
}

/// Default WFQ weight.
pub const DEFAULT_WEIGHT: u32 = 1;

/// What a scheduler may know about the port's queues.
pub trait QueuesView {
    /// Bit `q` set ⇔ queue `q` holds at least one packet.
    fn nonempty_mask(&self) -> u128;
    /// Length in bytes of the head packet of queue `q` (None: empty).
    fn head_len(&self, q: usize) -> Option<u32>;
}

/// The operations every scheduler implements (see the module docs for the
/// select / commit contract).
pub trait Scheduler {
    /// Which queue's head packet goes next (None: every queue this scheduler
    /// serves is empty). Does bookkeeping but charges nothing; idempotent
    /// until [`commit`](Scheduler::commit) or a new arrival.
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, now: Nanos) -> Option<usize>;
    /// The queue `select` would return now, without changing any state.
    fn peek<V: QueuesView + ?Sized>(&self, queues: &V) -> Option<usize>;
    /// The head of `queue` (`len` bytes), chosen by `select`, has left;
    /// `next_len` is the length of the queue's new head (None: the queue is
    /// now empty) — WFQ stamps it at once, as the prototype does.
    fn commit(&mut self, queue: usize, len: u32, next_len: Option<u32>, now: Nanos);
    /// A `len`-byte packet joined `queue`, which was empty before if `was_empty`.
    fn on_enqueue(&mut self, queue: usize, len: u32, was_empty: bool, now: Nanos);
    /// Pops one pending "queue started a new round" event (round-robin only).
    fn take_round_event(&mut self) -> Option<usize> {
        None
    }
    /// Debug check of internal invariants against the queues' state.
    fn invariants<V: QueuesView + ?Sized>(&self, _queues: &V, _mtu_bytes: u32) {}
}

/// Pops the lowest set bit of `mask` as a queue index.
#[inline]
pub(crate) fn pop_lowest(mask: &mut u128) -> Option<usize> {
    if *mask == 0 {
        None
    } else {
        let q = mask.trailing_zeros() as usize;
        *mask &= *mask - 1;
        Some(q)
    }
}

/// Mask with the bits of `queues` set.
pub(crate) fn mask_of(queues: impl IntoIterator<Item = usize>) -> u128 {
    queues.into_iter().fold(0u128, |m, q| m | (1u128 << q))
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Which scheduler a port runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SchedName {
    /// Strict priority.
    #[serde(rename = "sp")]
    Sp,
    /// Deficit weighted round robin.
    #[serde(rename = "dwrr")]
    Dwrr,
    /// Weighted fair queueing (the prototype's virtual time, or SCFQ).
    #[serde(rename = "wfq")]
    Wfq,
    /// Strict-priority queues above one DWRR group.
    #[serde(rename = "sp+dwrr")]
    SpDwrr,
    /// Strict-priority queues above one WFQ group.
    #[serde(rename = "sp+wfq")]
    SpWfq,
}

impl SchedName {
    /// Every scheduler, in the order `--help` lists them.
    pub const ALL: [SchedName; 5] = [
        SchedName::Sp,
        SchedName::Dwrr,
        SchedName::Wfq,
        SchedName::SpDwrr,
        SchedName::SpWfq,
    ];
    /// The name users type (`--sched`).
    pub fn as_str(self) -> &'static str {
        match self {
            SchedName::Sp => "sp",
            SchedName::Dwrr => "dwrr",
            SchedName::Wfq => "wfq",
            SchedName::SpDwrr => "sp+dwrr",
            SchedName::SpWfq => "sp+wfq",
        }
    }
}

/// Scheduler configuration (`[sched]` in the TOML file, `--sched`,
/// `--quantum`, `--weights`, `--strict` on the command line).
///
/// Per-queue vectors may be empty (every queue gets the default), hold one
/// value (every queue gets it) or hold exactly one value per queue.
///
/// Priorities: `strict` lists strict-priority queues, highest priority
/// first. For `sp` every queue is strict: the listed ones first in the given
/// order, then the unlisted ones by index (so the default is "lowest index =
/// highest priority"). For `sp+dwrr` / `sp+wfq` the listed queues are strict
/// and all others form the DWRR / WFQ group served when every strict queue is
/// empty; the default is `strict = [0]` (one high-priority queue, as in
/// TCN paper §6.1.3 and §6.2).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedConfig {
    /// Which scheduler.
    pub kind: SchedName,
    /// DWRR quantum per queue in the bytes of `bytes` (default one MTU
    /// frame, [`DEFAULT_QUANTUM_BYTES`] + wire overhead).
    #[serde(default)]
    pub quanta: Vec<u64>,
    /// WFQ weight per queue (positive integers, default 1).
    #[serde(default)]
    pub weights: Vec<u32>,
    /// Strict-priority queues, highest priority first.
    #[serde(default)]
    pub strict: Vec<usize>,
    /// WFQ virtual time rule (default: the TCN prototype's, see `wfq`).
    #[serde(default)]
    pub wfq_vtime: Option<WfqVtime>,
    /// What DWRR / WFQ charge a packet (default wire bytes, as the prototypes).
    #[serde(default)]
    pub bytes: SchedBytes,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig::new(SchedName::Dwrr)
    }
}

/// A scheduler configuration that cannot work, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedConfigError {
    /// Unknown `--sched` name.
    #[error("unknown scheduler {0:?}; use one of: sp, dwrr, wfq, sp+dwrr, sp+wfq")]
    UnknownKind(String),
    /// A comma list could not be read.
    #[error("--{what}: cannot read the list {input:?}: {hint}")]
    BadList {
        /// Which option.
        what: &'static str,
        /// What the user typed.
        input: String,
        /// How to write it.
        hint: &'static str,
    },
    /// A per-queue vector has the wrong length.
    #[error("--{what} lists {got} values but the port has {queues} queues; give one value for all queues or exactly {queues}")]
    WrongLength {
        /// Which vector.
        what: &'static str,
        /// Its length.
        got: usize,
        /// Number of queues.
        queues: usize,
    },
    /// A zero quantum.
    #[error("--quantum: quantum of queue {queue} is 0 B; quanta must be at least 1 B (usually ≥ one MTU frame, e.g. 1514)")]
    ZeroQuantum {
        /// Queue.
        queue: usize,
    },
    /// A zero weight.
    #[error("--weights: weight of queue {queue} is 0; WFQ weights must be positive integers (e.g. --weights 1,2,4)")]
    ZeroWeight {
        /// Queue.
        queue: usize,
    },
    /// A strict queue index out of range.
    #[error("--strict: strict queue {queue} does not exist; the port has queues 0..{queues}")]
    StrictOutOfRange {
        /// Index given.
        queue: usize,
        /// Number of queues.
        queues: usize,
    },
    /// A strict queue listed twice.
    #[error("--strict: strict queue {0} is listed twice")]
    StrictDuplicate(usize),
    /// SP+X with no queue left for the group.
    #[error("{kind} needs at least one queue outside --strict for the {group} group, but all {queues} queues are strict; use --sched sp or fewer strict queues")]
    EmptyGroup {
        /// Scheduler name.
        kind: &'static str,
        /// "DWRR" or "WFQ".
        group: &'static str,
        /// Number of queues.
        queues: usize,
    },
    /// A setting that the chosen scheduler does not use.
    #[error("{option} does not apply to --sched {kind}; {hint}")]
    NotApplicable {
        /// The option given.
        option: &'static str,
        /// Scheduler name.
        kind: &'static str,
        /// Which schedulers use it.
        hint: &'static str,
    },
    /// Unknown `--wfq-vtime` rule.
    #[error("unknown --wfq-vtime {0:?}; use prototype (default: V = largest finish tag assigned, as the TCN prototype) or scfq (self-clocked: V = tag of the packet last sent)")]
    UnknownWfqVtime(String),
    /// Unknown `--sched-bytes` unit.
    #[error("unknown --sched-bytes {0:?}; use wire (default: frame + wire overhead, as the prototypes' skb_size) or frame")]
    UnknownBytes(String),
    /// Too many or too few queues.
    #[error("a port has 1..={max} queues, not {0}", max = MAX_QUEUES)]
    Queues(usize),
}

/// Parses a comma list (`"1514,3028"`, spaces allowed) with `item`.
pub fn parse_list<T>(
    s: &str,
    what: &'static str,
    hint: &'static str,
    item: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, SchedConfigError> {
    let bad = || SchedConfigError::BadList {
        what,
        input: s.to_string(),
        hint,
    };
    if s.trim().is_empty() {
        return Err(bad());
    }
    s.split(',')
        .map(|p| item(p.trim()).ok_or_else(bad))
        .collect()
}

/// `--quantum 1514,3028` or `--quantum 1.5kb` (tc size units allowed). A
/// quantum is bytes per round by definition (as tc's DRR `quantum`), so a
/// bare number is a count of bytes here — the one size that takes one
/// (`crate::units`, "One rule").
pub fn parse_quanta(s: &str) -> Result<Vec<u64>, SchedConfigError> {
    parse_list(
        s,
        "quantum",
        "write bytes per queue separated by commas, e.g. 1514,3028 (units like 3kb allowed)",
        |p| p.parse::<u64>().ok().or_else(|| parse_size(p).ok()),
    )
}

/// `--weights 1,2,4`.
pub fn parse_weights(s: &str) -> Result<Vec<u32>, SchedConfigError> {
    parse_list(
        s,
        "weights",
        "write positive integers separated by commas, e.g. 1,2,4",
        |p| p.parse().ok(),
    )
}

/// `--strict 0,1` (queue indices, highest priority first).
pub fn parse_strict(s: &str) -> Result<Vec<usize>, SchedConfigError> {
    parse_list(
        s,
        "strict",
        "write queue indices separated by commas, highest priority first, e.g. 0,1",
        |p| p.parse().ok(),
    )
}

fn expand<T: Copy>(
    v: &[T],
    default: T,
    queues: usize,
    what: &'static str,
) -> Result<Vec<T>, SchedConfigError> {
    match v.len() {
        0 => Ok(vec![default; queues]),
        1 => Ok(vec![v[0]; queues]),
        n if n == queues => Ok(v.to_vec()),
        n => Err(SchedConfigError::WrongLength {
            what,
            got: n,
            queues,
        }),
    }
}

impl SchedConfig {
    /// `kind` with every per-queue setting at its default.
    pub fn new(kind: SchedName) -> Self {
        SchedConfig {
            kind,
            quanta: Vec::new(),
            weights: Vec::new(),
            strict: Vec::new(),
            wfq_vtime: None,
            bytes: SchedBytes::Wire,
        }
    }

    /// From `--sched sp|dwrr|wfq|sp+dwrr|sp+wfq` (also `sp/dwrr`, case-insensitive).
    pub fn from_cli(name: &str) -> Result<Self, SchedConfigError> {
        let kind = match name.trim().to_ascii_lowercase().replace('/', "+").as_str() {
            "sp" | "prio" | "strict" => SchedName::Sp,
            "dwrr" | "drr" => SchedName::Dwrr,
            "wfq" => SchedName::Wfq,
            "sp+dwrr" => SchedName::SpDwrr,
            "sp+wfq" => SchedName::SpWfq,
            _ => return Err(SchedConfigError::UnknownKind(name.to_string())),
        };
        Ok(SchedConfig::new(kind))
    }

    /// Sets quanta from a `--quantum` string.
    pub fn set_quanta_str(&mut self, s: &str) -> Result<(), SchedConfigError> {
        self.quanta = parse_quanta(s)?;
        Ok(())
    }
    /// Sets weights from a `--weights` string.
    pub fn set_weights_str(&mut self, s: &str) -> Result<(), SchedConfigError> {
        self.weights = parse_weights(s)?;
        Ok(())
    }
    /// Sets the WFQ virtual time rule from a `--wfq-vtime` string.
    pub fn set_wfq_vtime_str(&mut self, s: &str) -> Result<(), SchedConfigError> {
        self.wfq_vtime = Some(
            WfqVtime::from_cli(s)
                .ok_or_else(|| SchedConfigError::UnknownWfqVtime(s.to_string()))?,
        );
        Ok(())
    }
    /// Sets the byte accounting from a `--sched-bytes` string.
    pub fn set_bytes_str(&mut self, s: &str) -> Result<(), SchedConfigError> {
        self.bytes = match s.trim().to_ascii_lowercase().as_str() {
            "wire" => SchedBytes::Wire,
            "frame" => SchedBytes::Frame,
            _ => return Err(SchedConfigError::UnknownBytes(s.to_string())),
        };
        Ok(())
    }
    /// Default quantum on a port with `overhead_bytes` of wire overhead.
    pub fn default_quantum(&self, overhead_bytes: u32) -> u64 {
        DEFAULT_QUANTUM_BYTES + self.bytes.extra(overhead_bytes) as u64
    }
    /// Sets strict queues from a `--strict` string.
    pub fn set_strict_str(&mut self, s: &str) -> Result<(), SchedConfigError> {
        self.strict = parse_strict(s)?;
        Ok(())
    }

    /// The scheduler and the settings that change its behaviour, for the
    /// start-up line (`wfq (vtime prototype)`).
    pub fn describe(&self) -> String {
        let mut s = self.kind.as_str().to_string();
        if self.kind != SchedName::Sp {
            s += &format!(" ({} bytes", self.bytes.as_str());
            if matches!(self.kind, SchedName::Wfq | SchedName::SpWfq) {
                s += &format!(", vtime {}", self.wfq_vtime.unwrap_or_default().as_str());
            }
            s += ")";
        }
        s
    }

    /// Pure round robin (DWRR): the only kind MQ-ECN accepts (TCN paper §6:
    /// "MQ-ECN can only support pure round-robin schedulers").
    pub fn is_round_robin(&self) -> bool {
        self.kind == SchedName::Dwrr
    }

    /// Per-queue quanta for a port of `queues` queues with `overhead_bytes`
    /// of wire overhead, in the unit of `bytes`, for round-robin kinds (DWRR,
    /// and the DWRR group of SP+DWRR); None otherwise or if invalid.
    pub fn quanta(&self, queues: usize, overhead_bytes: u32) -> Option<Vec<u64>> {
        match self.kind {
            SchedName::Dwrr | SchedName::SpDwrr => expand(
                &self.quanta,
                self.default_quantum(overhead_bytes),
                queues,
                "quantum",
            )
            .ok(),
            _ => None,
        }
    }

    /// Per-queue weights for WFQ kinds; None otherwise or if invalid.
    pub fn weights(&self, queues: usize) -> Option<Vec<u32>> {
        match self.kind {
            SchedName::Wfq | SchedName::SpWfq => {
                expand(&self.weights, DEFAULT_WEIGHT, queues, "weights").ok()
            }
            _ => None,
        }
    }

    /// The queue served before every other one whenever it holds packets
    /// (the first strict queue), if the scheduler has one.
    pub fn top_priority_queue(&self, queues: usize) -> Option<usize> {
        self.strict_order(queues).first().copied()
    }

    /// The strict queues, highest priority first, with the defaults applied.
    fn strict_order(&self, queues: usize) -> Vec<usize> {
        match self.kind {
            SchedName::Sp => {
                let mut order = self.strict.clone();
                order.extend((0..queues).filter(|q| !self.strict.contains(q)));
                order
            }
            SchedName::SpDwrr | SchedName::SpWfq if self.strict.is_empty() => vec![0],
            SchedName::SpDwrr | SchedName::SpWfq => self.strict.clone(),
            _ => Vec::new(),
        }
    }

    /// Checks the configuration against a port of `queues` queues.
    pub fn validate(&self, queues: usize) -> Result<(), SchedConfigError> {
        if queues == 0 || queues > MAX_QUEUES {
            return Err(SchedConfigError::Queues(queues));
        }
        let kind = self.kind.as_str();
        let not_applicable = |option, hint| SchedConfigError::NotApplicable { option, kind, hint };
        if !self.quanta.is_empty() && !matches!(self.kind, SchedName::Dwrr | SchedName::SpDwrr) {
            return Err(not_applicable(
                "--quantum",
                "quanta are for dwrr and sp+dwrr (use --weights for wfq)",
            ));
        }
        if !self.weights.is_empty() && !matches!(self.kind, SchedName::Wfq | SchedName::SpWfq) {
            return Err(not_applicable(
                "--weights",
                "weights are for wfq and sp+wfq (use --quantum for dwrr)",
            ));
        }
        if self.wfq_vtime.is_some() && !matches!(self.kind, SchedName::Wfq | SchedName::SpWfq) {
            return Err(not_applicable(
                "--wfq-vtime",
                "the virtual time rule is for wfq and sp+wfq",
            ));
        }
        if !self.strict.is_empty() && matches!(self.kind, SchedName::Dwrr | SchedName::Wfq) {
            return Err(not_applicable(
                "--strict",
                "strict queues need sp, sp+dwrr or sp+wfq",
            ));
        }
        let quanta = expand(&self.quanta, DEFAULT_QUANTUM_BYTES, queues, "quantum")?;
        if let Some(q) = quanta.iter().position(|&x| x == 0) {
            return Err(SchedConfigError::ZeroQuantum { queue: q });
        }
        let weights = expand(&self.weights, DEFAULT_WEIGHT, queues, "weights")?;
        if let Some(q) = weights.iter().position(|&x| x == 0) {
            return Err(SchedConfigError::ZeroWeight { queue: q });
        }
        let mut seen = 0u128;
        for &q in &self.strict {
            if q >= queues {
                return Err(SchedConfigError::StrictOutOfRange { queue: q, queues });
            }
            if seen & (1 << q) != 0 {
                return Err(SchedConfigError::StrictDuplicate(q));
            }
            seen |= 1 << q;
        }
        if matches!(self.kind, SchedName::SpDwrr | SchedName::SpWfq)
            && self.strict_order(queues).len() >= queues
        {
            return Err(SchedConfigError::EmptyGroup {
                kind: self.kind.as_str(),
                group: if self.kind == SchedName::SpDwrr {
                    "DWRR"
                } else {
                    "WFQ"
                },
                queues,
            });
        }
        Ok(())
    }

    /// Builds the scheduler for a port of `queues` queues whose shaper
    /// counts `overhead_bytes` of wire overhead per frame.
    pub fn build(&self, queues: usize, overhead_bytes: u32) -> Result<SchedKind, SchedConfigError> {
        self.validate(queues)?;
        let extra = self.bytes.extra(overhead_bytes);
        let quanta = expand(
            &self.quanta,
            self.default_quantum(overhead_bytes),
            queues,
            "quantum",
        )?;
        let weights = expand(&self.weights, DEFAULT_WEIGHT, queues, "weights")?;
        let strict = self.strict_order(queues);
        let group: Vec<usize> = (0..queues).filter(|q| !strict.contains(q)).collect();
        let vtime = self.wfq_vtime.unwrap_or_default();
        Ok(match self.kind {
            SchedName::Sp => SchedKind::Sp(Sp::new(strict)),
            SchedName::Dwrr => {
                SchedKind::Dwrr(Dwrr::new(&quanta, mask_of(0..queues)).with_extra(extra))
            }
            SchedName::Wfq => {
                SchedKind::Wfq(Wfq::new(&weights, mask_of(0..queues), vtime).with_extra(extra))
            }
            SchedName::SpDwrr => SchedKind::SpDwrr(SpOver::new(
                strict,
                Dwrr::new(&quanta, mask_of(group)).with_extra(extra),
            )),
            SchedName::SpWfq => SchedKind::SpWfq(SpOver::new(
                strict,
                Wfq::new(&weights, mask_of(group), vtime).with_extra(extra),
            )),
        })
    }
}

// ---------------------------------------------------------------------------
// Enum dispatch
// ---------------------------------------------------------------------------

/// One of the five schedulers; dispatches by `match` on the hot path.
#[derive(Clone, Debug)]
pub enum SchedKind {
    /// Strict priority.
    Sp(Sp),
    /// DWRR.
    Dwrr(Dwrr),
    /// WFQ.
    Wfq(Wfq),
    /// SP above a DWRR group.
    SpDwrr(SpOver<Dwrr>),
    /// SP above a WFQ group.
    SpWfq(SpOver<Wfq>),
}

macro_rules! dispatch {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            SchedKind::Sp($s) => $e,
            SchedKind::Dwrr($s) => $e,
            SchedKind::Wfq($s) => $e,
            SchedKind::SpDwrr($s) => $e,
            SchedKind::SpWfq($s) => $e,
        }
    };
}

impl SchedKind {
    /// Which kind this is.
    pub fn name(&self) -> SchedName {
        match self {
            SchedKind::Sp(_) => SchedName::Sp,
            SchedKind::Dwrr(_) => SchedName::Dwrr,
            SchedKind::Wfq(_) => SchedName::Wfq,
            SchedKind::SpDwrr(_) => SchedName::SpDwrr,
            SchedKind::SpWfq(_) => SchedName::SpWfq,
        }
    }
    /// Pure round robin (MQ-ECN's requirement).
    pub fn is_round_robin(&self) -> bool {
        matches!(self, SchedKind::Dwrr(_))
    }
    /// Per-queue quanta of a DWRR (or SP+DWRR group; strict queues report 0).
    pub fn quanta(&self) -> Option<Vec<u64>> {
        match self {
            SchedKind::Dwrr(d) => Some(d.quanta().to_vec()),
            SchedKind::SpDwrr(s) => Some(s.group().quanta().to_vec()),
            _ => None,
        }
    }
    /// Strict-priority rank of `queue` (0 = highest) under SP, SP+DWRR and
    /// SP+WFQ; the DWRR / WFQ group's queues rank below every strict queue
    /// (`usize::MAX`). None for pure DWRR / WFQ, which have no priorities.
    pub fn priority_rank(&self, queue: usize) -> Option<usize> {
        match self {
            SchedKind::Sp(sp) => sp.rank(queue),
            SchedKind::SpDwrr(c) => Some(c.strict().rank(queue).unwrap_or(usize::MAX)),
            SchedKind::SpWfq(c) => Some(c.strict().rank(queue).unwrap_or(usize::MAX)),
            _ => None,
        }
    }
    /// DWRR deficit of `queue` (None for other schedulers / strict queues).
    pub fn deficit(&self, queue: usize) -> Option<u64> {
        match self {
            SchedKind::Dwrr(d) => d.deficit(queue),
            SchedKind::SpDwrr(s) => s.group().deficit(queue),
            _ => None,
        }
    }
}

impl Scheduler for SchedKind {
    #[inline]
    fn select<V: QueuesView + ?Sized>(&mut self, queues: &V, now: Nanos) -> Option<usize> {
        dispatch!(self, s => s.select(queues, now))
    }
    #[inline]
    fn peek<V: QueuesView + ?Sized>(&self, queues: &V) -> Option<usize> {
        dispatch!(self, s => s.peek(queues))
    }
    #[inline]
    fn commit(&mut self, queue: usize, len: u32, next_len: Option<u32>, now: Nanos) {
        dispatch!(self, s => s.commit(queue, len, next_len, now))
    }
    #[inline]
    fn on_enqueue(&mut self, queue: usize, len: u32, was_empty: bool, now: Nanos) {
        dispatch!(self, s => s.on_enqueue(queue, len, was_empty, now))
    }
    #[inline]
    fn take_round_event(&mut self) -> Option<usize> {
        dispatch!(self, s => s.take_round_event())
    }
    fn invariants<V: QueuesView + ?Sized>(&self, queues: &V, mtu_bytes: u32) {
        dispatch!(self, s => s.invariants(queues, mtu_bytes))
    }
}

/// Queues of packet lengths, for scheduler tests and simulations.
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub(crate) struct SimQueues {
    pub q: Vec<std::collections::VecDeque<u32>>,
}

#[cfg(test)]
impl SimQueues {
    pub fn new(n: usize) -> Self {
        SimQueues {
            q: vec![Default::default(); n],
        }
    }
    /// Adds a packet and tells the scheduler.
    pub fn push<S: Scheduler>(&mut self, s: &mut S, q: usize, len: u32, now: Nanos) {
        let was_empty = self.q[q].is_empty();
        self.q[q].push_back(len);
        s.on_enqueue(q, len, was_empty, now);
    }
    /// select + commit: the queue served and the length sent.
    pub fn serve<S: Scheduler>(&mut self, s: &mut S, now: Nanos) -> Option<(usize, u32)> {
        let peeked = s.peek(self);
        let q = s.select(self, now)?;
        assert_eq!(peeked, Some(q), "peek disagrees with select");
        assert_eq!(s.select(self, now), Some(q), "select is not idempotent");
        let len = self.q[q].pop_front().unwrap();
        s.commit(q, len, self.q[q].front().copied(), now);
        Some((q, len))
    }
}

#[cfg(test)]
impl QueuesView for SimQueues {
    fn nonempty_mask(&self) -> u128 {
        mask_of((0..self.q.len()).filter(|&i| !self.q[i].is_empty()))
    }
    fn head_len(&self, q: usize) -> Option<u32> {
        self.q[q].front().copied()
    }
}

/// Keeps every queue of `s` backlogged (lengths from `len`), serves `n`
/// packets checking invariants after each, and returns each queue's share
/// of the bytes sent.
#[cfg(test)]
pub(crate) fn saturated_shares<S: Scheduler>(
    s: &mut S,
    queues: usize,
    n: usize,
    max_len: u32,
    mut len: impl FnMut() -> u32,
) -> Vec<f64> {
    let mut qs = SimQueues::new(queues);
    for q in 0..queues {
        for _ in 0..3 {
            qs.push(s, q, len(), 0);
        }
    }
    let mut bytes = vec![0u64; queues];
    for _ in 0..n {
        let (q, l) = qs.serve(s, 0).unwrap();
        bytes[q] += l as u64;
        qs.push(s, q, len(), 0);
        s.invariants(&qs, max_len);
    }
    let total: u64 = bytes.iter().sum();
    bytes.iter().map(|&b| b as f64 / total as f64).collect()
}

/// Whether every share is within 1 % (relative) of `weights`' proportions.
#[cfg(test)]
pub(crate) fn within_one_percent(shares: &[f64], weights: &[f64]) -> bool {
    let sum: f64 = weights.iter().sum();
    shares
        .iter()
        .zip(weights)
        .all(|(g, w)| (g - w / sum).abs() <= 0.01 * w / sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_names_and_lists() {
        assert_eq!(SchedConfig::from_cli("sp").unwrap().kind, SchedName::Sp);
        assert_eq!(
            SchedConfig::from_cli("SP/DWRR").unwrap().kind,
            SchedName::SpDwrr
        );
        assert_eq!(
            SchedConfig::from_cli("sp+wfq").unwrap().kind,
            SchedName::SpWfq
        );
        let e = SchedConfig::from_cli("fifo").unwrap_err().to_string();
        assert!(e.contains("sp+dwrr"), "{e}");
        assert_eq!(parse_quanta("1514, 3028").unwrap(), vec![1514, 3028]);
        assert_eq!(parse_quanta("3kb").unwrap(), vec![3072]);
        assert_eq!(parse_weights("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_strict("0,1").unwrap(), vec![0, 1]);
        assert!(parse_weights("1,,2").is_err());
        assert!(parse_weights("1,-2").is_err());
        assert!(parse_strict("").is_err());
    }

    #[test]
    fn validate_explains() {
        let mut c = SchedConfig::from_cli("dwrr").unwrap();
        c.set_quanta_str("1514,3028").unwrap();
        assert!(c.validate(2).is_ok());
        let e = c.validate(3).unwrap_err().to_string();
        assert!(e.contains("2 values") && e.contains("3 queues"), "{e}");
        c.quanta = vec![0];
        assert!(c.validate(3).unwrap_err().to_string().contains("quantum"));
        let mut c = SchedConfig::from_cli("sp+wfq").unwrap();
        c.strict = vec![0, 1];
        let e = c.validate(2).unwrap_err().to_string();
        assert!(e.contains("--sched sp"), "{e}");
        c.strict = vec![5];
        assert!(c.validate(4).is_err());
        c.strict = vec![1, 1];
        assert!(c.validate(4).is_err());
        c.strict = vec![];
        c.weights = vec![1, 0, 1, 1];
        assert!(c.validate(4).unwrap_err().to_string().contains("weight"));
        assert!(SchedConfig::default().validate(0).is_err());
        let mut c = SchedConfig::from_cli("sp").unwrap();
        c.weights = vec![1, 2];
        let e = c.validate(2).unwrap_err().to_string();
        assert!(e.contains("--weights does not apply to --sched sp"), "{e}");
        let mut c = SchedConfig::from_cli("wfq").unwrap();
        c.quanta = vec![1514];
        assert!(c.validate(2).unwrap_err().to_string().contains("--quantum"));
        let mut c = SchedConfig::from_cli("dwrr").unwrap();
        c.strict = vec![0];
        assert!(c.validate(2).unwrap_err().to_string().contains("--strict"));
        let mut c = SchedConfig::from_cli("dwrr").unwrap();
        c.set_wfq_vtime_str("scfq").unwrap();
        assert!(c
            .validate(2)
            .unwrap_err()
            .to_string()
            .contains("--wfq-vtime"));
        let mut c = SchedConfig::from_cli("sp+wfq").unwrap();
        c.set_wfq_vtime_str("scfq").unwrap();
        assert!(c.validate(2).is_ok());
        let e = c.set_wfq_vtime_str("gps").unwrap_err().to_string();
        assert!(e.contains("--wfq-vtime") && e.contains("scfq"), "{e}");
        assert!(SchedConfig::default().validate(129).is_err());
    }

    #[test]
    fn toml_config() {
        let c: SchedConfig =
            toml::from_str("kind = \"sp+dwrr\"\nquanta = [1514, 1514, 3028]\nstrict = [0]")
                .unwrap();
        assert_eq!(c.kind, SchedName::SpDwrr);
        assert_eq!(c.quanta(3, 24), Some(vec![1514, 1514, 3028]));
        assert!(!c.is_round_robin());
        assert!(SchedConfig::new(SchedName::Dwrr).is_round_robin());
        assert_eq!(
            SchedConfig::new(SchedName::Dwrr).quanta(2, 24),
            Some(vec![1538, 1538])
        );
        assert_eq!(SchedConfig::new(SchedName::Wfq).quanta(2, 24), None);
        // Default: wire bytes, quantum one MTU frame on the wire (1538 B with
        // 24 B overhead, the prototype's default); frame bytes as an option.
        let c: SchedConfig = toml::from_str("kind = \"dwrr\"\nbytes = \"frame\"").unwrap();
        assert_eq!(c.bytes, SchedBytes::Frame);
        assert_eq!(c.quanta(2, 24), Some(vec![1514, 1514]));
        assert_eq!(SchedConfig::new(SchedName::Dwrr).bytes, SchedBytes::Wire);
        let mut c = SchedConfig::new(SchedName::SpWfq);
        assert_eq!(c.describe(), "sp+wfq (wire bytes, vtime prototype)");
        c.set_bytes_str("frame").unwrap();
        assert_eq!(c.describe(), "sp+wfq (frame bytes, vtime prototype)");
        let e = c.set_bytes_str("ip").unwrap_err().to_string();
        assert!(e.contains("--sched-bytes") && e.contains("wire"), "{e}");
        assert!(toml::from_str::<SchedConfig>("kind = \"fifo\"").is_err());
        let c: SchedConfig = toml::from_str("kind = \"wfq\"\nwfq_vtime = \"scfq\"").unwrap();
        assert_eq!(c.wfq_vtime, Some(WfqVtime::Scfq));
        match c.build(2, 24).unwrap() {
            SchedKind::Wfq(w) => assert_eq!(w.vtime_rule(), WfqVtime::Scfq),
            _ => unreachable!(),
        }
        match SchedConfig::new(SchedName::Wfq).build(2, 24).unwrap() {
            SchedKind::Wfq(w) => assert_eq!(w.vtime_rule(), WfqVtime::Prototype),
            _ => unreachable!(),
        }
        assert!(toml::from_str::<SchedConfig>("kind = \"sp\"\nquantum = [1]").is_err());
    }

    mod random_ops {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Push {
                q: usize,
                len: u32,
            },
            /// select without commit (the shaper refused): must change nothing visible.
            SelectOnly,
            Serve,
        }

        fn op(n: usize) -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0..n, 60u32..=1514).prop_map(|(q, len)| Op::Push { q, len }),
                1 => Just(Op::SelectOnly),
                4 => Just(Op::Serve),
            ]
        }

        fn config(
            kind: SchedName,
            quanta: Vec<u64>,
            weights: Vec<u32>,
            strict: Vec<usize>,
            scfq: bool,
        ) -> SchedConfig {
            // Only the settings that apply to `kind` (validate rejects others).
            let rr = matches!(kind, SchedName::Dwrr | SchedName::SpDwrr);
            let fq = matches!(kind, SchedName::Wfq | SchedName::SpWfq);
            let sp = matches!(kind, SchedName::Sp | SchedName::SpDwrr | SchedName::SpWfq);
            SchedConfig {
                bytes: SchedBytes::Wire,
                kind,
                quanta: if rr { quanta } else { vec![] },
                weights: if fq { weights } else { vec![] },
                strict: if sp { strict } else { vec![] },
                wfq_vtime: fq.then_some(if scfq {
                    WfqVtime::Scfq
                } else {
                    WfqVtime::Prototype
                }),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            /// peek == select, select idempotent, SP order, DWRR deficit bound and
            /// active list, WFQ tags ≥ V — after every step.
            #[test]
            fn scheduler_invariants(
                kind in prop::sample::select(SchedName::ALL.to_vec()),
                quanta in prop::collection::vec(100u64..5000, 6),
                weights in prop::collection::vec(1u32..10, 6),
                strict in prop::sample::subsequence(vec![0usize, 1, 2, 3, 4, 5], 0..3),
                ops in prop::collection::vec(op(6), 1..400),
                scfq in any::<bool>(),
                overhead in prop::sample::select(vec![0u32, 24]),
            ) {
                let mut strict = strict;
                if kind != SchedName::Sp && strict.len() >= 6 { strict.pop(); }
                let cfg = config(kind, quanta, weights, strict, scfq);
                let mut s = cfg.build(6, overhead).unwrap();
                let mut qs = SimQueues::new(6);
                for (t, op) in ops.into_iter().enumerate() {
                    let now = t as Nanos;
                    match op {
                        Op::Push { q, len } => qs.push(&mut s, q, len, now),
                        Op::SelectOnly => {
                            let a = s.select(&qs, now);
                            prop_assert_eq!(a, s.peek(&qs));
                            prop_assert_eq!(a.is_some(), qs.nonempty_mask() != 0);
                        }
                        Op::Serve => {
                            let before = qs.clone();
                            if let Some((q, _)) = qs.serve(&mut s, now) {
                                if let Some(rq) = s.priority_rank(q) {
                                    for h in 0..6 {
                                        if s.priority_rank(h).is_some_and(|rh| rh < rq) {
                                            prop_assert!(before.q[h].is_empty(),
                                                "served {} while higher {} had packets", q, h);
                                        }
                                    }
                                }
                            } else {
                                prop_assert_eq!(before.nonempty_mask(), 0);
                            }
                        }
                    }
                    s.invariants(&qs, 1514);
                    while s.take_round_event().is_some() {}
                }
            }

        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

            /// Saturated: long-run byte shares within 1 % of quanta / weights.
            #[test]
            fn saturated_shares_within_one_percent(
                wfq in any::<bool>(),
                w in prop::collection::vec(1u32..5, 3),
                seed in any::<u64>(),
                scfq in any::<bool>(),
            ) {
                let n = 3;
                let cfg = if wfq {
                    config(SchedName::Wfq, vec![], w.clone(), vec![], scfq)
                } else {
                    config(SchedName::Dwrr, w.iter().map(|&x| x as u64 * 1514).collect(), vec![], vec![], false)
                };
                // Frame bytes: the shares below are counted in frame bytes.
                let mut cfg = cfg;
                cfg.bytes = SchedBytes::Frame;
                let mut s = cfg.build(n, 24).unwrap();
                let mut rng = crate::rng::SimRng::new(seed);
                let shares = saturated_shares(&mut s, n, 100_000, 1514, || 64 + (rng.next_u64() % 1451) as u32);
                let want: Vec<f64> = w.iter().map(|&x| x as f64).collect();
                prop_assert!(within_one_percent(&shares, &want), "{:?} vs weights {:?}", shares, w);
            }
        }
    }

    #[test]
    fn build_dispatches() {
        for k in SchedName::ALL {
            let s = SchedConfig::from_cli(k.as_str())
                .unwrap()
                .build(4, 24)
                .unwrap();
            assert_eq!(s.name(), k);
        }
        let s = SchedConfig::new(SchedName::Dwrr).build(3, 24).unwrap();
        assert!(s.is_round_robin());
        assert_eq!(s.quanta(), Some(vec![1538; 3]));
    }
}

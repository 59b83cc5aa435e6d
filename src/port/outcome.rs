//! What [`EgressPort::enqueue`](super::EgressPort::enqueue) and
//! [`EgressPort::dequeue_with`](super::EgressPort::dequeue_with) did with a
//! packet, returned to the caller (the switch hands it to capture). The
//! port applies every verdict itself; these only report it.

use crate::aqm::{DropReason, MarkReason, Verdict};
use crate::packet::Packet;
use crate::wire::Ecn;

/// What `enqueue` did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Queued in `queue`.
    Queued {
        /// The queue the classifier chose.
        queue: u16,
        /// The enqueue AQM's mark verdict, if it gave one (applied, or not
        /// applicable to a Not-ECT frame the policy let pass).
        mark: Option<MarkReason>,
        /// The frame carries CE now.
        ce: bool,
    },
    /// Dropped (the frame is released and the drop counted).
    Dropped {
        /// The queue the classifier chose.
        queue: u16,
        /// Why.
        reason: DropReason,
    },
}

/// A packet `dequeue_with` let go: the packet, with the mark already in its
/// bytes, and the dequeue verdict's mark reason if it had one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    /// The packet, on its way to the wire.
    pub pkt: Packet,
    /// The dequeue AQM's (or `mark_every`'s) mark verdict, if any.
    pub mark: Option<MarkReason>,
}

impl Departure {
    /// Whether the frame carries CE.
    pub fn ce(&self) -> bool {
        carries_ce(&self.pkt)
    }
}

/// Whether `pkt`'s IP header says CE.
#[inline]
pub(super) fn carries_ce(pkt: &Packet) -> bool {
    pkt.l3.is_some_and(|l| l.ecn == Ecn::Ce)
}

/// The mark reason of a verdict (None: pass or drop).
#[inline]
pub(super) fn mark_of(v: Verdict) -> Option<MarkReason> {
    match v {
        Verdict::Mark(r) => Some(r),
        _ => None,
    }
}

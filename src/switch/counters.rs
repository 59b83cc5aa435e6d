//! The switch's own counters and the counter identities that tie them to
//! the egress ports' (every frame received is accounted for).

use serde::Serialize;

use super::Switch;
use crate::aqm::{Aqm, DropReason};

/// Per-port counters kept by the switch itself (the egress port keeps its own
/// queue counters).
#[derive(Clone, Debug, Default, Serialize)]
pub struct IoCounters {
    /// Frames received on this port.
    pub rx_packets: u64,
    /// Bytes received on this port.
    pub rx_bytes: u64,
    /// Frames transmitted out of this port (left the delay line).
    pub tx_packets: u64,
    /// Bytes transmitted out of this port.
    pub tx_bytes: u64,
    /// Received frames that were flooded.
    pub flooded: u64,
    /// Received frames filtered (destination on the ingress port itself).
    pub filtered: u64,
    /// Received frames dropped before any egress queue, by reason.
    pub ingress_drops: [u64; DropReason::COUNT],
    /// Received frames bridged at L2 only: not IPv4 / IPv6 (ARP, other
    /// EtherTypes, a third VLAN tag), or an IP header that does not parse
    /// (bad version or length, cut off). They are never ECN-marked or
    /// classified per flow.
    pub l2_only: u64,
    /// Frames that left this port's wire while its interface was down or
    /// gone (deleted with its namespace), released unsent; they are also in
    /// `tx_packets`, which counts what the switch handed to the interface.
    pub link_down_drops: u64,
    /// Copies of flooded frames this port's ingress asked for (one per
    /// egress port beyond the first; a copy that found no free frame is
    /// also counted as an ingress `no_frame` drop).
    pub flood_copies: u64,
    /// Frames received on this port (and their flood copies) handed to an
    /// egress port's `enqueue` (admitted or dropped there).
    pub forwarded: u64,
    /// Frames that had left this port's egress queues and were still on its
    /// wire (delay line) at shutdown: released, not transmitted.
    pub wire_drained: u64,
    /// Bytes of `wire_drained`.
    pub wire_drained_bytes: u64,
    /// ACKs received on this port still in its R-AQM virtual input queue at
    /// shutdown: released, not forwarded.
    pub viq_drained: u64,
}

/// Two sides of a counter identity that must be equal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Balance {
    /// What came in.
    pub input: u64,
    /// Where it went (all destinations summed).
    pub output: u64,
}

impl Balance {
    /// Whether the two sides are equal.
    pub fn holds(&self) -> bool {
        self.input == self.output
    }
}

/// The counter identities of one port (see [`Conservation`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortBalance {
    /// Ingress, frames: `rx + flood copies = forwarded + ingress drops +
    /// filtered + held in the VIQ + drained from the VIQ`.
    pub ingress: Balance,
    /// Egress, frames: `arrived at the egress queues = tx + egress drops +
    /// backlog + on the wire + drained (queues and wire)`.
    pub egress: Balance,
    /// The egress identity in frame bytes.
    pub egress_bytes: Balance,
    /// With an emulated host link (`--ingress-rate`), frames: released by
    /// the link = received by the switch (0 = 0 without one).
    pub host_link: Balance,
}

/// Counter identities of the whole switch: every frame received is
/// transmitted, dropped for a counted reason, or still held (queued, on a
/// wire, in a VIQ) — released at shutdown as `drained` — per port and
/// switch-wide (`rx + flood copies = tx + drops + filtered + held +
/// drained`, frames). Holds at every instant between calls into the switch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Conservation {
    /// Per port, by port number.
    pub ports: Vec<PortBalance>,
    /// The switch as a whole, frames.
    pub switch: Balance,
    /// All of the identities hold.
    pub holds: bool,
}

impl Conservation {
    /// Human-readable list of the identities that do not hold (empty: all hold).
    pub fn failures(&self, names: &[String]) -> Vec<String> {
        let mut v = Vec::new();
        for (i, p) in self.ports.iter().enumerate() {
            let n = names.get(i).map_or("?", |s| s.as_str());
            for (what, b) in [
                ("ingress frames", p.ingress),
                ("egress frames", p.egress),
                ("egress bytes", p.egress_bytes),
                ("host link frames", p.host_link),
            ] {
                if !b.holds() {
                    v.push(format!(
                        "port {n} {what}: in {} != out {}",
                        b.input, b.output
                    ));
                }
            }
        }
        if !self.switch.holds() {
            v.push(format!(
                "switch frames: rx + flood copies {} != tx + drops + filtered + held + drained {}",
                self.switch.input, self.switch.output
            ));
        }
        v
    }
}

impl<A: Aqm, F: super::Forwarder> Switch<A, F> {
    /// The counter identities (per port and switch-wide) as they stand now.
    pub fn conservation(&self) -> Conservation {
        let mut ports = Vec::with_capacity(self.ports.len());
        let (mut sw_in, mut sw_out) = (0u64, 0u64);
        for p in &self.ports {
            let io = &p.io;
            let viq = p.raqm.as_ref().map_or(0, |r| r.viq_len() as u64);
            // A frame dropped at a full emulated host link (`ingress_full`)
            // never entered the switch: it is not in `rx_packets` either.
            let ingress_drops: u64 = io.ingress_drops.iter().sum::<u64>()
                - io.ingress_drops[DropReason::IngressFull as usize];
            let ingress = Balance {
                input: io.rx_packets + io.flood_copies,
                output: io.forwarded + ingress_drops + io.filtered + viq + io.viq_drained,
            };
            let c = &p.egress.counters().port;
            let gone = c.dropped.total().plus(c.drained);
            let egress = Balance {
                input: c.arrived.pkts,
                output: io.tx_packets
                    + gone.pkts
                    + p.egress.backlog_pkts() as u64
                    + p.wire.len() as u64
                    + io.wire_drained,
            };
            let egress_bytes = Balance {
                input: c.arrived.bytes,
                output: io.tx_bytes
                    + gone.bytes
                    + p.egress.backlog_bytes()
                    + p.wire.bytes()
                    + io.wire_drained_bytes,
            };
            let host_link = p
                .ingress_link
                .as_ref()
                .map_or(Balance::default(), |l| Balance {
                    input: l.counters().released,
                    output: io.rx_packets,
                });
            sw_in += ingress.input;
            sw_out += ingress_drops + io.filtered + viq + io.viq_drained + egress.output;
            ports.push(PortBalance {
                ingress,
                egress,
                egress_bytes,
                host_link,
            });
        }
        let switch = Balance {
            input: sw_in,
            output: sw_out,
        };
        let holds = switch.holds()
            && ports.iter().all(|p| {
                p.ingress.holds()
                    && p.egress.holds()
                    && p.egress_bytes.holds()
                    && p.host_link.holds()
            });
        Conservation {
            ports,
            switch,
            holds,
        }
    }
}

//! The whole switch as a deterministic machine: frames in (port, bytes, now),
//! frames out (port, packet) — no sockets, no clock.
//!
//! ```text
//! ingress: parse → L2 forward (learning bridge) → egress port(s)
//! egress port: classify → buffer → enqueue AQM → queues → scheduler
//!              → dequeue AQM → shaper → delay line → out
//! ```
//!
//! The AF_XDP data path (`dataplane`) feeds received frames to [`Switch::ingress`]
//! and transmits what [`Switch::poll`] hands out; tests and simulations drive the
//! same code with a [`VecStore`](crate::packet::VecStore) and a manual clock.
//!
//! R-AQM (SPEC §2, r-aqm.txt §IV; the core is [`crate::raqm`]): with
//! [`Switch::enable_raqm`], a pure ACK arriving on port P is offered to P's
//! virtual input queue after the forwarding decision (unicast only); P's
//! departures credit its token bucket in [`Switch::poll`], which first
//! releases what the buckets allow (collect, then enqueue on the egress ports
//! the bridge chose) and [`Switch::next_event`] includes the VIQ deadlines.
//! SYNs teach R-AQM the flows' window scales.

use serde::Serialize;

use crate::aqm::{Aqm, DropReason};
use crate::bridge::{Bridge, BridgeConfig, Forward};
use crate::capture::{Capture, CaptureConfig, Fate};
use crate::delay::DelayLine;
use crate::ingress::IngressLink;
use crate::packet::{FrameId, FrameStore, Packet};
use crate::port::{no_witness, EgressPort, PortConfig, PortConfigError};
use crate::raqm::{self, AckDrop, Offer, Raqm};
use crate::units::{Nanos, Rate};
use crate::wire;

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

/// One switch port: its egress pipeline and its wire.
pub struct SwitchPort<A: Aqm> {
    /// Interface name (for reports).
    pub name: String,
    /// Egress queues, buffer, scheduler, AQM, shaper.
    pub egress: EgressPort<A>,
    /// One-way propagation delay after the shaper.
    pub wire: DelayLine,
    /// Ingress / transmit counters.
    pub io: IoCounters,
    /// Emulated host link on ingress (`--ingress-rate`), if on.
    pub ingress_link: Option<IngressLink>,
}

/// Configuration of one port.
pub struct PortSpec<A: Aqm> {
    /// Interface name.
    pub name: String,
    /// Egress configuration.
    pub config: PortConfig,
    /// The port's AQM instance.
    pub aqm: A,
    /// One-way delay added after the shaper.
    pub delay_ns: Nanos,
}

/// A learning switch over N egress ports.
pub struct Switch<A: Aqm> {
    bridge: Bridge,
    ports: Vec<SwitchPort<A>>,
    /// Capture (`--pcap`); None: off, one branch per hook.
    capture: Option<Box<Capture>>,
    raqm: Option<Raqm>,
    /// Scratch for R-AQM releases and stale drops (no allocation per poll).
    raqm_out: Vec<(u16, Packet)>,
    raqm_dropped: Vec<Packet>,
}

impl<A: Aqm> Switch<A> {
    /// A switch with the given ports (index = port number).
    pub fn new(
        specs: Vec<PortSpec<A>>,
        bridge: BridgeConfig,
        now: Nanos,
        seed: u64,
    ) -> Result<Self, PortConfigError> {
        let n = specs.len() as u16;
        let mut ports = Vec::with_capacity(specs.len());
        for (i, s) in specs.into_iter().enumerate() {
            let egress = EgressPort::new(s.config, s.aqm, now, seed.wrapping_add(i as u64))?;
            ports.push(SwitchPort {
                name: s.name,
                egress,
                wire: DelayLine::new(s.delay_ns),
                io: IoCounters::default(),
                ingress_link: None,
            });
        }
        Ok(Switch {
            bridge: Bridge::new(n, bridge),
            ports,
            capture: None,
            raqm: None,
            raqm_out: Vec::new(),
            raqm_dropped: Vec::new(),
        })
    }

    /// Turns capture on (see [`crate::capture`]): the switch records frames,
    /// and what its egress ports did with them, into a batch the caller
    /// collects with [`capture_mut`](Self::capture_mut).
    pub fn enable_capture(&mut self, cfg: CaptureConfig) {
        self.capture = Some(Box::new(Capture::new(cfg)));
    }
    /// The capture, when on.
    pub fn capture_mut(&mut self) -> Option<&mut Capture> {
        self.capture.as_deref_mut()
    }

    /// Enqueues `pkt` on egress port `out` and, when capturing, notes its
    /// fate. Every enqueue of the switch goes through here.
    #[inline]
    fn enqueue_on<S: FrameStore>(&mut self, out: usize, pkt: Packet, now: Nanos, store: &mut S) {
        if let Some(p) = self.ports.get_mut(pkt.ingress_port as usize) {
            p.io.forwarded += 1;
        }
        let admission = self.ports[out].egress.enqueue(pkt, now, store);
        if let Some(c) = self.capture.as_deref_mut() {
            c.enqueued(out as u16, admission);
        }
    }

    /// Turns R-AQM on for every port (each port's VIQ holds the pure ACKs
    /// arriving on it; its bucket is fed by its own departures).
    pub fn enable_raqm(&mut self, cfg: &raqm::Config, now: Nanos) {
        let rates: Vec<_> = self.ports.iter().map(|p| p.egress.config().rate).collect();
        self.raqm = Some(Raqm::new(cfg, &rates, now));
        self.raqm_out = Vec::with_capacity(1024);
        self.raqm_dropped = Vec::with_capacity(1024);
    }

    /// Emulates the sending hosts' NICs (see [`crate::ingress`]): frames
    /// arriving on port `i` are processed only once a link of `rates[i]`
    /// would have delivered them (None or a zero rate: no emulation).
    pub fn enable_ingress_links(&mut self, rates: &[Option<Rate>], overhead: u32, limit_pkts: u32) {
        for (p, r) in self.ports.iter_mut().zip(rates) {
            p.ingress_link = r
                .filter(|r| r.bps() > 0)
                .map(|r| IngressLink::new(r, overhead, limit_pkts));
        }
    }

    /// R-AQM's state, when enabled.
    pub fn raqm(&self) -> Option<&Raqm> {
        self.raqm.as_ref()
    }

    /// The ports, by number.
    pub fn ports(&self) -> &[SwitchPort<A>] {
        &self.ports
    }
    /// Mutable access to the ports (e.g. PRED's controller changing RED's slope).
    pub fn ports_mut(&mut self) -> &mut [SwitchPort<A>] {
        &mut self.ports
    }
    /// The MAC table.
    pub fn bridge(&self) -> &Bridge {
        &self.bridge
    }
    /// Forgets MAC entries older than the ageing time.
    pub fn age(&mut self, now: Nanos) {
        self.bridge.age(now);
    }

    fn ingress_drop<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        reason: DropReason,
        store: &mut S,
    ) {
        self.ports[port as usize].io.ingress_drops[reason as usize] += 1;
        if let Some(c) = self.capture.as_deref_mut() {
            c.rx_fate(Fate::IngressDrop(reason));
        }
        store.release(frame);
    }

    /// A frame of `len` bytes arrived on `port` at `now`. The switch owns the
    /// frame from here on: it is queued on one or more egress ports, or dropped
    /// and released (counted).
    ///
    /// With an emulated host link on `port` the frame first waits there for
    /// its serialisation ([`crate::ingress`]) and is processed by
    /// [`poll`](Self::poll) at its release.
    pub fn ingress<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            // A frame from a port we do not have: a bug in the caller; keep the frame accounted.
            store.release(frame);
            return;
        };
        if let Some(l) = &mut p.ingress_link {
            if let Err(frame) = l.offer(frame, len, now) {
                p.io.ingress_drops[DropReason::IngressFull as usize] += 1;
                store.release(frame);
            }
            return;
        }
        self.process(port, frame, len, now, store);
    }

    /// A frame received on `port` enters the switch at `now`.
    fn process<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        let p = &mut self.ports[port as usize];
        p.io.rx_packets += 1;
        p.io.rx_bytes += len as u64;
        if let Some(c) = self.capture.as_deref_mut() {
            c.rx(port, now, store.bytes_mut(frame, len), len);
        }
        let info = match wire::parse(store.bytes_mut(frame, len)) {
            Ok(info) => info,
            Err(_) => return self.ingress_drop(port, frame, DropReason::Malformed, store),
        };
        if info.l3.is_none() {
            self.ports[port as usize].io.l2_only += 1;
        }
        let pkt = Packet::new(frame, len, info.l3, port);
        let tcp = info.l3.and_then(|l| l.tcp);
        if let (Some(r), Some(l3), Some(t)) = (&mut self.raqm, &info.l3, tcp) {
            if t.flags & wire::tcp::flags::SYN != 0 {
                r.scales.learn(store.bytes_mut(frame, len), l3);
            }
        }
        match self.bridge.learn_and_forward(port, info.src, info.dst, now) {
            Forward::Unicast(out) if (out as usize) < self.ports.len() => {
                if tcp.is_some_and(|t| t.is_pure_ack()) {
                    if let Some(r) = &mut self.raqm {
                        let rp = &mut r.ports[port as usize];
                        match rp.offer(pkt, out, now) {
                            Offer::Pass(pkt) => {
                                let q = self.ports[port as usize].egress.backlog_pkts();
                                rp.rewrite(&pkt, q, &r.scales, store);
                                self.enqueue_on(out as usize, pkt, now, store);
                            }
                            Offer::Held => {}
                            Offer::Dropped(pkt, why) => {
                                self.ingress_drop(port, pkt.frame, ack_drop_reason(why), store)
                            }
                        }
                        return;
                    }
                }
                self.enqueue_on(out as usize, pkt, now, store);
            }
            Forward::Unicast(_) => self.ingress_drop(port, frame, DropReason::Malformed, store),
            Forward::Drop => {
                self.ports[port as usize].io.filtered += 1;
                if let Some(c) = self.capture.as_deref_mut() {
                    c.rx_fate(Fate::Filtered);
                }
                store.release(frame);
            }
            Forward::Flood => {
                self.ports[port as usize].io.flooded += 1;
                let n = self.ports.len();
                // Every port but the ingress; the last one gets the original frame.
                let last = if port as usize == n - 1 {
                    n.wrapping_sub(2)
                } else {
                    n - 1
                };
                if n < 2 {
                    // No other port: nowhere to send it.
                    self.ports[port as usize].io.filtered += 1;
                    if let Some(c) = self.capture.as_deref_mut() {
                        c.rx_fate(Fate::Filtered);
                    }
                    return store.release(frame);
                }
                for o in (0..n).filter(|&o| o != port as usize && o != last) {
                    self.ports[port as usize].io.flood_copies += 1;
                    match store.clone_frame(frame, len) {
                        Some(copy) => {
                            let mut c = pkt;
                            c.frame = copy;
                            self.enqueue_on(o, c, now, store);
                        }
                        None => {
                            self.ports[port as usize].io.ingress_drops
                                [DropReason::NoFrame as usize] += 1;
                            if let Some(c) = self.capture.as_deref_mut() {
                                c.rx_fate(Fate::IngressDrop(DropReason::NoFrame));
                            }
                        }
                    }
                }
                self.enqueue_on(last, pkt, now, store);
            }
        }
    }

    /// Moves packets the shapers let go at `now` onto their wires, and hands every
    /// packet whose wire delay has elapsed to `tx(port, packet)`. `tx` now owns the
    /// frame (it transmits it, or releases it).
    pub fn poll<S: FrameStore>(
        &mut self,
        now: Nanos,
        store: &mut S,
        mut tx: impl FnMut(u16, Packet),
    ) {
        for i in 0..self.ports.len() {
            while let Some((frame, len)) = self.ports[i]
                .ingress_link
                .as_mut()
                .and_then(|l| l.pop_ready(now))
            {
                self.process(i as u16, frame, len, now, store);
            }
        }
        // Fates from here on (ACKs R-AQM releases) belong to no frame
        // received now.
        if let Some(c) = self.capture.as_deref_mut() {
            c.end_rx();
        }
        if self.raqm.is_some() {
            self.raqm_release(now, store);
        }
        let mut capture = self.capture.as_deref_mut();
        for (i, p) in self.ports.iter_mut().enumerate() {
            p.egress.tick(now);
            loop {
                let departed = match capture.as_deref_mut() {
                    Some(c) => p.egress.dequeue_with(now, store, &mut |pkt, why, bytes| {
                        c.dequeue_dropped(i as u16, now, pkt, why, bytes)
                    }),
                    None => p.egress.dequeue_with(now, store, &mut no_witness),
                };
                let Some(d) = departed else { break };
                if let Some(c) = capture.as_deref_mut() {
                    c.departed(i as u16, now, &d);
                }
                let pkt = d.pkt;
                if let Some(r) = &mut self.raqm {
                    r.ports[i].on_departure(pkt.len as u64);
                }
                p.wire.push(pkt, now);
            }
            while let Some(pkt) = p.wire.pop_ready(now) {
                p.io.tx_packets += 1;
                p.io.tx_bytes += pkt.len as u64;
                if let Some(c) = capture.as_deref_mut() {
                    c.tx(i as u16, now, store.bytes_mut(pkt.frame, pkt.len), pkt.len);
                }
                tx(i as u16, pkt);
            }
        }
    }

    /// R-AQM's step on every port: state machines, stale drops, releases
    /// (collected first, then rewritten and enqueued on their egress ports).
    fn raqm_release<S: FrameStore>(&mut self, now: Nanos, store: &mut S) {
        let Some(r) = &mut self.raqm else { return };
        let mut out = std::mem::take(&mut self.raqm_out);
        let mut dropped = std::mem::take(&mut self.raqm_dropped);
        for (i, p) in self.ports.iter_mut().enumerate() {
            let q = p.egress.backlog_pkts();
            let rp = &mut r.ports[i];
            let first = out.len();
            rp.step(q, now, &mut out, &mut dropped);
            for (_, pkt) in &out[first..] {
                rp.rewrite(pkt, q, &r.scales, store);
            }
            for pkt in dropped.drain(..) {
                p.io.ingress_drops[DropReason::Stale as usize] += 1;
                store.release(pkt.frame);
            }
        }
        for (o, pkt) in out.drain(..) {
            self.enqueue_on(o as usize, pkt, now, store);
        }
        self.raqm_out = out;
        self.raqm_dropped = dropped;
    }

    /// The earliest time `poll` has something to do (None: all idle).
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        let raqm = self.raqm.as_ref().into_iter().flat_map(|r| {
            r.ports
                .iter()
                .zip(&self.ports)
                .map(move |(rp, p)| rp.next_event(p.egress.backlog_pkts(), now))
        });
        self.ports
            .iter()
            .flat_map(|p| {
                [
                    p.egress.next_ready(now),
                    p.wire.next_release(),
                    p.egress.aqm().next_tick(),
                    p.ingress_link.as_ref().and_then(|l| l.next_release()),
                ]
            })
            .chain(raqm)
            .flatten()
            .min()
    }

    /// The counter identities (per port and switch-wide) as they stand now.
    pub fn conservation(&self) -> Conservation {
        let mut ports = Vec::with_capacity(self.ports.len());
        let (mut sw_in, mut sw_out) = (0u64, 0u64);
        for (i, p) in self.ports.iter().enumerate() {
            let io = &p.io;
            let viq = self
                .raqm
                .as_ref()
                .map_or(0, |r| r.ports[i].viq_len() as u64);
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

    /// Packets held anywhere in the switch (queues + wires + R-AQM's VIQs +
    /// emulated host links).
    pub fn held_packets(&self) -> u64 {
        let viq: u64 = self
            .raqm
            .as_ref()
            .map_or(0, |r| r.ports.iter().map(|p| p.viq_len() as u64).sum());
        self.ports
            .iter()
            .map(|p| {
                p.egress.backlog_pkts() as u64
                    + p.wire.len() as u64
                    + p.ingress_link.as_ref().map_or(0, |l| l.len() as u64)
            })
            .sum::<u64>()
            + viq
    }

    /// Releases every held frame (shutdown).
    pub fn drain<S: FrameStore>(&mut self, store: &mut S) {
        if let Some(r) = &mut self.raqm {
            for (rp, p) in r.ports.iter_mut().zip(&mut self.ports) {
                for h in rp.drain() {
                    p.io.viq_drained += 1;
                    store.release(h.pkt.frame);
                }
            }
        }
        if let Some(c) = self.capture.as_deref_mut() {
            c.drain();
        }
        for p in &mut self.ports {
            if let Some(l) = &mut p.ingress_link {
                for f in l.drain() {
                    store.release(f);
                }
            }
            p.egress.drain(store);
            for pkt in p.wire.drain() {
                p.io.wire_drained += 1;
                p.io.wire_drained_bytes += pkt.len as u64;
                store.release(pkt.frame);
            }
        }
    }
}

/// The switch's drop reason for an ACK R-AQM dropped.
fn ack_drop_reason(why: AckDrop) -> DropReason {
    match why {
        AckDrop::ViqFull => DropReason::QueueLimit,
        AckDrop::Stale => DropReason::Stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::droptail::DropTail;
    use crate::packet::VecStore;
    use crate::units::{Rate, US};
    use crate::wire::MacAddr;

    fn mac(i: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, i])
    }

    /// Ethernet + IPv4 (ECT(0)) + UDP, `len` bytes in all.
    fn frame(src: MacAddr, dst: MacAddr, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(60)];
        f[0..6].copy_from_slice(&dst.0);
        f[6..12].copy_from_slice(&src.0);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip_len = (f.len() - 14) as u16;
        f[14] = 0x45;
        f[15] = 0x02; // ECT(0)
        f[16..18].copy_from_slice(&ip_len.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 99, 0, src.0[5]]);
        f[30..34].copy_from_slice(&[10, 99, 0, dst.0[5]]);
        let sum = crate::wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        f
    }

    fn switch(n: usize, rate: Rate, delay_ns: Nanos) -> Switch<DropTail> {
        let specs = (0..n)
            .map(|i| PortSpec {
                name: format!("p{i}"),
                config: PortConfig {
                    rate,
                    queues: 1,
                    ..PortConfig::default()
                },
                aqm: DropTail,
                delay_ns,
            })
            .collect();
        Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap()
    }

    fn send(
        sw: &mut Switch<DropTail>,
        store: &mut VecStore,
        port: u16,
        bytes: Vec<u8>,
        now: Nanos,
    ) {
        let len = bytes.len() as u32;
        let f = store.insert(bytes);
        sw.ingress(port, f, len, now, store);
    }

    fn collect(sw: &mut Switch<DropTail>, store: &mut VecStore, now: Nanos) -> Vec<(u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut sent = Vec::new();
        sw.poll(now, store, |p, pkt| sent.push((p, pkt)));
        for (p, pkt) in sent {
            out.push((p, store.take(pkt.frame)));
        }
        out
    }

    #[test]
    fn floods_unknown_then_learns() {
        let mut sw = switch(3, Rate::from_bps(0), 0);
        let mut st = VecStore::new();
        // h1 (port 0) → h2 unknown: flooded to ports 1 and 2, with identical bytes.
        let f = frame(mac(1), mac(2), 100);
        send(&mut sw, &mut st, 0, f.clone(), 0);
        let mut out = collect(&mut sw, &mut st, 0);
        out.sort_by_key(|o| o.0);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1, 2]);
        assert!(out.iter().all(|o| o.1 == f));
        // h2 answers from port 1: h1 is known, so unicast to port 0 only.
        send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 100), 10);
        let out = collect(&mut sw, &mut st, 10);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 0);
        // And now h1 → h2 is unicast to port 1.
        send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 100), 20);
        let out = collect(&mut sw, &mut st, 20);
        assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1]);
        assert_eq!(sw.ports()[0].io.rx_packets, 2);
        assert_eq!(sw.ports()[0].io.flooded, 1);
        assert_eq!(sw.ports()[1].io.tx_packets, 2);
        assert_eq!(st.live, 0, "every frame left the switch exactly once");
    }

    #[test]
    fn broadcast_goes_everywhere_but_ingress_and_hairpin_is_filtered() {
        let mut sw = switch(4, Rate::from_bps(0), 0);
        let mut st = VecStore::new();
        send(
            &mut sw,
            &mut st,
            2,
            frame(mac(3), MacAddr::BROADCAST, 60),
            0,
        );
        let mut ports: Vec<u16> = collect(&mut sw, &mut st, 0)
            .into_iter()
            .map(|o| o.0)
            .collect();
        ports.sort();
        assert_eq!(ports, vec![0, 1, 3]);
        // A frame to a MAC learned on the same port is filtered.
        send(&mut sw, &mut st, 2, frame(mac(9), mac(3), 60), 1);
        assert!(collect(&mut sw, &mut st, 1).is_empty());
        assert_eq!(sw.ports()[2].io.filtered, 1);
        assert_eq!(st.live, 0);
    }

    #[test]
    fn non_ip_and_bad_ip_frames_are_bridged_and_counted_l2_only() {
        let mut sw = switch(2, Rate::from_bps(0), 0);
        let mut st = VecStore::new();
        let good = frame(mac(1), mac(2), 100);
        let mut other_type = good.clone();
        other_type[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        let mut bad_version = good.clone();
        bad_version[14] = 0x75;
        let mut cut_off = good.clone();
        cut_off.truncate(20); // 6 bytes of a 20-byte IPv4 header
        for f in [good, other_type, bad_version, cut_off] {
            send(&mut sw, &mut st, 0, f, 0);
        }
        let out = collect(&mut sw, &mut st, 0);
        assert_eq!(out.len(), 4, "every frame is bridged");
        assert_eq!(sw.ports()[0].io.l2_only, 3);
        assert_eq!(st.live, 0);
    }

    #[test]
    fn runt_frames_are_counted_drops() {
        let mut sw = switch(2, Rate::from_bps(0), 0);
        let mut st = VecStore::new();
        send(&mut sw, &mut st, 0, vec![0u8; 10], 0);
        assert_eq!(
            sw.ports()[0].io.ingress_drops[DropReason::Malformed as usize],
            1
        );
        assert_eq!(st.live, 0);
    }

    #[test]
    fn shaper_and_delay_line_set_departure_times() {
        // 1 Gbit/s, 24 B overhead, 2500 B bucket, 50 µs wire.
        let mut sw = switch(2, Rate::gbit(1), 50 * US);
        let mut st = VecStore::new();
        // Learn h2 on port 1 first (its frame floods to port 0; drain it).
        send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 60), 0);
        assert!(
            collect(&mut sw, &mut st, 0).is_empty(),
            "on the wire for 50 µs"
        );
        assert_eq!(collect(&mut sw, &mut st, 50 * US).len(), 1);
        // Ten 1500-byte frames h1 → h2 at t = 100 µs.
        let t0 = 100 * US;
        for _ in 0..10 {
            send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 1500), t0);
        }
        let mut departures = Vec::new();
        let mut now = t0;
        while departures.len() < 10 {
            for _ in collect(&mut sw, &mut st, now) {
                departures.push(now);
            }
            if departures.len() == 10 {
                break;
            }
            now = sw.next_event(now).unwrap_or_else(|| {
                panic!(
                    "packets still in the switch: {departures:?} held {}",
                    sw.held_packets()
                )
            });
        }
        // First frame leaves the shaper at once (full bucket) and arrives 50 µs later;
        // the second waits for the 548 B the bucket lacks (4.384 µs); from then on
        // one frame per (1500 + 24)·8 ns = 12.192 µs.
        assert_eq!(departures[0], t0 + 50 * US);
        assert_eq!(departures[1] - departures[0], 4_384);
        for w in departures.windows(2).skip(1) {
            let gap = w[1] - w[0];
            assert!((12_192..=12_193).contains(&gap), "gap {gap}");
        }
        assert_eq!(sw.held_packets(), 0);
        assert_eq!(st.live, 0);
    }

    #[test]
    fn an_emulated_host_link_spreads_a_burst_at_its_rate() {
        // Unshaped egress, host link of 100 Mbit/s on port 0: a burst of 4
        // full frames received at once leaves one serialisation
        // ((1514 + 24) × 8 / 100 Mbit/s = 123.04 µs) apart.
        let mut sw = switch(2, Rate::from_bps(0), 0);
        sw.enable_ingress_links(&[Some(Rate::mbit(100)), None], 24, 3);
        let mut store = VecStore::new();
        let (a, b) = (mac(1), mac(2));
        send(&mut sw, &mut store, 1, frame(b, a, 60), 0);
        assert_eq!(
            collect(&mut sw, &mut store, 0).len(),
            1,
            "port 1 has no link"
        );
        for _ in 0..4 {
            send(&mut sw, &mut store, 0, frame(a, b, 1514), 0);
        }
        // The 4th frame found 3 waiting: a counted drop.
        assert_eq!(
            sw.ports()[0].io.ingress_drops[DropReason::IngressFull as usize],
            1
        );
        assert_eq!(sw.held_packets(), 3);
        assert_eq!(sw.ports()[0].io.rx_packets, 0, "not in the switch yet");
        assert_eq!(sw.next_event(0), Some(123_040));
        assert!(collect(&mut sw, &mut store, 123_039).is_empty());
        assert_eq!(collect(&mut sw, &mut store, 123_040).len(), 1);
        assert_eq!(sw.next_event(123_040), Some(246_080));
        assert!(collect(&mut sw, &mut store, 246_079).is_empty());
        assert_eq!(collect(&mut sw, &mut store, 400_000).len(), 2);
        assert_eq!(sw.ports()[0].io.rx_packets, 3);
        assert_eq!(sw.held_packets(), 0);
        // Shutdown returns frames still on the link.
        send(&mut sw, &mut store, 0, frame(a, b, 1514), 500_000);
        sw.drain(&mut store);
        assert_eq!(store.live, 0, "every frame returned");
    }

    #[test]
    fn drain_returns_every_frame() {
        let mut sw = switch(2, Rate::mbit(1), 1_000 * US);
        let mut st = VecStore::new();
        for i in 0..20 {
            send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 1000), i);
        }
        let _ = collect(&mut sw, &mut st, 30);
        assert!(st.live > 0);
        let c = sw.conservation();
        assert!(c.holds, "{c:?}");
        sw.drain(&mut st);
        assert_eq!(st.live, 0);
        // The frames on the wire and in the queue at shutdown are drained,
        // and the counters still add up.
        let c = sw.conservation();
        assert!(c.holds, "{c:?}");
        let io = &sw.ports()[1].io;
        let q = &sw.ports()[1].egress.counters().port;
        assert!(io.wire_drained > 0 && q.drained.pkts > 0, "{io:?} {q:?}");
        assert_eq!(
            io.tx_packets + io.wire_drained + q.drained.pkts + q.dropped.total().pkts,
            20
        );
    }

    #[test]
    fn conservation_counts_floods_filters_and_catches_a_lost_frame() {
        let mut sw = switch(3, Rate::mbit(10), 10 * US);
        let mut st = VecStore::new();
        send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 100), 0); // flooded to 1, 2
        send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 100), 1); // unicast to 0
        send(&mut sw, &mut st, 1, frame(mac(9), mac(2), 100), 2); // filtered
        send(&mut sw, &mut st, 2, vec![0u8; 10], 3); // runt
        let c = sw.conservation();
        assert!(c.holds, "{c:?}");
        assert_eq!(c.switch.input, 4 + 1);
        assert_eq!(c.ports[0].ingress.input, 2);
        assert_eq!(sw.ports()[0].io.forwarded, 2);
        assert!(c.failures(&[]).is_empty());
        // A frame that vanishes without a count breaks the identities.
        sw.ports_mut()[1].io.tx_packets += 1;
        let c = sw.conservation();
        assert!(!c.holds);
        let f = c.failures(&["a".into(), "b".into(), "c".into()]);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].starts_with("port b egress frames: in 1 != out 2"),
            "{f:?}"
        );
        assert!(f[1].starts_with("switch frames:"), "{f:?}");
        sw.drain(&mut st);
    }

    #[test]
    fn one_port_switch_counts_a_flood_as_filtered() {
        let mut sw = switch(1, Rate::from_bps(0), 0);
        let mut st = VecStore::new();
        send(
            &mut sw,
            &mut st,
            0,
            frame(mac(1), MacAddr::BROADCAST, 60),
            0,
        );
        assert_eq!(sw.ports()[0].io.filtered, 1);
        assert!(sw.conservation().holds);
        assert_eq!(st.live, 0);
    }
}

//! The whole switch as a deterministic machine: frames in (port, bytes, now),
//! frames out (port, packet) — no sockets, no clock.
//!
//! ```text
//! ingress: (host link) → parse → L2 forward (learning bridge)
//!          → unicast: (pure ACK: the ingress port's R-AQM) → egress port
//!          → flood: a copy to every other egress port
//! egress port: classify → buffer → enqueue AQM → queues → scheduler
//!              → dequeue AQM → shaper → delay line → out
//! ```
//!
//! The AF_XDP data path (`dataplane`) feeds received frames to [`Switch::ingress`]
//! and transmits what [`Switch::poll`] hands out; tests and simulations drive the
//! same code with a [`VecStore`](crate::packet::VecStore) and a manual clock.
//!
//! R-AQM (R-AQM paper §IV; the core is [`crate::raqm`]): with
//! [`Switch::enable_raqm`] every [`SwitchPort`] carries its own
//! [`RaqmPort`]. A pure ACK arriving on port P is offered to P's virtual
//! input queue after the forwarding decision (unicast only), once: it
//! passes (headers rewritten), is held or is dropped. P's departures credit
//! its token bucket in [`Switch::poll`], which first releases what the
//! buckets allow (collect, then enqueue on the egress ports the bridge
//! chose), and [`Switch::next_event`] includes the VIQ deadlines. SYNs teach
//! R-AQM the flows' window scales.

mod counters;
mod forward;
#[cfg(test)]
mod tests;

pub use counters::{Balance, Conservation, IoCounters, PortBalance};
pub use forward::Forwarder;

use crate::aqm::{Aqm, DropReason};
use crate::bridge::{Bridge, BridgeConfig, Forward};
use crate::capture::{Capture, CaptureConfig, Fate};
use crate::delay::DelayLine;
use crate::ingress::IngressLink;
use crate::packet::{FrameId, FrameStore, Packet};
use crate::port::{no_witness, EgressPort, PortConfig, PortConfigError};
use crate::raqm::{self, AckCtx, Offer, RaqmPort, WindowScales};
use crate::units::{Nanos, Rate};
use crate::wire;

/// One switch port: its egress pipeline, its wire, and what it does to
/// frames arriving on it (host link, R-AQM).
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
    /// R-AQM for the pure ACKs arriving on this port (its VIQ, bucket fed
    /// by this port's departures, state machine), if on.
    pub raqm: Option<RaqmPort>,
    /// The queue the pure ACKs R-AQM passes or releases to this port go to:
    /// its highest-priority queue when `ack_priority` is on and the
    /// scheduler has one (R-AQM paper §IV-A); None: classified as any frame.
    pub ack_queue: Option<usize>,
}

impl<A: Aqm> SwitchPort<A> {
    /// Moves what the shaper lets go at `now` onto the wire, and hands what
    /// left the wire to `tx(port number i, packet)`; notes both in `capture`.
    fn transmit<S: FrameStore>(
        &mut self,
        i: u16,
        now: Nanos,
        store: &mut S,
        mut capture: Option<&mut Capture>,
        tx: &mut impl FnMut(u16, Packet),
    ) {
        self.egress.tick(now);
        loop {
            let departed = match capture.as_deref_mut() {
                Some(c) => self
                    .egress
                    .dequeue_with(now, store, &mut |pkt, why, bytes| {
                        c.dequeue_dropped(i, now, pkt, why, bytes)
                    }),
                None => self.egress.dequeue_with(now, store, &mut no_witness),
            };
            let Some(d) = departed else { break };
            if let Some(c) = capture.as_deref_mut() {
                c.departed(i, now, &d);
            }
            if let Some(r) = &mut self.raqm {
                r.on_departure(d.pkt.len as u64);
            }
            self.wire.push(d.pkt, now);
        }
        while let Some(pkt) = self.wire.pop_ready(now) {
            self.io.tx_packets += 1;
            self.io.tx_bytes += pkt.len as u64;
            if let Some(c) = capture.as_deref_mut() {
                c.tx(i, now, store.bytes_mut(pkt.frame, pkt.len), pkt.len);
            }
            tx(i, pkt);
        }
    }

    /// Packets this port holds: queued, on its wire, in its VIQ, on its
    /// emulated host link.
    fn held_packets(&self) -> u64 {
        self.egress.backlog_pkts() as u64
            + self.wire.len() as u64
            + self.raqm.as_ref().map_or(0, |r| r.viq_len() as u64)
            + self.ingress_link.as_ref().map_or(0, |l| l.len() as u64)
    }
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

/// A switch over N egress ports; `F` decides where frames go (by default
/// the learning bridge).
pub struct Switch<A: Aqm, F: Forwarder = Bridge> {
    fwd: F,
    ports: Vec<SwitchPort<A>>,
    /// Capture (`--pcap`); None: off, one branch per hook.
    capture: Option<Box<Capture>>,
    /// The window scales R-AQM learned from SYNs, for every port's rwnd
    /// rewrite; Some exactly when R-AQM is on.
    raqm_scales: Option<WindowScales>,
    /// Scratch for R-AQM releases and stale drops (no allocation per poll).
    raqm_out: Vec<(u16, Packet)>,
    raqm_dropped: Vec<Packet>,
}

impl<A: Aqm> Switch<A, Bridge> {
    /// A learning switch with the given ports (index = port number).
    pub fn new(
        specs: Vec<PortSpec<A>>,
        bridge: BridgeConfig,
        now: Nanos,
        seed: u64,
    ) -> Result<Self, PortConfigError> {
        let n = specs.len() as u16;
        Self::with_forwarder(specs, Bridge::new(n, bridge), now, seed)
    }
    /// The MAC table.
    pub fn bridge(&self) -> &Bridge {
        &self.fwd
    }
    /// Forgets MAC entries older than the ageing time.
    pub fn age(&mut self, now: Nanos) {
        self.fwd.age(now);
    }
}

impl<A: Aqm, F: Forwarder> Switch<A, F> {
    /// A switch with the given ports (index = port number) whose frames go
    /// where `fwd` says.
    pub fn with_forwarder(
        specs: Vec<PortSpec<A>>,
        fwd: F,
        now: Nanos,
        seed: u64,
    ) -> Result<Self, PortConfigError> {
        let mut ports = Vec::with_capacity(specs.len());
        for (i, s) in specs.into_iter().enumerate() {
            let egress = EgressPort::new(s.config, s.aqm, now, seed.wrapping_add(i as u64))?;
            ports.push(SwitchPort {
                name: s.name,
                egress,
                wire: DelayLine::new(s.delay_ns),
                io: IoCounters::default(),
                ingress_link: None,
                raqm: None,
                ack_queue: None,
            });
        }
        Ok(Switch {
            fwd,
            ports,
            capture: None,
            raqm_scales: None,
            raqm_out: Vec::new(),
            raqm_dropped: Vec::new(),
        })
    }

    /// Turns capture on (see [`crate::capture`]): the switch records frames,
    /// and what its egress ports did with them, into a batch the caller
    /// collects with [`capture_mut`](Self::capture_mut).
    pub fn enable_capture(&mut self, cfg: CaptureConfig) {
        self.set_capture(Capture::new(cfg));
    }
    /// Turns capture on with `capture` (e.g. one that reports this switch's
    /// ports by their numbers in a fabric, [`Capture::renumbered`]).
    pub fn set_capture(&mut self, capture: Capture) {
        self.capture = Some(Box::new(capture));
    }
    /// The capture, when on.
    pub fn capture(&self) -> Option<&Capture> {
        self.capture.as_deref()
    }
    /// The capture, when on (mutable).
    pub fn capture_mut(&mut self) -> Option<&mut Capture> {
        self.capture.as_deref_mut()
    }

    /// Turns R-AQM on for every port (each port's VIQ holds the pure ACKs
    /// arriving on it; its bucket is fed by its own departures).
    pub fn enable_raqm(&mut self, cfg: &raqm::Config, now: Nanos) {
        let cfgs = vec![cfg.clone(); self.ports.len()];
        self.enable_raqm_ports(&cfgs, now);
    }

    /// Turns R-AQM on with its own parameters per port (`cfgs[i]` for port
    /// `i`: a fabric's ports have links of different rates).
    ///
    /// # Panics
    /// When `cfgs` does not have one entry per port (a caller's bug).
    pub fn enable_raqm_ports(&mut self, cfgs: &[raqm::Config], now: Nanos) {
        assert_eq!(cfgs.len(), self.ports.len(), "one R-AQM config per port");
        for (p, cfg) in self.ports.iter_mut().zip(cfgs) {
            let c = p.egress.config();
            p.raqm = Some(RaqmPort::new(cfg.clone(), c.rate, now));
            p.ack_queue = cfg
                .ack_priority
                .then(|| c.sched.top_priority_queue(c.queues))
                .flatten();
        }
        self.raqm_scales = Some(WindowScales::default());
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

    /// The window scales R-AQM learned from SYNs (None: R-AQM off).
    pub fn window_scales(&self) -> Option<&WindowScales> {
        self.raqm_scales.as_ref()
    }

    /// The ports, by number.
    pub fn ports(&self) -> &[SwitchPort<A>] {
        &self.ports
    }
    /// Mutable access to the ports (e.g. PRED's controller changing RED's slope).
    pub fn ports_mut(&mut self) -> &mut [SwitchPort<A>] {
        &mut self.ports
    }
    /// The forwarding decision (bridge or route table).
    pub fn forwarder(&self) -> &F {
        &self.fwd
    }
    /// Mutable access to the forwarding decision.
    pub fn forwarder_mut(&mut self) -> &mut F {
        &mut self.fwd
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

    /// A frame received on `port` enters the switch at `now`: counted,
    /// captured, parsed, its source learned, and forwarded.
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
        if let (Some(scales), Some(l3), Some(t)) = (&mut self.raqm_scales, &info.l3, tcp) {
            if t.flags & wire::tcp::flags::SYN != 0 {
                scales.learn(store.bytes_mut(frame, len), l3);
            }
        }
        match self
            .fwd
            .forward(port, store.bytes_mut(frame, len), &info, now)
        {
            Forward::Unicast(out) if (out as usize) < self.ports.len() => {
                let pure_ack = tcp.is_some_and(|t| t.is_pure_ack());
                self.unicast(pkt, out, pure_ack, now, store);
            }
            Forward::Unicast(_) => self.ingress_drop(port, frame, DropReason::Malformed, store),
            Forward::Drop => self.filter(port, frame, store),
            Forward::Flood => self.flood(pkt, now, store),
        }
    }

    /// `pkt` goes to egress port `out`; a pure ACK first goes through its
    /// ingress port's R-AQM, which passes it (rewritten), holds it or drops it.
    fn unicast<S: FrameStore>(
        &mut self,
        pkt: Packet,
        out: u16,
        pure_ack: bool,
        now: Nanos,
        store: &mut S,
    ) {
        let port = pkt.ingress_port;
        let p = &mut self.ports[port as usize];
        let mut pkt = pkt;
        let mut queue = None;
        if let (true, Some(r), Some(scales)) = (pure_ack, &mut p.raqm, &self.raqm_scales) {
            let mut cx = AckCtx {
                q_out_pkts: p.egress.backlog_pkts(),
                scales,
                store,
            };
            match r.offer(pkt, out, now, &mut cx) {
                Offer::Pass(passed) => {
                    pkt = passed;
                    queue = self.ports[out as usize].ack_queue;
                }
                Offer::Held => return,
                Offer::Dropped(ack, why) => {
                    return self.ingress_drop(port, ack.frame, why.into(), store)
                }
            }
        }
        self.enqueue_on(out as usize, pkt, queue, now, store);
    }

    /// A copy of `pkt` to every port the forwarder floods to (a bridge: all
    /// but the ingress port); the last one gets the original frame.
    fn flood<S: FrameStore>(&mut self, pkt: Packet, now: Nanos, store: &mut S) {
        let port = pkt.ingress_port;
        self.ports[port as usize].io.flooded += 1;
        let n = self.ports.len() as u16;
        let fwd = &self.fwd;
        let Some(last) = (0..n).rev().find(|&o| fwd.floods_to(port, o)) else {
            // No other port: nowhere to send it.
            return self.filter(port, pkt.frame, store);
        };
        for o in 0..last {
            if !self.fwd.floods_to(port, o) {
                continue;
            }
            self.ports[port as usize].io.flood_copies += 1;
            match store.clone_frame(pkt.frame, pkt.len) {
                Some(frame) => {
                    self.enqueue_on(o as usize, Packet { frame, ..pkt }, None, now, store)
                }
                None => self.count_ingress_drop(port, DropReason::NoFrame),
            }
        }
        self.enqueue_on(last as usize, pkt, None, now, store);
    }

    /// Enqueues `pkt` on egress port `out` — into `queue` if given, else the
    /// queue its class maps to — and, when capturing, notes its fate. Every
    /// enqueue of the switch goes through here.
    #[inline]
    fn enqueue_on<S: FrameStore>(
        &mut self,
        out: usize,
        pkt: Packet,
        queue: Option<usize>,
        now: Nanos,
        store: &mut S,
    ) {
        if let Some(p) = self.ports.get_mut(pkt.ingress_port as usize) {
            p.io.forwarded += 1;
        }
        let egress = &mut self.ports[out].egress;
        let admission = match queue {
            Some(q) => egress.enqueue_to(pkt, q, now, store),
            None => egress.enqueue(pkt, now, store),
        };
        if let Some(c) = self.capture.as_deref_mut() {
            c.enqueued(out as u16, admission);
        }
    }

    /// A frame received on `port` is not forwarded: its destination is on
    /// `port` itself (or there is no other port).
    fn filter<S: FrameStore>(&mut self, port: u16, frame: FrameId, store: &mut S) {
        self.ports[port as usize].io.filtered += 1;
        if let Some(c) = self.capture.as_deref_mut() {
            c.rx_fate(Fate::Filtered);
        }
        store.release(frame);
    }

    /// A frame received on `port` is dropped before any egress queue.
    fn ingress_drop<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        reason: DropReason,
        store: &mut S,
    ) {
        self.count_ingress_drop(port, reason);
        store.release(frame);
    }

    /// Counts (and captures) an ingress drop whose frame is already gone or
    /// never was (a flood copy with no frame to copy into).
    fn count_ingress_drop(&mut self, port: u16, reason: DropReason) {
        self.ports[port as usize].io.ingress_drops[reason as usize] += 1;
        if let Some(c) = self.capture.as_deref_mut() {
            c.rx_fate(Fate::IngressDrop(reason));
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
        self.release_host_links(now, store);
        // Fates from here on (ACKs R-AQM releases) belong to no frame
        // received now.
        if let Some(c) = self.capture.as_deref_mut() {
            c.end_rx();
        }
        if self.raqm_scales.is_some() {
            self.release_acks(now, store);
        }
        let mut capture = self.capture.as_deref_mut();
        for (i, p) in self.ports.iter_mut().enumerate() {
            p.transmit(i as u16, now, store, capture.as_deref_mut(), &mut tx);
        }
    }

    /// Processes the frames the emulated host links deliver by `now`.
    fn release_host_links<S: FrameStore>(&mut self, now: Nanos, store: &mut S) {
        for i in 0..self.ports.len() {
            while let Some((frame, len)) = self.ports[i]
                .ingress_link
                .as_mut()
                .and_then(|l| l.pop_ready(now))
            {
                self.process(i as u16, frame, len, now, store);
            }
        }
    }

    /// R-AQM's step on every port: state machines, stale drops, releases
    /// (collected first, then enqueued on their egress ports).
    fn release_acks<S: FrameStore>(&mut self, now: Nanos, store: &mut S) {
        let Some(scales) = &self.raqm_scales else {
            return;
        };
        let mut out = std::mem::take(&mut self.raqm_out);
        let mut dropped = std::mem::take(&mut self.raqm_dropped);
        for p in &mut self.ports {
            let Some(r) = &mut p.raqm else { continue };
            let mut cx = AckCtx {
                q_out_pkts: p.egress.backlog_pkts(),
                scales,
                store,
            };
            r.step(now, &mut cx, &mut out, &mut dropped);
            for pkt in dropped.drain(..) {
                p.io.ingress_drops[DropReason::Stale as usize] += 1;
                store.release(pkt.frame);
            }
        }
        for (o, pkt) in out.drain(..) {
            let queue = self.ports[o as usize].ack_queue;
            self.enqueue_on(o as usize, pkt, queue, now, store);
        }
        self.raqm_out = out;
        self.raqm_dropped = dropped;
    }

    /// The earliest time `poll` has something to do (None: all idle).
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        self.ports
            .iter()
            .flat_map(|p| {
                [
                    p.egress.next_ready(now),
                    p.wire.next_release(),
                    p.egress.aqm().next_tick(),
                    p.ingress_link.as_ref().and_then(|l| l.next_release()),
                    p.raqm
                        .as_ref()
                        .and_then(|r| r.next_event(p.egress.backlog_pkts(), now)),
                ]
            })
            .flatten()
            .min()
    }

    /// Packets held anywhere in the switch (queues + wires + R-AQM's VIQs +
    /// emulated host links).
    pub fn held_packets(&self) -> u64 {
        self.ports.iter().map(SwitchPort::held_packets).sum()
    }

    /// Releases every held frame (shutdown).
    pub fn drain<S: FrameStore>(&mut self, store: &mut S) {
        for p in &mut self.ports {
            if let Some(r) = &mut p.raqm {
                for h in r.drain() {
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

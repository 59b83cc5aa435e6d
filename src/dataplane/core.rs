//! What the data path drives: one [`Switch`] (the default) or a [`Fabric`]
//! of several (`--topology`). Both are deterministic machines with frames
//! in at numbered ports and frames out at numbered ports; [`Core`] is that
//! common face, so the loop ([`super::DataPath`]) is the same code for both,
//! compiled once for each (no dynamic dispatch, no branch per frame: the
//! single switch runs exactly as before).
//!
//! The data path's ports are the AF_XDP sockets: for a switch, its ports;
//! for a fabric, its hosts (port `h` = host `h` of the topology, in the
//! hosts' order), then its wires when the process runs part of a fabric
//! (`--switches`: links to switches another process runs, each on a real
//! interface). A fabric's other links stay inside it (in-memory, no system
//! call per hop). Counters and time series number a fabric's ports as
//! [`Fabric::port_order`]: the data path's ports first (so index `h` is the
//! interface of host `h`), then every other link direction, named
//! `leaf1:spine2`.

use std::sync::Arc;

use anyhow::Result;

use super::build::{build_fabric, build_switch};
use super::snapshot::Snapshot;
use crate::aqm::AqmKind;
use crate::capture::{Batch, Capture, CaptureConfig};
use crate::config::Settings;
use crate::fabric::{Exit, Fabric};
use crate::fidelity::{LoopStalls, Thresholds};
use crate::packet::{FrameId, FrameStore, Packet};
use crate::switch::Switch;
use crate::timebase::Dilation;
use crate::timeseries::Batch as SeriesBatch;
use crate::units::Nanos;

/// One switch or a fabric, as the data path drives it (see the module
/// header). Port numbers are the data path's: its AF_XDP ports.
pub trait Core: Sized {
    /// Builds it from settings (no I/O), at time 0.
    fn build(settings: &Settings) -> Result<Self>;
    /// The names of the ports in its counters (`names`: the interfaces).
    fn port_names(&self, interfaces: &[String]) -> Vec<String>;
    /// A frame arrived on data-path port `port` at `now`.
    fn ingress<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    );
    /// Moves what is due by `now`; what leaves by a data-path port goes to
    /// `tx(port, packet)`.
    fn poll<S: FrameStore>(&mut self, now: Nanos, store: &mut S, tx: impl FnMut(u16, Packet));
    /// The earliest time `poll` has something to do.
    fn next_event(&self, now: Nanos) -> Option<Nanos>;
    /// Packets held anywhere inside.
    fn held_packets(&self) -> u64;
    /// Releases every held frame (shutdown).
    fn drain<S: FrameStore>(&mut self, store: &mut S);
    /// `n` frames that left by data-path port `port` were dropped because
    /// its interface is down or gone.
    fn count_link_down(&mut self, port: u16, n: u64);
    /// Periodic ageing (the bridge's MAC table; a fabric's routes do not age).
    fn age(&mut self, now: Nanos);
    /// Turns capture on, `cfg.ports` in the data path's port numbers
    /// ([`port_names`](Self::port_names)' order).
    fn enable_capture(&mut self, cfg: CaptureConfig);
    /// Records captured and not yet taken (0 when capture is off).
    fn captured(&self) -> usize;
    /// Hands out the records captured so far, numbered as the data path's
    /// ports, leaving `empty` (cleared) to fill; `empty` back, cleared, when
    /// capture is off.
    fn take_capture(&mut self, empty: Batch) -> Batch;
    /// The counter snapshot at `now`, ports named `names`.
    fn snapshot(&self, names: &Arc<[String]>, now: Nanos, guard: &Thresholds) -> Snapshot;
    /// One time-series sample at `now`.
    fn sample(
        &self,
        now: Nanos,
        dilation: Dilation,
        stalls: Option<&LoopStalls>,
        out: &mut SeriesBatch,
    );
}

impl Core for Switch<AqmKind> {
    fn build(settings: &Settings) -> Result<Self> {
        build_switch(settings)
    }
    fn port_names(&self, interfaces: &[String]) -> Vec<String> {
        interfaces.to_vec()
    }
    #[inline]
    fn ingress<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        Switch::ingress(self, port, frame, len, now, store)
    }
    #[inline]
    fn poll<S: FrameStore>(&mut self, now: Nanos, store: &mut S, tx: impl FnMut(u16, Packet)) {
        Switch::poll(self, now, store, tx)
    }
    #[inline]
    fn next_event(&self, now: Nanos) -> Option<Nanos> {
        Switch::next_event(self, now)
    }
    #[inline]
    fn held_packets(&self) -> u64 {
        Switch::held_packets(self)
    }
    fn drain<S: FrameStore>(&mut self, store: &mut S) {
        Switch::drain(self, store)
    }
    fn count_link_down(&mut self, port: u16, n: u64) {
        self.ports_mut()[port as usize].io.link_down_drops += n;
    }
    fn age(&mut self, now: Nanos) {
        Switch::age(self, now)
    }
    fn enable_capture(&mut self, cfg: CaptureConfig) {
        Switch::enable_capture(self, cfg);
    }
    #[inline]
    fn captured(&self) -> usize {
        self.capture().map_or(0, |c| c.pending().records.len())
    }
    fn take_capture(&mut self, mut empty: Batch) -> Batch {
        match Switch::capture_mut(self) {
            Some(c) => c.take(empty),
            None => {
                empty.clear();
                empty
            }
        }
    }
    fn snapshot(&self, names: &Arc<[String]>, now: Nanos, guard: &Thresholds) -> Snapshot {
        Snapshot::take(self, names, now, guard)
    }
    fn sample(
        &self,
        now: Nanos,
        dilation: Dilation,
        stalls: Option<&LoopStalls>,
        out: &mut SeriesBatch,
    ) {
        crate::timeseries::sample(self, now, dilation, stalls, out)
    }
}

/// A fabric with the order its ports are reported in.
pub struct FabricCore {
    fabric: Fabric<AqmKind>,
    /// [`Fabric::port_order`] as (slot in [`Fabric::switches`], port),
    /// computed once; its first entries are the data path's ports.
    order: Vec<(usize, u16)>,
    /// The ports' names, in `order`.
    names: Vec<String>,
    /// `ingress[port]`: (topology switch, port) of data-path port `port`.
    ingress: Vec<(usize, u16)>,
    /// `host_exit[h]`: the data-path port of host `h` (hosts of this process).
    host_exit: Vec<u16>,
    /// `wire_exit[s][p]`: the data-path port of wire `p` of topology switch `s`.
    wire_exit: Vec<Vec<u16>>,
    /// Per switch, an empty batch to swap for its capture's records
    /// (capture on: one per switch; off: none).
    spares: Vec<Batch>,
}

impl FabricCore {
    /// Wraps a fabric (its hosts, then its wires, are the data path's ports).
    pub fn new(fabric: Fabric<AqmKind>) -> Self {
        let layout = fabric.layout();
        let topo = fabric.port_order();
        let hosts: Vec<usize> = layout.local_hosts().collect();
        let wires = layout.wires();
        let mut host_exit = vec![u16::MAX; layout.host_port.len()];
        for (i, &h) in hosts.iter().enumerate() {
            host_exit[h] = i as u16;
        }
        let mut wire_exit: Vec<Vec<u16>> = layout
            .ports
            .iter()
            .map(|p| vec![u16::MAX; p.len()])
            .collect();
        for (i, &(s, p)) in wires.iter().enumerate() {
            wire_exit[s][p as usize] = (hosts.len() + i) as u16;
        }
        let ingress = topo[..hosts.len() + wires.len()].to_vec();
        let names = topo.iter().map(|&(s, p)| fabric.port_name(s, p)).collect();
        let order = topo
            .iter()
            .map(|&(s, p)| (fabric.slot(s).unwrap_or(0), p))
            .collect();
        FabricCore {
            fabric,
            order,
            names,
            ingress,
            host_exit,
            wire_exit,
            spares: Vec::new(),
        }
    }
    /// The fabric.
    pub fn fabric(&self) -> &Fabric<AqmKind> {
        &self.fabric
    }
    /// Mutable access to the fabric.
    pub fn fabric_mut(&mut self) -> &mut Fabric<AqmKind> {
        &mut self.fabric
    }
}

impl Core for FabricCore {
    fn build(settings: &Settings) -> Result<Self> {
        build_fabric(settings).map(FabricCore::new)
    }
    fn port_names(&self, _interfaces: &[String]) -> Vec<String> {
        self.names.clone()
    }
    #[inline]
    fn ingress<S: FrameStore>(
        &mut self,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        match self.ingress.get(port as usize) {
            Some(&(s, p)) => self.fabric.ingress_at(s, p, frame, len, now, store),
            // Not a data-path port: ingress_at counts and releases it.
            None => self
                .fabric
                .ingress_at(usize::MAX, 0, frame, len, now, store),
        }
    }
    #[inline]
    fn poll<S: FrameStore>(&mut self, now: Nanos, store: &mut S, mut tx: impl FnMut(u16, Packet)) {
        let (hosts, wires) = (&self.host_exit, &self.wire_exit);
        self.fabric.poll(now, store, |e, pkt| match e {
            Exit::Host(h) => tx(hosts[h], pkt),
            Exit::Wire { switch, port } => tx(wires[switch][port as usize], pkt),
        })
    }
    #[inline]
    fn next_event(&self, now: Nanos) -> Option<Nanos> {
        self.fabric.next_event(now)
    }
    #[inline]
    fn held_packets(&self) -> u64 {
        self.fabric.held_packets()
    }
    fn drain<S: FrameStore>(&mut self, store: &mut S) {
        self.fabric.drain(store)
    }
    fn count_link_down(&mut self, port: u16, n: u64) {
        if let Some(&(s, p)) = self.order.get(port as usize) {
            self.fabric.switches_mut()[s].ports_mut()[p as usize]
                .io
                .link_down_drops += n;
        }
    }
    fn age(&mut self, _now: Nanos) {}
    /// Every switch captures its own ports, reporting each by its place in
    /// the data path's order: a frame crossing the fabric is in every
    /// hop's rx and tx files (`leaf1:h1-rx`, `leaf1:spine2-tx`,
    /// `spine2:leaf1-rx`, …), each with that switch's fate for it.
    fn enable_capture(&mut self, cfg: CaptureConfig) {
        let n = self.order.len();
        let switches = self.fabric.switches_mut();
        let mut numbers: Vec<Vec<u16>> =
            switches.iter().map(|s| vec![0; s.ports().len()]).collect();
        for (g, &(s, p)) in self.order.iter().enumerate() {
            numbers[s][p as usize] = g as u16;
        }
        for (sw, numbers) in switches.iter_mut().zip(numbers) {
            let ports = numbers
                .iter()
                .map(|&g| cfg.ports.get(g as usize).copied().unwrap_or(false))
                .collect();
            let local = CaptureConfig {
                snaplen: cfg.snaplen,
                ports,
            };
            sw.set_capture(Capture::renumbered(local, numbers, n));
        }
        self.spares = (0..switches.len()).map(|_| Batch::default()).collect();
    }
    #[inline]
    fn captured(&self) -> usize {
        self.fabric
            .switches()
            .iter()
            .filter_map(|s| s.capture())
            .map(|c| c.pending().records.len())
            .sum()
    }
    /// The switches' records one after the other: within a port (one
    /// switch's) they stay in time order, which is what the writer needs.
    fn take_capture(&mut self, mut empty: Batch) -> Batch {
        empty.clear();
        empty.lost.resize(self.order.len(), [0, 0]);
        for (sw, spare) in self.fabric.switches_mut().iter_mut().zip(&mut self.spares) {
            if let Some(c) = sw.capture_mut() {
                let b = c.take(std::mem::take(spare));
                empty.append(&b);
                *spare = b;
            }
        }
        empty
    }
    fn snapshot(&self, names: &Arc<[String]>, now: Nanos, guard: &Thresholds) -> Snapshot {
        Snapshot::take_fabric(&self.fabric, &self.order, names, now, guard)
    }
    fn sample(
        &self,
        now: Nanos,
        dilation: Dilation,
        stalls: Option<&LoopStalls>,
        out: &mut SeriesBatch,
    ) {
        let sw = self.fabric.switches();
        for (i, &(s, p)) in self.order.iter().enumerate() {
            crate::timeseries::sample_port(
                i as u16,
                &sw[s].ports()[p as usize],
                now,
                dilation,
                out,
            );
        }
        if let Some(st) = stalls {
            crate::timeseries::sample_stalls(st, now, out);
        }
    }
}

//! Fabrics: several switches and the links between them as one
//! deterministic machine — frames in at host ports, time as an argument,
//! frames out at host ports. No sockets, no clock (as every algorithm here).
//!
//! ```text
//!  host h1 ─▶ leaf1 ─┬─ leaf1:spine1 ─▶ spine1 ─ spine1:leaf2 ─┬─▶ leaf2 ─▶ host h3
//!                    └─ leaf1:spine2 ─▶ spine2 ─ spine2:leaf2 ─┘
//!  every arrow into a switch: Switch::ingress (parse → Routes: route / ECMP / proxy ARP → egress port)
//!  every link direction:      the full egress port (classify, buffer, AQM, scheduler, shaper)
//!                             + its delay line, then the far switch's ingress
//! ```
//!
//! Each switch is a [`Switch`] whose [`Forwarder`](crate::switch::Forwarder)
//! is its route table ([`Routes`]); its ports are its hosts' ports, then one
//! per link ([`Layout`]). A link direction `leaf1 → spine2` is leaf1's egress
//! port `leaf1:spine2` — queues, AQM, shaper and the delay line the switch
//! already has — and what leaves that delay line is handed to spine2's
//! ingress in the same [`Fabric::poll`], with no copy and no system call:
//! the frame stays where it is in the frame store (the UMEM in the data
//! path). A frame is delivered at the `now` of the poll that finds its
//! delay elapsed; driven by [`Fabric::next_event`] that is the exact time.
//!
//! Topology: [`topology`] (TOML and the leaf-spine shorthand); forwarding:
//! [`routes`] (shortest paths, ECMP, proxy ARP, the flood tree).
//!
//! **Part of a fabric.** [`Fabric::part`] runs only some of the switches:
//! every process computes the whole fabric's routes from the same topology,
//! and a link to a switch another process runs is a *wire*: what leaves
//! that link's egress port (after its queues, AQM, shaper and delay line)
//! goes out as [`Exit::Wire`] — the data path sends it on a real interface
//! — and what arrives from the other process enters by
//! [`Fabric::ingress_at`] on the same port.

pub mod arp;
pub mod build;
pub mod layout;
pub mod routes;
pub mod split;
#[cfg(test)]
mod tests;
pub mod topology;

pub use build::aqm_ports;
pub use layout::{Layout, PortRole};
pub use routes::{Dest, Group, RouteCounters, Routes};
pub use topology::{FabricDesc, HostDesc, LinkDesc, PortDesc, SwitchDesc, TopologyError};

use serde::Serialize;

use crate::aqm::Aqm;
use crate::packet::{FrameId, FrameStore, Packet};
use crate::port::PortConfig;
use crate::switch::{Conservation, PortSpec, Switch, SwitchPort};
use crate::units::Nanos;

/// What the caller's port maker is told about one egress port.
#[derive(Debug)]
pub struct PortCtx<'a> {
    /// `leaf1:spine2` or `leaf1:h3`.
    pub name: String,
    /// The switch the port is on.
    pub switch: &'a str,
    /// What it faces.
    pub role: PortRole,
    /// The topology's settings for it.
    pub desc: &'a PortDesc,
}

/// Where a frame leaves the part of the fabric this process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// To host `h` (index into the topology's hosts).
    Host(usize),
    /// Onto the wire of link port `port` of switch `switch` (topology
    /// index): a link to a switch another process runs.
    Wire {
        /// The switch.
        switch: usize,
        /// Its port.
        port: u16,
    },
}

/// A fabric that cannot be built (a port the maker refused).
#[derive(Debug, thiserror::Error)]
#[error("port {port}: {err}")]
pub struct FabricError {
    /// The port's name.
    pub port: String,
    /// Why.
    pub err: String,
}

/// The counters of one link direction: the egress port at its start (with
/// its wire) and the name `from:to`.
pub struct LinkView<'f, A: Aqm> {
    /// `leaf1:spine2`.
    pub name: String,
    /// The egress port (queues, AQM, shaper, delay line and their counters).
    pub port: &'f SwitchPort<A>,
}

/// A fabric's routes and links at one instant ([`Fabric::report`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FabricReport {
    /// Every switch's forwarding decisions, in the topology's order.
    pub switches: Vec<SwitchRoutes>,
    /// Every link direction, in [`Fabric::links`]' order.
    pub links: Vec<LinkReport>,
}

/// One switch's part of a [`FabricReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchRoutes {
    /// `leaf1`.
    pub name: String,
    /// What its route table decided.
    pub routes: RouteCounters,
    /// Its ECMP groups with per-next-hop packets, bytes and flows.
    pub next_hops: Vec<Group>,
}

/// One link direction's part of a [`FabricReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkReport {
    /// `leaf1:spine2`.
    pub name: String,
    /// Packets sent on it.
    pub tx_packets: u64,
    /// Frame bytes sent on it.
    pub tx_bytes: u64,
    /// Packets its AQM CE-marked.
    pub marked_packets: u64,
    /// Packets its port dropped.
    pub dropped_packets: u64,
    /// Bytes queued at its egress port now.
    pub backlog_bytes: u64,
    /// Packets in flight on it (its delay line) now.
    pub on_wire_packets: usize,
}

/// Several switches joined by in-memory links, stepped with one `now`.
pub struct Fabric<A: Aqm> {
    desc: FabricDesc,
    layout: Layout,
    /// The switches this process runs, in the topology's order.
    switches: Vec<Switch<A, Routes>>,
    /// `ids[i]`: the topology's index of `switches[i]`.
    ids: Vec<usize>,
    /// `slot[s]`: where topology switch `s` is in `switches` (None: another
    /// process runs it).
    slot: Vec<Option<usize>>,
    /// Frames between two switches within one poll (no allocation per poll):
    /// (slot, port, frame).
    transit: Vec<(usize, u16, Packet)>,
    /// Switches (by slot) that got frames in the last round of a poll.
    dirty: Vec<bool>,
    /// Frames handed to [`Fabric::ingress`] for a host it does not have
    /// (a caller's bug; released and counted).
    unknown_host: u64,
}

impl<A: Aqm> Fabric<A> {
    /// Builds the fabric `desc` at `now`. `make_port` gives each egress port
    /// its configuration and AQM ([`aqm_ports`] builds the usual ones); the
    /// topology's rate and buffer overwrite what it returns, and the
    /// topology's delay becomes the port's delay line.
    pub fn new(
        desc: FabricDesc,
        make_port: impl FnMut(&PortCtx) -> Result<(PortConfig, A), String>,
        now: Nanos,
    ) -> Result<Self, FabricError> {
        let local = vec![true; desc.switches.len()];
        Self::part(desc, &local, make_port, now)
    }

    /// Builds the part of fabric `desc` made of the switches `local[s]`, as
    /// [`new`](Self::new): routes are the whole fabric's, and a link to a
    /// switch not in `local` is a wire ([`Exit::Wire`], [`ingress_at`](Self::ingress_at)).
    pub fn part(
        desc: FabricDesc,
        local: &[bool],
        mut make_port: impl FnMut(&PortCtx) -> Result<(PortConfig, A), String>,
        now: Nanos,
    ) -> Result<Self, FabricError> {
        let layout = Layout::part(&desc, local);
        let routes = routes::compute(&desc, &layout);
        let mut switches = Vec::with_capacity(desc.switches.len());
        let mut ids = Vec::new();
        let mut slot = vec![None; desc.switches.len()];
        for (s, r) in routes.into_iter().enumerate() {
            if !layout.local[s] {
                continue;
            }
            let mut specs = Vec::with_capacity(layout.ports[s].len());
            for (p, &role) in layout.ports[s].iter().enumerate() {
                let ctx = PortCtx {
                    name: layout.port_name(&desc, s, p as u16),
                    switch: &desc.switches[s].name,
                    role,
                    desc: layout.port_desc(&desc, s, p as u16),
                };
                let (mut config, aqm) = make_port(&ctx).map_err(|err| FabricError {
                    port: ctx.name.clone(),
                    err,
                })?;
                config.rate = ctx.desc.rate;
                if let Some(b) = ctx.desc.buffer_bytes {
                    config.buffer_bytes = b;
                }
                specs.push(PortSpec {
                    name: ctx.name,
                    config,
                    aqm,
                    delay_ns: ctx.desc.delay_ns,
                });
            }
            let seed = routes::switch_seed(desc.seed, s);
            let sw = Switch::with_forwarder(specs, r, now, seed).map_err(|e| FabricError {
                port: desc.switches[s].name.clone(),
                err: e.to_string(),
            })?;
            slot[s] = Some(switches.len());
            ids.push(s);
            switches.push(sw);
        }
        let n = switches.len();
        Ok(Fabric {
            desc,
            layout,
            switches,
            ids,
            slot,
            transit: Vec::with_capacity(1024),
            dirty: vec![false; n],
            unknown_host: 0,
        })
    }

    /// The topology.
    pub fn desc(&self) -> &FabricDesc {
        &self.desc
    }
    /// The port numbers.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The switches this process runs, in the topology's order (all of
    /// them unless [`part`](Self::part)); the `i`-th is topology switch
    /// [`switch_ids`](Self::switch_ids)`[i]`.
    pub fn switches(&self) -> &[Switch<A, Routes>] {
        &self.switches
    }
    /// Mutable access to the switches (e.g. PRED's controller on a port).
    pub fn switches_mut(&mut self) -> &mut [Switch<A, Routes>] {
        &mut self.switches
    }
    /// The topology's index of each of [`switches`](Self::switches).
    pub fn switch_ids(&self) -> &[usize] {
        &self.ids
    }
    /// Where topology switch `s` is in [`switches`](Self::switches) (None:
    /// another process runs it).
    pub fn slot(&self, s: usize) -> Option<usize> {
        self.slot.get(s).copied().flatten()
    }
    /// The switch named `name`, if this process runs it.
    pub fn switch(&self, name: &str) -> Option<&Switch<A, Routes>> {
        let i = self.slot(self.desc.switch_index(name)?)?;
        Some(&self.switches[i])
    }

    /// Every link direction starting at a switch this process runs, named
    /// `from:to`, switch by switch in port order.
    pub fn links(&self) -> impl Iterator<Item = LinkView<'_, A>> + '_ {
        self.ids
            .iter()
            .zip(&self.switches)
            .flat_map(move |(&s, sw)| {
                self.layout.ports[s]
                    .iter()
                    .enumerate()
                    .filter_map(move |(p, r)| match r {
                        PortRole::Link { .. } => Some(LinkView {
                            name: self.layout.port_name(&self.desc, s, p as u16),
                            port: &sw.ports()[p],
                        }),
                        PortRole::Host(_) => None,
                    })
            })
    }
    /// The link direction named `from:to` (`leaf1:spine2`).
    pub fn link(&self, name: &str) -> Option<LinkView<'_, A>> {
        self.links().find(|l| l.name == name)
    }

    /// A frame of `len` bytes from host `host` (index into the topology's
    /// hosts) arrives at its switch at `now`. The fabric owns the frame from
    /// here on.
    pub fn ingress<S: FrameStore>(
        &mut self,
        host: usize,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        let Some(&(s, p)) = self.layout.host_port.get(host) else {
            // Not a host of this fabric: a caller's bug; keep the frame accounted.
            self.unknown_host += 1;
            store.release(frame);
            return;
        };
        self.ingress_at(s, p, frame, len, now, store);
    }

    /// A frame of `len` bytes arrives at `now` on port `port` of topology
    /// switch `switch`: from a wire (a link to a switch another process
    /// runs), or a host. The fabric owns the frame from here on.
    pub fn ingress_at<S: FrameStore>(
        &mut self,
        switch: usize,
        port: u16,
        frame: FrameId,
        len: u32,
        now: Nanos,
        store: &mut S,
    ) {
        match self.slot(switch) {
            Some(i) if (port as usize) < self.switches[i].ports().len() => {
                self.switches[i].ingress(port, frame, len, now, store)
            }
            // Not a port of this process: a caller's bug; keep the frame accounted.
            _ => {
                self.unknown_host += 1;
                store.release(frame);
            }
        }
    }

    /// Moves everything due by `now`: each switch's departures that reach a
    /// host go to `tx(Exit::Host(h), packet)`, those that leave by a wire
    /// to `tx(Exit::Wire { .. }, packet)` (`tx` owns the frame from then
    /// on); those that reach another switch of this process enter it at
    /// once, and may go on through it in the same call when nothing holds
    /// them (an unshaped, zero-delay path crosses the whole fabric in one
    /// poll).
    pub fn poll<S: FrameStore>(
        &mut self,
        now: Nanos,
        store: &mut S,
        mut tx: impl FnMut(Exit, Packet),
    ) {
        self.dirty.fill(true);
        // A frame crosses at most one link per round and shortest paths have
        // fewer links than there are switches; the bound is for safety only:
        // what is left stays queued and next_event reports it due.
        for _round in 0..=self.switches.len() {
            let mut transit = std::mem::take(&mut self.transit);
            for (i, sw) in self.switches.iter_mut().enumerate() {
                if !std::mem::replace(&mut self.dirty[i], false) {
                    continue;
                }
                let s = self.ids[i];
                let (roles, slot) = (&self.layout.ports[s], &self.slot);
                sw.poll(now, store, |p, pkt| match roles[p as usize] {
                    PortRole::Host(h) => tx(Exit::Host(h), pkt),
                    PortRole::Link {
                        peer, peer_port, ..
                    } => match slot[peer] {
                        Some(j) => transit.push((j, peer_port, pkt)),
                        None => tx(Exit::Wire { switch: s, port: p }, pkt),
                    },
                });
            }
            let moved = !transit.is_empty();
            for (peer, peer_port, pkt) in transit.drain(..) {
                self.dirty[peer] = true;
                self.switches[peer].ingress(peer_port, pkt.frame, pkt.len, now, store);
            }
            self.transit = transit;
            if !moved {
                break;
            }
        }
    }

    /// What every switch decided and what every link carried, queued, marked
    /// and dropped, by name — the per-hop answer to "where did it queue".
    /// Plain values (the data path copies them every 100 ms); whoever
    /// reads the report serialises it.
    pub fn report(&self) -> FabricReport {
        let switches = self
            .ids
            .iter()
            .zip(&self.switches)
            .map(|(&i, s)| SwitchRoutes {
                name: self.desc.switches[i].name.clone(),
                routes: *s.forwarder().counters(),
                next_hops: s.forwarder().groups().to_vec(),
            })
            .collect();
        let links = self
            .links()
            .map(|l| {
                let c = &l.port.egress.counters().port;
                LinkReport {
                    tx_packets: l.port.io.tx_packets,
                    tx_bytes: l.port.io.tx_bytes,
                    marked_packets: c.marked.total().pkts,
                    dropped_packets: c.dropped.total().pkts,
                    backlog_bytes: l.port.egress.backlog_bytes(),
                    on_wire_packets: l.port.wire.len(),
                    name: l.name,
                }
            })
            .collect();
        FabricReport { switches, links }
    }

    /// Frames given to [`ingress`](Self::ingress) for a host number the
    /// fabric does not have (released).
    pub fn unknown_host_frames(&self) -> u64 {
        self.unknown_host
    }

    /// Every egress port this process runs as (topology switch, port): the
    /// host ports in the hosts' order (for the whole fabric, the `h`-th is
    /// host `h`'s), then the wires, then every other link port, switch by
    /// switch ([`Layout::port_order`]). The data path numbers the fabric's
    /// ports so in its counters and time series.
    pub fn port_order(&self) -> Vec<(usize, u16)> {
        self.layout.port_order()
    }

    /// The name of port `p` of switch `s` (`leaf1:h3`, `leaf1:spine2`).
    pub fn port_name(&self, s: usize, p: u16) -> String {
        self.layout.port_name(&self.desc, s, p)
    }

    /// The earliest time [`poll`](Self::poll) has something to do.
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        self.switches.iter().filter_map(|s| s.next_event(now)).min()
    }

    /// Packets held anywhere in the fabric (queues, wires, VIQs).
    pub fn held_packets(&self) -> u64 {
        self.switches.iter().map(|s| s.held_packets()).sum()
    }

    /// Releases every held frame (shutdown).
    pub fn drain<S: FrameStore>(&mut self, store: &mut S) {
        for s in &mut self.switches {
            s.drain(store);
        }
    }

    /// Every switch's counter identities (by slot, as
    /// [`switches`](Self::switches)), and every in-process link's: what left
    /// a link's delay line entered the far switch on that link's port. (A
    /// wire's two ends are in two processes; each end's own identities
    /// hold.)
    pub fn conservation(&self) -> FabricConservation {
        let switches: Vec<Conservation> = self.switches.iter().map(|s| s.conservation()).collect();
        let mut link_failures = Vec::new();
        for (i, &s) in self.ids.iter().enumerate() {
            for (p, r) in self.layout.ports[s].iter().enumerate() {
                if let PortRole::Link {
                    peer, peer_port, ..
                } = *r
                {
                    let Some(j) = self.slot[peer] else { continue };
                    let sent = self.switches[i].ports()[p].io.tx_packets;
                    let got = self.switches[j].ports()[peer_port as usize].io.rx_packets;
                    if sent != got {
                        link_failures.push(format!(
                            "link {}: {sent} frames left its wire, {got} entered {}",
                            self.layout.port_name(&self.desc, s, p as u16),
                            self.desc.switches[peer].name
                        ));
                    }
                }
            }
        }
        let holds = switches.iter().all(|c| c.holds) && link_failures.is_empty();
        FabricConservation {
            switches,
            link_failures,
            holds,
        }
    }
}

/// The fabric's counter identities.
#[derive(Debug)]
pub struct FabricConservation {
    /// Per switch.
    pub switches: Vec<Conservation>,
    /// Links whose two ends disagree.
    pub link_failures: Vec<String>,
    /// Everything holds.
    pub holds: bool,
}

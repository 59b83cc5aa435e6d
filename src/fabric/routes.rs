//! Forwarding in a fabric: a route table per switch, computed from the
//! topology, and the [`Forwarder`] that applies it to every frame.
//!
//! **Routes.** Shortest paths by hop count: a breadth-first search from
//! every switch gives each switch's distance to it; the next hops of switch
//! `s` towards `d` are all of `s`'s links to a neighbour one hop closer to
//! `d` (every equal-cost next hop — two in a 2 × 2 leaf-spine, one on a
//! chain). A frame is looked up by destination IPv4 address (a host), then
//! by the longest IPv4 prefix a switch announced, then by destination MAC
//! (IPv6 and non-IP frames to a host). A destination on this switch is its
//! host port; anything else is a counted "no route" drop (the switch counts
//! it as filtered). Shortest-path next hops always get strictly closer, so
//! no unicast frame loops.
//!
//! **ECMP.** Among `n` next hops the frame takes
//! `⌊h · n / 2³²⌋` with `h = fmix64(seed_s ⊕ key)`: `key` is the parser's
//! 5-tuple hash ([`crate::wire::parse::flow_hash`]; 3-tuple for non-TCP/UDP,
//! the MAC pair for non-IP), `seed_s` the fabric's seed mixed with the
//! switch's number. Every packet of a flow direction therefore takes one
//! path (no reordering); the two directions of a flow hash independently,
//! each consistent (as a switch ASIC's ECMP); the same seed gives the same
//! paths run after run; and a different seed per switch avoids
//! polarisation, where every tier repeats the same choice. The
//! multiply-shift maps the hash onto `n` without the modulo's bias. Per
//! next hop the table counts packets, bytes and flows — a flow is counted
//! at its TCP SYN (without ACK), so two long flows on one path show as a
//! collision.
//!
//! **ARP and broadcast.** An ARP request for a fabric host is answered by
//! the switch it arrives at (proxy ARP at the edge, RFC 1027): the topology
//! knows every host's MAC and address, so the request is turned into the
//! reply in place and sent back out of the port it came in on. No ARP
//! broadcast crosses the fabric, which matters because an ECMP fabric is
//! full of loops a flood would run around. Every other broadcast or
//! multicast (IPv6 neighbour discovery, gratuitous ARP, ARP for an address
//! no host has) is flooded along one spanning tree — the breadth-first tree
//! from the first switch — to every host port, so each host gets one copy
//! and nothing loops. The learning bridge stays the single-switch default.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use serde::Serialize;

use super::layout::{Layout, PortRole};
use super::topology::FabricDesc;
use crate::bridge::{Forward, MacHasher};
use crate::switch::Forwarder;
use crate::topo::names::Ipv4Net;
use crate::units::Nanos;
use crate::wire::{self, FrameInfo, IpVersion, MacAddr};

type Table<V> = HashMap<u64, V, BuildHasherDefault<MacHasher>>;

/// Where a destination is, seen from one switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// On this switch's host port.
    Port(u16),
    /// Behind next-hop group `g` (index into [`Routes::groups`]).
    Group(u16),
}

/// The equal-cost next hops towards one switch, with what each carried.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The destination switch.
    pub to: String,
    /// Egress ports, one per next hop.
    pub ports: Vec<u16>,
    /// Names of those ports (`leaf1:spine2`).
    pub names: Vec<String>,
    /// Per next hop: packets sent.
    pub packets: Vec<u64>,
    /// Per next hop: frame bytes sent.
    pub bytes: Vec<u64>,
    /// Per next hop: TCP connections opened (SYN without ACK) — the flows
    /// hashed onto it.
    pub flows: Vec<u64>,
}

/// What the forwarding decisions were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RouteCounters {
    /// Unicast frames to a host on this switch.
    pub local: u64,
    /// Unicast frames sent towards another switch.
    pub routed: u64,
    /// Frames to no known host or prefix (dropped).
    pub no_route: u64,
    /// ARP requests answered in place (proxy ARP).
    pub arp_answered: u64,
    /// Broadcast / multicast frames flooded along the spanning tree.
    pub flooded: u64,
}

#[derive(Clone, Copy, Debug)]
struct HostEntry {
    dest: Dest,
    mac: MacAddr,
}

/// One switch's route table and forwarding decision.
#[derive(Clone, Debug)]
pub struct Routes {
    // parameters
    seed: u64,
    by_ip: Table<HostEntry>,
    by_mac: Table<Dest>,
    /// Longest first.
    prefixes: Vec<(Ipv4Net, Dest)>,
    /// Per port: part of the flood tree (host ports and tree links).
    floods: Vec<bool>,
    // running state and counters
    groups: Vec<Group>,
    counters: RouteCounters,
}

/// ECMP hash of a flow key under a switch's seed (MurmurHash3's `fmix64`
/// finaliser, so every output bit depends on every input bit).
#[inline]
pub fn ecmp_hash(seed: u64, key: u64) -> u32 {
    let mut h = seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 32) as u32
}

/// Next hop `⌊hash · n / 2³²⌋` of `n` (multiply-shift: no modulo bias).
#[inline]
pub fn pick(hash: u32, n: usize) -> usize {
    ((u64::from(hash) * n as u64) >> 32) as usize
}

/// The seed switch `s` hashes with: the fabric's seed mixed with `s`.
pub fn switch_seed(fabric_seed: u64, s: usize) -> u64 {
    u64::from(ecmp_hash(fabric_seed, s as u64 + 1)) << 32
        | u64::from(ecmp_hash(!fabric_seed, s as u64))
}

/// The flow key ECMP hashes: the 5-tuple hash, or the MAC pair for non-IP.
#[inline]
fn flow_key(info: &FrameInfo) -> u64 {
    match info.l3 {
        Some(l3) => u64::from(l3.flow_hash),
        None => info.src.to_u64() ^ info.dst.to_u64().rotate_left(24),
    }
}

/// Distances (hops) from every switch to `to`, over the links.
fn distances(adj: &[Vec<usize>], to: usize) -> Vec<u32> {
    let mut dist = vec![u32::MAX; adj.len()];
    dist[to] = 0;
    let mut todo = VecDeque::from([to]);
    while let Some(s) = todo.pop_front() {
        for &t in &adj[s] {
            if dist[t] == u32::MAX {
                dist[t] = dist[s] + 1;
                todo.push_back(t);
            }
        }
    }
    dist
}

/// Per switch, which ports flood: host ports, and the links of the
/// breadth-first tree from switch 0 (each switch's link to its parent, the
/// first link found one hop closer to the root).
fn flood_tree(d: &FabricDesc, layout: &Layout, adj: &[Vec<usize>]) -> Vec<Vec<bool>> {
    let dist = distances(adj, 0);
    let mut floods: Vec<Vec<bool>> = layout
        .ports
        .iter()
        .map(|ps| ps.iter().map(|r| matches!(r, PortRole::Host(_))).collect())
        .collect();
    for s in 1..d.switches.len() {
        let parent = layout.ports[s]
            .iter()
            .enumerate()
            .find_map(|(p, r)| match *r {
                PortRole::Link {
                    peer, peer_port, ..
                } if dist[peer] + 1 == dist[s] => Some((p, peer, peer_port)),
                _ => None,
            });
        if let Some((p, peer, peer_port)) = parent {
            floods[s][p] = true;
            floods[peer][peer_port as usize] = true;
        }
    }
    floods
}

/// Every switch's route table for the fabric `d` laid out as `layout`.
pub fn compute(d: &FabricDesc, layout: &Layout) -> Vec<Routes> {
    let n = d.switches.len();
    let mut adj = vec![Vec::new(); n];
    for l in &d.links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let dist_to: Vec<Vec<u32>> = (0..n).map(|t| distances(&adj, t)).collect();
    let mut floods = flood_tree(d, layout, &adj);
    (0..n)
        .map(|s| {
            // Next-hop group towards every other switch.
            let mut group_of = vec![None; n];
            let mut groups = Vec::new();
            for (t, dist) in dist_to.iter().enumerate() {
                if t == s || dist[s] == u32::MAX {
                    continue;
                }
                let ports: Vec<u16> = layout.ports[s]
                    .iter()
                    .enumerate()
                    .filter_map(|(p, r)| match *r {
                        PortRole::Link { peer, .. } if dist[peer] + 1 == dist[s] => Some(p as u16),
                        _ => None,
                    })
                    .collect();
                let k = ports.len();
                group_of[t] = Some(Dest::Group(groups.len() as u16));
                groups.push(Group {
                    to: d.switches[t].name.clone(),
                    names: ports.iter().map(|&p| layout.port_name(d, s, p)).collect(),
                    ports,
                    packets: vec![0; k],
                    bytes: vec![0; k],
                    flows: vec![0; k],
                });
            }
            let dest_of_host = |h: usize| {
                let (hs, hp) = layout.host_port[h];
                if hs == s {
                    Some(Dest::Port(hp))
                } else {
                    group_of[hs]
                }
            };
            let mut by_ip = Table::default();
            let mut by_mac = Table::default();
            for (h, host) in d.hosts.iter().enumerate() {
                if let Some(dest) = dest_of_host(h) {
                    let mac = host.mac;
                    by_ip.insert(u64::from(u32::from(host.ip)), HostEntry { dest, mac });
                    by_mac.insert(mac.to_u64(), dest);
                }
            }
            let mut prefixes: Vec<(Ipv4Net, Dest)> = Vec::new();
            for (t, sw) in d.switches.iter().enumerate() {
                if let Some(g) = group_of[t] {
                    prefixes.extend(sw.prefixes.iter().map(|&p| (p, g)));
                }
            }
            prefixes.sort_by_key(|(p, _)| std::cmp::Reverse(p.prefix_len()));
            Routes {
                seed: switch_seed(d.seed, s),
                by_ip,
                by_mac,
                prefixes,
                floods: std::mem::take(&mut floods[s]),
                groups,
                counters: RouteCounters::default(),
            }
        })
        .collect()
}

impl Routes {
    /// The next-hop groups (one per other switch), with their counters.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }
    /// The group towards the switch named `to`.
    pub fn group_to(&self, to: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.to == to)
    }
    /// The decision counters.
    pub fn counters(&self) -> &RouteCounters {
        &self.counters
    }
    /// Whether port `p` is on the flood tree (host ports always are).
    pub fn floods(&self, p: u16) -> bool {
        self.floods.get(p as usize).copied().unwrap_or(false)
    }

    /// Where a unicast frame to `info.dst` (and, for IPv4, the destination
    /// address in `frame`) goes, before ECMP.
    pub fn lookup(&self, frame: &[u8], info: &FrameInfo) -> Option<Dest> {
        if let Some(ip) = ipv4_dst(frame, info) {
            if let Some(e) = self.by_ip.get(&u64::from(u32::from(ip))) {
                return Some(e.dest);
            }
            if let Some(&(_, d)) = self.prefixes.iter().find(|(p, _)| p.contains(ip)) {
                return Some(d);
            }
        }
        self.by_mac.get(&info.dst.to_u64()).copied()
    }

    /// The egress port ECMP picks in group `g` for a frame (no counting).
    pub fn choose(&self, g: u16, info: &FrameInfo) -> Option<u16> {
        let group = self.groups.get(g as usize)?;
        match group.ports.len() {
            0 => None,
            1 => Some(group.ports[0]),
            n => Some(group.ports[pick(ecmp_hash(self.seed, flow_key(info)), n)]),
        }
    }

    fn route(&mut self, g: u16, frame_len: usize, info: &FrameInfo) -> Option<u16> {
        let group = self.groups.get(g as usize)?;
        let i = match group.ports.len() {
            0 => return None,
            1 => 0,
            n => pick(ecmp_hash(self.seed, flow_key(info)), n),
        };
        let group = &mut self.groups[g as usize];
        group.packets[i] += 1;
        group.bytes[i] += frame_len as u64;
        let syn = info.l3.and_then(|l| l.tcp).is_some_and(|t| {
            t.flags & (wire::tcp::flags::SYN | wire::tcp::flags::ACK) == wire::tcp::flags::SYN
        });
        if syn {
            group.flows[i] += 1;
        }
        Some(group.ports[i])
    }

    /// Answers an ARP request for a known host in place; true if it did.
    fn proxy_arp(&mut self, frame: &mut [u8], info: &FrameInfo) -> bool {
        let Some(target) = super::arp::request_target(frame, info) else {
            return false;
        };
        let Some(e) = self.by_ip.get(&u64::from(u32::from(target))) else {
            return false;
        };
        super::arp::answer(frame, e.mac);
        self.counters.arp_answered += 1;
        true
    }
}

/// The destination address of an IPv4 frame.
#[inline]
fn ipv4_dst(frame: &[u8], info: &FrameInfo) -> Option<std::net::Ipv4Addr> {
    let l3 = info.l3?;
    if l3.version != IpVersion::V4 {
        return None;
    }
    let at = l3.offset as usize + 16;
    let b: [u8; 4] = frame.get(at..at + 4)?.try_into().ok()?;
    Some(b.into())
}

impl Forwarder for Routes {
    fn forward(
        &mut self,
        ingress: u16,
        frame: &mut [u8],
        info: &FrameInfo,
        _now: Nanos,
    ) -> Forward {
        if info.dst.is_multicast() {
            if self.proxy_arp(frame, info) {
                return Forward::Unicast(ingress);
            }
            self.counters.flooded += 1;
            return Forward::Flood;
        }
        match self.lookup(frame, info) {
            Some(Dest::Port(p)) if p == ingress => Forward::Drop,
            Some(Dest::Port(p)) => {
                self.counters.local += 1;
                Forward::Unicast(p)
            }
            Some(Dest::Group(g)) => match self.route(g, frame.len(), info) {
                Some(p) => {
                    self.counters.routed += 1;
                    Forward::Unicast(p)
                }
                None => {
                    self.counters.no_route += 1;
                    Forward::Drop
                }
            },
            None => {
                self.counters.no_route += 1;
                Forward::Drop
            }
        }
    }

    #[inline]
    fn floods_to(&self, ingress: u16, out: u16) -> bool {
        out != ingress && self.floods(out)
    }
}

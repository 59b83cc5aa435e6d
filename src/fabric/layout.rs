//! Port numbers of the fabric's switches: on each switch its host ports
//! first (in the order its `hosts` list them), then one port per link (in
//! the order the links are given). Names: `leaf1:h3` (towards a host),
//! `leaf1:spine2` (towards a switch — the link direction leaf1 → spine2);
//! the second and later of parallel links between the same two switches
//! are `leaf1:spine2#2`, `leaf1:spine2#3`, … in the order the links are
//! given (switch names never hold a `#`).
//!
//! A process may run only some of the switches (`--switches`, [`Layout::part`]):
//! the numbers stay those of the whole fabric (so every process computes the
//! same routes), and a link from a switch it runs to one it does not is a
//! *wire* — a real interface (a NIC or a veth) to the process that runs the
//! other end.

use super::topology::{FabricDesc, PortDesc};

/// What one switch port faces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortRole {
    /// A host (index into [`FabricDesc::hosts`]).
    Host(usize),
    /// Another switch over link `link` (index into [`FabricDesc::links`]),
    /// arriving there on `peer_port`.
    Link {
        /// The link.
        link: usize,
        /// The switch at its other end.
        peer: usize,
        /// The port of `peer` this link arrives on.
        peer_port: u16,
    },
}

/// Every switch's ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `ports[s][p]`: what port `p` of switch `s` faces.
    pub ports: Vec<Vec<PortRole>>,
    /// `host_port[h]`: (switch, port) of host `h`.
    pub host_port: Vec<(usize, u16)>,
    /// `local[s]`: this process runs switch `s`.
    pub local: Vec<bool>,
    /// `ordinal[l]`: link `l` is the k-th (from 1) of the links between
    /// its two switches, in the order the links are given.
    pub ordinal: Vec<u32>,
}

impl Layout {
    /// The port numbers for `d`.
    pub fn new(d: &FabricDesc) -> Self {
        let mut ports: Vec<Vec<PortRole>> = d
            .switches
            .iter()
            .map(|s| s.hosts.iter().map(|&h| PortRole::Host(h)).collect())
            .collect();
        let mut host_port = vec![(0, 0); d.hosts.len()];
        for (s, sw) in d.switches.iter().enumerate() {
            for (p, &h) in sw.hosts.iter().enumerate() {
                host_port[h] = (s, p as u16);
            }
        }
        let mut ordinal = Vec::with_capacity(d.links.len());
        for (i, l) in d.links.iter().enumerate() {
            let pair = (l.a.min(l.b), l.a.max(l.b));
            let before = d.links[..i]
                .iter()
                .filter(|m| (m.a.min(m.b), m.a.max(m.b)) == pair)
                .count();
            ordinal.push(before as u32 + 1);
            let (pa, pb) = (ports[l.a].len() as u16, ports[l.b].len() as u16);
            ports[l.a].push(PortRole::Link {
                link: i,
                peer: l.b,
                peer_port: pb,
            });
            ports[l.b].push(PortRole::Link {
                link: i,
                peer: l.a,
                peer_port: pa,
            });
        }
        let local = vec![true; d.switches.len()];
        Layout {
            ports,
            host_port,
            local,
            ordinal,
        }
    }

    /// The numbers for `d` in a process that runs only the switches
    /// `local[s]` (the whole fabric's numbers; see the module header).
    pub fn part(d: &FabricDesc, local: &[bool]) -> Self {
        Layout {
            local: local.to_vec(),
            ..Layout::new(d)
        }
    }

    /// Port `p` of switch `s` is a link to a switch this process does not
    /// run: a wire (a real interface).
    pub fn is_wire(&self, s: usize, p: u16) -> bool {
        matches!(self.ports[s][p as usize], PortRole::Link { peer, .. } if !self.local[peer])
    }

    /// The hosts (indices into [`FabricDesc::hosts`]) on switches this
    /// process runs, in the hosts' order.
    pub fn local_hosts(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.host_port.len()).filter(|&h| self.local[self.host_port[h].0])
    }

    /// The wires, as (switch, port), switch by switch in port order.
    pub fn wires(&self) -> Vec<(usize, u16)> {
        self.link_ports()
            .filter(|&(s, p)| self.is_wire(s, p))
            .collect()
    }

    /// Every link port of the switches this process runs, switch by switch.
    fn link_ports(&self) -> impl Iterator<Item = (usize, u16)> + '_ {
        self.ports
            .iter()
            .enumerate()
            .filter(|&(s, _)| self.local[s])
            .flat_map(|(s, ports)| {
                ports.iter().enumerate().filter_map(move |(p, r)| match r {
                    PortRole::Link { .. } => Some((s, p as u16)),
                    PortRole::Host(_) => None,
                })
            })
    }

    /// Every egress port this process runs as (switch, port), in the order
    /// the data path numbers them: its hosts' ports in the hosts' order,
    /// then its wires ([`wires`](Self::wires)) — together the data path's
    /// interfaces — then every other link port, switch by switch. For the
    /// whole fabric: the `h`-th is host `h`'s port.
    pub fn port_order(&self) -> Vec<(usize, u16)> {
        let mut v: Vec<(usize, u16)> = self.local_hosts().map(|h| self.host_port[h]).collect();
        v.extend(self.wires());
        v.extend(self.link_ports().filter(|&(s, p)| !self.is_wire(s, p)));
        v
    }

    /// The name of port `p` of switch `s`: `<switch>:<host or peer switch>`,
    /// with `#k` for the k-th of parallel links (k ≥ 2).
    pub fn port_name(&self, d: &FabricDesc, s: usize, p: u16) -> String {
        let me = &d.switches[s].name;
        match self.ports[s][p as usize] {
            PortRole::Host(h) => format!("{me}:{}", d.hosts[h].name),
            PortRole::Link { peer, link, .. } => match self.ordinal[link] {
                1 => format!("{me}:{}", d.switches[peer].name),
                k => format!("{me}:{}#{k}", d.switches[peer].name),
            },
        }
    }

    /// The topology's settings for port `p` of switch `s`.
    pub fn port_desc<'d>(&self, d: &'d FabricDesc, s: usize, p: u16) -> &'d PortDesc {
        match self.ports[s][p as usize] {
            PortRole::Host(_) => &d.switches[s].host_port,
            PortRole::Link { link, .. } if d.links[link].a == s => &d.links[link].ab,
            PortRole::Link { link, .. } => &d.links[link].ba,
        }
    }
}

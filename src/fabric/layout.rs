//! Port numbers of the fabric's switches: on each switch its host ports
//! first (in the order its `hosts` list them), then one port per link (in
//! the order the links are given). Names: `leaf1:h3` (towards a host),
//! `leaf1:spine2` (towards a switch — the link direction leaf1 → spine2).

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
        for (i, l) in d.links.iter().enumerate() {
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
        Layout { ports, host_port }
    }

    /// Every egress port as (switch, port): the host ports in the hosts'
    /// order (so the `h`-th is host `h`'s), then every switch's link ports,
    /// switch by switch.
    pub fn port_order(&self) -> Vec<(usize, u16)> {
        let mut v = self.host_port.clone();
        for (s, ports) in self.ports.iter().enumerate() {
            for (p, r) in ports.iter().enumerate() {
                if let PortRole::Link { .. } = r {
                    v.push((s, p as u16));
                }
            }
        }
        v
    }

    /// The name of port `p` of switch `s`: `<switch>:<host or peer switch>`.
    pub fn port_name(&self, d: &FabricDesc, s: usize, p: u16) -> String {
        let me = &d.switches[s].name;
        match self.ports[s][p as usize] {
            PortRole::Host(h) => format!("{me}:{}", d.hosts[h].name),
            PortRole::Link { peer, .. } => format!("{me}:{}", d.switches[peer].name),
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

//! `--topology FILE`: a fabric of several switches instead of one. The
//! topology ([`crate::fabric::topology`]) gives every switch, link and host
//! and each port's rate, delay, buffer and AQM; the flags give what every
//! port shares (queues, scheduler, classifier, `--aqm` where the topology
//! names none, `--rtt`, `--buffer` where it names none).
//!
//! **Hosts and interfaces.** `--ports` names one interface per host of the
//! topology, in the order of the hosts' numbers: the first interface is the
//! host with the lowest number (`h1`), and so on. `softswitch topo up
//! --topology FILE` prints exactly that list. An interface named as `topo
//! up` names them (`<prefix>-h<i>-sw`) must be host `h<i>`'s: a list in
//! another order is refused, since the fabric would route each host's
//! frames to another host's address.

use std::path::{Path, PathBuf};

use crate::fabric::{FabricDesc, Layout};

use super::aqm;
use super::options::Layers;
use super::ports::{PortNames, Shared};
use super::values::size_setting;
use super::{ConfigError, PortSettings, DEFAULT_BUFFER};

/// A fabric's settings (`--topology`).
#[derive(Clone, Debug)]
pub struct FabricSettings {
    /// The topology file.
    pub file: PathBuf,
    /// The topology.
    pub desc: FabricDesc,
    /// Every egress port of every switch, `ports[switch][port]`, numbered
    /// as [`Layout`] numbers them and named `leaf1:h1` / `leaf1:spine2`.
    pub ports: Vec<Vec<PortSettings>>,
    /// With `--aqm r-aqm`: R-AQM's parameters for every port, as `ports`,
    /// each scaled to that port's own link (rate, `--rtt`), then
    /// `[raqm_opts]` and `--raqm-opt`.
    pub raqm: Option<Vec<Vec<crate::raqm::Config>>>,
}

impl FabricSettings {
    /// Every egress port of the fabric, switch by switch.
    pub fn all_ports(&self) -> impl Iterator<Item = &PortSettings> {
        self.ports.iter().flatten()
    }

    /// Every egress port's name in the data path's order (the hosts'
    /// ports in the hosts' order, then the links', switch by switch):
    /// `leaf1:h1`, …, `leaf1:spine1`, …
    pub fn port_names(&self) -> Vec<String> {
        let layout = Layout::new(&self.desc);
        layout
            .port_order()
            .into_iter()
            .map(|(s, p)| layout.port_name(&self.desc, s, p))
            .collect()
    }

    /// The start-up lines: the fabric, which interface is which host, and
    /// every port.
    pub fn describe(&self, interfaces: &[String], ingress_limit: u32) -> String {
        let d = &self.desc;
        let mut out = format!(
            "fabric {}: {} switches, {} links, {} hosts in {}, ECMP seed {}\n",
            self.file.display(),
            d.switches.len(),
            d.links.len(),
            d.hosts.len(),
            d.subnet,
            d.seed
        );
        let layout = Layout::new(d);
        for (h, (host, iface)) in d.hosts.iter().zip(interfaces).enumerate() {
            let (s, p) = layout.host_port[h];
            out.push_str(&format!(
                "  host {} ({}) = interface {iface} on port {}\n",
                host.name,
                host.ip,
                layout.port_name(d, s, p)
            ));
        }
        for p in self.all_ports() {
            out.push_str(&p.describe(ingress_limit));
        }
        out
    }
}

/// The fabric `--topology` names, if any: read, checked against `--ports`,
/// and every port's settings. Returns the fabric and the settings of the
/// interfaces (each one its host's port, under the interface's name).
pub(super) fn resolve(
    l: &Layers,
    names: &PortNames,
    shared: &Shared,
) -> Result<Option<(FabricSettings, Vec<PortSettings>)>, ConfigError> {
    let Some(file) = l.get(|o| &o.topology) else {
        return Ok(None);
    };
    refuse_single_switch_settings(l, names, file)?;
    let text = std::fs::read_to_string(file).map_err(|e| {
        ConfigError::Invalid(format!(
            "--topology {}: cannot read it: {e}",
            file.display()
        ))
    })?;
    let desc = FabricDesc::parse(&text)
        .map_err(|e| ConfigError::Invalid(format!("--topology {}: {e}", file.display())))?;
    check_interfaces(&desc, &names.names, file)?;
    let buffer = size_setting("buffer", l.text(|o| &o.buffer, DEFAULT_BUFFER))?;
    let layout = Layout::new(&desc);
    let mut ports = Vec::with_capacity(desc.switches.len());
    let mut raqm = shared.aqm.raqm.then(Vec::new);
    for (s, roles) in layout.ports.iter().enumerate() {
        let mut v = Vec::with_capacity(roles.len());
        let mut r = Vec::new();
        for (p, role) in roles.iter().enumerate() {
            let name = layout.port_name(&desc, s, p as u16);
            let topo = layout.port_desc(&desc, s, p as u16);
            let port = shared.port_config(topo.rate, topo.buffer_bytes.unwrap_or(buffer));
            port.validate()
                .map_err(|e| ConfigError::Invalid(format!("--topology: port {name}: {e}")))?;
            let env = shared.aqm_env(topo.rate);
            let aqm = aqm::for_fabric_port(&shared.aqm, &shared.aqm_opts, &name, topo, &env)?;
            if let Some(c) = aqm::raqm(l, &shared.aqm, &env)? {
                r.push(c);
            }
            let host = matches!(role, crate::fabric::PortRole::Host(_));
            v.push(PortSettings {
                ingress_rate: if host {
                    shared.ingress.for_port(topo.rate)
                } else {
                    None
                },
                name,
                port,
                aqm,
                env,
                delay_ns: topo.delay_ns,
            });
        }
        ports.push(v);
        if let Some(all) = &mut raqm {
            all.push(r);
        }
    }
    let interfaces = names
        .names
        .iter()
        .zip(&layout.host_port)
        .map(|(iface, &(s, p))| PortSettings {
            name: iface.clone(),
            ..ports[s][p as usize].clone()
        })
        .collect();
    Ok(Some((
        FabricSettings {
            file: file.clone(),
            desc,
            ports,
            raqm,
        },
        interfaces,
    )))
}

/// What the topology sets per port may not also be set for one switch
/// (`--rate`, `--delay`, per-port values): refused with where to set them.
fn refuse_single_switch_settings(
    l: &Layers,
    names: &PortNames,
    file: &Path,
) -> Result<(), ConfigError> {
    let f = file.display();
    for (given, key) in [
        (l.get(|o| &o.rate).is_some(), "rate"),
        (l.get(|o| &o.delay).is_some(), "delay"),
    ] {
        if given {
            return Err(ConfigError::Invalid(format!(
                "--{key} with --topology {f}: the topology gives every port's {key}; \
                 set it there (`[defaults] {key} = ...`, per link or per switch's host_link)"
            )));
        }
    }
    if let Some(s) = names.per_port_setting() {
        return Err(ConfigError::Invalid(format!(
            "{s} with --topology {f}: set per-port values in the topology (per link: \
             `ab = {{ rate = ... }}`, per switch: `host_link = {{ ... }}`)"
        )));
    }
    Ok(())
}

/// One interface per host, in the hosts' order; an interface `topo up`
/// named for host `h<i>` must be in `h<i>`'s place.
fn check_interfaces(desc: &FabricDesc, ifaces: &[String], file: &Path) -> Result<(), ConfigError> {
    let f = file.display();
    let hosts: Vec<&str> = desc.hosts.iter().map(|h| h.name.as_str()).collect();
    if ifaces.len() != hosts.len() {
        return Err(ConfigError::Invalid(format!(
            "--topology {f} has {} hosts ({}) but --ports names {} interfaces: name one \
             interface per host, in that order (`softswitch topo up --topology {f}` creates \
             the hosts and prints the list)",
            hosts.len(),
            hosts.join(", "),
            ifaces.len()
        )));
    }
    for (h, iface) in desc.hosts.iter().zip(ifaces) {
        if let Some(i) = topo_host_index(iface) {
            if i != h.index {
                return Err(ConfigError::Invalid(format!(
                    "--ports: interface {iface} (host h{i} of `topo up`) is in the place of \
                     host {} of --topology {f}: list the interfaces in the order of the \
                     topology's hosts ({})",
                    h.name,
                    hosts.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// The host number of an interface named as `topo up` names them
/// (`<prefix>-h<i>-sw`), whatever the prefix.
fn topo_host_index(iface: &str) -> Option<usize> {
    let rest = iface.strip_suffix("-sw")?;
    let (_, digits) = rest.rsplit_once("-h")?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::topo_host_index;

    #[test]
    fn topo_interface_names_give_their_host() {
        assert_eq!(topo_host_index("ss-h3-sw"), Some(3));
        assert_eq!(topo_host_index("t0a1b-h12-sw"), Some(12));
        assert_eq!(topo_host_index("veth0"), None);
        assert_eq!(topo_host_index("ss-h03-sw"), None);
        assert_eq!(topo_host_index("ss-h-sw"), None);
    }
}

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
//!
//! **Part of a fabric** (`--switches leaf1,spine1`): the process runs only
//! the switches named; `--ports` then names the interfaces of *their* hosts
//! (in the hosts' order), and every link to a switch another process runs
//! is a wire whose interface `--link-ifaces leaf1:spine2=IFACE` names (one
//! per wire, by the link's egress port here). Every process reads the same
//! topology, so all compute the same routes.

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
    /// `local[s]`: this process runs switch `s` (`--switches`; all by default).
    pub local: Vec<bool>,
    /// The wires (links to switches another process runs) as (port name,
    /// interface), in the data path's order.
    pub wires: Vec<(String, String)>,
}

impl FabricSettings {
    /// Every egress port of the switches this process runs, switch by switch.
    pub fn all_ports(&self) -> impl Iterator<Item = &PortSettings> {
        self.ports
            .iter()
            .zip(&self.local)
            .filter(|(_, &l)| l)
            .flat_map(|(p, _)| p)
    }

    /// R-AQM's parameters of every port this process runs (with `--aqm r-aqm`).
    pub fn local_raqm(&self) -> impl Iterator<Item = &crate::raqm::Config> {
        self.raqm
            .iter()
            .flat_map(|r| r.iter().zip(&self.local).filter(|(_, &l)| l))
            .flat_map(|(r, _)| r)
    }

    /// The port numbers, for the switches this process runs.
    pub fn layout(&self) -> Layout {
        Layout::part(&self.desc, &self.local)
    }

    /// This process runs part of the fabric (`--switches`).
    pub fn is_part(&self) -> bool {
        self.local.iter().any(|&l| !l)
    }

    /// Every egress port's name in the data path's order (the hosts'
    /// ports in the hosts' order, then the wires', then the other links',
    /// switch by switch): `leaf1:h1`, …, `leaf1:spine1`, …
    pub fn port_names(&self) -> Vec<String> {
        let layout = self.layout();
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
        let layout = self.layout();
        if self.is_part() {
            let names = |l: bool| -> Vec<&str> {
                d.switches
                    .iter()
                    .zip(&self.local)
                    .filter(|(_, &x)| x == l)
                    .map(|(s, _)| s.name.as_str())
                    .collect()
            };
            out.push_str(&format!(
                "  this process runs {}; {} run elsewhere, over {} wire(s)\n",
                names(true).join(", "),
                names(false).join(", "),
                self.wires.len()
            ));
        }
        for (h, iface) in layout.local_hosts().zip(interfaces) {
            let host = &d.hosts[h];
            let (s, p) = layout.host_port[h];
            out.push_str(&format!(
                "  host {} ({}) = interface {iface} on port {}\n",
                host.name,
                host.ip,
                layout.port_name(d, s, p)
            ));
        }
        for (port, iface) in &self.wires {
            out.push_str(&format!("  wire {port} = interface {iface}\n"));
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
    let local = local_switches(&desc, list(l, |o| &o.switches), file)?;
    let layout = Layout::part(&desc, &local);
    let wire_ifaces = wire_interfaces(&desc, &layout, list(l, |o| &o.link_ifaces), file)?;
    check_interfaces(&desc, &layout, &names.names, file)?;
    let buffer = size_setting("buffer", l.text(|o| &o.buffer, DEFAULT_BUFFER))?;
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
    // The data path's interfaces: this process's hosts, then its wires.
    let at = |(s, p): (usize, u16)| ports[s][p as usize].clone();
    let mut interfaces: Vec<PortSettings> = names
        .names
        .iter()
        .zip(layout.local_hosts())
        .map(|(iface, h)| PortSettings {
            name: iface.clone(),
            ..at(layout.host_port[h])
        })
        .collect();
    let mut wires = Vec::new();
    for (sp, iface) in layout.wires().into_iter().zip(wire_ifaces) {
        wires.push((layout.port_name(&desc, sp.0, sp.1), iface.clone()));
        interfaces.push(PortSettings {
            name: iface,
            ..at(sp)
        });
    }
    if interfaces.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "--topology {}: the switches this process runs have no hosts and no wires: \
             name switches with hosts (--switches) or their hosts' interfaces (--ports)",
            file.display()
        )));
    }
    Ok(Some((
        FabricSettings {
            file: file.clone(),
            desc,
            ports,
            raqm,
            local,
            wires,
        },
        interfaces,
    )))
}

/// A list setting: the flag's if given, else the file's.
fn list<'a>(l: &Layers<'a>, field: impl Fn(&'a super::Options) -> &'a Vec<String>) -> &'a [String] {
    let flags = field(l.flags);
    if flags.is_empty() {
        field(l.file)
    } else {
        flags
    }
}

/// `--switches`: which switches this process runs (all when not given).
fn local_switches(
    desc: &FabricDesc,
    names: &[String],
    file: &Path,
) -> Result<Vec<bool>, ConfigError> {
    let names: Vec<&str> = names
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(vec![true; desc.switches.len()]);
    }
    let mut local = vec![false; desc.switches.len()];
    for n in names {
        let s = desc.switch_index(n).ok_or_else(|| {
            ConfigError::Invalid(format!(
                "--switches {n}: --topology {} has no switch of that name; its switches are {}",
                file.display(),
                desc.switches
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        local[s] = true;
    }
    Ok(local)
}

/// `--link-ifaces PORT=IFACE,...`: one interface per wire, in the order of
/// [`Layout::wires`].
fn wire_interfaces(
    desc: &FabricDesc,
    layout: &Layout,
    given: &[String],
    file: &Path,
) -> Result<Vec<String>, ConfigError> {
    let wires: Vec<String> = layout
        .wires()
        .into_iter()
        .map(|(s, p)| layout.port_name(desc, s, p))
        .collect();
    let mut ifaces: Vec<Option<String>> = vec![None; wires.len()];
    for entry in given.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let Some((port, iface)) = entry.split_once('=') else {
            return Err(ConfigError::Invalid(format!(
                "--link-ifaces {entry}: write PORT=IFACE, e.g. {}=eth1",
                wires.first().map_or("leaf1:spine1", String::as_str)
            )));
        };
        let (port, iface) = (port.trim(), iface.trim());
        let Some(i) = wires.iter().position(|w| w == port) else {
            return Err(ConfigError::Invalid(if wires.is_empty() {
                format!(
                    "--link-ifaces {entry}: this process runs every switch its links reach, so \
                     it has no wires; --link-ifaces is for --switches naming part of the fabric"
                )
            } else {
                format!(
                    "--link-ifaces {entry}: {port} is not a wire of this process; its wires \
                     (links from the switches it runs to the others) are {}",
                    wires.join(", ")
                )
            }));
        };
        if iface.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "--link-ifaces {entry}: name the interface after the =",
            )));
        }
        if ifaces[i].replace(iface.to_string()).is_some() {
            return Err(ConfigError::Invalid(format!(
                "--link-ifaces: {port} is named twice; give each wire one interface"
            )));
        }
    }
    let missing: Vec<&str> = wires
        .iter()
        .zip(&ifaces)
        .filter(|(_, i)| i.is_none())
        .map(|(w, _)| w.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "--switches with --topology {}: the links {} lead to switches another process \
             runs; name each one's interface: --link-ifaces {}",
            file.display(),
            missing.join(", "),
            missing
                .iter()
                .map(|w| format!("{w}=IFACE"))
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    Ok(ifaces.into_iter().flatten().collect())
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

/// One interface per host of the switches this process runs, in the
/// hosts' order; an interface `topo up` named for host `h<i>` must be in
/// `h<i>`'s place.
fn check_interfaces(
    desc: &FabricDesc,
    layout: &Layout,
    ifaces: &[String],
    file: &Path,
) -> Result<(), ConfigError> {
    let f = file.display();
    let local: Vec<&crate::fabric::HostDesc> =
        layout.local_hosts().map(|h| &desc.hosts[h]).collect();
    let hosts: Vec<&str> = local.iter().map(|h| h.name.as_str()).collect();
    if ifaces.len() != hosts.len() {
        let whose = if local.len() == desc.hosts.len() {
            format!("--topology {f} has")
        } else {
            format!("the switches --switches names in --topology {f} have")
        };
        return Err(ConfigError::Invalid(format!(
            "{whose} {} hosts ({}) but --ports names {} interfaces: name one \
             interface per host, in that order (`softswitch topo up --topology {f}` creates \
             the hosts and prints the list)",
            hosts.len(),
            hosts.join(", "),
            ifaces.len()
        )));
    }
    for (h, iface) in local.into_iter().zip(ifaces) {
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

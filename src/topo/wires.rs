//! Links between the softswitch processes of a fabric split over parts,
//! made wherever a part runs ([`Site`]): a veth pair between two parts on
//! one machine, a VXLAN tunnel end on each of two machines, and — for a
//! part on another machine, whose hosts stay on the runner's machine — a
//! tunnel per host link, bridged here to the host's switch-side veth.

use std::net::Ipv4Addr;

use super::cmd;
use super::names;
use super::netns::{self, Sysctl};
use super::site::Site;
use super::TopoError;

/// The names of wire `i` between two softswitch processes of a run with
/// `prefix` ([`add_wire`]): its two ends.
pub fn wire_names(prefix: &str, i: usize) -> (String, String) {
    (format!("{prefix}-w{i}a"), format!("{prefix}-w{i}b"))
}

/// The names of host `h`'s (1-based) link to a part on another machine
/// in a run with `prefix` ([`add_host_tunnel`]): the tunnel end and the
/// bridge on the runner's machine.
pub fn host_tunnel_names(prefix: &str, h: usize) -> (String, String) {
    (format!("{prefix}-v{h}"), format!("{prefix}-b{h}"))
}

/// Link `name` at `site` L2 only and up: no IPv6, so the kernel sends
/// nothing on it.
pub(super) fn l2_up(site: &Site, name: &str) -> Result<(), TopoError> {
    let key = format!("net.ipv6.conf.{name}.disable_ipv6");
    match site {
        Site::Here => {
            let path = netns::sysctl_path(&key);
            if path.exists() {
                std::fs::write(&path, "1").map_err(|source| TopoError::Io {
                    context: format!("cannot write {}", path.display()),
                    source,
                })?;
            }
        }
        Site::Netns(n) => {
            let has_v6 = netns::in_netns(n, || Ok(netns::sysctl_path(&key).exists()))?;
            if has_v6 {
                netns::write_sysctls(n, &[Sysctl::new(&key, 1)], "")?;
            }
        }
        Site::Ssh { .. } => {
            // A machine without IPv6 has no such key: not an error.
            let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
            let line = format!(
                "if [ -e {p} ]; then echo 1 > {p}; fi",
                p = super::site::shell_quote(&path)
            );
            cmd::run(
                &mut site.shell(&[], &line),
                "the machine must accept the SSH login",
            )?;
        }
    }
    cmd::run(&mut site.ip(&["link", "set", name, "up"]), "")?;
    Ok(())
}

/// Wire `i` between two softswitch processes on one machine (a fabric
/// split over parts): a veth pair [`wire_names`] at `site`, both ends up
/// and L2 only, MTU `mtu` (the hosts' links').
pub fn add_wire(
    prefix: &str,
    i: usize,
    mtu: u32,
    site: &Site,
) -> Result<(String, String), TopoError> {
    names::validate_prefix(prefix).map_err(TopoError::InvalidConfig)?;
    let (a, b) = wire_names(prefix, i);
    del_link_at(site, &a)?;
    let mtu = mtu.to_string();
    cmd::run(
        &mut site.ip(&[
            "link", "add", &a, "mtu", &mtu, "type", "veth", "peer", "name", &b, "mtu", &mtu,
        ]),
        "veth support (CONFIG_VETH) is needed",
    )?;
    for end in [&a, &b] {
        l2_up(site, end)?;
    }
    Ok((a, b))
}

/// VXLAN overhead on an IPv4 underlay: outer Ethernet is not counted by
/// the MTU; outer IPv4 (20), UDP (8), VXLAN (8) and the inner Ethernet
/// header (14) are.
pub const VXLAN_OVERHEAD: u32 = 50;

/// One end of a tunnel between two machines: a VXLAN device `name` at
/// `site`, network identifier `vni`, from `local` to `remote` (UDP port
/// 4789), MTU `mtu`, L2 only and up. The underlay towards `remote` must
/// carry `mtu` + [`VXLAN_OVERHEAD`] bytes, so that a full-size frame
/// crosses unfragmented: refused otherwise, naming the device to raise.
pub fn add_tunnel_end(
    site: &Site,
    name: &str,
    vni: u32,
    local: Ipv4Addr,
    remote: Ipv4Addr,
    mtu: u32,
) -> Result<(), TopoError> {
    let (dev, under) = underlay(site, remote)?;
    if under < mtu + VXLAN_OVERHEAD {
        let raise = match site {
            Site::Netns(ns) => format!("ip -n {ns} link set {dev} mtu {}", mtu + VXLAN_OVERHEAD),
            _ => format!("ip link set {dev} mtu {}", mtu + VXLAN_OVERHEAD),
        };
        return Err(TopoError::InvalidConfig(format!(
            "the underlay from {local} to {remote} on {site} leaves on {dev} with MTU \
             {under}: a {mtu}-byte frame needs {} through VXLAN (raise it: `{raise}`)",
            mtu + VXLAN_OVERHEAD,
        )));
    }
    del_link_at(site, name)?;
    let (vni, local, remote, mtu) = (
        vni.to_string(),
        local.to_string(),
        remote.to_string(),
        mtu.to_string(),
    );
    cmd::run(
        &mut site.ip(&[
            "link",
            "add",
            name,
            "mtu",
            &mtu,
            "type",
            "vxlan",
            "id",
            &vni,
            "local",
            &local,
            "remote",
            &remote,
            "dstport",
            "4789",
            "nolearning",
        ]),
        "VXLAN support (CONFIG_VXLAN) is needed",
    )?;
    l2_up(site, name)
}

/// The device a packet to `remote` leaves on at `site`, and its MTU.
fn underlay(site: &Site, remote: Ipv4Addr) -> Result<(String, u32), TopoError> {
    let route = route_to(site, remote)?;
    let dev = route["dev"].as_str().map(String::from).ok_or_else(|| {
        TopoError::InvalidConfig(format!("no route to {remote} on {site}: {route}"))
    })?;
    let link = cmd::run(&mut site.ip(&["-j", "link", "show", "dev", &dev]), "")?;
    let mtu = serde_json::from_str::<serde_json::Value>(&link)
        .ok()
        .and_then(|v| v[0]["mtu"].as_u64())
        .ok_or_else(|| TopoError::InvalidConfig(format!("no MTU for {dev} on {site}: {link}")))?;
    Ok((dev, mtu as u32))
}

/// `ip -j route get remote` at `site`: the route's JSON object.
fn route_to(site: &Site, remote: Ipv4Addr) -> Result<serde_json::Value, TopoError> {
    let r = remote.to_string();
    let route = cmd::run(
        &mut site.ip(&["-j", "route", "get", &r]),
        "the machines must reach each other's address",
    )?;
    serde_json::from_str::<serde_json::Value>(&route)
        .ok()
        .map(|v| v[0].clone())
        .filter(|v| v.is_object())
        .ok_or_else(|| TopoError::InvalidConfig(format!("no route to {remote} on {site}: {route}")))
}

/// The address this machine sends from towards `remote`: the local end
/// of its tunnels to that machine.
pub fn source_address(remote: Ipv4Addr) -> Result<Ipv4Addr, TopoError> {
    let route = route_to(&Site::Here, remote)?;
    route["prefsrc"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            TopoError::InvalidConfig(format!(
                "no source address towards {remote} on this machine: {route}"
            ))
        })
}

/// Host link `port` (a host's switch-side veth on this machine) carried to
/// a part on another machine: a VXLAN end `tunnel` here (from `local` to
/// `remote`, `vni`), and a bridge `bridge` joining the two, so that what
/// the host sends crosses to the machine and what comes back reaches the
/// host. The other end is [`add_tunnel_end`] on that machine. MTU `mtu`.
#[allow(clippy::too_many_arguments)]
pub fn add_host_tunnel(
    port: &str,
    tunnel: &str,
    bridge: &str,
    vni: u32,
    local: Ipv4Addr,
    remote: Ipv4Addr,
    mtu: u32,
) -> Result<(), TopoError> {
    let here = Site::Here;
    add_tunnel_end(&here, tunnel, vni, local, remote, mtu)?;
    del_link_at(&here, bridge)?;
    cmd::run(
        &mut here.ip(&[
            "link",
            "add",
            bridge,
            "type",
            "bridge",
            "stp_state",
            "0",
            "mcast_snooping",
            "0",
        ]),
        "Linux bridge support (CONFIG_BRIDGE) is needed",
    )?;
    for member in [port, tunnel] {
        cmd::run(&mut here.ip(&["link", "set", member, "master", bridge]), "")?;
    }
    l2_up(&here, bridge)
}

/// Moves link `name` from this namespace into namespace `ns` (a machine
/// of a split fabric), L2 only and up there.
pub fn move_link(name: &str, ns: &str) -> Result<(), TopoError> {
    cmd::run(
        &mut Site::Here.ip(&["link", "set", name, "netns", ns]),
        "the namespace must exist (`ip netns list`)",
    )?;
    l2_up(&Site::Netns(ns.to_owned()), name)
}

/// Removes link `name` at `site` if it is there; a veth's peer goes with
/// it.
pub fn del_link_at(site: &Site, name: &str) -> Result<(), TopoError> {
    if let Site::Here = site {
        return super::delete_link(name).map(|_| ());
    }
    let there = cmd::output(&mut site.ip(&["link", "show", "dev", name]))?;
    if there.status.success() {
        cmd::run(&mut site.ip(&["link", "del", name]), "")?;
    } else if site.is_remote() && there.status.code() == Some(255) {
        // ssh's own failure, not ip's "no such device".
        return Err(cmd::failed(
            &site.ip(&["link", "show", "dev", name]),
            &there,
            "the machine must accept the SSH login",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_an_interface_name() {
        // prefix: `x` + 4 base-36 digits (the runner's), at most 15 bytes.
        let (a, b) = wire_names("xabcd", 99);
        assert_eq!((a.as_str(), b.as_str()), ("xabcd-w99a", "xabcd-w99b"));
        let (t, br) = host_tunnel_names("xabcd", 128);
        assert_eq!((t.as_str(), br.as_str()), ("xabcd-v128", "xabcd-b128"));
        assert!([a, b, t, br].iter().all(|n| n.len() <= 15));
    }
}

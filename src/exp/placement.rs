//! Where a split fabric's parts run (a scenario's `[fabric] parts` and
//! `[fabric.machines]`): which switches each part runs
//! ([`crate::fabric::split`]) and, optionally, the machine each part runs
//! on.
//!
//! A machine here is a network namespace that stands in for one: the
//! part's softswitch runs inside it (`ip netns exec`), its hosts'
//! switch-side interfaces are moved into it, and a wire to a part on
//! another machine is a VXLAN tunnel between the two machines' addresses
//! over whatever joins them (in the tests, a veth standing in for their
//! NICs). The hosts themselves stay where the runner builds them.
//!
//! ```toml
//! [fabric]
//! parts = { a = ["leaf1", "spine1"], b = ["leaf2", "spine2"] }
//! [fabric.machines]
//! a = { netns = "m1", address = "10.98.0.1" }
//! b = { netns = "m2", address = "10.98.0.2" }
//! ```

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::fabric::split::{self, Split};
use crate::fabric::FabricDesc;

/// The machine a part runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The network namespace that stands in for it (it must exist).
    pub netns: String,
    /// Its address on the network that joins the machines: the local end
    /// of its VXLAN wires, the remote end of the others'.
    pub address: Ipv4Addr,
}

/// A split fabric and where each part runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The parts and the wires between them.
    pub split: Split,
    /// `machines[i]`: where `split.parts[i]` runs (None: on this machine,
    /// in the runner's own namespace).
    pub machines: Vec<Option<Machine>>,
}

impl Placement {
    /// Wire `w` crosses between two machines (a tunnel), rather than
    /// joining two parts on one (a veth).
    pub fn tunnels(&self, w: usize) -> bool {
        let (a, b) = self.split.wires[w].parts;
        self.machines[a].as_ref().map(|m| &m.netns) != self.machines[b].as_ref().map(|m| &m.netns)
    }
}

/// The keys of `[fabric]` that are the runner's, not the switch's
/// topology file's.
pub const RUNNER_KEYS: [&str; 2] = ["parts", "machines"];

const PARTS_HELP: &str = "a table of part name = [switches and hosts], e.g. \
     parts = { a = [\"leaf1\", \"spine1\"], b = [\"leaf2\", \"spine2\"] }";

const MACHINES_HELP: &str = "a table of part name = { netns = \"NAME\", address = \"IPv4\" }, \
     e.g. a = { netns = \"m1\", address = \"10.98.0.1\" }";

/// `[fabric]`'s `parts` and `machines`, read and checked against the
/// fabric `desc` (None: the fabric runs whole, in one process).
pub fn parse(fabric: &toml::Table, desc: &FabricDesc) -> Result<Option<Placement>, String> {
    let Some(parts) = fabric.get("parts") else {
        if fabric.contains_key("machines") {
            return Err("fabric.machines without fabric.parts: machines run parts".into());
        }
        return Ok(None);
    };
    let bad = || format!("fabric.parts: {PARTS_HELP}");
    let mut map = BTreeMap::new();
    for (name, members) in parts.as_table().ok_or_else(bad)? {
        let members = members
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|m| m.as_str().map(String::from).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?;
        map.insert(name.clone(), members);
    }
    let split = split::split(desc, &map).map_err(|e| format!("fabric.parts: {e}"))?;
    let machines = match fabric.get("machines") {
        None => vec![None; split.parts.len()],
        Some(m) => machines(m, &split)?,
    };
    Ok(Some(Placement { split, machines }))
}

/// `fabric.machines`: every part on a machine, two parts on one machine
/// with one address, two machines with two.
fn machines(table: &toml::Value, split: &Split) -> Result<Vec<Option<Machine>>, String> {
    let bad = || format!("fabric.machines: {MACHINES_HELP}");
    let table = table.as_table().ok_or_else(bad)?;
    if let Some(k) = table
        .keys()
        .find(|k| !split.parts.iter().any(|p| &p.name == *k))
    {
        return Err(format!(
            "fabric.machines: `{k}` is not a part of fabric.parts"
        ));
    }
    let mut out = Vec::new();
    for p in &split.parts {
        let m = table.get(&p.name).ok_or_else(|| {
            format!(
                "fabric.machines: part {} has no machine — name one for every part, or none",
                p.name
            )
        })?;
        let m = m.as_table().ok_or_else(bad)?;
        if let Some(k) = m.keys().find(|k| *k != "netns" && *k != "address") {
            return Err(format!(
                "fabric.machines.{}: unknown key `{k}` (netns, address)",
                p.name
            ));
        }
        let netns = m.get("netns").and_then(|v| v.as_str()).ok_or_else(bad)?;
        if netns.is_empty()
            || netns.len() > 64
            || !netns
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            || netns.starts_with('.')
        {
            return Err(format!(
                "fabric.machines.{}: netns `{netns}` is not a namespace name",
                p.name
            ));
        }
        let address = m
            .get("address")
            .and_then(|v| v.as_str())
            .ok_or_else(bad)?
            .parse::<Ipv4Addr>()
            .map_err(|e| format!("fabric.machines.{}: address: {e}", p.name))?;
        out.push(Machine {
            netns: netns.to_string(),
            address,
        });
    }
    for (i, a) in out.iter().enumerate() {
        for b in &out[i + 1..] {
            let same_ns = a.netns == b.netns;
            if same_ns != (a.address == b.address) {
                return Err(format!(
                    "fabric.machines: netns {} ({}) and {} ({}): one machine has one address, two have two",
                    a.netns, a.address, b.netns, b.address
                ));
            }
        }
    }
    Ok(out.into_iter().map(Some).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> FabricDesc {
        FabricDesc::parse("[leaf_spine]\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n").unwrap()
    }

    fn read(text: &str) -> Result<Option<Placement>, String> {
        let t: toml::Table = toml::from_str(text).unwrap();
        parse(&t, &desc())
    }

    const PARTS: &str = "parts = { a = [\"leaf1\", \"spine1\"], b = [\"leaf2\", \"spine2\"] }\n";

    #[test]
    fn parts_on_machines_tunnel_between_them() {
        assert_eq!(read("seed = 1\n").unwrap(), None);
        let p = read(PARTS).unwrap().unwrap();
        assert_eq!(p.machines, [None, None]);
        assert!(!p.tunnels(0), "on this machine a wire is a veth");
        let p = read(&format!(
            "{PARTS}[machines]\na = {{ netns = \"m1\", address = \"10.98.0.1\" }}\n\
             b = {{ netns = \"m2\", address = \"10.98.0.2\" }}\n"
        ))
        .unwrap()
        .unwrap();
        assert_eq!(p.machines[0].as_ref().unwrap().netns, "m1");
        assert_eq!(
            p.machines[1].as_ref().unwrap().address,
            Ipv4Addr::new(10, 98, 0, 2)
        );
        assert!((0..p.split.wires.len()).all(|w| p.tunnels(w)));
    }

    #[test]
    fn a_bad_machine_says_what_to_change() {
        let err = |m: &str| read(&format!("{PARTS}[machines]\n{m}")).unwrap_err();
        let a = "a = { netns = \"m1\", address = \"10.98.0.1\" }\n";
        assert!(err(a).contains("part b has no machine"));
        for (second, want) in [
            (
                "c = { netns = \"m3\", address = \"10.98.0.3\" }",
                "`c` is not a part",
            ),
            (
                "b = { netns = \"m2\", address = \"10.98.0.1\" }",
                "one machine has one address, two have two",
            ),
            (
                "b = { netns = \"m2\", address = \"10.98.0\" }",
                "fabric.machines.b: address",
            ),
            (
                "b = { netns = \"m 2\", address = \"10.98.0.2\" }",
                "not a namespace name",
            ),
            (
                "b = { netns = \"m2\", address = \"10.98.0.2\", user = \"x\" }",
                "unknown key `user`",
            ),
        ] {
            let e = err(&format!("{a}{second}\n"));
            assert!(e.contains(want), "{second}: want `{want}` in {e}");
        }
        let t: toml::Table =
            toml::from_str("[machines]\na = { netns = \"m1\", address = \"10.98.0.1\" }\n")
                .unwrap();
        assert!(parse(&t, &desc())
            .unwrap_err()
            .contains("without fabric.parts"));
    }
}

//! Where a split fabric's parts run (a scenario's `[fabric] parts` and
//! `[fabric.machines]`): which switches each part runs
//! ([`crate::fabric::split`]) and, optionally, the machine each part runs
//! on.
//!
//! A machine is reached one of two ways ([`Site`]):
//!
//! - `netns`: a network namespace on this machine that stands in for
//!   one (as the tests do): the part's softswitch runs inside it (`ip
//!   netns exec`) and its hosts' switch-side interfaces are moved into it.
//! - `ssh`: another machine, reached over SSH: the part's softswitch runs
//!   there (`softswitch`, or the path given), and each of its hosts' links
//!   is carried there by a VXLAN tunnel from this machine, where the hosts
//!   stay.
//!
//! A wire to a part on another machine is a VXLAN tunnel between the two
//! machines' addresses over whatever joins them (in the tests, a veth
//! standing in for their NICs). The hosts themselves stay where the
//! runner builds them.
//!
//! ```toml
//! [fabric]
//! parts = { a = ["leaf1", "spine1"], b = ["leaf2", "spine2"] }
//! [fabric.machines]
//! a = { netns = "m1", address = "10.98.0.1" }
//! b = { ssh = "root@10.98.0.2", address = "10.98.0.2", ssh_options = ["-p", "2222"] }
//! ```

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::fabric::split::{self, Split};
use crate::fabric::FabricDesc;
use crate::topo::Site;

/// The machine a part runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// How it is reached: a network namespace that stands in for it (it
    /// must exist), or SSH.
    pub site: Site,
    /// Its address on the network that joins the machines: the local end
    /// of its VXLAN wires, the remote end of the others'.
    pub address: Ipv4Addr,
    /// The softswitch binary there (SSH only; None: the runner's own
    /// binary, which a namespace on this machine shares).
    pub softswitch: Option<String>,
}

impl Machine {
    /// Which machine it is: two parts with the same key share one.
    fn key(&self) -> String {
        match &self.site {
            Site::Here => "here".into(),
            Site::Netns(ns) => format!("netns {ns}"),
            Site::Ssh { dest, .. } => format!("ssh {dest}"),
        }
    }
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
        self.machines[a].as_ref().map(Machine::key) != self.machines[b].as_ref().map(Machine::key)
    }
}

/// The keys of `[fabric]` that are the runner's, not the switch's
/// topology file's.
pub const RUNNER_KEYS: [&str; 2] = ["parts", "machines"];

const PARTS_HELP: &str = "a table of part name = [switches and hosts], e.g. \
     parts = { a = [\"leaf1\", \"spine1\"], b = [\"leaf2\", \"spine2\"] }";

const MACHINES_HELP: &str = "a table of part name = { netns = \"NAME\", address = \"IPv4\" } \
     or { ssh = \"[user@]host\", address = \"IPv4\" }, e.g. a = { netns = \"m1\", address = \"10.98.0.1\" }";

/// The keys of a machine.
const MACHINE_KEYS: [&str; 5] = ["netns", "ssh", "ssh_options", "softswitch", "address"];

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
        out.push(machine(m).map_err(|e| format!("fabric.machines.{}: {e}", p.name))?);
    }
    for (i, a) in out.iter().enumerate() {
        for b in &out[i + 1..] {
            if (a.key() == b.key()) != (a.address == b.address) {
                return Err(format!(
                    "fabric.machines: {} ({}) and {} ({}): one machine has one address, two have two",
                    a.key(),
                    a.address,
                    b.key(),
                    b.address
                ));
            }
        }
    }
    Ok(out.into_iter().map(Some).collect())
}

/// One machine's table.
fn machine(m: &toml::Table) -> Result<Machine, String> {
    if let Some(k) = m.keys().find(|k| !MACHINE_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key `{k}` ({})", MACHINE_KEYS.join(", ")));
    }
    let text = |k: &str| -> Result<Option<&str>, String> {
        match m.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| format!("{k} must be a string")),
        }
    };
    let word = |k: &str, v: &str| -> Result<(), String> {
        if v.is_empty()
            || v.starts_with('-')
            || v.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            Err(format!("{k} `{v}` must be one word, not an option"))
        } else {
            Ok(())
        }
    };
    let site = match (text("netns")?, text("ssh")?) {
        (Some(_), Some(_)) => {
            return Err("netns and ssh both given: a part's machine is a namespace here or another machine over SSH".into())
        }
        (None, None) => return Err(format!("neither netns nor ssh: {MACHINES_HELP}")),
        (Some(netns), None) => {
            if netns.is_empty()
                || netns.len() > 64
                || !netns
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                || netns.starts_with('.')
            {
                return Err(format!("netns `{netns}` is not a namespace name"));
            }
            for k in ["ssh_options", "softswitch"] {
                if m.contains_key(k) {
                    return Err(format!("{k} applies to a machine reached over SSH, not to a namespace"));
                }
            }
            Site::Netns(netns.to_owned())
        }
        (None, Some(dest)) => {
            word("ssh", dest)?;
            let options = match m.get("ssh_options") {
                None => Vec::new(),
                Some(v) => v
                    .as_array()
                    .and_then(|a| a.iter().map(|o| o.as_str().map(String::from)).collect())
                    .ok_or("ssh_options must be a list of strings, e.g. [\"-p\", \"2222\"]")?,
            };
            Site::Ssh {
                dest: dest.to_owned(),
                options,
            }
        }
    };
    let softswitch = text("softswitch")?.map(String::from);
    if let Some(s) = &softswitch {
        word("softswitch", s)?;
    }
    let address = text("address")?
        .ok_or_else(|| format!("no address: {MACHINES_HELP}"))?
        .parse::<Ipv4Addr>()
        .map_err(|e| format!("address: {e}"))?;
    Ok(Machine {
        site,
        address,
        softswitch,
    })
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
        assert_eq!(
            p.machines[0].as_ref().unwrap().site,
            Site::Netns("m1".into())
        );
        assert_eq!(
            p.machines[1].as_ref().unwrap().address,
            Ipv4Addr::new(10, 98, 0, 2)
        );
        assert!((0..p.split.wires.len()).all(|w| p.tunnels(w)));
        // Another machine over SSH, with its own softswitch and options.
        let p = read(&format!(
            "{PARTS}[machines]\na = {{ netns = \"m1\", address = \"10.98.0.1\" }}\n\
             b = {{ ssh = \"root@10.98.0.2\", address = \"10.98.0.2\", \
             ssh_options = [\"-p\", \"2222\"], softswitch = \"/opt/ss/softswitch\" }}\n"
        ))
        .unwrap()
        .unwrap();
        let b = p.machines[1].as_ref().unwrap();
        assert_eq!(
            b.site,
            Site::Ssh {
                dest: "root@10.98.0.2".into(),
                options: vec!["-p".into(), "2222".into()]
            }
        );
        assert_eq!(b.softswitch.as_deref(), Some("/opt/ss/softswitch"));
        assert!((0..p.split.wires.len()).all(|w| p.tunnels(w)));
        // Two parts on one machine over SSH: a veth there.
        let p = read(&format!(
            "{PARTS}[machines]\na = {{ ssh = \"h\", address = \"10.98.0.2\" }}\n\
             b = {{ ssh = \"h\", address = \"10.98.0.2\" }}\n"
        ))
        .unwrap()
        .unwrap();
        assert!(!p.tunnels(0));
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
            (
                "b = { netns = \"m2\", ssh = \"h\", address = \"10.98.0.2\" }",
                "netns and ssh both given",
            ),
            ("b = { address = \"10.98.0.2\" }", "neither netns nor ssh"),
            (
                "b = { ssh = \"-oProxyCommand=x\", address = \"10.98.0.2\" }",
                "not an option",
            ),
            (
                "b = { ssh = \"h\", address = \"10.98.0.2\", ssh_options = \"-p 22\" }",
                "list of strings",
            ),
            (
                "b = { netns = \"m2\", address = \"10.98.0.2\", softswitch = \"/x\" }",
                "not to a namespace",
            ),
            ("b = { ssh = \"h\" }", "no address"),
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

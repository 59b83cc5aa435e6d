//! A fabric split over named parts, one process each (a scenario's
//! `[fabric] parts = { a = ["leaf1", "spine1"], b = ["leaf2", "spine2"] }`):
//! which switches and hosts each part runs, and which links between parts
//! become *wires* (see [`Layout::part`]).
//!
//! A part lists switches, and may list hosts too: a host goes with the
//! switch it is attached to, so a host listed in another part than its
//! switch is refused, and an unlisted host follows its switch. Every
//! switch is in exactly one part; every part has a switch. Parts are in
//! the order of their names.
//!
//! A link between two parts is one wire with two ends: end A at the link's
//! `a` switch (its egress port `a:b`), end B at `b` (`b:a`). Each part's
//! process names its end's interface by that egress port
//! (`--link-ifaces leaf1:spine2=IFACE`).

use std::collections::BTreeMap;

use super::layout::{Layout, PortRole};
use super::topology::FabricDesc;

/// One part: what one softswitch process runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// Its name (a key of `parts`).
    pub name: String,
    /// Its switches, in the fabric's order (`--switches`).
    pub switches: Vec<String>,
    /// Its hosts, `h<i>`'s `i`, ascending (the order of `--ports`).
    pub hosts: Vec<usize>,
    /// Its wire ends: (egress port here, wire index, which end).
    pub wire_ends: Vec<(String, usize, WireEnd)>,
}

/// Which end of a wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireEnd {
    /// At the link's `a` switch.
    A,
    /// At the link's `b` switch.
    B,
}

/// A link between two parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// The egress port at end A (`leaf1:spine2`).
    pub a_port: String,
    /// The egress port at end B (`spine2:leaf1`).
    pub b_port: String,
    /// The parts at each end (indices into [`Split::parts`]).
    pub parts: (usize, usize),
}

/// A fabric's parts and the wires between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The parts, by name.
    pub parts: Vec<Part>,
    /// The wires, in the order of the fabric's links.
    pub wires: Vec<Wire>,
}

/// A part name: letters, digits, `-` and `_` (it names files and
/// interfaces).
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 16
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The part of every switch (indices into `parts`), checked.
fn place(d: &FabricDesc, parts: &BTreeMap<String, Vec<String>>) -> Result<Vec<usize>, String> {
    if parts.len() < 2 {
        return Err(format!(
            "{} part(s): name at least two (one part is the whole fabric: leave `parts` out)",
            parts.len()
        ));
    }
    let mut part_of: Vec<Option<usize>> = vec![None; d.switches.len()];
    let names: Vec<&String> = parts.keys().collect();
    for (pi, (pname, members)) in parts.iter().enumerate() {
        if !valid_name(pname) {
            return Err(format!(
                "part name `{pname}`: use 1–16 letters, digits, `-` or `_`"
            ));
        }
        for m in members {
            if let Some(s) = d.switch_index(m) {
                if let Some(other) = part_of[s] {
                    return Err(format!(
                        "{m} is in part {} and in part {pname}: a switch runs in one part",
                        names[other]
                    ));
                }
                part_of[s] = Some(pi);
            } else if d.host_index(m).is_none() {
                let switches: Vec<&str> = d.switches.iter().map(|s| s.name.as_str()).collect();
                return Err(format!(
                    "part {pname}: no switch or host `{m}` in the fabric (its switches: {})",
                    switches.join(", ")
                ));
            }
        }
    }
    let unplaced: Vec<&str> = d
        .switches
        .iter()
        .zip(&part_of)
        .filter(|(_, p)| p.is_none())
        .map(|(s, _)| s.name.as_str())
        .collect();
    if !unplaced.is_empty() {
        return Err(format!(
            "switches in no part: {} — every switch runs in one part",
            unplaced.join(", ")
        ));
    }
    let part_of: Vec<usize> = part_of.into_iter().flatten().collect();
    for (pi, (pname, members)) in parts.iter().enumerate() {
        if !part_of.contains(&pi) {
            return Err(format!(
                "part {pname} has no switch: a part runs at least one"
            ));
        }
        for m in members {
            if let Some(h) = d.host_index(m) {
                let s = d.hosts[h].switch;
                if part_of[s] != pi {
                    return Err(format!(
                        "part {pname}: host {m} is attached to {}, which is in part {}: a host goes with its switch",
                        d.switches[s].name, names[part_of[s]]
                    ));
                }
            }
        }
    }
    Ok(part_of)
}

/// The port of switch `s` that link `l` leaves on.
fn link_port(layout: &Layout, s: usize, l: usize) -> u16 {
    layout.ports[s]
        .iter()
        .position(|r| matches!(r, PortRole::Link { link, .. } if *link == l))
        .unwrap_or(0) as u16
}

/// Splits `d` over `parts` (part name → its switches and hosts).
pub fn split(d: &FabricDesc, parts: &BTreeMap<String, Vec<String>>) -> Result<Split, String> {
    let part_of = place(d, parts)?;
    let layout = Layout::new(d);
    let mut wires = Vec::new();
    for (l, link) in d.links.iter().enumerate() {
        let (pa, pb) = (part_of[link.a], part_of[link.b]);
        if pa == pb {
            continue;
        }
        wires.push(Wire {
            a_port: layout.port_name(d, link.a, link_port(&layout, link.a, l)),
            b_port: layout.port_name(d, link.b, link_port(&layout, link.b, l)),
            parts: (pa, pb),
        });
    }
    let parts = parts
        .keys()
        .enumerate()
        .map(|(pi, name)| {
            let mut wire_ends = Vec::new();
            for (w, wire) in wires.iter().enumerate() {
                if wire.parts.0 == pi {
                    wire_ends.push((wire.a_port.clone(), w, WireEnd::A));
                }
                if wire.parts.1 == pi {
                    wire_ends.push((wire.b_port.clone(), w, WireEnd::B));
                }
            }
            Part {
                name: name.clone(),
                switches: d
                    .switches
                    .iter()
                    .enumerate()
                    .filter(|&(s, _)| part_of[s] == pi)
                    .map(|(_, sw)| sw.name.clone())
                    .collect(),
                hosts: d
                    .hosts
                    .iter()
                    .filter(|h| part_of[h.switch] == pi)
                    .map(|h| h.index)
                    .collect(),
                wire_ends,
            }
        })
        .collect();
    Ok(Split { parts, wires })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 × 2 leaf-spine, two hosts per leaf, two links between leaf1
    /// and spine2.
    fn fabric() -> FabricDesc {
        FabricDesc::parse(
            r#"
            [leaf_spine]
            leaves = 2
            spines = 2
            hosts_per_leaf = 2
            "#,
        )
        .unwrap()
    }

    fn parts(p: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        p.iter()
            .map(|(n, m)| (n.to_string(), m.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn each_part_runs_its_switches_and_their_hosts_and_every_cross_link_is_a_wire() {
        let d = fabric();
        let s = split(
            &d,
            &parts(&[
                ("b", &["leaf2", "spine2"]),
                ("a", &["leaf1", "spine1", "h1"]),
            ]),
        )
        .unwrap();
        // Parts in name order; switches in the fabric's order.
        assert_eq!(s.parts[0].name, "a");
        assert_eq!(s.parts[0].switches, ["leaf1", "spine1"]);
        assert_eq!(s.parts[0].hosts, [1, 2]);
        assert_eq!(s.parts[1].switches, ["leaf2", "spine2"]);
        assert_eq!(s.parts[1].hosts, [3, 4]);
        // leaf1–spine2 and leaf2–spine1 cross; leaf1–spine1, leaf2–spine2 do not.
        let w: Vec<(&str, &str)> = s
            .wires
            .iter()
            .map(|w| (w.a_port.as_str(), w.b_port.as_str()))
            .collect();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.contains(&("leaf1:spine2", "spine2:leaf1")), "{w:?}");
        assert!(w.contains(&("leaf2:spine1", "spine1:leaf2")), "{w:?}");
        // Each wire has one end in each part, named by its egress port there.
        for (i, wire) in s.wires.iter().enumerate() {
            let (pa, pb) = wire.parts;
            assert_ne!(pa, pb);
            assert!(s.parts[pa]
                .wire_ends
                .contains(&(wire.a_port.clone(), i, WireEnd::A)));
            assert!(s.parts[pb]
                .wire_ends
                .contains(&(wire.b_port.clone(), i, WireEnd::B)));
        }
        // Every wire port of a part is one that Layout::part calls a wire.
        for (pi, p) in s.parts.iter().enumerate() {
            let local: Vec<bool> = d
                .switches
                .iter()
                .map(|sw| p.switches.contains(&sw.name))
                .collect();
            let l = Layout::part(&d, &local);
            let mut named: Vec<String> = l
                .wires()
                .iter()
                .map(|&(sw, port)| l.port_name(&d, sw, port))
                .collect();
            let mut ends: Vec<String> = s.parts[pi].wire_ends.iter().map(|e| e.0.clone()).collect();
            named.sort();
            ends.sort();
            assert_eq!(named, ends, "part {}", p.name);
        }
    }

    #[test]
    fn parallel_links_between_parts_are_wires_of_their_own() {
        let d = FabricDesc::parse(
            r#"
            [leaf_spine]
            leaves = 2
            spines = 1
            hosts_per_leaf = 1
            links_per_pair = 2
            "#,
        )
        .unwrap();
        let s = split(
            &d,
            &parts(&[("a", &["leaf1"]), ("b", &["leaf2", "spine1"])]),
        )
        .unwrap();
        let a: Vec<&str> = s.wires.iter().map(|w| w.a_port.as_str()).collect();
        assert_eq!(a.len(), 2, "{a:?}");
        assert!(a.iter().any(|p| p.ends_with("#2")), "{a:?}");
    }

    #[test]
    fn a_bad_split_says_what_to_change() {
        let d = fabric();
        let err = |p: &[(&str, &[&str])]| split(&d, &parts(p)).unwrap_err();
        assert!(err(&[("a", &["leaf1", "leaf2", "spine1", "spine2"])]).contains("at least two"));
        assert!(
            err(&[("a", &["leaf1", "spine1"]), ("b", &["leaf2", "spine1"])])
                .contains("spine1 is in part a and in part b")
        );
        assert!(err(&[("a", &["leaf1", "spine1"]), ("b", &["leaf2"])])
            .contains("switches in no part: spine2"));
        assert!(err(&[
            ("a", &["leaf1", "spine1"]),
            ("b", &["leaf2", "spine2", "leaf9"])
        ])
        .contains("no switch or host `leaf9`"));
        assert!(err(&[
            ("a", &["leaf1", "spine1", "h3"]),
            ("b", &["leaf2", "spine2"])
        ])
        .contains("host h3 is attached to leaf2, which is in part b"));
        assert!(err(&[
            ("a", &["leaf1", "spine1", "leaf2", "spine2"]),
            ("b", &["h1"])
        ])
        .contains("part b has no switch"));
        assert!(
            err(&[("a b", &["leaf1", "spine1"]), ("c", &["leaf2", "spine2"])])
                .contains("part name `a b`")
        );
    }
}

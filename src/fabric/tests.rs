//! Fabrics on a manual clock and heap frames: topology reading and its
//! errors, route tables, ECMP spread, delivery both ways, proxy ARP and the
//! flood tree, a link's delay and rate, a congested spine port marking.

use std::net::Ipv4Addr;

use super::routes::{ecmp_hash, pick, switch_seed};
use super::*;
use crate::aqm::droptail::DropTail;
use crate::aqm::AqmKind;
use crate::packet::VecStore;
use crate::rng::SimRng;
use crate::units::{Rate, US};
use crate::wire::{self, tcp::flags, MacAddr};

/// A 2 × 2 leaf-spine, 2 hosts per leaf, everything unshaped.
const LEAF_SPINE_2X2: &str = r#"
[defaults]
rate = "0"
[leaf_spine]
leaves = 2
spines = 2
hosts_per_leaf = 2
"#;

/// s1 — s2 — s3, one host each.
const PARKING_LOT: &str = r#"
[defaults]
rate = "0"
[[switch]]
name = "s1"
hosts = ["h1"]
[[switch]]
name = "s2"
hosts = ["h2"]
[[switch]]
name = "s3"
hosts = ["h3"]
[[link]]
a = "s1"
b = "s2"
[[link]]
a = "s2"
b = "s3"
"#;

fn desc(text: &str) -> FabricDesc {
    FabricDesc::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn droptail(d: FabricDesc) -> Fabric<DropTail> {
    Fabric::new(
        d,
        |_| {
            Ok((
                PortConfig {
                    queues: 1,
                    buffer_bytes: 1 << 20,
                    ..PortConfig::default()
                },
                DropTail,
            ))
        },
        0,
    )
    .unwrap()
}

/// Ethernet + IPv4 (ECT(0)) + TCP or UDP from host `a` to host `b`.
fn ip_frame(
    a: &HostDesc,
    b: &HostDesc,
    proto: u8,
    ports: (u16, u16),
    tcp_flags: u8,
    len: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; len.max(64)];
    f[0..6].copy_from_slice(&b.mac.0);
    f[6..12].copy_from_slice(&a.mac.0);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[15] = 0x02; // ECT(0)
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&a.ip.octets());
    f[30..34].copy_from_slice(&b.ip.octets());
    let sum = wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&ports.0.to_be_bytes());
    f[36..38].copy_from_slice(&ports.1.to_be_bytes());
    if proto == wire::ip_proto::TCP {
        f[46] = 5 << 4; // data offset
        f[47] = tcp_flags;
    } else {
        f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    }
    f
}

fn tcp(a: &HostDesc, b: &HostDesc, ports: (u16, u16), fl: u8, len: usize) -> Vec<u8> {
    ip_frame(a, b, wire::ip_proto::TCP, ports, fl, len)
}

fn host(f: &Fabric<impl crate::aqm::Aqm>, name: &str) -> (usize, HostDesc) {
    let i = f.desc().host_index(name).unwrap();
    (i, f.desc().hosts[i].clone())
}

fn send<A: crate::aqm::Aqm>(
    f: &mut Fabric<A>,
    st: &mut VecStore,
    host: usize,
    bytes: Vec<u8>,
    now: Nanos,
) {
    let len = bytes.len() as u32;
    let id = st.insert(bytes);
    f.ingress(host, id, len, now, st);
}

/// Everything delivered at `now`: (host, bytes).
fn collect<A: crate::aqm::Aqm>(
    f: &mut Fabric<A>,
    st: &mut VecStore,
    now: Nanos,
) -> Vec<(usize, Vec<u8>)> {
    let mut out = Vec::new();
    f.poll(now, st, |e, pkt| out.push((e, pkt.frame)));
    out.into_iter()
        .map(|(e, id)| match e {
            Exit::Host(h) => (h, st.take(id)),
            Exit::Wire { .. } => panic!("a whole fabric has no wires: {e:?}"),
        })
        .collect()
}

/// Runs events until the fabric is idle: (time, host, bytes) per delivery.
fn run_to_idle<A: crate::aqm::Aqm>(
    f: &mut Fabric<A>,
    st: &mut VecStore,
    mut now: Nanos,
) -> Vec<(Nanos, usize, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        out.extend(collect(f, st, now).into_iter().map(|(h, b)| (now, h, b)));
        match f.next_event(now) {
            Some(t) => now = t.max(now),
            None => break,
        }
        if f.held_packets() == 0 {
            break;
        }
    }
    out
}

// ---- topology ----

#[test]
fn leaf_spine_shorthand_expands_to_switches_hosts_and_links() {
    let d = desc(
        r#"
        [leaf_spine]
        leaves = 2
        spines = 2
        hosts_per_leaf = 4
        host_rate = "10gbit"
        oversubscription = 2.0
        delay = "10us"
        "#,
    );
    let names: Vec<&str> = d.switches.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["leaf1", "leaf2", "spine1", "spine2"]);
    assert_eq!(d.hosts.len(), 8);
    assert_eq!(d.hosts[4].name, "h5");
    assert_eq!(d.hosts[4].switch, 1, "h5 is on leaf2");
    assert_eq!(d.hosts[4].ip, Ipv4Addr::new(10, 99, 0, 5));
    assert_eq!(d.hosts[4].mac, MacAddr([2, 0, 0, 0, 0, 5]));
    assert_eq!(d.links.len(), 4);
    // 4 hosts × 10 Gbit/s : 2 uplinks × r = 2 : 1 → r = 10 Gbit/s.
    assert_eq!(d.links[0].ab.rate, Rate::gbit(10));
    assert_eq!(d.links[0].ba.delay_ns, 10 * US);
    assert_eq!(d.switches[0].host_port.rate, Rate::gbit(10));
    assert_eq!(d.switches[0].host_port.delay_ns, 10 * US);
}

#[test]
fn explicit_topology_merges_defaults_link_and_direction_settings() {
    let d = desc(
        r#"
        subnet = "10.1.0.0/16"
        seed = 7
        [defaults]
        rate = "10gbit"
        buffer = "300kb"
        aqm = "dctcp"
        aqm_opts = { k = "65kb" }
        [[switch]]
        name = "leaf1"
        hosts = ["h1-h2", "h9"]
        host_link = { rate = "1gbit" }
        [[switch]]
        name = "spine1"
        [[link]]
        a = "leaf1"
        b = "spine1"
        delay = "2us"
        ab = { buffer = "1mb" }
        ba = { aqm = "tcn" }
        "#,
    );
    assert_eq!(d.seed, 7);
    assert_eq!(
        d.hosts.iter().map(|h| h.index).collect::<Vec<_>>(),
        [1, 2, 9]
    );
    assert_eq!(d.hosts[2].ip, Ipv4Addr::new(10, 1, 0, 9));
    let hp = &d.switches[0].host_port;
    assert_eq!(
        (hp.rate, hp.buffer_bytes),
        (Rate::gbit(1), Some(300 * 1024))
    );
    let l = &d.links[0];
    assert_eq!(
        (l.ab.rate, l.ab.delay_ns, l.ab.buffer_bytes),
        (Rate::gbit(10), 2 * US, Some(1 << 20))
    );
    assert_eq!(l.ab.aqm.as_deref(), Some("dctcp"));
    assert_eq!(l.ab.aqm_opts.len(), 1, "k from [defaults]");
    assert_eq!(l.ba.aqm.as_deref(), Some("tcn"));
    assert!(l.ba.aqm_opts.is_empty(), "dctcp's k does not follow to tcn");
    assert_eq!(l.ba.buffer_bytes, Some(300 * 1024));
}

fn err(text: &str) -> String {
    FabricDesc::parse(text).unwrap_err().to_string()
}

#[test]
fn bad_topologies_get_errors_that_name_the_line_and_what_to_do() {
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"c\"\n");
    assert!(
        e.starts_with("topology line 8: link b = `c`: no switch has that name (switches: a, b)"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"a\"\n");
    assert!(e.contains("line 5") && e.contains("defined twice"), "{e}");
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1-h3\"]\n[[switch]]\nname = \"b\"\nhosts = [\"h3\"]\n[[link]]\na = \"a\"\nb = \"b\"\n");
    assert!(
        e.contains("line 6") && e.contains("host h3 is on two switches: `a` (line 3) and `b`"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\nhosts = [\"h2\"]\n[[switch]]\nname = \"c\"\n[[link]]\na = \"a\"\nb = \"c\"\n");
    assert!(e.contains("not connected: no path from `a` to `b`"), "{e}");
    let e = err("[leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 1\nlinks_per_pair = 0\n");
    assert!(
        e.contains("line 5") && e.contains("links_per_pair must be at least 1"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\nrate = \"fast\"\n");
    assert!(e.starts_with("topology line 9: rate:"), "{e}");
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"x1\"]\n");
    assert!(
        e.contains("line 3") && e.contains("write hosts as h<i>"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a:b\"\nhosts = [\"h1\"]\n");
    assert!(e.contains("line 2") && e.contains("letters, digits"), "{e}");
    let e = err("[leaf_spine]\nleaves = 2\nspines = 0\nhosts_per_leaf = 1\n");
    assert!(
        e.contains("line 3") && e.contains("spines must be at least 1"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\nports = 3\n");
    assert!(e.contains("unknown field `ports`"), "{e}");
    let e = err("[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\nhosts = [\"h2\"]\nprefixes = [\"10.99.0.0/30\"]\n[[link]]\na = \"a\"\nb = \"b\"\n");
    assert!(
        e.contains("host h1 (10.99.0.1) is on `a` but inside prefix 10.99.0.0/30 of `b`"),
        "{e}"
    );
    assert!(err("").contains("no switches"));
}

/// A topology file's times, sizes and rates need their units, as every
/// other place that reads them (`crate::units`, "One rule").
#[test]
fn a_topology_refuses_bare_times_sizes_and_rates() {
    let link = |kv: &str| {
        err(&format!(
            "[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\n\
             hosts = [\"h2\"]\n[[link]]\na = \"a\"\nb = \"b\"\n{kv}\n"
        ))
    };
    let e = link("delay = \"100\"");
    assert!(
        e.starts_with("topology line 10: delay: a time needs a unit — write 100us"),
        "{e}"
    );
    let e = link("buffer = \"96000\"");
    assert!(
        e.starts_with("topology line 10: buffer: a size needs a unit — write 96000b"),
        "{e}"
    );
    let e = link("rate = \"1000\"");
    assert!(
        e.starts_with("topology line 10: rate: a rate needs a unit — write 1000mbit"),
        "{e}"
    );
    let e = err(
        "[defaults]\ndelay = \"5\"\n[leaf_spine]\nleaves = 1\nspines = 1\nhosts_per_leaf = 2\n",
    );
    assert!(e.contains("delay: a time needs a unit — write 5us"), "{e}");
    // 0 is 0 in every unit; an unshaped link is still `rate = "0"`.
    let d = desc(
        "[[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"b\"\n\
         hosts = [\"h2\"]\n[[link]]\na = \"a\"\nb = \"b\"\ndelay = \"0\"\nrate = \"0\"\n",
    );
    assert_eq!((d.links[0].ab.delay_ns, d.links[0].ab.rate.bps()), (0, 0));
}

// ---- routes ----

fn group_names(f: &Fabric<DropTail>, at: &str, to: &str) -> Vec<String> {
    f.switch(at)
        .unwrap()
        .forwarder()
        .group_to(to)
        .unwrap()
        .names
        .clone()
}

#[test]
fn leaf_spine_routes_use_every_spine_and_spines_go_straight_down() {
    let f = droptail(desc(LEAF_SPINE_2X2));
    assert_eq!(
        group_names(&f, "leaf1", "leaf2"),
        ["leaf1:spine1", "leaf1:spine2"]
    );
    assert_eq!(
        group_names(&f, "leaf2", "leaf1"),
        ["leaf2:spine1", "leaf2:spine2"]
    );
    assert_eq!(group_names(&f, "spine1", "leaf1"), ["spine1:leaf1"]);
    assert_eq!(group_names(&f, "spine2", "leaf2"), ["spine2:leaf2"]);
    // Spine to spine: down one leaf and up again (two equal paths).
    assert_eq!(
        group_names(&f, "spine1", "spine2"),
        ["spine1:leaf1", "spine1:leaf2"]
    );
    // Host lookups: local hosts by port, remote ones by group.
    let leaf1 = f.switch("leaf1").unwrap().forwarder();
    let (_, h1) = host(&f, "h1");
    let (_, h2) = host(&f, "h2");
    let (_, h3) = host(&f, "h3");
    let to = |b: &HostDesc| {
        let bytes = tcp(&h1, b, (1, 2), flags::ACK, 64);
        leaf1.lookup(&bytes, &wire::parse(&bytes).unwrap())
    };
    assert_eq!(to(&h2), Some(Dest::Port(1)));
    let Some(Dest::Group(g)) = to(&h3) else {
        panic!()
    };
    assert_eq!(leaf1.groups()[g as usize].to, "leaf2");
    // Flood tree: the breadth-first tree from leaf1 holds leaf1's links to
    // both spines; leaf2 hangs off spine1 only.
    let tree = |s: &str, p: u16| f.switch(s).unwrap().forwarder().floods(p);
    assert!(tree("leaf1", 0) && tree("leaf1", 1), "host ports flood");
    assert!(tree("leaf1", 2) && tree("leaf1", 3));
    assert!(
        tree("leaf2", 2) && !tree("leaf2", 3),
        "leaf2's second uplink is off the tree"
    );
}

#[test]
fn parking_lot_and_ring_routes() {
    let f = droptail(desc(PARKING_LOT));
    assert_eq!(group_names(&f, "s1", "s3"), ["s1:s2"]);
    assert_eq!(group_names(&f, "s2", "s3"), ["s2:s3"]);
    assert_eq!(group_names(&f, "s2", "s1"), ["s2:s1"]);
    assert_eq!(group_names(&f, "s3", "s1"), ["s3:s2"]);
    // Close the chain into a ring of four: s1 reaches the opposite switch two ways.
    let ring = desc(&format!(
        "{PARKING_LOT}[[switch]]\nname = \"s4\"\n[[link]]\na = \"s3\"\nb = \"s4\"\n[[link]]\na = \"s4\"\nb = \"s1\"\n"
    ));
    let f = droptail(ring);
    assert_eq!(group_names(&f, "s1", "s3"), ["s1:s2", "s1:s4"]);
    assert_eq!(group_names(&f, "s1", "s2"), ["s1:s2"]);
    assert_eq!(group_names(&f, "s4", "s2"), ["s4:s3", "s4:s1"]);
}

// ---- ECMP ----

/// Pearson's χ² of `counts` against a uniform spread.
fn chi_square(counts: &[u64]) -> f64 {
    let n: u64 = counts.iter().sum();
    let e = n as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum()
}

#[test]
fn ecmp_spreads_random_flows_within_chi_square_bounds() {
    // χ² critical values at p = 0.001 for 1 and 3 degrees of freedom.
    for (n, critical) in [(2usize, 10.828), (4, 16.266)] {
        for seed in 1..=5u64 {
            let mut rng = SimRng::new(seed * 1000 + n as u64);
            let mut counts = vec![0u64; n];
            for _ in 0..10_000 {
                let r = rng.next_u64();
                let src = (0x0a63_0000 | (r & 0xff) as u32).to_be_bytes();
                let dst = (0x0a63_0000 | ((r >> 8) & 0xff) as u32).to_be_bytes();
                let ports = ((r >> 16) as u16, (r >> 32) as u16);
                let key = wire::parse::flow_hash(&src, &dst, wire::ip_proto::TCP, Some(ports));
                counts[pick(ecmp_hash(switch_seed(seed, 0), u64::from(key)), n)] += 1;
            }
            let x2 = chi_square(&counts);
            assert!(x2 < critical, "n {n} seed {seed}: {counts:?} χ² {x2:.2}");
        }
    }
    // A hash that ignored its input would fail that bound by far.
    assert!(chi_square(&[10_000, 0]) > 10.828);
}

#[test]
fn ecmp_choice_depends_on_seed_and_switch_and_repeats_with_the_same_seed() {
    let keys: Vec<u64> = (0..1000u64).map(|k| k * 7919).collect();
    let choices =
        |seed: u64| -> Vec<usize> { keys.iter().map(|&k| pick(ecmp_hash(seed, k), 2)).collect() };
    assert_eq!(choices(switch_seed(1, 0)), choices(switch_seed(1, 0)));
    let differ = |a: Vec<usize>, b: Vec<usize>| a.iter().zip(&b).filter(|(x, y)| x != y).count();
    // Independent choices differ for about half the flows.
    let d_seed = differ(choices(switch_seed(1, 0)), choices(switch_seed(2, 0)));
    let d_switch = differ(choices(switch_seed(1, 0)), choices(switch_seed(1, 1)));
    assert!((400..600).contains(&d_seed), "{d_seed}");
    assert!((400..600).contains(&d_switch), "{d_switch}");
}

#[test]
fn flows_spread_over_four_spines_and_are_counted_per_next_hop() {
    let mut f = droptail(desc(
        "[defaults]\nrate = \"0\"\n[leaf_spine]\nleaves = 2\nspines = 4\nhosts_per_leaf = 1\n",
    ));
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (_, h2) = host(&f, "h2");
    for sport in 0..400u16 {
        let ports = (10_000 + sport, 5001);
        send(&mut f, &mut st, i1, tcp(&h1, &h2, ports, flags::SYN, 64), 0);
        send(
            &mut f,
            &mut st,
            i1,
            tcp(&h1, &h2, ports, flags::ACK, 1000),
            0,
        );
    }
    assert_eq!(collect(&mut f, &mut st, 0).len(), 800);
    let g = f
        .switch("leaf1")
        .unwrap()
        .forwarder()
        .group_to("leaf2")
        .unwrap();
    assert_eq!(g.flows.iter().sum::<u64>(), 400);
    assert_eq!(g.packets.iter().sum::<u64>(), 800);
    for (i, &fl) in g.flows.iter().enumerate() {
        // Every spine carries some; each SYN's data followed it.
        assert!(fl > 60, "{:?}", g.flows);
        assert_eq!(g.packets[i], 2 * fl);
        assert_eq!(g.bytes[i], fl * (64 + 1000));
    }
    assert!(chi_square(&g.flows) < 16.266, "{:?}", g.flows);
    assert_eq!(st.live, 0);
}

#[test]
fn parallel_links_are_ports_of_their_own_named_in_order_and_share_the_flows() {
    // The shorthand: two links between every leaf and the one spine. With
    // 2:1 oversubscription, 4 hosts × 10 Gbit/s : (1 spine × 2 links × r).
    let d = desc(
        "[leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 4\nlinks_per_pair = 2\n\
         host_rate = \"10gbit\"\noversubscription = 2.0\n",
    );
    assert_eq!(d.links.len(), 4);
    assert_eq!(d.links[0].ab.rate, Rate::gbit(10));
    // Explicit tables: the second link between a and b is its own port at
    // both ends, named `#2`, with its own settings.
    let text = "[defaults]\nrate = \"0\"\n\
        [[switch]]\nname = \"a\"\nhosts = [\"h1\"]\n\
        [[switch]]\nname = \"b\"\nhosts = [\"h2\"]\n\
        [[link]]\na = \"a\"\nb = \"b\"\n\
        [[link]]\na = \"b\"\nb = \"a\"\nab = { buffer = \"1mb\" }\n";
    let f = droptail(desc(text));
    let names = |at: usize| -> Vec<String> {
        (0..f.layout().ports[at].len() as u16)
            .map(|p| f.port_name(at, p))
            .collect()
    };
    assert_eq!(names(0), ["a:h1", "a:b", "a:b#2"]);
    assert_eq!(names(1), ["b:h2", "b:a", "b:a#2"]);
    let second = f.layout().port_desc(f.desc(), 1, 2);
    assert_eq!(second.buffer_bytes, Some(1 << 20), "b → a over link 2");
    assert_eq!(f.layout().port_desc(f.desc(), 0, 2).buffer_bytes, None);
    assert_eq!(group_names(&f, "a", "b"), ["a:b", "a:b#2"]);
    assert_eq!(group_names(&f, "b", "a"), ["b:a", "b:a#2"]);

    // 400 flows each way spread over both links, and every frame arrives.
    let mut f = droptail(desc(
        "[defaults]\nrate = \"0\"\n[leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 1\nlinks_per_pair = 2\n",
    ));
    assert_eq!(
        group_names(&f, "leaf1", "leaf2"),
        ["leaf1:spine1", "leaf1:spine1#2"]
    );
    assert_eq!(
        group_names(&f, "spine1", "leaf2"),
        ["spine1:leaf2", "spine1:leaf2#2"]
    );
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (i2, h2) = host(&f, "h2");
    for sport in 0..400u16 {
        let ports = (10_000 + sport, 5001);
        send(&mut f, &mut st, i1, tcp(&h1, &h2, ports, flags::SYN, 64), 0);
        send(
            &mut f,
            &mut st,
            i2,
            tcp(&h2, &h1, (ports.1, ports.0), flags::SYN | flags::ACK, 64),
            0,
        );
    }
    assert_eq!(collect(&mut f, &mut st, 0).len(), 800);
    for (at, to) in [
        ("leaf1", "leaf2"),
        ("spine1", "leaf2"),
        ("leaf2", "leaf1"),
        ("spine1", "leaf1"),
    ] {
        let g = f.switch(at).unwrap().forwarder().group_to(to).unwrap();
        assert_eq!(g.packets.iter().sum::<u64>(), 400, "{at} → {to}");
        // χ² at p = 0.001, 1 degree of freedom.
        assert!(
            chi_square(&g.packets) < 10.828,
            "{at} → {to}: {:?}",
            g.packets
        );
    }
    assert_eq!(st.live, 0);
}

// ---- delivery ----

#[test]
fn every_host_pair_is_reachable_and_both_directions_of_a_flow_arrive() {
    let mut f = droptail(desc(LEAF_SPINE_2X2));
    let mut st = VecStore::new();
    let hosts = f.desc().hosts.clone();
    for (i, a) in hosts.iter().enumerate() {
        for (j, b) in hosts.iter().enumerate() {
            if i == j {
                continue;
            }
            let bytes = tcp(a, b, (1000 + i as u16, 2000 + j as u16), flags::ACK, 200);
            send(&mut f, &mut st, i, bytes.clone(), 0);
            let out = collect(&mut f, &mut st, 0);
            assert_eq!(out, vec![(j, bytes)], "{} → {}", a.name, b.name);
        }
    }
    // One flow h1 ↔ h3, both directions interleaved: every frame arrives,
    // and each direction stays on one spine.
    let (i1, h1) = host(&f, "h1");
    let (i3, h3) = host(&f, "h3");
    let used = |f: &Fabric<DropTail>, at: &str, to: &str| {
        f.switch(at)
            .unwrap()
            .forwarder()
            .group_to(to)
            .unwrap()
            .packets
            .clone()
    };
    let before = [used(&f, "leaf1", "leaf2"), used(&f, "leaf2", "leaf1")];
    for k in 0..50u16 {
        let now = 10 + k as u64;
        let fwd = tcp(&h1, &h3, (40_000, 80), flags::ACK, 1000 + k as usize);
        let back = tcp(&h3, &h1, (80, 40_000), flags::ACK, 64 + k as usize);
        send(&mut f, &mut st, i1, fwd.clone(), now);
        send(&mut f, &mut st, i3, back.clone(), now);
        let mut out = collect(&mut f, &mut st, now);
        out.sort_by_key(|o| o.0);
        assert_eq!(out, vec![(i1, back), (i3, fwd)]);
    }
    let after = [used(&f, "leaf1", "leaf2"), used(&f, "leaf2", "leaf1")];
    for (a, b) in after.iter().zip(&before) {
        let grew: Vec<u64> = a.iter().zip(b).map(|(a, b)| a - b).collect();
        assert!(
            grew.contains(&50) && grew.contains(&0),
            "one path per direction: {grew:?}"
        );
    }
    let c = f.conservation();
    assert!(c.holds, "{c:?}");
    assert_eq!(st.live, 0);
}

#[test]
fn arp_is_answered_at_the_edge_and_broadcasts_follow_the_tree() {
    let mut f = droptail(desc(LEAF_SPINE_2X2));
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (_, h4) = host(&f, "h4");
    send(&mut f, &mut st, i1, arp::request(h1.mac, h1.ip, h4.ip), 0);
    let out = collect(&mut f, &mut st, 0);
    assert_eq!(out.len(), 1, "only the asker hears anything");
    let (to, reply) = &out[0];
    assert_eq!(*to, i1);
    assert_eq!(&reply[0..6], &h1.mac.0);
    assert_eq!(&reply[6..12], &h4.mac.0, "answered as h4");
    assert_eq!(
        f.switch("leaf1")
            .unwrap()
            .forwarder()
            .counters()
            .arp_answered,
        1
    );
    // ARP for an address no host has, and any other broadcast: one copy to
    // every other host, although the fabric is full of loops.
    let unknown = arp::request(h1.mac, h1.ip, Ipv4Addr::new(10, 99, 0, 200));
    let mut other = tcp(&h1, &h4, (1, 2), flags::ACK, 100);
    other[0..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    for bytes in [unknown, other] {
        send(&mut f, &mut st, i1, bytes.clone(), 1);
        let mut got: Vec<usize> = collect(&mut f, &mut st, 1)
            .into_iter()
            .map(|(h, b)| {
                assert_eq!(b, bytes);
                h
            })
            .collect();
        got.sort();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(f.held_packets(), 0, "nothing circulates");
    }
    // A frame to nobody is a counted drop.
    let mut nobody = tcp(&h1, &h4, (1, 2), flags::ACK, 100);
    nobody[0..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    nobody[30..34].copy_from_slice(&[192, 0, 2, 1]);
    send(&mut f, &mut st, i1, nobody, 2);
    assert!(collect(&mut f, &mut st, 2).is_empty());
    assert_eq!(
        f.switch("leaf1").unwrap().forwarder().counters().no_route,
        1
    );
    assert!(f.conservation().holds);
    assert_eq!(st.live, 0);
}

#[test]
fn prefixes_route_destinations_without_a_host_entry() {
    let mut f = droptail(desc(&PARKING_LOT.replace(
        "name = \"s3\"\nhosts = [\"h3\"]",
        "name = \"s3\"\nhosts = [\"h3\"]\nprefixes = [\"10.99.1.0/24\"]",
    )));
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (_, h3) = host(&f, "h3");
    // To 10.99.1.5 with h3's MAC: routed towards s3 by prefix; s3 itself
    // has no host with that address, so it falls back to the MAC.
    let mut bytes = tcp(&h1, &h3, (1, 2), flags::ACK, 100);
    bytes[30..34].copy_from_slice(&[10, 99, 1, 5]);
    send(&mut f, &mut st, i1, bytes, 0);
    assert_eq!(collect(&mut f, &mut st, 0).len(), 1);
    assert_eq!(f.switch("s1").unwrap().forwarder().counters().routed, 1);
    assert_eq!(f.switch("s3").unwrap().forwarder().counters().local, 1);
    assert_eq!(st.live, 0);
}

// ---- links ----

#[test]
fn a_link_sets_departure_times_by_its_rate_and_delay() {
    // h1 — s1 ═ 1 Gbit/s, 10 µs ═ s2 — h2; host ports unshaped.
    let mut f = droptail(desc(
        "[[switch]]\nname = \"s1\"\nhosts = [\"h1\"]\nhost_link = { rate = \"0\" }\n\
         [[switch]]\nname = \"s2\"\nhosts = [\"h2\"]\nhost_link = { rate = \"0\" }\n\
         [[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1gbit\"\ndelay = \"10us\"\n",
    ));
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (i2, h2) = host(&f, "h2");
    let t0 = 100 * US;
    for _ in 0..10 {
        send(
            &mut f,
            &mut st,
            i1,
            ip_frame(&h1, &h2, 17, (1, 2), 0, 1500),
            t0,
        );
    }
    let out = run_to_idle(&mut f, &mut st, t0);
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|o| o.1 == i2));
    let t: Vec<Nanos> = out.iter().map(|o| o.0).collect();
    // The first frame leaves the shaper at once (full 2500 B bucket) and
    // arrives 10 µs later; the second waits for the 548 B the bucket lacks
    // (4.384 µs); then one frame per (1500 + 24) · 8 ns = 12.192 µs.
    assert_eq!(t[0], t0 + 10 * US);
    assert_eq!(t[1] - t[0], 4_384);
    for w in t.windows(2).skip(1) {
        assert!((12_192..=12_193).contains(&(w[1] - w[0])), "{t:?}");
    }
    let l = f.link("s1:s2").unwrap();
    assert_eq!(l.port.io.tx_packets, 10);
    assert_eq!(l.port.wire.delay_ns(), 10 * US);
    assert_eq!(f.link("s2:s1").unwrap().port.io.tx_packets, 0);
    assert!(f.conservation().holds);
    assert_eq!(st.live, 0);
}

#[test]
fn a_congested_spine_port_marks_above_dctcp_k() {
    // 3 leaves × 2 spines, one host per leaf, 1 Gbit/s everywhere, DCTCP
    // K = 30 KB. h1 and h2 each send at line rate to h3 over spine1: spine1's
    // port to leaf3 receives 2 Gbit/s and drains 1, so only it queues and marks.
    let d = desc(
        r#"
        [defaults]
        buffer = "1mb"
        aqm_opts = { k = "30kb" }
        [leaf_spine]
        leaves = 3
        spines = 2
        hosts_per_leaf = 1
        host_rate = "1gbit"
        "#,
    );
    let base = PortConfig {
        queues: 1,
        ..PortConfig::default()
    };
    let mut f: Fabric<AqmKind> = Fabric::new(d, aqm_ports(base, "dctcp", 100 * US), 0).unwrap();
    let mut st = VecStore::new();
    let (i1, h1) = host(&f, "h1");
    let (i2, h2) = host(&f, "h2");
    let (i3, h3) = host(&f, "h3");
    // Pick each sender's source port so its leaf hashes the flow onto spine1.
    let via_spine1 = |f: &Fabric<AqmKind>, leaf: &str, a: &HostDesc| -> u16 {
        let r = f.switch(leaf).unwrap().forwarder();
        (1000..2000)
            .find(|&sp| {
                let b = ip_frame(a, &h3, 17, (sp, 5001), 0, 1500);
                let info = wire::parse(&b).unwrap();
                let Some(Dest::Group(g)) = r.lookup(&b, &info) else {
                    return false;
                };
                r.groups()[g as usize].names[pick_index(r, g, &info)] == format!("{leaf}:spine1")
            })
            .unwrap()
    };
    fn pick_index(r: &Routes, g: u16, info: &wire::FrameInfo) -> usize {
        let p = r.choose(g, info).unwrap();
        r.groups()[g as usize]
            .ports
            .iter()
            .position(|&q| q == p)
            .unwrap()
    }
    let (p1, p2) = (via_spine1(&f, "leaf1", &h1), via_spine1(&f, "leaf2", &h2));
    let gap = Rate::gbit(1).tx_time_ns(1500 + 24);
    let mut now = 0;
    let mut got = Vec::new();
    for _ in 0..200 {
        send(
            &mut f,
            &mut st,
            i1,
            ip_frame(&h1, &h3, 17, (p1, 5001), 0, 1500),
            now,
        );
        send(
            &mut f,
            &mut st,
            i2,
            ip_frame(&h2, &h3, 17, (p2, 5001), 0, 1500),
            now,
        );
        let until = now + gap;
        while now < until {
            got.extend(collect(&mut f, &mut st, now));
            now = f.next_event(now).map_or(until, |t| t.clamp(now + 1, until));
        }
    }
    got.extend(
        run_to_idle(&mut f, &mut st, now)
            .into_iter()
            .map(|(_, h, b)| (h, b)),
    );
    assert_eq!(got.len(), 400, "no drops in a 1 MB buffer");
    assert!(got.iter().all(|(h, _)| *h == i3));
    let marks = |name: &str| {
        let l = f.link(name).unwrap();
        l.port.egress.counters().port.marked.total().pkts
    };
    let spine_marks = marks("spine1:leaf3");
    // The queue grows by one frame per frame time: past K = 30 KB after about
    // 20 frames, so most of the remaining ~380 are marked.
    assert!(spine_marks > 300, "{spine_marks}");
    for l in f.links() {
        if l.name != "spine1:leaf3" {
            assert_eq!(
                l.port.egress.counters().port.marked.total().pkts,
                0,
                "{}",
                l.name
            );
        }
    }
    let ce = got.iter().filter(|(_, b)| b[15] & 3 == 3).count() as u64;
    assert_eq!(ce, spine_marks, "every mark reached h3 as CE");
    // The report names the hop that marked, and the path each flow took.
    let r = serde_json::to_value(f.report()).unwrap();
    let link = |name: &str| {
        r["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(link("spine1:leaf3")["marked_packets"], spine_marks);
    assert_eq!(link("spine1:leaf3")["tx_packets"], 400);
    assert_eq!(link("spine2:leaf3")["tx_packets"], 0);
    let leaf1 = &r["switches"][0];
    assert_eq!(leaf1["name"], "leaf1");
    assert_eq!(leaf1["routes"]["routed"], 200);
    let to_leaf3 = leaf1["next_hops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["to"] == "leaf3")
        .unwrap();
    assert_eq!(
        to_leaf3["names"],
        serde_json::json!(["leaf1:spine1", "leaf1:spine2"])
    );
    assert_eq!(to_leaf3["packets"], serde_json::json!([200, 0]));
    assert!(f.conservation().holds);
    assert_eq!(st.live, 0);
}

#[test]
fn a_port_the_maker_refuses_is_named_in_the_error() {
    let d = desc(
        "[[switch]]\nname = \"s1\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"s2\"\nhosts = [\"h2\"]\n\
         [[link]]\na = \"s1\"\nb = \"s2\"\nba = { aqm = \"nosuch\" }\n",
    );
    let base = PortConfig {
        queues: 1,
        ..PortConfig::default()
    };
    let e = Fabric::new(d.clone(), aqm_ports(base.clone(), "dctcp", 100 * US), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("port s2:s1: aqm nosuch:"), "{e}");
    let tiny = PortDesc {
        buffer_bytes: Some(100),
        ..d.links[0].ab.clone()
    };
    let mut d = d;
    d.links[0].ab = tiny;
    let e = Fabric::new(d, aqm_ports(base, "dctcp", 100 * US), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("port s1:s2: buffer 100 B"), "{e}");
}

#[test]
fn random_traffic_over_shaped_links_keeps_every_frame_accounted() {
    // 2 × 2 leaf-spine, small buffers so some frames drop, 1 Gbit/s hosts,
    // 2 Gbit/s fabric links with 5 µs delay; random frames between random
    // hosts at random times. After every step each switch's and link's
    // counter identities hold; at the end every frame was delivered or is
    // a counted drop.
    let d = desc(
        r#"
        [defaults]
        buffer = "8kb"
        [leaf_spine]
        leaves = 2
        spines = 2
        hosts_per_leaf = 2
        host_rate = "1gbit"
        fabric_rate = "2gbit"
        delay = "5us"
        "#,
    );
    let mut f = droptail(d);
    for s in f.switches_mut() {
        for p in s.ports_mut() {
            assert_eq!(p.egress.config().buffer_bytes, 8 * 1024);
        }
    }
    let mut st = VecStore::new();
    let hosts = f.desc().hosts.clone();
    let mut rng = SimRng::new(42);
    let (mut now, mut sent, mut delivered) = (0, 0u64, 0u64);
    for _ in 0..3000 {
        let a = (rng.next_u64() % 4) as usize;
        let b = (a + 1 + (rng.next_u64() % 3) as usize) % 4;
        let len = 64 + (rng.next_u64() % 1450) as usize;
        let ports = ((rng.next_u64() % 8) as u16, 80);
        send(
            &mut f,
            &mut st,
            a,
            tcp(&hosts[a], &hosts[b], ports, flags::ACK, len),
            now,
        );
        sent += 1;
        now += rng.next_u64() % 3000;
        for (h, bytes) in collect(&mut f, &mut st, now) {
            assert_eq!(bytes[0..6], hosts[h].mac.0, "to its host");
            delivered += 1;
        }
        let c = f.conservation();
        assert!(c.holds, "{c:?}");
    }
    delivered += run_to_idle(&mut f, &mut st, now).len() as u64;
    let dropped: u64 = f
        .switches()
        .iter()
        .flat_map(|s| s.ports())
        .map(|p| p.egress.counters().port.dropped.total().pkts)
        .sum();
    assert!(dropped > 0, "the small buffers overflowed");
    assert!(delivered > sent / 2, "{delivered} of {sent}");
    assert_eq!(delivered + dropped, sent);
    assert_eq!(f.held_packets(), 0);
    assert_eq!(st.live, 0);
    // A frame for a host the fabric does not have is released and counted.
    send(&mut f, &mut st, 99, vec![0u8; 64], now);
    assert_eq!((f.unknown_host_frames(), st.live), (1, 0));
}

// ---- a fabric over several processes ----

/// Polls the two parts of one fabric at `now`, joined by ideal wires (a
/// frame leaving one part's wire enters the other's at the same instant),
/// in rounds until no frame crosses a wire — as one fabric's poll does.
/// Deliveries to hosts go to `out`; `wired` counts wire crossings.
fn poll_parts<A: crate::aqm::Aqm>(
    parts: &mut [Fabric<A>; 2],
    st: &mut VecStore,
    now: Nanos,
    out: &mut Vec<(Nanos, usize, Vec<u8>)>,
    wired: &mut u64,
) {
    loop {
        let mut delivered = Vec::new();
        let mut crossing = Vec::new();
        for part in parts.iter_mut() {
            let layout = part.layout().clone();
            part.poll(now, st, |e, pkt| match e {
                Exit::Host(h) => delivered.push((h, pkt.frame)),
                Exit::Wire { switch, port } => match layout.ports[switch][port as usize] {
                    PortRole::Link {
                        peer, peer_port, ..
                    } => crossing.push((peer, peer_port, pkt)),
                    PortRole::Host(_) => panic!("a wire is a link port"),
                },
            });
        }
        out.extend(delivered.into_iter().map(|(h, id)| (now, h, st.take(id))));
        if crossing.is_empty() {
            return;
        }
        for (peer, peer_port, pkt) in crossing {
            *wired += 1;
            let part = parts.iter_mut().find(|p| p.slot(peer).is_some()).unwrap();
            part.ingress_at(peer, peer_port, pkt.frame, pkt.len, now, st);
        }
    }
}

/// Runs a fabric's events from `*at` up to `until` (inclusive).
fn advance<A: crate::aqm::Aqm>(
    f: &mut Fabric<A>,
    st: &mut VecStore,
    at: &mut Nanos,
    until: Nanos,
    out: &mut Vec<(Nanos, usize, Vec<u8>)>,
) {
    while let Some(t) = f.next_event(*at).filter(|&t| t <= until) {
        *at = t.max(*at);
        out.extend(collect(f, st, *at).into_iter().map(|(h, b)| (*at, h, b)));
    }
}

/// As [`advance`], for two parts of one fabric.
fn advance_parts<A: crate::aqm::Aqm>(
    parts: &mut [Fabric<A>; 2],
    st: &mut VecStore,
    at: &mut Nanos,
    until: Nanos,
    out: &mut Vec<(Nanos, usize, Vec<u8>)>,
    wired: &mut u64,
) {
    loop {
        let next = parts.iter().filter_map(|p| p.next_event(*at)).min();
        match next.filter(|&t| t <= until) {
            Some(t) => {
                *at = t.max(*at);
                poll_parts(parts, st, *at, out, wired);
            }
            None => return,
        }
    }
}

#[test]
fn a_fabric_split_over_two_parts_joined_by_wires_delivers_what_the_whole_one_does() {
    // 2 × 2 leaf-spine with shaped, delayed links and small buffers; part A
    // runs leaf1 and spine1, part B leaf2 and spine2, so every path between
    // the leaves crosses one wire, and leaf1's uplinks are one wire and one
    // in-process link. Random traffic between every host pair, and
    // broadcasts (which follow the flood tree across the wires): with ideal
    // wires the two parts must deliver exactly the frames the whole fabric
    // delivers, at the same times, drop the same, and route alike.
    let text = r#"
        [defaults]
        buffer = "16kb"
        [leaf_spine]
        leaves = 2
        spines = 2
        hosts_per_leaf = 2
        host_rate = "1gbit"
        fabric_rate = "1gbit"
        delay = "5us"
    "#;
    let maker = |_: &PortCtx| {
        Ok((
            PortConfig {
                queues: 1,
                ..PortConfig::default()
            },
            DropTail,
        ))
    };
    let d = desc(text);
    let mut whole = Fabric::new(d.clone(), maker, 0).unwrap();
    let a_local = [true, false, true, false]; // leaf1, leaf2, spine1, spine2
    let b_local = a_local.map(|l| !l);
    let mut parts = [
        Fabric::part(d.clone(), &a_local, maker, 0).unwrap(),
        Fabric::part(d, &b_local, maker, 0).unwrap(),
    ];
    // What each part is: its switches, and its wires named by port.
    let wires = |f: &Fabric<DropTail>| -> Vec<String> {
        f.layout()
            .wires()
            .into_iter()
            .map(|(s, p)| f.port_name(s, p))
            .collect()
    };
    assert_eq!(parts[0].switch_ids(), [0, 2]);
    assert!(parts[0].switch("leaf2").is_none());
    assert_eq!(wires(&parts[0]), ["leaf1:spine2", "spine1:leaf2"]);
    assert_eq!(wires(&parts[1]), ["leaf2:spine1", "spine2:leaf1"]);
    assert!(wires(&whole).is_empty());
    let order: Vec<String> = parts[0]
        .port_order()
        .iter()
        .map(|&(s, p)| parts[0].port_name(s, p))
        .collect();
    assert_eq!(
        order,
        [
            "leaf1:h1",
            "leaf1:h2",
            "leaf1:spine2",
            "spine1:leaf2",
            "leaf1:spine1",
            "spine1:leaf1"
        ],
        "hosts, then wires (the data path's interfaces), then in-process links"
    );
    let hosts = whole.desc().hosts.clone();
    let (mut st_w, mut st_p) = (VecStore::new(), VecStore::new());
    let mut rng = SimRng::new(7);
    let (mut got_w, mut got_p) = (Vec::new(), Vec::new());
    let (mut now, mut at_w, mut at_p, mut wired) = (0, 0, 0, 0u64);
    for i in 0..2000 {
        let a = (rng.next_u64() % 4) as usize;
        let b = (a + 1 + (rng.next_u64() % 3) as usize) % 4;
        let len = 64 + (rng.next_u64() % 1450) as usize;
        let ports = ((rng.next_u64() % 16) as u16, 80);
        let mut bytes = tcp(&hosts[a], &hosts[b], ports, flags::ACK, len);
        if i % 100 == 0 {
            bytes[0..6].copy_from_slice(&[0xff; 6]); // a broadcast: every other host
        }
        let len = bytes.len() as u32;
        let id = st_w.insert(bytes.clone());
        whole.ingress(a, id, len, now, &mut st_w);
        let id = st_p.insert(bytes);
        let part = parts
            .iter_mut()
            .find(|p| p.slot(hosts[a].switch).is_some())
            .unwrap();
        part.ingress(a, id, len, now, &mut st_p);
        now += 1 + rng.next_u64() % 3000;
        advance(&mut whole, &mut st_w, &mut at_w, now, &mut got_w);
        advance_parts(
            &mut parts, &mut st_p, &mut at_p, now, &mut got_p, &mut wired,
        );
        // The next frame arrives at `now`: time moves on to it.
        (at_w, at_p) = (now, now);
    }
    advance(&mut whole, &mut st_w, &mut at_w, Nanos::MAX, &mut got_w);
    advance_parts(
        &mut parts,
        &mut st_p,
        &mut at_p,
        Nanos::MAX,
        &mut got_p,
        &mut wired,
    );
    got_w.sort();
    got_p.sort();
    assert!(got_w.len() > 1500, "{} deliveries", got_w.len());
    assert_eq!(got_w.len(), got_p.len());
    assert!(
        got_w == got_p,
        "the parts delivered other frames or at other times"
    );
    assert!(wired > 500, "{wired} frames crossed a wire");
    // The same routes and drops: every switch's ECMP counts and every
    // port's counters are the whole fabric's.
    let dropped = |sw: &Switch<DropTail, Routes>| -> u64 {
        sw.ports()
            .iter()
            .map(|p| p.egress.counters().port.dropped.total().pkts)
            .sum()
    };
    let mut drops = 0;
    for part in &parts {
        for (&s, sw) in part.switch_ids().iter().zip(part.switches()) {
            let w = &whole.switches()[s];
            let name = &whole.desc().switches[s].name;
            assert_eq!(sw.forwarder().groups(), w.forwarder().groups(), "{name}");
            assert_eq!(dropped(sw), dropped(w), "{name}");
            drops += dropped(sw);
        }
    }
    assert!(drops > 0, "the small buffers overflowed somewhere");
    // Each part's counters add up, and a wire's two ends agree.
    for (i, part) in parts.iter().enumerate() {
        assert!(part.conservation().holds);
        assert_eq!(part.held_packets(), 0);
        for (s, p) in part.layout().wires() {
            let PortRole::Link {
                peer, peer_port, ..
            } = part.layout().ports[s][p as usize]
            else {
                panic!("a wire is a link port")
            };
            let other = &parts[1 - i];
            let sent = part.switches()[part.slot(s).unwrap()].ports()[p as usize]
                .io
                .tx_packets;
            let got = other.switches()[other.slot(peer).unwrap()].ports()[peer_port as usize]
                .io
                .rx_packets;
            assert_eq!(sent, got, "{}", part.port_name(s, p));
        }
    }
    assert_eq!(st_p.live, 0);
    // A frame for a port this part does not run is released and counted.
    let id = st_p.insert(vec![0u8; 64]);
    parts[0].ingress_at(1, 0, id, 64, now, &mut st_p);
    assert_eq!((parts[0].unknown_host_frames(), st_p.live), (1, 0));
}

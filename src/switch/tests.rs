//! The switch as a whole on a manual clock and heap frames: forwarding,
//! flooding, filtering, the shaper and wire timing, emulated host links,
//! shutdown and the counter identities.

use super::*;
use crate::aqm::droptail::DropTail;
use crate::packet::VecStore;
use crate::units::{Rate, US};
use crate::wire::MacAddr;

fn mac(i: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, i])
}

/// Ethernet + IPv4 (ECT(0)) + UDP, `len` bytes in all.
fn frame(src: MacAddr, dst: MacAddr, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(60)];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[15] = 0x02; // ECT(0)
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 99, 0, src.0[5]]);
    f[30..34].copy_from_slice(&[10, 99, 0, dst.0[5]]);
    let sum = crate::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&1000u16.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

fn switch(n: usize, rate: Rate, delay_ns: Nanos) -> Switch<DropTail> {
    let specs = (0..n)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            config: PortConfig {
                rate,
                queues: 1,
                ..PortConfig::default()
            },
            aqm: DropTail,
            delay_ns,
        })
        .collect();
    Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap()
}

fn send(sw: &mut Switch<DropTail>, store: &mut VecStore, port: u16, bytes: Vec<u8>, now: Nanos) {
    let len = bytes.len() as u32;
    let f = store.insert(bytes);
    sw.ingress(port, f, len, now, store);
}

fn collect(sw: &mut Switch<DropTail>, store: &mut VecStore, now: Nanos) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let mut sent = Vec::new();
    sw.poll(now, store, |p, pkt| sent.push((p, pkt)));
    for (p, pkt) in sent {
        out.push((p, store.take(pkt.frame)));
    }
    out
}

#[test]
fn floods_unknown_then_learns() {
    let mut sw = switch(3, Rate::from_bps(0), 0);
    let mut st = VecStore::new();
    // h1 (port 0) → h2 unknown: flooded to ports 1 and 2, with identical bytes.
    let f = frame(mac(1), mac(2), 100);
    send(&mut sw, &mut st, 0, f.clone(), 0);
    let mut out = collect(&mut sw, &mut st, 0);
    out.sort_by_key(|o| o.0);
    assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1, 2]);
    assert!(out.iter().all(|o| o.1 == f));
    // h2 answers from port 1: h1 is known, so unicast to port 0 only.
    send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 100), 10);
    let out = collect(&mut sw, &mut st, 10);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0);
    // And now h1 → h2 is unicast to port 1.
    send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 100), 20);
    let out = collect(&mut sw, &mut st, 20);
    assert_eq!(out.iter().map(|o| o.0).collect::<Vec<_>>(), vec![1]);
    assert_eq!(sw.ports()[0].io.rx_packets, 2);
    assert_eq!(sw.ports()[0].io.flooded, 1);
    assert_eq!(sw.ports()[1].io.tx_packets, 2);
    assert_eq!(st.live, 0, "every frame left the switch exactly once");
}

#[test]
fn broadcast_goes_everywhere_but_ingress_and_hairpin_is_filtered() {
    let mut sw = switch(4, Rate::from_bps(0), 0);
    let mut st = VecStore::new();
    send(
        &mut sw,
        &mut st,
        2,
        frame(mac(3), MacAddr::BROADCAST, 60),
        0,
    );
    let mut ports: Vec<u16> = collect(&mut sw, &mut st, 0)
        .into_iter()
        .map(|o| o.0)
        .collect();
    ports.sort();
    assert_eq!(ports, vec![0, 1, 3]);
    // A frame to a MAC learned on the same port is filtered.
    send(&mut sw, &mut st, 2, frame(mac(9), mac(3), 60), 1);
    assert!(collect(&mut sw, &mut st, 1).is_empty());
    assert_eq!(sw.ports()[2].io.filtered, 1);
    assert_eq!(st.live, 0);
}

#[test]
fn non_ip_and_bad_ip_frames_are_bridged_and_counted_l2_only() {
    let mut sw = switch(2, Rate::from_bps(0), 0);
    let mut st = VecStore::new();
    let good = frame(mac(1), mac(2), 100);
    let mut other_type = good.clone();
    other_type[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    let mut bad_version = good.clone();
    bad_version[14] = 0x75;
    let mut cut_off = good.clone();
    cut_off.truncate(20); // 6 bytes of a 20-byte IPv4 header
    for f in [good, other_type, bad_version, cut_off] {
        send(&mut sw, &mut st, 0, f, 0);
    }
    let out = collect(&mut sw, &mut st, 0);
    assert_eq!(out.len(), 4, "every frame is bridged");
    assert_eq!(sw.ports()[0].io.l2_only, 3);
    assert_eq!(st.live, 0);
}

#[test]
fn runt_frames_are_counted_drops() {
    let mut sw = switch(2, Rate::from_bps(0), 0);
    let mut st = VecStore::new();
    send(&mut sw, &mut st, 0, vec![0u8; 10], 0);
    assert_eq!(
        sw.ports()[0].io.ingress_drops[DropReason::Malformed as usize],
        1
    );
    assert_eq!(st.live, 0);
}

#[test]
fn shaper_and_delay_line_set_departure_times() {
    // 1 Gbit/s, 24 B overhead, 2500 B bucket, 50 µs wire.
    let mut sw = switch(2, Rate::gbit(1), 50 * US);
    let mut st = VecStore::new();
    // Learn h2 on port 1 first (its frame floods to port 0; drain it).
    send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 60), 0);
    assert!(
        collect(&mut sw, &mut st, 0).is_empty(),
        "on the wire for 50 µs"
    );
    assert_eq!(collect(&mut sw, &mut st, 50 * US).len(), 1);
    // Ten 1500-byte frames h1 → h2 at t = 100 µs.
    let t0 = 100 * US;
    for _ in 0..10 {
        send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 1500), t0);
    }
    let mut departures = Vec::new();
    let mut now = t0;
    while departures.len() < 10 {
        for _ in collect(&mut sw, &mut st, now) {
            departures.push(now);
        }
        if departures.len() == 10 {
            break;
        }
        now = sw.next_event(now).unwrap_or_else(|| {
            panic!(
                "packets still in the switch: {departures:?} held {}",
                sw.held_packets()
            )
        });
    }
    // First frame leaves the shaper at once (full bucket) and arrives 50 µs later;
    // the second waits for the 548 B the bucket lacks (4.384 µs); from then on
    // one frame per (1500 + 24)·8 ns = 12.192 µs.
    assert_eq!(departures[0], t0 + 50 * US);
    assert_eq!(departures[1] - departures[0], 4_384);
    for w in departures.windows(2).skip(1) {
        let gap = w[1] - w[0];
        assert!((12_192..=12_193).contains(&gap), "gap {gap}");
    }
    assert_eq!(sw.held_packets(), 0);
    assert_eq!(st.live, 0);
}

#[test]
fn an_emulated_host_link_spreads_a_burst_at_its_rate() {
    // Unshaped egress, host link of 100 Mbit/s on port 0: a burst of 4
    // full frames received at once leaves one serialisation
    // ((1514 + 24) × 8 / 100 Mbit/s = 123.04 µs) apart.
    let mut sw = switch(2, Rate::from_bps(0), 0);
    sw.enable_ingress_links(&[Some(Rate::mbit(100)), None], 24, 3);
    let mut store = VecStore::new();
    let (a, b) = (mac(1), mac(2));
    send(&mut sw, &mut store, 1, frame(b, a, 60), 0);
    assert_eq!(
        collect(&mut sw, &mut store, 0).len(),
        1,
        "port 1 has no link"
    );
    for _ in 0..4 {
        send(&mut sw, &mut store, 0, frame(a, b, 1514), 0);
    }
    // The 4th frame found 3 waiting: a counted drop.
    assert_eq!(
        sw.ports()[0].io.ingress_drops[DropReason::IngressFull as usize],
        1
    );
    assert_eq!(sw.held_packets(), 3);
    assert_eq!(sw.ports()[0].io.rx_packets, 0, "not in the switch yet");
    assert_eq!(sw.next_event(0), Some(123_040));
    assert!(collect(&mut sw, &mut store, 123_039).is_empty());
    assert_eq!(collect(&mut sw, &mut store, 123_040).len(), 1);
    assert_eq!(sw.next_event(123_040), Some(246_080));
    assert!(collect(&mut sw, &mut store, 246_079).is_empty());
    assert_eq!(collect(&mut sw, &mut store, 400_000).len(), 2);
    assert_eq!(sw.ports()[0].io.rx_packets, 3);
    assert_eq!(sw.held_packets(), 0);
    // Shutdown returns frames still on the link.
    send(&mut sw, &mut store, 0, frame(a, b, 1514), 500_000);
    sw.drain(&mut store);
    assert_eq!(store.live, 0, "every frame returned");
}

#[test]
fn drain_returns_every_frame() {
    let mut sw = switch(2, Rate::mbit(1), 1_000 * US);
    let mut st = VecStore::new();
    for i in 0..20 {
        send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 1000), i);
    }
    let _ = collect(&mut sw, &mut st, 30);
    assert!(st.live > 0);
    let c = sw.conservation();
    assert!(c.holds, "{c:?}");
    sw.drain(&mut st);
    assert_eq!(st.live, 0);
    // The frames on the wire and in the queue at shutdown are drained,
    // and the counters still add up.
    let c = sw.conservation();
    assert!(c.holds, "{c:?}");
    let io = &sw.ports()[1].io;
    let q = &sw.ports()[1].egress.counters().port;
    assert!(io.wire_drained > 0 && q.drained.pkts > 0, "{io:?} {q:?}");
    assert_eq!(
        io.tx_packets + io.wire_drained + q.drained.pkts + q.dropped.total().pkts,
        20
    );
}

#[test]
fn conservation_counts_floods_filters_and_catches_a_lost_frame() {
    let mut sw = switch(3, Rate::mbit(10), 10 * US);
    let mut st = VecStore::new();
    send(&mut sw, &mut st, 0, frame(mac(1), mac(2), 100), 0); // flooded to 1, 2
    send(&mut sw, &mut st, 1, frame(mac(2), mac(1), 100), 1); // unicast to 0
    send(&mut sw, &mut st, 1, frame(mac(9), mac(2), 100), 2); // filtered
    send(&mut sw, &mut st, 2, vec![0u8; 10], 3); // runt
    let c = sw.conservation();
    assert!(c.holds, "{c:?}");
    assert_eq!(c.switch.input, 4 + 1);
    assert_eq!(c.ports[0].ingress.input, 2);
    assert_eq!(sw.ports()[0].io.forwarded, 2);
    assert!(c.failures(&[]).is_empty());
    // A frame that vanishes without a count breaks the identities.
    sw.ports_mut()[1].io.tx_packets += 1;
    let c = sw.conservation();
    assert!(!c.holds);
    let f = c.failures(&["a".into(), "b".into(), "c".into()]);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].starts_with("port b egress frames: in 1 != out 2"),
        "{f:?}"
    );
    assert!(f[1].starts_with("switch frames:"), "{f:?}");
    sw.drain(&mut st);
}

#[test]
fn one_port_switch_counts_a_flood_as_filtered() {
    let mut sw = switch(1, Rate::from_bps(0), 0);
    let mut st = VecStore::new();
    send(
        &mut sw,
        &mut st,
        0,
        frame(mac(1), MacAddr::BROADCAST, 60),
        0,
    );
    assert_eq!(sw.ports()[0].io.filtered, 1);
    assert!(sw.conservation().holds);
    assert_eq!(st.live, 0);
}

//! R-AQM inside the [`Switch`]: an incast through one port on a manual clock,
//! event-driven by `next_event` (no busy loop), with the receiver's ACKs held
//! in that port's VIQ and data never delayed by the ACK path.

use super::tests::{tcp_frame, tcp_frame_with_payload};
use super::*;
use crate::aqm::droptail::DropTail;
use crate::bridge::BridgeConfig;
use crate::packet::VecStore;
use crate::port::PortConfig;
use crate::switch::{PortSpec, Switch};
use crate::units::US;
use crate::wire::parse;
use crate::wire::tcp::flags;

fn switch(n: usize) -> Switch<DropTail> {
    let specs = (0..n)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            config: PortConfig {
                rate: Rate::gbit(1),
                queues: 1,
                ..PortConfig::default()
            },
            aqm: DropTail,
            delay_ns: 0,
        })
        .collect();
    Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap()
}

fn send(sw: &mut Switch<DropTail>, st: &mut VecStore, port: u16, f: Vec<u8>, now: Nanos) {
    let len = f.len() as u32;
    let id = st.insert(f);
    sw.ingress(port, id, len, now, st);
}

/// Host i sits on port i-1 with MAC / IP ending in i. Senders 1 and 2 send
/// data to receiver 3 (port 2); 3 answers with pure ACKs.
#[test]
fn incast_acks_are_held_and_data_is_not_delayed() {
    let mut schedules = Vec::new();
    for with_raqm in [false, true] {
        let mut sw = switch(3);
        let mut st = VecStore::new();
        let cfg = Config::for_link(Rate::gbit(1), 250 * US);
        if with_raqm {
            sw.enable_raqm(&cfg, 0);
        }
        // Handshakes (teach MACs and window scales): SYN 1→3, SYN-ACK 3→1, same for 2.
        let ws = [1, 3, 3, 7];
        for s in [1u8, 2] {
            let sport = 40000 + s as u16;
            send(
                &mut sw,
                &mut st,
                (s - 1) as u16,
                tcp_frame(false, (s, 3), (sport, 5201), flags::SYN, 64240, &ws),
                0,
            );
            send(
                &mut sw,
                &mut st,
                2,
                tcp_frame(
                    false,
                    (3, s),
                    (5201, sport),
                    flags::SYN | flags::ACK,
                    65160,
                    &ws,
                ),
                0,
            );
        }
        let mut now = 0;
        let mut txs: Vec<(Nanos, u16, Vec<u8>)> = Vec::new();
        let run_until = |sw: &mut Switch<DropTail>,
                         st: &mut VecStore,
                         txs: &mut Vec<(Nanos, u16, Vec<u8>)>,
                         until: Nanos,
                         now: &mut Nanos| {
            loop {
                let mut sent = Vec::new();
                sw.poll(*now, st, |p, pkt| sent.push((p, pkt)));
                for (p, pkt) in sent {
                    txs.push((*now, p, st.take(pkt.frame)));
                }
                match sw.next_event(*now) {
                    Some(t) if t <= until => *now = t.max(*now + 1),
                    _ => break,
                }
            }
            *now = until;
        };
        run_until(&mut sw, &mut st, &mut txs, 10 * US, &mut now);
        if with_raqm {
            assert_eq!(
                sw.window_scales().unwrap().len(),
                4,
                "both directions of both flows"
            );
        }
        // Incast: 40 full-sized data frames, 20 from each sender, one every
        // 2 µs (six times the 12.3 µs a frame takes to leave): P's queue
        // rises at every sample instant (T/2 = 31.25 µs) for 80 µs.
        let t0 = 20 * US;
        for k in 0..40u8 {
            run_until(
                &mut sw,
                &mut st,
                &mut txs,
                t0 + u64::from(k) * 2 * US,
                &mut now,
            );
            let s = 1 + k % 2;
            let f = tcp_frame_with_payload(
                false,
                (s, 3),
                (40000 + s as u16, 5201),
                flags::ACK,
                502,
                &[],
                1460,
            );
            assert_eq!(f.len(), 1514);
            send(&mut sw, &mut st, (s - 1) as u16, f, now);
        }
        // The queue rose at the instants T/2 and T (0, 4, 17 or so): CS
        // from T = 62.5 µs to the next decision at 2T. Just after the last
        // frame the receiver ACKs every frame it got.
        let t_ack = t0 + 81 * US;
        assert!(cfg.interval < t_ack && t_ack < 2 * cfg.interval);
        run_until(&mut sw, &mut st, &mut txs, t_ack, &mut now);
        let delivered_before = txs.iter().filter(|t| t.1 == 2 && t.2.len() == 1514).count();
        for k in 0..delivered_before as u32 {
            let s = 1 + (k % 2) as u8;
            let f = tcp_frame(
                false,
                (3, s),
                (5201, 40000 + s as u16),
                flags::ACK,
                0x7fff,
                &[],
            );
            send(&mut sw, &mut st, 2, f, now);
        }
        if with_raqm {
            let r = sw.ports()[2].raqm.as_ref().unwrap();
            assert_eq!(r.state(), State::Congested);
            assert_eq!(r.viq_len(), delivered_before, "every ACK held");
        }
        run_until(&mut sw, &mut st, &mut txs, 20_000 * US, &mut now);
        assert_eq!(sw.held_packets(), 0);
        assert_eq!(st.live, 0, "every frame left exactly once");
        // Data departures on port 2: back to back at line rate either way
        // (12.304 µs per 1514-B frame + 24 B overhead), none waits for ACKs.
        let data: Vec<Nanos> = txs
            .iter()
            .filter(|t| t.1 == 2 && t.2.len() == 1514)
            .map(|t| t.0)
            .collect();
        assert_eq!(data.len(), 40);
        schedules.push(data.clone());
        for w in data.windows(2).skip(1) {
            assert!(
                w[1] - w[0] <= 12_304,
                "data delayed (R-AQM {with_raqm}): gap {} at {}: {data:?}",
                w[1] - w[0],
                w[1]
            );
        }
        let acks: Vec<&(Nanos, u16, Vec<u8>)> = txs
            .iter()
            .filter(|t| t.0 >= t_ack - 1_000 && t.2.len() == 54)
            .collect();
        assert_eq!(acks.len(), delivered_before, "no ACK lost");
        if with_raqm {
            let r = sw.ports()[2].raqm.as_ref().unwrap();
            assert_eq!(r.counters.acks_held as usize, delivered_before);
            assert_eq!(r.counters.acks_released as usize, delivered_before);
            // Held ACKs leave paced, not at once.
            assert!(
                acks.last().unwrap().0 > acks[0].0 + 10 * US,
                "ACKs paced by the bucket"
            );
            // q_out + VIQ was above the ECE threshold: ECE on the leaving ACKs.
            assert!(r.counters.rewrite_ece > 0);
            let ece = acks
                .iter()
                .filter(|a| parse(&a.2).unwrap().l3.unwrap().tcp.unwrap().flags & flags::ECE != 0)
                .count();
            assert_eq!(ece as u64, r.counters.rewrite_ece);
        } else {
            assert!(
                acks.iter().all(|a| a.0 <= t_ack + 2 * US),
                "no R-AQM: ACKs go at once"
            );
        }
    }
    assert_eq!(
        schedules[0], schedules[1],
        "R-AQM changed no data departure"
    );
}

/// An ACK that finds its VIQ full is an ingress drop of its own reason
/// (`viq_full`), not a queue-limit drop, and the counters still add up.
#[test]
fn a_full_viq_is_its_own_drop_reason() {
    let mut sw = switch(2);
    let mut st = VecStore::new();
    let cfg = Config {
        viq_limit_pkts: 2,
        ..Config::for_link(Rate::gbit(1), 250 * US)
    };
    sw.enable_raqm(&cfg, 0);
    // Host 1 on port 0, host 2 on port 1 (the receiver, port P).
    send(
        &mut sw,
        &mut st,
        1,
        tcp_frame(false, (2, 1), (5201, 40000), flags::ACK, 502, &[]),
        0,
    );
    send(
        &mut sw,
        &mut st,
        0,
        tcp_frame(false, (1, 2), (40000, 5201), flags::ACK, 502, &[]),
        0,
    );
    // Data frames for P in two bursts, five, then ten more after the
    // sample at T/2: its queue rose at both instants of T → CS.
    let mut sent = Vec::new();
    for (n, at) in [(5, 1), (10, cfg.interval / 2 + 1)] {
        for _ in 0..n {
            let f =
                tcp_frame_with_payload(false, (1, 2), (40000, 5201), flags::ACK, 502, &[], 1460);
            send(&mut sw, &mut st, 0, f, at);
        }
        sw.poll(at - 1 + cfg.interval / 2, &mut st, |_, pkt| sent.push(pkt));
    }
    let raqm = |sw: &Switch<DropTail>| sw.ports()[1].raqm.clone().unwrap();
    assert_eq!(raqm(&sw).state(), State::Congested);
    // Three ACKs from the receiver: two held, the third finds the VIQ full.
    for _ in 0..3 {
        let ack = tcp_frame(false, (2, 1), (5201, 40000), flags::ACK, 502, &[]);
        send(&mut sw, &mut st, 1, ack, cfg.interval);
    }
    assert_eq!(raqm(&sw).viq_len(), 2);
    assert_eq!(raqm(&sw).counters.dropped_viq_full, 1);
    let drops = &sw.ports()[1].io.ingress_drops;
    assert_eq!(drops[DropReason::ViqFull as usize], 1);
    assert_eq!(drops[DropReason::QueueLimit as usize], 0);
    assert_eq!(drops.iter().sum::<u64>(), 1);
    let c = sw.conservation();
    assert!(c.holds, "{c:?}");
    for pkt in sent {
        st.release(pkt.frame);
    }
    sw.drain(&mut st);
    assert_eq!(st.live, 0);
}

/// §IV-A "VIQ sets the highest priority of each ACK": on a port with a
/// strict queue (sp+dwrr, queue 0 strict, data classified into queue 1),
/// the receiver's ACK that R-AQM passes goes into queue 0 and leaves ahead
/// of the data already queued there; with `ack_priority = false`, or on a
/// port without a strict queue, it waits behind the data.
#[test]
fn acks_leaving_r_aqm_take_the_top_priority_queue() {
    for (sched, ack_priority, ack_first) in [
        ("sp+dwrr", true, true),
        ("sp+dwrr", false, false),
        ("dwrr", true, false),
    ] {
        let case = format!("{sched}, ack_priority = {ack_priority}");
        let specs = (0..2)
            .map(|i| PortSpec {
                name: format!("p{i}"),
                config: PortConfig {
                    rate: Rate::gbit(1),
                    queues: 2,
                    // Every DSCP 0 frame into queue 1 (the DWRR group).
                    classifier: crate::port::Classifier::from_cli("0=1", 2).unwrap(),
                    sched: crate::sched::SchedConfig::from_cli(sched).unwrap(),
                    ..PortConfig::default()
                },
                aqm: DropTail,
                delay_ns: 0,
            })
            .collect();
        let mut sw = Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap();
        let cfg = Config {
            ack_priority,
            ..Config::for_link(Rate::gbit(1), 250 * US)
        };
        sw.enable_raqm(&cfg, 0);
        let mut st = VecStore::new();
        // Host 1 on port 0, host 2 on port 1: the bridge learns both MACs.
        let syn = tcp_frame(false, (1, 2), (40001, 5201), flags::SYN, 64240, &[]);
        send(&mut sw, &mut st, 0, syn, 0);
        let syn_ack = tcp_frame(
            false,
            (2, 1),
            (5201, 40001),
            flags::SYN | flags::ACK,
            65160,
            &[],
        );
        send(&mut sw, &mut st, 1, syn_ack, 0);
        poll_until(&mut sw, &mut st, 0, 10 * US);
        // Host 2 → host 1: five full data frames of another connection
        // queue on port 0 (12 µs each at 1 Gbit/s), then host 2's pure ACK
        // of host 1's data arrives behind them.
        let t0 = 20 * US;
        for _ in 0..5 {
            let f =
                tcp_frame_with_payload(false, (2, 1), (5202, 40002), flags::ACK, 502, &[], 1460);
            send(&mut sw, &mut st, 1, f, t0);
        }
        let ack = tcp_frame(false, (2, 1), (5201, 40001), flags::ACK, 502, &[]);
        let ack_len = ack.len() as u32;
        send(&mut sw, &mut st, 1, ack, t0);
        let sent = poll_until(&mut sw, &mut st, t0, t0 + 1_000 * US);
        let lens: Vec<u32> = sent
            .iter()
            .filter(|&&(p, _)| p == 0)
            .map(|&(_, l)| l)
            .collect();
        assert_eq!(lens.len(), 6, "{case}: {lens:?}");
        let ack_at = lens.iter().position(|&l| l == ack_len).unwrap();
        // All six arrived before the port sent anything: with priority the
        // ACK leaves first, without it last, behind the five data frames.
        let want = if ack_first { 0 } else { 5 };
        assert_eq!(
            ack_at, want,
            "{case}: the ACK left in place {ack_at}: {lens:?}"
        );
        let q0 = sw.ports()[0].egress.counters().queues[0].dequeued.pkts;
        assert_eq!(q0, u64::from(ack_first), "{case}: ACKs through queue 0");
    }
}

/// Polls `sw` event by event from `from` to `until`; what it sent, as
/// (port, frame length), frames released.
fn poll_until(
    sw: &mut Switch<DropTail>,
    st: &mut VecStore,
    from: Nanos,
    until: Nanos,
) -> Vec<(u16, u32)> {
    let mut sent = Vec::new();
    let mut now = from;
    loop {
        let mut out = Vec::new();
        sw.poll(now, st, |p, pkt| out.push((p, pkt)));
        for (p, pkt) in out {
            sent.push((p, pkt.len));
            st.release(pkt.frame);
        }
        match sw.next_event(now) {
            Some(t) if t <= until => now = t.max(now + 1),
            _ => break,
        }
    }
    sent
}

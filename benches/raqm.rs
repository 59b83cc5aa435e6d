//! Per-ACK cost of R-AQM (`src/raqm`).
//!
//! * `raqm/hold+release`: one pure ACK into a port's VIQ (state CS, so it is
//!   held), one departure's credit, one `step` that releases one ACK — the
//!   core's bookkeeping per held ACK (with the rewrite check on release; the
//!   ACK has no L3, so no frame bytes are touched).
//! * `raqm/rewrite`: ECE + rwnd = 1 MSS (window scale 7) on a real IPv4 pure
//!   ACK with incremental checksum updates (the frame is restored from a
//!   copy each time so every iteration writes).
//! * `switch/pure-ack`: a pure ACK through `Switch::ingress` + `poll` on a
//!   3-port switch, R-AQM off vs on (the receiver's port is idle, so the
//!   ACK passes at once after the rewrite check; R-AQM's step runs on every
//!   port in each poll): the difference is what R-AQM adds per passing ACK.
//!
//! `cargo bench --bench raqm`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

use softswitch::aqm::droptail::DropTail;
use softswitch::bridge::BridgeConfig;
use softswitch::packet::{FrameStore, Packet, VecStore};
use softswitch::port::PortConfig;
use softswitch::raqm::{AckCtx, Config, RaqmPort, WindowScales};
use softswitch::switch::{PortSpec, Switch};
use softswitch::units::Rate;
use softswitch::wire::{parse, Ipv4Packet, TcpPacket};

/// Ethernet + IPv4 + TCP 20 B, 10.0.0.a → 10.0.0.b, checksums filled.
fn tcp_frame(a: u8, b: u8, sp: u16, dp: u16, flags: u8, opts: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, b, 2, 0, 0, 0, 0, a, 0x08, 0x00];
    let tcp_len = 20 + opts.len();
    f.extend_from_slice(&[0x45, 0x02]);
    f.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, a, 10, 0, 0, b]);
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, ((tcp_len / 4) as u8) << 4, flags]);
    f.extend_from_slice(&[0x7f, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(opts);
    let mut ip = Ipv4Packet::new_checked(&mut f[14..]).unwrap();
    ip.fill_checksum();
    let (s, d) = (ip.src_addr(), ip.dst_addr());
    let mut t = TcpPacket::new_checked(&mut f[34..]).unwrap();
    t.fill_checksum_v4(s, d);
    f
}

fn cfg() -> Config {
    Config {
        rwnd_threshold_pkts: 1,
        ece_threshold_pkts: 1,
        ..Config::for_link(Rate::gbit(1), 250_000)
    }
}

fn bench_core(c: &mut Criterion) {
    let mut g = c.benchmark_group("raqm");
    g.throughput(Throughput::Elements(1));
    g.bench_function("hold+release", |b| {
        // A sample every ns (T = 2 ns, two samples per T) with a queue
        // that keeps growing: CS throughout, so every ACK is held, and one
        // α of credit releases it.
        let cfg = Config {
            idle_credit: false,
            interval: 2,
            trend_samples: 2,
            ..cfg()
        };
        let (alpha, _) = cfg.alpha_n(softswitch::raqm::State::Congested);
        let mut p = RaqmPort::new(cfg, Rate::gbit(1), 0);
        let (mut out, mut dropped) = (Vec::with_capacity(16), Vec::new());
        // No L3 on the ACK: the rewrite check runs, no bytes are touched.
        let scales = WindowScales::default();
        let mut st = VecStore::new();
        let mut cx = AckCtx {
            q_out_pkts: 1,
            scales: &scales,
            store: &mut st,
        };
        for now in 1..=2 {
            cx.q_out_pkts = now as u32;
            p.step(now, &mut cx, &mut out, &mut dropped);
        }
        assert_eq!(p.state(), softswitch::raqm::State::Congested);
        let pkt = Packet::new(1, 54, None, 2);
        let mut now = 2u64;
        b.iter(|| {
            now += 1;
            cx.q_out_pkts = now as u32;
            black_box(p.offer(pkt, 0, now, &mut cx));
            p.on_departure(alpha);
            out.clear();
            p.step(now, &mut cx, &mut out, &mut dropped);
            black_box(out.len());
        });
        assert_eq!(p.state(), softswitch::raqm::State::Congested);
        assert_eq!(p.viq_len(), 0, "every ACK released");
    });
    g.bench_function("rewrite", |b| {
        let ws = [1, 3, 3, 7];
        let mut scales = WindowScales::default();
        for f in [
            tcp_frame(1, 2, 40000, 5201, 0x02, &ws),
            tcp_frame(2, 1, 5201, 40000, 0x12, &ws),
        ] {
            let l3 = parse(&f).unwrap().l3.unwrap();
            scales.learn(&f, &l3);
        }
        let ack = tcp_frame(2, 1, 5201, 40000, 0x10, &[]);
        let l3 = parse(&ack).unwrap().l3.unwrap();
        let mut st = VecStore::new();
        let id = st.insert(ack.clone());
        let pkt = Packet::new(id, ack.len() as u32, Some(l3), 1);
        let mut p = RaqmPort::new(cfg(), Rate::gbit(1), 0);
        b.iter(|| {
            st.bytes_mut(id, 54).copy_from_slice(&ack);
            p.rewrite(black_box(&pkt), 5, &scales, &mut st);
        });
        assert!(p.counters.rewrite_rwnd > 0 && p.counters.rewrite_ece > 0);
    });
    g.finish();
}

fn switch(raqm: Option<Config>) -> Switch<DropTail> {
    let specs = (0..3)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            config: PortConfig {
                rate: Rate::from_bps(0),
                queues: 1,
                ..PortConfig::default()
            },
            aqm: DropTail,
            delay_ns: 0,
        })
        .collect();
    let mut sw = Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap();
    if let Some(c) = raqm {
        sw.enable_raqm(&c, 0);
    }
    sw
}

fn bench_switch(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch/pure-ack");
    g.throughput(Throughput::Elements(1));
    for (name, raqm) in [("off", None), ("on", Some(cfg()))] {
        g.bench_function(name, |b| {
            let mut sw = switch(raqm.clone());
            let mut st = VecStore::new();
            let ack = tcp_frame(3, 1, 5201, 40000, 0x10, &[]);
            // Learn host 1 on port 0 and host 3 on port 2.
            for (port, f) in [(0u16, tcp_frame(1, 3, 1, 1, 0x18, &[])), (2, ack.clone())] {
                let id = st.insert(f);
                sw.ingress(port, id, 54, 0, &mut st);
            }
            let mut sent = Vec::with_capacity(8);
            sw.poll(0, &mut st, |p, pkt| sent.push((p, pkt)));
            for (_, pkt) in sent.drain(..) {
                st.release(pkt.frame);
            }
            let mut now = 10;
            b.iter(|| {
                now += 1_000;
                let id = st.insert(ack.clone());
                sw.ingress(2, id, 54, now, &mut st);
                sw.poll(now, &mut st, |p, pkt| sent.push((p, pkt)));
                for (_, pkt) in sent.drain(..) {
                    st.release(pkt.frame);
                }
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench_core, bench_switch);
criterion_main!(benches);

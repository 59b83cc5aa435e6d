//! Per-packet cost of the egress port: one enqueue + one dequeue, for each
//! scheduler with 8 and 128 queues, unshaped, with a do-nothing AQM.
//!
//! The port is kept at a steady backlog of one packet per queue so the
//! scheduler has real choices; frames are recycled through a `VecStore`
//! (each dequeued frame is re-enqueued), so the loop does not allocate.
//!
//! A second group runs every scheduler × AQM (the AQMs at their defaults for
//! a 1 Gbit/s port and 250 µs RTT) on real IPv4 frames, so marks rewrite bytes.
//!
//! `cargo bench --bench port`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

use softswitch::aqm::Aqm;
use softswitch::packet::{Packet, VecStore};
use softswitch::port::{EgressPort, PortConfig};
use softswitch::sched::{SchedConfig, SchedName};
use softswitch::units::Rate;
use softswitch::wire::{Ecn, IpVersion, L3Info};

/// An AQM that never does anything (every hook default).
struct NoAqm;
impl Aqm for NoAqm {}

fn l3(dscp: u8) -> L3Info {
    L3Info {
        version: IpVersion::V4,
        offset: 14,
        dscp,
        ecn: Ecn::Ect0,
        protocol: 6,
        flow_hash: dscp as u32,
        tcp: None,
    }
}

fn bench_port(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue+dequeue");
    g.throughput(Throughput::Elements(1));
    for queues in [8usize, 128] {
        for kind in SchedName::ALL {
            let cfg = PortConfig {
                rate: Rate::from_bps(0),
                queues,
                buffer_bytes: 64 << 20,
                sched: SchedConfig::new(kind),
                ..Default::default()
            };
            let mut port = EgressPort::new(cfg, NoAqm, 0, 1).unwrap();
            let mut store = VecStore::new();
            // Two packets in every queue, mixed sizes.
            let sizes = [64u32, 1514, 576, 1514, 300];
            for i in 0..queues * 2 {
                let len = sizes[i % sizes.len()];
                let f = store.insert(vec![0u8; len as usize]);
                let p = Packet::new(f, len, Some(l3((i % 64) as u8)), 0);
                port.enqueue_to(p, i % queues, 0, &mut store);
            }
            let mut now = 0u64;
            let mut next_q = 0usize;
            g.bench_with_input(BenchmarkId::new(kind.as_str(), queues), &queues, |b, _| {
                b.iter(|| {
                    now += 100;
                    let p = port.dequeue(now, &mut store).unwrap();
                    // Recycle the frame into the next queue in turn, so
                    // every queue (strict ones too) keeps seeing arrivals.
                    next_q = (next_q + 1) % queues;
                    port.enqueue_to(black_box(p), next_q, now, &mut store);
                })
            });
        }
    }
    g.finish();
}

/// Ethernet + IPv4 (ECT(0), valid checksum) + zero payload, `len` bytes.
fn ipv4_frame(len: u32) -> Vec<u8> {
    let mut f = vec![0u8; len as usize];
    f[12] = 0x08;
    f[14] = 0x45;
    f[15] = 0x02;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    let sum = softswitch::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

fn bench_aqms(c: &mut Criterion) {
    use softswitch::aqm::config::AQM_NAMES;
    use softswitch::aqm::{AqmConfig, AqmEnv};
    let mut g = c.benchmark_group("sched+aqm");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_millis(800));
    for queues in [8usize, 32, 128] {
        for kind in SchedName::ALL {
            let sched = SchedConfig::new(kind);
            for name in AQM_NAMES {
                let env = AqmEnv {
                    rate: Rate::gbit(1),
                    rtt_ns: 250_000,
                    num_queues: queues,
                    mtu_bytes: 1500,
                    quanta: if sched.is_round_robin() {
                        sched.quanta(queues, softswitch::shaper::ETHERNET_WIRE_OVERHEAD)
                    } else {
                        None
                    },
                };
                let Ok(aqm) = AqmConfig::defaults_for(name, &env).and_then(|c| c.build(&env))
                else {
                    continue; // e.g. mq-ecn without a round-robin scheduler
                };
                let cfg = PortConfig {
                    rate: Rate::from_bps(0),
                    queues,
                    buffer_bytes: 64 << 20,
                    sched: sched.clone(),
                    ..Default::default()
                };
                let mut port = EgressPort::new(cfg, aqm, 0, 1).unwrap();
                let mut store = VecStore::new();
                // A standing queue of 4 packets per queue, so threshold AQMs
                // sit near their thresholds and mark some packets.
                let sizes = [1514u32, 1514, 576, 64];
                for i in 0..queues * 4 {
                    let len = sizes[i % sizes.len()];
                    let f = store.insert(ipv4_frame(len));
                    // Distinct flows (PRED's flow counter hashes them).
                    let l3 = L3Info {
                        flow_hash: 0x9e37_79b9u32.wrapping_mul(i as u32 + 1),
                        ..l3(0)
                    };
                    let p = Packet::new(f, len, Some(l3), 0);
                    port.enqueue_to(p, i % queues, 0, &mut store);
                }
                let mut now = 0u64;
                let mut next_q = 0usize;
                let id = format!("{}/{}", kind.as_str(), name);
                g.bench_with_input(BenchmarkId::new(id, queues), &queues, |b, _| {
                    b.iter(|| {
                        now += 1_000;
                        if let Some(p) = port.dequeue(now, &mut store) {
                            next_q = (next_q + 1) % queues;
                            port.enqueue_to(black_box(p), next_q, now, &mut store);
                        } else {
                            // The AQM dropped the standing packets: refill one.
                            let f = store.insert(ipv4_frame(1514));
                            port.enqueue_to(
                                Packet::new(f, 1514, Some(l3(0)), 0),
                                next_q,
                                now,
                                &mut store,
                            );
                        }
                    })
                });
            }
        }
    }
    g.finish();
}

/// Per-flow queues (DiffECN's QMU, `--classify flow`) against the DSCP
/// classifier, under SP+DWRR, with drop-tail or DiffECN: `port.enqueue`
/// classifies every packet. `flows` long flows take turns (a standing queue
/// of 4 frames each, so every flow keeps its queue: the steady-state lookup
/// cost; no table churn).
fn bench_per_flow(c: &mut Criterion) {
    use softswitch::aqm::{AqmConfig, AqmEnv, AqmKind};
    use softswitch::port::{Classifier, FlowClassConfig};
    let mut g = c.benchmark_group("per-flow");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(std::time::Duration::from_millis(300));
    g.measurement_time(std::time::Duration::from_millis(800));
    for queues in [32usize, 128] {
        let flows = queues - 1;
        for (classify, aqm_name) in [
            ("dscp", "droptail"),
            ("flow", "droptail"),
            ("flow", "diffecn"),
            ("dscp", "dctcp"),
        ] {
            let env = AqmEnv {
                rate: Rate::gbit(1),
                rtt_ns: 250_000,
                num_queues: queues,
                mtu_bytes: 1500,
                quanta: None,
            };
            let aqm: AqmKind = AqmConfig::defaults_for(aqm_name, &env)
                .and_then(|c| c.build(&env))
                .unwrap();
            let cfg = PortConfig {
                rate: Rate::from_bps(0),
                queues,
                buffer_bytes: 64 << 20,
                sched: SchedConfig::new(SchedName::SpDwrr),
                classifier: if classify == "flow" {
                    Classifier::Flow(FlowClassConfig::default())
                } else {
                    Classifier::DscpMod
                },
                ..Default::default()
            };
            let mut port = EgressPort::new(cfg, aqm, 0, 1).unwrap();
            let mut store = VecStore::new();
            let sizes = [1514u32, 1514, 576, 64];
            let flow_l3 = |f: usize| {
                let mut l = l3((f % 64) as u8);
                l.flow_hash = (f as u32).wrapping_mul(0x9e37_79b1);
                l
            };
            for i in 0..flows * 4 {
                let len = sizes[i % sizes.len()];
                let f = store.insert(ipv4_frame(len));
                port.enqueue(
                    Packet::new(f, len, Some(flow_l3(i % flows)), 0),
                    0,
                    &mut store,
                );
            }
            let mut now = 0u64;
            let mut next = 0usize;
            let id = format!("{classify}/{aqm_name}");
            g.bench_with_input(BenchmarkId::new(id, queues), &queues, |b, _| {
                b.iter(|| {
                    now += 1_000;
                    next = (next + 1) % flows;
                    let p = match port.dequeue(now, &mut store) {
                        Some(mut p) => {
                            p.l3 = Some(flow_l3(next));
                            p
                        }
                        None => {
                            let f = store.insert(ipv4_frame(1514));
                            Packet::new(f, 1514, Some(flow_l3(next)), 0)
                        }
                    };
                    port.enqueue(black_box(p), now, &mut store);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench_port, bench_aqms, bench_per_flow);
criterion_main!(benches);

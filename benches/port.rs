//! Per-packet cost of the egress port: one enqueue + one dequeue, for each
//! scheduler with 8 and 128 queues, unshaped, with a do-nothing AQM.
//!
//! The port is kept at a steady backlog of one packet per queue so the
//! scheduler has real choices; frames are recycled through a `VecStore`
//! (each dequeued frame is re-enqueued), so the loop does not allocate.
//!
//! `cargo bench --bench port` (add AQMs next to `NoAqm` after merging).

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

criterion_group!(benches, bench_port);
criterion_main!(benches);

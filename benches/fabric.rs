//! Cost of an in-memory fabric hop against one pass through a single switch,
//! measured in the same run.
//!
//! One 1514-byte IPv4/UDP frame is recycled: each iteration hands it to the
//! ingress, polls, and takes it back from the egress (no allocation). Every
//! port is unshaped with a drop-tail AQM, one queue and no delay, so a frame
//! crosses the whole path in one poll and only the per-frame work is timed:
//!
//! * `switch (bridge)`: a 2-port learning switch, port 0 → port 1 — today's
//!   single-switch data path;
//! * `chain/k`: a fabric of `k` switches in a row, host h1 on the first and
//!   h2 on the last — `k` switch passes (parse, route, enqueue, dequeue) and
//!   `k − 1` in-memory hops. `chain/1` against `switch (bridge)` is the route
//!   table and the fabric's poll against the bridge; the slope over `k` is
//!   the cost of one more hop (a switch pass plus a link).
//!
//! `cargo bench --bench fabric` (BENCHMARKS.md, "Fabric: one in-memory hop").

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

use softswitch::aqm::{AqmConfig, AqmEnv, AqmKind};
use softswitch::bridge::BridgeConfig;
use softswitch::fabric::{aqm_ports, Fabric, FabricDesc};
use softswitch::packet::{FrameId, FrameStore, VecStore};
use softswitch::port::PortConfig;
use softswitch::switch::{PortSpec, Switch};
use softswitch::units::{Rate, US};

const LEN: u32 = 1514;

/// Ethernet + IPv4 (ECT(0)) + UDP from host `a` to host `b` (topo addresses).
fn frame(a: u8, b: u8) -> Vec<u8> {
    let mut f = vec![0u8; LEN as usize];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, b]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, a]);
    f[12] = 0x08;
    f[14] = 0x45;
    f[15] = 0x02;
    f[16..18].copy_from_slice(&((LEN - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 99, 0, a]);
    f[30..34].copy_from_slice(&[10, 99, 0, b]);
    let sum = softswitch::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&5001u16.to_be_bytes());
    f[38..40].copy_from_slice(&((LEN - 34) as u16).to_be_bytes());
    f
}

fn port_config() -> PortConfig {
    PortConfig {
        rate: Rate::from_bps(0),
        queues: 1,
        ..PortConfig::default()
    }
}

fn single_switch() -> Switch<AqmKind> {
    let env = AqmEnv {
        rate: Rate::gbit(100),
        rtt_ns: 100 * US,
        num_queues: 1,
        mtu_bytes: 1500,
        quanta: None,
    };
    let specs = (0..2)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            config: port_config(),
            aqm: AqmConfig::DropTail(softswitch::aqm::droptail::Config {})
                .build(&env)
                .unwrap(),
            delay_ns: 0,
        })
        .collect();
    Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap()
}

fn chain(k: usize) -> Fabric<AqmKind> {
    let mut t = String::from("[defaults]\nrate = \"0\"\n");
    for i in 1..=k {
        t += &format!("[[switch]]\nname = \"s{i}\"\n");
        match (i == 1, i == k) {
            (true, true) => t += "hosts = [\"h1\", \"h2\"]\n",
            (true, false) => t += "hosts = [\"h1\"]\n",
            (false, true) => t += "hosts = [\"h2\"]\n",
            (false, false) => {}
        }
    }
    for i in 1..k {
        t += &format!("[[link]]\na = \"s{i}\"\nb = \"s{}\"\n", i + 1);
    }
    let d = FabricDesc::parse(&t).unwrap();
    Fabric::new(d, aqm_ports(port_config(), "droptail", 100 * US), 0).unwrap()
}

fn bench_hop(c: &mut Criterion) {
    let mut g = c.benchmark_group("fabric hop");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));

    let mut sw = single_switch();
    let mut st = VecStore::new();
    // h2 speaks first, so the bridge knows it and h1's frames are unicast.
    let back = st.insert(frame(2, 1));
    sw.ingress(1, back, LEN, 0, &mut st);
    let mut out: Option<FrameId> = None;
    sw.poll(0, &mut st, |_, p| out = Some(p.frame));
    st.release(out.take().unwrap());
    let mut f = st.insert(frame(1, 2));
    let mut now = 1;
    g.bench_function("switch (bridge)", |b| {
        b.iter(|| {
            now += 1;
            sw.ingress(0, black_box(f), LEN, now, &mut st);
            sw.poll(now, &mut st, |p, pkt| {
                debug_assert_eq!(p, 1);
                out = Some(pkt.frame);
            });
            f = out.take().expect("the frame came out");
        })
    });

    for k in [1usize, 2, 4, 8] {
        let mut fab = chain(k);
        let mut st = VecStore::new();
        let mut f = st.insert(frame(1, 2));
        let mut out: Option<FrameId> = None;
        let mut now = 0;
        g.bench_with_input(BenchmarkId::new("chain", k), &k, |b, _| {
            b.iter(|| {
                now += 1;
                fab.ingress(0, black_box(f), LEN, now, &mut st);
                fab.poll(now, &mut st, |h, pkt| {
                    debug_assert_eq!(h, softswitch::fabric::Exit::Host(1));
                    out = Some(pkt.frame);
                });
                f = out.take().expect("the frame crossed the chain");
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_hop);
criterion_main!(benches);

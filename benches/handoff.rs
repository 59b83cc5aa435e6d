//! Cost on the sending side of handing data to another thread: what the data
//! path pays per time-series batch (a bounded channel, `try_send`, never
//! waiting) and what a traffic-generator reader pays per finished flow (an
//! unbounded channel, `send`). std's `mpsc` against `crossbeam-channel`, with
//! a consumer thread draining the other end the whole time, as in the switch.
//! Results and what was chosen: BENCHMARKS.md, "Thread handoff".
//!
//! `snapshot`: the live counters the data path publishes every 100 ms, for 3
//! ports × 8 queues with filled sojourn histograms — the copy the data path
//! takes (`Snapshot::take`) against building and serialising the JSON, which the
//! stats thread now does (BENCHMARKS.md, "Headroom").
//!
//! `cargo bench --bench handoff`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::thread;

/// About the size of a time-series batch's two `Vec` headers.
type Msg = [u64; 6];

fn bench_handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff");

    g.bench_function("std sync_channel(64) try_send", |b| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(64);
        let t = thread::spawn(move || {
            for m in rx {
                black_box(m);
            }
        });
        b.iter(|| black_box(tx.try_send(black_box([1; 6])).is_ok()));
        drop(tx);
        t.join().unwrap();
    });
    g.bench_function("crossbeam bounded(64) try_send", |b| {
        let (tx, rx) = crossbeam_channel::bounded::<Msg>(64);
        let t = thread::spawn(move || {
            for m in rx {
                black_box(m);
            }
        });
        b.iter(|| black_box(tx.try_send(black_box([1; 6])).is_ok()));
        drop(tx);
        t.join().unwrap();
    });
    g.bench_function("std channel send", |b| {
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let t = thread::spawn(move || {
            for m in rx {
                black_box(m);
            }
        });
        b.iter(|| tx.send(black_box([1; 6])).unwrap());
        drop(tx);
        t.join().unwrap();
    });
    g.bench_function("crossbeam unbounded send", |b| {
        let (tx, rx) = crossbeam_channel::unbounded::<Msg>();
        let t = thread::spawn(move || {
            for m in rx {
                black_box(m);
            }
        });
        b.iter(|| tx.send(black_box([1; 6])).unwrap());
        drop(tx);
        t.join().unwrap();
    });
    g.finish();
}

fn bench_snapshot(c: &mut Criterion) {
    use clap::Parser;
    use softswitch::dataplane::{build_switch, Snapshot};
    use softswitch::fidelity::PassIntervals;
    let cli = softswitch::cli::Cli::try_parse_from([
        "softswitch",
        "--ports",
        "a,b,c",
        "--queues",
        "8",
        "--aqm",
        "tcn",
    ])
    .unwrap();
    let s = softswitch::config::resolve(&cli.run).unwrap();
    let mut sw = build_switch(&s).unwrap();
    for p in sw.ports_mut() {
        let c = p.egress.counters_mut();
        for q in c.queues.iter_mut().chain(std::iter::once(&mut c.port)) {
            for i in 0..100_000u64 {
                q.sojourn.record(1_000 + (i * 7_919) % 2_000_000);
            }
        }
    }
    let names: std::sync::Arc<[String]> =
        std::sync::Arc::from(vec!["a".to_string(), "b".into(), "c".into()]);
    let mut passes = PassIntervals::default();
    for i in 0..100_000u64 {
        passes.record(1_000 + i % 50_000, true, Default::default());
    }
    let now = 1_000_000_000;
    let mut g = c.benchmark_group("snapshot");
    let take = || Snapshot::take(&sw, &names, now, &s.guard).with_passes(&passes, now);
    g.bench_function("take (data path)", |b| b.iter(|| black_box(take())));
    let taken = take();
    g.bench_function("to_json + serialise (stats thread)", |b| {
        b.iter(|| black_box(taken.to_json().to_string()))
    });
    g.finish();
}

criterion_group!(benches, bench_handoff, bench_snapshot);
criterion_main!(benches);

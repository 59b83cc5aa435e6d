//! Cost on the sending side of handing data to another thread: what the data
//! path pays per time-series batch (a bounded channel, `try_send`, never
//! waiting) and what a traffic-generator reader pays per finished flow (an
//! unbounded channel, `send`). std's `mpsc` against `crossbeam-channel`, with
//! a consumer thread draining the other end the whole time, as in the switch.
//! Results and what was chosen: BENCHMARKS.md, "Thread handoff".
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

criterion_group!(benches, bench_handoff);
criterion_main!(benches);

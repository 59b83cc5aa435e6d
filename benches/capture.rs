//! What capture (`--pcap`) costs the packet path: one frame through the
//! whole switch (ingress: parse, learn, enqueue; poll: dequeue, wire, tx) on
//! a 2-port unshaped switch with drop-tail, for 64-byte and 1514-byte
//! frames:
//!
//! * `off`     — capture disabled (the `Option` branches only);
//! * `on`      — capture enabled: frame bytes copied (snap length 256) and
//!   verdicts recorded; the batch is taken every 1024 frames, as the data
//!   path does, and thrown away;
//! * `on+writer` — as `on`, with the batches handed to the real writer
//!   thread (crossbeam channel, pcapng files under the temp directory,
//!   bounded at 100 MB each, so after the bound it formats and counts
//!   without writing). The data path's cost is what is timed; the writer's
//!   runs on another CPU.
//!
//! `cargo bench --bench capture`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use softswitch::aqm::droptail::DropTail;
use softswitch::bridge::BridgeConfig;
use softswitch::capture::writer::{Writer, WriterConfig};
use softswitch::capture::{Batch, CaptureConfig};
use softswitch::packet::{Packet, VecStore};
use softswitch::port::PortConfig;
use softswitch::switch::{PortSpec, Switch};
use softswitch::units::Rate;

fn frame(src: u8, dst: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, dst]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[15] = 0x02;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f
}

fn switch() -> Switch<DropTail> {
    let specs = (0..2)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            config: PortConfig {
                rate: Rate::from_bps(0),
                ..PortConfig::default()
            },
            aqm: DropTail,
            delay_ns: 0,
        })
        .collect();
    Switch::new(specs, BridgeConfig::default(), 0, 1).unwrap()
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    On,
    OnWriter,
}

fn bench_capture(c: &mut Criterion) {
    let mut g = c.benchmark_group("switch frame");
    g.throughput(Throughput::Elements(1));
    let dir = std::env::temp_dir().join(format!("softswitch-bench-pcap-{}", std::process::id()));
    for len in [64usize, 1514] {
        for (mode, label) in [
            (Mode::Off, "off"),
            (Mode::On, "on"),
            (Mode::OnWriter, "on+writer"),
        ] {
            let mut sw = switch();
            let mut writer = None;
            if mode != Mode::Off {
                sw.enable_capture(CaptureConfig {
                    snaplen: 256,
                    ports: vec![true, true],
                });
            }
            if mode == Mode::OnWriter {
                writer = Some(
                    Writer::start(WriterConfig {
                        dir: dir.clone(),
                        names: vec!["p0".into(), "p1".into()],
                        ports: vec![true, true],
                        snaplen: 256,
                        max_bytes: 100_000_000,
                        epoch_ns: 0,
                    })
                    .unwrap(),
                );
            }
            let mut st = VecStore::new();
            // Learn both hosts.
            for (p, s, d) in [(0u16, 1u8, 2u8), (1, 2, 1)] {
                let f = st.insert(frame(s, d, 60));
                sw.ingress(p, f, 60, 0, &mut st);
            }
            let mut out: Vec<Packet> = Vec::new();
            sw.poll(0, &mut st, |_, pkt| out.push(pkt));
            for p in out.drain(..) {
                st.take(p.frame);
            }
            let mut bytes = Some(frame(1, 2, len));
            let mut spare = Batch::default();
            let mut now = 1u64;
            g.bench_function(BenchmarkId::new(label, len), |b| {
                b.iter(|| {
                    let f = st.insert(bytes.take().unwrap());
                    sw.ingress(0, f, len as u32, now, &mut st);
                    sw.poll(now, &mut st, |_, pkt| out.push(pkt));
                    let pkt = out.pop().unwrap();
                    bytes = Some(st.take(pkt.frame));
                    now += 1;
                    if let Some(c) = sw.capture_mut() {
                        if c.pending().records.len() >= 1024 {
                            let full = c.take(std::mem::take(&mut spare));
                            spare = match writer.as_mut() {
                                Some(w) => w.send(full),
                                None => full,
                            };
                        }
                    }
                })
            });
            if let Some(w) = writer {
                let sum = w.finish(Batch::default()).unwrap();
                let lost: u64 = sum.files.iter().map(|f| f.lost).sum();
                let seen: u64 = sum.files.iter().map(|f| f.seen).sum();
                eprintln!("on+writer {len} B: writer lost {lost} of {seen} records (fell behind)");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    g.finish();
}

criterion_group!(benches, bench_capture);
criterion_main!(benches);

//! Capture through the whole switch (manual clock, heap frames): every
//! received and sent frame is recorded once, with the verdict the port's
//! counters also counted, bytes as received / as sent, and time never going
//! backwards within a file.

use super::writer::{file_path, Files, WriterConfig};
use super::*;
use crate::aqm::AqmKind;
use crate::packet::VecStore;
use crate::switch::Switch;
use crate::units::US;
use crate::wire::test_frames::udp_frame;

/// [`udp_frame`] whose byte 42 carries `tag`.
fn frame(src: u8, dst: u8, len: usize, ecn: u8, tag: u8) -> Vec<u8> {
    let mut f = udp_frame(src, dst, len, ecn);
    f[42] = tag;
    f
}

/// Three ports at 1 Gbit/s, a 3-frame buffer, a 20 µs wire, TCN marking
/// any sojourn over 1 µs, Not-ECT frames it would mark dropped (at dequeue).
fn switch() -> Switch<AqmKind> {
    use clap::Parser;
    let args = crate::cli::Cli::try_parse_from([
        "softswitch",
        "--ports",
        "a,b,c",
        "--rate",
        "1gbit",
        "--buffer",
        "4500b",
        "--delay",
        "20us",
        "--aqm",
        "tcn",
        "--aqm-opt",
        "threshold=1us",
        "--not-ect",
        "drop",
    ])
    .unwrap()
    .run;
    let s = crate::config::resolve(&args).unwrap();
    crate::dataplane::build_switch(&s).unwrap()
}

fn send(sw: &mut Switch<AqmKind>, st: &mut VecStore, port: u16, f: Vec<u8>, now: Nanos) {
    let len = f.len() as u32;
    let id = st.insert(f);
    sw.ingress(port, id, len, now, st);
}

/// Polls until the switch holds nothing; returns the frames sent (port, bytes).
fn run_until_idle(
    sw: &mut Switch<AqmKind>,
    st: &mut VecStore,
    mut now: Nanos,
) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let mut sent = Vec::new();
        sw.poll(now, st, |p, pkt| sent.push((p, pkt)));
        for (p, pkt) in sent {
            out.push((p, st.take(pkt.frame)));
        }
        match sw.next_event(now) {
            Some(t) => now = t.max(now + 1),
            None if sw.held_packets() == 0 => return out,
            None => now += US,
        }
    }
}

#[test]
fn capture_matches_the_counters_and_the_bytes() {
    let mut sw = switch();
    sw.enable_capture(CaptureConfig {
        snaplen: 64,
        ports: vec![true, true, true],
    });
    let mut st = VecStore::new();
    // Learn h2 (port 1) by a broadcast (flooded to ports 0 and 2), h1 (port 0) by a unicast.
    send(&mut sw, &mut st, 1, frame(2, 0xff, 60, 0, 0), 0);
    send(&mut sw, &mut st, 0, frame(1, 2, 60, 0, 0), 0);
    let mut sent = run_until_idle(&mut sw, &mut st, 0);
    // A burst of six 1500-byte frames h1 -> h2 at 100 µs, ECT(0) and
    // Not-ECT in turn: three fit the 4500-byte buffer.
    let t0 = 100 * US;
    let burst: Vec<Vec<u8>> = (0..6)
        .map(|i| frame(1, 2, 1500, if i % 2 == 0 { 2 } else { 0 }, i as u8))
        .collect();
    for f in &burst {
        send(&mut sw, &mut st, 0, f.clone(), t0);
    }
    sent.extend(run_until_idle(&mut sw, &mut st, t0));
    assert_eq!(st.live, 0);

    let b = sw.capture_mut().unwrap().take(Batch::default());
    let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let recs = |port: u16, dir: Dir| -> Vec<&Record> {
        b.records
            .iter()
            .filter(|r| r.port == port && r.dir == dir)
            .collect()
    };
    let mut text = String::new();
    for (i, p) in sw.ports().iter().enumerate() {
        let i = i as u16;
        let rx = recs(i, Dir::Rx);
        let tx = recs(i, Dir::Tx);
        assert_eq!(rx.len() as u64, p.io.rx_packets, "port {i} rx");
        let sent_recs = tx
            .iter()
            .filter(|r| !b.fates_of(r).iter().any(Fate::is_drop))
            .count();
        assert_eq!(sent_recs as u64, p.io.tx_packets, "port {i} tx");
        let c = &p.egress.counters().port;
        let dequeue_drops = tx.len() - sent_recs;
        assert_eq!(
            dequeue_drops as u64,
            c.dropped.get(DropReason::NotEctMark).pkts,
            "port {i} dequeue drops"
        );
        // Every transmitted frame's fate names its queue; marks as counted.
        let marked = tx
            .iter()
            .filter(|r| {
                matches!(
                    b.fates_of(r),
                    [Fate::Sent {
                        mark: Some(_),
                        ce: true,
                        ..
                    }]
                )
            })
            .count();
        assert_eq!(marked as u64, c.marked.total().pkts, "port {i} marks");
        for dir in [Dir::Rx, Dir::Tx] {
            let ts: Vec<Nanos> = recs(i, dir).iter().map(|r| r.t_ns).collect();
            assert!(
                ts.windows(2).all(|w| w[0] <= w[1]),
                "port {i} {dir:?}: {ts:?}"
            );
        }
        for r in &tx {
            comment(b.fates_of(r), &names, &mut text);
            assert!(text.starts_with("q0 sojourn") || text.starts_with("dropped at dequeue"));
        }
    }
    // Enqueue drops: in port 0's rx file, as many as port 1 counted.
    let rx0 = recs(0, Dir::Rx);
    let full: Vec<&&Record> = rx0
        .iter()
        .filter(|r| {
            matches!(
                b.fates_of(r),
                [Fate::Dropped {
                    port: 1,
                    reason: DropReason::BufferFull,
                    ..
                }]
            )
        })
        .collect();
    let c1 = &sw.ports()[1].egress.counters().port;
    assert_eq!(
        full.len() as u64,
        c1.dropped.get(DropReason::BufferFull).pkts
    );
    assert_eq!(full.len(), 3);
    // Their bytes are the frames as received, cut to 64.
    for (r, f) in full.iter().zip(&burst[3..]) {
        assert_eq!((b.data(r), r.len), (&f[..64], 1500));
        comment(b.fates_of(r), &names, &mut text);
        assert_eq!(text, "b q0: dropped: buffer_full");
    }
    // The broadcast went to two ports: one record, two fates.
    let rx1 = recs(1, Dir::Rx);
    assert_eq!(b.fates_of(rx1[0]).len(), 2);
    comment(b.fates_of(rx1[0]), &names, &mut text);
    assert_eq!(text, "flooded: a q0: enqueued; c q0: enqueued");
    // Port 1's tx records: the bytes as sent (CE where marked), sent 20 µs
    // after leaving the shaper.
    let tx1: Vec<&Record> = recs(1, Dir::Tx)
        .into_iter()
        .filter(|r| matches!(b.fates_of(r), [Fate::Sent { .. }]))
        .collect();
    let to_h2: Vec<&Vec<u8>> = sent.iter().filter(|s| s.0 == 1).map(|s| &s.1).collect();
    assert_eq!(tx1.len(), to_h2.len());
    for (r, f) in tx1.iter().zip(&to_h2) {
        assert_eq!(b.data(r), &f[..f.len().min(64)]);
        if let [Fate::Sent { ce: true, .. }] = b.fates_of(r) {
            assert_eq!(f[15] & 3, 3, "CE in the captured bytes");
        }
    }
    assert!(tx1[1].t_ns >= t0 + 20 * US);
    let marks = c1.marked.total().pkts;
    let deq = c1.dropped.get(DropReason::NotEctMark).pkts;
    assert!(marks >= 1 && deq >= 1, "marks {marks} dequeue drops {deq}");

    // And the writer turns it into one packet block per record.
    let d = std::env::temp_dir().join(format!("softswitch-pcap-switch-{}", std::process::id()));
    let mut files = Files::create(WriterConfig {
        dir: d.clone(),
        names: names.clone(),
        ports: vec![true; 3],
        snaplen: 64,
        max_bytes: 1 << 20,
        epoch_ns: 0,
    })
    .unwrap();
    files.write(&b).unwrap();
    let sum = files.finish().unwrap();
    for f in &sum.files {
        let dir = if f.dir == "rx" { Dir::Rx } else { Dir::Tx };
        let port = names.iter().position(|n| n == &f.port).unwrap() as u16;
        assert_eq!(f.written as usize, recs(port, dir).len(), "{f:?}");
        assert_eq!(f.path, file_path(&d, &f.port, dir));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn capture_off_records_nothing_and_changes_nothing() {
    // Same traffic with and without capture: same frames out, same counters.
    let run = |on: bool| {
        let mut sw = switch();
        if on {
            sw.enable_capture(CaptureConfig {
                snaplen: 64,
                ports: vec![true, false, true],
            });
        }
        let mut st = VecStore::new();
        send(&mut sw, &mut st, 1, frame(2, 0xff, 60, 0, 0), 0);
        for i in 0..8u8 {
            send(
                &mut sw,
                &mut st,
                0,
                frame(1, 2, 1000, 2 * (i % 2), i),
                10 * US,
            );
        }
        let out = run_until_idle(&mut sw, &mut st, 10 * US);
        let counters = serde_json::to_string(sw.ports()[1].egress.counters()).unwrap();
        let n = sw.capture_mut().map(|c| {
            let b = c.take(Batch::default());
            (recs_of(&b, 0), recs_of(&b, 1), recs_of(&b, 2))
        });
        (out, counters, n)
    };
    fn recs_of(b: &Batch, port: u16) -> usize {
        b.records.iter().filter(|r| r.port == port).count()
    }
    let (out_off, c_off, n_off) = run(false);
    let (out_on, c_on, n_on) = run(true);
    assert_eq!(out_off, out_on);
    assert_eq!(c_off, c_on);
    assert_eq!(n_off, None);
    let (p0, p1, p2) = n_on.unwrap();
    assert_eq!(p1, 0, "port 1 not captured");
    assert!(p0 >= 9 && p2 >= 1, "{p0} {p2}");
}

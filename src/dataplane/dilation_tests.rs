//! Time dilation through the whole switch, on a manual clock: a loop that
//! does what the data path does with its [`Clock`] — frames handed to the
//! switch at the core time of the real time they arrive, the switch polled
//! at the core time of each real-time pass — run at D = 1 and D = 4.
//!
//! * Identical emulated inputs give identical emulated outputs (every
//!   departure's emulated time and bytes, every counter, the sojourn
//!   percentiles, the marks), and on the wire each departure comes D times
//!   later: the shaper sends at rate / D in real time.
//! * The fidelity guard judges the machine: the same real-time stalls on
//!   the same wire rate (emulated 250 Mbit/s at D = 1, emulated 1 Gbit/s at
//!   D = 4) lose the same real link time and get the same verdict.

use std::sync::Arc;

use clap::Parser;
use serde_json::Value;

use super::clock::{Clock, Now};
use super::{build_switch, Snapshot};
use crate::aqm::AqmKind;
use crate::config::Settings;
use crate::fidelity::{PassIntervals, StallTime};
use crate::packet::VecStore;
use crate::switch::Switch;
use crate::timebase::Dilation;
use crate::units::{Nanos, MS, US};
use crate::wire::test_frames::udp_frame as frame;

fn settings(args: &[&str]) -> Settings {
    let mut v = vec!["softswitch", "--ports", "a,b"];
    v.extend_from_slice(args);
    crate::config::resolve(&crate::cli::Cli::try_parse_from(v).unwrap().run).unwrap()
}

/// One frame leaving the switch.
#[derive(Debug, PartialEq)]
struct Departure {
    core_ns: Nanos,
    port: u16,
    bytes: Vec<u8>,
}

/// What a run gave: departures (with the real time of each), the snapshot
/// at the end (dilated, with the loop's real-time passes).
struct Outcome {
    departures: Vec<Departure>,
    real_ns: Vec<Nanos>,
    snapshot: Value,
}

/// How the simulated loop's passes come, in real time.
enum Passes {
    /// At each next event of the switch (its own next departure, or the next
    /// arrival): the core sees the same instants at every D.
    AtEvents,
    /// Every `every_ns` of real time, except that the pass after each real
    /// time in `stalls` comes that stall's length late.
    Every {
        every_ns: Nanos,
        stalls: Vec<(Nanos, Nanos)>,
    },
}

/// Runs the switch `args` configure (with their `--dilation`) on the
/// arrivals (emulated time, port, frame), passes coming as `passes` says.
fn run(args: &[&str], arrivals: &[(Nanos, u16, Vec<u8>)], passes: Passes) -> Outcome {
    let s = settings(args);
    let clock = Clock::start(s.dilation);
    let mut sw: Switch<AqmKind> = build_switch(&s).unwrap();
    let mut st = VecStore::new();
    let mut out = Outcome {
        departures: Vec::new(),
        real_ns: Vec::new(),
        snapshot: Value::Null,
    };
    let mut intervals = PassIntervals::default();
    let (mut real, mut last_pass, mut next) = (0, 0, 0usize);
    let mut stalls = match &passes {
        Passes::Every { stalls, .. } => stalls.clone(),
        Passes::AtEvents => Vec::new(),
    };
    loop {
        let now = Now {
            real_ns: real,
            core_ns: clock.core_at(real),
        };
        let held = sw.held_packets() > 0;
        let mut received = 0;
        while next < arrivals.len() && clock.real_span(arrivals[next].0) <= real {
            let (_, port, bytes) = &arrivals[next];
            let id = st.insert(bytes.clone());
            sw.ingress(*port, id, bytes.len() as u32, now.core_ns, &mut st);
            next += 1;
            received += 1;
        }
        // Passes at events skip idle time on purpose: only regular passes
        // are judged as the data path's would be.
        let watched = matches!(passes, Passes::Every { .. });
        intervals.record(
            real - last_pass,
            watched && (held || received > 0),
            StallTime::default(),
        );
        last_pass = real;
        let mut sent = Vec::new();
        sw.poll(now.core_ns, &mut st, |p, pkt| sent.push((p, pkt)));
        for (port, pkt) in sent {
            out.departures.push(Departure {
                core_ns: now.core_ns,
                port,
                bytes: st.take(pkt.frame),
            });
            out.real_ns.push(real);
        }
        let arrival = arrivals.get(next).map(|a| clock.real_span(a.0));
        let event = sw.next_event(now.core_ns);

        if arrival.is_none() && event.is_none() {
            assert_eq!(sw.held_packets(), 0, "frames held with nothing due");
            break;
        }
        real = match &passes {
            Passes::AtEvents => {
                // The next core instant (never the same one twice), in real time.
                let due = event.map(|t| clock.real_when(now, t.max(now.core_ns + 1)));
                due.unwrap_or(Nanos::MAX).min(arrival.unwrap_or(Nanos::MAX))
            }
            Passes::Every { every_ns, .. } => {
                let late = match stalls.first() {
                    Some(&(at, len)) if at <= real => {
                        stalls.remove(0);
                        len
                    }
                    _ => 0,
                };
                real + every_ns + late
            }
        };
    }
    let names: Arc<[String]> = Arc::from(vec!["a".to_string(), "b".to_string()]);
    let core = clock.core_at(real);
    out.snapshot = Snapshot::take(&sw, &names, core, &s.guard)
        .with_passes(&intervals, real)
        .dilated(clock.dilation())
        .to_json();
    out
}

/// Host 2 (port 1) announces itself; then host 1 (port 0) sends `n`
/// 1500-byte ECT(0) frames to it, one every `gap_ns` of emulated time from
/// 10 µs on, in bursts of `burst` with `pause_ns` between bursts.
fn traffic(n: usize, gap_ns: Nanos, burst: usize, pause_ns: Nanos) -> Vec<(Nanos, u16, Vec<u8>)> {
    let mut a = vec![(0, 1, frame(2, 0xff, 60, 0))];
    let mut t = 10 * US;
    for i in 0..n {
        if i > 0 && i % burst == 0 {
            t += pause_ns;
        }
        a.push((t, 0, frame(1, 2, 1500, 0b10)));
        t += gap_ns;
    }
    a
}

/// The snapshot without what differs by design: D, real time, and the
/// guard's real-time figures.
fn emulated_part(mut v: Value) -> Value {
    for k in ["dilation", "real_elapsed_s", "loop", "fidelity"] {
        v.as_object_mut().unwrap().remove(k);
    }
    for p in v["ports"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("link");
    }
    v
}

#[test]
fn the_same_emulated_inputs_give_the_same_emulated_outputs_and_the_wire_runs_d_times_slower() {
    // 1 Gbit/s emulated, a 50 µs wire, DCTCP marking above 30 KB; 600
    // frames offered at 2 Gbit/s in bursts of 100, 2 ms apart: the queue
    // crosses K in every burst and drains between them.
    let base = [
        "--rate",
        "1gbit",
        "--delay",
        "50us",
        "--buffer",
        "300kb",
        "--aqm",
        "dctcp",
        "--aqm-opt",
        "k=30kb",
    ];
    let arrivals = traffic(600, 6 * US, 100, 2 * MS);
    let one = run(
        &[&base[..], &["--dilation", "1"]].concat(),
        &arrivals,
        Passes::AtEvents,
    );
    let four = run(
        &[&base[..], &["--dilation", "4"]].concat(),
        &arrivals,
        Passes::AtEvents,
    );

    // Identical emulated outputs: every departure's time, port and bytes
    // (CE marks included), and every counter and percentile.
    assert_eq!(one.departures.len(), 601, "the broadcast and 600 frames");
    assert_eq!(one.departures, four.departures);
    let marks = one.snapshot["ports"][1]["egress"]["port"]["marked"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m["pkts"].as_u64().unwrap())
        .sum::<u64>();
    assert!(
        marks > 50 && marks < 550,
        "DCTCP marks part of each burst: {marks}"
    );
    assert_eq!(
        emulated_part(one.snapshot.clone()),
        emulated_part(four.snapshot.clone())
    );
    let p99 = |v: &Value| {
        v["ports"][1]["egress"]["port"]["sojourn"]["p99_us"]
            .as_f64()
            .unwrap()
    };
    assert!(
        p99(&four.snapshot) > 100.0,
        "a queue formed: p99 {}",
        p99(&four.snapshot)
    );
    assert_eq!(four.snapshot["dilation"], 4.0);
    assert!(
        one.snapshot.get("dilation").is_none(),
        "D = 1 reports as before"
    );

    // On the wire, D times later: each departure's real time.
    for (a, b) in one.real_ns.iter().zip(&four.real_ns) {
        assert_eq!(*b, 4 * a);
    }
    // The shaper's wire rate over the first burst's backlog (from its
    // second departure on: the first two leave on the full bucket):
    // 1 Gbit/s emulated is 1 Gbit/s on the wire at D = 1 and 250 Mbit/s at
    // D = 4.
    let wire_mbps = |o: &Outcome| {
        let (first, last) = (o.real_ns[2], o.real_ns[100]);
        let bits: usize = o.departures[3..=100]
            .iter()
            .map(|d| (d.bytes.len() + 24) * 8)
            .sum();
        bits as f64 / (last - first) as f64 * 1e3
    };
    let (r1, r4) = (wire_mbps(&one), wire_mbps(&four));
    assert!((r1 - 1000.0).abs() < 5.0, "D = 1: {r1} Mbit/s on the wire");
    assert!((r4 - 250.0).abs() < 1.25, "D = 4: {r4} Mbit/s on the wire");

    // The guard's link figures are real time: D times the emulated ones.
    let link = |o: &Outcome, k: &str| o.snapshot["ports"][1]["link"][k].as_u64().unwrap();
    assert!(link(&one, "busy_ns") > MS);
    assert_eq!(link(&four, "busy_ns"), 4 * link(&one, "busy_ns"));
    assert_eq!(four.snapshot["fidelity"]["time"], "real");
    assert_eq!(four.snapshot["fidelity"]["faithful"], true);
    let text = crate::report::render(&four.snapshot);
    assert!(text.contains("s emulated ("), "{text}");
    assert!(text.contains("time dilation D = 4"), "{text}");
    assert!(text.contains("  link (real time): backlogged"), "{text}");
    assert!(text.contains("fidelity (real time): faithful"), "{text}");
}

#[test]
fn the_guard_judges_the_same_real_stalls_on_the_same_wire_rate_alike() {
    // The wire at 250 Mbit/s: emulated 250 Mbit/s at D = 1, emulated
    // 1 Gbit/s at D = 4. Ten bursts of 100 frames, 20 ms apart in real
    // time; passes every 4 µs of real time, a 150 µs stall right after
    // each burst arrives (inside the start of the busy period) and a 400 µs
    // stall in its middle. Judged with --max-stall 1ms so that a run this
    // short is judged on its lost share.
    let stalls: Vec<(Nanos, Nanos)> = (0..10)
        .flat_map(|k| {
            let t = 10 * US + k * 20 * MS;
            [(t, 150 * US), (t + 2 * MS, 400 * US)]
        })
        .collect();
    let judge = |rate: &str, d: &str, stalls: &[(Nanos, Nanos)]| {
        let dd: f64 = d.parse().unwrap();
        // The same real arrival times at every D: emulated = real / D.
        let arrivals: Vec<_> = traffic(1000, 0, 100, 20 * MS)
            .into_iter()
            .map(|(t, p, f)| (Dilation::new(dd).unwrap().to_emulated_ns(t), p, f))
            .collect();
        let args = [
            "--rate",
            rate,
            "--buffer",
            "1mb",
            "--dilation",
            d,
            "--max-stall",
            "1ms",
        ];
        let o = run(
            &args,
            &arrivals,
            Passes::Every {
                every_ns: 4 * US,
                stalls: stalls.to_vec(),
            },
        );
        let l = &o.snapshot["ports"][1]["link"];
        (
            l["busy_ns"].as_u64().unwrap(),
            l["lost_ns"].as_u64().unwrap(),
            o.snapshot["fidelity"].clone(),
        )
    };
    let (busy1, lost1, v1) = judge("250mbit", "1", &stalls);
    let (busy4, lost4, v4) = judge("1gbit", "4", &stalls);
    // Each 400 µs stall loses what the 80 µs bucket cannot bank; the
    // 150 µs stall at each busy period's start loses beyond the 20 µs of
    // real-time grace (at D = 4 the grace is 5 µs of emulated time).
    assert!(
        lost1 > 10 * 300 * US && lost1 < 10 * 500 * US,
        "lost {lost1} ns"
    );
    assert!(lost4.abs_diff(lost1) <= 100, "{lost1} vs {lost4} ns");
    assert!(busy4.abs_diff(busy1) <= 100, "{busy1} vs {busy4} ns");
    assert_eq!(v1["faithful"], false);
    assert_eq!(v1["faithful"], v4["faithful"]);
    let lost_reason = |v: &Value| {
        v["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().contains("lost"))
    };
    assert!(lost_reason(&v1) && lost_reason(&v4), "{v1} {v4}");
    assert_eq!(v4["time"], "real");

    // Stalls the bucket covers (60 µs < 80 µs at 250 Mbit/s on the wire)
    // lose nothing at either D: faithful both.
    let short: Vec<_> = stalls
        .iter()
        .map(|&(t, _)| (t + 30 * US, 60 * US))
        .collect();
    let (_, l1, f1) = judge("250mbit", "1", &short);
    let (_, l4, f4) = judge("1gbit", "4", &short);
    assert_eq!((l1, l4), (0, 0));
    assert_eq!(
        (f1["faithful"].clone(), f4["faithful"].clone()),
        (true.into(), true.into())
    );
}

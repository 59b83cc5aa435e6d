//! R-AQM tests: the state machine and Algorithm 1 step by step on a manual
//! clock (R-AQM paper §IV-B, §IV-C, §IV-D) — the trend read from the
//! samples within T, its older two-sample reading (`trend_samples = 1`)
//! against a copy of that code, missed samples —, the header rewrites on byte
//! fixtures (IPv4 / IPv6, with and without window scaling, checksums against
//! a full recomputation), and random operation sequences with invariants.

use super::*;
use crate::packet::VecStore;
use crate::units::US;
use crate::wire::parse;
use crate::wire::parse::tests::fix_checksums;
use crate::wire::tcp::flags;
use proptest::prelude::*;

const F: u64 = FULL_FRAME_BYTES;

/// 1 Gbit/s, RTT 250 µs: BDP = 31 250 B ≈ 21 frames → K_min 21, K_max 42,
/// T = 62.5 µs sampled every T/2 = 31.25 µs, ECE above 21 packets.
fn cfg() -> Config {
    Config::for_link(Rate::gbit(1), 250 * US)
}

/// [`cfg`] with the older two-sample trend.
fn cfg1() -> Config {
    Config {
        trend_samples: 1,
        ..cfg()
    }
}

/// Drives a port started at 0 into CS the paper's way: q rises at every
/// sample instant of the first T, to `q` (≥ k) at T.
fn congest(p: &mut RaqmPort, q: u32) {
    let (t, k) = (p.config().interval, u64::from(p.config().trend_samples));
    for j in 1..=k {
        step(p, (u64::from(q) * j / k) as u32, t * j / k);
    }
    assert_eq!(p.state(), State::Congested, "a burst over T");
}

fn ack(id: u64, flow: u32) -> Packet {
    let mut p = Packet::new(id, 66, None, 0);
    // Flow identity for the ordering property (no L3: no rewrites).
    p.queue = flow as u16;
    p
}

fn step(p: &mut RaqmPort, q: u32, now: Nanos) -> (Vec<(u16, Packet)>, Vec<Packet>) {
    let (mut out, mut dropped) = (Vec::new(), Vec::new());
    let mut cx = AckCtx {
        q_out_pkts: q,
        scales: &WindowScales::default(),
        store: &mut VecStore::new(),
    };
    p.step(now, &mut cx, &mut out, &mut dropped);
    p.invariants();
    (out, dropped)
}

/// `p.offer` for an ACK without L3 (no rewrite applies, so P's backlog and
/// the frames do not matter).
fn offer_ack(p: &mut RaqmPort, pkt: Packet, out: u16, now: Nanos) -> Offer {
    assert!(pkt.l3.is_none());
    let mut cx = AckCtx {
        q_out_pkts: 0,
        scales: &WindowScales::default(),
        store: &mut VecStore::new(),
    };
    p.offer(pkt, out, now, &mut cx)
}

#[test]
fn defaults_follow_section_iv_f() {
    let c = cfg();
    assert_eq!((c.k_min_pkts, c.k_max_pkts), (21, 42));
    assert_eq!(c.interval, 62_500);
    assert_eq!(
        (c.trend_samples, c.trend_min_pkts),
        (2, 1),
        "the paper's words: strict at each of 2 steps, no size of ours"
    );
    assert_eq!(c.stale, 5_000_000);
    assert_eq!(c.viq_limit_pkts, 500);
    // α/n = 1, 0.5, 10 (§IV-F, §VI-A).
    let ratio = |s| {
        let (a, n) = c.alpha_n(s);
        a as f64 / (n as u64 * F) as f64
    };
    assert_eq!(ratio(State::Normal), 1.0);
    assert_eq!(ratio(State::Draining), 0.5);
    assert_eq!(ratio(State::Congested), 10.0);
    assert_eq!(c.ece_threshold_pkts, 21);
    assert_eq!(c.rwnd_threshold_pkts, 0, "rwnd rewrite optional");
    c.validate().unwrap();
    let mut bad = c.clone();
    bad.k_min_pkts = 50;
    assert!(bad.validate().unwrap_err().contains("k_min_pkts"));
    let mut bad = c.clone();
    bad.alpha_congested = c.bucket_bytes + 1;
    assert!(bad.validate().unwrap_err().contains("bucket_bytes"));
    // k ≥ 1, and the samples at least 1 ns apart.
    let mut bad = c.clone();
    bad.trend_samples = 0;
    assert!(bad.validate().unwrap_err().contains("trend_samples"));
    let tight = Config {
        interval: 3_000,
        trend_samples: 3_000,
        ..c.clone()
    };
    tight.validate().unwrap();
    let e = Config {
        trend_samples: 3_001,
        ..tight
    }
    .validate()
    .unwrap_err();
    assert!(e.contains("trend_samples") && e.contains("1 ns"), "{e}");
}

/// `--raqm-opt help=1` lists every key of the parameters, none that is not
/// one, each with its value (as typed back) and what it is.
#[test]
fn help_lists_every_key_with_its_value_and_meaning() {
    let c = cfg();
    let table = crate::aqm::config::to_table(&c);
    let mut listed: Vec<&str> = Config::KEYS.iter().map(|k| k.0).collect();
    listed.sort_unstable();
    let mut fields: Vec<&str> = table.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(listed, fields, "Config::KEYS against the fields");
    let h = c.help();
    assert!(
        h.starts_with("r-aqm (R-AQM paper §IV): K_min 21 / K_max 42 pkts"),
        "{h}"
    );
    assert!(
        h.contains("Keys (--raqm-opt KEY=VALUE, or KEY = VALUE under [raqm_opts]"),
        "{h}"
    );
    for (key, what) in Config::KEYS {
        let line = h
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} missing:\n{h}"));
        assert!(line.ends_with(what), "{line}");
    }
    assert!(
        h.contains("  interval=62.5us  ") && h.contains("  stale=5ms  "),
        "{h}"
    );
    assert!(h.contains("  k_min_pkts=21  "), "{h}");
    // Every value listed reads back as the value it is.
    let back: Vec<(String, toml::Value)> = h
        .lines()
        .filter_map(|l| {
            l.trim_start()
                .split_once("  ")
                .map(|(kv, _)| kv.trim().to_string())
        })
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .map(|(k, v)| (k, crate::aqm::config::cli_value(&v)))
        .collect();
    assert_eq!(back.len(), Config::KEYS.len());
    assert_eq!(cfg().with_overrides(&back).unwrap(), c);
}

/// §IV-C in the paper's words, on the samples spanning T (k = 2 and 4):
/// "continues to grow" = strictly at every step → CS "no matter how long
/// the current queue is"; "continues to decrease" → DS; otherwise the
/// thresholds.
#[test]
fn trend_is_read_from_the_samples_within_t() {
    let c = cfg();
    let c4 = Config {
        trend_samples: 4,
        ..cfg()
    };
    // A burst: q rises at every sample → CS, short or long.
    assert_eq!(trend(&c, &[0, 1, 2]), Trend::Growing);
    assert_eq!(next_state(&c, &[0, 1, 2]), State::Congested, "q < K_min");
    assert_eq!(next_state(&c, &[30, 31, 33]), State::Congested);
    assert_eq!(next_state(&c4, &[0, 3, 9, 14, 15]), State::Congested);
    // Up over T but with a dip in between (jitter): no trend, the
    // thresholds decide — where the two-sample difference said CS.
    assert_eq!(trend(&c, &[30, 29, 31]), Trend::Neither);
    assert_eq!(next_state(&c, &[30, 29, 31]), State::Normal);
    assert_eq!(next_state(&c4, &[30, 32, 31, 33, 34]), State::Normal);
    assert_eq!(
        next_state(&c4, &[5, 6, 5, 7, 9]),
        State::Draining,
        "q < K_min"
    );
    assert_eq!(next_state(&cfg1(), &[30, 31]), State::Congested);
    assert_eq!(next_state(&cfg1(), &[5, 9]), State::Congested);
    // Down at every sample → DS, even far above K_max.
    assert_eq!(trend(&c, &[200, 150, 100]), Trend::Declining);
    assert_eq!(next_state(&c, &[200, 150, 100]), State::Draining);
    assert_eq!(next_state(&c4, &[104, 103, 102, 101, 100]), State::Draining);
    // Down over T with a bump: thresholds.
    assert_eq!(
        next_state(&c, &[200, 201, 100]),
        State::Congested,
        "q > K_max"
    );
    // Flat, wholly or at one step: thresholds.
    assert_eq!(next_state(&c, &[50, 50, 50]), State::Congested, "q > K_max");
    assert_eq!(next_state(&c, &[30, 30, 30]), State::Normal);
    assert_eq!(next_state(&c, &[10, 10, 10]), State::Draining, "q < K_min");
    assert_eq!(next_state(&c, &[29, 30, 30]), State::Normal);
    assert_eq!(next_state(&c, &[31, 30, 30]), State::Normal);
    assert_eq!(next_state(&c4, &[0, 0, 1, 2, 3]), State::Draining);
    // No window, one sample: no trend.
    assert_eq!(trend(&c, &[]), Trend::Neither);
    assert_eq!(trend(&c, &[7]), Trend::Neither);
}

/// `trend_min_pkts`, ours: on top of strict monotonicity the net change
/// over T must reach it; short of it the thresholds decide.
#[test]
fn trend_min_pkts_is_a_further_condition() {
    let c = Config {
        trend_min_pkts: 3,
        ..cfg()
    };
    assert_eq!(next_state(&c, &[30, 31, 32]), State::Normal, "net +2 < 3");
    assert_eq!(next_state(&c, &[30, 31, 33]), State::Congested, "net +3");
    assert_eq!(next_state(&c, &[30, 29, 27]), State::Draining, "net −3");
    assert_eq!(
        next_state(&c, &[50, 49, 48]),
        State::Congested,
        "net −2: q > K_max"
    );
    assert_eq!(
        next_state(&c, &[10, 11, 12]),
        State::Draining,
        "net +2: q < K_min"
    );
    // A large net change does not make a dip a trend.
    assert_eq!(next_state(&c, &[10, 9, 40]), State::Normal);
}

/// The older reading (`trend_samples = 1`): the difference of two samples
/// one T apart, trend first, then thresholds — its cases as they were.
#[test]
fn state_transitions_from_length_and_trend() {
    let c = cfg1();
    // Growing by ≥ 1 packet over T → CS even with a tiny queue.
    assert_eq!(next_state(&c, &[0, 1]), State::Congested);
    assert_eq!(next_state(&c, &[30, 31]), State::Congested);
    // Shrinking → DS even when long.
    assert_eq!(next_state(&c, &[100, 99]), State::Draining);
    // Stable: thresholds.
    assert_eq!(next_state(&c, &[50, 50]), State::Congested, "q > K_max");
    assert_eq!(
        next_state(&c, &[42, 42]),
        State::Normal,
        "q = K_max is steady"
    );
    assert_eq!(next_state(&c, &[30, 30]), State::Normal);
    assert_eq!(
        next_state(&c, &[21, 21]),
        State::Normal,
        "q = K_min is steady"
    );
    assert_eq!(next_state(&c, &[20, 20]), State::Draining, "about to empty");
    assert_eq!(next_state(&c, &[0, 0]), State::Draining);
    // A dead band of 3 packets.
    let c3 = Config {
        trend_min_pkts: 3,
        ..cfg1()
    };
    assert_eq!(next_state(&c3, &[30, 32]), State::Normal);
    assert_eq!(next_state(&c3, &[30, 33]), State::Congested);
    assert_eq!(next_state(&c3, &[30, 27]), State::Draining);
}

/// An incast burst through one port, sample by sample (two per T, at T/2
/// and T), following §IV-C and Algorithm 1.
#[test]
fn algorithm_1_step_by_step() {
    let c = Config {
        idle_credit: false,
        ..cfg()
    };
    let t = c.interval;
    let h = t / 2;
    let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
    let mut id = 0;
    let mut offer = |p: &mut RaqmPort, now| {
        id += 1;
        offer_ack(p, ack(id, 0), 7, now)
    };
    // t < T: NS, empty VIQ → an ACK passes at once (§V: only triggered to avoid drops).
    assert!(matches!(offer(&mut p, 10), Offer::Pass(_)));
    let (out, _) = step(&mut p, 3, 20);
    assert!(out.is_empty());
    // The sample at T/2 is taken; the state waits for T.
    assert_eq!(p.next_event(3, 20), Some(h), "the next sample instant");
    step(&mut p, 2, h);
    assert_eq!(p.state(), State::Normal, "no decision before T");

    // t = T: q went 0, 2, 3: rose at every sample → CS, whatever the length.
    step(&mut p, 3, t);
    assert_eq!(p.state(), State::Congested);
    // In CS every ACK is held.
    for k in 0..25 {
        assert_eq!(offer(&mut p, t + k), Offer::Held);
    }
    assert_eq!(p.viq_len(), 25);
    // CS: α_3 = 10 frames per ACK. Nine departures: nothing.
    for _ in 0..9 {
        p.on_departure(F);
    }
    assert!(step(&mut p, 30, t + 100).0.is_empty());
    // The tenth: one ACK, to the egress port the bridge chose, oldest first.
    p.on_departure(F);
    let (out, _) = step(&mut p, 30, t + 200);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 7);
    assert_eq!(out[0].1.frame, 2, "FIFO: the first held ACK");
    assert_eq!(p.tokens(), 0);

    // t = 2T: q 3, 20, 30 still growing → CS.
    step(&mut p, 20, t + h);
    step(&mut p, 30, 2 * t);
    assert_eq!(p.state(), State::Congested);
    // t = 3T: 30, 28, 25 shrinking → DS: α_2 = 1 frame for n_2 = 2 ACKs.
    step(&mut p, 28, 2 * t + h);
    assert_eq!(p.state(), State::Congested, "mid-T: no decision");
    step(&mut p, 25, 3 * t);
    assert_eq!(p.state(), State::Draining);
    p.on_departure(F);
    let (out, _) = step(&mut p, 24, 3 * t + 1);
    assert_eq!(out.len(), 2);
    assert_eq!(
        out.iter().map(|o| o.1.frame).collect::<Vec<_>>(),
        vec![3, 4]
    );
    // Half a frame of credit: nothing.
    p.on_departure(F / 2);
    assert!(step(&mut p, 24, 3 * t + 2).0.is_empty());

    // t = 4T: 25, 24, 25 — neither trend (a dip, no change over T);
    // K_min ≤ q ≤ K_max → NS: one ACK per frame.
    step(&mut p, 24, 3 * t + h);
    step(&mut p, 25, 4 * t);
    assert_eq!(p.state(), State::Normal);
    p.on_departure(F); // 1.5 frames of tokens now
    let (out, _) = step(&mut p, 25, 4 * t + 1);
    assert_eq!(out.len(), 1);
    assert_eq!(p.tokens(), F / 2);
    // NS with a non-empty VIQ: ACKs still queue behind the held ones (FIFO).
    assert_eq!(offer(&mut p, 4 * t + 2), Offer::Held);

    // 5T: 25, 40, 50 growing → CS; 6T: 50, 50, 50 flat > K_max → CS;
    // 7T: 50, 30, 10 shrinking → DS; 8T: 10, 10, 10 flat < K_min → DS.
    for (q_half, q_t, at, want) in [
        (40, 50, 5, State::Congested),
        (50, 50, 6, State::Congested),
        (30, 10, 7, State::Draining),
        (10, 10, 8, State::Draining),
    ] {
        step(&mut p, q_half, (at - 1) * t + h);
        step(&mut p, q_t, at * t);
        assert_eq!(p.state(), want, "at {at}T");
    }
    let c = p.counters_at(8 * t);
    assert_eq!(c.transitions, 5);
    assert_eq!(
        c.state_ns.iter().sum::<u64>(),
        8 * t,
        "every ns in one state"
    );
    assert_eq!(c.releases, [1, 1, 1]);
    assert_eq!(c.acks_released, 4);
}

/// A queue that rises over T with a dip between the samples: the paper's
/// words see no trend (thresholds: NS) where the two-sample difference
/// (`trend_samples = 1`) saw a burst (CS), and hold the ACKs it would have.
#[test]
fn a_dip_within_t_is_not_a_burst() {
    let t = cfg().interval;
    let mut words = RaqmPort::new(cfg(), Rate::gbit(1), 0);
    let mut older = RaqmPort::new(cfg1(), Rate::gbit(1), 0);
    for p in [&mut words, &mut older] {
        // Steady at 30 through 2T, then up to 31 with a dip to 29 at 5T/2.
        for (q, at) in [(30, t / 2), (30, t), (30, 3 * t / 2), (30, 2 * t)] {
            step(p, q, at);
        }
        assert_eq!(p.state(), State::Normal, "{:?}", p.config().trend_samples);
        step(p, 29, 5 * t / 2);
        step(p, 31, 3 * t);
    }
    assert_eq!(words.state(), State::Normal, "30, 29, 31: no trend");
    assert_eq!(older.state(), State::Congested, "30 → 31: growing");
    assert!(matches!(
        offer_ack(&mut words, ack(1, 0), 1, 3 * t),
        Offer::Pass(_)
    ));
    assert_eq!(offer_ack(&mut older, ack(1, 0), 1, 3 * t), Offer::Held);
    // A monotone rise over the next T is a burst to both.
    for p in [&mut words, &mut older] {
        step(p, 32, 7 * t / 2);
        step(p, 34, 4 * t);
        assert_eq!(p.state(), State::Congested);
    }
}

/// Missed sample instants (an idle port, a late poll) are not replayed and
/// make no trend: the window that lacks a sample is decided by the
/// thresholds, the step across the gap does not count, and the samples go
/// on from the latest instant passed.
#[test]
fn missed_samples_make_no_trend_and_are_not_replayed() {
    let t = cfg().interval;
    let h = t / 2;
    // An idle port is not woken; then a burst reaches it long after.
    let mut p = RaqmPort::new(cfg(), Rate::gbit(1), 0);
    assert_eq!(p.next_event(0, 0), None, "idle: no samples to take");
    let late = 1000 * t + 5;
    step(&mut p, 30, late);
    assert_eq!(p.state(), State::Normal, "0 … 30 across a gap: thresholds");
    assert_eq!(p.counters.transitions, 0);
    assert_eq!(
        p.next_event(30, late),
        Some(1000 * t + h),
        "the grid goes on"
    );
    // Sampled from there on at every instant: a rise over a whole T is a burst.
    step(&mut p, 40, 1000 * t + h);
    step(&mut p, 50, 1001 * t);
    assert_eq!(p.state(), State::Congested, "30, 40, 50");
    // The older reading compares across the gap, as it always did.
    let mut q = RaqmPort::new(cfg1(), Rate::gbit(1), 0);
    step(&mut q, 30, late);
    assert_eq!(q.state(), State::Congested);

    // A late poll skips the instant T: the window (0, 5, –) lacks it; the
    // late step decides by the thresholds on q now and the sample it takes
    // opens the next window, whose first step (10 → 15) is seen whole.
    let mut p = RaqmPort::new(cfg(), Rate::gbit(1), 0);
    step(&mut p, 5, h);
    step(&mut p, 10, 3 * h + 1);
    assert_eq!(p.state(), State::Draining, "no trend; 10 < K_min");
    assert_eq!(p.next_event(10, 3 * h + 1), Some(2 * t));
    step(&mut p, 15, 2 * t);
    assert_eq!(
        p.state(),
        State::Draining,
        "10 → 15 is one step, not a window"
    );
    step(&mut p, 20, 2 * t + h);
    step(&mut p, 25, 3 * t);
    assert_eq!(p.state(), State::Congested, "15, 20, 25");
    // A late poll past a mid-T instant only: the sample at T/2 is missing,
    // so the rise to 40 at 4T is not a trend (q in [K_min, K_max]: NS).
    step(&mut p, 40, 4 * t);
    assert_eq!(p.state(), State::Normal);
    // The queue empties: the port is woken until a decision has seen it,
    // then no more.
    step(&mut p, 0, 4 * t + h);
    assert_eq!(p.next_event(0, 4 * t + h), Some(5 * t), "40 in the window");
    step(&mut p, 0, 5 * t);
    assert_eq!(p.state(), State::Draining, "40, 0, 0: q < K_min");
    assert_eq!(p.next_event(0, 5 * t), None);
}

/// With `trend_samples = 1` the port is the older code exactly: a copy of
/// it (the difference of q now and the last sample, one T apart, late
/// samples not replayed) against the port on random timelines, state and
/// next wake-up alike.
#[test]
fn one_sample_per_t_is_the_older_rule_exactly() {
    struct Older {
        q_prev: u32,
        next_sample: Nanos,
        state: State,
    }
    fn older_next_state(cfg: &Config, q_prev: u32, q_now: u32) -> State {
        if q_now >= q_prev.saturating_add(cfg.trend_min_pkts) {
            State::Congested
        } else if q_now.saturating_add(cfg.trend_min_pkts) <= q_prev {
            State::Draining
        } else if q_now > cfg.k_max_pkts {
            State::Congested
        } else if q_now < cfg.k_min_pkts {
            State::Draining
        } else {
            State::Normal
        }
    }
    let mut runner = proptest::test_runner::TestRunner::default();
    let timeline = prop::collection::vec((0u64..200_000, 0u32..60), 1..300);
    runner
        .run(&(timeline, 1u32..5), |(ops, m)| {
            let c = Config {
                trend_min_pkts: m,
                ..cfg1()
            };
            let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
            let mut o = Older {
                q_prev: 0,
                next_sample: c.interval,
                state: State::Normal,
            };
            let mut now = 0;
            for (dt, q) in ops {
                now += dt;
                if now >= o.next_sample {
                    o.state = older_next_state(&c, o.q_prev, q);
                    o.q_prev = q;
                    let late = (now - o.next_sample) / c.interval;
                    o.next_sample += (late + 1) * c.interval;
                }
                step(&mut p, q, now);
                prop_assert_eq!(p.state(), o.state, "at {}", now);
                for q_next in [0, q] {
                    let older_wake = (q_next > 0 || o.q_prev > 0).then_some(o.next_sample);
                    prop_assert_eq!(p.next_event(q_next, now), older_wake);
                }
            }
            Ok(())
        })
        .unwrap();
}

/// The port's samples against [`next_state`] on the whole window: random
/// k, `trend_min_pkts`, T (not always a multiple of k) and timelines, with
/// steps on the sample instants, between them and late past several. At
/// every T boundary the state is `next_state` of the k + 1 samples spanning
/// that T, or — when an instant of it had no step — the thresholds alone
/// (k = 1: the last sample taken stands in for the missing one).
#[test]
fn the_state_is_next_state_of_the_samples_spanning_t() {
    let mut runner = proptest::test_runner::TestRunner::default();
    let timeline = prop::collection::vec((0u8..4, 0u32..60), 1..200);
    runner
        .run(
            &(timeline, 1u32..6, 1u32..4, 0u64..7),
            |(ops, k, m, extra)| {
                let c = Config {
                    trend_samples: k,
                    trend_min_pkts: m,
                    interval: 62_500 + extra,
                    ..cfg()
                };
                let (t, kk) = (c.interval, u64::from(k));
                let instant = |j: u64| j * t / kk;
                let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
                // Sample j → q; instant 0 is the empty port.
                let mut samples = std::collections::BTreeMap::from([(0u64, 0u32)]);
                let (mut next_j, mut last_j, mut want) = (1u64, 0u64, State::Normal);
                let mut now = 0;
                for (how, q) in ops {
                    now = match how {
                        // On the next instant.
                        0 => instant(next_j),
                        // Between it and the one after.
                        1 => instant(next_j) + (instant(next_j + 1) - instant(next_j)) / 2,
                        // Past one or a few more (a late poll).
                        2 => instant(next_j + 1 + u64::from(q % 3)) + 1,
                        // Not yet due.
                        _ => now.max(instant(next_j).saturating_sub(1)),
                    }
                    .max(now);
                    if now >= instant(next_j) {
                        let mut j = next_j;
                        while instant(j + 1) <= now {
                            j += 1;
                        }
                        samples.insert(j, q);
                        if (next_j..=j).any(|i| i % kk == 0) {
                            let window: Option<Vec<u32>> = if k == 1 {
                                Some(vec![samples[&last_j], q])
                            } else {
                                (j - kk..=j).map(|i| samples.get(&i).copied()).collect()
                            };
                            want = match window {
                                Some(w) => next_state(&c, &w),
                                None => state_for(&c, Trend::Neither, q),
                            };
                        }
                        last_j = j;
                        next_j = j + 1;
                    }
                    step(&mut p, q, now);
                    prop_assert_eq!(p.state(), want, "k {} at {} ({:?})", k, now, samples);
                    let wake = p.next_event(q.max(1), now);
                    prop_assert_eq!(wake, Some(instant(next_j)), "next instant");
                }
                Ok(())
            },
        )
        .unwrap();
}

/// The token bucket never holds more than its depth: a long quiet spell of
/// departures does not bank a burst.
#[test]
fn bucket_depth_caps_credit() {
    let c = Config {
        idle_credit: false,
        ..cfg()
    };
    let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
    for _ in 0..1000 {
        p.on_departure(F);
    }
    assert_eq!(p.tokens(), c.bucket_bytes);
    // Force NS with held ACKs: the bucket (10 frames) releases at most 10.
    congest(&mut p, 30); // 0, 15, 30: CS
    step(&mut p, 30, 3 * c.interval / 2);
    for i in 0..40 {
        offer_ack(&mut p, ack(i, 0), 1, 3 * c.interval / 2);
    }
    let (out, _) = step(&mut p, 30, 2 * c.interval); // stable in [K_min, K_max]: NS
    assert_eq!(p.state(), State::Normal);
    assert_eq!(out.len(), 10);
}

/// §IV-D: an ACK held more than 5 ms is dropped, counted, and the data path
/// is woken for it.
#[test]
fn stale_acks_are_dropped_at_5ms() {
    let c = Config {
        idle_credit: false,
        ..cfg()
    };
    let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
    congest(&mut p, 5);
    assert_eq!(offer_ack(&mut p, ack(1, 0), 1, 100_000), Offer::Held);
    assert_eq!(offer_ack(&mut p, ack(2, 0), 1, 200_000), Offer::Held);
    // The next event includes the head's deadline.
    assert_eq!(
        p.next_event(5, 150_000),
        Some(3 * c.interval / 2),
        "the next sample instant first"
    );
    let deadline = 100_000 + 5_000_000;
    let (_, dropped) = step(&mut p, 5, deadline);
    assert!(dropped.is_empty(), "5 ms exactly is not older than 5 ms");
    assert!(p.next_event(5, deadline).unwrap() <= deadline + 1);
    let (out, dropped) = step(&mut p, 5, deadline + 1);
    assert!(out.is_empty());
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].frame, 1);
    assert_eq!(p.counters.dropped_stale, 1);
    assert_eq!(p.viq_len(), 1);
}

#[test]
fn full_viq_drops_and_counts() {
    let c = Config {
        viq_limit_pkts: 3,
        ..cfg()
    };
    let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
    congest(&mut p, 5);
    for i in 0..3 {
        assert_eq!(offer_ack(&mut p, ack(i, 0), 1, c.interval), Offer::Held);
    }
    assert!(matches!(
        offer_ack(&mut p, ack(9, 0), 1, c.interval),
        Offer::Dropped(_, AckDrop::ViqFull)
    ));
    assert_eq!(p.counters.dropped_viq_full, 1);
    p.invariants();
}

/// Idle credit: with P's egress empty, tokens come at P's link rate, so a
/// held ACK leaves one α of line time later (CS: 10 frames = 121.12 µs at
/// 1 Gbit/s).
#[test]
fn idle_credit_paces_at_link_rate() {
    // A long T so that no sample interferes.
    let c = Config {
        interval: 10_000_000,
        ..cfg()
    };
    let t = c.interval;
    let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
    congest(&mut p, 60); // 0, 30, 60: CS
    for i in 0..3 {
        assert_eq!(offer_ack(&mut p, ack(i, 0), 1, t), Offer::Held);
    }
    // q_out still 60: no idle credit; the next event is the next sample
    // instant, T/2 on, just before the held ACKs go stale.
    assert_eq!(p.next_event(60, t + 1), Some(t + t / 2));
    assert_eq!(t / 2, 5_000_000, "stale at t + 5 ms + 1");
    // Egress empties; the first step anchors the idle credit.
    let t0 = t + 10;
    assert!(step(&mut p, 0, t0).0.is_empty());
    let due = p.next_event(0, t0).unwrap();
    assert_eq!(due, t0 + 121_120);
    assert!(step(&mut p, 0, due - 1).0.is_empty());
    assert_eq!(step(&mut p, 0, due).0.len(), 1);
    // Without idle credit the ACKs would wait for departures (or go stale).
    let mut strict = RaqmPort::new(
        Config {
            idle_credit: false,
            ..c.clone()
        },
        Rate::gbit(1),
        0,
    );
    congest(&mut strict, 60);
    offer_ack(&mut strict, ack(1, 0), 1, t);
    assert!(step(&mut strict, 0, t + 1_000_000).0.is_empty());
}

#[test]
fn unshaped_port_releases_at_once_when_idle() {
    let mut p = RaqmPort::new(cfg(), Rate::from_bps(0), 0);
    congest(&mut p, 5);
    offer_ack(&mut p, ack(1, 0), 1, cfg().interval);
    assert_eq!(step(&mut p, 0, cfg().interval + 1).0.len(), 1);
}

// ---------------------------------------------------------------- rewrites

/// Ethernet + IPv4/IPv6 + TCP (20 B header + `opts`), 10.0.0.a → 10.0.0.b
/// (2001:db8::a → ::b), checksums filled.
pub(crate) fn tcp_frame(
    v6: bool,
    ab: (u8, u8),
    ports: (u16, u16),
    fl: u8,
    window: u16,
    opts: &[u8],
) -> Vec<u8> {
    tcp_frame_with_payload(v6, ab, ports, fl, window, opts, 0)
}

/// [`tcp_frame`] with `payload` data bytes.
pub(crate) fn tcp_frame_with_payload(
    v6: bool,
    (a, b): (u8, u8),
    (sp, dp): (u16, u16),
    fl: u8,
    window: u16,
    opts: &[u8],
    payload: usize,
) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, b, 2, 0, 0, 0, 0, a];
    let hdr_len = 20 + opts.len();
    let tcp_len = hdr_len + payload;
    if v6 {
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        f.extend_from_slice(&[0x60, 0x00, 0, 0]);
        f.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        for x in [a, b] {
            f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x]);
        }
    } else {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(&[0x45, 0x00]);
        f.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, a, 10, 0, 0, b]);
    }
    f.extend_from_slice(&sp.to_be_bytes());
    f.extend_from_slice(&dp.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    f.push(((hdr_len / 4) as u8) << 4);
    f.push(fl);
    f.extend_from_slice(&window.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(opts);
    f.extend((0..payload).map(|i| i as u8));
    fix_checksums(&mut f, 14);
    f
}

const WS7: [u8; 4] = [1, 3, 3, 7];
const WS2: [u8; 4] = [1, 3, 3, 2];

fn syn(v6: bool, opts: &[u8]) -> Vec<u8> {
    tcp_frame(v6, (1, 2), (40000, 5201), flags::SYN, 64240, opts)
}
fn syn_ack(v6: bool, opts: &[u8]) -> Vec<u8> {
    tcp_frame(
        v6,
        (2, 1),
        (5201, 40000),
        flags::SYN | flags::ACK,
        65160,
        opts,
    )
}
/// The receiver's (10.0.0.2) pure ACK to the sender, raw window 501.
fn rx_ack(v6: bool) -> Vec<u8> {
    tcp_frame(v6, (2, 1), (5201, 40000), flags::ACK, 501, &[])
}

/// The TCP checksum equals a full recomputation (the wire module's check).
fn tcp_checksum_ok(f: &[u8]) {
    crate::wire::ecn::tests::tcp_checksum_is_full_recomputation(f);
}

fn learn(s: &mut WindowScales, f: &[u8]) {
    let l3 = parse(f).unwrap().l3.unwrap();
    s.learn(f, &l3);
}

fn window_of(f: &[u8]) -> u16 {
    let l3 = parse(f).unwrap().l3.unwrap();
    let t = usize::from(l3.tcp.unwrap().offset);
    u16::from_be_bytes([f[t + 14], f[t + 15]])
}

#[test]
fn window_scale_needs_both_syns() {
    for v6 in [false, true] {
        let ack_hash = parse(&rx_ack(v6)).unwrap().l3.unwrap().flow_hash;
        let data_hash = parse(&syn(v6, &[])).unwrap().l3.unwrap().flow_hash;
        // Both announce: each direction uses its own shift.
        let mut s = WindowScales::default();
        learn(&mut s, &syn(v6, &WS7));
        assert_eq!(s.shift(ack_hash), None, "only one SYN seen");
        learn(&mut s, &syn_ack(v6, &WS2));
        assert_eq!(s.shift(ack_hash), Some(2), "the receiver's SYN-ACK");
        assert_eq!(s.shift(data_hash), Some(7));
        // One side without the option: no scaling either way (RFC 7323 §2.2).
        let mut s = WindowScales::default();
        learn(&mut s, &syn(v6, &[]));
        learn(&mut s, &syn_ack(v6, &WS7));
        assert_eq!(s.shift(ack_hash), Some(0));
        assert_eq!(s.shift(data_hash), Some(0));
        // Plain ACKs teach nothing.
        let mut s = WindowScales::default();
        learn(&mut s, &rx_ack(v6));
        assert!(s.is_empty());
    }
}

#[test]
fn window_scale_table_is_bounded() {
    let mut s = WindowScales::with_capacity(4);
    for port in 0..10u16 {
        let f = tcp_frame(false, (1, 2), (port, 80), flags::SYN, 1000, &WS7);
        learn(&mut s, &f);
    }
    assert!(s.clears >= 2);
    assert!(s.len() <= 4);
}

/// §IV-D: ECE and rwnd = 1 MSS on a leaving ACK, with and without window
/// scaling, IPv4 and IPv6; checksums equal a full recomputation.
#[test]
fn rewrites_ece_and_rwnd() {
    for v6 in [false, true] {
        for (opts, shift, want_raw) in [(&[][..], 0u8, 1448u16), (&WS2[..], 2, 362)] {
            let c = Config {
                ece_threshold_pkts: 10,
                rwnd_threshold_pkts: 20,
                ..cfg()
            };
            let mut p = RaqmPort::new(c, Rate::gbit(1), 0);
            let mut scales = WindowScales::default();
            learn(&mut scales, &syn(v6, opts));
            learn(&mut scales, &syn_ack(v6, opts));
            assert_eq!(
                scales.shift(parse(&rx_ack(v6)).unwrap().l3.unwrap().flow_hash),
                Some(shift)
            );
            let mut st = VecStore::new();
            let mk = |st: &mut VecStore| {
                let f = rx_ack(v6);
                let l3 = parse(&f).unwrap().l3.unwrap();
                let len = f.len() as u32;
                Packet::new(st.insert(f), len, Some(l3), 1)
            };
            // Below both thresholds: untouched.
            let pkt = mk(&mut st);
            p.rewrite(&pkt, 10, &scales, &mut st);
            assert_eq!(st.take(pkt.frame), rx_ack(v6));
            // Above the ECN threshold only: ECE.
            let pkt = mk(&mut st);
            p.rewrite(&pkt, 11, &scales, &mut st);
            let f = st.take(pkt.frame);
            let tcp = parse(&f).unwrap().l3.unwrap().tcp.unwrap();
            assert_eq!(tcp.flags, flags::ACK | flags::ECE);
            assert_eq!(window_of(&f), 501);
            tcp_checksum_ok(&f);
            // Above the HSCC threshold: rwnd = 1448 B at the flow's scale.
            let pkt = mk(&mut st);
            p.rewrite(&pkt, 21, &scales, &mut st);
            let f = st.take(pkt.frame);
            let expect = 501.min(want_raw);
            assert_eq!(window_of(&f), expect, "v6 {v6} shift {shift}");
            assert_eq!(
                (window_of(&f) as u32) << shift,
                if shift == 0 { 501 } else { 1448 },
                "announces min(rwnd, 1 MSS)"
            );
            tcp_checksum_ok(&f);
            assert_eq!(p.counters.rewrite_ece, 2);
            assert_eq!(p.counters.rewrite_rwnd, u64::from(shift != 0));
        }
    }
}

#[test]
fn rwnd_is_lowered_from_a_large_window() {
    for v6 in [false, true] {
        let mut f = tcp_frame(v6, (2, 1), (5201, 40000), flags::ACK, 0xffff, &[]);
        let l3 = parse(&f).unwrap().l3.unwrap();
        assert_eq!(wscale::lower_window(&mut f, &l3, 1448, 0), Some(true));
        assert_eq!(window_of(&f), 1448);
        tcp_checksum_ok(&f);
        let mut f = tcp_frame(v6, (2, 1), (5201, 40000), flags::ACK, 0xffff, &[]);
        assert_eq!(wscale::lower_window(&mut f, &l3, 1448, 7), Some(true));
        assert_eq!(window_of(&f), 12, "⌈1448 / 128⌉");
        tcp_checksum_ok(&f);
        // An L3Info from another frame: refused, not a panic.
        let mut short = f[..40].to_vec();
        assert_eq!(wscale::lower_window(&mut short, &l3, 1448, 0), None);
    }
}

#[test]
fn unknown_scale_is_never_rewritten_and_counted() {
    let c = Config {
        rwnd_threshold_pkts: 1,
        ece_threshold_pkts: 0,
        ..cfg()
    };
    let mut p = RaqmPort::new(c, Rate::gbit(1), 0);
    let scales = WindowScales::default();
    let mut st = VecStore::new();
    let f = rx_ack(false);
    let l3 = parse(&f).unwrap().l3.unwrap();
    let pkt = Packet::new(st.insert(f.clone()), f.len() as u32, Some(l3), 1);
    p.rewrite(&pkt, 100, &scales, &mut st);
    assert_eq!(st.take(pkt.frame), f);
    assert_eq!(p.counters.rwnd_unknown_scale, 1);
    assert_eq!(p.counters.rewrite_rwnd, 0);
}

// ------------------------------------------------------ random sequences

#[derive(Clone, Debug)]
enum Op {
    Ack(u32),
    Depart(u64),
    Advance(u64),
    Step(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..4).prop_map(Op::Ack),
        3 => (1u64..3000).prop_map(Op::Depart),
        2 => (1u64..400_000).prop_map(Op::Advance),
        3 => (0u32..80).prop_map(Op::Step),
    ]
}

proptest! {
    /// No ACK is lost except by a counted reason; order within a flow is
    /// kept; the bucket never releases faster than its credit (idle credit
    /// off: every token is a departed byte).
    #[test]
    fn acks_conserved_ordered_and_paced(ops in prop::collection::vec(op(), 1..400), limit in 1u32..40) {
        let c = Config { idle_credit: false, viq_limit_pkts: limit, ..cfg() };
        let mut p = RaqmPort::new(c.clone(), Rate::gbit(1), 0);
        let mut now = 0;
        let mut next_id = 0u64;
        let mut q = 0;
        let mut forwarded: Vec<Packet> = Vec::new();
        let mut lost = 0u64;
        let mut credited = 0u64;
        let mut spent = 0u64;
        let mut last_releases = [0u64; 3];
        for o in ops {
            match o {
                Op::Ack(flow) => {
                    next_id += 1;
                    match offer_ack(&mut p, ack(next_id, flow), 1, now) {
                        Offer::Pass(pkt) => forwarded.push(pkt),
                        Offer::Held => {}
                        Offer::Dropped(_, _) => lost += 1,
                    }
                }
                Op::Depart(b) => { credited += b; p.on_departure(b); }
                Op::Advance(d) => now += d,
                Op::Step(qn) => {
                    q = qn;
                    let (out, dropped) = step(&mut p, q, now);
                    lost += dropped.len() as u64;
                    forwarded.extend(out.into_iter().map(|o| o.1));
                    for s in State::ALL {
                        let r = p.counters.releases[s as usize];
                        spent += (r - last_releases[s as usize]) * c.alpha_n(s).0;
                        last_releases[s as usize] = r;
                    }
                }
            }
            p.invariants();
            prop_assert!(spent <= credited, "released faster than credit: {spent} > {credited}");
        }
        let _ = q;
        // Conservation: every ACK offered is forwarded, dropped (counted) or still held.
        prop_assert_eq!(next_id, forwarded.len() as u64 + lost + p.viq_len() as u64);
        prop_assert_eq!(lost, p.counters.dropped_stale + p.counters.dropped_viq_full);
        // Order per flow: ids increase.
        for flow in 0..4u16 {
            let ids: Vec<u64> = forwarded.iter().filter(|x| x.queue == flow).map(|x| x.frame).collect();
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "flow {flow} reordered: {ids:?}");
        }
        // Releases: at most n ACKs per token take.
        let max_out: u64 = State::ALL.iter().map(|&s| p.counters.releases[s as usize] * c.alpha_n(s).1 as u64).sum();
        prop_assert!(p.counters.acks_released <= max_out);
    }
}

// ------------------------------------------------------------- settings

fn resolve(list: &[&str]) -> Result<crate::config::Settings, String> {
    use clap::Parser;
    let mut v = vec!["softswitch"];
    v.extend_from_slice(list);
    let cli = crate::cli::Cli::try_parse_from(v).map_err(|e| e.to_string())?;
    crate::config::resolve(&cli.run).map_err(|e| e.to_string())
}

#[test]
fn aqm_r_aqm_names_a_forward_aqm_and_scales_defaults() {
    let s = resolve(&[
        "--ports", "a,b", "--aqm", "r-aqm", "--rate", "10gbit", "--rtt", "12us",
    ])
    .unwrap();
    assert_eq!(s.ports[0].aqm.name(), "dctcp", "the paper's R-AQM (ECN)");
    let r = s.raqm.clone().unwrap();
    // 10 Gbit/s × 12 µs = 15 KB ≈ 10 frames; T = 3 µs as in §VI-A.
    assert_eq!((r.k_min_pkts, r.k_max_pkts, r.interval), (10, 20, 3_000));
    assert!(s.describe().contains("r-aqm (R-AQM paper §IV)"));
    let s = resolve(&[
        "--ports",
        "a",
        "--aqm",
        "r-aqm+tcn",
        "--raqm-opt",
        "k_min_pkts=20",
        "--raqm-opt",
        "k-max-pkts=40",
        "--raqm-opt",
        "interval=3us",
    ])
    .unwrap();
    assert_eq!(s.ports[0].aqm.name(), "tcn");
    let r = s.raqm.unwrap();
    assert_eq!((r.k_min_pkts, r.k_max_pkts, r.interval), (20, 40, 3_000));
    let s = resolve(&[
        "--ports",
        "a",
        "--aqm",
        "r-aqm",
        "--raqm-forward",
        "droptail",
    ])
    .unwrap();
    assert_eq!(s.ports[0].aqm.name(), "droptail");
    assert!(resolve(&["--ports", "a", "--aqm", "tcn"])
        .unwrap()
        .raqm
        .is_none());
}

#[test]
fn r_aqm_mistakes_name_the_option() {
    let e = resolve(&["--ports", "a", "--aqm", "r-aqm", "--raqm-opt", "kmin=3"]).unwrap_err();
    assert!(e.contains("kmin") && e.contains("k_min_pkts"), "{e}");
    let e = resolve(&[
        "--ports",
        "a",
        "--aqm",
        "r-aqm",
        "--raqm-opt",
        "interval=soon",
    ])
    .unwrap_err();
    assert!(e.contains("interval"), "{e}");
    let e = resolve(&[
        "--ports",
        "a",
        "--aqm",
        "r-aqm",
        "--raqm-opt",
        "k_min_pkts=99",
    ])
    .unwrap_err();
    assert!(e.contains("k_max_pkts"), "{e}");
    let e = resolve(&["--ports", "a", "--aqm", "tcn", "--raqm-opt", "k_min_pkts=3"]).unwrap_err();
    assert!(e.contains("--aqm r-aqm"), "{e}");
    let e = resolve(&["--ports", "a", "--aqm", "r-aqm+pie"]).unwrap_err();
    assert!(e.contains("pie"), "{e}");
    let e = resolve(&["--ports", "a", "--aqm", "r-aqm+r-aqm"]).unwrap_err();
    assert!(e.contains("forward"), "{e}");
}

#[test]
fn report_renders_r_aqm_counters() {
    let mut p = RaqmPort::new(cfg(), Rate::gbit(1), 0);
    congest(&mut p, 5);
    offer_ack(&mut p, ack(1, 0), 1, cfg().interval);
    let snap = serde_json::json!({"elapsed_s": 1.0, "ports": [{"name": "p0", "raqm": p.report(2 * cfg().interval, 0)}]});
    let text = crate::report::render(&snap);
    assert!(text.contains("r-aqm: congested"), "{text}");
    assert!(text.contains("held 1"), "{text}");
    assert!(text.contains("CS 0.1 ms"), "{text}");
}

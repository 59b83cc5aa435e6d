//! ECN♯ — instantaneous + persistent-queue ECN marking.
//!
//! Junxue Zhang, Wei Bai, Kai Chen, "Enabling ECN for Datacenter Networks with
//! RTT Variations", ACM CoNEXT 2019.
//!
//! A departing packet is marked when *either* condition says so (§3.2):
//!
//! 1. **Instantaneous**: sojourn > `ins_target`, with `ins_target = λ × RTT`
//!    from a high-percentile RTT (Eq. 2, T = K/C = λ·RTT).
//! 2. **Persistent** (Algorithm 1, `ShouldPersistentMark`): sojourn has stayed
//!    ≥ `pst_target` for more than `pst_interval`; then mark one packet, the
//!    next one `pst_interval` later, then `pst_interval/√2`, `/√3`, ...
//!    (`marking_next += pst_interval / sqrt(marking_count)`), until a sojourn
//!    below `pst_target` resets the detection.
//!
//! Both are evaluated on every packet: the persistent procedure must see every
//! sojourn to keep `first_above_time` right, even when the instantaneous test
//! already marks. The verdict's reason is `Sojourn` when the instantaneous test
//! fires, else `Persistent`.
//!
//! The paper's pseudo-code is followed variable by variable (Table 2 names);
//! the line numbers cited (`A1:n`) are those of Algorithm 1 as printed (the
//! extraction we worked from scrambles them; we take `A1:16` =
//! `marking_next = now() + pst_interval`, as the text of §4.1 says). All
//! comparisons are exactly the paper's: `now() > marking_next` (A1:7),
//! `sojourn_time < pst_target` (A1:22), `now() > first_above_time +
//! pst_interval` (A1:28). `first_above_time == 0` means "unset" (A1:23, A1:26),
//! as in the paper; the data path's monotonic clock never reads 0.
//!
//! The `else` at A1:12 matters: while marking, a packet that is neither
//! below target nor due (`now() ≤ marking_next`) falls to A1:19 and passes.
//! The authors' ns-3 model (snowzjx/ns3-ecn-sharp, `ecn-sharp-queue-disc.cc`)
//! has the same structure but differs in two details we do **not** copy,
//! since the paper is the reference here: it marks when `now >= markNext`
//! (A1:7 says `>`), and schedules `markNext = now + interval/√count` (A1:9
//! says `marking_next += ...`, i.e. from the schedule, not from the packet),
//! and it arms detection at `first_above_time = now + pst_interval` (same
//! timing as A1:27–28, different bookkeeping).
//!
//! State is kept per queue (the Tofino prototype keeps it per egress
//! port/queue in register arrays, §4).
//!
//! Units: ns. Defaults (§3.4 rule of thumb, with `--rtt` read as the
//! high-percentile RTT): `ins_target = RTT` (λ = 1: §5.2 uses 200 µs for RTTs of
//! 70–210 µs), `pst_interval = RTT` ("around the high percentile RTT"),
//! `pst_target = 0.425 × RTT` (§5.2: 85 µs against 200 µs; §3.4 asks for
//! ≥ λ × average RTT, which we do not know separately).

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_duration, scale_ns, ser_duration};
use super::{Aqm, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos};
use serde::{Deserialize, Serialize};

/// ECN♯ configuration parameters (Table 2).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Threshold for instantaneous marking, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub ins_target: Nanos,
    /// Persistent queueing target, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub pst_target: Nanos,
    /// Interval to determine persistent queueing, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub pst_interval: Nanos,
}

/// pst_target / RTT from the §5.2 testbed (85 µs / 200 µs).
pub const PST_TARGET_PER_RTT: f64 = 0.425;

impl Default for Config {
    /// The §5.2 testbed: ins_target 200 µs, pst_interval 200 µs, pst_target 85 µs.
    fn default() -> Self {
        Config::for_rtt(200_000, 1.0)
    }
}

impl Config {
    /// §3.4 rule of thumb for a high-percentile RTT.
    pub fn for_rtt(rtt_ns: Nanos, lambda: f64) -> Self {
        Config {
            ins_target: scale_ns(rtt_ns, lambda),
            pst_target: scale_ns(rtt_ns, PST_TARGET_PER_RTT),
            pst_interval: rtt_ns,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.pst_interval == 0 {
            return Err("ecn-sharp: pst_interval must be > 0 (e.g. pst_interval=200us)".into());
        }
        if self.pst_target > self.ins_target {
            return Err(format!(
                "ecn-sharp: pst_target ({}) above ins_target ({}) makes the persistent marking useless (ECN♯ paper §3.4)",
                fmt_duration(self.pst_target),
                fmt_duration(self.ins_target)
            ));
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        format!(
            "ecn-sharp: mark at dequeue if sojourn > ins_target = {} or persistent (Algorithm 1: pst_target = {}, pst_interval = {}) (ECN♯ paper §3)",
            fmt_duration(self.ins_target),
            fmt_duration(self.pst_target),
            fmt_duration(self.pst_interval)
        )
    }
}

/// `marking_next += pst_interval / sqrt(marking_count)` (A1:9): the increment, ns.
pub fn next_marking_gap(pst_interval: Nanos, marking_count: u32) -> Nanos {
    (pst_interval as f64 / (marking_count as f64).sqrt()).round() as Nanos
}

/// Algorithm 1 variables of one queue (Table 2).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Vars {
    /// If ECN♯ has marked packets (is in the persistent-marking state).
    pub marking_state: bool,
    /// Number of persistent marks in this marking state.
    pub marking_count: u32,
    /// The next persistent marking time, ns.
    pub marking_next: Nanos,
    /// When sojourn time started to exceed pst_target (0 = unset), ns.
    pub first_above_time: Nanos,
}

/// Counters of one port.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// Packets seen at dequeue.
    pub packets: u64,
    /// Marks by the instantaneous test.
    pub marks_instantaneous: u64,
    /// Marks by Algorithm 1 (counted even when the instantaneous test also fired).
    pub marks_persistent: u64,
    /// The smallest sojourn of each `pst_interval` window, against
    /// `pst_target` (a measurement, not part of Algorithm 1).
    pub window_min: WindowMins,
}

/// The minimum sojourn of each `pst_interval` window, per queue.
///
/// Algorithm 1 detects a persistent queue only when *no* packet left below
/// `pst_target` for a whole `pst_interval` (A1:22–29), so it regulates
/// the windows' minimum sojourn towards `pst_target`, not their median
/// (CoDel's control variable, which Algorithm 1 adopts). These counters make
/// that visible: windows lie on a grid of `pst_interval` from the queue's
/// first dequeue, a window's minimum is over the packets that left in it,
/// and windows in which no packet left are not counted. Measurement only:
/// it does not change what is marked.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowMins {
    /// Windows closed.
    pub windows: u64,
    /// Sum of their minima, ns (mean = sum_ns / windows).
    pub sum_ns: u64,
    /// Windows whose minimum was below 0.5, 0.5–1, 1–1.5, 1.5–2 and at
    /// least 2 × `pst_target`.
    pub vs_target: [u64; 5],
}

impl WindowMins {
    /// Counts one window whose minimum sojourn was `min`.
    fn record(&mut self, min: Nanos, target: Nanos) {
        self.windows += 1;
        self.sum_ns = self.sum_ns.saturating_add(min);
        let i = match min.saturating_mul(2).checked_div(target) {
            Some(half_targets) => half_targets.min(4) as usize,
            None => 4,
        };
        self.vs_target[i] += 1;
    }
}

/// The window a queue's dequeues currently fall in.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    open: bool,
    start: Nanos,
    min: Nanos,
}

/// An ECN♯ instance for one port, state per queue.
#[derive(Clone, Debug)]
pub struct EcnSharp {
    params: Config,
    vars: Vec<Vars>,
    windows: Vec<Window>,
    counters: Counters,
}

impl EcnSharp {
    /// Builds from a validated config for `num_queues` queues.
    pub fn new(params: Config, num_queues: usize) -> Self {
        EcnSharp {
            params,
            vars: vec![Vars::default(); num_queues.max(1)],
            windows: vec![Window::default(); num_queues.max(1)],
            counters: Counters::default(),
        }
    }

    /// Algorithm 1, `IsPersistentQueueBuildups(pkt)` (A1:21–32).
    fn is_persistent_queue_buildups(
        &mut self,
        queue: usize,
        sojourn_time: Nanos,
        now: Nanos,
    ) -> bool {
        let p = &self.params;
        let v = &mut self.vars[queue];
        // A1:22  if pkt.sojourn_time < pst_target then
        if sojourn_time < p.pst_target {
            // A1:23  first_above_time = 0
            v.first_above_time = 0;
            // A1:24  return false
            return false;
        }
        // A1:26  if first_above_time == 0 then
        if v.first_above_time == 0 {
            // A1:27  first_above_time = now()
            v.first_above_time = now;
        // A1:28  else if now() > first_above_time + pst_interval then
        } else if now > v.first_above_time + p.pst_interval {
            // A1:29  return true
            return true;
        }
        // A1:31  return false
        false
    }

    /// Algorithm 1, `ShouldPersistentMark(pkt)` (A1:1–20).
    fn should_persistent_mark(&mut self, queue: usize, sojourn_time: Nanos, now: Nanos) -> bool {
        // A1:2  detected = IsPersistentQueueBuildups(pkt)
        let detected = self.is_persistent_queue_buildups(queue, sojourn_time, now);
        let pst_interval = self.params.pst_interval;
        let v = &mut self.vars[queue];
        // A1:3  if marking_state == true then
        if v.marking_state {
            // A1:4  if detected == false then
            if !detected {
                // A1:5  marking_state = false
                v.marking_state = false;
                // A1:6  return false
                return false;
            // A1:7  else if now() > marking_next then
            } else if now > v.marking_next {
                // A1:8  marking_count ++
                v.marking_count += 1;
                // A1:9  marking_next += pst_interval / sqrt(marking_count)
                v.marking_next += next_marking_gap(pst_interval, v.marking_count);
                // A1:10 return true
                return true;
            }
        // A1:12 else (not in marking state)
        } else if detected {
            // A1:13 if detected == true then
            // A1:14 marking_state = true
            v.marking_state = true;
            // A1:15 marking_count = 1
            v.marking_count = 1;
            // A1:16 marking_next = now() + pst_interval
            v.marking_next = now + pst_interval;
            // A1:17 return true
            return true;
        }
        // A1:19 return false
        false
    }

    /// Takes a dequeue's sojourn into its queue's `pst_interval` window,
    /// counting the window it closes (see [`WindowMins`]).
    fn observe_window(&mut self, queue: usize, sojourn: Nanos, now: Nanos) {
        let pi = self.params.pst_interval.max(1);
        let w = &mut self.windows[queue];
        let closed = if !w.open {
            *w = Window {
                open: true,
                start: now,
                min: sojourn,
            };
            None
        } else if now >= w.start.saturating_add(pi) {
            let min = w.min;
            w.start += (now - w.start) / pi * pi;
            w.min = sojourn;
            Some(min)
        } else {
            w.min = w.min.min(sojourn);
            None
        };
        if let Some(min) = closed {
            self.counters.window_min.record(min, self.params.pst_target);
        }
    }

    /// Per-queue Algorithm 1 variables and counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "ecn-sharp",
            "params": self.params,
            "queues": self.vars,
            "counters": self.counters,
        })
    }
}

impl Aqm for EcnSharp {
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, _rng: &mut SimRng) -> Verdict {
        let queue = q.queue.min(self.vars.len() - 1);
        let sojourn_time = now.saturating_sub(pkt.enqueue_ns);
        self.counters.packets += 1;
        self.observe_window(queue, sojourn_time, now);
        // Both procedures run on every packet (see the module header).
        let persistent = self.should_persistent_mark(queue, sojourn_time, now);
        if persistent {
            self.counters.marks_persistent += 1;
        }
        if sojourn_time > self.params.ins_target {
            self.counters.marks_instantaneous += 1;
            Verdict::Mark(MarkReason::Sojourn)
        } else if persistent {
            Verdict::Mark(MarkReason::Persistent)
        } else {
            Verdict::Pass
        }
    }
}

impl AqmParams for Config {
    type Instance = EcnSharp;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        (
            "ins_target",
            "instantaneous marking: sojourn above it, time",
        ),
        (
            "pst_target",
            "persistent queueing: sojourn at or above it ..., time",
        ),
        ("pst_interval", "... for longer than this, time"),
    ];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_rtt(env.rtt_ns, 1.0)
    }
    fn build(&self, env: &AqmEnv) -> Result<EcnSharp, AqmConfigError> {
        Ok(EcnSharp::new(self.clone(), env.num_queues.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect};
    use crate::units::US;

    const INS: Nanos = 200 * US;
    const PT: Nanos = 85 * US;
    const PI: Nanos = 200 * US;

    fn sharp() -> EcnSharp {
        let c = Config {
            ins_target: INS,
            pst_target: PT,
            pst_interval: PI,
        };
        c.validate().unwrap();
        EcnSharp::new(c, 2)
    }

    /// Dequeues, every `step` ns from `from` (inclusive) to `to` (exclusive),
    /// a packet whose sojourn is `sojourn`; returns the times of persistent marks.
    fn run(a: &mut EcnSharp, from: Nanos, to: Nanos, step: Nanos, sojourn: Nanos) -> Vec<Nanos> {
        let mut rng = SimRng::new(1);
        let mut marks = vec![];
        let mut t = from;
        while t < to {
            match a.on_dequeue(&ect(1500, t - sojourn), &ctx(0, 15_000, 10), t, &mut rng) {
                Verdict::Mark(MarkReason::Persistent) => marks.push(t),
                Verdict::Pass => {}
                v => panic!("unexpected {v:?} at {t}"),
            }
            t += step;
        }
        marks
    }

    #[test]
    fn persistent_marking_schedule_follows_algorithm_1() {
        let mut a = sharp();
        let t0 = 1_000_000; // first packet above pst_target
        let step = US; // one packet per µs
        let marks = run(&mut a, t0, t0 + 2_000 * US, step, 100 * US);
        // First packet strictly after `t` (A1:7 and A1:28 use `>`).
        let after = |t: Nanos| (t / step + 1) * step;
        // Detected at the first packet with now > first_above_time + pst_interval (A1:28).
        let first = t0 + PI + step;
        assert_eq!(marks[0], first);
        // Second mark: first packet with now > marking_next = first + pst_interval (A1:16, A1:7).
        assert_eq!(marks[1], first + PI + step);
        // marking_next advanced by pst_interval/√2 from the *schedule* (A1:9).
        let next2 = first + PI + next_marking_gap(PI, 2);
        assert_eq!(marks[2], after(next2));
        let next3 = next2 + next_marking_gap(PI, 3);
        assert_eq!(marks[3], after(next3));
        assert_eq!(next_marking_gap(PI, 2), 141_421); // 200 µs / √2
        assert_eq!(next_marking_gap(PI, 3), 115_470); // 200 µs / √3
        assert_eq!(a.vars[0].marking_count as usize, marks.len());
        assert!(a.vars[0].marking_state);
        // Queue 1 untouched.
        assert!(!a.vars[1].marking_state && a.vars[1].first_above_time == 0);
    }

    #[test]
    fn sojourn_below_target_resets() {
        let mut a = sharp();
        let t0 = 1_000_000;
        let marks = run(&mut a, t0, t0 + 500 * US, US, 100 * US);
        assert!(!marks.is_empty());
        // One packet below pst_target: first_above_time = 0 and marking_state = false.
        let t1 = t0 + 500 * US;
        let mut rng = SimRng::new(1);
        assert_eq!(
            a.on_dequeue(&ect(1500, t1 - 10 * US), &ctx(0, 0, 0), t1, &mut rng),
            Verdict::Pass
        );
        assert_eq!(a.vars[0].first_above_time, 0);
        // The same call left the marking state (A1:4-5).
        assert!(!a.vars[0].marking_state);
        let marks2 = run(&mut a, t1 + US, t1 + 150 * US, US, 100 * US);
        assert!(marks2.is_empty());
        assert!(!a.vars[0].marking_state);
        assert_eq!(a.vars[0].first_above_time, t1 + US);
        // Detection needs a whole new pst_interval.
        let marks3 = run(&mut a, t1 + 150 * US, t1 + 400 * US, US, 100 * US);
        assert_eq!(marks3[0], t1 + US + PI + US);
        assert_eq!(a.vars[0].marking_count, 1);
    }

    #[test]
    fn sojourn_equal_to_pst_target_counts_as_above() {
        // A1:22 resets only when sojourn < pst_target.
        let mut a = sharp();
        let marks = run(&mut a, 1_000_000, 1_000_000 + 300 * US, US, PT);
        assert_eq!(marks.len(), 1);
    }

    #[test]
    fn window_minimum_is_counted_against_pst_target() {
        let mut a = sharp();
        let mut rng = SimRng::new(1);
        let t0 = 3_000_000;
        let mut deq = |a: &mut EcnSharp, t: Nanos, sojourn: Nanos| {
            a.on_dequeue(&ect(1500, t - sojourn), &ctx(0, 0, 1), t, &mut rng);
        };
        // Window [t0, t0 + 200 µs): minimum 50 µs (0.5–1 × pst_target 85 µs).
        deq(&mut a, t0, 100 * US);
        deq(&mut a, t0 + 80 * US, 50 * US);
        deq(&mut a, t0 + 199 * US, 120 * US);
        assert_eq!(a.counters.window_min.windows, 0, "still open");
        // The next window, [t0 + 200, t0 + 400 µs): minimum 180 µs (≥ 2 ×).
        deq(&mut a, t0 + 250 * US, 200 * US);
        assert_eq!(a.counters.window_min.vs_target, [0, 1, 0, 0, 0]);
        deq(&mut a, t0 + 390 * US, 180 * US);
        // Nothing leaves in [t0 + 400, t0 + 600 µs): not a window. The packet
        // at t0 + 700 µs closes [t0 + 200, t0 + 400) and opens [t0 + 600, …).
        deq(&mut a, t0 + 700 * US, 10 * US);
        let w = &a.counters.window_min;
        assert_eq!(w.windows, 2);
        assert_eq!(w.vs_target, [0, 1, 0, 0, 1]);
        assert_eq!(w.sum_ns, 230 * US);
        assert_eq!(a.windows[0].start, t0 + 600 * US);
        assert_eq!(a.windows[0].min, 10 * US);
        // t0 + 810 µs closes [t0 + 600, t0 + 800) (minimum 10 µs: below 0.5 ×).
        deq(&mut a, t0 + 810 * US, PT);
        assert_eq!(a.counters.window_min.vs_target, [1, 1, 0, 0, 1]);
        // Another queue keeps its own window.
        let mut rng1 = SimRng::new(2);
        a.on_dequeue(&ect(1500, t0), &ctx(1, 0, 1), t0 + 820 * US, &mut rng1);
        assert_eq!(a.counters.window_min.windows, 3);
        assert!(a.windows[1].open && a.windows[1].start == t0 + 820 * US);
        // A minimum of exactly pst_target counts in 1–1.5 ×.
        deq(&mut a, t0 + 1_000 * US, 500 * US);
        assert_eq!(a.counters.window_min.vs_target, [1, 1, 1, 0, 1]);
        assert_eq!(a.counters.window_min.windows, 4);
    }

    #[test]
    fn instantaneous_target_marks_independently() {
        let mut a = sharp();
        let mut rng = SimRng::new(1);
        let t = 5_000_000;
        // Sojourn exactly ins_target: not marked (strict >). First above pst_target.
        assert_eq!(
            a.on_dequeue(&ect(1500, t - INS), &ctx(0, 0, 1), t, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            a.on_dequeue(&ect(1500, t - INS - 1), &ctx(0, 0, 1), t + 1, &mut rng),
            Verdict::Mark(MarkReason::Sojourn)
        );
        // No persistent state entered yet, but first_above_time is tracked.
        assert!(!a.vars[0].marking_state);
        assert_eq!(a.vars[0].first_above_time, t);
        assert_eq!(a.counters.marks_instantaneous, 1);
    }
}

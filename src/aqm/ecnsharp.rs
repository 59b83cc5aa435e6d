//! ECN♯ — instantaneous + persistent-queue ECN marking.
//!
//! Junxue Zhang, Wei Bai, Kai Chen, "Enabling ECN for Datacenter Networks with
//! RTT Variations", ACM CoNEXT 2019 (`papers/ecnsharp.txt`).
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
//! extraction in `papers/ecnsharp.txt` scrambles them; we take `A1:16` =
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
                "ecn-sharp: pst_target ({}) above ins_target ({}) makes the persistent marking useless (ecnsharp.txt §3.4)",
                fmt_duration(self.pst_target),
                fmt_duration(self.ins_target)
            ));
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        format!(
            "ecn-sharp: mark at dequeue if sojourn > ins_target = {} or persistent (Algorithm 1: pst_target = {}, pst_interval = {}) (ecnsharp.txt §3)",
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
}

/// An ECN♯ instance for one port, state per queue.
#[derive(Clone, Debug)]
pub struct EcnSharp {
    params: Config,
    vars: Vec<Vars>,
    counters: Counters,
}

impl EcnSharp {
    /// Builds from a validated config for `num_queues` queues.
    pub fn new(params: Config, num_queues: usize) -> Self {
        EcnSharp {
            params,
            vars: vec![Vars::default(); num_queues.max(1)],
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

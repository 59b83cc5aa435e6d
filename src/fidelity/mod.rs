//! The fidelity guard: does a run through softswitch behave like the link it
//! emulates, and if not, why.
//!
//! A switch ASIC never stalls; a busy-polling thread sharing two vCPUs with
//! every host's TCP stack sometimes does. Three things are measured that a
//! real link would never do:
//!
//! * **Link time lost while backlogged** (per port, [`LinkFidelity`] from the
//!   shaper): while the port held packets, credit overflowed the token bucket
//!   because the data path did not come back in time. `lost / busy` is the
//!   share of the emulated link's capacity the machine failed to deliver.
//! * **Bursts above `rate + bucket`** (per port): frames that left above the
//!   strict envelope, possible only with the opt-in catch-up.
//! * **Loop stalls** (the data path): passes that started more than 100 µs
//!   after the previous one, their total and the longest. During a stall no
//!   frame is received or sent on any port, whether or not a queue was
//!   backlogged: frames wait in the kernel's rings, invisible to the AQM.
//!   Each stall's time is split into tx kicks, yields and waiting for a CPU
//!   ([`StallTime`]), and its reason names where most of it went
//!   ([`stall_cause`]).
//!
//! [`judge`] turns them into a verdict against [`Thresholds`]; the exit
//! report, `softswitch stats`, `--json` and `softswitch-exp` all carry it.
//! Defaults: ≤ 1 % of backlogged link time lost, no excess burst, no single
//! stall above 5 ms (the hosts' RTO_min in the papers' testbeds is 5–10 ms:
//! a longer stall can fire a timeout no real switch would cause), and at
//! most 2 % of the run spent in stalls. A port that lost less link time in
//! all than one tolerated stall is not judged on its share
//! ([`judged_lost_floor`]).

mod passes;

pub use passes::{PassIntervals, STALL_NS};

use serde::Serialize;

use crate::shaper::LinkFidelity;
use crate::units::{Nanos, MS};

/// Limits beyond which a run is not faithful.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// Largest share of a port's backlogged time that may be lost (0.01 = 1 %).
    pub max_lost: f64,
    /// Longest single data-path stall, real ns. Under time dilation
    /// `--max-stall` is an emulated time, as every time setting: a real
    /// stall of `s` halts the emulated link for `s / D`, so the limit in
    /// real time is `--max-stall × D` (see [`Thresholds::dilated`]).
    pub max_stall_ns: Nanos,
    /// Largest share of the run spent in stalls (passes > 100 µs apart).
    pub max_stalled: f64,
    /// The time dilation D `max_stall_ns` was scaled by (1: none).
    pub dilation: f64,
}

impl Thresholds {
    /// These limits with `max_stall_ns` taken as emulated time under
    /// dilation `d`: the real limit is `d` times longer. The shares
    /// (`max_lost`, `max_stalled`) are the same in either time.
    pub fn dilated(self, d: crate::timebase::Dilation) -> Self {
        Thresholds {
            max_stall_ns: d.to_real_ns(self.max_stall_ns),
            dilation: d.factor(),
            ..self
        }
    }

    /// The stall limit as a user set it: `5 ms`, or under dilation
    /// `40 ms (--max-stall 5 ms emulated × D 8)`.
    pub fn describe_max_stall(&self) -> String {
        if self.dilation == 1.0 {
            human_time(self.max_stall_ns)
        } else {
            format!(
                "{} (--max-stall {} emulated × D {})",
                human_time(self.max_stall_ns),
                human_time((self.max_stall_ns as f64 / self.dilation).round() as Nanos),
                self.dilation
            )
        }
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_lost: 0.01,
            max_stall_ns: 5 * MS,
            max_stalled: 0.02,
            dilation: 1.0,
        }
    }
}

/// The data path's stalls over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LoopStalls {
    /// Run time covered, ns.
    pub elapsed_ns: Nanos,
    /// Passes that started more than 100 µs after the previous one.
    pub count: u64,
    /// Sum of those intervals, ns.
    pub stalled_ns: Nanos,
    /// Longest interval between passes, ns.
    pub max_ns: Nanos,
    /// Where the stalled time went, in all.
    pub within: StallTime,
    /// Where the longest stall's time went.
    pub max_within: StallTime,
}

/// With `--tx-thread`, how long frames the data path published waited on
/// the tx rings for the kernel to take them (real time). Each publish (a
/// batch of frames) is timed from the pass that published it to the pass
/// that finds the kernel's consumer index past it. Frames that wait reach
/// their host late, as behind a stall of the data path, so the guard
/// judges the waits as it judges stalls: the longest against
/// `--max-stall`, and the time during which some frame had waited over
/// [`TxWaits::LATE_NS`] (a union over the batches, not a sum) against
/// `--max-stalled`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxWaits {
    /// Batches published and taken.
    pub batches: u64,
    /// The longest wait, ns.
    pub max_ns: Nanos,
    /// Batches that waited over [`TxWaits::LATE_NS`].
    pub late: u64,
    /// Time during which a frame on a tx ring had waited over
    /// [`TxWaits::LATE_NS`], ns.
    pub late_ns: Nanos,
    /// End of the last late stretch counted (for the union).
    #[serde(skip)]
    late_until: Nanos,
}

impl TxWaits {
    /// A wait this long counts, as a pass interval does for a stall.
    pub const LATE_NS: Nanos = 100_000;

    /// A batch published at `published` and taken by the kernel by `taken`
    /// (real ns). Batches come in the order they were published.
    pub fn note(&mut self, published: Nanos, taken: Nanos) {
        let wait = taken.saturating_sub(published);
        self.batches += 1;
        self.max_ns = self.max_ns.max(wait);
        if wait > Self::LATE_NS {
            self.late += 1;
            let from = (published + Self::LATE_NS).max(self.late_until);
            self.late_ns += taken.saturating_sub(from);
            self.late_until = self.late_until.max(taken);
        }
    }
}

/// Where a data-path pass (or a sum of them) spent the time that was not
/// its own code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StallTime {
    /// Inside tx kicks (`sendto`: the kernel delivering frames to the hosts'
    /// veths and running their stacks in softirq on the switch's CPU), ns.
    pub kicks_ns: Nanos,
    /// Inside `sched_yield`: the idle switch gave its CPU away, ns.
    pub yield_ns: Nanos,
    /// Waiting for a CPU (runnable, not running: other tasks ran on the
    /// switch's CPU), from the thread's schedstat; includes yields, ns.
    pub waited_ns: Nanos,
    /// Stolen: the thread was neither running nor waiting for a CPU — its
    /// vCPU was not running (the hypervisor gave the host's CPU to
    /// another guest or its own work; Linux's steal time). Real time
    /// minus the thread's CPU time (which excludes steal under paravirt
    /// steal accounting) minus its wait, over the window since the
    /// previous reading, ns. Part of it may also be inside a kick.
    pub stolen_ns: Nanos,
}

impl StallTime {
    /// Each part clamped to an interval `ns` long: kicks first, the yield
    /// in what is left; the wait (which a yield is part of) to `ns`.
    pub fn clamped(self, ns: Nanos) -> Self {
        let kicks_ns = self.kicks_ns.min(ns);
        StallTime {
            kicks_ns,
            yield_ns: self.yield_ns.min(ns - kicks_ns),
            waited_ns: self.waited_ns.min(ns),
            stolen_ns: self.stolen_ns.min(ns),
        }
    }

    /// Adds `o` part by part.
    pub fn add(&mut self, o: StallTime) {
        self.kicks_ns += o.kicks_ns;
        self.yield_ns += o.yield_ns;
        self.waited_ns += o.waited_ns;
        self.stolen_ns += o.stolen_ns;
    }
}

/// The guard's judgement of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// No threshold exceeded.
    pub faithful: bool,
    /// Why not (empty when faithful), one sentence each.
    pub reasons: Vec<String>,
    /// The limits applied.
    pub thresholds: Thresholds,
}

/// The guard's verdict in a word, as every report writes it: `faithful` or
/// `NOT FAITHFUL`.
pub fn label(faithful: bool) -> &'static str {
    if faithful {
        "faithful"
    } else {
        "NOT FAITHFUL"
    }
}

impl Verdict {
    /// [`label`] of this verdict.
    pub fn label(&self) -> &'static str {
        label(self.faithful)
    }
}

/// A duration for people: `850 us`, `12.3 ms`, `2.41 s`.
pub fn human_time(ns: Nanos) -> String {
    if ns >= 10 * crate::units::SEC {
        format!("{:.1} s", ns as f64 / 1e9)
    } else if ns >= crate::units::SEC {
        format!("{:.2} s", ns as f64 / 1e9)
    } else if ns >= MS {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} us", ns as f64 / 1e3)
    }
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// The smallest floor below which a port's lost link time is not judged on
/// its share, whatever `max_stall_ns` is: a port backlogged for only a few
/// hundred microseconds in a whole run (a receiver's ACK port; incast
/// senders' ports) reaches a "2 %" with a handful of microseconds, which
/// cannot move any result. 1 ms.
pub const MIN_JUDGED_LOST_NS: Nanos = 1_000_000;

/// A port is judged on its lost share only when it lost, in all, more link
/// time than one stall the guard tolerates (`max_stall_ns`, 5 ms by
/// default; at least [`MIN_JUDGED_LOST_NS`]). Less than that is what a
/// single accepted stall costs a port that happened to be backlogged then —
/// e.g. 16 incast responder ports, backlogged ≈ 17 ms each in a 30 s run,
/// each losing 1.0 ms of it to one 1 ms stall ("6 %") — and judging it would
/// make the lost-time rule stricter than the stall rule. A port busy long
/// enough that the share matters (≥ max_stall / max_lost = 500 ms of
/// backlog at the defaults) is judged exactly as before.
pub fn judged_lost_floor(max_stall_ns: Nanos) -> Nanos {
    max_stall_ns.max(MIN_JUDGED_LOST_NS)
}

/// Where `stalled_ns` of stalls went, for a reason, most specific first: a
/// yield (the idle switch gave its CPU away and another task kept it),
/// waiting for a CPU (other tasks ran on the switch's CPU: other load, or
/// the hosts' processes), tx kicks (the kernel delivering frames to the
/// hosts and running their stacks on the switch's CPU), and what is left:
/// the thread on its CPU but not in its loop (interrupts, or its vCPU paused
/// by the hypervisor). Stolen time (the vCPU not running: steal) comes
/// first, since it can fall inside any of the others (a kick the hypervisor
/// interrupted lasts as long as the theft). A part is named when it is at
/// least half the time; otherwise the larger of kicks and the rest.
pub fn stall_cause(stalled_ns: Nanos, w: &StallTime) -> String {
    let half = stalled_ns.div_ceil(2);
    let rest = stalled_ns.saturating_sub(w.kicks_ns + w.waited_ns.max(w.yield_ns));
    if w.stolen_ns >= half {
        format!(
            "{} of it stolen: the switch's vCPU was not running (steal time — the \
             hypervisor ran other work on the host's CPU; this machine's host, not \
             softswitch or the hosts' stacks)",
            human_time(w.stolen_ns)
        )
    } else if w.yield_ns >= half {
        format!(
            "{} of it after the idle switch yielded its CPU (another task, a host's \
             process or a kernel thread, kept it)",
            human_time(w.yield_ns)
        )
    } else if w.waited_ns >= half {
        format!(
            "{} of it waiting for a CPU while other tasks ran on the switch's (other \
             load on the machine, or the hosts' processes; `--cpu` with the hosts' \
             processes on other CPUs helps)",
            human_time(w.waited_ns)
        )
    } else if w.kicks_ns >= rest {
        format!(
            "{} of it inside tx kicks (the kernel delivering frames to the hosts and \
             running their stacks on the switch's CPU)",
            human_time(w.kicks_ns)
        )
    } else {
        format!(
            "{} of it on its CPU but outside its loop, tx kicks and yields (interrupts, \
             or the vCPU paused by the hypervisor)",
            human_time(rest)
        )
    }
}

/// Judges a run: each port's link fidelity and the data path's stalls.
pub fn judge(
    ports: &[(&str, LinkFidelity)],
    stalls: Option<&LoopStalls>,
    tx_waits: Option<&TxWaits>,
    th: &Thresholds,
) -> Verdict {
    let mut reasons = Vec::new();
    for (name, f) in ports {
        if f.lost_fraction() > th.max_lost && f.lost_ns > judged_lost_floor(th.max_stall_ns) {
            reasons.push(format!(
                "port {name} lost {} of its backlogged link time ({} of {}; limit {})",
                pct(f.lost_fraction()),
                human_time(f.lost_ns),
                human_time(f.busy_ns),
                pct(th.max_lost)
            ));
        }
        if f.excess_pkts > 0 {
            reasons.push(format!(
                "port {name} sent {} frames ({} B) above rate + bucket (catch-up bursts)",
                f.excess_pkts, f.excess_bytes
            ));
        }
    }
    if let Some(s) = stalls {
        let of_run = |ns: Nanos| {
            if s.elapsed_ns == 0 {
                0.0
            } else {
                ns as f64 / s.elapsed_ns as f64
            }
        };
        if s.max_ns > th.max_stall_ns {
            reasons.push(format!(
                "the data path stalled for {} at once (limit {}); {}",
                human_time(s.max_ns),
                th.describe_max_stall(),
                stall_cause(s.max_ns, &s.max_within)
            ));
        }
        let share = of_run(s.stalled_ns);
        if share > th.max_stalled {
            reasons.push(format!(
                "the data path spent {} of the run in {} stalls over 100 us (limit {}); {}",
                pct(share),
                s.count,
                pct(th.max_stalled),
                stall_cause(s.stalled_ns, &s.within)
            ));
        }
        if let Some(w) = tx_waits {
            if w.max_ns > th.max_stall_ns {
                reasons.push(format!(
                    "frames waited {} at once on a tx ring for the tx thread's kick (limit {}): \
                     they reached their host that late",
                    human_time(w.max_ns),
                    th.describe_max_stall(),
                ));
            }
            let share = of_run(w.late_ns);
            if share > th.max_stalled {
                reasons.push(format!(
                    "frames on the tx rings waited for the tx thread's kicks: {} batches waited \
                     over 100 us, for {} of the run (limit {}); the kicks, with the receiving \
                     hosts' stacks in them, ran late on the hosts' CPUs",
                    w.late,
                    pct(share),
                    pct(th.max_stalled),
                ));
            }
        }
    }
    Verdict {
        faithful: reasons.is_empty(),
        reasons,
        thresholds: *th,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(busy_ms: u64, lost_us: u64, excess: u64) -> LinkFidelity {
        LinkFidelity {
            busy_ns: busy_ms * MS,
            lost_ns: lost_us * 1_000,
            excess_bytes: excess * 1538,
            excess_pkts: excess,
        }
    }

    #[test]
    fn a_clean_run_is_faithful() {
        let v = judge(
            &[("p0", link(1000, 5_000, 0)), ("p1", link(0, 0, 0))],
            Some(&LoopStalls {
                elapsed_ns: 10_000 * MS,
                count: 20,
                stalled_ns: 4 * MS,
                max_ns: 400_000,
                within: StallTime::default(),
                max_within: StallTime::default(),
            }),
            None,
            &Thresholds::default(),
        );
        assert!(v.faithful, "{v:?}");
        assert!(v.reasons.is_empty());
    }

    #[test]
    fn microseconds_lost_on_a_barely_busy_port_are_not_judged() {
        let th = Thresholds::default();
        // An ACK port backlogged 369 µs in all that lost 6 µs (1.6 %).
        let ack = LinkFidelity {
            busy_ns: 369_000,
            lost_ns: 6_000,
            excess_bytes: 0,
            excess_pkts: 0,
        };
        assert!(judge(&[("ack", ack)], None, None, &th).faithful);
        // 16 incast responder ports, each backlogged 16.8 ms in all, each
        // lost 1.0 ms to one stall: less than one tolerated (5 ms) stall.
        let responder = LinkFidelity {
            busy_ns: 16_800_000,
            lost_ns: 1_030_000,
            excess_bytes: 0,
            excess_pkts: 0,
        };
        assert!(judge(&[("h1", responder), ("h2", responder)], None, None, &th).faithful);
        // 6 ms lost of 100 ms backlogged (6 %) is judged.
        let v = judge(&[("data", link(100, 6_000, 0))], None, None, &th);
        assert!(!v.faithful);
        assert!(
            v.reasons[0].starts_with("port data lost 6.0 %"),
            "{:?}",
            v.reasons
        );
        // Exactly one tolerated stall's worth is not judged; 1 µs more is.
        assert!(judge(&[("d", link(100, 5_000, 0))], None, None, &th).faithful);
        assert!(!judge(&[("d", link(100, 5_001, 0))], None, None, &th).faithful);
        // A stricter stall limit lowers the floor with it, down to 1 ms.
        let strict = Thresholds {
            max_stall_ns: 2 * MS,
            ..th
        };
        assert!(!judge(&[("d", link(100, 2_001, 0))], None, None, &strict).faithful);
        let strictest = Thresholds {
            max_stall_ns: 100_000,
            ..th
        };
        assert_eq!(
            judged_lost_floor(strictest.max_stall_ns),
            MIN_JUDGED_LOST_NS
        );
        assert!(judge(&[("d", link(10, 1_000, 0))], None, None, &strictest).faithful);
        assert!(!judge(&[("d", link(10, 1_001, 0))], None, None, &strictest).faithful);
    }

    /// Under dilation D a real stall of `s` halts the emulated link for
    /// `s / D`: `--max-stall` is emulated, its real limit D times longer, so
    /// a larger D never makes the same machine hiccup less faithful.
    #[test]
    fn the_stall_limit_is_emulated_time_under_dilation() {
        let stall = |max_ns| LoopStalls {
            elapsed_ns: 10_000 * MS,
            count: 1,
            stalled_ns: max_ns,
            max_ns,
            ..LoopStalls::default()
        };
        let d8 = crate::timebase::Dilation::new(8.0).unwrap();
        let th = Thresholds::default();
        let dilated = th.dilated(d8);
        assert_eq!(dilated.max_stall_ns, 40 * MS);
        assert_eq!(
            (dilated.max_lost, dilated.max_stalled),
            (th.max_lost, th.max_stalled)
        );
        // 6.6 ms real: over 5 ms at D = 1, 0.83 ms emulated at D = 8.
        let s = stall(6_600_000);
        assert!(!judge(&[], Some(&s), None, &th).faithful);
        assert!(judge(&[], Some(&s), None, &dilated).faithful);
        // Past the real limit, the reason gives both times.
        let v = judge(&[], Some(&stall(41 * MS)), None, &dilated);
        assert!(!v.faithful);
        assert!(
            v.reasons[0].contains("(limit 40.0 ms (--max-stall 5.0 ms emulated × D 8))"),
            "{}",
            v.reasons[0]
        );
        // The lost-time floor is one tolerated stall, so it scales too.
        assert_eq!(judged_lost_floor(dilated.max_stall_ns), 40 * MS);
        // D = 1 changes nothing.
        let one = crate::timebase::Dilation::new(1.0).unwrap();
        assert_eq!(th.dilated(one), th);
    }

    #[test]
    fn each_limit_names_its_reason() {
        let th = Thresholds::default();
        // 2 % lost on p0, excess bursts on p1, one 16 ms stall, 5 % stalled.
        let v = judge(
            &[("p0", link(1000, 20_000, 0)), ("p1", link(1000, 0, 3))],
            Some(&LoopStalls {
                elapsed_ns: 10_000 * MS,
                count: 3_174,
                stalled_ns: 500 * MS,
                max_ns: 16 * MS,
                within: StallTime {
                    kicks_ns: 400 * MS,
                    yield_ns: 50 * MS,
                    waited_ns: 60 * MS,
                    stolen_ns: 0,
                },
                max_within: StallTime {
                    kicks_ns: MS,
                    ..StallTime::default()
                },
            }),
            None,
            &th,
        );
        assert!(!v.faithful);
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert!(
            v.reasons[0].starts_with("port p0 lost 2.0 %"),
            "{}",
            v.reasons[0]
        );
        assert!(v.reasons[1].contains("3 frames"), "{}", v.reasons[1]);
        assert!(v.reasons[2].contains("16.0 ms at once"), "{}", v.reasons[2]);
        // The longest stall was mostly outside tx kicks, the stalled time in
        // all mostly inside them: each reason says where its time went.
        assert!(
            v.reasons[2].contains("15.0 ms of it on its CPU but outside its loop"),
            "{}",
            v.reasons[2]
        );
        assert!(
            v.reasons[3].contains("5.0 % of the run in 3174 stalls"),
            "{}",
            v.reasons[3]
        );
        assert!(
            v.reasons[3].contains("400.0 ms of it inside tx kicks"),
            "{}",
            v.reasons[3]
        );
        // A stall mostly spent after a yield is put there (a yield's time is
        // also wait); one mostly waiting for a CPU otherwise, there.
        let t = |kicks_ns, yield_ns, waited_ns| StallTime {
            kicks_ns,
            yield_ns,
            waited_ns,
            stolen_ns: 0,
        };
        let yielded = stall_cause(2 * MS, &t(100_000, 1_500_000, 1_600_000));
        assert!(
            yielded.starts_with("1.5 ms of it after the idle switch yielded"),
            "{yielded}"
        );
        let preempted = stall_cause(20 * MS, &t(9 * MS, 0, 19 * MS));
        assert!(
            preempted.starts_with("19.0 ms of it waiting for a CPU"),
            "{preempted}"
        );
        // Neither: the larger of kicks and the unexplained rest.
        let kicked = stall_cause(8 * MS, &t(5 * MS, 0, MS));
        assert!(
            kicked.starts_with("5.0 ms of it inside tx kicks"),
            "{kicked}"
        );
        let paused = stall_cause(8 * MS, &t(2 * MS, 0, MS));
        assert!(
            paused.starts_with("5.0 ms of it on its CPU but outside"),
            "{paused}"
        );
        // A stall whose time was mostly stolen says so, even inside a kick
        // (the hypervisor interrupted the kick).
        let stolen = stall_cause(
            15 * MS,
            &StallTime {
                kicks_ns: 14 * MS,
                stolen_ns: 12 * MS,
                ..StallTime::default()
            },
        );
        assert!(
            stolen.starts_with("12.0 ms of it stolen: the switch's vCPU was not running"),
            "{stolen}"
        );
        let some = stall_cause(
            15 * MS,
            &StallTime {
                kicks_ns: 14 * MS,
                stolen_ns: 7 * MS,
                ..StallTime::default()
            },
        );
        assert!(some.starts_with("14.0 ms of it inside tx kicks"), "{some}");
        // Exactly at the limit is still faithful.
        let v = judge(&[("p0", link(1000, 10_000, 0))], None, None, &th);
        assert!(v.faithful, "{v:?}");
    }

    #[test]
    fn frames_late_on_the_tx_rings_are_judged_as_stalls_are() {
        let th = Thresholds::default();
        let stalls = LoopStalls {
            elapsed_ns: 10_000 * MS,
            ..LoopStalls::default()
        };
        let mut w = TxWaits::default();
        // Waits of 50 µs, 100 µs (not late), 150 µs, and two batches taken
        // together after 3 ms and 2.9 ms: late time is the union, 50 µs
        // + (3 ms − 100 µs), not the sum.
        w.note(0, 50_000);
        w.note(1_000_000, 1_100_000);
        w.note(2_000_000, 2_150_000);
        w.note(10 * MS, 13 * MS);
        w.note(10 * MS + 100_000, 13 * MS);
        assert_eq!(
            (w.batches, w.max_ns, w.late, w.late_ns),
            (5, 3 * MS, 3, 50_000 + 3 * MS - 100_000)
        );
        assert!(judge(&[], Some(&stalls), Some(&w), &th).faithful);
        // One wait over --max-stall (5 ms): not faithful, and under
        // dilation the limit is emulated time, as for a stall.
        w.note(20 * MS, 26 * MS);
        let v = judge(&[], Some(&stalls), Some(&w), &th);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(
            v.reasons[0].contains("6.0 ms at once on a tx ring"),
            "{}",
            v.reasons[0]
        );
        let d2 = th.dilated(crate::timebase::Dilation::new(2.0).unwrap());
        assert!(judge(&[], Some(&stalls), Some(&w), &d2).faithful);
        // Frames late for over 2 % of the run: not faithful.
        let mut many = TxWaits::default();
        for k in 0..1001 {
            many.note(k * MS, k * MS + 300_000);
        }
        let v = judge(&[], Some(&stalls), Some(&many), &th);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(
            v.reasons[0].contains("1001 batches waited over 100 us, for 2.0 % of the run"),
            "{}",
            v.reasons[0]
        );
    }
}

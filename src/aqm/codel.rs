//! CoDel — Controlled Delay, dequeue side, marking ECT packets.
//!
//! K. Nichols, V. Jacobson, A. McGregor, J. Iyengar, "Controlled Delay Active
//! Queue Management", RFC 8289 (2018). Followed: the pseudo-code of §5
//! (`dequeue()`, `dodequeue()`, `control_law()`, §5.5–§5.6) — the
//! Linux variant the RFC prints.
//!
//! ```text
//!   ok_to_drop: sojourn ≥ TARGET and more than MAXPACKET left, continuously
//!               for more than INTERVAL (first_above_time = now + INTERVAL,
//!               ok once now > first_above_time)                     §5
//!   control_law(t, count) = t + INTERVAL / √count                    §5, §3.3
//!   entering drop state: count = count − lastcount if that is > 1 and
//!               now − drop_next < 16·INTERVAL (re-entering soon), else 1  §5
//! ```
//!
//! Where the RFC and Linux differ we follow Linux (`net/sched/sch_codel.c`,
//! `include/net/codel_impl.h` `codel_should_drop()`), as the TCN prototype's
//! CoDel does (HKUST-SING/TCN-Software `sch_wfq/main.c` `codel_should_mark()`,
//! "borrow from codel_should_drop in Linux kernel"):
//!
//! * **MAXPACKET is one MTU-sized frame**, compared with the bytes left in
//!   the queue after the departing packet: Linux tests `*backlog <=
//!   params->mtu` with `mtu = psched_mtu(dev)` = MTU + Ethernet header (1514
//!   B) and the backlog in frame bytes (`qdisc_pkt_len`), already reduced by
//!   the dequeued packet; the prototype `cl->len_bytes <= wfq_max_pkt_bytes`
//!   (1538, its wire bytes). So a queue holding at most one full-size frame
//!   is never "above target". Our queue bytes are frame bytes, so the
//!   default is MTU + 14 (1514 B).
//! * **Entering** needs `now > first_above_time` (Linux `codel_time_after`,
//!   the prototype likewise); the RFC's pseudo-code writes `>=`.
//! * Linux keeps 1/√count as a Q0.16 Newton iterate and counts time in
//!   1024 ns units; we compute √count exactly in ns (the iterate converges
//!   to it; its error is an implementation artefact, not part of the law).
//!
//! * **Marking.** With `ecn = true` an ECT packet that would be dropped is
//!   CE-marked (`Verdict::Mark(Persistent)`) and, as in Linux `codel_impl.h`,
//!   the dropping-state loop stops at that packet: `count++`,
//!   `drop_next = control_law(drop_next, count)`, deliver.
//! * **Not-ECT** (or `ecn = false`), `not_ect = "drop"` (default, Linux:
//!   `if (params->ecn && INET_ECN_set_ce(skb)) mark; else drop`):
//!   `Verdict::Drop(DropReason::Aqm)`, whatever the port's `--not-ect`. The
//!   RFC's `while (now >= drop_next && dropping)` loop, which drops several
//!   packets in a row, is played by the port: it dequeues the next packet
//!   and asks us again with the same `now`. We remember that the previous
//!   packet was dropped (`Pending`) and do exactly what the RFC does with the
//!   packet `dodequeue()` returns next: after an in-loop drop, leave the
//!   dropping state if it is not `ok_to_drop`, else schedule
//!   `drop_next = control_law(drop_next, count)` and test the loop condition
//!   again; after the drop that *enters* the dropping state, deliver it.
//! * `not_ect = "mark"` (option, the TCN prototype's `codel_marking()`):
//!   every decision is a mark (`INET_ECN_set_ce`, which leaves a Not-ECT
//!   packet alone) — count and the schedule advance as for an ECT packet,
//!   nothing is ever dropped in a row, and the port's `--not-ect` policy
//!   (pass by default) decides what a mark on a Not-ECT packet means.
//! * **Empty queue.** `dodequeue()` on an empty queue clears
//!   `first_above_time` and `dequeue()` leaves the dropping state. We apply
//!   that when a packet leaves its queue empty (`queue_pkts == 0` after it),
//!   i.e. at the moment the next dequeue attempt would find nothing.
//! * `first_above_time == 0` means "unset", as in the RFC.
//!
//! Units: ns; MAXPACKET in frame bytes. Defaults: RFC 8289 §4.2/§4.3 give
//! INTERVAL = 100 ms, TARGET = 5 ms for the Internet. For a datacenter
//! (`--rtt`) we scale the setting TCN's authors found best on their 1 Gbit/s,
//! RTT ≈ 250 µs testbed (TCN paper §6.1: target = 51.2 µs, interval = 1024 µs):
//! TARGET = 0.2048 × RTT, INTERVAL = 4.096 × RTT. MAXPACKET = one MTU frame.
//! State is per queue: with several queues each one runs its own CoDel
//! (RFC 8289 §4 discusses use with multiple queues), as the TCN prototype's
//! CoDel does per switch queue (TCN paper §5: it "closely tracks the Linux
//! source code").

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::util::{de_duration, de_size, scale_ns, ser_duration, ser_size};
use super::{Aqm, DropReason, MarkReason, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_duration, Nanos};
use serde::{Deserialize, Serialize};

/// TARGET / RTT (TCN paper §6.1: 51.2 µs at 250 µs).
pub const TARGET_PER_RTT: f64 = 0.2048;
/// INTERVAL / RTT (TCN paper §6.1: 1024 µs at 250 µs).
pub const INTERVAL_PER_RTT: f64 = 4.096;

/// What the control law does to a Not-ECT packet it hits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NotEct {
    /// Drop it (Linux `codel_dequeue`; RFC 8289; the default).
    #[default]
    Drop,
    /// Ask the port to mark it, as for an ECT packet (the TCN prototype's
    /// `codel_marking`); the port's `--not-ect` then passes or drops it.
    Mark,
}

/// Ethernet header bytes: MAXPACKET = MTU + this (Linux `psched_mtu`).
pub const ETH_HEADER_BYTES: u32 = 14;

/// CoDel parameters (the constants of RFC 8289 §5).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// TARGET, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub target: Nanos,
    /// INTERVAL, ns.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub interval: Nanos,
    /// MAXPACKET, frame bytes: with this much or less left queued, never
    /// above target (Linux `params->mtu` = MTU + Ethernet header).
    #[serde(deserialize_with = "de_size", serialize_with = "ser_size")]
    pub maxpacket: u64,
    /// Mark ECT packets instead of dropping them.
    pub ecn: bool,
    /// Not-ECT packets the control law hits: drop (Linux) | mark (TCN prototype).
    pub not_ect: NotEct,
}

impl Default for Config {
    /// The TCN paper §6.1 setting: 51.2 µs / 1024 µs.
    fn default() -> Self {
        Config::for_rtt(250_000, 1500)
    }
}

impl Config {
    /// Datacenter defaults scaled from the RTT (see the module header);
    /// `mtu_bytes` is the IP MTU.
    pub fn for_rtt(rtt_ns: Nanos, mtu_bytes: u32) -> Self {
        Config {
            target: scale_ns(rtt_ns, TARGET_PER_RTT),
            interval: scale_ns(rtt_ns, INTERVAL_PER_RTT),
            maxpacket: (mtu_bytes + ETH_HEADER_BYTES) as u64,
            ecn: true,
            not_ect: NotEct::Drop,
        }
    }
    /// RFC 8289 Internet defaults (§4.2, §4.3, §5): 5 ms / 100 ms.
    pub fn rfc_defaults(mtu_bytes: u32) -> Self {
        Config {
            target: 5_000_000,
            interval: 100_000_000,
            maxpacket: (mtu_bytes + ETH_HEADER_BYTES) as u64,
            ecn: true,
            not_ect: NotEct::Drop,
        }
    }
    /// Checks the parameters make sense.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval == 0 {
            return Err("codel: interval must be > 0".into());
        }
        if self.target >= self.interval {
            return Err(format!(
                "codel: target ({}) must be below interval ({}); RFC 8289 §4.3 suggests 5-10% of interval",
                fmt_duration(self.target),
                fmt_duration(self.interval)
            ));
        }
        Ok(())
    }
    /// One line with the effective values.
    pub fn describe(&self) -> String {
        format!(
            "codel: target = {}, interval = {}, maxpacket = {} B, {} (RFC 8289 §5)",
            fmt_duration(self.target),
            fmt_duration(self.interval),
            self.maxpacket,
            match (self.ecn, self.not_ect) {
                (true, NotEct::Drop) => "mark ECT, drop Not-ECT",
                (true, NotEct::Mark) => "mark (Not-ECT as --not-ect says)",
                (false, _) => "drop",
            }
        )
    }
}

/// control_law(t, count) = t + INTERVAL / √count (RFC 8289 §5).
pub fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    t + (interval as f64 / (count.max(1) as f64).sqrt()).round() as Nanos
}

/// What happened to the previous packet of this queue (emulating the RFC's
/// in-function `dodequeue()` calls across our one-packet-per-call hook).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Pending {
    /// Nothing pending.
    #[default]
    None,
    /// The previous packet was dropped on entering the dropping state.
    AfterEntryDrop,
    /// The previous packet was dropped inside the dropping-state loop.
    AfterLoopDrop,
}

/// Per-queue state (RFC 8289 §5 instance variables).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Vars {
    /// Time sojourn went above TARGET + INTERVAL (0 = unset), ns.
    pub first_above_time: Nanos,
    /// Time to drop/mark next when dropping, ns.
    pub drop_next: Nanos,
    /// Drops/marks since entering the dropping state.
    pub count: u32,
    /// count at the last entry into the dropping state.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// See [`Pending`].
    pub pending: Pending,
}

/// Counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    /// CE marks.
    pub marks: u64,
    /// Drops.
    pub drops: u64,
    /// Entries into the dropping state.
    pub entries: u64,
}

/// A CoDel instance for one port, state per queue.
#[derive(Clone, Debug)]
pub struct Codel {
    params: Config,
    vars: Vec<Vars>,
    counters: Counters,
}

impl Codel {
    /// Builds from a validated config for `num_queues` queues.
    pub fn new(params: Config, num_queues: usize) -> Self {
        Codel {
            params,
            vars: vec![Vars::default(); num_queues.max(1)],
            counters: Counters::default(),
        }
    }
    /// The state of `queue`.
    pub fn vars(&self, queue: usize) -> &Vars {
        &self.vars[queue]
    }
    /// Per-queue state and counters.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "codel",
            "params": self.params,
            "queues": self.vars,
            "counters": self.counters,
        })
    }

    /// `dodequeue()`'s ok_to_drop computation (RFC 8289 §5).
    fn ok_to_drop(&mut self, i: usize, sojourn: Nanos, bytes_left: u64, now: Nanos) -> bool {
        let p = &self.params;
        let v = &mut self.vars[i];
        if sojourn < p.target || bytes_left <= p.maxpacket {
            // Went below – stay below for at least INTERVAL.
            v.first_above_time = 0;
            false
        } else if v.first_above_time == 0 {
            // Just went above from below; if still above at first_above_time,
            // we'll say it's ok to drop.
            v.first_above_time = now + p.interval;
            false
        } else {
            // Linux: codel_time_after(now, vars->first_above_time).
            now > v.first_above_time
        }
    }

    /// One pass of `while (now >= drop_next && dropping)` (RFC 8289 §5).
    fn loop_step(&mut self, i: usize, markable: bool, now: Nanos) -> Verdict {
        let interval = self.params.interval;
        let v = &mut self.vars[i];
        if !(v.dropping && now >= v.drop_next) {
            return Verdict::Pass;
        }
        v.count += 1;
        if markable {
            // Linux codel_impl.h: mark, schedule the next, stop the loop.
            v.drop_next = control_law(v.drop_next, interval, v.count);
            self.counters.marks += 1;
            Verdict::Mark(MarkReason::Persistent)
        } else {
            // drop(r.p); ++count_; r = dodequeue(now): continued with the next packet.
            v.pending = Pending::AfterLoopDrop;
            self.counters.drops += 1;
            Verdict::Drop(DropReason::Aqm)
        }
    }

    /// `else if (r.ok_to_drop)`: enter the dropping state (RFC 8289 §5).
    fn enter(&mut self, i: usize, markable: bool, now: Nanos) -> Verdict {
        let interval = self.params.interval;
        let v = &mut self.vars[i];
        let verdict = if markable {
            self.counters.marks += 1;
            Verdict::Mark(MarkReason::Persistent)
        } else {
            v.pending = Pending::AfterEntryDrop;
            self.counters.drops += 1;
            Verdict::Drop(DropReason::Aqm)
        };
        v.dropping = true;
        self.counters.entries += 1;
        // If min went above TARGET close to when it last went below, reuse the
        // drop rate that controlled the queue last time.
        let delta = v.count.saturating_sub(v.lastcount);
        v.count = 1;
        let since_drop_next = now as i128 - v.drop_next as i128;
        if delta > 1 && since_drop_next < 16 * interval as i128 {
            v.count = delta;
        }
        v.drop_next = control_law(now, interval, v.count);
        v.lastcount = v.count;
        verdict
    }
}

impl Aqm for Codel {
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, _rng: &mut SimRng) -> Verdict {
        let i = q.queue.min(self.vars.len() - 1);
        let sojourn = now.saturating_sub(pkt.enqueue_ns);
        let markable = self.params.ecn && (pkt.is_ect() || self.params.not_ect == NotEct::Mark);
        let ok = self.ok_to_drop(i, sojourn, q.queue_bytes, now);
        let pending = std::mem::take(&mut self.vars[i].pending);
        let verdict = match pending {
            // After the entry drop, the RFC delivers the next packet.
            Pending::AfterEntryDrop => Verdict::Pass,
            Pending::AfterLoopDrop => {
                let interval = self.params.interval;
                let v = &mut self.vars[i];
                if !ok {
                    v.dropping = false;
                    Verdict::Pass
                } else {
                    v.drop_next = control_law(v.drop_next, interval, v.count);
                    self.loop_step(i, markable, now)
                }
            }
            Pending::None => {
                if self.vars[i].dropping {
                    if !ok {
                        // Sojourn below TARGET: leave the dropping state.
                        self.vars[i].dropping = false;
                        Verdict::Pass
                    } else {
                        self.loop_step(i, markable, now)
                    }
                } else if ok {
                    self.enter(i, markable, now)
                } else {
                    Verdict::Pass
                }
            }
        };
        if q.queue_pkts == 0 {
            // The next dodequeue() finds the queue empty.
            let v = &mut self.vars[i];
            v.first_above_time = 0;
            v.dropping = false;
            v.pending = Pending::None;
        }
        verdict
    }
}

impl AqmParams for Config {
    type Instance = Codel;
    const KEYS: &'static [(&'static str, &'static str)] = &[
        ("target", "TARGET sojourn, time"),
        ("interval", "INTERVAL, time"),
        (
            "maxpacket",
            "MAXPACKET: with this much or less queued, never above target, frame bytes",
        ),
        ("ecn", "true: mark ECT packets instead of dropping them"),
        (
            "not_ect",
            "a Not-ECT packet the control law hits: drop (Linux) or mark (TCN prototype)",
        ),
    ];
    const SIZE_KEYS: &'static [&'static str] = &["maxpacket"];
    fn for_port(env: &AqmEnv) -> Self {
        Config::for_rtt(env.rtt_ns, env.mtu_bytes)
    }
    fn build(&self, env: &AqmEnv) -> Result<Codel, AqmConfigError> {
        Ok(Codel::new(self.clone(), env.num_queues.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aqm::util::testutil::{ctx, ect, not_ect};
    use crate::units::MS;

    fn rfc() -> Codel {
        let c = Config::rfc_defaults(1500);
        c.validate().unwrap();
        Codel::new(c, 1)
    }

    /// Dequeues one ECT packet per ms with sojourn `soj` on a busy queue from
    /// `from` to `to`; returns mark times.
    fn run(a: &mut Codel, from: Nanos, to: Nanos, soj: Nanos) -> Vec<Nanos> {
        let mut rng = SimRng::new(1);
        let mut marks = vec![];
        let mut t = from;
        while t < to {
            if let Verdict::Mark(_) =
                a.on_dequeue(&ect(1500, t - soj), &ctx(0, 30_000, 20), t, &mut rng)
            {
                marks.push(t);
            }
            t += MS;
        }
        marks
    }

    #[test]
    fn control_law_schedule() {
        let mut a = rfc();
        let t0 = 1000 * MS;
        let marks = run(&mut a, t0, t0 + 500 * MS, 10 * MS);
        // first_above_time = t0 + INTERVAL; first mark when now > it (Linux
        // codel_time_after): the packet at t0 + 101 ms.
        assert_eq!(marks[0], t0 + 101 * MS);
        // drop_next = control_law(now, 1) = +100 ms.
        assert_eq!(marks[1], t0 + 201 * MS);
        // Then + 100/√2 = 70.71 ms (first packet at or after), then + 100/√3.
        let n2 = t0 + 201 * MS + 70_710_678;
        assert_eq!(marks[2], n2.div_ceil(MS) * MS);
        let n3 = n2 + 57_735_027;
        assert_eq!(marks[3], n3.div_ceil(MS) * MS);
        assert_eq!(a.vars(0).count, marks.len() as u32);
        assert!(a.vars(0).dropping);
    }

    #[test]
    fn sojourn_below_target_leaves_dropping_and_count_is_reused() {
        let mut a = rfc();
        let t0 = 1000 * MS;
        let marks = run(&mut a, t0, t0 + 400 * MS, 10 * MS);
        assert_eq!(marks.len(), 5); // t0+101, +201, +272, +330, +380
        let mut rng = SimRng::new(1);
        let t1 = t0 + 400 * MS;
        assert_eq!(
            a.on_dequeue(&ect(1500, t1 - MS), &ctx(0, 30_000, 20), t1, &mut rng),
            Verdict::Pass
        );
        assert!(!a.vars(0).dropping);
        assert_eq!(a.vars(0).first_above_time, 0);
        // Above target again soon: re-enter after one INTERVAL with count = delta = 5 − 1.
        let marks2 = run(&mut a, t1 + MS, t1 + MS + 102 * MS, 10 * MS);
        assert_eq!(marks2, vec![t1 + MS + 101 * MS]);
        assert_eq!(a.vars(0).count, 4);
        assert_eq!(a.vars(0).drop_next, t1 + 102 * MS + 50 * MS); // 100/√4
    }

    #[test]
    fn count_not_reused_after_a_long_pause() {
        let mut a = rfc();
        let t0 = 1000 * MS;
        run(&mut a, t0, t0 + 400 * MS, 10 * MS);
        let mut rng = SimRng::new(1);
        let t1 = t0 + 400 * MS;
        a.on_dequeue(&ect(1500, t1), &ctx(0, 30_000, 20), t1, &mut rng);
        // More than 16 intervals later.
        let t2 = t1 + 2000 * MS;
        let m = run(&mut a, t2, t2 + 102 * MS, 10 * MS);
        assert_eq!(m, vec![t2 + 101 * MS]);
        assert_eq!(a.vars(0).count, 1);
    }

    #[test]
    fn entry_needs_now_after_first_above_time() {
        let mut a = rfc();
        let mut rng = SimRng::new(1);
        let q = ctx(0, 30_000, 20);
        let t0 = 1000 * MS;
        assert_eq!(
            a.on_dequeue(&ect(1500, t0 - 10 * MS), &q, t0, &mut rng),
            Verdict::Pass
        );
        assert_eq!(a.vars(0).first_above_time, t0 + 100 * MS);
        // Linux codel_should_drop: codel_time_after(now, first_above_time).
        let t = t0 + 100 * MS;
        assert_eq!(
            a.on_dequeue(&ect(1500, t - 10 * MS), &q, t, &mut rng),
            Verdict::Pass
        );
        assert_eq!(
            a.on_dequeue(&ect(1500, t - 10 * MS), &q, t + 1, &mut rng),
            Verdict::Mark(MarkReason::Persistent)
        );
    }

    /// Linux `*backlog <= params->mtu` with mtu = psched_mtu() = MTU + 14 and
    /// the backlog in frame bytes after the dequeue; the TCN prototype
    /// `cl->len_bytes <= wfq_max_pkt_bytes`: one full-size frame left behind
    /// is never above target, one byte more is.
    #[test]
    fn one_full_frame_left_is_never_above_target() {
        assert_eq!(Config::default().maxpacket, 1514);
        assert_eq!(Config::rfc_defaults(1500).maxpacket, 1514);
        let mut rng = SimRng::new(1);
        for (left, marks) in [(1514u64, false), (1515, true)] {
            let mut a = Codel::new(Config::default(), 1);
            let mut seen = false;
            for k in 0..100u64 {
                let t = 10 * MS + k * 100 * crate::units::US;
                let v = a.on_dequeue(&ect(1514, t - MS), &ctx(0, left, 1), t, &mut rng);
                seen |= v != Verdict::Pass;
                if !marks {
                    assert_eq!(a.vars(0).first_above_time, 0);
                }
            }
            assert_eq!(seen, marks, "{left} B left");
        }
    }

    /// The TCN prototype's `codel_marking()` (option `not_ect = "mark"`):
    /// every decision is a mark; a Not-ECT packet gets the same verdict as
    /// an ECT one (the port's --not-ect decides), so the loop never drops
    /// in a row and the schedule is the ECT one.
    #[test]
    fn not_ect_mark_option_follows_the_ect_schedule() {
        let c: Config = toml::from_str("not_ect = \"mark\"").unwrap();
        assert_eq!(c.not_ect, NotEct::Mark);
        assert_eq!(Config::default().not_ect, NotEct::Drop);
        let mut a = Codel::new(
            Config {
                not_ect: NotEct::Mark,
                ..Config::rfc_defaults(1500)
            },
            1,
        );
        let mut rng = SimRng::new(1);
        let q = ctx(0, 300_000, 200);
        let t0 = 1000 * MS;
        let mut marks = vec![];
        let mut t = t0;
        while t < t0 + 400 * MS {
            match a.on_dequeue(&not_ect(1500, t - 10 * MS), &q, t, &mut rng) {
                Verdict::Mark(_) => marks.push(t),
                Verdict::Pass => {}
                Verdict::Drop(_) => panic!("dropped at {t}"),
            }
            t += MS;
        }
        // As control_law_schedule: 101, 201, ⌈271.7⌉, ⌈329.4⌉, ⌈379.4⌉ ms.
        let want: Vec<Nanos> = [101, 201, 272, 330, 380]
            .iter()
            .map(|m| t0 + m * MS)
            .collect();
        assert_eq!(marks, want);
    }

    #[test]
    fn small_backlog_or_empty_queue_never_drops() {
        let mut a = rfc();
        let mut rng = SimRng::new(1);
        for k in 0..300 {
            let t = 1000 * MS + k * MS;
            // Only one MTU left behind: never ok_to_drop.
            assert_eq!(
                a.on_dequeue(&ect(1500, t - 20 * MS), &ctx(0, 1500, 1), t, &mut rng),
                Verdict::Pass
            );
        }
        assert_eq!(a.vars(0).first_above_time, 0);
    }

    #[test]
    fn not_ect_is_dropped_and_the_loop_drops_in_a_row() {
        let mut a = rfc();
        let mut rng = SimRng::new(1);
        let t0 = 1000 * MS;
        let q = ctx(0, 300_000, 200);
        // Above target from t0.
        assert_eq!(
            a.on_dequeue(&not_ect(1500, t0 - 10 * MS), &q, t0, &mut rng),
            Verdict::Pass
        );
        // Entry just after t0 + INTERVAL: the Not-ECT packet is dropped, the
        // next delivered.
        let t1 = t0 + 100 * MS + 1;
        assert_eq!(
            a.on_dequeue(&not_ect(1500, t1 - 10 * MS), &q, t1, &mut rng),
            Verdict::Drop(DropReason::Aqm)
        );
        assert_eq!(
            a.on_dequeue(&not_ect(1500, t1 - 10 * MS), &q, t1, &mut rng),
            Verdict::Pass
        );
        assert_eq!(a.vars(0).drop_next, t1 + 100 * MS);
        // Long after drop_next, at one instant: drops in a row while
        // control_law(drop_next, count) stays ≤ now, then a delivery.
        let t2 = t1 + 260 * MS;
        let mut verdicts = vec![];
        for _ in 0..6 {
            verdicts.push(a.on_dequeue(&not_ect(1500, t2 - 10 * MS), &q, t2, &mut rng));
        }
        // drop_next: t1+100 (drop, count 2) → +70.7 = t1+170.7 (drop, count 3)
        // → +57.7 = t1+228.4 (drop, count 4) → +50 = t1+278.4 > t2: deliver.
        let d = Verdict::Drop(DropReason::Aqm);
        assert_eq!(&verdicts[..4], &[d, d, d, Verdict::Pass]);
        assert_eq!(a.vars(0).count, 4);
        // An ECT packet in the same state is marked, not dropped.
        let t3 = t1 + 300 * MS;
        assert_eq!(
            a.on_dequeue(&ect(1500, t3 - 10 * MS), &q, t3, &mut rng),
            Verdict::Mark(MarkReason::Persistent)
        );
    }
}

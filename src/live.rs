//! Rates over an interval from two snapshots of a running switch's counters:
//! what `softswitch stats --interval T` prints every T, per port and per
//! queue, as `tc -s` under `watch` or `ip -s -s link` would — Mbit/s,
//! packets/s, marks/s and drops/s at the egress over the interval, and the
//! backlog now.
//!
//! Pure functions of the snapshots' JSON (`stats::fetch`): no I/O, no
//! clock. The interval is measured with the switch's own clock
//! (`elapsed_s`, the time of the counters in the snapshot), not with the
//! caller's sleep, so a snapshot published a little late does not bend a
//! rate. Under time dilation (`dilation` in the snapshot) that clock and
//! the counters are emulated, so the rates are emulated rates (the wire
//! carries them D times slower), as the exit report's are.
//!
//! A counter that went down, a clock that went back or another set of ports
//! means another switch (restarted on the same socket): [`between`] says so
//! instead of printing negative rates, and counting starts again there.

use serde::Serialize;
use serde_json::Value;

/// What the rates are computed from, for one queue or a whole port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames handed to the queue, ever (admitted or not).
    pub arrived_pkts: u64,
    /// Frames sent, ever.
    pub dequeued_pkts: u64,
    /// Bytes sent, ever.
    pub dequeued_bytes: u64,
    /// CE marks, ever, any reason.
    pub marked_pkts: u64,
    /// Drops, ever, any reason (at enqueue and at dequeue).
    pub dropped_pkts: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub backlog_pkts: u64,
}

impl Counts {
    /// The counters of one `egress.port` or `egress.queues[i]` object;
    /// `backlog` is where the current backlog is (the port's own fields for
    /// a port, the queue object for a queue).
    fn from_json(c: &Value, backlog: &Value) -> Self {
        let total = |m: &Value| {
            m.as_object()
                .map(|o| o.values().map(|r| u(&r["pkts"])).sum())
                .unwrap_or(0)
        };
        Counts {
            arrived_pkts: u(&c["arrived"]["pkts"]),
            dequeued_pkts: u(&c["dequeued"]["pkts"]),
            dequeued_bytes: u(&c["dequeued"]["bytes"]),
            marked_pkts: total(&c["marked"]),
            dropped_pkts: total(&c["dropped"]),
            backlog_bytes: u(&backlog["backlog_bytes"]),
            backlog_pkts: u(&backlog["backlog_pkts"]),
        }
    }

    /// Whether any counter that only grows is below `earlier`'s.
    fn went_down_from(&self, earlier: &Counts) -> bool {
        self.arrived_pkts < earlier.arrived_pkts
            || self.dequeued_pkts < earlier.dequeued_pkts
            || self.dequeued_bytes < earlier.dequeued_bytes
            || self.marked_pkts < earlier.marked_pkts
            || self.dropped_pkts < earlier.dropped_pkts
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// One port's counters: the port and each of its queues.
#[derive(Clone, Debug, PartialEq)]
pub struct PortCounts {
    /// The port's name.
    pub name: String,
    /// The whole port.
    pub port: Counts,
    /// Each queue, in order.
    pub queues: Vec<Counts>,
}

/// The counters of one snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Counters {
    /// The switch's clock, s (emulated under time dilation).
    pub elapsed_s: f64,
    /// Time dilation D, when the switch runs dilated.
    pub dilation: Option<f64>,
    /// Every port, in the switch's order.
    pub ports: Vec<PortCounts>,
}

impl Counters {
    /// Reads a snapshot's JSON; an error for something that is no
    /// snapshot of a switch's counters.
    pub fn from_snapshot(v: &Value) -> Result<Self, String> {
        let elapsed_s = v["elapsed_s"]
            .as_f64()
            .ok_or("the switch's snapshot has no elapsed_s: not a softswitch stats socket?")?;
        let ports = v["ports"]
            .as_array()
            .ok_or("the switch's snapshot has no ports")?
            .iter()
            .map(|p| PortCounts {
                name: p["name"].as_str().unwrap_or("?").to_string(),
                port: Counts::from_json(&p["egress"]["port"], p),
                queues: p["egress"]["queues"]
                    .as_array()
                    .map(|qs| qs.iter().map(|q| Counts::from_json(q, q)).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Counters {
            elapsed_s,
            dilation: v["dilation"].as_f64(),
            ports,
        })
    }
}

/// Rates of one queue or port over an interval, and its backlog at the end.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rates {
    /// Bytes sent, Mbit/s.
    pub mbit_s: f64,
    /// Frames sent per second.
    pub pkt_s: f64,
    /// CE marks per second.
    pub marks_s: f64,
    /// Drops per second.
    pub drops_s: f64,
    /// Bytes queued at the end of the interval.
    pub backlog_bytes: u64,
    /// Packets queued at the end of the interval.
    pub backlog_pkts: u64,
}

impl Rates {
    fn of(before: &Counts, after: &Counts, seconds: f64) -> Rates {
        let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
        Rates {
            mbit_s: per_s(after.dequeued_bytes, before.dequeued_bytes) * 8.0 / 1e6,
            pkt_s: per_s(after.dequeued_pkts, before.dequeued_pkts),
            marks_s: per_s(after.marked_pkts, before.marked_pkts),
            drops_s: per_s(after.dropped_pkts, before.dropped_pkts),
            backlog_bytes: after.backlog_bytes,
            backlog_pkts: after.backlog_pkts,
        }
    }
}

/// One port's rates: the port, and each queue that has seen traffic (on
/// ports with more than one queue).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortRates {
    /// The port's name.
    pub name: String,
    /// The whole port.
    pub port: Rates,
    /// (queue number, its rates).
    pub queues: Vec<(usize, Rates)>,
}

/// The rates of one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// The switch's clock at the end of the interval, s.
    pub at_s: f64,
    /// The interval's length on the switch's clock, s.
    pub seconds: f64,
    /// Time dilation D: the clock and the rates are emulated.
    pub dilation: Option<f64>,
    /// Every port.
    pub ports: Vec<PortRates>,
}

/// What two successive snapshots say.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Rates over the interval between them.
    Rates(Interval),
    /// The same snapshot again (the switch has not published since):
    /// nothing to say yet.
    Unchanged,
    /// Not the same switch's counters: it restarted (or its counters were
    /// reset); why, for the user. Rates start again from the later one.
    Reset(String),
}

/// The rates between `before` and `after`, two snapshots of one switch.
pub fn between(before: &Counters, after: &Counters) -> Step {
    let seconds = after.elapsed_s - before.elapsed_s;
    if seconds < 0.0 {
        return Step::Reset(format!(
            "the switch restarted: its clock went back from {:.1} s to {:.1} s",
            before.elapsed_s, after.elapsed_s
        ));
    }
    let names = |c: &Counters| c.ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    if names(before) != names(after)
        || before
            .ports
            .iter()
            .zip(&after.ports)
            .any(|(b, a)| b.queues.len() != a.queues.len())
    {
        return Step::Reset(format!(
            "the switch restarted with other ports or queues (now {})",
            names(after).join(", ")
        ));
    }
    let went_down = before.ports.iter().zip(&after.ports).find(|(b, a)| {
        a.port.went_down_from(&b.port)
            || a.queues
                .iter()
                .zip(&b.queues)
                .any(|(qa, qb)| qa.went_down_from(qb))
    });
    if let Some((_, a)) = went_down {
        return Step::Reset(format!(
            "the counters of port {} went down: the switch restarted (or its counters were reset)",
            a.name
        ));
    }
    if seconds == 0.0 {
        return Step::Unchanged;
    }
    let ports = before
        .ports
        .iter()
        .zip(&after.ports)
        .map(|(b, a)| PortRates {
            name: a.name.clone(),
            port: Rates::of(&b.port, &a.port, seconds),
            queues: if a.queues.len() > 1 {
                a.queues
                    .iter()
                    .zip(&b.queues)
                    .enumerate()
                    .filter(|(_, (qa, _))| qa.arrived_pkts > 0)
                    .map(|(i, (qa, qb))| (i, Rates::of(qb, qa, seconds)))
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    Step::Rates(Interval {
        at_s: after.elapsed_s,
        seconds,
        dilation: after.dilation,
        ports,
    })
}

/// The first lines: what is printed, how often, and in which time.
pub fn header(every: &str, socket: &str, dilation: Option<f64>, count: Option<u64>) -> String {
    let until = match count {
        Some(n) => format!("{n} times"),
        None => "until Ctrl-C".into(),
    };
    let mut out = format!(
        "softswitch stats from {socket} every {every} ({until}): each port's egress over the \
         interval — sent Mbit/s and packets/s, CE marks/s, drops/s — and its backlog now; \
         queues that saw traffic below their port\n"
    );
    if let Some(d) = dilation {
        out.push_str(&format!(
            "time dilation D = {d}: the switch's clock and these rates are emulated (the wire \
             carries them {d} times slower); the interval {every} is real time\n"
        ));
    }
    out
}

fn human_bytes(b: u64) -> String {
    if b >= 10_000_000 {
        format!("{:.1} MB", b as f64 / 1e6)
    } else if b >= 10_000 {
        format!("{:.1} KB", b as f64 / 1e3)
    } else {
        format!("{b} B")
    }
}

/// One interval as a table: a line per port, one per queue under it.
pub fn render(i: &Interval) -> String {
    let emulated = if i.dilation.is_some() {
        ", emulated"
    } else {
        ""
    };
    let mut rows: Vec<(String, &Rates)> = Vec::new();
    for p in &i.ports {
        rows.push((p.name.clone(), &p.port));
        for (q, r) in &p.queues {
            rows.push((format!("  q{q}"), r));
        }
    }
    let width = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut out = format!(
        "at {:.1} s (switch clock{emulated}), over {:.2} s:\n  {:<width$}  {:>9}  {:>9}  {:>8}  {:>8}  backlog\n",
        i.at_s, i.seconds, "port", "Mbit/s", "pkt/s", "marks/s", "drops/s"
    );
    for (name, r) in rows {
        out.push_str(&format!(
            "  {name:<width$}  {:>9.1}  {:>9.0}  {:>8.0}  {:>8.0}  {} {} pkts\n",
            r.mbit_s,
            r.pkt_s,
            r.marks_s,
            r.drops_s,
            human_bytes(r.backlog_bytes),
            r.backlog_pkts
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A snapshot at `t` s of ports `a` (one queue) and `b` (two queues,
    /// the second never used), with `k` times a base of counters.
    fn snap(t: f64, k: u64) -> Value {
        let q = |pkts: u64, bytes: u64, marks: u64, drops: u64, backlog: u64| {
            json!({
                "arrived": {"pkts": pkts + drops, "bytes": bytes},
                "dequeued": {"pkts": pkts, "bytes": bytes},
                "marked": {"threshold": {"pkts": marks, "bytes": 0}, "sojourn": {"pkts": 0, "bytes": 0}},
                "dropped": {"buffer_full": {"pkts": drops, "bytes": 0}, "aqm": {"pkts": drops, "bytes": 0}},
                "backlog_bytes": backlog, "backlog_pkts": backlog / 1500,
            })
        };
        json!({
            "elapsed_s": t,
            "ports": [
                {"name": "a", "backlog_bytes": 0, "backlog_pkts": 0,
                 "egress": {"port": q(10 * k, 15_000 * k, 0, 0, 0), "queues": [q(10 * k, 15_000 * k, 0, 0, 0)]}},
                {"name": "b", "backlog_bytes": 30_000, "backlog_pkts": 20,
                 "egress": {"port": q(1000 * k, 1_500_000 * k, 5 * k, k, 30_000),
                            "queues": [q(1000 * k, 1_500_000 * k, 5 * k, k, 30_000), q(0, 0, 0, 0, 0)]}},
            ],
        })
    }

    fn counters(v: &Value) -> Counters {
        Counters::from_snapshot(v).unwrap()
    }

    #[test]
    fn two_snapshots_give_the_rates_between_them() {
        let Step::Rates(i) = between(&counters(&snap(1.0, 1)), &counters(&snap(3.0, 5))) else {
            panic!("no rates")
        };
        assert_eq!((i.at_s, i.seconds, i.dilation), (3.0, 2.0, None));
        let b = &i.ports[1];
        // 4 × 1.5 MB in 2 s = 24 Mbit/s; 4000 packets / 2 s; marks and the
        // two drop reasons summed.
        assert_eq!(b.port.mbit_s, 24.0);
        assert_eq!(b.port.pkt_s, 2000.0);
        assert_eq!(b.port.marks_s, 10.0);
        assert_eq!(b.port.drops_s, 4.0);
        assert_eq!((b.port.backlog_bytes, b.port.backlog_pkts), (30_000, 20));
        // Queues that saw traffic, on a port with more than one queue.
        assert_eq!(b.queues.len(), 1);
        assert_eq!(b.queues[0].0, 0);
        assert_eq!(b.queues[0].1, b.port);
        assert!(
            i.ports[0].queues.is_empty(),
            "one queue: the port says it all"
        );
        assert_eq!(i.ports[0].port.mbit_s, 0.24);
        let t = render(&i);
        assert!(
            t.starts_with("at 3.0 s (switch clock), over 2.00 s:\n"),
            "{t}"
        );
        assert!(
            t.contains("\n  b            24.0       2000        10         4  30.0 KB 20 pkts\n"),
            "{t}"
        );
        assert!(t.contains("\n    q0         24.0       2000"), "{t}");
        assert!(
            t.contains("\n  port       Mbit/s      pkt/s   marks/s   drops/s  backlog\n"),
            "{t}"
        );
    }

    #[test]
    fn a_restarted_switch_is_said_and_never_gives_negative_rates() {
        // Its clock went back.
        let s = between(&counters(&snap(9.0, 5)), &counters(&snap(0.5, 1)));
        assert!(
            matches!(&s, Step::Reset(m) if m.contains("restarted") && m.contains("9.0 s to 0.5 s")),
            "{s:?}"
        );
        // Its counters went down though its clock did not (restarted and
        // already older than the last snapshot, or reset).
        let s = between(&counters(&snap(1.0, 5)), &counters(&snap(2.0, 1)));
        assert!(
            matches!(&s, Step::Reset(m) if m.contains("port a") && m.contains("went down")),
            "{s:?}"
        );
        // Other ports.
        let mut other = snap(2.0, 6);
        other["ports"][0]["name"] = json!("c");
        let s = between(&counters(&snap(1.0, 5)), &counters(&other));
        assert!(matches!(&s, Step::Reset(m) if m.contains("c, b")), "{s:?}");
        // The same snapshot again: nothing to say.
        assert_eq!(
            between(&counters(&snap(1.0, 5)), &counters(&snap(1.0, 5))),
            Step::Unchanged
        );
    }

    #[test]
    fn dilated_rates_are_labelled_emulated() {
        let mut a = snap(1.0, 1);
        let mut b = snap(2.0, 2);
        a["dilation"] = json!(4.0);
        b["dilation"] = json!(4.0);
        let Step::Rates(i) = between(&counters(&a), &counters(&b)) else {
            panic!()
        };
        assert_eq!(i.dilation, Some(4.0));
        // The rate is the switch's own, emulated: 1.5 MB in 1 emulated second.
        assert_eq!(i.ports[1].port.mbit_s, 12.0);
        assert!(render(&i).starts_with("at 2.0 s (switch clock, emulated), over 1.00 s"));
        let h = header("1s", "/tmp/s.sock", Some(4.0), Some(3));
        assert!(
            h.contains("every 1s (3 times)")
                && h.contains("time dilation D = 4")
                && h.contains("emulated"),
            "{h}"
        );
        assert!(!header("1s", "/tmp/s.sock", None, None).contains("dilation"));
    }

    #[test]
    fn something_else_than_a_snapshot_is_refused() {
        assert!(Counters::from_snapshot(&json!({"ports": []})).is_err());
        assert!(Counters::from_snapshot(&json!({"elapsed_s": 1.0})).is_err());
        // A switch with no traffic yet: zero rates.
        let empty = json!({"elapsed_s": 1.0, "ports": [{"name": "a", "egress": {"port": {}, "queues": []}}]});
        let mut later = empty.clone();
        later["elapsed_s"] = json!(2.0);
        let Step::Rates(i) = between(&counters(&empty), &counters(&later)) else {
            panic!()
        };
        assert_eq!(i.ports[0].port.mbit_s, 0.0);
    }
}

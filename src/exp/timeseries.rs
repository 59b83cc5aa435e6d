//! Queue-length time series from the switch's live snapshots (polled every
//! 100 ms, the switch's own publishing period), one CSV row per sample,
//! port and queue:
//!
//! ```text
//! t_ms,port,queue,backlog_bytes,dequeued_bytes,marked_pkts,dropped_pkts
//! ```
//!
//! `t_ms` is the time since sampling started, right after the switch
//! answered and just before the traffic generators were launched; the
//! counters are cumulative as the switch reports them (differences give
//! rates).

use std::io::{self, Write};

use serde::Serialize;

use super::results::sum_pkts;

/// One queue at one instant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueSample {
    /// Milliseconds since sampling started (just before the traffic).
    pub t_ms: u64,
    /// Port name (switch-side interface).
    pub port: String,
    /// Queue index.
    pub queue: usize,
    /// Bytes queued.
    pub backlog_bytes: u64,
    /// Bytes sent so far.
    pub dequeued_bytes: u64,
    /// Packets CE-marked so far.
    pub marked_pkts: u64,
    /// Packets dropped so far.
    pub dropped_pkts: u64,
}

/// The CSV header.
pub const CSV_HEADER: &str =
    "t_ms,port,queue,backlog_bytes,dequeued_bytes,marked_pkts,dropped_pkts";

/// Every queue of every port in a snapshot.
pub fn samples_from_snapshot(t_ms: u64, v: &serde_json::Value) -> Vec<QueueSample> {
    let mut out = Vec::new();
    for p in v["ports"].as_array().into_iter().flatten() {
        let port = p["name"].as_str().unwrap_or("?").to_owned();
        for (q, qv) in p["egress"]["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            out.push(QueueSample {
                t_ms,
                port: port.clone(),
                queue: q,
                backlog_bytes: qv["backlog_bytes"].as_u64().unwrap_or(0),
                dequeued_bytes: qv["dequeued"]["bytes"].as_u64().unwrap_or(0),
                marked_pkts: sum_pkts(&qv["marked"]),
                dropped_pkts: sum_pkts(&qv["dropped"]),
            });
        }
    }
    out
}

/// Writes the header and the rows.
pub fn write_csv(mut w: impl Write, samples: &[QueueSample]) -> io::Result<()> {
    writeln!(w, "{CSV_HEADER}")?;
    for s in samples {
        writeln!(
            w,
            "{},{},{},{},{},{},{}",
            s.t_ms,
            s.port,
            s.queue,
            s.backlog_bytes,
            s.dequeued_bytes,
            s.marked_pkts,
            s.dropped_pkts
        )?;
    }
    w.flush()
}

/// The busiest port: the one with the largest summed backlog over the run.
pub fn busiest_port(samples: &[QueueSample]) -> Option<String> {
    let mut totals: std::collections::BTreeMap<&str, u64> = Default::default();
    for s in samples {
        *totals.entry(&s.port).or_default() += s.backlog_bytes;
    }
    totals
        .into_iter()
        .max_by_key(|(_, b)| *b)
        .map(|(p, _)| p.to_owned())
}

/// `(t_ms, backlog KB)` of one port, its queues summed.
pub fn port_backlog_kb(samples: &[QueueSample], port: &str) -> Vec<(f64, f64)> {
    let mut by_t: std::collections::BTreeMap<u64, u64> = Default::default();
    for s in samples.iter().filter(|s| s.port == port) {
        *by_t.entry(s.t_ms).or_default() += s.backlog_bytes;
    }
    by_t.into_iter()
        .map(|(t, b)| (t as f64, b as f64 / 1000.0))
        .collect()
}

/// Per queue of one port: `(t_ms, Mbit/s)` from dequeued-byte differences.
pub fn queue_rates_mbps(samples: &[QueueSample], port: &str) -> Vec<(usize, Vec<(f64, f64)>)> {
    let mut per_q: std::collections::BTreeMap<usize, Vec<(u64, u64)>> = Default::default();
    for s in samples.iter().filter(|s| s.port == port) {
        per_q
            .entry(s.queue)
            .or_default()
            .push((s.t_ms, s.dequeued_bytes));
    }
    per_q
        .into_iter()
        .map(|(q, pts)| {
            let rates = pts
                .windows(2)
                .filter(|w| w[1].0 > w[0].0)
                .map(|w| {
                    let bits = w[1].1.saturating_sub(w[0].1) as f64 * 8.0;
                    (w[1].0 as f64, bits / ((w[1].0 - w[0].0) as f64 * 1000.0))
                })
                .collect();
            (q, rates)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(backlog0: u64, deq0: u64) -> serde_json::Value {
        serde_json::json!({"ports": [{"name": "p-h1-sw", "egress": {"queues": [
            {"backlog_bytes": backlog0, "dequeued": {"bytes": deq0, "pkts": 1},
             "marked": {"sojourn": {"bytes": 0, "pkts": 3}}, "dropped": {"aqm": {"bytes": 0, "pkts": 1}}},
            {"backlog_bytes": 10, "dequeued": {"bytes": 0, "pkts": 0}, "marked": {}, "dropped": {}}
        ]}}]})
    }

    #[test]
    fn csv_rows_per_queue() {
        let mut s = samples_from_snapshot(0, &snap(3000, 0));
        s.extend(samples_from_snapshot(100, &snap(1500, 1_250_000)));
        let mut out = Vec::new();
        write_csv(&mut out, &s).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1], "0,p-h1-sw,0,3000,0,3,1");
        assert_eq!(lines[2], "0,p-h1-sw,1,10,0,0,0");
        assert_eq!(lines[3], "100,p-h1-sw,0,1500,1250000,3,1");
        assert_eq!(lines.len(), 5);
        assert_eq!(busiest_port(&s).as_deref(), Some("p-h1-sw"));
        assert_eq!(
            port_backlog_kb(&s, "p-h1-sw"),
            vec![(0.0, 3.01), (100.0, 1.51)]
        );
        // 1.25 MB in 100 ms = 100 Mbit/s.
        let r = queue_rates_mbps(&s, "p-h1-sw");
        assert_eq!(r[0], (0, vec![(100.0, 100.0)]));
    }
}

//! Queue-length time series, as the figures use them: from the switch's
//! own `--timeseries` CSV (every 1 ms, [`from_switch_csv`]) or, as a
//! fallback, from its live snapshots (polled every 100 ms, the switch's
//! publishing period). The runner writes the polled ones, one CSV row per
//! sample, port and queue:
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

use serde::{Deserialize, Serialize};

/// One queue at one instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// `Σ reason.pkts` over an object of `{reason: {bytes, pkts}}`.
pub fn sum_pkts(reasons: &serde_json::Value) -> u64 {
    reasons
        .as_object()
        .map(|o| o.values().filter_map(|r| r["pkts"].as_u64()).sum())
        .unwrap_or(0)
}

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

/// A row of the switch's own `--timeseries` CSV, read by header name (the
/// columns not needed here, such as `backlog_pkts`, are skipped).
#[derive(Deserialize)]
struct SwitchRow {
    t_us: f64,
    port: usize,
    queue: usize,
    backlog_bytes: u64,
    dequeued_bytes: u64,
    marks: u64,
    drops: u64,
}

/// Columns of the switch's time series this reader needs.
const SWITCH_COLUMNS: [&str; 7] = [
    "t_us",
    "port",
    "queue",
    "backlog_bytes",
    "dequeued_bytes",
    "marks",
    "drops",
];

/// Converts the switch's own time series (`--timeseries`, the CSV of
/// [`crate::timeseries`], port as an index) into samples: ports named from
/// `ports` (the switch's `--ports` order), time in ms since traffic start,
/// where the switch's clock read `offset_ms` at traffic start. Rows before
/// that are left out. Columns are found by name.
pub fn from_switch_csv(
    text: &str,
    ports: &[String],
    offset_ms: f64,
) -> Result<Vec<QueueSample>, String> {
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    let header = rd.headers().map_err(|e| format!("header: {e}"))?.clone();
    if let Some(missing) = SWITCH_COLUMNS
        .iter()
        .find(|c| !header.iter().any(|h| h == **c))
    {
        return Err(format!(
            "unexpected header `{}`: no column `{missing}`",
            header.iter().collect::<Vec<_>>().join(",")
        ));
    }
    let mut out = Vec::new();
    for row in rd.deserialize::<SwitchRow>() {
        let row = row.map_err(|e| match e.position() {
            Some(p) => format!("line {}: {e}", p.line()),
            None => e.to_string(),
        })?;
        let t_ms = row.t_us / 1000.0 - offset_ms;
        if t_ms < 0.0 {
            continue;
        }
        let port = ports
            .get(row.port)
            .ok_or_else(|| format!("at {} us: port {} of {}", row.t_us, row.port, ports.len()))?;
        out.push(QueueSample {
            t_ms: t_ms.round() as u64,
            port: port.clone(),
            queue: row.queue,
            backlog_bytes: row.backlog_bytes,
            dequeued_bytes: row.dequeued_bytes,
            marked_pkts: row.marks,
            dropped_pkts: row.drops,
        });
    }
    Ok(out)
}

/// Writes the header and the rows.
pub fn write_csv(w: impl Write, samples: &[QueueSample]) -> io::Result<()> {
    let mut wr = csv::Writer::from_writer(w);
    if samples.is_empty() {
        wr.write_record(CSV_HEADER.split(','))?;
    }
    for s in samples {
        wr.serialize(s)?;
    }
    wr.flush()
}

/// Reads what [`write_csv`] wrote (columns by name).
pub fn read_csv(text: &str) -> Result<Vec<QueueSample>, String> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize::<QueueSample>()
        .map(|r| r.map_err(|e| e.to_string()))
        .collect()
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

/// Shortest window a departure rate is averaged over: 1 ms samples would
/// show the scheduler's round granularity, not the shares.
const RATE_WINDOW_MS: u64 = 10;

/// Per queue of one port: `(t_ms, Mbit/s)` from dequeued-byte differences
/// over windows of at least 10 ms.
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
            let mut rates = Vec::new();
            let mut from: Option<(u64, u64)> = None;
            for &(t, bytes) in &pts {
                match from {
                    None => from = Some((t, bytes)),
                    Some((t0, b0)) if t >= t0 + RATE_WINDOW_MS => {
                        let bits = bytes.saturating_sub(b0) as f64 * 8.0;
                        rates.push((t as f64, bits / ((t - t0) as f64 * 1000.0)));
                        from = Some((t, bytes));
                    }
                    Some(_) => {}
                }
            }
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
        assert_eq!(read_csv(&text).unwrap(), s, "reads back what it wrote");
        assert_eq!(busiest_port(&s).as_deref(), Some("p-h1-sw"));
        assert_eq!(
            port_backlog_kb(&s, "p-h1-sw"),
            vec![(0.0, 3.01), (100.0, 1.51)]
        );
        // 1.25 MB in 100 ms = 100 Mbit/s.
        let r = queue_rates_mbps(&s, "p-h1-sw");
        assert_eq!(r[0], (0, vec![(100.0, 100.0)]));
    }

    #[test]
    fn rates_from_1ms_samples_use_10ms_windows() {
        // 125 KB per ms = 1 Gbit/s, for 30 ms.
        let s: Vec<QueueSample> = (0..=30u64)
            .map(|t| QueueSample {
                t_ms: t,
                port: "p".into(),
                queue: 0,
                backlog_bytes: 0,
                dequeued_bytes: t * 125_000,
                marked_pkts: 0,
                dropped_pkts: 0,
            })
            .collect();
        let r = queue_rates_mbps(&s, "p");
        assert_eq!(r[0].1, vec![(10.0, 1000.0), (20.0, 1000.0), (30.0, 1000.0)]);
    }

    #[test]
    fn switch_csv_becomes_samples_from_traffic_start() {
        let text = format!(
            "{}\n500.0,0,0,100,1,0,0,0,a\n1500.0,0,0,3000,2,1500,1,0,a\n1500.0,1,2,64,1,0,0,0,b\n2500.0,1,0,0,0,9000,0,2,b\n",
            crate::timeseries::HEADER
        );
        let ports = vec!["x-h1-sw".to_string(), "x-h2-sw".to_string()];
        let s = from_switch_csv(&text, &ports, 1.0).unwrap();
        // The 0.5 ms row is before traffic start (1 ms on the switch's clock).
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[0],
            QueueSample {
                t_ms: 1,
                port: "x-h1-sw".into(),
                queue: 0,
                backlog_bytes: 3000,
                dequeued_bytes: 1500,
                marked_pkts: 1,
                dropped_pkts: 0
            }
        );
        assert_eq!(
            (s[1].port.as_str(), s[1].queue, s[1].backlog_bytes),
            ("x-h2-sw", 2, 64)
        );
        assert_eq!((s[2].t_ms, s[2].dropped_pkts), (2, 2));
        // Malformed input is an error that says where.
        let e = from_switch_csv("t_us,port\n", &ports, 0.0).unwrap_err();
        assert!(e.contains("header") && e.contains("`queue`"), "{e}");
        // Columns are found by name: another order, an extra column.
        let moved = "extra,drops,marks,dequeued_bytes,backlog_pkts,backlog_bytes,queue,port,t_us\nz,2,0,9000,0,0,0,1,2500.0\n";
        let s2 = from_switch_csv(moved, &ports, 1.0).unwrap();
        assert_eq!(
            (
                s2[0].port.as_str(),
                s2[0].dropped_pkts,
                s2[0].dequeued_bytes
            ),
            ("x-h2-sw", 2, 9000)
        );
        let bad = format!("{}\n1.0,7,0,0,0,0,0,0,p\n", crate::timeseries::HEADER);
        assert!(from_switch_csv(&bad, &ports, 0.0)
            .unwrap_err()
            .contains("port 7 of 2"));
        let bad = format!("{}\n1.0,0,0,x,0,0,0,0,p\n", crate::timeseries::HEADER);
        assert!(from_switch_csv(&bad, &ports, 0.0)
            .unwrap_err()
            .contains("line 2"));
    }
}

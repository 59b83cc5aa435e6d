//! What the generator records per flow and per incast query, and the two
//! output forms: TrafficGenerator's text columns and JSON.
//!
//! # Text columns (TrafficGenerator's order)
//!
//! HKUST-SING/TrafficGenerator README, "Output": *"each line gives flow size
//! (in bytes), flow completion time (in microseconds), DSCP value, desired
//! sending rate (in Mbps) and actual per-flow goodput (in Mbps)"*; for
//! request (query) completion times *"request size (in bytes), request
//! completion time (in microseconds), DSCP value, desired sending rate (in
//! Mbps), actual per-request goodput (in Mbps) and request fanout size"*.
//! We write exactly those columns, space-separated, one line per flow in
//! flow-id order; a desired rate of 0 means not rate-limited.

use std::io::{self, Write};

use serde::Serialize;

/// One completed flow: a request and its whole response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowRecord {
    /// Flow id (1-based, as sent in the request).
    pub id: u32,
    /// Index of the server in the `--servers` list.
    pub server: usize,
    /// Response size in bytes (without the echoed header).
    pub size: u64,
    /// Request sent → last response byte received, µs.
    pub fct_us: u64,
    /// DSCP of the request and the response.
    pub dscp: u8,
    /// Requested sending rate, Mbit/s (0 = not rate-limited).
    pub rate_mbps: f64,
    /// `size · 8 / fct`, Mbit/s.
    pub goodput_mbps: f64,
    /// When the request was sent, µs since the run started.
    pub start_us: u64,
}

impl FlowRecord {
    /// A completed flow; goodput is derived from size and FCT.
    pub fn completed(
        id: u32,
        server: usize,
        size: u64,
        fct_us: u64,
        dscp: u8,
        rate_bps: u64,
        start_us: u64,
    ) -> Self {
        FlowRecord {
            id,
            server,
            size,
            fct_us,
            dscp,
            rate_mbps: rate_bps as f64 / 1e6,
            goodput_mbps: goodput_mbps(size, fct_us),
            start_us,
        }
    }

    /// The TrafficGenerator text line (no newline).
    pub fn text_line(&self) -> String {
        format!(
            "{} {} {} {} {:.3}",
            self.size, self.fct_us, self.dscp, self.rate_mbps, self.goodput_mbps
        )
    }
}

/// One incast query: N flows asked for at once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueryRecord {
    /// Query number, from 0.
    pub query: u32,
    /// Bytes asked for in total (fan-in × per-server size).
    pub size: u64,
    /// First request sent → last byte of the last response, µs.
    pub qct_us: u64,
    /// DSCP of all its flows.
    pub dscp: u8,
    /// Requested rate per flow, Mbit/s (0 = not rate-limited).
    pub rate_mbps: f64,
    /// `size · 8 / qct`, Mbit/s.
    pub goodput_mbps: f64,
    /// Number of servers asked.
    pub fanout: usize,
    /// When the query started, µs since the run started.
    pub start_us: u64,
}

impl QueryRecord {
    /// The TrafficGenerator incast-client text line (no newline).
    pub fn text_line(&self) -> String {
        format!(
            "{} {} {} {} {:.3} {}",
            self.size, self.qct_us, self.dscp, self.rate_mbps, self.goodput_mbps, self.fanout
        )
    }
}

/// `bytes · 8 / µs` = Mbit/s; 0 for a zero duration.
pub fn goodput_mbps(bytes: u64, us: u64) -> f64 {
    if us == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / us as f64
    }
}

/// Writes flows (sorted by id) in TrafficGenerator's columns.
pub fn write_flows_text(mut w: impl Write, flows: &[FlowRecord]) -> io::Result<()> {
    let mut sorted: Vec<&FlowRecord> = flows.iter().collect();
    sorted.sort_by_key(|r| r.id);
    for r in sorted {
        writeln!(w, "{}", r.text_line())?;
    }
    w.flush()
}

/// Writes queries in TrafficGenerator's incast-client columns.
pub fn write_queries_text(mut w: impl Write, queries: &[QueryRecord]) -> io::Result<()> {
    for q in queries {
        writeln!(w, "{}", q.text_line())?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_columns_in_trafficgenerator_order() {
        let r = FlowRecord::completed(3, 0, 1_000_000, 8_000, 8, 500_000_000, 12);
        assert_eq!(r.goodput_mbps, 1000.0);
        assert_eq!(r.text_line(), "1000000 8000 8 500 1000.000");
        let r0 = FlowRecord::completed(1, 0, 1448, 100, 0, 0, 0);
        assert_eq!(r0.text_line(), "1448 100 0 0 115.840");
        let mut out = Vec::new();
        write_flows_text(&mut out, &[r.clone(), r0.clone()]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{}\n{}\n", r0.text_line(), r.text_line())
        );
        let q = QueryRecord {
            query: 0,
            size: 4 * 65536,
            qct_us: 2_000,
            dscp: 0,
            rate_mbps: 0.0,
            goodput_mbps: goodput_mbps(4 * 65536, 2_000),
            fanout: 4,
            start_us: 0,
        };
        assert_eq!(q.text_line(), "262144 2000 0 0 1048.576 4");
    }
}

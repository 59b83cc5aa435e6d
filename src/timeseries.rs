//! Queue time series: per port and queue, backlog and cumulative counters
//! sampled every `interval` (down to 100 µs) by the data path, written as CSV
//! by a separate thread so the packet path only copies a few integers.
//!
//! CSV columns: `t_us,port,queue,backlog_bytes,backlog_pkts,dequeued_bytes,marks,drops`
//! (`dequeued_bytes`, `marks`, `drops` are cumulative since start; the rate of
//! a queue over an interval is the difference of `dequeued_bytes`).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use crate::aqm::Aqm;
use crate::switch::Switch;
use crate::units::Nanos;

/// One row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Time since the switch started, ns.
    pub t_ns: Nanos,
    /// Port number.
    pub port: u16,
    /// Queue number.
    pub queue: u16,
    /// Bytes queued.
    pub backlog_bytes: u64,
    /// Packets queued.
    pub backlog_pkts: u32,
    /// Bytes dequeued since start.
    pub dequeued_bytes: u64,
    /// Packets CE-marked since start.
    pub marks: u64,
    /// Packets dropped since start.
    pub drops: u64,
}

/// CSV header line.
pub const HEADER: &str = "t_us,port,queue,backlog_bytes,backlog_pkts,dequeued_bytes,marks,drops";

/// Formats one row (no newline).
pub fn csv_row(s: &Sample) -> String {
    format!(
        "{:.1},{},{},{},{},{},{},{}",
        s.t_ns as f64 / 1e3,
        s.port,
        s.queue,
        s.backlog_bytes,
        s.backlog_pkts,
        s.dequeued_bytes,
        s.marks,
        s.drops
    )
}

/// Appends one sample per (port, queue) of `sw` at `now` to `out`.
pub fn sample<A: Aqm>(sw: &Switch<A>, now: Nanos, out: &mut Vec<Sample>) {
    for (p, port) in sw.ports().iter().enumerate() {
        for (q, c) in port.egress.counters().queues.iter().enumerate() {
            out.push(Sample {
                t_ns: now,
                port: p as u16,
                queue: q as u16,
                backlog_bytes: c.backlog_bytes,
                backlog_pkts: c.backlog_pkts,
                dequeued_bytes: c.dequeued.bytes,
                marks: c.marked.total().pkts,
                drops: c.dropped.total().pkts,
            });
        }
    }
}

/// Writes batches of samples to a CSV file on its own thread.
pub struct Writer {
    tx: Option<SyncSender<Vec<Sample>>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl Writer {
    /// Creates the file and starts the writer thread.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let f = std::fs::File::create(path)?;
        let (tx, rx) = sync_channel::<Vec<Sample>>(64);
        let thread = std::thread::Builder::new()
            .name("timeseries".into())
            .spawn(move || {
                let mut w = BufWriter::new(f);
                writeln!(w, "{HEADER}")?;
                let mut rows = 0u64;
                for batch in rx {
                    for s in &batch {
                        writeln!(w, "{}", csv_row(s))?;
                    }
                    rows += batch.len() as u64;
                }
                w.flush()?;
                Ok(rows)
            })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Hands a batch to the writer (dropped if the writer is 64 batches behind:
    /// the packet path never waits for the disk).
    pub fn send(&self, batch: Vec<Sample>) -> bool {
        self.tx.as_ref().is_some_and(|t| t.try_send(batch).is_ok())
    }

    /// Flushes and closes the file; returns the rows written.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.tx.take();
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("time-series writer panicked"))),
            None => Ok(0),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_header_and_rows() {
        let path = std::env::temp_dir().join(format!("ss-ts-{}.csv", std::process::id()));
        let w = Writer::create(&path).unwrap();
        let s = Sample {
            t_ns: 1_500,
            port: 1,
            queue: 2,
            backlog_bytes: 3000,
            backlog_pkts: 2,
            dequeued_bytes: 9000,
            marks: 4,
            drops: 1,
        };
        assert!(w.send(vec![s, Sample { t_ns: 101_500, ..s }]));
        assert_eq!(w.finish().unwrap(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                HEADER,
                "1.5,1,2,3000,2,9000,4,1",
                "101.5,1,2,3000,2,9000,4,1"
            ]
        );
        std::fs::remove_file(&path).unwrap();
    }
}

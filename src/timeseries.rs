//! Time series: per port and queue, backlog and cumulative counters sampled
//! every `interval` (down to 100 µs) by the data path, written as CSV by a
//! separate thread so the packet path only copies a few integers.
//!
//! Two files. `--timeseries q.csv` writes the queues to `q.csv`:
//! `t_us,port,queue,backlog_bytes,backlog_pkts,dequeued_bytes,marks,drops,port_name`
//! (`dequeued_bytes`, `marks`, `drops` are cumulative since start; the rate of
//! a queue over an interval is the difference of `dequeued_bytes`;
//! `port_name` is the port's name in the counters: its interface, or a
//! fabric's `leaf1:spine2`), and the
//! ports' gauges to `q.port.csv` ([`port_series_path`]) in long form,
//! `t_us,port,name,value,port_name`: the fidelity guard (`link_busy_us`,
//! `link_lost_us`, `link_excess_pkts`, cumulative), the AQM's own state
//! (`Aqm::gauges`: N_flow, K_p, slope, ...), R-AQM's (`raqm_state` 0/1/2 =
//! normal/draining/congested, `raqm_viq_pkts`, `raqm_tokens`, cumulative
//! `raqm_held`, `raqm_released`, `raqm_dropped_stale`, `raqm_rewrite_*`),
//! and switch-wide rows with an
//! empty port (`loop_stalls`, `loop_stalled_us`, cumulative).
//!
//! Time dilation (`--dilation D`): `t_us` and every AQM gauge are emulated
//! time; the fidelity guard's gauges (`link_busy_us`, `link_lost_us`,
//! `loop_stalled_us`) are real time, as in the exit report. A time-dilated
//! run's port file starts with a switch-wide row `0.0,,dilation,D,`.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use crate::aqm::Aqm;
use crate::switch::Switch;
use crate::timebase::Dilation;
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
pub const HEADER: &str =
    "t_us,port,queue,backlog_bytes,backlog_pkts,dequeued_bytes,marks,drops,port_name";
/// CSV header line of the port gauges.
pub const PORT_HEADER: &str = "t_us,port,name,value,port_name";

/// One gauge of one port (or of the whole switch: `port` None).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortSample {
    /// Time since the switch started, ns.
    pub t_ns: Nanos,
    /// Port number; None for switch-wide gauges.
    pub port: Option<u16>,
    /// Gauge name (snake_case).
    pub name: &'static str,
    /// Value.
    pub value: f64,
}

/// What one sampling instant adds, for both files.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Queue rows.
    pub queues: Vec<Sample>,
    /// Port gauge rows.
    pub ports: Vec<PortSample>,
}

impl Batch {
    /// An empty batch with room for a few thousand rows.
    pub fn with_capacity(n: usize) -> Self {
        Batch {
            queues: Vec::with_capacity(n),
            ports: Vec::with_capacity(n),
        }
    }
    /// Whether it holds no row.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.ports.is_empty()
    }
}

/// Where the port gauges of `--timeseries path` go: `q.csv` → `q.port.csv`.
pub fn port_series_path(path: &Path) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "timeseries".into());
    path.with_file_name(format!("{stem}.port.csv"))
}

/// Formats one gauge row (no newline).
pub fn port_csv_row(s: &PortSample, names: &[String]) -> String {
    let port = s.port.map(|p| p.to_string()).unwrap_or_default();
    let name = s.port.map_or("", |p| port_name(names, p));
    format!(
        "{:.1},{},{},{},{}",
        s.t_ns as f64 / 1e3,
        port,
        s.name,
        s.value,
        csv_field(name)
    )
}

/// Formats one row (no newline); `names` names the ports.
pub fn csv_row(s: &Sample, names: &[String]) -> String {
    format!(
        "{:.1},{},{},{},{},{},{},{},{}",
        s.t_ns as f64 / 1e3,
        s.port,
        s.queue,
        s.backlog_bytes,
        s.backlog_pkts,
        s.dequeued_bytes,
        s.marks,
        s.drops,
        csv_field(port_name(names, s.port))
    )
}

/// Port `p`'s name (empty when `names` has none for it).
fn port_name(names: &[String], p: u16) -> &str {
    names.get(p as usize).map_or("", String::as_str)
}

/// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or
/// a line break — a fabric's switch names are the user's.
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Appends one sample per (port, queue) of `sw` at `now`, each port's
/// gauges, and the data path's stalls (when given) to `out`. `now` is the
/// switch's (emulated) time; `dilation` turns the link's fidelity counters
/// into the guard's real time.
pub fn sample<A: Aqm>(
    sw: &Switch<A>,
    now: Nanos,
    dilation: Dilation,
    stalls: Option<&crate::fidelity::LoopStalls>,
    out: &mut Batch,
) {
    for (p, port) in sw.ports().iter().enumerate() {
        sample_port(p as u16, port, now, dilation, out);
    }
    if let Some(st) = stalls {
        sample_stalls(st, now, out);
    }
}

/// Appends the samples of one egress port, numbered `p` in the files (a
/// fabric numbers every switch's ports in one sequence), to `out`.
pub fn sample_port<A: Aqm>(
    p: u16,
    port: &crate::switch::SwitchPort<A>,
    now: Nanos,
    dilation: Dilation,
    out: &mut Batch,
) {
    let link = port.egress.shaper().fidelity(now).in_real_time(dilation);
    let mut gauge = |name: &'static str, value: f64| {
        out.ports.push(PortSample {
            t_ns: now,
            port: Some(p),
            name,
            value,
        })
    };
    gauge("link_busy_us", link.busy_ns as f64 / 1e3);
    gauge("link_lost_us", link.lost_ns as f64 / 1e3);
    gauge("link_excess_pkts", link.excess_pkts as f64);
    port.egress.aqm().gauges(&mut gauge);
    if let Some(f) = port.egress.flows() {
        f.gauges(&mut gauge);
    }
    if let Some(r) = &port.raqm {
        r.gauges(&mut gauge);
    }
    for (q, c) in port.egress.counters().queues.iter().enumerate() {
        out.queues.push(Sample {
            t_ns: now,
            port: p,
            queue: q as u16,
            backlog_bytes: c.backlog_bytes,
            backlog_pkts: c.backlog_pkts,
            dequeued_bytes: c.dequeued.bytes,
            marks: c.marked.total().pkts,
            drops: c.dropped.total().pkts,
        });
    }
}

/// Appends the data path's stalls so far (rows without a port) to `out`.
pub fn sample_stalls(st: &crate::fidelity::LoopStalls, now: Nanos, out: &mut Batch) {
    for (name, value) in [
        ("loop_stalls", st.count as f64),
        ("loop_stalled_us", st.stalled_ns as f64 / 1e3),
    ] {
        out.ports.push(PortSample {
            t_ns: now,
            port: None,
            name,
            value,
        });
    }
}

/// Writes batches of samples to the two CSV files on its own thread.
pub struct Writer {
    tx: Option<SyncSender<Batch>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl Writer {
    /// Creates the files (`path` and [`port_series_path`]) and starts the
    /// writer thread; a time-dilated run's port file first says D. `names`
    /// names the ports (their `port_name` column).
    pub fn create(path: &Path, dilation: Dilation, names: Vec<String>) -> std::io::Result<Self> {
        let f = std::fs::File::create(path)?;
        let g = std::fs::File::create(port_series_path(path))?;
        let (tx, rx) = sync_channel::<Batch>(64);
        let thread = std::thread::Builder::new()
            .name("timeseries".into())
            .spawn(move || {
                let mut w = BufWriter::new(f);
                let mut wp = BufWriter::new(g);
                writeln!(w, "{HEADER}")?;
                writeln!(wp, "{PORT_HEADER}")?;
                if !dilation.is_none() {
                    writeln!(wp, "0.0,,dilation,{dilation},")?;
                }
                let mut rows = 0u64;
                for batch in rx {
                    for s in &batch.queues {
                        writeln!(w, "{}", csv_row(s, &names))?;
                    }
                    for s in &batch.ports {
                        writeln!(wp, "{}", port_csv_row(s, &names))?;
                    }
                    rows += batch.queues.len() as u64;
                }
                w.flush()?;
                wp.flush()?;
                Ok(rows)
            })?;
        Ok(Writer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Hands a batch to the writer (dropped if the writer is 64 batches behind:
    /// the packet path never waits for the disk). std's channel, not
    /// crossbeam's: this runs on the data-path thread, and crossbeam's
    /// `try_send` measured no faster (BENCHMARKS.md, "Thread handoff").
    pub fn send(&self, batch: Batch) -> bool {
        self.tx.as_ref().is_some_and(|t| t.try_send(batch).is_ok())
    }

    /// Flushes and closes the files; returns the queue rows written.
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
        let names = vec!["x-h1-sw".to_string(), "leaf1:spine2".to_string()];
        let w = Writer::create(&path, Dilation::NONE, names).unwrap();
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
        let g = PortSample {
            t_ns: 1_500,
            port: Some(1),
            name: "link_lost_us",
            value: 12.5,
        };
        assert!(w.send(Batch {
            queues: vec![s, Sample { t_ns: 101_500, ..s }],
            ports: vec![
                g,
                PortSample {
                    port: None,
                    name: "loop_stalls",
                    value: 3.0,
                    ..g
                }
            ],
        }));
        assert_eq!(w.finish().unwrap(), 2);
        let gauges = std::fs::read_to_string(port_series_path(&path)).unwrap();
        assert_eq!(
            gauges.lines().collect::<Vec<_>>(),
            vec![
                PORT_HEADER,
                "1.5,1,link_lost_us,12.5,leaf1:spine2",
                "1.5,,loop_stalls,3,"
            ]
        );
        std::fs::remove_file(port_series_path(&path)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                HEADER,
                "1.5,1,2,3000,2,9000,4,1,leaf1:spine2",
                "101.5,1,2,3000,2,9000,4,1,leaf1:spine2"
            ]
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_port_name_with_a_comma_or_quote_is_quoted() {
        assert_eq!(csv_field("leaf1:spine2"), "leaf1:spine2");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        let row = csv_row(&Sample::default(), &["a,b".to_string()]);
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(row.as_bytes());
        let rec = rd.records().next().unwrap().unwrap();
        assert_eq!(rec.len(), 9);
        assert_eq!(&rec[8], "a,b");
        // A port the names do not cover has an empty name.
        assert!(csv_row(
            &Sample {
                port: 3,
                ..Sample::default()
            },
            &[]
        )
        .ends_with(",0,"));
    }

    #[test]
    fn a_dilated_series_says_d_first() {
        let path = std::env::temp_dir().join(format!("ss-ts-d-{}.csv", std::process::id()));
        let w = Writer::create(&path, Dilation::new(4.0).unwrap(), vec![]).unwrap();
        let g = PortSample {
            t_ns: 250_000,
            port: Some(0),
            name: "link_busy_us",
            value: 1_000.0,
        };
        assert!(w.send(Batch {
            queues: vec![],
            ports: vec![g],
        }));
        w.finish().unwrap();
        let gauges = std::fs::read_to_string(port_series_path(&path)).unwrap();
        assert_eq!(
            gauges.lines().collect::<Vec<_>>(),
            vec![
                PORT_HEADER,
                "0.0,,dilation,4,",
                "250.0,0,link_busy_us,1000,"
            ]
        );
        std::fs::remove_file(port_series_path(&path)).unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}

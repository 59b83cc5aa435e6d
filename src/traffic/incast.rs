//! Incast: one client asks all N servers at once for S bytes each (fan-in
//! N), waits for all N responses, and repeats.
//!
//! One persistent connection per server, opened before the first query —
//! or, with `fresh`, a new one per server for every query, opened (and the
//! previous one closed) before the query starts, so every response is a new
//! TCP flow starting from the initial window, as the R-AQM paper's ns-3
//! flows do (R-AQM paper §VI-B "N hosts send a 3.2MB flow to a host"). On a
//! persistent connection Linux restarts an idle flow's window only once it
//! has been idle for an RTO, which a large RTO_min prevents. A
//! query's completion time (QCT) runs from the first request written to the
//! last byte of the last response; each flow's FCT from its own request.
//! Query k+1 starts `interval` after query k started, or as soon as query k
//! completes if that is later (queries never overlap). With a [`Dilation`]
//! D the interval, the timeout and the flow rate are emulated (D × longer,
//! / D on the wire) and every reported time is emulated (real / D).

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::conn::{Conn, Outcome};
use super::proto::Request;
use super::record::{goodput_mbps, FlowRecord, QueryRecord};
use super::sock;
use super::summary::{fct_stats, FctStats, FctSummary};
use super::{RunClock, TgError};
use crate::timebase::Dilation;

/// What to run.
#[derive(Clone, Debug)]
pub struct IncastConfig {
    /// The N servers answering each query.
    pub servers: Vec<SocketAddr>,
    /// Bytes each server sends per query.
    pub size: u64,
    /// Number of queries.
    pub queries: u32,
    /// Start-to-start spacing of queries.
    pub interval: Duration,
    /// DSCP of every flow.
    pub dscp: u8,
    /// Requested per-flow rate, bit/s (0 = unpaced).
    pub flow_rate_bps: u64,
    /// Safety bound on the whole run.
    pub timeout: Duration,
    /// A new connection per server for every query (see the module doc).
    pub fresh: bool,
    /// Time dilation: `interval`, `timeout` and `flow_rate_bps` are
    /// emulated, and so are the reported QCTs, FCTs and start times.
    pub dilation: Dilation,
}

/// The result of an incast run.
#[derive(Clone, Debug, Serialize)]
pub struct IncastReport {
    /// Completed queries, in order.
    pub queries: Vec<QueryRecord>,
    /// Every flow of the completed queries.
    pub flows: Vec<FlowRecord>,
    /// QCT statistics (nearest-rank percentiles), µs.
    pub qct: Option<FctStats>,
    /// FCT summary of the flows.
    pub fct: FctSummary,
    /// Connections opened in total (fan-in, or fan-in × queries run with
    /// `fresh`).
    pub connections: usize,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

impl IncastReport {
    /// One line for people.
    pub fn one_line(&self) -> String {
        let q = match &self.qct {
            Some(s) => format!(
                "QCT avg {:.0}us p99 {}us max {}us",
                s.mean_us, s.p99_us, s.max_us
            ),
            None => "no query completed".into(),
        };
        format!(
            "{} queries, {} flows: {q}{}",
            self.queries.len(),
            self.flows.len(),
            self.error
                .as_ref()
                .map(|e| format!(" | STOPPED: {e}"))
                .unwrap_or_default()
        )
    }
}

/// Runs the incast. Fails only if a server cannot be reached at start; a
/// failure mid-run stops the run and is returned in `error` with what was
/// recorded so far.
pub fn run(cfg: &IncastConfig) -> Result<IncastReport, TgError> {
    check(cfg)?;
    sock::tighten_timer_slack();
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outcome>();
    let mut conns = Vec::with_capacity(cfg.servers.len());
    open_all(cfg, &mut conns, &out_tx)?;
    let mut run = Incast::new(cfg, conns, out_tx, out_rx);
    let error = run.run_queries().err();
    for c in &mut run.conns {
        c.close();
    }
    let Incast {
        queries,
        flows,
        connections,
        ..
    } = run;
    let qcts: Vec<u64> = queries.iter().map(|q| q.qct_us).collect();
    let wall_us = queries.last().map(|q| q.start_us + q.qct_us).unwrap_or(0);
    Ok(IncastReport {
        qct: fct_stats(&qcts),
        fct: FctSummary::from_records(&flows, wall_us),
        queries,
        flows,
        connections,
        error,
    })
}

/// Refuses a run with no server, or more flows than 32-bit ids can number.
fn check(cfg: &IncastConfig) -> Result<(), TgError> {
    if cfg.servers.is_empty() {
        return Err(TgError::Usage(
            "give at least one server (--servers ip:port,...)".into(),
        ));
    }
    if cfg.queries as u64 * cfg.servers.len() as u64 >= u32::MAX as u64 {
        return Err(TgError::Usage(
            "queries × servers must stay below 2^32 (flow ids are 32-bit)".into(),
        ));
    }
    Ok(())
}

/// Closes `conns` and opens one new connection per server in their place.
fn open_all(
    cfg: &IncastConfig,
    conns: &mut Vec<Conn>,
    out_tx: &Sender<Outcome>,
) -> Result<(), TgError> {
    for c in conns.iter_mut() {
        c.close();
    }
    conns.clear();
    for (i, &addr) in cfg.servers.iter().enumerate() {
        let idle = Arc::new(Mutex::new(Vec::new()));
        let c = Conn::open(i, addr, 0, idle, out_tx.clone(), cfg.dilation)
            .map_err(|source| TgError::Connect { addr, source })?;
        conns.push(c);
    }
    Ok(())
}

/// A run's connections, clock and what it has recorded, shared by the
/// steps of each query: start the flows, collect them, record the query.
struct Incast<'a> {
    cfg: &'a IncastConfig,
    fanout: usize,
    clock: RunClock,
    conns: Vec<Conn>,
    out_tx: Sender<Outcome>,
    out_rx: Receiver<Outcome>,
    connections: usize,
    queries: Vec<QueryRecord>,
    flows: Vec<FlowRecord>,
}

impl<'a> Incast<'a> {
    fn new(
        cfg: &'a IncastConfig,
        conns: Vec<Conn>,
        out_tx: Sender<Outcome>,
        out_rx: Receiver<Outcome>,
    ) -> Self {
        let fanout = cfg.servers.len();
        Incast {
            cfg,
            fanout,
            clock: RunClock::start(cfg.dilation, cfg.timeout),
            conns,
            out_tx,
            out_rx,
            connections: fanout,
            queries: Vec::with_capacity(cfg.queries as usize),
            flows: Vec::with_capacity(cfg.queries as usize * fanout),
        }
    }

    /// Every query in turn; the first failure stops the run, as the text
    /// of the report's `error`.
    fn run_queries(&mut self) -> Result<(), String> {
        let mut next_start = self.clock.t0;
        for q in 0..self.cfg.queries {
            if self.cfg.fresh && q > 0 {
                open_all(self.cfg, &mut self.conns, &self.out_tx).map_err(|e| e.to_string())?;
                self.connections += self.fanout;
            }
            let now = Instant::now();
            if next_start > now {
                thread::sleep(next_start - now);
            }
            let q_start = Instant::now();
            self.start_flows(q)?;
            let (q_flows, q_end) = self.collect(q_start)?;
            self.record(q, q_start, q_end, q_flows);
            next_start = (q_start + self.clock.dil.to_real(self.cfg.interval)).max(Instant::now());
        }
        Ok(())
    }

    /// Asks every server for its response of query `q`.
    fn start_flows(&mut self, q: u32) -> Result<(), String> {
        let fanout = self.fanout as u32;
        for (k, c) in self.conns.iter_mut().enumerate() {
            let id = q * fanout + k as u32 + 1;
            let handed_over = c.start_flow(Request {
                id,
                size: self.cfg.size,
                dscp: self.cfg.dscp,
                rate_bps: self.clock.dil.wire_bps(self.cfg.flow_rate_bps),
            });
            if !handed_over {
                return Err(TgError::Flow {
                    id,
                    addr: self.cfg.servers[k],
                    reason: "its connection had already failed".into(),
                }
                .to_string());
            }
        }
        Ok(())
    }

    /// Waits for every response of the query started at `q_start`: its
    /// flows and when the last one ended.
    fn collect(&self, q_start: Instant) -> Result<(Vec<FlowRecord>, Instant), String> {
        let mut q_end = q_start;
        let mut q_flows = Vec::with_capacity(self.fanout);
        while q_flows.len() < self.fanout {
            let now = Instant::now();
            let wait = self.clock.deadline.saturating_duration_since(now);
            match self.out_rx.recv_timeout(wait) {
                Ok(Outcome::Done {
                    server,
                    req,
                    start,
                    end,
                }) => {
                    q_end = q_end.max(end);
                    q_flows.push(FlowRecord::completed(
                        req.id,
                        server,
                        req.size,
                        self.clock.dil.emulated_us(end.duration_since(start)),
                        req.dscp,
                        self.cfg.flow_rate_bps,
                        self.clock
                            .dil
                            .emulated_us(start.duration_since(self.clock.t0)),
                    ));
                }
                Ok(Outcome::Failed { server, id, reason }) => {
                    return Err(TgError::Flow {
                        id,
                        addr: self.cfg.servers[server],
                        reason,
                    }
                    .to_string());
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(TgError::Timeout {
                        secs: self.cfg.timeout.as_secs_f64(),
                        done: self.queries.len(),
                        total: self.cfg.queries as usize,
                        what: "queries",
                    }
                    .to_string());
                }
            }
        }
        Ok((q_flows, q_end))
    }

    /// Records query `q` and its flows.
    fn record(&mut self, q: u32, q_start: Instant, q_end: Instant, mut q_flows: Vec<FlowRecord>) {
        let qct_us = self.clock.dil.emulated_us(q_end.duration_since(q_start));
        let total = self.cfg.size * self.fanout as u64;
        self.queries.push(QueryRecord {
            query: q,
            size: total,
            qct_us,
            dscp: self.cfg.dscp,
            rate_mbps: self.cfg.flow_rate_bps as f64 / 1e6,
            goodput_mbps: goodput_mbps(total, qct_us),
            fanout: self.fanout,
            start_us: self
                .clock
                .dil
                .emulated_us(q_start.duration_since(self.clock.t0)),
        });
        q_flows.sort_by_key(|r| r.id);
        self.flows.extend(q_flows);
    }
}

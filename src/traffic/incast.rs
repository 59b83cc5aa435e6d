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

use crossbeam_channel::RecvTimeoutError;
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
use super::TgError;
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
    if cfg.servers.is_empty() {
        return Err(TgError::Usage(
            "give at least one server (--servers ip:port,...)".into(),
        ));
    }
    let fanout = cfg.servers.len();
    if cfg.queries as u64 * fanout as u64 >= u32::MAX as u64 {
        return Err(TgError::Usage(
            "queries × servers must stay below 2^32 (flow ids are 32-bit)".into(),
        ));
    }
    sock::tighten_timer_slack();
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outcome>();
    let open_all = |conns: &mut Vec<Conn>| -> Result<(), TgError> {
        for c in conns.iter_mut() {
            c.close();
        }
        conns.clear();
        for (i, &addr) in cfg.servers.iter().enumerate() {
            let idle = Arc::new(Mutex::new(Vec::new()));
            let c = Conn::open(i, addr, 0, idle, out_tx.clone())
                .map_err(|source| TgError::Connect { addr, source })?;
            conns.push(c);
        }
        Ok(())
    };
    let mut conns = Vec::with_capacity(fanout);
    open_all(&mut conns)?;
    let mut connections = fanout;

    let dil = cfg.dilation;
    let t0 = Instant::now();
    let deadline = t0 + dil.to_real(cfg.timeout);
    let mut queries = Vec::with_capacity(cfg.queries as usize);
    let mut flows = Vec::with_capacity(cfg.queries as usize * fanout);
    let mut error = None;
    let mut next_start = t0;
    'queries: for q in 0..cfg.queries {
        if cfg.fresh && q > 0 {
            if let Err(e) = open_all(&mut conns) {
                error = Some(e.to_string());
                break 'queries;
            }
            connections += fanout;
        }
        let now = Instant::now();
        if next_start > now {
            thread::sleep(next_start - now);
        }
        let q_start = Instant::now();
        for (k, c) in conns.iter_mut().enumerate() {
            let id = q * fanout as u32 + k as u32 + 1;
            let handed_over = c.start_flow(Request {
                id,
                size: cfg.size,
                dscp: cfg.dscp,
                rate_bps: dil.wire_bps(cfg.flow_rate_bps),
            });
            if !handed_over {
                error = Some(
                    TgError::Flow {
                        id,
                        addr: cfg.servers[k],
                        reason: "its connection had already failed".into(),
                    }
                    .to_string(),
                );
                break 'queries;
            }
        }
        let mut q_end = q_start;
        let mut q_flows = Vec::with_capacity(fanout);
        while q_flows.len() < fanout {
            let now = Instant::now();
            let wait = deadline.saturating_duration_since(now);
            match out_rx.recv_timeout(wait) {
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
                        dil.emulated_us(end.duration_since(start)),
                        req.dscp,
                        cfg.flow_rate_bps,
                        dil.emulated_us(start.duration_since(t0)),
                    ));
                }
                Ok(Outcome::Failed { server, id, reason }) => {
                    error = Some(
                        TgError::Flow {
                            id,
                            addr: cfg.servers[server],
                            reason,
                        }
                        .to_string(),
                    );
                    break 'queries;
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    error = Some(
                        TgError::Timeout {
                            secs: cfg.timeout.as_secs_f64(),
                            done: queries.len(),
                            total: cfg.queries as usize,
                            what: "queries",
                        }
                        .to_string(),
                    );
                    break 'queries;
                }
            }
        }
        let qct_us = dil.emulated_us(q_end.duration_since(q_start));
        let total = cfg.size * fanout as u64;
        queries.push(QueryRecord {
            query: q,
            size: total,
            qct_us,
            dscp: cfg.dscp,
            rate_mbps: cfg.flow_rate_bps as f64 / 1e6,
            goodput_mbps: goodput_mbps(total, qct_us),
            fanout,
            start_us: dil.emulated_us(q_start.duration_since(t0)),
        });
        q_flows.sort_by_key(|r| r.id);
        flows.extend(q_flows);
        next_start = (q_start + dil.to_real(cfg.interval)).max(Instant::now());
    }
    for c in &mut conns {
        c.close();
    }
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

//! The workload client: Poisson arrivals of flows whose sizes follow a CDF,
//! each asked of a uniformly chosen server, at a target load of the
//! bottleneck (this client's downlink: every response comes to it).
//!
//! As TrafficGenerator's `client`: the whole schedule (size, server, gap of
//! every flow) is drawn up front from the seed; each server has a pool of
//! persistent connections (`conns` opened at start) and a flow goes on an
//! idle one, or on a new one when all are busy. Arrival times are absolute
//! (`t0 + Σ gaps`), so a late start does not push back later flows; how
//! late each request went out is recorded (`lateness`).
//!
//! Time dilation (D): the schedule is drawn in emulated time (the load of
//! the emulated link rate), so it is the same for every D; the client
//! sleeps D times each gap, asks servers for the flow rates / D, and
//! reports FCTs, start times, lateness and the run's length in emulated
//! time (real / D).

use crossbeam_channel::RecvTimeoutError;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cdf::FlowSizeCdf;
use super::conn::{Conn, IdleList, Outcome};
use super::dscp::DscpMix;
use super::poisson::PoissonArrivals;
use super::proto::Request;
use super::rates::FlowRateMix;
use super::record::FlowRecord;
use super::sock;
use super::summary::FctSummary;
use super::TgError;
use crate::rng::SimRng;
use crate::timebase::Dilation;
use crate::units::Rate;

/// What to run.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Servers to ask, chosen uniformly per flow.
    pub servers: Vec<SocketAddr>,
    /// Flow-size distribution.
    pub cdf: FlowSizeCdf,
    /// Target load of the bottleneck, (0, 1].
    pub load: f64,
    /// Bottleneck rate the load refers to.
    pub link_rate: Rate,
    /// Number of flows.
    pub flows: u32,
    /// Connections opened per server at start.
    pub conns_per_server: usize,
    /// DSCP per flow (one value, or drawn by weight per flow).
    pub dscp: DscpMix,
    /// Per-flow sending rate asked of the server, bit/s (0 = unpaced), one
    /// or drawn by weight per flow.
    pub flow_rate: FlowRateMix,
    /// Seed of the schedule.
    pub seed: u64,
    /// Safety bound on the whole run.
    pub timeout: Duration,
    /// Time dilation: the load's link rate, the flow rates and the timeout
    /// are emulated, so the schedule is the emulated one, slept D times
    /// longer; every reported time is emulated (real / D).
    pub dilation: Dilation,
}

/// One flow of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedFlow {
    /// Flow id, from 1 (TrafficGenerator reserves 0).
    pub id: u32,
    /// Index into `servers`.
    pub server: usize,
    /// Response size in bytes.
    pub size: u64,
    /// Time after the previous arrival, ns.
    pub gap_ns: u64,
    /// DSCP of the request and the response.
    pub dscp: u8,
    /// Sending rate asked of the server, bit/s (0 = unpaced).
    pub rate_bps: u64,
}

/// Draws the whole schedule: per flow a size, a server, a gap, (only with
/// several DSCP classes) a DSCP and (only with several rates) a sending
/// rate, in that order from one seeded generator.
pub fn plan(cfg: &ClientConfig) -> Result<Vec<PlannedFlow>, TgError> {
    if cfg.servers.is_empty() {
        return Err(TgError::Usage(
            "give at least one server (--servers ip:port,...)".into(),
        ));
    }
    let arrivals = PoissonArrivals::for_load(cfg.cdf.mean(), cfg.load, cfg.link_rate)
        .map_err(|e| TgError::Usage(e.to_string()))?;
    let mut rng = SimRng::new(cfg.seed);
    let n = cfg.servers.len() as u64;
    Ok((1..=cfg.flows)
        .map(|id| {
            let size = cfg.cdf.sample(&mut rng);
            let server = (rng.next_u64() % n) as usize;
            let gap_ns = arrivals.next_gap(&mut rng);
            let dscp = cfg.dscp.sample(&mut rng);
            let rate_bps = cfg.flow_rate.sample(&mut rng);
            PlannedFlow {
                id,
                server,
                size,
                gap_ns,
                dscp,
                rate_bps,
            }
        })
        .collect())
}

/// A safety bound for a run: twice the expected length of the arrival
/// schedule (`flows` × mean gap) plus 60 s for the last flows to finish.
pub fn default_timeout(cdf: &FlowSizeCdf, load: f64, link_rate: Rate, flows: u32) -> Duration {
    let schedule_ns = PoissonArrivals::for_load(cdf.mean(), load, link_rate)
        .map(|a| a.mean_gap_ns() * flows as f64)
        .unwrap_or(0.0);
    Duration::from_secs(60) + Duration::from_secs_f64((2.0 * schedule_ns / 1e9).min(1e7))
}

/// A flow that did not complete.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowFailure {
    /// Flow id.
    pub id: u32,
    /// Server address.
    pub server: String,
    /// What happened (or "unfinished at timeout", "not started").
    pub reason: String,
}

/// The result of a run.
#[derive(Clone, Debug, Serialize)]
pub struct ClientReport {
    /// Completed flows, by id.
    pub flows: Vec<FlowRecord>,
    /// Flows that failed, timed out or never started.
    pub failures: Vec<FlowFailure>,
    /// FCT summary of the completed flows.
    pub summary: FctSummary,
    /// First request → last completion, µs.
    pub wall_us: u64,
    /// Arrival rate the schedule targets, flows/s.
    pub target_flows_per_sec: f64,
    /// Connections opened in total (initial + on demand).
    pub connections: usize,
    /// Mean of (request sent − scheduled arrival), µs.
    pub mean_lateness_us: f64,
    /// Largest such lateness, µs.
    pub max_lateness_us: u64,
    /// True if the safety timeout cut the run short.
    pub timed_out: bool,
}

impl ClientReport {
    /// One line for people.
    pub fn one_line(&self) -> String {
        format!(
            "{} flows done, {} failed in {:.2} s ({} conns, lateness avg {:.0}us max {}us{}) | {}",
            self.flows.len(),
            self.failures.len(),
            self.wall_us as f64 / 1e6,
            self.connections,
            self.mean_lateness_us,
            self.max_lateness_us,
            if self.timed_out { ", TIMED OUT" } else { "" },
            self.summary.one_line()
        )
    }
}

struct Pool {
    addr: SocketAddr,
    conns: Vec<Conn>,
    idle: IdleList,
    /// Set when a new connection could not be opened: later flows to this
    /// server fail at once instead of each stalling the arrival schedule in
    /// `connect` (up to its timeout).
    unreachable: Option<String>,
}

/// Runs the workload. Fails early only if a server cannot be reached at
/// start; later failures are recorded per flow.
pub fn run(cfg: &ClientConfig) -> Result<ClientReport, TgError> {
    let plan = plan(cfg)?;
    let target_flows_per_sec = PoissonArrivals::for_load(cfg.cdf.mean(), cfg.load, cfg.link_rate)
        .map(|a| a.flows_per_sec())
        .unwrap_or(0.0);
    sock::tighten_timer_slack();
    let (out_tx, out_rx) = crossbeam_channel::unbounded::<Outcome>();
    let mut pools: Vec<Pool> = Vec::with_capacity(cfg.servers.len());
    for (i, &addr) in cfg.servers.iter().enumerate() {
        let idle: IdleList = Arc::new(Mutex::new(Vec::new()));
        let mut conns = Vec::new();
        for slot in 0..cfg.conns_per_server.max(1) {
            let c = Conn::open(i, addr, slot, idle.clone(), out_tx.clone())
                .map_err(|source| TgError::Connect { addr, source })?;
            conns.push(c);
        }
        // Hand out the lowest slots first.
        *idle.lock().expect("fresh mutex") = (0..conns.len()).rev().collect();
        pools.push(Pool {
            addr,
            conns,
            idle,
            unreachable: None,
        });
    }
    let mut connections: usize = pools.iter().map(|p| p.conns.len()).sum();

    let dil = cfg.dilation;
    let t0 = Instant::now();
    let deadline = t0 + dil.to_real(cfg.timeout);
    let mut failures: Vec<FlowFailure> = Vec::new();
    let mut started = 0usize;
    let mut arrivals = 0usize;
    let mut lateness_sum_us = 0u128;
    let mut max_lateness_us = 0u64;
    let mut due = t0;
    let mut timed_out = false;
    for f in &plan {
        due += dil.to_real(Duration::from_nanos(f.gap_ns));
        if due >= deadline {
            timed_out = true;
            break;
        }
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        let late_us = dil.emulated_us(Instant::now().saturating_duration_since(due));
        arrivals += 1;
        lateness_sum_us += late_us as u128;
        max_lateness_us = max_lateness_us.max(late_us);
        let pool = &mut pools[f.server];
        let slot = pool.idle.lock().ok().and_then(|mut l| l.pop());
        let slot = match (slot, &pool.unreachable) {
            (Some(s), _) => s,
            (None, Some(why)) => {
                failures.push(FlowFailure {
                    id: f.id,
                    server: pool.addr.to_string(),
                    reason: why.clone(),
                });
                continue;
            }
            (None, None) => {
                let s = pool.conns.len();
                match Conn::open(f.server, pool.addr, s, pool.idle.clone(), out_tx.clone()) {
                    Ok(c) => {
                        pool.conns.push(c);
                        connections += 1;
                        s
                    }
                    Err(e) => {
                        let why = format!(
                            "no idle connection and a new one failed: {e} (flow {}; later flows to this server are not tried)",
                            f.id
                        );
                        failures.push(FlowFailure {
                            id: f.id,
                            server: pool.addr.to_string(),
                            reason: why.clone(),
                        });
                        pool.unreachable = Some(why);
                        continue;
                    }
                }
            }
        };
        let handed_over = pool.conns[slot].start_flow(Request {
            id: f.id,
            size: f.size,
            dscp: f.dscp,
            rate_bps: dil.wire_bps(f.rate_bps),
        });
        if handed_over {
            started += 1;
        } else {
            failures.push(FlowFailure {
                id: f.id,
                server: pool.addr.to_string(),
                reason: "its connection had already failed".into(),
            });
        }
    }
    drop(out_tx);

    let mut flows: Vec<FlowRecord> = Vec::with_capacity(started);
    let mut reported = vec![false; plan.len() + 1];
    let mut last_end = t0;
    let mut outcomes = 0usize;
    while outcomes < started {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        match out_rx.recv_timeout(deadline - now) {
            Ok(Outcome::Done {
                server,
                req,
                start,
                end,
            }) => {
                outcomes += 1;
                reported[req.id as usize] = true;
                last_end = last_end.max(end);
                flows.push(FlowRecord::completed(
                    req.id,
                    server,
                    req.size,
                    dil.emulated_us(end.duration_since(start)),
                    req.dscp,
                    plan[req.id as usize - 1].rate_bps,
                    dil.emulated_us(start.duration_since(t0)),
                ));
            }
            Ok(Outcome::Failed { server, id, reason }) => {
                outcomes += 1;
                reported[id as usize] = true;
                failures.push(FlowFailure {
                    id,
                    server: cfg.servers[server].to_string(),
                    reason,
                });
            }
            Err(RecvTimeoutError::Timeout) => {
                timed_out = true;
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    for p in &mut pools {
        for c in &mut p.conns {
            c.close();
        }
    }
    // Whatever was not reported: unfinished at the deadline, or never sent.
    let failed: std::collections::HashSet<u32> = failures.iter().map(|f| f.id).collect();
    for f in &plan {
        if !reported[f.id as usize] && !failed.contains(&f.id) {
            failures.push(FlowFailure {
                id: f.id,
                server: cfg.servers[f.server].to_string(),
                reason: if timed_out {
                    "unfinished or not started at --timeout".into()
                } else {
                    "no response recorded".into()
                },
            });
        }
    }
    flows.sort_by_key(|r| r.id);
    failures.sort_by_key(|f| f.id);
    let wall_us = dil.emulated_us(last_end.duration_since(t0));
    let summary = FctSummary::from_records(&flows, wall_us);
    Ok(ClientReport {
        flows,
        failures,
        summary,
        wall_us,
        target_flows_per_sec,
        connections,
        mean_lateness_us: if arrivals == 0 {
            0.0
        } else {
            lateness_sum_us as f64 / arrivals as f64
        },
        max_lateness_us,
        timed_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClientConfig {
        ClientConfig {
            servers: vec![
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:2".parse().unwrap(),
            ],
            cdf: FlowSizeCdf::from_points(&[(0.0, 0.0), (1000.0, 1.0)]).unwrap(),
            load: 0.5,
            link_rate: Rate::mbit(8),
            flows: 10_000,
            conns_per_server: 1,
            dscp: DscpMix::single(0),
            flow_rate: FlowRateMix::default(),
            seed: 9,
            timeout: Duration::from_secs(1),
            dilation: Dilation::NONE,
        }
    }

    #[test]
    fn plan_is_seeded_and_targets_the_load() {
        let c = cfg();
        let a = plan(&c).unwrap();
        assert_eq!(a, plan(&c).unwrap());
        assert_ne!(
            a,
            plan(&ClientConfig {
                seed: 10,
                ..c.clone()
            })
            .unwrap()
        );
        assert_eq!(a.len(), 10_000);
        assert_eq!(a[0].id, 1);
        // Mean size 500 B at 50 % of 8 Mbit/s → mean gap 1 ms.
        let mean_gap = a.iter().map(|f| f.gap_ns as f64).sum::<f64>() / a.len() as f64;
        assert!((mean_gap - 1e6).abs() / 1e6 < 0.03, "{mean_gap}");
        let to_first = a.iter().filter(|f| f.server == 0).count();
        assert!((4_700..5_300).contains(&to_first), "{to_first}");
        assert!(a.iter().all(|f| f.size <= 1000));
        assert!(a.iter().all(|f| f.dscp == 0));
        // TCN §6.1.2: each flow on one of 4 service classes at random.
        let mixed = plan(&ClientConfig {
            dscp: "0,1,2,3".parse().unwrap(),
            ..c.clone()
        })
        .unwrap();
        for d in 0..4u8 {
            let n = mixed.iter().filter(|f| f.dscp == d).count();
            assert!((2_300..2_700).contains(&n), "dscp {d}: {n}");
        }
    }

    #[test]
    fn default_timeout_covers_the_schedule() {
        let c = cfg();
        // 10 000 flows × 1 ms mean gap = 10 s → 2 × 10 s + 60 s.
        let t = default_timeout(&c.cdf, c.load, c.link_rate, c.flows);
        assert!((t.as_secs_f64() - 80.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn unreachable_server_is_named() {
        // Port 1 on loopback: nothing listens there.
        let e = run(&ClientConfig { flows: 1, ..cfg() }).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("127.0.0.1:1") && msg.contains("softswitch-tg server"),
            "{msg}"
        );
    }
}

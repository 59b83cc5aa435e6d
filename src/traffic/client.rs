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

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
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
use super::{RunClock, TgError};
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
    dil: Dilation,
    conns: Vec<Conn>,
    idle: IdleList,
    /// Set when a new connection could not be opened: later flows to this
    /// server fail at once instead of each stalling the arrival schedule in
    /// `connect` (up to its timeout).
    unreachable: Option<String>,
}

impl Pool {
    /// `conns` connections to server `i`; fails if one cannot be opened.
    fn open(
        i: usize,
        addr: SocketAddr,
        conns: usize,
        out_tx: &Sender<Outcome>,
        dil: Dilation,
    ) -> Result<Pool, TgError> {
        let idle: IdleList = Arc::new(Mutex::new(Vec::new()));
        let mut opened = Vec::new();
        for slot in 0..conns {
            let c = Conn::open(i, addr, slot, idle.clone(), out_tx.clone(), dil)
                .map_err(|source| TgError::Connect { addr, source })?;
            opened.push(c);
        }
        // Hand out the lowest slots first.
        *idle.lock().expect("fresh mutex") = (0..opened.len()).rev().collect();
        Ok(Pool {
            addr,
            dil,
            conns: opened,
            idle,
            unreachable: None,
        })
    }

    /// The slot of an idle connection for flow `f`, else of a new one; the
    /// reason the flow fails if there is neither (after a failed connect,
    /// every later flow to this server fails at once with that reason).
    fn slot_for(&mut self, f: &PlannedFlow, out_tx: &Sender<Outcome>) -> Result<usize, String> {
        let slot = self.idle.lock().ok().and_then(|mut l| l.pop());
        match (slot, &self.unreachable) {
            (Some(s), _) => Ok(s),
            (None, Some(why)) => Err(why.clone()),
            (None, None) => {
                let s = self.conns.len();
                match Conn::open(
                    f.server,
                    self.addr,
                    s,
                    self.idle.clone(),
                    out_tx.clone(),
                    self.dil,
                ) {
                    Ok(c) => {
                        self.conns.push(c);
                        Ok(s)
                    }
                    Err(e) => {
                        let why = format!(
                            "no idle connection and a new one failed: {e} (flow {}; later flows to this server are not tried)",
                            f.id
                        );
                        self.unreachable = Some(why.clone());
                        Err(why)
                    }
                }
            }
        }
    }
}

/// One run's schedule, clock and what it has recorded so far, shared by
/// its steps: send the schedule, receive the outcomes, account for the rest.
struct Run<'a> {
    cfg: &'a ClientConfig,
    plan: &'a [PlannedFlow],
    clock: RunClock,
    failures: Vec<FlowFailure>,
    /// Flows handed to a connection (each reported exactly once).
    started: usize,
    /// Arrivals reached before the deadline, and how late they went out.
    arrivals: usize,
    lateness_sum_us: u128,
    max_lateness_us: u64,
    timed_out: bool,
}

/// What the outcomes of the started flows were.
struct Received {
    flows: Vec<FlowRecord>,
    /// By flow id: an outcome came.
    reported: Vec<bool>,
    last_end: Instant,
}

impl<'a> Run<'a> {
    fn new(cfg: &'a ClientConfig, plan: &'a [PlannedFlow]) -> Self {
        Run {
            cfg,
            plan,
            clock: RunClock::start(cfg.dilation, cfg.timeout),
            failures: Vec::new(),
            started: 0,
            arrivals: 0,
            lateness_sum_us: 0,
            max_lateness_us: 0,
            timed_out: false,
        }
    }

    fn fail(&mut self, id: u32, server: SocketAddr, reason: String) {
        self.failures.push(FlowFailure {
            id,
            server: server.to_string(),
            reason,
        });
    }

    /// Sleeps until each arrival (absolute times: `t0 + Σ gaps`, D times
    /// the emulated gaps) and starts its flow, until the deadline.
    fn send_schedule(&mut self, pools: &mut [Pool], out_tx: &Sender<Outcome>) {
        let mut due = self.clock.t0;
        for f in self.plan {
            due += self.clock.dil.to_real(Duration::from_nanos(f.gap_ns));
            if due >= self.clock.deadline {
                self.timed_out = true;
                break;
            }
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            let late_us = self
                .clock
                .dil
                .emulated_us(Instant::now().saturating_duration_since(due));
            self.arrivals += 1;
            self.lateness_sum_us += late_us as u128;
            self.max_lateness_us = self.max_lateness_us.max(late_us);
            let pool = &mut pools[f.server];
            let slot = match pool.slot_for(f, out_tx) {
                Ok(s) => s,
                Err(reason) => {
                    self.fail(f.id, pool.addr, reason);
                    continue;
                }
            };
            let handed_over = pool.conns[slot].start_flow(Request {
                id: f.id,
                size: f.size,
                dscp: f.dscp,
                rate_bps: self.clock.dil.wire_bps(f.rate_bps),
            });
            if handed_over {
                self.started += 1;
            } else {
                let addr = pool.addr;
                self.fail(f.id, addr, "its connection had already failed".into());
            }
        }
    }

    /// Waits for the outcome of every started flow, until the deadline.
    fn receive_outcomes(&mut self, out_rx: &Receiver<Outcome>) -> Received {
        let mut got = Received {
            flows: Vec::with_capacity(self.started),
            reported: vec![false; self.plan.len() + 1],
            last_end: self.clock.t0,
        };
        let mut outcomes = 0usize;
        while outcomes < self.started {
            let now = Instant::now();
            if now >= self.clock.deadline {
                self.timed_out = true;
                break;
            }
            match out_rx.recv_timeout(self.clock.deadline - now) {
                Ok(Outcome::Done {
                    server,
                    req,
                    start,
                    end,
                }) => {
                    outcomes += 1;
                    got.reported[req.id as usize] = true;
                    got.last_end = got.last_end.max(end);
                    got.flows.push(FlowRecord::completed(
                        req.id,
                        server,
                        req.size,
                        self.clock.dil.emulated_us(end.duration_since(start)),
                        req.dscp,
                        self.plan[req.id as usize - 1].rate_bps,
                        self.clock
                            .dil
                            .emulated_us(start.duration_since(self.clock.t0)),
                    ));
                }
                Ok(Outcome::Failed { server, id, reason }) => {
                    outcomes += 1;
                    got.reported[id as usize] = true;
                    self.fail(id, self.cfg.servers[server], reason);
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.timed_out = true;
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        got
    }

    /// Whatever was not reported: unfinished at the deadline, or never sent.
    fn fail_unreported(&mut self, reported: &[bool]) {
        let failed: std::collections::HashSet<u32> = self.failures.iter().map(|f| f.id).collect();
        for f in self.plan {
            if !reported[f.id as usize] && !failed.contains(&f.id) {
                let reason = if self.timed_out {
                    "unfinished or not started at --timeout"
                } else {
                    "no response recorded"
                };
                self.fail(f.id, self.cfg.servers[f.server], reason.into());
            }
        }
    }
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
    let mut pools = cfg
        .servers
        .iter()
        .enumerate()
        .map(|(i, &addr)| Pool::open(i, addr, cfg.conns_per_server.max(1), &out_tx, cfg.dilation))
        .collect::<Result<Vec<Pool>, TgError>>()?;

    let mut run = Run::new(cfg, &plan);
    run.send_schedule(&mut pools, &out_tx);
    drop(out_tx);
    let Received {
        mut flows,
        reported,
        last_end,
    } = run.receive_outcomes(&out_rx);
    for p in &mut pools {
        for c in &mut p.conns {
            c.close();
        }
    }
    run.fail_unreported(&reported);
    // Opened in total: at start and on demand.
    let connections: usize = pools.iter().map(|p| p.conns.len()).sum();
    let mut failures = run.failures;
    flows.sort_by_key(|r| r.id);
    failures.sort_by_key(|f| f.id);
    let wall_us = run
        .clock
        .dil
        .emulated_us(last_end.duration_since(run.clock.t0));
    let summary = FctSummary::from_records(&flows, wall_us);
    Ok(ClientReport {
        flows,
        failures,
        summary,
        wall_us,
        target_flows_per_sec,
        connections,
        mean_lateness_us: if run.arrivals == 0 {
            0.0
        } else {
            run.lateness_sum_us as f64 / run.arrivals as f64
        },
        max_lateness_us: run.max_lateness_us,
        timed_out: run.timed_out,
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

//! The traffic generator (`softswitch-tg`): the workloads the AQM papers
//! evaluate with, run on real kernel TCP sockets inside the host namespaces.
//!
//! It follows HKUST-SING/TrafficGenerator, which TCN, ECN♯, DiffECN and PRED
//! used on their testbeds: a **server** answers each request on a persistent
//! TCP connection with a flow of the requested size (DSCP and pacing as
//! asked); a **client** keeps a pool of persistent connections per server
//! (a new one when all are busy), draws flow sizes from a CDF file and Poisson
//! arrival times for a target load of the bottleneck, and records every
//! flow's completion time. On top: **incast** (one client asks N servers at
//! once, repeated) and **long**-lived flows with goodput over time.
//!
//! * [`cdf`] — TrafficGenerator's CDF files, sampling, analytic mean.
//! * [`poisson`] — exponential gaps for a target load.
//! * [`proto`] — the 24-byte request and its echo.
//! * [`dscp`] — per-flow DSCP drawn by weight (TrafficGenerator's `dscp` lines).
//! * [`rates`] — per-flow sending rate drawn by weight (its `rate` lines).
//! * [`tgconf`] — TrafficGenerator's client config file (`client --config`).
//! * [`server`], [`client`], [`incast`], [`long`] — the four roles.
//! * [`record`], [`summary`] — per-flow records, TrafficGenerator's output
//!   columns, FCT mean / p99 by size class.
//!
//! Sampling, scheduling maths, the wire format and the summaries are pure
//! and tested without sockets; the roles use std blocking sockets and one
//! thread per connection (simple, and enough for ~1 Gbit/s of small flows:
//! the only per-flow work on the arrival path is a 24-byte write). The
//! system calls std lacks (setsockopt, poll, prctl) are in `sock`, through
//! nix.

//! # The papers' experiments with it
//!
//! Servers in every sending host (`softswitch-tg server --port 5001`), then
//! in the receiving host, for example:
//!
//! * TCN §6.1.2 — web search, 5 persistent connections to each of 8
//!   servers, each flow on one of 4 service queues at random, 5000 flows per
//!   load: `softswitch-tg client --servers <8 × ip:5001> --cdf
//!   cdf/websearch.txt --load 0.5 --rate 1gbit --flows 5000 --conns 5
//!   --dscp 0,1,2,3 --seed 1 --out ws50.txt --json ws50.json`, repeated for
//!   loads 0.1 … 0.9; FCT of small / large / all flows from the JSON summary.
//! * ECN♯ §5, DiffECN §VI, PRED §VI — the same with `cdf/datamining.txt`.
//! * Incast — `softswitch-tg incast --servers <N × ip:5001> --size 64kb
//!   --queries 100 --interval 10ms`: QCT per query and FCT per flow.
//! * Long-lived / paced flows — `softswitch-tg long --server ip:5001
//!   --duration 10s --dscp 8 [--rate 500mbit]`: goodput every 100 ms.
//!
//! Flow sizes drawn uniformly between two sizes (e.g. ECN♯'s 3–60 KB query
//! flows) are the two-point CDF file `3000 0` / `60000 1`.

pub mod cdf;
pub mod client;
mod conn;
pub mod dscp;
pub mod incast;
pub mod long;
pub mod poisson;
pub mod proto;
pub mod rates;
pub mod record;
pub mod server;
// The traffic generator's few socket options and poll(2) calls that std does
// not offer (through nix's safe wrappers).
pub mod sock;
pub mod summary;
pub mod tgconf;

#[cfg(test)]
mod loopback_tests;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::timebase::Dilation;

/// A client run's clock: when it started and when it gives up, in real
/// time, and the dilation that turns real intervals into emulated ones.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunClock {
    /// Time dilation D.
    pub dil: Dilation,
    /// The run's start.
    pub t0: Instant,
    /// The run's start plus its timeout (emulated, so D times longer).
    pub deadline: Instant,
}

impl RunClock {
    /// Starts now, giving up after `timeout` of emulated time.
    pub fn start(dil: Dilation, timeout: Duration) -> Self {
        let t0 = Instant::now();
        RunClock {
            dil,
            t0,
            deadline: t0 + dil.to_real(timeout),
        }
    }
}

/// What stops a traffic-generator run, phrased for the person running it.
#[derive(Debug, thiserror::Error)]
pub enum TgError {
    /// The server could not listen.
    #[error("cannot listen on {addr}: {source} (is another server already on that port? pick another with --port)")]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// OS error.
        source: io::Error,
    },
    /// A client could not reach a server.
    #[error("cannot connect to server {addr}: {source} — start `softswitch-tg server --port {}` on that host (inside its namespace) and check the address and route", addr.port())]
    Connect {
        /// The server.
        addr: SocketAddr,
        /// OS error.
        source: io::Error,
    },
    /// A flow failed mid-way.
    #[error("flow {id} from server {addr} failed: {reason} — check that the server is still running and the switch forwards between the hosts")]
    Flow {
        /// Flow id.
        id: u32,
        /// The server.
        addr: SocketAddr,
        /// What happened.
        reason: String,
    },
    /// The safety timeout fired.
    #[error("timed out after {secs:.1} s with {done} of {total} {what} complete — raise --timeout, lower the load, or check the path (drops? server stalled?)")]
    Timeout {
        /// Seconds waited.
        secs: f64,
        /// Completed.
        done: usize,
        /// Expected.
        total: usize,
        /// "flows" or "queries".
        what: &'static str,
    },
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// Another I/O error (e.g. a socket option).
    #[error("{context}: {source}")]
    Io {
        /// What we were doing.
        context: String,
        /// OS error.
        source: io::Error,
    },
}

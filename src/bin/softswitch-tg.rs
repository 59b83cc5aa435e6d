//! `softswitch-tg`: the traffic generator run inside the host namespaces.
//!
//! ```text
//! softswitch-tg server --port 5001
//! softswitch-tg client --servers 10.99.0.2:5001,10.99.0.3:5001 --cdf cdf/websearch.txt \
//!     --load 0.5 --rate 1gbit --flows 1000 --conns 4 --dscp 0 --seed 1 \
//!     --out flows.txt --json flows.json
//! softswitch-tg incast --servers a:p,b:p,... --size 64kb --queries 100 --interval 10ms
//! softswitch-tg long --server a:p --duration 10s --dscp 8 --rate 500mbit --csv goodput.csv
//! ```
//!
//! Every subcommand but `server` ends by itself (after --flows / --queries /
//! --duration, or at --timeout) and prints a one-line summary. Exit status:
//! 0 all flows completed, 1 some failed or timed out (outputs still
//! written), 2 the run could not start (bad arguments, server unreachable).

use std::fs::File;
use std::io::BufWriter;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde_json::json;

use softswitch::traffic::cdf::FlowSizeCdf;
use softswitch::traffic::dscp::DscpMix;
use softswitch::traffic::record::{write_flows_text, write_queries_text};
use softswitch::traffic::server::Server;
use softswitch::traffic::{client, incast, long, TgError};
use softswitch::units::{parse_duration, parse_rate, parse_size};

#[derive(Parser)]
#[command(
    name = "softswitch-tg",
    version,
    about = "Traffic generator for softswitch experiments (TrafficGenerator-compatible workloads on kernel TCP)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Answer flow requests on persistent TCP connections.
    Server {
        /// TCP port to listen on.
        #[arg(long, default_value_t = 5001)]
        port: u16,
        /// Address to listen on.
        #[arg(long, default_value = "0.0.0.0")]
        bind: IpAddr,
        /// Exit after this long (e.g. 60s), open connections included; default: run until SIGINT/SIGTERM, then print the counters and exit 0.
        #[arg(long)]
        timeout: Option<String>,
        /// Kernel TCP pacing on every connection (SO_MAX_PACING_RATE): packets spaced at 1.2 × cwnd/srtt, as an fq host's sender. It spaces GSO packets (≈ 1 ms of data each), not segments: add `topo up --gso-segs 1` for segment-by-segment pacing. Default off (plain Linux sender).
        #[arg(long)]
        tcp_pacing: bool,
    },
    /// Poisson arrivals of flows with sizes from a CDF file, at a target load.
    Client {
        /// Servers, comma-separated ip:port.
        #[arg(long, value_delimiter = ',', required = true)]
        servers: Vec<String>,
        /// Flow-size CDF file (`value cdf` per line, bytes).
        #[arg(long)]
        cdf: PathBuf,
        /// Target load of the bottleneck link, (0, 1].
        #[arg(long)]
        load: f64,
        /// Bottleneck link rate the load refers to (tc units: 1gbit, 100mbit).
        #[arg(long)]
        rate: String,
        /// Number of flows.
        #[arg(long, default_value_t = 1000)]
        flows: u32,
        /// Connections opened per server at start (more are opened when all are busy).
        #[arg(long, default_value_t = 4)]
        conns: usize,
        /// DSCP per flow (IP_TOS = dscp << 2): `0`, `0,8,16,24` (each flow picks one uniformly) or `0:25,8:75` (value:weight).
        #[arg(long, default_value = "0")]
        dscp: String,
        /// Per-flow sending rate asked of the server (app-limited pacing), e.g. 500mbit; default unpaced.
        #[arg(long)]
        flow_rate: Option<String>,
        /// Seed of the flow schedule.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Per-flow text output, TrafficGenerator columns: size fct_us dscp rate_mbps goodput_mbps.
        #[arg(long, default_value = "flows.txt")]
        out: PathBuf,
        /// Per-flow records and summary as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Safety bound on the whole run; default twice the expected schedule length + 60s.
        #[arg(long)]
        timeout: Option<String>,
    },
    /// One client asks all servers at once for --size bytes each, repeatedly.
    Incast {
        /// The N servers (fan-in), comma-separated ip:port.
        #[arg(long, value_delimiter = ',', required = true)]
        servers: Vec<String>,
        /// Bytes per server per query (64kb = 65536).
        #[arg(long)]
        size: String,
        /// Number of queries.
        #[arg(long, default_value_t = 100)]
        queries: u32,
        /// Start-to-start spacing of queries (a query never starts before the previous completes).
        #[arg(long, default_value = "10ms")]
        interval: String,
        /// DSCP of every flow (0..=63).
        #[arg(long, default_value_t = 0)]
        dscp: u8,
        /// Per-flow sending rate asked of the servers; default unpaced.
        #[arg(long)]
        flow_rate: Option<String>,
        /// Per-flow text output (TrafficGenerator columns).
        #[arg(long, default_value = "incast_flows.txt")]
        out: PathBuf,
        /// Per-query text output: size qct_us dscp rate_mbps goodput_mbps fanout.
        #[arg(long, default_value = "incast_queries.txt")]
        qct_out: PathBuf,
        /// Everything as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Safety bound on the whole run.
        #[arg(long, default_value = "300s")]
        timeout: String,
        /// A new connection to every server for every query (opened before the query starts), so each response is a new TCP flow from the initial window, as R-AQM's ns-3 flows are. Default: one persistent connection per server.
        #[arg(long)]
        fresh: bool,
    },
    /// One long-lived flow from a server, with goodput sampled over time.
    Long {
        /// The sending server, ip:port.
        #[arg(long)]
        server: String,
        /// How long to receive, from the start (the delay included).
        #[arg(long, default_value = "10s")]
        duration: String,
        /// DSCP (0..=63).
        #[arg(long, default_value_t = 0)]
        dscp: u8,
        /// Pace the flow to this rate (app-limited), e.g. 500mbit; default unpaced.
        #[arg(long)]
        rate: Option<String>,
        /// Wait this long before starting the flow (samples still count from the start).
        #[arg(long, default_value = "0")]
        delay: String,
        /// Ask for this many bytes (e.g. 50mb) and end when they are in, recording the FCT; default: stream.
        #[arg(long)]
        size: Option<String>,
        /// Sampling period.
        #[arg(long, default_value = "100ms")]
        sample: String,
        /// Goodput samples as CSV: t_ms,bytes,goodput_mbps.
        #[arg(long, default_value = "goodput.csv")]
        csv: PathBuf,
        /// Samples and totals as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// Failure to start (exit 2) vs a run with failed flows (exit 1).
enum Outcome {
    Clean,
    SomeFailed,
}

fn main() -> ExitCode {
    softswitch::cli::exit_quietly_on_closed_output();
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(Outcome::Clean) => ExitCode::SUCCESS,
        Ok(Outcome::SomeFailed) => ExitCode::from(1),
        Err(e) => {
            eprintln!("softswitch-tg: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn usage(e: impl std::fmt::Display) -> TgError {
    TgError::Usage(e.to_string())
}

fn duration(s: &str) -> Result<Duration, TgError> {
    parse_duration(s).map(Duration::from_nanos).map_err(usage)
}

fn opt_rate_bps(s: &Option<String>) -> Result<u64, TgError> {
    match s {
        None => Ok(0),
        Some(s) => parse_rate(s).map(|r| r.bps()).map_err(usage),
    }
}

fn check_dscp(dscp: u8) -> Result<u8, TgError> {
    if dscp > 63 {
        Err(usage(format!(
            "--dscp {dscp} is out of range: DSCP is 6 bits (0..=63)"
        )))
    } else {
        Ok(dscp)
    }
}

fn server_addr(s: &str) -> Result<SocketAddr, TgError> {
    let bad = || {
        usage(format!(
            "server address {s:?} is not ip:port (e.g. 10.99.0.2:5001)"
        ))
    };
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    s.to_socket_addrs()
        .map_err(|_| bad())?
        .next()
        .ok_or_else(bad)
}

fn server_addrs(list: &[String]) -> Result<Vec<SocketAddr>, TgError> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| server_addr(s.trim()))
        .collect()
}

fn create(path: &Path) -> Result<BufWriter<File>, TgError> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|source| TgError::Io {
            context: format!("cannot create {}", path.display()),
            source,
        })
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> TgError + '_ {
    move |source| TgError::Io {
        context: format!("cannot write {}", path.display()),
        source,
    }
}

fn write_json(path: &Option<PathBuf>, v: &serde_json::Value) -> Result<(), TgError> {
    if let Some(p) = path {
        let w = create(p)?;
        serde_json::to_writer_pretty(w, v).map_err(|e| write_err(p)(e.into()))?;
    }
    Ok(())
}

fn run(cmd: Cmd) -> Result<Outcome, TgError> {
    match cmd {
        Cmd::Server {
            port,
            bind,
            timeout,
            tcp_pacing,
        } => {
            let until = match timeout {
                Some(t) => Some(Instant::now() + duration(&t)?),
                None => None,
            };
            let server = Server::bind(SocketAddr::new(bind, port))?.tcp_pacing(tcp_pacing);
            eprintln!(
                "softswitch-tg server: listening on {}{}{}",
                server.local_addr(),
                if tcp_pacing { ", TCP pacing on" } else { "" },
                if until.is_some() {
                    ""
                } else {
                    " (until SIGINT/SIGTERM)"
                }
            );
            let signalled = softswitch::traffic::sock::stop_on_signals();
            let stats = server.run(until, Some(signalled))?;
            use std::sync::atomic::Ordering::Relaxed;
            println!(
                "server: {} connections, {} flows, {} bytes sent, {} connection errors",
                stats.connections.load(Relaxed),
                stats.flows.load(Relaxed),
                stats.bytes.load(Relaxed),
                stats.errors.load(Relaxed)
            );
            Ok(Outcome::Clean)
        }
        Cmd::Client {
            servers,
            cdf,
            load,
            rate,
            flows,
            conns,
            dscp,
            flow_rate,
            seed,
            out,
            json,
            timeout,
        } => {
            let cdf_path = cdf;
            let cdf = FlowSizeCdf::from_file(&cdf_path)
                .map_err(|e| usage(format!("{}: {e}", cdf_path.display())))?;
            let link_rate = parse_rate(&rate).map_err(usage)?;
            let timeout = match timeout {
                Some(t) => duration(&t)?,
                None => client::default_timeout(&cdf, load, link_rate, flows),
            };
            let cfg = client::ClientConfig {
                servers: server_addrs(&servers)?,
                cdf,
                load,
                link_rate,
                flows,
                conns_per_server: conns,
                dscp: dscp.parse::<DscpMix>().map_err(usage)?,
                flow_rate_bps: opt_rate_bps(&flow_rate)?,
                seed,
                timeout,
            };
            // Open the output first: a typo should not cost a whole run.
            let text = create(&out)?;
            let rep = client::run(&cfg)?;
            write_flows_text(text, &rep.flows).map_err(write_err(&out))?;
            write_json(
                &json,
                &json!({
                    "command": "client",
                    "config": {
                        "servers": cfg.servers.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                        "cdf": cdf_path.display().to_string(),
                        "cdf_mean_bytes": cfg.cdf.mean(),
                        "load": cfg.load,
                        "link_rate_bps": cfg.link_rate.bps(),
                        "flows": cfg.flows,
                        "conns_per_server": cfg.conns_per_server,
                        "dscp": cfg.dscp.classes(),
                        "flow_rate_bps": cfg.flow_rate_bps,
                        "seed": cfg.seed,
                        "timeout_s": cfg.timeout.as_secs_f64(),
                    },
                    "text_columns": ["size_bytes", "fct_us", "dscp", "rate_mbps", "goodput_mbps"],
                    "report": rep,
                }),
            )?;
            println!("client: {}", rep.one_line());
            for f in rep.failures.iter().take(5) {
                eprintln!(
                    "softswitch-tg client: flow {} from {}: {}",
                    f.id, f.server, f.reason
                );
            }
            if rep.failures.is_empty() {
                Ok(Outcome::Clean)
            } else {
                eprintln!(
                    "softswitch-tg client: {} flows did not complete — check that the servers are running and the switch forwards (see the JSON for all)",
                    rep.failures.len()
                );
                Ok(Outcome::SomeFailed)
            }
        }
        Cmd::Incast {
            servers,
            size,
            queries,
            interval,
            dscp,
            flow_rate,
            out,
            qct_out,
            json,
            timeout,
            fresh,
        } => {
            let cfg = incast::IncastConfig {
                servers: server_addrs(&servers)?,
                size: parse_size(&size).map_err(usage)?,
                queries,
                interval: duration(&interval)?,
                dscp: check_dscp(dscp)?,
                flow_rate_bps: opt_rate_bps(&flow_rate)?,
                timeout: duration(&timeout)?,
                fresh,
            };
            let flows_w = create(&out)?;
            let queries_w = create(&qct_out)?;
            let rep = incast::run(&cfg)?;
            write_flows_text(flows_w, &rep.flows).map_err(write_err(&out))?;
            write_queries_text(queries_w, &rep.queries).map_err(write_err(&qct_out))?;
            write_json(
                &json,
                &json!({
                    "command": "incast",
                    "config": {
                        "servers": cfg.servers.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                        "size_bytes": cfg.size,
                        "queries": cfg.queries,
                        "interval_us": cfg.interval.as_micros() as u64,
                        "dscp": cfg.dscp,
                        "flow_rate_bps": cfg.flow_rate_bps,
                        "fresh": cfg.fresh,
                    },
                    "report": rep,
                }),
            )?;
            println!("incast: {}", rep.one_line());
            Ok(if rep.error.is_some() {
                Outcome::SomeFailed
            } else {
                Outcome::Clean
            })
        }
        Cmd::Long {
            server,
            duration: dur,
            dscp,
            rate,
            delay,
            size,
            sample,
            csv,
            json,
        } => {
            let cfg = long::LongConfig {
                server: server_addr(&server)?,
                duration: duration(&dur)?,
                delay: duration(&delay)?,
                size: match &size {
                    Some(z) => Some(parse_size(z).map_err(usage)?),
                    None => None,
                },
                dscp: check_dscp(dscp)?,
                rate_bps: opt_rate_bps(&rate)?,
                sample: duration(&sample)?,
            };
            let mut csv_w = create(&csv)?;
            let rep = long::run(&cfg)?;
            use std::io::Write;
            csv_w
                .write_all(rep.csv().as_bytes())
                .and_then(|_| csv_w.flush())
                .map_err(write_err(&csv))?;
            write_json(
                &json,
                &json!({
                    "command": "long",
                    "server": cfg.server.to_string(),
                    "report": rep,
                }),
            )?;
            println!("{}", rep.one_line());
            Ok(if rep.error.is_some() {
                Outcome::SomeFailed
            } else {
                Outcome::Clean
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Cmd {
        Cli::try_parse_from(args.split_whitespace())
            .unwrap_or_else(|e| panic!("{args}: {e}"))
            .cmd
    }

    #[test]
    fn the_documented_commands_parse() {
        assert!(matches!(
            parse("softswitch-tg server --port 5001"),
            Cmd::Server { port: 5001, .. }
        ));
        match parse(
            "softswitch-tg client --servers 10.99.0.2:5001,10.99.0.3:5001 --cdf cdf/websearch.txt \
             --load 0.5 --rate 1gbit --flows 1000 --conns 4 --dscp 0 --seed 1 \
             --out flows.txt --json flows.json",
        ) {
            Cmd::Client {
                servers,
                flows,
                conns,
                ..
            } => {
                assert_eq!(server_addrs(&servers).unwrap().len(), 2);
                assert_eq!((flows, conns), (1000, 4));
            }
            _ => panic!("not client"),
        }
        match parse(
            "softswitch-tg incast --servers 10.99.0.2:5001,10.99.0.3:5001 --size 64kb \
             --queries 100 --interval 10ms",
        ) {
            Cmd::Incast { size, interval, .. } => {
                assert_eq!(parse_size(&size).unwrap(), 65536);
                assert_eq!(duration(&interval).unwrap(), Duration::from_millis(10));
            }
            _ => panic!("not incast"),
        }
        match parse(
            "softswitch-tg long --server 10.99.0.2:5001 --duration 10s --dscp 8 --rate 500mbit",
        ) {
            Cmd::Long { rate, dscp, .. } => {
                assert_eq!(opt_rate_bps(&rate).unwrap(), 500_000_000);
                assert_eq!(dscp, 8);
            }
            _ => panic!("not long"),
        }
    }

    #[test]
    fn bad_arguments_say_what_to_do() {
        assert!(server_addr("10.99.0.2")
            .unwrap_err()
            .to_string()
            .contains("ip:port"));
        assert!(check_dscp(64).unwrap_err().to_string().contains("0..=63"));
        assert!(duration("10").is_err());
    }
}

//! `softswitch-tg`: the traffic generator run inside the host namespaces.
//!
//! ```text
//! softswitch-tg server --port 5001
//! softswitch-tg client --servers 10.99.0.2:5001,10.99.0.3:5001 --cdf cdf/websearch.txt \
//!     --load 0.5 --rate 1gbit --flows 1000 --conns 4 --dscp 0 --seed 1 \
//!     --out flows.txt --json-out flows.json
//! softswitch-tg client -b 900 -c conf/client_config.txt -n 5000 -l flows.txt -s 123   # TrafficGenerator's
//! softswitch-tg incast --servers a:p,b:p,... --size 64kb --queries 100 --interval 10ms
//! softswitch-tg long --server a:p --duration 10s --dscp 8 --rate 500mbit --csv goodput.csv
//! ```
//!
//! `--json-out FILE` writes a run's records as JSON (`--json FILE`, its
//! old name, still works and says it is deprecated: `--json` is a switch,
//! not a file, on `softswitch` and `softswitch stats`).
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

use softswitch::timebase::Dilation;
use softswitch::traffic::cdf::FlowSizeCdf;
use softswitch::traffic::dscp::DscpMix;
use softswitch::traffic::poisson::PoissonArrivals;
use softswitch::traffic::rates::FlowRateMix;
use softswitch::traffic::record::{write_flows_text, write_queries_text};
use softswitch::traffic::server::Server;
use softswitch::traffic::{client, incast, long, tgconf, TgError};
use softswitch::units::{parse_duration, parse_rate, parse_size, Rate};

#[derive(Parser)]
#[command(
    name = "softswitch-tg",
    version = softswitch::VERSION_LONG,
    about = "Traffic generator for softswitch experiments (TrafficGenerator-compatible workloads on kernel TCP)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Time dilation factor D (default 1): every time given (gaps, durations, intervals, timeouts) is emulated and lasts D times longer, every rate given (--rate, --flow-rate, -b) is emulated and runs D times lower on the wire, sizes are unchanged, and every time or rate reported is emulated. The switch and the hosts must run with the same D.
    #[arg(long, global = true, default_value = "1")]
    dilation: String,
}

#[derive(Subcommand)]
enum Cmd {
    /// Answer flow requests on persistent TCP connections.
    Server(ServerArgs),
    /// Poisson arrivals of flows with sizes from a CDF file, at a target load.
    Client(ClientArgs),
    /// One client asks all servers at once for --size bytes each, repeatedly.
    Incast(IncastArgs),
    /// One long-lived flow from a server, with goodput sampled over time.
    Long(LongArgs),
}

/// `server`: where to listen, for how long, with or without pacing.
#[derive(clap::Args)]
struct ServerArgs {
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
}

/// Where a subcommand writes its JSON: `--json-out FILE`, or the old
/// `--json FILE` (hidden; it prints a deprecation warning, so scripts
/// written for it keep working and learn the new name).
#[derive(clap::Args, Debug, Default)]
struct JsonOut {
    /// Write the records and totals as JSON to FILE.
    #[arg(long = "json-out", value_name = "FILE")]
    json_out: Option<PathBuf>,
    /// Deprecated name of --json-out.
    #[arg(
        long = "json",
        value_name = "FILE",
        hide = true,
        conflicts_with = "json_out"
    )]
    json_old: Option<PathBuf>,
}

impl JsonOut {
    /// The file, and the warning to print when it came from `--json`.
    fn path(&self) -> (Option<PathBuf>, Option<String>) {
        match (&self.json_out, &self.json_old) {
            (Some(p), _) => (Some(p.clone()), None),
            (None, Some(p)) => (
                Some(p.clone()),
                Some(format!(
                    "softswitch-tg: warning: --json FILE is deprecated; write --json-out {} \
                     (--json is a switch, not a file, on softswitch and softswitch stats)",
                    p.display()
                )),
            ),
            (None, None) => (None, None),
        }
    }

    /// The file, after printing the deprecation warning if `--json` named it.
    fn file(&self) -> Option<PathBuf> {
        let (path, warning) = self.path();
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        path
    }
}

/// `incast`: the fan-in, the queries and where the results go.
#[derive(clap::Args)]
struct IncastArgs {
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
    #[command(flatten)]
    json: JsonOut,
    /// Safety bound on the whole run.
    #[arg(long, default_value = "300s")]
    timeout: String,
    /// A new connection to every server for every query (opened before the query starts), so each response is a new TCP flow from the initial window, as R-AQM's ns-3 flows are. Default: one persistent connection per server.
    #[arg(long)]
    fresh: bool,
}

/// `long`: the flow, its sampling and where the samples go.
#[derive(clap::Args)]
struct LongArgs {
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
    #[command(flatten)]
    json: JsonOut,
}

/// `client`: flags, or a TrafficGenerator client config file (`-c`) with
/// TrafficGenerator's command-line letters (`-b`, `-n`, `-t`, `-l`, `-s`).
#[derive(clap::Args)]
struct ClientArgs {
    /// TrafficGenerator client config file (`server IP PORT`, `req_size_dist FILE`, `rate NMbps W`, `dscp V W` lines; its older format's `load NMbps` and `num_reqs N` lines are read as -b N and -n N, as that TrafficGenerator read them); the flags below override what it says.
    #[arg(short = 'c', long)]
    config: Option<PathBuf>,
    /// Servers, comma-separated ip:port (or `server` lines of --config).
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// Flow-size CDF file (`value cdf` per line, bytes; or `req_size_dist` of --config).
    #[arg(long)]
    cdf: Option<PathBuf>,
    /// Target load of the bottleneck link, (0, 1]; with --rate.
    #[arg(long)]
    load: Option<f64>,
    /// Bottleneck link rate the load refers to (tc units: 1gbit, 100mbit).
    #[arg(long)]
    rate: Option<String>,
    /// TrafficGenerator's -b: expected average RX bandwidth in Mbit/s on the wire, instead of --load/--rate; arrivals offer b × 1448/1538 of application bytes, as TrafficGenerator computes them.
    #[arg(short = 'b', long, value_name = "MBPS")]
    bandwidth: Option<f64>,
    /// Number of flows (TrafficGenerator's -n); default 1000.
    #[arg(short = 'n', long)]
    flows: Option<u32>,
    /// TrafficGenerator's -t: generate flows for this many seconds instead of --flows (the count is the time over the mean gap, at least 1).
    #[arg(short = 't', long, value_name = "SECONDS", conflicts_with = "flows")]
    time: Option<f64>,
    /// Connections opened per server at start (more are opened when all are busy).
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// DSCP per flow (IP_TOS = dscp << 2): `0`, `0,8,16,24` (each flow picks one uniformly) or `0:25,8:75` (value:weight); default the `dscp` lines of --config, else 0.
    #[arg(long)]
    dscp: Option<String>,
    /// Per-flow sending rate asked of the server (app-limited pacing): `500mbit`, or `0:10,500mbit:30` (rate:weight, 0 = unpaced); default the `rate` lines of --config, else unpaced.
    #[arg(long)]
    flow_rate: Option<String>,
    /// Seed of the flow schedule (TrafficGenerator's -s).
    #[arg(short = 's', long, default_value_t = 1)]
    seed: u64,
    /// Per-flow text output, TrafficGenerator columns: size fct_us dscp rate_mbps goodput_mbps (TrafficGenerator's -l).
    #[arg(short = 'l', long, default_value = "flows.txt")]
    out: PathBuf,
    /// Per-flow records and summary as JSON.
    #[command(flatten)]
    json: JsonOut,
    /// Safety bound on the whole run; default twice the expected schedule length + 60s.
    #[arg(long)]
    timeout: Option<String>,
}

/// TrafficGenerator's `TG_GOODPUT_RATIO`: payload bytes per wire byte of a
/// full-sized TCP segment (1448 of 1500 + 14 + 4 + 8 + 12).
const TG_GOODPUT_RATIO: f64 = 1448.0 / (1500.0 + 14.0 + 4.0 + 8.0 + 12.0);

/// Failure to start (exit 2) vs a run with failed flows (exit 1).
enum Outcome {
    Clean,
    SomeFailed,
}

fn main() -> ExitCode {
    softswitch::cli::exit_quietly_on_closed_output();
    let cli = Cli::parse();
    let dilation = match cli.dilation.parse::<Dilation>() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("softswitch-tg: error: --dilation: {e}");
            return ExitCode::from(2);
        }
    };
    match run(cli.cmd, dilation) {
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

fn run(cmd: Cmd, dil: Dilation) -> Result<Outcome, TgError> {
    match cmd {
        Cmd::Server(args) => run_server(args, dil),
        Cmd::Client(args) => run_client(args, dil),
        Cmd::Incast(args) => run_incast(args, dil),
        Cmd::Long(args) => run_long(args, dil),
    }
}

fn run_server(a: ServerArgs, dil: Dilation) -> Result<Outcome, TgError> {
    let until = match a.timeout {
        Some(t) => Some(Instant::now() + dil.to_real(duration(&t)?)),
        None => None,
    };
    let server = Server::bind(SocketAddr::new(a.bind, a.port))?
        .tcp_pacing(a.tcp_pacing)
        .dilation(dil);
    eprintln!(
        "softswitch-tg server: listening on {}{}{}",
        server.local_addr(),
        if a.tcp_pacing { ", TCP pacing on" } else { "" },
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

fn run_incast(a: IncastArgs, dil: Dilation) -> Result<Outcome, TgError> {
    let cfg = incast::IncastConfig {
        servers: server_addrs(&a.servers)?,
        size: parse_size(&a.size).map_err(usage)?,
        queries: a.queries,
        interval: duration(&a.interval)?,
        dscp: check_dscp(a.dscp)?,
        flow_rate_bps: opt_rate_bps(&a.flow_rate)?,
        timeout: duration(&a.timeout)?,
        fresh: a.fresh,
        dilation: dil,
    };
    let json = a.json.file();
    let flows_w = create(&a.out)?;
    let queries_w = create(&a.qct_out)?;
    let rep = incast::run(&cfg)?;
    write_flows_text(flows_w, &rep.flows).map_err(write_err(&a.out))?;
    write_queries_text(queries_w, &rep.queries).map_err(write_err(&a.qct_out))?;
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
                "dilation": dil,
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

fn run_long(a: LongArgs, dil: Dilation) -> Result<Outcome, TgError> {
    let cfg = long::LongConfig {
        server: server_addr(&a.server)?,
        duration: duration(&a.duration)?,
        delay: duration(&a.delay)?,
        size: match &a.size {
            Some(z) => Some(parse_size(z).map_err(usage)?),
            None => None,
        },
        dscp: check_dscp(a.dscp)?,
        rate_bps: opt_rate_bps(&a.rate)?,
        sample: duration(&a.sample)?,
        dilation: dil,
    };
    let json = a.json.file();
    let mut csv_w = create(&a.csv)?;
    let rep = long::run(&cfg)?;
    use std::io::Write;
    csv_w
        .write_all(rep.csv().as_bytes())
        .and_then(|_| csv_w.flush())
        .map_err(write_err(&a.csv))?;
    write_json(
        &json,
        &json!({
            "command": "long",
            "server": cfg.server.to_string(),
            "dilation": dil,
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

/// The client's settings from its flags and, under them, its config file.
fn client_config(
    a: &ClientArgs,
    dilation: Dilation,
) -> Result<(client::ClientConfig, PathBuf), TgError> {
    let file = match &a.config {
        Some(p) => Some(tgconf::load(p).map_err(usage)?),
        None => None,
    };
    if let Some(f) = file.as_ref().filter(|f| !f.fanout.is_empty()) {
        eprintln!(
            "softswitch-tg client: ignoring {} `fanout` lines: they are for TrafficGenerator's \
             incast-client; its client (and this one) sends every request to one server",
            f.fanout.len()
        );
    }
    let servers = if !a.servers.is_empty() {
        server_addrs(&a.servers)?
    } else if let Some(f) = &file {
        f.servers.clone()
    } else {
        return Err(usage(
            "give --servers ip:port,... or a --config file with `server` lines",
        ));
    };
    let cdf_path = cdf_path(a, file.as_ref())?;
    let cdf = FlowSizeCdf::from_file(&cdf_path)
        .map_err(|e| usage(format!("{}: {e}", cdf_path.display())))?;
    let (load, link_rate) = offered_load(a, file.as_ref())?;
    let flows = flow_count(a, file.as_ref(), &cdf, load, link_rate)?;
    let dscp = match (&a.dscp, file.as_ref().and_then(|f| f.dscp.clone())) {
        (Some(d), _) => d.parse::<DscpMix>().map_err(usage)?,
        (None, Some(d)) => d,
        (None, None) => DscpMix::single(0),
    };
    let flow_rate = match (&a.flow_rate, file.as_ref().and_then(|f| f.rates.clone())) {
        (Some(r), _) => r.parse::<FlowRateMix>().map_err(usage)?,
        (None, Some(r)) => r,
        (None, None) => FlowRateMix::default(),
    };
    let timeout = match &a.timeout {
        Some(t) => duration(t)?,
        None => client::default_timeout(&cdf, load, link_rate, flows),
    };
    let cfg = client::ClientConfig {
        servers,
        cdf,
        load,
        link_rate,
        flows,
        conns_per_server: a.conns,
        dscp,
        flow_rate,
        seed: a.seed,
        timeout,
        dilation,
    };
    Ok((cfg, cdf_path))
}

/// The flow-size CDF: `--cdf`, else the config file's `req_size_dist`
/// (in the working directory or beside the file).
fn cdf_path(a: &ClientArgs, file: Option<&tgconf::TgClientFile>) -> Result<PathBuf, TgError> {
    match (&a.cdf, file, &a.config) {
        (Some(p), _, _) => Ok(p.clone()),
        (None, Some(f), Some(conf)) => {
            tgconf::resolve_dist(&f.req_size_dist, conf).ok_or_else(|| {
                usage(format!(
                "{}: req_size_dist {} is neither in the working directory nor beside the config \
                 file; fix the path or give --cdf",
                conf.display(),
                f.req_size_dist.display()
            ))
            })
        }
        _ => Err(usage(
            "give --cdf FILE or a --config file with `req_size_dist`",
        )),
    }
}

/// The load and the link rate it refers to: `--load` with `--rate`, or
/// TrafficGenerator's `-b` (a load of 1 at the goodput of that bandwidth),
/// else the config file's `load NMbps` (its older format), read as `-b N`.
fn offered_load(
    a: &ClientArgs,
    file: Option<&tgconf::TgClientFile>,
) -> Result<(f64, Rate), TgError> {
    let flags_say = a.bandwidth.is_some() || a.load.is_some() || a.rate.is_some();
    let file_b = file.and_then(|f| f.load_mbps).filter(|_| !flags_say);
    match (a.bandwidth.or(file_b), a.load, &a.rate) {
        (Some(mbps), None, None) if mbps > 0.0 && mbps.is_finite() => Ok((
            1.0,
            Rate::from_bps((mbps * 1e6 * TG_GOODPUT_RATIO).round() as u64),
        )),
        (Some(mbps), None, None) => Err(usage(format!(
            "-b {mbps}: give the bandwidth in Mbit/s, above 0"
        ))),
        (None, Some(load), Some(rate)) => Ok((load, parse_rate(rate).map_err(usage)?)),
        _ => Err(usage(
            "give the offered load either as --load FRACTION --rate LINK (e.g. --load 0.5 \
             --rate 1gbit) or as TrafficGenerator's -b MBPS, not both",
        )),
    }
}

/// How many flows: `--flows`, else `-t` seconds over the mean gap (at
/// least 1), else the config file's `num_reqs` (its older format), else 1000.
fn flow_count(
    a: &ClientArgs,
    file: Option<&tgconf::TgClientFile>,
    cdf: &FlowSizeCdf,
    load: f64,
    link_rate: Rate,
) -> Result<u32, TgError> {
    let arrivals = PoissonArrivals::for_load(cdf.mean(), load, link_rate).map_err(usage)?;
    Ok(match (a.flows, a.time) {
        (Some(n), _) => n,
        (None, Some(secs)) if secs > 0.0 => {
            (secs * 1e9 / arrivals.mean_gap_ns()).clamp(1.0, u32::MAX as f64) as u32
        }
        (None, Some(secs)) => return Err(usage(format!("-t {secs}: give seconds above 0"))),
        (None, None) => file.and_then(|f| f.num_reqs).unwrap_or(1000),
    })
}

fn run_client(a: ClientArgs, dil: Dilation) -> Result<Outcome, TgError> {
    let (cfg, cdf_path) = client_config(&a, dil)?;
    let json = a.json.file();
    // Open the output first: a typo should not cost a whole run.
    let text = create(&a.out)?;
    let rep = client::run(&cfg)?;
    write_flows_text(text, &rep.flows).map_err(write_err(&a.out))?;
    write_json(
        &json,
        &json!({
            "command": "client",
            "config": {
                "config_file": a.config.as_ref().map(|p| p.display().to_string()),
                "servers": cfg.servers.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                "cdf": cdf_path.display().to_string(),
                "cdf_mean_bytes": cfg.cdf.mean(),
                "load": cfg.load,
                "link_rate_bps": cfg.link_rate.bps(),
                "flows": cfg.flows,
                "conns_per_server": cfg.conns_per_server,
                "dscp": cfg.dscp.classes(),
                "flow_rates_bps": cfg.flow_rate.classes(),
                "seed": cfg.seed,
                "timeout_s": cfg.timeout.as_secs_f64(),
                "dilation": cfg.dilation,
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
            Cmd::Server(ServerArgs { port: 5001, .. })
        ));
        match parse(
            "softswitch-tg client --servers 10.99.0.2:5001,10.99.0.3:5001 --cdf cdf/websearch.txt \
             --load 0.5 --rate 1gbit --flows 1000 --conns 4 --dscp 0 --seed 1 \
             --out flows.txt --json-out flows.json",
        ) {
            Cmd::Client(a) => {
                let (cfg, _) = client_config(&a, Dilation::NONE).unwrap();
                assert_eq!(cfg.servers.len(), 2);
                assert_eq!((cfg.flows, cfg.conns_per_server), (1000, 4));
                assert_eq!((cfg.load, cfg.link_rate), (0.5, Rate::gbit(1)));
            }
            _ => panic!("not client"),
        }
        match parse(
            "softswitch-tg incast --servers 10.99.0.2:5001,10.99.0.3:5001 --size 64kb \
             --queries 100 --interval 10ms",
        ) {
            Cmd::Incast(IncastArgs { size, interval, .. }) => {
                assert_eq!(parse_size(&size).unwrap(), 65536);
                assert_eq!(duration(&interval).unwrap(), Duration::from_millis(10));
            }
            _ => panic!("not incast"),
        }
        match parse(
            "softswitch-tg long --server 10.99.0.2:5001 --duration 10s --dscp 8 --rate 500mbit",
        ) {
            Cmd::Long(LongArgs { rate, dscp, .. }) => {
                assert_eq!(opt_rate_bps(&rate).unwrap(), 500_000_000);
                assert_eq!(dscp, 8);
            }
            _ => panic!("not long"),
        }
    }

    #[test]
    fn dilation_is_global_and_checked() {
        let cli = Cli::try_parse_from(
            "softswitch-tg incast --servers 10.99.0.2:5001 --size 64kb --dilation 4".split(' '),
        )
        .unwrap();
        assert_eq!(cli.dilation.parse::<Dilation>().unwrap().factor(), 4.0);
        let cli = Cli::try_parse_from(
            "softswitch-tg --dilation 2.5 long --server 10.99.0.2:5001".split(' '),
        )
        .unwrap();
        assert_eq!(cli.dilation.parse::<Dilation>().unwrap().factor(), 2.5);
        assert!("0.5".parse::<Dilation>().is_err());
        // The client carries it; its schedule stays the emulated one.
        let a = client_args(
            "softswitch-tg client --servers 10.99.0.2:5001 --cdf cdf/websearch.txt \
             --load 0.5 --rate 10gbit",
        );
        let a = ClientArgs {
            cdf: Some(PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/cdf/websearch.txt"
            ))),
            ..a
        };
        let d4 = Dilation::new(4.0).unwrap();
        let (cfg, _) = client_config(&a, d4).unwrap();
        assert_eq!((cfg.dilation, cfg.link_rate), (d4, Rate::gbit(10)));
        let (cfg1, _) = client_config(&a, Dilation::NONE).unwrap();
        assert_eq!(client::plan(&cfg).unwrap(), client::plan(&cfg1).unwrap());
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

    fn client_args(args: &str) -> ClientArgs {
        match parse(args) {
            Cmd::Client(a) => a,
            _ => panic!("not client"),
        }
    }

    /// A TrafficGenerator client config (its `conf/client_config.txt`, with
    /// a path to our web search CDF) in a fresh directory.
    fn tg_config_file(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tg-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("client_config.txt");
        std::fs::write(
            &path,
            format!(
                "server 192.168.1.51 5001\nserver 192.168.1.52 5001\nserver 192.168.1.53 5001\n\
                 req_size_dist {}/cdf/websearch.txt\nrate 0Mbps 10\nrate 500Mbps 30\n\
                 rate 800Mbps 60\ndscp 0 25\ndscp 1 25\ndscp 2 25\ndscp 3 25\n",
                env!("CARGO_MANIFEST_DIR")
            ),
        )
        .unwrap();
        path
    }

    #[test]
    fn trafficgenerator_command_line_runs_unchanged() {
        // TrafficGenerator's README: ./bin/client -b 900 -c conf/client_config.txt -n 5000 -l flows.txt -s 123
        let conf = tg_config_file("tg");
        let a = client_args(&format!(
            "softswitch-tg client -b 900 -c {} -n 5000 -l flows.txt -s 123",
            conf.display()
        ));
        let (cfg, cdf) = client_config(&a, Dilation::NONE).unwrap();
        assert!(cdf.ends_with("cdf/websearch.txt"));
        assert_eq!(cfg.servers.len(), 3);
        assert_eq!((cfg.flows, cfg.seed), (5000, 123));
        assert_eq!(a.out, PathBuf::from("flows.txt"));
        assert_eq!(cfg.dscp.classes(), &[(0, 25), (1, 25), (2, 25), (3, 25)]);
        assert_eq!(
            cfg.flow_rate.classes(),
            &[(0, 10), (500_000_000, 30), (800_000_000, 60)]
        );
        // TrafficGenerator's period: mean · 8 / b / TG_GOODPUT_RATIO µs.
        let mean_gap_us = cfg.cdf.mean() * 8.0 / 900.0 / TG_GOODPUT_RATIO;
        let ours = PoissonArrivals::for_load(cfg.cdf.mean(), cfg.load, cfg.link_rate)
            .unwrap()
            .mean_gap_ns()
            / 1e3;
        assert!(
            (ours / mean_gap_us - 1.0).abs() < 1e-6,
            "{ours} vs {mean_gap_us}"
        );
        // -t SECONDS instead of -n: the count is the time over the mean gap.
        let a = client_args(&format!(
            "softswitch-tg client -b 900 -c {} -t 10",
            conf.display()
        ));
        let (cfg, _) = client_config(&a, Dilation::NONE).unwrap();
        assert_eq!(cfg.flows, (10e6 / mean_gap_us) as u32);
        std::fs::remove_dir_all(conf.parent().unwrap()).unwrap();
    }

    /// A config file of TrafficGenerator's older format (before its commit
    /// d6a4928 moved them to -b and -n) carries `load` and `num_reqs`: they
    /// run as `-b` and `-n` would, and the command line overrides them.
    #[test]
    fn the_older_formats_load_and_num_reqs_are_b_and_n() {
        let conf = tg_config_file("older");
        let text = std::fs::read_to_string(&conf).unwrap();
        let new_format = |args: &str| {
            client_config(
                &client_args(&format!(
                    "softswitch-tg client -c {} {args}",
                    conf.display()
                )),
                Dilation::NONE,
            )
            .unwrap()
            .0
        };
        let today = new_format("-b 800 -n 5000");
        std::fs::write(&conf, format!("{text}load 800Mbps\nnum_reqs 5000\n")).unwrap();
        let older = new_format("");
        assert_eq!((older.load, older.link_rate), (today.load, today.link_rate));
        assert_eq!(older.flows, 5000);
        assert_eq!(client::plan(&older).unwrap(), client::plan(&today).unwrap());
        // Flags win over the file, as for every other line.
        let over = new_format("-b 900 -n 7");
        assert_eq!(over.flows, 7);
        assert_eq!(
            over.link_rate,
            Rate::from_bps((900e6 * TG_GOODPUT_RATIO).round() as u64)
        );
        let over = new_format("--load 0.5 --rate 1gbit -t 1");
        assert_eq!((over.load, over.link_rate), (0.5, Rate::gbit(1)));
        assert_ne!(over.flows, 5000);
        std::fs::remove_dir_all(conf.parent().unwrap()).unwrap();
    }

    /// `--json-out FILE` names the JSON file; `--json FILE`, its old name,
    /// still does, with a warning that names the new flag.
    #[test]
    fn json_out_names_the_file_and_json_still_works_with_a_warning() {
        for sub in [
            "client --servers 10.0.0.1:1 --cdf x -b 9",
            "incast --servers 10.0.0.1:1 --size 64kb",
            "long --server 10.0.0.1:1",
        ] {
            let json = |cmd: Cmd| match cmd {
                Cmd::Client(a) => a.json,
                Cmd::Incast(a) => a.json,
                Cmd::Long(a) => a.json,
                Cmd::Server(_) => panic!("server"),
            };
            let new = json(parse(&format!("softswitch-tg {sub} --json-out r.json")));
            assert_eq!(new.path(), (Some(PathBuf::from("r.json")), None), "{sub}");
            let old = json(parse(&format!("softswitch-tg {sub} --json r.json")));
            let (path, warning) = old.path();
            assert_eq!(path, Some(PathBuf::from("r.json")), "{sub}");
            let w = warning.expect("a warning");
            assert!(
                w.contains("--json FILE is deprecated; write --json-out r.json"),
                "{w}"
            );
            assert_eq!(
                json(parse(&format!("softswitch-tg {sub}"))).path(),
                (None, None)
            );
            let both = format!("softswitch-tg {sub} --json a --json-out b");
            assert!(
                Cli::try_parse_from(both.split_whitespace()).is_err(),
                "{both}"
            );
        }
        // The old name is hidden from --help; the new one is shown.
        let help = match Cli::try_parse_from(["softswitch-tg", "client", "--help"]) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("--help"),
        };
        assert!(
            help.contains("--json-out <FILE>") && !help.contains("--json <FILE>"),
            "{help}"
        );
    }

    #[test]
    fn flags_override_the_config_file() {
        let conf = tg_config_file("override");
        let a = client_args(&format!(
            "softswitch-tg client -c {} --servers 10.99.0.2:5001 --load 0.5 --rate 1gbit \
             --dscp 8 --flow-rate 100mbit --cdf {}/cdf/datamining.txt",
            conf.display(),
            env!("CARGO_MANIFEST_DIR")
        ));
        let (cfg, cdf) = client_config(&a, Dilation::NONE).unwrap();
        assert_eq!(cfg.servers, vec!["10.99.0.2:5001".parse().unwrap()]);
        assert!(cdf.ends_with("cdf/datamining.txt"));
        assert_eq!(cfg.dscp, DscpMix::single(8));
        assert_eq!(cfg.flow_rate, FlowRateMix::single(100_000_000));
        assert_eq!(cfg.flows, 1000);
        std::fs::remove_dir_all(conf.parent().unwrap()).unwrap();
    }

    #[test]
    fn client_without_a_load_or_servers_says_what_to_give() {
        let conf = tg_config_file("bad");
        let e = |args: &str| match client_config(&client_args(args), Dilation::NONE) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{args} accepted"),
        };
        let c = conf.display();
        assert!(e(&format!("softswitch-tg client -c {c}")).contains("-b MBPS"));
        assert!(e(&format!(
            "softswitch-tg client -c {c} -b 900 --load 0.5 --rate 1gbit"
        ))
        .contains("not both"));
        assert!(e("softswitch-tg client -b 900").contains("--servers"));
        assert!(e("softswitch-tg client -b 900 --servers 10.0.0.1:1").contains("--cdf"));
        assert!(e(&format!("softswitch-tg client -c {c} -b 0")).contains("above 0"));
        std::fs::write(&conf, "server 10.0.0.1 5001\nreq_size_dist nowhere.txt\n").unwrap();
        assert!(e(&format!("softswitch-tg client -c {c} -b 9")).contains("nowhere.txt"));
        std::fs::write(&conf, "server 10.0.0.1 5001\nreq_size_dist x\nload 800\n").unwrap();
        let msg = e(&format!("softswitch-tg client -c {c} -b 9"));
        assert!(msg.contains(":3:") && msg.contains("load 800Mbps"), "{msg}");
        assert!(Cli::try_parse_from(["softswitch-tg", "client", "-n", "5", "-t", "1"]).is_err());
        std::fs::remove_dir_all(conf.parent().unwrap()).unwrap();
    }
}

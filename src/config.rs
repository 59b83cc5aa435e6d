//! The switch's configuration: a TOML file and command-line flags, merged
//! (flags win), validated, and turned into per-port settings.
//!
//! ```toml
//! ports = ["veth0", "veth1"]
//! rate = "1gbit"          # emulated link rate of every port
//! buffer = "96kb"         # shared buffer per port
//! delay = "0"             # one-way delay after the shaper
//! rtt = "250us"           # base RTT the AQM defaults are scaled to
//! dilation = 1            # time dilation D: rates and times above are emulated
//! queues = 8
//! sched = "dwrr"          # sp | dwrr | wfq | sp+dwrr | sp+wfq
//! quantum = [1514]        # per queue (one value = all queues)
//! classify = "dscp"       # dscp | flow[,temp=0|none][,pass-limit=15140b][,timeout=375us]
//! aqm = "tcn"             # droptail | red | dctcp | mq-ecn | tcn | codel | ecn-sharp | pred | diffecn | r-aqm[+forward]
//! raqm_forward = "dctcp"  # with aqm = "r-aqm": the forward-path AQM
//! [raqm_opts]             # R-AQM's parameters (src/raqm), e.g. k_min_pkts = 20
//! [aqm_opts]              # the AQM's own parameters, e.g.
//! threshold = "100us"
//! [port.veth1]            # per-port overrides
//! delay = "50us"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::aqm::{AqmConfig, AqmEnv};
use crate::cli::RunArgs;
use crate::port::{Classifier, NotEctPolicy, PortConfig};
use crate::sched::SchedConfig;
use crate::shaper;
use crate::timebase::Dilation;
use crate::units::{self, Nanos, Rate};

/// Default base RTT the AQM defaults are scaled to (the TCN testbed's ≈ 250 µs, tcn.txt §6.1).
pub const DEFAULT_RTT: &str = "250us";
/// Default link rate.
pub const DEFAULT_RATE: &str = "1gbit";
/// Default shared buffer per port (TCN testbed: 96 KB per port at 1 Gbit/s).
pub const DEFAULT_BUFFER: &str = "96kb";
/// Default link time a busy port may make up when the poll loop was late:
/// none, the prototype's strict token bucket (tcn.txt §5; see `shaper`).
/// Catch-up is a software-robustness option (`--catchup 1ms`).
pub const DEFAULT_CATCHUP: &str = "0";
/// IP MTU assumed for AQM defaults and buffer checks.
pub const MTU: u32 = 1500;

/// Settings that may differ per port.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortOverride {
    /// Link rate.
    pub rate: Option<String>,
    /// Shared buffer size.
    pub buffer: Option<String>,
    /// One-way delay.
    pub delay: Option<String>,
}

/// The TOML file (every key optional; flags fill or override).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Interfaces.
    pub ports: Option<Vec<String>>,
    /// Link rate (`1gbit`); `0` or `unlimited` = unshaped.
    pub rate: Option<String>,
    /// Shaper bucket (`2500b`).
    pub bucket: Option<String>,
    /// Per-frame overhead counted against the rate, bytes.
    pub overhead: Option<u32>,
    /// Link time a busy port may make up after the poll loop was late.
    pub catchup: Option<String>,
    /// Shared buffer per port.
    pub buffer: Option<String>,
    /// Per-queue limit.
    pub queue_limit: Option<String>,
    /// One-way delay.
    pub delay: Option<String>,
    /// Emulated host links on ingress: off | line | a rate.
    pub ingress_rate: Option<String>,
    /// Frames an emulated host link may hold.
    pub ingress_limit: Option<u32>,
    /// Base RTT for AQM defaults.
    pub rtt: Option<String>,
    /// Queues per port.
    pub queues: Option<usize>,
    /// Scheduler name.
    pub sched: Option<String>,
    /// DWRR quanta (bytes).
    pub quantum: Option<Vec<u64>>,
    /// WFQ weights.
    pub weights: Option<Vec<u64>>,
    /// Strict-priority queues (for sp / sp+dwrr / sp+wfq), highest first.
    pub strict: Option<Vec<usize>>,
    /// WFQ virtual time rule: prototype (default) | scfq.
    pub wfq_vtime: Option<String>,
    /// What DWRR / WFQ charge a packet: wire (default) | frame.
    pub sched_bytes: Option<String>,
    /// DSCP → queue map, as on the command line (`mod`, `46=0,10=1`, or 64 numbers).
    pub dscp_map: Option<String>,
    /// Classifier, as on the command line (`dscp`, `flow,pass-limit=15kb`).
    pub classify: Option<String>,
    /// Test hook: CE-mark every n-th ECN-capable packet at dequeue.
    pub mark_every: Option<u32>,
    /// Stats socket path.
    pub stats_socket: Option<String>,
    /// AQM name.
    pub aqm: Option<String>,
    /// AQM parameters.
    pub aqm_opts: Option<BTreeMap<String, toml::Value>>,
    /// With `aqm = "r-aqm"`: the forward-path AQM.
    pub raqm_forward: Option<String>,
    /// R-AQM parameters.
    pub raqm_opts: Option<BTreeMap<String, toml::Value>>,
    /// What to do with a packet the AQM marks but that is Not-ECT: pass (default) | drop.
    pub not_ect: Option<String>,
    /// MAC ageing time.
    pub ageing: Option<String>,
    /// UMEM frames.
    pub frames: Option<u32>,
    /// Seed for the AQMs' random decisions.
    pub seed: Option<u64>,
    /// Data-path CPU: a number, "last" or "none".
    pub cpu: Option<String>,
    /// Data-path waiting: "busy" or "adaptive".
    pub poll: Option<String>,
    /// Fidelity guard: largest share of backlogged link time that may be lost.
    pub max_lost: Option<String>,
    /// Fidelity guard: longest single data-path stall.
    pub max_stall: Option<String>,
    /// Fidelity guard: largest share of the run spent in stalls.
    pub max_stalled: Option<String>,
    /// Capture directory (`--pcap`; see `capture`).
    pub pcap: Option<String>,
    /// Ports captured (default: all).
    pub pcap_ports: Option<Vec<String>>,
    /// Bytes of each frame captured.
    pub pcap_snaplen: Option<u32>,
    /// Bound of one capture file, MB.
    pub pcap_max_mb: Option<f64>,
    /// Time dilation D (`dilation = 4`; default 1: real time).
    pub dilation: Option<f64>,
    /// Per-port overrides, by interface name.
    pub port: Option<BTreeMap<String, PortOverride>>,
}

/// A configuration the user must fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// File could not be read.
    #[error("cannot read config file {path}: {err}")]
    Read {
        /// Path.
        path: String,
        /// Why.
        err: std::io::Error,
    },
    /// File is not valid TOML / has unknown keys.
    #[error("config file {path}: {err}")]
    Parse {
        /// Path.
        path: String,
        /// Why (with line and column).
        err: String,
    },
    /// A bad unit string.
    #[error("{key}: {err}")]
    Unit {
        /// Which setting.
        key: String,
        /// What was wrong.
        err: units::UnitError,
    },
    /// Anything else.
    #[error("{0}")]
    Invalid(String),
}

impl FileConfig {
    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Read {
            path: path.display().to_string(),
            err,
        })?;
        Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse { err, .. } => ConfigError::Parse {
                path: path.display().to_string(),
                err,
            },
            other => other,
        })
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: "<text>".into(),
            err: e.to_string(),
        })
    }
}

/// Reads a rate setting; `0`, `unlimited` and `none` mean unshaped.
pub fn rate_setting(key: &str, s: &str) -> Result<Rate, ConfigError> {
    match s.trim() {
        "0" | "unlimited" | "none" => Ok(Rate::from_bps(0)),
        other => units::parse_rate(other).map_err(|err| ConfigError::Unit {
            key: key.into(),
            err,
        }),
    }
}

/// Reads a size setting.
pub fn size_setting(key: &str, s: &str) -> Result<u64, ConfigError> {
    units::parse_size(s).map_err(|err| ConfigError::Unit {
        key: key.into(),
        err,
    })
}

/// Reads a share: `1%`, `0.5 %` or a fraction `0.01`, in [0, 1].
pub fn share_setting(key: &str, s: &str) -> Result<f64, ConfigError> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(ConfigError::Invalid(format!(
            "--{key} {s:?}: give a share from 0 to 100 %, e.g. 1% or 0.01"
        ))),
    }
}

/// Reads a time setting.
pub fn time_setting(key: &str, s: &str) -> Result<Nanos, ConfigError> {
    units::parse_duration(s).map_err(|err| ConfigError::Unit {
        key: key.into(),
        err,
    })
}

/// Everything one port needs.
#[derive(Clone, Debug)]
pub struct PortSettings {
    /// Interface.
    pub name: String,
    /// Egress pipeline.
    pub port: PortConfig,
    /// AQM (effective parameters).
    pub aqm: AqmConfig,
    /// What the AQM was scaled to.
    pub env: AqmEnv,
    /// One-way delay after the shaper.
    pub delay_ns: Nanos,
    /// Rate of the emulated host link on ingress (`--ingress-rate`), if on.
    pub ingress_rate: Option<Rate>,
}

/// The switch's effective settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Ports, in `--ports` order.
    pub ports: Vec<PortSettings>,
    /// Run over interfaces with the default route.
    pub force: bool,
    /// UMEM frames (None: sized from the ports, see `dataplane::frames_needed`).
    pub frames: Option<u32>,
    /// Seed for random AQM decisions.
    pub seed: u64,
    /// Stats socket.
    pub stats_socket: std::path::PathBuf,
    /// Stop after this long.
    pub duration_ns: Option<Nanos>,
    /// MAC ageing.
    pub ageing_ns: Nanos,
    /// Print JSON counters on exit.
    pub json: bool,
    /// Nice value of the data path.
    pub nice: i32,
    /// CPU the data path is pinned to (resolved at start against the CPUs
    /// the process may use).
    pub cpu: crate::cpu::CpuChoice,
    /// Between departures: spin or sleep (`--poll`).
    pub poll: crate::poll::PollMode,
    /// Queue time-series CSV file and its sampling interval.
    pub timeseries: Option<(std::path::PathBuf, Nanos)>,
    /// Fidelity guard limits.
    pub guard: crate::fidelity::Thresholds,
    /// Capture (`--pcap`), if on.
    pub pcap: Option<crate::capture::PcapSettings>,
    /// R-AQM on the reverse path (`--aqm r-aqm`), with its parameters.
    pub raqm: Option<crate::raqm::Config>,
    /// Frames each emulated host link may hold (`--ingress-limit`).
    pub ingress_limit: u32,
    /// Time dilation (`--dilation`): every rate and time above is emulated;
    /// the data path runs the core D times slower than real time.
    pub dilation: Dilation,
}

impl Settings {
    /// Lines describing the effective configuration, printed at start-up.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for p in &self.ports {
            let c = &p.port;
            let rate = if c.rate.bps() == 0 {
                "unshaped".to_string()
            } else {
                c.rate.to_string()
            };
            let shaper = if c.catchup_ns == 0 {
                "strict".to_string()
            } else {
                format!("catch-up {}", units::fmt_duration(c.catchup_ns))
            };
            out.push_str(&format!(
                "port {}: rate {} (bucket {} B, +{} B/frame, {}), buffer {} B, {} queue(s), sched {}, delay {}, rtt {}\n  aqm {} (Not-ECT on a mark: {})\n",
                p.name,
                rate,
                c.bucket_bytes,
                c.overhead_bytes,
                shaper,
                c.buffer_bytes,
                c.queues,
                c.sched.describe(),
                units::fmt_duration(p.delay_ns),
                units::fmt_duration(p.env.rtt_ns),
                p.aqm.describe(),
                match c.not_ect {
                    NotEctPolicy::Pass => "pass",
                    NotEctPolicy::Drop => "drop",
                },
            ));
            if let Some(r) = p.ingress_rate {
                out.push_str(&format!(
                    "  ingress: frames from the host enter at most at {r} (emulated host NIC, store-and-forward, up to {} frames waiting)\n",
                    self.ingress_limit
                ));
            }
            if let crate::port::Classifier::Flow(f) = &c.classifier {
                out.push_str(&format!(
                    "  classify flow: a queue per active flow by 5-tuple{}, {} entries (diffecn.txt §IV-B)\n",
                    if f.temp_queue {
                        format!(
                            "; new flows wait in strict queue 0 when no queue is empty, pass limit {} B, idle timeout {}",
                            f.pass_limit_bytes,
                            units::fmt_duration(f.idle_timeout_ns)
                        )
                    } else {
                        "; the shortest queue when none is empty".to_string()
                    },
                    (crate::port::flowmap::ENTRIES_PER_QUEUE * c.queues).next_power_of_two(),
                ));
            }
        }
        if !self.dilation.is_none() {
            out.push_str(&self.describe_dilation());
        }
        if self.poll != crate::poll::PollMode::Busy {
            out.push_str(&format!(
                "data path: --poll {} (sleeps until just before the next departure while backlogged)\n",
                self.poll
            ));
        }
        if let Some(r) = &self.raqm {
            out.push_str(&format!("reverse path: {}\n", r.describe()));
        }
        let g = &self.guard;
        out.push_str(&format!(
            "fidelity guard: not faithful if a port loses > {:.1} % of its backlogged link time, \
             sends above rate + bucket, or the data path stalls > {} at once or > {:.1} % of the run\n",
            g.max_lost * 100.0,
            units::fmt_duration(g.max_stall_ns),
            g.max_stalled * 100.0
        ));
        out
    }
}

impl Settings {
    /// The start-up line of a dilated run: D, and what the first port's
    /// emulated rate is on the wire.
    fn describe_dilation(&self) -> String {
        let d = self.dilation;
        let wire = match self.ports.first().map(|p| p.port.rate) {
            Some(r) if r.bps() > 0 => format!(
                " (port {}: {} emulated = {} on the wire)",
                self.ports[0].name,
                r,
                d.wire_rate(r)
            ),
            _ => String::new(),
        };
        format!(
            "time dilation D = {d}: the rates, delays and AQM times above are emulated; the switch \
             sends at rate / {d} in real time{wire} and every time lasts {d} times longer; reports \
             give emulated times and rates, the fidelity guard's own figures real time\n"
        )
    }
}

fn pick<'a>(cli: &'a Option<String>, file: &'a Option<String>, default: &'a str) -> &'a str {
    cli.as_deref().or(file.as_deref()).unwrap_or(default)
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn key_value<'a>(flag: &str, s: &'a str) -> Result<(&'a str, &'a str), ConfigError> {
    s.split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            ConfigError::Invalid(format!(
                "{flag} {s:?}: write it as NAME=VALUE, e.g. {flag} veth1=50us"
            ))
        })
}

/// Merges the config file (if any) and the flags (which win) into settings.
pub fn resolve(args: &RunArgs) -> Result<Settings, ConfigError> {
    let file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let ports: Vec<String> = if !args.ports.is_empty() {
        args.ports
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    } else {
        file.ports.clone().unwrap_or_default()
    };
    if ports.is_empty() {
        return Err(ConfigError::Invalid(
            "no ports given; name the interfaces to switch between, e.g. --ports veth0,veth1 \
             (create test hosts with `sudo softswitch topo up --hosts 2`)"
                .into(),
        ));
    }
    let overrides = file.port.clone().unwrap_or_default();
    for name in overrides.keys() {
        if !ports.contains(name) {
            return Err(ConfigError::Invalid(format!(
                "[port.{name}] in the config file names an interface that is not in ports ({})",
                ports.join(",")
            )));
        }
    }
    let mut port_delay: BTreeMap<String, String> = BTreeMap::new();
    for s in &args.port_delay {
        let (k, v) = key_value("--port-delay", s)?;
        port_delay.insert(k.into(), v.into());
    }
    let mut port_rate: BTreeMap<String, String> = BTreeMap::new();
    for s in &args.port_rate {
        let (k, v) = key_value("--port-rate", s)?;
        port_rate.insert(k.into(), v.into());
    }
    for k in port_delay.keys().chain(port_rate.keys()) {
        if !ports.contains(k) {
            return Err(ConfigError::Invalid(format!(
                "{k:?} in --port-delay/--port-rate is not one of --ports ({})",
                ports.join(",")
            )));
        }
    }

    let mut aqm_name = pick(&args.aqm, &file.aqm, "droptail").to_string();
    let raqm_on = match crate::raqm::parse_aqm_name(&aqm_name) {
        Some(forward) => {
            aqm_name = forward
                .map(str::to_string)
                .or(args.raqm_forward.clone())
                .or(file.raqm_forward.clone())
                .unwrap_or_else(|| crate::raqm::DEFAULT_FORWARD_AQM.to_string());
            if crate::raqm::parse_aqm_name(&aqm_name).is_some() {
                return Err(ConfigError::Invalid(format!(
                    "--raqm-forward {aqm_name}: name a forward-path AQM (dctcp, tcn, ...), not r-aqm"
                )));
            }
            true
        }
        None => {
            if args.raqm_forward.is_some() || !args.raqm_opt.is_empty() {
                return Err(ConfigError::Invalid(
                    "--raqm-forward / --raqm-opt need --aqm r-aqm".into(),
                ));
            }
            false
        }
    };
    let diffecn = aqm_name.trim().eq_ignore_ascii_case("diffecn");
    let per_flow = diffecn
        || args
            .classify
            .as_ref()
            .or(file.classify.as_ref())
            .is_some_and(|c| c.trim().starts_with("flow"));
    // Per-flow queues need queues to give out: 8 (a switch port's usual
    // count) unless --queues says otherwise.
    let queues = args.queues.or(file.queues).unwrap_or(if per_flow {
        crate::port::DEFAULT_QUEUES
    } else {
        1
    });
    if !(1..=128).contains(&queues) {
        return Err(ConfigError::Invalid(format!(
            "--queues {queues}: a port has 1 to 128 queues"
        )));
    }
    let rtt_ns = time_setting("rtt", pick(&args.rtt, &file.rtt, DEFAULT_RTT))?;
    if rtt_ns == 0 {
        return Err(ConfigError::Invalid(
            "--rtt must be positive: the base RTT the AQM thresholds are scaled to, e.g. 250us"
                .into(),
        ));
    }
    let bucket = match args.bucket.as_ref().or(file.bucket.as_ref()) {
        Some(b) => size_setting("bucket", b)?,
        None => shaper::DEFAULT_BUCKET_BYTES,
    };
    let catchup_ns = time_setting(
        "catchup",
        pick(&args.catchup, &file.catchup, DEFAULT_CATCHUP),
    )?;
    let queue_limit = match args.queue_limit.as_ref().or(file.queue_limit.as_ref()) {
        Some(s) => Some(size_setting("queue-limit", s)?),
        None => None,
    };
    let classifier = match args.dscp_map.as_ref().or(file.dscp_map.as_ref()) {
        Some(m) => {
            Classifier::from_cli(m, queues).map_err(|e| ConfigError::Invalid(e.to_string()))?
        }
        None => Classifier::DscpMod,
    };
    let classifier = match args.classify.as_ref().or(file.classify.as_ref()) {
        Some(c) => {
            Classifier::classify_from_cli(c, classifier, crate::aqm::util::scale_ns(rtt_ns, 1.5))
                .map_err(|e| ConfigError::Invalid(e.to_string()))?
        }
        None if diffecn => Classifier::Flow(crate::port::FlowClassConfig {
            idle_timeout_ns: crate::aqm::util::scale_ns(rtt_ns, 1.5),
            ..Default::default()
        }),
        None => classifier,
    };
    if diffecn && !matches!(classifier, Classifier::Flow(_)) {
        return Err(ConfigError::Invalid(
            "--aqm diffecn marks each flow by its own queue's length and needs --classify flow (the default with diffecn; diffecn.txt §IV-B)".into(),
        ));
    }
    // DiffECN's QMU keeps queue 0 as a strict temporary queue: with it the
    // scheduler defaults to sp+dwrr (strict queue 0).
    let temp_queue = matches!(classifier, Classifier::Flow(f) if f.temp_queue);
    let sched_name = pick(
        &args.sched,
        &file.sched,
        if temp_queue { "sp+dwrr" } else { "dwrr" },
    );
    let mut sched =
        SchedConfig::from_cli(sched_name).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    let sched_err = |e: crate::sched::SchedConfigError| ConfigError::Invalid(e.to_string());
    if let Some(q) = args
        .quantum
        .clone()
        .or(file.quantum.as_ref().map(|v| join(v)))
    {
        sched.set_quanta_str(&q).map_err(sched_err)?;
    }
    if let Some(w) = args
        .weights
        .clone()
        .or(file.weights.as_ref().map(|v| join(v)))
    {
        sched.set_weights_str(&w).map_err(sched_err)?;
    }
    if let Some(st) = args
        .strict
        .clone()
        .or(file.strict.as_ref().map(|v| join(v)))
    {
        sched.set_strict_str(&st).map_err(sched_err)?;
    }
    if let Some(b) = args.sched_bytes.as_ref().or(file.sched_bytes.as_ref()) {
        sched.set_bytes_str(b).map_err(sched_err)?;
    }
    if let Some(v) = args.wfq_vtime.as_ref().or(file.wfq_vtime.as_ref()) {
        sched.set_wfq_vtime_str(v).map_err(sched_err)?;
    }
    sched.validate(queues).map_err(sched_err)?;
    // Default pass, as the TCN / MQ-ECN prototypes (see `NotEctPolicy`).
    let not_ect = match pick(&args.not_ect, &file.not_ect, "pass") {
        "drop" => NotEctPolicy::Drop,
        "pass" => NotEctPolicy::Pass,
        other => {
            return Err(ConfigError::Invalid(format!(
                "--not-ect {other:?}: use pass (default, as the TCN/MQ-ECN prototypes) or drop"
            )))
        }
    };
    let mut aqm_cli = Vec::new();
    for s in &args.aqm_opt {
        let (k, v) = key_value("--aqm-opt", s)?;
        aqm_cli.push((k.to_string(), v.to_string()));
    }
    let aqm_file: Vec<(String, toml::Value)> = file
        .aqm_opts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();

    let ingress =
        crate::ingress::IngressRate::parse(pick(&args.ingress_rate, &file.ingress_rate, "off"))
            .map_err(ConfigError::Invalid)?;
    let ingress_limit = args
        .ingress_limit
        .or(file.ingress_limit)
        .unwrap_or(crate::ingress::DEFAULT_LIMIT_PKTS);
    if ingress_limit == 0 {
        return Err(ConfigError::Invalid(
            "--ingress-limit 0: the emulated host link needs room for at least 1 frame".into(),
        ));
    }

    let mut out = Vec::with_capacity(ports.len());
    for name in &ports {
        let ov = overrides.get(name).cloned().unwrap_or_default();
        let rate_s = port_rate
            .get(name)
            .cloned()
            .or(ov.rate)
            .or(args.rate.clone())
            .or(file.rate.clone());
        let rate = rate_setting("rate", rate_s.as_deref().unwrap_or(DEFAULT_RATE))?;
        let buffer_s = ov.buffer.or(args.buffer.clone()).or(file.buffer.clone());
        let buffer = size_setting("buffer", buffer_s.as_deref().unwrap_or(DEFAULT_BUFFER))?;
        let delay_s = port_delay
            .get(name)
            .cloned()
            .or(ov.delay)
            .or(args.delay.clone())
            .or(file.delay.clone());
        let delay_ns = time_setting("delay", delay_s.as_deref().unwrap_or("0"))?;
        let ingress_rate = ingress.for_port(rate);
        let port = PortConfig {
            rate,
            bucket_bytes: bucket,
            overhead_bytes: args
                .overhead
                .or(file.overhead)
                .unwrap_or(shaper::ETHERNET_WIRE_OVERHEAD),
            buffer_bytes: buffer,
            queues,
            queue_limit_bytes: queue_limit,
            classifier: classifier.clone(),
            sched: sched.clone(),
            not_ect,
            mark_every: args.mark_every.or(file.mark_every),
            mtu_frame_bytes: MTU + 14,
            catchup_ns,
        };
        port.validate()
            .map_err(|e| ConfigError::Invalid(format!("port {name}: {e}")))?;
        let env = AqmEnv {
            rate: if rate.bps() == 0 {
                Rate::gbit(100)
            } else {
                rate
            },
            rtt_ns,
            num_queues: queues,
            mtu_bytes: MTU,
            quanta: if sched.is_round_robin() {
                sched.quanta(queues, port.overhead_bytes)
            } else {
                None
            },
        };
        let aqm_err =
            |e: crate::aqm::AqmConfigError| ConfigError::Invalid(format!("--aqm {aqm_name}: {e}"));
        let aqm = AqmConfig::defaults_for(&aqm_name, &env)
            .map_err(aqm_err)?
            .with_toml_overrides(&aqm_file)
            .map_err(aqm_err)?
            .with_overrides(&aqm_cli)
            .map_err(aqm_err)?;
        aqm.build(&env).map_err(aqm_err)?;
        out.push(PortSettings {
            name: name.clone(),
            port,
            aqm,
            env,
            delay_ns,
            ingress_rate,
        });
    }
    let raqm = if raqm_on {
        let mut cli = Vec::new();
        for s in &args.raqm_opt {
            let (k, v) = key_value("--raqm-opt", s)?;
            cli.push((k.to_string(), v.to_string()));
        }
        let from_file: Vec<(String, toml::Value)> = file
            .raqm_opts
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        // One parameter set for the switch, scaled to the first port's link.
        let env = &out[0].env;
        let cfg = crate::raqm::Config::for_link(env.rate, rtt_ns)
            .with_overrides(&from_file)
            .and_then(|c| c.with_cli_overrides(&cli))
            .map_err(|e| ConfigError::Invalid(format!("--aqm r-aqm: {e}")))?;
        Some(cfg)
    } else {
        None
    };
    let duration_ns = match &args.duration {
        Some(d) => match time_setting("duration", d)? {
            0 => {
                return Err(ConfigError::Invalid(format!(
                    "--duration {d}: give a positive time (e.g. 30s), or leave it off to run until Ctrl-C"
                )))
            }
            ns => Some(ns),
        },
        None => None,
    };
    let frames = args.frames.or(file.frames);
    if frames == Some(0) {
        return Err(ConfigError::Invalid(
            "--frames 0: the switch needs UMEM frames; leave it off to size the UMEM from the ports"
                .into(),
        ));
    }
    let pcap = crate::capture::PcapSettings::resolve(args, &file, &ports)?;
    let dilation = match (&args.dilation, file.dilation) {
        (Some(d), _) => d
            .parse()
            .map_err(|e: String| ConfigError::Invalid(format!("--dilation: {e}")))?,
        (None, Some(d)) => Dilation::new(d)
            .map_err(|e| ConfigError::Invalid(format!("dilation in the config file: {e}")))?,
        (None, None) => Dilation::NONE,
    };
    Ok(Settings {
        dilation,
        pcap,
        raqm,
        ingress_limit,
        ports: out,
        force: args.force,
        frames,
        seed: args.seed.or(file.seed).unwrap_or(1),
        stats_socket: args
            .stats_socket
            .clone()
            .or(file.stats_socket.map(Into::into))
            .unwrap_or_else(|| crate::stats::DEFAULT_SOCKET.into()),
        duration_ns,
        ageing_ns: time_setting("ageing", file.ageing.as_deref().unwrap_or("300s"))?,
        json: args.json,
        nice: match args.nice.unwrap_or(-10) {
            n @ -20..=19 => n,
            n => {
                return Err(ConfigError::Invalid(format!(
                    "--nice {n}: use a value from -20 (highest priority) to 19"
                )))
            }
        },
        cpu: match args.cpu.as_deref().or(file.cpu.as_deref()) {
            Some(c) => c
                .parse()
                .map_err(|e: String| ConfigError::Invalid(format!("--cpu: {e}")))?,
            None => crate::cpu::CpuChoice::Unpinned,
        },
        poll: match args.poll.as_deref().or(file.poll.as_deref()) {
            Some(p) => p
                .parse()
                .map_err(|e: String| ConfigError::Invalid(format!("--poll: {e}")))?,
            None => crate::poll::PollMode::Busy,
        },
        guard: {
            let d = crate::fidelity::Thresholds::default();
            crate::fidelity::Thresholds {
                max_lost: match args.max_lost.as_ref().or(file.max_lost.as_ref()) {
                    Some(v) => share_setting("max-lost", v)?,
                    None => d.max_lost,
                },
                max_stall_ns: match args.max_stall.as_ref().or(file.max_stall.as_ref()) {
                    Some(v) => time_setting("max-stall", v)?,
                    None => d.max_stall_ns,
                },
                max_stalled: match args.max_stalled.as_ref().or(file.max_stalled.as_ref()) {
                    Some(v) => share_setting("max-stalled", v)?,
                    None => d.max_stalled,
                },
            }
        },
        timeseries: match &args.timeseries {
            Some(path) => {
                let iv = time_setting("ts-interval", args.ts_interval.as_deref().unwrap_or("1ms"))?;
                if iv < 100_000 {
                    return Err(ConfigError::Invalid(format!(
                        "--ts-interval {}: the shortest sampling interval is 100us",
                        units::fmt_duration(iv)
                    )));
                }
                Some((path.clone(), iv))
            }
            None => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_file() {
        let c = FileConfig::parse(
            r#"
            ports = ["a", "b"]
            rate = "1gbit"
            buffer = "96kb"
            queues = 8
            sched = "dwrr"
            quantum = [1514, 3028]
            aqm = "tcn"
            [aqm_opts]
            threshold = "100us"
            [port.b]
            delay = "50us"
            "#,
        )
        .unwrap();
        assert_eq!(c.ports.unwrap(), vec!["a", "b"]);
        assert_eq!(c.port.unwrap()["b"].delay.as_deref(), Some("50us"));
        assert_eq!(c.aqm_opts.unwrap()["threshold"].as_str(), Some("100us"));
    }

    #[test]
    fn unknown_key_is_an_error_with_position() {
        let e = FileConfig::parse("prots = [\"a\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prots") && e.contains("line 1"), "{e}");
    }

    fn args(list: &[&str]) -> RunArgs {
        use clap::Parser;
        let mut v = vec!["softswitch"];
        v.extend_from_slice(list);
        crate::cli::Cli::try_parse_from(v).unwrap().run
    }

    #[test]
    fn defaults_are_the_tcn_testbed() {
        let s = resolve(&args(&["--ports", "a,b"])).unwrap();
        assert_eq!(s.ports.len(), 2);
        let p = &s.ports[0];
        assert_eq!(p.port.rate, Rate::gbit(1));
        assert_eq!(p.port.buffer_bytes, 96 * 1024);
        assert_eq!(p.port.bucket_bytes, 2_500);
        assert_eq!(p.port.queues, 1);
        assert_eq!(p.aqm.name(), "droptail");
        assert_eq!(p.env.rtt_ns, 250_000);
        assert_eq!(p.delay_ns, 0);
        assert!(s.describe().contains("port a: rate 1gbit"));
        assert_eq!(s.cpu, crate::cpu::CpuChoice::Unpinned);
        // Not-ECT passes on a mark, as the TCN / MQ-ECN prototypes; drop is an option.
        assert_eq!(p.port.not_ect, NotEctPolicy::Pass);
        assert!(s.describe().contains("Not-ECT on a mark: pass"));
        let s = resolve(&args(&["--ports", "a", "--not-ect", "drop"])).unwrap();
        assert_eq!(s.ports[0].port.not_ect, NotEctPolicy::Drop);
        let e = resolve(&args(&["--ports", "a", "--not-ect", "mark"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--not-ect") && e.contains("drop"), "{e}");
    }

    #[test]
    fn cpu_choice_from_flag_or_file() {
        let s = resolve(&args(&["--ports", "a", "--cpu", "last"])).unwrap();
        assert_eq!(s.cpu, crate::cpu::CpuChoice::Last);
        let s = resolve(&args(&["--ports", "a", "--cpu", "3"])).unwrap();
        assert_eq!(s.cpu, crate::cpu::CpuChoice::Cpu(3));
        let e = resolve(&args(&["--ports", "a", "--cpu", "fast"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--cpu") && e.contains("last"), "{e}");
        assert_eq!(
            FileConfig::parse("cpu = \"1\"\n").unwrap().cpu.as_deref(),
            Some("1")
        );
    }

    #[test]
    fn dilation_from_flag_or_file_and_bad_values_say_what_d_is() {
        let s = resolve(&args(&["--ports", "a"])).unwrap();
        assert!(s.dilation.is_none());
        assert!(!s.describe().contains("dilation"));
        let s = resolve(&args(&[
            "--ports",
            "a",
            "--rate",
            "1gbit",
            "--dilation",
            "4",
        ]))
        .unwrap();
        assert_eq!(s.dilation.factor(), 4.0);
        // Rates and times stay emulated in the settings; the start-up text
        // says what goes on the wire.
        assert_eq!(s.ports[0].port.rate, Rate::gbit(1));
        let d = s.describe();
        assert!(
            d.contains("time dilation D = 4") && d.contains("1gbit emulated = 250mbit on the wire"),
            "{d}"
        );
        for bad in ["0.5", "0", "fast", "2000"] {
            let e = resolve(&args(&["--ports", "a", "--dilation", bad]))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--dilation: dilation"), "{bad}: {e}");
        }
        let dir = std::env::temp_dir().join(format!("ss-dil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "ports = [\"a\"]\ndilation = 2.5\n").unwrap();
        let f = file.to_str().unwrap();
        assert_eq!(
            resolve(&args(&["--config", f])).unwrap().dilation.factor(),
            2.5
        );
        // The flag wins over the file.
        let s = resolve(&args(&["--config", f, "--dilation", "4"])).unwrap();
        assert_eq!(s.dilation.factor(), 4.0);
        std::fs::write(&file, "ports = [\"a\"]\ndilation = 4\n").unwrap();
        assert_eq!(
            resolve(&args(&["--config", f])).unwrap().dilation.factor(),
            4.0
        );
        std::fs::write(&file, "ports = [\"a\"]\ndilation = 0\n").unwrap();
        let e = resolve(&args(&["--config", f])).unwrap_err().to_string();
        assert!(e.contains("dilation in the config file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn aqm_defaults_scale_with_rtt_and_options_override() {
        let s = resolve(&args(&["--ports", "a,b", "--aqm", "tcn", "--rtt", "100us"])).unwrap();
        assert!(
            s.ports[0].aqm.describe().contains("100"),
            "{}",
            s.ports[0].aqm.describe()
        );
        let s = resolve(&args(&[
            "--ports",
            "a",
            "--aqm",
            "tcn",
            "--aqm-opt",
            "threshold=60us",
        ]))
        .unwrap();
        assert!(
            s.ports[0].aqm.describe().contains("60"),
            "{}",
            s.ports[0].aqm.describe()
        );
        let e = resolve(&args(&[
            "--ports",
            "a",
            "--aqm",
            "tcn",
            "--aqm-opt",
            "bogus=1",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("valid keys"), "{e}");
        let e = resolve(&args(&[
            "--ports",
            "a",
            "--aqm",
            "tcn",
            "--aqm-opt",
            "threshold",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("NAME=VALUE"), "{e}");
    }

    #[test]
    fn per_port_overrides_from_flags_and_file() {
        let dir = std::env::temp_dir().join(format!("ss-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.toml");
        std::fs::write(&f, "ports = [\"a\", \"b\"]\nrate = \"10gbit\"\n[port.b]\nrate = \"100mbit\"\ndelay = \"20us\"\n").unwrap();
        let s = resolve(&args(&[
            "--config",
            f.to_str().unwrap(),
            "--port-delay",
            "a=5us",
        ]))
        .unwrap();
        assert_eq!(s.ports[0].port.rate, Rate::gbit(10));
        assert_eq!(s.ports[0].delay_ns, 5_000);
        assert_eq!(s.ports[1].port.rate, Rate::mbit(100));
        assert_eq!(s.ports[1].delay_ns, 20_000);
        // Flags beat the file.
        let s = resolve(&args(&["--config", f.to_str().unwrap(), "--rate", "1gbit"])).unwrap();
        assert_eq!(s.ports[0].port.rate, Rate::gbit(1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn diffecn_defaults_to_per_flow_queues_and_a_strict_temporary_queue() {
        let s = resolve(&args(&[
            "--ports", "a", "--aqm", "diffecn", "--rtt", "200us",
        ]))
        .unwrap();
        let p = &s.ports[0].port;
        assert_eq!(p.queues, 8);
        assert_eq!(p.sched.kind, crate::sched::SchedName::SpDwrr);
        let Classifier::Flow(f) = &p.classifier else {
            panic!("{:?}", p.classifier)
        };
        assert_eq!((f.temp_queue, f.idle_timeout_ns), (true, 300_000));
        let AqmConfig::DiffEcn(d) = &s.ports[0].aqm else {
            panic!()
        };
        // K = 0.17 · 1 Gbit/s · 200 µs, T = 1.5 · 200 µs.
        assert_eq!((d.k, d.period), (4_250, 300_000));
        let text = s.describe();
        assert!(
            text.contains("diffecn: mark at dequeue") && text.contains("K = 4250 B"),
            "{text}"
        );
        assert!(
            text.contains("classify flow: a queue per active flow"),
            "{text}"
        );
        // Options and the config file.
        let s = resolve(&args(&[
            "--ports",
            "a",
            "--aqm",
            "diffecn",
            "--queues",
            "32",
            "--classify",
            "flow,pass-limit=3000",
            "--aqm-opt",
            "k=10kb",
        ]))
        .unwrap();
        let Classifier::Flow(f) = &s.ports[0].port.classifier else {
            panic!()
        };
        assert_eq!((s.ports[0].port.queues, f.pass_limit_bytes), (32, 3000));
        let c = FileConfig::parse("classify = \"flow,temp=none\"\nsched = \"dwrr\"\n").unwrap();
        assert_eq!(c.classify.as_deref(), Some("flow,temp=none"));
        // Per-flow queues with another AQM (per-port DCTCP-ECN over them).
        let s = resolve(&args(&[
            "--ports",
            "a",
            "--classify",
            "flow",
            "--sched",
            "sp+dwrr",
            "--aqm",
            "dctcp",
        ]))
        .unwrap();
        assert!(matches!(s.ports[0].port.classifier, Classifier::Flow(_)));
        let e = |a: &[&str]| resolve(&args(a)).unwrap_err().to_string();
        assert!(
            e(&["--ports", "a", "--aqm", "diffecn", "--classify", "dscp"])
                .contains("--classify flow")
        );
        assert!(
            e(&["--ports", "a", "--aqm", "diffecn", "--sched", "dwrr"]).contains("--sched sp+dwrr")
        );
        assert!(e(&["--ports", "a", "--classify", "flow", "--sched", "wfq"])
            .contains("--sched sp+dwrr"));
        let s = resolve(&args(&["--ports", "a", "--classify", "flow"])).unwrap();
        assert_eq!(s.ports[0].port.sched.kind, crate::sched::SchedName::SpDwrr);
        let s = resolve(&args(&["--ports", "a", "--classify", "flow,temp=none"])).unwrap();
        assert_eq!(s.ports[0].port.sched.kind, crate::sched::SchedName::Dwrr);
        assert!(e(&["--ports", "a", "--classify", "flow,bogus=1"]).contains("--classify"));
        assert!(
            e(&["--ports", "a", "--aqm", "diffecn", "--aqm-opt", "period=0"]).contains("period")
        );
    }

    #[test]
    fn user_mistakes_get_advice() {
        let e = |a: &[&str]| resolve(&args(a)).unwrap_err().to_string();
        assert!(e(&[]).contains("--ports"));
        assert!(e(&["--ports", "a", "--rate", "1gigabit"]).contains("1gbit"));
        assert!(e(&["--ports", "a", "--buffer", "1000"]).contains("smaller than one"));
        assert!(e(&["--ports", "a", "--queues", "200"]).contains("1 to 128"));
        // Below one 1514-byte frame (+24 B) per second: 12304 bit/s.
        let slow = e(&["--ports", "a", "--rate", "12000bit"]);
        assert!(slow.contains("--rate") && slow.contains("12304"), "{slow}");
        let slow = e(&["--ports", "a,b", "--port-rate", "b=100bit"]);
        assert!(
            slow.contains("port b") && slow.contains("--port-rate"),
            "{slow}"
        );
        assert!(resolve(&args(&["--ports", "a", "--rate", "12304bit"])).is_ok());
        assert!(e(&["--ports", "a", "--duration", "0s"]).contains("--duration"));
        assert!(e(&["--ports", "a", "--frames", "0"]).contains("--frames"));
        assert!(
            e(&["--ports", "a", "--queues", "2", "--sched", "wfq", "--aqm", "mq-ecn"])
                .contains("round-robin")
        );
        assert!(e(&["--ports", "a", "--port-delay", "zz=5us"]).contains("not one of --ports"));
        assert!(e(&["--ports", "a", "--sched", "fifo"]).contains("sp"));
        assert!(e(&["--ports", "a", "--aqm", "pie"]).contains("pie"));
        assert!(e(&[
            "--ports",
            "a",
            "--timeseries",
            "x.csv",
            "--ts-interval",
            "10us"
        ])
        .contains("100us"));
    }

    #[test]
    fn settings_errors_name_the_key() {
        assert_eq!(rate_setting("rate", "unlimited").unwrap().bps(), 0);
        let e = rate_setting("rate", "1 gigabit").unwrap_err().to_string();
        assert!(e.starts_with("rate:") && e.contains("1gbit"), "{e}");
        assert!(size_setting("buffer", "big")
            .unwrap_err()
            .to_string()
            .contains("96kb"));
    }

    #[test]
    fn fidelity_guard_and_strict_shaper_defaults() {
        let parse = |extra: &[&str]| {
            let mut v = vec!["--ports", "a,b"];
            v.extend_from_slice(extra);
            resolve(&args(&v))
        };
        let s = parse(&[]).unwrap();
        assert_eq!(
            s.ports[0].port.catchup_ns, 0,
            "the prototype's strict bucket"
        );
        assert_eq!(s.guard, crate::fidelity::Thresholds::default());
        assert!(
            s.describe().contains("2500 B, +24 B/frame, strict"),
            "{}",
            s.describe()
        );
        assert!(s
            .describe()
            .contains("fidelity guard: not faithful if a port loses > 1.0 %"));
        let s = parse(&[
            "--catchup",
            "1ms",
            "--max-lost",
            "2.5%",
            "--max-stall",
            "10ms",
            "--max-stalled",
            "0.05",
        ])
        .unwrap();
        assert_eq!(s.ports[0].port.catchup_ns, 1_000_000);
        assert!(s.describe().contains("catch-up 1ms"), "{}", s.describe());
        assert_eq!(parse(&[]).unwrap().poll, crate::poll::PollMode::Busy);
        let a = parse(&["--poll", "adaptive"]).unwrap();
        assert_eq!(a.poll, crate::poll::PollMode::Adaptive);
        assert!(a.describe().contains("--poll adaptive"), "{}", a.describe());
        let e = parse(&["--poll", "lazy"]).unwrap_err().to_string();
        assert!(e.contains("--poll") && e.contains("adaptive"), "{e}");
        assert_eq!(
            (s.guard.max_lost, s.guard.max_stall_ns, s.guard.max_stalled),
            (0.025, 10_000_000, 0.05)
        );
        let e = parse(&["--max-lost", "150%"]).unwrap_err().to_string();
        assert!(e.contains("--max-lost") && e.contains("1%"), "{e}");
        let e = parse(&["--max-stall", "soon"]).unwrap_err().to_string();
        assert!(e.starts_with("max-stall:"), "{e}");
    }

    #[test]
    fn ingress_rate_is_off_by_default_and_line_follows_each_port() {
        let parse = |extra: &[&str]| {
            let mut v = vec!["--ports", "a,b", "--rate", "500mbit"];
            v.extend_from_slice(extra);
            resolve(&args(&v))
        };
        let s = parse(&[]).unwrap();
        assert!(s.ports.iter().all(|p| p.ingress_rate.is_none()));
        assert!(!s.describe().contains("ingress:"));
        let s = parse(&["--ingress-rate", "line", "--port-rate", "b=100mbit"]).unwrap();
        assert_eq!(s.ports[0].ingress_rate, Some(Rate::mbit(500)));
        assert_eq!(s.ports[1].ingress_rate, Some(Rate::mbit(100)));
        assert_eq!(s.ingress_limit, crate::ingress::DEFAULT_LIMIT_PKTS);
        assert!(
            s.describe()
                .contains("at most at 500mbit (emulated host NIC"),
            "{}",
            s.describe()
        );
        let s = parse(&["--ingress-rate", "1gbit", "--ingress-limit", "64"]).unwrap();
        assert_eq!(s.ports[1].ingress_rate, Some(Rate::gbit(1)));
        assert_eq!(s.ingress_limit, 64);
        let e = parse(&["--ingress-rate", "fast"]).unwrap_err().to_string();
        assert!(e.contains("--ingress-rate") && e.contains("line"), "{e}");
        let e = parse(&["--ingress-rate", "line", "--ingress-limit", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--ingress-limit 0"), "{e}");
        let f = FileConfig::parse("ingress_rate = \"line\"\ningress_limit = 10").unwrap();
        assert_eq!(f.ingress_rate.as_deref(), Some("line"));
        assert_eq!(f.ingress_limit, Some(10));
    }
}

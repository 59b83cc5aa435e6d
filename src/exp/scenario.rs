//! The scenario file: one TOML document describing the topology, the switch,
//! the traffic and the sweep (`scenarios/README.md` documents every key).
//!
//! Parsing rejects unknown keys (a typo must not silently fall back to a
//! default); [`Scenario::validate`] checks everything that can be checked
//! without root, so a mistake costs seconds, not a half-finished sweep.
//! [`Scenario::combos`] expands the sweep in the order it runs: repeat ×
//! sweep value × AQM, AQMs innermost so that the schemes compared at one
//! load run close together in time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::aqm::config::AQM_NAMES;
use crate::exp::kinds;
pub use crate::exp::kinds::{
    FlowCount, IncastSpec, PingSpec, StaticFlow, StaticSpec, TrafficSpec, WorkloadSpec,
};
use crate::exp::placement::{self, Placement};
pub use crate::exp::sweep::SweepValue;
use crate::fabric::FabricDesc;
use crate::sched::SchedName;
use crate::timebase::Dilation;
use crate::topo::RxCpus;
use crate::units::{parse_duration, parse_rate, parse_size};

/// What is wrong with a scenario, phrased so the user knows what to change.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read scenario {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// Not valid TOML, or a key the format does not have.
    #[error("scenario {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message (line, column, expected keys).
        message: String,
    },
    /// Parsed, but inconsistent.
    #[error("scenario: {0}")]
    Invalid(String),
}

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name used in the results directory (default: the file stem).
    #[serde(default)]
    pub name: Option<String>,
    /// Free text, copied to the manifest.
    #[serde(default)]
    pub description: Option<String>,
    /// Runs of every combination (≥ 1).
    #[serde(default = "one")]
    pub repeat: u32,
    /// AQM the FCT plots are normalised to; must be one of `switch.aqm`.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Seed of the flow schedules; repeat `r` uses `seed + r`.
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Time dilation D (`dilation = 4`; default 1, real time): every rate
    /// and time in the scenario is emulated; the switch, the hosts' timers
    /// and the traffic generators all run D times slower, the wire at
    /// rate / D (`softswitch-exp run --dilation` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dilation: Option<f64>,
    /// A negative control only: the hosts' timers at this D_H while the
    /// switch and the generators run at `dilation` (`softswitch-exp run
    /// --host-dilation D_H`). Absent: the run's D, which is the emulated
    /// experiment; any other value is not, and such runs neither merge
    /// with normal ones nor share their label in `report --compare`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_dilation: Option<f64>,
    /// Host namespaces.
    pub topology: TopologySpec,
    /// Switch settings; `aqm` is a sweep list.
    pub switch: SwitchSpec,
    /// Several switches instead of one (`[fabric]`): the keys of a
    /// `softswitch --topology` file, under `fabric.` (`[fabric.leaf_spine]`,
    /// `[[fabric.switch]]`, `[[fabric.link]]`, `[fabric.defaults]`, `seed`,
    /// `subnet`). The hosts are the fabric's (`topology.hosts` is its
    /// highest host number); every port's rate, delay and buffer come from
    /// it, and `switch.rate` is only what the loads are relative to (the
    /// host links' rate). `switch.aqm` runs on every port the fabric names
    /// no AQM for. The results count marks, drops and queues per hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<toml::Table>,
    /// What to send.
    pub traffic: TrafficSpec,
    /// Fidelity guard limits passed to the switch (`--max-lost` ...); a
    /// combination beyond them is marked not faithful in every output.
    #[serde(default)]
    pub fidelity: FidelitySpec,
    /// How `softswitch-exp --rate` scales this scenario (`[scale]`).
    #[serde(default)]
    pub scale: ScaleSpec,
    /// How repeats are summarised and schemes compared (`[stats]`).
    #[serde(default)]
    pub stats: StatsSpec,
    /// What the switch saw, captured in every combination (`[capture]`).
    #[serde(default, skip_serializing_if = "CaptureSpec::is_default")]
    pub capture: CaptureSpec,
}

/// `[capture]`: the switch's own capture (`softswitch --pcap`) in every
/// combination, into that combination's directory (`<dir>/pcap/`: pcapng
/// per port and direction, `crate::capture`), bounded per file as the
/// switch's `--pcap-max-mb` bounds it. `softswitch-exp run --pcap` turns it
/// on for a run of any scenario, with these bounds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CaptureSpec {
    /// Capture (default false).
    #[serde(default)]
    pub pcap: bool,
    /// Bytes of each frame kept, as `softswitch --pcap-snaplen` (default
    /// `capture::DEFAULT_SNAPLEN`, every header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcap_snaplen: Option<u32>,
    /// Bound of each capture file in MB, as `softswitch --pcap-max-mb`
    /// (default `capture::DEFAULT_MAX_MB`); packets beyond it are counted,
    /// not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcap_max_mb: Option<f64>,
}

impl CaptureSpec {
    fn is_default(&self) -> bool {
        *self == CaptureSpec::default()
    }

    /// Bytes of each frame kept.
    pub fn snaplen(&self) -> u32 {
        self.pcap_snaplen.unwrap_or(crate::capture::DEFAULT_SNAPLEN)
    }

    /// Bound of each file, MB.
    pub fn max_mb(&self) -> f64 {
        self.pcap_max_mb
            .unwrap_or(crate::capture::DEFAULT_MAX_MB as f64)
    }

    /// The switch's flags that capture into `dir` with these bounds.
    pub fn switch_args(&self, dir: &Path) -> Vec<String> {
        vec![
            "--pcap".into(),
            dir.display().to_string(),
            "--pcap-snaplen".into(),
            self.snaplen().to_string(),
            "--pcap-max-mb".into(),
            self.max_mb().to_string(),
        ]
    }
}

/// `[stats]`: the interval of a number across repeats and the test that
/// compares a scheme with the baseline (`exp::stats` describes each).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StatsSpec {
    /// `"t"` (default): Student's t interval of the mean; `"bootstrap"`: a
    /// seeded percentile bootstrap of the mean (needs ≥ 10 repeats to cover).
    #[serde(default)]
    pub interval: IntervalMethod,
    /// `"paired"` (default): every scheme ran the same flow schedules at
    /// repeat r (the seed depends on r only), so a scheme is compared with
    /// the baseline per seed — the paired t-test on per-seed log-ratios
    /// (differences where a value is 0); `"wilcoxon"`: Wilcoxon's
    /// signed-rank test on the same per-seed values (distribution-free;
    /// needs ≥ 6 pairs to reach p < 0.05); `"welch"`: Welch's t-test and
    /// `"mann-whitney"`: Mann–Whitney U, for samples that are not paired
    /// (needs ≥ 4 repeats a side to reach p < 0.05).
    #[serde(default)]
    pub test: TestMethod,
    /// Bootstrap resamples.
    #[serde(default = "default_resamples")]
    pub resamples: usize,
}

impl Default for StatsSpec {
    fn default() -> Self {
        StatsSpec {
            interval: IntervalMethod::default(),
            test: TestMethod::default(),
            resamples: default_resamples(),
        }
    }
}

fn default_resamples() -> usize {
    10_000
}

/// See [`StatsSpec::interval`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IntervalMethod {
    /// Student's t.
    #[default]
    T,
    /// Seeded percentile bootstrap.
    Bootstrap,
}

/// See [`StatsSpec::test`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TestMethod {
    /// The paired t-test per seed (log-ratios, or differences where a
    /// value is 0).
    #[default]
    Paired,
    /// Wilcoxon's signed-rank test per seed.
    Wilcoxon,
    /// Welch's two-sample t-test (unpaired).
    Welch,
    /// Mann–Whitney U (unpaired).
    MannWhitney,
}

impl TestMethod {
    /// Compares per seed.
    pub fn is_paired(self) -> bool {
        matches!(self, TestMethod::Paired | TestMethod::Wilcoxon)
    }
}

impl std::str::FromStr for TestMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "paired" => Ok(TestMethod::Paired),
            "wilcoxon" => Ok(TestMethod::Wilcoxon),
            "welch" => Ok(TestMethod::Welch),
            "mann-whitney" => Ok(TestMethod::MannWhitney),
            other => Err(format!(
                "unknown test `{other}`: paired, wilcoxon, welch or mann-whitney"
            )),
        }
    }
}

/// `[scale]`: what a rate scaling (`softswitch-exp run --rate`, `calibrate`)
/// does with the buffer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScaleSpec {
    /// `"rate"` (default): the buffer scales with the rate, keeping its
    /// drain time; `"keep"`: the buffer keeps its size in bytes (frames) —
    /// for incast, which is decided by the first window in frames against
    /// the buffer in frames.
    #[serde(default)]
    pub buffer: BufferScaling,
}

/// See [`ScaleSpec::buffer`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BufferScaling {
    /// Scale with the rate.
    #[default]
    Rate,
    /// Keep its size.
    Keep,
}

/// `[fidelity]`: the guard's limits (the switch's defaults when absent).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FidelitySpec {
    /// Largest share of backlogged link time a port may lose (`"1%"`).
    #[serde(default)]
    pub max_lost: Option<String>,
    /// Longest single data-path stall while frames wait (`"5ms"`).
    #[serde(default)]
    pub max_stall: Option<String>,
    /// Largest share of the run spent in stalls (`"2%"`).
    #[serde(default)]
    pub max_stalled: Option<String>,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}

/// `[topology]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Number of host namespaces `h1..hN`.
    pub hosts: usize,
    /// Minimum RTO on the hosts' route, e.g. `"5ms"` (default: kernel's 200 ms).
    #[serde(default)]
    pub rto_min: Option<String>,
    /// Congestion control of the hosts (default `dctcp`).
    #[serde(default)]
    pub cc: Option<String>,
    /// ACK every segment (`quickack 1` on the hosts' route), the per-packet
    /// ACKs R-AQM assumes (R-AQM paper §IV-F). Default false.
    #[serde(default)]
    pub quickack: bool,
    /// Initial congestion window of the hosts, segments (`initcwnd` on
    /// their route; default: the kernel's 10). R-AQM's ns-3 hosts use 1.
    #[serde(default)]
    pub initcwnd: Option<u32>,
    /// Most segments per GSO packet on the hosts' veths (`topo up
    /// --gso-segs`); 1 = segment-by-segment, ACK-clocked senders as in a
    /// simulator, instead of Linux's ~1 ms bursts. Default: the kernel's.
    #[serde(default)]
    pub gso_segs: Option<u32>,
    /// The senders pace with the kernel's TCP pacing (`softswitch-tg server
    /// --tcp-pacing`: 1.2 × cwnd / srtt), as hosts behind `fq` do. It
    /// spaces GSO packets; with `gso_segs = 1` it spaces segments. Default
    /// false (plain Linux senders).
    #[serde(default)]
    pub tcp_pacing: bool,
    /// Which CPUs run the hosts' receive processing (`topo up --rps`):
    /// `"off"` (default) keeps Linux's; `"auto"` steers it to every CPU but
    /// the last and pins the switch to the last (`--cpu last`), so that a
    /// tx kick does not run the receiving host's stack on the switch's CPU
    /// — an option with a price: a sender's ACKs are then processed in
    /// batches and it bursts (BENCHMARKS.md, "The hosts' receive processing
    /// off the switch's CPU"); a CPU list (`"0"`, `"0-2"`) steers there and
    /// leaves the switch unpinned (pin it with `extra_args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<String>,
    /// Extra one-way delay on the switch port towards a host, e.g.
    /// `{ h1 = "20us", h5 = "100us" }`, for RTT variation.
    #[serde(default)]
    pub delay: BTreeMap<String, String>,
    /// The emulated base RTT between the hosts that exchange traffic, e.g.
    /// `"250us"`, held at every D: before the traffic the runner measures
    /// the hosts' own round trip h through the switch (ping, no delay
    /// added, at the run's D), and every port gets the one-way delay
    /// (base_rtt − h / D) / 2 (recorded in manifest.json's `base_rtt`). A
    /// fixed `delay` compensates the hosts' latency only at D = 1, since
    /// their real µs shrink by D in emulated time. Not with `delay`, a
    /// fabric, or `--delay` in `switch.extra_args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rtt: Option<String>,
    /// More sysctls in every host's namespace, set after the topology's
    /// own, e.g. `{ "net.ipv4.tcp_early_retrans" = 0 }` (Linux's tail-loss
    /// probe off: its 2 ms floor is not stretched by time dilation). Only
    /// `net.*` keys; values are integers, strings or booleans (1 / 0).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, toml::Value>,
}

impl TopologySpec {
    /// `sysctl` as (key, value) strings, checked.
    pub fn sysctls(&self) -> Result<Vec<(String, String)>, ScenarioError> {
        self.sysctl
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Boolean(b) => u8::from(*b).to_string(),
                    other => {
                        return Err(inv(format!(
                        "topology.sysctl.\"{k}\" = {other}: give an integer, a string or a boolean"
                    )))
                    }
                };
                crate::topo::check_sysctl(k, &v).map_err(|e| inv(format!("topology.{e}")))?;
                Ok((k.clone(), v))
            })
            .collect()
    }
}

/// `[switch]`: the sweep list of AQMs and their per-AQM options, and
/// every other key a key of the switch's own config file — the fields of
/// [`crate::config::Options`], the one declaration of the switch's
/// settings (`rate`, `buffer`, `queues`, `sched`, `quantum`, `classify`,
/// `ingress_rate`, `catchup`, …; `softswitch --help` lists them, `_` for
/// `-`). The runner writes them into the switch's config file of the run
/// ([`switch_config_file`](crate::exp::runner::switch_config_file)), so a
/// setting the switch gains is a scenario key with no change here.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct SwitchSpec {
    /// AQMs to compare (sweep list).
    pub aqm: Vec<String>,
    /// Per-AQM parameters: `[switch.aqm_opts.tcn] threshold = "200us"` →
    /// `--aqm-opt threshold=200us` when that AQM runs.
    #[serde(default)]
    pub aqm_opts: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// Any further switch flags, appended verbatim.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Further switch flags for one entry of `aqm` only:
    /// `[switch.variant_args] "tcn@scfq" = ["--wfq-vtime", "scfq"]`.
    #[serde(default)]
    pub variant_args: BTreeMap<String, Vec<String>>,
    /// Every other key: the switch's own settings, as its config file
    /// writes them (checked against [`crate::config::Options`] by
    /// [`Scenario::validate`]).
    #[serde(flatten)]
    pub settings: SwitchSettings,
}

/// The scenario's switch settings: keys of the switch's config file.
/// A `null` (a manifest written when `[switch]` had fields of its own,
/// `"buffer": null`) is an absent key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchSettings(pub toml::Table);

impl Serialize for SwitchSettings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SwitchSettings {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, Option<toml::Value>>::deserialize(d)?;
        Ok(SwitchSettings(
            m.into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect(),
        ))
    }
}

/// Keys of the switch's config file that the runner sets itself for every
/// combination, with where a scenario says what it wants instead.
const RUNNER_KEYS: [(&str, &str); 11] = [
    ("ports", "the runner names the hosts' interfaces"),
    ("topology", "a fabric is `[fabric]`"),
    ("switches", "a split fabric is `[fabric] parts`"),
    ("link_ifaces", "a split fabric is `[fabric] parts`"),
    ("stats_socket", "the runner gives every switch its own"),
    (
        "dilation",
        "D is the scenario's top-level `dilation` (or run --dilation)",
    ),
    ("pcap", "capture is `[capture]` (or run --pcap)"),
    ("pcap_ports", "capture is `[capture]`"),
    ("pcap_snaplen", "capture is `[capture] snaplen`"),
    ("pcap_max_mb", "capture is `[capture] max_mb`"),
    (
        "port",
        "per-host delays are `topology.delay`; interfaces are the runner's",
    ),
];

impl SwitchSpec {
    /// The settings as the switch reads them ([`crate::config::Options`]);
    /// the default for a scenario that [`Scenario::validate`] refused.
    pub fn options(&self) -> crate::config::Options {
        self.parsed().unwrap_or_default()
    }

    fn parsed(&self) -> Result<crate::config::Options, String> {
        crate::config::Options::deserialize(toml::Value::Table(self.settings.0.clone()))
            .map_err(|e| e.to_string())
    }

    /// Link rate of every port (default 1gbit).
    pub fn rate(&self) -> String {
        self.options()
            .rate
            .unwrap_or_else(|| crate::config::DEFAULT_RATE.into())
    }

    /// Sets the link rate (`softswitch-exp --rate` scaling).
    pub fn set_rate(&mut self, rate: String) {
        self.settings
            .0
            .insert("rate".into(), toml::Value::String(rate));
    }

    /// Shared buffer per port (the switch's default when absent).
    pub fn buffer(&self) -> Option<String> {
        self.options().buffer
    }

    /// Sets (or, with `None`, removes) the shared buffer per port.
    pub fn set_buffer(&mut self, buffer: Option<String>) {
        match buffer {
            Some(b) => self
                .settings
                .0
                .insert("buffer".into(), toml::Value::String(b)),
            None => self.settings.0.remove("buffer"),
        };
    }

    /// Base RTT the AQM defaults scale to (default 250us).
    pub fn rtt(&self) -> String {
        self.options()
            .rtt
            .unwrap_or_else(|| crate::config::DEFAULT_RTT.into())
    }

    /// Queues per port (default 1: a scenario's port has one queue unless
    /// it says more, whatever the AQM's own default).
    pub fn queues(&self) -> u32 {
        self.options().queues.map_or(1, |q| q as u32)
    }

    /// The scheduler, if the scenario names one.
    pub fn sched(&self) -> Option<String> {
        self.options().sched
    }

    /// The switch's config file for a combination: the scenario's settings
    /// with the scenario's defaults (`rate`, `rtt`, `queues = 1`) filled
    /// in; `fabric`: without `rate` (the fabric gives every port its rate,
    /// and `switch.rate` is what the loads are relative to).
    pub fn config_file_text(&self, fabric: bool) -> String {
        let mut t = self.settings.0.clone();
        t.insert("rate".into(), toml::Value::String(self.rate()));
        t.insert("rtt".into(), toml::Value::String(self.rtt()));
        t.insert("queues".into(), toml::Value::Integer(self.queues().into()));
        if fabric {
            t.remove("rate");
        }
        toml::to_string(&t).unwrap_or_default()
    }

    /// The settings are keys of the switch's config file, and none is one
    /// the runner sets itself.
    fn check_settings(&self) -> Result<(), ScenarioError> {
        for (key, why) in RUNNER_KEYS {
            if self.settings.0.contains_key(key) {
                return Err(inv(format!(
                    "switch.{key}: set by the runner for every combination ({why})"
                )));
            }
        }
        self.parsed().map(|_| ()).map_err(|e| {
            inv(format!(
                "[switch]: {} — every key of [switch] besides aqm, aqm_opts, extra_args and \
                 variant_args is a key of the switch's config file (`softswitch --help`, `_` \
                 for `-`)",
                e.trim()
            ))
        })
    }
}

/// One run of the switch: an AQM, a sweep value, a repetition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Combo {
    /// Position in the run, from 0.
    pub index: usize,
    /// The AQM.
    pub aqm: String,
    /// The swept value.
    pub sweep: SweepValue,
    /// Repetition, from 0.
    pub repeat: u32,
    /// Results subdirectory, e.g. `tcn-load0.50-r0`.
    pub dir: String,
}

impl Scenario {
    /// Parses TOML text (unknown keys are errors).
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ScenarioError> {
        toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// Reads, parses and validates a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let s = Self::from_toml(&text, path)?;
        s.validate()?;
        Ok(s)
    }

    /// Which CPUs run the hosts' receive processing (`topology.rps`,
    /// default Linux's own).
    pub fn rps(&self) -> RxCpus {
        self.topology
            .rps
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or_default()
    }

    /// The time dilation D the scenario runs at (1 when absent; `validate`
    /// rejects values outside `1..=1000`).
    pub fn dilation(&self) -> Dilation {
        self.dilation
            .and_then(|d| Dilation::new(d).ok())
            .unwrap_or_default()
    }

    /// The D of the hosts' timers: `host_dilation` (a negative control),
    /// else the run's D.
    pub fn host_dilation(&self) -> Dilation {
        self.host_dilation
            .and_then(|d| Dilation::new(d).ok())
            .unwrap_or_else(|| self.dilation())
    }

    /// Whether the hosts run at another D than the switch and the
    /// generators (a negative control, not the emulated experiment).
    pub fn hosts_apart(&self) -> bool {
        self.host_dilation() != self.dilation()
    }

    /// `topology.base_rtt`, parsed (validated before a run).
    pub fn base_rtt(&self) -> Option<Duration> {
        let b = self.topology.base_rtt.as_deref()?;
        parse_duration(b).ok().map(Duration::from_nanos)
    }

    /// The name for results: `name`, else the file stem.
    pub fn name_or(&self, path: &Path) -> String {
        self.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into())
        })
    }

    /// Checks everything that needs no root; the first problem found.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        if self.repeat == 0 {
            return Err(inv("repeat = 0 — use at least 1".into()));
        }
        if self.stats.resamples == 0 {
            return Err(inv("stats.resamples = 0 — use at least 1000".into()));
        }
        if let Some(d) = self.dilation {
            Dilation::new(d).map_err(|e| inv(format!("dilation = {d}: {e}")))?;
        }
        if let Some(d) = self.host_dilation {
            Dilation::new(d).map_err(|e| inv(format!("host_dilation = {d}: {e}")))?;
        }
        self.validate_topology()?;
        self.validate_fabric()?;
        self.validate_switch()?;
        self.validate_fidelity()?;
        self.validate_capture()?;
        self.traffic
            .kind()
            .validate(self.topology.hosts)
            .map_err(ScenarioError::Invalid)
    }

    /// `[topology]`.
    fn validate_topology(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        if t.hosts < 2 {
            return Err(inv(format!(
                "topology.hosts = {} — at least 2 hosts are needed (a sender and a receiver)",
                t.hosts
            )));
        }
        if let Some(r) = &t.rto_min {
            check_duration("topology.rto_min", r)?;
        }
        t.sysctls()?;
        if let Some(w) = t.initcwnd {
            crate::topo::check_initcwnd(w).map_err(|e| inv(format!("topology.{e}")))?;
        }
        if let Some(n) = t.gso_segs {
            crate::topo::check_gso_segs(n).map_err(|e| inv(format!("topology.{e}")))?;
        }
        if let Some(r) = &t.rps {
            r.parse::<RxCpus>()
                .map_err(|e| inv(format!("topology.{e}")))?;
        }
        for (host, d) in &t.delay {
            self.host_key(host)?;
            check_duration(&format!("topology.delay.{host}"), d)?;
        }
        if let Some(b) = &t.base_rtt {
            self.validate_base_rtt(b)?;
        }
        Ok(())
    }

    /// `topology.base_rtt`: a time, and nothing else setting the ports' delay.
    fn validate_base_rtt(&self, b: &str) -> Result<(), ScenarioError> {
        check_duration("topology.base_rtt", b)?;
        if !self.topology.delay.is_empty() {
            return Err(inv(format!(
                "topology.base_rtt = \"{b}\" sets every port's delay itself (what the hosts' \
                 measured round trip leaves of {b}); remove topology.delay, or base_rtt"
            )));
        }
        if self.fabric.is_some() {
            return Err(inv(
                "topology.base_rtt with [fabric]: a fabric sets its links' delays; use one \
                 switch, or set the fabric's delays"
                    .into(),
            ));
        }
        if let Some(f) = self.switch.extra_args.iter().find(|a| {
            a.as_str() == "--delay" || a.starts_with("--delay=") || a.starts_with("--port-delay")
        }) {
            return Err(inv(format!(
                "topology.base_rtt with `{f}` in switch.extra_args: base_rtt sets the ports' \
                 delay; remove one of them"
            )));
        }
        Ok(())
    }

    /// `[fabric]`: a topology the switch reads, whose hosts are
    /// `topology.hosts`, and no per-port setting it would contradict.
    fn validate_fabric(&self) -> Result<(), ScenarioError> {
        let Some(desc) = self.fabric_desc()? else {
            return Ok(());
        };
        let highest = desc.hosts.iter().map(|h| h.index).max().unwrap_or(0);
        if self.topology.hosts != highest {
            return Err(inv(format!(
                "topology.hosts = {} but [fabric] has hosts up to h{highest}: set topology.hosts = {highest}",
                self.topology.hosts
            )));
        }
        if !self.topology.delay.is_empty() {
            return Err(inv(
                "topology.delay with [fabric]: set delays in the fabric (`delay` in \
                 [fabric.defaults], per link, or in a switch's host_link)"
                    .into(),
            ));
        }
        self.fabric_placement()?;
        Ok(())
    }

    /// `[fabric]` as the text of a `--topology` file (None: one switch):
    /// every key but `parts` and `machines`, which are the runner's.
    pub fn fabric_text(&self) -> Result<Option<String>, ScenarioError> {
        self.fabric
            .as_ref()
            .map(|t| {
                let mut t = t.clone();
                for k in placement::RUNNER_KEYS {
                    t.remove(k);
                }
                toml::to_string(&t).map_err(|e| inv(format!("[fabric]: {e}")))
            })
            .transpose()
    }

    /// `[fabric] parts` and `[fabric.machines]`: the fabric split over one
    /// process per part, and where each runs (None: one process runs the
    /// whole fabric). See [`crate::exp::placement`].
    pub fn fabric_placement(&self) -> Result<Option<Placement>, ScenarioError> {
        let (Some(table), Some(desc)) = (self.fabric.as_ref(), self.fabric_desc()?) else {
            return Ok(None);
        };
        placement::parse(table, &desc).map_err(inv)
    }

    /// The fabric `[fabric]` describes, read as the switch reads it.
    pub fn fabric_desc(&self) -> Result<Option<FabricDesc>, ScenarioError> {
        self.fabric_text()?
            .map(|t| FabricDesc::parse(&t).map_err(|e| inv(format!("[fabric]: {e}"))))
            .transpose()
    }

    /// `[switch]` and `baseline`.
    fn validate_switch(&self) -> Result<(), ScenarioError> {
        let sw = &self.switch;
        if sw.aqm.is_empty() {
            return Err(inv(
                "switch.aqm is empty — list at least one AQM, e.g. aqm = [\"dctcp\", \"tcn\"]"
                    .into(),
            ));
        }
        for a in &sw.aqm {
            check_aqm_entry(a)?;
        }
        if let Some(dup) = kinds::first_duplicate(&sw.aqm) {
            return Err(inv(format!("switch.aqm lists `{dup}` twice")));
        }
        for a in sw.aqm_opts.keys() {
            if !sw.aqm.contains(a) {
                return Err(inv(format!(
                    "switch.aqm_opts.{a}: `{a}` is not in switch.aqm ({}) — remove the table or add the AQM",
                    sw.aqm.join(", ")
                )));
            }
        }
        for a in sw.variant_args.keys() {
            if !sw.aqm.contains(a) {
                return Err(inv(format!(
                    "switch.variant_args.{a}: `{a}` is not in switch.aqm ({})",
                    sw.aqm.join(", ")
                )));
            }
        }
        if let Some(b) = &self.baseline {
            if !sw.aqm.contains(b) {
                return Err(inv(format!(
                    "baseline `{b}` is not in switch.aqm ({}) — the baseline must run too",
                    sw.aqm.join(", ")
                )));
            }
        }
        sw.check_settings()?;
        let rate = sw.rate();
        parse_rate(&rate).map_err(|e| inv(format!("switch.rate `{rate}`: {e}")))?;
        if let Some(b) = sw.buffer() {
            parse_size(&b).map_err(|e| inv(format!("switch.buffer `{b}`: {e}")))?;
        }
        check_duration("switch.rtt", &sw.rtt())?;
        let queues = sw.options().queues.unwrap_or(1);
        if !(1..=128).contains(&queues) {
            return Err(inv(format!("switch.queues = {queues} — must be 1..=128")));
        }
        self.validate_aqm_opts()?;
        if let Some(s) = &sw.sched() {
            if !SchedName::ALL.iter().any(|n| n.as_str() == s) {
                return Err(inv(format!(
                    "switch.sched: unknown scheduler `{s}` — choose sp, dwrr, wfq, sp+dwrr or sp+wfq"
                )));
            }
        }
        Ok(())
    }

    /// Every AQM's options as the switch will apply them — keys, values
    /// and units (a bare `threshold = 100` is refused here, not by the
    /// switch halfway through a sweep): `switch.aqm_opts`, and `--aqm-opt`
    /// / `--raqm-opt` pairs in `extra_args` and `variant_args`. The AQMs'
    /// checks of the whole (thresholds against each other) stay with the
    /// switch, which knows the port they run on.
    fn validate_aqm_opts(&self) -> Result<(), ScenarioError> {
        let sw = &self.switch;
        let env = crate::aqm::AqmEnv {
            rate: parse_rate(&sw.rate()).map_err(|e| inv(format!("switch.rate: {e}")))?,
            rtt_ns: parse_duration(&sw.rtt()).map_err(|e| inv(format!("switch.rtt: {e}")))?,
            num_queues: sw.queues() as usize,
            mtu_bytes: crate::config::MTU,
            quanta: None,
        };
        for a in &sw.aqm {
            let raqm = crate::raqm::parse_aqm_name(aqm_kind(a));
            let kind = match raqm {
                Some(forward) => forward.unwrap_or(crate::raqm::DEFAULT_FORWARD_AQM),
                None => aqm_kind(a),
            };
            let mut opts: Vec<(String, toml::Value)> = sw
                .aqm_opts
                .get(a)
                .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            let args: Vec<&String> = sw
                .extra_args
                .iter()
                .chain(sw.variant_args.get(a).into_iter().flatten())
                .collect();
            let pairs = |flag: &str| -> Vec<(String, toml::Value)> {
                args.windows(2)
                    .filter(|w| w[0] == flag)
                    .filter_map(|w| w[1].split_once('='))
                    .filter(|(k, _)| k.trim() != "help")
                    .map(|(k, v)| (k.trim().to_string(), crate::aqm::config::cli_value(v)))
                    .collect()
            };
            opts.extend(pairs("--aqm-opt"));
            crate::aqm::config::check_options(kind, &env, &opts)
                .map_err(|e| inv(format!("switch.aqm_opts.{a} (or its --aqm-opt): {e}")))?;
            let raqm_opts = pairs("--raqm-opt");
            if raqm.is_some() || !raqm_opts.is_empty() {
                crate::raqm::Config::for_link(env.rate, env.rtt_ns)
                    .check_overrides(&raqm_opts)
                    .map_err(|e| inv(format!("{a}: --raqm-opt: {e}")))?;
            }
        }
        Ok(())
    }

    /// `[capture]`: the bounds the switch accepts for `--pcap-snaplen` and
    /// `--pcap-max-mb` (`config::pcap`), checked whether or not `pcap` is
    /// on (`run --pcap` uses them).
    fn validate_capture(&self) -> Result<(), ScenarioError> {
        let c = &self.capture;
        if !(1..=65_535).contains(&c.snaplen()) {
            return Err(inv(format!(
                "capture.pcap_snaplen = {}: give 1 to 65535 bytes (256 keeps every header), as \
                 softswitch --pcap-snaplen",
                c.snaplen()
            )));
        }
        let min = crate::config::PcapSettings::MIN_MAX_MB;
        if !(c.max_mb().is_finite() && c.max_mb() >= min) {
            return Err(inv(format!(
                "capture.pcap_max_mb = {}: give a bound of at least {min} MB per file, as \
                 softswitch --pcap-max-mb",
                c.max_mb()
            )));
        }
        Ok(())
    }

    /// `[fidelity]`.
    fn validate_fidelity(&self) -> Result<(), ScenarioError> {
        for (k, v) in [
            ("fidelity.max_lost", &self.fidelity.max_lost),
            ("fidelity.max_stalled", &self.fidelity.max_stalled),
        ] {
            if let Some(v) = v {
                crate::config::share_setting(k, v).map_err(|e| inv(e.to_string()))?;
            }
        }
        if let Some(v) = &self.fidelity.max_stall {
            check_duration("fidelity.max_stall", v)?;
        }
        Ok(())
    }

    /// `"h3"` → 3, checked against the host count.
    pub fn host_key(&self, key: &str) -> Result<usize, ScenarioError> {
        let n = key
            .strip_prefix('h')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n >= 1 && n <= self.topology.hosts)
            .ok_or_else(|| {
                inv(format!(
                    "topology.delay: `{key}` is not a host — use h1..h{}",
                    self.topology.hosts
                ))
            })?;
        Ok(n)
    }

    /// The sweep values of the traffic kind.
    pub fn sweep_values(&self) -> Vec<SweepValue> {
        self.traffic.kind().sweep()
    }

    /// Every combination, in run order (repeat, sweep value, AQM).
    pub fn combos(&self) -> Vec<Combo> {
        self.combos_from(0)
    }

    /// The combinations with repeats numbered from `first_repeat` (a later
    /// run to be merged with an earlier one: new seeds, new directories).
    pub fn combos_from(&self, first_repeat: u32) -> Vec<Combo> {
        let mut out = Vec::new();
        for r in first_repeat..first_repeat + self.repeat {
            for v in self.sweep_values() {
                for aqm in &self.switch.aqm {
                    let tag = v.tag();
                    let dir = if tag.is_empty() {
                        format!("{aqm}-r{r}")
                    } else {
                        format!("{aqm}-{tag}-r{r}")
                    };
                    out.push(Combo {
                        index: out.len(),
                        aqm: aqm.clone(),
                        sweep: v,
                        repeat: r,
                        dir,
                    });
                }
            }
        }
        out
    }

    /// The seed of repeat `r`'s flow schedules (each client adds its index).
    pub fn repeat_seed(&self, r: u32) -> u64 {
        self.seed + r as u64 * 1000
    }

    /// The AQM plots are normalised to: `baseline`, else the first AQM.
    pub fn baseline_aqm(&self) -> &str {
        self.baseline.as_deref().unwrap_or(&self.switch.aqm[0])
    }
}

/// The AQM of a sweep entry: `dctcp@port` → `dctcp` (the label names a
/// variant with its own `[switch.aqm_opts."dctcp@port"]`).
pub fn aqm_kind(entry: &str) -> &str {
    entry.split_once('@').map_or(entry, |(k, _)| k)
}

fn inv(m: String) -> ScenarioError {
    ScenarioError::Invalid(m)
}

/// One entry of `switch.aqm`: a known AQM (or R-AQM with one), with an
/// optional `@label` of letters, digits, `-` and `_`.
fn check_aqm_entry(a: &str) -> Result<(), ScenarioError> {
    let kind = aqm_kind(a);
    // R-AQM with its forward AQM: `r-aqm` (dctcp) or `r-aqm+tcn`.
    let kind = match crate::raqm::parse_aqm_name(kind) {
        Some(forward) => forward.unwrap_or(crate::raqm::DEFAULT_FORWARD_AQM),
        None => kind,
    };
    if !AQM_NAMES.contains(&kind) {
        return Err(inv(format!(
            "switch.aqm: unknown AQM `{kind}` — choose from {}, or r-aqm / r-aqm+<forward AQM> (a variant is written kind@label, e.g. dctcp@port)",
            AQM_NAMES.join(", ")
        )));
    }
    let bad_label = a.split_once('@').is_some_and(|(_, l)| {
        l.is_empty()
            || !l
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    if bad_label {
        return Err(inv(format!(
            "switch.aqm: `{a}` — a variant label after @ uses letters, digits, - and _ only"
        )));
    }
    Ok(())
}

fn check_duration(what: &str, s: &str) -> Result<(), ScenarioError> {
    kinds::check_duration(what, s).map_err(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_loads_and_validates() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let sc = Scenario::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                sc.validate()
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 13, "only {n} scenarios found in {}", dir.display());
    }

    #[test]
    fn a_manifests_scenario_reads_back() {
        // `report` rebuilds a summary from the scenario in manifest.json.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                let sc = Scenario::load(&p).unwrap();
                let json = serde_json::to_value(&sc).unwrap();
                let back: Scenario =
                    serde_json::from_value(json).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                assert_eq!(back, sc, "{}", p.display());
            }
        }
        // Manifests written before counts serialised as numbers.
        let old: FlowCount = serde_json::from_str(r#"{"Fixed": 4}"#).unwrap();
        assert_eq!(old, FlowCount::Fixed(4));
        let old: FlowCount = serde_json::from_str(r#""Sweep""#).unwrap();
        assert_eq!(old, FlowCount::Sweep);
    }

    const WORKLOAD: &str = r#"
        name = "ws"
        baseline = "dctcp"
        [topology]
        hosts = 4
        rto_min = "5ms"
        delay = { h1 = "20us" }
        [switch]
        aqm = ["dctcp", "tcn"]
        queues = 4
        sched = "dwrr"
        [switch.aqm_opts.tcn]
        threshold = "200us"
        [traffic]
        kind = "workload"
        cdf = "cdf/websearch.txt"
        load = [0.3, 0.5, 0.7]
        flows = 100
        clients = [4]
        servers = [1, 2, 3]
        dscp = "0,1,2,3"
    "#;

    fn parse(s: &str) -> Result<Scenario, ScenarioError> {
        let sc = Scenario::from_toml(s, Path::new("t.toml"))?;
        sc.validate()?;
        Ok(sc)
    }

    fn err(s: &str) -> String {
        parse(s).expect_err("should be rejected").to_string()
    }

    #[test]
    fn host_sysctls_are_checked_and_kept_in_the_manifest() {
        let with = |table: &str| {
            WORKLOAD.replace(
                "rto_min = \"5ms\"",
                &format!("rto_min = \"5ms\"\nsysctl = {table}"),
            )
        };
        let sc = parse(&with(
            r#"{ "net.ipv4.tcp_early_retrans" = 0, "net.ipv4.tcp_rmem" = "4096 131072 6291456", "net.ipv4.tcp_sack" = true }"#,
        ))
        .unwrap();
        assert_eq!(
            sc.topology.sysctls().unwrap(),
            [
                ("net.ipv4.tcp_early_retrans".to_string(), "0".to_string()),
                (
                    "net.ipv4.tcp_rmem".to_string(),
                    "4096 131072 6291456".to_string()
                ),
                ("net.ipv4.tcp_sack".to_string(), "1".to_string()),
            ]
        );
        // The manifest's scenario keeps them; without, nothing is written.
        let v = serde_json::to_value(&sc).unwrap();
        assert_eq!(v["topology"]["sysctl"]["net.ipv4.tcp_early_retrans"], 0);
        let back: Scenario = serde_json::from_value(v).unwrap();
        assert_eq!(
            back.topology.sysctls().unwrap(),
            sc.topology.sysctls().unwrap()
        );
        let plain = serde_json::to_value(parse(WORKLOAD).unwrap()).unwrap();
        assert!(plain["topology"].get("sysctl").is_none());
        let e = err(&with(r#"{ "kernel.hz" = 100 }"#));
        assert!(
            e.contains("topology.sysctl `kernel.hz`: only `net.*` keys"),
            "{e}"
        );
        let e = err(&with(r#"{ "net.ipv4.tcp_ecn" = [1] }"#));
        assert!(e.contains("give an integer, a string or a boolean"), "{e}");
    }

    #[test]
    fn dilation_is_a_top_level_key_checked_and_one_by_default() {
        let sc = parse(WORKLOAD).unwrap();
        assert_eq!(sc.dilation, None);
        assert!(sc.dilation().is_none());
        // Absent, it is not written either: a D = 1 manifest is unchanged.
        assert!(serde_json::to_value(&sc).unwrap().get("dilation").is_none());
        let text = format!("dilation = 4\n{WORKLOAD}");
        let sc = parse(&text).unwrap();
        assert_eq!(sc.dilation().factor(), 4.0);
        let back: Scenario = serde_json::from_value(serde_json::to_value(&sc).unwrap()).unwrap();
        assert_eq!(
            back.dilation().factor(),
            4.0,
            "the manifest's scenario keeps D"
        );
        assert_eq!(
            parse(&format!("dilation = 2.5\n{WORKLOAD}"))
                .unwrap()
                .dilation()
                .factor(),
            2.5
        );
        for bad in ["0.5", "0", "-4", "5000"] {
            let e = err(&format!("dilation = {bad}\n{WORKLOAD}"));
            assert!(
                e.contains(&format!("dilation = {bad}")) && e.contains("1..=1000"),
                "{bad}: {e}"
            );
        }
        let e = err(&format!("dilation = \"fast\"\n{WORKLOAD}"));
        assert!(e.contains("dilation"), "{e}");
        // A table is no place for it: run-wide settings are top-level.
        let e = err(&WORKLOAD.replace("[switch]\n", "[switch]\n        dilation = 4\n"));
        assert!(e.contains("switch.dilation: set by the runner"), "{e}");
        assert!(e.contains("top-level `dilation`"), "{e}");
    }

    #[test]
    fn workload_parses_and_expands() {
        let s = parse(WORKLOAD).unwrap();
        let c = s.combos();
        assert_eq!(c.len(), 6);
        // AQMs innermost, loads next.
        assert_eq!(c[0].aqm, "dctcp");
        assert_eq!(c[1].aqm, "tcn");
        assert_eq!(c[1].sweep, SweepValue::Load(0.3));
        assert_eq!(c[2].sweep, SweepValue::Load(0.5));
        assert_eq!(c[5].dir, "tcn-load0.70-r0");
        assert!(c.iter().enumerate().all(|(i, c)| c.index == i));
        assert_eq!(s.baseline_aqm(), "dctcp");
        let TrafficSpec::Workload(w) = &s.traffic else {
            panic!()
        };
        assert_eq!(w.flows_for(false), 100);
        assert_eq!(w.flows_for(true), 20);
    }

    #[test]
    fn repeat_and_static_expansion() {
        let s = parse(
            r#"
            repeat = 2
            [topology]
            hosts = 3
            [switch]
            aqm = ["dctcp", "tcn"]
            [traffic]
            kind = "static"
            duration = "10s"
            flows = [{ server = 1, client = 3, dscp = 0 }, { server = 2, client = 3, dscp = 1 }]
        "#,
        )
        .unwrap();
        let c = s.combos();
        assert_eq!(c.len(), 4);
        assert_eq!(c[3].dir, "tcn-r1");
        assert_eq!(c[2].repeat, 1);
        let TrafficSpec::Static(st) = &s.traffic else {
            panic!()
        };
        assert_eq!(st.duration_for(true), Duration::from_secs(2));
        assert_eq!(st.duration_for(false), Duration::from_secs(10));
    }

    /// A quick run keeps the order of a static scenario's events: flow and
    /// ping starts shrink with the run (a ping at 6 s of 12 s would
    /// otherwise start after a 4 s quick run ended, as TCN Fig. 5's did).
    #[test]
    fn quick_starts_shrink_with_the_run() {
        let s = parse(
            r#"
            [topology]
            hosts = 4
            [switch]
            aqm = ["tcn"]
            rate = "1gbit"
            [traffic]
            kind = "static"
            duration = "12s"
            quick_duration = "4s"
            flows = [{ server = 1, client = 4 }, { server = 3, client = 4, start = "4s" }]
            [traffic.ping]
            from = 3
            to = 4
            start = "6s"
        "#,
        )
        .unwrap();
        let TrafficSpec::Static(st) = &s.traffic else {
            panic!()
        };
        let ping = st.ping.as_ref().and_then(|p| p.start.as_deref()).unwrap();
        assert_eq!(st.start_for(ping, false), Duration::from_secs(6));
        assert_eq!(st.start_for(ping, true), Duration::from_secs(2));
        let flow = st.flows[1].start.as_deref().unwrap();
        assert_eq!(st.start_for(flow, false), Duration::from_secs(4));
        let q = st.start_for(flow, true);
        assert!(
            q > Duration::from_millis(1333) && q < Duration::from_millis(1334),
            "{q:?}"
        );
        assert!(q < st.duration_for(true));
    }

    #[test]
    fn incast_fanin_expansion() {
        let s = parse(
            r#"
            [topology]
            hosts = 9
            [switch]
            aqm = ["tcn"]
            [traffic]
            kind = "incast"
            receiver = 9
            servers = [1, 2, 3, 4, 5, 6, 7, 8]
            fanin = [2, 4, 8]
            size = "64kb"
        "#,
        )
        .unwrap();
        let v: Vec<_> = s.combos().iter().map(|c| c.sweep).collect();
        assert_eq!(
            v,
            [
                SweepValue::Fanin(2),
                SweepValue::Fanin(4),
                SweepValue::Fanin(8)
            ]
        );
    }

    #[test]
    fn frames_only_when_the_scenario_sets_them() {
        // The switch sizes its UMEM from its ports, buffers and wires itself
        // (`dataplane::frames_needed`); its config file names only what the
        // scenario asks for.
        let frames = |sw: &SwitchSpec| {
            crate::config::Options::parse(&sw.config_file_text(false))
                .unwrap()
                .frames
        };
        let s = parse(WORKLOAD).unwrap();
        assert_eq!(frames(&s.switch), None, "the switch sizes its UMEM itself");
        let mut sw = s.switch.clone();
        sw.settings
            .0
            .insert("frames".into(), toml::Value::Integer(8192));
        assert_eq!(frames(&sw), Some(8192));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err(&WORKLOAD.replace("queues = 4", "queus = 4"));
        assert!(e.contains("queus"), "{e}");
        assert!(e.contains("queues"), "lists the valid keys: {e}");
        let e = err(&WORKLOAD.replace("flows = 100", "flows = 100\nflowz = 1"));
        assert!(e.contains("flowz"), "{e}");
        let e = err(&WORKLOAD.replace("kind = \"workload\"", "kind = \"bulk\""));
        assert!(e.contains("bulk"), "{e}");
    }

    /// `[switch]` takes every key of the switch's own config file (one
    /// declaration, `config::Options`): a setting with no scenario field of
    /// its own reaches the switch's file; a typo is named with the valid
    /// keys; a key the runner sets is refused with why; manifests (JSON)
    /// read back, also those written when `[switch]` had fields of its own.
    #[test]
    fn switch_takes_every_key_of_the_switch_s_own_config_file() {
        let text = WORKLOAD.replace(
            "queues = 4",
            "queues = 4\ningress_rate = \"line\"\nclassify = \"flow\"\nquantum = [1514, 3028]",
        );
        let s = parse(&text).unwrap();
        let file = s.switch.config_file_text(false);
        let o = crate::config::Options::parse(&file).unwrap();
        assert_eq!(o.ingress_rate.as_deref(), Some("line"), "{file}");
        assert_eq!(o.classify.as_deref(), Some("flow"), "{file}");
        assert_eq!(o.quantum.as_deref(), Some("1514,3028"), "{file}");
        assert_eq!(o.queues, Some(4), "{file}");
        assert_eq!(
            o.rtt.as_deref(),
            Some("250us"),
            "the scenario's default: {file}"
        );
        assert_eq!(s.switch.queues(), 4);
        let e = err(&WORKLOAD.replace("queues = 4", "queues = 4\ningres_rate = \"line\""));
        assert!(
            e.contains("ingres_rate") && e.contains("`ingress_rate`"),
            "{e}"
        );
        let e = err(&WORKLOAD.replace("queues = 4", "queues = 4\nports = [\"a\"]"));
        assert!(e.contains("switch.ports: set by the runner"), "{e}");
        let e = err(&WORKLOAD.replace("queues = 4", "queues = 4\ndilation = 4.0"));
        assert!(e.contains("switch.dilation: set by the runner"), "{e}");
        // A scenario's own default: one queue, whatever the AQM's default.
        let one = parse(&WORKLOAD.replace("queues = 4\n", "")).unwrap();
        assert!(one.switch.config_file_text(false).contains("queues = 1"));
        let j = serde_json::to_value(&s).unwrap();
        let back: Scenario = serde_json::from_value(j.clone()).unwrap();
        assert_eq!(back, s);
        let mut old = j;
        old["switch"]["buffer"] = serde_json::Value::Null;
        old["switch"]["frames"] = serde_json::Value::Null;
        old["switch"]["quantum"] = serde_json::Value::String("1514".into());
        let back: Scenario = serde_json::from_value(old).unwrap();
        back.validate().unwrap();
        assert_eq!(back.switch.buffer(), None);
        assert_eq!(back.switch.options().quantum.as_deref(), Some("1514"));
    }

    /// A scenario's times and sizes need their units, and so do the AQM
    /// options it hands the switch: refused when the scenario is checked,
    /// not by a switch halfway through the sweep.
    #[test]
    fn bare_times_and_sizes_are_refused_when_the_scenario_is_checked() {
        for (from, to, want) in [
            (
                "threshold = \"200us\"",
                "threshold = 200",
                "switch.aqm_opts.tcn (or its --aqm-opt): tcn: threshold=200: a time needs a unit \
                 — write 200us (or 200ns, 200ms)",
            ),
            (
                "threshold = \"200us\"",
                "threshold = \"200\"",
                "tcn: threshold=200: a time needs a unit",
            ),
            (
                "rto_min = \"5ms\"",
                "rto_min = \"5\"",
                "topology.rto_min `5`: a time needs a unit — write 5us",
            ),
            (
                "delay = { h1 = \"20us\" }",
                "delay = { h1 = \"20\" }",
                "a time needs a unit — write 20us",
            ),
            (
                "queues = 4",
                "queues = 4\nbuffer = \"96000\"",
                "switch.buffer `96000`: a size needs a unit — write 96000b",
            ),
            (
                "queues = 4",
                "queues = 4\nrtt = \"250\"",
                "switch.rtt `250`: a time needs a unit",
            ),
            (
                "queues = 4",
                "queues = 4\nrate = \"1000\"",
                "a rate needs a unit — write 1000mbit",
            ),
            (
                "[switch.aqm_opts.tcn]",
                "[switch.aqm_opts.dctcp]\nk = 30000\n[switch.aqm_opts.tcn]",
                "dctcp: k=30000: a size needs a unit — write 30000b",
            ),
            (
                "queues = 4",
                "queues = 4\nvariant_args = { tcn = [\"--aqm-opt\", \"t_max=90\"] }",
                "tcn: t_max=90: a time needs a unit",
            ),
            (
                "aqm = [\"dctcp\", \"tcn\"]",
                "aqm = [\"dctcp\", \"tcn\", \"r-aqm\"]\n\
                 variant_args = { \"r-aqm\" = [\"--raqm-opt\", \"stale=50\"] }",
                "r-aqm: --raqm-opt: r-aqm: stale=50: a time needs a unit — write 50us",
            ),
            (
                "[switch.aqm_opts.tcn]",
                "[switch.aqm_opts.dctcp]\nkk = \"30kb\"\n[switch.aqm_opts.tcn]",
                "dctcp has no parameter \"kk\"",
            ),
        ] {
            assert!(WORKLOAD.contains(from), "{from}");
            let e = err(&WORKLOAD.replacen(from, to, 1));
            assert!(e.contains(want), "{to}: {e}");
        }
        let e = err(r#"
            [topology]
            hosts = 3
            [switch]
            aqm = ["tcn"]
            [traffic]
            kind = "incast"
            receiver = 3
            servers = [1, 2]
            fanin = [2]
            size = "65536"
        "#);
        assert!(
            e.contains("traffic.size `65536`: a size needs a unit — write 65536b"),
            "{e}"
        );
        // Counts stay plain numbers: packets, with their unit said.
        parse(&WORKLOAD.replacen(
            "[switch.aqm_opts.tcn]",
            "[switch.aqm_opts.dctcp]\nk = 65\nunit = \"packets\"\n[switch.aqm_opts.tcn]",
            1,
        ))
        .unwrap();
    }

    #[test]
    fn capture_is_off_by_default_and_its_bounds_are_the_switchs() {
        let sc = parse(WORKLOAD).unwrap();
        assert_eq!(sc.capture, CaptureSpec::default());
        assert!(!sc.capture.pcap);
        assert_eq!((sc.capture.snaplen(), sc.capture.max_mb()), (256, 100.0));
        // Off, it is not written: a manifest without capture is unchanged.
        assert!(serde_json::to_value(&sc).unwrap().get("capture").is_none());
        let text =
            format!("{WORKLOAD}\n[capture]\npcap = true\npcap_max_mb = 5\npcap_snaplen = 128\n");
        let sc = parse(&text).unwrap();
        assert!(sc.capture.pcap);
        assert_eq!((sc.capture.snaplen(), sc.capture.max_mb()), (128, 5.0));
        assert_eq!(
            sc.capture
                .switch_args(Path::new("/r/dctcp-r0/pcap"))
                .join(" "),
            "--pcap /r/dctcp-r0/pcap --pcap-snaplen 128 --pcap-max-mb 5"
        );
        let back: Scenario = serde_json::from_value(serde_json::to_value(&sc).unwrap()).unwrap();
        assert_eq!(back, sc, "the manifest's scenario keeps it");
        for (bad, want) in [
            (
                "pcap_max_mb = 0",
                "capture.pcap_max_mb = 0: give a bound of at least 0.01 MB",
            ),
            ("pcap_max_mb = nan", "capture.pcap_max_mb = NaN"),
            (
                "pcap_snaplen = 0",
                "capture.pcap_snaplen = 0: give 1 to 65535 bytes",
            ),
            ("pcap_snaplen = 70000", "capture.pcap_snaplen = 70000"),
        ] {
            let e = err(&format!("{WORKLOAD}\n[capture]\n{bad}\n"));
            assert!(e.contains(want), "{bad}: {e}");
        }
        let e = err(&format!("{WORKLOAD}\n[capture]\npcap = \"yes\"\n"));
        assert!(e.contains("pcap"), "{e}");
        let e = err(&format!("{WORKLOAD}\n[capture]\nmax_mb = 3\n"));
        assert!(e.contains("max_mb") && e.contains("pcap_max_mb"), "{e}");
    }

    #[test]
    fn host_sender_options_parse_and_default_off() {
        let s = parse(WORKLOAD).unwrap();
        assert_eq!(s.topology.gso_segs, None);
        assert!(!s.topology.tcp_pacing);
        let s = parse(&WORKLOAD.replace("hosts = 4", "hosts = 4\ngso_segs = 1\ntcp_pacing = true"))
            .unwrap();
        assert_eq!(s.topology.gso_segs, Some(1));
        assert!(s.topology.tcp_pacing);
    }

    #[test]
    fn empty_sweeps_are_rejected() {
        let e = err(&WORKLOAD.replace("aqm = [\"dctcp\", \"tcn\"]", "aqm = []"));
        assert!(e.contains("switch.aqm is empty"), "{e}");
        let e = err(&WORKLOAD.replace("load = [0.3, 0.5, 0.7]", "load = []"));
        assert!(e.contains("traffic.load is empty"), "{e}");
    }

    #[test]
    fn unknown_aqm_lists_the_choices() {
        let e = err(&WORKLOAD.replace("\"tcn\"]", "\"pie\"]"));
        assert!(e.contains("unknown AQM `pie`"), "{e}");
        assert!(e.contains("ecn-sharp"), "{e}");
    }

    #[test]
    fn baseline_must_run() {
        let e = err(&WORKLOAD.replace("baseline = \"dctcp\"", "baseline = \"red\""));
        assert!(e.contains("baseline `red` is not in switch.aqm"), "{e}");
    }

    #[test]
    fn fanin_larger_than_senders() {
        let e = err(r#"
            [topology]
            hosts = 5
            [switch]
            aqm = ["tcn"]
            [traffic]
            kind = "incast"
            receiver = 5
            servers = [1, 2, 3, 4]
            fanin = [4, 8]
            size = "64kb"
        "#);
        assert!(e.contains("fanin 8 needs 8 senders"), "{e}");
    }

    #[test]
    fn other_mistakes() {
        let cases = [
            (
                WORKLOAD.replace("clients = [4]", "clients = [7]"),
                "host 7 does not exist",
            ),
            (
                WORKLOAD.replace("clients = [4]", "clients = [3]"),
                "both a client and a server",
            ),
            (WORKLOAD.replace("0.7]", "1.5]"), "outside (0, 1]"),
            (
                WORKLOAD.replace("h1 = \"20us\"", "h9 = \"20us\""),
                "`h9` is not a host",
            ),
            (
                WORKLOAD.replace("h1 = \"20us\"", "h1 = \"20 parsecs\""),
                "topology.delay.h1",
            ),
            (
                WORKLOAD.replace("sched = \"dwrr\"", "sched = \"fifo\""),
                "unknown scheduler",
            ),
            (
                WORKLOAD.replace("aqm_opts.tcn", "aqm_opts.red"),
                "`red` is not in switch.aqm",
            ),
            (
                WORKLOAD.replace("hosts = 4", "hosts = 1"),
                "at least 2 hosts",
            ),
            (
                WORKLOAD.replace("dscp = \"0,1,2,3\"", "dscp = \"0,99\""),
                "traffic.dscp",
            ),
            (
                WORKLOAD.replace("hosts = 4", "hosts = 4\ngso_segs = 0"),
                "topology.gso_segs 0 is outside 1..=65535",
            ),
        ];
        for (text, want) in cases {
            let e = err(&text);
            assert!(e.contains(want), "want `{want}` in: {e}");
        }
    }

    const SWEEP: &str = r#"
        [topology]
        hosts = 3
        [switch]
        aqm = ["red@fixed", "dctcp"]
        [switch.aqm_opts."red@fixed"]
        max_p = 0.1
        [switch.variant_args]
        "red@fixed" = ["--not-ect", "drop"]
        [fidelity]
        max_lost = "2%"
        max_stall = "10ms"
        [traffic]
        kind = "static"
        duration = "10s"
        flows_sweep = [2, 8]
        flows = [
            { server = 1, client = 3, count = "sweep" },
            { server = 2, client = 3, count = 2, start = "1s", size = "10mb" },
        ]
        [traffic.ping]
        from = 3
        to = 1
        dscp = 8
        interval = "5ms"
    "#;

    #[test]
    fn flows_sweep_variants_ping_and_fidelity() {
        let s = parse(SWEEP).unwrap();
        let c = s.combos();
        assert_eq!(c.len(), 4, "2 flow counts × 2 AQMs");
        assert_eq!(c[0].sweep, SweepValue::Flows(2));
        assert_eq!(c[0].dir, "red@fixed-flows2-r0");
        assert_eq!(aqm_kind(&c[0].aqm), "red");
        assert_eq!(aqm_kind(&c[1].aqm), "dctcp");
        assert_eq!(c[3].sweep, SweepValue::Flows(8));
        let TrafficSpec::Static(st) = &s.traffic else {
            panic!()
        };
        assert_eq!(st.flows[0].count_for(SweepValue::Flows(8)), 8);
        assert_eq!(st.flows[1].count_for(SweepValue::Flows(8)), 2, "fixed");
        assert_eq!(st.flows[0].count_for(SweepValue::None), 1);
        let p = st.ping.as_ref().unwrap();
        assert_eq!((p.from, p.to, p.dscp), (3, 1, 8));
        assert_eq!(s.fidelity.max_lost.as_deref(), Some("2%"));
    }

    #[test]
    fn mistakes_in_the_new_keys_are_named() {
        let cases = [
            (
                SWEEP.replace("\"red@fixed\", \"dctcp\"", "\"pie@x\", \"dctcp\""),
                "unknown AQM `pie`",
            ),
            (
                SWEEP.replace("aqm = [\"red@fixed\"", "aqm = [\"red@fi xed\""),
                "variant label",
            ),
            (
                SWEEP.replace("\"red@fixed\" = [", "\"red@other\" = ["),
                "switch.variant_args.red@other",
            ),
            (
                SWEEP.replace("max_lost = \"2%\"", "max_lost = \"lots\""),
                "fidelity.max_lost",
            ),
            (
                SWEEP.replace("max_stall = \"10ms\"", "max_stall = \"soon\""),
                "fidelity.max_stall",
            ),
            (
                SWEEP.replace("start = \"1s\"", "start = \"20s\""),
                "not before the end of the run",
            ),
            (
                SWEEP.replace("size = \"10mb\"", "size = \"0\""),
                "size must be positive",
            ),
            (SWEEP.replace("count = 2", "count = 0"), "at least 1 flow"),
            (SWEEP.replace("count = 2", "count = \"many\""), "\"sweep\""),
            (SWEEP.replace("to = 1", "to = 3"), "traffic.ping"),
            (
                SWEEP.replace("interval = \"5ms\"", "interval = \"100us\""),
                "at least 1ms",
            ),
        ];
        for (text, want) in cases {
            assert_ne!(text, SWEEP, "the replacement for `{want}` matched nothing");
            let e = match parse(&text) {
                Ok(_) => panic!("accepted, want `{want}`"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(want), "want `{want}` in: {e}");
        }
    }

    /// A 2 × 2 leaf-spine over four hosts, as a scenario's `[fabric]`.
    const LEAF_SPINE: &str = r#"
        [fabric.leaf_spine]
        leaves = 2
        spines = 2
        hosts_per_leaf = 2
        host_rate = "100mbit"
        fabric_rate = "100mbit"
    "#;

    #[test]
    fn a_fabric_is_read_as_the_switch_reads_it_and_must_match_the_hosts() {
        let ws = WORKLOAD.replace("delay = { h1 = \"20us\" }", "");
        let sc = parse(&format!("{ws}{LEAF_SPINE}")).unwrap();
        let f = sc.fabric_desc().unwrap().expect("a fabric");
        assert_eq!(f.switches.len(), 4);
        assert_eq!(f.hosts.len(), 4);
        // Without [fabric]: one switch.
        assert!(parse(&ws).unwrap().fabric_desc().unwrap().is_none());
        // The scenario's host count is the fabric's.
        let e = err(&format!(
            "{}{LEAF_SPINE}",
            ws.replace("hosts = 4", "hosts = 5")
        ));
        assert!(
            e.contains("[fabric] has hosts up to h4: set topology.hosts = 4"),
            "{e}"
        );
        // Per-host delays belong to the fabric.
        let e = err(&format!("{WORKLOAD}{LEAF_SPINE}"));
        assert!(e.contains("topology.delay with [fabric]"), "{e}");
        // The fabric's own errors, under its name.
        let e = err(&format!(
            "{ws}{}",
            LEAF_SPINE.replace("spines = 2", "spines = 0")
        ));
        assert!(e.starts_with("scenario: [fabric]: topology"), "{e}");
    }

    #[test]
    fn fabric_parts_are_the_runners_not_the_switchs_and_are_checked() {
        let ws = WORKLOAD.replace("delay = { h1 = \"20us\" }", "");
        let with = |parts: &str| format!("{ws}{LEAF_SPINE}\n[fabric]\nparts = {parts}\n");
        let sc = parse(&with(
            r#"{ a = ["leaf1", "spine1"], b = ["leaf2", "spine2"] }"#,
        ))
        .unwrap();
        sc.validate().unwrap();
        let placed = sc.fabric_placement().unwrap().expect("two parts");
        assert_eq!(placed.split.parts.len(), 2);
        assert_eq!(placed.split.wires.len(), 2);
        // The switch's topology file has no `parts`, and reads the same.
        let text = sc.fabric_text().unwrap().unwrap();
        assert!(!text.contains("parts"), "{text}");
        let whole = parse(&format!("{ws}{LEAF_SPINE}")).unwrap();
        assert_eq!(sc.fabric_desc().unwrap(), whole.fabric_desc().unwrap());
        assert!(whole.fabric_placement().unwrap().is_none());
        // A bad split fails validation, under its key, saying what to change.
        let e = err(&with(r#"{ a = ["leaf1", "spine1"], b = ["leaf2"] }"#));
        assert!(
            e.contains("fabric.parts: switches in no part: spine2"),
            "{e}"
        );
        let e = err(&with(r#"["leaf1"]"#));
        assert!(e.contains("fabric.parts: a table of part name"), "{e}");
    }
}

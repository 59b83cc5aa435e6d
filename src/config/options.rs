//! Every setting of the switch, declared once: one field of [`Options`],
//! which is both the command line (clap: `#[arg]`, the doc comment is its
//! `--help` line) and the TOML file (serde: the same name, `_` for `-`).
//! A field marked `#[arg(skip)]` is a file key only, one marked
//! `#[serde(skip)]` a flag only. [`Layers`] reads a setting the one way
//! there is: the flag if given, else the file's value, else the default
//! the caller names.
//!
//! Adding a setting is one field here and the line that reads it in the
//! area that uses it (`ports`, `queues`, `aqm`, `pcap`, `runtime`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use clap::Args;
use serde::{Deserialize, Deserializer};

use super::ConfigError;
use crate::aqm::config::AQM_NAMES;

/// Settings that may differ per port (`[port.NAME]` in the file).
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

/// The switch's settings as given: on the command line, in the config file,
/// or both (flags win). Every field is optional; [`super::resolve`] turns
/// them into [`super::Settings`].
#[derive(Args, Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// Interfaces to switch between, comma-separated (e.g. veth0,veth1).
    #[arg(long, value_delimiter = ',')]
    #[serde(default)]
    pub ports: Vec<String>,
    /// TOML file with any of these settings (flags override it).
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Run a fabric of several switches (leaf-spine, ...) described in this TOML file instead of one switch; --ports then names the interfaces of the topology's hosts h1, h2, ... in that order (README, "Fabrics").
    #[arg(long, value_name = "FILE")]
    #[serde(default, deserialize_with = "path")]
    pub topology: Option<PathBuf>,
    /// With --topology: run only these switches of the fabric (comma-separated names; default all). Links to the others are wires: real interfaces to the processes that run them, named by --link-ifaces (README, "A fabric over several processes").
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    #[serde(default)]
    pub switches: Vec<String>,
    /// With --switches: the interface each wire leaves on, as PORT=IFACE, comma-separated (e.g. leaf1:spine1=l1s1,leaf1:spine2=l1s2; PORT is the link's egress port at a switch this process runs).
    #[arg(long, value_delimiter = ',', value_name = "PORT=IFACE")]
    #[serde(default)]
    pub link_ifaces: Vec<String>,
    /// Emulated link rate of every egress port (tc units: 100mbit, 1gbit, 10gbit; 0 = unshaped).
    #[arg(long)]
    pub rate: Option<String>,
    /// Shaper bucket size (default 2500b ≈ 1.67 MTU, as the TCN prototype).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Per-frame overhead counted against the rate, bytes (default 24: preamble, FCS, gap).
    #[arg(long)]
    pub overhead: Option<u32>,
    /// Software-robustness option: link time a busy port may make up when the poll loop ran late (default 0 = the prototype's strict token bucket; e.g. 1ms). Bursts above rate + bucket are then counted by the fidelity guard; dequeue AQMs see the stall-free departure time.
    #[arg(long)]
    pub catchup: Option<String>,
    /// Shared buffer per port (default 96kb, the TCN testbed's per-port buffer at 1 Gbit/s).
    #[arg(long)]
    pub buffer: Option<String>,
    /// Per-queue limit (default: none, only the shared buffer).
    #[arg(long)]
    pub queue_limit: Option<String>,
    /// One-way delay added after the shaper on every port (e.g. 50us); per port: --port-delay IF=TIME.
    #[arg(long)]
    pub delay: Option<String>,
    /// Emulate the sending hosts' NICs: a frame arriving on a port enters the switch only when a link of this rate would have delivered it (store-and-forward, FIFO). off (default, as the prototypes, which sit behind real NICs), line (each port's --rate, a testbed's symmetric links) or a rate. A veth delivers a host's burst at memory speed; a NIC spreads it at line rate.
    #[arg(long)]
    pub ingress_rate: Option<String>,
    /// Frames the emulated host link may hold before counted drops (ingress_full); default 1000, Linux's txqueuelen.
    #[arg(long)]
    pub ingress_limit: Option<u32>,
    /// Per-port delay override, IF=TIME (repeatable).
    #[arg(long = "port-delay", value_name = "IF=TIME")]
    #[serde(skip)]
    pub port_delay: Vec<String>,
    /// Per-port rate override, IF=RATE (repeatable).
    #[arg(long = "port-rate", value_name = "IF=RATE")]
    #[serde(skip)]
    pub port_rate: Vec<String>,
    /// File only: per-port overrides of rate, buffer and delay, by interface name (`[port.veth1]`).
    #[arg(skip)]
    pub port: Option<BTreeMap<String, PortOverride>>,
    /// Base RTT the AQM defaults are scaled to (default 250us).
    #[arg(long)]
    pub rtt: Option<String>,
    /// Queues per port (1–128).
    #[arg(long)]
    pub queues: Option<usize>,
    /// Scheduler: sp, dwrr, wfq, sp+dwrr, sp+wfq.
    #[arg(long)]
    pub sched: Option<String>,
    /// DWRR quanta in bytes (--sched-bytes), comma-separated (one value = every queue; default one MTU frame: 1538 wire bytes, 1514 frame bytes).
    #[arg(long)]
    #[serde(default, deserialize_with = "u64_list")]
    pub quantum: Option<String>,
    /// WFQ weights, comma-separated (one value = every queue; default 1).
    #[arg(long)]
    #[serde(default, deserialize_with = "u64_list")]
    pub weights: Option<String>,
    /// Strict-priority queues, highest priority first (sp, sp+dwrr, sp+wfq), e.g. 0,1.
    #[arg(long)]
    #[serde(default, deserialize_with = "usize_list")]
    pub strict: Option<String>,
    /// What DWRR / WFQ charge a packet: wire (default: frame + --overhead, as the prototypes' skb_size, so quanta and MQ-ECN's round time share a unit) or frame.
    #[arg(long)]
    pub sched_bytes: Option<String>,
    /// WFQ virtual time: prototype (default: V = largest finish tag assigned, as the TCN prototype's sch_wfq) or scfq (self-clocked fair queueing).
    #[arg(long)]
    pub wfq_vtime: Option<String>,
    /// DSCP → queue map: `mod` (default: DSCP mod queues), `46=0,10=1` pairs, or 64 queue numbers.
    #[arg(long)]
    pub dscp_map: Option<String>,
    /// Classifier: `dscp` (the DSCP map, default) or `flow[,temp=0|none][,pass-limit=SIZE][,timeout=TIME]` (per-flow queues by 5-tuple, DiffECN's QMU; the default with --aqm diffecn).
    #[arg(long)]
    pub classify: Option<String>,
    /// The AQM (the list is `aqm::config::AQM_NAMES`; `--help` shows it).
    #[arg(long, help = aqm_flag_help())]
    pub aqm: Option<String>,
    /// With --aqm r-aqm: the forward-path AQM (default dctcp, the paper's "R-AQM (ECN)"); --aqm-opt sets its parameters.
    #[arg(long)]
    pub raqm_forward: Option<String>,
    /// R-AQM parameter KEY=VALUE (repeatable), e.g. k_min_pkts=20, interval=60us (T), trend_samples=2 (samples of the queue per T; a trend is a rise or fall at each; 1: the older two-sample difference), trend_min_pkts=1 (ours: the least net change over T for a trend), rwnd_threshold_pkts=40; `--raqm-opt help=1` lists the keys.
    #[arg(long = "raqm-opt", value_name = "KEY=VALUE")]
    #[serde(skip)]
    pub raqm_opt: Vec<String>,
    /// File only: R-AQM's parameters (`[raqm_opts]`, e.g. k_min_pkts = 20).
    #[arg(skip)]
    pub raqm_opts: Option<BTreeMap<String, toml::Value>>,
    /// AQM parameter KEY=VALUE (repeatable); `--aqm X --aqm-opt help=1` lists the keys. Times and sizes need a unit (threshold=100us, k=30kb); counts are plain numbers.
    #[arg(long = "aqm-opt", value_name = "KEY=VALUE")]
    #[serde(skip)]
    pub aqm_opt: Vec<String>,
    /// File only: the AQM's parameters (`[aqm_opts]`, e.g. threshold = "100us").
    #[arg(skip)]
    pub aqm_opts: Option<BTreeMap<String, toml::Value>>,
    /// Packet the AQM marks but that is Not-ECT: pass (default, as the TCN/MQ-ECN prototypes) or drop.
    #[arg(long)]
    pub not_ect: Option<String>,
    /// Test hook: CE-mark every N-th ECN-capable packet at dequeue.
    #[arg(long)]
    pub mark_every: Option<u32>,
    /// Run over interfaces that carry the default route.
    #[arg(long)]
    #[serde(skip)]
    pub force: bool,
    /// Stop after this long (e.g. 30s; emulated time with --dilation) and print counters, as on Ctrl-C.
    #[arg(long)]
    #[serde(skip)]
    pub duration: Option<String>,
    /// Time dilation D (default 1): the switch runs D times slower than real time, so every rate it is given is emulated and goes on the wire at rate / D, and every time it is given or reports is emulated (D times longer in real time). The fidelity guard judges real time. Run the hosts with the same D (README, "Time dilation").
    #[arg(long, value_name = "D")]
    pub dilation: Option<f64>,
    /// Where `softswitch stats` finds this switch.
    #[arg(long)]
    #[serde(default, deserialize_with = "path")]
    pub stats_socket: Option<PathBuf>,
    /// File only: MAC ageing time (default 300s).
    #[arg(skip)]
    pub ageing: Option<String>,
    /// Seed for the AQMs' random decisions.
    #[arg(long)]
    pub seed: Option<u64>,
    /// CPU priority (nice, −20..19) of the busy-polling data path (default −10).
    #[arg(long, allow_hyphen_values = true)]
    #[serde(skip)]
    pub nice: Option<i32>,
    /// Pin the data path to this CPU (`last`: the highest-numbered one this
    /// process may use; default: not pinned). Best on a core kept free of
    /// other work (isolcpus, or a cpuset).
    #[arg(long, value_name = "N|last")]
    pub cpu: Option<String>,
    /// Kick the kernel's transmit from a second thread (an option for
    /// robustness, off by default): in copy mode on a veth the kick runs the
    /// receiving host's stack, which then delays frames on their way to the
    /// host instead of stalling the data path (README, "Fidelity guard").
    #[arg(long)]
    #[serde(default)]
    pub tx_thread: bool,
    /// Between departures of a shaped port: `busy` spins (default), `adaptive` sleeps until just before the next departure while backlogged (frees CPU for the hosts; the fidelity guard shows what it costs).
    #[arg(long, value_name = "busy|adaptive")]
    pub poll: Option<String>,
    /// UMEM frames shared by all ports (4 KiB each).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Write a queue time series (CSV: backlog, dequeued bytes, marks, drops per queue) to this file.
    #[arg(long)]
    #[serde(skip)]
    pub timeseries: Option<PathBuf>,
    /// Sampling interval of --timeseries (default 1ms; down to 100us).
    #[arg(long)]
    #[serde(skip)]
    pub ts_interval: Option<String>,
    /// Capture what the switch saw into DIR: pcapng per port and direction (DIR/<port>-rx.pcapng, -tx.pcapng), each packet commented with its queue and verdict.
    #[arg(long, value_name = "DIR")]
    #[serde(default, deserialize_with = "path")]
    pub pcap: Option<PathBuf>,
    /// Capture only these ports (default: all), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "IF,IF")]
    #[serde(default)]
    pub pcap_ports: Vec<String>,
    /// Bytes of each frame captured (default 256: every Ethernet + IP + TCP header).
    #[arg(long, value_name = "BYTES")]
    pub pcap_snaplen: Option<u32>,
    /// Bound of each capture file in MB (default 100); packets beyond it are counted, not written.
    #[arg(long, value_name = "MB")]
    pub pcap_max_mb: Option<f64>,
    /// Print counters as JSON on exit.
    #[arg(long)]
    #[serde(skip)]
    pub json: bool,
    /// Exit 0 even when the fidelity guard says NOT FAITHFUL (by default
    /// such a run exits 3: its numbers are not the emulated link's).
    #[arg(long)]
    #[serde(skip)]
    pub allow_unfaithful: bool,
    /// Fidelity guard: a run is not faithful when a port loses more than this share of the link time it was backlogged for (default 1%).
    #[arg(long, value_name = "SHARE")]
    pub max_lost: Option<String>,
    /// Fidelity guard: ... or when the data path stalls longer than this at once while frames wait (default 5ms).
    #[arg(long, value_name = "TIME")]
    pub max_stall: Option<String>,
    /// Fidelity guard: ... or spends more than this share of the run in stalls over 100us (default 2%).
    #[arg(long, value_name = "SHARE")]
    pub max_stalled: Option<String>,
}

impl Options {
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

/// A list of numbers in a file: a TOML list (`quantum = [1514, 3028]`)
/// or the flag's own text (`quantum = "1514,3028"`, as a scenario's
/// `[switch]` has always written it), kept as the flag writes it (and
/// checked where the flag is).
fn number_list<'de, D, T>(d: D) -> Result<Option<String>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + ToString,
{
    struct Numbers<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de> + ToString> serde::de::Visitor<'de> for Numbers<T> {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of numbers, e.g. [1514, 3028] (or the flag's \"1514,3028\")")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut v: Vec<T> = Vec::new();
            while let Some(x) = seq.next_element()? {
                v.push(x);
            }
            Ok(Some(join(&v)))
        }
    }
    d.deserialize_option(Numbers::<T>(std::marker::PhantomData))
}

/// A file list of numbers (`quantum = [1514, 3028]`) as the flag writes it.
fn u64_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    number_list::<D, u64>(d)
}

/// A file list of queue numbers (`strict = [0, 1]`) as the flag writes it.
fn usize_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    number_list::<D, usize>(d)
}

/// A file path, read as a string (so a wrong type says "expected a string").
fn path<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(PathBuf::from))
}

/// The `--aqm` flag's help line, naming every AQM of the list.
fn aqm_flag_help() -> &'static str {
    static TEXT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "AQM: {}; or r-aqm (reverse-path ACK control, R-AQM paper) with a forward AQM: \
             r-aqm+NAME or --raqm-forward (default dctcp)",
            AQM_NAMES.join(", ")
        )
    });
    &TEXT
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The two places a setting may come from; flags win.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layers<'a> {
    /// The command line.
    pub flags: &'a Options,
    /// The config file (all empty without `--config`).
    pub file: &'a Options,
}

impl<'a> Layers<'a> {
    /// The flag if given, else the file's value.
    pub fn get<T>(&self, field: impl Fn(&'a Options) -> &'a Option<T>) -> Option<&'a T> {
        field(self.flags).as_ref().or(field(self.file).as_ref())
    }

    /// A text setting: the flag, else the file, else `default`.
    pub fn text(
        &self,
        field: impl Fn(&'a Options) -> &'a Option<String>,
        default: &'a str,
    ) -> &'a str {
        self.get(field).map_or(default, String::as_str)
    }

    /// A list: the flag's if it names anything, else the file's.
    pub fn list<T>(&self, field: impl Fn(&'a Options) -> &'a Vec<T>) -> &'a [T] {
        match field(self.flags) {
            v if !v.is_empty() => v,
            _ => field(self.file),
        }
    }
}

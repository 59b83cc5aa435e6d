//! The ports: their names and what is set per port (`--port-rate`,
//! `--port-delay`, `[port.NAME]`); what every port shares (the link it
//! emulates, queues and scheduler, the AQM, the host link on ingress); and
//! one port's settings assembled from both.

use std::collections::BTreeMap;

use crate::aqm::AqmEnv;
use crate::ingress::IngressRate;
use crate::port::{Classifier, NotEctPolicy, PortConfig};
use crate::sched::SchedConfig;
use crate::shaper;
use crate::units::{Nanos, Rate};

use super::aqm::{self, AqmChoice, AqmOptions};
use super::options::{Layers, PortOverride};
use super::values::{by_name, rate_setting, size_setting, time_setting};
use super::{
    queues, ConfigError, PortSettings, DEFAULT_BUFFER, DEFAULT_CATCHUP, DEFAULT_RATE, MTU,
};

/// The ports, in `--ports` order, and what is set for each by name.
#[derive(Clone, Debug)]
pub(super) struct PortNames {
    /// Interfaces.
    pub names: Vec<String>,
    /// The file's `[port.NAME]` sections.
    overrides: BTreeMap<String, PortOverride>,
    /// `--port-rate NAME=RATE`.
    rate: BTreeMap<String, String>,
    /// `--port-delay NAME=TIME`.
    delay: BTreeMap<String, String>,
}

/// `--ports` (trimmed) or the file's `ports`; every per-port setting must
/// name one of them.
pub(super) fn names(l: &Layers) -> Result<PortNames, ConfigError> {
    let names: Vec<String> = if !l.flags.ports.is_empty() {
        l.flags
            .ports
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    } else {
        l.file.ports.clone()
    };
    // A process running only a fabric's spines has no hosts (its ports are
    // wires, `--link-ifaces`); the fabric's resolve checks its interfaces.
    let part_of_fabric = l.get(|o| &o.topology).is_some()
        && !(l.flags.switches.is_empty() && l.file.switches.is_empty());
    if names.is_empty() && !part_of_fabric {
        return Err(ConfigError::Invalid(
            "no ports given; name the interfaces to switch between, e.g. --ports veth0,veth1 \
             (create test hosts with `sudo softswitch topo up --hosts 2`)"
                .into(),
        ));
    }
    let overrides = l.file.port.clone().unwrap_or_default();
    if let Some(name) = overrides.keys().find(|n| !names.contains(n)) {
        return Err(ConfigError::Invalid(format!(
            "[port.{name}] in the config file names an interface that is not in ports ({})",
            names.join(",")
        )));
    }
    let delay = by_name("--port-delay", &l.flags.port_delay)?;
    let rate = by_name("--port-rate", &l.flags.port_rate)?;
    if let Some(k) = delay.keys().chain(rate.keys()).find(|k| !names.contains(k)) {
        return Err(ConfigError::Invalid(format!(
            "{k:?} in --port-delay/--port-rate is not one of --ports ({})",
            names.join(",")
        )));
    }
    Ok(PortNames {
        names,
        overrides,
        rate,
        delay,
    })
}

impl PortNames {
    /// The first per-port setting given (`--port-rate`, `--port-delay`,
    /// `[port.NAME]`), as the user wrote its name.
    pub fn per_port_setting(&self) -> Option<String> {
        if let Some(k) = self.rate.keys().next() {
            return Some(format!("--port-rate {k}=..."));
        }
        if let Some(k) = self.delay.keys().next() {
            return Some(format!("--port-delay {k}=..."));
        }
        self.overrides.keys().next().map(|k| format!("[port.{k}]"))
    }
}

/// What every port shares, resolved once (in this order, which is the
/// order mistakes are reported in).
#[derive(Clone, Debug)]
pub(super) struct Shared {
    /// The AQM and whether R-AQM runs.
    pub aqm: AqmChoice,
    /// Queues per port.
    queues: usize,
    /// Base RTT the AQM defaults are scaled to.
    rtt_ns: Nanos,
    /// Shaper bucket, bytes.
    bucket_bytes: u64,
    /// Link time a late port may make up.
    catchup_ns: Nanos,
    /// Per-queue limit, bytes.
    queue_limit_bytes: Option<u64>,
    /// Packet → queue.
    classifier: Classifier,
    /// Scheduler.
    sched: SchedConfig,
    /// What a mark does to a Not-ECT packet.
    not_ect: NotEctPolicy,
    /// The AQM's options.
    pub aqm_opts: AqmOptions,
    /// Emulated host links on ingress.
    pub ingress: IngressRate,
    /// Frames an emulated host link may hold.
    pub ingress_limit: u32,
    /// Wire bytes per frame counted against the rate.
    overhead_bytes: u32,
    /// Test hook: mark every n-th ECT packet.
    mark_every: Option<u32>,
}

impl Shared {
    /// Reads everything the ports share.
    pub fn resolve(l: &Layers) -> Result<Self, ConfigError> {
        let aqm = aqm::choice(l)?;
        let queues = queues::count(l, aqm.needs)?;
        let rtt_ns = aqm::rtt(l)?;
        let bucket_bytes = match l.get(|o| &o.bucket) {
            Some(b) => size_setting("bucket", b)?,
            None => shaper::DEFAULT_BUCKET_BYTES,
        };
        let catchup_ns = time_setting("catchup", l.text(|o| &o.catchup, DEFAULT_CATCHUP))?;
        let queue_limit_bytes = match l.get(|o| &o.queue_limit) {
            Some(s) => Some(size_setting("queue-limit", s)?),
            None => None,
        };
        let classifier = queues::classifier(l, queues, rtt_ns, aqm.needs)?;
        let sched = queues::scheduler(l, queues, &classifier)?;
        let not_ect = not_ect(l)?;
        let aqm_opts = aqm::options(l)?;
        let (ingress, ingress_limit) = ingress(l)?;
        Ok(Shared {
            aqm,
            queues,
            rtt_ns,
            bucket_bytes,
            catchup_ns,
            queue_limit_bytes,
            classifier,
            sched,
            not_ect,
            aqm_opts,
            ingress,
            ingress_limit,
            overhead_bytes: l
                .get(|o| &o.overhead)
                .copied()
                .unwrap_or(shaper::ETHERNET_WIRE_OVERHEAD),
            mark_every: l.get(|o| &o.mark_every).copied(),
        })
    }

    /// The egress pipeline of a port of this rate and buffer.
    pub fn port_config(&self, rate: Rate, buffer_bytes: u64) -> PortConfig {
        PortConfig {
            rate,
            bucket_bytes: self.bucket_bytes,
            overhead_bytes: self.overhead_bytes,
            buffer_bytes,
            queues: self.queues,
            queue_limit_bytes: self.queue_limit_bytes,
            classifier: self.classifier.clone(),
            sched: self.sched.clone(),
            not_ect: self.not_ect,
            mark_every: self.mark_every,
            mtu_frame_bytes: MTU + 14,
            catchup_ns: self.catchup_ns,
        }
    }

    /// What the AQM of a port of this rate is told. An unshaped port's AQM
    /// is scaled as for 100 Gbit/s.
    pub fn aqm_env(&self, rate: Rate) -> AqmEnv {
        AqmEnv {
            rate: if rate.bps() == 0 {
                Rate::gbit(100)
            } else {
                rate
            },
            rtt_ns: self.rtt_ns,
            num_queues: self.queues,
            mtu_bytes: MTU,
            quanta: if self.sched.is_round_robin() {
                self.sched.quanta(self.queues, self.overhead_bytes)
            } else {
                None
            },
        }
    }
}

/// `--not-ect`: pass by default, as the TCN / MQ-ECN prototypes (see `NotEctPolicy`).
fn not_ect(l: &Layers) -> Result<NotEctPolicy, ConfigError> {
    match l.text(|o| &o.not_ect, "pass") {
        "drop" => Ok(NotEctPolicy::Drop),
        "pass" => Ok(NotEctPolicy::Pass),
        other => Err(ConfigError::Invalid(format!(
            "--not-ect {other:?}: use pass (default, as the TCN/MQ-ECN prototypes) or drop"
        ))),
    }
}

/// `--ingress-rate` and `--ingress-limit`.
fn ingress(l: &Layers) -> Result<(IngressRate, u32), ConfigError> {
    let rate =
        IngressRate::parse(l.text(|o| &o.ingress_rate, "off")).map_err(ConfigError::Invalid)?;
    let limit = l
        .get(|o| &o.ingress_limit)
        .copied()
        .unwrap_or(crate::ingress::DEFAULT_LIMIT_PKTS);
    if limit == 0 {
        return Err(ConfigError::Invalid(
            "--ingress-limit 0: the emulated host link needs room for at least 1 frame".into(),
        ));
    }
    Ok((rate, limit))
}

/// One port's settings: per-port values (flag by name, then `[port.NAME]`,
/// then the setting for every port), checked.
pub(super) fn port(
    name: &str,
    names: &PortNames,
    l: &Layers,
    shared: &Shared,
) -> Result<PortSettings, ConfigError> {
    let own = names.overrides.get(name).cloned().unwrap_or_default();
    let rate = names.rate.get(name).or(own.rate.as_ref());
    let rate = rate_setting(
        "rate",
        rate.or(l.get(|o| &o.rate)).map_or(DEFAULT_RATE, |s| s),
    )?;
    let buffer = own.buffer.as_ref().or(l.get(|o| &o.buffer));
    let buffer = size_setting("buffer", buffer.map_or(DEFAULT_BUFFER, |s| s))?;
    let delay = names.delay.get(name).or(own.delay.as_ref());
    let delay_ns = time_setting("delay", delay.or(l.get(|o| &o.delay)).map_or("0", |s| s))?;
    let port = shared.port_config(rate, buffer);
    port.validate()
        .map_err(|e| ConfigError::Invalid(format!("port {name}: {e}")))?;
    let env = shared.aqm_env(rate);
    let aqm = aqm::for_port(&shared.aqm, &shared.aqm_opts, &env)?;
    Ok(PortSettings {
        name: name.to_string(),
        port,
        aqm,
        env,
        delay_ns,
        ingress_rate: shared.ingress.for_port(rate),
    })
}

/// What `--aqm-opt help=1` prints: the AQM's keys with their values for a
/// port of `--rate` (no `--ports` needed).
pub(super) fn aqm_help(l: &Layers) -> Result<String, ConfigError> {
    let shared = Shared::resolve(l)?;
    let rate = rate_setting("rate", l.text(|o| &o.rate, DEFAULT_RATE))?;
    let env = shared.aqm_env(rate);
    let aqm = aqm::for_port(&shared.aqm, &shared.aqm_opts, &env)?;
    let raqm = if shared.aqm.raqm {
        format!(
            "--aqm r-aqm: R-AQM on the reverse path, with the forward AQM {} whose keys \
             follow (--aqm-opt); R-AQM's own keys: --aqm r-aqm --raqm-opt help=1\n",
            aqm.name()
        )
    } else {
        String::new()
    };
    Ok(format!(
        "{raqm}--aqm {} on {}:\n{}",
        aqm.name(),
        port_line(&shared, &env, rate),
        aqm.help()
    ))
}

/// What `--raqm-opt help=1` prints: R-AQM's keys with their values on the
/// first port, as `--aqm-opt help=1` lists an AQM's.
pub(super) fn raqm_help(l: &Layers) -> Result<String, ConfigError> {
    let shared = Shared::resolve(l)?;
    let rate = rate_setting("rate", l.text(|o| &o.rate, DEFAULT_RATE))?;
    let env = shared.aqm_env(rate);
    let raqm = aqm::raqm_config(l, &env)?;
    Ok(format!(
        "--aqm r-aqm (R-AQM on the reverse path; --aqm r-aqm+NAME or --raqm-forward \
         names the forward AQM, whose keys --aqm-opt help=1 lists) on {}:\n{}",
        port_line(&shared, &env, rate),
        raqm.help()
    ))
}

/// The port the listed values are for, and what scales them.
fn port_line(shared: &Shared, env: &AqmEnv, rate: Rate) -> String {
    let rate = if rate.bps() == 0 {
        "unshaped".to_string()
    } else {
        rate.to_string()
    };
    format!(
        "a port of rate {rate}, rtt {}, {} queue(s), sched {} \
         (--rate, --rtt, --queues and --sched scale the values)",
        crate::units::fmt_duration(env.rtt_ns),
        env.num_queues,
        shared.sched.describe(),
    )
}

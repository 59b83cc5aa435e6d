//! Choosing and configuring an AQM: `--aqm NAME`, `--aqm-opt key=value`,
//! the `[aqm]` table of a config file, the paper defaults scaled to the
//! emulated link, and the enum the port dispatches through.
//!
//! Every AQM starts from its paper's defaults scaled to the link rate C and
//! the base RTT the user gives (`--rtt`) — see each module's header:
//!
//! | `--aqm` | default (C, RTT) | source |
//! |---|---|---|
//! | `droptail` | — | |
//! | `red` | max_th = C·RTT, min_th = max_th/3, max_p = 0.1, gentle, w_q = 1 − e^(−s/RTT) | Floyd 1993; tcn.txt Eq. 1 |
//! | `dctcp` | K = λ·C·RTT, λ = 1, per-queue, enqueue | tcn.txt §2.1 Eq. 1, §6.1 |
//! | `mq-ecn` | K_i = min(quantum_i/T_round, C)·RTT·λ, β = 0.75, T_idle = MTU/C | tcn.txt §3.3, §6 |
//! | `tcn` | T = λ·RTT, λ = 1 | tcn.txt §4.1 Eq. 3 |
//! | `codel` | target = 0.2048·RTT, interval = 4.096·RTT, maxpacket = MTU + 14 (Linux psched_mtu) | tcn.txt §6.1 (51.2 µs / 1024 µs at 250 µs); RFC 8289; Linux codel_impl.h |
//! | `ecn-sharp` | ins_target = RTT, pst_interval = RTT, pst_target = 0.425·RTT | ecnsharp.txt §3.4, §5.2 |
//! | `pred` | λ_QLA = 0.1/pkt, T_FCS = 1.25·RTT, T_QLA = 5·RTT, β = 0.4, Δλ = 0.025, λ_min = 0.05; min_K 10, q_left 15, Δmin_K 5 pkts, max_K 500 KB scaled by C·RTT/100 KB | pred.txt §IV-C, §VI |
//! | `diffecn` | K = 0.17·C·RTT, K_p = K/N_flow, T_period = 1.5·RTT | diffecn.txt Eq. 2, §VI-B |
//!
//! Overrides are applied to those defaults, by key, and the result is
//! validated; an unknown key is an error that lists the valid keys.

use super::codel::{self, Codel};
use super::dctcp::{self, Dctcp};
use super::diffecn::{self, DiffEcn};
use super::droptail::DropTail;
use super::ecnsharp::{self, EcnSharp};
use super::mqecn::{self, MqEcn};
use super::pred::{self, Pred};
use super::red::{self, Red};
use super::tcn::{self, Tcn};
use super::{Aqm, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{Nanos, Rate};
use serde::{Deserialize, Serialize};

/// Names accepted by `--aqm`.
pub const AQM_NAMES: [&str; 9] = [
    "droptail",
    "red",
    "dctcp",
    "mq-ecn",
    "tcn",
    "codel",
    "ecn-sharp",
    "pred",
    "diffecn",
];

/// What the port tells the AQM about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct AqmEnv {
    /// Emulated link rate C.
    pub rate: Rate,
    /// Base RTT the thresholds are derived from (`--rtt`), ns.
    pub rtt_ns: Nanos,
    /// Queues on the port.
    pub num_queues: usize,
    /// MTU-sized frame, bytes (T_idle, CoDel MAXPACKET).
    pub mtu_bytes: u32,
    /// Per-queue quanta in bytes — `Some` only for round-robin schedulers.
    pub quanta: Option<Vec<u64>>,
}

/// A setup mistake, with what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AqmConfigError {
    /// `--aqm` name not known.
    #[error("unknown AQM {0:?}; choose one of: {list}", list = AQM_NAMES.join(", "))]
    UnknownAqm(String),
    /// Override key not a parameter of this AQM.
    #[error("{aqm} has no parameter {key:?}; valid keys: {valid}", valid = if valid.is_empty() { "(none)".to_string() } else { valid.join(", ") })]
    UnknownKey {
        /// AQM name.
        aqm: &'static str,
        /// The key given.
        key: String,
        /// The keys it has.
        valid: Vec<String>,
    },
    /// A value that does not parse for its key.
    #[error("{aqm}: bad value for {key}: {msg}")]
    BadValue {
        /// AQM name.
        aqm: &'static str,
        /// The key.
        key: String,
        /// Why.
        msg: String,
    },
    /// `validate()` refused the combination.
    #[error("{0}")]
    Invalid(String),
    /// MQ-ECN without a round-robin scheduler.
    #[error("mq-ecn needs a round-robin scheduler (--sched dwrr or sp+dwrr); WFQ and SP have no round (tcn.txt §3.3)")]
    NeedsRoundRobin,
    /// PRED on an unshaped port.
    #[error("pred needs a shaped port (--rate): QLA's utility divides the goodput by the link rate C (pred.txt §IV-B)")]
    NeedsRate,
    /// Quanta given for a different number of queues.
    #[error("mq-ecn: {quanta} quanta given for {queues} queues")]
    QuantaMismatch {
        /// Quanta count.
        quanta: usize,
        /// Queue count.
        queues: usize,
    },
}

/// An AQM and its parameters, tagged by `kind` in TOML
/// (`[aqm] kind = "tcn"  threshold = "250us"`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind")]
pub enum AqmConfig {
    /// No AQM.
    #[serde(rename = "droptail")]
    DropTail,
    /// Floyd RED / point-slope RED.
    #[serde(rename = "red")]
    Red(red::Config),
    /// DCTCP single threshold.
    #[serde(rename = "dctcp")]
    Dctcp(dctcp::Config),
    /// MQ-ECN.
    #[serde(rename = "mq-ecn")]
    MqEcn(mqecn::Config),
    /// TCN.
    #[serde(rename = "tcn")]
    Tcn(tcn::Config),
    /// CoDel.
    #[serde(rename = "codel")]
    Codel(codel::Config),
    /// ECN♯.
    #[serde(rename = "ecn-sharp")]
    EcnSharp(ecnsharp::Config),
    /// PRED.
    #[serde(rename = "pred")]
    Pred(pred::Config),
    /// DiffECN's selective marking unit.
    #[serde(rename = "diffecn")]
    DiffEcn(diffecn::Config),
}

fn to_table<T: Serialize>(cfg: &T) -> toml::Table {
    match toml::Value::try_from(cfg) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    }
}

/// Reads a `--aqm-opt` (or `--raqm-opt`) value: bool, integer, float, else string.
pub(crate) fn cli_value(v: &str) -> toml::Value {
    let v = v.trim();
    if let Ok(b) = v.parse::<bool>() {
        toml::Value::Boolean(b)
    } else if let Ok(i) = v.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(f) = v.parse::<f64>() {
        toml::Value::Float(f)
    } else {
        toml::Value::String(v.to_string())
    }
}

/// Applies `key = value` overrides to `cfg`; an unknown key or a bad value
/// is an error naming it (also R-AQM's `--raqm-opt`).
pub(crate) fn apply<T>(
    aqm: &'static str,
    cfg: &T,
    opts: &[(String, toml::Value)],
) -> Result<T, AqmConfigError>
where
    T: Serialize + for<'de> Deserialize<'de>,
{
    let mut table = to_table(cfg);
    for (k, v) in opts {
        let key = k.trim().replace('-', "_");
        if !table.contains_key(&key) {
            return Err(AqmConfigError::UnknownKey {
                aqm,
                key: k.clone(),
                valid: table.keys().cloned().collect(),
            });
        }
        // Check this one value alone so the error names its key.
        let mut probe = table.clone();
        probe.insert(key.clone(), v.clone());
        if let Err(e) = toml::Value::Table(probe).try_into::<T>() {
            return Err(AqmConfigError::BadValue {
                aqm,
                key: k.clone(),
                msg: e.message().to_string(),
            });
        }
        table.insert(key, v.clone());
    }
    toml::Value::Table(table)
        .try_into::<T>()
        .map_err(|e| AqmConfigError::Invalid(format!("{aqm}: {}", e.message())))
}

/// The options of `--aqm name` that are queue-length thresholds (bytes, or
/// packets where the AQM counts packets): what scaling a scenario to another
/// link rate multiplies with the rate, so a threshold keeps its drain time
/// (`softswitch-exp run --rate`). Times, probabilities, slopes, weights and
/// table sizes are not lengths.
pub fn length_keys(name: &str) -> &'static [&'static str] {
    match name.trim().to_ascii_lowercase().as_str() {
        "red" => &["min_th", "max_th", "min_k", "max_k"],
        "dctcp" | "dctcp-ecn" => &["k"],
        "pred" => &["min_k", "delta_min_k", "max_k", "q_left", "q_right"],
        "diffecn" => &["k"],
        _ => &[],
    }
}

impl AqmConfig {
    /// The paper's defaults for `--aqm name`, scaled to `env` (see the table
    /// in the module header).
    pub fn defaults_for(name: &str, env: &AqmEnv) -> Result<Self, AqmConfigError> {
        let rtt = env.rtt_ns;
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "droptail" | "drop-tail" => AqmConfig::DropTail,
            "red" => AqmConfig::Red(red::Config::for_link(env.rate, rtt)),
            "dctcp" | "dctcp-ecn" => AqmConfig::Dctcp(dctcp::Config::for_link(env.rate, rtt, 1.0)),
            "mq-ecn" | "mqecn" => {
                AqmConfig::MqEcn(mqecn::Config::for_link(env.rate, rtt, env.mtu_bytes))
            }
            "tcn" => AqmConfig::Tcn(tcn::Config::for_rtt(rtt, 1.0)),
            "codel" => AqmConfig::Codel(codel::Config::for_rtt(rtt, env.mtu_bytes)),
            "ecn-sharp" | "ecnsharp" | "ecn#" => {
                AqmConfig::EcnSharp(ecnsharp::Config::for_rtt(rtt, 1.0))
            }
            "pred" => AqmConfig::Pred(pred::Config::for_link(env.rate, rtt, env.mtu_bytes)),
            "diffecn" => AqmConfig::DiffEcn(diffecn::Config::for_link(env.rate, rtt)),
            other => return Err(AqmConfigError::UnknownAqm(other.to_string())),
        })
    }

    /// The `--aqm` name of this AQM.
    pub fn name(&self) -> &'static str {
        match self {
            AqmConfig::DropTail => "droptail",
            AqmConfig::Red(_) => "red",
            AqmConfig::Dctcp(_) => "dctcp",
            AqmConfig::MqEcn(_) => "mq-ecn",
            AqmConfig::Tcn(_) => "tcn",
            AqmConfig::Codel(_) => "codel",
            AqmConfig::EcnSharp(_) => "ecn-sharp",
            AqmConfig::Pred(_) => "pred",
            AqmConfig::DiffEcn(_) => "diffecn",
        }
    }

    /// The keys `--aqm-opt` accepts for this AQM.
    pub fn valid_keys(&self) -> Vec<String> {
        let t = match self {
            AqmConfig::DropTail => toml::Table::new(),
            AqmConfig::Red(c) => to_table(c),
            AqmConfig::Dctcp(c) => to_table(c),
            AqmConfig::MqEcn(c) => to_table(c),
            AqmConfig::Tcn(c) => to_table(c),
            AqmConfig::Codel(c) => to_table(c),
            AqmConfig::EcnSharp(c) => to_table(c),
            AqmConfig::Pred(c) => to_table(c),
            AqmConfig::DiffEcn(c) => to_table(c),
        };
        t.keys().cloned().collect()
    }

    /// Applies `--aqm-opt key=value` pairs (values tc-style: `250us`, `32kb`,
    /// `0.1`, `true`, `probabilistic`), then validates.
    pub fn with_overrides(self, opts: &[(String, String)]) -> Result<Self, AqmConfigError> {
        let vals: Vec<(String, toml::Value)> = opts
            .iter()
            .map(|(k, v)| (k.clone(), cli_value(v)))
            .collect();
        self.with_toml_overrides(&vals)
    }

    /// Applies overrides given as TOML values (config file), then validates.
    pub fn with_toml_overrides(
        self,
        opts: &[(String, toml::Value)],
    ) -> Result<Self, AqmConfigError> {
        let name = self.name();
        let out = match &self {
            AqmConfig::DropTail => {
                if let Some((k, _)) = opts.first() {
                    return Err(AqmConfigError::UnknownKey {
                        aqm: name,
                        key: k.clone(),
                        valid: vec![],
                    });
                }
                AqmConfig::DropTail
            }
            AqmConfig::Red(c) => AqmConfig::Red(apply(name, c, opts)?),
            AqmConfig::Dctcp(c) => AqmConfig::Dctcp(apply(name, c, opts)?),
            AqmConfig::MqEcn(c) => AqmConfig::MqEcn(apply(name, c, opts)?),
            AqmConfig::Tcn(c) => AqmConfig::Tcn(apply(name, c, opts)?),
            AqmConfig::Codel(c) => AqmConfig::Codel(apply(name, c, opts)?),
            AqmConfig::EcnSharp(c) => AqmConfig::EcnSharp(apply(name, c, opts)?),
            AqmConfig::Pred(c) => AqmConfig::Pred(apply(name, c, opts)?),
            AqmConfig::DiffEcn(c) => AqmConfig::DiffEcn(apply(name, c, opts)?),
        };
        out.validate()?;
        Ok(out)
    }

    /// Reads a config file's `[aqm]` table: `kind` picks the AQM, every other
    /// key overrides its scaled defaults.
    pub fn from_toml(table: &toml::Table, env: &AqmEnv) -> Result<Self, AqmConfigError> {
        let kind = table.get("kind").and_then(|v| v.as_str()).ok_or_else(|| {
            AqmConfigError::Invalid(format!(
                "[aqm] needs kind = one of: {}",
                AQM_NAMES.join(", ")
            ))
        })?;
        let opts: Vec<(String, toml::Value)> = table
            .iter()
            .filter(|(k, _)| k.as_str() != "kind")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self::defaults_for(kind, env)?.with_toml_overrides(&opts)
    }

    /// Runs the AQM's own checks.
    pub fn validate(&self) -> Result<(), AqmConfigError> {
        let r = match self {
            AqmConfig::DropTail => Ok(()),
            AqmConfig::Red(c) => c.validate(),
            AqmConfig::Dctcp(c) => c.validate(),
            AqmConfig::MqEcn(c) => c.validate(),
            AqmConfig::Tcn(c) => c.validate(),
            AqmConfig::Codel(c) => c.validate(),
            AqmConfig::EcnSharp(c) => c.validate(),
            AqmConfig::Pred(c) => c.validate(),
            AqmConfig::DiffEcn(c) => c.validate(),
        };
        r.map_err(AqmConfigError::Invalid)
    }

    /// Builds the port's AQM instance.
    pub fn build(&self, env: &AqmEnv) -> Result<AqmKind, AqmConfigError> {
        self.validate()?;
        let n = env.num_queues.max(1);
        Ok(match self {
            AqmConfig::DropTail => AqmKind::DropTail(DropTail),
            AqmConfig::Red(c) => AqmKind::Red(Red::new(c.clone(), n, env.rate)),
            AqmConfig::Dctcp(c) => AqmKind::Dctcp(Dctcp::new(c.clone())),
            AqmConfig::MqEcn(c) => {
                let quanta = env.quanta.clone().ok_or(AqmConfigError::NeedsRoundRobin)?;
                if quanta.len() != n {
                    return Err(AqmConfigError::QuantaMismatch {
                        quanta: quanta.len(),
                        queues: n,
                    });
                }
                AqmKind::MqEcn(MqEcn::new(c.clone(), quanta, env.rate))
            }
            AqmConfig::Tcn(c) => AqmKind::Tcn(Tcn::new(c.clone())),
            AqmConfig::Codel(c) => AqmKind::Codel(Codel::new(c.clone(), n)),
            AqmConfig::EcnSharp(c) => AqmKind::EcnSharp(EcnSharp::new(c.clone(), n)),
            AqmConfig::Pred(c) => {
                if env.rate.bps() == 0 {
                    return Err(AqmConfigError::NeedsRate);
                }
                AqmKind::Pred(Box::new(Pred::new(c.clone(), n, env.rate, env.mtu_bytes)))
            }
            AqmConfig::DiffEcn(c) => AqmKind::DiffEcn(DiffEcn::new(c.clone(), n, 0)),
        })
    }

    /// One line with the effective values, for the start-up banner.
    pub fn describe(&self) -> String {
        match self {
            AqmConfig::DropTail => "droptail: no AQM, port buffer limit only".into(),
            AqmConfig::Red(c) => c.describe(),
            AqmConfig::Dctcp(c) => c.describe(),
            AqmConfig::MqEcn(c) => c.describe(),
            AqmConfig::Tcn(c) => c.describe(),
            AqmConfig::Codel(c) => c.describe(),
            AqmConfig::EcnSharp(c) => c.describe(),
            AqmConfig::Pred(c) => c.describe(),
            AqmConfig::DiffEcn(c) => c.describe(),
        }
    }
}

/// The port's AQM: enum dispatch, no `Box<dyn>` on the per-packet path.
#[derive(Clone, Debug)]
pub enum AqmKind {
    /// No AQM.
    DropTail(DropTail),
    /// RED.
    Red(Red),
    /// DCTCP.
    Dctcp(Dctcp),
    /// MQ-ECN.
    MqEcn(MqEcn),
    /// TCN.
    Tcn(Tcn),
    /// CoDel.
    Codel(Codel),
    /// ECN♯.
    EcnSharp(EcnSharp),
    /// PRED (boxed: its flow counter and QLA state make it the largest).
    Pred(Box<Pred>),
    /// DiffECN (SMU).
    DiffEcn(DiffEcn),
}

macro_rules! dispatch {
    ($self:ident, $a:ident => $e:expr) => {
        match $self {
            AqmKind::DropTail($a) => $e,
            AqmKind::Red($a) => $e,
            AqmKind::Dctcp($a) => $e,
            AqmKind::MqEcn($a) => $e,
            AqmKind::Tcn($a) => $e,
            AqmKind::Codel($a) => $e,
            AqmKind::EcnSharp($a) => $e,
            AqmKind::Pred($a) => $e,
            AqmKind::DiffEcn($a) => $e,
        }
    };
}

impl AqmKind {
    /// Internal state and counters as JSON (MQ-ECN T_round and K_i, CoDel
    /// count/dropping, ECN♯ marking_state/count, RED avg, ...).
    pub fn report(&self) -> serde_json::Value {
        dispatch!(self, a => a.report())
    }
    /// The `--aqm` name.
    pub fn name(&self) -> &'static str {
        match self {
            AqmKind::DropTail(_) => "droptail",
            AqmKind::Red(_) => "red",
            AqmKind::Dctcp(_) => "dctcp",
            AqmKind::MqEcn(_) => "mq-ecn",
            AqmKind::Tcn(_) => "tcn",
            AqmKind::Codel(_) => "codel",
            AqmKind::EcnSharp(_) => "ecn-sharp",
            AqmKind::Pred(_) => "pred",
            AqmKind::DiffEcn(_) => "diffecn",
        }
    }
    /// The RED instance, for PRED's controller (`set_point_slope`).
    pub fn as_red_mut(&mut self) -> Option<&mut Red> {
        match self {
            AqmKind::Red(r) => Some(r),
            _ => None,
        }
    }
}

impl Aqm for AqmKind {
    #[inline]
    fn on_enqueue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        dispatch!(self, a => a.on_enqueue(pkt, q, now, rng))
    }
    #[inline]
    fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
        dispatch!(self, a => a.on_dequeue(pkt, q, now, rng))
    }
    #[inline]
    fn on_round(&mut self, queue: usize, now: Nanos) {
        dispatch!(self, a => a.on_round(queue, now))
    }
    #[inline]
    fn on_idle(&mut self, now: Nanos) {
        dispatch!(self, a => a.on_idle(now))
    }
    #[inline]
    fn on_tick(&mut self, now: Nanos) {
        dispatch!(self, a => a.on_tick(now))
    }
    #[inline]
    fn next_tick(&self) -> Option<Nanos> {
        dispatch!(self, a => a.next_tick())
    }
    fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
        dispatch!(self, a => a.gauges(emit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::US;

    fn env() -> AqmEnv {
        AqmEnv {
            rate: Rate::gbit(1),
            rtt_ns: 250 * US,
            num_queues: 2,
            mtu_bytes: 1500,
            quanta: None,
        }
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn tcn_threshold_is_lambda_rtt() {
        let c = AqmConfig::defaults_for("tcn", &env()).unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(t.threshold, 250 * US);
        assert!(c.describe().contains("250us"), "{}", c.describe());
        let mut e = env();
        e.rtt_ns = 100 * US;
        let AqmConfig::Tcn(t) = AqmConfig::defaults_for("tcn", &e).unwrap() else {
            panic!()
        };
        assert_eq!(t.threshold, 100 * US);
    }

    #[test]
    fn scaled_defaults() {
        let e = env();
        let AqmConfig::Dctcp(d) = AqmConfig::defaults_for("dctcp", &e).unwrap() else {
            panic!()
        };
        assert_eq!(d.k, 31_250); // λ·C·RTT
        let mut e10 = e.clone();
        e10.rate = Rate::gbit(10);
        e10.rtt_ns = 100 * US;
        let AqmConfig::Dctcp(d) = AqmConfig::defaults_for("dctcp", &e10).unwrap() else {
            panic!()
        };
        assert_eq!(d.k, 125_000); // tcn.txt §3.3
        let AqmConfig::Codel(c) = AqmConfig::defaults_for("codel", &e).unwrap() else {
            panic!()
        };
        assert_eq!((c.target, c.interval), (51_200, 1_024_000)); // tcn.txt §6.1
        let mut e200 = e.clone();
        e200.rtt_ns = 200 * US;
        let AqmConfig::EcnSharp(s) = AqmConfig::defaults_for("ecn-sharp", &e200).unwrap() else {
            panic!()
        };
        assert_eq!(
            (s.ins_target, s.pst_interval, s.pst_target),
            (200 * US, 200 * US, 85 * US)
        ); // §5.2
        let AqmConfig::MqEcn(m) = AqmConfig::defaults_for("mq-ecn", &e).unwrap() else {
            panic!()
        };
        assert_eq!((m.beta, m.t_idle), (0.75, 12 * US));
        let AqmConfig::Red(r) = AqmConfig::defaults_for("red", &e).unwrap() else {
            panic!()
        };
        assert_eq!((r.min_th, r.max_th), (10_416, 31_250));
        for name in AQM_NAMES {
            let c = AqmConfig::defaults_for(name, &e).unwrap();
            c.validate().unwrap();
            assert_eq!(c.name(), name);
        }
    }

    #[test]
    fn overrides_parse_tc_units_and_validate() {
        let c = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[kv("threshold", "50us")])
            .unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(t.threshold, 50 * US);
        let c = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[
                kv("mode", "probabilistic"),
                kv("t-min", "20us"),
                kv("t_max", "80us"),
                kv("p_max", "1"),
            ])
            .unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(
            (t.mode, t.t_min, t.t_max, t.p_max),
            (tcn::Mode::Probabilistic, 20 * US, 80 * US, 1.0)
        );
        let c = AqmConfig::defaults_for("dctcp", &env())
            .unwrap()
            .with_overrides(&[kv("k", "32kb"), kv("occupancy", "port")])
            .unwrap();
        let AqmConfig::Dctcp(d) = &c else { panic!() };
        assert_eq!(d.k, 32 * 1024);
        assert_eq!(d.occupancy, crate::aqm::Occupancy::Port);
    }

    #[test]
    fn bad_override_key_lists_valid_keys() {
        let e = AqmConfig::defaults_for("ecn-sharp", &env())
            .unwrap()
            .with_overrides(&[kv("target", "10us")])
            .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, AqmConfigError::UnknownKey { .. }));
        assert!(
            msg.contains("ins_target")
                && msg.contains("pst_interval")
                && msg.contains("pst_target"),
            "{msg}"
        );
        let e = AqmConfig::DropTail
            .with_overrides(&[kv("k", "1")])
            .unwrap_err();
        assert!(e.to_string().contains("(none)"));
    }

    #[test]
    fn bad_values_and_validation_errors() {
        let e = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[kv("threshold", "50 parsecs")])
            .unwrap_err();
        assert!(matches!(e, AqmConfigError::BadValue { .. }), "{e}");
        assert!(e.to_string().contains("threshold"));
        let e = AqmConfig::defaults_for("codel", &env())
            .unwrap()
            .with_overrides(&[kv("target", "2ms"), kv("interval", "1ms")])
            .unwrap_err();
        assert!(matches!(e, AqmConfigError::Invalid(_)), "{e}");
        let e = AqmConfig::defaults_for("red", &env())
            .unwrap()
            .with_overrides(&[kv("min_th", "40kb")])
            .unwrap_err();
        assert!(e.to_string().contains("min_th"), "{e}");
        assert!(matches!(
            AqmConfig::defaults_for("pie", &env()),
            Err(AqmConfigError::UnknownAqm(_))
        ));
    }

    #[test]
    fn mq_ecn_needs_a_round_robin_scheduler() {
        let c = AqmConfig::defaults_for("mq-ecn", &env()).unwrap();
        let e = c.build(&env()).unwrap_err();
        assert!(e.to_string().contains("--sched dwrr"), "{e}");
        let mut rr = env();
        rr.quanta = Some(vec![1500, 1500]);
        let k = c.build(&rr).unwrap();
        assert_eq!(k.report()["k_bytes"][0], 31_250);
        rr.quanta = Some(vec![1500]);
        assert!(matches!(
            c.build(&rr),
            Err(AqmConfigError::QuantaMismatch { .. })
        ));
    }

    #[test]
    fn toml_table_and_serde_roundtrip() {
        let t: toml::Table = toml::from_str("kind = \"tcn\"\nthreshold = \"80us\"").unwrap();
        let c = AqmConfig::from_toml(&t, &env()).unwrap();
        let AqmConfig::Tcn(tc) = &c else { panic!() };
        assert_eq!(tc.threshold, 80 * US);
        // Full tagged form.
        let full: AqmConfig =
            toml::from_str("kind = \"codel\"\ntarget = \"50us\"\ninterval = \"1ms\"").unwrap();
        let AqmConfig::Codel(cd) = &full else {
            panic!()
        };
        assert_eq!(
            (cd.target, cd.interval, cd.maxpacket),
            (50 * US, 1_000_000, 1514) // one MTU frame, Linux psched_mtu()
        );
        let s = toml::to_string(&c).unwrap();
        let back: AqmConfig = toml::from_str(&s).unwrap();
        assert_eq!(back, c);
        assert!(toml::from_str::<AqmConfig>("kind = \"tcn\"\nbogus = 1").is_err());
    }

    #[test]
    fn build_every_kind_and_dispatch() {
        let mut e = env();
        e.quanta = Some(vec![1500, 1500]);
        let mut rng = SimRng::new(1);
        for name in AQM_NAMES {
            let mut k = AqmConfig::defaults_for(name, &e)
                .unwrap()
                .build(&e)
                .unwrap();
            assert_eq!(k.name(), name);
            let p = crate::aqm::util::testutil::ect(1500, 0);
            let q = QueueCtx::default();
            assert_eq!(k.on_enqueue(&p, &q, 1, &mut rng), Verdict::Pass);
            assert_eq!(k.on_dequeue(&p, &q, 2, &mut rng), Verdict::Pass);
            k.on_round(0, 3);
            k.on_idle(4);
            assert!(k.report().is_object());
        }
    }
}

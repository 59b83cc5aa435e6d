//! The switch's configuration: a TOML file and command-line flags, merged
//! (flags win), validated, and turned into per-port settings.
//!
//! ```toml
//! ports = ["veth0", "veth1"]
//! rate = "1gbit"          # emulated link rate of every port
//! buffer = "96kb"         # shared buffer per port
//! delay = "0"             # one-way delay after the shaper
//! rtt = "250us"           # base RTT the AQM defaults are scaled to
//! queues = 8
//! sched = "dwrr"          # sp | dwrr | wfq | sp+dwrr | sp+wfq
//! quantum = [1514]        # per queue (one value = all queues)
//! aqm = "tcn"             # droptail | red | dctcp | mq-ecn | tcn | codel | ecn-sharp
//! [aqm_opts]              # the AQM's own parameters, e.g.
//! threshold = "100us"
//! [port.veth1]            # per-port overrides
//! delay = "50us"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::units::{self, Nanos, Rate};

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
    /// Shared buffer per port.
    pub buffer: Option<String>,
    /// Per-queue limit.
    pub queue_limit: Option<String>,
    /// One-way delay.
    pub delay: Option<String>,
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
    /// Strict-priority queues (for sp+dwrr / sp+wfq).
    pub strict: Option<Vec<usize>>,
    /// DSCP → queue map (64 entries or fewer; missing = dscp mod queues).
    pub dscp_map: Option<Vec<usize>>,
    /// AQM name.
    pub aqm: Option<String>,
    /// AQM parameters.
    pub aqm_opts: Option<BTreeMap<String, toml::Value>>,
    /// What to do with a packet the AQM marks but that is Not-ECT: drop | pass.
    pub not_ect: Option<String>,
    /// MAC ageing time.
    pub ageing: Option<String>,
    /// UMEM frames.
    pub frames: Option<u32>,
    /// Seed for the AQMs' random decisions.
    pub seed: Option<u64>,
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

/// Reads a time setting.
pub fn time_setting(key: &str, s: &str) -> Result<Nanos, ConfigError> {
    units::parse_duration(s).map_err(|err| ConfigError::Unit {
        key: key.into(),
        err,
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
}

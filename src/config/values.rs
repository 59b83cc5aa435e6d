//! Reading one setting's text (rates, sizes, times, shares, `NAME=VALUE`),
//! and the error a user must fix, naming the setting.

use std::collections::BTreeMap;

use crate::units::{self, Nanos, Rate};

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
    /// Not a mistake: `--aqm-opt help=1` asked for the AQM's parameters,
    /// and this is the list (the binary prints it and exits 0).
    #[error("{0}")]
    Help(String),
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

/// Splits one `NAME=VALUE` of a repeatable flag (`--port-delay`, `--aqm-opt`).
pub(super) fn key_value<'a>(flag: &str, s: &'a str) -> Result<(&'a str, &'a str), ConfigError> {
    s.split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            ConfigError::Invalid(format!(
                "{flag} {s:?}: write it as NAME=VALUE, e.g. {flag} veth1=50us"
            ))
        })
}

/// Every `NAME=VALUE` of a repeatable flag, in order.
pub(super) fn pairs(flag: &str, list: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    list.iter()
        .map(|s| key_value(flag, s).map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

/// Every `NAME=VALUE` of a repeatable flag by name (the last one wins).
pub(super) fn by_name(
    flag: &str,
    list: &[String],
) -> Result<BTreeMap<String, String>, ConfigError> {
    Ok(pairs(flag, list)?.into_iter().collect())
}

/// A config-file table (`[aqm_opts]`) as key / value pairs.
pub(super) fn table_pairs(
    table: &Option<BTreeMap<String, toml::Value>>,
) -> Vec<(String, toml::Value)> {
    table.clone().unwrap_or_default().into_iter().collect()
}

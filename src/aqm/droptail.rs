//! Drop-tail: no AQM at all. The only limit is the port's shared buffer
//! (README, "Flags": `--buffer`), enforced by the port before the AQM is asked.

use super::params::{AqmConfigError, AqmEnv, AqmParams};
use super::Aqm;
use serde::{Deserialize, Serialize};

/// The do-nothing AQM: every hook keeps its `Pass` default.
#[derive(Clone, Debug, Default)]
pub struct DropTail;

impl Aqm for DropTail {}

impl DropTail {
    /// Nothing to report.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "droptail" })
    }
}

/// Drop-tail has no parameters.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {}

impl Config {
    /// Nothing to check.
    pub fn validate(&self) -> Result<(), String> {
        Ok(())
    }
    /// One line for the start-up banner.
    pub fn describe(&self) -> String {
        "droptail: no AQM, port buffer limit only".into()
    }
}

impl AqmParams for Config {
    type Instance = DropTail;
    const KEYS: &'static [(&'static str, &'static str)] = &[];
    fn for_port(_env: &AqmEnv) -> Self {
        Config {}
    }
    fn build(&self, _env: &AqmEnv) -> Result<DropTail, AqmConfigError> {
        Ok(DropTail)
    }
}

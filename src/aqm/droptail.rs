//! Drop-tail: no AQM at all. The only limit is the port's shared buffer
//! (SPEC §1 "Buffer"), enforced by the port before the AQM is asked.

use super::Aqm;

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

//! The value a scenario sweeps besides the AQM: a load, a fan-in, a number
//! of flows (the x of every table and figure).

use serde::{Deserialize, Serialize};

/// The swept x value of a combination.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepValue {
    /// Workload load.
    Load(f64),
    /// Incast fan-in.
    Fanin(usize),
    /// Static flows: the number of flows of the `count = "sweep"` entries.
    Flows(usize),
    /// Static flows: nothing swept but the AQM.
    #[default]
    None,
}

impl SweepValue {
    /// Numeric x for tables and plots (0 for `None`).
    pub fn x(&self) -> f64 {
        match *self {
            SweepValue::Load(l) => l,
            SweepValue::Fanin(n) | SweepValue::Flows(n) => n as f64,
            SweepValue::None => 0.0,
        }
    }

    /// Directory-name fragment: `load0.50`, `fanin8`, or empty.
    pub fn tag(&self) -> String {
        match *self {
            SweepValue::Load(l) => format!("load{l:.2}"),
            SweepValue::Fanin(n) => format!("fanin{n}"),
            SweepValue::Flows(n) => format!("flows{n}"),
            SweepValue::None => String::new(),
        }
    }
}

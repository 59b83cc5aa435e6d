//! The experiment runner (`softswitch-exp`): a scenario file names
//! a topology, a switch configuration, a traffic pattern and the sweep (AQMs
//! × loads or fan-ins × repeats); the runner builds the namespaces once,
//! runs the switch and the traffic generator for every combination, and
//! writes raw records, a time series of the queues, summaries the way the
//! papers report them, and plots.
//!
//! * [`scenario`] — the TOML format, validation, sweep expansion (no root).
//! * [`placement`] — a fabric split over parts, and the machines (network
//!   namespaces) they run on (no root).
//! * [`results`] — what one combination produced (`result.json`), host TCP
//!   counters (no root).
//! * [`stats`] — intervals, tests and corrections across repeats (no root).
//! * [`summary`] — every number with its spread across repeats, every
//!   scheme against the baseline with a verdict (no root).
//! * [`report`] — `summary.json`, `stats.csv` and the figures rebuilt from a
//!   results directory, after a run or later (no root).
//! * [`tidy`] — `flows.csv`, `queries.csv` and `repeats.csv`: one
//!   observation per row, every combination in one table (no root).
//! * [`timeseries`] — the live-stats samples and their CSV (no root).
//! * [`plot`], [`figures`] — PNG/SVG line charts with error bars and a CSV
//!   of what each plots (no root).
//! * [`scale`] — scaling a scenario to another link rate; the calibrations
//!   that find the smallest time dilation D (default) or the highest rate
//!   at which this machine holds it faithfully.
//! * [`runner`] — processes, namespaces, guards (root).

pub mod archive;
pub mod figures;
pub mod kinds;
pub mod markdown;
pub mod placement;
pub mod plan;
pub mod plot;
pub mod report;
pub mod results;
pub mod runner;
pub mod scale;
pub mod scenario;
pub mod stats;
pub mod summary;
pub mod sweep;
pub mod tidy;
pub mod timeseries;

pub use runner::{run, Fault, RunOptions, RunReport};
pub use scenario::{Combo, Scenario, ScenarioError, SweepValue, TrafficSpec};

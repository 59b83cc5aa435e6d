//! The traffic kinds of a scenario (`[traffic] kind = "..."`). A kind is
//! one file here — its `[traffic]` keys (a serde struct) and its one
//! implementation of [`TrafficKind`]: how it is checked, what it sweeps,
//! how long it runs, which generators a combination starts and how their
//! reports are read — and one line in [`TrafficSpec`], as an AQM is one
//! file in `src/aqm/` and one line in its registry. The runner, the plan,
//! the summary and the figures ask the kind through [`TrafficSpec::kind`],
//! never by matching on it.
//!
//! Nothing here imports the scenario or the runner: a kind is told what it
//! needs ([`Combination`]) and answers with data ([`Generator`]).

mod incast;
mod statics;
mod workload;

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use incast::IncastSpec;
pub use statics::{FlowCount, PingSpec, StaticFlow, StaticSpec};
pub use workload::WorkloadSpec;

use super::results::ComboResult;
use super::sweep::SweepValue;
use crate::units::parse_duration;

/// `[traffic]`, chosen by `kind`: one line per kind.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TrafficSpec {
    /// Poisson arrivals of flows with sizes from a CDF, at swept loads.
    Workload(WorkloadSpec),
    /// N senders answer one receiver at once, at swept fan-ins.
    Incast(IncastSpec),
    /// Long-lived flows, each on its DSCP / queue.
    Static(StaticSpec),
}

impl TrafficSpec {
    /// The kind, to ask.
    pub fn kind(&self) -> &dyn TrafficKind {
        match self {
            TrafficSpec::Workload(w) => w,
            TrafficSpec::Incast(i) => i,
            TrafficSpec::Static(s) => s,
        }
    }

    /// The kind, to change (`--rate` scaling, calibration's heaviest point).
    pub fn kind_mut(&mut self) -> &mut dyn TrafficKind {
        match self {
            TrafficSpec::Workload(w) => w,
            TrafficSpec::Incast(i) => i,
            TrafficSpec::Static(s) => s,
        }
    }
}

/// What a kind is told about the combination it runs in.
pub struct Combination<'a> {
    /// The swept value of the combination.
    pub sweep: SweepValue,
    /// The seed of the combination's repeat (each client adds its index).
    pub seed: u64,
    /// A `--quick` run.
    pub quick: bool,
    /// The switch's link rate (`switch.rate`, what loads refer to).
    pub rate: &'a str,
    /// Where the scenario file is (relative paths, e.g. a CDF).
    pub scenario_dir: &'a Path,
    /// `ip:port` of a host's server (1-based host).
    pub addr: &'a dyn Fn(usize) -> String,
}

/// One `softswitch-tg` process a combination starts: in `host`, with
/// `args`, writing `<stem>.json` (and logging to `<stem>.log`) in the
/// combination's directory.
#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    /// The host it runs in (1-based).
    pub host: usize,
    /// Its arguments (without `--dilation`, which the runner adds).
    pub args: Vec<String>,
    /// The stem of its files.
    pub stem: String,
    /// Its name in results (a static flow's label).
    pub label: String,
    /// The DSCP of its flows.
    pub dscp: u8,
}

/// What a [`Generator`] wrote: its JSON, with its label and DSCP.
pub struct Report<'a> {
    /// The generator's JSON (`config`, `report`).
    pub json: &'a Value,
    /// As [`Generator::label`].
    pub label: &'a str,
    /// As [`Generator::dscp`].
    pub dscp: u8,
}

/// A traffic kind.
pub trait TrafficKind {
    /// Checks the kind's keys (`hosts`: the scenario's host count); the
    /// first problem, phrased so the user knows what to change.
    fn validate(&self, hosts: usize) -> Result<(), String>;

    /// The swept values, in order.
    fn sweep(&self) -> Vec<SweepValue>;

    /// What the swept value is called on a figure's x axis.
    fn x_label(&self) -> &'static str;

    /// The metrics the console shows per point.
    fn headline(&self) -> &'static [&'static str];

    /// Every (receiving host, sending host) pair of its traffic, 1-based.
    fn pairs(&self) -> Vec<(usize, usize)>;

    /// Hosts that run a `softswitch-tg server`, 1-based.
    fn servers(&self) -> Vec<usize> {
        self.pairs().into_iter().map(|(_, s)| s).collect()
    }

    /// Expected emulated seconds of one combination's traffic.
    fn seconds(&self, c: &Combination) -> Result<f64>;

    /// Keeps only the heaviest swept value (calibration runs the point
    /// that is hardest to hold).
    fn keep_heaviest(&mut self);

    /// Checks what needs the file system (a CDF file), before a run.
    fn preflight(&self, _scenario_dir: &Path) -> Result<()> {
        Ok(())
    }

    /// The generators of one combination.
    fn generators(&self, c: &Combination) -> Result<Vec<Generator>>;

    /// Adds one generator's report to the combination's result.
    fn read(&self, g: &Report, r: &mut ComboResult) -> Result<()>;

    /// Scales what the kind holds in bit rates by `f` (`softswitch-exp
    /// --rate`: a paced flow keeps its share of the link), noting each
    /// change.
    fn scale_rates(&mut self, _f: f64, _changes: &mut Vec<String>) -> Result<(), String> {
        Ok(())
    }

    /// The static kind, for what only it has (its flows' rates to scale,
    /// its ping probe, its per-flow figures).
    fn as_static(&self) -> Option<&StaticSpec> {
        None
    }
}

/// Hosts are numbered 1..=`hosts`, each named once.
pub(crate) fn check_hosts(hosts: usize, what: &str, list: &[usize]) -> Result<(), String> {
    for &h in list {
        if h == 0 || h > hosts {
            return Err(format!(
                "{what}: host {h} does not exist — hosts are numbered 1..={hosts} (topology.hosts)"
            ));
        }
    }
    if let Some(d) = first_duplicate(list) {
        return Err(format!("{what} lists host {d} twice"));
    }
    Ok(())
}

/// A time with its unit.
pub(crate) fn check_duration(what: &str, s: &str) -> Result<(), String> {
    parse_duration(s)
        .map(|_| ())
        .map_err(|e| format!("{what} `{s}`: {e}"))
}

/// A DSCP, 0..=63.
pub(crate) fn check_dscp(d: u8) -> Result<(), String> {
    if d > 63 {
        return Err(format!("DSCP {d} is outside 0..=63"));
    }
    Ok(())
}

/// The first value `v` holds twice.
pub(crate) fn first_duplicate<T: PartialEq + Clone>(v: &[T]) -> Option<T> {
    v.iter()
        .enumerate()
        .find(|(i, x)| v[..*i].contains(x))
        .map(|(_, x)| x.clone())
}

/// The (receiver, sender) pairs each once, in order.
fn dedup_pairs(mut pairs: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut seen = std::collections::BTreeSet::new();
    pairs.retain(|p| seen.insert(*p));
    pairs
}

/// A relative path from the scenario's directory if it exists there, else
/// as given (from the current directory).
pub fn resolve_path(base: &Path, p: &str) -> std::path::PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        return p.to_owned();
    }
    let b = base.join(p);
    if b.exists() {
        return b.canonicalize().unwrap_or(b);
    }
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The flow records of a generator's report.
fn flow_rows(g: &Report) -> Result<Vec<super::results::FlowRow>> {
    Ok(serde_json::from_value(g.json["report"]["flows"].clone())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> TrafficSpec {
        toml::from_str(text).unwrap()
    }

    fn addr(h: usize) -> String {
        format!("10.0.0.{h}:5001")
    }

    /// Repeat 7's seed, 1 Gbit/s, the repository's own directory.
    fn combination(sweep: SweepValue, quick: bool) -> Combination<'static> {
        Combination {
            sweep,
            seed: 7000,
            quick,
            rate: "1gbit",
            scenario_dir: Path::new(env!("CARGO_MANIFEST_DIR")),
            addr: &addr,
        }
    }

    fn gens(t: &TrafficSpec, sweep: SweepValue, quick: bool) -> Vec<Generator> {
        t.kind().generators(&combination(sweep, quick)).unwrap()
    }

    fn sorted(mut v: Vec<usize>) -> Vec<usize> {
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn a_workload_starts_one_client_per_receiver_asking_every_server() {
        let t = spec(
            "kind = \"workload\"\ncdf = \"cdf/websearch.txt\"\nload = [0.3, 0.7]\n\
             flows = 100\nclients = [4, 5]\nservers = [1, 2]\n",
        );
        let k = t.kind();
        assert_eq!(k.validate(5), Ok(()));
        assert!(k.validate(4).unwrap_err().contains("host 5 does not exist"));
        assert_eq!(k.sweep(), [SweepValue::Load(0.3), SweepValue::Load(0.7)]);
        assert_eq!(k.pairs(), [(4, 1), (4, 2), (5, 1), (5, 2)]);
        assert_eq!(sorted(k.servers()), [1, 2]);
        assert!(k.preflight(Path::new(env!("CARGO_MANIFEST_DIR"))).is_ok());
        let missing = spec(
            "kind = \"workload\"\ncdf = \"no/such.txt\"\nload = [0.3]\n\
             flows = 100\nclients = [4]\nservers = [1]\n",
        );
        assert!(missing.kind().preflight(Path::new("/nonexistent")).is_err());
        let g = gens(&t, SweepValue::Load(0.7), true);
        assert_eq!(g.len(), 2);
        assert_eq!((g[1].host, g[1].stem.as_str()), (5, "flows-h5"));
        let a = g[1].args.join(" ");
        for want in [
            "client --servers 10.0.0.1:5001,10.0.0.2:5001 --cdf ",
            "--load 0.7 --rate 1gbit --flows 20 --conns 4 --dscp 0 --seed 7001 ",
            "--json-out flows-h5.json",
        ] {
            assert!(a.contains(want), "want `{want}` in {a}");
        }
        // Without a load, no generator.
        let c = combination(SweepValue::Fanin(2), false);
        assert!(k.generators(&c).is_err());
    }

    #[test]
    fn an_incast_asks_its_first_senders_and_reads_flows_and_queries() {
        let t = spec(
            "kind = \"incast\"\nreceiver = 4\nservers = [1, 2, 3]\nfanin = [2, 3]\n\
             size = \"64kb\"\nqueries = 50\ninterval = \"5ms\"\nfresh = true\n",
        );
        let k = t.kind();
        assert_eq!(k.validate(4), Ok(()));
        let e = spec(&format!(
            "kind = \"incast\"\nreceiver = 4\nservers = [1, 2, 3]\nfanin = [4]\nsize = \"64kb\"\n"
        ));
        assert!(e
            .kind()
            .validate(4)
            .unwrap_err()
            .contains("needs 4 senders"));
        assert_eq!(k.pairs(), [(4, 1), (4, 2), (4, 3)]);
        assert_eq!(k.x_label(), "fan-in");
        let g = gens(&t, SweepValue::Fanin(2), false);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].host, g[0].stem.as_str()), (4, "incast"));
        assert_eq!(
            g[0].args.join(" "),
            "incast --servers 10.0.0.1:5001,10.0.0.2:5001 --size 64kb --queries 50 \
             --interval 5ms --dscp 0 --out incast_flows.txt --qct-out incast_queries.txt \
             --json-out incast.json --fresh"
        );
        // 50 queries 5 ms apart; three 64 KB answers take 1.6 ms at 1 Gbit/s.
        let c = combination(SweepValue::Fanin(3), false);
        assert!((k.seconds(&c).unwrap() - 0.25).abs() < 1e-9);
        let json = serde_json::json!({
            "config": {"queries": 50, "servers": ["a", "b"]},
            "report": {"flows": [], "queries": []},
        });
        let mut r = ComboResult::default();
        k.read(
            &Report {
                json: &json,
                label: "h4",
                dscp: 0,
            },
            &mut r,
        )
        .unwrap();
        assert_eq!(r.expected, 100, "queries x senders");
    }

    #[test]
    fn a_static_kind_starts_each_entry_s_flows_and_reads_one_result_each() {
        let mut t = spec(
            "kind = \"static\"\nduration = \"10s\"\nflows_sweep = [2, 4]\n\
             flows = [{ server = 1, client = 3, count = \"sweep\" },\
             { server = 2, client = 3, dscp = 2, rate = \"100mbit\", start = \"5s\" }]\n",
        );
        let k = t.kind();
        assert_eq!(k.validate(3), Ok(()));
        assert_eq!(k.sweep(), [SweepValue::Flows(2), SweepValue::Flows(4)]);
        assert_eq!(sorted(k.servers()), [1, 2]);
        let g = gens(&t, SweepValue::Flows(4), false);
        assert_eq!(g.len(), 5, "four of the swept entry, one of the other");
        assert_eq!(g[3].stem, "long0.3-h1-h3");
        assert_eq!(g[4].stem, "long1-h2-h3");
        assert_eq!(g[4].label, "f1 h2→h3 dscp 2");
        let a = g[4].args.join(" ");
        assert!(
            a.contains("--duration 10000ms --delay 5000ms --dscp 2"),
            "{a}"
        );
        assert!(a.ends_with("--rate 100mbit"), "{a}");
        // A quick run shrinks the run and the start alike.
        let q = gens(&t, SweepValue::Flows(2), true);
        assert!(q[2]
            .args
            .join(" ")
            .contains("--duration 2000ms --delay 1000ms"));
        let json = serde_json::json!({"report": {"goodput_mbps": 93.5, "start_ms": 5000}});
        let mut r = ComboResult::default();
        k.read(
            &Report {
                json: &json,
                label: "f1",
                dscp: 2,
            },
            &mut r,
        )
        .unwrap();
        assert_eq!((r.expected, r.statics.len()), (1, 1));
        assert_eq!((r.statics[0].goodput_mbps, r.statics[0].dscp), (93.5, 2));
        let mut changes = Vec::new();
        t.kind_mut().scale_rates(0.5, &mut changes).unwrap();
        assert_eq!(
            t.kind().as_static().unwrap().flows[1].rate.as_deref(),
            Some("50mbit")
        );
        assert_eq!(changes.len(), 1);
        t.kind_mut().keep_heaviest();
        assert_eq!(t.kind().sweep(), [SweepValue::Flows(4)]);
    }
}

//! `kind = "static"`: long-lived flows, each on its DSCP / queue, for a
//! fixed time (or a size), optionally with a swept number of flows and a
//! ping probe; one `softswitch-tg long` per flow, in its receiving host.

use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{
    check_dscp, check_duration, check_hosts, strings, Combination, Generator, Report, TrafficKind,
};
use crate::exp::results::{ComboResult, StaticFlowResult};
use crate::exp::sweep::SweepValue;
use crate::units::{parse_duration, parse_rate, parse_size};

/// `kind = "static"`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticSpec {
    /// How long every flow runs.
    pub duration: String,
    /// Duration with `--quick` (default a fifth, at least 2 s).
    #[serde(default)]
    pub quick_duration: Option<String>,
    /// Goodput sampling period.
    #[serde(default = "default_sample")]
    pub sample: String,
    /// The flows.
    pub flows: Vec<StaticFlow>,
    /// **Sweep list** of flow counts for the entries with `count = "sweep"`
    /// (e.g. `[2, 4, 8, 16]`: queue length vs number of flows).
    #[serde(default)]
    pub flows_sweep: Vec<usize>,
    /// RTT probe: ping from one host to another with a DSCP (its queue),
    /// for the whole run (TCN §6.1.1 Fig. 5b measures queue 3 with ping).
    #[serde(default)]
    pub ping: Option<PingSpec>,
}

/// `[traffic.ping]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PingSpec {
    /// Host that pings (1-based).
    pub from: usize,
    /// Host pinged.
    pub to: usize,
    /// DSCP of the probes (selects their queue).
    #[serde(default)]
    pub dscp: u8,
    /// Interval between probes (≥ 1ms).
    #[serde(default = "default_ping_interval")]
    pub interval: String,
    /// When to start, from the traffic start (default: 1/4 of the run, when
    /// the flows have converged).
    #[serde(default)]
    pub start: Option<String>,
}

fn default_ping_interval() -> String {
    "10ms".into()
}

/// How many parallel flows a static entry runs: a number, or the swept count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowCount {
    /// This many.
    Fixed(usize),
    /// `traffic.flows_sweep`'s value of the combination.
    Sweep,
}

impl Default for FlowCount {
    fn default() -> Self {
        FlowCount::Fixed(1)
    }
}

/// Written as the scenario file writes it (`4`, `"sweep"`), so a manifest's
/// scenario reads back.
impl Serialize for FlowCount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FlowCount::Fixed(n) => s.serialize_u64(*n as u64),
            FlowCount::Sweep => s.serialize_str("sweep"),
        }
    }
}

impl<'de> Deserialize<'de> for FlowCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(i64),
            S(String),
            // Manifests written before FlowCount serialised as above.
            Old {
                #[serde(rename = "Fixed")]
                fixed: i64,
            },
        }
        match Raw::deserialize(d)? {
            Raw::Old { fixed } => Ok(FlowCount::Fixed(fixed.max(1) as usize)),
            Raw::S(s) if s == "Sweep" => Ok(FlowCount::Sweep),
            Raw::N(n) if n >= 1 => Ok(FlowCount::Fixed(n as usize)),
            Raw::N(n) => Err(serde::de::Error::custom(format!(
                "count = {n}: a flow entry runs at least 1 flow"
            ))),
            Raw::S(s) if s == "sweep" => Ok(FlowCount::Sweep),
            Raw::S(s) => Err(serde::de::Error::custom(format!(
                "count = \"{s}\": give a number or \"sweep\" (traffic.flows_sweep)"
            ))),
        }
    }
}

fn default_sample() -> String {
    "100ms".into()
}

/// One long-lived flow: `server` sends to `client`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticFlow {
    /// Sending host (1-based).
    pub server: usize,
    /// Receiving host (1-based).
    pub client: usize,
    /// DSCP (selects the queue through the switch's DSCP map).
    #[serde(default)]
    pub dscp: u8,
    /// Pace to this rate (default unpaced).
    #[serde(default)]
    pub rate: Option<String>,
    /// Start this long after the traffic starts (default at once).
    #[serde(default)]
    pub start: Option<String>,
    /// Transfer this many bytes and end (its FCT is recorded); default:
    /// run for the whole duration.
    #[serde(default)]
    pub size: Option<String>,
    /// Parallel flows of this entry: a number, or `"sweep"` for the
    /// combination's value of `traffic.flows_sweep`.
    #[serde(default)]
    pub count: FlowCount,
}

impl StaticFlow {
    /// Parallel flows of this entry in a combination sweeping `sweep`.
    pub fn count_for(&self, sweep: SweepValue) -> usize {
        match (self.count, sweep) {
            (FlowCount::Fixed(n), _) => n,
            (FlowCount::Sweep, SweepValue::Flows(n)) => n,
            (FlowCount::Sweep, _) => 1,
        }
    }
}

impl StaticSpec {
    /// How long every flow runs, honouring `--quick`.
    pub fn duration_for(&self, quick: bool) -> Duration {
        let full = Duration::from_nanos(parse_duration(&self.duration).unwrap_or(0));
        if !quick {
            return full;
        }
        match &self.quick_duration {
            Some(q) => Duration::from_nanos(parse_duration(q).unwrap_or(0)),
            None => (full / 5).max(Duration::from_secs(2)).min(full),
        }
    }

    /// A start time of the run (a flow's or the ping's), honouring
    /// `--quick`: starts shrink with the run, so a quick run keeps the
    /// scenario's order of events (TCN Fig. 5's flows at 2 s and 4 s and
    /// its ping at 6 s of 12 s run at 0.67, 1.33 and 2 s of a 4 s quick run).
    pub fn start_for(&self, start: &str, quick: bool) -> Duration {
        let at = Duration::from_nanos(parse_duration(start).unwrap_or(0));
        let full = Duration::from_nanos(parse_duration(&self.duration).unwrap_or(0));
        if !quick || full.is_zero() {
            return at;
        }
        at.mul_f64(self.duration_for(true).as_secs_f64() / full.as_secs_f64())
    }

    /// Flow `j` of entry `k`.
    fn flow(&self, c: &Combination, k: usize, j: usize, f: &StaticFlow) -> Generator {
        let dur = self.duration_for(c.quick);
        let start = f
            .start
            .as_deref()
            .map(|st| self.start_for(st, c.quick))
            .unwrap_or_default();
        let single = f.count == FlowCount::Fixed(1);
        let stem = if single {
            format!("long{k}-h{}-h{}", f.server, f.client)
        } else {
            format!("long{k}.{j}-h{}-h{}", f.server, f.client)
        };
        let mut args = strings(&["long", "--server"]);
        args.extend([
            (c.addr)(f.server),
            "--duration".into(),
            format!("{}ms", dur.as_millis()),
            "--delay".into(),
            format!("{}ms", start.as_millis()),
            "--dscp".into(),
            f.dscp.to_string(),
            "--sample".into(),
            self.sample.clone(),
            "--csv".into(),
            format!("{stem}.csv"),
            "--json-out".into(),
            format!("{stem}.json"),
        ]);
        if let Some(r) = &f.rate {
            args.extend(["--rate".into(), r.clone()]);
        }
        if let Some(z) = &f.size {
            args.extend(["--size".into(), z.clone()]);
        }
        let n = if single {
            String::new()
        } else {
            format!(".{j}")
        };
        Generator {
            host: f.client,
            args,
            stem,
            label: format!("f{k}{n} h{}→h{} dscp {}", f.server, f.client, f.dscp),
            dscp: f.dscp,
        }
    }
}

impl TrafficKind for StaticSpec {
    fn validate(&self, hosts: usize) -> Result<(), String> {
        validate_static(hosts, self)
    }

    fn sweep(&self) -> Vec<SweepValue> {
        if self.flows_sweep.is_empty() {
            return vec![SweepValue::None];
        }
        self.flows_sweep
            .iter()
            .map(|&n| SweepValue::Flows(n))
            .collect()
    }

    fn x_label(&self) -> &'static str {
        "flows"
    }

    fn headline(&self) -> &'static [&'static str] {
        &[
            "goodput_mbps",
            "queue.mean_kb",
            "sojourn.p50_us",
            "sojourn.p99_us",
            "marks",
            "ping.mean_us",
        ]
    }

    fn pairs(&self) -> Vec<(usize, usize)> {
        super::dedup_pairs(self.flows.iter().map(|f| (f.client, f.server)).collect())
    }

    /// The run, and the latest start (starts shrink with a --quick run, as
    /// the runner does).
    fn seconds(&self, c: &Combination) -> Result<f64> {
        let run = self.duration_for(c.quick);
        let start = self
            .flows
            .iter()
            .filter_map(|f| f.start.as_deref())
            .map(|st| self.start_for(st, c.quick))
            .max()
            .unwrap_or(Duration::ZERO);
        Ok(run.as_secs_f64() + start.min(run).as_secs_f64())
    }

    fn keep_heaviest(&mut self) {
        if let Some(m) = self.flows_sweep.iter().copied().max() {
            self.flows_sweep = vec![m];
        }
    }

    /// Every entry's flows, each a `softswitch-tg long`.
    fn generators(&self, c: &Combination) -> Result<Vec<Generator>> {
        let mut out = Vec::new();
        for (k, f) in self.flows.iter().enumerate() {
            for j in 0..f.count_for(c.sweep) {
                out.push(self.flow(c, k, j, f));
            }
        }
        Ok(out)
    }

    /// One flow's report.
    fn read(&self, g: &Report, r: &mut ComboResult) -> Result<()> {
        let rep = &g.json["report"];
        let samples = rep["samples"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                (
                    s["t_ms"].as_u64().unwrap_or(0),
                    s["goodput_mbps"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        r.expected += 1;
        r.statics.push(StaticFlowResult {
            label: g.label.to_string(),
            dscp: g.dscp,
            goodput_mbps: rep["goodput_mbps"].as_f64().unwrap_or(0.0),
            samples,
            start_ms: rep["start_ms"].as_u64().unwrap_or(0),
            size: rep["size"].as_u64(),
            fct_us: rep["fct_us"].as_u64(),
        });
        Ok(())
    }

    fn scale_rates(&mut self, f: f64, changes: &mut Vec<String>) -> Result<(), String> {
        for (k, fl) in self.flows.iter_mut().enumerate() {
            if let Some(r) = &fl.rate {
                let pr =
                    parse_rate(r).map_err(|e| format!("traffic.flows[{k}].rate `{r}`: {e}"))?;
                let nr =
                    crate::units::Rate::from_bps(((pr.bps() as f64 * f).round() as u64).max(1))
                        .to_string();
                changes.push(format!("traffic.flows[{k}].rate: {r} → {nr}"));
                fl.rate = Some(nr);
            }
        }
        Ok(())
    }

    fn as_static(&self) -> Option<&StaticSpec> {
        Some(self)
    }
}

/// `[traffic]`, `kind = "static"`.
fn validate_static(hosts: usize, s: &StaticSpec) -> Result<(), String> {
    check_duration("traffic.duration", &s.duration)?;
    if let Some(q) = &s.quick_duration {
        check_duration("traffic.quick_duration", q)?;
    }
    check_duration("traffic.sample", &s.sample)?;
    if s.flows.is_empty() {
        return Err("traffic.flows is empty — add [[traffic.flows]] tables".into());
    }
    for (k, f) in s.flows.iter().enumerate() {
        validate_static_flow(hosts, s, k, f)?;
    }
    let sweeps = s.flows.iter().any(|f| f.count == FlowCount::Sweep);
    if sweeps == s.flows_sweep.is_empty() {
        return Err(if sweeps {
            "a flow has count = \"sweep\" but traffic.flows_sweep is empty — list the counts, e.g. flows_sweep = [2, 4, 8, 16]".into()
        } else {
            "traffic.flows_sweep is set but no flow has count = \"sweep\"".into()
        });
    }
    if s.flows_sweep.contains(&0) {
        return Err("traffic.flows_sweep: counts must be at least 1".into());
    }
    match &s.ping {
        Some(p) => validate_ping(hosts, p),
        None => Ok(()),
    }
}

/// One `[[traffic.flows]]` entry of a static scenario.
fn validate_static_flow(
    hosts: usize,
    s: &StaticSpec,
    k: usize,
    f: &StaticFlow,
) -> Result<(), String> {
    check_hosts(hosts, &format!("traffic.flows[{k}]"), &[f.server, f.client])?;
    if f.server == f.client {
        return Err(format!(
            "traffic.flows[{k}]: server and client are both host {}",
            f.server
        ));
    }
    check_dscp(f.dscp)?;
    if let Some(r) = &f.rate {
        parse_rate(r).map_err(|e| format!("traffic.flows[{k}].rate `{r}`: {e}"))?;
    }
    let dur = parse_duration(&s.duration).unwrap_or(0);
    if let Some(st) = &f.start {
        check_duration(&format!("traffic.flows[{k}].start"), st)?;
        if parse_duration(st).unwrap_or(0) >= dur {
            return Err(format!(
                "traffic.flows[{k}].start = {st} is not before the end of the run (traffic.duration = {})",
                s.duration
            ));
        }
    }
    if let Some(z) = &f.size {
        let n = parse_size(z).map_err(|e| format!("traffic.flows[{k}].size `{z}`: {e}"))?;
        if n == 0 {
            return Err(format!("traffic.flows[{k}].size must be positive"));
        }
    }
    Ok(())
}

/// `[traffic.ping]`.
fn validate_ping(hosts: usize, p: &PingSpec) -> Result<(), String> {
    check_hosts(hosts, "traffic.ping", &[p.from, p.to])?;
    if p.from == p.to {
        return Err(format!(
            "traffic.ping: from and to are both host {}",
            p.from
        ));
    }
    check_dscp(p.dscp)?;
    check_duration("traffic.ping.interval", &p.interval)?;
    if parse_duration(&p.interval).unwrap_or(0) < 1_000_000 {
        return Err("traffic.ping.interval: at least 1ms".into());
    }
    if let Some(st) = &p.start {
        check_duration("traffic.ping.start", st)?;
    }
    Ok(())
}

//! From the repeats of every combination to the numbers a paper can print
//! (`summary.json`): each headline number with its spread across repeats,
//! and each scheme against the baseline with a verdict.
//!
//! * **Each repeat is one sample.** Per repeat the headline numbers are
//!   computed from that run alone ([`repeat_values`]: FCT mean / p50 / p99
//!   per size class, QCT, goodput and shares, sojourn percentiles, queue,
//!   RTOs, drops, marks, ping). Per (AQM, sweep value) every number gets
//!   its median, min–max and a 95 % interval of the mean across repeats
//!   (`[stats] interval`, see [`super::stats`]).
//! * **Pooled distributions** are kept beside them where the papers pool
//!   (a p99 over all flows of all repeats): `points[].pooled`. They are not
//!   what the verdicts use.
//! * **Unfaithful repeats** (the fidelity guard's verdict) are left out of
//!   every statistic and counted; a point with fewer faithful repeats than
//!   asked says so (`short`).
//! * **Comparisons**: every scheme against the baseline at the same sweep
//!   value ([`Against::One`]; runs kept apart by `report --compare` put
//!   each AQM against itself in the first directory, [`Against::SameAqm`]),
//!   per number: the ratio of the means with Fieller's interval, the
//!   test's p-value (`[stats] test`), Holm-corrected over the schemes
//!   compared at that point for that number, and a verdict — lower, higher,
//!   or no difference beyond run-to-run noise. That last verdict is not
//!   evidence of equality: the ratio's interval says how large a difference
//!   the repeats could not rule out. Numbers and sweep points are separate
//!   families: across a whole table some verdicts at 5 % are expected to
//!   be chance.
//!
//! Values keep the units they were recorded in (µs of the run's clock,
//! Mbit/s, KB, packets); [`Unit::display`] is the one place that turns them
//! into what a person reads.

use std::collections::BTreeMap;

use serde::Serialize;

use super::results::ComboResult;
use super::scenario::{IntervalMethod, Scenario, StatsSpec, SweepValue, TestMethod};
use super::stats;
use crate::traffic::record::FlowRecord;
use crate::traffic::summary::{fct_stats, FctStats, FctSummary};

/// Significance level of the verdicts (matches the 95 % intervals).
pub const ALPHA: f64 = 1.0 - stats::LEVEL;

/// What a metric's values are measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds of the run's clock.
    Us,
    /// Mbit/s.
    Mbps,
    /// Kilobytes (1000 B).
    Kb,
    /// Packets or events per run.
    Count,
    /// A fraction of a whole.
    Share,
}

impl Unit {
    /// How to show values around `typical`: (divide by, unit label, decimals).
    pub fn display(self, typical: f64) -> (f64, &'static str, usize) {
        match self {
            Unit::Us if typical.abs() >= 1000.0 => (1000.0, "ms", 2),
            Unit::Us => (1.0, "us", 0),
            Unit::Mbps => (1.0, "Mbit/s", if typical.abs() >= 100.0 { 0 } else { 1 }),
            Unit::Kb => (1.0, "KB", 1),
            Unit::Count => (1.0, "", if typical.abs() >= 100.0 { 0 } else { 1 }),
            Unit::Share => (1.0, "", 3),
        }
    }
}

/// A person's name for a metric key, and its unit.
pub fn metric_info(key: &str) -> (String, Unit) {
    fn stat(s: &str) -> &str {
        match s {
            "mean_us" => "mean",
            "p50_us" => "median",
            "p99_us" => "99th pct",
            "max_us" => "max",
            other => other,
        }
    }
    let parts: Vec<&str> = key.split('.').collect();
    match parts.as_slice() {
        ["fct", class, s] => {
            let c = match *class {
                "small" => "small-flow (<100KB)",
                "medium" => "medium-flow",
                "large" => "large-flow (>10MB)",
                _ => "all-flow",
            };
            (format!("{c} FCT, {}", stat(s)), Unit::Us)
        }
        ["qct", s] => (format!("QCT, {}", stat(s)), Unit::Us),
        ["sojourn", s] => (format!("sojourn (busiest port), {}", stat(s)), Unit::Us),
        ["ping", s] => (format!("ping RTT, {}", stat(s)), Unit::Us),
        ["queue", "mean_kb"] => ("queue (busiest port), mean".into(), Unit::Kb),
        ["queue", "p99_kb"] => ("queue (busiest port), 99th pct".into(), Unit::Kb),
        ["goodput_mbps"] => ("goodput".into(), Unit::Mbps),
        [d, "goodput_mbps"] if d.starts_with("dscp") => {
            (format!("goodput of DSCP {}", &d[4..]), Unit::Mbps)
        }
        [d, "share"] => (format!("share of goodput, DSCP {}", &d[4..]), Unit::Share),
        [f, "goodput_mbps"] => (format!("goodput of flow entry {}", &f[4..]), Unit::Mbps),
        [f, "fct_us"] => (format!("FCT of flow entry {}", &f[4..]), Unit::Us),
        ["hop", name, "marks"] => (format!("CE marks at {name}"), Unit::Count),
        ["hop", name, "drops"] => (format!("drops at {name}"), Unit::Count),
        ["hop", name, "max_kb"] => (format!("largest queue at {name}"), Unit::Kb),
        ["hop", name, "sojourn_p99_us"] => (format!("sojourn at {name}, 99th pct"), Unit::Us),
        ["drops"] => ("drops per run".into(), Unit::Count),
        ["marks"] => ("CE marks per run".into(), Unit::Count),
        ["rtos"] => ("RTOs per run".into(), Unit::Count),
        ["retrans"] => ("retransmitted segments per run".into(), Unit::Count),
        ["guard", "stalls"] => (
            "data-path stalls (> 100 us real) per run".into(),
            Unit::Count,
        ),
        ["guard", "lost_share"] => (
            "largest share of a port's link time lost".into(),
            Unit::Share,
        ),
        ["host", c] => (
            format!("{} per run", super::results::HostTotals::metric_name(c)),
            Unit::Count,
        ),
        _ => (key.to_owned(), Unit::Count),
    }
}

fn to_records(r: &ComboResult) -> Vec<FlowRecord> {
    r.flows
        .iter()
        .map(|f| FlowRecord::completed(0, 0, f.size, f.fct_us, f.dscp, 0, f.start_us))
        .collect()
}

/// The `[[traffic.flows]]` entry a static flow belongs to, from its label
/// (`f<k> …` or `f<k>.<j> …`).
fn flow_entry(label: &str) -> Option<usize> {
    let digits: String = label
        .strip_prefix('f')?
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

fn put_stats(v: &mut BTreeMap<String, f64>, prefix: &str, s: &Option<FctStats>) {
    if let Some(s) = s {
        v.insert(format!("{prefix}.mean_us"), s.mean_us);
        v.insert(format!("{prefix}.p50_us"), s.p50_us as f64);
        v.insert(format!("{prefix}.p99_us"), s.p99_us as f64);
    }
}

fn put_statics(v: &mut BTreeMap<String, f64>, r: &ComboResult) {
    let total: f64 = r.statics.iter().map(|s| s.goodput_mbps).sum();
    v.insert("goodput_mbps".into(), total);
    let mut per_dscp: BTreeMap<u8, f64> = BTreeMap::new();
    let mut per_entry: BTreeMap<usize, f64> = BTreeMap::new();
    let mut fcts: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for s in &r.statics {
        *per_dscp.entry(s.dscp).or_default() += s.goodput_mbps;
        if let Some(k) = flow_entry(&s.label) {
            *per_entry.entry(k).or_default() += s.goodput_mbps;
            if let Some(f) = s.fct_us {
                fcts.entry(k).or_default().push(f as f64);
            }
        }
    }
    if per_dscp.len() > 1 {
        for (d, g) in &per_dscp {
            v.insert(format!("dscp{d}.goodput_mbps"), *g);
            if total > 0.0 {
                v.insert(format!("dscp{d}.share"), g / total);
            }
        }
    }
    if per_entry.len() > 1 {
        for (k, g) in per_entry {
            v.insert(format!("flow{k}.goodput_mbps"), g);
        }
    }
    for (k, f) in fcts {
        v.insert(format!("flow{k}.fct_us"), stats::mean(&f));
    }
}

/// Every headline number of one repeat, by key (see [`metric_info`]).
pub fn repeat_values(r: &ComboResult) -> BTreeMap<String, f64> {
    let mut v = BTreeMap::new();
    if !r.flows.is_empty() {
        let fct = FctSummary::from_records(&to_records(r), r.wall_us);
        for (class, s) in [
            ("small", &fct.small),
            ("medium", &fct.medium),
            ("large", &fct.large),
            ("all", &fct.all),
        ] {
            put_stats(&mut v, &format!("fct.{class}"), s);
        }
        v.insert("goodput_mbps".into(), fct.goodput_mbps);
    }
    let qcts: Vec<u64> = r.queries.iter().map(|q| q.qct_us).collect();
    put_stats(&mut v, "qct", &fct_stats(&qcts));
    if !r.statics.is_empty() {
        put_statics(&mut v, r);
    }
    if let Some(s) = &r.sojourn {
        v.insert("sojourn.p50_us".into(), s.p50_us);
        v.insert("sojourn.p99_us".into(), s.p99_us);
    }
    v.insert("queue.mean_kb".into(), r.queue_mean_kb);
    v.insert("queue.p99_kb".into(), r.queue_p99_kb);
    for h in &r.hops {
        let name = h.name.replace('.', "_");
        v.insert(format!("hop.{name}.marks"), h.marked_pkts as f64);
        v.insert(format!("hop.{name}.drops"), h.dropped_pkts as f64);
        v.insert(
            format!("hop.{name}.max_kb"),
            h.max_backlog_bytes as f64 / 1e3,
        );
        v.insert(format!("hop.{name}.sojourn_p99_us"), h.sojourn_p99_us);
    }
    v.insert("drops".into(), r.switch.dropped_pkts as f64);
    v.insert("marks".into(), r.switch.marked_pkts as f64);
    v.insert("rtos".into(), r.hosts.timeouts as f64);
    v.insert("retrans".into(), r.hosts.retrans_segs as f64);
    // What the fidelity guard measured of the machine (of faithful repeats,
    // as every number here): how a run on another machine or kernel held.
    v.insert("guard.stalls".into(), r.fidelity.stalls as f64);
    v.insert("guard.lost_share".into(), r.fidelity.max_lost_fraction);
    for (k, n) in r.hosts.timer_metrics() {
        v.insert(format!("host.{k}"), n as f64);
    }
    if let Some(p) = r.ping.as_ref().filter(|p| p.count > 0) {
        v.insert("ping.mean_us".into(), p.mean_us);
        v.insert("ping.p50_us".into(), p.p50_us);
        v.insert("ping.p99_us".into(), p.p99_us);
    }
    v
}

/// One number across the faithful repeats of a point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Repeats with this number.
    pub n: usize,
    /// Its value in each, in repeat order.
    pub values: Vec<f64>,
    /// The seed of each value's repeat (the pairing key: every scheme ran
    /// the same flow schedules with the same seed).
    pub seeds: Vec<u64>,
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub sd: f64,
    /// 95 % interval of the mean (`null` with one repeat).
    pub ci95: Option<[f64; 2]>,
}

impl Spread {
    fn of(values: Vec<f64>, seeds: Vec<u64>, spec: &StatsSpec, seed: u64) -> Self {
        let ci = match spec.interval {
            IntervalMethod::T => stats::t_interval(&values),
            IntervalMethod::Bootstrap => {
                stats::bootstrap_mean_interval(&values, spec.resamples, seed)
            }
        };
        Spread {
            n: values.len(),
            median: stats::median(&values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean: stats::mean(&values),
            sd: stats::sd(&values),
            ci95: ci.map(|(lo, hi)| [lo, hi]),
            values,
            seeds,
        }
    }
}

/// What a comparison found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Lower than the baseline beyond run-to-run noise.
    Lower,
    /// Higher than the baseline beyond run-to-run noise.
    Higher,
    /// No difference beyond run-to-run noise (not: equal).
    NoDifference,
    /// The same value in every pair (or both sides one value): nothing to
    /// test.
    Identical,
    /// Different, by the same amount in every pair (or two samples that
    /// each repeat one value): no spread, so no test — not "infinitely
    /// significant". Quantised counters do this.
    NoSpread,
    /// Too few repeats (or pairs) to test.
    Untested,
}

impl Verdict {
    /// For people.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Lower => "lower",
            Verdict::Higher => "higher",
            Verdict::NoDifference => "no difference beyond run-to-run noise",
            Verdict::Identical => "identical in every repeat",
            Verdict::NoSpread => "differs without spread (no test)",
            Verdict::Untested => "untested (too few repeats)",
        }
    }

    /// The snake_case name `summary.json` and `stats.csv` use.
    pub fn key(self) -> &'static str {
        match self {
            Verdict::Lower => "lower",
            Verdict::Higher => "higher",
            Verdict::NoDifference => "no_difference",
            Verdict::Identical => "identical",
            Verdict::NoSpread => "no_spread",
            Verdict::Untested => "untested",
        }
    }
}

/// What a comparison's ratio is a ratio of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioOf {
    /// The geometric mean of the per-seed ratios (paired, log scale).
    PairedRatios,
    /// The ratio of the means (paired on differences, or unpaired).
    Means,
}

/// One number of one scheme against the baseline at the same sweep value.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Repeats: this scheme, the baseline.
    pub n: [usize; 2],
    /// Compared per seed (paired), or as independent samples.
    pub paired: bool,
    /// Pairs compared: seeds with a faithful repeat on both sides.
    pub pairs: usize,
    /// Seeds left out of the pairing: a faithful repeat on one side only
    /// (the other side's repeat was left out as unfaithful). Unpaired with
    /// seeds listed: a paired test was asked, but the sides shared no seed,
    /// so Welch's ran.
    pub unpaired_seeds: Vec<u64>,
    /// The paired scale (`null`: unpaired).
    pub scale: Option<stats::PairedScale>,
    /// The test that ran.
    pub test: TestMethod,
    /// This scheme ÷ the baseline (see `ratio_of`).
    pub ratio: Option<f64>,
    /// What the ratio is of.
    pub ratio_of: RatioOf,
    /// The ratio's 95 % interval (`null`: unbounded or untested): exp of
    /// the t interval of the mean per-seed log-ratio, or Fieller's (for
    /// correlated means when paired). It excludes 1 exactly when the t-test
    /// on the same scale rejects before adjustment.
    pub ratio_ci95: Option<[f64; 2]>,
    /// The test's statistic (t; W = min(W⁺, W⁻); or U of this scheme).
    pub statistic: Option<f64>,
    /// Two-sided p-value, raw.
    pub p: Option<f64>,
    /// Holm-adjusted over the schemes compared at this point for this number.
    pub p_holm: Option<f64>,
    /// Paired only: Wilcoxon's signed-rank p on the same per-seed values,
    /// raw — a distribution-free check beside the t-test (with 5 pairs it
    /// cannot go below 0.0625).
    pub p_signed_rank: Option<f64>,
    /// The verdict at 5 % on `p_holm`.
    pub verdict: Verdict,
}

/// Pooled over the faithful repeats, as the papers pool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pooled {
    /// Repeats pooled.
    pub repeats: usize,
    /// FCTs by size class over all their flows.
    pub fct: Option<FctSummary>,
    /// QCTs over all their queries.
    pub qct: Option<FctStats>,
    /// Ping RTTs over all their probes, µs.
    pub ping: Option<FctStats>,
}

/// One (AQM, sweep value).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The AQM.
    pub aqm: String,
    /// The sweep value.
    pub sweep: SweepValue,
    /// Its numeric x.
    pub x: f64,
    /// Repeats the run(s) asked for.
    pub repeats_asked: usize,
    /// Repeats the fidelity guard passed: the samples.
    pub repeats_faithful: usize,
    /// Fewer faithful repeats than asked.
    pub short: bool,
    /// `dir: reason` of every repeat left out.
    pub left_out: Vec<String>,
    /// Flows (or per-sender flows) asked for, over the faithful repeats.
    pub expected: usize,
    /// Recorded.
    pub recorded: usize,
    /// Every number across the faithful repeats.
    pub metrics: BTreeMap<String, Spread>,
    /// The scheme it was compared with (none: it is a baseline, or its
    /// baseline did not run at this sweep value).
    pub baseline: Option<String>,
    /// Against that baseline.
    pub vs_baseline: BTreeMap<String, Comparison>,
    /// Pooled distributions.
    pub pooled: Pooled,
    /// The pooled numbers by metric key ([`pooled_value`]): a p99 over all
    /// flows of all faithful repeats, as the papers report it.
    pub pooled_values: BTreeMap<String, f64>,
    /// Each pooled number ÷ the baseline's (no test: one number a side).
    pub pooled_vs_baseline: BTreeMap<String, f64>,
    /// How the repeats' attempts went.
    pub attempts: Attempts,
}

/// How the repeats of a point got (or did not get) a faithful attempt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Attempts {
    /// Repeats faithful at their first attempt.
    pub first: usize,
    /// Repeats faithful after one or more unfaithful attempts were set
    /// aside (`run --retry-unfaithful`).
    pub after_retry: usize,
    /// Repeats left out: unfaithful at their last attempt.
    pub left_out: usize,
    /// Unfaithful attempts set aside and run again, over all repeats.
    pub set_aside: usize,
}

impl Attempts {
    /// `5 first, 0 after retry, 0 left out`.
    pub fn text(&self) -> String {
        format!(
            "{} first, {} after retry, {} left out",
            self.first, self.after_retry, self.left_out
        )
    }
}

/// How the numbers were made, in words (`summary.json`'s `methods`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Methods {
    /// What a sample is.
    pub sample: String,
    /// How a scheme's repeats meet the baseline's.
    pub pairing: String,
    /// The interval of each number.
    pub interval: String,
    /// The ratio's interval.
    pub ratio: String,
    /// The test.
    pub test: String,
    /// The correction.
    pub correction: String,
    /// What a verdict means.
    pub verdict: String,
    /// What `pooled` is.
    pub pooled: String,
    /// What `attempts` counts.
    pub attempts: String,
}

impl Methods {
    /// The words for `spec`.
    pub fn of(spec: &StatsSpec) -> Self {
        let paired = spec.test.is_paired();
        Methods {
            sample: "each repeat is one sample; repeat r of every scheme ran the same flow schedules (seed = scenario seed + 1000 r); only repeats the fidelity guard passed count".into(),
            pairing: if paired {
                "paired by seed: a scheme's repeat is compared with the baseline's repeat of the same seed; a seed with a faithful repeat on one side only is dropped from that comparison and listed (unpaired_seeds); two sides that share no seed are compared unpaired (Welch)".into()
            } else {
                "unpaired: the repeats of each side are independent samples".into()
            },
            interval: match spec.interval {
                IntervalMethod::T => "95 % interval of the mean across repeats, Student's t with n-1 degrees of freedom".into(),
                IntervalMethod::Bootstrap => format!("95 % percentile bootstrap interval of the mean across repeats, {} seeded resamples (covers less than 95 % with under 10 repeats)", spec.resamples),
            },
            ratio: if paired {
                "paired, every value positive: the geometric mean of the per-seed ratios with exp of the t interval of the mean log-ratio; paired with a zero value: the ratio of the means with Fieller's interval for correlated means (n-1 degrees of freedom); unpaired: the ratio of the means with Fieller's interval, Welch's degrees of freedom (null: unbounded). The interval excludes 1 exactly when the t-test on the same scale rejects before adjustment".into()
            } else {
                "mean / baseline mean, Fieller's 95 % interval with Welch's degrees of freedom (null: unbounded)".into()
            },
            test: match spec.test {
                TestMethod::Paired => "paired t-test, two-sided, on the per-seed log-ratios (every value positive: FCTs, goodput, sojourn, whose seed-to-seed variation is multiplicative) or on the per-seed differences (a value is 0: drops, RTOs); beside it Wilcoxon's exact signed-rank p on the same values as a distribution-free check (p_signed_rank; its smallest two-sided p is 2/2^n: 0.0625 with 5 pairs, so it cannot reject with 5 repeats)".into(),
                TestMethod::Wilcoxon => "Wilcoxon's signed-rank test, two-sided, on the per-seed log-ratios or differences; exact without ties or zero differences, normal approximation with tie correction otherwise; its smallest two-sided p is 2/2^n (0.0625 with 5 pairs)".into(),
                TestMethod::Welch => "Welch's two-sample t-test, two-sided (unpaired)".into(),
                TestMethod::MannWhitney => "Mann-Whitney U, two-sided (unpaired); exact without ties, normal approximation with tie and continuity correction otherwise".into(),
            },
            correction: "Holm over the schemes compared with the baseline at one sweep value for one number (p_holm); p is raw; numbers and sweep values are separate families, so a claim picked from a whole table must be corrected over all of that table's comparisons (report --markdown does); the ratio's interval is not adjusted, so it can exclude 1 where the adjusted verdict finds no difference".into(),
            verdict: format!("lower / higher: adjusted p < {ALPHA}; no_difference: no difference beyond run-to-run noise, which with few repeats is not evidence that the two are equal (the ratio's interval says how large a difference could hide); identical: the same value in every pair; no_spread: different by the same amount in every pair, so no test applies (quantised counters) — never p = 0; untested: fewer than 2 faithful repeats (pairs) on a side"),
            pooled: "all flows / queries / probes of the faithful repeats in one distribution, as the papers pool (a p99 over all flows of all repeats): pooled_values, and pooled_vs_baseline as a plain ratio (one number a side: no test); the verdicts use the per-repeat numbers".into(),
            attempts: "per point: repeats faithful at their first attempt, faithful after unfaithful attempts were set aside (run --retry-unfaithful), left out (unfaithful at their last attempt), and the attempts set aside in all (from manifest.json's retried)".into(),
        }
    }
}

/// One repeat, as `summary.json` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepeatRow {
    /// Its directory.
    pub dir: String,
    /// The AQM.
    pub aqm: String,
    /// The sweep value.
    pub sweep: SweepValue,
    /// Repeat number.
    pub repeat: u32,
    /// Seed of its flow schedules.
    pub seed: u64,
    /// The fidelity guard's verdict.
    pub fidelity: super::results::Fidelity,
    /// Flows asked for.
    pub expected: usize,
    /// Flows recorded.
    pub recorded: usize,
    /// Unfaithful attempts set aside before this one.
    pub retried: u32,
    /// Its headline numbers.
    pub values: BTreeMap<String, f64>,
}

/// Everything `summary.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The scenario's name.
    pub scenario_name: String,
    /// What the schemes were compared with: an AQM, or for runs kept apart
    /// `D1:<the same AQM>` (each point names its own, `points[].baseline`).
    pub baseline: String,
    /// How the scenario was scaled (`null`: at its own rate).
    pub scaling: serde_json::Value,
    /// Time dilation D it ran at (1: real time); every time and rate here
    /// is emulated.
    pub dilation: crate::timebase::Dilation,
    /// FCT size classes, bytes.
    pub size_classes: serde_json::Value,
    /// How the statistics were made.
    pub methods: Methods,
    /// Every repeat was judged faithful.
    pub faithful: bool,
    /// Where the runs came from, per directory: commit, whether the
    /// sources were dirty, command, kernel, machine (`report` fills it in
    /// from the manifests).
    pub runs: Vec<serde_json::Value>,
    /// Per (sweep value, AQM), x ascending, AQMs in scenario order.
    pub points: Vec<Point>,
    /// Every repeat with its numbers.
    pub repeats: Vec<RepeatRow>,
}

/// FNV-1a of a string: a stable per-number bootstrap seed.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

fn pooled(runs: &[&ComboResult]) -> Pooled {
    let flows: Vec<FlowRecord> = runs.iter().flat_map(|r| to_records(r)).collect();
    let wall: u64 = runs.iter().map(|r| r.wall_us).sum();
    let qcts: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.queries.iter().map(|q| q.qct_us))
        .collect();
    let rtts: Vec<u64> = runs
        .iter()
        .filter_map(|r| r.ping.as_ref())
        .flat_map(|p| p.rtts_us.iter().map(|&x| x.round() as u64))
        .collect();
    Pooled {
        repeats: runs.len(),
        fct: (!flows.is_empty()).then(|| FctSummary::from_records(&flows, wall)),
        qct: fct_stats(&qcts),
        ping: fct_stats(&rtts),
    }
}

/// The point of one (AQM, sweep value) from all its repeats.
fn point(
    sc: &Scenario,
    aqm: &str,
    sweep: SweepValue,
    runs: &[&ComboResult],
    asked: usize,
) -> Point {
    let faithful: Vec<&ComboResult> = runs
        .iter()
        .copied()
        .filter(|r| r.fidelity.faithful)
        .collect();
    let left_out = runs
        .iter()
        .filter(|r| !r.fidelity.faithful)
        .map(|r| format!("{}: {}", r.dir, r.fidelity.reasons.join("; ")))
        .collect();
    let mut by_key: BTreeMap<String, (Vec<f64>, Vec<u64>)> = BTreeMap::new();
    for r in &faithful {
        for (k, v) in repeat_values(r) {
            let e = by_key.entry(k).or_default();
            e.0.push(v);
            e.1.push(r.seed);
        }
    }
    let metrics = by_key
        .into_iter()
        .map(|(k, (values, seeds))| {
            let seed = sc.seed ^ fnv1a(&format!("{aqm}|{}|{k}", sweep.tag()));
            let s = Spread::of(values, seeds, &sc.stats, seed);
            (k, s)
        })
        .collect();
    let attempts = Attempts {
        first: faithful.iter().filter(|r| r.retried == 0).count(),
        after_retry: faithful.iter().filter(|r| r.retried > 0).count(),
        left_out: runs.len() - faithful.len(),
        set_aside: runs.iter().map(|r| r.retried as usize).sum(),
    };
    let pooled = pooled(&faithful);
    Point {
        aqm: aqm.to_owned(),
        sweep,
        x: sweep.x(),
        repeats_asked: asked.max(runs.len()),
        repeats_faithful: faithful.len(),
        short: faithful.len() < asked.max(runs.len()),
        left_out,
        expected: faithful.iter().map(|r| r.expected).sum(),
        recorded: faithful
            .iter()
            .map(|r| r.flows.len().max(r.statics.len()))
            .sum(),
        metrics,
        baseline: None,
        vs_baseline: BTreeMap::new(),
        pooled_values: pooled_values(&pooled),
        pooled,
        pooled_vs_baseline: BTreeMap::new(),
        attempts,
    }
}

/// The pooled numbers the papers print, by the metric key of the same
/// number per repeat: `fct.<class>.{mean_us,p50_us,p99_us}`,
/// `qct.{…}`, `ping.{…}`.
pub fn pooled_values(p: &Pooled) -> BTreeMap<String, f64> {
    let mut v = BTreeMap::new();
    if let Some(f) = &p.fct {
        for (class, s) in [
            ("small", &f.small),
            ("medium", &f.medium),
            ("large", &f.large),
            ("all", &f.all),
        ] {
            put_stats(&mut v, &format!("fct.{class}"), s);
        }
    }
    put_stats(&mut v, "qct", &p.qct);
    if let Some(s) = &p.ping {
        v.insert("ping.mean_us".into(), s.mean_us);
        v.insert("ping.p50_us".into(), s.p50_us as f64);
        v.insert("ping.p99_us".into(), s.p99_us as f64);
    }
    v
}

/// The values of `a` and `b` that ran the same seed, in `a`'s order, and
/// the seeds of either side without a partner. A seed repeated on a side
/// (merged runs that reused seeds) pairs its k-th occurrence with the
/// other side's k-th.
fn pair_by_seed(a: &Spread, b: &Spread) -> (Vec<f64>, Vec<f64>, Vec<u64>) {
    let mut used = vec![false; b.values.len()];
    let (mut xa, mut xb, mut unpaired) = (Vec::new(), Vec::new(), Vec::new());
    for (va, sa) in a.values.iter().zip(&a.seeds) {
        let partner = (0..b.values.len()).find(|&j| !used[j] && b.seeds[j] == *sa);
        match partner {
            Some(j) => {
                used[j] = true;
                xa.push(*va);
                xb.push(b.values[j]);
            }
            None => unpaired.push(*sa),
        }
    }
    unpaired.extend(
        b.seeds
            .iter()
            .zip(&used)
            .filter(|(_, u)| !**u)
            .map(|(s, _)| *s),
    );
    unpaired.sort_unstable();
    (xa, xb, unpaired)
}

/// `a` against the baseline `b` (Holm's adjustment and the verdicts of
/// tested comparisons come later, in [`compare_at`]). A paired test falls
/// back to Welch's when the two sides share no seed at all (runs that were
/// not made on the same schedules).
fn compare(a: &Spread, b: &Spread, test: TestMethod) -> Comparison {
    if test.is_paired() {
        let (xa, xb, unpaired) = pair_by_seed(a, b);
        if !xa.is_empty() {
            return compare_paired(a, b, &xa, &xb, unpaired, test);
        }
        let mut c = compare_unpaired(a, b, TestMethod::Welch);
        c.unpaired_seeds = unpaired;
        return c;
    }
    compare_unpaired(a, b, test)
}

fn compare_paired(
    a: &Spread,
    b: &Spread,
    xa: &[f64],
    xb: &[f64],
    unpaired_seeds: Vec<u64>,
    test: TestMethod,
) -> Comparison {
    let pr = stats::paired_ratio(xa, xb);
    let outcome = if test == TestMethod::Wilcoxon {
        pr.signed_rank
    } else {
        pr.t
    };
    let verdict = match pr.no_spread {
        _ if xa.len() < 2 => Verdict::Untested,
        Some(true) => Verdict::Identical,
        Some(false) => Verdict::NoSpread,
        None => Verdict::Untested,
    };
    let tested = xa.len() >= 2 && pr.no_spread.is_none();
    Comparison {
        n: [a.n, b.n],
        paired: true,
        pairs: xa.len(),
        unpaired_seeds,
        scale: Some(pr.scale),
        test,
        ratio: pr.ratio.estimate,
        ratio_of: match pr.scale {
            stats::PairedScale::LogRatio => RatioOf::PairedRatios,
            stats::PairedScale::Difference => RatioOf::Means,
        },
        ratio_ci95: pr.ratio.interval.map(|(lo, hi)| [lo, hi]),
        statistic: outcome.filter(|_| tested).map(|o| o.statistic),
        p: outcome.filter(|_| tested).map(|o| o.p),
        p_holm: None,
        p_signed_rank: pr.signed_rank.filter(|_| tested).map(|o| o.p),
        verdict,
    }
}

fn compare_unpaired(a: &Spread, b: &Spread, test: TestMethod) -> Comparison {
    let ratio = stats::fieller_ratio(&a.values, &b.values);
    let outcome = match test {
        TestMethod::MannWhitney if a.n >= 2 && b.n >= 2 => {
            stats::mann_whitney(&a.values, &b.values)
        }
        TestMethod::MannWhitney => None,
        _ => stats::welch(&a.values, &b.values),
    };
    let spread_free = a.n >= 2
        && b.n >= 2
        && stats::no_spread(&a.values).is_some()
        && stats::no_spread(&b.values).is_some();
    let verdict = if spread_free && a.values[0] == b.values[0] {
        Verdict::Identical
    } else if spread_free {
        Verdict::NoSpread
    } else {
        Verdict::Untested
    };
    Comparison {
        n: [a.n, b.n],
        paired: false,
        pairs: 0,
        unpaired_seeds: Vec::new(),
        scale: None,
        test,
        ratio: ratio.estimate,
        ratio_of: RatioOf::Means,
        ratio_ci95: ratio.interval.map(|(lo, hi)| [lo, hi]),
        statistic: outcome.map(|o| o.statistic),
        p: outcome.map(|o| o.p),
        p_holm: None,
        p_signed_rank: None,
        verdict,
    }
}

/// Which way `a` lies from `b` when the test rejects: the sign of the mean
/// per-seed log-ratio or difference (paired: the ratio's side of 1), the
/// means (Welch), or U (Mann–Whitney).
fn direction(a: &Spread, b: &Spread, c: &Comparison) -> Verdict {
    let higher = match (c.test, c.statistic) {
        (TestMethod::MannWhitney, Some(u)) => u > (a.n * b.n) as f64 / 2.0,
        _ if c.paired => c.ratio.is_some_and(|r| r > 1.0),
        _ => a.mean > b.mean,
    };
    if higher {
        Verdict::Higher
    } else {
        Verdict::Lower
    }
}

/// Fills `baseline`, `vs_baseline` and `pooled_vs_baseline` of the points
/// `members` (at one sweep value) from the point `base`; Holm's adjustment
/// runs over the members' tested comparisons, per number.
fn compare_at(points: &mut [Point], base: usize, members: &[usize], test: TestMethod) {
    let baseline = points[base].clone();
    for &i in members {
        points[i].baseline = Some(baseline.aqm.clone());
        for (k, v) in &baseline.pooled_values {
            if let Some(mine) = points[i].pooled_values.get(k) {
                if *v != 0.0 {
                    points[i].pooled_vs_baseline.insert(k.clone(), mine / v);
                }
            }
        }
    }
    let keys: Vec<&String> = baseline.metrics.keys().collect();
    for key in keys {
        let b = &baseline.metrics[key];
        let mut tested: Vec<(usize, f64)> = Vec::new();
        for &i in members {
            let p = &mut points[i];
            let Some(a) = p.metrics.get(key) else {
                continue;
            };
            let c = compare(a, b, test);
            if let Some(pv) = c.p {
                tested.push((i, pv));
            }
            p.vs_baseline.insert(key.clone(), c);
        }
        let adjusted = stats::holm(&tested.iter().map(|t| t.1).collect::<Vec<_>>());
        for ((i, _), adj) in tested.into_iter().zip(adjusted) {
            let p = &mut points[i];
            let a = &p.metrics[key];
            let c = p.vs_baseline.get_mut(key).expect("inserted above");
            c.p_holm = Some(adj);
            c.verdict = if adj < ALPHA {
                direction(a, b, c)
            } else {
                Verdict::NoDifference
            };
        }
    }
}

/// The sweep values present, x ascending.
fn sweeps_of(results: &[&ComboResult]) -> Vec<SweepValue> {
    let mut v: Vec<SweepValue> = Vec::new();
    for r in results {
        if !v.contains(&r.sweep) {
            v.push(r.sweep);
        }
    }
    v.sort_by(|a, b| a.x().total_cmp(&b.x()));
    v
}

/// The AQMs present: the scenario's order, then any others (merged runs).
pub fn aqm_order(sc: &Scenario, results: &[&ComboResult]) -> Vec<String> {
    let mut v = sc.switch.aqm.clone();
    for r in results {
        if !v.contains(&r.aqm) {
            v.push(r.aqm.clone());
        }
    }
    v
}

/// What each scheme is compared with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Against<'a> {
    /// Every scheme against this one (the scenario's baseline, or
    /// `report --baseline`).
    One(&'a str),
    /// Runs kept apart by `report --compare`, whose schemes are named
    /// `<label>:<aqm>`: each against the same AQM under the label given
    /// here (the first directory's), `D4:tcn` against `D1:tcn` — what
    /// dilation invariance asks. The reference label's schemes are the
    /// baselines.
    SameAqm(&'a str),
}

impl Against<'_> {
    /// The scheme `aqm` is compared with; none for a baseline.
    pub fn baseline_of(&self, aqm: &str) -> Option<String> {
        match *self {
            Against::One(b) => (aqm != b).then(|| b.to_owned()),
            Against::SameAqm(reference) => {
                let (label, a) = aqm.split_once(':')?;
                (label != reference).then(|| format!("{reference}:{a}"))
            }
        }
    }

    /// `summary.json`'s `baseline`, and what the console says a ratio is
    /// against: the AQM, or `D1:<the same AQM>`.
    pub fn describe(&self) -> String {
        match *self {
            Against::One(b) => b.to_owned(),
            Against::SameAqm(reference) => format!("{reference}:<the same AQM>"),
        }
    }
}

/// What a summary is made from besides the results.
pub struct SummaryInput<'a> {
    /// The scenario (its `[stats]`, seed, AQM order).
    pub sc: &'a Scenario,
    /// Its name.
    pub name: &'a str,
    /// What each scheme is compared with.
    pub against: Against<'a>,
    /// How it was scaled (`null` when not).
    pub scaling: serde_json::Value,
    /// Repeats asked per (AQM, sweep tag); absent: as many as were found.
    pub asked: BTreeMap<(String, String), usize>,
}

/// The whole summary of a run's (or several merged runs') repeats.
pub fn summarize(input: &SummaryInput, results: &[&ComboResult]) -> Summary {
    let sc = input.sc;
    let mut points = Vec::new();
    for sweep in sweeps_of(results) {
        let first = points.len();
        for aqm in aqm_order(sc, results) {
            let mut runs: Vec<&ComboResult> = results
                .iter()
                .copied()
                .filter(|r| r.aqm == aqm && r.sweep == sweep)
                .collect();
            if runs.is_empty() {
                continue;
            }
            runs.sort_by(|a, b| (a.repeat, &a.dir).cmp(&(b.repeat, &b.dir)));
            let asked = input
                .asked
                .get(&(aqm.clone(), sweep.tag()))
                .copied()
                .unwrap_or(runs.len());
            points.push(point(sc, &aqm, sweep, &runs, asked));
        }
        let here = &mut points[first..];
        for base in 0..here.len() {
            let members: Vec<usize> = (0..here.len())
                .filter(|&i| {
                    input.against.baseline_of(&here[i].aqm).as_ref() == Some(&here[base].aqm)
                })
                .collect();
            if !members.is_empty() {
                compare_at(here, base, &members, sc.stats.test);
            }
        }
    }
    let mut repeats: Vec<RepeatRow> = results
        .iter()
        .map(|r| RepeatRow {
            dir: r.dir.clone(),
            aqm: r.aqm.clone(),
            sweep: r.sweep,
            repeat: r.repeat,
            seed: r.seed,
            fidelity: r.fidelity.clone(),
            expected: r.expected,
            recorded: r.flows.len().max(r.statics.len()),
            retried: r.retried,
            values: repeat_values(r),
        })
        .collect();
    repeats.sort_by(|a, b| a.dir.cmp(&b.dir));
    Summary {
        scenario_name: input.name.to_owned(),
        baseline: input.against.describe(),
        scaling: input.scaling.clone(),
        dilation: sc.dilation(),
        size_classes: serde_json::json!({
            "small_lt_bytes": crate::traffic::summary::SMALL_MAX_BYTES,
            "large_gt_bytes": crate::traffic::summary::LARGE_MIN_BYTES,
        }),
        methods: Methods::of(&sc.stats),
        faithful: results.iter().all(|r| r.fidelity.faithful),
        runs: Vec::new(),
        points,
        repeats,
    }
}

/// The numbers the console shows per point (everything is in summary.json
/// and stats.csv).
pub fn headline_keys(sc: &Scenario, p: &Point) -> Vec<String> {
    let fixed = sc.traffic.kind().headline();
    let mut keys: Vec<String> = fixed.iter().map(|k| k.to_string()).collect();
    if sc.traffic.kind().as_static().is_some() {
        keys.extend(
            p.metrics
                .keys()
                .filter(|k| k.ends_with(".share") || k.ends_with(".fct_us"))
                .cloned(),
        );
    }
    if sc.fabric.is_some() {
        keys.extend(hop_keys(p));
    }
    keys.retain(|k| p.metrics.contains_key(k));
    keys
}

/// A fabric's hops that marked or dropped (median over repeats above 0),
/// each with its marks, drops and largest queue: which hop was the
/// bottleneck.
fn hop_keys(p: &Point) -> Vec<String> {
    let busy = |name: &str, what: &str| {
        p.metrics
            .get(&format!("hop.{name}.{what}"))
            .is_some_and(|s| s.median > 0.0)
    };
    let mut names: Vec<&str> = p
        .metrics
        .keys()
        .filter_map(|k| k.strip_prefix("hop.")?.strip_suffix(".marks"))
        .filter(|n| busy(n, "marks") || busy(n, "drops"))
        .collect();
    names.dedup();
    names
        .into_iter()
        .flat_map(|n| ["marks", "drops", "max_kb"].map(|w| format!("hop.{n}.{w}")))
        .collect()
}

/// `v` in the unit chosen for `typical`.
pub fn fmt_value(unit: Unit, typical: f64, v: f64) -> String {
    let (div, _, dec) = unit.display(typical);
    format!("{:.*}", dec, v / div)
}

/// `median [min–max] (ci lo–hi) n=…` of a spread, in the unit chosen for
/// `typical`.
pub fn fmt_spread(unit: Unit, typical: f64, s: &Spread) -> String {
    let f = |v: f64| fmt_value(unit, typical, v);
    let ci = match s.ci95 {
        Some([lo, hi]) => format!(" ({}–{})", f(lo), f(hi)),
        None => String::new(),
    };
    format!("{} [{}–{}]{ci} n={}", f(s.median), f(s.min), f(s.max), s.n)
}

/// A p-value as people read it: three decimals, and `<0.001` below that
/// (never `0.000`).
pub fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// `=0.012` or `<0.001`: what follows a `p`.
pub fn fmt_p_eq(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("={p:.3}")
    }
}

/// `×ratio (lo–hi) verdict (p=…, Holm …, n pairs)` of a comparison.
pub fn fmt_comparison(c: &Comparison) -> String {
    let r = match c.ratio {
        Some(r) => format!("×{r:.2}"),
        None => "×—".into(),
    };
    let ci = match c.ratio_ci95 {
        Some([lo, hi]) if lo != hi => format!(" ({lo:.2}–{hi:.2})"),
        Some(_) => String::new(),
        None if c.p.is_some() => " (unbounded)".into(),
        None => String::new(),
    };
    let mut what = Vec::new();
    match (c.p, c.p_holm) {
        (Some(p), Some(h)) if (p - h).abs() > 1e-12 => {
            what.push(format!("p{}, Holm {}", fmt_p_eq(p), fmt_p(h)))
        }
        (Some(p), _) => what.push(format!("p{}", fmt_p_eq(p))),
        _ => {}
    }
    if c.paired {
        what.push(format!("{} pairs", c.pairs));
    } else if !c.unpaired_seeds.is_empty() {
        what.push("unpaired: no seed in common".into());
    }
    if c.paired && !c.unpaired_seeds.is_empty() {
        what.push(format!(
            "seed {} unpaired",
            c.unpaired_seeds
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(" ({})", what.join(", "))
    };
    format!("{r}{ci} {}{what}", c.verdict.text())
}

/// The console's account of a summary: every headline number with its
/// spread, every scheme against the baseline with its verdict.
pub fn console_lines(sc: &Scenario, s: &Summary) -> Vec<String> {
    let m = &s.methods;
    let mut out = Vec::new();
    if !s.dilation.is_none() {
        out.push(format!(
            "time dilation D = {} (emulated): every time and rate below is emulated; the wire ran at rate / {0} and every time lasted {0} times longer",
            s.dilation
        ));
    }
    out.extend([
        format!("numbers: median [min–max] ({}) n=repeats", m.interval),
        format!(
            "vs {}: {}; p raw, Holm over the schemes at one point for one number (summary.json's methods say it all)",
            s.baseline,
            test_short(sc.stats.test)
        ),
    ]);
    let mut sweeps: Vec<SweepValue> = Vec::new();
    for p in &s.points {
        if !sweeps.contains(&p.sweep) {
            sweeps.push(p.sweep);
        }
    }
    for sweep in sweeps {
        let here: Vec<&Point> = s.points.iter().filter(|p| p.sweep == sweep).collect();
        out.extend(point_block(sc, sweep, &here));
    }
    out
}

/// The test and ratio in a line.
pub fn test_short(t: TestMethod) -> &'static str {
    match t {
        TestMethod::Paired => "paired by seed: ratio = geometric mean of per-seed ratios (ratio of means where a value is 0), paired t-test on log-ratios (differences)",
        TestMethod::Wilcoxon => "paired by seed: ratio = geometric mean of per-seed ratios (ratio of means where a value is 0), Wilcoxon signed-rank test",
        TestMethod::Welch => "unpaired: ratio of means with Fieller's interval, Welch's t-test",
        TestMethod::MannWhitney => "unpaired: ratio of means with Fieller's interval, Mann-Whitney U",
    }
}

fn point_block(sc: &Scenario, sweep: SweepValue, points: &[&Point]) -> Vec<String> {
    let mut out = vec![match sweep.tag() {
        t if t.is_empty() => "— results".to_string(),
        t => format!("— {t}"),
    }];
    for p in points.iter().filter(|p| p.short) {
        out.push(format!(
            "  {}: {} of {} repeats faithful — its numbers rest on fewer repeats than asked",
            p.aqm, p.repeats_faithful, p.repeats_asked
        ));
    }
    out.push(format!(
        "  repeats (first attempt / after retry / left out): {}",
        points
            .iter()
            .map(|p| {
                let a = &p.attempts;
                let aside = if a.set_aside > 0 {
                    format!(", {} attempts set aside", a.set_aside)
                } else {
                    String::new()
                };
                format!(
                    "{} {}/{}/{}{aside}",
                    p.aqm, a.first, a.after_retry, a.left_out
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    ));
    let mut keys: Vec<String> = Vec::new();
    for p in points {
        for k in headline_keys(sc, p) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let width = points.iter().map(|p| p.aqm.len()).max().unwrap_or(4);
    for key in keys {
        let (label, unit) = metric_info(&key);
        let typical = points
            .iter()
            .find_map(|p| p.metrics.get(&key))
            .map_or(0.0, |s| s.median);
        let (_, unit_label, _) = unit.display(typical);
        out.push(if unit_label.is_empty() {
            format!("  {label}")
        } else {
            format!("  {label} ({unit_label})")
        });
        for p in points {
            let Some(s) = p.metrics.get(&key) else {
                continue;
            };
            let cmp = p
                .vs_baseline
                .get(&key)
                .map_or(String::new(), |c| format!("   {}", fmt_comparison(c)));
            out.push(format!(
                "    {:<width$}  {}{cmp}",
                p.aqm,
                fmt_spread(unit, typical, s)
            ));
        }
        // The papers' statistic beside the mean of per-repeat ones.
        if key.ends_with(".p99_us") {
            let pooled: Vec<String> = points
                .iter()
                .filter_map(|p| {
                    let v = p.pooled_values.get(&key)?;
                    let r = p
                        .pooled_vs_baseline
                        .get(&key)
                        .map_or(String::new(), |r| format!(" ×{r:.2}"));
                    Some(format!("{} {}{r}", p.aqm, fmt_value(unit, typical, *v)))
                })
                .collect();
            if !pooled.is_empty() {
                out.push(format!(
                    "    pooled over all repeats' flows: {}",
                    pooled.join(", ")
                ));
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::exp::results::{
        Fidelity, FlowRow, HopResult, HostTotals, PingStats, StaticFlowResult, SwitchTotals,
    };
    use std::path::Path;

    const SC: &str = r#"
        [topology]
        hosts = 3
        [switch]
        aqm = ["dctcp", "tcn", "same"]
        [traffic]
        kind = "workload"
        cdf = "cdf/websearch.txt"
        load = [0.3, 0.5]
        flows = 10
        clients = [3]
        servers = [1, 2]
    "#;

    fn scenario(text: &str) -> Scenario {
        Scenario::from_toml(text, Path::new("t.toml")).unwrap()
    }

    pub(crate) fn flow(size: u64, fct_us: u64) -> FlowRow {
        FlowRow {
            size,
            fct_us,
            dscp: 0,
            start_us: 0,
        }
    }

    pub(crate) fn combo(
        aqm: &str,
        load: f64,
        repeat: u32,
        flows: Vec<FlowRow>,
        drops: u64,
    ) -> ComboResult {
        ComboResult {
            aqm: aqm.into(),
            sweep: SweepValue::Load(load),
            repeat,
            seed: 1 + 1000 * repeat as u64,
            dir: format!("{aqm}-load{load:.2}-r{repeat}"),
            expected: flows.len(),
            flows,
            queries: vec![],
            statics: vec![],
            wall_us: 1_000_000,
            switch: SwitchTotals {
                dropped_pkts: drops,
                ..Default::default()
            },
            hosts: HostTotals {
                timeouts: repeat as u64,
                ..Default::default()
            },
            queue_samples: "switch_timeseries.csv".into(),
            switch_ports: vec![],
            switch_offset_ms: None,
            fidelity: Fidelity {
                faithful: true,
                ..Default::default()
            },
            queue_mean_kb: 0.0,
            queue_p99_kb: 0.0,
            sojourn: None,
            ping: None,
            hops: vec![],
            retried: 0,
        }
    }

    fn input(sc: &Scenario) -> SummaryInput<'_> {
        SummaryInput {
            sc,
            name: "t",
            against: Against::One("dctcp"),
            scaling: serde_json::Value::Null,
            asked: BTreeMap::new(),
        }
    }

    /// dctcp's small flows take 100 + 10·r µs, tcn's about half that
    /// (50, 56, 64), `same` dctcp's within a microsecond (100, 111, 120):
    /// three repeats at load 0.5, repeat r of each with seed 1 + 1000·r.
    fn three_schemes() -> Vec<ComboResult> {
        let mut v = Vec::new();
        for r in 0..3u32 {
            let d = 100 + 10 * r as u64;
            v.push(combo(
                "dctcp",
                0.5,
                r,
                vec![flow(1_000, d), flow(20_000_000, 9_000)],
                10 + r as u64,
            ));
            v.push(combo(
                "tcn",
                0.5,
                r,
                vec![
                    flow(1_000, d / 2 + (r * r) as u64),
                    flow(20_000_000, 9_000 + r as u64),
                ],
                0,
            ));
            v.push(combo(
                "same",
                0.5,
                r,
                vec![flow(1_000, d + (r == 1) as u64), flow(20_000_000, 9_000)],
                10 + r as u64,
            ));
        }
        v
    }

    #[test]
    fn every_number_gets_its_spread_across_repeats() {
        let sc = scenario(SC);
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        assert_eq!(s.points.len(), 3);
        let d = &s.points[0];
        assert_eq!(
            (d.aqm.as_str(), d.repeats_faithful, d.short),
            ("dctcp", 3, false)
        );
        let small = &d.metrics["fct.small.mean_us"];
        assert_eq!(small.values, vec![100.0, 110.0, 120.0]);
        assert_eq!(
            (small.median, small.min, small.max, small.mean),
            (110.0, 100.0, 120.0, 110.0)
        );
        let (lo, hi) = stats::t_interval(&small.values).unwrap();
        assert_eq!(small.ci95, Some([lo, hi]));
        assert_eq!(d.metrics["rtos"].values, vec![0.0, 1.0, 2.0]);
        // Pooled as the papers pool: one distribution over 3 repeats' flows.
        let pooled = d.pooled.fct.as_ref().unwrap();
        assert_eq!(pooled.all.as_ref().unwrap().count, 6);
        assert_eq!(pooled.small.as_ref().unwrap().p99_us, 120);
        assert!(
            d.vs_baseline.is_empty(),
            "the baseline is not compared with itself"
        );
        assert_eq!(s.repeats.len(), 9);
        assert_eq!(s.repeats[0].dir, "dctcp-load0.50-r0");
        assert_eq!(s.repeats[0].values["fct.small.mean_us"], 100.0);
    }

    #[test]
    fn the_guards_stalls_and_lost_link_time_are_numbers_of_a_repeat() {
        let mut r = combo("dctcp", 0.5, 0, vec![flow(1_000, 100)], 0);
        r.fidelity.stalls = 734;
        r.fidelity.max_lost_fraction = 0.004;
        let v = repeat_values(&r);
        assert_eq!((v["guard.stalls"], v["guard.lost_share"]), (734.0, 0.004));
        assert_eq!(metric_info("guard.stalls").1, Unit::Count);
        assert!(metric_info("guard.lost_share").0.contains("link time lost"));
    }

    #[test]
    fn schemes_are_judged_against_the_baseline() {
        let sc = scenario(SC);
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        // Paired by seed on the log scale: the geometric mean of the
        // per-seed ratios 50/100, 56/110, 64/120.
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert_eq!(tcn.verdict, Verdict::Lower);
        assert!(tcn.paired && tcn.pairs == 3 && tcn.unpaired_seeds.is_empty());
        assert_eq!(tcn.scale, Some(stats::PairedScale::LogRatio));
        assert_eq!(tcn.ratio_of, RatioOf::PairedRatios);
        let gm = ((0.5f64.ln() + (56.0f64 / 110.0).ln() + (64.0f64 / 120.0).ln()) / 3.0).exp();
        assert!((tcn.ratio.unwrap() - gm).abs() < 1e-12, "{:?}", tcn.ratio);
        let want = stats::paired_ratio(&[50.0, 56.0, 64.0], &[100.0, 110.0, 120.0]);
        assert_eq!(tcn.p, want.t.map(|t| t.p));
        assert_eq!(tcn.p_signed_rank, want.signed_rank.map(|t| t.p));
        let same = &s.points[2].vs_baseline["fct.small.mean_us"];
        assert_eq!(same.verdict, Verdict::NoDifference);
        // Holm over the two schemes compared for this number at this load.
        let raw = [tcn.p.unwrap(), same.p.unwrap()];
        let adj = stats::holm(&raw);
        assert_eq!((tcn.p_holm, same.p_holm), (Some(adj[0]), Some(adj[1])));
        // Drops: tcn 0 against 10–12: a zero, so differences and the ratio
        // of the means: 0.
        let drops = &s.points[1].vs_baseline["drops"];
        assert_eq!((drops.verdict, drops.ratio), (Verdict::Lower, Some(0.0)));
        assert_eq!(
            (drops.scale, drops.ratio_of),
            (Some(stats::PairedScale::Difference), RatioOf::Means)
        );
        // Wilcoxon's signed rank cannot reject with 3 pairs (smallest p 0.25).
        let mut w = sc.clone();
        w.stats.test = TestMethod::Wilcoxon;
        let s = summarize(&input(&w), &refs);
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert_eq!((tcn.verdict, tcn.p), (Verdict::NoDifference, Some(0.25)));
        // Mann–Whitney cannot reject with 3 repeats a side (smallest p 0.1).
        let mut mw = sc.clone();
        mw.stats.test = TestMethod::MannWhitney;
        let s = summarize(&input(&mw), &refs);
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert_eq!((tcn.verdict, tcn.p), (Verdict::NoDifference, Some(0.1)));
        assert!(!tcn.paired);
    }

    #[test]
    fn spread_free_samples_are_identical_or_not_never_p_zero() {
        let sc = scenario(SC);
        let mut results = three_schemes();
        for r in results.iter_mut() {
            match r.aqm.as_str() {
                // Exactly half of dctcp in every repeat.
                "tcn" => r.flows[0].fct_us = (100 + 10 * r.repeat as u64) / 2,
                // Exactly dctcp.
                "same" => r.flows[0].fct_us = 100 + 10 * r.repeat as u64,
                _ => {}
            }
        }
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert_eq!(
            (tcn.verdict, tcn.p, tcn.p_holm),
            (Verdict::NoSpread, None, None)
        );
        assert_eq!(tcn.ratio, Some(0.5));
        let same = &s.points[2].vs_baseline["fct.small.mean_us"];
        assert_eq!((same.verdict, same.p), (Verdict::Identical, None));
        // The large flows: 9000 µs in every repeat of dctcp and same.
        let large = &s.points[2].vs_baseline["fct.large.mean_us"];
        assert_eq!(large.verdict, Verdict::Identical);
        // Unpaired, two samples that each repeat one value: the same words.
        let mut welch = sc.clone();
        welch.stats.test = TestMethod::Welch;
        let s = summarize(&input(&welch), &refs);
        let large = &s.points[2].vs_baseline["fct.large.mean_us"];
        assert_eq!((large.verdict, large.p), (Verdict::Identical, None));
        let text = console_lines(&sc, &summarize(&input(&sc), &refs)).join("\n");
        assert!(text.contains("differs without spread (no test)"), "{text}");
        assert!(text.contains("identical in every repeat"), "{text}");
        assert!(!text.contains("p=0.000"), "{text}");
    }

    #[test]
    fn a_seed_lost_on_one_side_leaves_the_pairing_and_is_named() {
        let sc = scenario(SC);
        let mut results = three_schemes();
        // dctcp's repeat 1 (seed 1001) left out as unfaithful.
        results[3].fidelity.faithful = false;
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert_eq!((tcn.n, tcn.pairs), ([3, 2], 2));
        assert_eq!(tcn.unpaired_seeds, vec![1001]);
        let want = stats::paired_ratio(&[50.0, 64.0], &[100.0, 120.0]);
        assert_eq!(tcn.p, want.t.map(|t| t.p));
        let text = console_lines(&sc, &s).join("\n");
        assert!(text.contains("2 pairs, seed 1001 unpaired"), "{text}");
        // No seed in common (runs made on other schedules): unpaired, Welch.
        for r in results.iter_mut().filter(|r| r.aqm == "tcn") {
            r.seed += 7;
        }
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let tcn = &s.points[1].vs_baseline["fct.small.mean_us"];
        assert!(!tcn.paired);
        assert_eq!(tcn.test, TestMethod::Welch);
        assert_eq!(tcn.unpaired_seeds.len(), 5);
        assert_eq!(tcn.ratio_of, RatioOf::Means);
        let welch = stats::welch(&[50.0, 56.0, 64.0], &[100.0, 120.0]).unwrap();
        assert_eq!(tcn.p, Some(welch.p));
        assert!(console_lines(&sc, &s)
            .join("\n")
            .contains("unpaired: no seed in common"));
    }

    #[test]
    fn retried_attempts_are_counted_per_point() {
        let sc = scenario(SC);
        let mut results = three_schemes();
        // tcn r0 faithful after two attempts set aside; tcn r2 left out
        // after one.
        results[1].retried = 2;
        results[7].retried = 1;
        results[7].fidelity.faithful = false;
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let tcn = &s.points[1];
        assert_eq!(
            tcn.attempts,
            Attempts {
                first: 1,
                after_retry: 1,
                left_out: 1,
                set_aside: 3
            }
        );
        assert_eq!(
            s.points[0].attempts,
            Attempts {
                first: 3,
                ..Default::default()
            }
        );
        let text = console_lines(&sc, &s).join("\n");
        assert!(
            text.contains("repeats (first attempt / after retry / left out): dctcp 3/0/0; tcn 1/1/1, 3 attempts set aside; same 3/0/0"),
            "{text}"
        );
        let row = s
            .repeats
            .iter()
            .find(|r| r.dir == "tcn-load0.50-r0")
            .unwrap();
        assert_eq!(row.retried, 2);
    }

    #[test]
    fn the_papers_pooled_p99_stands_beside_the_per_repeat_one() {
        let sc = scenario(SC);
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        // dctcp's small flows over all three repeats: 100, 110, 120.
        let d = &s.points[0];
        assert_eq!(d.pooled_values["fct.small.p99_us"], 120.0);
        assert_eq!(d.pooled_values["fct.small.mean_us"], 110.0);
        let tcn = &s.points[1];
        assert_eq!(tcn.pooled_values["fct.small.p99_us"], 64.0);
        assert_eq!(tcn.pooled_vs_baseline["fct.small.p99_us"], 64.0 / 120.0);
        let text = console_lines(&sc, &s).join("\n");
        assert!(
            text.contains(
                "pooled over all repeats' flows: dctcp 120, tcn 64 ×0.53, same 120 ×1.00"
            ),
            "{text}"
        );
    }

    #[test]
    fn unfaithful_repeats_are_left_out_and_counted() {
        let sc = scenario(SC);
        let mut results = three_schemes();
        results[3].fidelity = Fidelity {
            faithful: false,
            reasons: vec!["port x lost 3 %".into()],
            ..Default::default()
        };
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let d = &s.points[0];
        assert_eq!((d.repeats_asked, d.repeats_faithful, d.short), (3, 2, true));
        assert_eq!(d.left_out, vec!["dctcp-load0.50-r1: port x lost 3 %"]);
        assert_eq!(d.metrics["fct.small.mean_us"].values, vec![100.0, 120.0]);
        assert!(!s.faithful);
        let text = console_lines(&sc, &s).join("\n");
        assert!(text.contains("dctcp: 2 of 3 repeats faithful"), "{text}");
        // A single faithful repeat: no interval, no test.
        results[0].fidelity.faithful = false;
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        assert_eq!(s.points[0].metrics["drops"].ci95, None);
        assert_eq!(s.points[1].vs_baseline["drops"].verdict, Verdict::Untested);
    }

    #[test]
    fn the_console_shows_spread_and_verdicts() {
        let sc = scenario(SC);
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let lines = console_lines(&sc, &summarize(&input(&sc), &refs));
        let text = lines.join("\n");
        assert!(text.contains("Student's t"), "{text}");
        assert!(
            text.contains("small-flow (<100KB) FCT, mean (us)"),
            "{text}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("dctcp") && l.contains("110 [100–120]")),
            "{text}"
        );
        assert!(
            lines.iter().any(|l| l.trim_start().starts_with("tcn")
                && l.contains("×0.51 (0.47–0.56) lower (p<0.001, Holm 0.002, 3 pairs)")),
            "{text}"
        );
        assert!(
            text.contains("no difference beyond run-to-run noise"),
            "{text}"
        );
        assert!(!text.contains("dilation"), "{text}");
    }

    #[test]
    fn the_summary_carries_d_and_says_it_is_emulated() {
        let sc = scenario(SC);
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s1 = summarize(&input(&sc), &refs);
        assert!(s1.dilation.is_none());
        assert_eq!(serde_json::to_value(&s1).unwrap()["dilation"], 1.0);
        let mut sc4 = sc.clone();
        sc4.dilation = Some(4.0);
        let s4 = summarize(&input(&sc4), &refs);
        assert_eq!(serde_json::to_value(&s4).unwrap()["dilation"], 4.0);
        // The numbers are the stored (emulated) ones: nothing is converted
        // again.
        assert_eq!(s4.points, s1.points);
        let lines = console_lines(&sc4, &s4);
        assert!(
            lines[0].starts_with("time dilation D = 4 (emulated)"),
            "{lines:?}"
        );
    }

    #[test]
    fn static_shares_entries_and_ping() {
        let mut a = combo("tcn", 0.0, 0, vec![], 0);
        a.sweep = SweepValue::None;
        let st = |label: &str, dscp: u8, g: f64, fct: Option<u64>| StaticFlowResult {
            label: label.into(),
            dscp,
            goodput_mbps: g,
            samples: vec![],
            start_ms: 0,
            size: None,
            fct_us: fct,
        };
        a.statics = vec![
            st("f0 h1→h3 dscp 0", 0, 400.0, None),
            st("f1.0 h2→h3 dscp 1", 1, 200.0, Some(5_000)),
            st("f1.1 h2→h3 dscp 1", 1, 200.0, Some(7_000)),
        ];
        a.ping = Some(PingStats::from_ping_output(
            "64 bytes: time=0.300 ms\n64 bytes: time=0.500 ms\n2 packets transmitted, 2 received",
        ));
        let v = repeat_values(&a);
        assert_eq!(v["goodput_mbps"], 800.0);
        assert_eq!((v["dscp0.share"], v["dscp1.share"]), (0.5, 0.5));
        assert_eq!(v["flow1.goodput_mbps"], 400.0);
        assert_eq!(v["flow1.fct_us"], 6_000.0);
        assert_eq!(v["ping.p50_us"], 300.0);
        assert!(!v.contains_key("fct.all.mean_us"));
        assert_eq!(flow_entry("f12.3 h1→h2"), Some(12));
    }

    #[test]
    fn bootstrap_intervals_are_seeded_per_number() {
        let mut sc = scenario(SC);
        sc.stats.interval = IntervalMethod::Bootstrap;
        sc.stats.resamples = 2000;
        let results = three_schemes();
        let refs: Vec<&ComboResult> = results.iter().collect();
        let a = summarize(&input(&sc), &refs);
        let b = summarize(&input(&sc), &refs);
        assert_eq!(a, b, "the same results give the same summary");
        let ci = a.points[0].metrics["fct.small.mean_us"].ci95.unwrap();
        assert!(ci[0] >= 100.0 && ci[1] <= 120.0 && ci[0] < ci[1], "{ci:?}");
        assert!(a.methods.interval.contains("bootstrap"));
    }

    #[test]
    fn a_fabric_run_names_the_hops_that_marked_and_dropped() {
        let mut sc = scenario(SC);
        // Only whether the scenario has a fabric matters here.
        sc.fabric = Some(toml::Table::new());
        let hop = |name: &str, marked: u64, dropped: u64, backlog: u64| HopResult {
            name: name.into(),
            tx_pkts: 100,
            marked_pkts: marked,
            dropped_pkts: dropped,
            max_backlog_bytes: backlog,
            sojourn_p99_us: 250.0,
        };
        let results: Vec<ComboResult> = (0..3u32)
            .map(|r| {
                let mut c = combo("dctcp", 0.5, r, vec![flow(1_000, 100)], 0);
                c.hops = vec![
                    hop("leaf1:h1", 0, 0, 3_000),
                    hop("spine1:leaf2", 7 + r as u64, 0, 30_000),
                    hop("leaf2:h3", 0, r as u64, 9_000),
                ];
                c
            })
            .collect();
        let v = repeat_values(&results[0]);
        assert_eq!(v["hop.spine1:leaf2.marks"], 7.0);
        assert_eq!(v["hop.spine1:leaf2.max_kb"], 30.0);
        assert_eq!(v["hop.leaf1:h1.marks"], 0.0);
        assert_eq!(v["hop.leaf1:h1.sojourn_p99_us"], 250.0);
        assert_eq!(
            metric_info("hop.spine1:leaf2.marks"),
            ("CE marks at spine1:leaf2".to_string(), Unit::Count)
        );
        let refs: Vec<&ComboResult> = results.iter().collect();
        let s = summarize(&input(&sc), &refs);
        let p = &s.points[0];
        assert_eq!(
            p.metrics["hop.spine1:leaf2.marks"].values,
            vec![7.0, 8.0, 9.0]
        );
        // The console shows the hops that marked or dropped (median > 0),
        // in name order, and not the quiet ones.
        let keys = headline_keys(&sc, p);
        let hops: Vec<&str> = keys
            .iter()
            .filter(|k| k.starts_with("hop."))
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            hops,
            [
                "hop.leaf2:h3.marks",
                "hop.leaf2:h3.drops",
                "hop.leaf2:h3.max_kb",
                "hop.spine1:leaf2.marks",
                "hop.spine1:leaf2.drops",
                "hop.spine1:leaf2.max_kb",
            ]
        );
        // One switch: no hop lines.
        assert!(!headline_keys(&scenario(SC), p)
            .iter()
            .any(|k| k.starts_with("hop.")));
    }
}

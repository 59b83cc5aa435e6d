//! Rebuilding a results directory's summary, statistics and figures from
//! what the run stored (`manifest.json` and every `<combination>/result.json`
//! with its time series), without running anything: `softswitch-exp report`,
//! and the last step of every run, so that a run's `summary.json` and a
//! later `report`'s are the same bytes.
//!
//! Several directories of one scenario can be merged (repeats run on
//! different days: the later run started with `run --first-repeat K`, so
//! its repeats have their own seeds and directory names).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::figures::{self, FigureInput};
use super::results::{ComboResult, StoredResult};
use super::scenario::{Scenario, SweepValue};
use super::summary::{self, metric_info, Summary, SummaryInput};

/// A results directory (or several merged) as read back.
pub struct Loaded {
    /// The scenario as run (from the first directory's manifest).
    pub sc: Scenario,
    /// Its name.
    pub name: String,
    /// How it was scaled (`null`: not).
    pub scaling: Value,
    /// Every combination found, in directory order.
    pub results: Vec<StoredResult>,
    /// Repeats asked per (AQM, sweep tag), from the manifests' combination lists.
    pub asked: BTreeMap<(String, String), usize>,
    /// Things the user should know (merging).
    pub notes: Vec<String>,
}

/// What one directory's manifest says about the run.
struct Manifest {
    sc: Scenario,
    name: String,
    scaling: Value,
    /// (AQM, sweep value, directory) of every combination asked for.
    combos: Vec<(String, SweepValue, String)>,
}

fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.json");
    let v: Value = serde_json::from_str(&fs::read_to_string(&path).with_context(|| {
        format!(
            "{} — is this a softswitch-exp results directory?",
            path.display()
        )
    })?)
    .with_context(|| format!("parsing {}", path.display()))?;
    let sc = Scenario::deserialize(&v["scenario"])
        .with_context(|| format!("{}: the scenario", path.display()))?;
    #[derive(Deserialize)]
    struct C {
        aqm: String,
        sweep: SweepValue,
        dir: String,
    }
    let combos = Vec::<C>::deserialize(&v["combos"])
        .with_context(|| format!("{}: the combinations", path.display()))?
        .into_iter()
        .map(|c| (c.aqm, c.sweep, c.dir))
        .collect();
    Ok(Manifest {
        sc,
        name: v["scenario_name"].as_str().unwrap_or("scenario").to_owned(),
        scaling: v["scaling"].clone(),
        combos,
    })
}

/// The scenario without what may differ between runs that can be merged.
fn mergeable(sc: &Scenario) -> Scenario {
    let mut s = sc.clone();
    s.repeat = 1;
    s.name = None;
    s.description = None;
    s
}

/// The directories of the combinations the manifest lists that completed
/// (have a `result.json`), sorted: nothing else in `dir` is read.
fn combo_dirs(dir: &Path, m: &Manifest) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = m
        .combos
        .iter()
        .map(|c| dir.join(&c.2))
        .filter(|p| p.join("result.json").is_file())
        .collect();
    v.sort();
    v
}

/// Reads one or more results directories of the same scenario.
pub fn load(dirs: &[PathBuf]) -> Result<Loaded> {
    let Some(first_dir) = dirs.first() else {
        bail!("no results directory given");
    };
    let first = read_manifest(first_dir)?;
    let mut loaded = Loaded {
        sc: first.sc.clone(),
        name: first.name.clone(),
        scaling: first.scaling.clone(),
        results: Vec::new(),
        asked: BTreeMap::new(),
        notes: Vec::new(),
    };
    for dir in dirs {
        let m = read_manifest(dir)?;
        if mergeable(&m.sc) != mergeable(&first.sc) || m.scaling != first.scaling {
            bail!(
                "{} ran another scenario (or another rate or time dilation) than {} — only repeats of one scenario merge",
                dir.display(),
                first_dir.display()
            );
        }
        for d in combo_dirs(dir, &m) {
            loaded
                .results
                .push(StoredResult::load(&d).map_err(|e| anyhow!(e))?);
        }
        for (aqm, sweep, _) in m.combos {
            *loaded.asked.entry((aqm, sweep.tag())).or_default() += 1;
        }
    }
    if loaded.results.is_empty() {
        bail!(
            "no combination results (*/result.json) in {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    loaded.notes.extend(same_seeds(&loaded.results));
    Ok(loaded)
}

/// Merged repeats that ran the same flow schedules (the same seed).
fn same_seeds(results: &[StoredResult]) -> Vec<String> {
    let mut seen: BTreeMap<(String, String, u64), &Path> = BTreeMap::new();
    let mut notes = Vec::new();
    for s in results {
        let r = &s.result;
        let key = (r.aqm.clone(), r.sweep.tag(), r.seed);
        if let Some(other) = seen.insert(key, &s.dir) {
            notes.push(format!(
                "{} and {} ran with the same seed {}: their flow schedules are identical (start a later run with --first-repeat)",
                other.display(),
                s.dir.display(),
                r.seed
            ));
        }
    }
    notes
}

/// What [`write`] produced.
pub struct Report {
    /// The summary written.
    pub summary: Summary,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Things the user should know.
    pub notes: Vec<String>,
    /// The console's account of the numbers.
    pub console: Vec<String>,
}

/// `summary.json` as written: pretty JSON and a newline.
pub fn summary_json(s: &Summary) -> Result<String> {
    Ok(serde_json::to_string_pretty(s)? + "\n")
}

/// Writes `summary.json`, `stats.csv` and the figures (with their CSVs) of
/// `loaded` into `out`, comparing against `baseline` (default: the
/// scenario's).
pub fn write(out: &Path, loaded: &Loaded, baseline: Option<&str>) -> Result<Report> {
    let results: Vec<&ComboResult> = loaded.results.iter().map(|s| &s.result).collect();
    let present = summary::aqm_order(&loaded.sc, &results);
    let baseline = baseline.unwrap_or(loaded.sc.baseline_aqm());
    if !present.iter().any(|a| a == baseline) {
        bail!(
            "baseline `{baseline}` did not run here — choose one of {}",
            present.join(", ")
        );
    }
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let input = SummaryInput {
        sc: &loaded.sc,
        name: &loaded.name,
        baseline,
        scaling: loaded.scaling.clone(),
        asked: loaded.asked.clone(),
    };
    let summary = summary::summarize(&input, &results);
    let mut files = vec![out.join("summary.json"), out.join("stats.csv")];
    fs::write(&files[0], summary_json(&summary)?)
        .with_context(|| format!("writing {}", files[0].display()))?;
    write_stats_csv(&files[1], &summary)
        .with_context(|| format!("writing {}", files[1].display()))?;
    let fig_input = FigureInput {
        sc: &loaded.sc,
        summary: &summary,
        results: &loaded.results,
        notes: Default::default(),
    };
    let (plots, mut notes) =
        figures::write_all(out, &fig_input).map_err(|e| anyhow!("plotting: {e}"))?;
    files.extend(plots);
    notes.splice(0..0, loaded.notes.iter().cloned());
    let console = summary::console_lines(&loaded.sc, &summary);
    Ok(Report {
        summary,
        files,
        notes,
        console,
    })
}

/// One row of `stats.csv`: one number of one point, with its comparison.
#[derive(Serialize)]
struct StatsRow<'a> {
    sweep: String,
    x: f64,
    aqm: &'a str,
    metric: &'a str,
    what: String,
    repeats_asked: usize,
    repeats_faithful: usize,
    n: usize,
    median: f64,
    min: f64,
    max: f64,
    mean: f64,
    sd: f64,
    ci95_lo: Option<f64>,
    ci95_hi: Option<f64>,
    baseline: &'a str,
    ratio: Option<f64>,
    ratio_ci95_lo: Option<f64>,
    ratio_ci95_hi: Option<f64>,
    p: Option<f64>,
    p_holm: Option<f64>,
    verdict: &'a str,
}

/// Every number of every point, one row each (the methods are in
/// `summary.json`'s `methods`).
fn write_stats_csv(path: &Path, s: &Summary) -> Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    for p in &s.points {
        for (key, m) in &p.metrics {
            let c = p.vs_baseline.get(key);
            w.serialize(StatsRow {
                sweep: p.sweep.tag(),
                x: p.x,
                aqm: &p.aqm,
                metric: key,
                what: metric_info(key).0,
                repeats_asked: p.repeats_asked,
                repeats_faithful: p.repeats_faithful,
                n: m.n,
                median: m.median,
                min: m.min,
                max: m.max,
                mean: m.mean,
                sd: m.sd,
                ci95_lo: m.ci95.map(|c| c[0]),
                ci95_hi: m.ci95.map(|c| c[1]),
                baseline: &s.baseline,
                ratio: c.and_then(|c| c.ratio),
                ratio_ci95_lo: c.and_then(|c| c.ratio_ci95.map(|r| r[0])),
                ratio_ci95_hi: c.and_then(|c| c.ratio_ci95.map(|r| r[1])),
                p: c.and_then(|c| c.p),
                p_holm: c.and_then(|c| c.p_holm),
                verdict: c.map_or("", |c| match c.verdict {
                    summary::Verdict::Lower => "lower",
                    summary::Verdict::Higher => "higher",
                    summary::Verdict::NoDifference => "no_difference",
                    summary::Verdict::Untested => "untested",
                }),
            })?;
        }
    }
    w.flush()?;
    Ok(())
}

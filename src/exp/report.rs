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
use super::summary::{self, metric_info, Against, Summary, SummaryInput};

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
    /// Runs kept apart ([`load_apart`]): the first directory's label, whose
    /// schemes the others' same AQMs are compared with.
    pub reference: Option<String>,
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
/// The hosts' D is kept when it is not the run's (a negative control,
/// `run --host-dilation`), so such a run never merges with normal ones.
fn mergeable(sc: &Scenario) -> Scenario {
    let mut s = sc.clone();
    s.repeat = 1;
    s.name = None;
    s.description = None;
    s.host_dilation = sc.hosts_apart().then(|| sc.host_dilation().factor());
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

impl Loaded {
    /// What each scheme is compared with: `baseline` (default: the
    /// scenario's), or for runs kept apart the same AQM in the first
    /// directory, where no `baseline` applies.
    pub fn against<'a>(&'a self, baseline: Option<&'a str>) -> Result<Against<'a>> {
        match (&self.reference, baseline) {
            (Some(_), Some(b)) => bail!(
                "--baseline {b} does not apply to runs kept apart (--compare): each AQM is \
                 compared with the same AQM in the first directory; to compare schemes within \
                 one run, report that directory alone"
            ),
            (Some(reference), None) => Ok(Against::SameAqm(reference)),
            (None, b) => {
                let b = b.unwrap_or(self.sc.baseline_aqm());
                let results: Vec<&ComboResult> = self.results.iter().map(|s| &s.result).collect();
                let present = summary::aqm_order(&self.sc, &results);
                if !present.iter().any(|a| a == b) {
                    bail!(
                        "baseline `{b}` did not run here — choose one of {}",
                        present.join(", ")
                    );
                }
                Ok(Against::One(b))
            }
        }
    }

    /// Adds every completed combination of `dir` (its manifest `m`) and the
    /// repeats it asked for, each AQM named by `name` (the identity when
    /// merging, `<label>:<aqm>` when comparing apart).
    fn add_dir(&mut self, dir: &Path, m: &Manifest, name: impl Fn(&str) -> String) -> Result<()> {
        for d in combo_dirs(dir, m) {
            let mut s = StoredResult::load(&d).map_err(|e| anyhow!(e))?;
            s.result.aqm = name(&s.result.aqm);
            self.results.push(s);
        }
        for (aqm, sweep, _) in &m.combos {
            *self.asked.entry((name(aqm), sweep.tag())).or_default() += 1;
        }
        Ok(())
    }

    /// Refuses directories that hold no completed combination.
    fn require_results(&self, dirs: &[PathBuf]) -> Result<()> {
        if self.results.is_empty() {
            bail!(
                "no combination results (*/result.json) in {}",
                dirs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(())
    }
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
        reference: None,
    };
    for dir in dirs {
        let m = read_manifest(dir)?;
        if mergeable(&m.sc) != mergeable(&first.sc) || m.scaling != first.scaling {
            bail!(
                "{} ran another scenario (or another rate, time dilation, or the hosts' time \
                 dilation of a negative control) than {} — only repeats of one scenario merge",
                dir.display(),
                first_dir.display()
            );
        }
        loaded.add_dir(dir, &m, str::to_owned)?;
    }
    loaded.require_results(dirs)?;
    loaded.notes.extend(same_seeds(&loaded.results));
    Ok(loaded)
}

/// The scenario without what may differ between runs that are compared
/// apart ([`load_apart`]): what merging allows to differ, and the time
/// dilation D.
fn comparable(sc: &Scenario) -> Scenario {
    let mut s = mergeable(sc);
    s.dilation = None;
    s.host_dilation = None;
    s
}

/// D as a label: `D4`, `D2.5`; a negative control whose hosts ran at
/// another D says so: `D40-hosts1`.
pub fn dilation_label(sc: &Scenario) -> String {
    if sc.hosts_apart() {
        format!("D{}-hosts{}", sc.dilation(), sc.host_dilation())
    } else {
        format!("D{}", sc.dilation())
    }
}

/// Reads directories of one scenario run under different settings — time
/// dilation D, another `--rate`, or just another day — and keeps each apart
/// as runs of their own, so that the summary compares them: every
/// combination's AQM is renamed `<label>:<aqm>` (`D4:dctcp`), and each is
/// compared with the same AQM in the first directory (`D1:dctcp`; the
/// scenario's baseline, renamed, only names the figures' reference). Labels
/// are `labels` when given (one per directory), else `D<d>` when the
/// directories differ in D, the rate they ran at when they differ in that,
/// and `run1`, `run2`, … otherwise. This is how dilation invariance is
/// judged: the same scenario at D = 1 and D = 4, each point's numbers with
/// their spread and a verdict per metric.
pub fn load_apart(dirs: &[PathBuf], labels: &[String]) -> Result<Loaded> {
    if dirs.len() < 2 {
        bail!("comparing apart needs two or more results directories");
    }
    if !labels.is_empty() && labels.len() != dirs.len() {
        bail!(
            "{} labels for {} directories: give one --label per directory, in order, or none",
            labels.len(),
            dirs.len()
        );
    }
    let manifests = dirs
        .iter()
        .map(|d| read_manifest(d))
        .collect::<Result<Vec<_>>>()?;
    let first = &manifests[0];
    for (m, dir) in manifests.iter().zip(dirs).skip(1) {
        if comparable(&m.sc) != comparable(&first.sc) {
            bail!(
                "{} ran another scenario than {} — only runs of one scenario (at any D or rate) compare",
                dir.display(),
                dirs[0].display()
            );
        }
    }
    let d_of = |sc: &Scenario| (sc.dilation(), sc.host_dilation());
    let d_differs = manifests.iter().any(|m| d_of(&m.sc) != d_of(&first.sc));
    let labels: Vec<String> = if !labels.is_empty() {
        labels.to_vec()
    } else if d_differs {
        manifests.iter().map(|m| dilation_label(&m.sc)).collect()
    } else if manifests.iter().any(|m| m.scaling != first.scaling) {
        manifests
            .iter()
            .map(|m| m.scaling["to"].as_str().unwrap_or("unscaled").to_owned())
            .collect()
    } else {
        (1..=dirs.len()).map(|k| format!("run{k}")).collect()
    };
    for (i, l) in labels.iter().enumerate() {
        if l.is_empty() || l.contains(':') || labels[..i].contains(l) {
            bail!(
                "labels {labels:?}: each directory needs its own non-empty label without ':' (--label)"
            );
        }
    }
    let rename = |label: &str, aqm: &str| format!("{label}:{aqm}");
    let mut sc = first.sc.clone();
    sc.switch.aqm = labels
        .iter()
        .flat_map(|l| first.sc.switch.aqm.iter().map(move |a| rename(l, a)))
        .collect();
    sc.baseline = Some(rename(&labels[0], first.sc.baseline_aqm()));
    if d_differs {
        // Every number is in emulated units whatever D was; no one D is
        // the run's.
        sc.dilation = None;
    }
    let mut loaded = Loaded {
        sc,
        name: first.name.clone(),
        scaling: Value::Null,
        results: Vec::new(),
        asked: BTreeMap::new(),
        notes: Vec::new(),
        reference: Some(labels[0].clone()),
    };
    let mut compared = Vec::new();
    for ((m, dir), label) in manifests.into_iter().zip(dirs).zip(&labels) {
        loaded.add_dir(dir, &m, |aqm| rename(label, aqm))?;
        loaded.notes.push(format!(
            "{label}: {} (time dilation D = {}{}{})",
            dir.display(),
            m.sc.dilation(),
            if m.sc.hosts_apart() {
                format!(
                    ", the hosts' timers at D = {}: a negative control",
                    m.sc.host_dilation()
                )
            } else {
                String::new()
            },
            m.scaling["to"]
                .as_str()
                .map(|r| format!(", rate scaled to {r}"))
                .unwrap_or_default()
        ));
        compared.push(serde_json::json!({
            "label": label,
            "dir": dir.display().to_string(),
            "dilation": m.sc.dilation(),
            "host_dilation": m.sc.host_dilation(),
            "scaling": m.scaling,
        }));
    }
    loaded.scaling = serde_json::json!({ "compared": compared });
    loaded.require_results(dirs)?;
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
/// scenario's); runs kept apart compare each AQM with itself in the first
/// directory instead, and take no `baseline`.
pub fn write(out: &Path, loaded: &Loaded, baseline: Option<&str>) -> Result<Report> {
    let results: Vec<&ComboResult> = loaded.results.iter().map(|s| &s.result).collect();
    let against = loaded.against(baseline)?;
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let input = SummaryInput {
        sc: &loaded.sc,
        name: &loaded.name,
        against,
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
    notes.extend(lossless_retrans_notes(&loaded.results));
    let console = summary::console_lines(&loaded.sc, &summary);
    Ok(Report {
        summary,
        files,
        notes,
        console,
    })
}

/// A note per combination whose switch dropped nothing while its hosts
/// retransmitted (their timers resent data: TLP, spurious RTO, …), from
/// what it stored — also for results written before the flag existed.
fn lossless_retrans_notes(results: &[StoredResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|s| {
            let r = &s.result;
            r.hosts
                .retrans_note(&s.dir.display().to_string(), r.switch.dropped_pkts)
        })
        .collect()
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
                baseline: p.baseline.as_deref().unwrap_or(""),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::summary::tests::{combo, flow};
    use crate::exp::summary::Verdict;

    const SC: &str = r#"
        [topology]
        hosts = 3
        [switch]
        aqm = ["dctcp", "tcn"]
        [traffic]
        kind = "workload"
        cdf = "cdf/websearch.txt"
        load = [0.5]
        flows = 10
        clients = [3]
        servers = [1, 2]
    "#;

    /// A results directory of `SC` at time dilation `d`: five repeats per
    /// AQM whose small flows take `fct(r)` µs under DCTCP and twice that
    /// under TCN.
    fn results_dir(root: &Path, name: &str, d: f64, fct: impl Fn(u32) -> u64) -> PathBuf {
        let mut sc = Scenario::from_toml(SC, Path::new("t.toml")).unwrap();
        sc.dilation = (d != 1.0).then_some(d);
        let dir = root.join(name);
        let mut combos = Vec::new();
        for (aqm, k) in [("dctcp", 1), ("tcn", 2)] {
            for r in 0..5u32 {
                let flows = vec![flow(1_000, k * fct(r)), flow(20_000_000, 9_000)];
                let result = combo(aqm, 0.5, r, flows, 0);
                let cdir = result.dir.clone();
                fs::create_dir_all(dir.join(&cdir)).unwrap();
                fs::write(
                    dir.join(&cdir).join("result.json"),
                    serde_json::to_string(&result).unwrap(),
                )
                .unwrap();
                combos.push(
                    serde_json::json!({"aqm": aqm, "sweep": SweepValue::Load(0.5), "dir": cdir}),
                );
            }
        }
        let manifest = serde_json::json!({
            "scenario_name": "t",
            "scenario": sc,
            "scaling": null,
            "combos": combos,
        });
        fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        dir
    }

    #[test]
    fn a_negative_control_is_labelled_and_never_merged() {
        let root = tempfile::tempdir().unwrap();
        let d40 = results_dir(root.path(), "d40", 40.0, |r| 100 + r as u64);
        let again = results_dir(root.path(), "d40b", 40.0, |r| 100 + r as u64);
        let control = root.path().join("d40-hosts1");
        fs::rename(
            results_dir(root.path(), "tmp", 40.0, |r| 100 + r as u64),
            &control,
        )
        .unwrap();
        // The control's manifest: the hosts at D_H = 1, the rest at D = 40.
        let mpath = control.join("manifest.json");
        let mut m: Value = serde_json::from_str(&fs::read_to_string(&mpath).unwrap()).unwrap();
        m["scenario"]["host_dilation"] = 1.0.into();
        fs::write(&mpath, m.to_string()).unwrap();
        let sc = read_manifest(&control).unwrap().sc;
        assert!(sc.hosts_apart());
        assert_eq!(dilation_label(&sc), "D40-hosts1");
        assert_eq!(dilation_label(&read_manifest(&d40).unwrap().sc), "D40");

        // Two normal runs at D = 40 merge; the control does not, saying why.
        assert!(load(&[d40.clone(), again.clone()]).is_ok());
        let e = load(&[d40.clone(), control.clone()]).err().unwrap();
        assert!(e.to_string().contains("negative control"), "{e}");
        let e = load(&[control.clone(), d40.clone()]).err().unwrap();
        assert!(
            e.to_string().contains("only repeats of one scenario merge"),
            "{e}"
        );
        // A host_dilation equal to D is the normal run: it merges.
        let same = root.path().join("d40-hosts40");
        fs::rename(
            results_dir(root.path(), "tmp2", 40.0, |r| 100 + r as u64),
            &same,
        )
        .unwrap();
        let mpath = same.join("manifest.json");
        let mut m: Value = serde_json::from_str(&fs::read_to_string(&mpath).unwrap()).unwrap();
        m["scenario"]["host_dilation"] = 40.0.into();
        fs::write(&mpath, m.to_string()).unwrap();
        assert!(load(&[d40.clone(), same.clone()]).is_ok());

        // Compared apart: its own label, judged against the same AQM at D = 40.
        let l = load_apart(&[d40.clone(), control.clone()], &[]).unwrap();
        assert_eq!(
            l.sc.switch.aqm,
            ["D40:dctcp", "D40:tcn", "D40-hosts1:dctcp", "D40-hosts1:tcn"]
        );
        assert_eq!(l.scaling["compared"][1]["host_dilation"], 1.0);
        assert_eq!(l.scaling["compared"][0]["host_dilation"], 40.0);
        assert!(l.notes[1].contains("negative control"), "{:?}", l.notes);
        assert_eq!(
            l.against(None).unwrap().baseline_of("D40-hosts1:tcn"),
            Some("D40:tcn".into())
        );
        // Among other Ds too.
        let d1 = results_dir(root.path(), "d1", 1.0, |r| 100 + r as u64);
        let l = load_apart(&[d1, d40, control], &[]).unwrap();
        assert_eq!(l.sc.switch.aqm[4..], ["D40-hosts1:dctcp", "D40-hosts1:tcn"]);
    }

    #[test]
    fn lossless_retransmissions_are_noted_from_the_stored_counters() {
        let root = tempfile::tempdir().unwrap();
        let dir = results_dir(root.path(), "r", 1.0, |r| 100 + r as u64);
        // One repeat's hosts retransmitted with no drop at the switch.
        let rpath = dir.join("tcn-load0.50-r2").join("result.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&rpath).unwrap()).unwrap();
        v["hosts"]["retrans_segs"] = 3.into();
        v["hosts"]["loss_probes"] = 2.into();
        fs::write(&rpath, v.to_string()).unwrap();
        let loaded = load(std::slice::from_ref(&dir)).unwrap();
        let notes = lossless_retrans_notes(&loaded.results);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("tcn-load0.50-r2"), "{}", notes[0]);
        assert!(notes[0].contains("TLP 2"), "{}", notes[0]);
        let out = root.path().join("out");
        let rep = write(&out, &loaded, None).unwrap();
        assert!(
            rep.notes.iter().any(|n| n.contains("lossless run")),
            "{:?}",
            rep.notes
        );
    }

    /// Every point's AQM, what it was compared with and the verdict on its
    /// small flows' mean FCT, as `report` (without `--baseline`) judges them.
    fn small_fct_verdicts(loaded: &Loaded) -> Vec<(String, Option<String>, Option<Verdict>)> {
        let results: Vec<&ComboResult> = loaded.results.iter().map(|s| &s.result).collect();
        let input = summary::SummaryInput {
            sc: &loaded.sc,
            name: &loaded.name,
            against: loaded.against(None).unwrap(),
            scaling: loaded.scaling.clone(),
            asked: loaded.asked.clone(),
        };
        let s = summary::summarize(&input, &results);
        s.points
            .iter()
            .map(|p| {
                let v = p.vs_baseline.get("fct.small.mean_us").map(|c| c.verdict);
                (p.aqm.clone(), p.baseline.clone(), v)
            })
            .collect()
    }

    fn point(
        aqm: &str,
        baseline: Option<&str>,
        v: Option<Verdict>,
    ) -> (String, Option<String>, Option<Verdict>) {
        (aqm.into(), baseline.map(String::from), v)
    }

    #[test]
    fn runs_at_two_dilations_are_compared_apart_with_a_verdict() {
        let root = tempfile::tempdir().unwrap();
        let d1 = results_dir(root.path(), "d1", 1.0, |r| 100 + 10 * r as u64);
        let same = results_dir(root.path(), "d4", 4.0, |r| 100 + 10 * (4 - r) as u64);
        let slower = results_dir(root.path(), "d4-slow", 4.0, |r| 200 + 10 * r as u64);

        // Merging refuses runs at another D; comparing apart takes them.
        let merged = load(&[d1.clone(), same.clone()]);
        assert!(merged.is_err_and(|e| e.to_string().contains("time dilation")));
        let l = load_apart(&[d1.clone(), same.clone()], &[]).unwrap();
        assert_eq!(
            l.sc.switch.aqm,
            ["D1:dctcp", "D1:tcn", "D4:dctcp", "D4:tcn"]
        );
        assert_eq!(l.sc.baseline_aqm(), "D1:dctcp");
        assert_eq!(l.asked[&("D4:dctcp".to_owned(), "load0.50".to_owned())], 5);
        assert!(l.sc.dilation.is_none(), "no one D is the comparison's");
        assert_eq!(l.scaling["compared"][1]["dilation"], 4.0);
        // Each AQM against itself in the first directory: the same values
        // in another order, no difference — TCN too, though it is twice
        // DCTCP (against D1:dctcp it would be "higher").
        use Verdict::*;
        assert_eq!(
            small_fct_verdicts(&l),
            [
                point("D1:dctcp", None, None),
                point("D1:tcn", None, None),
                point("D4:dctcp", Some("D1:dctcp"), Some(NoDifference)),
                point("D4:tcn", Some("D1:tcn"), Some(NoDifference)),
            ]
        );
        // Twice as slow in every repeat: higher (5 against 5).
        let l = load_apart(
            &[d1.clone(), slower.clone()],
            &["fast".into(), "slow".into()],
        )
        .unwrap();
        assert_eq!(
            small_fct_verdicts(&l),
            [
                point("fast:dctcp", None, None),
                point("fast:tcn", None, None),
                point("slow:dctcp", Some("fast:dctcp"), Some(Higher)),
                point("slow:tcn", Some("fast:tcn"), Some(Higher)),
            ]
        );
        // Merged, one run is judged against its scenario's baseline.
        let one = load(std::slice::from_ref(&d1)).unwrap();
        assert_eq!(
            small_fct_verdicts(&one),
            [
                point("dctcp", None, None),
                point("tcn", Some("dctcp"), Some(Higher))
            ]
        );
        // --baseline is refused for runs kept apart, saying why.
        let e = l.against(Some("fast:tcn")).err().unwrap();
        assert!(
            e.to_string().contains("same AQM in the first directory"),
            "{e}"
        );

        // Two directories at the same D get run1, run2.
        let l = load_apart(&[same.clone(), slower.clone()], &[]).unwrap();
        assert_eq!(
            l.sc.switch.aqm,
            ["run1:dctcp", "run1:tcn", "run2:dctcp", "run2:tcn"]
        );
        assert_eq!(l.sc.dilation, Some(4.0));

        // Bad labels and a single directory are refused, saying what to do.
        let e = load_apart(&[d1.clone(), same.clone()], &["a".into()])
            .err()
            .unwrap();
        assert!(e.to_string().contains("one --label per directory"), "{e}");
        let e = load_apart(&[d1.clone(), same.clone()], &["a".into(), "a".into()])
            .err()
            .unwrap();
        assert!(e.to_string().contains("its own non-empty label"), "{e}");
        assert!(load_apart(std::slice::from_ref(&d1), &[]).is_err());
    }
}

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

use super::archive;
use super::figures::{self, FigureInput};
use super::results::{ComboResult, StoredResult};
use super::scenario::{Scenario, SweepValue, TestMethod};
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
    /// Where each directory's runs came from, in order.
    pub provenance: Vec<Provenance>,
}

/// Where a directory's results came from (its `manifest.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// The directory (a results directory or an archived run).
    pub dir: String,
    /// The commit the run's binaries were built from.
    pub git_commit: String,
    /// Whether their sources differed from it (`null`: not recorded).
    pub git_dirty: Option<bool>,
    /// The command that made the run (`null`: not recorded).
    pub command: Option<String>,
    /// The kernel it ran on.
    pub kernel: String,
    /// The machine (`cpus`, `cpu_model`, `mem_gb`, `hostname`).
    pub machine: Value,
    /// `--quick`.
    pub quick: bool,
    /// When it started (UTC).
    pub started: String,
    /// Its shard (`K/N`), when it ran one.
    pub shard: Option<String>,
}

impl Provenance {
    fn of(dir: &Path, v: &Value) -> Self {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Provenance {
            dir: dir.display().to_string(),
            git_commit: v["git_commit"].as_str().unwrap_or("unknown").to_owned(),
            git_dirty: v["git_dirty"].as_bool(),
            command: v["command"].as_str().map(String::from),
            kernel: s("kernel"),
            machine: v["machine"].clone(),
            quick: v["quick"].as_bool().unwrap_or(false),
            started: s("started"),
            shard: v["shard"].as_str().map(String::from),
        }
    }
}

/// What one directory's manifest says about the run.
struct Manifest {
    sc: Scenario,
    name: String,
    scaling: Value,
    /// (AQM, sweep value, directory) of every combination asked for.
    combos: Vec<(String, SweepValue, String)>,
    /// Unfaithful attempts set aside per combination directory
    /// (`retried`).
    retried: BTreeMap<String, u32>,
    /// Where it came from.
    provenance: Provenance,
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
    let mut retried: BTreeMap<String, u32> = BTreeMap::new();
    for r in v["retried"].as_array().into_iter().flatten() {
        if let Some(d) = r["dir"].as_str() {
            *retried.entry(d.to_owned()).or_default() += 1;
        }
    }
    Ok(Manifest {
        sc,
        name: v["scenario_name"].as_str().unwrap_or("scenario").to_owned(),
        scaling: v["scaling"].clone(),
        combos,
        retried,
        provenance: Provenance::of(dir, &v),
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
    // Capturing packets does not change what is measured.
    s.capture = Default::default();
    s.host_dilation = sc.hosts_apart().then(|| sc.host_dilation().factor());
    s
}

/// The results of the combinations the manifest lists that completed
/// (have a `result.json`, or an entry in an archived run's combinations),
/// by directory name: nothing else in `dir` is read.
fn combo_results(dir: &Path, m: &Manifest) -> Result<Vec<(String, StoredResult)>> {
    let mut names: Vec<&str> = m.combos.iter().map(|c| c.2.as_str()).collect();
    names.sort_unstable();
    let archived = if archive::is_archive(dir) {
        Some(archive::read_combos(dir)?)
    } else {
        None
    };
    let mut out = Vec::new();
    for name in names {
        let path = dir.join(name);
        let stored = match &archived {
            Some(combos) => {
                let Some(e) = combos.get(name) else {
                    continue;
                };
                StoredResult {
                    result: ComboResult::deserialize(&e["result"]).with_context(|| {
                        format!(
                            "{}: {name}'s result",
                            dir.join(archive::COMBOS_FILE).display()
                        )
                    })?,
                    dir: path,
                }
            }
            None if path.join("result.json").is_file() => {
                StoredResult::load(&path).map_err(|e| anyhow!(e))?
            }
            None => continue,
        };
        out.push((name.to_owned(), stored));
    }
    Ok(out)
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
        for (combo, mut s) in combo_results(dir, m)? {
            s.result.aqm = name(&s.result.aqm);
            s.result.retried = m.retried.get(&combo).copied().unwrap_or(0);
            self.results.push(s);
        }
        for (aqm, sweep, _) in &m.combos {
            *self.asked.entry((name(aqm), sweep.tag())).or_default() += 1;
        }
        self.provenance.push(m.provenance.clone());
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

/// Reads one or more results directories of the same scenario, made by one
/// commit.
pub fn load(dirs: &[PathBuf]) -> Result<Loaded> {
    load_with(dirs, Merge::default())
}

/// What [`load_with`] lets through when merging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Merge {
    /// Directories made by different commits (or dirty sources).
    pub mixed_commits: bool,
    /// An incomplete set of shards (`run --shard K/N`).
    pub partial_shards: bool,
}

/// [`load`]; `merge.mixed_commits` lets directories made by different
/// commits (or by dirty sources) merge, with a note — otherwise refused,
/// since the merged summary would say nothing about which code made its
/// numbers. Shards (`run --shard K/N`) merge only as a whole set — every K
/// of one N once, and nothing unsharded beside them — unless
/// `merge.partial_shards` (a summary of a partial set would not know what
/// the missing shards asked for).
pub fn load_with(dirs: &[PathBuf], merge: Merge) -> Result<Loaded> {
    let mixed_commits = merge.mixed_commits;
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
        provenance: Vec::new(),
    };
    for (i, dir) in dirs.iter().enumerate() {
        let canon = |d: &Path| d.canonicalize().unwrap_or_else(|_| d.to_owned());
        if dirs[..i].iter().any(|d| canon(d) == canon(dir)) {
            bail!(
                "{} is given twice: its repeats would count twice",
                dir.display()
            );
        }
        let m = read_manifest(dir)?;
        let (a, b) = (&first.provenance, &m.provenance);
        if a.git_commit != b.git_commit || a.git_dirty != b.git_dirty {
            let what = format!(
                "{} was made by commit {}{} and {} by {}{}",
                first_dir.display(),
                a.git_commit,
                dirty_mark(a.git_dirty),
                dir.display(),
                b.git_commit,
                dirty_mark(b.git_dirty)
            );
            if !mixed_commits {
                bail!("{what}: merging them would hide which code made which numbers (--allow-mixed-commits merges them anyway, with a note)");
            }
            loaded.notes.push(format!("merged across commits: {what}"));
        }
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
    check_shards(&loaded.provenance, merge.partial_shards, &mut loaded.notes)?;
    loaded.notes.extend(same_seeds(&loaded.results));
    Ok(loaded)
}

/// Shards merge as a whole set (see [`load_with`]).
fn check_shards(runs: &[Provenance], partial: bool, notes: &mut Vec<String>) -> Result<()> {
    let shards: Vec<Option<(usize, usize)>> = runs
        .iter()
        .map(|p| {
            let s: super::plan::Shard = p.shard.as_deref()?.parse().ok()?;
            Some((s.k, s.n))
        })
        .collect();
    if shards.iter().all(Option::is_none) {
        return Ok(());
    }
    if let [Some((k, n))] = shards.as_slice() {
        // One shard alone (the run's own summary, or asked for by hand).
        notes.push(format!(
            "shard {k}/{n} alone: its summary covers only its part of the sweep (merge every shard with report for the whole)"
        ));
        return Ok(());
    }
    let mut problems = Vec::new();
    if shards.iter().any(Option::is_none) {
        problems.push("some directories are shards and some are not".to_owned());
    }
    let ns: std::collections::BTreeSet<usize> = shards.iter().flatten().map(|s| s.1).collect();
    if ns.len() > 1 {
        problems.push(format!("shards of different N: {ns:?}"));
    }
    if let Some(&n) = ns.iter().next() {
        let have: Vec<usize> = shards.iter().flatten().map(|s| s.0).collect();
        let missing: Vec<String> = (0..n)
            .filter(|k| !have.contains(k))
            .map(|k| format!("{k}/{n}"))
            .collect();
        if !missing.is_empty() {
            problems.push(format!("shard {} missing", missing.join(", ")));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let what = problems.join("; ");
    if !partial {
        bail!("{what}: a merged summary of part of a sweep would not know what the rest asked for (--allow-partial-shards merges them anyway, with a note)");
    }
    notes.push(format!("partial set of shards merged: {what}"));
    Ok(())
}

fn dirty_mark(d: Option<bool>) -> &'static str {
    match d {
        Some(true) => " (sources dirty)",
        Some(false) => "",
        None => " (dirty: not recorded)",
    }
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
    let groups = label_groups(&labels, &manifests)?;
    let rename = |label: &str, aqm: &str| format!("{label}:{aqm}");
    let mut sc = first.sc.clone();
    sc.switch.aqm = groups
        .iter()
        .flat_map(|(l, _)| first.sc.switch.aqm.iter().map(move |a| rename(l, a)))
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
        provenance: Vec::new(),
    };
    let mut compared = Vec::new();
    for (label, members) in &groups {
        let m = &manifests[members[0]];
        let shown: Vec<String> = members
            .iter()
            .map(|&i| dirs[i].display().to_string())
            .collect();
        compared.push(serde_json::json!({
            "label": label,
            "dir": shown.join(", "),
            "dilation": m.sc.dilation(),
            "host_dilation": m.sc.host_dilation(),
            "scaling": m.scaling,
        }));
    }
    for ((m, dir), label) in manifests.iter().zip(dirs).zip(&labels) {
        loaded.add_dir(dir, m, |aqm| rename(label, aqm))?;
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
    }
    loaded.scaling = serde_json::json!({ "compared": compared });
    loaded.require_results(dirs)?;
    Ok(loaded)
}

/// The directories of [`load_apart`] by label, in the order each label is
/// first given: one directory per label, except the shards of one run
/// (`run --shard K/N`, the same label because the same D), which are
/// compared as the one run they make together — every K of one N once,
/// from one commit, of one scenario. Any other repeated label is refused.
fn label_groups(labels: &[String], manifests: &[Manifest]) -> Result<Vec<(String, Vec<usize>)>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        if l.is_empty() || l.contains(':') {
            bail!(
                "labels {labels:?}: each directory needs a non-empty label without ':' (--label)"
            );
        }
        match groups.iter_mut().find(|(g, _)| g == l) {
            Some((_, members)) => members.push(i),
            None => groups.push((l.clone(), vec![i])),
        }
    }
    for (label, members) in groups.iter().filter(|(_, m)| m.len() > 1) {
        let runs: Vec<&Manifest> = members.iter().map(|&i| &manifests[i]).collect();
        let shards: Vec<Option<&str>> =
            runs.iter().map(|m| m.provenance.shard.as_deref()).collect();
        if shards.iter().any(Option::is_none) {
            bail!(
                "labels {labels:?}: {} directories are labelled {label}; each needs its own label \
                 (--label), unless they are the shards of one run (`run --shard K/N`)",
                members.len()
            );
        }
        if let Some(twice) = shards
            .iter()
            .enumerate()
            .find(|(i, s)| shards[..*i].contains(s))
        {
            bail!(
                "{label}: shard {} is given twice: its repeats would count twice",
                twice.1.unwrap_or_default()
            );
        }
        let (a, dir_a) = (&runs[0].provenance, &runs[0].provenance.dir);
        for m in &runs[1..] {
            let b = &m.provenance;
            if a.git_commit != b.git_commit || a.git_dirty != b.git_dirty {
                bail!(
                    "{label}: {dir_a} was made by commit {}{} and {} by {}{}: the shards of one \
                     run come from one commit (compare them apart with a --label each)",
                    a.git_commit,
                    dirty_mark(a.git_dirty),
                    b.dir,
                    b.git_commit,
                    dirty_mark(b.git_dirty)
                );
            }
            if mergeable(&m.sc) != mergeable(&runs[0].sc) || m.scaling != runs[0].scaling {
                bail!(
                    "{label}: {} ran another scenario, rate or time dilation than {dir_a}: not \
                     shards of one run",
                    b.dir
                );
            }
        }
        let provenance: Vec<Provenance> = runs.iter().map(|m| m.provenance.clone()).collect();
        check_shards(&provenance, false, &mut Vec::new())
            .with_context(|| format!("the shards labelled {label}"))?;
    }
    Ok(groups)
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
    let summary = summarize(loaded, baseline)?;
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut files = vec![out.join("summary.json"), out.join("stats.csv")];
    fs::write(&files[0], summary_json(&summary)?)
        .with_context(|| format!("writing {}", files[0].display()))?;
    write_stats_csv(&files[1], &summary)
        .with_context(|| format!("writing {}", files[1].display()))?;
    files.extend(super::tidy::write(out, &loaded.name, &loaded.results)?);
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

/// The summary of `loaded`, compared against `baseline` (default: the
/// scenario's; none for runs kept apart), with where its runs came from.
pub fn summarize(loaded: &Loaded, baseline: Option<&str>) -> Result<Summary> {
    let results: Vec<&ComboResult> = loaded.results.iter().map(|s| &s.result).collect();
    let input = SummaryInput {
        sc: &loaded.sc,
        name: &loaded.name,
        against: loaded.against(baseline)?,
        scaling: loaded.scaling.clone(),
        asked: loaded.asked.clone(),
    };
    let mut s = summary::summarize(&input, &results);
    s.runs = loaded
        .provenance
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    Ok(s)
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
    first_attempt: usize,
    after_retry: usize,
    left_out: usize,
    attempts_set_aside: usize,
    n: usize,
    median: f64,
    min: f64,
    max: f64,
    mean: f64,
    sd: f64,
    ci95_lo: Option<f64>,
    ci95_hi: Option<f64>,
    pooled: Option<f64>,
    baseline: &'a str,
    test: &'a str,
    pairs: Option<usize>,
    unpaired_seeds: String,
    ratio_of: &'a str,
    ratio: Option<f64>,
    ratio_ci95_lo: Option<f64>,
    ratio_ci95_hi: Option<f64>,
    p: Option<f64>,
    p_holm: Option<f64>,
    p_signed_rank: Option<f64>,
    verdict: &'a str,
    pooled_ratio: Option<f64>,
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
                first_attempt: p.attempts.first,
                after_retry: p.attempts.after_retry,
                left_out: p.attempts.left_out,
                attempts_set_aside: p.attempts.set_aside,
                n: m.n,
                median: m.median,
                min: m.min,
                max: m.max,
                mean: m.mean,
                sd: m.sd,
                ci95_lo: m.ci95.map(|c| c[0]),
                ci95_hi: m.ci95.map(|c| c[1]),
                pooled: p.pooled_values.get(key).copied(),
                baseline: p.baseline.as_deref().unwrap_or(""),
                test: c.map_or("", |c| match (c.paired, c.test) {
                    (true, TestMethod::Wilcoxon) => "wilcoxon",
                    (true, _) => "paired-t",
                    (false, TestMethod::MannWhitney) => "mann-whitney",
                    (false, _) => "welch",
                }),
                pairs: c.filter(|c| c.paired).map(|c| c.pairs),
                unpaired_seeds: c.map_or(String::new(), |c| {
                    c.unpaired_seeds
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                }),
                ratio_of: c.map_or("", |c| match c.ratio_of {
                    summary::RatioOf::PairedRatios => "paired_ratios",
                    summary::RatioOf::Means => "means",
                }),
                ratio: c.and_then(|c| c.ratio),
                ratio_ci95_lo: c.and_then(|c| c.ratio_ci95.map(|r| r[0])),
                ratio_ci95_hi: c.and_then(|c| c.ratio_ci95.map(|r| r[1])),
                p: c.and_then(|c| c.p),
                p_holm: c.and_then(|c| c.p_holm),
                p_signed_rank: c.and_then(|c| c.p_signed_rank),
                verdict: c.map_or("", |c| c.verdict.key()),
                pooled_ratio: p.pooled_vs_baseline.get(key).copied(),
            })?;
        }
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
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
    pub(crate) fn results_dir(
        root: &Path,
        name: &str,
        d: f64,
        fct: impl Fn(u32) -> u64,
    ) -> PathBuf {
        let mut sc = Scenario::from_toml(SC, Path::new("t.toml")).unwrap();
        sc.dilation = (d != 1.0).then_some(d);
        let dir = root.join(name);
        let mut combos = Vec::new();
        for (aqm, k) in [("dctcp", 1), ("tcn", 2)] {
            for r in 0..5u32 {
                // TCN about twice DCTCP, not exactly (a constant ratio
                // has no spread to test).
                let flows = vec![
                    flow(1_000, k * fct(r) + (k - 1) * 7 * r as u64),
                    flow(20_000_000, 9_000),
                ];
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
            "git_commit": "0123456789abcdef0123456789abcdef01234567",
            "git_dirty": false,
            "command": "/usr/local/bin/softswitch-exp run t.toml --repeat 5",
            "kernel": "6.18.0",
            "machine": {"cpus": 2},
            "quick": false,
            "started": "2026-11-29T01:02:03Z",
            "finished": "2026-11-29T01:32:03Z",
        });
        fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        dir
    }

    #[test]
    fn a_negative_control_is_labelled_and_never_merged() {
        let root = tempfile::tempdir().unwrap();
        let d40 = results_dir(root.path(), "d40", 40.0, |r| 100 + r as u64);
        let again = results_dir(root.path(), "d40b", 40.0, |r| 100 + r as u64);
        // A run at D = 40 whose manifest says its hosts ran at D_H.
        let with_hosts_at = |name: &str, hosts: f64| {
            let dir = root.path().join(name);
            fs::rename(
                results_dir(root.path(), "tmp", 40.0, |r| 100 + r as u64),
                &dir,
            )
            .unwrap();
            let mpath = dir.join("manifest.json");
            let mut m: Value = serde_json::from_str(&fs::read_to_string(&mpath).unwrap()).unwrap();
            m["scenario"]["host_dilation"] = hosts.into();
            fs::write(&mpath, m.to_string()).unwrap();
            dir
        };
        // The control: the hosts at D_H = 1, the rest at D = 40.
        let control = with_hosts_at("d40-hosts1", 1.0);
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
        let same = with_hosts_at("d40-hosts40", 40.0);
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
    fn runs_of_different_commits_merge_only_when_told() {
        let root = tempfile::tempdir().unwrap();
        let a = results_dir(root.path(), "a", 1.0, |r| 100 + r as u64);
        let b = results_dir(root.path(), "b", 1.0, |r| 100 + r as u64);
        let m = b.join("manifest.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&m).unwrap()).unwrap();
        v["git_dirty"] = Value::Bool(true);
        fs::write(&m, v.to_string()).unwrap();
        let e = load(&[a.clone(), b.clone()]).err().unwrap();
        assert!(e.to_string().contains("(sources dirty)"), "{e}");
        assert!(e.to_string().contains("--allow-mixed-commits"), "{e}");
        let l = load_with(
            &[a.clone(), b.clone()],
            Merge {
                mixed_commits: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(l
            .notes
            .iter()
            .any(|n| n.starts_with("merged across commits")));
        assert_eq!(l.provenance.len(), 2);
        assert_eq!(l.provenance[1].git_dirty, Some(true));
        // The summary names both runs.
        let s = summarize(&l, None).unwrap();
        assert_eq!(s.runs.len(), 2);
        assert_eq!(
            s.runs[0]["command"],
            "/usr/local/bin/softswitch-exp run t.toml --repeat 5"
        );
    }

    /// The results directory `whole` as the `n` shards (`run --shard K/N`)
    /// that would have made it: `<root>/<name>K`, each with its jobs'
    /// results and its part of the manifest.
    fn shard_dirs(root: &Path, whole: &Path, name: &str, n: usize) -> Vec<PathBuf> {
        let m: Value =
            serde_json::from_str(&fs::read_to_string(whole.join("manifest.json")).unwrap())
                .unwrap();
        let mut sc = Scenario::from_toml(SC, Path::new("t.toml")).unwrap();
        sc.repeat = 5;
        let base = Path::new(env!("CARGO_MANIFEST_DIR"));
        let jobs = crate::exp::plan::jobs(&sc, false, 0, base).unwrap();
        let mut dirs = Vec::new();
        for k in 0..n {
            let shard = crate::exp::plan::Shard { k, n };
            let mine: Vec<String> = crate::exp::plan::shard_jobs(&jobs, shard)
                .into_iter()
                .map(|j| j.dir)
                .collect();
            let dir = root.join(format!("{name}{k}"));
            for d in &mine {
                fs::create_dir_all(dir.join(d)).unwrap();
                fs::copy(
                    whole.join(d).join("result.json"),
                    dir.join(d).join("result.json"),
                )
                .unwrap();
            }
            let mut sm = m.clone();
            for key in ["combos", "retried"] {
                sm[key] = Value::Array(
                    m[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|c| mine.iter().any(|d| c["dir"] == d.as_str()))
                        .cloned()
                        .collect(),
                );
            }
            sm["shard"] = Value::String(shard.to_string());
            fs::write(dir.join("manifest.json"), sm.to_string()).unwrap();
            dirs.push(dir);
        }
        dirs
    }

    #[test]
    fn shards_of_a_run_compare_apart_as_the_run_they_make() {
        let root = tempfile::tempdir().unwrap();
        let d1 = results_dir(root.path(), "d1", 1.0, |r| 100 + 10 * r as u64);
        let d4 = results_dir(root.path(), "d4", 4.0, |r| 200 + 10 * r as u64);
        let shards = shard_dirs(root.path(), &d4, "d4-shard", 2);
        let whole = load_apart(&[d1.clone(), d4.clone()], &[]).unwrap();
        let mut given = vec![d1.clone()];
        given.extend(shards.iter().rev().cloned());
        let parts = load_apart(&given, &[]).unwrap();
        assert_eq!(
            parts.sc.switch.aqm,
            ["D1:dctcp", "D1:tcn", "D4:dctcp", "D4:tcn"]
        );
        assert_eq!(parts.asked, whole.asked);
        assert_eq!(
            summarize(&parts, None).unwrap().points,
            summarize(&whole, None).unwrap().points
        );
        assert_eq!(small_fct_verdicts(&parts), small_fct_verdicts(&whole));
        assert_eq!(parts.provenance.len(), 3);
        let compared = parts.scaling["compared"].as_array().unwrap();
        assert_eq!(compared.len(), 2);
        assert!(compared[1]["dir"].as_str().unwrap().contains("d4-shard0"));
        // One shard alone still compares (it is its own label).
        assert!(load_apart(&[d1.clone(), shards[0].clone()], &[]).is_ok());
        // Not every shard, a shard twice, or a shard of another commit.
        let e = load_apart(&[d1.clone(), shards[0].clone(), shards[0].clone()], &[]);
        assert!(e.is_err_and(|e| e.to_string().contains("twice")));
        let three = shard_dirs(root.path(), &d4, "d4-third", 3);
        let e = load_apart(&[d1.clone(), three[0].clone(), three[1].clone()], &[]);
        assert!(e.is_err_and(|e| format!("{e:#}").contains("shard 2/3 missing")));
        let m = shards[1].join("manifest.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&m).unwrap()).unwrap();
        v["git_commit"] = Value::String("0123456789".into());
        fs::write(&m, v.to_string()).unwrap();
        let e = load_apart(&given, &[]).err().unwrap();
        assert!(e.to_string().contains("one commit"), "{e}");
        // Two whole runs at one D are still two labels' worth.
        let again = results_dir(root.path(), "d4-again", 4.0, |r| 200 + r as u64);
        let e = load_apart(&[d1, d4, again], &[]).err().unwrap();
        assert!(e.to_string().contains("each needs its own label"), "{e}");
    }

    #[test]
    fn shards_merge_into_the_summary_of_one_run() {
        let root = tempfile::tempdir().unwrap();
        let whole = results_dir(root.path(), "whole", 1.0, |r| 100 + 10 * r as u64);
        let mpath = whole.join("manifest.json");
        let mut m: Value = serde_json::from_str(&fs::read_to_string(&mpath).unwrap()).unwrap();
        m["retried"] = serde_json::json!([
            {"dir": "tcn-load0.50-r2", "kept_as": "tcn-load0.50-r2.unfaithful1", "reasons": []}
        ]);
        fs::write(&mpath, m.to_string()).unwrap();
        let one = summarize(&load(std::slice::from_ref(&whole)).unwrap(), None).unwrap();
        let n = 3;
        let mut dirs = shard_dirs(root.path(), &whole, "shard", n);
        // Merged in any order: the same points, repeats, pairing and
        // attempts as the one run.
        dirs.reverse();
        let loaded = load(&dirs).unwrap();
        assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
        let merged = summarize(&loaded, None).unwrap();
        assert_eq!(merged.points, one.points);
        assert_eq!(merged.repeats, one.repeats);
        assert_eq!(merged.faithful, one.faithful);
        assert_eq!(merged.points[1].attempts.after_retry, 1);
        assert_eq!(merged.runs.len(), n);
        assert_eq!(merged.runs[0]["shard"], "2/3");
        // Part of the shards: refused, or merged with a note when asked.
        let e = load(&dirs[..2]).err().unwrap();
        assert!(e.to_string().contains("shard 0/3 missing"), "{e}");
        let part = load_with(
            &dirs[..2],
            Merge {
                partial_shards: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(part
            .notes
            .iter()
            .any(|n| n.contains("partial set of shards")));
        let e = load(&[dirs[0].clone(), whole.clone()]).err().unwrap();
        assert!(e.to_string().contains("some directories are shards"), "{e}");
        // One shard alone is reported, saying so (a shard's own run ends
        // with it).
        let one = load(&dirs[..1]).unwrap();
        assert!(
            one.notes.iter().any(|n| n.contains("alone")),
            "{:?}",
            one.notes
        );
        // A directory given twice is not counted twice.
        let e = load(&[dirs[0].clone(), dirs[0].clone()]).err().unwrap();
        assert!(e.to_string().contains("twice"), "{e}");
    }

    #[test]
    fn an_archived_run_reports_as_its_results_directory_did() {
        let root = tempfile::tempdir().unwrap();
        let dir = results_dir(root.path(), "run", 1.0, |r| 100 + 10 * r as u64);
        let direct = summarize(&load(std::slice::from_ref(&dir)).unwrap(), None).unwrap();
        let arch = root.path().join("archive/t/run");
        archive::write(&dir, &arch).unwrap();
        let loaded = load(std::slice::from_ref(&arch)).unwrap();
        let from_archive = summarize(&loaded, None).unwrap();
        assert_eq!(from_archive.points, direct.points);
        assert_eq!(from_archive.repeats, direct.repeats);
        // Files can be written from it elsewhere; figures without queue
        // traces say so.
        let r = write(&root.path().join("out"), &loaded, None).unwrap();
        assert!(r.files.iter().any(|f| f.ends_with("summary.json")));
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
        // A generated table's caption names each run's D, not "undilated".
        let args = crate::exp::markdown::ReportArgs {
            dirs: vec![d1.clone(), same.clone()],
            compare: true,
            markdown: true,
            metrics: vec!["fct.small.mean_us".into()],
            ..Default::default()
        };
        let t = crate::exp::markdown::table(&args, Path::new(""), "report").unwrap();
        assert!(t.contains("; D1 at D = 1, D4 at D = 4, "), "{t}");
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
        assert!(e.to_string().contains("each needs its own label"), "{e}");
        let e = load_apart(&[d1.clone(), same.clone()], &["a".into(), "b:c".into()])
            .err()
            .unwrap();
        assert!(e.to_string().contains("without ':'"), "{e}");
        assert!(load_apart(std::slice::from_ref(&d1), &[]).is_err());
    }
}

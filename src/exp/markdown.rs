//! Tables for the docs, generated from results kept in the repository:
//! `softswitch-exp report DIR… --markdown --metrics …` prints one, and
//! `softswitch-exp docs FILE…` rewrites every table a Markdown file marks
//! as generated, so a test can hold the docs to what the archive gives.
//!
//! A generated table in a Markdown file sits between two comment lines,
//! the first naming the command that makes it:
//!
//! ```text
//! <!-- softswitch-exp report archive/tcn-fig1/d4 --markdown --metrics dscp1.share -->
//! | … the table and its caption … |
//! <!-- end -->
//! ```
//!
//! Every table says where its numbers come from (the runs' commits,
//! commands, kernel, machine, D, flows per repeat, `--quick`), how many
//! repeats held at the first attempt, after a retry, or were left out, the
//! statistic of each cell (median [min–max] over repeats; the pooled p99
//! where asked), and which family Holm's correction ran over: every
//! comparison in that table, so a claim picked from it carries the
//! correction over all of them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::report::{self, Loaded, Provenance};
use super::scenario::{SweepValue, TestMethod};
use super::stats;
use super::summary::{self, fmt_value, metric_info, Comparison, Point, Summary, Verdict};

/// What `report` reads and how it compares (the arguments a generated
/// table's marker names after `softswitch-exp report`).
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub struct ReportArgs {
    /// Results directories (`softswitch-exp run --out`) or archived runs
    /// (`softswitch-exp archive`).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Compare against this AQM instead of the scenario's baseline.
    #[arg(long, value_name = "AQM", conflicts_with = "compare")]
    pub baseline: Option<String>,
    /// Keep each directory apart instead of merging: runs of one
    /// scenario at different time dilations D (or rates, or days) become
    /// schemes of their own, each AQM against itself in the first
    /// directory (`D4:tcn` against `D1:tcn`), each point with its
    /// spread and a verdict per metric — dilation invariance. The shards
    /// of one run (`run --shard K/N`) share a label and count as that run.
    #[arg(long)]
    pub compare: bool,
    /// With --compare: the name of each directory's runs, in order
    /// (default `D<d>` when D differs, else the rate, else run1, run2, …).
    #[arg(long, value_name = "NAME", requires = "compare")]
    pub label: Vec<String>,
    /// Compare with this test instead of the scenario's `[stats] test`:
    /// paired (per seed, the default), wilcoxon (per seed), welch or
    /// mann-whitney (unpaired) — to re-analyse results made with another.
    #[arg(long, value_name = "TEST")]
    pub test: Option<String>,
    /// Merge directories made by different commits (or dirty sources),
    /// with a note; refused otherwise.
    #[arg(long)]
    pub allow_mixed_commits: bool,
    /// Merge an incomplete set of shards (`run --shard K/N`), with a note;
    /// refused otherwise.
    #[arg(long)]
    pub allow_partial_shards: bool,
    /// Print a Markdown table of `--metrics` (with its provenance and
    /// statistics) instead of writing summary files.
    #[arg(long)]
    pub markdown: bool,
    /// The table's numbers (metric keys as in stats.csv), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "KEY,KEY",
        requires = "markdown"
    )]
    pub metrics: Vec<String>,
    /// Only these sweep points (as in directory names: load0.50, fanin16),
    /// comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "TAG,TAG",
        requires = "markdown"
    )]
    pub points: Vec<String>,
    /// Only these schemes, comma-separated, and the baselines they are
    /// compared with. With `--compare` a bare AQM (`tcn`) keeps it in every run, a
    /// labelled one (`D64:tcn`) in that run only.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "AQM,AQM",
        requires = "markdown"
    )]
    pub schemes: Vec<String>,
    /// Add the papers' statistic beside every p99 metric: the p99 of all
    /// flows of all faithful repeats pooled, and its ratio to the
    /// baseline's.
    #[arg(long, requires = "markdown")]
    pub pooled: bool,
}

impl ReportArgs {
    /// The test asked for, if any.
    pub fn test_method(&self) -> Result<Option<TestMethod>> {
        self.test
            .as_deref()
            .map(|t| {
                t.parse::<TestMethod>()
                    .map_err(|e| anyhow::anyhow!("--test: {e}"))
            })
            .transpose()
    }

    /// Loads the directories (relative ones against `base`), merged or
    /// kept apart, with the test asked for.
    pub fn load(&self, base: &Path) -> Result<Loaded> {
        let dirs: Vec<PathBuf> = self.dirs.iter().map(|d| base.join(d)).collect();
        let mut loaded = if self.compare {
            report::load_apart(&dirs, &self.label)?
        } else {
            report::load_with(
                &dirs,
                report::Merge {
                    mixed_commits: self.allow_mixed_commits,
                    partial_shards: self.allow_partial_shards,
                },
            )?
        };
        if let Some(t) = self.test_method()? {
            loaded.sc.stats.test = t;
        }
        Ok(loaded)
    }
}

/// The table `args` asks for, from its directories (relative ones against
/// `base`); `command` is how the caption names the command.
pub fn table(args: &ReportArgs, base: &Path, command: &str) -> Result<String> {
    if args.metrics.is_empty() {
        bail!("--markdown needs --metrics (keys as in stats.csv, e.g. fct.small.mean_us)");
    }
    let loaded = args.load(base)?;
    let summary = report::summarize(&loaded, args.baseline.as_deref())?;
    render(&loaded, &summary, args, command)
}

/// One shown comparison: where it goes and what it is.
struct Cell<'a> {
    row: usize,
    metric: usize,
    c: &'a Comparison,
}

fn short_verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Lower => "**lower**",
        Verdict::Higher => "**higher**",
        Verdict::NoDifference => "no difference",
        Verdict::Identical => "identical",
        Verdict::NoSpread => "differs without spread (no test)",
        Verdict::Untested => "untested",
    }
}

fn sweep_label(s: SweepValue) -> String {
    match s {
        SweepValue::Load(l) => format!("{l:.2}"),
        SweepValue::Fanin(n) | SweepValue::Flows(n) => n.to_string(),
        SweepValue::None => "—".into(),
    }
}

fn sweep_header(points: &[&Point]) -> &'static str {
    match points.first().map(|p| p.sweep) {
        Some(SweepValue::Load(_)) => "load",
        Some(SweepValue::Fanin(_)) => "fan-in",
        Some(SweepValue::Flows(_)) => "flows",
        _ => "point",
    }
}

/// `×0.89 (0.80–0.99), p = 0.21: no difference` with the table-wide
/// adjusted p.
fn vs_cell(c: &Comparison, p_table: Option<f64>) -> String {
    if c.verdict == Verdict::Identical {
        return short_verdict(Verdict::Identical).into();
    }
    let r = c.ratio.map_or("×—".into(), |r| format!("×{r:.2}"));
    let ci = match c.ratio_ci95 {
        Some([lo, hi]) if lo != hi => format!(" ({lo:.2}–{hi:.2})"),
        None if c.p.is_some() => " (unbounded)".into(),
        _ => String::new(),
    };
    let verdict = match (c.verdict, p_table) {
        // The table-wide correction decides, not the per-point one.
        (Verdict::Lower | Verdict::Higher | Verdict::NoDifference, Some(p))
            if p >= summary::ALPHA =>
        {
            Verdict::NoDifference
        }
        (Verdict::NoDifference, Some(p)) if p < summary::ALPHA => {
            if c.ratio.is_some_and(|r| r > 1.0) {
                Verdict::Higher
            } else {
                Verdict::Lower
            }
        }
        (v, _) => v,
    };
    let p = p_table.map_or(String::new(), |p| format!(", p{}", summary::fmt_p_eq(p)));
    let unpaired = if c.paired && !c.unpaired_seeds.is_empty() {
        format!(" [{} pairs]", c.pairs)
    } else {
        String::new()
    };
    format!("{r}{ci}{p}{unpaired}: {}", short_verdict(verdict))
}

fn dirty_word(d: Option<bool>) -> &'static str {
    match d {
        Some(false) => "clean",
        Some(true) => "sources dirty",
        None => "dirty: not recorded",
    }
}

/// Whether `aqm` (labelled `LABEL:AQM` in runs compared apart) is one of
/// `schemes`, which may name it bare or labelled.
fn scheme_matches(schemes: &[String], aqm: &str) -> bool {
    let bare = aqm.rsplit_once(':').map_or(aqm, |(_, a)| a);
    schemes.iter().any(|s| s == aqm || s == bare)
}

/// The table and its caption.
fn render(loaded: &Loaded, s: &Summary, args: &ReportArgs, command: &str) -> Result<String> {
    let chosen = |p: &Point| args.schemes.is_empty() || scheme_matches(&args.schemes, &p.aqm);
    let at_points: Vec<&Point> = s
        .points
        .iter()
        .filter(|p| args.points.is_empty() || args.points.contains(&p.sweep.tag()))
        .collect();
    // A baseline row stays when it is chosen or a chosen row is compared
    // with it.
    let compared_with = |b: &Point| {
        at_points
            .iter()
            .any(|q| chosen(q) && q.sweep == b.sweep && q.baseline.as_deref() == Some(&b.aqm))
    };
    let points: Vec<&Point> = at_points
        .iter()
        .copied()
        .filter(|p| chosen(p) || (p.baseline.is_none() && compared_with(p)))
        .collect();
    if points.is_empty() {
        bail!(
            "no point matches --points {:?} / --schemes {:?}",
            args.points,
            args.schemes
        );
    }
    for m in &args.metrics {
        if !points.iter().any(|p| p.metrics.contains_key(m)) {
            bail!("no point has the metric `{m}` (see stats.csv's `metric` column for the keys)");
        }
    }
    // Every comparison shown, for one Holm family over the table.
    let mut cells: Vec<Cell> = Vec::new();
    for (row, p) in points.iter().enumerate() {
        for (metric, m) in args.metrics.iter().enumerate() {
            if let Some(c) = p.vs_baseline.get(m) {
                cells.push(Cell { row, metric, c });
            }
        }
    }
    let tested: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i].c.p.is_some())
        .collect();
    let adjusted = stats::holm(
        &tested
            .iter()
            .map(|&i| cells[i].c.p.unwrap_or(1.0))
            .collect::<Vec<_>>(),
    );
    let p_table = |row: usize, metric: usize| {
        tested
            .iter()
            .zip(&adjusted)
            .find(|(&i, _)| cells[i].row == row && cells[i].metric == metric)
            .map(|(_, &a)| a)
    };

    let units: Vec<(String, summary::Unit, f64)> = args
        .metrics
        .iter()
        .map(|m| {
            let (label, unit) = metric_info(m);
            let typical = points
                .iter()
                .find_map(|p| p.metrics.get(m))
                .map_or(0.0, |x| x.median);
            (label, unit, typical)
        })
        .collect();
    let mut head = vec![
        sweep_header(&points).to_owned(),
        "scheme".to_owned(),
        "repeats: first / retry / out".to_owned(),
    ];
    for (m, (label, unit, typical)) in args.metrics.iter().zip(&units) {
        let (_, ul, _) = unit.display(*typical);
        head.push(if ul.is_empty() {
            label.clone()
        } else {
            format!("{label} ({ul})")
        });
        head.push(format!("vs {}", s.baseline));
        if args.pooled && m.ends_with(".p99_us") {
            head.push("pooled p99 (vs)".into());
        }
    }
    let mut out = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for (row, p) in points.iter().enumerate() {
        let a = &p.attempts;
        let mut cols = vec![
            sweep_label(p.sweep),
            p.aqm.clone(),
            format!("{} / {} / {}", a.first, a.after_retry, a.left_out),
        ];
        for (metric, (m, (_, unit, typical))) in args.metrics.iter().zip(&units).enumerate() {
            cols.push(match p.metrics.get(m) {
                Some(x) => format!(
                    "{} [{}–{}]",
                    fmt_value(*unit, *typical, x.median),
                    fmt_value(*unit, *typical, x.min),
                    fmt_value(*unit, *typical, x.max)
                ),
                None => "—".into(),
            });
            cols.push(match p.vs_baseline.get(m) {
                Some(c) => vs_cell(c, p_table(row, metric)),
                None if p.baseline.is_none() => "baseline".into(),
                None => "—".into(),
            });
            if args.pooled && m.ends_with(".p99_us") {
                let v = p
                    .pooled_values
                    .get(m)
                    .map_or("—".into(), |v| fmt_value(*unit, *typical, *v));
                let r = p
                    .pooled_vs_baseline
                    .get(m)
                    .map_or(String::new(), |r| format!(" (×{r:.2})"));
                cols.push(format!("{v}{r}"));
            }
        }
        out.push_str(&format!("| {} |\n", cols.join(" | ")));
    }
    out.push('\n');
    out.push_str(&caption(loaded, s, &points, tested.len(), args, command));
    Ok(out)
}

/// Each run of a table as its caption names it (commit, command, shard,
/// date), and the machine they ran on — or, when their kernels, CPU
/// counts or CPU models differ, each run's own after its date.
fn provenance_words(provenance: &[Provenance]) -> (Vec<String>, String) {
    let machines: Vec<String> = provenance
        .iter()
        .map(|p| {
            let cpus = p.machine["cpus"]
                .as_u64()
                .map_or(String::new(), |c| format!(", {c} CPUs"));
            // The VM's CPU can change under the same kernel name and
            // changes what a run holds.
            let model = p.machine["cpu_model"]
                .as_str()
                .map_or(String::new(), |m| format!(" ({m})"));
            format!("kernel {}{cpus}{model}", p.kernel)
        })
        .collect();
    let same = machines.windows(2).all(|w| w[0] == w[1]);
    let mut runs: Vec<String> = Vec::new();
    for (p, m) in provenance.iter().zip(&machines) {
        let short = &p.git_commit[..p.git_commit.len().min(10)];
        let shard = p
            .shard
            .as_ref()
            .map_or(String::new(), |k| format!(", shard {k}"));
        let cmd = p
            .command
            .as_ref()
            .map_or(String::new(), |c| format!(", `{}`", command_words(c)));
        let on = if same {
            String::new()
        } else {
            format!(", on {m}")
        };
        runs.push(format!(
            "commit {short} ({}){cmd}{shard}, {}{on}",
            dirty_word(p.git_dirty),
            p.started.get(..10).unwrap_or("date not recorded")
        ));
    }
    runs.dedup();
    let machine = match machines.first() {
        Some(m) if same => m.clone(),
        Some(_) => "kernels or machines differ: each run's is named with it".to_owned(),
        None => String::new(),
    };
    (runs, machine)
}

fn caption(
    loaded: &Loaded,
    s: &Summary,
    points: &[&Point],
    family: usize,
    args: &ReportArgs,
    command: &str,
) -> String {
    let (runs, machine) = provenance_words(&loaded.provenance);
    let quick = if loaded.provenance.iter().any(|p| p.quick) {
        "with `--quick`"
    } else {
        "without `--quick`"
    };
    let per_repeat: Vec<String> = {
        let mut v: Vec<usize> = points
            .iter()
            .filter(|p| p.repeats_faithful > 0)
            .map(|p| p.expected / p.repeats_faithful)
            .filter(|&n| n > 0)
            .collect();
        v.sort_unstable();
        v.dedup();
        v.iter().map(|n| n.to_string()).collect()
    };
    let flows = if per_repeat.is_empty() {
        String::new()
    } else {
        format!("; {} flows (or queries) per repeat", per_repeat.join(" / "))
    };
    let d = dilation_words(loaded, s);
    let pooled = if args.pooled {
        " Pooled p99: the 99th percentile of all flows of all faithful repeats together, as the papers report it (no test)."
    } else {
        ""
    };
    let holm = holm_words(family);
    format!(
        "*Generated by `{command}` from {} ({machine}; {d}, {quick}{flows}). \
         Each value: median [min–max] over the faithful repeats. \
         vs {}: {}; {holm}. \
         Repeats: faithful at the first attempt / after a retry (`--retry-unfaithful`) / left out.{pooled}*\n",
        runs.join("; "),
        s.baseline,
        summary::test_short(loaded.sc.stats.test),
    )
}

/// What the caption says of the table's p-values: the family Holm's
/// correction ran over, in words that hold for none, one and many.
fn holm_words(family: usize) -> String {
    let verdicts = " (raw and per-point p in `stats.csv`), and the verdict is at 5 % on it";
    match family {
        0 => "no comparison of this table could be tested (too few pairs): no p, no verdict"
            .to_owned(),
        1 => format!(
            "p is from the 1 comparison of this table (Holm over one is the raw p){verdicts}"
        ),
        n => format!("p is Holm-adjusted over the {n} comparisons of this table{verdicts}"),
    }
}

/// The time dilation of the table's runs: one D, or (`report --compare`
/// of runs at several) each run's, by its label.
fn dilation_words(loaded: &Loaded, s: &Summary) -> String {
    let runs = loaded.scaling["compared"].as_array();
    let differ = runs.is_some_and(|r| {
        r.iter().any(|x| {
            x["dilation"] != r[0]["dilation"] || x["host_dilation"] != r[0]["host_dilation"]
        })
    });
    match runs {
        Some(r) if differ => {
            let each: Vec<String> = r
                .iter()
                .map(|x| {
                    let num = |k: &str| x[k].as_f64().map_or("?".to_owned(), |v| v.to_string());
                    let (d, h) = (num("dilation"), num("host_dilation"));
                    let label = x["label"].as_str().unwrap_or("?");
                    if h == d {
                        format!("{label} at D = {d}")
                    } else {
                        format!("{label} at D = {d} with the hosts' timers at D = {h}, a negative control")
                    }
                })
                .collect();
            each.join(", ")
        }
        _ if s.dilation.is_none() => "undilated".to_owned(),
        _ => format!("D = {}", s.dilation),
    }
}

/// A run's command as the caption shows it: the binary by its name.
fn command_words(c: &str) -> String {
    c.split(' ')
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                Path::new(w)
                    .file_name()
                    .map_or(w.to_owned(), |n| n.to_string_lossy().into_owned())
            } else {
                w.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The marker a generated table starts with.
const START: &str = "<!-- softswitch-exp report ";
/// ... and ends with.
const END: &str = "<!-- end -->";

/// A generated table found in a Markdown text: its arguments (after
/// `report`), and the line range of its current body.
#[derive(Debug, PartialEq)]
pub struct Block {
    /// The words after `softswitch-exp report`.
    pub args: String,
    /// First line of the body (after the marker).
    pub body_start: usize,
    /// The end marker's line.
    pub end: usize,
}

/// Every generated table of `text`.
pub fn blocks(text: &str) -> Result<Vec<Block>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(rest) = lines[i].trim().strip_prefix(START) {
            let Some(args) = rest.strip_suffix("-->") else {
                bail!(
                    "line {}: a table marker ends with `-->` on the same line",
                    i + 1
                );
            };
            let Some(end) = (i + 1..lines.len()).find(|&j| lines[j].trim() == END) else {
                bail!("line {}: no `{END}` after this table marker", i + 1);
            };
            out.push(Block {
                args: args.trim().to_owned(),
                body_start: i + 1,
                end,
            });
            i = end;
        }
        i += 1;
    }
    Ok(out)
}

/// The table a block's arguments make.
pub fn generate(args: &str, base: &Path) -> Result<String> {
    use clap::Parser;
    #[derive(clap::Parser)]
    #[command(no_binary_name = true)]
    struct P {
        #[command(flatten)]
        a: ReportArgs,
    }
    let words: Vec<&str> = args.split_whitespace().collect();
    let p = P::try_parse_from(&words).map_err(|e| anyhow::anyhow!("`{args}`: {e}"))?;
    if !p.a.markdown {
        bail!("`{args}`: a generated table needs --markdown");
    }
    table(&p.a, base, &format!("softswitch-exp report {args}"))
}

/// `text` with every generated table made anew from its arguments.
pub fn regenerate(text: &str, base: &Path) -> Result<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut at = 0;
    for b in blocks(text)? {
        for l in &lines[at..b.body_start] {
            out.push_str(l);
            out.push('\n');
        }
        let t = generate(&b.args, base).with_context(|| format!("the table of `{}`", b.args))?;
        out.push_str(&t);
        at = b.end;
    }
    for l in &lines[at..] {
        out.push_str(l);
        out.push('\n');
    }
    Ok(out)
}

/// The Markdown files whose generated tables the repository holds to its
/// archive.
pub const DOCS: [&str; 3] = ["README.md", "scenarios/README.md", "BENCHMARKS.md"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::report::tests::results_dir;

    fn args(words: &str) -> ReportArgs {
        use clap::Parser;
        #[derive(clap::Parser)]
        #[command(no_binary_name = true)]
        struct P {
            #[command(flatten)]
            a: ReportArgs,
        }
        P::try_parse_from(words.split_whitespace()).unwrap().a
    }

    #[test]
    fn runs_on_different_kernels_each_name_theirs() {
        let run = |commit: &str, kernel: &str| Provenance {
            dir: "d".into(),
            git_commit: commit.into(),
            git_dirty: Some(false),
            command: Some("/usr/bin/softswitch-exp run s.toml".into()),
            kernel: kernel.into(),
            machine: serde_json::json!({"cpus": 2}),
            quick: false,
            started: "2026-12-02T00:00:00Z".into(),
            shard: None,
        };
        let (runs, machine) = provenance_words(&[run("aaaa", "6.18.0"), run("bbbb", "6.18.0")]);
        assert_eq!(machine, "kernel 6.18.0, 2 CPUs");
        assert_eq!(
            runs[0],
            "commit aaaa (clean), `softswitch-exp run s.toml`, 2026-12-02"
        );
        let (runs, machine) = provenance_words(&[run("aaaa", "6.18.0-a"), run("bbbb", "6.18.0-b")]);
        assert!(machine.contains("differ"), "{machine}");
        assert!(
            runs[0].ends_with("2026-12-02, on kernel 6.18.0-a, 2 CPUs"),
            "{}",
            runs[0]
        );
        assert!(
            runs[1].ends_with("on kernel 6.18.0-b, 2 CPUs"),
            "{}",
            runs[1]
        );
        // The same kernel on another CPU is another machine.
        let on = |model: &str| Provenance {
            machine: serde_json::json!({"cpus": 2, "cpu_model": model}),
            ..run("aaaa", "6.18.0")
        };
        let (runs, machine) = provenance_words(&[on("Intel Xeon"), on("AMD EPYC")]);
        assert!(machine.contains("differ"), "{machine}");
        assert!(
            runs[1].ends_with("on kernel 6.18.0, 2 CPUs (AMD EPYC)"),
            "{}",
            runs[1]
        );
        let (_, machine) = provenance_words(&[on("AMD EPYC"), on("AMD EPYC")]);
        assert_eq!(machine, "kernel 6.18.0, 2 CPUs (AMD EPYC)");
    }

    #[test]
    fn a_table_says_where_its_numbers_come_from_and_how_they_were_judged() {
        let root = tempfile::tempdir().unwrap();
        results_dir(root.path(), "run", 4.0, |r| 100 + 10 * r as u64);
        let a = args("run --markdown --metrics fct.small.mean_us,drops --pooled");
        let t = table(&a, root.path(), "softswitch-exp report run --markdown").unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| load | scheme | repeats: first / retry / out | small-flow (<100KB) FCT, mean (us) | vs dctcp | drops per run | vs dctcp |"
        );
        assert_eq!(
            lines[2],
            "| 0.50 | dctcp | 5 / 0 / 0 | 120 [100–140] | baseline | 0.0 [0.0–0.0] | baseline |"
        );
        // TCN about twice DCTCP per seed: higher, with the table's Holm p;
        // drops identical (0 in every pair): no test.
        assert!(
            lines[3].starts_with("| 0.50 | tcn | 5 / 0 / 0 | 254 [200–308] | ×2."),
            "{}",
            lines[3]
        );
        assert!(
            lines[3].ends_with("p<0.001: **higher** | 0.0 [0.0–0.0] | identical |"),
            "{}",
            lines[3]
        );
        let caption = lines.last().unwrap();
        for want in [
            "Generated by `softswitch-exp report run --markdown`",
            "commit 0123456789 (clean), `softswitch-exp run t.toml --repeat 5`, 2026-11-29",
            "kernel 6.18.0, 2 CPUs",
            "D = 4, without `--quick`; 2 flows (or queries) per repeat",
            "p is from the 1 comparison of this table (Holm over one is the raw p)",
            "paired by seed",
            "first attempt / after a retry",
        ] {
            assert!(caption.contains(want), "{want:?} not in {caption}");
        }
        // Asking for what is not there says what to do.
        let e = table(&args("run --markdown --metrics nope"), root.path(), "x").unwrap_err();
        assert!(e.to_string().contains("stats.csv"), "{e}");
        let e = table(
            &args("run --markdown --metrics drops --points load0.90"),
            root.path(),
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no point"), "{e}");
    }

    #[test]
    fn one_holm_family_over_the_whole_table() {
        let root = tempfile::tempdir().unwrap();
        results_dir(root.path(), "run", 1.0, |r| 100 + 10 * r as u64);
        let a = args("run --markdown --metrics fct.small.mean_us,fct.small.p99_us,fct.all.mean_us");
        let t = table(&a, root.path(), "x").unwrap();
        let loaded = a.load(root.path()).unwrap();
        let s = report::summarize(&loaded, None).unwrap();
        let tcn = &s.points[1];
        let raw: Vec<f64> = a
            .metrics
            .iter()
            .map(|m| tcn.vs_baseline[m].p.unwrap())
            .collect();
        let adj = stats::holm(&raw);
        for p in adj {
            assert!(
                t.contains(&format!("p{}", summary::fmt_p_eq(p))),
                "{p} in {t}"
            );
        }
        assert!(t.contains("over the 3 comparisons of this table"), "{t}");
    }

    #[test]
    fn the_caption_names_holms_family_for_none_one_and_many() {
        let none = holm_words(0);
        assert!(
            none.contains("no comparison") && none.contains("no p"),
            "{none}"
        );
        assert!(!none.contains("Holm-adjusted"), "{none}");
        assert!(holm_words(1).contains("the 1 comparison of this table"));
        assert!(holm_words(20).contains("Holm-adjusted over the 20 comparisons"));
    }

    #[test]
    fn schemes_choose_rows_bare_or_labelled_when_runs_are_compared_apart() {
        let root = tempfile::tempdir().unwrap();
        results_dir(root.path(), "d1", 1.0, |r| 100 + 10 * r as u64);
        results_dir(root.path(), "d4", 4.0, |r| 100 + 10 * r as u64);
        let rows = |extra: &str| -> Vec<String> {
            let a = args(&format!(
                "d1 d4 --compare --markdown --metrics fct.small.mean_us{extra}"
            ));
            let t = table(&a, root.path(), "x").unwrap();
            t.lines()
                .skip(2)
                .take_while(|l| l.starts_with('|'))
                .map(|l| l.split('|').nth(2).unwrap().trim().to_owned())
                .collect()
        };
        assert_eq!(rows(""), ["D1:dctcp", "D1:tcn", "D4:dctcp", "D4:tcn"]);
        // The bare AQM in every run; the reference it is compared with stays.
        assert_eq!(rows(" --schemes tcn"), ["D1:tcn", "D4:tcn"]);
        // A labelled one in that run, with its reference.
        assert_eq!(rows(" --schemes D4:dctcp"), ["D1:dctcp", "D4:dctcp"]);
        let e = table(
            &args("d1 d4 --compare --markdown --metrics drops --schemes codel"),
            root.path(),
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("no point"), "{e}");
    }

    #[test]
    fn generated_blocks_are_found_and_rewritten() {
        let root = tempfile::tempdir().unwrap();
        results_dir(root.path(), "run", 1.0, |r| 100 + 10 * r as u64);
        let doc = "# Results\n\nText.\n<!-- softswitch-exp report run --markdown --metrics drops -->\nstale\n<!-- end -->\nAfter.\n";
        let b = blocks(doc).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].args, "run --markdown --metrics drops");
        let new = regenerate(doc, root.path()).unwrap();
        assert!(new.starts_with("# Results\n\nText.\n<!-- softswitch-exp report run --markdown --metrics drops -->\n| load |"));
        assert!(new.ends_with("*\n<!-- end -->\nAfter.\n"), "{new}");
        assert!(!new.contains("stale"));
        // Made anew, it is what it was: the check a test holds the docs to.
        assert_eq!(regenerate(&new, root.path()).unwrap(), new);
        assert!(blocks("<!-- softswitch-exp report run --markdown -->\nno end\n").is_err());
        let e = regenerate(
            "<!-- softswitch-exp report run --metrics drops -->\n<!-- end -->\n",
            root.path(),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("--markdown"), "{e:#}");
    }

    /// Every generated table in the docs is what its archived results give
    /// (`softswitch-exp docs` rewrites them).
    #[test]
    fn the_docs_tables_are_what_the_archive_gives() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR"));
        for f in DOCS {
            let text = std::fs::read_to_string(base.join(f)).unwrap();
            let new = regenerate(&text, base).unwrap_or_else(|e| panic!("{f}: {e:#}"));
            if new != text {
                let diff: Vec<String> = new
                    .lines()
                    .zip(text.lines())
                    .filter(|(a, b)| a != b)
                    .take(3)
                    .map(|(a, b)| format!("  generated: {a}\n  in {f}:    {b}"))
                    .collect();
                panic!(
                    "{f}: a generated table differs from its archived results — run `softswitch-exp docs` from the repository's top directory\n{}",
                    diff.join("\n")
                );
            }
        }
    }
}

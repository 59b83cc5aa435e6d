//! `softswitch-exp`: runs an experiment scenario (see `scenarios/README.md`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use softswitch::exp::scale::Scaling;
use softswitch::exp::{self, RunOptions, Scenario};
use softswitch::timebase::Dilation;

/// Experiment runner: namespaces, switch and traffic for every combination
/// of a scenario's sweep; results, summaries and plots in one directory.
#[derive(Parser, Debug)]
#[command(
    version = softswitch::VERSION_LONG,
    after_help = "Examples:\n  sudo softswitch-exp run scenarios/websearch.toml --quick\n  sudo softswitch-exp run scenarios/incast.toml --out results/incast --repeat 5\n  sudo softswitch-exp calibrate scenarios/tcn-fig1.toml --run\n  sudo softswitch-exp run scenarios/tcn-fig1.toml --dilation 4\n  sudo softswitch-exp calibrate scenarios/tcn-fig5.toml --by rate\n  sudo softswitch-exp run scenarios/tcn-fig5.toml --rate 500mbit\n  softswitch-exp report results/incast --baseline tcn\n  softswitch-exp report --compare results/d1 results/d4 --out results/d1-vs-d4\n  softswitch-exp check scenarios/static-flows.toml\n\nExit status:\n  0    done (run: every kept repeat faithful)\n  1    error\n  2    bad command line or scenario\n  3    run: results written, but a kept repeat was NOT FAITHFUL (--allow-unfaithful: 0)\n  130  interrupted (Ctrl-C)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a scenario (root).
    Run {
        /// The scenario TOML file.
        scenario: PathBuf,
        /// Results directory (default results/<name>-<UTC time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Fewer flows / queries, shorter static runs: a smoke test.
        #[arg(long)]
        quick: bool,
        /// No progress bar.
        #[arg(long)]
        no_progress: bool,
        /// Run at this link rate instead of the scenario's, scaling the
        /// buffer, byte thresholds and paced rates by the same factor
        /// (recorded in manifest.json and summary.json).
        #[arg(long)]
        rate: Option<String>,
        /// Hosts send at most this many segments per GSO packet, overriding
        /// `[topology] gso_segs` (1 = segment by segment, ACK-clocked like a
        /// simulator's hosts; recorded in manifest.json's scenario).
        #[arg(long, value_name = "SEGMENTS")]
        gso_segs: Option<u32>,
        /// Run every combination this many times, overriding the scenario's
        /// `repeat`: each repeat is one sample with its own seed, and every
        /// number is reported with its spread across them.
        #[arg(long, value_name = "N")]
        repeat: Option<u32>,
        /// Number the repeats from K (seeds and directories of repeats K,
        /// K+1, …): a later run whose results `report` merges with an
        /// earlier one's.
        #[arg(long, value_name = "K", default_value_t = 0)]
        first_repeat: u32,
        /// Run a combination the fidelity guard calls NOT FAITHFUL again,
        /// up to N more times, with the same seed, keeping each unfaithful
        /// attempt beside it (`<dir>.unfaithful1`, …, listed in
        /// manifest.json's `retried`): on a machine whose load comes and
        /// goes (a VM's host taking its CPUs for minutes) a later attempt
        /// may be held. What is asked of the statistics does not change:
        /// only faithful repeats count, and a point short of them says so.
        #[arg(long, value_name = "N", default_value_t = 0)]
        retry_unfaithful: u32,
        /// With --retry-unfaithful: run the unfaithful combinations again
        /// only after every combination's first attempt (in passes, in
        /// order), not at once. Where a machine's speed comes and goes over
        /// minutes (a VM's host), an attempt right after an unfaithful one
        /// mostly meets the same machine; a later one may not. Same seeds,
        /// same directories and counts; only the order of attempts differs
        /// (recorded in manifest.json's `retry_later`).
        #[arg(long, requires = "retry_unfaithful")]
        retry_later: bool,
        /// Time dilation D, overriding the scenario's `dilation`: every
        /// rate and time in the scenario stays emulated while the switch,
        /// the hosts' timers and the traffic run D times slower (the wire
        /// at rate / D), so a rate this machine cannot hold in real time
        /// keeps every packet count; results are in emulated units and
        /// record D. 1 = real time.
        #[arg(long, value_name = "D")]
        dilation: Option<String>,
        /// Run only shard K of N of the combinations (K from 0, as Slurm's
        /// array task ids count): a deterministic part whose expected time
        /// is within one combination of the others' (`softswitch-exp plan
        /// --shards N` lists them). `report` merges the shards' directories
        /// into the summary one run would have given.
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Exit 0 even when a kept repeat is NOT FAITHFUL (by default the
        /// run exits 3 then: results are written, but some of its numbers
        /// are not the emulated link's).
        #[arg(long)]
        allow_unfaithful: bool,
        /// Capture what the switch saw in every combination, as the
        /// scenario's `[capture] pcap = true` does: pcapng per port and
        /// direction in the combination's own directory (`<dir>/pcap/`),
        /// each file bounded by `[capture] pcap_max_mb` (default 100 MB, as
        /// softswitch --pcap-max-mb); recorded in manifest.json.
        #[arg(long)]
        pcap: bool,
        /// A negative control for dilation invariance: build the hosts with
        /// time dilation D_H (their RTO_min, SYN RTO, … stretched by D_H)
        /// while the switch and the traffic generators run at the run's D
        /// (default D_H = D, the emulated experiment). Recorded in
        /// manifest.json; such a run does not merge with normal runs, and
        /// `report --compare` labels it `D<D>-hosts<D_H>`.
        #[arg(long, value_name = "D_H")]
        host_dilation: Option<String>,
    },
    /// Rebuild summary.json, stats.csv and the figures of existing results
    /// from what each repeat stored, without running anything (no root);
    /// several directories of one scenario are merged.
    ///
    /// With --markdown, prints a Markdown table of --metrics with its
    /// provenance and statistics instead (what the docs' generated tables
    /// are; `softswitch-exp docs` rewrites them).
    Report {
        #[command(flatten)]
        args: exp::markdown::ReportArgs,
        /// Write here (default: the one directory given; needed with several).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Keep a finished run's raw results in a compact form (no root):
    /// its manifest, every combination's result, switch exit report and
    /// host counters (also of the attempts set aside), its summary and
    /// stats — gzip-compressed, without time series, captures or logs.
    /// `report` reads an archived run as it reads a results directory.
    Archive {
        /// The results directory (`softswitch-exp run --out`).
        results: PathBuf,
        /// Where to keep it (new or empty), e.g. archive/<experiment>/<run>.
        to: PathBuf,
    },
    /// Regenerate (or with --check, verify) every generated table of
    /// Markdown files — the blocks between `<!-- softswitch-exp report
    /// ARGS -->` and `<!-- end -->` — from the results they name (no root).
    /// Run it from the repository's top directory.
    Docs {
        /// Only check: exit 1 naming every table that differs from what its
        /// results give.
        #[arg(long)]
        check: bool,
        /// The Markdown files (default: README.md, scenarios/README.md,
        /// BENCHMARKS.md).
        files: Vec<PathBuf>,
    },
    /// Find how this machine runs the scenario faithfully (root): by
    /// default the smallest time dilation D (1, 2, 4, 8, …, or from
    /// --min-dilation, up to --max-dilation) at which the fidelity guard passes every repeat of
    /// the scenario's heaviest point; with `--by rate` the highest link
    /// rate instead (1, ¾, ½, ⅓, ¼ of the scenario's; static flows must also
    /// hold ≥ 93 % of the link).
    ///
    /// Dilation is the default because it keeps the experiment: every
    /// rate, time, threshold and packet count stays the scenario's and only
    /// the run gets D times longer. Rate scaling shrinks the pipe in
    /// packets with the rate (thresholds of a few frames, DCTCP's
    /// two-segment minimum window) and can change the result; it stays for
    /// comparison with results made that way.
    Calibrate {
        /// The scenario TOML file.
        scenario: PathBuf,
        /// Results directory (default results/<name>-calibrate-<UTC time>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Then run the whole scenario at the D (or rate) found (into <out>/run).
        #[arg(long)]
        run: bool,
        /// No progress bar.
        #[arg(long)]
        no_progress: bool,
        /// What to calibrate: `dilation` (keep the scenario, slow it down)
        /// or `rate` (scale the scenario to a lower link rate).
        #[arg(long, value_enum, default_value_t = CalibrateBy::Dilation)]
        by: CalibrateBy,
        /// Largest D tried with `--by dilation`.
        #[arg(long, value_name = "D", default_value_t = exp::scale::DEFAULT_MAX_DILATION)]
        max_dilation: u32,
        /// Smallest D tried with `--by dilation` (then 2·D, 4·D, … up to
        /// --max-dilation): skips the trials a fast scenario cannot pass,
        /// e.g. `--min-dilation 40 --max-dilation 320` for 10 Gbit/s.
        #[arg(long, value_name = "D", default_value_t = 1)]
        min_dilation: u32,
        /// Probe with the scenario's own flow counts and durations, not
        /// `--quick`'s: slower, for a scenario whose quick probe holds
        /// where its full run does not.
        #[arg(long)]
        full: bool,
    },
    /// List a sweep's work (no root): every combination with its seed and
    /// expected real duration (D included), the total, and with --shards N
    /// which shard runs each and how long each shard takes.
    Plan {
        /// The scenario TOML file.
        scenario: PathBuf,
        /// As `run --quick` would run it.
        #[arg(long)]
        quick: bool,
        /// As `run --repeat N`.
        #[arg(long, value_name = "N")]
        repeat: Option<u32>,
        /// As `run --first-repeat K`.
        #[arg(long, value_name = "K", default_value_t = 0)]
        first_repeat: u32,
        /// As `run --dilation D`.
        #[arg(long, value_name = "D")]
        dilation: Option<String>,
        /// Split into this many shards (`run --shard K/N`).
        #[arg(long, value_name = "N")]
        shards: Option<usize>,
    },
    /// Validate a scenario and list its combinations (no root).
    Check {
        /// The scenario TOML file.
        scenario: PathBuf,
    },
}

/// `calibrate --by`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum CalibrateBy {
    /// The smallest time dilation D.
    Dilation,
    /// The highest link rate.
    Rate,
}

fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn load(path: &std::path::Path) -> Result<Scenario, ExitCode> {
    Scenario::load(path).map_err(|e| {
        eprintln!("softswitch-exp: {e}");
        ExitCode::from(2)
    })
}

fn utc_stamp() -> String {
    softswitch::timebase::utc_now_compact()
}

fn options(scenario: &std::path::Path, out: PathBuf, quick: bool, progress: bool) -> RunOptions {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    RunOptions {
        out,
        quick,
        switch_bin: sibling("softswitch"),
        tg_bin: sibling("softswitch-tg"),
        scenario_dir: scenario.parent().map(PathBuf::from).unwrap_or_default(),
        progress,
        stop,
        fault: None,
        prefix: None,
        scaling: None,
        first_repeat: 0,
        retry_unfaithful: 0,
        retry_later: false,
        shard: None,
        pcap: false,
    }
}

fn need_root(what: &str) -> Result<(), ExitCode> {
    if is_root() {
        return Ok(());
    }
    eprintln!(
        "softswitch-exp: {what} needs root (namespaces, XDP): sudo softswitch-exp {what} ..."
    );
    Err(ExitCode::from(2))
}

/// Runs `sc` and prints what it produced; exit status 3 when a kept repeat
/// is not faithful, unless `allow_unfaithful`.
fn run_and_report(
    sc: &Scenario,
    name: &str,
    opts: &RunOptions,
    allow_unfaithful: bool,
) -> ExitCode {
    if let Some(s) = &opts.scaling {
        println!(
            "scaled from {} to {} (×{:.3}): {}",
            s.from,
            s.to,
            s.factor,
            s.changes.join(", ")
        );
    }
    let d = sc.dilation();
    if !d.is_none() {
        println!(
            "time dilation D = {d}: the scenario's rates and times are emulated; the wire runs at rate / {d} and every time lasts {d} times longer"
        );
    }
    if sc.hosts_apart() {
        println!(
            "NEGATIVE CONTROL: the hosts' timers run at D = {} while the switch and the traffic generators run at D = {d}; these results are not the emulated experiment (report --compare labels them {})",
            sc.host_dilation(),
            exp::report::dilation_label(sc)
        );
    }
    match exp::run(sc, name, opts) {
        Ok(r) => {
            println!(
                "{} combinations in {:.1} s → {}",
                r.combos,
                r.elapsed.as_secs_f64(),
                r.out.display()
            );
            print_outcome(&r.console, &r.notes, &r.plots);
            if r.faithful || allow_unfaithful {
                ExitCode::SUCCESS
            } else {
                println!(
                    "softswitch-exp: NOT FAITHFUL: a repeat kept in {} was judged unfaithful (see the notes above); exit status {}",
                    r.out.display(),
                    softswitch::cli::EXIT_NOT_FAITHFUL
                );
                ExitCode::from(softswitch::cli::EXIT_NOT_FAITHFUL)
            }
        }
        Err(e) => interrupted_or_failed(&e, opts),
    }
}

/// The numbers, then notes and files.
fn print_outcome(console: &[String], notes: &[String], files: &[PathBuf]) {
    for l in console {
        println!("{l}");
    }
    for n in notes {
        println!("note: {n}");
    }
    for p in files {
        println!("  {}", p.display());
    }
}

/// `softswitch-exp report`.
fn report(args: exp::markdown::ReportArgs, out: Option<PathBuf>) -> ExitCode {
    if args.markdown {
        let command = format!(
            "softswitch-exp report {}",
            std::env::args().skip(2).collect::<Vec<_>>().join(" ")
        );
        return match exp::markdown::table(&args, Path::new(""), &command) {
            Ok(t) => {
                print!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("softswitch-exp: report: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let out = match (out, args.dirs.as_slice()) {
        (Some(o), _) => o,
        (None, [one]) if !exp::archive::is_archive(one) => one.clone(),
        (None, [_]) => {
            eprintln!(
                "softswitch-exp: report: an archived run is not rewritten; say where to write (--out DIR)"
            );
            return ExitCode::from(2);
        }
        (None, _) => {
            eprintln!(
                "softswitch-exp: report: with several directories, say where to write (--out DIR)"
            );
            return ExitCode::from(2);
        }
    };
    let result = args
        .load(Path::new(""))
        .and_then(|loaded| exp::report::write(&out, &loaded, args.baseline.as_deref()));
    match result {
        Ok(r) => {
            println!(
                "{} repeats of {} → {}",
                r.summary.repeats.len(),
                r.summary.scenario_name,
                out.display()
            );
            print_outcome(&r.console, &r.notes, &r.files);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("softswitch-exp: report: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `softswitch-exp archive`.
fn archive(results: &Path, to: &Path) -> ExitCode {
    match exp::archive::write(results, to) {
        Ok(a) => {
            println!(
                "archived {} combinations ({} of them attempts set aside) of {} → {} ({:.1} MB)",
                a.combos,
                a.set_aside,
                results.display(),
                a.dir.display(),
                a.bytes as f64 / 1e6
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("softswitch-exp: archive: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `softswitch-exp docs`.
fn docs(check: bool, files: Vec<PathBuf>) -> ExitCode {
    let files: Vec<PathBuf> = if files.is_empty() {
        exp::markdown::DOCS.iter().map(PathBuf::from).collect()
    } else {
        files
    };
    let mut stale = Vec::new();
    for f in &files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("softswitch-exp: docs: {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        };
        let new = match exp::markdown::regenerate(&text, Path::new("")) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("softswitch-exp: docs: {}: {e:#}", f.display());
                return ExitCode::FAILURE;
            }
        };
        let n = exp::markdown::blocks(&text).map_or(0, |b| b.len());
        if new == text {
            println!("{}: {n} generated tables, all up to date", f.display());
        } else if check {
            println!(
                "{}: a generated table differs from its results",
                f.display()
            );
            stale.push(f.display().to_string());
        } else if let Err(e) = std::fs::write(f, new) {
            eprintln!("softswitch-exp: docs: {}: {e}", f.display());
            return ExitCode::FAILURE;
        } else {
            println!("{}: {n} generated tables rewritten", f.display());
        }
    }
    if stale.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "softswitch-exp: docs: out of date: {} (run `softswitch-exp docs` to rewrite them)",
            stale.join(", ")
        );
        ExitCode::FAILURE
    }
}

fn interrupted_or_failed(e: &anyhow::Error, opts: &RunOptions) -> ExitCode {
    eprintln!("softswitch-exp: {e:#}");
    // 130 = interrupted, as shells report Ctrl-C.
    if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    softswitch::cli::exit_quietly_on_closed_output();
    match real_main() {
        Ok(c) | Err(c) => c,
    }
}

fn real_main() -> Result<ExitCode, ExitCode> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { scenario } => check(&scenario),
        Cmd::Plan {
            scenario,
            quick,
            repeat,
            first_repeat,
            dilation,
            shards,
        } => plan(&scenario, quick, repeat, first_repeat, dilation, shards),
        Cmd::Run {
            scenario,
            out,
            quick,
            no_progress,
            rate,
            gso_segs,
            repeat,
            first_repeat,
            retry_unfaithful,
            retry_later,
            dilation,
            allow_unfaithful,
            shard,
            pcap,
            host_dilation,
        } => {
            let mut sc = load(&scenario)?;
            if let Some(d) = dilation {
                let d: Dilation = d.parse().map_err(|e| {
                    eprintln!("softswitch-exp: --dilation: {e}");
                    ExitCode::from(2)
                })?;
                sc.dilation = Some(d.factor());
            }
            if let Some(d) = host_dilation {
                let d: Dilation = d.parse().map_err(|e| {
                    eprintln!("softswitch-exp: --host-dilation: {e}");
                    ExitCode::from(2)
                })?;
                sc.host_dilation = Some(d.factor());
            }
            if let Some(n) = repeat {
                if n == 0 {
                    eprintln!("softswitch-exp: --repeat 0: use at least 1");
                    return Err(ExitCode::from(2));
                }
                sc.repeat = n;
            }
            if let Some(n) = gso_segs {
                softswitch::topo::check_gso_segs(n).map_err(|e| {
                    eprintln!("softswitch-exp: --gso-segs: {e}");
                    ExitCode::from(2)
                })?;
                sc.topology.gso_segs = Some(n);
            }
            need_root("run")?;
            let name = sc.name_or(&scenario);
            let out =
                out.unwrap_or_else(|| PathBuf::from(format!("results/{name}-{}", utc_stamp())));
            let mut opts = options(&scenario, out, quick, !no_progress);
            opts.first_repeat = first_repeat;
            opts.retry_unfaithful = retry_unfaithful;
            opts.retry_later = retry_later;
            if let Some(s) = shard {
                opts.shard = Some(s.parse().map_err(|e| {
                    eprintln!("softswitch-exp: --shard {e}");
                    ExitCode::from(2)
                })?);
            }
            opts.pcap = pcap;
            if let Some(r) = rate {
                let (s, how) = scale(&sc, &r, "--rate on the command line")?;
                sc = s;
                opts.scaling = Some(how);
            }
            Ok(run_and_report(&sc, &name, &opts, allow_unfaithful))
        }
        Cmd::Report { args, out } => Ok(report(args, out)),
        Cmd::Archive { results, to } => Ok(archive(&results, &to)),
        Cmd::Docs { check, files } => Ok(docs(check, files)),
        Cmd::Calibrate {
            scenario,
            out,
            run,
            no_progress,
            by,
            max_dilation,
            min_dilation,
            full,
        } => match by {
            CalibrateBy::Rate => calibrate(CalibrateFlags {
                scenario: &scenario,
                out,
                run,
                no_progress,
                full,
            }),
            CalibrateBy::Dilation => calibrate_dilation(
                CalibrateFlags {
                    scenario: &scenario,
                    out,
                    run,
                    no_progress,
                    full,
                },
                (min_dilation, max_dilation),
            ),
        },
    }
}

/// `softswitch-exp plan`.
fn plan(
    scenario: &Path,
    quick: bool,
    repeat: Option<u32>,
    first_repeat: u32,
    dilation: Option<String>,
    shards: Option<usize>,
) -> Result<ExitCode, ExitCode> {
    let mut sc = load(scenario)?;
    if let Some(n) = repeat.filter(|&n| n > 0) {
        sc.repeat = n;
    }
    if let Some(d) = dilation {
        let d: Dilation = d.parse().map_err(|e| {
            eprintln!("softswitch-exp: --dilation: {e}");
            ExitCode::from(2)
        })?;
        sc.dilation = Some(d.factor());
    }
    if shards == Some(0) {
        eprintln!("softswitch-exp: --shards 0: use at least 1");
        return Err(ExitCode::from(2));
    }
    let dir = scenario.parent().map(PathBuf::from).unwrap_or_default();
    let jobs = exp::plan::jobs(&sc, quick, first_repeat, &dir).map_err(|e| {
        eprintln!("softswitch-exp: plan: {e:#}");
        ExitCode::FAILURE
    })?;
    println!("{}:", sc.name_or(scenario));
    for l in exp::plan::describe(&sc, &jobs, shards) {
        println!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `softswitch-exp check`: validate and list the combinations.
fn check(scenario: &Path) -> Result<ExitCode, ExitCode> {
    use std::io::Write;
    let sc = load(scenario)?;
    let combos = sc.combos();
    // A closed pipe (`| head`) ends the listing, quietly.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{}: {} combinations",
        sc.name_or(scenario),
        combos.len()
    );
    // Validated by `load`: a fabric reads.
    if let Ok(Some(f)) = sc.fabric_desc() {
        let names: Vec<&str> = f.switches.iter().map(|s| s.name.as_str()).collect();
        let _ = writeln!(
            out,
            "  fabric: {} switches ({}), {} links, {} hosts in {}",
            names.len(),
            names.join(", "),
            f.links.len(),
            f.hosts.len(),
            f.subnet
        );
    }
    for c in combos {
        if writeln!(out, "  {:>3}  {}", c.index, c.dir).is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn scale(
    sc: &Scenario,
    rate: &str,
    reason: &str,
) -> Result<(Scenario, exp::scale::Scaling), ExitCode> {
    exp::scale::scale(sc, rate, reason).map_err(|e| {
        eprintln!("softswitch-exp: {e}");
        ExitCode::from(2)
    })
}

/// The flags both calibrations take.
struct CalibrateFlags<'a> {
    scenario: &'a Path,
    out: Option<PathBuf>,
    run: bool,
    no_progress: bool,
    /// Probe without `--quick`.
    full: bool,
}

/// What both calibrations share, around their own steps: load the scenario
/// (and refuse a bad `precheck`), need root, `search` into `<out>/trials`,
/// write `calibration.json`; `verdict` prints what the search found and
/// whether anything held; with `--run`, `chosen` gives the scenario to run
/// (and how it was scaled), which runs into `<out>/run`.
fn calibrate_with<C: serde::Serialize>(
    flags: CalibrateFlags,
    precheck: Result<(), String>,
    search: impl FnOnce(&Scenario, &str, &RunOptions) -> anyhow::Result<C>,
    verdict: impl FnOnce(&C, &str, &Path) -> bool,
    chosen: impl FnOnce(Scenario, &C) -> Result<(Scenario, Option<Scaling>), ExitCode>,
) -> Result<ExitCode, ExitCode> {
    let scenario = flags.scenario;
    let sc = load(scenario)?;
    if let Err(e) = precheck {
        eprintln!("softswitch-exp: {e}");
        return Err(ExitCode::from(2));
    }
    need_root("calibrate")?;
    let name = sc.name_or(scenario);
    let out = flags
        .out
        .unwrap_or_else(|| PathBuf::from(format!("results/{name}-calibrate-{}", utc_stamp())));
    let opts = options(
        scenario,
        out.join("trials"),
        !flags.full,
        !flags.no_progress,
    );
    let cal = match search(&sc, &name, &opts) {
        Ok(c) => c,
        Err(e) => return Err(interrupted_or_failed(&e, &opts)),
    };
    let json = out.join("calibration.json");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(
        &json,
        serde_json::to_string_pretty(&cal).unwrap_or_default(),
    );
    if !verdict(&cal, &name, &json) {
        return Ok(ExitCode::FAILURE);
    }
    if !flags.run {
        return Ok(ExitCode::SUCCESS);
    }
    let (sc, scaling) = chosen(sc, &cal)?;
    let mut opts = options(scenario, out.join("run"), false, !flags.no_progress);
    opts.scaling = scaling;
    Ok(run_and_report(&sc, &name, &opts, false))
}

/// `softswitch-exp calibrate` (`--by dilation`), and with `--run` the run
/// at the D found.
fn calibrate_dilation(flags: CalibrateFlags, range: (u32, u32)) -> Result<ExitCode, ExitCode> {
    let scenario = flags.scenario;
    calibrate_with(
        flags,
        exp::scale::dilation_candidates(range.0, range.1).map(drop),
        |sc, name, opts| exp::scale::calibrate_dilation(sc, name, opts, range),
        |cal, name, json| {
            for t in &cal.trials {
                println!(
                    "  D = {}: lost {:.2} % of link time at most over {} repeats — {}",
                    t.dilation,
                    t.max_lost_fraction * 100.0,
                    t.repeats,
                    softswitch::fidelity::label(t.faithful)
                );
            }
            let Some(d) = cal.dilation else {
                println!(
                    "calibration: {name} was not faithful at any D up to {}; see {} (try a larger --max-dilation, and keep other load off the machine)",
                    range.1,
                    json.display()
                );
                return false;
            };
            println!(
                "calibration: this machine holds {name} ({} emulated) at D = {d}; run it with\n  softswitch-exp run {} --dilation {d}",
                cal.scenario_rate,
                scenario.display()
            );
            true
        },
        |mut sc, cal| {
            sc.dilation = cal.dilation.map(Dilation::factor);
            Ok((sc, None))
        },
    )
}

/// `softswitch-exp calibrate --by rate`, and with `--run` the run at the
/// rate found.
fn calibrate(flags: CalibrateFlags) -> Result<ExitCode, ExitCode> {
    let scenario = flags.scenario;
    calibrate_with(
        flags,
        Ok(()),
        exp::scale::calibrate,
        |cal, name, json| {
            let Some(rate) = &cal.rate else {
                println!(
                    "calibration: no rate down to {} ran faithfully on this machine; see {}",
                    cal.trials.last().map_or("?", |t| t.rate.as_str()),
                    json.display()
                );
                return false;
            };
            println!(
                "calibration: this machine holds {name} at {rate} (scenario: {}); run it with\n  softswitch-exp run {} --rate {rate}",
                cal.scenario_rate,
                scenario.display()
            );
            true
        },
        |sc, cal| {
            let reason = format!(
                "calibration: the highest of {} accepted ({})",
                cal.trials
                    .iter()
                    .map(|t| t.rate.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                cal.rule
            );
            let rate = cal.rate.as_deref().unwrap_or_default();
            let (s, how) = scale(&sc, rate, &reason)?;
            Ok((s, Some(how)))
        },
    )
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Cmd {
        Cli::try_parse_from(args.split(' ')).unwrap().cmd
    }

    #[test]
    fn calibrate_finds_d_by_default_and_the_rate_when_asked() {
        let Cmd::Calibrate {
            by, max_dilation, ..
        } = parse("softswitch-exp calibrate s.toml")
        else {
            panic!()
        };
        assert_eq!((by, max_dilation), (CalibrateBy::Dilation, 16));
        let Cmd::Calibrate {
            by, max_dilation, ..
        } = parse("softswitch-exp calibrate s.toml --by rate --max-dilation 8")
        else {
            panic!()
        };
        assert_eq!((by, max_dilation), (CalibrateBy::Rate, 8));
        let Cmd::Calibrate {
            min_dilation,
            max_dilation,
            ..
        } = parse("softswitch-exp calibrate s.toml --min-dilation 40 --max-dilation 320")
        else {
            panic!()
        };
        assert_eq!((min_dilation, max_dilation), (40, 320));
        let Cmd::Calibrate { min_dilation, .. } = parse("softswitch-exp calibrate s.toml") else {
            panic!()
        };
        assert_eq!(min_dilation, 1);
        assert!(
            Cli::try_parse_from("softswitch-exp calibrate s.toml --by speed".split(' ')).is_err()
        );
        // The probe is quick unless --full asks for the scenario's own size.
        let Cmd::Calibrate { full, .. } = parse("softswitch-exp calibrate s.toml") else {
            panic!()
        };
        assert!(!full);
        let Cmd::Calibrate { full, .. } = parse("softswitch-exp calibrate s.toml --full") else {
            panic!()
        };
        assert!(full);
    }

    #[test]
    fn run_takes_a_host_dilation_for_a_negative_control() {
        let Cmd::Run {
            dilation,
            host_dilation,
            ..
        } = parse("softswitch-exp run s.toml --dilation 40 --host-dilation 1")
        else {
            panic!()
        };
        assert_eq!(
            (dilation.as_deref(), host_dilation.as_deref()),
            (Some("40"), Some("1"))
        );
        let Cmd::Run { host_dilation, .. } = parse("softswitch-exp run s.toml") else {
            panic!()
        };
        assert_eq!(host_dilation, None);
    }

    #[test]
    fn run_takes_a_dilation() {
        let Cmd::Run { dilation, .. } = parse("softswitch-exp run s.toml --dilation 4") else {
            panic!()
        };
        assert_eq!(dilation.as_deref(), Some("4"));
        let Cmd::Run { dilation, .. } = parse("softswitch-exp run s.toml") else {
            panic!()
        };
        assert_eq!(dilation, None);
    }
}

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
    version,
    after_help = "Examples:\n  sudo softswitch-exp run scenarios/websearch.toml --quick\n  sudo softswitch-exp run scenarios/incast.toml --out results/incast --repeat 5\n  sudo softswitch-exp calibrate scenarios/tcn-fig1.toml --run\n  sudo softswitch-exp run scenarios/tcn-fig1.toml --dilation 4\n  sudo softswitch-exp calibrate scenarios/tcn-fig5.toml --by rate\n  sudo softswitch-exp run scenarios/tcn-fig5.toml --rate 500mbit\n  softswitch-exp report results/incast --baseline tcn\n  softswitch-exp report --compare results/d1 results/d4 --out results/d1-vs-d4\n  softswitch-exp check scenarios/static-flows.toml"
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
        /// Time dilation D, overriding the scenario's `dilation`: every
        /// rate and time in the scenario stays emulated while the switch,
        /// the hosts' timers and the traffic run D times slower (the wire
        /// at rate / D), so a rate this machine cannot hold in real time
        /// keeps every packet count; results are in emulated units and
        /// record D. 1 = real time.
        #[arg(long, value_name = "D")]
        dilation: Option<String>,
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
    Report {
        /// Results directories (`softswitch-exp run --out`).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Compare against this AQM instead of the scenario's baseline.
        #[arg(long, value_name = "AQM", conflicts_with = "compare")]
        baseline: Option<String>,
        /// Write here (default: the one directory given; needed with several).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Keep each directory apart instead of merging: runs of one
        /// scenario at different time dilations D (or rates, or days) become
        /// schemes of their own, each AQM against itself in the first
        /// directory (`D4:tcn` against `D1:tcn`), each point with its
        /// spread and a verdict per metric — dilation invariance.
        #[arg(long)]
        compare: bool,
        /// With --compare: the name of each directory's runs, in order
        /// (default `D<d>` when D differs, else the rate, else run1, run2, …).
        #[arg(long, value_name = "NAME", requires = "compare")]
        label: Vec<String>,
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

/// Runs `sc` and prints what it produced.
fn run_and_report(sc: &Scenario, name: &str, opts: &RunOptions) -> ExitCode {
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
            ExitCode::SUCCESS
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
fn report(
    dirs: Vec<PathBuf>,
    baseline: Option<String>,
    out: Option<PathBuf>,
    apart: Option<Vec<String>>,
) -> ExitCode {
    let out = match (out, dirs.as_slice()) {
        (Some(o), _) => o,
        (None, [one]) => one.clone(),
        (None, _) => {
            eprintln!(
                "softswitch-exp: report: with several directories, say where to write (--out DIR)"
            );
            return ExitCode::from(2);
        }
    };
    let loaded = match &apart {
        Some(labels) => exp::report::load_apart(&dirs, labels),
        None => exp::report::load(&dirs),
    };
    let result = loaded.and_then(|loaded| exp::report::write(&out, &loaded, baseline.as_deref()));
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
            dilation,
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
            if let Some(r) = rate {
                let (s, how) = scale(&sc, &r, "--rate on the command line")?;
                sc = s;
                opts.scaling = Some(how);
            }
            Ok(run_and_report(&sc, &name, &opts))
        }
        Cmd::Report {
            dirs,
            baseline,
            out,
            compare,
            label,
        } => Ok(report(dirs, baseline, out, compare.then_some(label))),
        Cmd::Calibrate {
            scenario,
            out,
            run,
            no_progress,
            by,
            max_dilation,
            min_dilation,
        } => match by {
            CalibrateBy::Rate => calibrate(CalibrateFlags {
                scenario: &scenario,
                out,
                run,
                no_progress,
            }),
            CalibrateBy::Dilation => calibrate_dilation(
                CalibrateFlags {
                    scenario: &scenario,
                    out,
                    run,
                    no_progress,
                },
                (min_dilation, max_dilation),
            ),
        },
    }
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
    let opts = options(scenario, out.join("trials"), true, !flags.no_progress);
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
    Ok(run_and_report(&sc, &name, &opts))
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

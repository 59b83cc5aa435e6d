//! `softswitch-exp`: runs an experiment scenario (see `scenarios/README.md`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use softswitch::exp::{self, RunOptions, Scenario};

/// Experiment runner: namespaces, switch and traffic for every combination
/// of a scenario's sweep; results, summaries and plots in one directory.
#[derive(Parser, Debug)]
#[command(
    version,
    after_help = "Examples:\n  sudo softswitch-exp run scenarios/websearch.toml --quick\n  sudo softswitch-exp run scenarios/incast.toml --out results/incast\n  softswitch-exp check scenarios/static-flows.toml"
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
    },
    /// Validate a scenario and list its combinations (no root).
    Check {
        /// The scenario TOML file.
        scenario: PathBuf,
    },
}

fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { scenario } => match Scenario::load(&scenario) {
            Ok(sc) => {
                let combos = sc.combos();
                println!("{}: {} combinations", sc.name_or(&scenario), combos.len());
                for c in combos {
                    println!("  {:>3}  {}", c.index, c.dir);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("softswitch-exp: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Run {
            scenario,
            out,
            quick,
            no_progress,
        } => {
            let sc = match Scenario::load(&scenario) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("softswitch-exp: {e}");
                    return ExitCode::from(2);
                }
            };
            if !is_root() {
                eprintln!(
                    "softswitch-exp: run needs root (namespaces, XDP): sudo softswitch-exp run ..."
                );
                return ExitCode::from(2);
            }
            let name = sc.name_or(&scenario);
            let stamp = std::process::Command::new("date")
                .args(["-u", "+%Y%m%d-%H%M%S"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default();
            let out = out.unwrap_or_else(|| PathBuf::from(format!("results/{name}-{stamp}")));
            let stop = Arc::new(AtomicBool::new(false));
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                let _ = signal_hook::flag::register(sig, stop.clone());
            }
            let opts = RunOptions {
                out,
                quick,
                switch_bin: sibling("softswitch"),
                tg_bin: sibling("softswitch-tg"),
                scenario_dir: scenario.parent().map(PathBuf::from).unwrap_or_default(),
                progress: !no_progress,
                stop,
                fault: None,
                prefix: None,
            };
            match exp::run(&sc, &name, &opts) {
                Ok(r) => {
                    println!(
                        "{} combinations in {:.1} s → {}",
                        r.combos,
                        r.elapsed.as_secs_f64(),
                        r.out.display()
                    );
                    for n in &r.notes {
                        println!("note: {n}");
                    }
                    for p in &r.plots {
                        println!("  {}", p.display());
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("softswitch-exp: {e:#}");
                    // 130 = interrupted, as shells report Ctrl-C.
                    if opts.stop.load(std::sync::atomic::Ordering::SeqCst) {
                        ExitCode::from(130)
                    } else {
                        ExitCode::FAILURE
                    }
                }
            }
        }
    }
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

//! `softswitch`: run the switch, manage host namespaces, read live counters.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use softswitch::cli::{Cli, Command, TopoAction, TopoUpArgs};
use softswitch::{config, dataplane, live, report, stats, topo, units};

fn main() -> ExitCode {
    softswitch::cli::exit_quietly_on_closed_output();
    let cli = Cli::parse();
    let r = match cli.command {
        Some(Command::Topo {
            action: TopoAction::Up(a),
        }) => topo_up(&a).map(Outcome::from),
        Some(Command::Topo {
            action: TopoAction::Down { prefix },
        }) => topo_down(&prefix).map(Outcome::from),
        Some(Command::Topo {
            action: TopoAction::List,
        }) => {
            for t in topo::list() {
                println!(
                    "{}\t{} hosts\tcc {}\tmade by pid {}",
                    t.prefix, t.hosts, t.cc, t.pid
                );
            }
            Ok(Outcome::Done)
        }
        Some(Command::Stats {
            socket,
            json,
            interval: None,
            ..
        }) => show_stats(&socket, json).map(Outcome::from),
        Some(Command::Stats {
            socket,
            json,
            interval: Some(every),
            count,
        }) => watch_stats(&socket, json, &every, count).map(Outcome::from),
        None => run_switch(&cli.run),
    };
    match r {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotFaithful) => ExitCode::from(softswitch::cli::EXIT_NOT_FAITHFUL),
        Err(e) => {
            eprintln!("softswitch: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How a command ended, when it did not fail.
enum Outcome {
    /// As asked.
    Done,
    /// The switch ran, but the fidelity guard said NOT FAITHFUL: its
    /// numbers are not the emulated link's.
    NotFaithful,
}

impl From<()> for Outcome {
    fn from(_: ()) -> Self {
        Outcome::Done
    }
}

fn run_switch(args: &config::Options) -> Result<Outcome> {
    let settings = match config::resolve(args) {
        // `--aqm-opt help=1`: the AQM's keys, on stdout.
        Err(config::ConfigError::Help(keys)) => {
            print!("{keys}");
            return Ok(Outcome::Done);
        }
        resolved => resolved?,
    };
    settings.check_runnable()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let rep = dataplane::run(&settings, stop)?;
    if settings.json {
        println!("{}", serde_json::to_string_pretty(&rep.snapshot)?);
    } else {
        print!("{}", report::render(&rep.snapshot));
    }
    let a = rep.accounting;
    if a.held_by_app != 0 || a.in_tx != 0 || !a.is_balanced() {
        anyhow::bail!("UMEM frames not returned at exit: {a:?} (a bug: please report it)");
    }
    let umem = &rep.snapshot["umem"];
    if umem["rings_match"].as_bool() == Some(false) {
        anyhow::bail!(
            "UMEM frames lost at exit: {} lent to the kernel for rx, but the fill and rx rings hold {} (a bug: please report it)",
            a.in_fill,
            umem["on_rings"]
        );
    }
    let c = &rep.snapshot["conservation"];
    if c["holds"].as_bool() != Some(true) {
        anyhow::bail!(
            "counters do not add up at exit: {} (a bug: please report it)",
            c["failures"]
        );
    }
    let faithful = rep.snapshot["fidelity"]["faithful"].as_bool() != Some(false);
    Ok(if faithful || settings.allow_unfaithful {
        Outcome::Done
    } else {
        Outcome::NotFaithful
    })
}

fn topo_up(a: &TopoUpArgs) -> Result<()> {
    let rto_min = match &a.rto_min {
        Some(s) => Some(std::time::Duration::from_nanos(
            units::parse_duration(s).map_err(|e| anyhow::anyhow!("--rto-min: {e}"))?,
        )),
        None => None,
    };
    let fabric = match &a.topology {
        Some(path) => Some(read_topology(path)?),
        None => None,
    };
    let defaults = topo::TopoConfig::default();
    let cfg = topo::TopoConfig {
        prefix: a.prefix.clone(),
        // A fabric's hosts are h<i> with their topology's numbers: make h1
        // up to the highest, in the topology's subnet.
        hosts: fabric.as_ref().map_or(a.hosts, |f| {
            f.hosts.iter().map(|h| h.index).max().unwrap_or(1)
        }),
        subnet: fabric.as_ref().map_or(defaults.subnet, |f| f.subnet),
        cc: a.cc.parse().map_err(|e| anyhow::anyhow!("--cc: {e}"))?,
        ecn: !a.no_ecn,
        rto_min,
        quickack: a.quickack,
        initcwnd: a.initcwnd,
        gso_segs: a.gso_segs,
        rps: a.rps.parse().map_err(|e| anyhow::anyhow!("--{e}"))?,
        dilation: a
            .dilation
            .parse()
            .map_err(|e| anyhow::anyhow!("--dilation: {e}"))?,
        ..defaults
    };
    let t = topo::up(&cfg)?;
    // With the hosts' receive work steered off the last CPU, the switch
    // belongs there.
    let pin = if cfg.rps == topo::RxCpus::Auto {
        " --cpu last"
    } else {
        ""
    };
    if let Some(mask) = cfg.rps.mask(topo::RxCpus::allowed()) {
        eprintln!(
            "softswitch: the hosts' receive processing runs on CPUs {} (RPS)",
            topo::RxCpus::Mask(mask)
        );
    }
    eprintln!(
        "softswitch: {} host namespaces up, congestion control {}{}",
        t.hosts.len(),
        t.cc,
        if cfg.dilation.is_none() {
            String::new()
        } else {
            format!(
                ", host timers dilated × {} (run the switch and softswitch-tg with the same D)",
                cfg.dilation
            )
        }
    );
    for h in &t.hosts {
        eprintln!(
            "  {}  ip {}  switch port {}  (ip netns exec {} ...)",
            h.ns, h.ip, h.switch_if, h.ns
        );
    }
    // The interfaces of the switch (or of the fabric's hosts, in the order
    // of their numbers, as `--topology` maps them).
    let ports: Vec<String> = match &fabric {
        Some(f) => f
            .hosts
            .iter()
            .filter_map(|fh| t.hosts.iter().find(|h| h.index == fh.index))
            .map(|h| h.switch_if.clone())
            .collect(),
        None => t.switch_ifs(),
    };
    match (&a.topology, &fabric) {
        (Some(path), Some(f)) => {
            if ports.len() < t.hosts.len() {
                eprintln!(
                    "softswitch: {} of these hosts are not in {} (it skips their numbers); \
                     they stay unconnected",
                    t.hosts.len() - ports.len(),
                    path.display()
                );
            }
            eprintln!(
                "run the fabric ({} switches) on them with:\n  sudo softswitch --topology {} --ports {}{pin}",
                f.switches.len(),
                path.display(),
                ports.join(",")
            );
        }
        _ => eprintln!(
            "run the switch on them with:\n  sudo softswitch --ports {}{pin}",
            ports.join(",")
        ),
    }
    // The port list alone on stdout, for scripts.
    println!("{}", ports.join(","));
    Ok(())
}

/// Reads and checks a fabric's topology file (`topo up --topology`).
fn read_topology(path: &std::path::Path) -> Result<softswitch::fabric::FabricDesc> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--topology {}: cannot read it", path.display()))?;
    softswitch::fabric::FabricDesc::parse(&text)
        .map_err(|e| anyhow::anyhow!("--topology {}: {e}", path.display()))
}

fn topo_down(prefix: &str) -> Result<()> {
    let r = topo::down(prefix)?;
    if r.is_empty() {
        eprintln!("softswitch: nothing to remove for prefix {prefix:?}");
    } else {
        eprintln!("softswitch: {r}");
    }
    Ok(())
}

fn show_stats(socket: &std::path::Path, json: bool) -> Result<()> {
    let text = stats::fetch(socket).map_err(|e| anyhow::anyhow!(e))?;
    if json {
        println!("{text}");
    } else {
        let v: serde_json::Value =
            serde_json::from_str(&text).context("the switch sent malformed JSON")?;
        print!("{}", report::render(&v));
    }
    Ok(())
}

/// The switch's publishing period (`stats`): a shorter interval would
/// often see the same snapshot twice.
const SHORTEST_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// `softswitch stats --interval T`: the rates over every T until Ctrl-C or
/// `count` intervals; an error (exit 1) when the switch stops answering.
fn watch_stats(
    socket: &std::path::Path,
    json: bool,
    every: &str,
    count: Option<u64>,
) -> Result<()> {
    use std::time::{Duration, Instant};
    let period = Duration::from_nanos(
        units::parse_duration(every).map_err(|e| anyhow::anyhow!("--interval: {e}"))?,
    );
    if period < SHORTEST_INTERVAL {
        anyhow::bail!(
            "--interval {every}: the switch publishes its counters every 100ms; give 100ms or more"
        );
    }
    if count == Some(0) {
        anyhow::bail!("--count 0: give at least 1 interval");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let read = || -> Result<live::Counters> {
        let text = stats::fetch(socket).map_err(|e| anyhow::anyhow!(e))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).context("the switch sent malformed JSON")?;
        live::Counters::from_snapshot(&v).map_err(|e| anyhow::anyhow!(e))
    };
    let mut before = read()?;
    if !json {
        print!(
            "{}",
            live::header(every, &socket.display().to_string(), before.dilation, count)
        );
    }
    let mut shown = 0u64;
    let mut next = Instant::now() + period;
    while count.is_none_or(|n| shown < n) {
        // Sleep in short steps so that Ctrl-C ends at once.
        while Instant::now() < next {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
        }
        next += period;
        let after = read().map_err(|e| {
            anyhow::anyhow!(
                "the switch stopped answering after {shown} interval(s) — did it exit? ({e:#})"
            )
        })?;
        match live::between(&before, &after) {
            live::Step::Rates(i) if json => println!("{}", serde_json::to_string(&i)?),
            live::Step::Rates(i) => print!("{}", live::render(&i)),
            live::Step::Unchanged => continue,
            live::Step::Reset(why) => {
                eprintln!("softswitch stats: {why}; rates start again from now");
            }
        }
        shown += 1;
        before = after;
    }
    Ok(())
}

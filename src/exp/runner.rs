//! Runs a scenario on this machine (root): one topology for the whole run,
//! one switch process per combination, the traffic generator in the hosts.
//!
//! Cleanup is owned by guards: [`TopoGuard`] removes the namespaces (and,
//! through `topo::down`, kills anything still running in them), [`Proc`]
//! stops a child (SIGINT, then SIGKILL) when dropped. Children get their own
//! process group, so a Ctrl-C on the terminal reaches only the runner, which
//! sees the stop flag, unwinds and lets the guards clean up. The run ends
//! with a check for leftovers (namespaces with the run's prefix, live
//! children).
//!
//! Time dilation (the scenario's `dilation`, `run --dilation D`): D goes to
//! the hosts (`topo::up`), to every `softswitch-tg` and to the switch
//! (`--dilation D`), and every time and rate the scenario states is handed
//! over emulated (each tool converts). What the runner times itself — the
//! live-stats polling period, the ping probe's start, interval and timeout
//! and the wait for its last reply, the reachability check's timeout — is
//! stretched by D, and what it measures itself is brought back to emulated
//! time (the traffic's wall time, the polling timestamps, ping's RTTs). The
//! switch's JSON and time series and the generators' reports are already
//! emulated and are stored as they come. A negative control
//! (`host_dilation`, `run --host-dilation D_H`) builds the hosts at D_H
//! instead, everything else at D.
//!
//! `topology.base_rtt` ([`base_rtt`]): before the first combination the
//! runner starts the switch once without delay, measures the hosts' own
//! round trip through it, and runs every combination with the one-way
//! delay that makes the emulated base RTT the one asked for.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::report;
use super::scenario::{Combo, Scenario, SweepValue};
use crate::exp::placement::Placement;
use crate::fabric::split::Part;
use crate::timebase::Dilation;
use crate::topo::{self, CongestionControl, RxCpus, TopoConfig, Topology};
use crate::units::parse_duration;

mod base_rtt;
mod combo;
mod parts;
mod traffic;

pub use base_rtt::BaseRtt;

/// TCP port of the generator's servers.
pub const SERVER_PORT: u16 = 5001;
/// Live-stats polling period.
pub const POLL: Duration = Duration::from_millis(100);

/// Deliberate failures, for the cleanup tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGKILL the switch this long after the traffic starts.
    KillSwitchAfter(Duration),
    /// Clients ask a port nobody listens on.
    WrongServerPort,
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Results directory (created).
    pub out: PathBuf,
    /// Shrink flows / queries / durations for a smoke run.
    pub quick: bool,
    /// The `softswitch` binary.
    pub switch_bin: PathBuf,
    /// The `softswitch-tg` binary.
    pub tg_bin: PathBuf,
    /// Directory relative paths in the scenario (CDF files) start from.
    pub scenario_dir: PathBuf,
    /// Show a progress bar.
    pub progress: bool,
    /// Set to stop the run (Ctrl-C).
    pub stop: Arc<AtomicBool>,
    /// Test hook.
    pub fault: Option<Fault>,
    /// Namespace prefix (default: a fresh `x` + 4 base-36 digits).
    pub prefix: Option<String>,
    /// How the scenario was scaled from its own rate (`--rate`, calibration),
    /// recorded in the manifest and the summary.
    pub scaling: Option<super::scale::Scaling>,
    /// Number the repeats from here (`--first-repeat`): a later run whose
    /// results merge with an earlier one's (new seeds, new directories).
    pub first_repeat: u32,
    /// Run a combination the guard called NOT FAITHFUL again, up to this
    /// many more times (`--retry-unfaithful`), keeping each unfaithful
    /// attempt as `<dir>.unfaithful<k>`.
    pub retry_unfaithful: u32,
    /// Those further attempts only after every combination's first
    /// (`--retry-later`), not at once.
    pub retry_later: bool,
    /// Run only this shard of the combinations (`--shard K/N`,
    /// [`super::plan`]).
    pub shard: Option<super::plan::Shard>,
    /// Capture in every combination (`run --pcap`), as the scenario's
    /// `[capture] pcap = true` does, with its bounds.
    pub pcap: bool,
}

impl RunOptions {
    /// Whether the switch captures in every combination: the scenario's
    /// `[capture] pcap`, or `run --pcap`.
    pub fn captures(&self, sc: &Scenario) -> bool {
        self.pcap || sc.capture.pcap
    }
}

/// Where a combination's switch writes its capture (with [`RunOptions::captures`]).
pub fn capture_dir(combo_dir: &Path) -> PathBuf {
    combo_dir.join("pcap")
}

/// What a finished run produced.
#[derive(Debug)]
pub struct RunReport {
    /// The results directory.
    pub out: PathBuf,
    /// Combinations completed.
    pub combos: usize,
    /// Plot files written.
    pub plots: Vec<PathBuf>,
    /// Things the user should know (skipped plots, incomplete flows).
    pub notes: Vec<String>,
    /// Every headline number with its spread, every comparison with its
    /// verdict (what `softswitch-exp` prints).
    pub console: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
    /// Every kept repeat was judged faithful (after any retries).
    pub faithful: bool,
}

/// Removes the topology when dropped.
pub struct TopoGuard {
    prefix: String,
}

impl Drop for TopoGuard {
    fn drop(&mut self) {
        if let Err(e) = topo::down(&self.prefix) {
            eprintln!("softswitch-exp: removing namespaces {}-*: {e}", self.prefix);
        }
    }
}

/// A child process stopped (SIGINT, then SIGKILL after 3 s) when dropped.
pub struct Proc {
    /// What it is, for messages.
    pub name: String,
    child: Child,
    /// Its stdin, when closing it is how it is stopped (a switch on
    /// another machine: SIGINT would end the `ssh` here, not the switch
    /// there, and lose its report).
    stdin: Option<std::process::ChildStdin>,
}

impl Proc {
    fn spawn(name: &str, cmd: Command, stdout: Stdio, stderr: Stdio) -> Result<Proc> {
        Self::spawn_with(name, cmd, stdout, stderr, false)
    }

    /// [`Proc::spawn`] for a process that stops when its stdin closes
    /// ([`Proc::stop`] closes it first, then signals).
    fn spawn_stopped_by_stdin(
        name: &str,
        cmd: Command,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<Proc> {
        Self::spawn_with(name, cmd, stdout, stderr, true)
    }

    fn spawn_with(
        name: &str,
        mut cmd: Command,
        stdout: Stdio,
        stderr: Stdio,
        stdin_stops: bool,
    ) -> Result<Proc> {
        cmd.stdin(if stdin_stops {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({cmd:?})"))?;
        Ok(Proc {
            name: name.into(),
            stdin: child.stdin.take(),
            child,
        })
    }

    /// The exit status if it has exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        send_signal(self.pid(), sig);
    }

    /// SIGINT (or, for one stopped by its stdin, closing that first), wait
    /// up to `grace`, then SIGKILL; the exit status.
    fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        if let Some(s) = self.exited() {
            return Some(s);
        }
        if self.stdin.take().is_some() {
            if let Some(s) = self.wait_for(grace) {
                return Some(s);
            }
        }
        self.signal(nix::sys::signal::Signal::SIGINT);
        if let Some(s) = self.wait_for(grace) {
            return Some(s);
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }

    /// Its exit status if it exits within `grace`.
    fn wait_for(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

fn send_signal(pid: i32, sig: nix::sys::signal::Signal) {
    // pid is a child we have not yet waited for, so it cannot have been reused.
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Removes a file when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// A short prefix unique to this run: `x` + 4 base-36 digits.
fn unique_prefix() -> String {
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    let mut n = seed % 36u64.pow(4);
    let mut s = String::new();
    for _ in 0..4 {
        s.push(std::char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
    }
    format!("x{s}")
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(f), v)
        .with_context(|| format!("writing {}", path.display()))
}

fn cmd_output(prog: &str, args: &[&str]) -> String {
    Command::new(prog)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn check_stop(stop: &AtomicBool) -> Result<()> {
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted (Ctrl-C): stopping and cleaning up");
    }
    Ok(())
}

/// What a run with this prefix and results directory left behind:
/// namespaces or interfaces named `<prefix>-*`, and processes whose command
/// line names the prefix (the switch: its ports) or whose working directory
/// is inside `out` (the traffic generators).
pub fn leftovers(prefix: &str, out: &Path) -> Vec<String> {
    let start = format!("{prefix}-");
    let mut left = Vec::new();
    for dir in ["/run/netns", "/sys/class/net"] {
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&start) {
                left.push(format!("{dir}/{name}"));
            }
        }
    }
    let out = out.canonicalize().unwrap_or_else(|_| out.to_owned());
    let me = std::process::id().to_string();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let cmdline = fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let in_out = fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&out));
        if in_out || cmdline.contains(&start) {
            left.push(format!("process {pid} ({})", cmdline.trim()));
        }
    }
    left
}

/// What can be checked before anything is built: the binaries and the CDF.
fn preflight(sc: &Scenario, opts: &RunOptions) -> Result<()> {
    for (what, bin) in [
        ("softswitch", &opts.switch_bin),
        ("softswitch-tg", &opts.tg_bin),
    ] {
        if bin.components().count() > 1 && !bin.exists() {
            bail!(
                "{what} not found at {} — build it (`cargo build --release`) next to softswitch-exp",
                bin.display()
            );
        }
    }
    sc.traffic.kind().preflight(&opts.scenario_dir)
}

/// Runs the scenario; everything it started is gone when this returns,
/// whether it succeeded or not.
pub fn run(sc: &Scenario, name: &str, opts: &RunOptions) -> Result<RunReport> {
    sc.validate()?;
    preflight(sc, opts)?;
    let t0 = Instant::now();
    let prefix = opts.prefix.clone().unwrap_or_else(unique_prefix);
    let result = run_inner(sc, name, opts, &prefix, t0);
    // Everything is dropped by now: check for leftovers.
    let left = leftovers(&prefix, &opts.out);
    if !left.is_empty() {
        let e = anyhow!(
            "left behind: {} — remove with `softswitch topo down --prefix {prefix}`",
            left.join(", ")
        );
        return Err(match result {
            Ok(_) => e,
            Err(r) => r.context(e.to_string()),
        });
    }
    result
}

fn run_inner(
    sc: &Scenario,
    name: &str,
    opts: &RunOptions,
    prefix: &str,
    t0: Instant,
) -> Result<RunReport> {
    let combos = shard_combos(sc, opts)?;
    fs::create_dir_all(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let started = crate::timebase::utc_now_rfc3339();
    let cfg = topo_config(sc, prefix)?;
    // The guard exists before `up` can leave anything half-built.
    let _topo_guard = TopoGuard {
        prefix: prefix.into(),
    };
    let topo = topo::up(&cfg).context("building the host namespaces")?;
    check_stop(&opts.stop)?;
    if let Some(text) = sc.fabric_text()? {
        let path = fabric_file(&opts.out);
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let path = switch_config_file(&opts.out);
    fs::write(&path, sc.switch.config_file_text(sc.fabric.is_some()))
        .with_context(|| format!("writing {}", path.display()))?;
    // A fabric split over parts: one process each (on its machine), joined
    // by wires.
    let placement = sc.fabric_placement()?;
    let _wires = match &placement {
        Some(p) => Some(parts::Wires::up(prefix, p, cfg.mtu, &topo)?),
        None => None,
    };
    let mut manifest = manifest(sc, name, opts, prefix, &topo, &combos, &started);
    write_json(&opts.out.join("manifest.json"), &manifest)?;
    let mut notes = Vec::new();
    let delay = match sc.base_rtt() {
        Some(base) => {
            let b = base_rtt::measure(sc, opts, &topo, base).context("measuring the base RTT")?;
            manifest["base_rtt"] = serde_json::to_value(&b)?;
            write_json(&opts.out.join("manifest.json"), &manifest)?;
            notes.push(b.describe());
            Some(b.one_way_delay())
        }
        None => None,
    };
    check_stop(&opts.stop)?;
    let servers = start_servers(sc, opts, &topo)?;
    notes.extend(run_combos(
        sc,
        opts,
        &topo,
        &combos,
        &mut manifest,
        delay,
        placement.as_ref(),
    )?);
    drop(servers);
    // The summary and figures come from what was stored, exactly as
    // `softswitch-exp report` rebuilds them.
    let loaded = report::load(std::slice::from_ref(&opts.out))?;
    let rep = report::write(&opts.out, &loaded, None)?;
    notes.extend(rep.notes);
    manifest["finished"] = json!(crate::timebase::utc_now_rfc3339());
    manifest["elapsed_s"] = json!(t0.elapsed().as_secs_f64());
    write_json(&opts.out.join("manifest.json"), &manifest)?;
    Ok(RunReport {
        out: opts.out.clone(),
        combos: combos.len(),
        plots: rep.files,
        notes,
        console: rep.console,
        elapsed: t0.elapsed(),
        faithful: rep.summary.faithful,
    })
}

/// The combinations this run makes: all of them, or its shard's.
fn shard_combos(sc: &Scenario, opts: &RunOptions) -> Result<Vec<Combo>> {
    let all = sc.combos_from(opts.first_repeat);
    let Some(shard) = opts.shard else {
        return Ok(all);
    };
    let jobs = super::plan::jobs(sc, opts.quick, opts.first_repeat, &opts.scenario_dir)?;
    let mine: Vec<usize> = super::plan::shard_jobs(&jobs, shard)
        .iter()
        .map(|j| j.index)
        .collect();
    if mine.is_empty() {
        bail!(
            "shard {shard} has no combination: the scenario has {} (use fewer shards)",
            all.len()
        );
    }
    Ok(all
        .into_iter()
        .filter(|c| mine.contains(&c.index))
        .collect())
}

/// The hosts' settings from `[topology]`.
fn topo_config(sc: &Scenario, prefix: &str) -> Result<TopoConfig> {
    let defaults = TopoConfig::default();
    // A fabric's hosts live in its subnet (their addresses are what it routes).
    let subnet = sc.fabric_desc()?.map_or(defaults.subnet, |f| f.subnet);
    Ok(TopoConfig {
        prefix: prefix.into(),
        hosts: sc.topology.hosts,
        subnet,
        rto_min: sc
            .topology
            .rto_min
            .as_deref()
            .map(|r| parse_duration(r).map(Duration::from_nanos))
            .transpose()
            .map_err(|e| anyhow!("topology.rto_min: {e}"))?,
        quickack: sc.topology.quickack,
        initcwnd: sc.topology.initcwnd,
        gso_segs: sc.topology.gso_segs,
        rps: sc.rps(),
        cc: sc
            .topology
            .cc
            .as_deref()
            .map(|c| c.parse::<CongestionControl>().unwrap_or_default())
            .unwrap_or_default(),
        // The run's D, unless a negative control asks for other hosts.
        dilation: sc.host_dilation(),
        sysctls: sc.topology.sysctls()?,
        ..defaults
    })
}

/// The machine a run ran on, as far as a reviewer needs it to compare runs:
/// CPUs, memory, the CPU model, the kernel's HZ-independent facts are in
/// `kernel`.
fn machine() -> Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
        .map(|m| m.trim().to_owned());
    let mem_kb = fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    });
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": model,
        "mem_gb": mem_kb.map(|k| (k as f64 / 1024.0 / 1024.0 * 10.0).round() / 10.0),
        "hostname": fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default(),
    })
}

/// What `manifest.json` says about the run before it starts.
fn manifest(
    sc: &Scenario,
    name: &str,
    opts: &RunOptions,
    prefix: &str,
    topo: &Topology,
    combos: &[Combo],
    started: &str,
) -> Value {
    json!({
        "scenario_name": name,
        "scenario": sc,
        "softswitch_version": env!("CARGO_PKG_VERSION"),
        "switch_binary": cmd_output(&opts.switch_bin.display().to_string(), &["--version"]),
        "tg_binary": cmd_output(&opts.tg_bin.display().to_string(), &["--version"]),
        "git_commit": crate::BUILD_COMMIT,
        "git_dirty": crate::build_info()["git_dirty"],
        "machine": machine(),
        // The running kernel's release, as `uname -r` prints it.
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_owned())
            .unwrap_or_default(),
        "host_cc": topo.cc,
        "prefix": prefix,
        // The command line that made the run, quoted where a word needs it.
        "command": std::env::args()
            .map(|a| if a.is_empty() || a.contains(char::is_whitespace) { format!("'{a}'") } else { a })
            .collect::<Vec<_>>()
            .join(" "),
        "started": started,
        "quick": opts.quick,
        "baseline": sc.baseline_aqm(),
        "hosts": topo.hosts.iter().map(|h| json!({"name": h.name, "ns": h.ns, "ip": h.ip.to_string(), "switch_port": h.switch_if})).collect::<Vec<_>>(),
        "combos": combos,
        "completed": 0,
        "scaling": opts.scaling,
        "dilation": sc.dilation(),
        "host_dilation": sc.host_dilation(),
        "rps": sc.rps().to_string(),
        "shard": opts.shard.map(|s| s.to_string()),
        "retry_unfaithful": opts.retry_unfaithful,
        "retry_later": opts.retry_later,
        "capture": capture_manifest(sc, opts),
    })
}

/// `manifest.capture`: where each combination's capture is and how it is
/// bounded (null: no capture).
fn capture_manifest(sc: &Scenario, opts: &RunOptions) -> Value {
    if !opts.captures(sc) {
        return Value::Null;
    }
    json!({
        "dir": capture_dir(Path::new("<combination>")).display().to_string(),
        "files": "<port>-rx.pcapng and <port>-tx.pcapng per switch port",
        "pcap_snaplen": sc.capture.snaplen(),
        "pcap_max_mb": sc.capture.max_mb(),
        "asked_by": if sc.capture.pcap { "scenario [capture]" } else { "run --pcap" },
    })
}

/// The generator's servers, once for the whole run.
fn start_servers(sc: &Scenario, opts: &RunOptions, topo: &Topology) -> Result<Vec<Proc>> {
    let mut servers: Vec<Proc> = Vec::new();
    for h in server_hosts(sc) {
        let host = &topo.hosts[h - 1];
        let log = File::create(opts.out.join(format!("server-{}.log", host.name)))?;
        let mut c = host.exec(&[]);
        c.arg(&opts.tg_bin)
            .args(["server", "--port", &SERVER_PORT.to_string()]);
        if sc.topology.tcp_pacing {
            c.arg("--tcp-pacing");
        }
        c.args(dilation_args(sc.dilation()));
        servers.push(Proc::spawn(
            &format!("server on {}", host.name),
            c,
            Stdio::from(log.try_clone()?),
            Stdio::from(log),
        )?);
    }
    thread::sleep(Duration::from_millis(300));
    for s in &mut servers {
        if let Some(st) = s.exited() {
            bail!(
                "{} exited at start ({st}); see server-*.log in {}",
                s.name,
                opts.out.display()
            );
        }
    }
    Ok(servers)
}

fn progress_bar(show: bool, len: usize) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(len as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} attempts, eta {eta} — {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(Duration::from_millis(200));
    b
}

/// What `run_combos` keeps of an attempt once it is written to disk.
struct Attempt {
    faithful: bool,
    reasons: Vec<String>,
    /// "<dir>: k of n flows recorded", when short.
    short: Option<String>,
}

/// What the attempts' callbacks share: the run's manifest, its notes and
/// its progress bar.
struct Book<'a> {
    manifest: &'a mut Value,
    notes: Vec<String>,
    bar: indicatif::ProgressBar,
}

/// Runs every combination in order; notes on unfaithful or incomplete ones.
fn run_combos(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combos: &[Combo],
    manifest: &mut Value,
    delay: Option<Duration>,
    placement: Option<&Placement>,
) -> Result<Vec<String>> {
    let mut book = Book {
        manifest,
        notes: Vec::new(),
        bar: progress_bar(opts.progress, combos.len()),
    };
    let tag = |combo: &Combo| match combo.sweep {
        SweepValue::Load(l) => format!(" load {l:.2}"),
        SweepValue::Fanin(n) => format!(" fan-in {n}"),
        SweepValue::Flows(n) => format!(" {n} flows"),
        SweepValue::None => String::new(),
    };
    let last = attempt_all(
        &mut book,
        combos.len(),
        opts.retry_unfaithful,
        opts.retry_later,
        |book, i| {
            check_stop(&opts.stop)?;
            let combo = &combos[i];
            let tag = tag(combo);
            book.bar
                .set_message(format!("{}{tag} (repeat {})", combo.aqm, combo.repeat));
            let r =
                combo::run_combo(sc, opts, topo, combo, delay, placement).with_context(|| {
                    format!(
                        "combination {} ({}{tag}, repeat {})",
                        combo.index, combo.aqm, combo.repeat
                    )
                })?;
            let short = (r.flows.len() < r.expected && r.statics.is_empty()).then(|| {
                format!(
                    "{}: {} of {} flows recorded",
                    combo.dir,
                    r.flows.len(),
                    r.expected
                )
            });
            book.bar.inc(1);
            Ok(Attempt {
                faithful: r.fidelity.faithful,
                reasons: r.fidelity.reasons,
                short,
            })
        },
        |a| a.faithful,
        |book, i, k, a| {
            // Out of the way of the next attempt and of the summary
            // (which reads the manifest's directories), kept.
            let dir = &combos[i].dir;
            let aside = format!("{dir}.unfaithful{k}");
            fs::rename(opts.out.join(dir), opts.out.join(&aside))
                .with_context(|| format!("keeping {dir} as {aside}"))?;
            let when = if opts.retry_later {
                "run again after the others"
            } else {
                "run again"
            };
            let line = format!(
                "NOT FAITHFUL {dir} (attempt {k} of {}; kept as {aside}, {when}): {}",
                opts.retry_unfaithful + 1,
                a.reasons.join("; ")
            );
            book.bar.println(format!("softswitch-exp: {line}"));
            // One more attempt to come: the bar counts attempts, so it is
            // not full while retries after the others still run.
            book.bar.inc_length(1);
            book.notes.push(line);
            retried_entry(book.manifest, dir, &aside, &a.reasons);
            write_json(&opts.out.join("manifest.json"), book.manifest)
        },
        |book, done| {
            book.manifest["completed"] = json!(done);
            write_json(&opts.out.join("manifest.json"), book.manifest)
        },
    )?;
    for (combo, a) in combos.iter().zip(last) {
        if !a.faithful {
            let line = format!(
                "NOT FAITHFUL {} (left out of the statistics): {}",
                combo.dir,
                a.reasons.join("; ")
            );
            book.bar.println(format!("softswitch-exp: {line}"));
            book.notes.push(line);
        }
        book.notes.extend(a.short);
    }
    book.bar.finish_and_clear();
    Ok(book.notes)
}

/// Runs `attempt(i)` for every item `i < n`, in order, and again while
/// `faithful` says no, up to `retries` more times: at once, before the next
/// item, or with `later` only after every item's first attempt, pass by
/// pass in order (on a machine whose speed comes and goes over minutes, an
/// attempt right after an unfaithful one meets the same machine). Before a
/// further attempt `set_aside(i, k, &last)` (k = 1, 2, …) moves the
/// unfaithful one out of its way; `first_done(n_done)` counts the items
/// whose first attempt (and, at once, its retries) is over. The last
/// attempt of each item, faithful or not.
#[allow(clippy::too_many_arguments)]
fn attempt_all<C, T>(
    ctx: &mut C,
    n: usize,
    retries: u32,
    later: bool,
    mut attempt: impl FnMut(&mut C, usize) -> Result<T>,
    faithful: impl Fn(&T) -> bool,
    mut set_aside: impl FnMut(&mut C, usize, u32, &T) -> Result<()>,
    mut first_done: impl FnMut(&mut C, usize) -> Result<()>,
) -> Result<Vec<T>> {
    let (at_once, in_passes) = if later { (0, retries) } else { (retries, 0) };
    let mut last = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = attempt(ctx, i)?;
        for k in 1..=at_once {
            if faithful(&r) {
                break;
            }
            set_aside(ctx, i, k, &r)?;
            r = attempt(ctx, i)?;
        }
        last.push(r);
        first_done(ctx, i + 1)?;
    }
    for k in 1..=in_passes {
        for (i, r) in last.iter_mut().enumerate() {
            if !faithful(r) {
                set_aside(ctx, i, k, r)?;
                *r = attempt(ctx, i)?;
            }
        }
    }
    Ok(last)
}

/// `manifest.retried`: one entry per unfaithful attempt set aside.
fn retried_entry(manifest: &mut Value, dir: &str, kept_as: &str, reasons: &[String]) {
    if !manifest["retried"].is_array() {
        manifest["retried"] = json!([]);
    }
    if let Some(a) = manifest["retried"].as_array_mut() {
        a.push(json!({"dir": dir, "kept_as": kept_as, "reasons": reasons}));
    }
}

/// Hosts that run a server (1-based, sorted).
fn server_hosts(sc: &Scenario) -> Vec<usize> {
    let mut v: Vec<usize> = sc.traffic.kind().servers();
    v.sort_unstable();
    v.dedup();
    v
}

fn opt_to_string(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `--dilation D` for the switch and the generators; nothing at D = 1, so
/// an undilated run's command lines are what they always were.
pub fn dilation_args(d: Dilation) -> Vec<String> {
    if d.is_none() {
        Vec::new()
    } else {
        vec!["--dilation".into(), d.to_string()]
    }
}

/// A timeout of `emulated` for a tool that takes whole seconds (`ping -W`),
/// in real time: D times longer, rounded up.
fn whole_real_seconds(d: Dilation, emulated: Duration) -> u64 {
    d.to_real(emulated).as_secs_f64().ceil().max(1.0) as u64
}

/// Where a run writes its scenario's `[fabric]` as a topology file (the
/// switch's `--topology`).
pub fn fabric_file(out: &Path) -> PathBuf {
    out.join("fabric.toml")
}

/// Where the runner writes the switch's config file of a run: the
/// scenario's `[switch]` settings ([`crate::exp::scenario::SwitchSpec::config_file_text`]),
/// read by every switch of the run (`--config`).
pub fn switch_config_file(out: &Path) -> PathBuf {
    out.join("switch.toml")
}

/// The switch's command line for one AQM; `out` is the run's directory
/// (where [`fabric_file`] is); `delay`: the one-way delay of every port
/// that `topology.base_rtt` chose (`--delay`).
pub fn switch_args(
    sc: &Scenario,
    topo: &Topology,
    aqm: &str,
    socket: &Path,
    out: &Path,
    delay: Option<Duration>,
) -> Vec<String> {
    part_switch_args(sc, topo, aqm, socket, out, delay, None)
}

/// [`switch_args`] of the process that runs `part` of a split fabric
/// (`None`: the whole fabric, or the one switch): its hosts' ports, its
/// switches and its wires ([`parts`]).
pub(crate) fn part_switch_args(
    sc: &Scenario,
    topo: &Topology,
    aqm: &str,
    socket: &Path,
    out: &Path,
    delay: Option<Duration>,
    part: Option<&Part>,
) -> Vec<String> {
    let sw = &sc.switch;
    // Validated before the run: a fabric that does not read is no fabric.
    let fabric = sc.fabric_desc().ok().flatten();
    let ports: Vec<String> = match (&fabric, part) {
        (_, Some(p)) => parts::part_ports(p, topo),
        // One interface per fabric host, in the hosts' order.
        (Some(f), None) => f
            .hosts
            .iter()
            .filter_map(|h| topo.hosts.get(h.index - 1))
            .map(|h| h.switch_if.clone())
            .collect(),
        (None, None) => topo.switch_ifs(),
    };
    let mut a: Vec<String> = vec!["--ports".into(), ports.join(",")];
    if let Some(p) = part {
        a.extend(parts::part_args(p, &topo.prefix));
    }
    // The fabric gives every port its rate and delay.
    if fabric.is_some() {
        a.extend(["--topology".into(), fabric_file(out).display().to_string()]);
    }
    // The scenario's [switch] settings, as the switch's own config file.
    a.extend([
        "--config".into(),
        switch_config_file(out).display().to_string(),
        "--aqm".into(),
        super::scenario::aqm_kind(aqm).into(),
        "--json".into(),
        "--stats-socket".into(),
        socket.display().to_string(),
        // A switch that outlives a crashed runner stops by itself.
        "--duration".into(),
        "3600s".into(),
    ]);
    a.extend(dilation_args(sc.dilation()));
    // The hosts' receive work is steered off the last CPU: the switch takes it.
    if sc.rps() == RxCpus::Auto && !sw.extra_args.iter().any(|x| x == "--cpu") {
        a.extend(["--cpu".into(), "last".into()]);
    }
    if let Some(opts) = sw.aqm_opts.get(aqm) {
        for (k, v) in opts {
            a.push("--aqm-opt".into());
            a.push(format!("{k}={}", opt_to_string(v)));
        }
    }
    for (host, d) in &sc.topology.delay {
        if let Ok(i) = sc.host_key(host) {
            a.push("--port-delay".into());
            a.push(format!("{}={d}", topo.hosts[i - 1].switch_if));
        }
    }
    if let Some(d) = delay {
        a.extend(base_rtt::delay_args(d));
    }
    let f = &sc.fidelity;
    for (flag, v) in [
        ("--max-lost", &f.max_lost),
        ("--max-stall", &f.max_stall),
        ("--max-stalled", &f.max_stalled),
    ] {
        if let Some(v) = v {
            a.push(flag.into());
            a.push(v.clone());
        }
    }
    a.extend(sw.extra_args.iter().cloned());
    if let Some(v) = sw.variant_args.get(aqm) {
        a.extend(v.iter().cloned());
    }
    a
}

/// The (receiving host, sending host) pairs of the scenario's traffic,
/// 1-based, each once.
fn traffic_pairs(sc: &Scenario) -> Vec<(usize, usize)> {
    sc.traffic.kind().pairs()
}

/// Every receiving host reaches every sender through the switch (one ping,
/// a few tries): a broken path fails here with a clear message instead of
/// as a connect timeout deep in the traffic generator.
fn check_paths(sc: &Scenario, topo: &Topology) -> Result<()> {
    let pairs = traffic_pairs(sc);
    // One second of emulated time to answer, in real time.
    let wait = whole_real_seconds(sc.dilation(), Duration::from_secs(1)).to_string();
    for (c, s) in pairs {
        let (from, to) = (&topo.hosts[c - 1], &topo.hosts[s - 1]);
        let ok = (0..3).any(|_| {
            from.exec(&["ping", "-c", "1", "-W", &wait, &to.ip.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|st| st.success())
        });
        if !ok {
            bail!(
                "{} cannot ping {} ({}) through the switch — see switch.log; with many ports try a larger switch.frames",
                from.name,
                to.name,
                to.ip
            );
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::topo::{Host, Ipv4Net};
    use std::net::Ipv4Addr;

    /// Options of a run that starts nothing (binaries that do not exist).
    pub(crate) fn opts() -> RunOptions {
        RunOptions {
            out: std::env::temp_dir().join("softswitch-exp-unit"),
            quick: false,
            switch_bin: PathBuf::from("/nonexistent/softswitch"),
            tg_bin: PathBuf::from("/nonexistent/softswitch-tg"),
            scenario_dir: PathBuf::from("."),
            progress: false,
            stop: Arc::new(AtomicBool::new(false)),
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

    /// The switch's command line for `aqm`, its socket `/tmp/s.sock`, the
    /// run's directory `/tmp/out`.
    fn args(sc: &Scenario, t: &Topology, aqm: &str) -> Vec<String> {
        switch_args(
            sc,
            t,
            aqm,
            Path::new("/tmp/s.sock"),
            Path::new("/tmp/out"),
            None,
        )
    }

    pub(crate) fn topo(n: usize) -> Topology {
        Topology {
            prefix: "xt".into(),
            subnet: Ipv4Net::new(Ipv4Addr::new(10, 99, 0, 0), 24).unwrap(),
            cc: "bpf_dctcp".into(),
            hosts: (1..=n)
                .map(|i| Host {
                    index: i,
                    name: format!("h{i}"),
                    ns: format!("xt-h{i}"),
                    host_if: "eth0".into(),
                    switch_if: format!("xt-h{i}-sw"),
                    ip: Ipv4Addr::new(10, 99, 0, i as u8),
                    mac: [2, 0, 0, 0, 0, i as u8],
                })
                .collect(),
        }
    }

    #[test]
    fn switch_command_line() {
        let sc = Scenario::from_toml(
            r#"
            [topology]
            hosts = 9
            delay = { h2 = "100us" }
            [switch]
            aqm = ["dctcp", "tcn"]
            queues = 4
            sched = "dwrr"
            extra_args = ["--seed", "7"]
            [switch.aqm_opts.tcn]
            threshold = "200us"
            mode = "threshold"
            [traffic]
            kind = "incast"
            receiver = 9
            servers = [1, 2]
            fanin = [2]
            size = "64kb"
        "#,
            Path::new("t.toml"),
        )
        .unwrap();
        sc.validate().unwrap();
        let t = topo(9);
        let a = args(&sc, &t, "tcn").join(" ");
        assert!(a.starts_with("--ports xt-h1-sw,xt-h2-sw,"), "{a}");
        for want in [
            "--aqm tcn",
            "--aqm-opt mode=threshold --aqm-opt threshold=200us",
            "--port-delay xt-h2-sw=100us",
            "--config /tmp/out/switch.toml",
            "--stats-socket /tmp/s.sock",
            "--json",
            "--seed 7",
        ] {
            assert!(a.contains(want), "want `{want}` in: {a}");
        }
        // The [switch] settings go in the switch's own config file.
        let file = sc.switch.config_file_text(false);
        let o = crate::config::Options::parse(&file).unwrap();
        assert_eq!(o.queues, Some(4), "{file}");
        assert_eq!(o.sched.as_deref(), Some("dwrr"), "{file}");
        assert_eq!(
            o.rate.as_deref(),
            Some("1gbit"),
            "the scenario's default: {file}"
        );
        assert_eq!(o.frames, None, "the switch sizes its UMEM itself: {file}");
        let d = args(&sc, &t, "dctcp").join(" ");
        assert!(!d.contains("--aqm-opt"), "tcn's options stay with tcn: {d}");
        // By default Linux's receive processing, the switch unpinned.
        assert!(!a.contains("--cpu"), "{a}");
        assert_eq!(topo_config(&sc, "xt").unwrap().rps, RxCpus::Kernel);
        assert_eq!(
            manifest(&sc, "t", &opts(), "xt", &t, &sc.combos(), "now")["rps"],
            "off"
        );
        // `rps = "auto"`: the hosts' receive work leaves the last CPU to the switch.
        let mut auto = sc.clone();
        auto.topology.rps = Some("auto".into());
        let a = args(&auto, &t, "tcn");
        assert!(a.join(" ").contains("--cpu last"), "{a:?}");
        assert_eq!(topo_config(&auto, "xt").unwrap().rps, RxCpus::Auto);
        // A pin of the user's own is kept.
        let mut own = auto.clone();
        own.switch.extra_args = vec!["--cpu".into(), "0".into()];
        let a = args(&own, &t, "tcn");
        assert_eq!(a.iter().filter(|x| *x == "--cpu").count(), 1, "{a:?}");
        let mut bad = sc.clone();
        bad.topology.rps = Some("x".into());
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("topology.rps `x`"), "{e}");
    }

    #[test]
    fn a_fabric_scenario_runs_the_switch_on_its_topology_with_hosts_in_its_subnet() {
        let text = format!(
            "{STATIC}\n[fabric]\nsubnet = \"10.98.0.0/24\"\n[fabric.leaf_spine]\n\
             leaves = 2\nspines = 1\nhosts_per_leaf = 2\nhost_rate = \"100mbit\"\n"
        )
        .replace("hosts = 3", "hosts = 4");
        let sc = Scenario::from_toml(&text, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        let a = args(&sc, &topo(4), "dctcp").join(" ");
        assert!(
            a.starts_with(
                "--ports xt-h1-sw,xt-h2-sw,xt-h3-sw,xt-h4-sw --topology /tmp/out/fabric.toml "
            ),
            "{a}"
        );
        let file = sc.switch.config_file_text(true);
        assert_eq!(
            crate::config::Options::parse(&file).unwrap().rate,
            None,
            "the fabric gives every port its rate: {file}"
        );
        let cfg = topo_config(&sc, "xt").unwrap();
        assert_eq!(cfg.subnet.to_string(), "10.98.0.0/24");
        assert_eq!(cfg.hosts, 4);
        // What the runner writes is a topology that reads back the same.
        let text = sc.fabric_text().unwrap().unwrap();
        let desc = crate::fabric::FabricDesc::parse(&text).unwrap();
        assert_eq!(Some(desc), sc.fabric_desc().unwrap());
        assert_eq!(sc.fabric_desc().unwrap().unwrap().switches.len(), 3);
    }

    const STATIC: &str = r#"
        [topology]
        hosts = 3
        [switch]
        aqm = ["dctcp"]
        rate = "1gbit"
        [traffic]
        kind = "static"
        duration = "2s"
        flows = [{ server = 1, client = 3 }]
    "#;

    #[test]
    fn d_reaches_the_switch_the_hosts_and_the_manifest_only_when_dilated() {
        let t = topo(3);
        let sc1 = Scenario::from_toml(STATIC, Path::new("t.toml")).unwrap();
        let a1 = args(&sc1, &t, "dctcp");
        assert!(!a1.contains(&"--dilation".to_string()), "{a1:?}");
        assert!(topo_config(&sc1, "xt").unwrap().dilation.is_none());
        let m1 = manifest(&sc1, "t", &opts(), "xt", &t, &sc1.combos(), "now");
        assert_eq!(m1["dilation"], 1.0);

        let sc4 =
            Scenario::from_toml(&format!("dilation = 4\n{STATIC}"), Path::new("t.toml")).unwrap();
        sc4.validate().unwrap();
        let a4 = args(&sc4, &t, "dctcp");
        // Everything else is the same, the rate still the emulated one.
        let at = a4
            .iter()
            .position(|x| x == "--dilation")
            .expect("--dilation");
        assert_eq!(a4[at + 1], "4");
        let rest: Vec<String> = [&a4[..at], &a4[at + 2..]].concat();
        assert_eq!(rest, a1);
        assert!(
            sc4.switch
                .config_file_text(false)
                .contains("rate = \"1gbit\""),
            "the rate in the switch's config file is the emulated one"
        );
        assert_eq!(topo_config(&sc4, "xt").unwrap().dilation.factor(), 4.0);
        let m4 = manifest(&sc4, "t", &opts(), "xt", &t, &sc4.combos(), "now");
        assert_eq!(m4["dilation"], 4.0);
        assert_eq!(m4["scenario"]["dilation"], 4.0);
    }

    #[test]
    fn the_manifest_says_where_the_captures_are_and_how_they_are_bounded() {
        let t = topo(3);
        let sc = Scenario::from_toml(STATIC, Path::new("t.toml")).unwrap();
        let m = |sc: &Scenario, o: &RunOptions| manifest(sc, "t", o, "xt", &t, &sc.combos(), "now");
        assert!(m(&sc, &opts()).get("capture").is_some_and(Value::is_null));
        let mut o = opts();
        o.pcap = true;
        let c = &m(&sc, &o)["capture"];
        assert_eq!(c["dir"], "<combination>/pcap");
        assert_eq!(
            (c["pcap_max_mb"].as_f64(), c["pcap_snaplen"].as_u64()),
            (Some(100.0), Some(256))
        );
        assert_eq!(c["asked_by"], "run --pcap");
        let sc = Scenario::from_toml(
            &format!("{STATIC}\n[capture]\npcap = true\npcap_max_mb = 1\n"),
            Path::new("t.toml"),
        )
        .unwrap();
        let c = &m(&sc, &opts())["capture"];
        assert_eq!(
            (c["pcap_max_mb"].as_f64(), c["asked_by"].as_str()),
            (Some(1.0), Some("scenario [capture]"))
        );
    }

    #[test]
    fn a_negative_control_dilates_the_hosts_apart_from_the_switch() {
        let t = topo(3);
        let text = format!("dilation = 40\nhost_dilation = 1\n{STATIC}");
        let sc = Scenario::from_toml(&text, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        assert!(sc.hosts_apart());
        // The hosts at D_H = 1, the switch and the generators at D = 40.
        assert!(topo_config(&sc, "xt").unwrap().dilation.is_none());
        let a = args(&sc, &t, "dctcp").join(" ");
        assert!(a.contains("--dilation 40"), "{a}");
        let m = manifest(&sc, "t", &opts(), "xt", &t, &sc.combos(), "now");
        assert_eq!(
            (m["dilation"].as_f64(), m["host_dilation"].as_f64()),
            (Some(40.0), Some(1.0))
        );
        assert_eq!(m["scenario"]["host_dilation"], 1.0);
        // Absent: the hosts follow D, and the manifest says so.
        let sc40 =
            Scenario::from_toml(&format!("dilation = 40\n{STATIC}"), Path::new("t.toml")).unwrap();
        assert!(!sc40.hosts_apart());
        assert_eq!(topo_config(&sc40, "xt").unwrap().dilation.factor(), 40.0);
        let m = manifest(&sc40, "t", &opts(), "xt", &t, &sc40.combos(), "now");
        assert_eq!(m["host_dilation"], 40.0);
        assert!(m["scenario"].get("host_dilation").is_none());
        let bad = Scenario::from_toml(
            &format!("host_dilation = 0.5\n{STATIC}"),
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("host_dilation = 0.5"));
    }

    #[test]
    fn base_rtt_gives_every_port_the_delay_chosen_and_nothing_else() {
        let t = topo(3);
        let text = STATIC.replace("hosts = 3", "hosts = 3\nbase_rtt = \"250us\"");
        let sc = Scenario::from_toml(&text, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        assert_eq!(sc.base_rtt(), Some(Duration::from_micros(250)));
        // Before the delay is measured (the probe switch) and for scenarios
        // without base_rtt: no delay at all.
        let none = args(&sc, &t, "dctcp");
        assert!(!none.iter().any(|a| a.contains("delay")), "{none:?}");
        let plain = Scenario::from_toml(STATIC, Path::new("t.toml")).unwrap();
        assert_eq!(args(&plain, &t, "dctcp"), none);
        // With the delay chosen: `--delay` in ns, the rest unchanged.
        let with = switch_args(
            &sc,
            &t,
            "dctcp",
            Path::new("/tmp/s.sock"),
            Path::new("/tmp/out"),
            Some(Duration::from_nanos(108_750)),
        );
        let at = with.iter().position(|a| a == "--delay").expect("--delay");
        assert_eq!(with[at + 1], "108750ns");
        assert_eq!([&with[..at], &with[at + 2..]].concat(), none);
        // The switch reads what it is given.
        assert_eq!(
            crate::units::parse_duration(&with[at + 1]).unwrap(),
            108_750
        );
        // Refused with what would set the delay twice.
        let t2 = text.replace("base_rtt", "delay = { h1 = \"10us\" }\nbase_rtt");
        let e = Scenario::from_toml(&t2, Path::new("t.toml"))
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("remove topology.delay"), "{e}");
        let mut x = sc.clone();
        x.switch.extra_args = vec!["--delay".into(), "5us".into()];
        let e = x.validate().unwrap_err().to_string();
        assert!(e.contains("switch.extra_args"), "{e}");
        let mut x = sc.clone();
        x.topology.base_rtt = Some("soon".into());
        assert!(x
            .validate()
            .unwrap_err()
            .to_string()
            .contains("topology.base_rtt"));
    }

    #[test]
    fn traffic_pairs_are_each_receiver_and_sender_once() {
        let sc = Scenario::from_toml(
            &STATIC.replace(
                "flows = [{ server = 1, client = 3 }]",
                "flows = [{ server = 1, client = 3 }, { server = 1, client = 3, dscp = 1 }, { server = 2, client = 3 }]",
            ),
            Path::new("t.toml"),
        )
        .unwrap();
        assert_eq!(traffic_pairs(&sc), [(3, 1), (3, 2)]);
    }

    #[test]
    fn timeouts_in_whole_seconds_stretch_and_round_up() {
        let one = Duration::from_secs(1);
        assert_eq!(whole_real_seconds(Dilation::NONE, one), 1);
        assert_eq!(whole_real_seconds(Dilation::new(4.0).unwrap(), one), 4);
        assert_eq!(whole_real_seconds(Dilation::new(2.5).unwrap(), one), 3);
        assert_eq!(whole_real_seconds(Dilation::NONE, Duration::ZERO), 1);
        assert!(dilation_args(Dilation::NONE).is_empty());
        assert_eq!(
            dilation_args(Dilation::new(2.5).unwrap()),
            ["--dilation", "2.5"]
        );
    }

    /// `attempt_all` over `n` items whose attempts are faithful when
    /// `ok(item, clock)` says so, the clock counting attempts from 0: the
    /// last attempt of each item (its clock), the attempts set aside
    /// (item, k, clock) and the `first_done` counts, in order.
    fn schedule(
        n: usize,
        retries: u32,
        later: bool,
        ok: impl Fn(usize, u32) -> bool,
    ) -> (Vec<u32>, Vec<(usize, u32, u32)>, Vec<usize>) {
        #[derive(Default)]
        struct Log {
            clock: u32,
            aside: Vec<(usize, u32, u32)>,
            done: Vec<usize>,
        }
        let mut log = Log::default();
        let last = attempt_all(
            &mut log,
            n,
            retries,
            later,
            |log, i| {
                let t = log.clock;
                log.clock += 1;
                Ok((i, t))
            },
            |&(i, t)| ok(i, t),
            |log, i, k, &(_, t)| {
                log.aside.push((i, k, t));
                Ok(())
            },
            |log, d| {
                log.done.push(d);
                Ok(())
            },
        )
        .unwrap();
        (last.iter().map(|&(_, t)| t).collect(), log.aside, log.done)
    }

    #[test]
    fn an_unfaithful_attempt_is_set_aside_and_run_again_up_to_the_limit() {
        // One item, faithful from attempt `from` on.
        let one = |retries, from| schedule(1, retries, false, move |_, t| t >= from);
        // No retries asked: one attempt, whatever it gave.
        assert_eq!(one(0, 5), (vec![0], vec![], vec![1]));
        // Faithful at once: nothing set aside.
        assert_eq!(one(3, 0), (vec![0], vec![], vec![1]));
        // Faithful at the third attempt: the first two set aside, in order.
        assert_eq!(one(3, 2), (vec![2], vec![(0, 1, 0), (0, 2, 1)], vec![1]));
        // Never faithful: 1 + 2 attempts, the last returned, not set aside.
        assert_eq!(one(2, 99), (vec![2], vec![(0, 1, 0), (0, 2, 1)], vec![1]));
        // An error stops it, from an attempt or from setting one aside.
        let mut calls = 0;
        let e = attempt_all(
            &mut calls,
            3,
            3,
            false,
            |calls, _| {
                *calls += 1;
                anyhow::bail!("the switch died")
            },
            |_: &u32| false,
            |_, _, _, _| Ok(()),
            |_, _| Ok(()),
        );
        assert!(e.is_err() && calls == 1);
        let e = attempt_all(
            &mut (),
            1,
            3,
            true,
            |_, _| Ok(1u32),
            |_| false,
            |_, _, _, _| anyhow::bail!("rename"),
            |_, _| Ok(()),
        );
        assert!(e.unwrap_err().to_string().contains("rename"));
    }

    #[test]
    fn later_retries_come_after_every_first_attempt_and_meet_a_later_machine() {
        // A machine that holds nothing during attempts 1-3 (clock), every
        // item alike: the time, not the item, decides.
        let machine = |_: usize, t: u32| !(1..=3).contains(&t);
        // At once: item 1 fails at 1, again at 2; item 2 fails at 3 and
        // holds at 4; items 0 and 3 hold at their first attempt.
        let (last, aside, done) = schedule(4, 1, false, machine);
        assert_eq!(last, vec![0, 2, 4, 5]);
        assert_eq!(aside, vec![(1, 1, 1), (2, 1, 3)]);
        assert_eq!(done, vec![1, 2, 3, 4]);
        // Later: items 1, 2 and 3 fail at 1-3; their retries, after item
        // 3's first attempt, at 4-6 all hold.
        let (last, aside, done) = schedule(4, 1, true, machine);
        assert_eq!(last, vec![0, 4, 5, 6]);
        assert_eq!(aside, vec![(1, 1, 1), (2, 1, 2), (3, 1, 3)]);
        assert_eq!(done, vec![1, 2, 3, 4]);
        // Passes: with 2 retries, what still fails in pass 1 (item 1 at 3)
        // is tried in pass 2, set aside as its second attempt; item 0
        // holds at once and is never retried.
        let bad = |i: usize, t: u32| i == 0 || t >= 4;
        let (last, aside, _) = schedule(3, 2, true, bad);
        assert_eq!(last, vec![0, 5, 4]);
        assert_eq!(aside, vec![(1, 1, 1), (2, 1, 2), (1, 2, 3)]);
        // Nothing unfaithful: later or not, one attempt each.
        assert_eq!(schedule(3, 2, true, |_, _| true).0, vec![0, 1, 2]);
    }

    #[test]
    fn retried_attempts_are_listed_in_the_manifest() {
        let mut m = json!({"combos": []});
        retried_entry(&mut m, "tcn-r0", "tcn-r0.unfaithful1", &["lost 5 %".into()]);
        retried_entry(&mut m, "tcn-r0", "tcn-r0.unfaithful2", &[]);
        assert_eq!(m["retried"].as_array().unwrap().len(), 2);
        assert_eq!(m["retried"][0]["kept_as"], "tcn-r0.unfaithful1");
        assert_eq!(m["retried"][0]["reasons"][0], "lost 5 %");
        assert_eq!(m["retried"][1]["dir"], "tcn-r0");
    }

    #[test]
    fn prefixes_fit_interface_names() {
        let p = unique_prefix();
        assert_eq!(p.len(), 5);
        assert!(p.starts_with('x') && p.chars().all(|c| c.is_ascii_alphanumeric()));
        assert!(crate::topo::names::max_prefix_len(99) >= p.len());
    }
}

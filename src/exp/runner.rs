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

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::figures;
use super::results::{
    host_delta, parse_nstat, summarize, ComboResult, Fidelity, FlowRow, HostTotals, PingStats,
    QueryRow, StaticFlowResult, SwitchTotals,
};
use super::scenario::{Combo, FlowCount, Scenario, SweepValue, TrafficSpec};
use super::timeseries::{
    busiest_port, from_switch_csv, port_backlog_kb, samples_from_snapshot, write_csv, QueueSample,
};
use crate::topo::{self, CongestionControl, TopoConfig, Topology};
use crate::units::parse_duration;

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
    /// Wall time.
    pub elapsed: Duration,
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
}

impl Proc {
    fn spawn(name: &str, mut cmd: Command, stdout: Stdio, stderr: Stdio) -> Result<Proc> {
        cmd.stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({cmd:?})"))?;
        Ok(Proc {
            name: name.into(),
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

    /// SIGINT, wait up to `grace`, then SIGKILL; the exit status.
    fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        if let Some(s) = self.exited() {
            return Some(s);
        }
        self.signal(nix::sys::signal::Signal::SIGINT);
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
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
    if let TrafficSpec::Workload(w) = &sc.traffic {
        let cdf = resolve(&opts.scenario_dir, &w.cdf);
        crate::traffic::cdf::FlowSizeCdf::from_file(&cdf)
            .map_err(|e| anyhow!("traffic.cdf {}: {e}", cdf.display()))?;
    }
    Ok(())
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
    let combos = sc.combos();
    fs::create_dir_all(&opts.out).with_context(|| format!("creating {}", opts.out.display()))?;
    let started = cmd_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);

    let cfg = TopoConfig {
        prefix: prefix.into(),
        hosts: sc.topology.hosts,
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
        cc: sc
            .topology
            .cc
            .as_deref()
            .map(|c| c.parse::<CongestionControl>().unwrap_or_default())
            .unwrap_or_default(),
        ..TopoConfig::default()
    };
    // The guard exists before `up` can leave anything half-built.
    let _topo_guard = TopoGuard {
        prefix: prefix.into(),
    };
    let topo = topo::up(&cfg).context("building the host namespaces")?;
    check_stop(&opts.stop)?;

    let mut manifest = json!({
        "scenario_name": name,
        "scenario": sc,
        "softswitch_version": env!("CARGO_PKG_VERSION"),
        "switch_binary": cmd_output(&opts.switch_bin.display().to_string(), &["--version"]),
        "tg_binary": cmd_output(&opts.tg_bin.display().to_string(), &["--version"]),
        "git_commit": cmd_output("git", &["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"]),
        "kernel": cmd_output("uname", &["-r"]),
        "host_cc": topo.cc,
        "prefix": prefix,
        "started": started,
        "quick": opts.quick,
        "baseline": sc.baseline_aqm(),
        "hosts": topo.hosts.iter().map(|h| json!({"name": h.name, "ns": h.ns, "ip": h.ip.to_string(), "switch_port": h.switch_if})).collect::<Vec<_>>(),
        "combos": combos,
        "completed": 0,
        "scaling": opts.scaling,
    });
    write_json(&opts.out.join("manifest.json"), &manifest)?;

    // Servers, once for the whole run.
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

    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(combos.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} combos, eta {eta} — {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };

    let mut results = Vec::new();
    let mut series = Vec::new();
    let mut notes = Vec::new();
    for combo in &combos {
        check_stop(&opts.stop)?;
        let tag = match combo.sweep {
            SweepValue::Load(l) => format!(" load {l:.2}"),
            SweepValue::Fanin(n) => format!(" fan-in {n}"),
            SweepValue::Flows(n) => format!(" {n} flows"),
            SweepValue::None => String::new(),
        };
        bar.set_message(format!("{}{tag} (repeat {})", combo.aqm, combo.repeat));
        let (r, ts) = run_combo(sc, opts, &topo, combo).with_context(|| {
            format!(
                "combination {} ({}{tag}, repeat {})",
                combo.index, combo.aqm, combo.repeat
            )
        })?;
        if !r.fidelity.faithful {
            let line = format!(
                "NOT FAITHFUL {}: {}",
                combo.dir,
                r.fidelity.reasons.join("; ")
            );
            bar.println(format!("softswitch-exp: {line}"));
            notes.push(line);
        }
        if r.flows.len() < r.expected && r.statics.is_empty() {
            notes.push(format!(
                "{}: {} of {} flows recorded",
                combo.dir,
                r.flows.len(),
                r.expected
            ));
        }
        results.push(r);
        series.push(ts);
        bar.inc(1);
        manifest["completed"] = json!(results.len());
        write_json(&opts.out.join("manifest.json"), &manifest)?;
    }
    bar.finish_and_clear();
    drop(servers);

    let points = summarize(&results, &sc.switch.aqm, sc.baseline_aqm());
    write_json(
        &opts.out.join("summary.json"),
        &json!({
            "scenario_name": name,
            "baseline": sc.baseline_aqm(),
            "scaling": opts.scaling,
            "size_classes": {"small_lt_bytes": 100_000, "large_gt_bytes": 10_000_000},
            "points": points,
            "combos": results.iter().map(|r| json!({
                "dir": r.dir, "aqm": r.aqm, "sweep": r.sweep, "repeat": r.repeat,
                "expected": r.expected, "recorded": r.flows.len(), "queries": r.queries.len(),
                "switch": r.switch, "hosts": r.hosts, "wall_us": r.wall_us,
                "fidelity": r.fidelity,
                "ping": r.ping.as_ref().map(|p| json!({
                    "count": p.count, "lost": p.lost, "mean_us": p.mean_us,
                    "p50_us": p.p50_us, "p99_us": p.p99_us,
                })),
            })).collect::<Vec<_>>(),
            "faithful": results.iter().all(|r| r.fidelity.faithful),
        }),
    )?;
    let (plots, plot_notes) = figures::write_all(&opts.out, sc, &points, &results, &series)
        .map_err(|e| anyhow!("plotting: {e}"))?;
    notes.extend(plot_notes);
    manifest["finished"] = json!(cmd_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]));
    manifest["elapsed_s"] = json!(t0.elapsed().as_secs_f64());
    write_json(&opts.out.join("manifest.json"), &manifest)?;
    Ok(RunReport {
        out: opts.out.clone(),
        combos: results.len(),
        plots,
        notes,
        elapsed: t0.elapsed(),
    })
}

/// Hosts that run a server (1-based, sorted).
fn server_hosts(sc: &Scenario) -> Vec<usize> {
    let mut v: Vec<usize> = match &sc.traffic {
        TrafficSpec::Workload(w) => w.servers.clone(),
        TrafficSpec::Incast(i) => i.servers.clone(),
        TrafficSpec::Static(s) => s.flows.iter().map(|f| f.server).collect(),
    };
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

/// The switch's command line for one AQM.
pub fn switch_args(sc: &Scenario, topo: &Topology, aqm: &str, socket: &Path) -> Vec<String> {
    let sw = &sc.switch;
    let mut a: Vec<String> = vec![
        "--ports".into(),
        topo.switch_ifs().join(","),
        "--rate".into(),
        sw.rate.clone(),
        "--queues".into(),
        sw.queues.to_string(),
        "--rtt".into(),
        sw.rtt.clone(),
        "--aqm".into(),
        super::scenario::aqm_kind(aqm).into(),
        "--json".into(),
        "--stats-socket".into(),
        socket.display().to_string(),
        // A switch that outlives a crashed runner stops by itself.
        "--duration".into(),
        "3600s".into(),
    ];
    let mut opt = |flag: &str, v: &Option<String>| {
        if let Some(v) = v {
            a.push(flag.into());
            a.push(v.clone());
        }
    };
    opt("--buffer", &sw.buffer);
    opt("--sched", &sw.sched);
    opt("--quantum", &sw.quantum);
    opt("--weights", &sw.weights);
    opt("--strict", &sw.strict);
    opt("--dscp-map", &sw.dscp_map);
    opt(
        "--frames",
        &sw.frames_for(topo.hosts.len()).map(|f| f.to_string()),
    );
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

/// Every receiving host reaches every sender through the switch (one ping,
/// a few tries): a broken path fails here with a clear message instead of
/// as a connect timeout deep in the traffic generator.
fn check_paths(sc: &Scenario, topo: &Topology) -> Result<()> {
    let pairs: Vec<(usize, usize)> = match &sc.traffic {
        TrafficSpec::Workload(w) => w
            .clients
            .iter()
            .flat_map(|&c| w.servers.iter().map(move |&s| (c, s)))
            .collect(),
        TrafficSpec::Incast(i) => i.servers.iter().map(|&s| (i.receiver, s)).collect(),
        TrafficSpec::Static(s) => s.flows.iter().map(|f| (f.client, f.server)).collect(),
    };
    for (c, s) in pairs {
        let (from, to) = (&topo.hosts[c - 1], &topo.hosts[s - 1]);
        let ok = (0..3).any(|_| {
            from.exec(&["ping", "-c", "1", "-W", "1", &to.ip.to_string()])
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

fn nstat_all(topo: &Topology) -> Vec<BTreeMap<String, u64>> {
    topo.hosts
        .iter()
        .map(|h| {
            // -a absolute, -s leave nstat's history file alone, -z zeros too.
            h.exec(&["nstat", "-asz"])
                .output()
                .map(|o| parse_nstat(&String::from_utf8_lossy(&o.stdout)))
                .unwrap_or_default()
        })
        .collect()
}

/// A client-side process of one combination and what it writes.
struct TrafficProc {
    proc_: Proc,
    json: PathBuf,
    label: String,
    dscp: u8,
}

fn run_combo(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
) -> Result<(ComboResult, Vec<QueueSample>)> {
    let dir = opts.out.join(&combo.dir);
    fs::create_dir_all(&dir)?;
    let socket = PathBuf::from(format!(
        "/tmp/softswitch-exp-{}-{}.sock",
        topo.prefix, combo.index
    ));
    let _ = fs::remove_file(&socket);
    // A killed switch leaves its socket file; remove it whatever happens.
    let _socket_guard = RemoveOnDrop(socket.clone());
    let mut switch = {
        let mut c = Command::new(&opts.switch_bin);
        c.args(switch_args(sc, topo, &combo.aqm, &socket));
        // The switch's own fine-grained queue time series (every queue,
        // 1 ms): what the queue figures plot.
        c.arg("--timeseries").arg(dir.join("switch_timeseries.csv"));
        c.args(["--ts-interval", "1ms"]);
        let out = File::create(dir.join("switch.json"))?;
        let log = File::create(dir.join("switch.log"))?;
        Proc::spawn("softswitch", c, Stdio::from(out), Stdio::from(log))?
    };
    // Ready when the stats socket answers.
    let ready = Instant::now();
    loop {
        if crate::stats::fetch(&socket).is_ok() {
            break;
        }
        if let Some(st) = switch.exited() {
            let log = fs::read_to_string(dir.join("switch.log")).unwrap_or_default();
            bail!("the switch exited at start ({st}):\n{}", log.trim_end());
        }
        if ready.elapsed() > Duration::from_secs(15) {
            bail!(
                "the switch did not answer on {} within 15 s",
                socket.display()
            );
        }
        check_stop(&opts.stop)?;
        thread::sleep(Duration::from_millis(50));
    }
    check_paths(sc, topo)?;
    let before = nstat_all(topo);

    // Sampler: live snapshots every POLL until told to stop.
    let sampling = Arc::new(AtomicBool::new(true));
    let samples = Arc::new(Mutex::new(Vec::new()));
    // The switch's clock (ms) at sampling start, from the first snapshot:
    // lines its own 1 ms time series up with the traffic.
    let switch_offset_ms = Arc::new(Mutex::new(None::<f64>));
    let sampler = {
        let (sampling, samples, socket) = (sampling.clone(), samples.clone(), socket.clone());
        let offset = switch_offset_ms.clone();
        thread::spawn(move || {
            let start = Instant::now();
            let mut next = start;
            while sampling.load(Ordering::SeqCst) {
                if let Ok(text) = crate::stats::fetch(&socket) {
                    if let Ok(v) = serde_json::from_str::<Value>(&text) {
                        let t_ms = start.elapsed().as_millis() as u64;
                        let mut o = offset.lock().unwrap_or_else(|e| e.into_inner());
                        if o.is_none() {
                            if let Some(e) = v["elapsed_s"].as_f64() {
                                *o = Some(e * 1000.0 - t_ms as f64);
                            }
                        }
                        drop(o);
                        samples
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .extend(samples_from_snapshot(t_ms, &v));
                    }
                }
                next += POLL;
                let now = Instant::now();
                if next > now {
                    thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
        })
    };

    let traffic = start_traffic(sc, opts, topo, combo, &dir);
    let mut ping = match &traffic {
        Ok(_) => start_ping(sc, opts, topo, &dir)?,
        Err(_) => None,
    };
    let waited = traffic.and_then(|procs| wait_traffic(procs, &mut switch, opts, combo));
    // The probe ends on its own with the run; give it a moment, then stop it.
    let ping = match ping.as_mut() {
        Some(p) => {
            let t = Instant::now();
            while p.exited().is_none() && t.elapsed() < Duration::from_secs(2) {
                thread::sleep(Duration::from_millis(20));
            }
            p.stop(Duration::from_millis(200));
            Some(PingStats::from_ping_output(
                &fs::read_to_string(dir.join("ping.txt")).unwrap_or_default(),
            ))
        }
        None => None,
    };
    sampling.store(false, Ordering::SeqCst);
    let _ = sampler.join();
    let series = std::mem::take(&mut *samples.lock().unwrap_or_else(|e| e.into_inner()));
    let (procs, wall_us) = waited?;

    let after = nstat_all(topo);
    let mut hosts_json = serde_json::Map::new();
    let mut hosts = HostTotals::default();
    for (i, h) in topo.hosts.iter().enumerate() {
        let d = host_delta(&before[i], &after[i]);
        hosts.retrans_segs += d.retrans_segs;
        hosts.timeouts += d.timeouts;
        hosts.delivered_ce += d.delivered_ce;
        hosts_json.insert(h.name.clone(), serde_json::to_value(&d)?);
    }
    hosts_json.insert("total".into(), serde_json::to_value(&hosts)?);
    write_json(&dir.join("hosts.json"), &hosts_json)?;

    let status = switch.stop(Duration::from_secs(10));
    if !status.is_some_and(|s| s.success()) {
        bail!(
            "the switch did not exit cleanly ({status:?}); see {}",
            dir.join("switch.log").display()
        );
    }
    let switch_v: Value = serde_json::from_str(&fs::read_to_string(dir.join("switch.json"))?)
        .context("the switch's exit JSON (switch.json)")?;
    let switch_totals = SwitchTotals::from_snapshot(&switch_v);
    let fidelity = Fidelity::from_snapshot(&switch_v);
    write_csv(
        std::io::BufWriter::new(File::create(dir.join("timeseries.csv"))?),
        &series,
    )?;
    // Figures use the switch's own 1 ms series when it is there and lines
    // up; the 100 ms polled one otherwise.
    let offset = *switch_offset_ms.lock().unwrap_or_else(|e| e.into_inner());
    let polled = ("timeseries.csv".to_string(), series);
    let (queue_samples, series) = match (
        offset,
        fs::read_to_string(dir.join("switch_timeseries.csv")),
    ) {
        (Some(off), Ok(text)) => match from_switch_csv(&text, &topo.switch_ifs(), off) {
            Ok(fine) if !fine.is_empty() => ("switch_timeseries.csv".to_string(), fine),
            Ok(_) => polled,
            Err(e) => {
                eprintln!(
                        "softswitch-exp: {}: switch_timeseries.csv unreadable ({e}); plotting the 100 ms samples",
                        combo.dir
                    );
                polled
            }
        },
        _ => polled,
    };

    let (queue_mean_kb, queue_p99_kb) = match busiest_port(&series) {
        Some(port) => {
            let mut kb: Vec<f64> = port_backlog_kb(&series, &port)
                .into_iter()
                .map(|p| p.1)
                .collect();
            kb.sort_by(|a, b| a.total_cmp(b));
            let mean = kb.iter().sum::<f64>() / kb.len().max(1) as f64;
            let p99 = kb
                .get(((kb.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0);
            (mean, p99)
        }
        None => (0.0, 0.0),
    };
    let mut r = ComboResult {
        aqm: combo.aqm.clone(),
        sweep: combo.sweep,
        repeat: combo.repeat,
        dir: combo.dir.clone(),
        expected: 0,
        flows: vec![],
        queries: vec![],
        statics: vec![],
        wall_us,
        switch: switch_totals,
        hosts,
        queue_samples,
        fidelity,
        queue_mean_kb,
        queue_p99_kb,
        ping,
    };
    for p in &procs {
        let v: Value = serde_json::from_str(
            &fs::read_to_string(&p.json)
                .with_context(|| format!("reading {}", p.json.display()))?,
        )
        .with_context(|| format!("parsing {}", p.json.display()))?;
        let rep = &v["report"];
        match &sc.traffic {
            TrafficSpec::Workload(_) => {
                r.expected += v["config"]["flows"].as_u64().unwrap_or(0) as usize;
                r.flows.extend(serde_json::from_value::<Vec<FlowRow>>(
                    rep["flows"].clone(),
                )?);
            }
            TrafficSpec::Incast(_) => {
                let q = v["config"]["queries"].as_u64().unwrap_or(0) as usize;
                let n = v["config"]["servers"].as_array().map_or(0, |a| a.len());
                r.expected += q * n;
                r.flows.extend(serde_json::from_value::<Vec<FlowRow>>(
                    rep["flows"].clone(),
                )?);
                r.queries.extend(serde_json::from_value::<Vec<QueryRow>>(
                    rep["queries"].clone(),
                )?);
            }
            TrafficSpec::Static(_) => {
                r.expected += 1;
                let samples = rep["samples"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        (
                            s["t_ms"].as_u64().unwrap_or(0),
                            s["goodput_mbps"].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect();
                r.statics.push(StaticFlowResult {
                    label: p.label.clone(),
                    dscp: p.dscp,
                    goodput_mbps: rep["goodput_mbps"].as_f64().unwrap_or(0.0),
                    samples,
                    start_ms: rep["start_ms"].as_u64().unwrap_or(0),
                    size: rep["size"].as_u64(),
                    fct_us: rep["fct_us"].as_u64(),
                });
            }
        }
    }
    write_json(&dir.join("result.json"), &r)?;
    Ok((r, series))
}

fn start_traffic(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    dir: &Path,
) -> Result<Vec<TrafficProc>> {
    let port = if opts.fault == Some(Fault::WrongServerPort) {
        SERVER_PORT + 1
    } else {
        SERVER_PORT
    };
    let addr = |h: usize| format!("{}:{port}", topo.hosts[h - 1].ip);
    let seed = sc.seed + combo.repeat as u64 * 1000;
    let mut procs = Vec::new();
    let mut spawn =
        |host: usize, args: Vec<String>, stem: &str, label: String, dscp: u8| -> Result<()> {
            let h = &topo.hosts[host - 1];
            let log = File::create(dir.join(format!("{stem}.log")))?;
            let mut c = h.exec(&[]);
            c.arg(&opts.tg_bin).args(&args);
            c.current_dir(dir);
            procs.push(TrafficProc {
                proc_: Proc::spawn(
                    &format!("softswitch-tg in {}", h.name),
                    c,
                    Stdio::from(log.try_clone()?),
                    Stdio::from(log),
                )?,
                json: dir.join(format!("{stem}.json")),
                label,
                dscp,
            });
            Ok(())
        };
    match &sc.traffic {
        TrafficSpec::Workload(w) => {
            let SweepValue::Load(load) = combo.sweep else {
                bail!("workload combo without a load")
            };
            let cdf = resolve(&opts.scenario_dir, &w.cdf);
            let servers: Vec<String> = w.servers.iter().map(|&h| addr(h)).collect();
            for (k, &c) in w.clients.iter().enumerate() {
                let stem = format!("flows-h{c}");
                spawn(
                    c,
                    vec![
                        "client".into(),
                        "--servers".into(),
                        servers.join(","),
                        "--cdf".into(),
                        cdf.display().to_string(),
                        "--load".into(),
                        load.to_string(),
                        "--rate".into(),
                        sc.switch.rate.clone(),
                        "--flows".into(),
                        Scenario::workload_flows(w, opts.quick).to_string(),
                        "--conns".into(),
                        w.conns.to_string(),
                        "--dscp".into(),
                        w.dscp.clone(),
                        "--seed".into(),
                        (seed + k as u64).to_string(),
                        "--out".into(),
                        format!("{stem}.txt"),
                        "--json".into(),
                        format!("{stem}.json"),
                    ],
                    &stem,
                    format!("h{c}"),
                    0,
                )?;
            }
        }
        TrafficSpec::Incast(i) => {
            let SweepValue::Fanin(n) = combo.sweep else {
                bail!("incast combo without a fan-in")
            };
            let servers: Vec<String> = i.senders(n).iter().map(|&h| addr(h)).collect();
            let mut args: Vec<String> = vec![
                "incast".into(),
                "--servers".into(),
                servers.join(","),
                "--size".into(),
                i.size.clone(),
                "--queries".into(),
                Scenario::incast_queries(i, opts.quick).to_string(),
                "--interval".into(),
                i.interval.clone(),
                "--dscp".into(),
                i.dscp.to_string(),
                "--out".into(),
                "incast_flows.txt".into(),
                "--qct-out".into(),
                "incast_queries.txt".into(),
                "--json".into(),
                "incast.json".into(),
            ];
            if i.fresh {
                args.push("--fresh".into());
            }
            spawn(
                i.receiver,
                args,
                "incast",
                format!("h{}", i.receiver),
                i.dscp,
            )?;
        }
        TrafficSpec::Static(s) => {
            let dur = Scenario::static_duration(s, opts.quick);
            let full = Duration::from_nanos(parse_duration(&s.duration).unwrap_or(0));
            for (k, f) in s.flows.iter().enumerate() {
                // With --quick, starts shrink with the run.
                let start = f
                    .start
                    .as_deref()
                    .map(|st| {
                        let d = Duration::from_nanos(parse_duration(st).unwrap_or(0));
                        if full.is_zero() {
                            d
                        } else {
                            d.mul_f64(dur.as_secs_f64() / full.as_secs_f64())
                        }
                    })
                    .unwrap_or_default();
                for j in 0..f.count_for(combo.sweep) {
                    let stem = if f.count == FlowCount::Fixed(1) {
                        format!("long{k}-h{}-h{}", f.server, f.client)
                    } else {
                        format!("long{k}.{j}-h{}-h{}", f.server, f.client)
                    };
                    let mut args = vec![
                        "long".into(),
                        "--server".into(),
                        addr(f.server),
                        "--duration".into(),
                        format!("{}ms", dur.as_millis()),
                        "--delay".into(),
                        format!("{}ms", start.as_millis()),
                        "--dscp".into(),
                        f.dscp.to_string(),
                        "--sample".into(),
                        s.sample.clone(),
                        "--csv".into(),
                        format!("{stem}.csv"),
                        "--json".into(),
                        format!("{stem}.json"),
                    ];
                    if let Some(r) = &f.rate {
                        args.push("--rate".into());
                        args.push(r.clone());
                    }
                    if let Some(z) = &f.size {
                        args.push("--size".into());
                        args.push(z.clone());
                    }
                    let n = if f.count == FlowCount::Fixed(1) {
                        String::new()
                    } else {
                        format!(".{j}")
                    };
                    spawn(
                        f.client,
                        args,
                        &stem,
                        format!("f{k}{n} h{}→h{} dscp {}", f.server, f.client, f.dscp),
                        f.dscp,
                    )?;
                }
            }
        }
    }
    Ok(procs)
}

/// Starts the scenario's ping probe (static traffic with `[traffic.ping]`),
/// writing `ping.txt` in `dir`.
fn start_ping(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    dir: &Path,
) -> Result<Option<Proc>> {
    let TrafficSpec::Static(s) = &sc.traffic else {
        return Ok(None);
    };
    let Some(p) = &s.ping else {
        return Ok(None);
    };
    let dur = Scenario::static_duration(s, opts.quick);
    let start = match &p.start {
        Some(st) => Duration::from_nanos(parse_duration(st).unwrap_or(0)),
        None => dur / 4,
    };
    let interval = Duration::from_nanos(parse_duration(&p.interval).unwrap_or(10_000_000));
    let run = dur.saturating_sub(start);
    let count = (run.as_micros() / interval.as_micros().max(1)).max(1);
    let h = &topo.hosts[p.from - 1];
    let target = topo.hosts[p.to - 1].ip.to_string();
    let script = format!(
        "sleep {:.3}; exec ping -n -Q {} -i {:.3} -c {count} -W 1 {target}",
        start.as_secs_f64(),
        (p.dscp as u32) << 2,
        interval.as_secs_f64(),
    );
    let mut c = h.exec(&[]);
    c.args(["sh", "-c", &script]);
    let out = File::create(dir.join("ping.txt"))?;
    let err = File::create(dir.join("ping.log"))?;
    Ok(Some(Proc::spawn(
        &format!("ping in {}", h.name),
        c,
        Stdio::from(out),
        Stdio::from(err),
    )?))
}

/// A relative path from the scenario's directory if it exists there, else as given.
fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        return p.to_owned();
    }
    let b = base.join(p);
    if b.exists() {
        return b.canonicalize().unwrap_or(b);
    }
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

/// Waits for every traffic process; fails fast when one fails, the switch
/// dies, or the user interrupts. Returns the processes and the wall time.
fn wait_traffic(
    mut procs: Vec<TrafficProc>,
    switch: &mut Proc,
    opts: &RunOptions,
    combo: &Combo,
) -> Result<(Vec<TrafficProc>, u64)> {
    let t0 = Instant::now();
    let mut killed = false;
    loop {
        check_stop(&opts.stop)?;
        if let Some(Fault::KillSwitchAfter(d)) = opts.fault {
            if !killed && t0.elapsed() >= d {
                switch.signal(nix::sys::signal::Signal::SIGKILL);
                killed = true;
            }
        }
        if let Some(st) = switch.exited() {
            bail!(
                "the switch exited while traffic was running ({st}); see {}/switch.log",
                combo.dir
            );
        }
        let mut running = 0;
        for p in &mut procs {
            match p.proc_.exited() {
                None => running += 1,
                Some(st) if st.success() => {}
                Some(st) => {
                    let log = fs::read_to_string(p.json.with_extension("log")).unwrap_or_default();
                    bail!("{} failed ({st}): {}", p.proc_.name, log.trim_end());
                }
            }
        }
        if running == 0 {
            return Ok((procs, t0.elapsed().as_micros() as u64));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::{Host, Ipv4Net};
    use std::net::Ipv4Addr;

    fn topo(n: usize) -> Topology {
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
        let a = switch_args(&sc, &t, "tcn", Path::new("/tmp/s.sock")).join(" ");
        assert!(a.starts_with("--ports xt-h1-sw,xt-h2-sw,"), "{a}");
        for want in [
            "--aqm tcn",
            "--aqm-opt mode=threshold --aqm-opt threshold=200us",
            "--port-delay xt-h2-sw=100us",
            "--queues 4",
            "--sched dwrr",
            "--stats-socket /tmp/s.sock",
            "--json",
            "--seed 7",
        ] {
            assert!(a.contains(want), "want `{want}` in: {a}");
        }
        assert!(
            !a.contains("--frames"),
            "the switch sizes its UMEM itself: {a}"
        );
        let d = switch_args(&sc, &t, "dctcp", Path::new("/tmp/s.sock")).join(" ");
        assert!(!d.contains("--aqm-opt"), "tcn's options stay with tcn: {d}");
    }

    #[test]
    fn prefixes_fit_interface_names() {
        let p = unique_prefix();
        assert_eq!(p.len(), 5);
        assert!(p.starts_with('x') && p.chars().all(|c| c.is_ascii_alphanumeric()));
        assert!(crate::topo::names::max_prefix_len(99) >= p.len());
    }
}

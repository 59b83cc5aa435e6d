//! One combination: start the switch with its AQM, sample its queues while
//! the traffic runs, stop it, and store everything in `result.json`.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::traffic::{finish_ping, read_traffic, start_ping, start_traffic, wait_traffic};
use super::{
    check_paths, check_stop, part_switch_args, parts, write_json, Proc, RemoveOnDrop, RunOptions,
    POLL,
};
use crate::exp::placement::{Machine, Placement};
use crate::exp::results::{
    host_delta, parse_nstat, ComboResult, Fidelity, HopResult, HostTotals, SojournResult,
    SwitchTotals,
};
use crate::exp::scenario::{Combo, Scenario};
use crate::exp::timeseries::{
    busiest_port, from_switch_csv, port_backlog_kb, samples_from_snapshot, write_csv, QueueSample,
};
use crate::fabric::split::Part;
use crate::timebase::Dilation;
use crate::topo::{Site, Topology};

/// Runs one combination and writes its `result.json`.
pub(super) fn run_combo(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    delay: Option<Duration>,
    placement: Option<&Placement>,
) -> Result<ComboResult> {
    let dir = opts.out.join(&combo.dir);
    fs::create_dir_all(&dir)?;
    // Every part answers before any host sends.
    let mut switches = start_switches(sc, opts, topo, combo, &dir, delay, placement)?;
    for s in &mut switches {
        let log = part_file(&dir, "switch", s.part.as_deref(), "log");
        wait_ready(&mut s.proc_, &s.socket, &log, opts)?;
    }
    check_paths(sc, topo)?;
    let before = nstat_all(topo);
    let sockets = switches.iter().map(|s| s.socket.clone()).collect();
    let sampler = Sampler::start(sockets, sc.dilation());
    let traffic = start_traffic(sc, opts, topo, combo, &dir);
    let ping = match &traffic {
        Ok(_) => start_ping(sc, opts, topo, &dir)?,
        Err(_) => None,
    };
    let waited = traffic.and_then(|procs| {
        let mut running: Vec<&mut Proc> = switches.iter_mut().map(|s| &mut s.proc_).collect();
        wait_traffic(procs, &mut running, opts, combo, sc)
    });
    let ping = finish_ping(ping, &dir, sc.dilation());
    let (polled, offsets) = sampler.stop();
    let (procs, wall_us) = waited?;
    let hosts = host_totals(topo, &before, &dir)?;
    let (switch_v, part_ports) = stop_switches(switches, &dir, topo)?;
    write_csv(
        std::io::BufWriter::new(File::create(dir.join("timeseries.csv"))?),
        &polled,
    )?;
    // The switch names its ports (interfaces, or a fabric's `leaf1:spine2`)
    // in the order of its time series' port numbers.
    let names = port_names(&switch_v).unwrap_or_else(|| topo.switch_ifs());
    let (queue_samples, series) = figure_series(&dir, &part_ports, &offsets, polled, combo);
    let (queue_mean_kb, queue_p99_kb) = queue_stats(&series);
    let port = busiest_port(&series).or_else(|| SojournResult::busiest_by_bytes(&switch_v));
    let switch_totals = SwitchTotals::from_snapshot(&switch_v);
    let mut hosts = hosts;
    hosts.lossless_retrans = hosts.retransmitted_without_loss(switch_totals.dropped_pkts);
    let mut r = ComboResult {
        aqm: combo.aqm.clone(),
        sweep: combo.sweep,
        repeat: combo.repeat,
        seed: sc.repeat_seed(combo.repeat),
        dir: combo.dir.clone(),
        expected: 0,
        flows: vec![],
        queries: vec![],
        statics: vec![],
        wall_us,
        switch: switch_totals,
        hosts,
        queue_samples,
        switch_ports: names,
        switch_offset_ms: offsets.first().copied().flatten(),
        fidelity: Fidelity::from_snapshot(&switch_v),
        queue_mean_kb,
        queue_p99_kb,
        sojourn: port.and_then(|p| SojournResult::from_snapshot(&switch_v, &p)),
        ping,
        hops: if sc.fabric.is_some() {
            HopResult::from_snapshot(&switch_v)
        } else {
            Vec::new()
        },
        retried: 0,
    };
    read_traffic(sc, &procs, &mut r)?;
    write_json(&dir.join("result.json"), &r)?;
    Ok(r)
}

/// `dir/<stem>.<ext>`, or `dir/<stem>-<part>.<ext>` for the process of one
/// part of a split fabric.
fn part_file(dir: &Path, stem: &str, part: Option<&str>, ext: &str) -> PathBuf {
    match part {
        Some(p) => dir.join(format!("{stem}-{p}.{ext}")),
        None => dir.join(format!("{stem}.{ext}")),
    }
}

/// One switch process of a combination, running.
struct Running {
    /// The part it runs (None: the whole fabric, or the one switch).
    part: Option<String>,
    proc_: Proc,
    socket: PathBuf,
    /// A killed switch leaves its socket file; removed whatever happens.
    _socket_guard: RemoveOnDrop,
    /// On another machine: what its files are there.
    remote: Option<parts::RemoteSwitch>,
}

/// What one switch process of a combination is started with, besides the
/// scenario: its stats socket, `topology.base_rtt`'s one-way delay, and
/// the part of a split fabric it runs (None: all of it).
pub(super) struct Launch<'a> {
    pub socket: &'a Path,
    pub delay: Option<Duration>,
    pub part: Option<&'a Part>,
}

/// The switch processes for one AQM — one, or one per part of a split
/// fabric (each on its machine) — each writing its exit JSON, log and 1 ms
/// time series into `dir` (`switch.json`, or `switch-<part>.json` …).
fn start_switches(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    dir: &Path,
    delay: Option<Duration>,
    placement: Option<&Placement>,
) -> Result<Vec<Running>> {
    let parts: Vec<(Option<&Part>, Option<&Machine>)> = match placement {
        Some(p) => p
            .split
            .parts
            .iter()
            .zip(&p.machines)
            .map(|(part, m)| (Some(part), m.as_ref()))
            .collect(),
        None => vec![(None, None)],
    };
    let mut running = Vec::new();
    for (part, machine) in parts {
        let name = part.map(|p| p.name.clone());
        let socket = PathBuf::from(match &name {
            Some(p) => format!(
                "/tmp/softswitch-exp-{}-{}-{p}.sock",
                topo.prefix, combo.index
            ),
            None => format!("/tmp/softswitch-exp-{}-{}.sock", topo.prefix, combo.index),
        });
        let _ = fs::remove_file(&socket);
        let guard = RemoveOnDrop(socket.clone());
        let launch = Launch {
            socket: &socket,
            delay,
            part,
        };
        let args = combo_switch_args(sc, opts, topo, combo, dir, &launch);
        let n = name.as_deref();
        let what = match (n, machine) {
            (Some(p), Some(m)) => format!("softswitch (part {p}, {})", m.site),
            (Some(p), None) => format!("softswitch (part {p})"),
            _ => "softswitch".to_string(),
        };
        let out = Stdio::from(File::create(part_file(dir, "switch", n, "json"))?);
        let log = Stdio::from(File::create(part_file(dir, "switch", n, "log"))?);
        let (proc_, remote) = match machine {
            // Another machine: over SSH, its files copied there and back.
            Some(m) if m.site.is_remote() => {
                if opts.captures(sc) {
                    bail!(
                        "capture on part {} over SSH is not built: capture where every part runs \
                         on this machine or in a namespace",
                        n.unwrap_or_default()
                    );
                }
                let tag = format!("{}-{}", combo.index, n.unwrap_or_default());
                let (c, r) = parts::RemoteSwitch::new(m, &topo.prefix, &tag, &args, &socket)?;
                (Proc::spawn_stopped_by_stdin(&what, c, out, log)?, Some(r))
            }
            // Here, or on a machine that is a namespace here: inside it
            // (the stats socket is a file, reached from any namespace).
            _ => {
                let site = machine.map_or(Site::Here, |m| m.site.clone());
                let mut argv = vec![opts.switch_bin.display().to_string()];
                argv.extend(args);
                (Proc::spawn(&what, site.command(&argv), out, log)?, None)
            }
        };
        running.push(Running {
            part: name,
            proc_,
            socket,
            _socket_guard: guard,
            remote,
        });
    }
    Ok(running)
}

/// The switch's whole command line for one combination, whose directory is
/// `dir`: [`switch_args`] (of its part, if it runs one), its own 1 ms queue
/// time series (every queue: what the queue figures plot), and with
/// capture its pcapng files in the combination's own `pcap/` (switches of
/// different combinations never share a capture directory).
pub(super) fn combo_switch_args(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    dir: &Path,
    launch: &Launch,
) -> Vec<String> {
    let mut a = part_switch_args(
        sc,
        topo,
        &combo.aqm,
        launch.socket,
        &opts.out,
        launch.delay,
        launch.part,
    );
    let part = launch.part.map(|p| p.name.as_str());
    a.extend([
        "--timeseries".into(),
        part_file(dir, "switch_timeseries", part, "csv")
            .display()
            .to_string(),
        "--ts-interval".into(),
        "1ms".into(),
    ]);
    if opts.captures(sc) {
        a.extend(sc.capture.switch_args(&super::capture_dir(dir)));
    }
    a
}

/// Waits until the stats socket answers; `log` is the switch's.
pub(super) fn wait_ready(
    switch: &mut Proc,
    socket: &Path,
    log: &Path,
    opts: &RunOptions,
) -> Result<()> {
    let ready = Instant::now();
    loop {
        if crate::stats::fetch(socket).is_ok() {
            return Ok(());
        }
        if let Some(st) = switch.exited() {
            let text = fs::read_to_string(log).unwrap_or_default();
            bail!(
                "{} exited at start ({st}):\n{}",
                switch.name,
                text.trim_end()
            );
        }
        if ready.elapsed() > Duration::from_secs(15) {
            bail!(
                "{} did not answer on {} within 15 s",
                switch.name,
                socket.display()
            );
        }
        check_stop(&opts.stop)?;
        thread::sleep(Duration::from_millis(50));
    }
}

/// Live snapshots every [`POLL`] of emulated time (D × [`POLL`] of real
/// time) from a thread, until stopped; sample times are emulated, as the
/// switch's own clock (`elapsed_s`) is. With several switch processes (a
/// split fabric) every one is read at the same instants.
struct Sampler {
    sampling: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<QueueSample>>>,
    /// Each switch's clock (ms) at sampling start, from its first
    /// snapshot: lines its own 1 ms time series up with the traffic.
    offsets_ms: Arc<Mutex<Vec<Option<f64>>>>,
    thread: thread::JoinHandle<()>,
}

impl Sampler {
    fn start(sockets: Vec<PathBuf>, dilation: Dilation) -> Self {
        let sampling = Arc::new(AtomicBool::new(true));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let offsets_ms = Arc::new(Mutex::new(vec![None::<f64>; sockets.len()]));
        let thread = {
            let (sampling, samples, offsets) =
                (sampling.clone(), samples.clone(), offsets_ms.clone());
            let period = dilation.to_real(POLL);
            thread::spawn(move || {
                let start = Instant::now();
                let mut next = start;
                while sampling.load(Ordering::SeqCst) {
                    let t_ms = dilation.to_emulated(start.elapsed()).as_millis() as u64;
                    for (i, socket) in sockets.iter().enumerate() {
                        sample_once(socket, t_ms, &samples, &offsets, i);
                    }
                    next += period;
                    let now = Instant::now();
                    if next > now {
                        thread::sleep(next - now);
                    } else {
                        next = now;
                    }
                }
            })
        };
        Sampler {
            sampling,
            samples,
            offsets_ms,
            thread,
        }
    }

    /// Stops the thread: the samples and each switch's clock offset.
    fn stop(self) -> (Vec<QueueSample>, Vec<Option<f64>>) {
        self.sampling.store(false, Ordering::SeqCst);
        let _ = self.thread.join();
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        let offsets = self
            .offsets_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        (samples, offsets)
    }
}

/// One snapshot of the switch on `socket` (the `i`-th) at `t_ms` of
/// emulated time since sampling started.
fn sample_once(
    socket: &Path,
    t_ms: u64,
    samples: &Mutex<Vec<QueueSample>>,
    offsets: &Mutex<Vec<Option<f64>>>,
    i: usize,
) {
    let Ok(text) = crate::stats::fetch(socket) else {
        return;
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return;
    };
    let mut o = offsets.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(slot @ None) = o.get_mut(i) {
        if let Some(e) = v["elapsed_s"].as_f64() {
            *slot = Some(e * 1000.0 - t_ms as f64);
        }
    }
    drop(o);
    samples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(samples_from_snapshot(t_ms, &v));
}

pub(super) fn nstat_all(topo: &Topology) -> Vec<BTreeMap<String, u64>> {
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

/// The hosts' TCP counters since `before`: summed, each host's in
/// [`HostTotals::per_host`] (and, as before, in `hosts.json`).
fn host_totals(
    topo: &Topology,
    before: &[BTreeMap<String, u64>],
    dir: &Path,
) -> Result<HostTotals> {
    let after = nstat_all(topo);
    let hosts = HostTotals::of_hosts(
        topo.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.clone(), host_delta(&before[i], &after[i]))),
    );
    let mut hosts_json = serde_json::Map::new();
    for (name, d) in &hosts.per_host {
        hosts_json.insert(name.clone(), serde_json::to_value(d)?);
    }
    let total = HostTotals {
        per_host: BTreeMap::new(),
        ..hosts.clone()
    };
    hosts_json.insert("total".into(), serde_json::to_value(&total)?);
    write_json(&dir.join("hosts.json"), &hosts_json)?;
    Ok(hosts)
}

/// Stops the switch; its exit JSON (from `json`, where its stdout went).
fn stop_switch(mut switch: Proc, json: &Path) -> Result<Value> {
    let status = switch.stop(Duration::from_secs(10));
    // 3: it ran, and its exit JSON says NOT FAITHFUL — read below.
    let clean = |s: std::process::ExitStatus| {
        s.success() || s.code() == Some(crate::cli::EXIT_NOT_FAITHFUL.into())
    };
    if !status.is_some_and(clean) {
        bail!(
            "{} did not exit cleanly ({status:?}); see {}",
            switch.name,
            json.with_extension("log").display()
        );
    }
    serde_json::from_str(&fs::read_to_string(json)?)
        .with_context(|| format!("the switch's exit JSON ({})", json.display()))
}

/// The ports of one switch process, in the order of its time series' port
/// numbers, and the file of that series.
pub(super) struct PartPorts {
    series: PathBuf,
    names: Vec<String>,
}

/// Stops every switch process: one exit JSON for the combination (a split
/// fabric's parts merged into `switch.json`, [`parts::merge_exits`]) and
/// each process's ports.
fn stop_switches(
    switches: Vec<Running>,
    dir: &Path,
    topo: &Topology,
) -> Result<(Value, Vec<PartPorts>)> {
    let mut exits = Vec::new();
    let mut ports = Vec::new();
    let split = switches.iter().any(|s| s.part.is_some());
    for s in switches {
        let part = s.part.clone();
        let v = stop_switch(s.proc_, &part_file(dir, "switch", part.as_deref(), "json"))?;
        if let Some(r) = &s.remote {
            r.fetch()?;
        }
        ports.push(PartPorts {
            series: part_file(dir, "switch_timeseries", part.as_deref(), "csv"),
            names: port_names(&v).unwrap_or_else(|| topo.switch_ifs()),
        });
        exits.push((part.unwrap_or_default(), v));
    }
    if !split {
        let (_, v) = exits.pop().context("no switch ran")?;
        return Ok((v, ports));
    }
    let merged = parts::merge_exits(&exits);
    write_json(&dir.join("switch.json"), &merged)?;
    Ok((merged, ports))
}

/// The port names of a switch's exit JSON, in its order (None: it has none).
fn port_names(switch: &Value) -> Option<Vec<String>> {
    let names: Vec<String> = switch["ports"]
        .as_array()?
        .iter()
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The samples the figures use: the switches' own 1 ms series when every
/// one is there and lines up (each process's ports and clock offset; a
/// split fabric's parts on one time axis), the 100 ms polled one
/// otherwise; and which it was.
fn figure_series(
    dir: &Path,
    parts: &[PartPorts],
    offsets: &[Option<f64>],
    polled: Vec<QueueSample>,
    combo: &Combo,
) -> (String, Vec<QueueSample>) {
    let polled = ("timeseries.csv".to_string(), polled);
    let mut fine = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let (Some(Some(off)), Ok(text)) = (offsets.get(i), fs::read_to_string(&p.series)) else {
            return polled;
        };
        match from_switch_csv(&text, &p.names, *off) {
            Ok(rows) if !rows.is_empty() => fine.extend(rows),
            Ok(_) => return polled,
            Err(e) => {
                eprintln!(
                    "softswitch-exp: {}: {} unreadable ({e}); plotting the 100 ms samples",
                    combo.dir,
                    p.series.strip_prefix(dir).unwrap_or(&p.series).display()
                );
                return polled;
            }
        }
    }
    if let [one] = parts {
        let file = one
            .series
            .file_name()
            .map(|f| f.to_string_lossy().into_owned());
        return (file.unwrap_or_default(), fine);
    }
    // The parts' series on one axis, in the runner's own CSV format (what
    // `report` reads back: it does not know the parts' ports and offsets).
    fine.sort_by_key(|s| s.t_ms);
    let merged = dir.join(MERGED_SERIES);
    let written = File::create(&merged)
        .map_err(anyhow::Error::from)
        .and_then(|f| write_csv(std::io::BufWriter::new(f), &fine).map_err(Into::into));
    match written {
        Ok(()) => (MERGED_SERIES.to_string(), fine),
        Err(e) => {
            eprintln!(
                "softswitch-exp: {}: writing {MERGED_SERIES}: {e}; plotting the 100 ms samples",
                combo.dir
            );
            polled
        }
    }
}

/// A split fabric's parts' 1 ms queue series merged onto one time axis.
const MERGED_SERIES: &str = "timeseries-1ms.csv";

/// The busiest port's backlog over the run: mean and 99th percentile, KB.
fn queue_stats(series: &[QueueSample]) -> (f64, f64) {
    let Some(port) = busiest_port(series) else {
        return (0.0, 0.0);
    };
    let mut kb: Vec<f64> = port_backlog_kb(series, &port)
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

#[cfg(test)]
mod tests {
    use super::super::tests::{opts, topo};
    use super::*;

    const INCAST: &str = r#"
        [topology]
        hosts = 3
        [switch]
        aqm = ["dctcp", "tcn"]
        [traffic]
        kind = "incast"
        receiver = 3
        servers = [1, 2]
        fanin = [2]
        size = "64kb"
    "#;

    /// The command line of each combination's switch: capture only when
    /// asked (by the scenario or `run --pcap`), into that combination's own
    /// directory, bounded as the scenario says.
    #[test]
    fn each_combinations_switch_captures_into_its_own_directory() {
        let t = topo(3);
        let sock = Path::new("/tmp/s.sock");
        let line = |sc: &Scenario, o: &RunOptions, c: &Combo| {
            let dir = o.out.join(&c.dir);
            let launch = Launch {
                socket: sock,
                delay: None,
                part: None,
            };
            combo_switch_args(sc, o, &t, c, &dir, &launch).join(" ")
        };
        let sc = Scenario::from_toml(INCAST, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        let combos = sc.combos();
        let mut o = opts();
        o.out = PathBuf::from("/r");
        let a = line(&sc, &o, &combos[0]);
        assert!(
            a.contains("--timeseries /r/dctcp-fanin2-r0/switch_timeseries.csv --ts-interval 1ms"),
            "{a}"
        );
        assert!(!a.contains("--pcap"), "no capture unless asked: {a}");
        // `run --pcap`: every combination into its own directory, the
        // switch's default bounds.
        o.pcap = true;
        let (a, b) = (line(&sc, &o, &combos[0]), line(&sc, &o, &combos[1]));
        assert!(
            a.ends_with("--pcap /r/dctcp-fanin2-r0/pcap --pcap-snaplen 256 --pcap-max-mb 100"),
            "{a}"
        );
        assert!(b.contains("--pcap /r/tcn-fanin2-r0/pcap "), "{b}");
        // The scenario's [capture]: on without --pcap, with its bounds.
        let sc = Scenario::from_toml(
            &format!("{INCAST}\n[capture]\npcap = true\npcap_max_mb = 2.5\n"),
            Path::new("t.toml"),
        )
        .unwrap();
        o.pcap = false;
        let a = line(&sc, &o, &combos[0]);
        assert!(a.ends_with("--pcap-snaplen 256 --pcap-max-mb 2.5"), "{a}");
        // The switch itself reads that command line.
        use clap::Parser;
        let mut argv = vec!["softswitch".to_string()];
        let launch = Launch {
            socket: sock,
            delay: None,
            part: None,
        };
        argv.extend(combo_switch_args(
            &sc,
            &o,
            &t,
            &combos[0],
            Path::new("/r/x"),
            &launch,
        ));
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        assert_eq!(cli.run.pcap.as_deref(), Some(Path::new("/r/x/pcap")));
        assert_eq!(cli.run.pcap_max_mb, Some(2.5));
    }
}

//! One combination: start the switch with its AQM, sample its queues while
//! the traffic runs, stop it, and store everything in `result.json`.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::traffic::{finish_ping, read_traffic, start_ping, start_traffic, wait_traffic};
use super::{
    check_paths, check_stop, switch_args, write_json, Proc, RemoveOnDrop, RunOptions, POLL,
};
use crate::exp::results::{
    host_delta, parse_nstat, ComboResult, Fidelity, HopResult, HostTotals, SojournResult,
    SwitchTotals,
};
use crate::exp::scenario::{Combo, Scenario};
use crate::exp::timeseries::{
    busiest_port, from_switch_csv, port_backlog_kb, samples_from_snapshot, write_csv, QueueSample,
};
use crate::timebase::Dilation;
use crate::topo::Topology;

/// Runs one combination and writes its `result.json`.
pub(super) fn run_combo(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    delay: Option<Duration>,
) -> Result<ComboResult> {
    let dir = opts.out.join(&combo.dir);
    fs::create_dir_all(&dir)?;
    let socket = PathBuf::from(format!(
        "/tmp/softswitch-exp-{}-{}.sock",
        topo.prefix, combo.index
    ));
    let _ = fs::remove_file(&socket);
    // A killed switch leaves its socket file; remove it whatever happens.
    let _socket_guard = RemoveOnDrop(socket.clone());
    let mut switch = start_switch(sc, opts, topo, combo, &dir, &socket, delay)?;
    wait_ready(&mut switch, &socket, &dir, opts)?;
    check_paths(sc, topo)?;
    let before = nstat_all(topo);
    let sampler = Sampler::start(socket.clone(), sc.dilation());
    let traffic = start_traffic(sc, opts, topo, combo, &dir);
    let ping = match &traffic {
        Ok(_) => start_ping(sc, opts, topo, &dir)?,
        Err(_) => None,
    };
    let waited = traffic.and_then(|procs| wait_traffic(procs, &mut switch, opts, combo, sc));
    let ping = finish_ping(ping, &dir, sc.dilation());
    let (polled, offset) = sampler.stop();
    let (procs, wall_us) = waited?;
    let hosts = host_totals(topo, &before, &dir)?;
    let switch_v = stop_switch(switch, &dir)?;
    write_csv(
        std::io::BufWriter::new(File::create(dir.join("timeseries.csv"))?),
        &polled,
    )?;
    // The switch names its ports (interfaces, or a fabric's `leaf1:spine2`)
    // in the order of its time series' port numbers.
    let names = port_names(&switch_v).unwrap_or_else(|| topo.switch_ifs());
    let (queue_samples, series) = figure_series(&dir, &names, offset, polled, combo);
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
        switch_offset_ms: offset,
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

/// The switch for one AQM, writing its exit JSON, log and 1 ms time series
/// into `dir`.
fn start_switch(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    dir: &Path,
    socket: &Path,
    delay: Option<Duration>,
) -> Result<Proc> {
    let mut c = Command::new(&opts.switch_bin);
    c.args(combo_switch_args(sc, opts, topo, combo, dir, socket, delay));
    let out = File::create(dir.join("switch.json"))?;
    let log = File::create(dir.join("switch.log"))?;
    Proc::spawn("softswitch", c, Stdio::from(out), Stdio::from(log))
}

/// The switch's whole command line for one combination, whose directory is
/// `dir`: [`switch_args`], its own 1 ms queue time series (every queue: what
/// the queue figures plot), and with capture its pcapng files in the
/// combination's own `pcap/` (switches of different combinations never
/// share a capture directory).
pub(super) fn combo_switch_args(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    combo: &Combo,
    dir: &Path,
    socket: &Path,
    delay: Option<Duration>,
) -> Vec<String> {
    let mut a = switch_args(sc, topo, &combo.aqm, socket, &opts.out, delay);
    a.extend([
        "--timeseries".into(),
        dir.join("switch_timeseries.csv").display().to_string(),
        "--ts-interval".into(),
        "1ms".into(),
    ]);
    if opts.captures(sc) {
        a.extend(sc.capture.switch_args(&super::capture_dir(dir)));
    }
    a
}

/// Waits until the stats socket answers.
pub(super) fn wait_ready(
    switch: &mut Proc,
    socket: &Path,
    dir: &Path,
    opts: &RunOptions,
) -> Result<()> {
    let ready = Instant::now();
    loop {
        if crate::stats::fetch(socket).is_ok() {
            return Ok(());
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
}

/// Live snapshots every [`POLL`] of emulated time (D × [`POLL`] of real
/// time) from a thread, until stopped; sample times are emulated, as the
/// switch's own clock (`elapsed_s`) is.
struct Sampler {
    sampling: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<QueueSample>>>,
    /// The switch's clock (ms) at sampling start, from the first snapshot:
    /// lines its own 1 ms time series up with the traffic.
    offset_ms: Arc<Mutex<Option<f64>>>,
    thread: thread::JoinHandle<()>,
}

impl Sampler {
    fn start(socket: PathBuf, dilation: Dilation) -> Self {
        let sampling = Arc::new(AtomicBool::new(true));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let offset_ms = Arc::new(Mutex::new(None::<f64>));
        let thread = {
            let (sampling, samples, offset) =
                (sampling.clone(), samples.clone(), offset_ms.clone());
            let period = dilation.to_real(POLL);
            thread::spawn(move || {
                let start = Instant::now();
                let mut next = start;
                while sampling.load(Ordering::SeqCst) {
                    sample_once(&socket, start, dilation, &samples, &offset);
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
            offset_ms,
            thread,
        }
    }

    /// Stops the thread: the samples and the switch's clock offset.
    fn stop(self) -> (Vec<QueueSample>, Option<f64>) {
        self.sampling.store(false, Ordering::SeqCst);
        let _ = self.thread.join();
        let samples = std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        let offset = *self.offset_ms.lock().unwrap_or_else(|e| e.into_inner());
        (samples, offset)
    }
}

fn sample_once(
    socket: &Path,
    start: Instant,
    dilation: Dilation,
    samples: &Mutex<Vec<QueueSample>>,
    offset: &Mutex<Option<f64>>,
) {
    let Ok(text) = crate::stats::fetch(socket) else {
        return;
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return;
    };
    let t_ms = dilation.to_emulated(start.elapsed()).as_millis() as u64;
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

/// Stops the switch; its exit JSON.
fn stop_switch(mut switch: Proc, dir: &Path) -> Result<Value> {
    let status = switch.stop(Duration::from_secs(10));
    // 3: it ran, and its exit JSON says NOT FAITHFUL — read below.
    let clean = |s: std::process::ExitStatus| {
        s.success() || s.code() == Some(crate::cli::EXIT_NOT_FAITHFUL.into())
    };
    if !status.is_some_and(clean) {
        bail!(
            "the switch did not exit cleanly ({status:?}); see {}",
            dir.join("switch.log").display()
        );
    }
    serde_json::from_str(&fs::read_to_string(dir.join("switch.json"))?)
        .context("the switch's exit JSON (switch.json)")
}

/// The samples the figures use: the switch's own 1 ms series when it is
/// there and lines up, the 100 ms polled one otherwise; and which it was.
/// The port names of a switch's exit JSON, in its order (None: it has none).
fn port_names(switch: &Value) -> Option<Vec<String>> {
    let names: Vec<String> = switch["ports"]
        .as_array()?
        .iter()
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect();
    (!names.is_empty()).then_some(names)
}

fn figure_series(
    dir: &Path,
    names: &[String],
    offset: Option<f64>,
    polled: Vec<QueueSample>,
    combo: &Combo,
) -> (String, Vec<QueueSample>) {
    let polled = ("timeseries.csv".to_string(), polled);
    let (Some(off), Ok(text)) = (
        offset,
        fs::read_to_string(dir.join("switch_timeseries.csv")),
    ) else {
        return polled;
    };
    match from_switch_csv(&text, names, off) {
        Ok(fine) if !fine.is_empty() => ("switch_timeseries.csv".to_string(), fine),
        Ok(_) => polled,
        Err(e) => {
            eprintln!(
                "softswitch-exp: {}: switch_timeseries.csv unreadable ({e}); plotting the 100 ms samples",
                combo.dir
            );
            polled
        }
    }
}

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
            combo_switch_args(sc, o, &t, c, &dir, sock, None).join(" ")
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
        argv.extend(combo_switch_args(
            &sc,
            &o,
            &t,
            &combos[0],
            Path::new("/r/x"),
            sock,
            None,
        ));
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        assert_eq!(cli.run.pcap.as_deref(), Some(Path::new("/r/x/pcap")));
        assert_eq!(cli.run.pcap_max_mb, Some(2.5));
    }
}

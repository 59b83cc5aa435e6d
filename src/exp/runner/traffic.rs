//! The traffic of one combination: one `start_*` per traffic kind, the ping
//! probe, waiting for it all, and reading what the generators wrote into
//! the combination's result.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{check_stop, Fault, Proc, RunOptions, SERVER_PORT};
use crate::exp::results::{ComboResult, FlowRow, PingStats, QueryRow, StaticFlowResult};
use crate::exp::scenario::{
    Combo, FlowCount, IncastSpec, Scenario, StaticFlow, StaticSpec, SweepValue, TrafficSpec,
    WorkloadSpec,
};
use crate::timebase::Dilation;
use crate::topo::Topology;
use crate::units::parse_duration;

/// A client-side process of one combination and what it writes.
pub(super) struct TrafficProc {
    proc_: Proc,
    json: PathBuf,
    label: String,
    dscp: u8,
}

/// Starts generators in the hosts of one combination.
struct Spawner<'a> {
    opts: &'a RunOptions,
    topo: &'a Topology,
    dir: &'a Path,
    port: u16,
    dilation: Dilation,
    procs: Vec<TrafficProc>,
}

impl Spawner<'_> {
    /// `softswitch-tg args [--dilation D]` in `host`, in the combination's
    /// directory.
    fn command(&self, host: usize, args: &[String]) -> std::process::Command {
        let mut c = self.topo.hosts[host - 1].exec(&[]);
        c.arg(&self.opts.tg_bin)
            .args(args)
            .args(super::dilation_args(self.dilation));
        c.current_dir(self.dir);
        c
    }

    /// `host:port` of a server host.
    fn addr(&self, h: usize) -> String {
        format!("{}:{}", self.topo.hosts[h - 1].ip, self.port)
    }

    /// Runs `softswitch-tg args` in `host`, logging to `<stem>.log`; its
    /// JSON is `<stem>.json`.
    fn spawn(
        &mut self,
        host: usize,
        args: Vec<String>,
        stem: &str,
        label: String,
        dscp: u8,
    ) -> Result<()> {
        let h = &self.topo.hosts[host - 1];
        let log = File::create(self.dir.join(format!("{stem}.log")))?;
        let c = self.command(host, &args);
        self.procs.push(TrafficProc {
            proc_: Proc::spawn(
                &format!("softswitch-tg in {}", h.name),
                c,
                Stdio::from(log.try_clone()?),
                Stdio::from(log),
            )?,
            json: self.dir.join(format!("{stem}.json")),
            label,
            dscp,
        });
        Ok(())
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Starts the combination's traffic generators.
pub(super) fn start_traffic(
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
    let mut sp = Spawner {
        opts,
        topo,
        dir,
        port,
        dilation: sc.dilation(),
        procs: Vec::new(),
    };
    match &sc.traffic {
        TrafficSpec::Workload(w) => start_workload(&mut sp, sc, w, combo)?,
        TrafficSpec::Incast(i) => start_incast(&mut sp, i, combo)?,
        TrafficSpec::Static(s) => start_static(&mut sp, s, combo)?,
    }
    Ok(sp.procs)
}

/// Workload: one client per receiving host, asking every server.
fn start_workload(sp: &mut Spawner, sc: &Scenario, w: &WorkloadSpec, combo: &Combo) -> Result<()> {
    let SweepValue::Load(load) = combo.sweep else {
        bail!("workload combo without a load")
    };
    let cdf = resolve(&sp.opts.scenario_dir, &w.cdf);
    let servers: Vec<String> = w.servers.iter().map(|&h| sp.addr(h)).collect();
    let seed = sc.repeat_seed(combo.repeat);
    for (k, &c) in w.clients.iter().enumerate() {
        let stem = format!("flows-h{c}");
        let mut args = strings(&["client", "--servers"]);
        args.extend([
            servers.join(","),
            "--cdf".into(),
            cdf.display().to_string(),
            "--load".into(),
            load.to_string(),
            "--rate".into(),
            sc.switch.rate.clone(),
            "--flows".into(),
            Scenario::workload_flows(w, sp.opts.quick).to_string(),
            "--conns".into(),
            w.conns.to_string(),
            "--dscp".into(),
            w.dscp.clone(),
            "--seed".into(),
            (seed + k as u64).to_string(),
            "--out".into(),
            format!("{stem}.txt"),
            "--json-out".into(),
            format!("{stem}.json"),
        ]);
        sp.spawn(c, args, &stem, format!("h{c}"), 0)?;
    }
    Ok(())
}

/// Incast: the receiver asks the first `fan-in` senders at once.
fn start_incast(sp: &mut Spawner, i: &IncastSpec, combo: &Combo) -> Result<()> {
    let SweepValue::Fanin(n) = combo.sweep else {
        bail!("incast combo without a fan-in")
    };
    let servers: Vec<String> = i.senders(n).iter().map(|&h| sp.addr(h)).collect();
    let mut args = strings(&["incast", "--servers"]);
    args.extend([
        servers.join(","),
        "--size".into(),
        i.size.clone(),
        "--queries".into(),
        Scenario::incast_queries(i, sp.opts.quick).to_string(),
        "--interval".into(),
        i.interval.clone(),
        "--dscp".into(),
        i.dscp.to_string(),
    ]);
    args.extend(strings(&[
        "--out",
        "incast_flows.txt",
        "--qct-out",
        "incast_queries.txt",
        "--json-out",
        "incast.json",
    ]));
    if i.fresh {
        args.push("--fresh".into());
    }
    sp.spawn(
        i.receiver,
        args,
        "incast",
        format!("h{}", i.receiver),
        i.dscp,
    )
}

/// Static: every entry's flows, each a `softswitch-tg long`.
fn start_static(sp: &mut Spawner, s: &StaticSpec, combo: &Combo) -> Result<()> {
    let dur = Scenario::static_duration(s, sp.opts.quick);
    for (k, f) in s.flows.iter().enumerate() {
        let start = f
            .start
            .as_deref()
            .map(|st| Scenario::static_start(s, st, sp.opts.quick))
            .unwrap_or_default();
        for j in 0..f.count_for(combo.sweep) {
            start_static_flow(sp, s, k, j, f, dur, start)?;
        }
    }
    Ok(())
}

/// Flow `j` of static entry `k`.
fn start_static_flow(
    sp: &mut Spawner,
    s: &StaticSpec,
    k: usize,
    j: usize,
    f: &StaticFlow,
    dur: Duration,
    start: Duration,
) -> Result<()> {
    let single = f.count == FlowCount::Fixed(1);
    let stem = if single {
        format!("long{k}-h{}-h{}", f.server, f.client)
    } else {
        format!("long{k}.{j}-h{}-h{}", f.server, f.client)
    };
    let mut args = strings(&["long", "--server"]);
    args.extend([
        sp.addr(f.server),
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
        "--json-out".into(),
        format!("{stem}.json"),
    ]);
    if let Some(r) = &f.rate {
        args.extend(["--rate".into(), r.clone()]);
    }
    if let Some(z) = &f.size {
        args.extend(["--size".into(), z.clone()]);
    }
    let n = if single {
        String::new()
    } else {
        format!(".{j}")
    };
    sp.spawn(
        f.client,
        args,
        &stem,
        format!("f{k}{n} h{}→h{} dscp {}", f.server, f.client, f.dscp),
        f.dscp,
    )
}

/// Starts the scenario's ping probe (static traffic with `[traffic.ping]`),
/// writing `ping.txt` in `dir`.
pub(super) fn start_ping(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    dir: &Path,
) -> Result<Option<Proc>> {
    let Some((from, script)) = ping_script(sc, opts, topo) else {
        return Ok(None);
    };
    let h = &topo.hosts[from - 1];
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

/// The probe's host and shell command, if the scenario has one.
fn ping_script(sc: &Scenario, opts: &RunOptions, topo: &Topology) -> Option<(usize, String)> {
    let TrafficSpec::Static(s) = &sc.traffic else {
        return None;
    };
    let p = s.ping.as_ref()?;
    let dur = Scenario::static_duration(s, opts.quick);
    let start = match &p.start {
        Some(st) => Scenario::static_start(s, st, opts.quick),
        None => dur / 4,
    };
    let interval = Duration::from_nanos(parse_duration(&p.interval).unwrap_or(10_000_000));
    let run = dur.saturating_sub(start);
    // The count is emulated time over emulated time; ping itself runs in
    // real time, so its start, interval and timeout stretch by D.
    let count = (run.as_micros() / interval.as_micros().max(1)).max(1);
    let d = sc.dilation();
    let target = topo.hosts[p.to - 1].ip.to_string();
    let script = format!(
        "sleep {:.3}; exec ping -n -Q {} -i {:.3} -c {count} -W {} {target}",
        d.to_real(start).as_secs_f64(),
        (p.dscp as u32) << 2,
        d.to_real(interval).as_secs_f64(),
        super::whole_real_seconds(d, Duration::from_secs(1)),
    );
    Some((p.from, script))
}

/// The probe ends on its own with the run: give it a moment (2 s
/// emulated), stop it, and read its RTTs — real time in `ping.txt`,
/// emulated in what is returned.
pub(super) fn finish_ping(ping: Option<Proc>, dir: &Path, d: Dilation) -> Option<PingStats> {
    let mut p = ping?;
    let t = Instant::now();
    while p.exited().is_none() && t.elapsed() < d.to_real(Duration::from_secs(2)) {
        thread::sleep(Duration::from_millis(20));
    }
    p.stop(Duration::from_millis(200));
    Some(
        PingStats::from_ping_output(&fs::read_to_string(dir.join("ping.txt")).unwrap_or_default())
            .in_emulated_time(d),
    )
}

/// A relative path from the scenario's directory if it exists there, else as given.
pub(crate) fn resolve(base: &Path, p: &str) -> PathBuf {
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
/// dies, or the user interrupts. Returns the processes and the wall time
/// in emulated µs (real / D: the FCT summary's goodput divides the bytes
/// by it).
pub(super) fn wait_traffic(
    mut procs: Vec<TrafficProc>,
    switches: &mut [&mut Proc],
    opts: &RunOptions,
    combo: &Combo,
    sc: &Scenario,
) -> Result<(Vec<TrafficProc>, u64)> {
    let t0 = Instant::now();
    let mut killed = false;
    loop {
        check_stop(&opts.stop)?;
        if let Some(Fault::KillSwitchAfter(d)) = opts.fault {
            if !killed && t0.elapsed() >= d {
                if let Some(first) = switches.first() {
                    first.signal(nix::sys::signal::Signal::SIGKILL);
                }
                killed = true;
            }
        }
        for switch in switches.iter_mut() {
            if let Some(st) = switch.exited() {
                bail!(
                    "the switch exited while traffic was running ({}: {st}); see {}/switch*.log",
                    switch.name,
                    combo.dir
                );
            }
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
            return Ok((procs, sc.dilation().emulated_us(t0.elapsed())));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Adds what each generator wrote (its JSON) to `r`.
pub(super) fn read_traffic(
    sc: &Scenario,
    procs: &[TrafficProc],
    r: &mut ComboResult,
) -> Result<()> {
    for p in procs {
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
                r.statics.push(static_result(p, rep));
            }
        }
    }
    Ok(())
}

/// One static flow's report.
fn static_result(p: &TrafficProc, rep: &Value) -> StaticFlowResult {
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
    StaticFlowResult {
        label: p.label.clone(),
        dscp: p.dscp,
        goodput_mbps: rep["goodput_mbps"].as_f64().unwrap_or(0.0),
        samples,
        start_ms: rep["start_ms"].as_u64().unwrap_or(0),
        size: rep["size"].as_u64(),
        fct_us: rep["fct_us"].as_u64(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{opts, topo};
    use super::*;
    use crate::timebase::Dilation;

    fn args_of(c: &std::process::Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn generators_get_d_only_when_dilated() {
        let (o, t) = (opts(), topo(3));
        let mut sp = Spawner {
            opts: &o,
            topo: &t,
            dir: Path::new("/tmp"),
            port: SERVER_PORT,
            dilation: Dilation::NONE,
            procs: Vec::new(),
        };
        let args = strings(&["long", "--server", "10.99.0.1:5001", "--duration", "2000ms"]);
        let a1 = args_of(&sp.command(2, &args));
        assert_eq!(a1[..3], ["netns", "exec", "xt-h2"]);
        assert_eq!(a1[4..], args[..], "D = 1: the command line of old");
        sp.dilation = Dilation::new(4.0).unwrap();
        let a4 = args_of(&sp.command(2, &args));
        // The times stay emulated: the generator converts them.
        assert_eq!(a4[4..a4.len() - 2], args[..]);
        assert_eq!(a4[a4.len() - 2..], ["--dilation", "4"]);
    }

    #[test]
    fn the_ping_probe_runs_in_real_time_d_times_slower() {
        let text = r#"
            [topology]
            hosts = 3
            [switch]
            aqm = ["dctcp"]
            [traffic]
            kind = "static"
            duration = "8s"
            flows = [{ server = 1, client = 3 }]
            [traffic.ping]
            from = 3
            to = 2
            dscp = 2
            interval = "10ms"
            start = "2s"
        "#;
        let (o, t) = (opts(), topo(3));
        let sc1 = Scenario::from_toml(text, Path::new("t.toml")).unwrap();
        let (h, s1) = ping_script(&sc1, &o, &t).unwrap();
        assert_eq!(h, 3);
        assert_eq!(
            s1,
            "sleep 2.000; exec ping -n -Q 8 -i 0.010 -c 600 -W 1 10.99.0.2"
        );
        let sc4 =
            Scenario::from_toml(&format!("dilation = 4\n{text}"), Path::new("t.toml")).unwrap();
        let (_, s4) = ping_script(&sc4, &o, &t).unwrap();
        // The same 600 probes over 6 s emulated: 24 s of real time.
        assert_eq!(
            s4,
            "sleep 8.000; exec ping -n -Q 8 -i 0.040 -c 600 -W 4 10.99.0.2"
        );
    }
}

//! The traffic of one combination: the generators its kind names
//! (`exp::kinds`) started in their hosts, the ping probe, waiting for it
//! all, and reading what the generators wrote into the combination's
//! result (through the kind).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{check_stop, Fault, Proc, RunOptions, SERVER_PORT};
use crate::exp::kinds::{Combination, Generator, Report};
use crate::exp::results::{ComboResult, PingStats};
use crate::exp::scenario::{Combo, Scenario};
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

    /// Runs a generator in its host, logging to `<stem>.log`; its JSON is
    /// `<stem>.json`.
    fn spawn(&mut self, g: Generator) -> Result<()> {
        let h = &self.topo.hosts[g.host - 1];
        let log = File::create(self.dir.join(format!("{}.log", g.stem)))?;
        let c = self.command(g.host, &g.args);
        self.procs.push(TrafficProc {
            proc_: Proc::spawn(
                &format!("softswitch-tg in {}", h.name),
                c,
                Stdio::from(log.try_clone()?),
                Stdio::from(log),
            )?,
            json: self.dir.join(format!("{}.json", g.stem)),
            label: g.label,
            dscp: g.dscp,
        });
        Ok(())
    }
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
    let addr = |h: usize| sp.addr(h);
    let c = Combination {
        sweep: combo.sweep,
        seed: sc.repeat_seed(combo.repeat),
        quick: opts.quick,
        rate: &sc.switch.rate(),
        scenario_dir: &opts.scenario_dir,
        addr: &addr,
    };
    let generators = sc.traffic.kind().generators(&c)?;
    for g in generators {
        sp.spawn(g)?;
    }
    Ok(sp.procs)
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
    let s = sc.traffic.kind().as_static()?;
    let p = s.ping.as_ref()?;
    let dur = s.duration_for(opts.quick);
    let start = match &p.start {
        Some(st) => s.start_for(st, opts.quick),
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
        sc.traffic.kind().read(
            &Report {
                json: &v,
                label: &p.label,
                dscp: p.dscp,
            },
            r,
        )?;
    }
    Ok(())
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
        let args = ["long", "--server", "10.99.0.1:5001", "--duration", "2000ms"].map(String::from);
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

//! A sweep as a list of independent jobs — every (sweep value, AQM,
//! repeat) with its seed and its expected real duration — and a
//! deterministic, time-balanced partition of it into shards
//! (`softswitch-exp plan`, `run --shard K/N`), which `report` merges back
//! into the summary one run would have given.
//!
//! The expected duration is an estimate, from the scenario alone, of what
//! the traffic takes in emulated time, times the time dilation D, plus a
//! fixed cost per combination (the switch's start and stop, the ping probe,
//! settling):
//!
//! * workload: every client draws `flows` flows of the CDF's mean size at
//!   `load` of the link rate, so its traffic lasts flows · mean · 8 /
//!   (load · rate), plus the last flows' completion;
//! * incast: `queries` queries, each `interval` after the last one
//!   started or when it completed (at least fan-in · size at the link
//!   rate), whichever is later;
//! * static flows: the run's `duration` (and the latest start).
//!
//! Good enough to balance shards and to tell a user whether a sweep fits a
//! night; the real time of a run is in its `manifest.json` (`elapsed_s`).

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::kinds::Combination;
use super::scenario::{Scenario, SweepValue};

/// Real seconds a combination costs besides its traffic: the switch's start
/// (XDP attach, AF_XDP sockets), waiting for it, stopping it, reading the
/// hosts' counters (measured on the 2-vCPU VMs the project runs on: 3–6 s).
pub const OVERHEAD_S: f64 = 5.0;

/// One job of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    /// Its index in the unsharded run's order.
    pub index: usize,
    /// The AQM.
    pub aqm: String,
    /// The sweep value.
    pub sweep: SweepValue,
    /// The repeat.
    pub repeat: u32,
    /// The seed of its flow schedules (every AQM of a repeat shares it).
    pub seed: u64,
    /// Its results directory.
    pub dir: String,
    /// Expected traffic time, emulated seconds.
    pub emulated_s: f64,
    /// Expected real seconds: emulated · D plus [`OVERHEAD_S`].
    pub real_s: f64,
}

/// The jobs of a scenario, in the order an unsharded run makes them.
pub fn jobs(
    sc: &Scenario,
    quick: bool,
    first_repeat: u32,
    scenario_dir: &Path,
) -> Result<Vec<Job>> {
    let d = sc.dilation().factor();
    let mut out = Vec::new();
    for c in sc.combos_from(first_repeat) {
        let emulated_s = traffic_seconds(sc, c.sweep, quick, scenario_dir)?;
        out.push(Job {
            index: c.index,
            aqm: c.aqm,
            sweep: c.sweep,
            repeat: c.repeat,
            seed: sc.repeat_seed(c.repeat),
            dir: c.dir,
            emulated_s,
            real_s: emulated_s * d + OVERHEAD_S,
        });
    }
    Ok(out)
}

/// Expected emulated seconds of one combination's traffic (the kind's
/// estimate).
fn traffic_seconds(sc: &Scenario, sweep: SweepValue, quick: bool, base: &Path) -> Result<f64> {
    let rate = sc.switch.rate();
    let no_addr = |_: usize| String::new();
    sc.traffic.kind().seconds(&Combination {
        sweep,
        seed: sc.seed,
        quick,
        rate: &rate,
        scenario_dir: base,
        addr: &no_addr,
    })
}

/// Shard `k` of `n` (k from 0): which jobs it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// This shard, from 0 (as a Slurm array task id counts).
    pub k: usize,
    /// Shards in all.
    pub n: usize,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("`{s}`: write K/N, shard K (counted from 0, as Slurm's array task ids) of N, e.g. 0/4")
        };
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || k >= n {
            return Err(format!("`{s}`: K must be 0 … N-1 and N at least 1"));
        }
        Ok(Shard { k, n })
    }
}

/// Which shard each job goes to: longest expected time first, each to the
/// shard with the least expected time so far (the lowest-numbered on a
/// tie) — deterministic, and within one longest job of balanced.
pub fn assign(jobs: &[Job], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[b]
            .real_s
            .total_cmp(&jobs[a].real_s)
            .then(jobs[a].index.cmp(&jobs[b].index))
    });
    let mut load = vec![0.0f64; n.max(1)];
    let mut to = vec![0; jobs.len()];
    for i in order {
        let k = (0..load.len())
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[k] += jobs[i].real_s;
        to[i] = k;
    }
    to
}

/// The jobs of `shard`, in the unsharded run's order.
pub fn shard_jobs(jobs: &[Job], shard: Shard) -> Vec<Job> {
    let to = assign(jobs, shard.n);
    jobs.iter()
        .zip(to)
        .filter(|(_, k)| *k == shard.k)
        .map(|(j, _)| j.clone())
        .collect()
}

/// `1 h 05 min`, `12 min`, `40 s`.
pub fn fmt_seconds(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=89 => format!("{s} s"),
        90..=3599 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600 + 30) / 60),
    }
}

/// What `softswitch-exp plan` prints: every job, and per shard its total.
pub fn describe(sc: &Scenario, jobs: &[Job], shards: Option<usize>) -> Vec<String> {
    let total: f64 = jobs.iter().map(|j| j.real_s).sum();
    let mut out = vec![format!(
        "{} combinations, about {} in all (D = {}; {} s per combination besides its traffic)",
        jobs.len(),
        fmt_seconds(total),
        sc.dilation(),
        OVERHEAD_S
    )];
    let to = shards.map(|n| assign(jobs, n));
    for (i, j) in jobs.iter().enumerate() {
        let shard = to
            .as_ref()
            .map_or(String::new(), |t| format!("  shard {}", t[i]));
        out.push(format!(
            "  {:>4}  {:<28} seed {:<6} {:>8} emulated  {:>9} real{shard}",
            j.index,
            j.dir,
            j.seed,
            fmt_seconds(j.emulated_s),
            fmt_seconds(j.real_s)
        ));
    }
    if let (Some(n), Some(to)) = (shards, to) {
        for k in 0..n {
            let t: f64 = jobs
                .iter()
                .zip(&to)
                .filter(|(_, s)| **s == k)
                .map(|(j, _)| j.real_s)
                .sum();
            let c = to.iter().filter(|s| **s == k).count();
            out.push(format!(
                "shard {k}/{n}: {c} combinations, about {}  (softswitch-exp run … --shard {k}/{n})",
                fmt_seconds(t)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SC: &str = r#"
        dilation = 4
        repeat = 3
        [topology]
        hosts = 3
        [switch]
        aqm = ["dctcp", "tcn"]
        rate = "100mbit"
        [traffic]
        kind = "workload"
        cdf = "cdf/websearch.txt"
        load = [0.3, 0.7]
        flows = 100
        clients = [3]
        servers = [1, 2]
    "#;

    fn scenario() -> Scenario {
        Scenario::from_toml(SC, Path::new("t.toml")).unwrap()
    }

    fn base() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn every_combination_with_its_seed_and_time() {
        let sc = scenario();
        let j = jobs(&sc, false, 0, base()).unwrap();
        assert_eq!(j.len(), 2 * 2 * 3);
        assert_eq!(j[0].dir, "dctcp-load0.30-r0");
        assert_eq!(j[5].dir, "tcn-load0.30-r1");
        assert_eq!(
            (j[0].seed, j[5].seed),
            (sc.repeat_seed(0), sc.repeat_seed(1))
        );
        // 100 flows of the web search mean at 30 % of 100 Mbit/s, D = 4.
        let mean = crate::traffic::cdf::FlowSizeCdf::from_file(base().join("cdf/websearch.txt"))
            .unwrap()
            .mean();
        let want = 100.0 * mean * 8.0 / 30e6 + mean * 8.0 / 70e6;
        assert!(
            (j[0].emulated_s - want).abs() < 1e-9,
            "{} {want}",
            j[0].emulated_s
        );
        assert!((j[0].real_s - (4.0 * want + OVERHEAD_S)).abs() < 1e-9);
        // Load 0.7 takes less time than 0.3; --quick less than the full run.
        assert!(j[2].emulated_s < j[0].emulated_s);
        let q = jobs(&sc, true, 0, base()).unwrap();
        assert!(q[0].emulated_s < j[0].emulated_s / 4.0);
        // A later run's repeats: new seeds, new directories.
        let later = jobs(&sc, false, 3, base()).unwrap();
        assert_eq!(later[0].dir, "dctcp-load0.30-r3");
        assert_eq!(later[0].seed, sc.repeat_seed(3));
    }

    #[test]
    fn shards_cover_every_job_once_and_balance_time() {
        let sc = scenario();
        let j = jobs(&sc, false, 0, base()).unwrap();
        for n in 1..=5 {
            let mut seen: Vec<usize> = Vec::new();
            let mut totals = Vec::new();
            for k in 0..n {
                let s = shard_jobs(&j, Shard { k, n });
                // In the unsharded run's order.
                assert!(s.windows(2).all(|w| w[0].index < w[1].index));
                seen.extend(s.iter().map(|x| x.index));
                totals.push(s.iter().map(|x| x.real_s).sum::<f64>());
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..j.len()).collect::<Vec<_>>(), "n = {n}");
            let longest = j.iter().map(|x| x.real_s).fold(0.0, f64::max);
            let (lo, hi) = (
                totals.iter().copied().fold(f64::INFINITY, f64::min),
                totals.iter().copied().fold(0.0, f64::max),
            );
            assert!(hi - lo <= longest + 1e-9, "n = {n}: {totals:?}");
        }
        // Deterministic.
        assert_eq!(assign(&j, 3), assign(&j, 3));
    }

    #[test]
    fn an_incast_query_lasts_its_interval_or_its_responses() {
        let sc = Scenario::from_toml(
            r#"
            [topology]
            hosts = 5
            [switch]
            aqm = ["dctcp"]
            rate = "10gbit"
            [traffic]
            kind = "incast"
            receiver = 5
            servers = [1, 2, 3, 4]
            fanin = [1, 4]
            size = "1mb"
            queries = 10
            interval = "2ms"
        "#,
            Path::new("t.toml"),
        )
        .unwrap();
        let j = jobs(&sc, false, 0, base()).unwrap();
        // One 1 MB response: 0.84 ms < the 2 ms interval; four: 3.4 ms.
        let four = 4.0 * crate::units::parse_size("1mb").unwrap() as f64 * 8.0 / 10e9;
        assert!(four > 0.002);
        assert!(
            (j[0].emulated_s - 10.0 * 0.002).abs() < 1e-12,
            "{}",
            j[0].emulated_s
        );
        assert!(
            (j[1].emulated_s - 10.0 * four).abs() < 1e-12,
            "{}",
            j[1].emulated_s
        );
    }

    #[test]
    fn shard_names_read_as_slurm_counts() {
        assert_eq!("0/4".parse::<Shard>(), Ok(Shard { k: 0, n: 4 }));
        assert_eq!("3/4".parse::<Shard>().unwrap().to_string(), "3/4");
        for bad in ["4/4", "1", "a/2", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!("4/4".parse::<Shard>().unwrap_err().contains("0 … N-1"));
    }

    #[test]
    fn plan_says_the_total_and_each_shard() {
        let sc = scenario();
        let j = jobs(&sc, false, 0, base()).unwrap();
        let lines = describe(&sc, &j, Some(2));
        assert!(
            lines[0].starts_with("12 combinations, about "),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("D = 4"), "{}", lines[0]);
        assert!(lines[1].contains("dctcp-load0.30-r0"), "{}", lines[1]);
        assert!(
            lines.last().unwrap().starts_with("shard 1/2: "),
            "{lines:?}"
        );
        assert_eq!(fmt_seconds(40.0), "40 s");
        assert_eq!(fmt_seconds(725.0), "12 min");
        assert_eq!(fmt_seconds(3900.0), "1 h 05 min");
    }
}

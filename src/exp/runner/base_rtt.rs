//! `[topology] base_rtt`: the emulated base RTT held at every time dilation
//! D.
//!
//! The hosts' own round trip through the switch (their stacks, veths and
//! the switch's forwarding, h, real time) does not stretch with D, so in
//! emulated time it is h / D: a fixed `delay` that makes up a paper's base
//! RTT at D = 1 leaves the base RTT short by h · (1 − 1/D) at D. Before the
//! traffic the runner starts the switch once with no delay added, pings
//! between the hosts that exchange traffic, and gives every port the
//! one-way delay (base_rtt − h / D) / 2 (a path between two hosts crosses
//! one egress port each way), so that the emulated base RTT is base_rtt at
//! every D. What it measured and chose goes into manifest.json.

use std::fs::{self, File};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::{check_paths, traffic_pairs, whole_real_seconds, Proc, RemoveOnDrop, RunOptions};
use crate::exp::results::PingStats;
use crate::exp::scenario::Scenario;
use crate::timebase::Dilation;
use crate::topo::Topology;

/// Echo requests per pair of hosts; the first (ARP, cold caches) is not used.
const PINGS_PER_PAIR: usize = 11;

/// What `manifest.json`'s `base_rtt` records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaseRtt {
    /// The emulated base RTT asked for, µs.
    pub asked_us: f64,
    /// The run's D (the switch's and the generators').
    pub dilation: Dilation,
    /// The hosts' D (the run's, unless a negative control).
    pub host_dilation: Dilation,
    /// The hosts' own round trip through the switch with no delay added,
    /// real µs: the median of every reply but each pair's first.
    pub h_real_us: f64,
    /// The same in emulated time, h / D.
    pub h_emulated_us: f64,
    /// The RTT the switch adds, emulated µs: base_rtt − h / D.
    pub added_rtt_us: f64,
    /// The one-way delay every port gets (`--delay`), emulated µs: half of it.
    pub one_way_delay_us: f64,
    /// The pairs pinged, `h1→h5`.
    pub pairs: Vec<String>,
    /// Every reply used, real µs.
    pub samples_real_us: Vec<f64>,
}

impl BaseRtt {
    /// The one-way delay to pass to the switch.
    pub fn one_way_delay(&self) -> Duration {
        Duration::from_nanos((self.one_way_delay_us * 1e3).round() as u64)
    }

    /// One line for the console.
    pub fn describe(&self) -> String {
        format!(
            "base RTT {:.1} us emulated: the hosts' own round trip through the switch is {:.1} us \
             real = {:.1} us emulated at D = {}; the switch adds {:.1} us ({:.1} us one way on \
             every port)",
            self.asked_us,
            self.h_real_us,
            self.h_emulated_us,
            self.dilation,
            self.added_rtt_us,
            self.one_way_delay_us
        )
    }
}

/// The one-way delay every port gets so that the emulated base RTT is
/// `base`, when the hosts' own round trip is `h_real` of real time at
/// dilation `d`: (base − h_real / D) / 2. An error when h_real / D is
/// already above `base`.
pub fn one_way_delay(base: Duration, h_real: Duration, d: Dilation) -> Result<Duration, String> {
    let h = d.to_emulated(h_real);
    let added = base.checked_sub(h).ok_or_else(|| {
        format!(
            "topology.base_rtt = {base:?} cannot be held: the hosts' own round trip through the \
             switch is already {h_real:?} real = {h:?} emulated at D = {d} — raise base_rtt or D, \
             or leave base_rtt out"
        )
    })?;
    Ok(added / 2)
}

/// The median of `v` (0 when empty).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The record of a measurement: `replies` real µs per pair (each pair's
/// first dropped), `base` asked, at the scenario's D.
pub fn plan(
    sc: &Scenario,
    base: Duration,
    pairs: Vec<String>,
    replies: &[Vec<f64>],
) -> Result<BaseRtt, String> {
    let samples: Vec<f64> = replies
        .iter()
        .flat_map(|r| r.iter().skip(1).copied())
        .collect();
    if samples.is_empty() {
        return Err("no ping reply between the hosts to measure their round trip".into());
    }
    let d = sc.dilation();
    let h_real_us = median(&samples);
    let h_real = Duration::from_nanos((h_real_us * 1e3).round() as u64);
    let one_way = one_way_delay(base, h_real, d)?;
    let h_emulated_us = d.to_emulated(h_real).as_nanos() as f64 / 1e3;
    Ok(BaseRtt {
        asked_us: base.as_nanos() as f64 / 1e3,
        dilation: d,
        host_dilation: sc.host_dilation(),
        h_real_us,
        h_emulated_us,
        added_rtt_us: 2.0 * one_way.as_nanos() as f64 / 1e3,
        one_way_delay_us: one_way.as_nanos() as f64 / 1e3,
        pairs,
        samples_real_us: samples,
    })
}

/// Measures the hosts' round trip through the switch (its first AQM, no
/// delay, the run's D) and plans the delay for `base`; the probe's files
/// go to `<out>/base_rtt/`.
pub(super) fn measure(
    sc: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
    base: Duration,
) -> Result<BaseRtt> {
    let dir = opts.out.join("base_rtt");
    fs::create_dir_all(&dir)?;
    let socket =
        std::path::PathBuf::from(format!("/tmp/softswitch-exp-{}-base-rtt.sock", topo.prefix));
    let _ = fs::remove_file(&socket);
    let _socket_guard = RemoveOnDrop(socket.clone());
    let aqm = sc
        .switch
        .aqm
        .first()
        .ok_or_else(|| anyhow!("switch.aqm is empty"))?;
    let mut c = Command::new(&opts.switch_bin);
    c.args(super::switch_args(sc, topo, aqm, &socket, &opts.out, None));
    let out = File::create(dir.join("switch.json"))?;
    let log = File::create(dir.join("switch.log"))?;
    let mut switch = Proc::spawn("softswitch (base RTT probe)", c, out.into(), log.into())?;
    super::combo::wait_ready(&mut switch, &socket, &dir.join("switch.log"), opts)?;
    check_paths(sc, topo)?;
    let wait = whole_real_seconds(sc.dilation(), Duration::from_secs(1)).to_string();
    let mut names = Vec::new();
    let mut replies = Vec::new();
    let mut text = String::new();
    for (c, s) in traffic_pairs(sc) {
        let (from, to) = (&topo.hosts[c - 1], &topo.hosts[s - 1]);
        let o = from
            .exec(&[
                "ping",
                "-n",
                "-c",
                &PINGS_PER_PAIR.to_string(),
                "-i",
                "0.02",
                "-W",
                &wait,
                &to.ip.to_string(),
            ])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("ping from {} to {}", from.name, to.name))?;
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        replies.push(PingStats::from_ping_output(&t).rtts_us);
        names.push(format!("{}→{}", from.name, to.name));
        text.push_str(&t);
    }
    fs::write(dir.join("ping.txt"), &text)?;
    switch.stop(Duration::from_secs(10));
    let b = plan(sc, base, names, &replies).map_err(|e| anyhow!(e))?;
    if b.samples_real_us.len() < replies.len() * (PINGS_PER_PAIR - 1) / 2 {
        bail!(
            "measuring the base RTT: only {} of {} pings answered (see {})",
            b.samples_real_us.len(),
            replies.len() * (PINGS_PER_PAIR - 1),
            dir.join("ping.txt").display()
        );
    }
    Ok(b)
}

/// `--delay <one way>` for the switch, in nanoseconds (exact).
pub fn delay_args(one_way: Duration) -> [String; 2] {
    ["--delay".into(), format!("{}ns", one_way.as_nanos())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn us(x: u64) -> Duration {
        Duration::from_micros(x)
    }

    fn d(x: f64) -> Dilation {
        Dilation::new(x).unwrap()
    }

    #[test]
    fn the_switch_adds_what_the_hosts_round_trip_leaves_of_the_base() {
        // 250 µs asked; the hosts take 50 µs real through the switch.
        // D = 1: 200 µs added, 100 µs each way.
        assert_eq!(one_way_delay(us(250), us(50), d(1.0)), Ok(us(100)));
        // D = 40: 50 µs real is 1.25 µs emulated; 248.75 µs added.
        assert_eq!(
            one_way_delay(us(250), us(50), d(40.0)),
            Ok(Duration::from_nanos(124_375))
        );
        // D = 4, h = 120 µs real = 30 µs emulated.
        assert_eq!(one_way_delay(us(250), us(120), d(4.0)), Ok(us(110)));
        // Exactly the base: nothing added.
        assert_eq!(one_way_delay(us(100), us(400), d(4.0)), Ok(Duration::ZERO));
        // Beyond it: refused, saying by how much and what to do.
        let e = one_way_delay(us(30), us(50), d(1.0)).unwrap_err();
        assert!(e.contains("cannot be held") && e.contains("50µs"), "{e}");
        assert!(e.contains("raise base_rtt or D"), "{e}");
        // The same h at a larger D fits.
        assert!(one_way_delay(us(30), us(50), d(2.0)).is_ok());
    }

    #[test]
    fn the_plan_uses_the_median_reply_without_each_pairs_first() {
        let text = "dilation = 4\n[topology]\nhosts = 3\nbase_rtt = \"250us\"\n[switch]\naqm = [\"dctcp\"]\n\
                    [traffic]\nkind = \"static\"\nduration = \"1s\"\nflows = [{ server = 1, client = 3 }]\n";
        let sc = Scenario::from_toml(text, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        assert_eq!(sc.base_rtt(), Some(us(250)));
        // First replies (900, 800) are ARP and cold caches: left out.
        let replies = vec![vec![900.0, 100.0, 120.0, 140.0], vec![800.0, 160.0]];
        let b = plan(&sc, us(250), vec!["h3→h1".into(), "h2→h1".into()], &replies).unwrap();
        assert_eq!(b.samples_real_us, vec![100.0, 120.0, 140.0, 160.0]);
        assert_eq!(b.h_real_us, 130.0);
        assert_eq!(b.h_emulated_us, 32.5);
        assert_eq!(b.added_rtt_us, 217.5);
        assert_eq!(b.one_way_delay_us, 108.75);
        assert_eq!(b.one_way_delay(), Duration::from_nanos(108_750));
        assert_eq!(delay_args(b.one_way_delay()), ["--delay", "108750ns"]);
        assert_eq!((b.dilation, b.host_dilation), (d(4.0), d(4.0)));
        let line = b.describe();
        assert!(
            line.contains("130.0 us real = 32.5 us emulated at D = 4"),
            "{line}"
        );
        // The record in manifest.json.
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["h_real_us"], 130.0);
        assert_eq!(v["dilation"], 4.0);
        assert_eq!(v["one_way_delay_us"], 108.75);
        // Nothing answered: refused.
        assert!(plan(&sc, us(250), vec![], &[vec![900.0]]).is_err());
        // h / D above the base: refused.
        let e = plan(&sc, us(20), vec![], &replies).unwrap_err();
        assert!(e.contains("cannot be held"), "{e}");
    }
}

//! `kind = "incast"`: N senders answer one receiver at once, at swept
//! fan-ins; one `softswitch-tg incast` in the receiver, query after query.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use super::{
    check_dscp, check_duration, check_hosts, flow_rows, strings, Combination, Generator, Report,
    TrafficKind,
};
use crate::exp::results::{ComboResult, QueryRow};
use crate::exp::sweep::SweepValue;
use crate::units::{parse_duration, parse_rate, parse_size};

/// `kind = "incast"`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// The receiving host (1-based).
    pub receiver: usize,
    /// Candidate senders (1-based); fan-in `n` uses the first `n`.
    pub servers: Vec<usize>,
    /// Fan-ins to sweep.
    pub fanin: Vec<usize>,
    /// Bytes each sender answers per query, e.g. `"64kb"`.
    pub size: String,
    /// Queries per combination.
    #[serde(default = "default_queries")]
    pub queries: u32,
    /// Queries with `--quick` (default `queries / 5`, at least 5).
    #[serde(default)]
    pub quick_queries: Option<u32>,
    /// Start-to-start spacing of queries.
    #[serde(default = "default_interval")]
    pub interval: String,
    /// DSCP of every flow.
    #[serde(default)]
    pub dscp: u8,
    /// Fan-ins above the number of servers reuse them in turn: fan-in `n`
    /// opens `n` connections, the `k`-th to `servers[k mod len]` (several
    /// responders per sending host, as the R-AQM incast of 1000 senders
    /// needs on a machine with few namespaces). Default false.
    #[serde(default)]
    pub cycle_servers: bool,
    /// A new connection per responder for every query (`softswitch-tg
    /// incast --fresh`), so every response starts from the initial window
    /// as the R-AQM paper's flows do. Default false (persistent).
    #[serde(default)]
    pub fresh: bool,
}

impl IncastSpec {
    /// Queries per combination, honouring `--quick`.
    pub fn queries_for(&self, quick: bool) -> u32 {
        if quick {
            self.quick_queries
                .unwrap_or((self.queries / 5).max(5).min(self.queries))
        } else {
            self.queries
        }
    }

    /// The sending hosts of fan-in `n`, one entry per connection.
    pub fn senders(&self, n: usize) -> Vec<usize> {
        if self.servers.is_empty() {
            return Vec::new();
        }
        (0..n)
            .map(|k| self.servers[k % self.servers.len()])
            .collect()
    }
}

fn default_queries() -> u32 {
    100
}
fn default_interval() -> String {
    "10ms".into()
}

impl TrafficKind for IncastSpec {
    fn validate(&self, hosts: usize) -> Result<(), String> {
        validate(self, hosts)
    }

    fn sweep(&self) -> Vec<SweepValue> {
        self.fanin.iter().map(|&n| SweepValue::Fanin(n)).collect()
    }

    fn x_label(&self) -> &'static str {
        "fan-in"
    }

    fn headline(&self) -> &'static [&'static str] {
        &["qct.mean_us", "qct.p99_us", "goodput_mbps", "rtos", "drops"]
    }

    fn pairs(&self) -> Vec<(usize, usize)> {
        super::dedup_pairs(self.servers.iter().map(|&s| (self.receiver, s)).collect())
    }

    /// A query starts `interval` after the last one started, or when it
    /// completed: at least its n responses at the link rate.
    fn seconds(&self, c: &Combination) -> Result<f64> {
        let rate = parse_rate(c.rate)
            .map_err(|e| anyhow!("switch.rate: {e}"))?
            .bps() as f64;
        let n = match c.sweep {
            SweepValue::Fanin(n) => n as f64,
            _ => self.servers.len() as f64,
        };
        let size = parse_size(&self.size).unwrap_or(0) as f64;
        let drain = if rate > 0.0 {
            n * size * 8.0 / rate
        } else {
            0.0
        };
        let interval = parse_duration(&self.interval).map_or(0.0, |ns| ns as f64 / 1e9);
        Ok(self.queries_for(c.quick) as f64 * interval.max(drain))
    }

    fn keep_heaviest(&mut self) {
        if let Some(m) = self.fanin.iter().copied().max() {
            self.fanin = vec![m];
        }
    }

    /// The receiver asks the first `fan-in` senders at once.
    fn generators(&self, c: &Combination) -> Result<Vec<Generator>> {
        let SweepValue::Fanin(n) = c.sweep else {
            bail!("incast combo without a fan-in")
        };
        let servers: Vec<String> = self.senders(n).iter().map(|&h| (c.addr)(h)).collect();
        let mut args = strings(&["incast", "--servers"]);
        args.extend([
            servers.join(","),
            "--size".into(),
            self.size.clone(),
            "--queries".into(),
            self.queries_for(c.quick).to_string(),
            "--interval".into(),
            self.interval.clone(),
            "--dscp".into(),
            self.dscp.to_string(),
        ]);
        args.extend(strings(&[
            "--out",
            "incast_flows.txt",
            "--qct-out",
            "incast_queries.txt",
            "--json-out",
            "incast.json",
        ]));
        if self.fresh {
            args.push("--fresh".into());
        }
        Ok(vec![Generator {
            host: self.receiver,
            args,
            stem: "incast".into(),
            label: format!("h{}", self.receiver),
            dscp: self.dscp,
        }])
    }

    fn read(&self, g: &Report, r: &mut ComboResult) -> Result<()> {
        let q = g.json["config"]["queries"].as_u64().unwrap_or(0) as usize;
        let n = g.json["config"]["servers"]
            .as_array()
            .map_or(0, |a| a.len());
        r.expected += q * n;
        r.flows.extend(flow_rows(g)?);
        r.queries.extend(serde_json::from_value::<Vec<QueryRow>>(
            g.json["report"]["queries"].clone(),
        )?);
        Ok(())
    }
}

/// `[traffic]`, `kind = "incast"`.
fn validate(i: &IncastSpec, hosts: usize) -> Result<(), String> {
    if i.fanin.is_empty() {
        return Err(
            "traffic.fanin is empty — list at least one fan-in, e.g. fanin = [4, 8]".into(),
        );
    }
    check_hosts(hosts, "traffic.receiver", &[i.receiver])?;
    check_hosts(hosts, "traffic.servers", &i.servers)?;
    if i.servers.contains(&i.receiver) {
        return Err(format!(
            "traffic.receiver {} is also in traffic.servers",
            i.receiver
        ));
    }
    for &n in &i.fanin {
        if n == 0 || (n > i.servers.len() && !i.cycle_servers) {
            return Err(format!(
                "traffic.fanin {n} needs {n} senders but traffic.servers has {} (topology.hosts = {}) — add hosts or lower the fan-in",
                i.servers.len(),
                hosts
            ));
        }
    }
    let size = parse_size(&i.size).map_err(|e| format!("traffic.size `{}`: {e}", i.size))?;
    if size == 0 {
        return Err("traffic.size must be positive".into());
    }
    if i.queries == 0 || i.quick_queries == Some(0) {
        return Err("traffic.queries must be at least 1".into());
    }
    check_duration("traffic.interval", &i.interval)?;
    check_dscp(i.dscp)
}

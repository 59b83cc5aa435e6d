//! `kind = "workload"`: Poisson arrivals of flows with sizes from a CDF
//! (TrafficGenerator's format), at swept loads of each client's downlink;
//! one `softswitch-tg client` per receiving host, asking every server.

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use super::{
    check_hosts, flow_rows, resolve_path, strings, Combination, Generator, Report, TrafficKind,
};
use crate::exp::results::ComboResult;
use crate::exp::sweep::SweepValue;
use crate::units::parse_rate;

/// `kind = "workload"`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Flow-size CDF file, relative to the scenario file's directory or the
    /// current directory (TrafficGenerator format).
    pub cdf: String,
    /// Loads of each client's downlink to sweep, each in (0, 1].
    pub load: Vec<f64>,
    /// Flows per client per combination.
    pub flows: usize,
    /// Flows per client with `--quick` (default `flows / 10`, at least 20).
    #[serde(default)]
    pub quick_flows: Option<usize>,
    /// Persistent connections per client per server.
    #[serde(default = "default_conns")]
    pub conns: usize,
    /// DSCP mix, `softswitch-tg --dscp` syntax (`"0"`, `"0,1,2,3"`, `"0:25,8:75"`).
    #[serde(default = "default_dscp")]
    pub dscp: String,
    /// Receiving hosts (1-based); each runs a client asking every server.
    pub clients: Vec<usize>,
    /// Sending hosts (1-based); each runs a server.
    pub servers: Vec<usize>,
}

fn default_conns() -> usize {
    4
}
fn default_dscp() -> String {
    "0".into()
}

impl WorkloadSpec {
    /// Flows per client, honouring `--quick`.
    pub fn flows_for(&self, quick: bool) -> usize {
        if quick {
            self.quick_flows
                .unwrap_or((self.flows / 10).max(20).min(self.flows))
        } else {
            self.flows
        }
    }
}

impl TrafficKind for WorkloadSpec {
    fn validate(&self, hosts: usize) -> Result<(), String> {
        validate(self, hosts)
    }

    fn sweep(&self) -> Vec<SweepValue> {
        self.load.iter().map(|&l| SweepValue::Load(l)).collect()
    }

    fn x_label(&self) -> &'static str {
        "load"
    }

    fn headline(&self) -> &'static [&'static str] {
        &[
            "fct.small.mean_us",
            "fct.small.p99_us",
            "fct.large.mean_us",
            "fct.all.mean_us",
            "drops",
            "rtos",
        ]
    }

    fn pairs(&self) -> Vec<(usize, usize)> {
        super::dedup_pairs(
            self.clients
                .iter()
                .flat_map(|&c| self.servers.iter().map(move |&s| (c, s)))
                .collect(),
        )
    }

    fn seconds(&self, c: &Combination) -> Result<f64> {
        let SweepValue::Load(load) = c.sweep else {
            bail!("a workload combination without a load")
        };
        let rate = parse_rate(c.rate)
            .map_err(|e| anyhow!("switch.rate: {e}"))?
            .bps() as f64;
        let path = resolve_path(c.scenario_dir, &self.cdf);
        let cdf = crate::traffic::cdf::FlowSizeCdf::from_file(&path)
            .map_err(|e| anyhow!("traffic.cdf {}: {e}", path.display()))?;
        let flows = self.flows_for(c.quick) as f64;
        if load <= 0.0 || rate <= 0.0 {
            bail!("a workload needs a positive load and rate");
        }
        // The arrivals span flows / λ; the last ones finish about one
        // mean flow time after (at the leftover capacity).
        let span = flows * cdf.mean() * 8.0 / (load * rate);
        Ok(span + cdf.mean() * 8.0 / ((1.0 - load).max(0.05) * rate))
    }

    fn keep_heaviest(&mut self) {
        if let Some(m) = self.load.iter().copied().reduce(f64::max) {
            self.load = vec![m];
        }
    }

    fn preflight(&self, scenario_dir: &std::path::Path) -> Result<()> {
        let cdf = resolve_path(scenario_dir, &self.cdf);
        crate::traffic::cdf::FlowSizeCdf::from_file(&cdf)
            .map_err(|e| anyhow!("traffic.cdf {}: {e}", cdf.display()))?;
        Ok(())
    }

    /// One client per receiving host, asking every server.
    fn generators(&self, c: &Combination) -> Result<Vec<Generator>> {
        let SweepValue::Load(load) = c.sweep else {
            bail!("workload combo without a load")
        };
        let cdf = resolve_path(c.scenario_dir, &self.cdf);
        let servers: Vec<String> = self.servers.iter().map(|&h| (c.addr)(h)).collect();
        let mut out = Vec::new();
        for (k, &client) in self.clients.iter().enumerate() {
            let stem = format!("flows-h{client}");
            let mut args = strings(&["client", "--servers"]);
            args.extend([
                servers.join(","),
                "--cdf".into(),
                cdf.display().to_string(),
                "--load".into(),
                load.to_string(),
                "--rate".into(),
                c.rate.to_string(),
                "--flows".into(),
                self.flows_for(c.quick).to_string(),
                "--conns".into(),
                self.conns.to_string(),
                "--dscp".into(),
                self.dscp.clone(),
                "--seed".into(),
                (c.seed + k as u64).to_string(),
                "--out".into(),
                format!("{stem}.txt"),
                "--json-out".into(),
                format!("{stem}.json"),
            ]);
            out.push(Generator {
                host: client,
                args,
                label: format!("h{client}"),
                stem,
                dscp: 0,
            });
        }
        Ok(out)
    }

    fn read(&self, g: &Report, r: &mut ComboResult) -> Result<()> {
        r.expected += g.json["config"]["flows"].as_u64().unwrap_or(0) as usize;
        r.flows.extend(flow_rows(g)?);
        Ok(())
    }
}

/// `[traffic]`, `kind = "workload"`.
fn validate(w: &WorkloadSpec, hosts: usize) -> Result<(), String> {
    if w.load.is_empty() {
        return Err("traffic.load is empty — list at least one load, e.g. load = [0.5]".into());
    }
    for &l in &w.load {
        if !(l > 0.0 && l <= 1.0) {
            return Err(format!("traffic.load {l} is outside (0, 1]"));
        }
    }
    if w.flows == 0 || w.quick_flows == Some(0) {
        return Err("traffic.flows must be at least 1".into());
    }
    if w.conns == 0 {
        return Err("traffic.conns must be at least 1".into());
    }
    if w.clients.is_empty() || w.servers.is_empty() {
        return Err("traffic.clients and traffic.servers each need at least one host".into());
    }
    check_hosts(hosts, "traffic.clients", &w.clients)?;
    check_hosts(hosts, "traffic.servers", &w.servers)?;
    if let Some(h) = w.clients.iter().find(|h| w.servers.contains(h)) {
        return Err(format!(
            "host {h} is both a client and a server — a receiving host's downlink is the bottleneck the load refers to; use separate hosts"
        ));
    }
    w.dscp
        .parse::<crate::traffic::dscp::DscpMix>()
        .map_err(|e| format!("traffic.dscp `{}`: {e}", w.dscp))?;
    Ok(())
}

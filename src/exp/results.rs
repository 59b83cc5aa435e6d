//! What one combination produced and how the combinations are summarised,
//! the way the papers present them (TCN §6 Fig. 9–12, ECN♯ §5): FCT mean
//! and p99 by size class per (AQM, load), normalised to a baseline AQM at
//! the same load; QCT vs fan-in for incast; drops, marks and RTOs.
//!
//! Repetitions of one (AQM, x) are pooled: their flows go into one FCT
//! distribution (a p99 over all flows, not an average of p99s); counters are
//! averaged per run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::scenario::SweepValue;
use crate::traffic::record::FlowRecord;
use crate::traffic::summary::{fct_stats, FctStats, FctSummary};

/// One flow as `softswitch-tg` writes it in its JSON (`report.flows`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct FlowRow {
    /// Response size, bytes.
    pub size: u64,
    /// Flow completion time, µs.
    pub fct_us: u64,
    /// DSCP.
    pub dscp: u8,
    /// Start, µs since the client started.
    pub start_us: u64,
}

/// One incast query (`report.queries`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct QueryRow {
    /// Bytes asked for in total.
    pub size: u64,
    /// Query completion time, µs.
    pub qct_us: u64,
    /// Senders asked.
    pub fanout: usize,
}

/// Drops and marks the switch counted (all ports), from its exit JSON.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SwitchTotals {
    /// Packets dropped for any reason.
    pub dropped_pkts: u64,
    /// Packets CE-marked for any reason.
    pub marked_pkts: u64,
    /// Largest port backlog seen, bytes.
    pub max_backlog_bytes: u64,
    /// Bytes sent on all ports.
    pub dequeued_bytes: u64,
}

impl SwitchTotals {
    /// Sums `ports[].egress.port.{dropped,marked}.*.pkts` of a switch snapshot.
    pub fn from_snapshot(v: &serde_json::Value) -> Self {
        let mut t = SwitchTotals::default();
        for p in v["ports"].as_array().into_iter().flatten() {
            let port = &p["egress"]["port"];
            t.dropped_pkts += sum_pkts(&port["dropped"]);
            t.marked_pkts += sum_pkts(&port["marked"]);
            t.dequeued_bytes += port["dequeued"]["bytes"].as_u64().unwrap_or(0);
            t.max_backlog_bytes = t
                .max_backlog_bytes
                .max(port["max_backlog_bytes"].as_u64().unwrap_or(0));
        }
        t
    }
}

/// `Σ reason.pkts` over an object of `{reason: {bytes, pkts}}`.
pub fn sum_pkts(reasons: &serde_json::Value) -> u64 {
    reasons
        .as_object()
        .map(|o| o.values().filter_map(|r| r["pkts"].as_u64()).sum())
        .unwrap_or(0)
}

/// Host TCP counters (`nstat`), summed over hosts, after − before.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HostTotals {
    /// `TcpRetransSegs`.
    pub retrans_segs: u64,
    /// `TcpExtTCPTimeouts` (RTOs).
    pub timeouts: u64,
    /// `TcpExtTCPDeliveredCE`.
    pub delivered_ce: u64,
}

/// Goodput of one static flow over the run.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct StaticFlowResult {
    /// `h<server>→h<client> dscp <d>`.
    pub label: String,
    /// DSCP.
    pub dscp: u8,
    /// Mean goodput, Mbit/s.
    pub goodput_mbps: f64,
    /// `(t_ms, Mbit/s)` samples, from the traffic start.
    pub samples: Vec<(u64, f64)>,
    /// When the flow started, ms from the traffic start.
    #[serde(default)]
    pub start_ms: u64,
    /// Bytes it asked for (None: ran for the whole duration).
    #[serde(default)]
    pub size: Option<u64>,
    /// Its completion time when sized and completed, µs.
    #[serde(default)]
    pub fct_us: Option<u64>,
}

/// The fidelity guard's verdict on one combination (from the switch's exit
/// JSON, see `fidelity`): whether the machine emulated the link, and why not.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Fidelity {
    /// The switch judged the run faithful.
    pub faithful: bool,
    /// Why not.
    pub reasons: Vec<String>,
    /// Largest share of backlogged link time any port lost.
    pub max_lost_fraction: f64,
    /// Data-path stalls while frames waited, and the longest, µs.
    pub stalls: u64,
    /// Longest stall, µs.
    pub max_stall_us: f64,
}

impl Fidelity {
    /// Reads `fidelity`, `ports[].link` and `loop` of a switch snapshot; a
    /// snapshot without a verdict is not faithful ("no verdict").
    pub fn from_snapshot(v: &serde_json::Value) -> Self {
        let f = &v["fidelity"];
        let Some(faithful) = f["faithful"].as_bool() else {
            return Fidelity {
                reasons: vec!["the switch reported no fidelity verdict".into()],
                ..Default::default()
            };
        };
        Fidelity {
            faithful,
            reasons: f["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(String::from))
                .collect(),
            max_lost_fraction: v["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["link"]["lost_fraction"].as_f64())
                .fold(0.0, f64::max),
            stalls: v["loop"]["stalls"].as_u64().unwrap_or(0),
            max_stall_us: v["loop"]["max_stall_us"].as_f64().unwrap_or(0.0),
        }
    }
}

/// RTT of the ping probe over one run, µs.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PingStats {
    /// Replies.
    pub count: usize,
    /// Probes sent without a reply.
    pub lost: usize,
    /// Mean RTT.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Every RTT, µs, in order (for CDF figures).
    pub rtts_us: Vec<f64>,
}

impl PingStats {
    /// Parses iputils `ping -n` output (`... time=0.123 ms` per reply and
    /// the `N packets transmitted, M received` line).
    pub fn from_ping_output(text: &str) -> Self {
        let rtts: Vec<f64> = text
            .lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.trim_end_matches(" ms").trim().parse::<f64>().ok())
            .map(|ms| ms * 1000.0)
            .collect();
        let sent = text
            .lines()
            .find(|l| l.contains("packets transmitted"))
            .and_then(|l| l.split_whitespace().next()?.parse::<usize>().ok())
            .unwrap_or(rtts.len());
        let mut sorted = rtts.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| {
            if sorted.is_empty() {
                0.0
            } else {
                sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
            }
        };
        PingStats {
            count: rtts.len(),
            lost: sent.saturating_sub(rtts.len()),
            mean_us: if rtts.is_empty() {
                0.0
            } else {
                rtts.iter().sum::<f64>() / rtts.len() as f64
            },
            p50_us: q(0.5),
            p99_us: q(0.99),
            rtts_us: rtts,
        }
    }
}

/// Everything one combination produced.
#[derive(Clone, Debug, Serialize)]
pub struct ComboResult {
    /// The AQM.
    pub aqm: String,
    /// The swept value.
    pub sweep: SweepValue,
    /// Repetition.
    pub repeat: u32,
    /// Subdirectory with its raw files.
    pub dir: String,
    /// Flows (workload) or per-sender flows (incast) the run asked for.
    pub expected: usize,
    /// Flows recorded.
    pub flows: Vec<FlowRow>,
    /// Incast queries recorded.
    pub queries: Vec<QueryRow>,
    /// Static flows.
    pub statics: Vec<StaticFlowResult>,
    /// Wall time of the traffic, µs.
    pub wall_us: u64,
    /// The switch's counters.
    pub switch: SwitchTotals,
    /// The hosts' counters.
    pub hosts: HostTotals,
    /// Where the queue figures' samples came from: `switch_timeseries.csv`
    /// (the switch's own, every 1 ms) or `timeseries.csv` (polled, 100 ms).
    pub queue_samples: String,
    /// The fidelity guard's verdict.
    pub fidelity: Fidelity,
    /// Backlog of the busiest port over the run (from the queue figures'
    /// samples): mean and 99th percentile, KB.
    pub queue_mean_kb: f64,
    /// 99th percentile backlog, KB.
    pub queue_p99_kb: f64,
    /// The ping probe's RTTs, when the scenario has one.
    pub ping: Option<PingStats>,
}

/// FCT / QCT statistics of one (AQM, x) over its repetitions.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PointSummary {
    /// The AQM.
    pub aqm: String,
    /// Swept value (load or fan-in; 0 for static).
    pub x: f64,
    /// Runs pooled.
    pub runs: usize,
    /// FCTs by size class over all runs' flows.
    pub fct: FctSummary,
    /// Query completion times (incast).
    pub qct: Option<FctStats>,
    /// Aggregate goodput per run, Mbit/s (mean over runs).
    pub goodput_mbps: f64,
    /// Per static flow: mean goodput, Mbit/s (mean over runs).
    pub static_goodput_mbps: BTreeMap<String, f64>,
    /// Static flows per DSCP (so per queue under the default map): summed
    /// goodput, Mbit/s (mean over runs).
    pub dscp_goodput_mbps: BTreeMap<u8, f64>,
    /// Flows asked for vs recorded, over all runs.
    pub expected: usize,
    /// Recorded.
    pub recorded: usize,
    /// Mean per run.
    pub dropped_pkts: f64,
    /// Mean per run.
    pub marked_pkts: f64,
    /// Mean per run (RTOs, `TcpExtTCPTimeouts`).
    pub timeouts: f64,
    /// Mean per run.
    pub retrans_segs: f64,
    /// FCT relative to the baseline AQM at the same x.
    pub normalized: Option<Normalized>,
    /// Every pooled run was judged faithful by the switch's fidelity guard.
    pub faithful: bool,
    /// `dir: reason` for each run that was not.
    pub not_faithful: Vec<String>,
    /// Largest share of backlogged link time lost in any pooled run.
    pub max_lost_fraction: f64,
    /// The ping probe's RTTs pooled over runs (static scenarios with a probe).
    pub ping: Option<PingSummary>,
    /// Sized static flows: completion time per flow label, ms (mean over runs).
    pub static_fct_ms: BTreeMap<String, f64>,
    /// Busiest port's mean backlog, KB (mean over runs).
    pub queue_mean_kb: f64,
    /// Busiest port's 99th-percentile backlog, KB (mean over runs).
    pub queue_p99_kb: f64,
}

/// Pooled ping RTTs, µs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PingSummary {
    /// Replies.
    pub count: usize,
    /// Probes lost.
    pub lost: usize,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// The four ratios the TCN / ECN♯ figures plot (this AQM ÷ baseline).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Normalized {
    /// Small flows (< 100 KB), mean FCT.
    pub small_mean: Option<f64>,
    /// Small flows, p99 FCT.
    pub small_p99: Option<f64>,
    /// Large flows (> 10 MB), mean FCT.
    pub large_mean: Option<f64>,
    /// All flows, mean FCT.
    pub all_mean: Option<f64>,
    /// Incast: mean QCT.
    pub qct_mean: Option<f64>,
}

fn to_records(rows: &[FlowRow]) -> Vec<FlowRecord> {
    rows.iter()
        .map(|r| FlowRecord::completed(0, 0, r.size, r.fct_us, r.dscp, 0, r.start_us))
        .collect()
}

/// Pools the combinations by (AQM, x) and normalises to `baseline`; the
/// order is x ascending, then AQM in `aqm_order`.
pub fn summarize(
    results: &[ComboResult],
    aqm_order: &[String],
    baseline: &str,
) -> Vec<PointSummary> {
    let mut xs: Vec<f64> = results.iter().map(|r| r.sweep.x()).collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    let mut out = Vec::new();
    for &x in &xs {
        for aqm in aqm_order {
            let runs: Vec<&ComboResult> = results
                .iter()
                .filter(|r| &r.aqm == aqm && r.sweep.x() == x)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let n = runs.len() as f64;
            let flows: Vec<FlowRow> = runs.iter().flat_map(|r| r.flows.iter().cloned()).collect();
            let wall: u64 = runs.iter().map(|r| r.wall_us).sum();
            let qcts: Vec<u64> = runs
                .iter()
                .flat_map(|r| r.queries.iter().map(|q| q.qct_us))
                .collect();
            let mut static_goodput: BTreeMap<String, f64> = BTreeMap::new();
            let mut dscp_goodput: BTreeMap<u8, f64> = BTreeMap::new();
            for r in &runs {
                for s in &r.statics {
                    *static_goodput.entry(s.label.clone()).or_default() += s.goodput_mbps / n;
                    *dscp_goodput.entry(s.dscp).or_default() += s.goodput_mbps / n;
                }
            }
            let mean =
                |f: &dyn Fn(&ComboResult) -> u64| runs.iter().map(|r| f(r) as f64).sum::<f64>() / n;
            let static_sum: f64 = static_goodput.values().sum();
            let mut static_fct: BTreeMap<String, (f64, u32)> = BTreeMap::new();
            for r in &runs {
                for st in &r.statics {
                    if let Some(f) = st.fct_us {
                        let e = static_fct.entry(st.label.clone()).or_default();
                        e.0 += f as f64 / 1e3;
                        e.1 += 1;
                    }
                }
            }
            let pings: Vec<&PingStats> = runs.iter().filter_map(|r| r.ping.as_ref()).collect();
            let ping = (!pings.is_empty()).then(|| {
                let mut all = PingStats::default();
                for p in &pings {
                    all.rtts_us.extend_from_slice(&p.rtts_us);
                    all.lost += p.lost;
                }
                let mut v: Vec<u64> = all.rtts_us.iter().map(|&x| x.round() as u64).collect();
                v.sort_unstable();
                let st = fct_stats(&v);
                PingSummary {
                    count: v.len(),
                    lost: all.lost,
                    mean_us: st.as_ref().map_or(0.0, |s| s.mean_us),
                    p50_us: st.as_ref().map_or(0.0, |s| s.p50_us as f64),
                    p99_us: st.as_ref().map_or(0.0, |s| s.p99_us as f64),
                }
            });
            let not_faithful: Vec<String> = runs
                .iter()
                .filter(|r| !r.fidelity.faithful)
                .map(|r| format!("{}: {}", r.dir, r.fidelity.reasons.join("; ")))
                .collect();
            let fct = FctSummary::from_records(&to_records(&flows), wall);
            out.push(PointSummary {
                aqm: aqm.clone(),
                x,
                runs: runs.len(),
                goodput_mbps: if static_goodput.is_empty() {
                    fct.goodput_mbps
                } else {
                    static_sum
                },
                fct,
                qct: fct_stats(&qcts),
                static_goodput_mbps: static_goodput,
                dscp_goodput_mbps: dscp_goodput,
                expected: runs.iter().map(|r| r.expected).sum(),
                recorded: runs
                    .iter()
                    .map(|r| r.flows.len().max(r.statics.len()))
                    .sum(),
                dropped_pkts: mean(&|r| r.switch.dropped_pkts),
                marked_pkts: mean(&|r| r.switch.marked_pkts),
                timeouts: mean(&|r| r.hosts.timeouts),
                retrans_segs: mean(&|r| r.hosts.retrans_segs),
                normalized: None,
                faithful: not_faithful.is_empty(),
                not_faithful,
                max_lost_fraction: runs
                    .iter()
                    .map(|r| r.fidelity.max_lost_fraction)
                    .fold(0.0, f64::max),
                ping,
                static_fct_ms: static_fct
                    .into_iter()
                    .map(|(k, (sum, n))| (k, sum / n as f64))
                    .collect(),
                queue_mean_kb: runs.iter().map(|r| r.queue_mean_kb).sum::<f64>() / n,
                queue_p99_kb: runs.iter().map(|r| r.queue_p99_kb).sum::<f64>() / n,
            });
        }
    }
    let base: Vec<PointSummary> = out.iter().filter(|p| p.aqm == baseline).cloned().collect();
    for p in &mut out {
        if let Some(b) = base.iter().find(|b| b.x == p.x) {
            p.normalized = Some(normalize(p, b));
        }
    }
    out
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn normalize(p: &PointSummary, b: &PointSummary) -> Normalized {
    let mean = |s: &Option<FctStats>| s.as_ref().map(|s| s.mean_us);
    let p99 = |s: &Option<FctStats>| s.as_ref().map(|s| s.p99_us as f64);
    Normalized {
        small_mean: ratio(mean(&p.fct.small), mean(&b.fct.small)),
        small_p99: ratio(p99(&p.fct.small), p99(&b.fct.small)),
        large_mean: ratio(mean(&p.fct.large), mean(&b.fct.large)),
        all_mean: ratio(mean(&p.fct.all), mean(&b.fct.all)),
        qct_mean: ratio(mean(&p.qct), mean(&b.qct)),
    }
}

/// Parses `nstat -az` output into counter → value.
pub fn parse_nstat(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_owned(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// Counter differences `after − before`, summed into [`HostTotals`].
pub fn host_delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> HostTotals {
    let d = |k: &str| {
        after
            .get(k)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.get(k).copied().unwrap_or(0))
    };
    HostTotals {
        retrans_segs: d("TcpRetransSegs"),
        timeouts: d("TcpExtTCPTimeouts"),
        delivered_ce: d("TcpExtTCPDeliveredCE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(size: u64, fct_us: u64) -> FlowRow {
        FlowRow {
            size,
            fct_us,
            dscp: 0,
            start_us: 0,
        }
    }

    fn combo(aqm: &str, load: f64, repeat: u32, flows: Vec<FlowRow>, drops: u64) -> ComboResult {
        ComboResult {
            aqm: aqm.into(),
            sweep: SweepValue::Load(load),
            repeat,
            dir: String::new(),
            expected: flows.len(),
            flows,
            queries: vec![],
            statics: vec![],
            wall_us: 1_000_000,
            switch: SwitchTotals {
                dropped_pkts: drops,
                ..Default::default()
            },
            hosts: HostTotals {
                timeouts: repeat as u64,
                ..Default::default()
            },
            queue_samples: "switch_timeseries.csv".into(),
            fidelity: Fidelity {
                faithful: true,
                ..Default::default()
            },
            queue_mean_kb: 0.0,
            queue_p99_kb: 0.0,
            ping: None,
        }
    }

    #[test]
    fn pools_repeats_and_normalises_to_baseline() {
        let results = vec![
            combo(
                "dctcp",
                0.5,
                0,
                vec![flow(1_000, 100), flow(20_000_000, 10_000)],
                4,
            ),
            combo(
                "dctcp",
                0.5,
                1,
                vec![flow(1_000, 300), flow(200_000, 1_000)],
                6,
            ),
            combo(
                "tcn",
                0.5,
                0,
                vec![flow(1_000, 100), flow(20_000_000, 5_000)],
                0,
            ),
            combo(
                "tcn",
                0.5,
                1,
                vec![flow(1_000, 100), flow(200_000, 1_000)],
                0,
            ),
            combo("tcn", 0.3, 0, vec![flow(1_000, 50)], 0),
        ];
        let aqms = vec!["dctcp".to_string(), "tcn".to_string()];
        let s = summarize(&results, &aqms, "dctcp");
        // x ascending; tcn at 0.3 has no baseline.
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].aqm.as_str(), s[0].x), ("tcn", 0.3));
        assert_eq!(s[0].normalized, None);
        let d = &s[1];
        assert_eq!((d.aqm.as_str(), d.runs, d.recorded), ("dctcp", 2, 4));
        let small = d.fct.small.as_ref().unwrap();
        assert_eq!((small.count, small.mean_us, small.p99_us), (2, 200.0, 300));
        assert_eq!(d.fct.medium.as_ref().unwrap().count, 1);
        assert_eq!(d.fct.large.as_ref().unwrap().mean_us, 10_000.0);
        assert_eq!(d.dropped_pkts, 5.0);
        assert_eq!(d.timeouts, 0.5);
        let n = d.normalized.unwrap();
        assert_eq!((n.small_mean, n.large_mean), (Some(1.0), Some(1.0)));
        let t = s[2].normalized.unwrap();
        assert_eq!(t.small_mean, Some(0.5));
        assert_eq!(t.small_p99, Some(100.0 / 300.0));
        assert_eq!(t.large_mean, Some(0.5));
        // all: tcn (100+5000+100+1000)/4 = 1550; dctcp (100+10000+300+1000)/4 = 2850.
        assert_eq!(t.all_mean, Some(1550.0 / 2850.0));
        assert_eq!(t.qct_mean, None);
    }

    #[test]
    fn static_goodput_per_flow_and_dscp() {
        let mut a = combo("tcn", 0.0, 0, vec![], 0);
        a.sweep = SweepValue::None;
        let st = |label: &str, dscp: u8, g: f64| StaticFlowResult {
            label: label.into(),
            dscp,
            goodput_mbps: g,
            samples: vec![],
            start_ms: 0,
            size: None,
            fct_us: None,
        };
        a.statics = vec![st("f0", 0, 400.0), st("f1", 1, 200.0), st("f2", 1, 100.0)];
        let mut b = a.clone();
        b.repeat = 1;
        b.statics = vec![st("f0", 0, 200.0), st("f1", 1, 200.0), st("f2", 1, 300.0)];
        let s = summarize(&[a, b], &["tcn".to_string()], "tcn");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].static_goodput_mbps["f0"], 300.0);
        assert_eq!(s[0].dscp_goodput_mbps[&1], 400.0);
        assert_eq!(s[0].goodput_mbps, 700.0);
        assert_eq!(s[0].recorded, 6);
    }

    #[test]
    fn switch_totals_sum_every_reason_and_port() {
        let v = serde_json::json!({"ports": [
            {"egress": {"port": {"dropped": {"aqm": {"bytes": 1, "pkts": 2}, "buffer_full": {"bytes": 1, "pkts": 3}},
                                 "marked": {"sojourn": {"bytes": 0, "pkts": 7}},
                                 "dequeued": {"bytes": 100, "pkts": 1}, "max_backlog_bytes": 500}}},
            {"egress": {"port": {"dropped": {}, "marked": {"threshold": {"bytes": 0, "pkts": 1}},
                                 "dequeued": {"bytes": 50, "pkts": 1}, "max_backlog_bytes": 900}}}
        ]});
        let t = SwitchTotals::from_snapshot(&v);
        assert_eq!(
            t,
            SwitchTotals {
                dropped_pkts: 5,
                marked_pkts: 8,
                max_backlog_bytes: 900,
                dequeued_bytes: 150
            }
        );
    }

    #[test]
    fn nstat_deltas() {
        let before = parse_nstat("#kernel\nTcpRetransSegs  10  0.0\nTcpExtTCPTimeouts 1 0.0\n");
        let after = parse_nstat(
            "#kernel\nTcpRetransSegs  15  0.0\nTcpExtTCPTimeouts 3 0.0\nTcpExtTCPDeliveredCE 9 0.0\n",
        );
        assert_eq!(
            host_delta(&before, &after),
            HostTotals {
                retrans_segs: 5,
                timeouts: 2,
                delivered_ce: 9
            }
        );
    }

    #[test]
    fn fidelity_comes_from_the_switch_and_marks_the_point() {
        let snap = serde_json::json!({
            "ports": [{"link": {"lost_fraction": 0.004}}, {"link": {"lost_fraction": 0.031}}],
            "loop": {"stalls": 12, "max_stall_us": 850.0},
            "fidelity": {"faithful": false, "reasons": ["port b lost 3.1 % of its backlogged link time"]},
        });
        let f = Fidelity::from_snapshot(&snap);
        assert!(!f.faithful);
        assert_eq!(f.reasons.len(), 1);
        assert_eq!(
            (f.max_lost_fraction, f.stalls, f.max_stall_us),
            (0.031, 12, 850.0)
        );
        // An old or broken switch JSON without a verdict is not vouched for.
        let none = Fidelity::from_snapshot(&serde_json::json!({"ports": []}));
        assert!(!none.faithful && none.reasons[0].contains("no fidelity verdict"));

        let good = combo("tcn", 0.5, 0, vec![flow(1_000, 100)], 0);
        let mut bad = combo("tcn", 0.5, 1, vec![flow(1_000, 100)], 0);
        bad.dir = "tcn-load0.50-r1".into();
        bad.fidelity = f;
        let s = summarize(&[good.clone(), bad], &["tcn".to_string()], "tcn");
        assert!(!s[0].faithful);
        assert_eq!(
            s[0].not_faithful,
            vec!["tcn-load0.50-r1: port b lost 3.1 % of its backlogged link time"]
        );
        assert_eq!(s[0].max_lost_fraction, 0.031);
        let s = summarize(&[good], &["tcn".to_string()], "tcn");
        assert!(s[0].faithful && s[0].not_faithful.is_empty());
    }

    #[test]
    fn ping_output_is_parsed_and_pooled() {
        let text = "PING 10.99.0.3 (10.99.0.3) 56(84) bytes of data.
64 bytes from 10.99.0.3: icmp_seq=1 ttl=64 time=0.415 ms
64 bytes from 10.99.0.3: icmp_seq=2 ttl=64 time=1.08 ms
64 bytes from 10.99.0.3: icmp_seq=4 ttl=64 time=0.250 ms

--- 10.99.0.3 ping statistics ---
4 packets transmitted, 3 received, 25% packet loss, time 30ms
rtt min/avg/max/mdev = 0.250/0.581/1.080/0.359 ms
";
        let p = PingStats::from_ping_output(text);
        assert_eq!((p.count, p.lost), (3, 1));
        assert_eq!(p.rtts_us, vec![415.0, 1080.0, 250.0]);
        assert_eq!((p.p50_us, p.p99_us), (415.0, 1080.0));
        assert!((p.mean_us - 581.666).abs() < 0.01);
        let mut a = combo("tcn", 0.0, 0, vec![], 0);
        a.ping = Some(p.clone());
        let mut b = a.clone();
        b.repeat = 1;
        b.ping = Some(PingStats::from_ping_output(
            "64 bytes: time=0.300 ms\n1 packets transmitted, 1 received",
        ));
        let s = summarize(&[a, b], &["tcn".to_string()], "tcn");
        let ps = s[0].ping.as_ref().unwrap();
        assert_eq!((ps.count, ps.lost, ps.p50_us), (4, 1, 300.0));
    }
}

//! What one combination produced (`result.json`): flows, queries, static
//! flows, the switch's and the hosts' counters, the fidelity verdict — and
//! the parsers that read them from the switch's and the tools' output.
//! [`super::summary`] turns them into statistics across repeats.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sweep::SweepValue;
use super::timeseries::{from_switch_csv, read_csv, sum_pkts, QueueSample};

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

/// One egress port of the switch or fabric over one run, from its exit
/// JSON: which hop queued, marked and dropped.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HopResult {
    /// The port's name: an interface, or a fabric's `leaf1:spine2`.
    pub name: String,
    /// Packets it sent.
    pub tx_pkts: u64,
    /// Packets it CE-marked.
    pub marked_pkts: u64,
    /// Packets it dropped.
    pub dropped_pkts: u64,
    /// Its largest backlog, bytes.
    pub max_backlog_bytes: u64,
    /// 99th percentile sojourn time, µs (0: it sent nothing).
    pub sojourn_p99_us: f64,
}

impl HopResult {
    /// Every port of a switch snapshot, in its order.
    pub fn from_snapshot(v: &serde_json::Value) -> Vec<Self> {
        v["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let port = &p["egress"]["port"];
                HopResult {
                    name: p["name"].as_str().unwrap_or_default().to_owned(),
                    tx_pkts: p["io"]["tx_packets"].as_u64().unwrap_or(0),
                    marked_pkts: sum_pkts(&port["marked"]),
                    dropped_pkts: sum_pkts(&port["dropped"]),
                    max_backlog_bytes: port["max_backlog_bytes"].as_u64().unwrap_or(0),
                    sojourn_p99_us: port["sojourn"]["p99_us"].as_f64().unwrap_or(0.0),
                }
            })
            .collect()
    }
}

/// Host TCP counters (`nstat`), after − before: summed over the hosts, and
/// per host in [`HostTotals::per_host`]. Besides retransmissions and RTOs
/// they count what the hosts' other timers did — tail-loss probes, delayed
/// ACKs, spurious RTOs — which time dilation stretches only in part (README,
/// "Time dilation — host timers"): a difference across D in these is a
/// difference in the hosts, not in the switch. Counters added later read
/// as 0 from an older `result.json`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HostTotals {
    /// `TcpRetransSegs`.
    pub retrans_segs: u64,
    /// `TcpExtTCPTimeouts` (RTOs).
    pub timeouts: u64,
    /// `TcpExtTCPDeliveredCE`.
    pub delivered_ce: u64,
    /// `TcpExtTCPLossProbes`: tail-loss probes sent (TLP: 2·srtt + 2 ms,
    /// the 2 ms not stretched by dilation).
    #[serde(default)]
    pub loss_probes: u64,
    /// `TcpExtTCPLossProbeRecovery`: losses a TLP repaired.
    #[serde(default)]
    pub loss_probe_recovery: u64,
    /// `TcpExtDelayedACKs`: ACKs sent by the delayed-ACK timer.
    #[serde(default)]
    pub delayed_acks: u64,
    /// `TcpExtDelayedACKLost`: an ACK was delayed and the sender
    /// retransmitted the data it would have acknowledged.
    #[serde(default)]
    pub delayed_ack_lost: u64,
    /// `TcpExtTCPSpuriousRTOs`: RTOs F-RTO found spurious.
    #[serde(default)]
    pub spurious_rtos: u64,
    /// `TcpExtTCPDSACKRecv`: D-SACKs received (a segment arrived twice:
    /// a retransmission was not needed).
    #[serde(default)]
    pub dsack_recv: u64,
    /// The switch dropped nothing in this combination but the hosts
    /// retransmitted: their timers, not the network, resent data
    /// ([`HostTotals::retrans_note`]). Only in the totals; absent = false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lossless_retrans: bool,
    /// The same counters per host (`h1`, `h2`, …); only in the totals.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_host: BTreeMap<String, HostTotals>,
}

impl HostTotals {
    /// Adds `other`'s counters (not its per-host map or flag).
    pub fn add(&mut self, o: &HostTotals) {
        self.retrans_segs += o.retrans_segs;
        self.timeouts += o.timeouts;
        self.delivered_ce += o.delivered_ce;
        self.loss_probes += o.loss_probes;
        self.loss_probe_recovery += o.loss_probe_recovery;
        self.delayed_acks += o.delayed_acks;
        self.delayed_ack_lost += o.delayed_ack_lost;
        self.spurious_rtos += o.spurious_rtos;
        self.dsack_recv += o.dsack_recv;
    }

    /// The totals of `hosts` (name, counters), with each host's kept in
    /// [`HostTotals::per_host`].
    pub fn of_hosts(hosts: impl IntoIterator<Item = (String, HostTotals)>) -> Self {
        let mut t = HostTotals::default();
        for (name, h) in hosts {
            t.add(&h);
            t.per_host.insert(name, h);
        }
        t
    }

    /// The timer counters `summary::repeat_values` reports as
    /// `host.<key>` (besides `rtos` and `retrans`), by key.
    pub fn timer_metrics(&self) -> [(&'static str, u64); 6] {
        [
            ("loss_probes", self.loss_probes),
            ("loss_probe_recovery", self.loss_probe_recovery),
            ("delayed_acks", self.delayed_acks),
            ("delayed_ack_lost", self.delayed_ack_lost),
            ("spurious_rtos", self.spurious_rtos),
            ("dsack_recv", self.dsack_recv),
        ]
    }

    /// A person's name for the counter `key` of [`Self::timer_metrics`].
    pub fn metric_name(key: &str) -> String {
        match key {
            "loss_probes" => "hosts' tail-loss probes (TLP)",
            "loss_probe_recovery" => "hosts' losses repaired by a TLP",
            "delayed_acks" => "hosts' delayed ACKs",
            "delayed_ack_lost" => "hosts' delayed ACKs whose data was resent",
            "spurious_rtos" => "hosts' spurious RTOs",
            "dsack_recv" => "hosts' D-SACKs received",
            other => return format!("hosts' {other}"),
        }
        .to_owned()
    }

    /// Whether the hosts retransmitted although the switch dropped
    /// `switch_drops` = 0 packets (a lossless ECN run that still resent).
    pub fn retransmitted_without_loss(&self, switch_drops: u64) -> bool {
        switch_drops == 0 && self.retrans_segs > 0
    }

    /// What the hosts' timers did, by counter: `TLP 12 (recovered 9),
    /// RTO 1, spurious RTO 0, DSACK received 3, delayed-ACK lost 0`.
    pub fn timer_counts(&self) -> String {
        format!(
            "TLP {} (recovered {}), RTO {}, spurious RTO {}, DSACK received {}, delayed-ACK lost {}",
            self.loss_probes,
            self.loss_probe_recovery,
            self.timeouts,
            self.spurious_rtos,
            self.dsack_recv,
            self.delayed_ack_lost
        )
    }

    /// The console note of a combination in directory `dir` whose switch
    /// dropped `switch_drops` packets, when the hosts retransmitted anyway.
    pub fn retrans_note(&self, dir: &str, switch_drops: u64) -> Option<String> {
        self.retransmitted_without_loss(switch_drops).then(|| {
            format!(
                "{dir}: retransmissions in a lossless run: the switch dropped nothing but the \
                 hosts retransmitted {} segment{} ({}) — a host timer, not the network, resent {}",
                self.retrans_segs,
                if self.retrans_segs == 1 { "" } else { "s" },
                self.timer_counts(),
                if self.retrans_segs == 1 { "it" } else { "them" }
            )
        })
    }
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
    /// Largest share of backlogged link time lost by a port the guard
    /// judges on its share: one that lost more than
    /// [`crate::fidelity::judged_lost_floor`] in all. A receiver's ACK port,
    /// backlogged for microseconds, reaches "6 %" with a few of them; the
    /// guard does not judge it, and neither does this number.
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
        // The guard's own floor, from the thresholds it reported (an older
        // snapshot without them: the smallest floor).
        let floor = crate::fidelity::judged_lost_floor(
            f["thresholds"]["max_stall_ns"].as_u64().unwrap_or(0),
        );
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
                .filter(|p| p["link"]["lost_ns"].as_u64().is_none_or(|ns| ns > floor))
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

impl PingStats {
    /// The same probes in emulated time: every RTT / D (ping measures real
    /// time; under time dilation the network it crossed ran D times slower).
    pub fn in_emulated_time(mut self, d: crate::timebase::Dilation) -> Self {
        if d.is_none() {
            return self;
        }
        let k = d.factor();
        for x in self.rtts_us.iter_mut() {
            *x /= k;
        }
        self.mean_us /= k;
        self.p50_us /= k;
        self.p99_us /= k;
        self
    }
}

/// The busiest port's sojourn times over one run, from the switch's exit
/// counters (`ports[].egress.port.sojourn`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SojournResult {
    /// The port (switch-side interface).
    pub port: String,
    /// Packets measured.
    pub count: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
}

impl SojournResult {
    /// The sojourn summary of `port` in a switch snapshot, if it has one.
    pub fn from_snapshot(v: &serde_json::Value, port: &str) -> Option<Self> {
        let p = v["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"].as_str() == Some(port))?;
        let s = &p["egress"]["port"]["sojourn"];
        Some(SojournResult {
            port: port.to_owned(),
            count: s["count"].as_u64()?,
            p50_us: s["p50_us"].as_f64()?,
            p99_us: s["p99_us"].as_f64()?,
            max_us: s["max_us"].as_f64().unwrap_or(0.0),
        })
    }

    /// The port that sent the most bytes (when no queue samples name one).
    pub fn busiest_by_bytes(v: &serde_json::Value) -> Option<String> {
        v["ports"]
            .as_array()?
            .iter()
            .max_by_key(|p| {
                p["egress"]["port"]["dequeued"]["bytes"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .and_then(|p| p["name"].as_str().map(String::from))
    }
}

/// Everything one combination (one repeat of an AQM at a sweep value)
/// produced: what `result.json` in its directory holds, and all a summary
/// is rebuilt from (`softswitch-exp report`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ComboResult {
    /// The AQM.
    pub aqm: String,
    /// The swept value.
    pub sweep: SweepValue,
    /// Repetition.
    pub repeat: u32,
    /// Seed of its flow schedules (`seed + 1000·repeat`).
    #[serde(default)]
    pub seed: u64,
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
    /// Wall time of the traffic, µs, emulated (real / D under time dilation).
    pub wall_us: u64,
    /// The switch's counters.
    pub switch: SwitchTotals,
    /// The hosts' counters.
    pub hosts: HostTotals,
    /// Where the queue figures' samples came from: `switch_timeseries.csv`
    /// (the switch's own, every 1 ms) or `timeseries.csv` (polled, 100 ms).
    pub queue_samples: String,
    /// The switch's ports in `--ports` order (names the port indices of
    /// `switch_timeseries.csv`).
    #[serde(default)]
    pub switch_ports: Vec<String>,
    /// The switch's clock at traffic start, ms (lines `switch_timeseries.csv`
    /// up with the traffic).
    #[serde(default)]
    pub switch_offset_ms: Option<f64>,
    /// The fidelity guard's verdict.
    pub fidelity: Fidelity,
    /// Backlog of the busiest port over the run (from the queue figures'
    /// samples): mean and 99th percentile, KB.
    pub queue_mean_kb: f64,
    /// 99th percentile backlog, KB.
    pub queue_p99_kb: f64,
    /// Sojourn times at the busiest port.
    #[serde(default)]
    pub sojourn: Option<SojournResult>,
    /// The ping probe's RTTs, when the scenario has one.
    pub ping: Option<PingStats>,
    /// Per hop (every egress port) of a fabric run: marks, drops, queue.
    /// Empty for one switch, whose busiest port the fields above describe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopResult>,
    /// Unfaithful attempts of this repeat set aside before it
    /// (`run --retry-unfaithful`): not stored in `result.json` (the run
    /// writes it before it knows), but read from `manifest.json`'s
    /// `retried` when the results are loaded.
    #[serde(default, skip_serializing)]
    pub retried: u32,
}

/// A combination's result as stored in a results directory, with the
/// directory it was read from (for its time series).
#[derive(Clone, Debug)]
pub struct StoredResult {
    /// What `result.json` holds.
    pub result: ComboResult,
    /// The combination's directory.
    pub dir: PathBuf,
}

impl StoredResult {
    /// Reads `<dir>/result.json`.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join("result.json");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let result = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(StoredResult {
            result,
            dir: dir.to_owned(),
        })
    }

    /// The queue samples the figures plot: the switch's own 1 ms series
    /// when the run used it (and recorded how to line it up), a split
    /// fabric's merged 1 ms series (in the runner's format) when it has
    /// one, else the runner's 100 ms one.
    pub fn queue_series(&self) -> Result<Vec<QueueSample>, String> {
        let r = &self.result;
        let (file, offset) = match (r.queue_samples.as_str(), r.switch_offset_ms) {
            ("switch_timeseries.csv", Some(off)) => ("switch_timeseries.csv", Some(off)),
            // The runner's own format, under a plain file name.
            (f, _) if f.ends_with(".csv") && !f.contains('/') && f != "switch_timeseries.csv" => {
                (f, None)
            }
            _ => ("timeseries.csv", None),
        };
        let path = self.dir.join(file);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let parsed = match offset {
            Some(off) => from_switch_csv(&text, &r.switch_ports, off),
            None => read_csv(&text),
        };
        parsed.map_err(|e| format!("{}: {e}", path.display()))
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

/// Counter differences `after − before` of one host, as [`HostTotals`].
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
        loss_probes: d("TcpExtTCPLossProbes"),
        loss_probe_recovery: d("TcpExtTCPLossProbeRecovery"),
        delayed_acks: d("TcpExtDelayedACKs"),
        delayed_ack_lost: d("TcpExtDelayedACKLost"),
        spurious_rtos: d("TcpExtTCPSpuriousRTOs"),
        dsack_recv: d("TcpExtTCPDSACKRecv"),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sojourn_of_the_named_port() {
        let v = serde_json::json!({"ports": [
            {"name": "x-h1-sw", "egress": {"port": {"dequeued": {"bytes": 10},
                "sojourn": {"count": 3, "p50_us": 1.5, "p99_us": 9.0, "max_us": 9.5}}}},
            {"name": "x-h2-sw", "egress": {"port": {"dequeued": {"bytes": 90000},
                "sojourn": {"count": 700, "p50_us": 150.0, "p99_us": 400.0, "max_us": 512.0}}}}
        ]});
        assert_eq!(
            SojournResult::busiest_by_bytes(&v).as_deref(),
            Some("x-h2-sw")
        );
        let s = SojournResult::from_snapshot(&v, "x-h2-sw").unwrap();
        assert_eq!(
            (s.count, s.p50_us, s.p99_us, s.max_us),
            (700, 150.0, 400.0, 512.0)
        );
        assert_eq!(SojournResult::from_snapshot(&v, "x-h9-sw"), None);
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
                delivered_ce: 9,
                ..Default::default()
            }
        );
    }

    /// `nstat -asz` of a sender's namespace (Linux 6.18) before and after
    /// 3 s of 4 TCP flows into a 50 Mbit/s tbf with an 8 KB limit and
    /// `rto_min 5ms`: drops, RTOs and tail-loss probes.
    const NSTAT_BEFORE: &str = include_str!("testdata/nstat-sender-before.txt");
    const NSTAT_AFTER: &str = include_str!("testdata/nstat-sender-after.txt");

    #[test]
    fn every_timer_counter_is_read_from_real_nstat_output() {
        let (before, after) = (parse_nstat(NSTAT_BEFORE), parse_nstat(NSTAT_AFTER));
        // The header line is skipped; the rate column is not a value.
        assert!(!before.contains_key("#kernel"));
        assert!(after.len() > 300, "{}", after.len());
        let d = host_delta(&before, &after);
        assert_eq!(
            d,
            HostTotals {
                retrans_segs: 6626,
                timeouts: 39,
                delivered_ce: 0,
                loss_probes: 3,
                loss_probe_recovery: 0,
                delayed_acks: 1,
                delayed_ack_lost: 0,
                spurious_rtos: 0,
                dsack_recv: 0,
                ..Default::default()
            }
        );
        // `TcpExtTCPDSACKRecvSegs` and `TcpExtDelayedACKLocked` are other
        // counters: an exact name match, not a prefix.
        let mut more = after.clone();
        *more.get_mut("TcpExtTCPDSACKRecvSegs").unwrap() += 7;
        *more.get_mut("TcpExtDelayedACKLocked").unwrap() += 5;
        assert_eq!(host_delta(&before, &more), d);
        *more.get_mut("TcpExtTCPDSACKRecv").unwrap() += 2;
        *more.get_mut("TcpExtTCPSpuriousRTOs").unwrap() += 1;
        *more.get_mut("TcpExtTCPLossProbeRecovery").unwrap() += 3;
        *more.get_mut("TcpExtDelayedACKLost").unwrap() += 4;
        let m = host_delta(&before, &more);
        assert_eq!(
            (
                m.dsack_recv,
                m.spurious_rtos,
                m.loss_probe_recovery,
                m.delayed_ack_lost
            ),
            (2, 1, 3, 4)
        );
        // A counter that went backwards (a namespace rebuilt) is 0, not a wrap.
        assert_eq!(host_delta(&after, &before), HostTotals::default());
    }

    #[test]
    fn totals_keep_each_host_and_flag_retransmissions_without_loss() {
        let sender = host_delta(&parse_nstat(NSTAT_BEFORE), &parse_nstat(NSTAT_AFTER));
        let receiver = HostTotals {
            delayed_acks: 4,
            dsack_recv: 1,
            ..Default::default()
        };
        let t = HostTotals::of_hosts([("h1".into(), sender.clone()), ("h2".into(), receiver)]);
        assert_eq!(t.retrans_segs, 6626);
        assert_eq!((t.delayed_acks, t.dsack_recv, t.loss_probes), (5, 1, 3));
        assert_eq!(t.per_host["h1"], sender);
        assert_eq!(t.per_host["h2"].delayed_acks, 4);
        // Retransmissions with drops at the switch: the network's doing.
        assert!(!t.retransmitted_without_loss(17));
        assert_eq!(t.retrans_note("dctcp-r0", 17), None);
        // Without: a note naming the timers' counters.
        assert!(t.retransmitted_without_loss(0));
        let note = t.retrans_note("dctcp-r0", 0).unwrap();
        for want in [
            "dctcp-r0",
            "switch dropped nothing",
            "6626 segments",
            "TLP 3 (recovered 0)",
            "RTO 39",
            "spurious RTO 0",
            "DSACK received 1",
        ] {
            assert!(note.contains(want), "want `{want}` in: {note}");
        }
        // No retransmission, no note; one, in the singular.
        assert_eq!(HostTotals::default().retrans_note("x", 0), None);
        let one = HostTotals {
            retrans_segs: 1,
            ..Default::default()
        };
        let note = one.retrans_note("x", 0).unwrap();
        assert!(
            note.contains("1 segment (") && note.ends_with("resent it"),
            "{note}"
        );
    }

    #[test]
    fn timer_counters_are_metrics_with_names() {
        use crate::exp::summary::{metric_info, repeat_values, tests::combo, Unit};
        let mut r = combo("dctcp", 0.5, 0, vec![], 0);
        r.hosts = HostTotals {
            retrans_segs: 7,
            timeouts: 1,
            loss_probes: 5,
            loss_probe_recovery: 4,
            delayed_acks: 30,
            delayed_ack_lost: 2,
            spurious_rtos: 1,
            dsack_recv: 3,
            ..Default::default()
        };
        let v = repeat_values(&r);
        for (k, want) in [
            ("rtos", 1.0),
            ("retrans", 7.0),
            ("host.loss_probes", 5.0),
            ("host.loss_probe_recovery", 4.0),
            ("host.delayed_acks", 30.0),
            ("host.delayed_ack_lost", 2.0),
            ("host.spurious_rtos", 1.0),
            ("host.dsack_recv", 3.0),
        ] {
            assert_eq!(v.get(k), Some(&want), "{k} in {v:?}");
            let (name, unit) = metric_info(k);
            assert_eq!(unit, Unit::Count, "{k}");
            assert!(
                !name.contains('.') && name.ends_with("per run"),
                "{k}: {name}"
            );
        }
        assert_eq!(
            metric_info("host.loss_probes").0,
            "hosts' tail-loss probes (TLP) per run"
        );
        assert_eq!(
            metric_info("host.dsack_recv").0,
            "hosts' D-SACKs received per run"
        );
    }

    #[test]
    fn result_json_written_before_the_timer_counters_still_loads() {
        let old = serde_json::json!({"retrans_segs": 3, "timeouts": 1, "delivered_ce": 40});
        let h: HostTotals = serde_json::from_value(old).unwrap();
        assert_eq!(
            (h.retrans_segs, h.loss_probes, h.lossless_retrans),
            (3, 0, false)
        );
        assert!(h.per_host.is_empty());
        // Written back: the flag only when set, the per-host map only when filled.
        let v = serde_json::to_value(&h).unwrap();
        assert!(v.get("lossless_retrans").is_none() && v.get("per_host").is_none());
        let flagged = HostTotals {
            lossless_retrans: true,
            ..h
        };
        assert_eq!(
            serde_json::to_value(&flagged).unwrap()["lossless_retrans"],
            true
        );
    }

    #[test]
    fn fidelity_comes_from_the_switch() {
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
        // A port that lost less link time than one tolerated stall is not
        // judged on its share (an ACK port: 40 µs of 500 µs backlogged), and
        // is left out; the floor is the guard's `max_stall_ns`, 5 ms here.
        let ack_port = serde_json::json!({
            "ports": [
                {"link": {"lost_fraction": 0.08, "lost_ns": 40_000}},
                {"link": {"lost_fraction": 0.012, "lost_ns": 9_000_000}},
                {"link": {"lost_fraction": 0.5, "lost_ns": 4_000_000}},
            ],
            "fidelity": {"faithful": false, "reasons": [],
                         "thresholds": {"max_stall_ns": 5_000_000}},
        });
        assert_eq!(Fidelity::from_snapshot(&ack_port).max_lost_fraction, 0.012);
        // An old or broken switch JSON without a verdict is not vouched for.
        let none = Fidelity::from_snapshot(&serde_json::json!({"ports": []}));
        assert!(!none.faithful && none.reasons[0].contains("no fidelity verdict"));
    }

    #[test]
    fn ping_output_is_parsed() {
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
        // Under time dilation D = 4 ping's real RTTs are 4 times the
        // emulated ones; counts stay.
        let e = p
            .clone()
            .in_emulated_time(crate::timebase::Dilation::new(4.0).unwrap());
        assert_eq!((e.count, e.lost), (3, 1));
        assert_eq!(e.rtts_us, vec![103.75, 270.0, 62.5]);
        assert_eq!((e.p50_us, e.p99_us), (103.75, 270.0));
        assert!((e.mean_us - 581.666 / 4.0).abs() < 0.01);
        assert_eq!(p.clone().in_emulated_time(Default::default()), p);
    }
}

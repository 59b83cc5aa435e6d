//! The standard figures of a run (SPEC §3 "Results"), drawn from the
//! summaries and time series: FCT vs load normalised to the baseline AQM
//! (TCN §6 Fig. 9–12: small-flow avg and p99, large-flow avg, overall avg),
//! the same in absolute ms, incast QCT vs fan-in, queue length vs time per
//! AQM, and goodput per flow and per queue vs time for static flows.

use std::path::{Path, PathBuf};

use super::plot::{Figure, Panel, Series};
use super::results::{ComboResult, PointSummary};
use super::scenario::{Scenario, SweepValue, TrafficSpec};
use super::timeseries::{busiest_port, port_backlog_kb, queue_rates_mbps, QueueSample};

/// Writes every figure that fits the scenario's traffic kind into `dir`;
/// the files written and notes on anything skipped.
pub fn write_all(
    dir: &Path,
    sc: &Scenario,
    points: &[PointSummary],
    results: &[ComboResult],
    series: &[Vec<QueueSample>],
) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let mut put = |fig: Figure, stem: &str| -> Result<(), String> {
        let w = fig.write(dir, stem)?;
        files.extend(w.files);
        notes.extend(w.notes);
        Ok(())
    };
    let aqms = &sc.switch.aqm;
    let base = sc.baseline_aqm();
    // A result the guard could not vouch for says so in every legend.
    let legend = |a: &String| -> String {
        let bad: Vec<String> = points
            .iter()
            .filter(|p| &p.aqm == a && !p.faithful)
            .map(|p| format!("{}", p.x))
            .collect();
        match (bad.is_empty(), &sc.traffic) {
            (true, _) => a.clone(),
            (false, TrafficSpec::Static(s)) if s.flows_sweep.is_empty() => {
                format!("{a} (NOT FAITHFUL)")
            }
            (false, _) => format!("{a} (NOT FAITHFUL at {})", bad.join(", ")),
        }
    };
    let per_aqm = |f: &dyn Fn(&PointSummary) -> Option<f64>| -> Vec<Series> {
        aqms.iter()
            .map(|a| Series {
                name: legend(a),
                points: points
                    .iter()
                    .filter(|p| &p.aqm == a)
                    .filter_map(|p| f(p).map(|y| (p.x, y)))
                    .collect(),
            })
            .collect()
    };
    let panel = |title: &str, x: &str, y: &str, s: Vec<Series>| Panel {
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        series: s,
        markers: true,
    };
    match &sc.traffic {
        TrafficSpec::Workload(_) => {
            let norm = format!("FCT / {base}");
            let n = |p: &PointSummary| p.normalized;
            put(
                Figure {
                    panels: vec![
                        panel(
                            "(a) small flows (<100KB): avg",
                            "load",
                            &norm,
                            per_aqm(&|p| n(p)?.small_mean),
                        ),
                        panel(
                            "(b) small flows (<100KB): 99th",
                            "load",
                            &norm,
                            per_aqm(&|p| n(p)?.small_p99),
                        ),
                        panel(
                            "(c) large flows (>10MB): avg",
                            "load",
                            &norm,
                            per_aqm(&|p| n(p)?.large_mean),
                        ),
                        panel(
                            "(d) overall: avg",
                            "load",
                            &norm,
                            per_aqm(&|p| n(p)?.all_mean),
                        ),
                    ],
                    columns: 2,
                },
                "fct_vs_load",
            )?;
            let ms = |s: &Option<crate::traffic::summary::FctStats>, p99: bool| {
                s.as_ref()
                    .map(|s| if p99 { s.p99_us as f64 } else { s.mean_us } / 1000.0)
            };
            put(
                Figure {
                    panels: vec![
                        panel(
                            "small flows: avg",
                            "load",
                            "FCT (ms)",
                            per_aqm(&|p| ms(&p.fct.small, false)),
                        ),
                        panel(
                            "small flows: 99th",
                            "load",
                            "FCT (ms)",
                            per_aqm(&|p| ms(&p.fct.small, true)),
                        ),
                        panel(
                            "large flows: avg",
                            "load",
                            "FCT (ms)",
                            per_aqm(&|p| ms(&p.fct.large, false)),
                        ),
                        panel(
                            "overall: avg",
                            "load",
                            "FCT (ms)",
                            per_aqm(&|p| ms(&p.fct.all, false)),
                        ),
                    ],
                    columns: 2,
                },
                "fct_vs_load_abs",
            )?;
        }
        TrafficSpec::Incast(_) => {
            let q = |p: &PointSummary, p99: bool| {
                p.qct
                    .as_ref()
                    .map(|s| if p99 { s.p99_us as f64 } else { s.mean_us } / 1000.0)
            };
            put(
                Figure {
                    panels: vec![
                        panel(
                            "query completion time: avg",
                            "fan-in",
                            "QCT (ms)",
                            per_aqm(&|p| q(p, false)),
                        ),
                        panel(
                            "query completion time: 99th",
                            "fan-in",
                            "QCT (ms)",
                            per_aqm(&|p| q(p, true)),
                        ),
                        panel(
                            "RTOs per run",
                            "fan-in",
                            "TCP timeouts",
                            per_aqm(&|p| Some(p.timeouts)),
                        ),
                        panel(
                            "drops per run",
                            "fan-in",
                            "packets",
                            per_aqm(&|p| Some(p.dropped_pkts)),
                        ),
                    ],
                    columns: 2,
                },
                "incast_qct",
            )?;
        }
        TrafficSpec::Static(st) => {
            if !st.flows_sweep.is_empty() {
                put(
                    Figure {
                        panels: vec![
                            panel(
                                "queue length vs number of flows: mean",
                                "flows",
                                "backlog (KB)",
                                per_aqm(&|p| Some(p.queue_mean_kb)),
                            ),
                            panel(
                                "queue length vs number of flows: 99th",
                                "flows",
                                "backlog (KB)",
                                per_aqm(&|p| Some(p.queue_p99_kb)),
                            ),
                            panel(
                                "goodput vs number of flows",
                                "flows",
                                "Mbit/s",
                                per_aqm(&|p| Some(p.goodput_mbps)),
                            ),
                            panel(
                                "marks per run",
                                "flows",
                                "packets",
                                per_aqm(&|p| Some(p.marked_pkts)),
                            ),
                            // TCN Fig. 1: the scheduler's promise is a share
                            // per queue; one line per AQM and DSCP.
                            panel(
                                "share of goodput per DSCP (queue)",
                                "flows",
                                "share",
                                dscp_shares(points, aqms, &legend),
                            ),
                        ],
                        columns: 2,
                    },
                    "queue_vs_flows",
                )?;
            }
            if let Some(p) = &st.ping {
                let cdf = |rtts: &[f64]| {
                    let mut v = rtts.to_vec();
                    v.sort_by(|a, b| a.total_cmp(b));
                    let n = v.len().max(1) as f64;
                    v.iter()
                        .enumerate()
                        .map(|(i, &x)| (x, (i + 1) as f64 / n))
                        .collect::<Vec<_>>()
                };
                let lines = aqms
                    .iter()
                    .filter_map(|a| {
                        let rtts: Vec<f64> = results
                            .iter()
                            .filter(|r| &r.aqm == a && r.sweep == results[0].sweep)
                            .filter_map(|r| r.ping.as_ref())
                            .flat_map(|p| p.rtts_us.iter().copied())
                            .collect();
                        (!rtts.is_empty()).then(|| Series {
                            name: legend(a),
                            points: cdf(&rtts),
                        })
                    })
                    .collect();
                put(
                    Figure::single(Panel {
                        title: format!("ping RTT h{} → h{} (DSCP {}): CDF", p.from, p.to, p.dscp),
                        x_label: "RTT (us)".into(),
                        y_label: "CDF".into(),
                        series: lines,
                        markers: false,
                    }),
                    "ping_rtt",
                )?;
            }
            for (r, ts) in results.iter().zip(series).filter(|(r, _)| r.repeat == 0) {
                let verdict = if r.fidelity.faithful {
                    String::new()
                } else {
                    format!(
                        " — NOT FAITHFUL (lost {:.1} % link time)",
                        r.fidelity.max_lost_fraction * 100.0
                    )
                };
                let tag = match r.sweep.tag() {
                    t if t.is_empty() => String::new(),
                    t => format!(" {t}"),
                };
                let flows = r
                    .statics
                    .iter()
                    .map(|s| Series {
                        name: s.label.clone(),
                        points: s
                            .samples
                            .iter()
                            .map(|&(t, g)| (t as f64 / 1000.0, g))
                            .collect(),
                    })
                    .collect();
                let mut panels = vec![Panel {
                    title: format!("{}{tag}: goodput per flow{verdict}", r.aqm),
                    x_label: "time (s)".into(),
                    y_label: "Mbit/s".into(),
                    series: flows,
                    markers: false,
                }];
                if let Some(port) = busiest_port(ts) {
                    panels.push(Panel {
                        title: format!("{}: departures per queue, {port}", r.aqm),
                        x_label: "time (s)".into(),
                        y_label: "Mbit/s".into(),
                        series: queue_rates_mbps(ts, &port)
                            .into_iter()
                            .filter(|(_, pts)| pts.iter().any(|p| p.1 > 0.0))
                            .map(|(q, pts)| Series {
                                name: format!("queue {q}"),
                                points: pts.into_iter().map(|(t, y)| (t / 1000.0, y)).collect(),
                            })
                            .collect(),
                        markers: false,
                    });
                }
                let stem = match r.sweep.tag() {
                    t if t.is_empty() => format!("goodput_{}", r.aqm),
                    t => format!("goodput_{}_{t}", r.aqm),
                };
                put(Figure { panels, columns: 2 }, &stem)?;
            }
        }
    }
    // Queue length vs time: per sweep value, one line per AQM (first repeat).
    // Incast queries repeat every `interval`: at 1 ms resolution a whole run
    // is a wall of spikes, so show the first ten queries from the first
    // backlog on.
    let window_ms = match &sc.traffic {
        TrafficSpec::Incast(i) => crate::units::parse_duration(&i.interval)
            .ok()
            .map(|ns| 10.0 * ns as f64 / 1e6),
        _ => None,
    };
    let mut sweeps: Vec<SweepValue> = Vec::new();
    for r in results {
        if !sweeps.contains(&r.sweep) {
            sweeps.push(r.sweep);
        }
    }
    for v in sweeps {
        let mut lines = Vec::new();
        let mut port_name = String::new();
        for (r, ts) in results.iter().zip(series) {
            if r.sweep != v || r.repeat != 0 {
                continue;
            }
            if let Some(port) = busiest_port(ts) {
                let pts = port_backlog_kb(ts, &port);
                let pts = match window_ms {
                    Some(w) => {
                        let t0 = pts.iter().find(|p| p.1 > 0.0).map_or(0.0, |p| p.0);
                        pts.into_iter()
                            .filter(|p| p.0 >= t0 - 1.0 && p.0 <= t0 + w)
                            .collect()
                    }
                    None => pts,
                };
                lines.push(Series {
                    name: if r.fidelity.faithful {
                        r.aqm.clone()
                    } else {
                        format!("{} (NOT FAITHFUL)", r.aqm)
                    },
                    points: pts.into_iter().map(|(t, kb)| (t / 1000.0, kb)).collect(),
                });
                port_name = port;
            }
        }
        let tag = v.tag();
        let stem = if tag.is_empty() {
            "queue".to_string()
        } else {
            format!("queue_{tag}")
        };
        put(
            Figure::single(Panel {
                title: match window_ms {
                    Some(_) => {
                        format!("queue length, first 10 queries, busiest port {port_name} {tag}")
                    }
                    None => format!("queue length, busiest port {port_name} {tag}"),
                },
                x_label: "time (s)".into(),
                y_label: "backlog (KB)".into(),
                series: lines,
                markers: false,
            }),
            &stem,
        )?;
    }
    Ok((files, notes))
}

/// One series per AQM and DSCP: that DSCP's share of the point's goodput.
fn dscp_shares(
    points: &[PointSummary],
    aqms: &[String],
    legend: &dyn Fn(&String) -> String,
) -> Vec<Series> {
    let mut out = Vec::new();
    for a in aqms {
        let mine: Vec<&PointSummary> = points.iter().filter(|p| &p.aqm == a).collect();
        let mut dscps: Vec<u8> = mine
            .iter()
            .flat_map(|p| p.dscp_goodput_mbps.keys().copied())
            .collect();
        dscps.sort_unstable();
        dscps.dedup();
        for d in dscps {
            out.push(Series {
                name: format!("{} DSCP {d}", legend(a)),
                points: mine
                    .iter()
                    .filter_map(|p| {
                        let total: f64 = p.dscp_goodput_mbps.values().sum();
                        let g = p.dscp_goodput_mbps.get(&d)?;
                        (total > 0.0).then(|| (p.x, g / total))
                    })
                    .collect(),
            });
        }
    }
    out
}

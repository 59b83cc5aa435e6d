//! The standard figures of a run, drawn from the
//! summary and the stored results: FCT vs load normalised to the baseline
//! AQM (TCN §6 Fig. 9–12: small-flow avg and p99, large-flow avg, overall
//! avg), the same in absolute ms, incast QCT vs fan-in, queue and shares vs
//! number of flows, ping RTT CDFs, queue length vs time per AQM, and goodput
//! per flow and per queue vs time for static flows.
//!
//! Every figure is one function returning `Option<Figure>` (None: it does
//! not fit the scenario), listed in a table. Points across a sweep are the
//! median of the faithful repeats with min–max bars, or a ratio to the
//! baseline with Fieller's interval; traces over time show one repeat.
//! Each figure's notes say which, and which points rest on fewer faithful
//! repeats than asked; its CSV holds exactly what it plots.
//!
//! A time-dilated run's figures are in emulated units (the stored results
//! are), and every panel title — so every CSV row — and the notes say
//! `D = 4 (emulated)`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::plot::{Figure, Panel, Point, Series};
use super::results::StoredResult;
use super::scenario::{Scenario, SweepValue, TrafficSpec};
use super::summary::{aqm_order, metric_info, Summary};
use super::timeseries::{busiest_port, port_backlog_kb, queue_rates_mbps};

/// What the figures are drawn from.
pub struct FigureInput<'a> {
    /// The scenario.
    pub sc: &'a Scenario,
    /// Its summary.
    pub summary: &'a Summary,
    /// Every repeat, with its directory.
    pub results: &'a [StoredResult],
    /// What could not be drawn, and why.
    pub notes: RefCell<Vec<String>>,
}

/// A figure over the sweep.
type SweepFigure = fn(&FigureInput) -> Option<Figure>;
/// The figures of one sweep value (traces over time), with their file stems.
type TraceFigures = fn(&FigureInput, SweepValue) -> Vec<(String, Figure)>;

/// The figures over the sweep, by file stem.
const SWEEP_FIGURES: [(&str, SweepFigure); 5] = [
    ("fct_vs_load", fct_vs_load),
    ("fct_vs_load_abs", fct_vs_load_abs),
    ("incast_qct", incast_qct),
    ("queue_vs_flows", queue_vs_flows),
    ("ping_rtt", ping_rtt),
];

/// The figures per sweep value.
const TRACE_FIGURES: [TraceFigures; 2] = [queue_trace, goodput_traces];

/// Writes every figure that fits the scenario into `dir`: the files written
/// and notes on anything skipped.
pub fn write_all(dir: &Path, input: &FigureInput) -> Result<(Vec<PathBuf>, Vec<String>), String> {
    let mut figs: Vec<(String, Figure)> = SWEEP_FIGURES
        .iter()
        .filter_map(|(stem, f)| f(input).map(|fig| (stem.to_string(), fig)))
        .collect();
    for sweep in sweeps(input) {
        figs.extend(TRACE_FIGURES.iter().flat_map(|f| f(input, sweep)));
    }
    let d = input.sc.dilation();
    for (_, fig) in &mut figs {
        mark_dilation(fig, d);
    }
    let mut files = Vec::new();
    let mut notes = input.notes.borrow().clone();
    for (stem, fig) in figs {
        let w = fig.write(dir, &stem)?;
        files.extend(w.files);
        notes.extend(w.notes);
    }
    Ok((files, notes))
}

/// Under time dilation, says so in every panel title (and so in the CSV's
/// `panel` column) and in the notes; at D = 1 changes nothing.
fn mark_dilation(fig: &mut Figure, d: crate::timebase::Dilation) {
    if d.is_none() {
        return;
    }
    for p in &mut fig.panels {
        p.title = format!("{} — D = {d} (emulated)", p.title);
    }
    fig.notes.push(format!(
        "time dilation D = {d} (emulated): times and rates are emulated; the wire ran at rate / {d} and every time lasted {d} times longer"
    ));
}

fn sweeps(input: &FigureInput) -> Vec<SweepValue> {
    let mut v: Vec<SweepValue> = Vec::new();
    for p in &input.summary.points {
        if !v.contains(&p.sweep) {
            v.push(p.sweep);
        }
    }
    v
}

fn aqms(input: &FigureInput) -> Vec<String> {
    let rs: Vec<&super::results::ComboResult> = input.results.iter().map(|s| &s.result).collect();
    aqm_order(input.sc, &rs)
}

fn x_label(sc: &Scenario) -> &'static str {
    sc.traffic.kind().x_label()
}

/// The legend of an AQM: its name, and where it rests on fewer faithful
/// repeats than asked.
fn legend(input: &FigureInput, aqm: &str) -> String {
    let short: Vec<String> = input
        .summary
        .points
        .iter()
        .filter(|p| p.aqm == aqm && p.short)
        .map(|p| match p.sweep {
            SweepValue::None => format!(
                "{} of {} repeats faithful",
                p.repeats_faithful, p.repeats_asked
            ),
            _ => format!(
                "{} of {} faithful at {}",
                p.repeats_faithful, p.repeats_asked, p.x
            ),
        })
        .collect();
    if short.is_empty() {
        aqm.to_owned()
    } else {
        format!("{aqm} ({})", short.join(", "))
    }
}

/// The notes every sweep figure carries: which points are short.
fn short_notes(input: &FigureInput) -> Vec<String> {
    let short: Vec<String> = input
        .summary
        .points
        .iter()
        .filter(|p| p.short)
        .map(|p| {
            format!(
                "{} at {} ({} of {})",
                p.aqm, p.x, p.repeats_faithful, p.repeats_asked
            )
        })
        .collect();
    if short.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "fewer faithful repeats than asked: {}",
            short.join(", ")
        )]
    }
}

fn spread_note() -> String {
    "points: median of the faithful repeats; bars: min–max over them (repeats per point in the CSV)"
        .into()
}

/// How to scale a metric for an axis: divisor and the axis' unit.
fn axis_unit(input: &FigureInput, key: &str) -> (f64, String) {
    let (_, unit) = metric_info(key);
    let typical = input
        .summary
        .points
        .iter()
        .filter_map(|p| p.metrics.get(key).map(|s| s.median.abs()))
        .fold(0.0, f64::max);
    let (div, label, _) = unit.display(typical);
    (div, label.to_owned())
}

/// Per AQM: the metric's median with min–max bars at every sweep value.
fn spread_series(input: &FigureInput, key: &str, div: f64) -> Vec<Series> {
    aqms(input)
        .iter()
        .map(|a| Series {
            name: legend(input, a),
            points: input
                .summary
                .points
                .iter()
                .filter(|p| &p.aqm == a)
                .filter_map(|p| {
                    let s = p.metrics.get(key)?;
                    Some(Point {
                        x: p.x,
                        y: s.median / div,
                        lo: Some(s.min / div),
                        hi: Some(s.max / div),
                        n: Some(s.n),
                        asked: Some(p.repeats_asked),
                    })
                })
                .collect(),
        })
        .collect()
}

/// Per AQM: mean ÷ its baseline's mean with Fieller's interval; a
/// baseline itself at 1.
fn ratio_series(input: &FigureInput, key: &str) -> Vec<Series> {
    let points = &input.summary.points;
    let is_baseline = |aqm: &str| points.iter().any(|q| q.baseline.as_deref() == Some(aqm));
    aqms(input)
        .iter()
        .map(|a| Series {
            name: legend(input, a),
            points: input
                .summary
                .points
                .iter()
                .filter(|p| &p.aqm == a)
                .filter_map(|p| {
                    let n = Some(p.metrics.get(key)?.n);
                    if is_baseline(&p.aqm) {
                        return Some(Point {
                            n,
                            asked: Some(p.repeats_asked),
                            ..Point::at(p.x, 1.0)
                        });
                    }
                    let c = p.vs_baseline.get(key)?;
                    Some(Point {
                        x: p.x,
                        y: c.ratio?,
                        lo: c.ratio_ci95.map(|r| r[0]),
                        hi: c.ratio_ci95.map(|r| r[1]),
                        n,
                        asked: Some(p.repeats_asked),
                    })
                })
                .collect(),
        })
        .collect()
}

fn sweep_panel(input: &FigureInput, title: &str, y_label: String, series: Vec<Series>) -> Panel {
    Panel {
        title: title.into(),
        x_label: x_label(input.sc).into(),
        y_label,
        series,
        markers: true,
        x_ticks: Some(sweeps(input).iter().map(|s| s.x()).collect()),
    }
}

/// A panel of one metric's spread across the sweep.
fn spread_panel(input: &FigureInput, title: &str, key: &str, what: &str) -> Panel {
    let (div, unit) = axis_unit(input, key);
    let y = if unit.is_empty() {
        what.to_owned()
    } else {
        format!("{what} ({unit})")
    };
    sweep_panel(input, title, y, spread_series(input, key, div))
}

/// A grid of [`spread_panel`]s, one per (title, metric key, what it is),
/// with the spread note.
fn spread_grid(input: &FigureInput, panels: &[(&str, &str, &str)]) -> Option<Figure> {
    let panels = panels
        .iter()
        .map(|&(title, key, what)| spread_panel(input, title, key, what))
        .collect();
    grid(panels, vec![spread_note()], input)
}

fn grid(panels: Vec<Panel>, mut notes: Vec<String>, input: &FigureInput) -> Option<Figure> {
    notes.extend(short_notes(input));
    Some(Figure {
        panels,
        columns: 2,
        notes,
    })
}

/// TCN Fig. 9–12: FCT vs load ÷ the baseline's.
fn fct_vs_load(input: &FigureInput) -> Option<Figure> {
    let TrafficSpec::Workload(_) = input.sc.traffic else {
        return None;
    };
    let base = &input.summary.baseline;
    let y = format!("FCT / {base}");
    let panel = |t: &str, key: &str| sweep_panel(input, t, y.clone(), ratio_series(input, key));
    grid(
        vec![
            panel("(a) small flows (<100KB): avg", "fct.small.mean_us"),
            panel("(b) small flows (<100KB): 99th", "fct.small.p99_us"),
            panel("(c) large flows (>10MB): avg", "fct.large.mean_us"),
            panel("(d) overall: avg", "fct.all.mean_us"),
        ],
        vec![format!(
            "points: mean over the faithful repeats ÷ {base}'s at the same load; bars: Fieller's 95 % interval (none: unbounded)"
        )],
        input,
    )
}

/// The same in absolute time.
fn fct_vs_load_abs(input: &FigureInput) -> Option<Figure> {
    let TrafficSpec::Workload(_) = input.sc.traffic else {
        return None;
    };
    spread_grid(
        input,
        &[
            ("small flows: avg", "fct.small.mean_us", "FCT"),
            ("small flows: 99th", "fct.small.p99_us", "FCT"),
            ("large flows: avg", "fct.large.mean_us", "FCT"),
            ("overall: avg", "fct.all.mean_us", "FCT"),
        ],
    )
}

/// Incast: QCT, RTOs and drops vs fan-in.
fn incast_qct(input: &FigureInput) -> Option<Figure> {
    let TrafficSpec::Incast(_) = input.sc.traffic else {
        return None;
    };
    spread_grid(
        input,
        &[
            ("query completion time: avg", "qct.mean_us", "QCT"),
            ("query completion time: 99th", "qct.p99_us", "QCT"),
            ("RTOs per run", "rtos", "TCP timeouts"),
            ("drops per run", "drops", "packets"),
        ],
    )
}

/// Static flows swept in number: queue, goodput, marks and (TCN Fig. 1)
/// each DSCP's share.
fn queue_vs_flows(input: &FigureInput) -> Option<Figure> {
    let TrafficSpec::Static(st) = &input.sc.traffic else {
        return None;
    };
    if st.flows_sweep.is_empty() {
        return None;
    }
    let mut panels = vec![
        spread_panel(
            input,
            "queue length vs number of flows: mean",
            "queue.mean_kb",
            "backlog",
        ),
        spread_panel(
            input,
            "queue length vs number of flows: 99th",
            "queue.p99_kb",
            "backlog",
        ),
        spread_panel(
            input,
            "goodput vs number of flows",
            "goodput_mbps",
            "goodput",
        ),
        spread_panel(input, "marks per run", "marks", "packets"),
    ];
    // TCN Fig. 1: the scheduler's promise is a share per queue (when the
    // flows use more than one DSCP).
    let shares = dscp_shares(input);
    if !shares.is_empty() {
        panels.push(sweep_panel(
            input,
            "share of goodput per DSCP (queue)",
            "share".into(),
            shares,
        ));
    }
    grid(panels, vec![spread_note()], input)
}

/// One series per AQM and DSCP: that DSCP's share of the goodput.
fn dscp_shares(input: &FigureInput) -> Vec<Series> {
    let mut out = Vec::new();
    for a in aqms(input) {
        let mut keys: Vec<&String> = input
            .summary
            .points
            .iter()
            .filter(|p| p.aqm == a)
            .flat_map(|p| p.metrics.keys().filter(|k| k.ends_with(".share")))
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let dscp = key.trim_start_matches("dscp").trim_end_matches(".share");
            let mut s = spread_series(input, key, 1.0)
                .into_iter()
                .find(|s| s.name.starts_with(&a))
                .unwrap_or(Series {
                    name: String::new(),
                    points: vec![],
                });
            s.name = format!("{} DSCP {dscp}", legend(input, &a));
            out.push(s);
        }
    }
    out
}

/// Static flows with a ping probe: RTT CDF per AQM (TCN Fig. 5b), pooled
/// over the faithful repeats at the first sweep value.
fn ping_rtt(input: &FigureInput) -> Option<Figure> {
    let TrafficSpec::Static(st) = &input.sc.traffic else {
        return None;
    };
    let p = st.ping.as_ref()?;
    let first = *sweeps(input).first()?;
    let lines = aqms(input)
        .iter()
        .filter_map(|a| {
            let runs: Vec<&StoredResult> = input
                .results
                .iter()
                .filter(|s| {
                    &s.result.aqm == a && s.result.sweep == first && s.result.fidelity.faithful
                })
                .collect();
            let mut rtts: Vec<f64> = runs
                .iter()
                .filter_map(|s| s.result.ping.as_ref())
                .flat_map(|p| p.rtts_us.iter().copied())
                .collect();
            rtts.sort_by(|a, b| a.total_cmp(b));
            let n = rtts.len().max(1) as f64;
            (!rtts.is_empty()).then(|| Series {
                name: format!("{} ({} repeats)", legend(input, a), runs.len()),
                points: rtts
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| Point::at(x, (i + 1) as f64 / n))
                    .collect(),
            })
        })
        .collect();
    let mut fig = Figure::single(Panel {
        title: format!("ping RTT h{} → h{} (DSCP {}): CDF", p.from, p.to, p.dscp),
        x_label: "RTT (us)".into(),
        y_label: "CDF".into(),
        series: lines,
        markers: false,
        x_ticks: None,
    });
    fig.notes = vec!["every probe of the faithful repeats pooled into one distribution".into()];
    Some(fig)
}

/// The repeat a trace shows: the first faithful one, else the first.
fn representative<'a>(
    input: &'a FigureInput,
    aqm: &str,
    sweep: SweepValue,
) -> Option<&'a StoredResult> {
    let mut runs: Vec<&StoredResult> = input
        .results
        .iter()
        .filter(|s| s.result.aqm == aqm && s.result.sweep == sweep)
        .collect();
    runs.sort_by_key(|s| (!s.result.fidelity.faithful, s.result.repeat));
    runs.first().copied()
}

fn trace_note(input: &FigureInput, sweep: SweepValue) -> String {
    let n = input
        .summary
        .points
        .iter()
        .filter(|p| p.sweep == sweep)
        .map(|p| p.repeats_asked)
        .max()
        .unwrap_or(1);
    format!("one repeat per AQM (the first faithful one) of {n}: traces over time are not averaged over repeats")
}

fn with_tag(stem: &str, sweep: SweepValue) -> String {
    match sweep.tag() {
        t if t.is_empty() => stem.to_owned(),
        t => format!("{stem}_{t}"),
    }
}

/// Queue length vs time at one sweep value, one line per AQM. Incast
/// queries repeat every `interval`: at 1 ms resolution a whole run is a
/// wall of spikes, so it shows the first ten queries from the first backlog.
fn queue_trace(input: &FigureInput, sweep: SweepValue) -> Vec<(String, Figure)> {
    let window_ms = match &input.sc.traffic {
        TrafficSpec::Incast(i) => crate::units::parse_duration(&i.interval)
            .ok()
            .map(|ns| 10.0 * ns as f64 / 1e6),
        _ => None,
    };
    let mut lines = Vec::new();
    let mut port_name = String::new();
    for a in aqms(input) {
        let Some(stored) = representative(input, &a, sweep) else {
            continue;
        };
        let ts = match stored.queue_series() {
            Ok(ts) => ts,
            Err(e) => {
                input.notes.borrow_mut().push(format!("queue figure: {e}"));
                continue;
            }
        };
        let Some(port) = busiest_port(&ts) else {
            continue;
        };
        let mut pts = port_backlog_kb(&ts, &port);
        if let Some(w) = window_ms {
            let t0 = pts.iter().find(|p| p.1 > 0.0).map_or(0.0, |p| p.0);
            pts.retain(|p| p.0 >= t0 - 1.0 && p.0 <= t0 + w);
        }
        let r = &stored.result;
        lines.push(Series {
            name: if r.fidelity.faithful {
                format!("{a} (repeat {})", r.repeat)
            } else {
                format!("{a} (repeat {}, NOT FAITHFUL)", r.repeat)
            },
            points: pts
                .into_iter()
                .map(|(t, kb)| Point::at(t / 1000.0, kb))
                .collect(),
        });
        port_name = port;
    }
    let tag = sweep.tag();
    let title = match window_ms {
        Some(_) => format!("queue length, first 10 queries, busiest port {port_name} {tag}"),
        None => format!("queue length, busiest port {port_name} {tag}"),
    };
    let mut fig = Figure::single(Panel {
        title,
        x_label: "time (s)".into(),
        y_label: "backlog (KB)".into(),
        series: lines,
        markers: false,
        x_ticks: None,
    });
    fig.notes = vec![trace_note(input, sweep)];
    vec![(with_tag("queue", sweep), fig)]
}

/// Static flows: goodput per flow and departures per queue vs time, one
/// figure per AQM at this sweep value.
fn goodput_traces(input: &FigureInput, sweep: SweepValue) -> Vec<(String, Figure)> {
    let TrafficSpec::Static(_) = input.sc.traffic else {
        return Vec::new();
    };
    aqms(input)
        .iter()
        .filter_map(|a| goodput_trace(input, a, sweep))
        .collect()
}

fn goodput_trace(input: &FigureInput, aqm: &str, sweep: SweepValue) -> Option<(String, Figure)> {
    let stored = representative(input, aqm, sweep)?;
    let r = &stored.result;
    let verdict = if r.fidelity.faithful {
        String::new()
    } else {
        format!(
            " — NOT FAITHFUL (lost {:.1} % link time)",
            r.fidelity.max_lost_fraction * 100.0
        )
    };
    let tag = match sweep.tag() {
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
                .map(|&(t, g)| Point::at(t as f64 / 1000.0, g))
                .collect(),
        })
        .collect();
    let mut panels = vec![Panel {
        title: format!("{aqm}{tag} repeat {}: goodput per flow{verdict}", r.repeat),
        x_label: "time (s)".into(),
        y_label: "Mbit/s".into(),
        series: flows,
        markers: false,
        x_ticks: None,
    }];
    match stored.queue_series() {
        Ok(ts) => {
            if let Some(port) = busiest_port(&ts) {
                panels.push(Panel {
                    title: format!("{aqm}: departures per queue, {port}"),
                    x_label: "time (s)".into(),
                    y_label: "Mbit/s".into(),
                    series: queue_rates_mbps(&ts, &port)
                        .into_iter()
                        .filter(|(_, pts)| pts.iter().any(|p| p.1 > 0.0))
                        .map(|(q, pts)| Series {
                            name: format!("queue {q}"),
                            points: pts
                                .into_iter()
                                .map(|(t, y)| Point::at(t / 1000.0, y))
                                .collect(),
                        })
                        .collect(),
                    markers: false,
                    x_ticks: None,
                });
            }
        }
        Err(e) => input
            .notes
            .borrow_mut()
            .push(format!("goodput figure: {e}")),
    }
    let stem = match sweep.tag() {
        t if t.is_empty() => format!("goodput_{aqm}"),
        t => format!("goodput_{aqm}_{t}"),
    };
    Some((
        stem,
        Figure {
            panels,
            columns: 2,
            notes: vec![trace_note(input, sweep)],
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timebase::Dilation;

    fn fig() -> Figure {
        Figure::single(Panel {
            title: "queue length".into(),
            x_label: "time (s)".into(),
            y_label: "backlog (KB)".into(),
            series: vec![],
            markers: false,
            x_ticks: None,
        })
    }

    #[test]
    fn dilated_figures_say_d_and_emulated() {
        let mut f = fig();
        mark_dilation(&mut f, Dilation::NONE);
        assert_eq!(f.panels[0].title, "queue length");
        assert!(f.notes.is_empty());
        let mut f = fig();
        mark_dilation(&mut f, Dilation::new(4.0).unwrap());
        assert_eq!(f.panels[0].title, "queue length — D = 4 (emulated)");
        assert!(
            f.notes[0].starts_with("time dilation D = 4 (emulated)"),
            "{:?}",
            f.notes
        );
    }
}

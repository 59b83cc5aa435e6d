//! Scaling a scenario to a rate this machine can hold, and the calibration
//! that finds that rate (its headroom).
//!
//! The papers' testbeds run at 1 Gbit/s. On a 2-vCPU machine the hosts' TCP
//! and the switch share two CPUs, and with many flows the port can lose link
//! time (the fidelity guard says so). What the papers' results depend on is
//! not the absolute rate but the quantities measured *in time* or *relative
//! to the link*: the marking threshold K = C × RTT × λ (TCN paper Eq. 1), the
//! buffer's drain time, a paced flow's share of the link, a workload's load.
//! So a scenario is scaled by one factor f = new rate / scenario rate:
//!
//! * `switch.rate` → the new rate; AQM defaults derived from the rate and
//!   `--rtt` (K, MQ-ECN's K_i, DiffECN's K_p …) follow by themselves;
//! * `switch.buffer` and every *size*-valued AQM option (`k = "30kb"`,
//!   RED's thresholds) × f — the same time to drain, the same K in time; a
//!   bare number (a count of packets) only where the AQM names the key a
//!   queue length (`aqm::config::length_keys`: `k = 65` with `unit =
//!   "packets"`, PRED's `max_k`);
//! * every paced flow's `rate` × f — the same share of the link;
//! * unless the scenario says `[scale] buffer = "keep"` (incast: the first
//!   window in frames against the buffer in frames decides it), in which
//!   case the buffer keeps its size and only its drain time grows;
//! * time-valued options (TCN's and ECN♯'s thresholds, CoDel's target),
//!   quanta and weights (relative), loads (relative), incast and flow sizes
//!   (the workload itself) are kept.
//!
//! The scaling is recorded in `manifest.json` and `summary.json`, so a
//! result says at which rate it was measured and why.
//!
//! # Calibrating the time dilation
//!
//! Rate scaling shrinks the pipe in packets by f, and with it every
//! threshold of a few frames and DCTCP's two-segment floor: the experiment
//! changes. Time dilation (`dilation = D`) keeps every rate, time and
//! packet count the scenario's and runs the whole experiment D times
//! slower, so [`calibrate_dilation`] looks for the smallest D at which
//! this machine runs the scenario's heaviest point faithfully: D = 1, 2,
//! 4, 8, … up to a cap, stopping at the first D where the switch's fidelity
//! guard passes every repeat of the probe.

use serde::Serialize;

use super::scenario::{BufferScaling, Scenario, ScenarioError};
use crate::timebase::Dilation;
use crate::units::{fmt_size, parse_duration, parse_rate, parse_size, Rate};

/// How a scenario was scaled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scaling {
    /// The scenario's own rate.
    pub from: String,
    /// The rate it ran at.
    pub to: String,
    /// to / from.
    pub factor: f64,
    /// Every value changed, `what: old → new`.
    pub changes: Vec<String>,
    /// Why (e.g. the calibration's finding).
    pub reason: String,
}

fn inv(m: String) -> ScenarioError {
    ScenarioError::Invalid(m)
}

/// `sc` at `rate`, with everything measured in bytes or bit/s scaled by the
/// same factor (see the module docs).
pub fn scale(
    sc: &Scenario,
    rate: &str,
    reason: &str,
) -> Result<(Scenario, Scaling), ScenarioError> {
    if sc.fabric.is_some() {
        return Err(inv(format!(
            "--rate {rate} with a [fabric] scenario: the fabric's link rates, delays and \
             buffers would not follow; use --dilation (every packet count stays the \
             scenario's), or write the fabric at the rate you want"
        )));
    }
    let old_rate = sc.switch.rate();
    let old = parse_rate(&old_rate).map_err(|e| inv(format!("switch.rate `{old_rate}`: {e}")))?;
    let new = parse_rate(rate).map_err(|e| inv(format!("--rate `{rate}`: {e}")))?;
    let f = new.bps() as f64 / old.bps() as f64;
    let mut out = sc.clone();
    let mut changes = Vec::new();
    out.switch.set_rate(new.to_string());
    changes.push(format!("switch.rate: {old_rate} → {}", out.switch.rate()));
    let scale_bytes = |b: u64| ((b as f64 * f).round() as u64).max(1);

    let buffer = sc
        .switch
        .buffer()
        .unwrap_or_else(|| crate::config::DEFAULT_BUFFER.to_string());
    let b = parse_size(&buffer).map_err(|e| inv(format!("switch.buffer `{buffer}`: {e}")))?;
    if sc.scale.buffer == BufferScaling::Keep {
        changes.push(format!(
            "switch.buffer: {buffer} kept ([scale] buffer = \"keep\": its drain time × {:.3})",
            1.0 / f
        ));
        out.switch.set_buffer(Some(buffer));
    } else {
        let nb = fmt_size(scale_bytes(b));
        changes.push(format!("switch.buffer: {buffer} → {nb}"));
        out.switch.set_buffer(Some(nb));
    }

    for (aqm, opts) in out.switch.aqm_opts.iter_mut() {
        // `dctcp@port` is a variant of `dctcp`.
        let base = aqm.split('@').next().unwrap_or(aqm);
        let lengths = crate::aqm::config::length_keys(base);
        for (key, v) in opts.iter_mut() {
            // A bare number is a length only where the AQM says the key is
            // one: a count of packets (`k = 65` with `unit = "packets"`,
            // PRED's `max_k = 107`); sizes in bytes carry their unit.
            if let toml::Value::Integer(n) = *v {
                if n > 0 && lengths.contains(&key.replace('-', "_").as_str()) {
                    let nn = scale_bytes(n as u64);
                    changes.push(format!("switch.aqm_opts.{aqm}.{key}: {n} → {nn}"));
                    *v = toml::Value::Integer(nn as i64);
                }
                continue;
            }
            let toml::Value::String(s) = v else { continue };
            // Times stay (they are already relative to the RTT); a string
            // that reads as a size with a unit is a byte threshold.
            if parse_duration(s).is_ok() || !s.chars().any(|c| c.is_ascii_alphabetic()) {
                continue;
            }
            let Ok(n) = parse_size(s) else { continue };
            let ns = fmt_size(scale_bytes(n));
            changes.push(format!("switch.aqm_opts.{aqm}.{key}: {s} → {ns}"));
            *v = toml::Value::String(ns);
        }
    }

    // Paced flows keep their share of the link.
    out.traffic
        .kind_mut()
        .scale_rates(f, &mut changes)
        .map_err(inv)?;
    out.validate()?;
    Ok((
        out,
        Scaling {
            from: sc.switch.rate(),
            to: new.to_string(),
            factor: f,
            changes,
            reason: reason.to_string(),
        },
    ))
}

/// The heaviest point of `sc` through its first AQM, once: the largest
/// flow count / load / fan-in of its sweep. The calibration runs this.
pub fn probe(sc: &Scenario) -> Scenario {
    let mut p = sc.clone();
    p.repeat = 1;
    p.switch.aqm.truncate(1);
    p.baseline = None;
    let first = &p.switch.aqm[0];
    p.switch.aqm_opts.retain(|k, _| k == first);
    p.switch.variant_args.retain(|k, _| k == first);
    p.traffic.kind_mut().keep_heaviest();
    p
}

/// The rates a calibration tries, highest first: the scenario's rate, then
/// ¾, ½, ⅓ and ¼ of it.
pub fn candidates(sc: &Scenario) -> Result<Vec<String>, ScenarioError> {
    let rate = sc.switch.rate();
    let r = parse_rate(&rate).map_err(|e| inv(format!("switch.rate `{rate}`: {e}")))?;
    Ok([1.0, 0.75, 0.5, 1.0 / 3.0, 0.25]
        .iter()
        .map(|f| {
            // Round to whole Mbit/s so the names stay readable.
            let mbit = ((r.bps() as f64 * f) / 1e6).round().max(1.0) as u64;
            Rate::mbit(mbit).to_string()
        })
        .collect())
}

/// One rate the calibration tried.
#[derive(Clone, Debug, Serialize)]
pub struct Trial {
    /// The rate.
    pub rate: String,
    /// The guard's verdict on every combination of the probe.
    pub faithful: bool,
    /// Static flows: goodput / what the link can carry as TCP payload
    /// (1448 of every 1538 wire bytes); None for other traffic.
    pub utilisation: Option<f64>,
    /// Why it was not accepted (empty if it was).
    pub reasons: Vec<String>,
}

/// What a calibration found.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// The scenario's rate.
    pub scenario_rate: String,
    /// The highest rate accepted, if any.
    pub rate: Option<String>,
    /// Every rate tried, highest first (it stops at the first accepted).
    pub trials: Vec<Trial>,
    /// The acceptance rule.
    pub rule: String,
}

/// TCP payload per wire byte of a full-size frame: 1448 B of payload in
/// 1538 B on the wire (1514 + preamble, FCS, inter-frame gap).
pub const PAYLOAD_PER_WIRE: f64 = 1448.0 / 1538.0;

/// Smallest accepted utilisation of the link by static flows: a rate is
/// held when they carry ≥ 93 % of it as goodput.
pub const MIN_UTILISATION: f64 = 0.93;

/// Runs [`probe`] of `sc` (quick when `opts.quick`, as `calibrate` runs it
/// unless `--full`) at each of [`candidates`] until the guard
/// calls every combination faithful and, for static flows, the goodput is
/// at least [`MIN_UTILISATION`] of what the link carries. Each trial's
/// results go to `opts.out/<rate>`.
pub fn calibrate(
    sc: &Scenario,
    name: &str,
    opts: &super::RunOptions,
) -> anyhow::Result<Calibration> {
    let mut trials = Vec::new();
    let mut found = None;
    let probe = probe(sc);
    for rate in candidates(sc)? {
        let (s, how) = scale(&probe, &rate, "calibration trial")?;
        let mut o = opts.clone();
        o.out = opts.out.join(&rate);
        o.scaling = Some(how);
        super::run(&s, &format!("{name}-calibrate"), &o)?;
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(o.out.join("summary.json"))?)?;
        let trial = judge_trial(&rate, &s, &summary);
        eprintln!(
            "calibration: {rate}: {}{}",
            if trial.reasons.is_empty() {
                "accepted"
            } else {
                "rejected — "
            },
            trial.reasons.join("; ")
        );
        let ok = trial.reasons.is_empty();
        trials.push(trial);
        if ok {
            found = Some(rate);
            break;
        }
    }
    Ok(Calibration {
        scenario_rate: sc.switch.rate(),
        rate: found,
        trials,
        rule: format!(
            "the heaviest point of the sweep through the first AQM, {}: the fidelity guard passes every combination and static flows reach ≥ {:.0} % of the link's TCP payload rate",
            probe_size(opts),
            MIN_UTILISATION * 100.0
        ),
    })
}

/// Accepts or rejects one trial from its `summary.json`.
pub fn judge_trial(rate: &str, sc: &Scenario, summary: &serde_json::Value) -> Trial {
    let mut reasons = Vec::new();
    // The probe runs once: its one repeat, faithful or not (an unfaithful
    // repeat is left out of `points`, not of `repeats`).
    let combos = summary["repeats"].as_array().cloned().unwrap_or_default();
    if combos.is_empty() {
        reasons.push("no combination completed".into());
    }
    let mut faithful = true;
    for c in &combos {
        if c["fidelity"]["faithful"] != true {
            faithful = false;
            let why: Vec<String> = c["fidelity"]["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect();
            reasons.push(format!("not faithful: {}", why.join("; ")));
        }
    }
    let utilisation = match (sc.traffic.kind().as_static(), parse_rate(rate)) {
        (Some(_), Ok(r)) => {
            let g = summary["repeats"][0]["values"]["goodput_mbps"]
                .as_f64()
                .unwrap_or(0.0);
            let u = g * 1e6 / (r.bps() as f64 * PAYLOAD_PER_WIRE);
            if u < MIN_UTILISATION {
                reasons.push(format!(
                    "goodput {g:.0} Mbit/s is {:.1} % of the link's payload rate (need {:.0} %)",
                    u * 100.0,
                    MIN_UTILISATION * 100.0
                ));
            }
            Some(u)
        }
        _ => None,
    };
    Trial {
        rate: rate.to_string(),
        faithful,
        utilisation,
        reasons,
    }
}

/// Largest D `calibrate` tries unless told (`--max-dilation`): at 16 a
/// 10 Gbit/s link runs at 625 Mbit/s on the wire and a 10 s run lasts
/// 160 s.
pub const DEFAULT_MAX_DILATION: u32 = 16;

/// Repeats of the probe at each D (the scenario's `repeat`, at most this):
/// one lucky run is not a verdict.
pub const DILATION_PROBE_REPEATS: u32 = 3;

/// The factors a dilation calibration tries, smallest first: `min`, 2·`min`,
/// 4·`min`, … up to `max` (and `max` itself when the doubling skips it).
/// `min` is 1 unless told (`--min-dilation`): a 10 Gbit/s scenario on a
/// machine known to need D ≥ 32 need not spend trials on 1 … 16.
pub fn dilation_candidates(min: u32, max: u32) -> Result<Vec<Dilation>, String> {
    let top = Dilation::new(max as f64).map_err(|e| format!("--max-dilation {max}: {e}"))?;
    Dilation::new(min as f64).map_err(|e| format!("--min-dilation {min}: {e}"))?;
    if min > max {
        return Err(format!(
            "--min-dilation {min} is above --max-dilation {max}: give a range that holds at \
             least one D (e.g. --min-dilation {min} --max-dilation {})",
            min.saturating_mul(4)
        ));
    }
    let mut v = Vec::new();
    let mut d = min;
    while d < max {
        v.push(Dilation::new(d as f64)?);
        d = d.saturating_mul(2);
    }
    v.push(top);
    Ok(v)
}

/// One D the calibration tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DilationTrial {
    /// D.
    pub dilation: Dilation,
    /// The guard passed every repeat of the probe.
    pub faithful: bool,
    /// Largest share of backlogged link time a port lost, over the repeats
    /// (the guard's figure, in real time).
    pub max_lost_fraction: f64,
    /// Repeats judged.
    pub repeats: usize,
    /// The guard's reasons (empty when faithful).
    pub reasons: Vec<String>,
}

/// What a dilation calibration found.
#[derive(Clone, Debug, Serialize)]
pub struct DilationCalibration {
    /// The scenario's (emulated) rate.
    pub scenario_rate: String,
    /// The smallest D accepted, if any up to the cap.
    pub dilation: Option<Dilation>,
    /// Every D tried, smallest first (it stops at the first accepted).
    pub trials: Vec<DilationTrial>,
    /// The acceptance rule.
    pub rule: String,
}

/// Tries each of `candidates` in order with `try_d` and stops at the first
/// faithful one: the smallest D accepted (None: none up to the cap) and
/// every trial. `try_d` runs the probe at D and judges it (a fake in tests).
pub fn search_dilation<F>(
    candidates: &[Dilation],
    mut try_d: F,
) -> anyhow::Result<(Option<Dilation>, Vec<DilationTrial>)>
where
    F: FnMut(Dilation) -> anyhow::Result<DilationTrial>,
{
    let mut trials = Vec::new();
    for &d in candidates {
        let t = try_d(d)?;
        let ok = t.faithful;
        trials.push(t);
        if ok {
            return Ok((Some(d), trials));
        }
    }
    Ok((None, trials))
}

/// Judges one D from the probe's `summary.json`: faithful when every repeat
/// is (the guard's verdict alone — goodput and the rest are the
/// experiment's result, not the machine's).
pub fn judge_dilation_trial(d: Dilation, summary: &serde_json::Value) -> DilationTrial {
    let combos = summary["repeats"].as_array().cloned().unwrap_or_default();
    let mut reasons = Vec::new();
    if combos.is_empty() {
        reasons.push("no combination completed".to_string());
    }
    let mut max_lost: f64 = 0.0;
    for c in &combos {
        let f = &c["fidelity"];
        max_lost = max_lost.max(f["max_lost_fraction"].as_f64().unwrap_or(0.0));
        if f["faithful"] != true {
            let why: Vec<&str> = f["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str())
                .collect();
            reasons.push(format!(
                "{}: not faithful: {}",
                c["dir"].as_str().unwrap_or("?"),
                why.join("; ")
            ));
        }
    }
    DilationTrial {
        dilation: d,
        faithful: reasons.is_empty(),
        max_lost_fraction: max_lost,
        repeats: combos.len(),
        reasons,
    }
}

/// How a calibration's probe ran, for its rule: `quick` (as `run --quick`)
/// or `full` (`calibrate --full`: the scenario's own flow counts and
/// durations, where a quick probe held but the full run did not).
fn probe_size(opts: &super::RunOptions) -> &'static str {
    if opts.quick {
        "quick"
    } else {
        "full"
    }
}

/// The probe a dilation calibration runs: [`probe`] with up to
/// [`DILATION_PROBE_REPEATS`] repeats.
pub fn dilation_probe(sc: &Scenario) -> Scenario {
    let mut p = probe(sc);
    p.repeat = sc.repeat.clamp(1, DILATION_PROBE_REPEATS);
    p
}

/// Runs [`dilation_probe`] of `sc` (quick when `opts.quick`) at D = `min`,
/// 2·`min`, … up to `max` until the guard passes every repeat. Each trial's
/// results go to `opts.out/d<D>`.
pub fn calibrate_dilation(
    sc: &Scenario,
    name: &str,
    opts: &super::RunOptions,
    (min, max): (u32, u32),
) -> anyhow::Result<DilationCalibration> {
    let candidates = dilation_candidates(min, max).map_err(|e| anyhow::anyhow!(e))?;
    let probe = dilation_probe(sc);
    let (found, trials) = search_dilation(&candidates, |d| {
        let mut s = probe.clone();
        s.dilation = Some(d.factor());
        let mut o = opts.clone();
        o.out = opts.out.join(format!("d{d}"));
        super::run(&s, &format!("{name}-calibrate"), &o)?;
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(o.out.join("summary.json"))?)?;
        let t = judge_dilation_trial(d, &summary);
        eprintln!(
            "calibration: D = {d}: lost {:.2} % of link time at most over {} repeats — {}{}",
            t.max_lost_fraction * 100.0,
            t.repeats,
            if t.faithful {
                "faithful"
            } else {
                "NOT FAITHFUL: "
            },
            t.reasons.join("; ")
        );
        Ok(t)
    })?;
    Ok(DilationCalibration {
        scenario_rate: sc.switch.rate(),
        dilation: found,
        trials,
        rule: format!(
            "the heaviest point of the sweep through the first AQM, {}, {} repeat(s), at D = {}: the smallest D at which the fidelity guard passes every repeat",
            probe_size(opts),
            probe.repeat,
            candidates
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::scenario::TrafficSpec;
    use std::path::Path;

    const FIG5: &str = r#"
        [topology]
        hosts = 4
        [switch]
        aqm = ["tcn", "dctcp@queue"]
        rate = "1gbit"
        buffer = "96kb"
        queues = 3
        sched = "sp+wfq"
        strict = "0"
        quantum = "1514"
        [switch.aqm_opts."dctcp@queue"]
        k = "32kb"
        occupancy = "queue"
        [switch.aqm_opts.tcn]
        threshold = "256us"
        [traffic]
        kind = "static"
        duration = "10s"
        flows_sweep = [2, 16, 4]
        flows = [
          { server = 1, client = 4, dscp = 0, rate = "500mbit" },
          { server = 2, client = 4, dscp = 1, count = "sweep" },
        ]
    "#;

    fn sc(s: &str) -> Scenario {
        let sc = Scenario::from_toml(s, Path::new("t.toml")).unwrap();
        sc.validate().unwrap();
        sc
    }

    #[test]
    fn bare_numbers_scale_only_where_the_aqm_says_they_are_lengths() {
        let text = r#"
            [topology]
            hosts = 2
            [switch]
            aqm = ["dctcp@port", "red@fixed", "pred"]
            rate = "1gbit"
            buffer = "192kb"
            [switch.aqm_opts."dctcp@port"]
            k = "2656b"
            occupancy = "port"
            [switch.aqm_opts."red@fixed"]
            form = "point-slope"
            unit = "packets"
            w_q = 1.0
            lambda = 0.2
            min_k = 3
            max_k = 107
            [switch.aqm_opts.pred]
            index_bits = 10
            [traffic]
            kind = "static"
            duration = "3s"
            flows = [{ server = 1, client = 2 }]
        "#;
        let (s, how) = scale(&sc(text), "500mbit", "test").unwrap();
        let o = &s.switch.aqm_opts;
        assert_eq!(o["dctcp@port"]["k"].as_str(), Some("1328b"), "bytes");
        assert_eq!(o["red@fixed"]["max_k"].as_integer(), Some(54), "packets");
        assert_eq!(o["red@fixed"]["min_k"].as_integer(), Some(2));
        assert_eq!(o["red@fixed"]["lambda"].as_float(), Some(0.2), "a slope");
        assert_eq!(o["red@fixed"]["w_q"].as_float(), Some(1.0));
        assert_eq!(
            o["pred"]["index_bits"].as_integer(),
            Some(10),
            "a table size"
        );
        assert!(how
            .changes
            .iter()
            .any(|c| c.contains("dctcp@port.k: 2656b → 1328b")));
    }

    #[test]
    fn an_incast_scenario_may_keep_its_buffer() {
        let text = format!("{FIG5}\n[scale]\nbuffer = \"keep\"\n");
        let (s, how) = scale(&sc(&text), "250mbit", "test").unwrap();
        assert_eq!(s.switch.buffer().as_deref(), Some("96kb"));
        assert!(
            how.changes
                .iter()
                .any(|c| c.contains("96kb kept") && c.contains("× 4.000")),
            "{:?}",
            how.changes
        );
        // Thresholds still scale: K = C·RTT·λ follows the rate.
        assert_eq!(s.switch.aqm_opts["dctcp@queue"]["k"].as_str(), Some("8kb"));
        let bad = format!("{FIG5}\n[scale]\nbuffer = \"frames\"\n");
        assert!(Scenario::from_toml(&bad, Path::new("t.toml")).is_err());
    }

    #[test]
    fn bytes_and_bit_rates_scale_times_and_shares_stay() {
        let (s, how) = scale(&sc(FIG5), "500mbit", "test").unwrap();
        assert_eq!(s.switch.rate(), "500mbit");
        assert_eq!(s.switch.buffer().as_deref(), Some("48kb"));
        let dq = &s.switch.aqm_opts["dctcp@queue"];
        assert_eq!(dq["k"].as_str(), Some("16kb"), "K = C·RTT·λ halves with C");
        assert_eq!(dq["occupancy"].as_str(), Some("queue"), "not a size");
        assert_eq!(
            s.switch.aqm_opts["tcn"]["threshold"].as_str(),
            Some("256us"),
            "a sojourn threshold is already in time"
        );
        assert_eq!(
            s.switch.options().quantum.as_deref(),
            Some("1514"),
            "quanta are relative"
        );
        let TrafficSpec::Static(st) = &s.traffic else {
            panic!()
        };
        assert_eq!(
            st.flows[0].rate.as_deref(),
            Some("250mbit"),
            "same share of the link"
        );
        assert_eq!(st.flows[1].rate, None);
        assert!((how.factor - 0.5).abs() < 1e-12);
        assert_eq!(how.changes.len(), 4, "{:?}", how.changes);
        assert!(how.changes.iter().any(|c| c.contains("96kb → 48kb")));
    }

    #[test]
    fn an_unset_buffer_scales_from_the_switch_default() {
        let text = FIG5.replace("buffer = \"96kb\"", "");
        let (s, _) = scale(&sc(&text), "250mbit", "").unwrap();
        let d = parse_size(crate::config::DEFAULT_BUFFER).unwrap();
        assert_eq!(
            parse_size(s.switch.buffer().as_deref().unwrap()).unwrap(),
            d / 4
        );
    }

    #[test]
    fn bad_rates_are_named() {
        let e = scale(&sc(FIG5), "fast", "").unwrap_err().to_string();
        assert!(e.contains("--rate `fast`"), "{e}");
    }

    #[test]
    fn the_probe_is_the_heaviest_point_of_the_first_aqm() {
        let p = probe(&sc(FIG5));
        assert_eq!(p.switch.aqm, ["tcn"]);
        assert!(p.switch.aqm_opts.contains_key("tcn"));
        assert!(!p.switch.aqm_opts.contains_key("dctcp@queue"));
        let TrafficSpec::Static(st) = &p.traffic else {
            panic!()
        };
        assert_eq!(st.flows_sweep, [16]);
        p.validate().unwrap();
        assert_eq!(p.combos().len(), 1);
    }

    #[test]
    fn a_trial_needs_the_verdict_and_the_goodput() {
        let s = sc(FIG5);
        let summary = |faithful: bool, mbps: f64| {
            serde_json::json!({
                "repeats": [{"fidelity": {"faithful": faithful, "reasons": ["port x lost 5 %"]},
                             "values": {"goodput_mbps": mbps}}],
            })
        };
        let t = judge_trial("1gbit", &s, &summary(true, 900.0));
        assert!(t.reasons.is_empty(), "{:?}", t.reasons);
        assert!((t.utilisation.unwrap() - 0.9 / PAYLOAD_PER_WIRE).abs() < 1e-9);
        let t = judge_trial("1gbit", &s, &summary(true, 800.0));
        assert_eq!(t.reasons.len(), 1);
        assert!(t.reasons[0].contains("85.0 %"), "{:?}", t.reasons);
        let t = judge_trial("1gbit", &s, &summary(false, 900.0));
        assert!(!t.faithful);
        assert!(t.reasons[0].contains("port x lost 5 %"), "{:?}", t.reasons);
        let t = judge_trial("1gbit", &s, &serde_json::json!({}));
        assert!(t.reasons[0].contains("no combination"), "{:?}", t.reasons);
    }

    #[test]
    fn candidates_step_down_from_the_scenario_rate() {
        assert_eq!(
            candidates(&sc(FIG5)).unwrap(),
            ["1gbit", "750mbit", "500mbit", "333mbit", "250mbit"]
        );
    }

    #[test]
    fn dilation_candidates_double_up_to_the_cap() {
        let f = |lo, m| {
            dilation_candidates(lo, m)
                .unwrap()
                .iter()
                .map(|d| d.factor())
                .collect::<Vec<_>>()
        };
        assert_eq!(f(1, 16), [1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!(f(1, 12), [1.0, 2.0, 4.0, 8.0, 12.0]);
        assert_eq!(f(1, 1), [1.0]);
        // From a floor: doubling from it, the cap last.
        assert_eq!(f(40, 256), [40.0, 80.0, 160.0, 256.0]);
        assert_eq!(f(32, 256), [32.0, 64.0, 128.0, 256.0]);
        assert_eq!(f(16, 16), [16.0]);
        let e = dilation_candidates(1, 5000).unwrap_err();
        assert!(e.contains("--max-dilation 5000"), "{e}");
        assert!(dilation_candidates(1, 0).is_err());
        assert!(dilation_candidates(0, 16)
            .unwrap_err()
            .contains("--min-dilation 0"));
        let e = dilation_candidates(64, 16).unwrap_err();
        assert!(
            e.contains("--min-dilation 64 is above --max-dilation 16")
                && e.contains("--max-dilation 256"),
            "{e}"
        );
    }

    fn verdict(d: Dilation, faithful: bool) -> DilationTrial {
        DilationTrial {
            dilation: d,
            faithful,
            max_lost_fraction: if faithful { 0.002 } else { 0.05 },
            repeats: 3,
            reasons: if faithful {
                vec![]
            } else {
                vec!["lost 5 %".into()]
            },
        }
    }

    #[test]
    fn the_search_stops_at_the_smallest_faithful_d() {
        let c = dilation_candidates(1, 16).unwrap();
        // Faithful from D = 4 on: 1 and 2 are tried and rejected, 8 and 16
        // never run.
        let mut ran = Vec::new();
        let (d, trials) = search_dilation(&c, |d| {
            ran.push(d.factor());
            Ok(verdict(d, d.factor() >= 4.0))
        })
        .unwrap();
        assert_eq!(d.map(|d| d.factor()), Some(4.0));
        assert_eq!(ran, [1.0, 2.0, 4.0]);
        assert_eq!(
            trials.iter().map(|t| t.faithful).collect::<Vec<_>>(),
            [false, false, true]
        );
        // Already faithful in real time: D = 1.
        let (d, trials) = search_dilation(&c, |d| Ok(verdict(d, true))).unwrap();
        assert!(d.unwrap().is_none());
        assert_eq!(trials.len(), 1);
        // Never faithful: None, every candidate tried.
        let (d, trials) = search_dilation(&c, |d| Ok(verdict(d, false))).unwrap();
        assert_eq!(d, None);
        assert_eq!(trials.len(), 5);
        // A failed run stops the search with its error.
        let e = search_dilation(&c, |d| {
            if d.factor() == 2.0 {
                anyhow::bail!("the switch exited")
            }
            Ok(verdict(d, false))
        })
        .unwrap_err();
        assert!(e.to_string().contains("the switch exited"));
    }

    #[test]
    fn a_dilation_trial_needs_every_repeat_faithful() {
        let d = Dilation::new(2.0).unwrap();
        let rep = |dir: &str, faithful: bool, lost: f64| {
            serde_json::json!({"dir": dir, "fidelity": {"faithful": faithful,
                "reasons": if faithful { vec![] } else { vec!["port x lost 3 %"] },
                "max_lost_fraction": lost}})
        };
        let t = judge_dilation_trial(
            d,
            &serde_json::json!({"repeats": [rep("a-r0", true, 0.004), rep("a-r1", true, 0.001)]}),
        );
        assert!(t.faithful && t.reasons.is_empty(), "{t:?}");
        assert_eq!((t.repeats, t.max_lost_fraction), (2, 0.004));
        let t = judge_dilation_trial(
            d,
            &serde_json::json!({"repeats": [rep("a-r0", true, 0.004), rep("a-r1", false, 0.03)]}),
        );
        assert!(!t.faithful);
        assert_eq!(t.max_lost_fraction, 0.03);
        assert!(
            t.reasons[0].starts_with("a-r1: not faithful: port x lost 3 %"),
            "{:?}",
            t.reasons
        );
        let t = judge_dilation_trial(d, &serde_json::json!({}));
        assert!(!t.faithful && t.reasons[0].contains("no combination"));
        // The probe: the heaviest point, a few repeats.
        let mut s = sc(FIG5);
        s.repeat = 10;
        let p = dilation_probe(&s);
        assert_eq!(p.repeat, DILATION_PROBE_REPEATS);
        assert_eq!(p.combos().len(), DILATION_PROBE_REPEATS as usize);
        s.repeat = 1;
        assert_eq!(dilation_probe(&s).repeat, 1);
    }

    #[test]
    fn a_fabric_scenario_is_not_rate_scaled() {
        let text =
            format!("{FIG5}\n[fabric.leaf_spine]\nleaves = 2\nspines = 1\nhosts_per_leaf = 2\n");
        let sc = Scenario::from_toml(&text, Path::new("t.toml")).unwrap();
        let e = scale(&sc, "100mbit", "test").unwrap_err().to_string();
        assert!(e.contains("--rate 100mbit with a [fabric] scenario"), "{e}");
        assert!(e.contains("--dilation"), "says what to do instead: {e}");
    }
}

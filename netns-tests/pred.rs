//! Root integration test of PRED (`--aqm pred`, PRED paper §IV) with real
//! DCTCP hosts: 8 long flows from two senders into one 500 Mbit/s port (the
//! rate this 2-vCPU machine holds with 8 flows; at 1 Gbit/s the port lost
//! 39 % of its backlogged link time in a CI-like run). PRED
//! must count the flows (FCS), run its QLA trials, mark, and the senders must
//! see the marks (TcpExtTCPDeliveredCE). The live `softswitch stats` and the
//! switch's time series must show N and the slope. Skipped unless root.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    iperf_receiver_bps, ping, run_ok, skip_unless_root, skip_unless_tools, stats_socket,
    switch_serial, tcp_ext_counter, CpuWatch, SwitchProc, TestTopo, Verdict,
};

const SECS: u32 = 8;

#[test]
fn pred_counts_flows_and_marks_dctcp_at_the_shaped_rate() {
    let name = "pred_counts_flows_and_marks_dctcp_at_the_shaped_rate";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(3);
    let ts_s = format!("/tmp/{}-pred-ts.csv", t.prefix);
    let ts_port = format!("/tmp/{}-pred-ts.port.csv", t.prefix);
    let socket = stats_socket(&t.prefix, "");
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &[
            "--rate",
            "500mbit",
            "--rtt",
            "250us",
            "--aqm",
            "pred",
            "--timeseries",
            &ts_s,
            "--ts-interval",
            "10ms",
        ],
        &socket,
        Duration::from_secs(60),
    );
    ping(&t.hosts[0], t.hosts[2].ip);
    ping(&t.hosts[1], t.hosts[2].ip);
    let ce0 = [
        tcp_ext_counter(&t.hosts[0], "TCPDeliveredCE"),
        tcp_ext_counter(&t.hosts[1], "TCPDeliveredCE"),
    ];
    let watch = CpuWatch::start(sw.pid());
    let a = t.iperf_start(0, 2, 5201, SECS, &["-O", "1", "-J", "-P", "4"]);
    let b = t.iperf_start(1, 2, 5202, SECS, &["-O", "1", "-J", "-P", "4"]);
    // Live counters while the flows run.
    std::thread::sleep(Duration::from_secs(SECS as u64 / 2));
    let live =
        run_ok(Command::new(env!("CARGO_BIN_EXE_softswitch")).args(["stats", "--socket", &socket]));
    let out_a = t.wait(a, Duration::from_secs(SECS as u64 + 20));
    let out_b = t.wait(b, Duration::from_secs(SECS as u64 + 20));
    let cpu = watch.read();
    let ce = [
        tcp_ext_counter(&t.hosts[0], "TCPDeliveredCE") - ce0[0],
        tcp_ext_counter(&t.hosts[1], "TCPDeliveredCE") - ce0[1],
    ];
    let j = sw.stop().assert_clean();
    // Read and remove the time series before any assertion can fail.
    let gauges = std::fs::read_to_string(&ts_port).unwrap_or_default();
    let _ = std::fs::remove_file(&ts_s);
    let _ = std::fs::remove_file(&ts_port);
    // Port 2's gauge `name`, every 10 ms.
    let series = |name: &str| -> Vec<f64> {
        gauges
            .lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.get(1) == Some(&"2") && f.get(2) == Some(&name))
                    .then(|| f[3].parse::<f64>().ok())
                    .flatten()
            })
            .collect()
    };
    let n_samples: Vec<u64> = series("pred_n_flows").iter().map(|&n| n as u64).collect();
    let lambdas = series("pred_lambda_qla");
    let bps = iperf_receiver_bps(&out_a) + iperf_receiver_bps(&out_b);
    let port = &j["ports"][2];
    let aqm = &port["aqm"];
    let marked = &port["egress"]["port"]["marked"];
    eprintln!(
        "{name}: goodput {:.0} Mbit/s, sender CE +{ce:?}, marks {marked}; {cpu}\n{}\nlive stats:\n{live}",
        bps / 1e6,
        aqm["summary"].as_str().unwrap_or("?"),
    );
    assert_eq!(aqm["kind"], "pred", "{aqm}");
    // FCS: 8 data flows into h3's port. A flow counts in a 312.5 µs period
    // only if one of its packets arrives in it, and the hosts send in
    // bursts, so N sampled every 10 ms is often below 8: idle, 0.67–0.75 of
    // the samples were 8 (four runs, 2026-11-27); beside one to three CPU
    // hogs 0.55–0.72, the rest mostly 5–7; one loaded suite run had its
    // mode at 6. What does not move with load: N reaches the 8 data flows
    // (the flows are told apart, not merged) in a good share of periods,
    // and hardly ever exceeds them by more than the 2 iperf3 control
    // connections.
    let mut hist = std::collections::BTreeMap::<u64, usize>::new();
    for &n in n_samples.iter().filter(|&&n| n > 0) {
        *hist.entry(n).or_default() += 1;
    }
    eprintln!("FCS's N sampled every 10 ms (value: samples): {hist:?}");
    let total: usize = hist.values().sum();
    let share = |lo: u64, hi: u64| {
        hist.range(lo..=hi).map(|(_, &c)| c).sum::<usize>() as f64 / total.max(1) as f64
    };
    // That good share is a fifth or more on a run the fidelity guard called
    // faithful. On a run the machine did not hold, the switch's stalls
    // bunch the hosts' bursts further: a CI run whose port lost 16.9 % of
    // its link time had 19.4 % of its samples at 8, its mode at 7
    // (2026-11-28). There the flows must still be told apart — N at 8 in a
    // twentieth of the samples, which merged flows (at most 7 data flows
    // and 2 control connections, N = 8 only when both of those land in one
    // period) would not give.
    let verdict = Verdict::of(&j);
    let at_least = if verdict.faithful { 0.2 } else { 0.05 };
    assert!(
        total > 200 && share(8, 10) >= at_least && share(11, u64::MAX) <= 0.01,
        "FCS's N sampled every 10 ms: {hist:?}, expected 8 (the data flows) in {:.0} % of \
         the samples or more (the run was {}) and above 10 in at most 1 %\n{aqm}",
        at_least * 100.0,
        softswitch::fidelity::label(verdict.faithful),
    );
    // The largest count of any one 312.5 µs period also takes in whatever
    // other IP packets of the hosts reach the port at that moment (the
    // control connections, any other 5-tuple): at least the 8 data flows,
    // and not far above them (a CI run once saw 13).
    let max_flows = aqm["counters"]["max_flows"].as_u64().unwrap();
    assert!(
        (8..=16).contains(&max_flows),
        "FCS counted at most {max_flows} flows in a period, expected 8–16\n{aqm}"
    );
    assert!(aqm["flows"]["periods"].as_u64().unwrap() > 1000, "{aqm}");
    // QLA: T_QLA = 1.25 ms over ≥ 8 s: thousands of trials, and its A/B
    // decisions move the operating point both ways — λ_QLA, sampled every
    // 10 ms, leaves its start of 0.1 and takes several values. (Which way
    // it should go is not observable here: the queue is set by the hosts'
    // ~1 ms GSO bursts as much as by the marks, and on this 2-vCPU machine
    // the utility of a 1.25 ms trial is mostly noise — a walk from 0.05 went
    // up, one from 1.0 went down; the manual-clock tests in src/aqm/pred.rs
    // check the direction against the paper's rule.)
    let c = &aqm["counters"];
    let periods = c["qla_periods"].as_u64().unwrap();
    assert!(periods > 1000, "{c}");
    for k in ["decisions_more", "decisions_less"] {
        assert!(c[k].as_u64().unwrap() > 0, "no QLA {k}: {c}");
    }
    let mut distinct: Vec<f64> = lambdas.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    assert!(
        distinct.len() >= 3 && lambdas.iter().any(|&l| (l - 0.1).abs() > 0.02),
        "λ_QLA over the run took only {distinct:?}\n{c}"
    );
    // Marks at the switch, CE at both senders.
    let prob = marked["probabilistic"]["pkts"].as_u64().unwrap_or(0);
    assert!(prob > 0, "no probabilistic marks: {marked}");
    assert!(ce[0] > 0 && ce[1] > 0, "senders saw CE {ce:?}");
    // At the shaped rate (loosely: this 2-vCPU machine is shared).
    assert!(
        bps > 0.3e9 && bps < 0.5e9,
        "goodput {:.0} Mbit/s{}",
        bps / 1e6,
        if cpu.starved() {
            "; THE SWITCH WAS STARVED OF CPU"
        } else {
            ""
        }
    );
    // Reported live and as a time series.
    assert!(
        live.contains("pred: N = "),
        "stats lacks PRED's line:\n{live}"
    );
    let n_max = n_samples.iter().copied().max().unwrap_or(0);
    assert!(
        n_max >= 8,
        "time series: pred_n_flows of port 2 peaked at {n_max}"
    );
    assert!(gauges.contains(",2,pred_slope,"), "no pred_slope gauge");
}

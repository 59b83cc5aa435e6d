//! Root integration test of DiffECN (per-flow queues + selective marking)
//! with real DCTCP hosts: h1 sends one long flow to h3, h2 joins with a
//! second one 2 s later, both through a 500 Mbit/s port (a rate this
//! 2-vCPU machine holds, BENCHMARKS.md) running `--aqm diffecn` at its defaults
//! (per-flow classifier, strict temporary queue 0, sp+dwrr, 32 queues as the paper's prototype port).
//! Skipped unless root.

mod common;

use std::time::Duration;

use common::{
    iperf_receiver_bps, measure, ping, skip_unless_root, skip_unless_tools, stats_socket,
    switch_serial, tcp_ext_counter, CpuUse, CpuWatch, SwitchProc, TestTopo,
};

const RATE_BPS: f64 = 500e6;

#[derive(Debug)]
struct Run {
    /// Goodput of h1's and h2's flow, bit/s.
    bps: [f64; 2],
    /// CE marks each sender saw echoed (`TcpExtTCPDeliveredCE`).
    ce: [u64; 2],
    /// The switch's exit counters.
    j: serde_json::Value,
}

fn run() -> (Run, CpuUse) {
    let mut t = TestTopo::new(3);
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &["--rate", "500mbit", "--aqm", "diffecn"],
        &stats_socket(&t.prefix, ""),
        Duration::from_secs(60),
    );
    ping(&t.hosts[0], t.hosts[2].ip);
    ping(&t.hosts[1], t.hosts[2].ip);
    let ce0 = [0, 1].map(|h| tcp_ext_counter(&t.hosts[h], "TCPDeliveredCE"));
    let watch = CpuWatch::start(sw.pid());
    let c1 = t.iperf_start(0, 2, 5201, 8, &["-J"]);
    std::thread::sleep(Duration::from_secs(2));
    let c2 = t.iperf_start(1, 2, 5202, 5, &["-J"]);
    let out1 = t.wait(c1, Duration::from_secs(30));
    let out2 = t.wait(c2, Duration::from_secs(30));
    let cpu = watch.read();
    let ce = [0, 1].map(|h| tcp_ext_counter(&t.hosts[h], "TCPDeliveredCE") - ce0[h]);
    let j = sw.stop().assert_clean();
    let r = Run {
        bps: [iperf_receiver_bps(&out1), iperf_receiver_bps(&out2)],
        ce,
        j,
    };
    let p = &r.j["ports"][2];
    eprintln!(
        "diffecn: h1 {:.0} Mbit/s (8 s), h2 {:.0} Mbit/s (5 s, from 2 s); CE at senders {:?}; aqm {}; classifier {}; marked {}; dropped {}; link {}; {cpu}",
        r.bps[0] / 1e6,
        r.bps[1] / 1e6,
        r.ce,
        p["aqm"],
        p["classifier"]["counters"],
        p["egress"]["port"]["marked"],
        p["egress"]["port"]["dropped"],
        p["link"],
    );
    (r, cpu)
}

#[test]
fn diffecn_marks_real_dctcp_flows_in_their_own_queues() {
    let name = "diffecn_marks_real_dctcp_flows_in_their_own_queues";
    if skip_unless_root(name) || skip_unless_tools(name, &["iperf3"]) {
        return;
    }
    let _serial = switch_serial();
    // h2's flow overlaps h1's for its 5 s, so over them the port is shared;
    // the two together must fill a good part of the shaped rate.
    let ok = |r: &Run| r.bps[1] > 0.2 * RATE_BPS && r.bps[0] > 0.3 * RATE_BPS;
    let (r, cpu) = measure(name, 3, run, ok);
    let p = &r.j["ports"][2];
    let a = &p["aqm"];
    assert_eq!(a["kind"], "diffecn", "{p}");
    // The switch marked by K_p and the senders saw the marks.
    let dynamic = p["egress"]["port"]["marked"]["dynamic"]["pkts"]
        .as_u64()
        .unwrap_or(0);
    assert!(dynamic > 0, "no DiffECN marks: {p}");
    assert!(
        r.ce[0] > 0 && r.ce[1] > 0,
        "CE marks did not reach both senders: {:?}; {cpu}",
        r.ce
    );
    // Both flows were counted (N_flow reached 2) and got queues of their own.
    assert!(
        a["counters"]["max_n_flow"].as_u64().unwrap_or(0) >= 2,
        "{a}"
    );
    let c = &p["classifier"]["counters"];
    assert!(c["new_to_empty"].as_u64().unwrap_or(0) >= 2, "{c}");
    let busy_queues = p["egress"]["queues"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .filter(|q| q["dequeued"]["bytes"].as_u64().unwrap_or(0) > 10_000_000)
        .count();
    assert!(
        busy_queues >= 2,
        "the data went through fewer than 2 ordinary queues: {}",
        p["egress"]["queues"]
    );
    // Shaped: h1 alone for 2 s then shared; neither above the rate, and the
    // two together used the port.
    assert!(
        r.bps[0] < 1.02 * RATE_BPS && r.bps[1] < 1.02 * RATE_BPS,
        "{r:?}"
    );
    assert!(
        ok(&r),
        "goodput too low: {:?} Mbit/s; {cpu}",
        r.bps.map(|b| b / 1e6)
    );
}

//! Root integration test of R-AQM (`src/raqm`): a real DCTCP incast (kernel
//! or BPF DCTCP hosts, per-packet ACKs through `quickack`, RTO_min 5 ms)
//! through the switch with `--aqm r-aqm`, run by the experiment runner.
//! Every query completes, the receiver's port visibly holds and releases
//! ACKs (its counters), and only pure ACKs ever enter a VIQ. Skipped unless
//! root. Run under the machine-wide lock:
//! `flock /tmp/softswitch-netns.lock cargo test --release --test raqm`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use common::{skip_unless_root, unique_prefix};
use softswitch::exp::runner::leftovers;
use softswitch::exp::{self, RunOptions, Scenario};

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[test]
fn dctcp_incast_through_r_aqm_holds_acks() {
    if skip_unless_root("dctcp_incast_through_r_aqm_holds_acks") {
        return;
    }
    let sc = Scenario::from_toml(
        r#"
        [topology]
        hosts = 9
        rto_min = "5ms"
        quickack = true
        [switch]
        aqm = ["r-aqm"]
        rate = "1gbit"
        buffer = "96kb"
        [traffic]
        kind = "incast"
        receiver = 9
        servers = [1, 2, 3, 4, 5, 6, 7, 8]
        cycle_servers = true
        fanin = [16]
        size = "32kb"
        queries = 20
        interval = "20ms"
    "#,
        Path::new("raqm.toml"),
    )
    .unwrap();
    sc.validate().unwrap();
    let prefix = unique_prefix();
    let out = std::env::temp_dir().join(format!("softswitch-raqm-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    let opts = RunOptions {
        out: out.clone(),
        quick: false,
        switch_bin: PathBuf::from(env!("CARGO_BIN_EXE_softswitch")),
        tg_bin: PathBuf::from(env!("CARGO_BIN_EXE_softswitch-tg")),
        scenario_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        progress: false,
        stop: Arc::new(AtomicBool::new(false)),
        fault: None,
        prefix: Some(prefix.clone()),
        scaling: None,
        first_repeat: 0,
    };
    let result = exp::run(&sc, "raqm-test", &opts);
    let left = leftovers(&prefix, &out);
    let report = result.expect("run succeeds");
    let _ = report;
    assert_eq!(left, Vec::<String>::new(), "nothing left behind");
    let dir = out.join("r-aqm-fanin16-r0");
    let v = read_json(&dir.join("incast.json"));
    let queries = v["report"]["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 20, "every query completes");
    for q in queries {
        assert_eq!(q["size"], 16 * 32 * 1024);
    }
    let sw = read_json(&dir.join("switch.json"));
    let ports = sw["ports"].as_array().unwrap();
    let rx = ports
        .iter()
        .find(|p| p["name"].as_str().unwrap().ends_with("-h9-sw"))
        .expect("receiver's port");
    let r = &rx["raqm"];
    eprintln!("receiver port R-AQM counters: {r}");
    let n = |k: &str| r[k].as_u64().unwrap();
    assert!(n("acks_held") > 0, "ACKs held on the congested port: {r}");
    assert!(n("acks_released") > 0, "{r}");
    // Every ACK accounted: passed, released, dropped (counted) or still held.
    assert_eq!(
        n("acks_seen"),
        n("acks_passed")
            + n("acks_released")
            + n("dropped_stale")
            + n("dropped_viq_full")
            + n("viq_pkts")
    );
    assert!(r["state_ms"]["congested"].as_f64().unwrap() > 0.0, "{r}");
    // Only pure ACKs enter R-AQM: the receiver sends nothing else but its
    // 16 requests per query and handshakes, so what R-AQM saw on its port is
    // below what the port received, and the senders' data never went
    // through any VIQ (their ports saw only the senders' own ACKs of the
    // requests, if any).
    let rx_pkts = rx["io"]["rx_packets"].as_u64().unwrap();
    assert!(n("acks_seen") < rx_pkts);
    for p in ports {
        let held = p["raqm"]["acks_held"].as_u64().unwrap();
        let rx = p["io"]["rx_packets"].as_u64().unwrap();
        assert!(held <= rx);
    }
    std::fs::remove_dir_all(&out).unwrap();
}

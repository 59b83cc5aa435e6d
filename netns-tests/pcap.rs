//! Root integration test of capture (`--pcap`): traffic through the real
//! switch (ping, a UDP burst that overflows the buffer, a short DCTCP
//! transfer with forced marks), then `tshark -r` on every file: packet
//! counts against the switch's own counters, verdict comments present and
//! matching the drop / mark counters, timestamps monotonic and inside the
//! run. Skipped unless root and tshark is installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{
    ping, run_ok, skip_unless_root, skip_unless_tools, stats_socket, switch_serial, SwitchProc,
    TestTopo,
};

/// Removes the capture directory however the test ends.
struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One packet as tshark read it.
struct Pkt {
    /// Timestamp, ns since the epoch (parsed exactly, not through f64).
    ts_ns: u128,
    comment: String,
}

/// `frame.time_epoch` ("1763924400.123456789") in ns.
fn epoch_ns(s: &str) -> u128 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<9}");
    sec.parse::<u128>().unwrap() * 1_000_000_000 + frac[..9].parse::<u128>().unwrap()
}

/// Every packet of `file`, through `tshark -r`.
fn tshark(file: &Path) -> Vec<Pkt> {
    let out = run_ok(Command::new("tshark").args([
        "-r",
        file.to_str().unwrap(),
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-e",
        "frame.time_epoch",
        "-e",
        "frame.comment",
    ]));
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (ts, comment) = l.split_once('\t').unwrap_or((l, ""));
            Pkt {
                ts_ns: epoch_ns(ts),
                comment: comment.to_owned(),
            }
        })
        .collect()
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn count(j: &serde_json::Value, port: usize, kind: &str, reason: &str) -> u64 {
    j["ports"][port]["egress"]["port"][kind][reason]["pkts"]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn capture_opens_in_tshark_and_matches_the_counters() {
    let name = "capture_opens_in_tshark_and_matches_the_counters";
    if skip_unless_root(name) || skip_unless_tools(name, &["ping", "iperf3", "tshark"]) {
        return;
    }
    let _serial = switch_serial();
    let mut t = TestTopo::new(2);
    let dir = TempDir(std::env::temp_dir().join(format!("softswitch-pcap-{}", t.prefix)));
    let dir_s = dir.0.to_str().unwrap().to_owned();
    let started = now_ns();
    // 100 Mbit/s and a 30 KB buffer: a 300 Mbit/s UDP burst overflows it.
    // Every 10th ECT packet is CE-marked at dequeue (the test hook).
    let sw = SwitchProc::start(
        &t.switch_ifs(),
        &[
            "--rate",
            "100mbit",
            "--buffer",
            "30kb",
            "--mark-every",
            "10",
            "--pcap",
            &dir_s,
            "--pcap-snaplen",
            "128",
        ],
        &stats_socket(&t.prefix, ""),
        Duration::from_secs(60),
    );
    ping(&t.hosts[0], t.hosts[1].ip);
    t.iperf(0, 1, 1, &["-u", "-b", "300M", "-l", "1400"]);
    t.iperf(0, 1, 1, &[]);
    let exit = sw.stop();
    let ended = now_ns();
    let j = exit.assert_clean();
    assert!(
        exit.stderr.contains("capture: "),
        "no capture lines in the exit report:\n{}",
        exit.stderr
    );

    let files = j["capture"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no capture summary in the counters: {j}"))
        .clone();
    assert_eq!(files.len(), 4, "rx and tx for 2 ports: {files:?}");
    let (mut buffer_full, mut forced, mut dropped_at_dequeue) = (0u64, 0u64, 0u64);
    for (port, ifname) in t.switch_ifs().iter().enumerate() {
        let io = &j["ports"][port]["io"];
        for dir in ["rx", "tx"] {
            let path = dir.to_owned();
            let file = Path::new(&dir_s).join(format!("{ifname}-{path}.pcapng"));
            let sum = files
                .iter()
                .find(|f| f["port"] == *ifname && f["dir"] == dir)
                .unwrap();
            assert_eq!(sum["truncated"], 0, "{sum}");
            assert_eq!(sum["lost"], 0, "writer fell behind: {sum}");
            let pkts = tshark(&file);
            assert_eq!(pkts.len() as u64, sum["written"].as_u64().unwrap(), "{sum}");
            // Timestamps: ns, non-decreasing, inside the run.
            for w in pkts.windows(2) {
                assert!(
                    w[0].ts_ns <= w[1].ts_ns,
                    "{}: time went backwards",
                    file.display()
                );
            }
            if let (Some(a), Some(b)) = (pkts.first(), pkts.last()) {
                assert!(
                    a.ts_ns >= started && b.ts_ns <= ended,
                    "{}: timestamps {}..{} outside the run {started}..{ended}",
                    file.display(),
                    a.ts_ns,
                    b.ts_ns
                );
            }
            // Every packet carries its verdict.
            assert!(
                pkts.iter().all(|p| !p.comment.is_empty()),
                "{}: a packet without a comment",
                file.display()
            );
            if dir == "rx" {
                assert_eq!(
                    pkts.len() as u64,
                    io["rx_packets"].as_u64().unwrap(),
                    "{ifname} rx file vs rx_packets"
                );
                buffer_full += pkts
                    .iter()
                    .filter(|p| p.comment.contains("dropped: buffer_full"))
                    .count() as u64;
            } else {
                let dq = pkts
                    .iter()
                    .filter(|p| p.comment.starts_with("dropped at dequeue"))
                    .count() as u64;
                dropped_at_dequeue += dq;
                assert_eq!(
                    pkts.len() as u64 - dq,
                    io["tx_packets"].as_u64().unwrap(),
                    "{ifname} tx file vs tx_packets"
                );
                forced += pkts
                    .iter()
                    .filter(|p| p.comment.contains("marked CE (forced)"))
                    .count() as u64;
            }
        }
    }
    let counted =
        |kind: &str, reason: &str| -> u64 { (0..2).map(|p| count(&j, p, kind, reason)).sum() };
    assert!(buffer_full > 0, "the UDP burst dropped nothing");
    assert_eq!(buffer_full, counted("dropped", "buffer_full"));
    assert!(forced > 0, "no forced marks captured");
    assert_eq!(forced, counted("marked", "forced"));
    assert_eq!(dropped_at_dequeue, counted("dropped", "not_ect_mark"));

    // The ping is there, as Wireshark dissects it, with its queue and verdict.
    let h1_rx = Path::new(&dir_s).join(format!("{}-rx.pcapng", t.switch_ifs()[0]));
    let icmp = run_ok(Command::new("tshark").args([
        "-r",
        h1_rx.to_str().unwrap(),
        "-Y",
        "icmp.type == 8",
        "-T",
        "fields",
        "-e",
        "frame.comment",
    ]));
    let want = format!("{} q0: enqueued", t.switch_ifs()[1]);
    assert!(icmp.lines().any(|l| l.starts_with(&want)), "{icmp}");
    eprintln!(
        "{name}: {buffer_full} buffer_full drops and {forced} forced marks captured, as counted"
    );
}

//! Bad command lines and config files, run through the real `softswitch`
//! binary (no root needed: every one is refused while the settings are
//! resolved, before any interface is touched). Each must exit with status 1
//! (not a panic's 101, not 0), say `softswitch: error:`, and name the
//! option or key at fault — RELIABILITY.md lists them.

use std::process::Command;

/// Runs `softswitch args...`; returns (exit code, stderr).
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run softswitch");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts `args` fail cleanly with a message containing every one of `names`.
fn refused(args: &[&str], names: &[&str]) {
    let (code, err) = run(args);
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert_eq!(code, Some(1), "{args:?} exited {code:?}:\n{err}");
    let last = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        last.contains("softswitch: error:"),
        "{args:?}: no error line:\n{err}"
    );
    for n in names {
        assert!(
            err.contains(n),
            "{args:?}: the message does not name {n:?}:\n{err}"
        );
    }
    // None of these may get as far as the interfaces.
    assert!(
        !err.contains("interface \"") && !err.contains("needs root"),
        "{args:?} was accepted and reached the interfaces:\n{err}"
    );
}

/// A config file with `text` in a fresh temporary directory; returns its path.
fn config(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("softswitch-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn command_line_errors_name_the_option() {
    let p = ["--ports", "a,b"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = p.to_vec();
        v.extend_from_slice(extra);
        v
    };
    // Queue counts out of range.
    refused(&with(&["--queues", "0"]), &["--queues 0", "1 to 128"]);
    refused(&with(&["--queues", "129"]), &["--queues 129", "1 to 128"]);
    // Rates: unknown unit, below one frame per second (port-wide and per port).
    refused(&with(&["--rate", "1gigabit"]), &["rate", "1gbit"]);
    refused(&with(&["--rate", "100bit"]), &["--rate", "12304"]);
    refused(
        &with(&["--rate", "1bit"]),
        &["--rate", "one 1514-byte frame"],
    );
    refused(
        &with(&["--port-rate", "b=10bit"]),
        &["port b", "--port-rate"],
    );
    refused(&with(&["--port-rate", "zz=1gbit"]), &["zz", "--ports"]);
    // Impossible AQM parameters.
    refused(
        &with(&[
            "--aqm",
            "red",
            "--aqm-opt",
            "min_th=100kb",
            "--aqm-opt",
            "max_th=50kb",
        ]),
        &["--aqm red", "min_th", "max_th"],
    );
    refused(
        &with(&[
            "--aqm",
            "codel",
            "--aqm-opt",
            "target=10ms",
            "--aqm-opt",
            "interval=1ms",
        ]),
        &["--aqm codel", "target", "interval"],
    );
    refused(
        &with(&["--aqm", "dctcp", "--aqm-opt", "k=0"]),
        &["dctcp", "k = 0"],
    );
    refused(
        &with(&["--aqm", "dctcp", "--aqm-opt", "bogus=1"]),
        &["bogus", "valid keys"],
    );
    refused(
        &with(&["--aqm", "tcn", "--aqm-opt", "threshold=-5us"]),
        &["threshold", "-5us"],
    );
    refused(
        &with(&["--aqm", "dctcp", "--aqm-opt", "k"]),
        &["--aqm-opt", "NAME=VALUE"],
    );
    refused(&with(&["--aqm", "pie"]), &["pie"]);
    // Conflicting options.
    refused(
        &with(&["--aqm", "mq-ecn", "--sched", "wfq", "--queues", "2"]),
        &["round-robin"],
    );
    refused(
        &with(&["--strict", "0,1", "--sched", "dwrr"]),
        &["--strict", "dwrr"],
    );
    refused(
        &with(&["--queues", "2", "--strict", "5", "--sched", "sp"]),
        &["--strict", "strict queue 5", "0..2"],
    );
    refused(
        &with(&["--queues", "2", "--weights", "1,2,3", "--sched", "wfq"]),
        &["--weights", "3 values", "2 queues"],
    );
    refused(
        &with(&["--raqm-opt", "x=1"]),
        &["--raqm-opt", "--aqm r-aqm"],
    );
    // Sizes and counts that cannot work.
    refused(&with(&["--buffer", "1000b"]), &["--buffer", "1514b"]);
    refused(&with(&["--queue-limit", "10b"]), &["queue limit", "1514b"]);
    refused(&with(&["--bucket", "10b"]), &["--bucket", "1538b"]);
    // A time or a size without its unit (a bare AQM time once meant ns).
    refused(
        &with(&["--aqm", "tcn", "--aqm-opt", "threshold=100"]),
        &["threshold=100: a time needs a unit — write 100us (or 100ns, 100ms)"],
    );
    refused(
        &with(&["--aqm", "dctcp", "--aqm-opt", "k=30000"]),
        &[
            "k=30000: a size needs a unit — write 30000b",
            "unit=packets",
        ],
    );
    refused(
        &with(&["--aqm", "r-aqm", "--raqm-opt", "interval=60"]),
        &[
            "--aqm r-aqm",
            "interval=60: a time needs a unit — write 60us",
        ],
    );
    refused(
        &with(&["--rtt", "250"]),
        &["rtt: a time needs a unit — write 250us"],
    );
    refused(
        &with(&["--buffer", "96000"]),
        &["buffer: a size needs a unit — write 96000b"],
    );
    refused(
        &with(&["--rate", "1000"]),
        &["rate: a rate needs a unit — write 1000mbit"],
    );
    refused(&with(&["--quantum", "0"]), &["--quantum"]);
    refused(&with(&["--quantum", "1x,2"]), &["--quantum", "1x,2"]);
    refused(&with(&["--sched", "wfq", "--weights", "0"]), &["--weights"]);
    refused(&with(&["--mark-every", "0"]), &["--mark-every 0"]);
    refused(&with(&["--nice", "40"]), &["--nice 40"]);
    refused(&with(&["--duration", "0s"]), &["--duration"]);
    refused(&with(&["--frames", "0"]), &["--frames 0"]);
    // Fewer UMEM frames than one fill ring per port: the last port would
    // receive little or nothing.
    refused(
        &with(&["--frames", "1"]),
        &["--frames 1", "at least 2048", "fill ring"],
    );
    refused(
        &["--ports", "a,b,c", "--frames", "3071"],
        &["--frames 3071", "at least 3072"],
    );
    refused(&with(&["--dscp-map", "64=1"]), &["DSCP map", "64=1"]);
    refused(&with(&["--max-lost", "200%"]), &["--max-lost", "200%"]);
    refused(
        &with(&["--pcap", "/tmp/x", "--pcap-snaplen", "0"]),
        &["--pcap-snaplen 0"],
    );
    refused(
        &with(&["--pcap", "/tmp/x", "--pcap-ports", "zz"]),
        &["--pcap-ports", "zz"],
    );
    refused(
        &with(&["--ts-interval", "10us", "--timeseries", "/tmp/x.csv"]),
        &["100us"],
    );
    refused(&[], &["--ports"]);
    // One port forwards nothing (a frame never leaves by its own port).
    refused(&["--ports", "a"], &["--ports a", "at least two ports"]);
    refused(&["--ports", "a,"], &["--ports a", "at least two ports"]);
    // Host options are checked before root or any namespace is needed.
    refused(
        &["topo", "up", "--hosts", "2", "--gso-segs", "0"],
        &["gso_segs 0", "1..=65535"],
    );
    refused(
        &["topo", "up", "--hosts", "2", "--initcwnd", "0"],
        &["initcwnd 0", "1..=1024"],
    );
}

#[test]
fn config_file_errors_name_the_key() {
    let cases: &[(&str, &str, &[&str])] = &[
        // Unknown keys, at the top level and in a port section.
        ("unknown.toml", "ports = [\"a\", \"b\"]\nbogus = 3\n", &["unknown field `bogus`", "line 2"]),
        (
            "port-key.toml",
            "ports = [\"a\", \"b\"]\n[port.a]\nrat = \"1gbit\"\n",
            &["unknown field `rat`", "line 3"],
        ),
        ("aqm-key.toml", "ports = [\"a\", \"b\"]\naqm = \"dctcp\"\n[aqm_opts]\nnope = 3\n", &["nope", "valid keys"]),
        // Wrong type, bad syntax, a section for a port that is not listed.
        ("type.toml", "ports = [\"a\", \"b\"]\nqueues = \"many\"\n", &["queues", "line 2"]),
        ("syntax.toml", "ports = [\"a\", \"b\"\n", &["TOML parse error", "line 1"]),
        ("port-name.toml", "ports = [\"a\", \"b\"]\n[port.zz]\nrate = \"1gbit\"\n", &["[port.zz]", "not in ports"]),
        // Out of range / impossible values.
        ("queues.toml", "ports = [\"a\", \"b\"]\nqueues = 0\n", &["queues", "1 to 128"]),
        ("rate.toml", "ports = [\"a\", \"b\"]\nrate = \"100bit\"\n", &["rate", "12304"]),
        ("buffer.toml", "ports = [\"a\", \"b\"]\nbuffer = \"big\"\n", &["buffer", "96kb"]),
        (
            "red.toml",
            "ports = [\"a\", \"b\"]\naqm = \"red\"\n[aqm_opts]\nmin_th = \"100kb\"\nmax_th = \"50kb\"\n",
            &["min_th", "max_th"],
        ),
        // Times and sizes without their unit.
        (
            "bare-aqm-time.toml",
            "ports = [\"a\", \"b\"]\naqm = \"tcn\"\n[aqm_opts]\nthreshold = 100\n",
            &["threshold=100: a time needs a unit — write 100us"],
        ),
        (
            "bare-raqm-time.toml",
            "ports = [\"a\", \"b\"]\naqm = \"r-aqm\"\n[raqm_opts]\nstale = 5\n",
            &["stale=5: a time needs a unit — write 5us"],
        ),
        ("bare-rtt.toml", "ports = [\"a\", \"b\"]\nrtt = \"250\"\n", &["rtt: a time needs a unit"]),
        (
            "bare-topology-delay.toml",
            "ports = [\"a\", \"b\"]\ntopology = \"TOPO\"\n",
            &["--topology", "line 10: delay: a time needs a unit — write 100us"],
        ),
    ];
    // A fabric's topology file, named by the config file.
    let topo = config(
        "bare-delay-topology.toml",
        "[[switch]]\nname = \"l\"\nhosts = [\"h1\"]\n[[switch]]\nname = \"r\"\n\
         hosts = [\"h2\"]\n[[link]]\na = \"l\"\nb = \"r\"\ndelay = \"100\"\n",
    );
    for (name, text, names) in cases {
        let path = config(name, &text.replace("TOPO", &topo));
        refused(&["--config", &path], names);
    }
    refused(
        &["--ports", "a,b", "--topology", &topo],
        &["--topology", "delay: a time needs a unit — write 100us"],
    );
    // ... and its AQM options, as [aqm_opts].
    let topo = config(
        "bare-aqm-topology.toml",
        "[defaults]\naqm = \"tcn\"\naqm_opts = { threshold = 100 }\n[[switch]]\nname = \"l\"\n\
         hosts = [\"h1\"]\n[[switch]]\nname = \"r\"\nhosts = [\"h2\"]\n[[link]]\na = \"l\"\nb = \"r\"\n",
    );
    refused(
        &["--ports", "a,b", "--topology", &topo],
        &[
            "--topology",
            "threshold=100: a time needs a unit — write 100us",
        ],
    );
    refused(
        &["--config", "/nonexistent/softswitch.toml"],
        &["cannot read config file", "/nonexistent/softswitch.toml"],
    );
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("softswitch-bad-input-{}", std::process::id())),
    );
}

/// A scenario (`softswitch-exp check`) and the traffic generator refuse a
/// time or a size without its unit, as the switch does.
#[test]
fn the_runner_and_the_traffic_generator_refuse_bare_times_and_sizes() {
    let scenario = config(
        "bare.toml",
        "[topology]\nhosts = 3\n[switch]\naqm = [\"tcn\"]\n[switch.aqm_opts.tcn]\n\
         threshold = 100\n[traffic]\nkind = \"incast\"\nreceiver = 3\nservers = [1, 2]\n\
         fanin = [2]\nsize = \"64kb\"\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch-exp"))
        .args(["check", &scenario])
        .output()
        .expect("run softswitch-exp");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tcn: threshold=100: a time needs a unit — write 100us"),
        "{err}"
    );
    for (args, want) in [
        (
            &["incast", "--servers", "10.0.0.1:1", "--size", "65536"][..],
            "a size needs a unit — write 65536b",
        ),
        (
            &[
                "incast",
                "--servers",
                "10.0.0.1:1",
                "--size",
                "64kb",
                "--interval",
                "10",
            ],
            "a time needs a unit — write 10us",
        ),
        (
            &["long", "--server", "10.0.0.1:1", "--rate", "500"],
            "a rate needs a unit — write 500mbit",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_softswitch-tg"))
            .args(args)
            .output()
            .expect("run softswitch-tg");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `--aqm-opt help=1` lists the AQM's keys with their values for the given
/// link, on stdout, and exits 0 — no ports needed.
#[test]
fn aqm_opt_help_lists_the_keys_and_exits_0() {
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["--aqm", "tcn", "--rtt", "100us", "--aqm-opt", "help=1"])
        .output()
        .expect("run softswitch");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for key in [
        "mode=threshold",
        "threshold=100us",
        "t_min=50us",
        "t_max=100us",
        "p_max=0.1",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    assert!(text.contains("time"), "no unit:\n{text}");
    // Scaled to the link it is given, for every AQM (sizes in bytes).
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args([
            "--ports",
            "a,b",
            "--aqm",
            "dctcp",
            "--rate",
            "10gbit",
            "--aqm-opt",
            "help",
        ])
        .output()
        .expect("run softswitch");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("k=312500") && text.contains("bytes"),
        "{text}"
    );
}

/// `--raqm-opt help=1` lists R-AQM's keys, their values, units and
/// meanings, on stdout, and exits 0, as `--aqm-opt help=1` does for an AQM;
/// `--aqm r-aqm --aqm-opt help=1` says where R-AQM's own keys are.
#[test]
fn raqm_opt_help_lists_the_keys_and_exits_0() {
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["--aqm", "r-aqm", "--raqm-opt", "help=1"])
        .output()
        .expect("run softswitch");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for key in [
        "k_min_pkts=21",
        "k_max_pkts=42",
        "interval=62.5us",
        "stale=5ms",
        "ece_threshold_pkts=21",
        "ack_priority=true",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    assert!(
        text.contains("packets") && text.contains("time"),
        "no units:\n{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_softswitch"))
        .args(["--aqm", "r-aqm", "--aqm-opt", "help=1"])
        .output()
        .expect("run softswitch");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("--raqm-opt help=1") && text.contains("k=31250b"),
        "{text}"
    );
}

/// softswitch-tg's JSON file is `--json-out FILE`; the old `--json FILE`
/// still names it, with a warning on stderr that names the new flag.
#[test]
fn the_traffic_generators_old_json_flag_warns_and_names_json_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flag: &str| {
        // Nobody listens on port 1: the run fails at once, after the flags.
        let out = Command::new(env!("CARGO_BIN_EXE_softswitch-tg"))
            .args([
                "incast",
                "--servers",
                "127.0.0.1:1",
                "--size",
                "1kb",
                "--queries",
                "1",
            ])
            .args(["--timeout", "5s", flag])
            .arg(dir.path().join("incast.json"))
            .current_dir(dir.path())
            .output()
            .expect("run softswitch-tg");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("--json");
    assert!(
        err.contains("warning: --json FILE is deprecated; write --json-out"),
        "{err}"
    );
    let err = run("--json-out");
    assert!(!err.contains("deprecated"), "{err}");
}

/// A stand-in switch's stats socket at `socket` that answers one
/// connection per snapshot of `snaps`, in order, then goes away.
fn stats_server(socket: &std::path::Path, snaps: Vec<String>) -> std::thread::JoinHandle<()> {
    let listener = std::os::unix::net::UnixListener::bind(socket).unwrap();
    let path = socket.to_path_buf();
    std::thread::spawn(move || {
        use std::io::Write;
        for s in snaps {
            let (mut c, _) = listener.accept().unwrap();
            let _ = c.write_all(s.as_bytes());
        }
        drop(listener);
        let _ = std::fs::remove_file(&path);
    })
}

/// A snapshot at `t` s of one port that has sent `pkts` frames of 1500 B.
fn stats_snapshot(t: f64, pkts: u64) -> String {
    format!(
        r#"{{"elapsed_s": {t}, "ports": [{{"name": "p1", "backlog_bytes": 3000, "backlog_pkts": 2,
            "egress": {{"port": {{"arrived": {{"pkts": {pkts}}}, "dequeued": {{"pkts": {pkts}, "bytes": {b}}},
            "marked": {{"threshold": {{"pkts": {m}}}}}, "dropped": {{}}}}, "queues": []}}}}]}}"#,
        b = pkts * 1500,
        m = pkts / 10,
    )
}

/// `softswitch stats --interval`: rates every interval from successive
/// snapshots; a restarted switch is said, not printed as negative rates;
/// a switch that goes away ends it with exit 1; `--count N` ends it with 0.
#[test]
fn stats_interval_prints_rates_and_says_when_the_switch_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stats.sock");
    let bin = env!("CARGO_BIN_EXE_softswitch");
    let stats = |args: &[&str]| {
        let out = Command::new(bin)
            .args(["stats", "--socket"])
            .arg(&socket)
            .args(args)
            .output()
            .expect("run softswitch stats");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // 1000 frames of 1500 B per switch second = 12 Mbit/s; then a restart
    // (the clock back at 0.5 s), then one more second; then gone.
    let server = stats_server(
        &socket,
        vec![
            stats_snapshot(1.0, 1000),
            stats_snapshot(2.0, 2000),
            stats_snapshot(0.5, 10),
            stats_snapshot(1.5, 1010),
        ],
    );
    let (code, out, err) = stats(&["--interval", "100ms"]);
    server.join().unwrap();
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("every 100ms (until Ctrl-C)"), "{out}");
    let rates: Vec<&str> = out.lines().filter(|l| l.starts_with("  p1 ")).collect();
    assert_eq!(rates.len(), 2, "{out}");
    for r in &rates {
        assert!(
            r.contains("  12.0       1000       100         0  3000 B 2 pkts"),
            "{r}"
        );
    }
    assert!(!out.contains(" -"), "no negative rate: {out}");
    assert!(
        err.contains("the switch restarted: its clock went back from 2.0 s to 0.5 s"),
        "{err}"
    );
    assert!(
        err.contains("softswitch: error: the switch stopped answering after 3 interval(s)"),
        "{err}"
    );
    // --count: that many intervals, then exit 0; --json: one line each.
    let server = stats_server(
        &socket,
        vec![stats_snapshot(1.0, 0), stats_snapshot(2.0, 1000)],
    );
    let (code, out, err) = stats(&["--interval", "100ms", "--count", "1", "--json"]);
    server.join().unwrap();
    assert_eq!(code, Some(0), "{out}{err}");
    let line: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(line["ports"][0]["port"]["mbit_s"], 12.0);
    // The interval is a time with its unit, no shorter than the switch publishes.
    let (code, _, err) = stats(&["--interval", "1"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--interval: a time needs a unit — write 1us"),
        "{err}"
    );
    let (_, _, err) = stats(&["--interval", "10ms"]);
    assert!(err.contains("100ms or more"), "{err}");
    let (code, _, err) = stats(&["--count", "3"]);
    assert_eq!(code, Some(2), "clap refuses --count alone: {err}");
}

/// How a run ended: exit code, or the signal that killed it; and stderr.
fn ended(mut cmd: Command) -> (Option<i32>, Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = cmd.env("RUST_BACKTRACE", "0").output().expect("run");
    (
        out.status.code(),
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A pipe whose reader is already gone, as `| head -1` leaves it.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    writer
}

/// `softswitch ... | head -1`: when the reader goes away, softswitch ends as
/// standard tools do — killed by SIGPIPE, without a word — not with a panic
/// (exit 101), whether stdout or stderr is the closed pipe.
#[test]
fn a_closed_pipe_ends_softswitch_quietly() {
    const SIGPIPE: i32 = 13;
    let bin = env!("CARGO_BIN_EXE_softswitch");
    // stdout: the AQM's keys.
    let mut cmd = Command::new(bin);
    cmd.args(["--aqm", "pred", "--aqm-opt", "help=1"])
        .stdout(closed_pipe());
    let (code, signal, err) = ended(cmd);
    assert_eq!((code, signal), (None, Some(SIGPIPE)), "{err}");
    assert!(err.is_empty(), "{err}");
    // stderr: an error message.
    let mut cmd = Command::new(bin);
    cmd.args(["--ports", "a,b", "--queues", "0"])
        .stderr(closed_pipe());
    let (code, signal, _) = ended(cmd);
    assert_eq!((code, signal), (None, Some(SIGPIPE)));
    // stdout: a running switch's counters (`softswitch stats`), from a
    // stand-in stats socket.
    let dir = std::env::temp_dir().join(format!("softswitch-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("stats.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = listener.accept().unwrap();
        let _ = s.write_all(b"{\"ports\": []}");
    });
    let mut cmd = Command::new(bin);
    cmd.args(["stats", "--json", "--socket"])
        .arg(&socket)
        .stdout(closed_pipe());
    let (code, signal, err) = ended(cmd);
    server.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((code, signal), (None, Some(SIGPIPE)), "{err}");
    assert!(err.is_empty(), "{err}");
    // clap's own output (--help) already ends quietly, with 0.
    let mut cmd = Command::new(bin);
    cmd.arg("--help").stdout(closed_pipe());
    let (code, _, err) = ended(cmd);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// The other two binaries end the same way when the pipe they print an error
/// to is gone.
#[test]
fn a_closed_pipe_ends_the_runner_and_the_traffic_generator_quietly() {
    const SIGPIPE: i32 = 13;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_softswitch-exp"));
    cmd.args(["check", "/nonexistent/scenario.toml"])
        .stderr(closed_pipe());
    let (code, signal, _) = ended(cmd);
    assert_eq!((code, signal), (None, Some(SIGPIPE)));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_softswitch-tg"));
    cmd.args(["incast", "--servers", "x", "--size", "big"])
        .stderr(closed_pipe());
    let (code, signal, _) = ended(cmd);
    assert_eq!((code, signal), (None, Some(SIGPIPE)));
}

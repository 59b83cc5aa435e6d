//! The configuration's unit tests: flags and file layered, defaults, mistakes.

use super::*;
use crate::aqm::AqmConfig;
use crate::port::{Classifier, NotEctPolicy};
use crate::units::Rate;

#[test]
fn parses_full_file() {
    let c = Options::parse(
        r#"
        ports = ["a", "b"]
        rate = "1gbit"
        buffer = "96kb"
        queues = 8
        sched = "dwrr"
        quantum = [1514, 3028]
        aqm = "tcn"
        [aqm_opts]
        threshold = "100us"
        [port.b]
        delay = "50us"
        "#,
    )
    .unwrap();
    assert_eq!(c.ports, vec!["a", "b"]);
    assert_eq!(c.quantum.as_deref(), Some("1514,3028"));
    assert_eq!(c.port.unwrap()["b"].delay.as_deref(), Some("50us"));
    assert_eq!(c.aqm_opts.unwrap()["threshold"].as_str(), Some("100us"));
}

#[test]
fn unknown_key_is_an_error_with_position() {
    let e = Options::parse("prots = [\"a\"]\n").unwrap_err().to_string();
    assert!(e.contains("prots") && e.contains("line 1"), "{e}");
}

fn args(list: &[&str]) -> Options {
    use clap::Parser;
    let mut v = vec!["softswitch"];
    v.extend_from_slice(list);
    crate::cli::Cli::try_parse_from(v).unwrap().run
}

/// The error `resolve` gives for these flags.
fn error_of(list: &[&str]) -> String {
    resolve(&args(list)).unwrap_err().to_string()
}

#[test]
fn defaults_are_the_tcn_testbed() {
    let s = resolve(&args(&["--ports", "a,b"])).unwrap();
    assert_eq!(s.ports.len(), 2);
    let p = &s.ports[0];
    assert_eq!(p.port.rate, Rate::gbit(1));
    assert_eq!(p.port.buffer_bytes, 96 * 1024);
    assert_eq!(p.port.bucket_bytes, 2_500);
    assert_eq!(p.port.queues, 1);
    assert_eq!(p.aqm.name(), "droptail");
    assert_eq!(p.env.rtt_ns, 250_000);
    assert_eq!(p.delay_ns, 0);
    assert!(s.describe().contains("port a: rate 1gbit"));
    assert_eq!(s.cpu, crate::cpu::CpuChoice::Unpinned);
    // Not-ECT passes on a mark, as the TCN / MQ-ECN prototypes; drop is an option.
    assert_eq!(p.port.not_ect, NotEctPolicy::Pass);
    assert!(s.describe().contains("Not-ECT on a mark: pass"));
    let s = resolve(&args(&["--ports", "a", "--not-ect", "drop"])).unwrap();
    assert_eq!(s.ports[0].port.not_ect, NotEctPolicy::Drop);
    let e = error_of(&["--ports", "a", "--not-ect", "mark"]);
    assert!(e.contains("--not-ect") && e.contains("drop"), "{e}");
}

#[test]
fn cpu_choice_from_flag_or_file() {
    let s = resolve(&args(&["--ports", "a", "--cpu", "last"])).unwrap();
    assert_eq!(s.cpu, crate::cpu::CpuChoice::Last);
    let s = resolve(&args(&["--ports", "a", "--cpu", "3"])).unwrap();
    assert_eq!(s.cpu, crate::cpu::CpuChoice::Cpu(3));
    let e = error_of(&["--ports", "a", "--cpu", "fast"]);
    assert!(e.contains("--cpu") && e.contains("last"), "{e}");
    assert_eq!(
        Options::parse("cpu = \"1\"\n").unwrap().cpu.as_deref(),
        Some("1")
    );
}

#[test]
fn aqm_defaults_scale_with_rtt_and_options_override() {
    let s = resolve(&args(&["--ports", "a,b", "--aqm", "tcn", "--rtt", "100us"])).unwrap();
    assert!(
        s.ports[0].aqm.describe().contains("100"),
        "{}",
        s.ports[0].aqm.describe()
    );
    let s = resolve(&args(&[
        "--ports",
        "a",
        "--aqm",
        "tcn",
        "--aqm-opt",
        "threshold=60us",
    ]))
    .unwrap();
    assert!(
        s.ports[0].aqm.describe().contains("60"),
        "{}",
        s.ports[0].aqm.describe()
    );
    let e = error_of(&["--ports", "a", "--aqm", "tcn", "--aqm-opt", "bogus=1"]);
    assert!(e.contains("valid keys"), "{e}");
    let e = error_of(&["--ports", "a", "--aqm", "tcn", "--aqm-opt", "threshold"]);
    assert!(e.contains("NAME=VALUE"), "{e}");
}

#[test]
fn per_port_overrides_from_flags_and_file() {
    let dir = std::env::temp_dir().join(format!("ss-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    std::fs::write(&f, "ports = [\"a\", \"b\"]\nrate = \"10gbit\"\n[port.b]\nrate = \"100mbit\"\ndelay = \"20us\"\n").unwrap();
    let s = resolve(&args(&[
        "--config",
        f.to_str().unwrap(),
        "--port-delay",
        "a=5us",
    ]))
    .unwrap();
    assert_eq!(s.ports[0].port.rate, Rate::gbit(10));
    assert_eq!(s.ports[0].delay_ns, 5_000);
    assert_eq!(s.ports[1].port.rate, Rate::mbit(100));
    assert_eq!(s.ports[1].delay_ns, 20_000);
    // Flags beat the file.
    let s = resolve(&args(&["--config", f.to_str().unwrap(), "--rate", "1gbit"])).unwrap();
    assert_eq!(s.ports[0].port.rate, Rate::gbit(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diffecn_defaults_to_per_flow_queues_and_a_strict_temporary_queue() {
    let s = resolve(&args(&[
        "--ports", "a", "--aqm", "diffecn", "--rtt", "200us",
    ]))
    .unwrap();
    let p = &s.ports[0].port;
    // The prototype's port: 32 queues (DiffECN paper §VI-B).
    assert_eq!(p.queues, 32);
    assert_eq!(p.sched.kind, crate::sched::SchedName::SpDwrr);
    let Classifier::Flow(f) = &p.classifier else {
        panic!("{:?}", p.classifier)
    };
    assert_eq!((f.temp_queue, f.idle_timeout_ns), (true, 300_000));
    let AqmConfig::DiffEcn(d) = &s.ports[0].aqm else {
        panic!()
    };
    // K = 0.17 · 1 Gbit/s · 200 µs, T = 1.5 · 200 µs.
    assert_eq!((d.k, d.period), (4_250, 300_000));
    let text = s.describe();
    assert!(
        text.contains("diffecn: mark at dequeue") && text.contains("K = 4250 B"),
        "{text}"
    );
    assert!(
        text.contains("classify flow: a queue per active flow"),
        "{text}"
    );
    // Options and the config file.
    let s = resolve(&args(&[
        "--ports",
        "a",
        "--aqm",
        "diffecn",
        "--queues",
        "32",
        "--classify",
        "flow,pass-limit=3000b",
        "--aqm-opt",
        "k=10kb",
    ]))
    .unwrap();
    let Classifier::Flow(f) = &s.ports[0].port.classifier else {
        panic!()
    };
    assert_eq!((s.ports[0].port.queues, f.pass_limit_bytes), (32, 3000));
    let c = Options::parse("classify = \"flow,temp=none\"\nsched = \"dwrr\"\n").unwrap();
    assert_eq!(c.classify.as_deref(), Some("flow,temp=none"));
    // Per-flow queues with another AQM (per-port DCTCP-ECN over them).
    let s = resolve(&args(&[
        "--ports",
        "a",
        "--classify",
        "flow",
        "--sched",
        "sp+dwrr",
        "--aqm",
        "dctcp",
    ]))
    .unwrap();
    assert!(matches!(s.ports[0].port.classifier, Classifier::Flow(_)));
    // Another AQM's per-flow queues: a switch port's usual 8 (only
    // DiffECN names its prototype's count).
    assert_eq!(s.ports[0].port.queues, 8);
    let s = resolve(&args(&["--ports", "a", "--classify", "flow"])).unwrap();
    assert_eq!(s.ports[0].port.sched.kind, crate::sched::SchedName::SpDwrr);
    let s = resolve(&args(&["--ports", "a", "--classify", "flow,temp=none"])).unwrap();
    assert_eq!(s.ports[0].port.sched.kind, crate::sched::SchedName::Dwrr);
    assert_advice(PER_FLOW_MISTAKES);
}

#[rustfmt::skip]
const PER_FLOW_MISTAKES: &[(&[&str], &str)] = &[
    (&["--ports", "a", "--aqm", "diffecn", "--classify", "dscp"], "--classify flow"),
    (&["--ports", "a", "--aqm", "diffecn", "--sched", "dwrr"], "--sched sp+dwrr"),
    (&["--ports", "a", "--classify", "flow", "--sched", "wfq"], "--sched sp+dwrr"),
    (&["--ports", "a", "--classify", "flow,bogus=1"], "--classify"),
    (&["--ports", "a", "--aqm", "diffecn", "--aqm-opt", "period=0"], "period"),
];

/// Each refused command line's error contains the advice.
fn assert_advice(cases: &[(&[&str], &str)]) {
    for (flags, advice) in cases {
        let e = error_of(flags);
        assert!(e.contains(advice), "{flags:?}: {e}");
    }
}

#[rustfmt::skip]
const MISTAKES: &[(&[&str], &str)] = &[
    (&[], "--ports"),
    (&["--ports", "a", "--rate", "1gigabit"], "1gbit"),
    (&["--ports", "a", "--buffer", "1000b"], "smaller than one"),
    (&["--ports", "a", "--queues", "200"], "1 to 128"),
    (&["--ports", "a", "--duration", "0s"], "--duration"),
    (&["--ports", "a", "--frames", "0"], "--frames"),
    (&["--ports", "a", "--queues", "2", "--sched", "wfq", "--aqm", "mq-ecn"], "round-robin"),
    (&["--ports", "a", "--port-delay", "zz=5us"], "not one of --ports"),
    (&["--ports", "a", "--sched", "fifo"], "sp"),
    (&["--ports", "a", "--aqm", "pie"], "pie"),
    (&["--ports", "a", "--timeseries", "x.csv", "--ts-interval", "10us"], "100us"),
];

#[test]
fn user_mistakes_get_advice() {
    assert_advice(MISTAKES);
    // Below one 1514-byte frame (+24 B) per second: 12304 bit/s.
    let slow = error_of(&["--ports", "a", "--rate", "12000bit"]);
    assert!(slow.contains("--rate") && slow.contains("12304"), "{slow}");
    let slow = error_of(&["--ports", "a,b", "--port-rate", "b=100bit"]);
    assert!(
        slow.contains("port b") && slow.contains("--port-rate"),
        "{slow}"
    );
    assert!(resolve(&args(&["--ports", "a", "--rate", "12304bit"])).is_ok());
}

/// Every time and size of the switch needs its unit, on the command line
/// and in the config file alike; the message says how to write it.
#[test]
fn bare_times_and_sizes_are_refused_from_flags_and_files() {
    for (flags, want) in [
        (
            &["--rtt", "250"][..],
            "rtt: a time needs a unit — write 250us (or 250ns, 250ms)",
        ),
        (
            &["--delay", "50"],
            "delay: a time needs a unit — write 50us",
        ),
        (
            &["--port-delay", "b=50"],
            "a time needs a unit — write 50us",
        ),
        (
            &["--buffer", "96000"],
            "buffer: a size needs a unit — write 96000b",
        ),
        (
            &["--queue-limit", "30000"],
            "a size needs a unit — write 30000b",
        ),
        (
            &["--bucket", "5000"],
            "bucket: a size needs a unit — write 5000b",
        ),
        (
            &["--rate", "1000"],
            "rate: a rate needs a unit — write 1000mbit",
        ),
        (
            &["--classify", "flow,timeout=375"],
            "timeout: a time needs a unit",
        ),
        (
            &["--classify", "flow,pass-limit=15140"],
            "pass-limit: a size needs a unit",
        ),
        (
            &["--aqm", "tcn", "--aqm-opt", "threshold=100"],
            "--aqm tcn: tcn: threshold=100: a time needs a unit — write 100us (or 100ns, 100ms)",
        ),
        (
            &["--aqm", "dctcp", "--aqm-opt", "k=30000"],
            "k=30000: a size needs a unit — write 30000b",
        ),
        (
            &["--aqm", "r-aqm", "--raqm-opt", "interval=60"],
            "--aqm r-aqm: r-aqm: interval=60: a time needs a unit — write 60us",
        ),
    ] {
        let mut v = vec!["--ports", "a,b"];
        v.extend_from_slice(flags);
        let e = error_of(&v);
        assert!(e.contains(want), "{flags:?}: {e}");
    }
    let from_file = |text: &str| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, format!("ports = [\"a\", \"b\"]\n{text}")).unwrap();
        let p = path.to_str().unwrap().to_string();
        error_of(&["--config", &p])
    };
    for (text, want) in [
        ("rtt = \"250\"\n", "rtt: a time needs a unit — write 250us"),
        (
            "buffer = \"96000\"\n",
            "buffer: a size needs a unit — write 96000b",
        ),
        (
            "[port.b]\ndelay = \"20\"\n",
            "a time needs a unit — write 20us",
        ),
        (
            "aqm = \"tcn\"\n[aqm_opts]\nthreshold = 100\n",
            "tcn: threshold=100: a time needs a unit — write 100us",
        ),
        (
            "aqm = \"red\"\n[aqm_opts]\nmin_th = 10000\n",
            "red: min_th=10000: a size needs a unit — write 10000b",
        ),
        (
            "aqm = \"r-aqm\"\n[raqm_opts]\nstale = 5\n",
            "r-aqm: stale=5: a time needs a unit — write 5us",
        ),
    ] {
        let e = from_file(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
    // With their units, and counts as plain numbers, the same settings run.
    resolve(&args(&[
        "--ports",
        "a,b",
        "--rtt",
        "250us",
        "--buffer",
        "96000b",
        "--aqm",
        "r-aqm",
        "--aqm-opt",
        "k=20",
        "--aqm-opt",
        "unit=packets",
        "--raqm-opt",
        "interval=60us",
        "--raqm-opt",
        "k_min_pkts=20",
        "--raqm-opt",
        "k_max_pkts=40",
        "--quantum",
        "1514",
    ]))
    .unwrap();
}

/// `--raqm-opt help=1` lists R-AQM's keys as `--aqm-opt help=1` lists an
/// AQM's, scaled to the port, with or without `--aqm r-aqm`; `--aqm r-aqm
/// --aqm-opt help=1` lists the forward AQM's and says where R-AQM's are.
#[test]
fn raqm_opt_help_lists_raqm_keys_and_aqm_opt_help_points_to_it() {
    let help = |list: &[&str]| match resolve(&args(list)) {
        Err(ConfigError::Help(t)) => t,
        other => panic!("{list:?}: {other:?}"),
    };
    let h = help(&["--raqm-opt", "help=1", "--rate", "10gbit", "--rtt", "12us"]);
    assert!(h.contains("on a port of rate 10gbit, rtt 12us"), "{h}");
    assert!(
        h.contains("r-aqm (R-AQM paper §IV): K_min 10 / K_max 20 pkts"),
        "{h}"
    );
    for (key, _) in crate::raqm::Config::KEYS {
        assert!(h.contains(&format!("  {key}=")), "{key}:\n{h}");
    }
    assert!(h.contains("  interval=3us  "), "{h}");
    // With --aqm r-aqm and the user's own values, as --aqm-opt help=1 shows them.
    let h = help(&[
        "--aqm",
        "r-aqm",
        "--raqm-opt",
        "k_min_pkts=30",
        "--raqm-opt",
        "k-max-pkts=60",
        "--raqm-opt",
        "help",
    ]);
    assert!(
        h.contains("  k_min_pkts=30  ") && h.contains("  k_max_pkts=60  "),
        "{h}"
    );
    // The forward AQM's keys, and where R-AQM's own are.
    let h = help(&["--aqm", "r-aqm+tcn", "--aqm-opt", "help=1"]);
    assert!(
        h.starts_with("--aqm r-aqm: R-AQM on the reverse path, with the forward AQM tcn"),
        "{h}"
    );
    assert!(
        h.contains("R-AQM's own keys: --aqm r-aqm --raqm-opt help=1"),
        "{h}"
    );
    assert!(
        h.contains("  threshold=250us  ") && !h.contains("k_min_pkts"),
        "{h}"
    );
    // Both asked: both lists.
    let h = help(&[
        "--aqm",
        "r-aqm",
        "--aqm-opt",
        "help=1",
        "--raqm-opt",
        "help=1",
    ]);
    assert!(
        h.contains("  k=31250b  ") && h.contains("  k_min_pkts=21  "),
        "{h}"
    );
    // Without r-aqm, --raqm-opt still needs --aqm r-aqm for anything but help.
    assert!(error_of(&["--ports", "a,b", "--raqm-opt", "k_min_pkts=3"]).contains("--aqm r-aqm"));
}

#[test]
fn settings_errors_name_the_key() {
    assert_eq!(rate_setting("rate", "unlimited").unwrap().bps(), 0);
    let e = rate_setting("rate", "1 gigabit").unwrap_err().to_string();
    assert!(e.starts_with("rate:") && e.contains("1gbit"), "{e}");
    assert!(size_setting("buffer", "big")
        .unwrap_err()
        .to_string()
        .contains("96kb"));
}

#[test]
fn fidelity_guard_and_strict_shaper_defaults() {
    let parse = |extra: &[&str]| {
        let mut v = vec!["--ports", "a,b"];
        v.extend_from_slice(extra);
        resolve(&args(&v))
    };
    let s = parse(&[]).unwrap();
    assert_eq!(
        s.ports[0].port.catchup_ns, 0,
        "the prototype's strict bucket"
    );
    assert_eq!(s.guard, crate::fidelity::Thresholds::default());
    assert!(
        s.describe().contains("2500 B, +24 B/frame, strict"),
        "{}",
        s.describe()
    );
    assert!(s
        .describe()
        .contains("fidelity guard: not faithful if a port loses > 1.0 %"));
    let s = parse(&[
        "--catchup",
        "1ms",
        "--max-lost",
        "2.5%",
        "--max-stall",
        "10ms",
        "--max-stalled",
        "0.05",
    ])
    .unwrap();
    assert_eq!(s.ports[0].port.catchup_ns, 1_000_000);
    assert!(s.describe().contains("catch-up 1ms"), "{}", s.describe());
    assert_eq!(parse(&[]).unwrap().poll, crate::poll::PollMode::Busy);
    let a = parse(&["--poll", "adaptive"]).unwrap();
    assert_eq!(a.poll, crate::poll::PollMode::Adaptive);
    assert!(a.describe().contains("--poll adaptive"), "{}", a.describe());
    let e = parse(&["--poll", "lazy"]).unwrap_err().to_string();
    assert!(e.contains("--poll") && e.contains("adaptive"), "{e}");
    assert_eq!(
        (s.guard.max_lost, s.guard.max_stall_ns, s.guard.max_stalled),
        (0.025, 10_000_000, 0.05)
    );
    let e = parse(&["--max-lost", "150%"]).unwrap_err().to_string();
    assert!(e.contains("--max-lost") && e.contains("1%"), "{e}");
    let e = parse(&["--max-stall", "soon"]).unwrap_err().to_string();
    assert!(e.starts_with("max-stall:"), "{e}");
}

#[test]
fn ingress_rate_is_off_by_default_and_line_follows_each_port() {
    let parse = |extra: &[&str]| {
        let mut v = vec!["--ports", "a,b", "--rate", "500mbit"];
        v.extend_from_slice(extra);
        resolve(&args(&v))
    };
    let s = parse(&[]).unwrap();
    assert!(s.ports.iter().all(|p| p.ingress_rate.is_none()));
    assert!(!s.describe().contains("ingress:"));
    let s = parse(&["--ingress-rate", "line", "--port-rate", "b=100mbit"]).unwrap();
    assert_eq!(s.ports[0].ingress_rate, Some(Rate::mbit(500)));
    assert_eq!(s.ports[1].ingress_rate, Some(Rate::mbit(100)));
    assert_eq!(s.ingress_limit, crate::ingress::DEFAULT_LIMIT_PKTS);
    assert!(
        s.describe()
            .contains("at most at 500mbit (emulated host NIC"),
        "{}",
        s.describe()
    );
    let s = parse(&["--ingress-rate", "1gbit", "--ingress-limit", "64"]).unwrap();
    assert_eq!(s.ports[1].ingress_rate, Some(Rate::gbit(1)));
    assert_eq!(s.ingress_limit, 64);
    let e = parse(&["--ingress-rate", "fast"]).unwrap_err().to_string();
    assert!(e.contains("--ingress-rate") && e.contains("line"), "{e}");
    let e = parse(&["--ingress-rate", "line", "--ingress-limit", "0"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--ingress-limit 0"), "{e}");
    let f = Options::parse("ingress_rate = \"line\"\ningress_limit = 10").unwrap();
    assert_eq!(f.ingress_rate.as_deref(), Some("line"));
    assert_eq!(f.ingress_limit, Some(10));
}

fn pcap(list: &[&str]) -> Result<Option<PcapSettings>, String> {
    use clap::Parser;
    let mut v = vec!["softswitch", "--ports", "a,b"];
    v.extend_from_slice(list);
    let args = crate::cli::Cli::try_parse_from(v).unwrap().run;
    resolve(&args).map(|s| s.pcap).map_err(|e| e.to_string())
}

#[test]
fn pcap_settings_from_flags_and_errors_name_the_option() {
    assert_eq!(pcap(&[]).unwrap(), None);
    let s = pcap(&["--pcap", "/tmp/x"]).unwrap().unwrap();
    assert_eq!(s.ports, vec![true, true]);
    assert_eq!((s.snaplen, s.max_bytes), (256, 100_000_000));
    let s = pcap(&[
        "--pcap",
        "/tmp/x",
        "--pcap-ports",
        "b",
        "--pcap-snaplen",
        "96",
        "--pcap-max-mb",
        "0.5",
    ])
    .unwrap()
    .unwrap();
    assert_eq!(s.ports, vec![false, true]);
    assert_eq!((s.snaplen, s.max_bytes), (96, 500_000));
    for (bad, key) in [
        (&["--pcap", "d", "--pcap-ports", "c"][..], "--pcap-ports"),
        (
            &["--pcap", "d", "--pcap-snaplen", "0"][..],
            "--pcap-snaplen",
        ),
        (&["--pcap", "d", "--pcap-max-mb", "0"][..], "--pcap-max-mb"),
        (&["--pcap-max-mb", "5"][..], "need --pcap"),
    ] {
        let e = pcap(bad).unwrap_err();
        assert!(e.contains(key), "{bad:?}: {e}");
    }
}

#[test]
fn pcap_settings_from_the_toml_file() {
    let file = Options::parse(
        "pcap = \"cap\"\npcap_ports = [\"a\"]\npcap_snaplen = 128\npcap_max_mb = 2\n",
    )
    .unwrap();
    assert_eq!(file.pcap, Some(std::path::PathBuf::from("cap")));
    let flags = args(&["--ports", "a,b"]);
    let l = Layers {
        flags: &flags,
        file: &file,
    };
    let s = pcap::resolve(&l, &["a".into(), "b".into()])
        .unwrap()
        .unwrap();
    assert_eq!(s.dir, std::path::PathBuf::from("cap"));
    assert_eq!(s.ports, vec![true, false]);
    assert_eq!((s.snaplen, s.max_bytes), (128, 2_000_000));
    // Flags win, a list as a whole.
    let flags = args(&[
        "--ports",
        "a,b",
        "--pcap",
        "d",
        "--pcap-ports",
        "b",
        "--pcap-snaplen",
        "64",
    ]);
    let l = Layers {
        flags: &flags,
        file: &file,
    };
    let s = pcap::resolve(&l, &["a".into(), "b".into()])
        .unwrap()
        .unwrap();
    assert_eq!(s.dir, std::path::PathBuf::from("d"));
    assert_eq!(s.ports, vec![false, true]);
    assert_eq!((s.snaplen, s.max_bytes), (64, 2_000_000));
}

/// The README's flag table (under "| flag | meaning") names every flag of
/// [`Options`] and no flag that does not exist, so it cannot drift when a
/// setting is added or renamed.
#[test]
fn readme_flag_table_names_exactly_the_flags() {
    let readme = include_str!("../../README.md");
    let table: Vec<&str> = readme
        .split("\n| flag | meaning (default) |\n")
        .nth(1)
        .expect("README has the flag table")
        .lines()
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut listed: Vec<String> = Vec::new();
    for line in &table {
        let mut rest = *line;
        while let Some(i) = rest.find("`--") {
            let name: String = rest[i + 3..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            rest = &rest[i + 3 + name.len()..];
            listed.push(name);
        }
    }
    listed.sort_unstable();
    listed.dedup();
    let cmd = <Options as clap::Args>::augment_args(clap::Command::new("softswitch"));
    let mut flags: Vec<String> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    flags.sort_unstable();
    assert_eq!(
        listed, flags,
        "README.md's flag table against config::Options"
    );
}

/// The `--aqm A` row of the flag table and the config-file example list the
/// AQMs `--aqm` accepts, in the registry's order.
#[test]
fn readme_names_the_registered_aqms_where_it_lists_them() {
    use crate::aqm::config::AQM_NAMES;
    let readme = include_str!("../../README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `--aqm A` |"))
        .expect("README's flag table has an --aqm row");
    let names: Vec<&str> = row
        .split(" | ")
        .nth(1)
        .and_then(|cell| cell.split(';').next())
        .expect("the row's meaning cell")
        .split(", ")
        .map(|n| n.trim_matches('`'))
        .collect();
    assert_eq!(names, AQM_NAMES, "README's --aqm row");
    let example = readme
        .lines()
        .find(|l| l.starts_with("aqm = "))
        .and_then(|l| l.split("# ").nth(1))
        .expect("README's config file example sets aqm");
    let names: Vec<&str> = example.split(" | ").collect();
    assert_eq!(names, AQM_NAMES, "README's config file example");
}

#[test]
fn dilation_from_flag_or_file_and_bad_values_say_what_d_is() {
    let s = resolve(&args(&["--ports", "a"])).unwrap();
    assert!(s.dilation.is_none());
    assert!(!s.describe().contains("dilation"));
    let s = resolve(&args(&[
        "--ports",
        "a",
        "--rate",
        "1gbit",
        "--dilation",
        "4",
    ]))
    .unwrap();
    assert_eq!(s.dilation.factor(), 4.0);
    // Rates and times stay emulated in the settings; the start-up text
    // says what goes on the wire.
    assert_eq!(s.ports[0].port.rate, crate::units::Rate::gbit(1));
    let d = s.describe();
    assert!(
        d.contains("time dilation D = 4") && d.contains("1gbit emulated = 250mbit on the wire"),
        "{d}"
    );
    for bad in ["0.5", "0", "2000", "inf"] {
        let e = error_of(&["--ports", "a", "--dilation", bad]);
        assert!(e.starts_with("--dilation: dilation"), "{bad}: {e}");
    }
    let dir = std::env::temp_dir().join(format!("ss-dil-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    std::fs::write(&file, "ports = [\"a\"]\ndilation = 2.5\n").unwrap();
    let f = file.to_str().unwrap();
    assert_eq!(
        resolve(&args(&["--config", f])).unwrap().dilation.factor(),
        2.5
    );
    // The flag wins over the file; a whole number reads as D too.
    let s = resolve(&args(&["--config", f, "--dilation", "4"])).unwrap();
    assert_eq!(s.dilation.factor(), 4.0);
    std::fs::write(&file, "ports = [\"a\"]\ndilation = 4\n").unwrap();
    assert_eq!(
        resolve(&args(&["--config", f])).unwrap().dilation.factor(),
        4.0
    );
    std::fs::write(&file, "ports = [\"a\"]\ndilation = 0\n").unwrap();
    let e = error_of(&["--config", f]);
    assert!(e.contains("dilation") && e.contains("outside"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// The shaper with the settings the command line gives it: a property of
// the configuration's defaults (the shaper itself knows none of them).
proptest::proptest! {
    /// The port's default shaper (as `PortConfig::default()` and the
    /// command line build it, busy/idle transitions included) never
    /// leaves `rate + bucket`; with catch-up on, the frames it does not
    /// count as excess never leave it either.
    #[test]
    fn default_settings_stay_within_rate_plus_bucket(
        steps in proptest::collection::vec((0u64..60_000, 64u32..1515, proptest::bool::ANY), 1..300),
        rate_mbit in 10u64..10_000,
        catchup_us in proptest::option::of(1u64..2_000),
    ) {
        let d = crate::port::PortConfig::default();
        let catchup = match catchup_us {
            None => crate::units::parse_duration(crate::config::DEFAULT_CATCHUP).unwrap(),
            Some(c) => c * crate::units::US,
        };
        let rate = Rate::mbit(rate_mbit);
        let mut tb = crate::shaper::TokenBucket::new(rate, d.bucket_bytes, d.overhead_bytes, 0)
            .with_catchup(catchup);
        let mut now = 0u64;
        let mut log: Vec<(u64, u64)> = Vec::new();
        let mut excess_seen = 0u64;
        for (dt, len, busy) in steps {
            now += dt;
            tb.set_busy(busy, now);
            if tb.try_take(len, now) {
                let e = tb.fidelity(now).excess_pkts;
                if e == excess_seen {
                    log.push((now, (len + d.overhead_bytes) as u64));
                }
                excess_seen = e;
            }
            tb.invariants();
        }
        if catchup_us.is_none() {
            proptest::prop_assert_eq!(excess_seen, 0, "the default is the strict bucket");
        }
        for i in 0..log.len() {
            let mut bytes = 0u64;
            for j in i..log.len() {
                bytes += log[j].1;
                let window = log[j].0 - log[i].0;
                let allowed = d.bucket_bytes as u128 + rate.bps() as u128 * window as u128 / 8_000_000_000;
                proptest::prop_assert!(bytes as u128 <= allowed + 1,
                    "{} wire bytes in {} ns > {}", bytes, window, allowed);
            }
        }
    }
}

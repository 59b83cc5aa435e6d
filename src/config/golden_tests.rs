//! The configuration's net: the start-up description (`Settings::describe`)
//! or the error of ~170 flag / file combinations, compared byte for byte
//! with `golden.txt`. A change to what a user sees at start-up or in an
//! error fails here; when it is meant, regenerate the file with
//! `UPDATE_GOLDEN=1 cargo test --lib config::golden_tests` and review the diff.

const FILE_FULL: &str = r#"
ports = ["fa", "fb", "fc"]
rate = "10gbit"
bucket = "5000b"
overhead = 20
catchup = "500us"
buffer = "300kb"
queue_limit = "100kb"
delay = "3us"
ingress_rate = "line"
ingress_limit = 500
rtt = "80us"
queues = 4
sched = "sp+wfq"
weights = [1, 2, 3, 4]
strict = [0]
wfq_vtime = "scfq"
sched_bytes = "frame"
dscp_map = "46=0,10=1"
mark_every = 7
stats_socket = "/tmp/golden.sock"
aqm = "dctcp"
not_ect = "drop"
ageing = "10s"
frames = 30000
seed = 9
cpu = "last"
poll = "adaptive"
max_lost = "3%"
max_stall = "7ms"
max_stalled = "0.04"
pcap = "capdir"
pcap_ports = ["fb"]
pcap_snaplen = 128
pcap_max_mb = 3.5
[aqm_opts]
k = "20kb"
occupancy = "port"
[port.fb]
rate = "1gbit"
buffer = "50kb"
delay = "40us"
"#;

const FILE_RAQM: &str = r#"
ports = ["a", "b"]
aqm = "r-aqm"
raqm_forward = "tcn"
rate = "10gbit"
rtt = "12us"
quantum = [3000]
[raqm_opts]
k_min_pkts = 12
[aqm_opts]
threshold = "30us"
"#;

const FILE_FLOW: &str = r#"
ports = ["a", "b"]
classify = "flow,temp=none"
sched = "dwrr"
queues = 16
aqm = "diffecn"
[aqm_opts]
k = "10kb"
"#;

/// Command lines the switch accepts: each prints its start-up description.
#[rustfmt::skip]
const ACCEPTED: &[&[&str]] = &[
    &["--ports", "a,b"],
    &["--ports", "a"],
    &["--ports", " a , b ,,c"],
    &["--ports", "a,b,c", "--rate", "10gbit", "--buffer", "200kb", "--delay", "10us", "--rtt", "100us", "--queues", "8", "--sched", "wfq", "--weights", "1,2,3,4,5,6,7,8", "--aqm", "tcn"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "k=30kb", "--aqm-opt", "occupancy=port"],
    &["--ports", "a,b", "--aqm", "dctcp-ecn", "--queues", "3"],
    &["--ports", "a,b", "--aqm", "mq-ecn", "--queues", "4", "--sched", "dwrr", "--quantum", "1514,3028,1514,6056"],
    &["--ports", "a,b", "--aqm", "mqecn", "--queues", "2", "--sched", "sp+dwrr", "--strict", "0"],
    &["--ports", "a,b", "--aqm", "red"],
    &["--ports", "a,b", "--aqm", "red", "--aqm-opt", "unit=packets", "--aqm-opt", "min_th=5", "--aqm-opt", "max_th=20", "--aqm-opt", "form=point-slope"],
    &["--ports", "a,b", "--aqm", "codel", "--rtt", "1ms"],
    &["--ports", "a,b", "--aqm", "ecn-sharp"],
    &["--ports", "a,b", "--aqm", "ecn#", "--rtt", "200us"],
    &["--ports", "a,b", "--aqm", "pred", "--rate", "500mbit"],
    &["--ports", "a,b", "--aqm", "pred", "--aqm-opt", "qla=false", "--aqm-opt", "fcs=sqrt"],
    &["--ports", "a,b", "--aqm", "diffecn"],
    &["--ports", "a,b", "--aqm", "DiffECN", "--rtt", "200us"],
    &["--ports", "a,b", "--aqm", "diffecn", "--queues", "32", "--classify", "flow,pass-limit=3000b", "--aqm-opt", "k=10kb"],
    &["--ports", "a,b", "--aqm", "diffecn", "--classify", "flow,temp=none", "--sched", "dwrr"],
    &["--ports", "a,b", "--aqm", "drop-tail"],
    &["--ports", "a,b", "--aqm", "tcn", "--aqm-opt", "mode=probabilistic", "--aqm-opt", "t-min=20us"],
    &["--ports", "a,b", "--aqm", "r-aqm"],
    &["--ports", "a,b", "--aqm", "r-aqm+tcn", "--raqm-opt", "k_min_pkts=20", "--raqm-opt", "k-max-pkts=40", "--rate", "10gbit", "--rtt", "12us"],
    &["--ports", "a,b", "--aqm", "R-AQM", "--raqm-forward", "diffecn"],
    &["--ports", "a,b", "--aqm", "raqm+mq-ecn", "--queues", "2"],
    &["--ports", "a,b", "--classify", "flow"],
    &["--ports", "a,b", "--classify", "flow,temp=none"],
    &["--ports", "a,b", "--classify", "flow,timeout=1ms,pass-limit=20kb", "--queues", "12", "--aqm", "dctcp"],
    &["--ports", "a,b", "--classify", "dscp", "--queues", "4", "--dscp-map", "46=0,10=1"],
    &["--ports", "a,b", "--queues", "2", "--dscp-map", "0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1"],
    &["--ports", "a,b", "--sched", "sp", "--strict", "0,1", "--queues", "4"],
    &["--ports", "a,b", "--sched", "sp+wfq", "--strict", "1", "--queues", "3", "--weights", "2"],
    &["--ports", "a,b", "--sched", "sp+dwrr", "--queues", "3"],
    &["--ports", "a,b", "--sched", "wfq", "--wfq-vtime", "scfq", "--queues", "2"],
    &["--ports", "a,b", "--sched-bytes", "frame", "--quantum", "1514", "--queues", "2"],
    &["--ports", "a,b", "--not-ect", "drop", "--mark-every", "5", "--catchup", "1ms", "--overhead", "0", "--bucket", "5000b"],
    &["--ports", "a,b", "--queue-limit", "30kb", "--queues", "2"],
    &["--ports", "a,b", "--ingress-rate", "line", "--rate", "500mbit", "--port-rate", "b=100mbit"],
    &["--ports", "a,b", "--ingress-rate", "1gbit", "--ingress-limit", "64"],
    &["--ports", "a,b", "--ingress-rate", "off"],
    &["--ports", "a,b", "--poll", "adaptive", "--cpu", "last", "--nice", "0", "--seed", "7", "--duration", "5s", "--json", "--force", "--stats-socket", "/tmp/s", "--frames", "20000"],
    &["--ports", "a,b", "--cpu", "3", "--poll", "busy", "--nice", "-20"],
    &["--ports", "a,b", "--cpu", "none"],
    &["--ports", "a,b", "--max-lost", "2%", "--max-stall", "10ms", "--max-stalled", "0.05"],
    &["--ports", "a,b", "--max-lost", "0.5 %", "--max-stalled", "100%"],
    &["--ports", "a,b", "--dilation", "8", "--max-stall", "2ms"],
    &["--ports", "a,b", "--timeseries", "x.csv", "--ts-interval", "500us"],
    &["--ports", "a,b", "--timeseries", "x.csv"],
    &["--ports", "a,b", "--pcap", "dir", "--pcap-ports", "b", "--pcap-snaplen", "96", "--pcap-max-mb", "2"],
    &["--ports", "a,b,c", "--pcap", "dir"],
    &["--ports", "a,b", "--port-delay", "b=5us", "--port-rate", "a=100mbit", "--port-delay", "a = 1ms"],
    &["--ports", "a,b", "--rate", "0"],
    &["--ports", "a,b", "--rate", "unlimited", "--aqm", "tcn"],
    &["--ports", "a,b", "--rate", "none", "--aqm", "dctcp"],
    &["--ports", "a,b", "--rate", "12304bit"],
    &["--ports", "a,b", "--rtt", "1ms", "--aqm", "red", "--rate", "40gbit", "--buffer", "4mb"],
];

/// Command lines the switch refuses: each prints its error.
#[rustfmt::skip]
const REFUSED: &[&[&str]] = &[
    &[],
    &["--ports", ","],
    &["--ports", "a,b", "--rate", "1gigabit"],
    &["--ports", "a,b", "--rate", "100bit"],
    &["--ports", "a,b", "--port-rate", "b=10bit"],
    &["--ports", "a,b", "--port-rate", "zz=1gbit"],
    &["--ports", "a,b", "--port-delay", "b"],
    &["--ports", "a,b", "--port-delay", "b=soon"],
    &["--ports", "a,b", "--buffer", "1000b"],
    &["--ports", "a,b", "--buffer", "big"],
    &["--ports", "a,b", "--queues", "0"],
    &["--ports", "a,b", "--queues", "129"],
    &["--ports", "a,b", "--queues", "200"],
    &["--ports", "a,b", "--rtt", "0"],
    &["--ports", "a,b", "--rtt", "fast"],
    &["--ports", "a,b", "--bucket", "10b"],
    &["--ports", "a,b", "--bucket", "x"],
    &["--ports", "a,b", "--catchup", "x"],
    &["--ports", "a,b", "--queue-limit", "10b"],
    &["--ports", "a,b", "--queue-limit", "zz"],
    &["--ports", "a,b", "--aqm", "red", "--aqm-opt", "min_th=100kb", "--aqm-opt", "max_th=50kb"],
    &["--ports", "a,b", "--aqm", "codel", "--aqm-opt", "target=10ms", "--aqm-opt", "interval=1ms"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "k=0"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "bogus=1"],
    &["--ports", "a,b", "--aqm", "droptail", "--aqm-opt", "bogus=1"],
    &["--ports", "a,b", "--aqm-opt", "help=1"],
    &["--ports", "a,b", "--aqm", "tcn", "--aqm-opt", "help=1"],
    &["--ports", "a,b", "--aqm", "tcn", "--aqm-opt", "threshold=-5us"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "k"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "=3"],
    &["--ports", "a,b", "--aqm", "pie"],
    &["--ports", "a,b", "--aqm", "pred", "--rate", "0"],
    &["--ports", "a,b", "--aqm", "mq-ecn", "--sched", "wfq", "--queues", "2"],
    &["--ports", "a,b", "--aqm", "mq-ecn", "--sched", "sp", "--queues", "2"],
    &["--ports", "a,b", "--strict", "0,1", "--sched", "dwrr"],
    &["--ports", "a,b", "--queues", "2", "--strict", "5", "--sched", "sp"],
    &["--ports", "a,b", "--queues", "2", "--weights", "1,2,3", "--sched", "wfq"],
    &["--ports", "a,b", "--raqm-opt", "x=1"],
    &["--ports", "a,b", "--raqm-forward", "tcn"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "kmin=3"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "k_min_pkts=99"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "interval"],
    &["--ports", "a,b", "--aqm", "r-aqm+pie"],
    &["--ports", "a,b", "--aqm", "r-aqm+r-aqm"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-forward", "raqm"],
    &["--ports", "a,b", "--quantum", "0"],
    &["--ports", "a,b", "--quantum", "1x,2"],
    &["--ports", "a,b", "--sched", "wfq", "--weights", "0"],
    &["--ports", "a,b", "--sched", "fifo"],
    &["--ports", "a,b", "--sched-bytes", "bits"],
    &["--ports", "a,b", "--wfq-vtime", "x", "--sched", "wfq"],
    &["--ports", "a,b", "--wfq-vtime", "scfq"],
    &["--ports", "a,b", "--mark-every", "0"],
    &["--ports", "a,b", "--nice", "40"],
    &["--ports", "a,b", "--nice", "-21"],
    &["--ports", "a,b", "--duration", "0s"],
    &["--ports", "a,b", "--duration", "later"],
    &["--ports", "a,b", "--frames", "0"],
    &["--ports", "a,b", "--dscp-map", "64=1"],
    &["--ports", "a,b", "--dscp-map", "1,2,3"],
    &["--ports", "a,b", "--queues", "2", "--dscp-map", "46=5"],
    &["--ports", "a,b", "--max-lost", "200%"],
    &["--ports", "a,b", "--max-stall", "soon"],
    &["--ports", "a,b", "--max-stalled=-1"],
    &["--ports", "a,b", "--pcap", "/tmp/x", "--pcap-snaplen", "0"],
    &["--ports", "a,b", "--pcap", "/tmp/x", "--pcap-ports", "zz"],
    &["--ports", "a,b", "--pcap", "/tmp/x", "--pcap-max-mb", "0"],
    &["--ports", "a,b", "--pcap-max-mb", "5"],
    &["--ports", "a,b", "--pcap-snaplen", "5"],
    &["--ports", "a,b", "--ts-interval", "10us", "--timeseries", "/tmp/x.csv"],
    &["--ports", "a,b", "--ts-interval", "never", "--timeseries", "/tmp/x.csv"],
    &["--ports", "a,b", "--not-ect", "mark"],
    &["--ports", "a,b", "--cpu", "fast"],
    &["--ports", "a,b", "--poll", "lazy"],
    &["--ports", "a,b", "--ingress-rate", "fast"],
    &["--ports", "a,b", "--ingress-rate", "line", "--ingress-limit", "0"],
    &["--ports", "a,b", "--ingress-limit", "0"],
    &["--ports", "a,b", "--aqm", "diffecn", "--classify", "dscp"],
    &["--ports", "a,b", "--aqm", "diffecn", "--sched", "dwrr"],
    &["--ports", "a,b", "--classify", "flow", "--sched", "wfq"],
    &["--ports", "a,b", "--classify", "flow,bogus=1"],
    &["--ports", "a,b", "--aqm", "diffecn", "--aqm-opt", "period=0"],
    &["--ports", "a,b", "--queues", "0", "--aqm", "pie"],
    &["--ports", "a,b", "--rtt", "0", "--bucket", "x"],
    &["--ports", "a,b", "--aqm", "pie", "--not-ect", "x"],
    &["--ports", "a,b", "--frames", "0", "--duration", "0s"],
    &["--ports", "a,b", "--pcap-max-mb", "5", "--frames", "0"],
    &["--ports", "a,b", "--nice", "99", "--cpu", "x"],
    &["--ports", "a,b", "--poll", "x", "--max-lost", "300%"],
    &["--ports", "a,b", "--buffer", "1000"],
    &["--ports", "a,b", "--rtt", "250"],
    &["--ports", "a,b", "--rate", "1000"],
    &["--ports", "a,b", "--aqm", "tcn", "--aqm-opt", "threshold=100"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "k=30000"],
    &["--ports", "a,b", "--aqm", "dctcp", "--aqm-opt", "unit=packets", "--aqm-opt", "k=30kb"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "stale=5"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--aqm-opt", "help=1"],
    &["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "help=1"],
    &["--ports", "a,b", "--raqm-opt", "help=1", "--rate", "10gbit", "--rtt", "12us"],
];

/// A config file (written where `@TAG` stands) and the flags beside it;
/// no file for a path that does not exist.
#[rustfmt::skip]
const WITH_FILE: &[(&[&str], Option<&str>)] = &[
    (&["--config", "@FULL"], Some(FILE_FULL)),
    (&["--config", "@FULL", "--ports", "x,y", "--rate", "1gbit", "--aqm", "tcn", "--aqm-opt", "threshold=50us"], Some(FILE_FULL)),
    (&["--config", "@FULL", "--queues", "8", "--weights", "1", "--strict", "0,1", "--pcap-ports", "fa", "--port-delay", "fc=1us", "--port-rate", "fb=2gbit"], Some(FILE_FULL)),
    (&["--config", "@FULL", "--ports", "fa,fb"], Some(FILE_FULL)),
    (&["--config", "@RAQM"], Some(FILE_RAQM)),
    (&["--config", "@RAQM", "--raqm-forward", "dctcp"], Some(FILE_RAQM)),
    (&["--config", "@RAQM", "--aqm", "r-aqm+red"], Some(FILE_RAQM)),
    (&["--config", "@RAQM", "--aqm", "dctcp"], Some(FILE_RAQM)),
    (&["--config", "@FLOW"], Some(FILE_FLOW)),
    (&["--config", "@FLOW", "--classify", "flow"], Some(FILE_FLOW)),
    (&["--config", "@BAD1"], Some("ports = [\"a\", \"b\"]\nbogus = 3\n")),
    (&["--config", "@BAD2"], Some("ports = [\"a\", \"b\"]\nqueues = \"many\"\n")),
    (&["--config", "@BAD3"], Some("ports = [\"a\", \"b\"]\n[port.zz]\nrate = \"1gbit\"\n")),
    (&["--config", "@BAD4"], Some("ports = [\"a\", \"b\"]\n[port.a]\nrat = \"1gbit\"\n")),
    (&["--config", "@BAD5"], Some("ports = [\"a\", \"b\"]\nquantum = true\n")),
    (&["--config", "@BAD6"], Some("ports = [\"a\", \"b\"]\nstats_socket = 3\n")),
    (&["--config", "@BAD7"], Some("ports = [\"a\", \"b\"]\npcap = 3\n")),
    (&["--config", "@BAD8"], Some("ports = \"a\"\n")),
    (&["--config", "@BAD9"], Some("ports = [\"a\", \"b\"]\nageing = \"x\"\n")),
    (&["--config", "@BAD10"], Some("ports = [\"a\", \"b\"]\naqm = \"dctcp\"\n[aqm_opts]\nnope = 3\n")),
    (&["--config", "@BAD11"], Some("ports = [\"a\", \"b\"]\njson = true\n")),
    (&["--config", "@BAD12"], Some("ports = [\"a\", \"b\"]\nstrict = [\"x\"]\n")),
    (&["--config", "@BAD13"], Some("ports = [\"a\", \"b\"]\npcap_ports = \"a\"\n")),
    (&["--config", "@BAD14"], Some("ports = [\"a\", \"b\"]\n[raqm_opts]\nk_min_pkts = 3\n")),
    (&["--config", "@BAD15"], Some("ports = [\"a\", \"b\"]\naqm = \"r-aqm\"\n[raqm_opts]\nbogus = 3\n")),
    (&["--config", "@BAD16"], Some("ports = [\"a\", \"b\"]\npcap_snaplen = 0\n")),
    (&["--config", "/nonexistent/x.toml"], None),
    (&["--ports", "a,b", "--cpu", "1", "--tx-thread"], None),
    (&["--config", "@TXT"], Some("ports = [\"a\", \"b\"]\ntx_thread = true\n")),
    // R-AQM's trend: our size on top of the paper's words, the older
    // two-sample reading, and samples closer than 1 ns.
    (&["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "trend_min_pkts=4"], None),
    (&["--ports", "a,b", "--aqm", "r-aqm", "--raqm-opt", "trend_samples=1", "--raqm-opt", "trend_min_pkts=4"], None),
    (&["--ports", "a,b", "--aqm", "r-aqm", "--rtt", "12us", "--raqm-opt", "trend_samples=3001"], None),
];

fn cases() -> Vec<(Vec<&'static str>, Option<&'static str>)> {
    let flags = ACCEPTED.iter().chain(REFUSED).map(|a| (a.to_vec(), None));
    let files = WITH_FILE.iter().map(|(a, f)| (a.to_vec(), *f));
    flags.chain(files).collect()
}

/// Resolves every case; one block per case: its arguments, then the
/// description or the error.
fn render() -> String {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("softswitch-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = String::new();
    for (i, (args, file)) in cases().into_iter().enumerate() {
        let mut v: Vec<String> = vec!["softswitch".into()];
        for a in &args {
            if let Some(tag) = a.strip_prefix('@') {
                let p = dir.join(format!("{tag}.toml"));
                std::fs::write(&p, file.unwrap()).unwrap();
                v.push(p.to_string_lossy().into_owned());
            } else {
                v.push(a.to_string());
            }
        }
        out.push_str(&format!("=== case {i}: {args:?}\n"));
        let text = match crate::cli::Cli::try_parse_from(&v) {
            Err(e) => format!("command line: {e}\n"),
            Ok(cli) => match super::resolve(&cli.run) {
                Ok(s) => s.describe(),
                Err(e) => format!("error: {e}\n"),
            },
        };
        out.push_str(&text.replace(&*dir.to_string_lossy(), "<dir>"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

#[test]
fn describe_and_errors_match_the_golden_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/golden.txt");
    let now = render();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &now).unwrap();
        return;
    }
    let golden = include_str!("golden.txt");
    let split = |s: &str| -> Vec<String> { s.split("=== case ").map(str::to_string).collect() };
    let (want, got) = (split(golden), split(&now));
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(
            w, g,
            "start-up description or error changed (UPDATE_GOLDEN=1 if meant)"
        );
    }
    assert_eq!(want.len(), got.len(), "number of cases");
}

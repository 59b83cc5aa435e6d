//! End-to-end tests on loopback: real kernel TCP between an in-process
//! server and client on 127.0.0.1 with ephemeral ports — never another
//! address. Each test is bounded by the generator's own `timeout`.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::cdf::FlowSizeCdf;
use super::client::{self, ClientConfig};
use super::incast::{self, IncastConfig};
use super::long::{self, LongConfig};
use super::proto::{Request, HEADER_LEN};
use super::record::write_flows_text;
use super::server::{Server, ServerStats};
use crate::timebase::Dilation;
use crate::units::Rate;

/// A running in-process server; stops its accept loop when dropped.
struct TestServer {
    addr: SocketAddr,
    stats: Arc<ServerStats>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl TestServer {
    fn start() -> Self {
        Self::serve(
            Server::bind("127.0.0.1:0".parse().unwrap())
                .unwrap()
                .quiet(),
        )
    }

    /// Runs `s` (bound, configured) on its own thread.
    fn serve(s: Server) -> Self {
        let t = TestServer {
            addr: s.local_addr(),
            stats: s.stats(),
            stop: s.stop_flag(),
        };
        thread::spawn(move || s.run(None, None));
        t
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn websearch() -> FlowSizeCdf {
    FlowSizeCdf::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/cdf/websearch.txt")).unwrap()
}

#[test]
fn workload_200_websearch_flows_complete_once_each() {
    let servers = [TestServer::start(), TestServer::start()];
    // 50 % of 2 Gbit/s with a 1.7 MB mean: a flow every ~13.7 ms, ~3 s in all.
    let cfg = ClientConfig {
        servers: servers.iter().map(|s| s.addr).collect(),
        cdf: websearch(),
        load: 0.5,
        link_rate: Rate::gbit(2),
        flows: 200,
        conns_per_server: 2,
        dscp: "10,12".parse().unwrap(),
        flow_rate: Default::default(),
        seed: 1,
        timeout: Duration::from_secs(20),
        dilation: Dilation::NONE,
    };
    let plan = client::plan(&cfg).unwrap();
    let rep = client::run(&cfg).unwrap();
    assert!(
        rep.failures.is_empty(),
        "{:?}",
        &rep.failures[..rep.failures.len().min(5)]
    );
    assert!(!rep.timed_out);
    assert_eq!(rep.flows.len(), 200);
    let ids: HashSet<u32> = rep.flows.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        (1..=200).collect::<HashSet<u32>>(),
        "every flow exactly once"
    );
    for (r, p) in rep.flows.iter().zip(&plan) {
        assert_eq!(r.id, p.id);
        assert_eq!(r.size, p.size, "flow {} size", r.id);
        assert_eq!(r.server, p.server, "flow {} server", r.id);
        assert!(r.fct_us > 0, "flow {} FCT 0", r.id);
        assert_eq!(r.dscp, p.dscp, "flow {} dscp", r.id);
    }
    // The servers sent exactly the planned payload.
    let planned: u64 = plan.iter().map(|p| p.size).sum();
    let sent: u64 = servers
        .iter()
        .map(|s| s.stats.bytes.load(Ordering::Relaxed))
        .sum();
    assert_eq!(sent, planned);
    assert_eq!(rep.summary.all.as_ref().unwrap().count, 200);
    assert_eq!(rep.summary.total_bytes, planned);
    // TrafficGenerator text output: one line per flow, five columns.
    let mut out = Vec::new();
    write_flows_text(&mut out, &rep.flows).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 200);
    let first: Vec<&str> = text.lines().next().unwrap().split(' ').collect();
    assert_eq!(first.len(), 5);
    assert_eq!(first[0], plan[0].size.to_string());
}

#[test]
fn incast_4_servers_records_every_query_and_flow() {
    let servers: Vec<TestServer> = (0..4).map(|_| TestServer::start()).collect();
    let cfg = IncastConfig {
        servers: servers.iter().map(|s| s.addr).collect(),
        size: 64 * 1024,
        queries: 30,
        interval: Duration::from_millis(5),
        dscp: 0,
        flow_rate_bps: 0,
        timeout: Duration::from_secs(10),
        fresh: false,
        dilation: Dilation::NONE,
    };
    let rep = incast::run(&cfg).unwrap();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert_eq!(rep.connections, 4, "one persistent connection per server");
    for s in &servers {
        assert_eq!(s.stats.connections.load(Ordering::Relaxed), 1);
    }
    assert_eq!(rep.queries.len(), 30);
    assert_eq!(rep.flows.len(), 120);
    let ids: HashSet<u32> = rep.flows.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 120);
    for (q, chunk) in rep.queries.iter().zip(rep.flows.chunks(4)) {
        assert_eq!(q.fanout, 4);
        assert_eq!(q.size, 4 * 65536);
        let servers_seen: HashSet<usize> = chunk.iter().map(|f| f.server).collect();
        assert_eq!(
            servers_seen.len(),
            4,
            "query {} asked every server",
            q.query
        );
        for f in chunk {
            assert_eq!(f.size, 65536);
            assert!(f.fct_us > 0 && f.fct_us <= q.qct_us, "FCT ≤ QCT");
        }
    }
    // Start-to-start spacing at least the interval.
    for w in rep.queries.windows(2) {
        assert!(w[1].start_us - w[0].start_us >= 5_000);
    }
    assert_eq!(rep.qct.as_ref().unwrap().count, 30);
}

#[test]
fn incast_fresh_opens_a_new_connection_per_server_and_query() {
    let servers: Vec<TestServer> = (0..3).map(|_| TestServer::start()).collect();
    let cfg = IncastConfig {
        servers: servers.iter().map(|s| s.addr).collect(),
        size: 32 * 1024,
        queries: 8,
        interval: Duration::from_millis(2),
        dscp: 0,
        flow_rate_bps: 0,
        timeout: Duration::from_secs(10),
        fresh: true,
        dilation: Dilation::NONE,
    };
    let rep = incast::run(&cfg).unwrap();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert_eq!(rep.queries.len(), 8);
    assert_eq!(rep.flows.len(), 24);
    assert_eq!(rep.connections, 24, "fan-in × queries");
    for s in &servers {
        assert_eq!(
            s.stats.connections.load(Ordering::Relaxed),
            8,
            "each server saw one connection per query"
        );
    }
    let ids: HashSet<u32> = rep.flows.iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), 24);
}

#[test]
fn paced_long_flow_holds_its_rate() {
    let server = TestServer::start();
    let rep = long::run(&LongConfig {
        server: server.addr,
        duration: Duration::from_millis(1000),
        dscp: 8,
        rate_bps: 200_000_000,
        sample: Duration::from_millis(100),
        delay: Duration::ZERO,
        size: None,
        dilation: Dilation::NONE,
    })
    .unwrap();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert_eq!((rep.fct_us, rep.start_ms), (None, 0));
    assert_eq!(rep.samples.len(), 10);
    assert_eq!(rep.samples[0].t_ms, 100);
    assert_eq!(rep.samples[9].t_ms, 1000);
    // App-limited pacing: never more than the rate plus one chunk; on an
    // idle loopback close to it (the low bound leaves room for a busy CI box).
    assert!(
        (100.0..=205.0).contains(&rep.goodput_mbps),
        "goodput {}",
        rep.goodput_mbps
    );
    let csv = rep.csv();
    assert!(csv.starts_with("t_ms,bytes,goodput_mbps\n100,"));
    assert_eq!(csv.lines().count(), 11);
}

#[test]
fn server_with_tcp_pacing_serves_every_byte() {
    // The kernel paces each accepted socket (SO_MAX_PACING_RATE set); the
    // cap does not bind, so a sized flow completes as an unpaced one would.
    let server = TestServer::serve(
        Server::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .quiet()
            .tcp_pacing(true),
    );
    let rep = long::run(&LongConfig {
        server: server.addr,
        duration: Duration::from_millis(3000),
        dscp: 0,
        rate_bps: 0,
        sample: Duration::from_millis(100),
        delay: Duration::ZERO,
        size: Some(4_000_000),
        dilation: Dilation::NONE,
    })
    .unwrap();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert_eq!(rep.total_bytes, 4_000_000);
    assert!(rep.fct_us.is_some());
    assert_eq!(server.stats.errors.load(Ordering::Relaxed), 0);
    assert_eq!(server.stats.connections.load(Ordering::Relaxed), 1);
}

#[test]
fn delayed_sized_long_flow_starts_late_and_records_its_fct() {
    // 2.5 MB paced at 100 Mbit/s from 300 ms: ≈ 200 ms on the wire, done by ≈ 500 ms.
    let server = TestServer::start();
    let rep = long::run(&LongConfig {
        server: server.addr,
        duration: Duration::from_millis(2000),
        dscp: 0,
        rate_bps: 100_000_000,
        sample: Duration::from_millis(100),
        delay: Duration::from_millis(300),
        size: Some(2_500_000),
        dilation: Dilation::NONE,
    })
    .unwrap();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert!((300..400).contains(&rep.start_ms), "start {}", rep.start_ms);
    assert_eq!(rep.total_bytes, 2_500_000);
    let fct = rep.fct_us.expect("completed");
    assert!((190_000..1_000_000).contains(&fct), "fct {fct}");
    // One time base from the process start: nothing arrives in the samples
    // at 100 and 200 ms (the one at 300 ms may be taken just after the
    // start on a busy machine), and the flow ends (no samples) once its
    // bytes are in.
    assert!(
        rep.samples.iter().take(2).all(|x| x.bytes == 0),
        "{:?}",
        rep.samples
    );
    let last = rep.samples.last().unwrap().t_ms;
    assert!((400..=1400).contains(&last), "last sample {last}");
    assert!(rep.samples.iter().map(|x| x.bytes).sum::<u64>() <= 2_500_000);
}

#[test]
fn server_that_hangs_up_is_reported_per_flow_not_a_panic() {
    // A listener that reads each request and closes without answering.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { continue };
            let mut b = [0u8; HEADER_LEN];
            let _ = s.read_exact(&mut b);
        }
    });
    let cfg = ClientConfig {
        servers: vec![addr],
        cdf: FlowSizeCdf::from_points(&[(0.0, 0.0), (1000.0, 1.0)]).unwrap(),
        load: 0.5,
        link_rate: Rate::mbit(100),
        flows: 3,
        conns_per_server: 1,
        dscp: super::dscp::DscpMix::single(0),
        flow_rate: Default::default(),
        seed: 1,
        timeout: Duration::from_secs(5),
        dilation: Dilation::NONE,
    };
    let rep = client::run(&cfg).unwrap();
    assert!(rep.flows.is_empty());
    assert_eq!(rep.failures.len(), 3);
    for f in &rep.failures {
        assert_eq!(f.server, addr.to_string());
        assert!(f.reason.contains("closed"), "{}", f.reason);
    }
}

#[test]
fn server_rejects_a_foreign_request_and_keeps_serving() {
    let server = TestServer::start();
    let mut bad = TcpStream::connect(server.addr).unwrap();
    bad.write_all(&[0u8; HEADER_LEN]).unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(bad.read(&mut b).unwrap(), 0, "server closes on a bad magic");
    // A good client still gets its answer.
    let mut good = TcpStream::connect(server.addr).unwrap();
    let req = Request {
        id: 7,
        size: 1000,
        dscp: 0,
        rate_bps: 0,
    };
    good.write_all(&req.encode()).unwrap();
    let mut resp = vec![0u8; HEADER_LEN + 1000];
    good.read_exact(&mut resp).unwrap();
    assert_eq!(
        Request::decode(resp[..HEADER_LEN].try_into().unwrap()),
        Ok(req)
    );
    // The bad connection's thread counts its error just after closing.
    let t = std::time::Instant::now();
    while server.stats.errors.load(Ordering::Relaxed) == 0 && t.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(server.stats.errors.load(Ordering::Relaxed), 1);
}

#[test]
fn trafficgenerator_config_file_drives_a_run() {
    let servers = [TestServer::start(), TestServer::start()];
    let text = format!(
        "server {} {}\nserver {} {}\nreq_size_dist {}/cdf/websearch.txt\n\
         rate 0Mbps 50\nrate 200Mbps 50\ndscp 10 1\ndscp 12 1\n",
        servers[0].addr.ip(),
        servers[0].addr.port(),
        servers[1].addr.ip(),
        servers[1].addr.port(),
        env!("CARGO_MANIFEST_DIR"),
    );
    let file = super::tgconf::parse(&text, "client_config.txt").unwrap();
    // Small flows (≤ 20 KB) so 40 of them take well under a second.
    let cfg = ClientConfig {
        servers: file.servers.clone(),
        cdf: FlowSizeCdf::from_points(&[(1000.0, 0.0), (20_000.0, 1.0)]).unwrap(),
        load: 0.2,
        link_rate: Rate::gbit(1),
        flows: 40,
        conns_per_server: 1,
        dscp: file.dscp.clone().unwrap(),
        flow_rate: file.rates.clone().unwrap(),
        seed: 5,
        timeout: Duration::from_secs(10),
        dilation: Dilation::NONE,
    };
    let plan = client::plan(&cfg).unwrap();
    let rep = client::run(&cfg).unwrap();
    assert!(rep.failures.is_empty(), "{:?}", rep.failures);
    assert_eq!(rep.flows.len(), 40);
    for (r, p) in rep.flows.iter().zip(&plan) {
        assert_eq!((r.id, r.dscp), (p.id, p.dscp));
        assert_eq!(r.rate_mbps, p.rate_bps as f64 / 1e6, "flow {}", r.id);
        assert!(r.rate_mbps == 0.0 || r.rate_mbps == 200.0);
    }
    // Both rates and both DSCPs drawn, each flow to one of the file's servers.
    for rate in [0.0, 200.0] {
        assert!(rep.flows.iter().any(|r| r.rate_mbps == rate), "{rate}");
    }
    for d in [10, 12] {
        assert!(rep.flows.iter().any(|r| r.dscp == d), "{d}");
    }
    // The servers count a flow just after its last byte is written.
    let answered = || -> u64 {
        servers
            .iter()
            .map(|s| s.stats.flows.load(Ordering::Relaxed))
            .sum()
    };
    let t = std::time::Instant::now();
    while answered() < 40 && t.elapsed() < Duration::from_secs(2) {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(answered(), 40);
}

/// One paced, sized long flow at dilation `d`: (report, real time taken).
fn paced_flow(d: f64) -> (long::LongReport, Duration) {
    let server = TestServer::start();
    let t = std::time::Instant::now();
    let rep = long::run(&LongConfig {
        server: server.addr,
        duration: Duration::from_millis(1000),
        dscp: 0,
        rate_bps: 40_000_000,
        sample: Duration::from_millis(50),
        delay: Duration::ZERO,
        size: Some(1_000_000),
        dilation: Dilation::new(d).unwrap(),
    })
    .unwrap();
    (rep, t.elapsed())
}

#[test]
fn dilated_paced_transfer_reports_the_same_emulated_fct() {
    // 1 MB paced at an emulated 40 Mbit/s: 200 ms emulated. At D = 4 the
    // server paces at 10 Mbit/s, the transfer takes 800 ms of real time,
    // and the reported FCT, samples and goodput are the emulated ones.
    let (r1, real1) = paced_flow(1.0);
    let (r4, real4) = paced_flow(4.0);
    for r in [&r1, &r4] {
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.total_bytes, 1_000_000);
        assert_eq!(r.rate_mbps, 40.0, "the rate asked, emulated");
    }
    let (f1, f4) = (r1.fct_us.unwrap(), r4.fct_us.unwrap());
    eprintln!("FCT D=1 {f1} us ({real1:?} real), D=4 {f4} us ({real4:?} real)");
    for f in [f1, f4] {
        assert!((190_000..=280_000).contains(&f), "emulated FCT {f} us");
    }
    assert!(
        (0.85..=1.15).contains(&(f4 as f64 / f1 as f64)),
        "D=4 reports {f4} us against {f1} us at D=1"
    );
    // Real time: D times as long.
    assert!(real4 >= Duration::from_millis(760), "{real4:?}");
    assert!(
        real4.as_secs_f64() / real1.as_secs_f64() > 3.0,
        "{real1:?} {real4:?}"
    );
    // Samples every 50 ms of emulated time, at ≈ the emulated rate.
    assert_eq!(r4.samples[0].t_ms, 50);
    assert_eq!(r4.samples[2].t_ms, 150);
    let mid = &r4.samples[1];
    assert!(
        (25.0..=45.0).contains(&mid.goodput_mbps),
        "emulated goodput {} Mbit/s",
        mid.goodput_mbps
    );
}

#[test]
fn dilated_incast_spaces_queries_in_emulated_time() {
    let servers: Vec<TestServer> = (0..2).map(|_| TestServer::start()).collect();
    let cfg = IncastConfig {
        servers: servers.iter().map(|s| s.addr).collect(),
        size: 8 * 1024,
        queries: 5,
        interval: Duration::from_millis(20),
        dscp: 0,
        flow_rate_bps: 0,
        timeout: Duration::from_secs(10),
        fresh: false,
        dilation: Dilation::new(4.0).unwrap(),
    };
    let t = std::time::Instant::now();
    let rep = incast::run(&cfg).unwrap();
    let real = t.elapsed();
    assert!(rep.error.is_none(), "{:?}", rep.error);
    assert_eq!(rep.queries.len(), 5);
    // 20 ms emulated apart = 80 ms real; reported 20 ms apart.
    assert!(real >= Duration::from_millis(4 * 80), "{real:?}");
    for w in rep.queries.windows(2) {
        let gap = w[1].start_us - w[0].start_us;
        assert!((19_900..30_000).contains(&gap), "start-to-start {gap} us");
    }
}

//! The data path: AF_XDP sockets around the deterministic [`Switch`].
//!
//! One thread busy-polls every port: reap TX completions, top up fill rings,
//! receive a batch and hand each frame to [`Switch::ingress`], let the switch
//! move what its shapers and wires release, put those frames on the TX rings and
//! kick until the kernel has taken them (NOTES.md: one kick sends ~32 frames in
//! copy mode). RX rings stay small and are drained every pass, so the queue
//! forms in the switch's own queues where the AQM sees it.
//!
//! All frames live in one UMEM shared by every socket, so forwarding is a
//! descriptor move, not a copy. Frame accounting is checked at exit: every
//! frame must be back on the free list or lent to the kernel's fill rings.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::aqm::AqmKind;
use crate::bridge::BridgeConfig;
use crate::config::Settings;
use crate::fidelity::{self, LoopStalls, StallTime, Thresholds};
use crate::packet::Packet;
use crate::preflight::{self, LinkState, SysPaths};
use crate::stats::{Published, StatsServer};
use crate::switch::{PortSpec, Switch};
use crate::units::{Nanos, MS, SEC};
use crate::xdp::XdpAttachment;
use crate::xsk::{FrameAccounting, Umem, XskOptions, XskSocket, DEFAULT_FRAME_SIZE};

/// How often the live counters are refreshed.
const PUBLISH_EVERY: Nanos = 100 * MS;
/// How often aged MAC entries are removed.
const AGE_EVERY: Nanos = SEC;
/// Frames received per socket per pass.
const RX_BATCH: usize = 64;
/// Captured frames handed to the pcap writer at once (or after 1 ms).
const PCAP_BATCH: usize = 1024;
/// An interval between passes longer than this is a stall (no frame moved).
const STALL_NS: Nanos = 100_000;
/// How often each port's interface is looked up (down, up again, gone). A
/// tx kick that fails says so at once; this catches ports nothing is sent to.
const LINK_CHECK_EVERY: Nanos = 250 * MS;

/// How regularly the data path looks at its rings: the interval between
/// the starts of successive loop passes. A long interval is time in which
/// no frame moved — the thread was descheduled, or a syscall (a tx kick
/// that ran a host's TCP stack in softirq) took that long — and shapers and
/// AQMs saw the clock jump.
///
/// For the fidelity guard a long interval is a *stall* only when frames were
/// waiting for the data path at its end: the pass that followed received
/// frames, or the switch held packets. An idle switch that gave its CPU away
/// delayed nothing.
///
/// Each interval also carries where the pass it covers spent its time
/// ([`StallTime`]), so that a stall can be put down to its cause
/// ([`crate::fidelity::stall_cause`]): inside tx kicks (the one syscall on
/// the data path: in copy mode the kernel delivers the frames to the
/// receiving veth there, and may run that host's stack in softirq before
/// returning), inside a yield (the idle switch gave its CPU away), waiting
/// for a CPU (other tasks ran on the switch's), or none of these.
pub struct PassIntervals {
    hist: hdrhistogram::Histogram<u64>,
    over_100us: u64,
    stalls: u64,
    stalled_ns: Nanos,
    max_stall_ns: Nanos,
    within: StallTime,
    max_within: StallTime,
    max_kick_ns: Nanos,
    thread_waited_ns: Option<Nanos>,
}

impl Default for PassIntervals {
    fn default() -> Self {
        Self {
            hist: hdrhistogram::Histogram::new_with_bounds(1, 100 * SEC, 2)
                .expect("valid histogram bounds"),
            over_100us: 0,
            stalls: 0,
            stalled_ns: 0,
            max_stall_ns: 0,
            within: StallTime::default(),
            max_within: StallTime::default(),
            max_kick_ns: 0,
            thread_waited_ns: None,
        }
    }
}

impl PassIntervals {
    /// Records one interval; `delayed_frames`: frames were waiting at its
    /// end; `spent`: where the pass it covers spent its time (each part
    /// clamped to the interval, [`StallTime::clamped`]).
    pub fn record(&mut self, ns: Nanos, delayed_frames: bool, spent: StallTime) {
        let spent = spent.clamped(ns);
        self.hist.saturating_record(ns.max(1));
        self.max_kick_ns = self.max_kick_ns.max(spent.kicks_ns);
        if ns > STALL_NS {
            self.over_100us += 1;
            if delayed_frames {
                self.stalls += 1;
                self.stalled_ns += ns;
                self.within.add(spent);
                if ns > self.max_stall_ns {
                    self.max_stall_ns = ns;
                    self.max_within = spent;
                }
            }
        }
    }

    /// How long the data-path thread has waited for a CPU since the run
    /// started (from its schedstat), for the report.
    pub fn set_thread_waited(&mut self, ns: Nanos) {
        self.thread_waited_ns = Some(ns);
    }

    /// The stalls of a run `elapsed_ns` long, for the fidelity guard.
    pub fn stalls(&self, elapsed_ns: Nanos) -> LoopStalls {
        LoopStalls {
            elapsed_ns,
            count: self.stalls,
            stalled_ns: self.stalled_ns,
            max_ns: self.max_stall_ns,
            within: self.within,
            max_within: self.max_within,
        }
    }

    /// JSON for the counters.
    pub fn report(&self) -> serde_json::Value {
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1e3;
        json!({
            "passes": self.hist.len(),
            "p50_us": us(0.5),
            "p99_us": us(0.99),
            "p999_us": us(0.999),
            "max_us": self.hist.max() as f64 / 1e3,
            "over_100us": self.over_100us,
            "stalls": self.stalls,
            "stalled_ms": self.stalled_ns as f64 / 1e6,
            "max_stall_us": self.max_stall_ns as f64 / 1e3,
            "stalled_in_kicks_ms": self.within.kicks_ns as f64 / 1e6,
            "stalled_in_yield_ms": self.within.yield_ns as f64 / 1e6,
            "stalled_waiting_ms": self.within.waited_ns as f64 / 1e6,
            "max_stall_in_kicks_us": self.max_within.kicks_ns as f64 / 1e3,
            "max_stall_in_yield_us": self.max_within.yield_ns as f64 / 1e3,
            "max_stall_waiting_us": self.max_within.waited_ns as f64 / 1e3,
            "max_kick_us": self.max_kick_ns as f64 / 1e3,
            "thread_waited_ms": self.thread_waited_ns.map(|n| n as f64 / 1e6),
        })
    }
}

/// The data-path thread's time waiting for a CPU (runnable, not running),
/// read from its `/proc/thread-self/schedstat` (second field, ns). Only on a
/// stall and every publish, never per pass. Without the file (no
/// CONFIG_SCHED_INFO) every reading is 0 and no total is reported.
struct ThreadWait {
    file: Option<std::fs::File>,
    start: Option<Nanos>,
    last: Nanos,
}

impl ThreadWait {
    /// Opens the calling thread's schedstat: call it on the data-path thread.
    fn open() -> Self {
        let mut w = ThreadWait {
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
            start: None,
            last: 0,
        };
        w.start = w.read();
        w.last = w.start.unwrap_or(0);
        w
    }

    fn read(&self) -> Option<Nanos> {
        use std::os::unix::fs::FileExt;
        let f = self.file.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        let (_run, wait) = crate::cpu::parse_schedstat(std::str::from_utf8(&buf[..n]).ok()?)?;
        Some(wait)
    }

    /// Wait since the previous call (or since opening).
    fn since_last(&mut self) -> Nanos {
        match self.read() {
            Some(now) => {
                let d = now.saturating_sub(self.last);
                self.last = now;
                d
            }
            None => 0,
        }
    }

    /// Wait since opening, as of the last reading.
    fn total(&self) -> Option<Nanos> {
        Some(self.last.saturating_sub(self.start?))
    }
}

/// What the switch saw, at exit.
pub struct RunReport {
    /// The final counters (same shape as the live snapshot).
    pub snapshot: serde_json::Value,
    /// Where the UMEM's frames were after shutdown.
    pub accounting: FrameAccounting,
}

/// Ring sizes: RX small (frames waiting there are queued where no AQM sees
/// them) but large enough not to overflow while the loop is briefly away.
fn ring_options() -> XskOptions {
    XskOptions {
        rx_size: 1024,
        fill_size: 1024,
        tx_size: 1024,
        comp_size: 1024,
        ..XskOptions::default()
    }
}

/// Frames the UMEM needs so that no ring or queue ever waits for one: every
/// socket's fill and TX rings full, every port's buffer full of minimum-size
/// frames (at most 8192 per port), every wire full at line rate, plus slack
/// for flooding and frames waiting for a TX slot.
pub fn frames_needed(settings: &Settings, sockets: u32, opts: &XskOptions) -> u32 {
    let rings = sockets as u64 * (opts.fill_size + opts.tx_size) as u64;
    let ports: u64 = settings
        .ports
        .iter()
        .map(|p| {
            let buffer = (p.port.buffer_bytes / 64).min(8192);
            let wire = (p.port.rate.bytes_in(p.delay_ns) / 64).min(65_536);
            buffer + wire
        })
        .sum();
    // R-AQM's VIQs hold ACK frames too.
    let viqs = settings
        .raqm
        .as_ref()
        .map_or(0, |r| r.viq_limit_pkts as u64 * settings.ports.len() as u64);
    // Emulated host links hold received frames until their release.
    let links: u64 = settings
        .ports
        .iter()
        .filter(|p| p.ingress_rate.is_some())
        .map(|_| settings.ingress_limit as u64)
        .sum();
    (rings + ports + viqs + links + 1024).min(u32::MAX as u64) as u32
}

/// Number of RX queues of an interface (one AF_XDP socket each).
fn rx_queues(name: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{name}/queues"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .clamp(1, crate::xdp::MAX_QUEUES)
}

/// What the data path copies out of the switch for the live counters: plain
/// values and small reports, so that taking it is cheap (tens of µs for 3
/// ports × 8 queues) and the JSON is built and serialised by whoever reads
/// it ([`Captured::to_json`], the stats-socket thread), not on the data
/// path's thread, where the whole snapshot used to take ~480 µs every 100 ms
/// (BENCHMARKS.md, Headroom).
pub struct Captured {
    names: Arc<[String]>,
    guard: Thresholds,
    now: Nanos,
    mac_entries: usize,
    ports: Vec<CapturedPort>,
    passes: Option<(serde_json::Value, LoopStalls)>,
    umem: Option<FrameAccounting>,
    conservation: crate::switch::Conservation,
    /// Each port's interface state, when the data path watches them.
    pub link_states: Option<Vec<LinkState>>,
}

struct CapturedPort {
    io: crate::switch::IoCounters,
    egress: crate::port::PortCounters<crate::port::SojournSummary>,
    backlog_bytes: u64,
    backlog_pkts: u32,
    on_wire_pkts: usize,
    aqm: serde_json::Value,
    classifier: Option<serde_json::Value>,
    link: crate::shaper::LinkFidelity,
    raqm: Option<serde_json::Value>,
    ingress: Option<(crate::units::Rate, crate::ingress::IngressCounters, usize)>,
}

/// Copies the switch's counters at `now` (see [`Captured`]), with the
/// fidelity guard's verdict to be judged against `guard`.
pub fn capture(
    sw: &Switch<AqmKind>,
    names: &Arc<[String]>,
    now: Nanos,
    umem: Option<&FrameAccounting>,
    passes: Option<&PassIntervals>,
    guard: &Thresholds,
) -> Captured {
    let flows_with_scale = sw.window_scales().map_or(0, |s| s.len());
    let ports = sw
        .ports()
        .iter()
        .map(|p| CapturedPort {
            io: p.io.clone(),
            egress: p.egress.counters().summary(),
            backlog_bytes: p.egress.backlog_bytes(),
            backlog_pkts: p.egress.backlog_pkts(),
            on_wire_pkts: p.wire.len(),
            aqm: p.egress.aqm().report(),
            classifier: p.egress.classifier_report(),
            link: p.egress.shaper().fidelity(now),
            raqm: p.raqm.as_ref().map(|r| r.report(now, flows_with_scale)),
            ingress: p
                .ingress_link
                .as_ref()
                .map(|l| (l.rate(), *l.counters(), l.len())),
        })
        .collect();
    Captured {
        names: names.clone(),
        guard: *guard,
        now,
        mac_entries: sw.bridge().entries(),
        ports,
        passes: passes.map(|p| (p.report(), p.stalls(now))),
        umem: umem.copied(),
        conservation: sw.conservation(),
        link_states: None,
    }
}

impl Captured {
    /// The JSON snapshot of the switch's counters, served live and printed
    /// at exit, with the fidelity guard's verdict.
    pub fn to_json(&self) -> serde_json::Value {
        let ports: Vec<_> = self
            .ports
            .iter()
            .zip(self.names.iter())
            .map(|(p, n)| {
                let l = &p.link;
                let mut v = json!({
                    "name": n,
                    "io": p.io,
                    "egress": p.egress,
                    "backlog_bytes": p.backlog_bytes,
                    "backlog_pkts": p.backlog_pkts,
                    "on_wire_pkts": p.on_wire_pkts,
                    "aqm": p.aqm,
                    "classifier": p.classifier,
                    "link": {
                        "busy_ns": l.busy_ns,
                        "lost_ns": l.lost_ns,
                        "lost_fraction": l.lost_fraction(),
                        "excess_bytes": l.excess_bytes,
                        "excess_pkts": l.excess_pkts,
                    },
                });
                if let Some(r) = &p.raqm {
                    v["raqm"] = r.clone();
                }
                if let Some((rate, c, len)) = &p.ingress {
                    v["ingress_link"] = json!({
                        "rate": rate.to_string(),
                        "backlog_pkts": len,
                        "released": c.released,
                        "delayed": c.delayed,
                        "dropped_full": c.dropped_full,
                        "max_backlog_pkts": c.max_backlog_pkts,
                        "waited_ms": c.waited_ns as f64 / 1e6,
                    });
                }
                v
            })
            .collect();
        let mut v = json!({
            "elapsed_s": self.now as f64 / 1e9,
            "mac_entries": self.mac_entries,
            "ports": ports,
        });
        if let Some((report, _)) = &self.passes {
            v["loop"] = report.clone();
        }
        let named: Vec<(&str, _)> = self
            .names
            .iter()
            .map(|n| n.as_str())
            .zip(self.ports.iter().map(|p| p.link))
            .collect();
        for (i, b) in self.conservation.ports.iter().enumerate() {
            v["ports"][i]["balance"] = json!(b);
        }
        v["conservation"] = json!({
            "switch": self.conservation.switch,
            "holds": self.conservation.holds,
            "failures": self.conservation.failures(&self.names),
        });
        let stalls = self.passes.as_ref().map(|(_, s)| s);
        v["fidelity"] = json!(fidelity::judge(&named, stalls, &self.guard));
        if let Some(links) = &self.link_states {
            set_link_states(&mut v, links);
        }
        if let Some(a) = &self.umem {
            v["umem"] = json!({
                "frames": a.frames, "free": a.free, "in_fill": a.in_fill,
                "held_by_app": a.held_by_app, "in_tx": a.in_tx, "balanced": a.is_balanced(),
            });
        }
        v
    }
}

impl crate::stats::Render for Captured {
    fn render(&self) -> String {
        self.to_json().to_string()
    }
}

/// The JSON snapshot of the switch's counters now ([`capture`] then
/// [`Captured::to_json`]).
pub fn snapshot(
    sw: &Switch<AqmKind>,
    names: &[String],
    now: Nanos,
    umem: Option<&FrameAccounting>,
    passes: Option<&PassIntervals>,
    guard: &Thresholds,
) -> serde_json::Value {
    capture(sw, &Arc::from(names), now, umem, passes, guard).to_json()
}

/// Adds each port's `link_state` (up, down, gone) to a snapshot.
fn set_link_states(snap: &mut serde_json::Value, links: &[LinkState]) {
    for (i, l) in links.iter().enumerate() {
        snap["ports"][i]["link_state"] = json!(l.name());
    }
}

/// The CPU `choice` names for this process's data path (None: do not pin).
fn data_path_cpu(choice: crate::cpu::CpuChoice) -> Result<Option<u32>> {
    if choice == crate::cpu::CpuChoice::Unpinned {
        return Ok(None);
    }
    let allowed = crate::cpu::allowed_cpus().map_err(|e| anyhow::anyhow!("--cpu {choice}: {e}"))?;
    choice
        .resolve(&allowed)
        .map_err(|e| anyhow::anyhow!("--cpu: {e}"))
}

/// Builds the switch from settings (no I/O).
pub fn build_switch(settings: &Settings) -> Result<Switch<AqmKind>> {
    let mut specs = Vec::with_capacity(settings.ports.len());
    for p in &settings.ports {
        let aqm = p
            .aqm
            .build(&p.env)
            .with_context(|| format!("port {}", p.name))?;
        specs.push(PortSpec {
            name: p.name.clone(),
            config: p.port.clone(),
            aqm,
            delay_ns: p.delay_ns,
        });
    }
    let bridge = BridgeConfig {
        ageing_ns: settings.ageing_ns,
        ..BridgeConfig::default()
    };
    let mut sw =
        Switch::new(specs, bridge, 0, settings.seed).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(r) = &settings.raqm {
        sw.enable_raqm(r, 0);
    }
    let ingress: Vec<_> = settings.ports.iter().map(|p| p.ingress_rate).collect();
    if ingress.iter().any(Option::is_some) {
        let overhead = settings.ports[0].port.overhead_bytes;
        sw.enable_ingress_links(&ingress, overhead, settings.ingress_limit);
    }
    Ok(sw)
}

/// Runs the switch on real interfaces until `stop` is set or the duration ends.
pub fn run(settings: &Settings, stop: Arc<AtomicBool>) -> Result<RunReport> {
    preflight::check_privileges()?;
    let names: Vec<String> = settings.ports.iter().map(|p| p.name.clone()).collect();
    let ifaces = preflight::check_ports(&names, settings.force, &SysPaths::default())?;
    // Before anything is attached: one switch per interface.
    let _port_locks = crate::portlock::PortLocks::acquire(
        std::path::Path::new(crate::portlock::LOCK_DIR),
        &names,
    )?;
    let mut sw = build_switch(settings)?;
    let cpu = data_path_cpu(settings.cpu)?;
    eprint!("{}", settings.describe());
    for i in &ifaces {
        // Frames larger than a UMEM frame can never be received whole.
        if i.mtu + 18 > DEFAULT_FRAME_SIZE {
            bail!(
                "interface {} has MTU {}; softswitch handles frames up to {} bytes: lower its MTU",
                i.name,
                i.mtu,
                DEFAULT_FRAME_SIZE - 18
            );
        }
    }

    // A busy-polling switch on a 2-vCPU machine competes with the hosts and
    // everything else: ask for a larger CPU share (a dedicated core is better).
    if let Err(e) = crate::xsk::set_nice(settings.nice) {
        eprintln!("softswitch: could not raise priority ({e}); expect jitter under load");
    }
    let opts = ring_options();
    let sockets: u32 = names.iter().map(|n| rx_queues(n)).sum();
    let needed = frames_needed(settings, sockets, &opts);
    let frames = match settings.frames {
        Some(f) if f < needed => {
            eprintln!(
                "softswitch: warning: --frames {f} is below the {needed} this configuration can hold \
                 (rings + buffers + wires); expect no_frame drops and empty fill rings"
            );
            f
        }
        Some(f) => f,
        None => needed.max(crate::xsk::DEFAULT_FRAMES),
    };
    let mut umem = Umem::new(frames, DEFAULT_FRAME_SIZE).context("creating the UMEM")?;
    let mut xdp = XdpAttachment::attach(&names)?;
    let mut socks: Vec<Vec<XskSocket>> = Vec::with_capacity(names.len());
    for (port, name) in names.iter().enumerate() {
        let mut v = Vec::new();
        for q in 0..rx_queues(name) {
            let s = XskSocket::bind(&mut umem, name, q, &opts)?;
            xdp.register_socket(port, q, s.fd())?;
            v.push(s);
        }
        eprintln!(
            "softswitch: port {port} = {name}: {} AF_XDP socket(s), {:?} mode, XDP {:?}",
            v.len(),
            v[0].mode(),
            xdp.mode(port).expect("attached port")
        );
        socks.push(v);
    }

    let published = Published::default();
    let _server = match StatsServer::start(&settings.stats_socket, published.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("softswitch: live stats off: {e}");
            None
        }
    };

    let ts_writer = match &settings.timeseries {
        Some((path, _)) => Some(
            crate::timeseries::Writer::create(path)
                .with_context(|| format!("creating {}", path.display()))?,
        ),
        None => None,
    };
    let mut pcap = match &settings.pcap {
        Some(p) => {
            sw.enable_capture(crate::capture::CaptureConfig {
                snaplen: p.snaplen,
                ports: p.ports.clone(),
            });
            let w = crate::capture::writer::Writer::start(crate::capture::writer::WriterConfig {
                dir: p.dir.clone(),
                names: names.clone(),
                ports: p.ports.clone(),
                snaplen: p.snaplen,
                max_bytes: p.max_bytes,
                epoch_ns: 0,
            })
            .with_context(|| format!("--pcap {}: creating the capture files", p.dir.display()))?;
            eprintln!(
                "softswitch: capturing into {} (snap length {} B, at most {:.1} MB per file)",
                p.dir.display(),
                p.snaplen,
                p.max_bytes as f64 / 1e6
            );
            Some(w)
        }
        None => None,
    };
    let mut pcap_spare = crate::capture::Batch::default();
    let mut next_pcap_send = 0;
    let ts_interval = settings.timeseries.as_ref().map_or(Nanos::MAX, |t| t.1);
    let mut ts_batch = crate::timeseries::Batch::with_capacity(4096);
    let mut next_sample = if settings.timeseries.is_some() {
        0
    } else {
        Nanos::MAX
    };

    // Pin only now: the stats and time-series threads above stay free to
    // run on other CPUs.
    if let Some(c) = cpu {
        crate::cpu::pin_current_thread(c).with_context(|| {
            format!("pinning the data path to CPU {c} (leave out --cpu to not pin)")
        })?;
        eprintln!("softswitch: data path pinned to CPU {c}");
    }

    let start = Instant::now();
    if let Some(w) = &pcap {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        w.set_epoch(epoch.as_nanos() as u64);
    }
    let clock = || start.elapsed().as_nanos() as Nanos;
    let mut batch = [(0u64, 0u32); RX_BATCH];
    let mut pending: Vec<VecDeque<Packet>> = (0..names.len())
        .map(|_| VecDeque::with_capacity(4096))
        .collect();
    let mut next_publish = 0;
    let mut next_age = AGE_EVERY;
    let mut idle_passes = 0u32;
    let mut waiter = crate::poll::Waiter::default();
    if settings.poll == crate::poll::PollMode::Adaptive {
        crate::poll::tighten_timer_slack();
    }
    let mut intervals = PassIntervals::default();
    let shared_names: Arc<[String]> = Arc::from(names.as_slice());
    let ifindexes: Vec<u32> = ifaces.iter().map(|i| i.ifindex).collect();
    let sys = SysPaths::default();
    let mut links = vec![LinkState::Up; names.len()];
    let mut next_link_check = LINK_CHECK_EVERY;
    let mut last_pass = clock();
    // Where the previous pass spent its time (kicks, yield, waiting).
    let mut spent = StallTime::default();
    let mut thread_wait = ThreadWait::open();
    let deadline = settings.duration_ns;
    eprintln!(
        "softswitch: forwarding between {} (Ctrl-C to stop)",
        names.join(", ")
    );

    loop {
        let mut work = 0usize;
        let now = clock();
        let interval = now - last_pass;
        last_pass = now;
        let held = sw.held_packets() > 0 || pending.iter().any(|q| !q.is_empty());
        for (port, ss) in socks.iter_mut().enumerate() {
            for s in ss.iter_mut().filter(|s| !s.is_abandoned()) {
                s.complete(&mut umem);
                s.refill(&mut umem);
                let n = s.recv(&mut umem, &mut batch);
                work += n;
                for &(frame, len) in &batch[..n] {
                    sw.ingress(port as u16, frame, len, now, &mut umem);
                }
            }
        }
        let delayed = held || work > 0;
        if interval > STALL_NS && delayed {
            // Rare (a stall): read how long the thread waited for a CPU since
            // the last stall or publish, at most PUBLISH_EVERY ago.
            spent.waited_ns = thread_wait.since_last();
        }
        intervals.record(interval, delayed, spent);
        spent = StallTime::default();
        let now = clock();
        sw.poll(now, &mut umem, |port, pkt| {
            pending[port as usize].push_back(pkt)
        });
        let mut link_news = None;
        for (port, q) in pending.iter_mut().enumerate() {
            if links[port] != LinkState::Up {
                // A real port whose link is down drops what it would send.
                if !q.is_empty() {
                    sw.ports_mut()[port].io.link_down_drops += q.len() as u64;
                    for pkt in q.drain(..) {
                        crate::packet::FrameStore::release(&mut umem, pkt.frame);
                    }
                }
                continue;
            }
            let s = &mut socks[port][0];
            while let Some(pkt) = q.front() {
                match s.send(&mut umem, pkt.frame, pkt.len) {
                    Ok(()) => {
                        q.pop_front();
                        work += 1;
                    }
                    Err(_) => break,
                }
            }
            if s.tx_pending() > 0 {
                let t0 = clock();
                s.flush();
                spent.kicks_ns += clock() - t0;
                match s.take_link_error() {
                    Some(nix::errno::Errno::ENETDOWN) => link_news = Some(port),
                    Some(nix::errno::Errno::ENXIO | nix::errno::Errno::ENODEV) => {
                        link_news = Some(port)
                    }
                    _ => {}
                }
            }
        }
        if link_news.is_some() || now >= next_link_check {
            next_link_check = now + LINK_CHECK_EVERY;
            for (port, name) in names.iter().enumerate() {
                let state = preflight::link_state(name, ifindexes[port], &sys);
                if state == links[port] || links[port] == LinkState::Gone {
                    continue;
                }
                links[port] = state;
                match state {
                    LinkState::Up => eprintln!(
                        "softswitch: port {port} ({name}) is up again; forwarding to it resumes"
                    ),
                    LinkState::Down => eprintln!(
                        "softswitch: port {port} ({name}) is down; frames for it are dropped \
                         (counted as link_down_drops) until it is up again"
                    ),
                    LinkState::Gone => {
                        let mut stranded = 0;
                        for s in socks[port].iter_mut() {
                            stranded += s.abandon(&mut umem);
                        }
                        eprintln!(
                            "softswitch: port {port} ({name}) is gone (the interface was deleted, \
                             e.g. with its namespace); its frames are dropped (counted as \
                             link_down_drops) and the other ports keep forwarding{}",
                            if stranded > 0 {
                                format!("; {stranded} frames stay with the kernel")
                            } else {
                                String::new()
                            }
                        );
                    }
                }
            }
            if links.iter().all(|l| *l == LinkState::Gone) {
                eprintln!("softswitch: every port is gone; stopping");
                stop.store(true, Ordering::Relaxed);
                next_publish = now;
            }
        }

        if let Some(w) = pcap.as_mut() {
            // Hand the writer what was captured, in batches (or every 1 ms).
            if let Some(c) = sw.capture_mut() {
                let n = c.pending().records.len();
                if n >= PCAP_BATCH || (n > 0 && now >= next_pcap_send) {
                    let full = c.take(std::mem::take(&mut pcap_spare));
                    pcap_spare = w.send(full);
                    next_pcap_send = now + MS;
                }
            }
        }
        if now >= next_sample {
            let stalls = intervals.stalls(now);
            crate::timeseries::sample(&sw, now, Some(&stalls), &mut ts_batch);
            next_sample = next_sample.saturating_add(ts_interval).max(now);
        }
        if now >= next_publish {
            if let Some(w) = &ts_writer {
                if !ts_batch.is_empty() {
                    w.send(std::mem::replace(
                        &mut ts_batch,
                        crate::timeseries::Batch::with_capacity(4096),
                    ));
                }
            }
            // The baseline for the next stall's wait, and the run's total.
            thread_wait.since_last();
            if let Some(total) = thread_wait.total() {
                intervals.set_thread_waited(total);
            }
            // Plain copies only: the stats thread builds the JSON when asked.
            let acc = umem.accounting();
            let mut captured = capture(
                &sw,
                &shared_names,
                now,
                Some(&acc),
                Some(&intervals),
                &settings.guard,
            );
            captured.link_states = Some(links.clone());
            published.set_lazy(Arc::new(captured));
            next_publish = now + PUBLISH_EVERY;
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
                break;
            }
        }
        if now >= next_age {
            sw.age(now);
            next_age = now + AGE_EVERY;
        }
        if work == 0 && settings.poll == crate::poll::PollMode::Adaptive {
            // Backlogged but no tokens: sleep until just before the next
            // departure instead of spinning (see `poll`).
            let held = sw.held_packets() > 0 && pending.iter().all(|q| q.is_empty());
            if let Some(ns) = waiter.plan(now, sw.next_event(now), held) {
                let t = clock();
                crate::poll::sleep_ns(ns);
                waiter.record(ns, clock() - t);
                // The planned sleep is not a stall; waking late is.
                last_pass += ns;
                continue;
            }
        }
        if work == 0 {
            idle_passes += 1;
            // Nothing arrived and nothing left: if the switch holds nothing due
            // soon, give the CPU to the hosts' softirqs and iperf (2 vCPUs).
            let due_soon = sw.next_event(now).is_some_and(|t| t <= now + 20_000)
                || pending.iter().any(|q| !q.is_empty());
            if !due_soon && idle_passes > 64 {
                let t = clock();
                std::thread::yield_now();
                spent.yield_ns += clock() - t;
            }
        } else {
            idle_passes = 0;
        }
    }

    // Shutdown: give back every frame the switch holds, then wait for the
    // kernel to complete what is on the TX rings.
    let now = clock();
    sw.drain(&mut umem);
    for q in &mut pending {
        for pkt in q.drain(..) {
            crate::packet::FrameStore::release(&mut umem, pkt.frame);
        }
    }
    let pcap_summary = match pcap {
        Some(w) => {
            let last = sw
                .capture_mut()
                .map(|c| c.take(crate::capture::Batch::default()))
                .unwrap_or_default();
            let sum = w.finish(last).context("writing the capture files")?;
            eprint!("{}", sum.render());
            Some(sum)
        }
        None => None,
    };
    let t_end = Instant::now();
    loop {
        let mut in_flight = 0;
        for ss in &mut socks {
            for s in ss.iter_mut() {
                s.complete(&mut umem);
                if s.tx_pending() > 0 {
                    s.flush();
                }
            }
        }
        let acc = umem.accounting();
        in_flight += acc.in_tx;
        if in_flight == 0 || t_end.elapsed().as_millis() > 500 {
            break;
        }
        std::thread::yield_now();
    }
    // What the kernel did not take in 500 ms (a port that is down keeps its
    // tx ring full) is taken back: no kick follows, so it is never sent.
    let mut unsent = 0;
    for ss in &mut socks {
        for s in ss.iter_mut() {
            if s.tx_pending() > 0 {
                unsent += s.reclaim_unsent(&mut umem);
            }
        }
    }
    if let Some(w) = ts_writer {
        if !ts_batch.is_empty() {
            w.send(ts_batch);
        }
        w.finish().context("writing the time series")?;
    }
    let acc = umem.accounting();
    // Cross-check the frames lent for receiving against what the fill and
    // rx rings hold (a frame the kernel consumed from a fill ring and never
    // returned would show here), on every socket whose interface is still
    // there. The kernel may be mid-receive: read a few times.
    let live = || socks.iter().flatten().filter(|s| !s.is_abandoned());
    let lent: u32 = live().map(|s| s.rx_pending()).sum();
    let mut on_rings = 0;
    for _ in 0..20 {
        on_rings = live().map(|s| s.rx_frames_on_rings()).sum::<u32>();
        if on_rings == lent {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let copy_mode = socks
        .iter()
        .flatten()
        .all(|s| s.mode() == crate::xsk::BindMode::Copy);
    let mut snap = snapshot(
        &sw,
        &names,
        now,
        Some(&acc),
        Some(&intervals),
        &settings.guard,
    );
    set_link_states(&mut snap, &links);
    snap["umem"]["unsent_at_exit"] = json!(unsent);
    if let Some(m) = snap.get_mut("umem") {
        m["on_rings"] = json!(on_rings);
        // Only copy mode moves fill → rx in one step (see rx_frames_on_rings).
        m["rings_match"] = json!(!copy_mode || on_rings == lent);
    }
    if settings.poll == crate::poll::PollMode::Adaptive {
        snap["loop"]["poll"] = waiter.report();
    }
    if let Some(sum) = pcap_summary {
        snap["capture"] = json!(sum);
    }
    published.set(snap.to_string());
    drop(socks);
    drop(xdp);
    Ok(RunReport {
        snapshot: snap,
        accounting: acc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(args: &[&str]) -> Settings {
        let mut v = vec!["softswitch"];
        v.extend_from_slice(args);
        crate::config::resolve(&crate::cli::Cli::try_parse_from(v).unwrap().run).unwrap()
    }

    #[test]
    fn schedstat_is_read_run_then_wait() {
        use crate::cpu::parse_schedstat;
        assert_eq!(
            parse_schedstat("123456789 4242 17\n"),
            Some((123456789, 4242))
        );
        assert_eq!(parse_schedstat("123\n"), None);
        assert_eq!(parse_schedstat("x 5 1"), None);
        assert_eq!(parse_schedstat(""), None);
        // This thread's own file, where the kernel has one.
        let mut w = ThreadWait::open();
        if w.file.is_some() {
            assert!(w.start.is_some(), "unparsable /proc/thread-self/schedstat");
            std::thread::yield_now();
            let _ = w.since_last();
            assert!(w.total().is_some());
        }
    }

    #[test]
    fn pass_intervals_count_stalls() {
        let mut p = PassIntervals::default();
        let t = |kicks_ns, yield_ns, waited_ns| StallTime {
            kicks_ns,
            yield_ns,
            waited_ns,
        };
        for _ in 0..997 {
            p.record(2_000, true, t(1_000, 0, 0));
        }
        p.record(150_000, true, t(100_000, 0, 0));
        // The longest stall: 2.5 ms of its 3 ms inside tx kicks, 0.4 ms in a
        // yield, which the thread spent waiting for a CPU.
        p.record(3_000_000, true, t(2_500_000, 400_000, 400_000));
        // An idle switch that yielded its CPU for 5 ms delayed no frame.
        p.record(5_000_000, false, t(0, 5_000_000, 5_000_000));
        // Times larger than their interval (clock skew, a wait read over a
        // longer span) count as the interval, kicks first.
        p.record(120_000, true, t(100_000, 400_000, 1_000_000));
        let r = p.report();
        assert_eq!(r["passes"], 1001);
        assert_eq!(r["over_100us"], 4);
        assert_eq!(r["stalls"], 3);
        assert!(
            (r["stalled_ms"].as_f64().unwrap() - 3.27).abs() < 1e-9,
            "{r}"
        );
        let s = p.stalls(10 * SEC);
        assert_eq!((s.count, s.stalled_ns, s.max_ns), (3, 3_270_000, 3_000_000));
        assert_eq!(s.within, t(2_700_000, 420_000, 520_000));
        assert_eq!(s.max_within, t(2_500_000, 400_000, 400_000));
        assert_eq!(r["max_kick_us"], 2500.0);
        assert_eq!(r["max_stall_in_kicks_us"], 2500.0);
        assert_eq!(r["max_stall_in_yield_us"], 400.0);
        assert_eq!(r["thread_waited_ms"], serde_json::Value::Null);
        p.set_thread_waited(7_500_000);
        assert_eq!(p.report()["thread_waited_ms"], 7.5);
        assert!((r["p50_us"].as_f64().unwrap() - 2.0).abs() < 0.05, "{r}");
        assert!((r["max_us"].as_f64().unwrap() - 5000.0).abs() < 50.0, "{r}");
        assert!(r["p999_us"].as_f64().unwrap() >= 149.0, "{r}");
    }

    #[test]
    fn umem_is_sized_for_rings_buffers_and_wires() {
        let opts = ring_options();
        // 2 ports, one socket each, 96 KB buffers, no delay: 2·2048 + 2·1536 + 1024.
        let s = settings(&["--ports", "a,b"]);
        assert_eq!(frames_needed(&s, 2, &opts), 4096 + 3072 + 1024);
        // 9 ports: more than the 16384 default, so every fill ring can be full.
        let nine = ["p1,p2,p3,p4,p5,p6,p7,p8,p9"];
        let s = settings(&["--ports", nine[0]]);
        assert_eq!(frames_needed(&s, 9, &opts), 9 * 2048 + 9 * 1536 + 1024);
        // A 1 ms wire at 10 Gbit/s holds 1.25 MB: 19531 minimum-size frames.
        let s = settings(&["--ports", "a", "--rate", "10gbit", "--delay", "1ms"]);
        assert_eq!(frames_needed(&s, 1, &opts), 2048 + 1536 + 19_531 + 1024);
    }
}

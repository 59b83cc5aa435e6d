//! The loop: one thread busy-polls every port. Each pass reaps TX
//! completions, tops up fill rings, receives a batch and hands each frame to
//! [`Switch::ingress`], lets the switch move what its shapers and wires
//! release, puts those frames on the TX rings and kicks until the kernel has
//! taken them (measured: one kick sends ~32 frames in copy mode). RX rings
//! stay small and are drained every pass, so the queue forms in the switch's
//! own queues where the AQM sees it.
//!
//! [`DataPath`] is that loop's state: [`DataPath::pass`] moves frames,
//! [`DataPath::housekeeping`] runs the periodic chores, [`DataPath::idle`]
//! decides whether to spin, sleep or yield. The core gets core time from
//! the [`Clock`]; the fidelity guard's measurements ([`LoopWatch`]) and the
//! chores of the data path itself run on real time.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::clock::{Clock, Now};
use super::core::{Core, FabricCore};
use super::every::Every;
use super::ports::{set_link_states, umem_json, Ports};
use super::snapshot::Snapshot;
use super::watch::LoopWatch;
use crate::aqm::AqmKind;
use crate::capture::writer::{Summary, Writer as PcapWriter, WriterConfig};
use crate::capture::{Batch as PcapBatch, CaptureConfig};
use crate::config::Settings;
use crate::poll::{PollMode, Waiter};
use crate::portlock::{PortLocks, LOCK_DIR};
use crate::preflight::{self, IfaceInfo, LinkState, SysPaths};
use crate::stats::{Published, Render, StatsServer};
use crate::switch::Switch;
use crate::timeseries::{Batch as SeriesBatch, Writer as SeriesWriter};
use crate::units::{Nanos, MS, SEC};
use crate::xdp::XdpAttachment;
use crate::xsk::{FrameAccounting, DEFAULT_FRAME_SIZE};

/// How often the live counters are refreshed (real time).
const PUBLISH_EVERY: Nanos = 100 * MS;
/// How often aged MAC entries are removed (core time: entries age in it).
const AGE_EVERY: Nanos = SEC;
/// How often each port's interface is looked up (down, up again, gone; real
/// time). A tx kick that fails says so at once; this catches ports nothing
/// is sent to.
const LINK_CHECK_EVERY: Nanos = 250 * MS;
/// Captured frames handed to the pcap writer at once, or after
/// [`PCAP_EVERY`] of real time.
const PCAP_BATCH: usize = 1024;
const PCAP_EVERY: Nanos = MS;
/// Passes in a row that moved nothing before an idle loop yields its CPU.
const IDLE_PASSES_BEFORE_YIELD: u32 = 64;
/// An idle loop keeps spinning when the switch has something due within
/// this much real time.
const DUE_SOON_NS: Nanos = 20_000;

/// What the switch saw, at exit.
pub struct RunReport {
    /// The final counters (same shape as the live snapshot).
    pub snapshot: serde_json::Value,
    /// Where the UMEM's frames were after shutdown.
    pub accounting: FrameAccounting,
}

/// Runs the switch on real interfaces until `stop` is set or the duration ends.
pub fn run(settings: &Settings, stop: Arc<AtomicBool>) -> Result<RunReport> {
    match settings.fabric {
        None => run_loop(DataPath::<Switch<AqmKind>>::start(settings, stop)?),
        Some(_) => run_loop(DataPath::<FabricCore>::start(settings, stop)?),
    }
}

/// The loop over one core, until it stops; then shutdown.
fn run_loop<C: Core>(mut dp: DataPath<'_, C>) -> Result<RunReport> {
    loop {
        let pass = dp.pass();
        if dp.housekeeping(&pass).is_break() {
            break;
        }
        dp.idle(&pass);
    }
    dp.finish()
}

/// What one pass did.
pub struct Pass {
    /// When its transmit half ran (both times).
    now: Now,
    /// Frames received plus frames put on tx rings.
    work: usize,
    /// A tx kick reported a link down or gone.
    link_news: bool,
}

/// The periodic chores, each in the time it belongs to.
struct Chores {
    /// Publish the live counters (real time).
    publish: Every,
    /// Age the MAC table (core time).
    age: Every,
    /// Look up every port's link state (real time).
    links: Every,
    /// Sample the time series (core time).
    sample: Every,
    /// Hand a partial capture batch to the writer (real time).
    pcap: Every,
}

impl Chores {
    fn new(settings: &Settings) -> Self {
        Chores {
            publish: Every::after(0, PUBLISH_EVERY),
            age: Every::after(AGE_EVERY, AGE_EVERY),
            links: Every::after(LINK_CHECK_EVERY, LINK_CHECK_EVERY),
            sample: match &settings.timeseries {
                Some((_, interval)) => Every::on_grid(0, *interval),
                None => Every::never(),
            },
            pcap: Every::after(0, PCAP_EVERY),
        }
    }
}

/// The time series on its way to its file (`--timeseries`).
struct SeriesOut {
    writer: SeriesWriter,
    batch: SeriesBatch,
}

/// Capture batches on their way to the writer thread (`--pcap`).
struct PcapOut {
    writer: PcapWriter,
    /// An empty batch to swap in for the next full one (no allocation).
    spare: PcapBatch,
}

/// What the data path publishes: the switch's counters with its ports'
/// link states and the UMEM's accounting.
struct LiveSnapshot {
    counters: Snapshot,
    links: Vec<LinkState>,
    /// Each data-path port's kernel socket counters.
    kernel: Vec<crate::xsk::XskStatistics>,
    /// A fabric's interfaces, one per host port (the first ports).
    interfaces: Option<Vec<String>>,
    umem: FrameAccounting,
}

impl LiveSnapshot {
    fn to_json(&self) -> serde_json::Value {
        let mut v = self.counters.to_json();
        set_link_states(&mut v, &self.links);
        // What the kernel dropped before the switch saw it (never in the
        // switch's own counters: those frames never entered it).
        for (i, k) in self.kernel.iter().enumerate() {
            v["ports"][i]["kernel"] = json!({
                "rx_lost": k.rx_lost(),
                "rx_dropped": k.rx_dropped,
                "rx_ring_full": k.rx_ring_full,
                "rx_invalid_descs": k.rx_invalid_descs,
                "rx_fill_ring_empty": k.rx_fill_ring_empty_descs,
                "tx_invalid_descs": k.tx_invalid_descs,
            });
        }
        for (i, name) in self.interfaces.iter().flatten().enumerate() {
            v["ports"][i]["interface"] = json!(name);
        }
        v["umem"] = umem_json(&self.umem);
        v
    }
}

impl Render for LiveSnapshot {
    fn render(&self) -> String {
        self.to_json().to_string()
    }
}

/// The running data path (see the module header) over one switch or, with
/// `C` = [`FabricCore`], a fabric.
pub struct DataPath<'a, C: Core = Switch<AqmKind>> {
    settings: &'a Settings,
    stop: Arc<AtomicBool>,
    clock: Clock,
    sw: C,
    ports: Ports,
    watch: LoopWatch,
    chores: Chores,
    /// The ports' names in the counters (a fabric's: `leaf1:h1`, ...,
    /// `leaf1:spine2`, ...).
    names: Arc<[String]>,
    /// The interfaces (`--ports`).
    interfaces: Vec<String>,
    published: Published,
    series: Option<SeriesOut>,
    pcap: Option<PcapOut>,
    waiter: Waiter,
    /// Passes in a row that moved nothing.
    idle_passes: u32,
    /// Whether the data path is pinned to a CPU (`--cpu`).
    pinned: bool,
    xdp: XdpAttachment,
    stats: Option<StatsServer>,
    port_locks: PortLocks,
}

impl<'a, C: Core> DataPath<'a, C> {
    /// Checks the ports, takes their locks, builds the switch, binds the
    /// sockets, starts the outputs (stats socket, time series, capture) and
    /// pins the thread; time starts here.
    pub fn start(settings: &'a Settings, stop: Arc<AtomicBool>) -> Result<Self> {
        preflight::check_privileges()?;
        let names: Vec<String> = settings.ports.iter().map(|p| p.name.clone()).collect();
        let ifaces = preflight::check_ports(&names, settings.force, &SysPaths::default())?;
        // Before anything is attached: one switch per interface.
        let port_locks = PortLocks::acquire(Path::new(LOCK_DIR), &names)?;
        let mut sw = C::build(settings)?;
        let cpu = data_path_cpu(settings.cpu)?;
        eprint!("{}", settings.describe());
        check_mtus(&ifaces)?;
        // A busy-polling switch on a 2-vCPU machine competes with the hosts and
        // everything else: ask for a larger CPU share (a dedicated core is better).
        if let Err(e) = crate::xsk::set_nice(settings.nice) {
            eprintln!("softswitch: could not raise priority ({e}); expect jitter under load");
        }
        let (ports, xdp) = Ports::open(settings, &names, &ifaces, cpu)?;
        let published = Published::default();
        let stats = match StatsServer::start(&settings.stats_socket, published.clone()) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("softswitch: live stats off: {e}");
                None
            }
        };
        let counter_names = sw.port_names(&names);
        let series = open_series(settings, &counter_names)?;
        let pcap = open_pcap(settings, &mut sw, &counter_names)?;
        // Pin only now: the stats and time-series threads above stay free to
        // run on other CPUs.
        if let Some(c) = cpu {
            crate::cpu::pin_current_thread(c).with_context(|| {
                format!("pinning the data path to CPU {c} (leave out --cpu to not pin)")
            })?;
            eprintln!("softswitch: data path pinned to CPU {c}");
        }
        let clock = Clock::start(settings.dilation);
        if let Some(p) = &pcap {
            let epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            p.writer.set_epoch(epoch.as_nanos() as u64);
        }
        if settings.poll == PollMode::Adaptive {
            crate::poll::tighten_timer_slack();
        }
        let watch = LoopWatch::start(clock.real_ns());
        eprintln!(
            "softswitch: forwarding between {} (Ctrl-C to stop)",
            names.join(", ")
        );
        Ok(DataPath {
            settings,
            stop,
            clock,
            sw,
            ports,
            watch,
            chores: Chores::new(settings),
            names: Arc::from(counter_names.as_slice()),
            interfaces: names,
            published,
            series,
            pcap,
            waiter: Waiter::default(),
            idle_passes: 0,
            pinned: cpu.is_some(),
            xdp,
            stats,
            port_locks,
        })
    }

    /// One pass: receive on every port into the switch, let the switch move
    /// what is due, transmit what it hands out.
    pub fn pass(&mut self) -> Pass {
        let start = self.clock.now();
        let interval = self.watch.pass_starts(start.real_ns);
        let held = self.sw.held_packets() > 0 || self.ports.has_waiting();
        let received = self.ports.receive(&mut self.sw, start.core_ns);
        self.watch.record(interval, held || received > 0);
        let now = self.clock.now();
        self.ports.take_departures(&mut self.sw, now.core_ns);
        let sent = self
            .ports
            .transmit(&mut self.sw, &self.clock, &mut self.watch);
        Pass {
            now,
            work: received + sent.frames,
            link_news: sent.link_news,
        }
    }

    /// The chores that are due after `pass`; Break: stop (asked to, every
    /// port gone, or the run's duration is over).
    pub fn housekeeping(&mut self, pass: &Pass) -> ControlFlow<()> {
        let Now { real_ns, core_ns } = pass.now;
        if pass.link_news || self.chores.links.is_due(real_ns) {
            self.chores.links.done(real_ns);
            if self.ports.check_links() {
                eprintln!("softswitch: every port is gone; stopping");
                self.stop.store(true, Ordering::Relaxed);
                self.chores.publish.due_at(real_ns);
            }
        }
        self.hand_off_capture(real_ns);
        if self.chores.sample.tick(core_ns) {
            if let Some(s) = &mut self.series {
                let stalls = self.watch.intervals.stalls(real_ns);
                let d = self.clock.dilation();
                self.sw.sample(core_ns, d, Some(&stalls), &mut s.batch);
            }
        }
        if self.chores.publish.is_due(real_ns) {
            self.publish(pass.now);
            self.chores.publish.done(real_ns);
            let over = self.settings.duration_ns.is_some_and(|d| core_ns >= d);
            if self.stop.load(Ordering::Relaxed) || over {
                return ControlFlow::Break(());
            }
        }
        if self.chores.age.tick(core_ns) {
            self.sw.age(core_ns);
        }
        ControlFlow::Continue(())
    }

    /// After a pass that moved nothing: sleep until just before the next
    /// departure (`--poll adaptive`), yield the CPU when nothing is due soon,
    /// or spin on.
    pub fn idle(&mut self, pass: &Pass) {
        if pass.work > 0 {
            self.idle_passes = 0;
            return;
        }
        if self.settings.poll == PollMode::Adaptive && self.sleep_until_due(pass.now) {
            return;
        }
        self.idle_passes += 1;
        // Nothing arrived and nothing left: if the switch holds nothing due
        // soon, give the CPU to the hosts' softirqs and iperf (2 vCPUs).
        let now = pass.now;
        let due_soon = self
            .sw
            .next_event(now.core_ns)
            .is_some_and(|t| self.clock.real_when(now, t) <= now.real_ns + DUE_SOON_NS)
            || self.ports.has_waiting();
        // With a tx thread pinned away from a pinned data path, no host's
        // work waits for this CPU: keep it.
        let keep = self.settings.tx_thread && self.pinned;
        if !due_soon && !keep && self.idle_passes > IDLE_PASSES_BEFORE_YIELD {
            let t = self.clock.real_ns();
            std::thread::yield_now();
            self.watch.yielded(self.clock.real_ns() - t);
        }
    }

    /// Backlogged but no tokens: sleeps until just before the next
    /// departure instead of spinning (see [`crate::poll`]). Whether it slept.
    fn sleep_until_due(&mut self, now: Now) -> bool {
        let held = self.sw.held_packets() > 0 && !self.ports.has_waiting();
        let next = self
            .sw
            .next_event(now.core_ns)
            .map(|t| self.clock.real_when(now, t));
        let Some(ns) = self.waiter.plan(now.real_ns, next, held) else {
            return false;
        };
        let t = self.clock.real_ns();
        crate::poll::sleep_ns(ns);
        self.waiter.record(ns, self.clock.real_ns() - t);
        self.watch.slept(ns);
        true
    }

    /// Hands the capture writer what was captured, in batches (or every
    /// [`PCAP_EVERY`]).
    fn hand_off_capture(&mut self, real_ns: Nanos) {
        let Some(out) = self.pcap.as_mut() else {
            return;
        };
        let n = self.sw.captured();
        if n >= PCAP_BATCH || (n > 0 && self.chores.pcap.is_due(real_ns)) {
            let full = self.sw.take_capture(std::mem::take(&mut out.spare));
            out.spare = out.writer.send(full);
            self.chores.pcap.done(real_ns);
        }
    }

    /// Sends the time series' batch to its writer and publishes the live
    /// counters (plain copies only: the stats thread builds the JSON when
    /// asked).
    fn publish(&mut self, now: Now) {
        if let Some(s) = &mut self.series {
            if !s.batch.is_empty() {
                let full = std::mem::replace(&mut s.batch, SeriesBatch::with_capacity(4096));
                s.writer.send(full);
            }
        }
        self.watch.publish(self.clock.real_ns());
        let live = self.live_snapshot(now, self.ports.accounting());
        self.published.set_lazy(Arc::new(live));
    }

    fn live_snapshot(&self, now: Now, umem: FrameAccounting) -> LiveSnapshot {
        let counters = self
            .sw
            .snapshot(&self.names, now.core_ns, &self.settings.guard)
            .with_passes(&self.watch.intervals, now.real_ns)
            .with_tx_waits(self.ports.tx_waits())
            .dilated(self.clock.dilation());
        LiveSnapshot {
            counters,
            links: self.ports.links().to_vec(),
            kernel: self.ports.kernel_counters(),
            interfaces: self
                .settings
                .fabric
                .as_ref()
                .map(|_| self.interfaces.clone()),
            umem,
        }
    }

    /// Shutdown: gives back every frame the switch holds, closes the
    /// capture and the time series, waits for the kernel to complete what is
    /// on the TX rings, and reports.
    pub fn finish(mut self) -> Result<RunReport> {
        let now = self.clock.now();
        self.ports.release_held(&mut self.sw);
        let capture = finish_capture(self.pcap.take(), &mut self.sw)?;
        let unsent = self.ports.settle();
        if let Some(s) = self.series.take() {
            if !s.batch.is_empty() {
                s.writer.send(s.batch);
            }
            s.writer.finish().context("writing the time series")?;
        }
        let exit = self.ports.at_exit(unsent);
        let mut snap = self.live_snapshot(now, exit.accounting).to_json();
        snap["umem"]["unsent_at_exit"] = json!(exit.unsent);
        snap["umem"]["on_rings"] = json!(exit.on_rings);
        snap["umem"]["rings_match"] = json!(exit.rings_match);
        if self.settings.poll == PollMode::Adaptive {
            snap["loop"]["poll"] = self.waiter.report();
        }
        // Real time: what the kernel's tx kicks cost the loop.
        let k = self.ports.kick_cost();
        snap["loop"]["tx_kicks"] = json!({
            "sendtos": k.sendtos,
            "max_sendto_us": k.max_sendto_ns as f64 / 1e3,
            "frames_in_max_sendto": k.frames_in_max_sendto,
            "max_frames_per_sendto": k.max_frames_per_sendto,
            "max_sendtos_per_flush": k.max_sendtos_per_flush,
        });
        if let Some(sum) = capture {
            snap["capture"] = json!(sum);
        }
        self.published.set(snap.to_string());
        // The sockets go before the XDP program; the stats socket and the
        // port locks last.
        let DataPath {
            ports,
            xdp,
            stats,
            port_locks,
            ..
        } = self;
        drop(ports);
        drop(xdp);
        drop(stats);
        drop(port_locks);
        Ok(RunReport {
            snapshot: snap,
            accounting: exit.accounting,
        })
    }
}

/// Frames larger than a UMEM frame can never be received whole.
fn check_mtus(ifaces: &[IfaceInfo]) -> Result<()> {
    for i in ifaces {
        if i.mtu + 18 > DEFAULT_FRAME_SIZE {
            bail!(
                "interface {} has MTU {}; softswitch handles frames up to {} bytes: lower its MTU",
                i.name,
                i.mtu,
                DEFAULT_FRAME_SIZE - 18
            );
        }
    }
    Ok(())
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

/// The time-series file and its writer thread (`--timeseries`), its ports
/// named `names`.
fn open_series(settings: &Settings, names: &[String]) -> Result<Option<SeriesOut>> {
    let Some((path, _)) = &settings.timeseries else {
        return Ok(None);
    };
    let writer = SeriesWriter::create(path, settings.dilation, names.to_vec())
        .with_context(|| format!("creating {}", path.display()))?;
    Ok(Some(SeriesOut {
        writer,
        batch: SeriesBatch::with_capacity(4096),
    }))
}

/// Capture on in the switch, and its writer thread (`--pcap`).
fn open_pcap<C: Core>(
    settings: &Settings,
    sw: &mut C,
    names: &[String],
) -> Result<Option<PcapOut>> {
    let Some(p) = &settings.pcap else {
        return Ok(None);
    };
    sw.enable_capture(CaptureConfig {
        snaplen: p.snaplen,
        ports: p.ports.clone(),
    });
    let writer = PcapWriter::start(WriterConfig {
        dir: p.dir.clone(),
        names: names.to_vec(),
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
    Ok(Some(PcapOut {
        writer,
        spare: PcapBatch::default(),
    }))
}

/// Closes the capture: the last records to the writer, the files finished.
fn finish_capture<C: Core>(pcap: Option<PcapOut>, sw: &mut C) -> Result<Option<Summary>> {
    let Some(out) = pcap else {
        return Ok(None);
    };
    let last = sw.take_capture(PcapBatch::default());
    let sum = out
        .writer
        .finish(last)
        .context("writing the capture files")?;
    eprint!("{}", sum.render());
    Ok(Some(sum))
}

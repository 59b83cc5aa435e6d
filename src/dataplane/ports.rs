//! The switch's ports as the machine has them: per port, one AF_XDP socket
//! per RX queue, all on one UMEM; receiving into the switch, transmitting
//! what it hands out (kicking the kernel until it has taken the frames),
//! watching each interface's link state, and giving every frame back at
//! shutdown.
//!
//! All frames live in one UMEM shared by every socket, so forwarding is a
//! descriptor move, not a copy. Frame accounting is checked at exit: every
//! frame must be back on the free list or lent to the kernel's fill rings.

use std::collections::VecDeque;

use anyhow::{Context, Result};
use serde_json::json;

use super::clock::Clock;
use super::core::Core;
use super::txthread::TxThread;
use super::watch::LoopWatch;
use crate::config::Settings;
use crate::fidelity::TxWaits;
use crate::packet::{FrameStore, Packet};
use crate::preflight::{self, IfaceInfo, LinkState, SysPaths};
use crate::units::Nanos;
use crate::xdp::XdpAttachment;
use crate::xsk::{BindMode, FrameAccounting, Umem, XskOptions, XskSocket, DEFAULT_FRAME_SIZE};

/// Frames received per socket per pass.
const RX_BATCH: usize = 64;

/// How long shutdown waits for the kernel to send what is on the tx rings.
const SETTLE_MS: u128 = 500;

/// Ring sizes: RX small (frames waiting there are queued where no AQM sees
/// them) but large enough not to overflow while the loop is briefly away.
fn ring_options() -> XskOptions {
    XskOptions {
        rx_size: 1024,
        fill_size: crate::config::FILL_RING_FRAMES,
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
    // A fabric's links are egress ports too (one UMEM holds every frame).
    let egress: Box<dyn Iterator<Item = &crate::config::PortSettings>> = match &settings.fabric {
        Some(f) => Box::new(f.all_ports()),
        None => Box::new(settings.ports.iter()),
    };
    let ports: u64 = egress
        .map(|p| {
            let buffer = (p.port.buffer_bytes / 64).min(8192);
            let wire = (p.port.rate.bytes_in(p.delay_ns) / 64).min(65_536);
            buffer + wire
        })
        .sum();
    // R-AQM's VIQs hold ACK frames too (every port's, a fabric's links too).
    let viqs = match &settings.fabric {
        Some(f) => f.local_raqm().map(|r| r.viq_limit_pkts as u64).sum(),
        None => settings
            .raqm
            .as_ref()
            .map_or(0, |r| r.viq_limit_pkts as u64 * settings.ports.len() as u64),
    };
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

/// The UMEM's frame count: what the configuration can hold, or `--frames`
/// (with a warning when that is less).
fn umem_frames(settings: &Settings, sockets: u32, opts: &XskOptions) -> u32 {
    let needed = frames_needed(settings, sockets, opts);
    match settings.frames {
        Some(f) if f < needed => {
            eprintln!(
                "softswitch: warning: --frames {f} is below the {needed} this configuration can hold \
                 (rings + buffers + wires); expect no_frame drops and empty fill rings"
            );
            f
        }
        Some(f) => f,
        None => needed.max(crate::xsk::DEFAULT_FRAMES),
    }
}

/// What one pass's transmit did.
pub(super) struct Sent {
    /// Frames put on tx rings.
    pub frames: usize,
    /// A kick said an interface is down or gone: check the links now.
    pub link_news: bool,
}

/// Where the frames were at exit (see [`Ports::settle`]).
pub(super) struct AtExit {
    /// The UMEM's accounting.
    pub accounting: FrameAccounting,
    /// Frames taken back from tx rings the kernel did not drain.
    pub unsent: u32,
    /// Frames on the fill and rx rings of the sockets still there.
    pub on_rings: u32,
    /// Whether that matches the frames lent for receiving (copy mode only
    /// moves fill → rx in one step, so zero-copy always matches).
    pub rings_match: bool,
}

/// The ports (see the module header).
pub(super) struct Ports {
    /// `--tx-thread`: kicks the tx rings. Declared first so that it stops
    /// (on drop) before any socket closes.
    tx_thread: Option<TxThread>,
    /// Per port, with a tx thread: the batches published and not yet seen
    /// taken, as (producer index after the batch, real time published).
    tx_published: Vec<VecDeque<(u32, Nanos)>>,
    /// With a tx thread: how long the batches waited.
    tx_waits: TxWaits,
    names: Vec<String>,
    ifindexes: Vec<u32>,
    sys: SysPaths,
    umem: Umem,
    /// Per port, its sockets (one per RX queue); tx uses the first.
    socks: Vec<Vec<XskSocket>>,
    /// Per port, packets the switch handed out that wait for a tx ring slot.
    waiting: Vec<VecDeque<Packet>>,
    /// Per port, its interface's state as last seen.
    links: Vec<LinkState>,
    rx_batch: [(u64, u32); RX_BATCH],
}

impl Ports {
    /// Creates the UMEM, attaches the XDP program to every interface and
    /// binds a socket to each of their RX queues.
    pub(super) fn open(
        settings: &Settings,
        names: &[String],
        ifaces: &[IfaceInfo],
        data_path_cpu: Option<u32>,
    ) -> Result<(Ports, XdpAttachment)> {
        let names = names.to_vec();
        let opts = ring_options();
        let sockets: u32 = names.iter().map(|n| rx_queues(n)).sum();
        let frames = umem_frames(settings, sockets, &opts);
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
        let tx_thread = if settings.tx_thread {
            let kickers = socks.iter().map(|v| v[0].tx_kicker()).collect();
            Some(TxThread::start(kickers, data_path_cpu)?)
        } else {
            None
        };
        let ports = Ports {
            tx_thread,
            tx_published: (0..names.len()).map(|_| VecDeque::new()).collect(),
            tx_waits: TxWaits::default(),
            ifindexes: ifaces.iter().map(|i| i.ifindex).collect(),
            sys: SysPaths::default(),
            umem,
            socks,
            waiting: (0..names.len())
                .map(|_| VecDeque::with_capacity(4096))
                .collect(),
            links: vec![LinkState::Up; names.len()],
            rx_batch: [(0, 0); RX_BATCH],
            names,
        };
        Ok((ports, xdp))
    }

    /// Every live socket: completions reaped, fill ring topped up, a batch
    /// received and handed to the switch at core time `now`. Returns the
    /// frames received.
    pub(super) fn receive<C: Core>(&mut self, sw: &mut C, now: Nanos) -> usize {
        let mut received = 0;
        for (port, ss) in self.socks.iter_mut().enumerate() {
            for s in ss.iter_mut().filter(|s| !s.is_abandoned()) {
                s.complete(&mut self.umem);
                s.refill(&mut self.umem);
                let n = s.recv(&mut self.umem, &mut self.rx_batch);
                received += n;
                for &(frame, len) in &self.rx_batch[..n] {
                    sw.ingress(port as u16, frame, len, now, &mut self.umem);
                }
            }
        }
        received
    }

    /// What every socket's tx kicks cost so far, as one.
    pub(super) fn kick_cost(&self) -> crate::xsk::KickCost {
        let mut c = self
            .tx_thread
            .as_ref()
            .map(TxThread::cost)
            .unwrap_or_default();
        for s in self.socks.iter().flatten() {
            c.merge(&s.kick_cost());
        }
        c
    }

    /// Whether packets wait for a tx ring slot.
    pub(super) fn has_waiting(&self) -> bool {
        self.waiting.iter().any(|q| !q.is_empty())
    }

    /// Lets the switch move what is due at core time `now`, and takes what
    /// it hands out.
    pub(super) fn take_departures<C: Core>(&mut self, sw: &mut C, now: Nanos) {
        let waiting = &mut self.waiting;
        sw.poll(now, &mut self.umem, |port, pkt| {
            waiting[port as usize].push_back(pkt)
        });
    }

    /// Puts what waits on the tx rings and kicks the kernel (the kick's time
    /// goes to `watch`); a port whose link is down drops what it would send
    /// (counted in the switch's `link_down_drops`).
    pub(super) fn transmit<C: Core>(
        &mut self,
        sw: &mut C,
        clock: &Clock,
        watch: &mut LoopWatch,
    ) -> Sent {
        let mut sent = Sent {
            frames: 0,
            link_news: false,
        };
        for (port, q) in self.waiting.iter_mut().enumerate() {
            if self.links[port] != LinkState::Up {
                if !q.is_empty() {
                    sw.count_link_down(port as u16, q.len() as u64);
                    for pkt in q.drain(..) {
                        self.umem.release(pkt.frame);
                    }
                }
                continue;
            }
            let s = &mut self.socks[port][0];
            while let Some(pkt) = q.front() {
                match s.send(&mut self.umem, pkt.frame, pkt.len) {
                    Ok(()) => {
                        q.pop_front();
                        sent.frames += 1;
                    }
                    Err(_) => break,
                }
            }
            let error = if let Some(t) = &self.tx_thread {
                // The tx thread kicks; the data path publishes and times
                // each batch until the kernel has taken it.
                let (before, _) = s.tx_indices();
                s.publish();
                let (produced, consumed) = s.tx_indices();
                let waiting = &mut self.tx_published[port];
                if produced != before || !waiting.is_empty() {
                    let now = clock.real_ns();
                    // Taken: the consumer index is at or past the batch's end.
                    while let Some(&(end, at)) = waiting.front() {
                        if consumed.wrapping_sub(end) as i32 >= 0 {
                            self.tx_waits.note(at, now);
                            waiting.pop_front();
                        } else {
                            break;
                        }
                    }
                    if produced != before {
                        waiting.push_back((produced, now));
                        t.wake();
                    }
                }
                t.take_error(port)
            } else if s.tx_pending() > 0 {
                let t0 = clock.real_ns();
                s.flush();
                watch.kicked(clock.real_ns() - t0);
                s.take_link_error()
            } else {
                None
            };
            use nix::errno::Errno;
            if let Some(Errno::ENETDOWN | Errno::ENXIO | Errno::ENODEV) = error {
                sent.link_news = true;
            }
        }
        sent
    }

    /// Looks up every port's interface and says what changed (down, up
    /// again, gone: a gone port's sockets are abandoned). Returns whether
    /// every port is gone.
    pub(super) fn check_links(&mut self) -> bool {
        for port in 0..self.names.len() {
            let name = &self.names[port];
            let state = preflight::link_state(name, self.ifindexes[port], &self.sys);
            if state == self.links[port] || self.links[port] == LinkState::Gone {
                continue;
            }
            self.links[port] = state;
            match state {
                LinkState::Up => eprintln!(
                    "softswitch: port {port} ({name}) is up again; forwarding to it resumes"
                ),
                LinkState::Down => eprintln!(
                    "softswitch: port {port} ({name}) is down; frames for it are dropped \
                     (counted as link_down_drops) until it is up again"
                ),
                LinkState::Gone => {
                    if let Some(t) = &self.tx_thread {
                        t.forget(port);
                    }
                    let mut stranded = 0;
                    for s in self.socks[port].iter_mut() {
                        stranded += s.abandon(&mut self.umem);
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
        self.links.iter().all(|l| *l == LinkState::Gone)
    }

    /// Each port's kernel socket counters (`XDP_STATISTICS`), summed over
    /// its sockets: the frames the kernel dropped before the switch saw
    /// them. A socket whose counters cannot be read adds nothing.
    pub(super) fn kernel_counters(&self) -> Vec<crate::xsk::XskStatistics> {
        self.socks
            .iter()
            .map(|ss| {
                let mut sum = crate::xsk::XskStatistics::default();
                for s in ss {
                    if let Ok(k) = s.statistics() {
                        sum.merge(&k);
                    }
                }
                sum
            })
            .collect()
    }

    /// With `--tx-thread`, how long the tx rings held frames the kernel had
    /// not taken.
    pub(super) fn tx_waits(&self) -> Option<TxWaits> {
        self.tx_thread.as_ref().map(|_| self.tx_waits)
    }

    /// Each port's interface state as last seen.
    pub(super) fn links(&self) -> &[LinkState] {
        &self.links
    }

    /// Where the UMEM's frames are now.
    pub(super) fn accounting(&self) -> FrameAccounting {
        self.umem.accounting()
    }

    /// Shutdown, first step: every frame the switch holds, and every packet
    /// waiting for a tx slot, goes back to the UMEM.
    pub(super) fn release_held<C: Core>(&mut self, sw: &mut C) {
        sw.drain(&mut self.umem);
        for q in &mut self.waiting {
            for pkt in q.drain(..) {
                self.umem.release(pkt.frame);
            }
        }
    }

    /// Shutdown, second step: waits (at most [`SETTLE_MS`]) for the kernel
    /// to complete what is on the tx rings, then takes back what it did not
    /// take (a port that is down keeps its tx ring full): no kick follows,
    /// so it is never sent. Returns those frames.
    pub(super) fn settle(&mut self) -> u32 {
        // From here the data path kicks (and reclaims) on its own.
        if let Some(t) = &mut self.tx_thread {
            t.stop();
        }
        let t_end = std::time::Instant::now();
        loop {
            for s in self.socks.iter_mut().flatten() {
                s.complete(&mut self.umem);
                if s.tx_pending() > 0 {
                    s.flush();
                }
            }
            if self.umem.accounting().in_tx == 0 || t_end.elapsed().as_millis() > SETTLE_MS {
                break;
            }
            std::thread::yield_now();
        }
        let mut unsent = 0;
        for s in self.socks.iter_mut().flatten() {
            if s.tx_pending() > 0 {
                unsent += s.reclaim_unsent(&mut self.umem);
            }
        }
        unsent
    }

    /// Shutdown, last step: the accounting, cross-checked against the
    /// frames on the fill and rx rings of every socket whose interface is
    /// still there (a frame the kernel consumed from a fill ring and never
    /// returned would show). The kernel may be mid-receive: read a few times.
    pub(super) fn at_exit(&self, unsent: u32) -> AtExit {
        let accounting = self.umem.accounting();
        let live = || self.socks.iter().flatten().filter(|s| !s.is_abandoned());
        let lent: u32 = live().map(|s| s.rx_pending()).sum();
        let mut on_rings = 0;
        for _ in 0..20 {
            on_rings = live().map(|s| s.rx_frames_on_rings()).sum::<u32>();
            if on_rings == lent {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let copy_mode = self
            .socks
            .iter()
            .flatten()
            .all(|s| s.mode() == BindMode::Copy);
        AtExit {
            accounting,
            unsent,
            on_rings,
            rings_match: !copy_mode || on_rings == lent,
        }
    }
}

/// Adds each port's `link_state` (up, down, gone) to a snapshot.
pub(super) fn set_link_states(snap: &mut serde_json::Value, links: &[LinkState]) {
    for (i, l) in links.iter().enumerate() {
        snap["ports"][i]["link_state"] = json!(l.name());
    }
}

/// The UMEM's accounting as the snapshot's `umem` section.
pub(super) fn umem_json(a: &FrameAccounting) -> serde_json::Value {
    json!({
        "frames": a.frames, "free": a.free, "in_fill": a.in_fill,
        "held_by_app": a.held_by_app, "in_tx": a.in_tx, "balanced": a.is_balanced(),
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

//! Host-link emulation on ingress (`--ingress-rate`): frames a host sends
//! reach the switch no faster than that host's NIC could have put them on a
//! wire.
//!
//! On the papers' testbeds (TCN paper §6, ECN♯ paper §5) every host sits
//! behind a NIC of the port's rate, so a burst the host's stack hands its
//! driver arrives at the switch spread out at line rate, one frame every
//! `(len + overhead) × 8 / rate`. A veth has no wire: the frames of a GSO
//! burst or a window opened by an ACK arrive within microseconds, and the
//! egress queue sees a burst a real switch would not (the open explanation
//! for ECN♯'s residual standing queue). This module restores the
//! serialisation: a store-and-forward FIFO per ingress port that releases
//! frame *i* at
//!
//! ```text
//! release_i = max(now_i, release_{i-1}) + (len_i + overhead) × 8 / rate
//! ```
//!
//! where `now_i` is when the data path received it. The switch processes a
//! frame (bridge, classification, enqueue) only at its release, so every
//! AQM sees the arrival process of a real link.
//!
//! What it cannot emulate: the host's own backpressure. A real NIC frees a
//! host's socket buffer only when a frame has left (TCP Small Queues then
//! holds the sender back); a veth frees it at once. So the FIFO can hold more
//! than a NIC's ring would; it is bounded at `limit_pkts` frames (default
//! 1000, a Linux interface's `txqueuelen`, where a host's qdisc would start
//! dropping) and frames beyond it are counted drops (`ingress_full`).
//!
//! Off by default: neither prototype has it (they sit behind real NICs).

use std::collections::VecDeque;

use serde::Serialize;

use crate::packet::FrameId;
use crate::units::{Nanos, Rate};

/// Default frame limit of the emulated host link's queue: Linux's default
/// `txqueuelen`.
pub const DEFAULT_LIMIT_PKTS: u32 = 1000;

/// What `--ingress-rate` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressRate {
    /// No emulation (default): frames are processed when received.
    Off,
    /// Each port's own `--rate` (a testbed's symmetric links).
    Line,
    /// This rate on every port.
    Rate(Rate),
}

impl IngressRate {
    /// Reads `off`, `line` or a rate (`1gbit`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "none" | "0" => Ok(IngressRate::Off),
            "line" => Ok(IngressRate::Line),
            other => crate::units::parse_rate(other)
                .map(|r| {
                    if r.bps() == 0 {
                        IngressRate::Off
                    } else {
                        IngressRate::Rate(r)
                    }
                })
                .map_err(|e| {
                    format!("--ingress-rate {s:?}: {e}; or use off (default) or line (each port's --rate)")
                }),
        }
    }
    /// The host link's rate on a port whose egress rate is `port_rate`
    /// (None: no emulation; `line` on an unshaped port has no rate).
    pub fn for_port(self, port_rate: Rate) -> Option<Rate> {
        match self {
            IngressRate::Off => None,
            IngressRate::Line => (port_rate.bps() > 0).then_some(port_rate),
            IngressRate::Rate(r) => Some(r),
        }
    }
}

/// Counters of one port's emulated host link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IngressCounters {
    /// Frames released into the switch.
    pub released: u64,
    /// Frames dropped because the queue held `limit_pkts` frames.
    pub dropped_full: u64,
    /// Frames that had to wait for the wire (arrived while it was busy).
    pub delayed: u64,
    /// Largest number of frames waiting.
    pub max_backlog_pkts: u32,
    /// Sum of the time frames waited beyond their own serialisation, ns.
    pub waited_ns: u64,
}

/// One port's emulated host link: a FIFO released at the link's rate.
#[derive(Debug)]
pub struct IngressLink {
    rate: Rate,
    overhead: u32,
    limit_pkts: u32,
    /// When the wire finishes the last frame accepted.
    busy_until: Nanos,
    fifo: VecDeque<(Nanos, FrameId, u32)>,
    counters: IngressCounters,
}

impl IngressLink {
    /// A link of `rate` (not 0) charging `overhead` bytes per frame, holding
    /// at most `limit_pkts` frames.
    pub fn new(rate: Rate, overhead: u32, limit_pkts: u32) -> Self {
        IngressLink {
            rate,
            overhead,
            limit_pkts: limit_pkts.max(1),
            busy_until: 0,
            fifo: VecDeque::with_capacity(limit_pkts.clamp(1, 4096) as usize),
            counters: IngressCounters::default(),
        }
    }

    /// A frame of `len` bytes was received at `now`. Returns it back when
    /// the queue is full (the caller drops and counts it).
    pub fn offer(&mut self, frame: FrameId, len: u32, now: Nanos) -> Result<(), FrameId> {
        if self.fifo.len() >= self.limit_pkts as usize {
            self.counters.dropped_full += 1;
            return Err(frame);
        }
        let start = if self.busy_until > now {
            self.counters.delayed += 1;
            self.counters.waited_ns += self.busy_until - now;
            self.busy_until
        } else {
            now
        };
        self.busy_until = start + self.rate.tx_time_ns(len as u64 + self.overhead as u64);
        self.fifo.push_back((self.busy_until, frame, len));
        self.counters.max_backlog_pkts = self.counters.max_backlog_pkts.max(self.fifo.len() as u32);
        Ok(())
    }

    /// The next frame whose serialisation has ended by `now`.
    pub fn pop_ready(&mut self, now: Nanos) -> Option<(FrameId, u32)> {
        match self.fifo.front() {
            Some(&(t, _, _)) if t <= now => {
                self.counters.released += 1;
                self.fifo.pop_front().map(|(_, f, l)| (f, l))
            }
            _ => None,
        }
    }

    /// When the next frame is due, if any.
    pub fn next_release(&self) -> Option<Nanos> {
        self.fifo.front().map(|&(t, _, _)| t)
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// No frame waiting.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// The link's rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The counters.
    pub fn counters(&self) -> &IngressCounters {
        &self.counters
    }

    /// Removes every waiting frame (shutdown, to return them).
    pub fn drain(&mut self) -> impl Iterator<Item = FrameId> + '_ {
        self.fifo.drain(..).map(|(_, f, _)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::US;

    #[test]
    fn the_option_reads_off_line_and_rates() {
        assert_eq!(IngressRate::parse("off"), Ok(IngressRate::Off));
        assert_eq!(IngressRate::parse("LINE"), Ok(IngressRate::Line));
        assert_eq!(
            IngressRate::parse("1gbit"),
            Ok(IngressRate::Rate(Rate::gbit(1)))
        );
        let e = IngressRate::parse("fast").unwrap_err();
        assert!(e.contains("--ingress-rate") && e.contains("line"), "{e}");
        assert_eq!(
            IngressRate::Line.for_port(Rate::mbit(500)),
            Some(Rate::mbit(500))
        );
        assert_eq!(IngressRate::Line.for_port(Rate::from_bps(0)), None);
        assert_eq!(IngressRate::Off.for_port(Rate::mbit(500)), None);
        assert_eq!(
            IngressRate::Rate(Rate::gbit(1)).for_port(Rate::mbit(500)),
            Some(Rate::gbit(1))
        );
    }

    #[test]
    fn frames_leave_one_serialisation_apart_at_line_rate() {
        // 1 Gbit/s, 24 B overhead: a 1514 B frame takes 12.304 µs on the wire.
        let mut l = IngressLink::new(Rate::gbit(1), 24, 1000);
        // A burst of 3 full frames received at once at t = 0.
        for f in 0..3 {
            l.offer(f, 1514, 0).unwrap();
        }
        assert_eq!(l.next_release(), Some(12_304));
        assert_eq!(l.pop_ready(12_303), None, "not before its last bit");
        assert_eq!(l.pop_ready(12_304), Some((0, 1514)));
        assert_eq!(l.pop_ready(24_607), None);
        assert_eq!(l.pop_ready(24_608), Some((1, 1514)));
        assert_eq!(l.pop_ready(40 * US), Some((2, 1514)));
        assert!(l.is_empty());
        let c = l.counters();
        assert_eq!((c.released, c.delayed, c.max_backlog_pkts), (3, 2, 3));
        // Frame 1 waited for frame 0 (12.304 µs), frame 2 for both.
        assert_eq!(c.waited_ns, 12_304 + 24_608);
    }

    #[test]
    fn an_idle_link_only_adds_the_frames_own_serialisation() {
        let mut l = IngressLink::new(Rate::mbit(500), 24, 1000);
        l.offer(7, 64, 1_000_000).unwrap();
        // (64 + 24) × 8 / 500 Mbit/s = 1.408 µs.
        assert_eq!(l.next_release(), Some(1_001_408));
        assert_eq!(l.pop_ready(2_000_000), Some((7, 64)));
        // Long after: the wire is idle again, no wait.
        l.offer(8, 1514, 5_000_000).unwrap();
        assert_eq!(l.next_release(), Some(5_000_000 + 24_608));
        assert_eq!(l.counters().delayed, 0);
    }

    #[test]
    fn a_full_queue_hands_the_frame_back_and_counts_it() {
        let mut l = IngressLink::new(Rate::mbit(100), 24, 2);
        l.offer(1, 1514, 0).unwrap();
        l.offer(2, 1514, 0).unwrap();
        assert_eq!(l.offer(3, 1514, 0), Err(3));
        assert_eq!(l.counters().dropped_full, 1);
        assert_eq!(l.drain().collect::<Vec<_>>(), vec![1, 2]);
        assert!(l.is_empty());
    }

    #[test]
    fn release_rate_never_exceeds_the_link() {
        // Arbitrary arrivals: releases are in order and spaced by at least
        // each frame's serialisation time.
        let mut l = IngressLink::new(Rate::mbit(300), 24, 10_000);
        let mut t = 0;
        let mut x: u64 = 0x9e37_79b9;
        for f in 0..2000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t += x % 20_000;
            let len = 64 + (x % 1451) as u32;
            l.offer(f, len, t).unwrap();
        }
        let mut last: Option<Nanos> = None;
        let mut expect = 0;
        while let Some(r) = l.next_release() {
            let (f, len) = l.pop_ready(r).unwrap();
            assert_eq!(f, expect, "FIFO order");
            expect += 1;
            if let Some(p) = last {
                assert!(r - p >= Rate::mbit(300).tx_time_ns(len as u64 + 24));
            }
            last = Some(r);
        }
        assert_eq!(expect, 2000);
    }
}

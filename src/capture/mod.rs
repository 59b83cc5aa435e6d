//! Capture: what the switch saw, per port and direction, as pcapng files
//! Wireshark opens (`--pcap DIR`). tcpdump on a switch-side veth sees
//! nothing once XDP owns it (AF_XDP takes the frames before the stack's taps), so the switch records frames itself.
//!
//! ```text
//! DIR/<port>-rx.pcapng  every frame received on <port>, at the switch's
//!                       receive time, commented with its fate on each egress
//!                       port it went to:
//!                         "ss-h2-sw q0: enqueued"
//!                         "ss-h2-sw q0: enqueued, marked CE (threshold)"
//!                         "ss-h2-sw q0: dropped: buffer_full"
//!                         "flooded: ss-h2-sw q0: enqueued; ss-h3-sw q0: dropped: buffer_full"
//!                         "dropped: malformed" / "filtered: destination on the ingress port"
//! DIR/<port>-tx.pcapng  every frame sent out of <port>, at the time it left
//!                       the delay line (bytes as sent: a CE mark shows):
//!                         "q0 sojourn 12.3us"  /  "q0 sojourn 80.1us, marked CE (sojourn)"
//!                       and the frames the dequeue AQM dropped, at their
//!                       dequeue time: "dropped at dequeue: not_ect_mark (q0 sojourn 1.2ms)"
//! ```
//!
//! This module is the core's half and does no I/O: the [`Switch`] records
//! into a [`Batch`] what it received and sent and what its egress ports said
//! they did with each packet (`enqueue` returns an
//! [`Admission`], `dequeue_with` a [`Departure`] and shows its drops): frame
//! bytes cut to the snap length, one flat buffer; fates as small enums,
//! formatted as text only by the writer thread. The data path hands full batches to
//! [`writer::Writer`], which writes the files on its own thread. Off, the
//! packet path pays one branch on an `Option` per hook.
//!
//! In a fabric (`--topology`) every switch has its own [`Capture`], built
//! with [`Capture::renumbered`] so that its records and fates carry the
//! fabric-wide port numbers; the data path appends the switches' batches
//! ([`Batch::append`]) and the files are named by the fabric's port names
//! (`leaf1:spine2-tx.pcapng`).
//!
//! Timestamps are the switch's own clock (the `now` the packet path ran
//! with, ns since start) plus the wall-clock time at start, so files of
//! different ports line up with each other and with the time series. Under
//! time dilation (`--dilation D`) that clock is the emulated one: a
//! timestamp is the wall-clock start plus the emulated time since, so
//! inter-arrival times, sojourns and RTTs read in Wireshark are emulated
//! (the real gap between two frames is D times the one shown), and only
//! the first frame's timestamp is close to the wall clock.
//!
//! [`Switch`]: crate::switch::Switch

pub mod pcapng;
#[cfg(test)]
mod switch_tests;
pub mod writer;

use crate::aqm::{DropReason, MarkReason};
use crate::packet::Packet;
use crate::port::{Admission, Departure};
use crate::units::Nanos;

/// Default snap length: any Ethernet + IPv4/IPv6 + TCP header with options fits.
pub const DEFAULT_SNAPLEN: u32 = 256;
/// Default bound of one capture file, MB (10^6 bytes).
pub const DEFAULT_MAX_MB: u64 = 100;
/// Records a batch holds before further ones are counted as lost (bounds
/// the memory of a batch nobody collects).
pub const MAX_BATCH_RECORDS: usize = 1 << 16;

/// Direction of a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Frames received on the port.
    Rx = 0,
    /// Frames sent out of the port (and dequeue drops).
    Tx = 1,
}

impl Dir {
    /// `rx` / `tx`.
    pub fn name(self) -> &'static str {
        match self {
            Dir::Rx => "rx",
            Dir::Tx => "tx",
        }
    }
}

/// What happened to a frame (one per egress port for a flooded frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Admitted into egress port `port`'s queue `queue`; `mark`: the
    /// enqueue AQM's mark verdict, `ce`: the frame carries CE after it.
    Enqueued {
        /// Egress port.
        port: u16,
        /// Queue.
        queue: u16,
        /// Mark verdict at enqueue, if any.
        mark: Option<MarkReason>,
        /// Frame carries CE after the verdict.
        ce: bool,
    },
    /// Dropped at egress port `port`'s enqueue (buffer, queue limit, AQM).
    Dropped {
        /// Egress port.
        port: u16,
        /// Queue.
        queue: u16,
        /// Why.
        reason: DropReason,
    },
    /// Dropped before any egress port (malformed, no frame to flood into).
    IngressDrop(DropReason),
    /// Not forwarded: the destination is on the ingress port.
    Filtered,
    /// Sent out of the port (tx file).
    Sent {
        /// Queue it left.
        queue: u16,
        /// Time in the queue, ns.
        sojourn_ns: Nanos,
        /// Mark verdict at dequeue, if any.
        mark: Option<MarkReason>,
        /// Frame carries CE.
        ce: bool,
    },
    /// Dropped at dequeue by the AQM (tx file).
    DequeueDrop {
        /// Queue it left.
        queue: u16,
        /// Time in the queue, ns.
        sojourn_ns: Nanos,
        /// Why.
        reason: DropReason,
    },
}

impl Fate {
    /// Whether the frame went no further.
    pub fn is_drop(&self) -> bool {
        matches!(
            self,
            Fate::Dropped { .. } | Fate::IngressDrop(_) | Fate::DequeueDrop { .. }
        )
    }
}

/// One captured frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Switch port.
    pub port: u16,
    /// Which of its files.
    pub dir: Dir,
    /// Switch time, ns since start.
    pub t_ns: Nanos,
    /// Frame length on the wire (before the snap length).
    pub len: u32,
    /// Its bytes in [`Batch::bytes`].
    pub data: (u32, u32),
    /// Its fates in [`Batch::fates`].
    pub fates: (u32, u32),
}

/// Records of one stretch of time, in the order the switch made them
/// (per port and direction, time never goes backwards).
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Frames.
    pub records: Vec<Record>,
    /// Their bytes, cut to the snap length.
    pub bytes: Vec<u8>,
    /// Their fates.
    pub fates: Vec<Fate>,
    /// Records not kept because the batch was full, per (port, dir).
    pub lost: Vec<[u64; 2]>,
}

impl Batch {
    /// No record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.lost.iter().all(|l| l == &[0, 0])
    }
    /// Empties it, keeping its memory.
    pub fn clear(&mut self) {
        self.records.clear();
        self.bytes.clear();
        self.fates.clear();
        self.lost.iter_mut().for_each(|l| *l = [0, 0]);
    }
    /// The bytes of `r`.
    pub fn data(&self, r: &Record) -> &[u8] {
        &self.bytes[r.data.0 as usize..r.data.1 as usize]
    }
    /// The fates of `r`.
    pub fn fates_of(&self, r: &Record) -> &[Fate] {
        &self.fates[r.fates.0 as usize..r.fates.1 as usize]
    }
    /// Appends `other`'s records (same port numbering), with their bytes
    /// and fates, and adds its lost counts.
    pub fn append(&mut self, other: &Batch) {
        let (db, df) = (self.bytes.len() as u32, self.fates.len() as u32);
        self.records.extend(other.records.iter().map(|r| Record {
            data: (r.data.0 + db, r.data.1 + db),
            fates: (r.fates.0 + df, r.fates.1 + df),
            ..*r
        }));
        self.bytes.extend_from_slice(&other.bytes);
        self.fates.extend_from_slice(&other.fates);
        if self.lost.len() < other.lost.len() {
            self.lost.resize(other.lost.len(), [0, 0]);
        }
        for (l, o) in self.lost.iter_mut().zip(&other.lost) {
            l[0] += o[0];
            l[1] += o[1];
        }
    }
    /// Adds every record to `lost` (the batch could not be written).
    pub fn count_lost(&self, lost: &mut [[u64; 2]]) {
        for r in &self.records {
            lost[r.port as usize][r.dir as usize] += 1;
        }
        for (i, l) in self.lost.iter().enumerate() {
            lost[i][0] += l[0];
            lost[i][1] += l[1];
        }
    }
}

/// A dequeue-side note waiting for its packet to leave the delay line.
#[derive(Clone, Copy, Debug)]
struct TxNote {
    queue: u16,
    sojourn_ns: Nanos,
    mark: Option<MarkReason>,
    ce: bool,
}

/// Which ports and directions are captured, and how much of each frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureConfig {
    /// Bytes of each frame kept.
    pub snaplen: u32,
    /// Per port: captured (both directions).
    pub ports: Vec<bool>,
}

/// The switch's side of capture: turns the packet path's events into records.
#[derive(Debug)]
pub struct Capture {
    cfg: CaptureConfig,
    batch: Batch,
    /// The rx record being built by the current `ingress` call.
    open_rx: Option<usize>,
    /// Per port, the notes of packets on the delay line (FIFO, as the line).
    tx_notes: Vec<std::collections::VecDeque<TxNote>>,
    /// The port numbers records and fates carry, by the switch's own port
    /// number (a fabric's switch reports its ports by their place among
    /// all the fabric's ports); None: the switch's own numbers.
    numbers: Option<Vec<u16>>,
    /// Ports the records are numbered among (the `lost` counters' length).
    reported_ports: usize,
}

impl Capture {
    /// Capture per `cfg` (one entry in `cfg.ports` per switch port).
    pub fn new(cfg: CaptureConfig) -> Self {
        let n = cfg.ports.len();
        Self::build(cfg, None, n)
    }
    /// Capture per `cfg` (one entry per switch port) for one switch among
    /// several: its port `p` is reported as port `numbers[p]` of
    /// `reported_ports` (records, fates and lost counts), so the batches
    /// of a fabric's switches are one numbering's ([`Batch::append`]).
    ///
    /// # Panics
    /// When `numbers` does not give every port a number below `reported_ports`
    /// (a caller's bug, at start-up).
    pub fn renumbered(cfg: CaptureConfig, numbers: Vec<u16>, reported_ports: usize) -> Self {
        assert!(
            numbers.len() == cfg.ports.len()
                && numbers.iter().all(|&g| (g as usize) < reported_ports),
            "capture port numbers {numbers:?} for {} ports among {reported_ports}",
            cfg.ports.len()
        );
        Self::build(cfg, Some(numbers), reported_ports)
    }
    fn build(cfg: CaptureConfig, numbers: Option<Vec<u16>>, reported_ports: usize) -> Self {
        let n = cfg.ports.len();
        let batch = Batch {
            lost: vec![[0, 0]; reported_ports],
            ..Batch::default()
        };
        Capture {
            batch,
            open_rx: None,
            tx_notes: (0..n)
                .map(|_| std::collections::VecDeque::with_capacity(1024))
                .collect(),
            cfg,
            numbers,
            reported_ports,
        }
    }
    /// The number port `port` is reported as.
    #[inline]
    fn number(&self, port: u16) -> u16 {
        match &self.numbers {
            Some(m) => m[port as usize],
            None => port,
        }
    }
    /// The configuration.
    pub fn config(&self) -> &CaptureConfig {
        &self.cfg
    }
    /// Whether port `port` is captured.
    #[inline]
    pub fn captures(&self, port: u16) -> bool {
        self.cfg.ports.get(port as usize).copied().unwrap_or(false)
    }
    /// Records made since the last [`take`](Self::take).
    pub fn pending(&self) -> &Batch {
        &self.batch
    }
    /// Hands out the records made so far, leaving `empty` (cleared) in their place.
    pub fn take(&mut self, mut empty: Batch) -> Batch {
        // The current frame's record leaves with the batch.
        self.open_rx = None;
        empty.clear();
        empty.lost.resize(self.reported_ports, [0, 0]);
        std::mem::replace(&mut self.batch, empty)
    }

    /// Appends a record of `bytes` (cut to the snap length); None when the batch is full.
    fn push(&mut self, port: u16, dir: Dir, t_ns: Nanos, bytes: &[u8], len: u32) -> Option<usize> {
        let port = self.number(port);
        if self.batch.records.len() >= MAX_BATCH_RECORDS {
            self.batch.lost[port as usize][dir as usize] += 1;
            return None;
        }
        let start = self.batch.bytes.len() as u32;
        let n = bytes.len().min(self.cfg.snaplen as usize);
        self.batch.bytes.extend_from_slice(&bytes[..n]);
        let f = self.batch.fates.len() as u32;
        self.batch.records.push(Record {
            port,
            dir,
            t_ns,
            len,
            data: (start, start + n as u32),
            fates: (f, f),
        });
        Some(self.batch.records.len() - 1)
    }

    /// A frame arrived on `port` (its bytes as received); its fates follow.
    pub fn rx(&mut self, port: u16, t_ns: Nanos, bytes: &[u8], len: u32) {
        self.open_rx = if self.captures(port) {
            self.push(port, Dir::Rx, t_ns, bytes, len)
        } else {
            None
        };
    }
    /// The current `rx`'s fates are complete: later fates (an ACK R-AQM
    /// held and releases in a poll) belong to no received frame's record.
    pub fn end_rx(&mut self) {
        self.open_rx = None;
    }
    /// One fate of the frame of the current `rx`.
    pub fn rx_fate(&mut self, fate: Fate) {
        if let Some(i) = self.open_rx {
            self.batch.fates.push(fate);
            self.batch.records[i].fates.1 = self.batch.fates.len() as u32;
        }
    }
    /// What egress port `out`'s `enqueue` did with the current `rx`'s frame.
    pub fn enqueued(&mut self, out: u16, admission: Admission) {
        let out = self.number(out);
        let fate = match admission {
            Admission::Queued { queue, mark, ce } => Fate::Enqueued {
                port: out,
                queue,
                mark,
                ce,
            },
            Admission::Dropped { queue, reason } => Fate::Dropped {
                port: out,
                queue,
                reason,
            },
        };
        self.rx_fate(fate);
    }
    /// Egress port `port`'s dequeue AQM dropped `pkt` (frame `bytes`) at
    /// `now`: written to its tx file now.
    pub fn dequeue_dropped(
        &mut self,
        port: u16,
        now: Nanos,
        pkt: &Packet,
        reason: DropReason,
        bytes: &[u8],
    ) {
        if !self.captures(port) {
            return;
        }
        if let Some(i) = self.push(port, Dir::Tx, now, bytes, pkt.len) {
            self.batch.fates.push(Fate::DequeueDrop {
                queue: pkt.queue,
                sojourn_ns: now.saturating_sub(pkt.enqueue_ns),
                reason,
            });
            self.batch.records[i].fates.1 = self.batch.fates.len() as u32;
        }
    }
    /// Egress port `port` let `d` go at `now`: its note waits on the delay
    /// line for [`tx`](Self::tx).
    pub fn departed(&mut self, port: u16, now: Nanos, d: &Departure) {
        if !self.captures(port) {
            return;
        }
        self.tx_notes[port as usize].push_back(TxNote {
            queue: d.pkt.queue,
            sojourn_ns: now.saturating_sub(d.pkt.enqueue_ns),
            mark: d.mark,
            ce: d.ce(),
        });
    }
    /// A frame leaves `port` at `now` (its bytes as sent).
    pub fn tx(&mut self, port: u16, now: Nanos, bytes: &[u8], len: u32) {
        if !self.captures(port) {
            return;
        }
        let note = self.tx_notes[port as usize].pop_front();
        if let Some(i) = self.push(port, Dir::Tx, now, bytes, len) {
            if let Some(n) = note {
                self.batch.fates.push(Fate::Sent {
                    queue: n.queue,
                    sojourn_ns: n.sojourn_ns,
                    mark: n.mark,
                    ce: n.ce,
                });
                self.batch.records[i].fates.1 = self.batch.fates.len() as u32;
            }
        }
    }
    /// Shutdown: the packets on the delay lines were not sent.
    pub fn drain(&mut self) {
        self.tx_notes.iter_mut().for_each(|q| q.clear());
    }
}

/// The comment of a record with `fates`, into `out` (cleared first);
/// `names` are the switch's port names.
pub fn comment(fates: &[Fate], names: &[String], out: &mut String) {
    use std::fmt::Write;
    out.clear();
    let name = |p: u16| names.get(p as usize).map_or("?", |s| s.as_str());
    let us = |ns: Nanos| ns as f64 / 1e3;
    if fates.len() > 1 {
        out.push_str("flooded: ");
    }
    for (i, f) in fates.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        let _ = match *f {
            Fate::Enqueued {
                port,
                queue,
                mark,
                ce,
            } => {
                let _ = write!(out, "{} q{queue}: enqueued", name(port));
                mark_text(out, mark, ce)
            }
            Fate::Dropped {
                port,
                queue,
                reason,
            } => write!(out, "{} q{queue}: dropped: {}", name(port), reason.name()),
            Fate::IngressDrop(r) => write!(out, "dropped: {}", r.name()),
            Fate::Filtered => write!(out, "filtered: destination on the ingress port"),
            Fate::Sent {
                queue,
                sojourn_ns,
                mark,
                ce,
            } => {
                let _ = write!(out, "q{queue} sojourn {:.1}us", us(sojourn_ns));
                mark_text(out, mark, ce)
            }
            Fate::DequeueDrop {
                queue,
                sojourn_ns,
                reason,
            } => write!(
                out,
                "dropped at dequeue: {} (q{queue} sojourn {:.1}us)",
                reason.name(),
                us(sojourn_ns)
            ),
        };
    }
}

fn mark_text(out: &mut String, mark: Option<MarkReason>, ce: bool) -> std::fmt::Result {
    use std::fmt::Write;
    match (mark, ce) {
        (Some(r), true) => write!(out, ", marked CE ({})", r.name()),
        (Some(r), false) => write!(out, ", mark ({}) not applied: not ECN-capable", r.name()),
        (None, _) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }

    #[test]
    fn comments_say_queue_and_verdict() {
        let mut s = String::new();
        let n = names();
        comment(
            &[Fate::Dropped {
                port: 1,
                queue: 0,
                reason: DropReason::BufferFull,
            }],
            &n,
            &mut s,
        );
        assert_eq!(s, "b q0: dropped: buffer_full");
        comment(
            &[
                Fate::Enqueued {
                    port: 1,
                    queue: 2,
                    mark: Some(MarkReason::Threshold),
                    ce: true,
                },
                Fate::Dropped {
                    port: 2,
                    queue: 0,
                    reason: DropReason::QueueLimit,
                },
            ],
            &n,
            &mut s,
        );
        assert_eq!(
            s,
            "flooded: b q2: enqueued, marked CE (threshold); c q0: dropped: queue_limit"
        );
        comment(
            &[Fate::Sent {
                queue: 3,
                sojourn_ns: 12_345,
                mark: None,
                ce: false,
            }],
            &n,
            &mut s,
        );
        assert_eq!(s, "q3 sojourn 12.3us");
        comment(
            &[Fate::DequeueDrop {
                queue: 0,
                sojourn_ns: 1_000_000,
                reason: DropReason::NotEctMark,
            }],
            &n,
            &mut s,
        );
        assert_eq!(s, "dropped at dequeue: not_ect_mark (q0 sojourn 1000.0us)");
        comment(&[Fate::IngressDrop(DropReason::Malformed)], &n, &mut s);
        assert_eq!(s, "dropped: malformed");
    }

    #[test]
    fn batch_bound_counts_lost_records() {
        let mut c = Capture::new(CaptureConfig {
            snaplen: 4,
            ports: vec![true, false],
        });
        for t in 0..MAX_BATCH_RECORDS as u64 + 10 {
            c.rx(0, t, &[1, 2, 3, 4, 5, 6], 6);
            c.rx_fate(Fate::Filtered);
        }
        // An uncaptured port records nothing.
        c.rx(1, 0, &[1], 1);
        c.rx_fate(Fate::Filtered);
        let b = c.take(Batch::default());
        assert_eq!(b.records.len(), MAX_BATCH_RECORDS);
        assert_eq!(b.lost, vec![[10, 0], [0, 0]]);
        assert_eq!(
            b.bytes.len(),
            4 * MAX_BATCH_RECORDS,
            "cut to the snap length"
        );
        assert_eq!(
            b.fates.len(),
            MAX_BATCH_RECORDS,
            "no fate for a lost record"
        );
        assert!(c.pending().is_empty());
        let mut lost = vec![[0u64; 2]; 2];
        b.count_lost(&mut lost);
        assert_eq!(lost[0][0], MAX_BATCH_RECORDS as u64 + 10);
    }
}

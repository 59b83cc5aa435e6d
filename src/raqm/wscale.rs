//! Window scales per TCP flow direction, learned from SYNs, and the rwnd
//! rewrite that uses them (R-AQM paper §IV-D: "set the rwnd of the ACK to 1",
//! i.e. one MSS as HSCC does).
//!
//! RFC 7323 §2.2–2.3: the window field of a segment sent by A is scaled by the
//! shift A announced in its own SYN (or SYN-ACK), and scaling is in effect
//! only if *both* SYNs carried the option; otherwise the shift is 0 both ways.
//! So the table records, per direction (keyed by the parser's
//! direction-dependent `flow_hash`), what that direction's SYN announced, and
//! a direction's shift is known once both SYNs were seen. A flow whose
//! handshake the switch did not see (started before it, or a hash that
//! collided and was overwritten) has no known shift and is never
//! window-rewritten (counted by the caller).
//!
//! Bounded memory: at `capacity` directions the table is cleared (counted);
//! flows then lose their shift until their next handshake — the safe side.

use std::collections::HashMap;

use crate::wire::parse::flow_hash;
use crate::wire::{ecn, IpVersion, L3Info};

/// Directions remembered before the table is cleared.
pub const DEFAULT_CAPACITY: usize = 65_536;

/// Per-direction window scale table.
#[derive(Clone, Debug)]
pub struct WindowScales {
    /// What each direction's SYN announced (None: no Window Scale option).
    announced: HashMap<u32, Option<u8>>,
    /// The effective shift of each direction whose both SYNs were seen.
    effective: HashMap<u32, u8>,
    capacity: usize,
    /// SYNs learned from.
    pub syns: u64,
    /// Times the table was full and cleared.
    pub clears: u64,
}

impl Default for WindowScales {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

/// (flow hash of the frame's direction, flow hash of the reverse direction),
/// read from the frame's addresses and ports.
fn direction_hashes(frame: &[u8], l3: &L3Info) -> Option<(u32, u32)> {
    let tcp = l3.tcp?;
    let ip = usize::from(l3.offset);
    let (src, dst) = match l3.version {
        IpVersion::V4 => (frame.get(ip + 12..ip + 16)?, frame.get(ip + 16..ip + 20)?),
        IpVersion::V6 => (frame.get(ip + 8..ip + 24)?, frame.get(ip + 24..ip + 40)?),
    };
    let t = usize::from(tcp.offset);
    let p = frame.get(t..t + 4)?;
    let (sp, dp) = (
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    );
    let fwd = flow_hash(src, dst, l3.protocol, Some((sp, dp)));
    // The parser hashed the same fields; a mismatch means `l3` is not this frame's.
    if fwd != l3.flow_hash {
        return None;
    }
    Some((fwd, flow_hash(dst, src, l3.protocol, Some((dp, sp)))))
}

impl WindowScales {
    /// An empty table holding at most `capacity` directions.
    pub fn with_capacity(capacity: usize) -> Self {
        WindowScales {
            announced: HashMap::new(),
            effective: HashMap::new(),
            capacity: capacity.max(2),
            syns: 0,
            clears: 0,
        }
    }

    /// Directions with a known shift.
    pub fn len(&self) -> usize {
        self.effective.len()
    }
    /// Whether no direction has a known shift.
    pub fn is_empty(&self) -> bool {
        self.effective.is_empty()
    }

    /// Learns from `frame` if it is a TCP SYN or SYN-ACK (others: ignored).
    pub fn learn(&mut self, frame: &[u8], l3: &L3Info) {
        let Some(tcp) = l3.tcp else { return };
        if tcp.flags & crate::wire::tcp::flags::SYN == 0 {
            return;
        }
        let Some((fwd, rev)) = direction_hashes(frame, l3) else {
            return;
        };
        let shift = ecn::tcp_window_scale(frame, l3);
        if self.announced.len() >= self.capacity && !self.announced.contains_key(&fwd) {
            self.announced.clear();
            self.effective.clear();
            self.clears += 1;
        }
        self.syns += 1;
        self.announced.insert(fwd, shift);
        // A new handshake in this direction: forget what its old one implied.
        self.effective.remove(&fwd);
        self.effective.remove(&rev);
        if let Some(&other) = self.announced.get(&rev) {
            match (shift, other) {
                (Some(a), Some(b)) => {
                    self.effective.insert(fwd, a);
                    self.effective.insert(rev, b);
                }
                _ => {
                    self.effective.insert(fwd, 0);
                    self.effective.insert(rev, 0);
                }
            }
        }
    }

    /// The window shift of segments in the direction `flow_hash`, when known.
    pub fn shift(&self, flow_hash: u32) -> Option<u8> {
        self.effective.get(&flow_hash).copied()
    }
}

/// The raw window field that announces `bytes` under `shift` (rounded up, so
/// the sender may still send one MSS; at least 1).
pub fn raw_window(bytes: u32, shift: u8) -> u16 {
    let shift = u32::from(shift.min(14));
    let raw = bytes.div_ceil(1u32 << shift).max(1);
    raw.min(u32::from(u16::MAX)) as u16
}

/// Lowers the frame's receive window to `mss` bytes under `shift` (never
/// raises it). Some(true): rewritten; Some(false): already that small;
/// None: no valid TCP header where `l3` says.
pub fn lower_window(frame: &mut [u8], l3: &L3Info, mss: u32, shift: u8) -> Option<bool> {
    let t = usize::from(l3.tcp?.offset);
    let cur = frame.get(t + 14..t + 16)?;
    let cur = u16::from_be_bytes([cur[0], cur[1]]);
    let want = raw_window(mss, shift);
    if cur <= want {
        // Still check that the header is valid, so an invalid one is reported.
        return ecn::set_tcp_window(frame, l3, cur).then_some(false);
    }
    ecn::set_tcp_window(frame, l3, want).then_some(true)
}

//! The packet descriptor that moves through the queueing core, and the frame
//! store the core asks for bytes (to CE-mark) and hands frames back to (on drop).
//!
//! The core never owns frame memory: a [`FrameId`] names a frame in a
//! [`FrameStore`] — the AF_XDP UMEM in the data path, a `Vec` of buffers in
//! tests. Every frame the core is given leaves it exactly once: transmitted
//! (returned by a dequeue) or released (dropped, counted by reason).

use crate::units::Nanos;
use crate::wire::L3Info;

/// Names one frame in a [`FrameStore`] (a UMEM address in the data path).
pub type FrameId = u64;

/// A frame queued in the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Where the bytes are.
    pub frame: FrameId,
    /// Frame length in bytes (Ethernet header to end of payload, no FCS).
    pub len: u32,
    /// IP-layer facts read once at ingress (None: not IP, never ECN-markable).
    pub l3: Option<L3Info>,
    /// Port the frame arrived on.
    pub ingress_port: u16,
    /// Egress queue chosen by the classifier (set by the port at enqueue).
    pub queue: u16,
    /// When the frame entered its egress queue (monotonic ns); sojourn = now − this.
    pub enqueue_ns: Nanos,
}

impl Packet {
    /// A descriptor for a frame just received (queue and timestamp set at enqueue).
    pub fn new(frame: FrameId, len: u32, l3: Option<L3Info>, ingress_port: u16) -> Self {
        Packet {
            frame,
            len,
            l3,
            ingress_port,
            queue: 0,
            enqueue_ns: 0,
        }
    }
    /// DSCP, 0 for non-IP frames.
    pub fn dscp(&self) -> u8 {
        self.l3.map_or(0, |l| l.dscp)
    }
    /// Whether an AQM's mark can be applied as CE (ECT(0), ECT(1) or already CE).
    pub fn is_ect(&self) -> bool {
        self.l3.is_some_and(|l| l.ecn.is_ect())
    }
    /// Flow hash (0 for non-IP frames).
    pub fn flow_hash(&self) -> u32 {
        self.l3.map_or(0, |l| l.flow_hash)
    }
}

/// Frame memory the queueing core borrows.
pub trait FrameStore {
    /// The bytes of `frame` (its first `len` bytes), to rewrite headers in place.
    fn bytes_mut(&mut self, frame: FrameId, len: u32) -> &mut [u8];
    /// Gives a dropped frame back to the pool.
    fn release(&mut self, frame: FrameId);
    /// A new frame holding a copy of `frame`'s first `len` bytes (flooding
    /// sends one frame out of several ports). `None`: no free frame.
    fn clone_frame(&mut self, _frame: FrameId, _len: u32) -> Option<FrameId> {
        None
    }
}

/// A frame store on the heap, for tests, benchmarks and simulations.
#[derive(Debug, Default)]
pub struct VecStore {
    frames: Vec<Option<Vec<u8>>>,
    free: Vec<usize>,
    /// Frames handed out and not yet released or taken.
    pub live: usize,
}

impl VecStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    /// Stores `bytes` and returns its id.
    pub fn insert(&mut self, bytes: Vec<u8>) -> FrameId {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            self.frames[i] = Some(bytes);
            i as FrameId
        } else {
            self.frames.push(Some(bytes));
            (self.frames.len() - 1) as FrameId
        }
    }
    /// Removes a frame that left the core (transmitted), returning its bytes.
    pub fn take(&mut self, frame: FrameId) -> Vec<u8> {
        let b = self.frames[frame as usize]
            .take()
            .expect("frame taken twice");
        self.free.push(frame as usize);
        self.live -= 1;
        b
    }
    /// The bytes of a live frame.
    pub fn get(&self, frame: FrameId) -> &[u8] {
        self.frames[frame as usize]
            .as_deref()
            .expect("frame not live")
    }
}

impl FrameStore for VecStore {
    fn bytes_mut(&mut self, frame: FrameId, len: u32) -> &mut [u8] {
        let b = self.frames[frame as usize]
            .as_mut()
            .expect("frame not live");
        let n = (len as usize).min(b.len());
        &mut b[..n]
    }
    fn release(&mut self, frame: FrameId) {
        self.take(frame);
    }
    fn clone_frame(&mut self, frame: FrameId, len: u32) -> Option<FrameId> {
        let b = self.get(frame);
        let copy = b[..(len as usize).min(b.len())].to_vec();
        Some(self.insert(copy))
    }
}

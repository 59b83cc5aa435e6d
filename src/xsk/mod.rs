//! AF_XDP sockets and their shared UMEM, directly over the kernel ABI
//! (`include/uapi/linux/if_xdp.h`) through `libc` — the only module of
//! softswitch with `unsafe`, each block with a `// SAFETY:` comment.
//!
//! Design:
//! * **One UMEM for all ports.** Every port's socket is bound to the same
//!   frame memory (`XDP_SHARED_UMEM` across interfaces, each socket with its
//!   own fill and completion rings, since Linux 5.10; softswitch as a whole
//!   needs 6.4, README "Requirements"), so a frame received on
//!   port A is transmitted on port B by passing its address: no copy in user
//!   space.
//! * **Every frame in exactly one place**, checked at each move (see
//!   [`umem`](self::Umem)): free list → fill ring → application → tx ring →
//!   back to the free list. [`Umem::accounting`] must add up.
//! * **Small rings by default.** The AF_XDP rings are a buffer the switch's
//!   AQMs cannot see (measured: 4096-entry rx rings gave DCTCP a 10 ms RTT),
//!   so rx is 256 entries and the data path should drain it every loop.
//! * **Allocation-free data path**: `refill`, `recv`, `send`, `flush`,
//!   `complete` only touch the rings and pre-sized vectors.
//!
//! Lifetimes: sockets hold an `Arc` of the UMEM's memory and owner socket, so
//! dropping the [`Umem`] before its sockets is safe (the memory stays mapped
//! until the last socket goes). The first socket bound is the UMEM's owner
//! socket: the kernel keeps it bound until the `Umem` *and* all sockets are
//! dropped. Frames that were in a dropped socket's rings are not returned to
//! the free list (the data path drops sockets only at exit).

mod ring;
mod socket;
mod sys;
mod umem;

pub use socket::{KickCost, TxKicker, XskSocket};
pub use sys::set_nice;
pub use umem::Umem;

/// Address of a frame in the UMEM (byte offset) = [`crate::packet::FrameId`].
pub type FrameAddr = u64;

/// Default frame size in bytes (one page: room for a 3500-byte MTU frame
/// behind the kernel's 256-byte XDP headroom).
pub const DEFAULT_FRAME_SIZE: u32 = 4096;
/// Default number of frames (64 MiB at 4096 bytes).
pub const DEFAULT_FRAMES: u32 = 16384;

/// What mode to ask the kernel for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModeRequest {
    /// Zero-copy if the driver supports it, else copy (the kernel decides).
    #[default]
    Auto,
    /// Zero-copy or fail (EOPNOTSUPP on veth).
    ZeroCopy,
    /// Copy mode.
    Copy,
}

/// How a socket was bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// The NIC DMAs into the UMEM.
    ZeroCopy,
    /// The kernel copies frames between its buffers and the UMEM (veth, generic XDP).
    Copy,
}

/// Ring sizes (powers of two) and mode for [`XskSocket::bind`].
///
/// The defaults keep the rx ring small (a queue no AQM sees). That is right
/// when the data path owns a CPU. On a small, shared machine the process is
/// descheduled for milliseconds at a time and a 256-entry rx ring overflows
/// (measured on 2 busy vCPUs, iperf3 TCP through `xsk_forward`: rx 256 →
/// ~100 k `rx_ring_full` drops in 10 s; rx 2048 / fill 4096 → none); raise
/// `rx_size` and `fill_size` there and watch [`XskSocket::rx_backlog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XskOptions {
    /// RX ring entries. Small on purpose: frames waiting here are queued
    /// where no AQM sees them.
    pub rx_size: u32,
    /// Fill ring entries (free frames lent to the kernel for receiving);
    /// larger than rx so a burst finds buffers while the app drains rx.
    pub fill_size: u32,
    /// TX ring entries.
    pub tx_size: u32,
    /// Completion ring entries; at least `tx_size` so every sent frame has a slot.
    pub comp_size: u32,
    /// Zero-copy / copy.
    pub mode: ModeRequest,
}

impl Default for XskOptions {
    fn default() -> Self {
        XskOptions {
            rx_size: 256,
            fill_size: 512,
            tx_size: 1024,
            comp_size: 1024,
            mode: ModeRequest::Auto,
        }
    }
}

/// Where the UMEM's frames are. `total()` must equal `frames`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameAccounting {
    /// On the free list.
    pub free: u32,
    /// Lent to the kernel for receiving: on a fill ring, or received and not
    /// yet read from an rx ring.
    pub in_fill: u32,
    /// Held by the application (received or allocated, not sent or released).
    pub held_by_app: u32,
    /// Given to the kernel for sending: on a tx ring, or sent and not yet
    /// reaped from a completion ring.
    pub in_tx: u32,
    /// Frames in the UMEM.
    pub frames: u32,
}

impl FrameAccounting {
    /// Frames counted in some place.
    pub fn total(&self) -> u32 {
        self.free + self.in_fill + self.held_by_app + self.in_tx
    }
    /// Whether every frame is in exactly one place.
    pub fn is_balanced(&self) -> bool {
        self.total() == self.frames
    }
}

/// The kernel's per-socket counters (`struct xdp_statistics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStatistics {
    /// Dropped for other reasons.
    pub rx_dropped: u64,
    /// Dropped: invalid fill descriptor.
    pub rx_invalid_descs: u64,
    /// Invalid tx descriptors.
    pub tx_invalid_descs: u64,
    /// Dropped: rx ring full (the app did not drain it in time).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty.
    pub tx_ring_empty_descs: u64,
}

impl XskStatistics {
    /// Adds `o` counter by counter (several sockets of one port).
    pub fn merge(&mut self, o: &XskStatistics) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }

    /// Frames the kernel received for the socket and dropped before the
    /// switch saw them: no free frame on the fill ring (`rx_dropped` in
    /// copy mode), the rx ring full, or an invalid fill descriptor.
    pub fn rx_lost(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full + self.rx_invalid_descs
    }
}

/// Why creating a UMEM or binding a socket failed — each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// No interface of that name.
    #[error("no network interface named `{0}` in this namespace (see `ip link`)")]
    NoSuchInterface(String),
    /// EPERM / EACCES.
    #[error("{op}: permission denied; run softswitch as root (or with CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN)")]
    Permission {
        /// The operation refused.
        op: &'static str,
    },
    /// Invalid sizes.
    #[error("invalid AF_XDP configuration: {0}")]
    Config(String),
    /// Binding the socket failed.
    #[error("binding an AF_XDP socket to `{ifname}` queue {queue} failed: {source}; {hint}")]
    Bind {
        /// Interface.
        ifname: String,
        /// Queue.
        queue: u32,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
        /// What to do.
        hint: String,
    },
    /// Another system call failed.
    #[error("{op} failed: {source}; {hint}")]
    Syscall {
        /// The call.
        op: &'static str,
        /// The kernel's error.
        #[source]
        source: std::io::Error,
        /// What to do.
        hint: &'static str,
    },
}

/// The kernel's index of interface `name`, if it exists in this namespace.
pub fn if_index(name: &str) -> Option<u32> {
    nix::net::if_::if_nametoindex(name).ok()
}

// The kernel round-trip test (veth + XDP + AF_XDP, root) is netns-tests/xsk.rs.

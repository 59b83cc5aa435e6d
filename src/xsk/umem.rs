//! The UMEM: one region of frames shared by every port's AF_XDP socket, the
//! free list, and where every frame is.
//!
//! Every frame is in exactly one place, tracked by a state byte per frame:
//!
//! ```text
//!   Free ──refill──▶ Fill (fill ring, or rx ring not yet read)
//!    ▲                 │ recv
//!    │ release         ▼
//!    ├────────────── App (held by the switch: queued, in flight in the core)
//!    │ complete        │ send
//!    └────────────── Tx (tx ring, or completion ring not yet reaped)
//! ```
//!
//! Each transition checks the frame's state, so a frame lost, freed twice or
//! sent twice panics at the transition instead of corrupting traffic, and
//! [`Umem::accounting`] must always add up to the number of frames.
//!
//! Addresses ([`FrameAddr`]) are byte offsets into the region. The kernel
//! hands received frames back at `chunk + XDP_PACKET_HEADROOM (+ headroom)`,
//! not at the chunk start; everything here maps an address to its chunk with
//! `addr >> frame_shift`, and the free list and fill ring hold chunk starts.

use std::{
    os::fd::{AsRawFd, OwnedFd, RawFd},
    ptr::NonNull,
    sync::Arc,
};

use nix::sys::mman::{self, MapFlags, ProtFlags};

use super::{BindMode, FrameAccounting, FrameAddr, XskError};
use crate::packet::{FrameId, FrameStore};

/// Where a frame is (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum FrameState {
    Free,
    Fill,
    App,
    Tx,
}

/// The mapped memory and the socket the UMEM is registered on. Shared (Arc)
/// by the [`Umem`] and every socket bound to it, so the memory the kernel
/// reads and writes stays mapped, and the socket other sockets name in
/// `XDP_SHARED_UMEM` stays open, until the last of them is dropped —
/// whatever order the caller drops them in.
pub(super) struct Region {
    base: NonNull<u8>,
    len: usize,
    /// The AF_XDP socket XDP_UMEM_REG was done on. The first socket bound to
    /// this UMEM *is* this socket (the kernel wants the UMEM owner bound
    /// before others can share it).
    pub(super) owner_fd: OwnedFd,
}

// SAFETY: the region is plain memory plus an fd; the Umem mediates all access
// to frame bytes (state-checked), and nothing here is tied to a thread.
unsafe impl Send for Region {}
// SAFETY: `Region` itself exposes no interior mutability; frame access goes
// through `&Umem` / `&mut Umem`.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `Umem::new`. No socket
        // uses it any more (they all held this Arc); the kernel pinned its own
        // reference to the pages at XDP_UMEM_REG and drops it with the socket,
        // whose fd (`owner_fd`) is closed right after this.
        let _ = unsafe { mman::munmap(self.base.cast(), self.len) };
    }
}

/// The frame memory shared by all ports, with its free list and accounting.
pub struct Umem {
    pub(super) region: Arc<Region>,
    frames: u32,
    frame_size: u32,
    frame_shift: u32,
    /// Chunk starts of free frames (a stack: recently freed frames are warm).
    free: Vec<FrameAddr>,
    state: Vec<FrameState>,
    /// Whether the owner socket has been bound (by the first `XskSocket::bind`).
    pub(super) owner_bound: bool,
    /// Mode the kernel chose for the owner socket; later sockets inherit it.
    pub(super) mode: Option<BindMode>,
    in_fill: u32,
    in_tx: u32,
    held_by_app: u32,
}

impl std::fmt::Debug for Umem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Umem")
            .field("frames", &self.frames)
            .field("frame_size", &self.frame_size)
            .field("accounting", &self.accounting())
            .finish()
    }
}

impl Umem {
    /// Maps `frames` frames of `frame_size` bytes (2048 or 4096) and registers
    /// them with the kernel on a new AF_XDP socket.
    pub fn new(frames: u32, frame_size: u32) -> Result<Self, XskError> {
        if frame_size != 2048 && frame_size != 4096 {
            return Err(XskError::Config(format!(
                "frame size {frame_size}: use 2048 or 4096 (the kernel needs a power of two \
                 between 2048 and the page size)"
            )));
        }
        if frames == 0 || u64::from(frames) * u64::from(frame_size) > 1 << 34 {
            return Err(XskError::Config(format!(
                "{frames} frames: use between 1 and {} frames of {frame_size} bytes",
                (1u64 << 34) / u64::from(frame_size)
            )));
        }
        let len = frames as usize * frame_size as usize;
        let nz_len = std::num::NonZeroUsize::new(len).expect("frames > 0 checked above");
        // SAFETY: a fresh private anonymous mapping; no aliasing.
        let p = unsafe {
            mman::mmap_anonymous(
                None,
                nz_len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_POPULATE,
            )
        }
        .map_err(|e| XskError::Syscall {
            op: "mmap of the UMEM",
            source: e.into(),
            hint: "reduce the number of frames",
        })?;
        let base = p.cast::<u8>();
        let unmap = |e| {
            // SAFETY: the mapping just made; nothing refers to it yet.
            let _ = unsafe { mman::munmap(p, len) };
            e
        };
        let owner_fd = registered_socket(base, len, frame_size).map_err(unmap)?;
        let region = Arc::new(Region {
            base,
            len,
            owner_fd,
        });
        // Pop order low → high addresses: first frames handed out are at the start.
        let free = (0..frames)
            .rev()
            .map(|i| u64::from(i) * u64::from(frame_size))
            .collect();
        Ok(Umem {
            region,
            frames,
            frame_size,
            frame_shift: frame_size.trailing_zeros(),
            free,
            state: vec![FrameState::Free; frames as usize],
            owner_bound: false,
            mode: None,
            in_fill: 0,
            in_tx: 0,
            held_by_app: 0,
        })
    }

    /// Number of frames.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Frames on the free list.
    pub fn free_frames(&self) -> u32 {
        self.free.len() as u32
    }

    /// Where the frames are. `accounting().is_balanced()` always holds.
    pub fn accounting(&self) -> FrameAccounting {
        FrameAccounting {
            free: self.free.len() as u32,
            in_fill: self.in_fill,
            held_by_app: self.held_by_app,
            in_tx: self.in_tx,
            frames: self.frames,
        }
    }

    /// Takes a free frame for the application to fill (e.g. a generated
    /// frame); it returns through `send` + `complete` or `release`.
    pub fn alloc(&mut self) -> Option<FrameAddr> {
        let a = self.free.pop()?;
        self.transition(a, FrameState::Free, FrameState::App);
        self.held_by_app += 1;
        Some(a)
    }

    /// The bytes of a frame the application holds, from `a` to the end of its chunk.
    ///
    /// # Panics
    /// If the frame is not held by the application (it is free or the kernel
    /// may be reading or writing it).
    pub fn frame(&self, a: FrameAddr) -> &[u8] {
        let (off, len) = self.app_span(a);
        // SAFETY: inside the mapping (app_span checked); the frame is held by
        // the application, so the kernel does not write it, and `&self`
        // excludes `&mut` access through this Umem.
        unsafe { std::slice::from_raw_parts(self.region.base.as_ptr().add(off), len) }
    }

    /// Mutable bytes of a frame the application holds (see [`Umem::frame`]).
    pub fn frame_mut(&mut self, a: FrameAddr) -> &mut [u8] {
        let (off, len) = self.app_span(a);
        // SAFETY: as in `frame`, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.region.base.as_ptr().add(off), len) }
    }

    /// Offset of `a` and bytes to the end of its chunk; panics unless held by the app.
    fn app_span(&self, a: FrameAddr) -> (usize, usize) {
        let i = self.index(a);
        assert!(
            self.state[i] == FrameState::App,
            "frame {a:#x} is {:?}, not held by the application",
            self.state[i]
        );
        let chunk_end = (i as u64 + 1) << self.frame_shift;
        (a as usize, (chunk_end - a) as usize)
    }

    /// Whether `len` bytes at `a` are a valid tx descriptor: non-empty and
    /// inside `a`'s chunk (aligned-chunk mode).
    #[inline]
    pub fn fits(&self, a: FrameAddr, len: u32) -> bool {
        let offset = a - self.chunk_of(a);
        len > 0
            && offset + u64::from(len) <= u64::from(self.frame_size)
            && a < self.region.len as u64
    }

    /// Chunk start of the frame containing address `a`.
    pub fn chunk_of(&self, a: FrameAddr) -> FrameAddr {
        a & !(u64::from(self.frame_size) - 1)
    }

    fn index(&self, a: FrameAddr) -> usize {
        let i = (a >> self.frame_shift) as usize;
        assert!(i < self.state.len(), "address {a:#x} outside the UMEM");
        i
    }

    /// Moves a frame between places, checking where it was.
    #[inline]
    fn transition(&mut self, a: FrameAddr, from: FrameState, to: FrameState) {
        let i = self.index(a);
        assert!(
            self.state[i] == from,
            "UMEM frame {a:#x} is {:?}, expected {from:?} (lost or duplicated frame)",
            self.state[i]
        );
        self.state[i] = to;
    }

    // ---- transitions used by the sockets ----

    /// Takes a free chunk to put on a fill ring.
    #[inline]
    pub(super) fn take_for_fill(&mut self) -> Option<FrameAddr> {
        let a = self.free.pop()?;
        self.transition(a, FrameState::Free, FrameState::Fill);
        self.in_fill += 1;
        Some(a)
    }

    /// A frame the kernel received into (from an rx descriptor).
    #[inline]
    pub(super) fn received(&mut self, a: FrameAddr) {
        self.transition(a, FrameState::Fill, FrameState::App);
        self.in_fill -= 1;
        self.held_by_app += 1;
    }

    /// A frame the application put on a tx ring.
    #[inline]
    pub(super) fn sent(&mut self, a: FrameAddr) {
        self.transition(a, FrameState::App, FrameState::Tx);
        self.held_by_app -= 1;
        self.in_tx += 1;
    }

    /// A frame whose transmission completed (from the completion ring).
    #[inline]
    pub(super) fn completed(&mut self, a: FrameAddr) {
        let chunk = self.chunk_of(a);
        self.transition(chunk, FrameState::Tx, FrameState::Free);
        self.in_tx -= 1;
        self.free.push(chunk);
    }

    /// A frame taken back from a fill ring the kernel no longer drives.
    #[inline]
    pub(super) fn unfilled(&mut self, a: FrameAddr) {
        let chunk = self.chunk_of(a);
        self.transition(chunk, FrameState::Fill, FrameState::Free);
        self.in_fill -= 1;
        self.free.push(chunk);
    }

    /// After a failed first bind the owner socket has rings configured and
    /// cannot be configured again: replace it by a fresh registered socket so
    /// the next bind can succeed. Only possible while no socket shares the
    /// region (true before the owner is bound).
    pub(super) fn reset_owner(&mut self) -> Result<(), XskError> {
        debug_assert!(!self.owner_bound);
        let (base, len) = (self.region.base, self.region.len);
        let fd = registered_socket(base, len, self.frame_size)?;
        let region = Arc::get_mut(&mut self.region).expect("no socket shares an unbound UMEM");
        // Dropping the old fd closes the half-configured socket.
        region.owner_fd = fd;
        Ok(())
    }

    /// The owner socket's fd, for `XDP_SHARED_UMEM` binds and the first bind.
    pub(super) fn owner_fd(&self) -> RawFd {
        self.region.owner_fd.as_raw_fd()
    }
}

/// A new AF_XDP socket with the region registered on it (XDP_UMEM_REG).
fn registered_socket(base: NonNull<u8>, len: usize, frame_size: u32) -> Result<OwnedFd, XskError> {
    let fd = super::sys::new_xdp_socket()?;
    let reg = libc::xdp_umem_reg {
        addr: base.as_ptr() as u64,
        len: len as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    super::sys::setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_REG, &reg).map_err(|source| {
        let hint = match source.raw_os_error() {
            Some(libc::ENOMEM) | Some(libc::ENOBUFS) | Some(libc::EPERM) => {
                "the UMEM is locked memory: run as root (CAP_IPC_LOCK) or raise `ulimit -l`, or use fewer frames"
            }
            _ => "check frame count and size",
        };
        XskError::Syscall {
            op: "setsockopt(XDP_UMEM_REG)",
            source,
            hint,
        }
    })?;
    Ok(fd)
}

impl FrameStore for Umem {
    fn bytes_mut(&mut self, frame: FrameId, len: u32) -> &mut [u8] {
        let b = self.frame_mut(frame);
        let n = (len as usize).min(b.len());
        &mut b[..n]
    }

    fn release(&mut self, frame: FrameId) {
        let chunk = self.chunk_of(frame);
        self.transition(chunk, FrameState::App, FrameState::Free);
        self.held_by_app -= 1;
        self.free.push(chunk);
    }

    fn clone_frame(&mut self, frame: FrameId, len: u32) -> Option<FrameId> {
        let (src_off, src_len) = self.app_span(frame);
        let dst = self.alloc()?;
        let (dst_off, dst_len) = self.app_span(dst);
        let n = (len as usize).min(src_len).min(dst_len);
        // SAFETY: app_span checked that both frames are held by the application
        // and that each span lies inside the mapped region; `dst` came off the
        // free list, so it is a different chunk and the spans do not overlap.
        unsafe {
            let base = self.region.base.as_ptr();
            std::ptr::copy_nonoverlapping(base.add(src_off), base.add(dst_off), n);
        }
        Some(dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_frame_copies_into_a_new_frame() {
        let Some(mut u) = umem(4) else { return };
        let a = u.alloc().unwrap();
        u.frame_mut(a)[..4].copy_from_slice(b"abcd");
        let b = u.clone_frame(a, 4).unwrap();
        assert_ne!(a, b);
        assert_eq!(&u.frame(b)[..4], b"abcd");
        assert_eq!(u.accounting().held_by_app, 2);
        u.release(a);
        u.release(b);
        assert!(u.accounting().is_balanced());
        assert_eq!(u.free_frames(), 4);
    }

    fn umem(frames: u32) -> Option<Umem> {
        match Umem::new(frames, 2048) {
            Ok(u) => Some(u),
            Err(e) => {
                eprintln!("skipping: cannot create a UMEM here ({e})");
                None
            }
        }
    }

    #[test]
    fn alloc_release_balance() {
        let Some(mut u) = umem(8) else { return };
        assert!(u.accounting().is_balanced());
        let a = u.alloc().unwrap();
        let b = u.alloc().unwrap();
        assert_ne!(a, b);
        assert_eq!(u.accounting().held_by_app, 2);
        u.frame_mut(a)[..4].copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(&u.frame(a)[..4], &[1, 2, 3, 4]);
        assert_eq!(u.frame(a).len(), 2048);
        u.release(a);
        u.release(b);
        let acc = u.accounting();
        assert!(acc.is_balanced());
        assert_eq!(acc.free, 8);
    }

    #[test]
    #[should_panic(expected = "not held by the application")]
    fn free_frame_is_not_readable() {
        let Some(u) = umem(2) else {
            panic!("not held by the application (skipped)")
        };
        let _ = u.frame(0);
    }

    #[test]
    #[should_panic(expected = "lost or duplicated")]
    fn double_release_panics() {
        let Some(mut u) = umem(2) else {
            panic!("lost or duplicated (skipped)")
        };
        let a = u.alloc().unwrap();
        u.release(a);
        u.release(a);
    }

    #[test]
    fn rx_offset_addresses_map_to_their_chunk() {
        let Some(mut u) = umem(4) else { return };
        let a = u.take_for_fill().unwrap();
        // The kernel returns chunk + XDP_PACKET_HEADROOM.
        u.received(a + 256);
        assert_eq!(u.frame(a + 256).len(), 2048 - 256);
        u.sent(a + 256);
        u.completed(a + 256);
        let acc = u.accounting();
        assert!(acc.is_balanced());
        assert_eq!(acc.free, 4);
    }

    #[test]
    fn tx_lengths_must_fit_the_chunk() {
        let Some(u) = umem(4) else { return };
        assert!(u.fits(0, 2048));
        assert!(!u.fits(0, 0));
        assert!(!u.fits(256, 2048 - 255));
        assert!(u.fits(2048 + 256, 2048 - 256));
        assert!(!u.fits(4 * 2048, 64));
    }

    /// Random sequences of every move a frame can make (the kernel's side
    /// simulated by queues), with the accounting checked after each step.
    #[test]
    fn random_moves_never_lose_or_duplicate_a_frame() {
        use std::collections::VecDeque;
        let Some(mut u) = umem(32) else { return };
        let mut rng = crate::rng::SimRng::new(7);
        let (mut fill, mut app, mut tx) = (VecDeque::new(), Vec::new(), VecDeque::new());
        for _ in 0..20_000 {
            match rng.next_u64() % 6 {
                0 => {
                    if let Some(a) = u.take_for_fill() {
                        fill.push_back(a);
                    }
                }
                1 => {
                    // The kernel receives into a fill frame, behind its headroom.
                    if let Some(a) = fill.pop_front() {
                        u.received(a + 256);
                        app.push(a + 256);
                    }
                }
                2 => {
                    if let Some(a) = app.pop() {
                        u.sent(a);
                        tx.push_back(a);
                    }
                }
                3 => {
                    if let Some(a) = tx.pop_front() {
                        u.completed(a);
                    }
                }
                4 => {
                    if let Some(a) = app.pop() {
                        u.release(a);
                    }
                }
                _ => {
                    if let Some(a) = u.alloc() {
                        app.push(a);
                    }
                }
            }
            let acc = u.accounting();
            assert!(acc.is_balanced(), "{acc:?}");
            assert_eq!(acc.in_fill as usize, fill.len());
            assert_eq!(acc.held_by_app as usize, app.len());
            assert_eq!(acc.in_tx as usize, tx.len());
        }
    }

    #[test]
    fn bad_sizes_are_rejected() {
        assert!(matches!(Umem::new(16, 1500), Err(XskError::Config(_))));
        assert!(matches!(Umem::new(0, 2048), Err(XskError::Config(_))));
    }
}

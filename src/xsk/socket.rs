//! One AF_XDP socket per (interface, queue), all on the shared [`Umem`].
//!
//! Setup order is the kernel's (`net/xdp/xsk.c`): socket → (UMEM_REG, done by
//! `Umem::new` on the owner socket) → ring sizes (fill, completion, rx, tx) →
//! XDP_MMAP_OFFSETS → mmap all four rings (only allowed before bind) → bind.
//! The first socket bound to a UMEM is its owner socket; every later one binds
//! with `XDP_SHARED_UMEM` naming the owner, and because it is on another
//! interface or queue it brings its own fill and completion rings (since Linux
//! 5.10; softswitch as a whole needs 6.4, README "Requirements").
//! A frame received on one port can thus be transmitted on another without a copy.

use std::{
    io,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd},
    sync::Arc,
};

use nix::{errno::Errno, sys::socket::MsgFlags};

use super::sys::{getsockopt, new_xdp_socket, setsockopt};
use super::Umem;
use super::{
    ring::Ring, umem::Region, BindMode, FrameAddr, ModeRequest, XskError, XskOptions, XskStatistics,
};

/// What a socket's tx kicks (`sendto`) cost: in copy mode on a veth a
/// kick runs the receiving host's stack (and whatever softirq work is
/// pending on the CPU) inside the call, so its length says how long the
/// data path was away.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KickCost {
    /// Tx kicks made.
    pub sendtos: u64,
    /// The longest single kick, ns.
    pub max_sendto_ns: u64,
    /// Frames the kernel took in that longest kick.
    pub frames_in_max_sendto: u32,
    /// The most frames one kick took.
    pub max_frames_per_sendto: u32,
    /// The most kicks one kick loop made: one [`XskSocket::flush`] inline,
    /// or one [`TxKicker::kick`] of the tx thread (`--tx-thread`), which
    /// runs the same loop.
    pub max_sendtos_per_flush: u32,
}

impl KickCost {
    /// One kick of `ns` that took `frames`, the `nth` of its flush.
    fn note(&mut self, ns: u64, frames: u32, nth: u32) {
        self.merge(&KickCost {
            sendtos: 1,
            max_sendto_ns: ns,
            frames_in_max_sendto: frames,
            max_frames_per_sendto: frames,
            max_sendtos_per_flush: nth,
        });
    }
    /// Two costs as one (two sockets', or a socket's and one more kick):
    /// sums and maxima.
    pub fn merge(&mut self, o: &KickCost) {
        self.sendtos += o.sendtos;
        if o.max_sendto_ns > self.max_sendto_ns {
            self.max_sendto_ns = o.max_sendto_ns;
            self.frames_in_max_sendto = o.frames_in_max_sendto;
        }
        self.max_frames_per_sendto = self.max_frames_per_sendto.max(o.max_frames_per_sendto);
        self.max_sendtos_per_flush = self.max_sendtos_per_flush.max(o.max_sendtos_per_flush);
    }
}

/// An AF_XDP socket bound to one queue of one interface.
pub struct XskSocket {
    // Rings first: they are unmapped before the fd is closed.
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    /// Our own socket, or None when this is the UMEM's owner socket (whose fd
    /// lives in `region`, see `Region::owner_fd`).
    _own_fd: Option<OwnedFd>,
    fd: RawFd,
    region: Arc<Region>,
    ifname: String,
    ifindex: u32,
    queue: u32,
    mode: BindMode,
    /// Written to the tx ring by `send`, not yet published (`flush` does).
    tx_queued: u32,
    /// Frames put on our fill ring and not yet received.
    in_fill: u32,
    /// Frames sent and not yet completed.
    in_tx: u32,
    /// Wake-up syscalls made (tx kicks + fill wakeups).
    kicks: u64,
    /// Frames the kernel sends per copy-mode tx kick.
    tx_budget: u32,
    /// What the tx kicks cost so far.
    kick_cost: KickCost,
    /// The last hard error of a tx kick (see [`XskSocket::take_link_error`]).
    link_error: Option<Errno>,
    /// Set by [`XskSocket::abandon`]: the rings are no longer used.
    abandoned: bool,
    /// Set by [`XskSocket::reclaim_unsent`]: no frame may be sent any more.
    tx_reclaimed: bool,
}

/// Kicks one socket's tx ring from a thread other than the data path's
/// (`--tx-thread`): the data path only publishes descriptors
/// ([`XskSocket::publish`]), and the kernel's copy-mode transmit — on a
/// veth, the receiving host's whole stack — runs in this thread's
/// `sendto` instead of stalling the data path. Reads the ring's indices
/// only; never writes the ring.
pub struct TxKicker {
    fd: RawFd,
    producer: std::ptr::NonNull<std::sync::atomic::AtomicU32>,
    consumer: std::ptr::NonNull<std::sync::atomic::AtomicU32>,
    max_kicks: u32,
}

// SAFETY: the pointers are to the socket's tx ring mapping, read only with
// atomic loads; the socket (mapping and descriptor) outlives the kicker by
// the data path's contract (see `XskSocket::tx_kicker`).
unsafe impl Send for TxKicker {}
unsafe impl Sync for TxKicker {}

impl TxKicker {
    /// Descriptors published and not yet taken by the kernel.
    pub fn outstanding(&self) -> u32 {
        use std::sync::atomic::Ordering;
        // SAFETY: see the Send impl.
        let p = unsafe { self.producer.as_ref() };
        p.load(Ordering::Acquire).wrapping_sub(self.consumed())
    }

    /// The kernel's consumer index: descriptors taken so far (free-running).
    fn consumed(&self) -> u32 {
        // SAFETY: see the Send impl.
        unsafe { self.consumer.as_ref() }.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Kicks while the kernel takes descriptors, at most `max_kicks` times
    /// (the loop of [`XskSocket::flush`]), noting each `sendto` in `cost`;
    /// returns a hard error (`ENETDOWN`, `ENXIO`, ...) if one came.
    pub fn kick(&self, cost: &mut KickCost) -> Option<Errno> {
        let mut in_flush = 0u32;
        for _ in 0..self.max_kicks {
            if self.outstanding() == 0 {
                break;
            }
            in_flush += 1;
            // The data path may publish meanwhile: count what the kernel took.
            let taken = self.consumed();
            let t0 = std::time::Instant::now();
            // A zero-length send is the AF_XDP tx wake-up.
            let sent = nix::sys::socket::send(self.fd, &[], MsgFlags::MSG_DONTWAIT);
            cost.note(
                t0.elapsed().as_nanos() as u64,
                self.consumed().wrapping_sub(taken),
                in_flush,
            );
            if let Err(e) = sent {
                // EAGAIN is the normal answer when the kernel stopped after
                // its per-call budget (and also: completion ring full, device
                // queue busy) — the progress check below decides whether to
                // kick again. ENETDOWN (interface down), ENXIO (unbound: the
                // interface is gone), ...: for the caller; give up until the
                // next kick.
                if !matches!(
                    e,
                    Errno::EAGAIN | Errno::EBUSY | Errno::ENOBUFS | Errno::EINTR
                ) {
                    return Some(e);
                }
            }
            if self.consumed() == taken {
                break;
            }
        }
        None
    }
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("ifname", &self.ifname)
            .field("queue", &self.queue)
            .field("fd", &self.fd)
            .field("mode", &self.mode)
            .field("in_fill", &self.in_fill)
            .field("in_tx", &self.in_tx)
            .finish()
    }
}

/// `XDP_MAX_TX_SKB_BUDGET` (uapi `linux/if_xdp.h`, Linux ≥ 6.17): frames
/// one copy-mode tx kick may send, 32 up to the tx ring's size.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Frames a copy-mode tx kick sends when the budget cannot be raised (the
/// kernel's `TX_BATCH_SIZE`).
const DEFAULT_TX_BUDGET: u32 = 32;

fn check_ring_size(name: &str, n: u32) -> Result<(), XskError> {
    if n.is_power_of_two() && (8..=1 << 16).contains(&n) {
        Ok(())
    } else {
        Err(XskError::Config(format!(
            "{name} ring size {n}: use a power of two between 8 and 65536"
        )))
    }
}

/// Sets the four ring sizes of socket `fd`, and asks for a whole tx ring per
/// copy-mode kick; returns whether the kernel took that budget.
fn set_ring_sizes(fd: RawFd, opts: &XskOptions) -> Result<bool, XskError> {
    let sockopt = |op: &'static str, opt, n: &u32| {
        setsockopt(fd, opt, n).map_err(|source| XskError::Syscall {
            op,
            source,
            hint: "ring sizes must be powers of two; run as root",
        })
    };
    sockopt(
        "setsockopt(XDP_UMEM_FILL_RING)",
        libc::XDP_UMEM_FILL_RING,
        &opts.fill_size,
    )?;
    sockopt(
        "setsockopt(XDP_UMEM_COMPLETION_RING)",
        libc::XDP_UMEM_COMPLETION_RING,
        &opts.comp_size,
    )?;
    sockopt("setsockopt(XDP_RX_RING)", libc::XDP_RX_RING, &opts.rx_size)?;
    sockopt("setsockopt(XDP_TX_RING)", libc::XDP_TX_RING, &opts.tx_size)?;
    // Copy mode sends at most 32 frames per kick unless told otherwise
    // (XDP_MAX_TX_SKB_BUDGET, Linux ≥ 6.17): allow a whole ring per
    // kick. Older kernels refuse the option; they keep 32 per kick and
    // `flush` kicks again.
    Ok(setsockopt(fd, XDP_MAX_TX_SKB_BUDGET, &opts.tx_size).is_ok())
}

/// A socket's four rings, mapped.
struct Rings {
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
}

impl Rings {
    /// Maps the rings of socket `fd` (sized already) through `ring_fd`, the
    /// same socket borrowed from its owner, at the offsets the kernel gives.
    fn map(fd: RawFd, ring_fd: BorrowedFd<'_>, opts: &XskOptions) -> Result<Self, XskError> {
        let (off, off_len) = getsockopt::<libc::xdp_mmap_offsets>(fd, libc::XDP_MMAP_OFFSETS)
            .map_err(|source| XskError::Syscall {
                op: "getsockopt(XDP_MMAP_OFFSETS)",
                source,
                hint: "softswitch needs Linux ≥ 6.4 (README, Requirements)",
            })?;
        if off_len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(XskError::Config(
                "the kernel's AF_XDP ring layout predates ring flags (Linux < 5.4); softswitch needs Linux ≥ 6.4 (README, Requirements)".into(),
            ));
        }
        let map_err = |op| {
            move |source| XskError::Syscall {
                op,
                source,
                hint: "mapping an AF_XDP ring failed; check `ulimit -l` and ring sizes",
            }
        };
        let fill = Ring::<u64>::map(
            ring_fd,
            libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            &off.fr,
            opts.fill_size,
        )
        .map_err(map_err("mmap(fill ring)"))?;
        let comp = Ring::<u64>::map(
            ring_fd,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            &off.cr,
            opts.comp_size,
        )
        .map_err(map_err("mmap(completion ring)"))?;
        let rx =
            Ring::<libc::xdp_desc>::map(ring_fd, libc::XDP_PGOFF_RX_RING, &off.rx, opts.rx_size)
                .map_err(map_err("mmap(rx ring)"))?;
        let tx =
            Ring::<libc::xdp_desc>::map(ring_fd, libc::XDP_PGOFF_TX_RING, &off.tx, opts.tx_size)
                .map_err(map_err("mmap(tx ring)"))?;
        Ok(Rings { fill, comp, rx, tx })
    }
}

/// Binds socket `fd` to `queue` of interface `ifindex`: the UMEM's owner
/// socket (`owner` None) with the mode asked for and need-wakeup, any other
/// socket sharing the owner's UMEM.
fn bind_to_queue(
    fd: RawFd,
    ifindex: u32,
    queue: u32,
    mode: ModeRequest,
    owner: Option<RawFd>,
) -> io::Result<()> {
    let (flags, shared_fd) = match owner {
        None => {
            let mode = match mode {
                ModeRequest::Auto => 0,
                ModeRequest::ZeroCopy => libc::XDP_ZEROCOPY,
                ModeRequest::Copy => libc::XDP_COPY,
            };
            (libc::XDP_USE_NEED_WAKEUP | mode, 0)
        }
        // The kernel refuses mode flags on a shared bind: the mode (and
        // need-wakeup) come from the owner socket.
        Some(owner) => (libc::XDP_SHARED_UMEM, owner as u32),
    };
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: shared_fd,
    };
    super::sys::bind(fd, &sa)
}

/// The mode the kernel bound socket `fd` in.
fn bound_mode(fd: RawFd) -> Result<BindMode, XskError> {
    let (xo, _) = getsockopt::<libc::xdp_options>(fd, libc::XDP_OPTIONS).map_err(|source| {
        XskError::Syscall {
            op: "getsockopt(XDP_OPTIONS)",
            source,
            hint: "softswitch needs Linux ≥ 6.4 (README, Requirements)",
        }
    })?;
    Ok(if xo.flags & libc::XDP_OPTIONS_ZEROCOPY != 0 {
        BindMode::ZeroCopy
    } else {
        BindMode::Copy
    })
}

impl XskSocket {
    /// Binds a socket to `queue` of `ifname` on the shared `umem`, maps its
    /// rings and puts free frames on its fill ring.
    ///
    /// Mode: with [`ModeRequest::Auto`] the kernel tries zero-copy and falls back
    /// to copy mode itself (veth is copy-only); [`BindMode`] says which it chose.
    /// Sockets after the first inherit the first one's mode (a kernel rule for
    /// shared UMEMs).
    ///
    /// The frames for the XSKMAP: register [`XskSocket::fd`] with
    /// `XdpAttachment::register_socket` after this.
    pub fn bind(
        umem: &mut Umem,
        ifname: &str,
        queue: u32,
        opts: &XskOptions,
    ) -> Result<Self, XskError> {
        check_ring_size("rx", opts.rx_size)?;
        check_ring_size("tx", opts.tx_size)?;
        check_ring_size("fill", opts.fill_size)?;
        check_ring_size("completion", opts.comp_size)?;
        let ifindex =
            super::if_index(ifname).ok_or_else(|| XskError::NoSuchInterface(ifname.to_owned()))?;

        let first = !umem.owner_bound;
        let r = Self::bind_inner(umem, ifname, ifindex, queue, opts);
        if r.is_err() && first {
            // The owner socket is now half-configured; give the UMEM a fresh one.
            umem.reset_owner()?;
        }
        r
    }

    fn bind_inner(
        umem: &mut Umem,
        ifname: &str,
        ifindex: u32,
        queue: u32,
        opts: &XskOptions,
    ) -> Result<Self, XskError> {
        let first = !umem.owner_bound;
        let (own_fd, fd) = if first {
            (None, umem.owner_fd())
        } else {
            let s = new_xdp_socket()?;
            let fd = s.as_raw_fd();
            (Some(s), fd)
        };
        let tx_budget_set = set_ring_sizes(fd, opts)?;
        // The socket the rings belong to, borrowed from its owner.
        let ring_fd = match &own_fd {
            Some(s) => s.as_fd(),
            None => umem.region.owner_fd.as_fd(),
        };
        let rings = Rings::map(fd, ring_fd, opts)?;
        // A shared bind names the owner socket; the first bind is the owner.
        let owner = (!first).then(|| umem.owner_fd());
        bind_to_queue(fd, ifindex, queue, opts.mode, owner)
            .map_err(|source| bind_error(ifname, queue, opts.mode, first, source))?;
        let mode = bound_mode(fd)?;
        if first {
            umem.owner_bound = true;
            umem.mode = Some(mode);
        }
        let Rings { fill, comp, rx, tx } = rings;
        let mut s = XskSocket {
            fill,
            comp,
            rx,
            tx,
            _own_fd: own_fd,
            fd,
            region: Arc::clone(&umem.region),
            ifname: ifname.to_owned(),
            ifindex,
            queue,
            mode,
            tx_queued: 0,
            in_fill: 0,
            in_tx: 0,
            kicks: 0,
            kick_cost: KickCost::default(),
            link_error: None,
            abandoned: false,
            tx_reclaimed: false,
            tx_budget: if tx_budget_set {
                opts.tx_size
            } else {
                DEFAULT_TX_BUDGET
            },
        };
        s.refill(umem);
        Ok(s)
    }

    /// The socket's fd, to put into the port's XSKMAP.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Copy or zero-copy, as the kernel bound it.
    pub fn mode(&self) -> BindMode {
        self.mode
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Queue index.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Tops the fill ring up from the free list; returns frames added. Wakes
    /// the kernel if it asked (need-wakeup, zero-copy drivers).
    pub fn refill(&mut self, umem: &mut Umem) -> u32 {
        self.check_umem(umem);
        if self.abandoned {
            return 0;
        }
        let want = self.fill.size().min(umem.free_frames());
        let n = self.fill.prod_free(want).min(umem.free_frames());
        for i in 0..n {
            let a = umem
                .take_for_fill()
                .expect("free list shorter than counted");
            self.fill.prod_write(i, a);
        }
        if n > 0 {
            self.fill.submit(n);
            self.in_fill += n;
        }
        if self.mode == BindMode::ZeroCopy && self.fill.needs_wakeup() {
            self.wake_rx();
        }
        n
    }

    /// Reads received frames into `out` as (address, length); they are now
    /// held by the application. Returns how many.
    pub fn recv(&mut self, umem: &mut Umem, out: &mut [(FrameAddr, u32)]) -> usize {
        self.check_umem(umem);
        let n = self
            .rx
            .cons_available(out.len().min(u32::MAX as usize) as u32);
        for (i, slot) in out.iter_mut().enumerate().take(n as usize) {
            let d = self.rx.cons_read(i as u32);
            umem.received(d.addr);
            *slot = (d.addr, d.len);
        }
        if n > 0 {
            self.rx.release(n);
            self.in_fill -= n;
        }
        n as usize
    }

    /// Queues `frame` (held by the application) for transmission; it becomes
    /// visible to the kernel at the next [`XskSocket::flush`] and comes back
    /// to the free list through [`XskSocket::complete`]. When the tx ring is
    /// full, or `len` is 0 or runs past the end of the frame's chunk, the
    /// frame is handed back (`Err`) and stays the caller's.
    pub fn send(&mut self, umem: &mut Umem, frame: FrameAddr, len: u32) -> Result<(), FrameAddr> {
        self.check_umem(umem);
        // The kernel silently skips an invalid descriptor and never completes
        // it: the frame would be lost. Refuse it here instead.
        if !umem.fits(frame, len) || self.abandoned || self.tx_reclaimed {
            return Err(frame);
        }
        // Each tx descriptor needs a completion slot too.
        if self.tx.prod_free(self.tx_queued + 1) <= self.tx_queued || self.in_tx >= self.comp.size()
        {
            return Err(frame);
        }
        umem.sent(frame);
        self.tx.prod_write(
            self.tx_queued,
            libc::xdp_desc {
                addr: frame,
                len,
                options: 0,
            },
        );
        self.tx_queued += 1;
        self.in_tx += 1;
        Ok(())
    }

    /// Publishes queued tx descriptors without kicking: a [`TxKicker`] on
    /// another thread makes the kernel send them (`--tx-thread`).
    pub fn publish(&mut self) {
        if self.tx_queued > 0 && !self.abandoned && !self.tx_reclaimed {
            self.tx.submit(self.tx_queued);
            self.tx_queued = 0;
        }
    }

    /// A handle that kicks this socket's tx ring from another thread. It
    /// holds the socket's descriptor and ring indices as raw values: the
    /// socket must outlive every use of it (the data path joins its tx
    /// thread before it drops, abandons or reclaims a socket).
    pub fn tx_kicker(&self) -> TxKicker {
        let (producer, consumer) = self.tx.index_ptrs();
        TxKicker {
            fd: self.fd,
            producer,
            consumer,
            // Enough kicks to drain a full ring at 32 per kick, and then some.
            max_kicks: self.tx.size() / 16 + 2,
        }
    }

    /// Publishes queued tx descriptors and kicks the kernel to send them.
    ///
    /// In copy mode one `sendto` transmits only a small batch (the kernel's
    /// per-call budget: 32 frames, or the ring's size where `bind` could raise it
    /// with `XDP_MAX_TX_SKB_BUDGET`), so keep kicking while the tx ring holds
    /// descriptors the kernel has not consumed — a single kick per loop
    /// stalls TCP (measured on veth, copy mode). Stops early when the kernel makes no progress
    /// (e.g. EAGAIN: completion ring full — call `complete`).
    pub fn flush(&mut self) {
        if self.abandoned || self.tx_reclaimed {
            return;
        }
        self.publish();
        if self.mode == BindMode::ZeroCopy && !self.tx.needs_wakeup() {
            return;
        }
        let before = self.kick_cost.sendtos;
        if let Some(e) = self.tx_kicker().kick(&mut self.kick_cost) {
            self.link_error = Some(e);
        }
        self.kicks += self.kick_cost.sendtos - before;
    }

    /// The hard error the last tx kick got, if any, cleared by reading it:
    /// `ENETDOWN` when the interface is administratively down (the kernel
    /// keeps the descriptors and sends them once it is up and kicked),
    /// `ENXIO` when the socket is unbound because the interface is gone.
    pub fn take_link_error(&mut self) -> Option<Errno> {
        self.link_error.take()
    }

    /// Takes back the tx descriptors the kernel has not consumed; they
    /// return to the free list and the count is returned. Sound only when
    /// the kernel will not read this tx ring again: the interface is gone
    /// (the socket is unbound), or in copy mode where tx runs only inside
    /// our kick (`flush`) and none follows — call it at shutdown, after the
    /// last flush. In zero-copy mode the driver may still read the ring:
    /// nothing is taken back (returns 0). After it, `send` refuses every
    /// frame and `flush` does nothing.
    pub fn reclaim_unsent(&mut self, umem: &mut Umem) -> u32 {
        self.check_umem(umem);
        if self.tx_reclaimed || (self.mode == BindMode::ZeroCopy && !self.abandoned) {
            return 0;
        }
        self.tx_reclaimed = true;
        // Descriptors written but never published are unconsumed too.
        if self.tx_queued > 0 {
            self.tx.submit(self.tx_queued);
            self.tx_queued = 0;
        }
        let descs = self.tx.prod_unconsumed();
        for d in &descs {
            umem.completed(d.addr);
        }
        self.in_tx -= descs.len() as u32;
        descs.len() as u32
    }

    /// The interface under this socket is gone (unregistered: the kernel
    /// unbound the socket and will never touch its rings again). Takes back
    /// every frame it can — completions, unread rx frames, unconsumed tx
    /// descriptors and unused fill frames — and stops using the rings.
    /// Returns the frames that stay unaccounted: tx descriptors the kernel
    /// consumed but never completed (0 in practice).
    pub fn abandon(&mut self, umem: &mut Umem) -> u32 {
        self.check_umem(umem);
        if self.abandoned {
            return self.in_tx;
        }
        self.complete(umem);
        let mut batch = [(0u64, 0u32); 64];
        loop {
            let n = self.recv(umem, &mut batch);
            for &(f, _) in &batch[..n] {
                crate::packet::FrameStore::release(umem, f);
            }
            if n == 0 {
                break;
            }
        }
        self.abandoned = true;
        self.reclaim_unsent(umem);
        let fill = self.fill.prod_unconsumed();
        for &a in &fill {
            umem.unfilled(a);
        }
        self.in_fill -= (fill.len() as u32).min(self.in_fill);
        self.in_tx
    }

    /// Whether [`XskSocket::abandon`] was called.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned
    }

    /// Reaps the completion ring: transmitted frames go back to the free
    /// list. Returns how many.
    pub fn complete(&mut self, umem: &mut Umem) -> u32 {
        self.check_umem(umem);
        let n = self.comp.cons_available(u32::MAX);
        for i in 0..n {
            umem.completed(self.comp.cons_read(i));
        }
        if n > 0 {
            self.comp.release(n);
            self.in_tx -= n;
        }
        n
    }

    /// Frames given to `send` and not yet returned by `complete`.
    pub fn tx_pending(&self) -> u32 {
        self.in_tx
    }

    /// Tx descriptors published so far, and taken by the kernel so far
    /// (free-running ring indices; `--tx-thread` times the difference).
    pub fn tx_indices(&self) -> (u32, u32) {
        (self.tx.prod_index(), self.tx.cons_index())
    }

    /// Frames on the fill ring or unread on the rx ring.
    pub fn rx_pending(&self) -> u32 {
        self.in_fill
    }

    /// Frames the rings themselves show lent to the kernel for receiving:
    /// fill-ring entries the kernel has not consumed plus rx-ring entries we
    /// have not read. In copy mode the kernel moves a frame from the fill to
    /// the rx ring in one step, so this equals [`rx_pending`](Self::rx_pending)
    /// unless a frame went missing in between (a zero-copy driver may also
    /// hold fill frames in its own ring).
    pub fn rx_frames_on_rings(&self) -> u32 {
        self.fill.prod_outstanding() + self.rx.cons_backlog()
    }

    /// Received frames waiting in the rx ring — a queue the switch's AQMs do
    /// not see. Should stay near 0; if it does not, the data path is not
    /// keeping up (or was descheduled).
    pub fn rx_backlog(&self) -> u32 {
        self.rx.cons_backlog()
    }

    /// Frames one copy-mode tx kick may send: the tx ring's size where the
    /// kernel takes `XDP_MAX_TX_SKB_BUDGET` (Linux ≥ 6.17), else 32.
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
    }

    /// Wake-up syscalls made so far.
    pub fn kicks(&self) -> u64 {
        self.kicks
    }

    /// What this socket's tx kicks cost so far.
    pub fn kick_cost(&self) -> KickCost {
        self.kick_cost
    }

    /// The kernel's drop counters for this socket (`XDP_STATISTICS`).
    pub fn statistics(&self) -> Result<XskStatistics, XskError> {
        let (s, _) = getsockopt::<libc::xdp_statistics>(self.fd, libc::XDP_STATISTICS).map_err(
            |source| XskError::Syscall {
                op: "getsockopt(XDP_STATISTICS)",
                source,
                hint: "softswitch needs Linux ≥ 6.4 (README, Requirements)",
            },
        )?;
        Ok(XskStatistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }

    fn wake_rx(&mut self) {
        self.kicks += 1;
        // A zero-length recv is the AF_XDP fill-ring wake-up; its answer
        // carries nothing.
        let _ = nix::sys::socket::recv(self.fd, &mut [], MsgFlags::MSG_DONTWAIT);
    }

    /// The UMEM passed in must be the one this socket is bound to: addresses
    /// from our rings only mean something there.
    #[inline]
    fn check_umem(&self, umem: &Umem) {
        assert!(
            Arc::ptr_eq(&self.region, &umem.region),
            "XskSocket used with a different Umem than it was bound to"
        );
    }
}

fn bind_error(
    ifname: &str,
    queue: u32,
    mode: ModeRequest,
    first: bool,
    source: io::Error,
) -> XskError {
    let hint = match source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            return XskError::Permission {
                op: "bind(AF_XDP socket)",
            }
        }
        Some(libc::EBUSY) => format!(
            "queue {queue} of `{ifname}` already has an AF_XDP socket or UMEM (is another softswitch running on it?)"
        ),
        Some(libc::EOPNOTSUPP) if mode == ModeRequest::ZeroCopy => format!(
            "`{ifname}` does not support zero-copy AF_XDP (veth never does): use copy or auto mode"
        ),
        Some(libc::EINVAL) => format!(
            "queue {queue} may not exist on `{ifname}` (see `ethtool -l {ifname}`)"
        ),
        Some(libc::EBADF) if !first => "the UMEM's first socket was closed; bind all ports before dropping any".into(),
        _ => format!("check that `{ifname}` is a usable network device"),
    };
    XskError::Bind {
        ifname: ifname.to_owned(),
        queue,
        source,
        hint,
    }
}

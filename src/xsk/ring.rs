//! The four single-producer / single-consumer rings an AF_XDP socket shares
//! with the kernel (`include/uapi/linux/if_xdp.h`, `tools/lib/bpf/xsk.h`).
//!
//! Each ring is an mmap of the socket at a fixed page offset: a producer
//! index, a consumer index, a flags word and `size` entries. Indices are
//! free-running u32s; entry `i` lives at `i & mask`. The side that produces
//! writes entries, then publishes the producer index with Release; the other
//! side reads the producer index with Acquire, reads the entries, then
//! publishes its consumer index with Release. Both sides cache the other's
//! index and re-read it only when the cache says the ring is full / empty.

use nix::sys::mman::{self, MapFlags, ProtFlags};
use std::{
    io,
    num::NonZeroUsize,
    os::fd::BorrowedFd,
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering},
};

/// One mapped ring. `T` is `u64` (fill, completion) or `libc::xdp_desc` (rx, tx).
pub(super) struct Ring<T> {
    map: NonNull<u8>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    /// Our copy of the index we own (producer of a producer ring, consumer of
    /// a consumer ring), published by `submit` / `release`.
    local: u32,
    /// Last value read of the kernel's index.
    cached_remote: u32,
}

// SAFETY: the ring is plain shared memory owned by this value; moving it to
// another thread is fine (it is not Sync: one thread drives a ring at a time).
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `fd` at `pgoff` with the layout `off` the kernel gave.
    pub(super) fn map(
        fd: BorrowedFd<'_>,
        pgoff: libc::off_t,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<Self> {
        debug_assert!(size.is_power_of_two());
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let len = NonZeroUsize::new(map_len).expect("a ring has a header");
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel
        // checks pgoff and length against the ring it allocated.
        let p = unsafe {
            mman::mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED | MapFlags::MAP_POPULATE,
                fd,
                pgoff,
            )
        }?;
        let base = p.as_ptr().cast::<u8>();
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this ring and lie
        // inside the mapping; the kernel aligns them for their types.
        let at = |o: u64| unsafe { NonNull::new_unchecked(base.add(o as usize)) };
        let ring = Ring {
            map: at(0),
            map_len,
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc).cast(),
            mask: size - 1,
            size,
            local: 0,
            cached_remote: 0,
        };
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping, aligned, shared with the kernel
        // only through atomic accesses.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// The ring's two indices, for a [`super::socket::TxKicker`] on another
    /// thread that only reads them. Valid while the ring is mapped.
    pub(super) fn index_ptrs(&self) -> (NonNull<AtomicU32>, NonNull<AtomicU32>) {
        (self.producer, self.consumer)
    }

    /// Whether the kernel asks to be woken up (`XDP_RING_NEED_WAKEUP`).
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    pub(super) fn size(&self) -> u32 {
        self.size
    }

    // ---- producer side (fill, tx) ----

    /// Free slots (re-reads the kernel's consumer index when the cache says full).
    pub(super) fn prod_free(&mut self, wanted: u32) -> u32 {
        let free = self.size - self.local.wrapping_sub(self.cached_remote);
        if free >= wanted {
            return free;
        }
        self.cached_remote = self.consumer().load(Ordering::Acquire);
        self.size - self.local.wrapping_sub(self.cached_remote)
    }

    /// Writes entry number `local + i` (not yet visible to the kernel).
    pub(super) fn prod_write(&mut self, i: u32, value: T) {
        let idx = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size; the slot is free (caller checked `prod_free`),
        // so the kernel does not read it until we publish.
        unsafe { self.entries.as_ptr().add(idx).write(value) }
    }

    /// Publishes `n` written entries to the kernel.
    pub(super) fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Our producer index: entries published so far (free-running).
    pub(super) fn prod_index(&self) -> u32 {
        self.local
    }

    /// The kernel's consumer index: entries it has taken (free-running).
    pub(super) fn cons_index(&self) -> u32 {
        self.consumer().load(Ordering::Acquire)
    }

    /// Entries published by us that the kernel has not consumed yet.
    pub(super) fn prod_outstanding(&self) -> u32 {
        self.local
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Entries published by us that the kernel has not consumed, oldest
    /// first (reads the kernel's consumer index). For taking frames back from
    /// a ring the kernel no longer drives; the caller must not publish more.
    pub(super) fn prod_unconsumed(&self) -> Vec<T> {
        let cons = self.consumer().load(Ordering::Acquire);
        let n = self.local.wrapping_sub(cons).min(self.size);
        (0..n)
            .map(|i| {
                let idx = (cons.wrapping_add(i) & self.mask) as usize;
                // SAFETY: idx < size; entries between the kernel's consumer
                // and our producer are ones we wrote and published.
                unsafe { self.entries.as_ptr().add(idx).read() }
            })
            .collect()
    }

    // ---- consumer side (rx, completion) ----

    /// Entries ready to read, at most `max`.
    pub(super) fn cons_available(&mut self, max: u32) -> u32 {
        let mut avail = self.cached_remote.wrapping_sub(self.local);
        if avail == 0 {
            self.cached_remote = self.producer().load(Ordering::Acquire);
            avail = self.cached_remote.wrapping_sub(self.local);
        }
        avail.min(max)
    }

    /// Entries the kernel has published and we have not read (re-reads its index).
    pub(super) fn cons_backlog(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    /// Reads entry number `local + i` (caller checked `cons_available`).
    pub(super) fn cons_read(&self, i: u32) -> T {
        let idx = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size and the kernel published this entry (Acquire
        // load of its producer index happened in `cons_available`).
        unsafe { self.entries.as_ptr().add(idx).read() }
    }

    /// Gives `n` read entries back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; no reference into
        // it outlives the ring (entries are copied out).
        let _ = unsafe { mman::munmap(self.map.cast(), self.map_len) };
    }
}

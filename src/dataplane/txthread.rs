//! `--tx-thread`: the copy-mode tx kicks on a thread of their own.
//!
//! On a veth, a copy-mode `sendto` delivers the frames to the peer in the
//! caller's context, and the kernel runs the receiving host's stack there
//! (IP, TCP, waking the application): on this 2-vCPU machine 41 % of the
//! data path's samples (BENCHMARKS.md, "What runs inside the demo's tx
//! kicks"). Inline, that time stalls the data path — its shapers stop, the
//! link loses time. With a tx thread the data path only publishes
//! descriptors on the tx rings and this thread kicks them, so a long kick
//! delays the frames behind it on the way to the host (measured: the
//! fidelity guard's [`crate::fidelity::TxWaits`]) but no longer stops the
//! emulated link.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use nix::errno::Errno;

use crate::xsk::{KickCost, TxKicker};

/// Idle rounds (no ring had anything to send) before the thread sleeps
/// until the data path wakes it.
const SPIN_ROUNDS: u32 = 256;

/// What the data path and the tx thread share.
struct Shared {
    stop: AtomicBool,
    /// Per port: the last hard error of a kick (`ENETDOWN`, ...), 0 for none.
    errors: Vec<AtomicI32>,
    /// Per port: gone (its socket abandoned): never kicked again.
    gone: Vec<AtomicBool>,
    /// The kicks so far.
    cost: Mutex<KickCost>,
}

/// The tx thread (see the module header); stopped and joined on drop.
pub(super) struct TxThread {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl TxThread {
    /// Starts the thread over `kickers` (one per port, in port order), off
    /// the data path's CPU `avoid` if it is pinned. Every socket behind the
    /// kickers must outlive this value.
    pub(super) fn start(kickers: Vec<TxKicker>, avoid: Option<u32>) -> Result<TxThread> {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            errors: kickers.iter().map(|_| AtomicI32::new(0)).collect(),
            gone: kickers.iter().map(|_| AtomicBool::new(false)).collect(),
            cost: Mutex::new(KickCost::default()),
        });
        // Read before the data path pins itself (it reads the main thread).
        let cpus = match avoid {
            Some(c) => crate::cpu::allowed_but(c).unwrap_or_else(|e| {
                eprintln!("softswitch: the tx thread may share CPU {c} with the data path: {e}");
                Vec::new()
            }),
            None => Vec::new(),
        };
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("softswitch-tx".into())
            .spawn(move || {
                if let Err(e) = crate::cpu::set_current_thread_cpus(&cpus) {
                    eprintln!("softswitch: the tx thread may share the data path's CPU: {e}");
                }
                kick_loop(&kickers, &s)
            })
            .context("starting the tx thread (--tx-thread)")?;
        Ok(TxThread {
            shared,
            handle: Some(handle),
        })
    }

    /// Frames were published: wake the thread if it sleeps (a futex wake
    /// then; an atomic swap when it is awake).
    #[inline]
    pub(super) fn wake(&self) {
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
    }

    /// The hard error a kick of `port` got since the last call, if any.
    pub(super) fn take_error(&self, port: usize) -> Option<Errno> {
        match self.shared.errors[port].swap(0, Ordering::Relaxed) {
            0 => None,
            e => Some(Errno::from_raw(e)),
        }
    }

    /// `port`'s interface is gone: stop kicking it.
    pub(super) fn forget(&self, port: usize) {
        self.shared.gone[port].store(true, Ordering::Relaxed);
    }

    /// What the kicks cost so far.
    pub(super) fn cost(&self) -> KickCost {
        *self.shared.cost.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the thread and waits for it: no kick follows.
    pub(super) fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.wake();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for TxThread {
    fn drop(&mut self) {
        self.stop();
    }
}

fn kick_loop(kickers: &[TxKicker], shared: &Shared) {
    let mut cost = KickCost::default();
    let mut idle = 0u32;
    while !shared.stop.load(Ordering::Relaxed) {
        let mut kicked = false;
        let mut failed = false;
        for (port, k) in kickers.iter().enumerate() {
            if k.outstanding() == 0 || shared.gone[port].load(Ordering::Relaxed) {
                continue;
            }
            kicked = true;
            if let Some(e) = k.kick(&mut cost) {
                shared.errors[port].store(e as i32, Ordering::Relaxed);
                failed = true;
            }
        }
        if failed {
            // A link down keeps its descriptors: retry at a calm pace (the
            // data path learns of it from the error and drops for it).
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if kicked {
            idle = 0;
            if let Ok(mut c) = shared.cost.try_lock() {
                *c = cost;
            }
        } else if idle < SPIN_ROUNDS {
            idle += 1;
            std::hint::spin_loop();
        } else {
            // Sleep until the data path publishes more ([`TxThread::wake`]);
            // a wake-up that came since the last check returns at once.
            std::thread::park();
            idle = 0;
        }
    }
    *shared.cost.lock().unwrap_or_else(|e| e.into_inner()) = cost;
}

//! `examples/xsk_forward.rs` on xsk-rs 0.11 (libxdp) instead of softswitch's
//! own AF_XDP layer: the same two-port forwarder (one shared UMEM, every
//! frame received on one port sent out of the other, the same ring sizes,
//! the raised copy-mode tx budget and the kick-until-no-progress loop), so
//! the two can be measured A/B with `scripts/xsk-smoke.sh`
//! (`EXAMPLE=xsk_forward_xskrs FEATURES=xsk-rs`). Built only with
//! `--features xsk-rs` (compiles libxdp and libbpf from source).
//!
//! The socket is bound with `XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD` and put in
//! softswitch's own XSKMAP (the aya-loaded XDP program), as the switch does.
//! Frame accounting is the application's: xsk-rs hands out descriptors and
//! tracks none of them, so this counts frames in each place itself.

use std::num::NonZeroU32;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use softswitch::xdp::XdpAttachment;
use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig,
};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

const BATCH: usize = 64;
/// `XDP_MAX_TX_SKB_BUDGET` (Linux >= 6.17), as in `src/xsk/socket.rs`.
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

struct Port {
    tx: TxQueue,
    rx: RxQueue,
    fill: FillQueue,
    comp: CompQueue,
    in_fill: u32,
    in_tx: u32,
    kicks: u64,
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut ports = Vec::new();
    let mut seconds: Option<u64> = None;
    let mut frames = 16384u32;
    let (mut rx_size, mut fill_size, mut tx_size) = (256u32, 512u32, 1024u32);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => seconds = Some(args.next().context("--seconds N")?.parse()?),
            "--frames" => frames = args.next().context("--frames N")?.parse()?,
            "--rx" => rx_size = args.next().context("--rx N")?.parse()?,
            "--fill" => fill_size = args.next().context("--fill N")?.parse()?,
            "--tx" => tx_size = args.next().context("--tx N")?.parse()?,
            _ => ports.push(a),
        }
    }
    if ports.len() != 2 {
        bail!("usage: xsk_forward_xskrs IF_A IF_B [--seconds N] [--frames N] [--rx N] [--fill N] [--tx N]");
    }
    let q = |n: u32| QueueSize::new(n).context("ring sizes are powers of two");
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(4096)?)
        .fill_queue_size(q(fill_size)?)
        .comp_queue_size(q(tx_size)?)
        .build()?;
    let (umem, descs) = Umem::new(
        umem_cfg,
        NonZeroU32::new(frames).context("--frames 0")?,
        false,
    )?;
    let mut free: Vec<FrameDesc> = descs;
    let sock_cfg = SocketConfig::builder()
        .rx_queue_size(q(rx_size)?)
        .tx_queue_size(q(tx_size)?)
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP)
        .build();

    let mut xdp = XdpAttachment::attach(&ports)?;
    let mut p: Vec<Port> = Vec::new();
    for (i, name) in ports.iter().enumerate() {
        let ifname: Interface = name.parse()?;
        // SAFETY: each (interface, queue) pair is bound once, with
        // INHIBIT_PROG_LOAD (xsk-rs's condition for a shared UMEM).
        let (tx, rx, fq_cq) = unsafe { Socket::new(sock_cfg, &umem, &ifname, 0) }
            .with_context(|| format!("binding an AF_XDP socket to {name}"))?;
        let (fill, comp) = fq_cq.context("no fill/completion ring for a new (interface, queue)")?;
        let fd = tx.fd().as_raw_fd();
        let budget_raised = nix_setsockopt_budget(fd, tx_size);
        xdp.register_socket(i, 0, fd)?;
        println!("port {i}: {name} queue 0 (xsk-rs), tx budget raised: {budget_raised}");
        p.push(Port {
            tx,
            rx,
            fill,
            comp,
            in_fill: 0,
            in_tx: 0,
            kicks: 0,
        });
    }

    let mut batch = [FrameDesc::default(); BATCH];
    let mut rx_count = [0u64; 2];
    let mut tx_full_drops = [0u64; 2];
    let start = Instant::now();
    let mut next_report = start + Duration::from_secs(1);
    loop {
        let mut busy = false;
        for port in p.iter_mut() {
            // complete
            let n = unsafe { port.comp.consume(&mut batch) };
            port.in_tx -= n as u32;
            free.extend_from_slice(&batch[..n]);
            // refill
            let want = (fill_size - port.in_fill).min(free.len() as u32) as usize;
            if want > 0 {
                let from = free.len() - want;
                // SAFETY: these descriptors are free (on no ring) and from this UMEM.
                let n = unsafe { port.fill.produce(&free[from..]) };
                // produce() took the first `n` of the slice.
                free.drain(from..from + n);
                port.in_fill += n as u32;
            }
        }
        for i in 0..2 {
            // SAFETY: descriptors are written by the kernel for this UMEM.
            let n = unsafe { p[i].rx.consume(&mut batch) };
            p[i].in_fill -= n as u32;
            rx_count[i] += n as u64;
            busy |= n > 0;
            if n == 0 {
                continue;
            }
            let out = &mut p[1 - i];
            let room = (tx_size - out.in_tx) as usize;
            let m = n.min(room);
            // SAFETY: frames just received, held by us only, same UMEM.
            let sent = unsafe { out.tx.produce(&batch[..m]) };
            out.in_tx += sent as u32;
            tx_full_drops[1 - i] += (n - sent) as u64;
            free.extend_from_slice(&batch[sent..n]);
        }
        for port in p.iter_mut() {
            kick(port, tx_size);
        }
        if !busy {
            std::thread::yield_now();
        }
        let now = Instant::now();
        if now >= next_report {
            next_report += Duration::from_secs(1);
            if seconds.is_some_and(|s| now.duration_since(start) >= Duration::from_secs(s)) {
                break;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline && p.iter().any(|x| x.in_tx > 0) {
        for port in p.iter_mut() {
            kick(port, tx_size);
            let n = unsafe { port.comp.consume(&mut batch) };
            port.in_tx -= n as u32;
            free.extend_from_slice(&batch[..n]);
        }
    }
    let in_fill: u32 = p.iter().map(|x| x.in_fill).sum();
    let in_tx: u32 = p.iter().map(|x| x.in_tx).sum();
    let total = free.len() as u32 + in_fill + in_tx;
    println!("final: received {rx_count:?} frames, tx-ring-full drops {tx_full_drops:?}");
    for (i, port) in p.iter().enumerate() {
        println!(
            "  port {i}: kernel stats {:?}, kicks {}",
            port.tx.fd().xdp_statistics()?,
            port.kicks
        );
    }
    println!(
        "  accounting: free {} fill {in_fill} tx {in_tx} (total {total}/{frames}); lost frames: {}",
        free.len(),
        i64::from(frames) - i64::from(total)
    );
    Ok(())
}

/// The copy-mode tx kick loop measured on veth copy mode: kick while the kernel makes progress.
fn kick(port: &mut Port, tx_size: u32) {
    if !port.tx.needs_wakeup() {
        return;
    }
    for _ in 0..tx_size / 16 + 2 {
        let before = port.tx.nb_free_exact();
        if before == tx_size {
            break;
        }
        port.kicks += 1;
        if port.tx.wakeup().is_err() {
            break;
        }
        if port.tx.nb_free_exact() <= before {
            break;
        }
    }
}

fn nix_setsockopt_budget(fd: std::os::fd::RawFd, budget: u32) -> bool {
    // SAFETY: an int option on our own socket, its size passed.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            XDP_MAX_TX_SKB_BUDGET,
            (&budget as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        ) == 0
    }
}

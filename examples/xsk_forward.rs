//! A minimal two-port AF_XDP forwarder: every frame received on one port is
//! sent out of the other, through the shared UMEM, with no queueing. It is the
//! baseline the switch's data path is measured against, and the check that
//! the XDP program, the loader and the AF_XDP layer work together.
//!
//! ```text
//! sudo target/release/examples/xsk_forward sx1s sx2s [--seconds N] [--frames N] [--rx N] [--fill N] [--tx N] [--spin]
//! ```
//!
//! Busy-polls (one CPU at 100 %), yielding the CPU when a pass found
//! nothing to do (`--spin`: never yield); on a 2-CPU machine the hosts' TCP
//! stacks need that CPU too. Prints counters every second and, at the
//! end (after `--seconds`), the frame accounting: every UMEM frame must be
//! free, lent to the kernel or in flight — none lost.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use softswitch::packet::FrameStore;
use softswitch::xdp::XdpAttachment;
use softswitch::xsk::{FrameAddr, Umem, XskOptions, XskSocket, DEFAULT_FRAMES, DEFAULT_FRAME_SIZE};

const BATCH: usize = 64;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut ports = Vec::new();
    let mut seconds: Option<u64> = None;
    let mut frames = DEFAULT_FRAMES;
    let mut opts = XskOptions::default();
    let mut yield_when_idle = true;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => seconds = Some(args.next().context("--seconds N")?.parse()?),
            "--frames" => frames = args.next().context("--frames N")?.parse()?,
            "--spin" => yield_when_idle = false,
            "--rx" => opts.rx_size = args.next().context("--rx N")?.parse()?,
            "--fill" => opts.fill_size = args.next().context("--fill N")?.parse()?,
            "--tx" => {
                opts.tx_size = args.next().context("--tx N")?.parse()?;
                opts.comp_size = opts.tx_size;
            }
            "-h" | "--help" => {
                println!("usage: xsk_forward IF_A IF_B [--seconds N] [--frames N] [--rx N] [--fill N] [--tx N] [--spin]");
                return Ok(());
            }
            _ => ports.push(a),
        }
    }
    if ports.len() != 2 {
        bail!(
            "usage: xsk_forward IF_A IF_B [--seconds N] [--frames N] [--rx N] [--fill N] [--tx N] [--spin]"
        );
    }

    let mut umem = Umem::new(frames, DEFAULT_FRAME_SIZE)?;
    let mut xdp = XdpAttachment::attach(&ports)?;
    let mut socks = Vec::new();
    for (i, name) in ports.iter().enumerate() {
        let s = XskSocket::bind(&mut umem, name, 0, &opts)?;
        xdp.register_socket(i, 0, s.fd())?;
        println!(
            "port {i}: {name} queue 0, XDP {:?} mode, AF_XDP {:?} mode",
            xdp.mode(i).unwrap(),
            s.mode()
        );
        socks.push(s);
    }

    let mut buf: [(FrameAddr, u32); BATCH] = [(0, 0); BATCH];
    let mut rx = [0u64; 2];
    let mut tx_full_drops = [0u64; 2];
    let start = Instant::now();
    let mut next_report = start + Duration::from_secs(1);
    let mut last_rx = [0u64; 2];
    loop {
        let mut busy = false;
        for s in socks.iter_mut() {
            s.complete(&mut umem);
            s.refill(&mut umem);
        }
        for p in 0..2 {
            let n = socks[p].recv(&mut umem, &mut buf);
            rx[p] += n as u64;
            busy |= n > 0;
            let out = &mut socks[1 - p];
            for &(frame, len) in &buf[..n] {
                if let Err(frame) = out.send(&mut umem, frame, len) {
                    tx_full_drops[1 - p] += 1;
                    umem.release(frame);
                }
            }
        }
        for s in &mut socks {
            s.flush();
        }
        if !busy && yield_when_idle {
            // Busy-polling but polite: on a 2-CPU machine the hosts' TCP
            // stacks and iperf3 need this CPU too.
            std::thread::yield_now();
        }

        let now = Instant::now();
        if now >= next_report {
            next_report += Duration::from_secs(1);
            let acc = umem.accounting();
            println!(
                "rx {} / {} pps, tx-ring-full drops {:?}, frames free {} fill {} app {} tx {} (total {}/{})",
                rx[0] - last_rx[0],
                rx[1] - last_rx[1],
                tx_full_drops,
                acc.free,
                acc.in_fill,
                acc.held_by_app,
                acc.in_tx,
                acc.total(),
                acc.frames
            );
            assert!(acc.is_balanced(), "frame accounting broken: {acc:?}");
            last_rx = rx;
            if seconds.is_some_and(|s| now.duration_since(start) >= Duration::from_secs(s)) {
                break;
            }
        }
    }

    // Let in-flight transmissions complete before the final count.
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline && socks.iter().any(|s| s.tx_pending() > 0) {
        for s in &mut socks {
            s.flush();
            s.complete(&mut umem);
        }
    }
    let acc = umem.accounting();
    println!("final: received {rx:?} frames, tx-ring-full drops {tx_full_drops:?}");
    for s in &socks {
        println!(
            "  {}: kernel stats {:?}, kicks {}",
            s.ifname(),
            s.statistics()?,
            s.kicks()
        );
    }
    println!(
        "  accounting: {acc:?}; lost frames: {}",
        i64::from(acc.frames) - i64::from(acc.total())
    );
    if !acc.is_balanced() {
        bail!("frame accounting does not add up");
    }
    Ok(())
}

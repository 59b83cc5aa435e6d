//! Kernel test of the whole receive/transmit path on one shared UMEM, with
//! the XDP program attached: a veth pair `sxtA` ⇄ `sxtB` in the current
//! namespace, an AF_XDP socket on each end.
//!
//! A frame sent by the socket on B arrives on A (XDP → XSKMAP → socket), is
//! sent back out of A by passing its address — the shared-UMEM handoff the
//! switch does — and arrives on B again, byte for byte. Every frame is
//! accounted for at each step. Skips (passes with a message) when not root.

use std::process::Command;
use std::time::{Duration, Instant};

use softswitch::packet::FrameStore;
use softswitch::xdp::XdpAttachment;
use softswitch::xsk::*;

const ETHERTYPE_TEST: [u8; 2] = [0x88, 0xb5]; // IEEE local experimental

struct VethGuard(&'static str);

impl Drop for VethGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", self.0]).status();
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Creates the veth pair `a` ⇄ `b`, up, IPv6 off; deleted when the guard
/// drops. None (after a message) when this machine cannot make one.
fn veth_pair(a: &'static str, b: &'static str) -> Option<VethGuard> {
    let _ = ip(&["link", "del", a]);
    if !ip(&["link", "add", a, "type", "veth", "peer", "name", b]) {
        eprintln!("skipping: cannot create a veth pair here");
        return None;
    }
    let guard = VethGuard(a);
    for d in [a, b] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{d}/disable_ipv6"), "1");
        assert!(ip(&["link", "set", d, "up"]));
    }
    Some(guard)
}

fn is_root() -> bool {
    softswitch::preflight::is_root()
}

/// Receives on `s` until a test frame arrives (other frames are released).
fn recv_test_frame(s: &mut XskSocket, umem: &mut Umem) -> Option<(FrameAddr, u32)> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut buf = [(0u64, 0u32); 16];
    while Instant::now() < deadline {
        s.refill(umem);
        let n = s.recv(umem, &mut buf);
        let mut found = None;
        for &(a, len) in &buf[..n] {
            if found.is_none() && umem.frame(a)[12..14] == ETHERTYPE_TEST {
                found = Some((a, len));
            } else {
                umem.release(a);
            }
        }
        if found.is_some() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn wait_complete(s: &mut XskSocket, umem: &mut Umem) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while s.tx_pending() > 0 && Instant::now() < deadline {
        s.flush();
        s.complete(umem);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn frame_round_trip_over_shared_umem() {
    if !is_root() {
        eprintln!("skipping frame_round_trip_over_shared_umem: needs root (veth, XDP, AF_XDP)");
        return;
    }
    let Some(_guard) = veth_pair("sxtA", "sxtB") else {
        return;
    };

    let mut umem = Umem::new(64, 2048).expect("UMEM");
    let mut xdp = XdpAttachment::attach(&["sxtA", "sxtB"]).expect("attach XDP");
    let opts = XskOptions {
        rx_size: 16,
        fill_size: 16,
        tx_size: 16,
        comp_size: 16,
        mode: ModeRequest::Auto,
    };
    // veth has no zero-copy: a forced zero-copy bind fails with a hint, and
    // the UMEM stays usable for the next bind.
    let zc = XskOptions {
        mode: ModeRequest::ZeroCopy,
        ..opts.clone()
    };
    match XskSocket::bind(&mut umem, "sxtA", 0, &zc) {
        Err(e @ XskError::Bind { .. }) => assert!(e.to_string().contains("zero-copy"), "{e}"),
        other => panic!("zero-copy bind on veth: {other:?}"),
    }
    assert!(matches!(
        XskSocket::bind(&mut umem, "sxtNope", 0, &opts),
        Err(XskError::NoSuchInterface(_))
    ));
    let mut a = XskSocket::bind(&mut umem, "sxtA", 0, &opts).expect("bind A");
    let mut b = XskSocket::bind(&mut umem, "sxtB", 0, &opts).expect("bind B (shared UMEM)");
    assert_eq!(a.mode(), BindMode::Copy, "veth is copy-mode only");
    xdp.register_socket(0, 0, a.fd()).unwrap();
    xdp.register_socket(1, 0, b.fd()).unwrap();
    let acc = umem.accounting();
    assert!(acc.is_balanced(), "{acc:?}");
    assert_eq!(acc.in_fill, 32, "both fill rings full");

    // A frame built in the UMEM, sent out of B.
    let mut frame = vec![0xffu8; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame.extend_from_slice(&ETHERTYPE_TEST);
    frame.extend((0..100u8).map(|i| i.wrapping_mul(7)));
    let f = umem.alloc().expect("a free frame");
    umem.bytes_mut(f, frame.len() as u32)
        .copy_from_slice(&frame);
    b.send(&mut umem, f, frame.len() as u32).unwrap();
    assert_eq!(umem.accounting().in_tx, 1);
    b.flush();

    // Arrives on A through the XDP program.
    let (got, len) = recv_test_frame(&mut a, &mut umem).expect("frame arrives on sxtA's socket");
    assert_eq!(&umem.frame(got)[..len as usize], &frame[..]);
    wait_complete(&mut b, &mut umem);
    assert_eq!(b.tx_pending(), 0, "B's transmission completed");

    // Handed to the other port without a copy: same UMEM address goes out of A.
    a.send(&mut umem, got, len).unwrap();
    a.flush();
    let (back, len2) =
        recv_test_frame(&mut b, &mut umem).expect("frame arrives back on sxtB's socket");
    assert_eq!(&umem.frame(back)[..len2 as usize], &frame[..]);
    wait_complete(&mut a, &mut umem);
    umem.release(back);

    let acc = umem.accounting();
    assert!(acc.is_balanced(), "{acc:?}");
    assert_eq!(acc.held_by_app, 0);
    assert_eq!(acc.in_tx, 0);
    assert_eq!(acc.free + acc.in_fill, 64);
}

/// (major, minor) of the running kernel.
fn kernel_version() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// Copy mode sends 32 frames per tx kick unless the socket raised the
/// budget (`XDP_MAX_TX_SKB_BUDGET`, Linux ≥ 6.17): there, a burst of 200
/// frames leaves in one kick; elsewhere `flush` kicks until it is gone.
#[test]
fn a_burst_leaves_in_one_kick_where_the_kernel_allows_it() {
    if !is_root() {
        eprintln!("skipping a_burst_leaves_in_one_kick_where_the_kernel_allows_it: needs root");
        return;
    }
    let Some(_guard) = veth_pair("sxtC", "sxtD") else {
        return;
    };
    let mut umem = Umem::new(1024, 2048).expect("UMEM");
    let mut xdp = XdpAttachment::attach(&["sxtC"]).expect("attach XDP");
    let opts = XskOptions {
        rx_size: 64,
        fill_size: 64,
        tx_size: 256,
        comp_size: 256,
        mode: ModeRequest::Auto,
    };
    let mut s = XskSocket::bind(&mut umem, "sxtC", 0, &opts).expect("bind");
    xdp.register_socket(0, 0, s.fd()).unwrap();
    let new_kernel = kernel_version() >= (6, 17);
    assert_eq!(s.tx_budget(), if new_kernel { 256 } else { 32 });

    // 200 test frames (to a multicast address nobody listens to; sxtD's
    // stack drops them).
    let mut frame = vec![0x01, 0x00, 0x5e, 0x7f, 0x00, 0x01, 0x02, 0, 0, 0, 0, 9];
    frame.extend_from_slice(&ETHERTYPE_TEST);
    frame.resize(200, 0xab);
    for _ in 0..200 {
        let f = umem.alloc().expect("a free frame");
        umem.bytes_mut(f, frame.len() as u32)
            .copy_from_slice(&frame);
        s.send(&mut umem, f, frame.len() as u32).unwrap();
    }
    let before = s.kicks();
    s.flush();
    let kicks = s.kicks() - before;
    wait_complete(&mut s, &mut umem);
    assert_eq!(s.tx_pending(), 0, "all 200 frames completed");
    if new_kernel {
        assert_eq!(kicks, 1, "one kick for 200 frames with a 256-frame budget");
    } else {
        assert!(kicks >= 7, "200 frames at 32 per kick took {kicks} kicks");
    }
    let acc = umem.accounting();
    assert!(acc.is_balanced(), "{acc:?}");
    assert_eq!(acc.in_tx, 0);
}

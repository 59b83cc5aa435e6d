//! The few system calls std does not offer: IP_TOS (DSCP per flow),
//! SO_MAX_PACING_RATE (the kernel's own TCP pacing), a bounded wait for
//! readability, the thread's timer slack, and a SIGINT / SIGTERM flag for
//! the server — all through `nix` and `signal-hook`'s safe wrappers, so the
//! traffic generator has no `unsafe`.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{getsockopt, setsockopt, sockopt};

/// Sets the ToS byte (IPv4 `IP_TOS`, IPv6 `IPV6_TCLASS`) of a connected TCP
/// socket to `dscp << 2`. The ECN bits are left 0: for an ECN-capable TCP
/// connection the kernel sets ECT itself on each data packet.
pub fn set_dscp(stream: &TcpStream, dscp: u8) -> io::Result<()> {
    let tos = i32::from(dscp & 0x3f) << 2;
    match stream.peer_addr()? {
        SocketAddr::V4(_) => setsockopt(stream, sockopt::Ipv4Tos, &tos)?,
        SocketAddr::V6(_) => setsockopt(stream, sockopt::Ipv6TClass, &tos)?,
    }
    Ok(())
}

/// `SO_MAX_PACING_RATE` (bytes per second, 64 bits on 64-bit kernels),
/// which nix does not define; its own macros give it nix's safe accessors.
#[derive(Clone, Copy, Debug)]
pub struct MaxPacingRate;
nix::setsockopt_impl!(
    MaxPacingRate,
    libc::SOL_SOCKET,
    libc::SO_MAX_PACING_RATE,
    u64,
    nix::sys::socket::sockopt::SetStruct<u64>
);
nix::getsockopt_impl!(
    MaxPacingRate,
    libc::SOL_SOCKET,
    libc::SO_MAX_PACING_RATE,
    u64,
    nix::sys::socket::sockopt::GetStruct<u64>
);

/// The cap [`enable_tcp_pacing`] sets: 100 Gbit/s in bytes per second, far
/// above any rate softswitch emulates, so only TCP's own rate applies.
pub const TCP_PACING_CAP_BYTES: u64 = 100_000_000_000 / 8;

/// Turns on the kernel's internal TCP pacing for this socket (Linux ≥ 4.13,
/// no `fq` qdisc needed): setting `SO_MAX_PACING_RATE` to anything but ~0
/// marks the socket as needing pacing, and TCP then spaces its packets at
/// `sk_pacing_rate` = cwnd / srtt × `net.ipv4.tcp_pacing_ss_ratio` (200 %)
/// in slow start or × `tcp_pacing_ca_ratio` (120 %) after it. A packet is
/// a GSO packet of up to ~1 ms of data unless the device's
/// `gso_max_segs` is 1. The cap is [`TCP_PACING_CAP_BYTES`], so it never
/// binds.
pub fn enable_tcp_pacing(stream: &TcpStream) -> io::Result<()> {
    setsockopt(stream, MaxPacingRate, &TCP_PACING_CAP_BYTES)?;
    Ok(())
}

/// Reads back `SO_MAX_PACING_RATE` (bytes per second; `u64::MAX` = off).
pub fn max_pacing_rate(stream: &TcpStream) -> io::Result<u64> {
    Ok(getsockopt(stream, MaxPacingRate)?)
}

/// Reads back the ToS byte (for tests and checks).
pub fn get_tos(stream: &TcpStream) -> io::Result<u8> {
    let v = match stream.peer_addr()? {
        SocketAddr::V4(_) => getsockopt(stream, sockopt::Ipv4Tos)?,
        SocketAddr::V6(_) => getsockopt(stream, sockopt::Ipv6TClass)?,
    };
    Ok(v as u8)
}

/// Waits up to `timeout` for `fd` to become readable (or to have an error /
/// hang-up pending). Returns whether it is; `EINTR` counts as not yet.
pub fn wait_readable(fd: &impl AsFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
    match poll(&mut pfd, timeout) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Lowers this thread's timer slack to 1 µs so `sleep` wakes close to the
/// scheduled arrival time (the default slack is 50 µs). Best effort.
pub fn tighten_timer_slack() {
    let _ = nix::sys::prctl::set_timerslack(1_000);
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, so a
/// server can print its counters and exit 0. Returns the flag (the same one
/// on every call).
pub fn stop_on_signals() -> &'static AtomicBool {
    static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Best effort: registration fails only for forbidden signals.
            let _ = signal_hook::flag::register(sig, Arc::clone(&flag));
        }
        flag
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn dscp_sets_tos_with_ecn_bits_clear() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_dscp(&s, 46).unwrap();
        assert_eq!(get_tos(&s).unwrap(), 46 << 2);
        set_dscp(&s, 0).unwrap();
        assert_eq!(get_tos(&s).unwrap(), 0);
    }

    #[test]
    fn tcp_pacing_sets_the_cap_where_the_default_is_off() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // Unset, the kernel reports ~0: no pacing asked for.
        assert_eq!(max_pacing_rate(&s).unwrap(), u64::MAX);
        enable_tcp_pacing(&s).unwrap();
        assert_eq!(max_pacing_rate(&s).unwrap(), TCP_PACING_CAP_BYTES);
    }

    #[test]
    fn wait_readable_times_out_then_sees_a_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!wait_readable(&l, Duration::from_millis(10)).unwrap());
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(wait_readable(&l, Duration::from_millis(1000)).unwrap());
    }
}

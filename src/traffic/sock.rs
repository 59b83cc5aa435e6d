//! The few system calls std does not offer: IP_TOS (DSCP per flow), a
//! bounded wait for readability, the thread's timer slack, and a SIGINT /
//! SIGTERM flag for the server. The only
//! `unsafe` in the traffic generator lives here; each call is a plain
//! libc system call on a file descriptor the caller owns.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Sets the ToS byte (IPv4 `IP_TOS`, IPv6 `IPV6_TCLASS`) of a connected TCP
/// socket to `dscp << 2`. The ECN bits are left 0: for an ECN-capable TCP
/// connection the kernel sets ECT itself on each data packet.
pub fn set_dscp(stream: &TcpStream, dscp: u8) -> io::Result<()> {
    let tos: libc::c_int = libc::c_int::from(dscp & 0x3f) << 2;
    let (level, name) = match stream.peer_addr()? {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    };
    setsockopt_int(stream.as_raw_fd(), level, name, tos)
}

/// Reads back the ToS byte (for tests and checks).
pub fn get_tos(stream: &TcpStream) -> io::Result<u8> {
    let (level, name) = match stream.peer_addr()? {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is a socket owned by `stream` for the duration of the call;
    // `v` and `len` are valid, writable and sized for a c_int.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(v as u8)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is an open socket borrowed from its owner for this call;
    // the option value is a c_int on the stack with its exact size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits up to `timeout` for `fd` to become readable (or to have an error /
/// hang-up pending). Returns whether it is; `EINTR` counts as not yet.
pub fn wait_readable(fd: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd on the stack, count 1; the fd stays open
    // because the caller holds its owner.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0)
}

/// Lowers this thread's timer slack to 1 µs so `sleep` wakes close to the
/// scheduled arrival time (the default slack is 50 µs). Best effort.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value and touches
    // only the calling thread's scheduling state.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
    }
}

/// Set by SIGINT / SIGTERM once [`stop_on_signals`] is installed.
static STOP_SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_SIGNALLED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, so a
/// server can print its counters and exit 0. Returns the flag.
pub fn stop_on_signals() -> &'static std::sync::atomic::AtomicBool {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to a static atomic, which is
        // async-signal-safe; `signal` replaces the disposition process-wide.
        unsafe {
            libc::signal(sig, handler);
        }
    }
    &STOP_SIGNALLED
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
    fn wait_readable_times_out_then_sees_a_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!wait_readable(&l, Duration::from_millis(10)).unwrap());
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(wait_readable(&l, Duration::from_millis(1000)).unwrap());
    }
}

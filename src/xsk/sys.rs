//! The raw AF_XDP syscalls the socket and the UMEM both need: creating an
//! AF_XDP socket, `setsockopt` / `getsockopt` at `SOL_XDP`, `bind` to an
//! interface queue, and the process priority. Kept apart so that
//! [`socket`](super::socket) and [`umem`](super::umem) each depend on this
//! module and neither on the other's syscalls.

use std::{
    io,
    os::fd::{FromRawFd, OwnedFd, RawFd},
};

use super::XskError;

/// Creates an unbound AF_XDP socket.
pub(super) fn new_xdp_socket() -> Result<OwnedFd, XskError> {
    // SAFETY: plain syscall; the result is checked and owned below.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let source = io::Error::last_os_error();
        return Err(match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => XskError::Permission { op: "socket(AF_XDP)" },
            Some(libc::EAFNOSUPPORT) => XskError::Syscall {
                op: "socket(AF_XDP)",
                source,
                hint: "this kernel has no AF_XDP (CONFIG_XDP_SOCKETS); softswitch needs Linux ≥ 6.4 with it (README, Requirements)",
            },
            _ => XskError::Syscall {
                op: "socket(AF_XDP)",
                source,
                hint: "check `ulimit -n`",
            },
        });
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, SOL_XDP, opt, value)`.
pub(super) fn setsockopt<T>(fd: RawFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: value points to a live T of the size we pass.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `getsockopt(fd, SOL_XDP, opt)` into a zeroed `T`; also returns the length the kernel wrote.
pub(super) fn getsockopt<T: Copy>(fd: RawFd, opt: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: all T used here are plain C structs / integers for which all-zero is valid.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: value is a live, writable T of `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((value, len as usize))
    }
}

/// `bind(fd, sa)`: attaches an AF_XDP socket to an interface queue.
pub(super) fn bind(fd: RawFd, sa: &libc::sockaddr_xdp) -> io::Result<()> {
    // SAFETY: sa is a valid sockaddr_xdp of the size passed.
    let r = unsafe {
        libc::bind(
            fd,
            (sa as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Raises the calling process's CPU priority (nice value `nice`, −20..19) so
/// the busy-polling data path is preempted less by builds or other load on a
/// small machine. Lives here because nix has no `setpriority` wrapper, so it
/// is a raw syscall, and this module is where softswitch keeps its `unsafe`.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority takes plain integers; `who = 0` means this process.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

//! Working inside a host's network namespace without `ip netns exec`: a
//! short-lived thread enters the namespace with setns(2) (nix), does its
//! work and ends, so the calling thread and the process stay where they
//! are. Used for the hosts' sysctls — `/proc/sys/net` shows the network
//! namespace of the task that looks a path up, so a thread inside the
//! namespace reads and writes the namespace's own values — and for the
//! namespace's cookie (`SO_NETNS_COOKIE` of a socket made inside it), the
//! key under which BPF programs see the namespace.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::sched::{setns, CloneFlags};
use nix::sys::socket::{getsockopt, socket, AddressFamily, SockFlag, SockType};

use super::TopoError;

/// Where `ip netns` keeps the handles of named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Runs `f` on a thread inside network namespace `ns` (a name under
/// [`NETNS_DIR`]) and returns what it returns.
pub fn in_netns<T: Send>(
    ns: &str,
    f: impl FnOnce() -> Result<T, TopoError> + Send,
) -> Result<T, TopoError> {
    let path = Path::new(NETNS_DIR).join(ns);
    let handle = File::open(&path).map_err(|source| TopoError::Io {
        context: format!(
            "cannot open {} (does namespace `{ns}` exist? `ip netns list`)",
            path.display()
        ),
        source,
    })?;
    std::thread::scope(|s| {
        s.spawn(move || {
            setns(&handle, CloneFlags::CLONE_NEWNET).map_err(|e| TopoError::Io {
                context: format!("cannot enter namespace `{ns}` (setns)"),
                source: e.into(),
            })?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(TopoError::Io {
                context: format!("the thread working inside namespace `{ns}` panicked"),
                source: io::Error::other("panic"),
            })
        })
    })
}

/// `/proc/sys/...` path of a dotted sysctl name (`net.ipv4.tcp_ecn`).
pub fn sysctl_path(key: &str) -> PathBuf {
    Path::new("/proc/sys").join(key.replace('.', "/"))
}

/// One `key=value` sysctl setting, as `sysctl -w` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysctl {
    pub key: String,
    pub value: String,
}

impl Sysctl {
    pub fn new(key: &str, value: impl ToString) -> Self {
        Sysctl {
            key: key.to_owned(),
            value: value.to_string(),
        }
    }
}

impl std::fmt::Display for Sysctl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// Writes `settings` in namespace `ns`, in order; the first that fails is
/// reported with `hint`.
pub fn write_sysctls(ns: &str, settings: &[Sysctl], hint: &str) -> Result<(), TopoError> {
    in_netns(ns, || {
        for s in settings {
            let path = sysctl_path(&s.key);
            std::fs::write(&path, format!("{}\n", s.value)).map_err(|source| TopoError::Io {
                context: format!(
                    "cannot set {s} in namespace `{ns}` (writing {}){}",
                    path.display(),
                    if hint.is_empty() {
                        String::new()
                    } else {
                        format!("; {hint}")
                    }
                ),
                source,
            })?;
        }
        Ok(())
    })
}

/// Reads sysctl `key` in namespace `ns`, trimmed.
pub fn read_sysctl(ns: &str, key: &str) -> Result<String, TopoError> {
    in_netns(ns, || {
        let path = sysctl_path(key);
        std::fs::read_to_string(&path)
            .map(|v| v.trim().to_owned())
            .map_err(|source| TopoError::Io {
                context: format!("cannot read {} in namespace `{ns}`", path.display()),
                source,
            })
    })
}

/// `SO_NETNS_COOKIE` (since Linux 5.14), which nix does not define; its own
/// macro gives it nix's safe accessor.
#[derive(Clone, Copy, Debug)]
struct NetnsCookie;
nix::getsockopt_impl!(
    NetnsCookie,
    libc::SOL_SOCKET,
    libc::SO_NETNS_COOKIE,
    u64,
    nix::sys::socket::sockopt::GetStruct<u64>
);

/// The cookie of network namespace `ns`: the kernel's unique, never reused
/// 64-bit id of a namespace, which `bpf_get_netns_cookie` returns.
pub fn netns_cookie(ns: &str) -> Result<u64, TopoError> {
    in_netns(ns, cookie_of_current)
}

/// The cookie of the calling thread's network namespace.
pub fn cookie_of_current() -> Result<u64, TopoError> {
    let io_err = |context: &str, e: nix::Error| TopoError::Io {
        context: context.to_owned(),
        source: e.into(),
    };
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| io_err("cannot make a socket to read the namespace's cookie", e))?;
    getsockopt(&sock, NetnsCookie).map_err(|e| {
        io_err(
            "cannot read SO_NETNS_COOKIE (since Linux 5.14; softswitch needs Linux ≥ 6.4, README, Requirements)",
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_names_map_to_proc_paths() {
        assert_eq!(
            sysctl_path("net.ipv4.tcp_rto_min_us"),
            PathBuf::from("/proc/sys/net/ipv4/tcp_rto_min_us")
        );
        assert_eq!(
            Sysctl::new("net.ipv4.tcp_ecn", 1).to_string(),
            "net.ipv4.tcp_ecn=1"
        );
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let e = read_sysctl("no-such-ns-xyz", "net.ipv4.tcp_ecn").unwrap_err();
        assert!(e.to_string().contains("no-such-ns-xyz"), "{e}");
    }

    #[test]
    fn the_current_namespace_has_a_cookie() {
        // Any process may read its own namespace's cookie; it is stable.
        let a = cookie_of_current().unwrap();
        assert!(a > 0);
        assert_eq!(cookie_of_current().unwrap(), a);
    }
}

//! One softswitch per interface: an exclusive `flock` on
//! `/run/softswitch/ports/<ifname>.<netns>.lock`, taken before anything is
//! attached and held for the switch's lifetime.
//!
//! Without it a second switch started on a port of a running one fails only
//! when the kernel refuses its XDP program (EBUSY), with a message about
//! "an XDP program" rather than about the other switch. The lock names the
//! owner's pid. An flock dies with its process however it dies (`kill -9`
//! too), so a stale lock file never blocks the next start; the file itself
//! stays behind, empty of meaning.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Where the lock files live.
pub const LOCK_DIR: &str = "/run/softswitch/ports";

/// Why a port could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum PortLockError {
    /// Another live process holds the port.
    #[error(
        "interface `{ifname}` is already a port of another softswitch{owner}; stop that switch \
         first (Ctrl-C, or `kill -INT <pid>`), or give this one other interfaces in --ports \
         (lock {path})"
    )]
    InUse {
        /// The interface.
        ifname: String,
        /// " (pid N: cmdline)" when known.
        owner: String,
        /// The lock file.
        path: String,
    },
    /// The lock file could not be created or locked.
    #[error("cannot create the port lock {path}: {source}; softswitch needs root to write /run/softswitch")]
    Io {
        /// The lock file.
        path: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// Held locks; dropping them releases the ports.
#[derive(Debug)]
pub struct PortLocks {
    _locks: Vec<Flock<File>>,
}

/// This process's network namespace (inode of /proc/self/ns/net; 0 if unknown):
/// interface names are per namespace.
fn netns_id() -> u64 {
    std::fs::metadata("/proc/self/ns/net")
        .map(|m| m.ino())
        .unwrap_or(0)
}

/// The lock file of interface `ifname` in this namespace, under `dir`.
pub fn lock_path(dir: &Path, ifname: &str) -> PathBuf {
    dir.join(format!("{ifname}.{}.lock", netns_id()))
}

impl PortLocks {
    /// Locks every interface of `ifnames` (in `dir`, normally [`LOCK_DIR`]),
    /// or none: on error the locks taken so far are released.
    pub fn acquire<S: AsRef<str>>(dir: &Path, ifnames: &[S]) -> Result<Self, PortLockError> {
        let io = |path: &Path, source| PortLockError::Io {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let mut locks = Vec::with_capacity(ifnames.len());
        for name in ifnames {
            let name = name.as_ref();
            let path = lock_path(dir, name);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io(&path, e))?;
            let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => l,
                Err((mut file, Errno::EWOULDBLOCK)) => {
                    let mut owner = String::new();
                    let _ = file.read_to_string(&mut owner);
                    let owner = owner.trim();
                    return Err(PortLockError::InUse {
                        ifname: name.to_owned(),
                        owner: if owner.is_empty() {
                            String::new()
                        } else {
                            format!(" ({owner})")
                        },
                        path: path.display().to_string(),
                    });
                }
                Err((_, e)) => return Err(io(&path, e.into())),
            };
            // Who holds it, for the next one's message.
            let cmd = std::fs::read("/proc/self/cmdline")
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let owner = format!("pid {}: {cmd}", std::process::id());
            let _ = lock.set_len(0);
            let _ = lock.rewind();
            let _ = lock.write_all(owner.as_bytes());
            locks.push(lock);
        }
        Ok(PortLocks { _locks: locks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_a_port_names_the_owner_and_releases_on_drop() {
        let dir = std::env::temp_dir().join(format!("ss-portlock-{}", std::process::id()));
        let a = PortLocks::acquire(&dir, &["veth0", "veth1"]).unwrap();
        // flock is per open file description: a second open in this process
        // conflicts just as another process would.
        let e = PortLocks::acquire(&dir, &["veth2", "veth1"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`veth1`"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("stop that switch"), "{msg}");
        // veth2 was released when the second acquire failed.
        let c = PortLocks::acquire(&dir, &["veth2"]).unwrap();
        drop(a);
        let b = PortLocks::acquire(&dir, &["veth1"]).unwrap();
        drop((b, c));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

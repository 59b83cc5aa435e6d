//! Machine-wide state shared by all topologies: a lock, one state file per
//! live topology, and a record of what `up` changed outside its namespaces
//! (a registered `bpf_dctcp`, names added to
//! `net.ipv4.tcp_allowed_congestion_control`, the time-dilation sock_ops
//! program attached to the root cgroup), so the last `down` can undo it
//! — also after a crash, since everything is found again from files under
//! [`RUN_DIR`](super::cc::RUN_DIR).
//!
//! Several topologies (different prefixes) may exist at once; the shared
//! changes are undone only when no topology is left.

use std::fs;
use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::cc::{self, RUN_DIR};
use super::dilation;
use super::TopoError;
use crate::timebase::Dilation;

/// Held while `up` or `down` runs.
///
/// An abstract Unix socket name: binding it is atomic, and the kernel frees
/// it when the holder exits, so a crashed holder never leaves a stale lock.
#[derive(Debug)]
pub struct GlobalLock {
    _socket: UnixListener,
}

const LOCK_NAME: &[u8] = b"softswitch-topo-lock";
const LOCK_TIMEOUT: Duration = Duration::from_secs(120);

impl GlobalLock {
    pub fn acquire() -> Result<Self, TopoError> {
        let addr = SocketAddr::from_abstract_name(LOCK_NAME).map_err(|source| TopoError::Io {
            context: "cannot make the lock's socket address".into(),
            source,
        })?;
        let start = Instant::now();
        loop {
            match UnixListener::bind_addr(&addr) {
                Ok(socket) => return Ok(Self { _socket: socket }),
                Err(e) if e.kind() == ErrorKind::AddrInUse => {
                    if start.elapsed() > LOCK_TIMEOUT {
                        return Err(TopoError::LockTimeout(LOCK_TIMEOUT));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(source) => {
                    return Err(TopoError::Io {
                        context: "cannot bind the topology lock socket".into(),
                        source,
                    })
                }
            }
        }
    }
}

fn topo_dir() -> PathBuf {
    PathBuf::from(RUN_DIR).join("topo")
}

fn state_path(prefix: &str) -> PathBuf {
    topo_dir().join(format!("{prefix}.topo"))
}

/// Marker: softswitch registered `bpf_dctcp` and will unregister it.
fn registered_marker() -> PathBuf {
    topo_dir().join("registered-bpf_dctcp")
}

/// Marker: softswitch attached the time-dilation sock_ops program; holds
/// the id of its map, which the kernel frees with the program.
fn dilation_marker() -> PathBuf {
    topo_dir().join("registered-dilation")
}

/// Names softswitch appended to `tcp_allowed_congestion_control`.
fn allowed_added_path() -> PathBuf {
    topo_dir().join("allowed-added")
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> TopoError {
    move |source| TopoError::Io { context, source }
}

/// Whether topology `prefix` has a state file.
pub fn exists(prefix: &str) -> bool {
    state_path(prefix).exists()
}

/// What a topology's state file records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoRecord {
    pub prefix: String,
    /// Congestion control the hosts use; empty while `up` is choosing it.
    pub cc: String,
    pub hosts: usize,
    /// The process that ran `up`.
    pub pid: u32,
    /// Time dilation of the hosts' timers.
    pub dilation: Dilation,
    /// Cookies of the namespaces in the time-dilation program's map.
    pub netns_cookies: Vec<u64>,
}

impl TopoRecord {
    fn to_text(&self) -> String {
        let cookies: Vec<String> = self.netns_cookies.iter().map(u64::to_string).collect();
        format!(
            "prefix={}\ncc={}\nhosts={}\npid={}\ndilation={}\nnetns_cookies={}\n",
            self.prefix,
            self.cc,
            self.hosts,
            self.pid,
            self.dilation,
            cookies.join(",")
        )
    }

    fn from_text(text: &str) -> Option<Self> {
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
        };
        Some(Self {
            prefix: get("prefix")?,
            cc: get("cc").unwrap_or_default(),
            hosts: get("hosts")?.parse().ok()?,
            pid: get("pid")?.parse().ok()?,
            dilation: match get("dilation") {
                Some(d) => d.parse().ok()?,
                None => Dilation::NONE,
            },
            netns_cookies: get("netns_cookies")
                .unwrap_or_default()
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?,
        })
    }
}

/// Writes (or rewrites) the state file of `record.prefix`.
pub fn write_record(record: &TopoRecord) -> Result<(), TopoError> {
    fs::create_dir_all(topo_dir())
        .map_err(io(format!("cannot create {}", topo_dir().display())))?;
    let path = state_path(&record.prefix);
    fs::write(&path, record.to_text()).map_err(io(format!("cannot write {}", path.display())))
}

/// The state file of `prefix`, if there is a readable one.
pub fn read_record(prefix: &str) -> Option<TopoRecord> {
    TopoRecord::from_text(&fs::read_to_string(state_path(prefix)).ok()?)
}

/// Removes the state file of `prefix`; returns whether there was one.
pub fn remove_record(prefix: &str) -> Result<bool, TopoError> {
    let path = state_path(prefix);
    match fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(source) => Err(TopoError::Io {
            context: format!("cannot remove {}", path.display()),
            source,
        }),
    }
}

/// All topologies with a state file (live, or crashed and not yet downed).
pub fn records() -> Vec<TopoRecord> {
    let Ok(dir) = fs::read_dir(topo_dir()) else {
        return Vec::new();
    };
    let mut out: Vec<TopoRecord> = dir
        .filter_map(|e| {
            let path = e.ok()?.path();
            if path.extension()? != "topo" {
                return None;
            }
            TopoRecord::from_text(&fs::read_to_string(path).ok()?)
        })
        .collect();
    out.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    out
}

/// Makes congestion control `wanted` (or DCTCP when `None`) usable by new
/// namespaces and returns its name: registers `bpf_dctcp` if needed and adds
/// the name to `tcp_allowed_congestion_control`, recording both for
/// [`release_shared`]. Call with the [`GlobalLock`] held.
pub fn acquire_cc(wanted: Option<&str>) -> Result<String, TopoError> {
    let available = cc::available()?;
    let name = match wanted {
        Some(name) => {
            if !available.iter().any(|n| n == name) {
                return Err(TopoError::CcUnavailable {
                    name: name.to_owned(),
                    available: available.join(" "),
                });
            }
            name.to_owned()
        }
        None => match cc::pick_dctcp(&dctcp_candidates(available)?) {
            Some(name) => name.to_owned(),
            None => {
                cc::register_bpf_dctcp()?;
                fs::create_dir_all(topo_dir())
                    .map_err(io(format!("cannot create {}", topo_dir().display())))?;
                fs::write(registered_marker(), format!("{}\n", cc::DCTCP_LINK_PIN)).map_err(io(
                    format!("cannot write {}", registered_marker().display()),
                ))?;
                cc::BPF_DCTCP.to_owned()
            }
        },
    };

    let allowed = cc::allowed()?;
    if !allowed.iter().any(|n| n == &name) {
        // Record first: if writing the sysctl half-works, down still undoes it.
        let mut added = read_allowed_added();
        if !added.contains(&name) {
            added.push(name.clone());
        }
        fs::write(allowed_added_path(), added.join("\n") + "\n").map_err(io(format!(
            "cannot write {}",
            allowed_added_path().display()
        )))?;
        let mut new_list = allowed;
        new_list.push(name.clone());
        cc::write_allowed(&new_list.join(" "))?;
    }
    Ok(name)
}

/// The available list as DCTCP may be picked from it: a `bpf_dctcp` that
/// no pin of ours holds may be one whose release is still under way (the
/// kernel drops it a moment after the last link reference goes, e.g. after
/// another process's `down`). Wait for it to go; one that stays was
/// registered by someone else (e.g. `bpftool struct_ops register`) and is
/// used as it is.
fn dctcp_candidates(available: Vec<String>) -> Result<Vec<String>, TopoError> {
    let unpinned_bpf = available.iter().any(|n| n == cc::BPF_DCTCP)
        && !available.iter().any(|n| n == cc::KERNEL_DCTCP)
        && !cc::bpf_dctcp_pinned();
    if unpinned_bpf && cc::wait_until_unlisted(cc::BPF_DCTCP, Duration::from_secs(1))? {
        return cc::available();
    }
    Ok(available)
}

/// Makes sure the time-dilation sock_ops program is attached (by this or
/// an earlier `up`), recording it for [`release_shared`] before attaching.
/// Call with the [`GlobalLock`] held.
pub fn acquire_dilation() -> Result<(), TopoError> {
    if dilation_marker().exists() && dilation::is_registered() {
        return Ok(());
    }
    fs::create_dir_all(topo_dir())
        .map_err(io(format!("cannot create {}", topo_dir().display())))?;
    // Record first: a crash between attaching and recording is still undone.
    fs::write(dilation_marker(), "")
        .map_err(io(format!("cannot write {}", dilation_marker().display())))?;
    let map_id = dilation::register()?;
    fs::write(dilation_marker(), format!("{map_id}\n"))
        .map_err(io(format!("cannot write {}", dilation_marker().display())))
}

fn read_allowed_added() -> Vec<String> {
    fs::read_to_string(allowed_added_path())
        .map(|s| cc::parse_cc_list(&s))
        .unwrap_or_default()
}

/// What [`release_shared`] undid.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Released {
    /// The new `tcp_allowed_congestion_control`, if it was changed back.
    pub allowed_restored: Option<String>,
    /// The struct_ops unregistered, if any.
    pub unregistered: Option<String>,
    /// Whether the time-dilation sock_ops program was detached.
    pub dilation_detached: bool,
}

/// If no topology is left, undoes the machine-wide changes `up` recorded.
/// Call with the [`GlobalLock`] held.
pub fn release_shared() -> Result<Released, TopoError> {
    let mut released = Released::default();
    if !records().is_empty() {
        return Ok(released);
    }
    let added = read_allowed_added();
    if !added.is_empty() {
        let now = cc::allowed()?;
        if now.iter().any(|n| added.contains(n)) {
            let restored = cc::list_without(&now, &added);
            cc::write_allowed(&restored)?;
            released.allowed_restored = Some(restored);
        }
    }
    match fs::remove_file(allowed_added_path()) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(source) => {
            return Err(TopoError::Io {
                context: format!("cannot remove {}", allowed_added_path().display()),
                source,
            })
        }
    }
    if registered_marker().exists() {
        if cc::unregister_bpf_dctcp()? {
            released.unregistered = Some(cc::BPF_DCTCP.to_owned());
        }
        fs::remove_file(registered_marker()).map_err(io(format!(
            "cannot remove {}",
            registered_marker().display()
        )))?;
    }
    if let Ok(text) = fs::read_to_string(dilation_marker()) {
        // Empty: the attach was under way; remove whatever pins it made.
        released.dilation_detached = dilation::unregister(text.trim().parse().ok())?;
        fs::remove_file(dilation_marker())
            .map_err(io(format!("cannot remove {}", dilation_marker().display())))?;
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let r = TopoRecord {
            prefix: "ss".into(),
            cc: "bpf_dctcp".into(),
            hosts: 4,
            pid: 1234,
            dilation: Dilation::new(4.0).unwrap(),
            netns_cookies: vec![4096, 8193],
        };
        assert_eq!(TopoRecord::from_text(&r.to_text()), Some(r));
        let pending = TopoRecord {
            prefix: "ss".into(),
            cc: String::new(),
            hosts: 1,
            pid: 1,
            dilation: Dilation::NONE,
            netns_cookies: vec![],
        };
        assert_eq!(TopoRecord::from_text(&pending.to_text()), Some(pending));
        assert_eq!(TopoRecord::from_text("cc=x\n"), None);
        // A state file of an earlier softswitch (no dilation lines) still reads.
        let old = TopoRecord::from_text("prefix=ss\ncc=cubic\nhosts=2\npid=7\n").unwrap();
        assert_eq!((old.dilation, old.netns_cookies), (Dilation::NONE, vec![]));
        assert_eq!(
            TopoRecord::from_text("prefix=ss\nhosts=2\npid=7\nnetns_cookies=1,x\n"),
            None
        );
    }
}

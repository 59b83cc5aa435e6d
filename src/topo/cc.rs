//! Congestion control for the hosts: finding DCTCP (the kernel's `dctcp`, or
//! loading and registering the project's BPF struct_ops `bpf_dctcp`), and
//! letting non-root namespaces select it.
//!
//! `bpf/dctcp.bpf.c` is compiled at build time (build.rs: clang against a
//! `vmlinux.h` from `bpftool btf dump`; CO-RE field accesses) and embedded in
//! the binary. `topo up` loads it with libbpf-rs — libbpf relocates it to the
//! running kernel's BTF — and registers it through a struct_ops BPF link
//! (`.struct_ops.link`, Linux ≥ 6.4). A link lives only while someone holds
//! it, so it is pinned at [`DCTCP_LINK_PIN`] to outlive the `topo up`
//! process; `topo down` removes the pin, which unregisters `bpf_dctcp`.
//! Neither clang nor bpftool is needed at run time.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapType, ObjectBuilder, PrintLevel};

use super::TopoError;

/// Source of the BPF struct_ops DCTCP (compiled into [`DCTCP_BPF_OBJECT`]).
pub const DCTCP_BPF_SOURCE: &str = include_str!("../../bpf/dctcp.bpf.c");

/// The compiled object; empty when the build could not make it.
pub const DCTCP_BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/dctcp.bpf.o"));

/// Why the build could not make [`DCTCP_BPF_OBJECT`] (empty when it did).
const DCTCP_BPF_UNAVAILABLE: &str =
    include_str!(concat!(env!("OUT_DIR"), "/dctcp.bpf.unavailable"));

/// Name of the kernel's built-in DCTCP.
pub const KERNEL_DCTCP: &str = "dctcp";

/// Name (both `tcp_congestion_ops.name` and struct_ops map name) of ours.
pub const BPF_DCTCP: &str = "bpf_dctcp";

/// Runtime directory for the topology state.
pub const RUN_DIR: &str = "/run/softswitch";

/// Where the struct_ops link that registers [`BPF_DCTCP`] is pinned (bpffs).
pub const DCTCP_LINK_PIN: &str = "/sys/fs/bpf/softswitch/bpf_dctcp_link";

/// How long the kernel may take to drop a congestion control once the last
/// reference to its struct_ops link is gone. Removing the pin does not
/// unregister at once: the bpffs inode is freed after an RCU grace period and
/// the link is put from a workqueue, so for a moment `bpf_dctcp` is still
/// listed although nothing holds it (measured: a `topo up` right after a
/// `topo down` found it listed, then could not select it).
pub const UNREGISTER_WAIT: Duration = Duration::from_secs(5);

const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Splits a congestion control list as the kernel prints it
/// (`tcp_available_congestion_control`, `tcp_allowed_congestion_control`):
/// names separated by whitespace.
pub fn parse_cc_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Which DCTCP to use given the available list: the kernel's if present,
/// else an already registered `bpf_dctcp`; `None` means build and register.
pub fn pick_dctcp(available: &[String]) -> Option<&'static str> {
    if available.iter().any(|n| n == KERNEL_DCTCP) {
        Some(KERNEL_DCTCP)
    } else if available.iter().any(|n| n == BPF_DCTCP) {
        Some(BPF_DCTCP)
    } else {
        None
    }
}

/// `list` without the names in `remove`, space separated, order kept.
pub fn list_without(list: &[String], remove: &[String]) -> String {
    list.iter()
        .filter(|n| !remove.contains(n))
        .cloned()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kernel's available congestion controls.
pub fn available() -> Result<Vec<String>, TopoError> {
    read_proc(AVAILABLE).map(|s| parse_cc_list(&s))
}

/// The congestion controls non-root namespaces may select.
pub fn allowed() -> Result<Vec<String>, TopoError> {
    read_proc(ALLOWED).map(|s| parse_cc_list(&s))
}

/// Sets `tcp_allowed_congestion_control` (root namespace).
pub fn write_allowed(list: &str) -> Result<(), TopoError> {
    fs::write(ALLOWED, format!("{list}\n")).map_err(|source| TopoError::Io {
        context: format!("cannot write `{list}` to {ALLOWED}"),
        source,
    })
}

fn read_proc(path: &str) -> Result<String, TopoError> {
    fs::read_to_string(path).map_err(|source| TopoError::Io {
        context: format!("cannot read {path}"),
        source,
    })
}

fn unavailable(reason: impl Into<String>) -> TopoError {
    TopoError::DctcpUnavailable {
        reason: reason.into(),
    }
}

/// libbpf's messages (the verifier log among them) while loading, so an
/// error can show them.
static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());

fn collect_libbpf_log(_level: PrintLevel, msg: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        log.push_str(&msg);
    }
}

fn libbpf_failure(what: &str, e: libbpf_rs::Error) -> TopoError {
    let log = LIBBPF_LOG.lock().map(|l| l.clone()).unwrap_or_default();
    unavailable(format!(
        "{what} failed: {e} (kernel without BPF struct_ops links (softswitch needs Linux ≥ 6.4, README, Requirements), or the \
         verifier rejected the program){}",
        if log.trim().is_empty() {
            String::new()
        } else {
            format!(":\n{}", super::cmd::tail(log.trim(), 40))
        }
    ))
}

/// Loads the embedded struct_ops DCTCP, registers it through a BPF link,
/// pins the link at [`DCTCP_LINK_PIN`] and checks that the kernel now offers
/// [`BPF_DCTCP`].
pub fn register_bpf_dctcp() -> Result<(), TopoError> {
    // A pin left by a registration the kernel has since dropped is stale.
    remove_pin()?;
    register_struct_ops_as(BPF_DCTCP, Path::new(DCTCP_LINK_PIN))
}

/// [`register_bpf_dctcp`] under another congestion control name (at most 15
/// bytes) and pin path: the kernel refuses a second `bpf_dctcp`, so a root
/// test uses this to check loading, registration and unpinning while another
/// `bpf_dctcp` is registered. Removing the pin unregisters it.
#[doc(hidden)]
pub fn register_struct_ops_as(name: &str, pin: &Path) -> Result<(), TopoError> {
    if DCTCP_BPF_OBJECT.is_empty() {
        return Err(unavailable(format!(
            "this softswitch was built without the BPF DCTCP ({}); install clang and bpftool \
             (`sudo scripts/setup.sh`) and rebuild",
            DCTCP_BPF_UNAVAILABLE.trim()
        )));
    }
    if name.is_empty() || name.len() > 15 {
        return Err(unavailable(format!(
            "congestion control name `{name}`: use 1 to 15 bytes"
        )));
    }
    if !Path::new(VMLINUX_BTF).exists() {
        return Err(unavailable(format!(
            "the kernel has no BTF ({VMLINUX_BTF} is missing; it needs CONFIG_DEBUG_INFO_BTF=y), \
             so a BPF struct_ops congestion control cannot be loaded"
        )));
    }
    let pin_dir = pin.parent().unwrap_or(Path::new("/sys/fs/bpf"));
    fs::create_dir_all(pin_dir).map_err(|source| TopoError::Io {
        context: format!(
            "cannot create {} (is bpffs mounted on /sys/fs/bpf? `mount -t bpf bpf /sys/fs/bpf`)",
            pin_dir.display()
        ),
        source,
    })?;

    if let Ok(mut log) = LIBBPF_LOG.lock() {
        log.clear();
    }
    let previous = libbpf_rs::set_print(Some((PrintLevel::Warn, collect_libbpf_log)));
    let registered = (|| {
        let mut open = ObjectBuilder::default()
            .open_memory(DCTCP_BPF_OBJECT)
            .map_err(|e| libbpf_failure("opening the embedded BPF DCTCP object", e))?;
        if name != BPF_DCTCP {
            rename_struct_ops(&mut open, name)?;
        }
        let mut obj = open
            .load()
            .map_err(|e| libbpf_failure("loading the BPF DCTCP", e))?;
        let mut map = obj
            .maps_mut()
            .find(|m| m.map_type() == MapType::StructOps && m.name() == BPF_DCTCP)
            .ok_or_else(|| unavailable("the embedded BPF object has no `bpf_dctcp` struct_ops"))?;
        let mut link = map
            .attach_struct_ops()
            .map_err(|e| libbpf_failure("registering the BPF DCTCP", e))?;
        link.pin(pin).map_err(|e| {
            unavailable(format!(
                "cannot pin the BPF DCTCP's link at {}: {e}",
                pin.display()
            ))
        })
        // `link` and `obj` are dropped here; the pin keeps the registration.
    })();
    libbpf_rs::set_print(previous);
    registered?;
    if !available()?.iter().any(|n| n == name) {
        let _ = fs::remove_file(pin);
        return Err(unavailable(format!(
            "the BPF DCTCP's link is pinned at {} but `{name}` does not appear in {AVAILABLE}",
            pin.display()
        )));
    }
    Ok(())
}

/// Rewrites `tcp_congestion_ops.name` in the struct_ops map's initial value.
fn rename_struct_ops(open: &mut libbpf_rs::OpenObject, name: &str) -> Result<(), TopoError> {
    let mut map = open
        .maps_mut()
        .find(|m| m.map_type() == MapType::StructOps && m.name() == BPF_DCTCP)
        .ok_or_else(|| unavailable("the embedded BPF object has no `bpf_dctcp` struct_ops"))?;
    let value = map
        .initial_value_mut()
        .ok_or_else(|| unavailable("the struct_ops map has no initial value"))?;
    let old = b"bpf_dctcp\0";
    let at = value
        .windows(old.len())
        .position(|w| w == old)
        .ok_or_else(|| unavailable("no `bpf_dctcp` name in the struct_ops value"))?;
    let field = &mut value[at..at + 16];
    field.fill(0);
    field[..name.len()].copy_from_slice(name.as_bytes());
    Ok(())
}

/// Waits until congestion control `name` is no longer in the kernel's
/// available list; whether it left within `limit`.
pub fn wait_until_unlisted(name: &str, limit: Duration) -> Result<bool, TopoError> {
    let start = Instant::now();
    loop {
        if !available()?.iter().any(|n| n == name) {
            return Ok(true);
        }
        if start.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `bpf_dctcp` is registered through the link pinned at
/// [`DCTCP_LINK_PIN`] (softswitch's own, live registration).
pub fn bpf_dctcp_pinned() -> bool {
    Path::new(DCTCP_LINK_PIN).exists()
}

/// Removes [`DCTCP_LINK_PIN`]; whether there was one.
fn remove_pin() -> Result<bool, TopoError> {
    match fs::remove_file(DCTCP_LINK_PIN) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(source) => Err(TopoError::Io {
            context: format!("cannot remove {DCTCP_LINK_PIN}"),
            source,
        }),
    }
}

/// Unregisters `bpf_dctcp`: removes the pinned link (the registration ends
/// with the link's last reference), or, for a registration made with
/// `bpftool struct_ops register` (a legacy struct_ops map without a link, as
/// older softswitch versions did), deletes the map's one element, which is
/// what `bpftool struct_ops unregister` does. Returns whether something was
/// unregistered.
pub fn unregister_bpf_dctcp() -> Result<bool, TopoError> {
    if remove_pin()? {
        // Return only once the kernel has dropped it, so that an `up` that
        // follows never picks a `bpf_dctcp` that is about to vanish.
        if !wait_until_unlisted(BPF_DCTCP, UNREGISTER_WAIT)? {
            return Err(unavailable(format!(
                "`{BPF_DCTCP}` is still registered {} s after its link's pin at \
                 {DCTCP_LINK_PIN} was removed: another process holds the link open \
                 (`bpftool link show` names it); stop that process",
                UNREGISTER_WAIT.as_secs()
            )));
        }
        return Ok(true);
    }
    // What counts is the congestion control, not the struct_ops map: after
    // an unregister the kernel removes `bpf_dctcp` from the available list at
    // once, but keeps the map until the last socket of a deleted namespace
    // that used it is gone, which can take a minute (TIME_WAIT).
    if !available()?.iter().any(|n| n == BPF_DCTCP) {
        return Ok(false);
    }
    let legacy = libbpf_rs::query::MapInfoIter::default()
        .filter(|m| m.ty == MapType::StructOps && m.name.to_bytes() == BPF_DCTCP.as_bytes())
        .map(|m| m.id)
        .collect::<Vec<_>>();
    let mut unregistered = false;
    for id in legacy {
        let Ok(map) = libbpf_rs::MapHandle::from_map_id(id) else {
            continue;
        };
        // A link-based map refuses the delete; only a legacy one is removed.
        unregistered |= map.delete(&0u32.to_ne_bytes()).is_ok();
    }
    if !unregistered && available()?.iter().any(|n| n == BPF_DCTCP) {
        return Err(unavailable(format!(
            "`{BPF_DCTCP}` is registered but not by a link pinned at {DCTCP_LINK_PIN}; \
             whoever registered it must remove it"
        )));
    }
    Ok(unregistered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_available_list() {
        assert_eq!(
            parse_cc_list("reno bbr cubic\n"),
            v(&["reno", "bbr", "cubic"])
        );
        assert_eq!(
            parse_cc_list("reno\tcubic  bpf_dctcp"),
            v(&["reno", "cubic", "bpf_dctcp"])
        );
        assert!(parse_cc_list("\n").is_empty());
    }

    #[test]
    fn prefers_kernel_dctcp_then_registered_bpf() {
        assert_eq!(
            pick_dctcp(&v(&["reno", "dctcp", "bpf_dctcp"])),
            Some("dctcp")
        );
        assert_eq!(pick_dctcp(&v(&["reno", "bpf_dctcp"])), Some("bpf_dctcp"));
        assert_eq!(pick_dctcp(&v(&["reno", "bbr", "cubic"])), None);
        // "dctcp" must match a whole name.
        assert_eq!(pick_dctcp(&v(&["dctcp_x", "xdctcp"])), None);
    }

    #[test]
    fn removes_only_added_names() {
        let now = v(&["reno", "bbr", "bpf_dctcp", "cubic"]);
        assert_eq!(list_without(&now, &v(&["bpf_dctcp", "cubic"])), "reno bbr");
        assert_eq!(list_without(&now, &[]), "reno bbr bpf_dctcp cubic");
    }

    #[test]
    fn embedded_source_is_the_struct_ops_dctcp() {
        assert!(DCTCP_BPF_SOURCE.contains("SEC(\".struct_ops.link\")"));
        assert!(DCTCP_BPF_SOURCE.contains(".name = \"bpf_dctcp\""));
        assert!(DCTCP_BPF_SOURCE.contains("struct tcp_congestion_ops bpf_dctcp"));
        assert!(DCTCP_BPF_SOURCE.contains("TCP_CONG_NEEDS_ECN"));
    }

    #[test]
    fn embedded_object_is_built_or_says_why_not() {
        if DCTCP_BPF_OBJECT.is_empty() {
            assert!(!DCTCP_BPF_UNAVAILABLE.trim().is_empty());
        } else {
            // An ELF object for the BPF machine (EM_BPF = 247).
            assert_eq!(&DCTCP_BPF_OBJECT[..4], b"\x7fELF");
            assert_eq!(
                u16::from_le_bytes([DCTCP_BPF_OBJECT[18], DCTCP_BPF_OBJECT[19]]),
                247
            );
            assert!(DCTCP_BPF_UNAVAILABLE.is_empty());
            let text = String::from_utf8_lossy(DCTCP_BPF_OBJECT);
            assert!(text.contains(".struct_ops.link"));
        }
    }
}

//! Congestion control for the hosts: finding DCTCP (the kernel's `dctcp`, or
//! building and registering the project's BPF struct_ops `bpf_dctcp`), and
//! letting non-root namespaces select it.
//!
//! `bpf/dctcp.bpf.c` is embedded in the binary and compiled at `topo up`
//! against a `vmlinux.h` dumped from the running kernel's BTF, so the program
//! always matches the kernel it is loaded into. The object is cached under
//! [`RUN_DIR`] by a hash of the source, the kernel release and the
//! architecture. Registration uses `bpftool struct_ops register` (legacy
//! `.struct_ops` section): the registration outlives bpftool until
//! `bpftool struct_ops unregister name bpf_dctcp`.

use std::fs;
use std::path::{Path, PathBuf};

use super::cmd::{self, BPFTOOL, CLANG};
use super::TopoError;

/// Source of the BPF struct_ops DCTCP.
pub const DCTCP_BPF_SOURCE: &str = include_str!("../../bpf/dctcp.bpf.c");

/// Name of the kernel's built-in DCTCP.
pub const KERNEL_DCTCP: &str = "dctcp";

/// Name (both `tcp_congestion_ops.name` and struct_ops map name) of ours.
pub const BPF_DCTCP: &str = "bpf_dctcp";

/// Runtime directory for the build cache and the topology state.
pub const RUN_DIR: &str = "/run/softswitch";

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

/// 64-bit FNV-1a: a hash that is stable across Rust versions, for cache keys.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separator, so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// clang's `-D__TARGET_ARCH_*` and the multiarch include dir for this build.
fn target_arch_flags() -> (Option<&'static str>, Option<&'static str>) {
    match std::env::consts::ARCH {
        "x86_64" => (
            Some("-D__TARGET_ARCH_x86"),
            Some("/usr/include/x86_64-linux-gnu"),
        ),
        "aarch64" => (
            Some("-D__TARGET_ARCH_arm64"),
            Some("/usr/include/aarch64-linux-gnu"),
        ),
        _ => (None, None),
    }
}

fn unavailable(reason: impl Into<String>) -> TopoError {
    TopoError::DctcpUnavailable {
        reason: reason.into(),
    }
}

/// Compiles `bpf/dctcp.bpf.c` for the running kernel, or returns the cached
/// object. Errors say why DCTCP cannot be built.
pub fn build_bpf_dctcp() -> Result<PathBuf, TopoError> {
    if !Path::new(VMLINUX_BTF).exists() {
        return Err(unavailable(format!(
            "the kernel has no BTF ({VMLINUX_BTF} is missing; it needs CONFIG_DEBUG_INFO_BTF=y), \
             so a BPF struct_ops congestion control cannot be built"
        )));
    }
    for tool in [CLANG, BPFTOOL] {
        if cmd::find_tool(tool.name).is_none() {
            return Err(unavailable(format!(
                "`{}` is not installed (needed to build and register the BPF DCTCP): \
                 apt-get install {} or run `sudo scripts/setup.sh`",
                tool.name, tool.package
            )));
        }
    }
    let release = read_proc("/proc/sys/kernel/osrelease")?;
    let key = fnv1a64(&[
        DCTCP_BPF_SOURCE.as_bytes(),
        release.trim().as_bytes(),
        std::env::consts::ARCH.as_bytes(),
    ]);
    let dir = Path::new(RUN_DIR).join(format!("dctcp-{key:016x}"));
    let obj = dir.join("dctcp.bpf.o");
    if obj.exists() {
        return Ok(obj);
    }
    fs::create_dir_all(&dir).map_err(|source| TopoError::Io {
        context: format!("cannot create {}", dir.display()),
        source,
    })?;

    let vmlinux_h = dir.join("vmlinux.h");
    let out = cmd::output(cmd::command(BPFTOOL).args([
        "btf",
        "dump",
        "file",
        VMLINUX_BTF,
        "format",
        "c",
    ]))?;
    if !out.status.success() {
        return Err(unavailable(format!(
            "`bpftool btf dump file {VMLINUX_BTF} format c` failed: {}",
            cmd::tail(String::from_utf8_lossy(&out.stderr).trim(), 20)
        )));
    }
    write_file(&vmlinux_h, &out.stdout)?;
    let src = dir.join("dctcp.bpf.c");
    write_file(&src, DCTCP_BPF_SOURCE.as_bytes())?;

    let tmp_obj = dir.join(format!("dctcp.bpf.o.tmp{}", std::process::id()));
    let (arch_define, multiarch_include) = target_arch_flags();
    let mut clang = cmd::command(CLANG);
    clang.args(["-O2", "-g", "-Wall", "-target", "bpf"]);
    if let Some(d) = arch_define {
        clang.arg(d);
    }
    if let Some(i) = multiarch_include {
        clang.arg(format!("-I{i}"));
    }
    clang
        .arg(format!("-I{}", dir.display()))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&tmp_obj);
    let out = cmd::output(&mut clang)?;
    if !out.status.success() {
        let _ = fs::remove_file(&tmp_obj);
        return Err(unavailable(format!(
            "clang could not compile {} against this kernel's vmlinux.h:\n{}",
            src.display(),
            cmd::tail(String::from_utf8_lossy(&out.stderr).trim(), 30)
        )));
    }
    fs::rename(&tmp_obj, &obj).map_err(|source| TopoError::Io {
        context: format!("cannot rename {} to {}", tmp_obj.display(), obj.display()),
        source,
    })?;
    Ok(obj)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TopoError> {
    fs::write(path, bytes).map_err(|source| TopoError::Io {
        context: format!("cannot write {}", path.display()),
        source,
    })
}

/// Registers the struct_ops in `obj` and checks that the kernel now offers
/// [`BPF_DCTCP`].
pub fn register_bpf_dctcp(obj: &Path) -> Result<(), TopoError> {
    let out = cmd::output(
        cmd::command(BPFTOOL)
            .args(["struct_ops", "register"])
            .arg(obj),
    )?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(unavailable(format!(
            "`bpftool struct_ops register {}` failed (kernel without BPF struct_ops, or the \
             verifier rejected the program):\n{}",
            obj.display(),
            cmd::tail(stderr.trim(), 40)
        )));
    }
    if !available()?.iter().any(|n| n == BPF_DCTCP) {
        return Err(unavailable(format!(
            "bpftool registered {} but `{BPF_DCTCP}` does not appear in {AVAILABLE}",
            obj.display()
        )));
    }
    Ok(())
}

/// Names of the registered struct_ops maps (`bpftool struct_ops list`).
pub fn struct_ops_names() -> Result<Vec<String>, TopoError> {
    let out = cmd::run(
        cmd::command(BPFTOOL).args(["struct_ops", "list"]),
        "check that bpftool works: `bpftool struct_ops list`",
    )?;
    Ok(parse_struct_ops_list(&out))
}

/// Parses `bpftool struct_ops list` lines such as
/// `28: bpf_dctcp       tcp_congestion_ops`.
pub fn parse_struct_ops_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (id, rest) = l.split_once(':')?;
            id.trim().parse::<u32>().ok()?;
            rest.split_whitespace().next().map(str::to_owned)
        })
        .collect()
}

/// `bpftool struct_ops unregister name bpf_dctcp`, if it is registered.
/// Returns whether something was unregistered.
pub fn unregister_bpf_dctcp() -> Result<bool, TopoError> {
    // What counts is the congestion control, not the struct_ops map: after
    // an unregister the kernel removes `bpf_dctcp` from the available list at
    // once, but keeps the map (and `bpftool struct_ops unregister` answers
    // "Operation now in progress") until the last socket of a deleted
    // namespace that used it is gone, which can take a minute (TIME_WAIT).
    let in_use = || -> Result<bool, TopoError> { Ok(available()?.iter().any(|n| n == BPF_DCTCP)) };
    if !in_use()? || !struct_ops_names()?.iter().any(|n| n == BPF_DCTCP) {
        return Ok(false);
    }
    let r = cmd::run(
        cmd::command(BPFTOOL).args(["struct_ops", "unregister", "name", BPF_DCTCP]),
        "unregister it by hand: `bpftool struct_ops unregister name bpf_dctcp`",
    );
    match r {
        Ok(_) => Ok(true),
        // Already being torn down by an earlier unregister.
        Err(_) if !in_use()? => Ok(true),
        Err(e) => Err(e),
    }
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
    fn parses_struct_ops_list() {
        let text = "28: bpf_dctcp       tcp_congestion_ops\n31: other  tcp_congestion_ops\n";
        assert_eq!(parse_struct_ops_list(text), v(&["bpf_dctcp", "other"]));
        assert!(parse_struct_ops_list("Registered x id 3\n").is_empty());
    }

    #[test]
    fn cache_key_changes_with_each_part() {
        let a = fnv1a64(&[b"src", b"6.18", b"x86_64"]);
        assert_ne!(a, fnv1a64(&[b"src", b"6.19", b"x86_64"]));
        assert_ne!(a, fnv1a64(&[b"src2", b"6.18", b"x86_64"]));
        assert_ne!(fnv1a64(&[b"ab", b"c"]), fnv1a64(&[b"a", b"bc"]));
        assert_eq!(a, fnv1a64(&[b"src", b"6.18", b"x86_64"]));
    }

    #[test]
    fn embedded_source_is_the_struct_ops_dctcp() {
        assert!(DCTCP_BPF_SOURCE.contains("SEC(\".struct_ops\")"));
        assert!(DCTCP_BPF_SOURCE.contains(".name = \"bpf_dctcp\""));
        assert!(DCTCP_BPF_SOURCE.contains("struct tcp_congestion_ops bpf_dctcp"));
        assert!(DCTCP_BPF_SOURCE.contains("TCP_CONG_NEEDS_ECN"));
    }
}

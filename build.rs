//! Builds the XDP program in `xdp-prog/` so that `src/xdp.rs` can embed it.
//!
//! The eBPF crate is built by a nested `cargo build --target bpfel-unknown-none
//! -Z build-std=core` on the same (stable) toolchain with `RUSTC_BOOTSTRAP=1`,
//! the way aya-build 0.2 does it (aya-build itself needs a newer rustc than
//! the 1.87 this project supports): a private target dir under `OUT_DIR` (sharing the outer one
//! makes cargo wait on its own lock), the outer build's compiler and flag
//! variables removed so they do not leak into a build for another target,
//! and the rustflags aya-ebpf expects (`bpf_target_arch`, BTF).
//!
//! Cargo re-runs this script only when a file under `xdp-prog/` changes, and
//! the nested build is incremental, so an unchanged program costs nothing.
//!
//! It also compiles the struct_ops DCTCP (`bpf/dctcp.bpf.c`) with clang
//! against a `vmlinux.h` that `bpftool btf dump` writes from the build
//! machine's kernel BTF. The `vmlinux.h` types carry
//! `preserve_access_index`, so libbpf relocates every field access to the
//! running kernel's layout when `softswitch topo up` loads the object:
//! clang and bpftool are needed at build time only. Without them (or
//! without kernel BTF) the build goes on with an empty object and `topo up`
//! says why it has no DCTCP. The time-dilation sockops program
//! (`bpf/dilation.bpf.c`) is built the same way, against the same header.
//!
//! And it embeds the git commit being built (`SOFTSWITCH_GIT_COMMIT`, read
//! from the repository's files without running git; "unknown" outside a
//! checkout), rebuilt when HEAD or the branch it points to moves, and
//! whether the sources differ from it (`SOFTSWITCH_GIT_DIRTY`: `git status`
//! over the source paths, re-checked when they or the index change).

use std::{
    env,
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
};

const XDP_CRATE_DIR: &str = "xdp-prog";
const XDP_BIN: &str = "softswitch-xdp";
const BPF_TARGET: &str = "bpfel-unknown-none";

fn main() {
    embed_git_commit();
    build_bpf_programs();
    for path in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={XDP_CRATE_DIR}/{path}");
    }
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let crate_dir = manifest_dir.join(XDP_CRATE_DIR);

    let path = search_path();
    if find_in(&path, "bpf-linker").is_none() {
        panic!(
            "\n\nbpf-linker not found (needed to link the XDP program in {XDP_CRATE_DIR}/).\n\
             Install it with:  sudo scripts/setup.sh\n\n"
        );
    }

    let target_dir = out_dir.join("xdp-prog-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&crate_dir)
        .args(["build", "--release", "--locked", "--target", BPF_TARGET])
        .args(["-Z", "build-std=core"])
        .arg("--target-dir")
        .arg(&target_dir);

    // Everything the outer cargo set for *this* build that a nested cargo would
    // pick up: compiler and wrappers, flags for the host target, target dir.
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let leaks = matches!(
            key,
            "RUSTC"
                | "RUSTDOC"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "RUSTFLAGS"
                | "RUSTDOCFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "CARGO_ENCODED_RUSTDOCFLAGS"
                | "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_INCREMENTAL"
        ) || key.starts_with("CARGO_BUILD_")
            || key.starts_with("CARGO_TARGET_")
            || key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_CFG_")
            || key.starts_with("CARGO_FEATURE_")
            || key.starts_with("CARGO_PKG_");
        if leaks {
            cmd.env_remove(key);
        }
    }
    // Stable rustc builds `core` for the bpf target only with this.
    cmd.env("RUSTC_BOOTSTRAP", "1");
    cmd.env("PATH", &path);
    // \x1f separates CARGO_ENCODED_RUSTFLAGS entries.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    cmd.env(
        "CARGO_ENCODED_RUSTFLAGS",
        format!("--cfg=bpf_target_arch=\"{arch}\"\x1f-Cdebuginfo=2\x1f-Clink-arg=--btf"),
    );

    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the XDP program: {e}"));
    if !output.status.success() {
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            println!("cargo:warning={line}");
        }
        panic!(
            "building the XDP program in {} failed ({}); the nested cargo's output is above.\n\
             If a tool is missing, run:  sudo scripts/setup.sh",
            crate_dir.display(),
            output.status
        );
    }

    let built = target_dir.join(BPF_TARGET).join("release").join(XDP_BIN);
    let dst = out_dir.join("softswitch-xdp.o");
    std::fs::copy(&built, &dst)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), dst.display()));
}

/// PATH plus `~/.cargo/bin`, where `cargo install bpf-linker` puts it even when
/// the user's PATH (e.g. under sudo) does not include it.
fn search_path() -> OsString {
    let mut dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    if let Some(bin) = cargo_home.map(|h| h.join("bin")) {
        if !dirs.contains(&bin) {
            dirs.push(bin);
        }
    }
    env::join_paths(dirs).expect("PATH entries contain no ':'")
}

fn find_in(path: &OsString, exe: &str) -> Option<PathBuf> {
    env::split_paths(path)
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
}

const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The BPF C programs build.rs compiles: source, and the stem of
/// `OUT_DIR/<stem>.bpf.o` (empty when it cannot be built) and
/// `OUT_DIR/<stem>.bpf.unavailable` (why not; empty when built).
const BPF_PROGRAMS: [(&str, &str, &str); 2] = [
    ("bpf/dctcp.bpf.c", "dctcp", "the BPF DCTCP"),
    (
        "bpf/dilation.bpf.c",
        "dilation",
        "the time-dilation sockops program",
    ),
];

fn build_bpf_programs() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let vmlinux = write_vmlinux_h(&out_dir);
    for (source, stem, what) in BPF_PROGRAMS {
        println!("cargo:rerun-if-changed={source}");
        let obj = out_dir.join(format!("{stem}.bpf.o"));
        let why = out_dir.join(format!("{stem}.bpf.unavailable"));
        let built = vmlinux
            .clone()
            .and_then(|()| compile_bpf(&out_dir, source, &obj));
        let reason = match built {
            Ok(()) => String::new(),
            Err(reason) => {
                println!("cargo:warning={what} is not built into this softswitch: {reason}");
                std::fs::write(&obj, b"").expect("write an empty BPF object");
                reason
            }
        };
        std::fs::write(&why, reason).expect("write OUT_DIR/<stem>.bpf.unavailable");
    }
}

/// PATH plus the sbin directories, where bpftool lives.
fn sbin_path() -> OsString {
    env::join_paths(
        env::split_paths(&search_path()).chain(["/usr/sbin", "/sbin"].map(PathBuf::from)),
    )
    .expect("PATH entries contain no ':'")
}

fn tool(name: &str) -> Result<PathBuf, String> {
    find_in(&sbin_path(), name).ok_or_else(|| {
        format!("`{name}` is not installed at build time (sudo scripts/setup.sh, then rebuild)")
    })
}

/// `OUT_DIR/vmlinux.h` from the build machine's kernel BTF.
fn write_vmlinux_h(out_dir: &Path) -> Result<(), String> {
    let bpftool = tool("bpftool")?;
    if !Path::new(VMLINUX_BTF).exists() {
        return Err(format!(
            "the build machine's kernel has no BTF ({VMLINUX_BTF}; CONFIG_DEBUG_INFO_BTF=y)"
        ));
    }
    let out = Command::new(&bpftool)
        .args(["btf", "dump", "file", VMLINUX_BTF, "format", "c"])
        .output()
        .map_err(|e| format!("cannot run bpftool: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`bpftool btf dump file {VMLINUX_BTF} format c` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    std::fs::write(out_dir.join("vmlinux.h"), &out.stdout)
        .map_err(|e| format!("cannot write vmlinux.h: {e}"))
}

fn compile_bpf(out_dir: &Path, source: &str, obj: &Path) -> Result<(), String> {
    let clang = tool("clang")?;
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let (define, multiarch) = match arch.as_str() {
        "x86_64" => ("-D__TARGET_ARCH_x86", "/usr/include/x86_64-linux-gnu"),
        "aarch64" => ("-D__TARGET_ARCH_arm64", "/usr/include/aarch64-linux-gnu"),
        other => return Err(format!("no BPF target flags for architecture `{other}`")),
    };
    let out = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-target", "bpf", define])
        .arg(format!("-I{multiarch}"))
        .arg(format!("-I{}", out_dir.display()))
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(obj)
        .output()
        .map_err(|e| format!("cannot run clang: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "clang could not compile {source}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Sets `SOFTSWITCH_GIT_COMMIT` to the commit HEAD names, or "unknown".
fn embed_git_commit() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let (commit, mut watch) = git_head(&manifest_dir).unwrap_or_else(|| ("unknown".into(), vec![]));
    let dirty = if commit == "unknown" {
        "unknown"
    } else {
        // The index moves on every add and commit; the sources on every
        // edit: either may change what `git status` says.
        if let Some(index) = watch.first().and_then(|head| head.parent()) {
            watch.push(index.join("index"));
        }
        watch.extend(SOURCES.iter().map(|p| manifest_dir.join(p)));
        sources_dirty(&manifest_dir)
    };
    for path in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rustc-env=SOFTSWITCH_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=SOFTSWITCH_GIT_DIRTY={dirty}");
}

/// What the binaries are built from: a change to any of these (tracked)
/// makes the build "dirty" — not the same as the commit it names.
const SOURCES: &[&str] = &[
    "src",
    "bpf",
    "xdp-prog/src",
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
];

/// "true" when a tracked file of [`SOURCES`] differs from HEAD (staged or
/// not), "false" when none does, "unknown" without git.
fn sources_dirty(repo: &Path) -> &'static str {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["status", "--porcelain", "--untracked-files=no", "--"])
        .args(SOURCES)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            if o.stdout.iter().all(|b| b.is_ascii_whitespace()) {
                "false"
            } else {
                "true"
            }
        }
        _ => "unknown",
    }
}

/// HEAD's commit and the files that say it (HEAD, the branch's ref,
/// packed-refs), in a checkout or a worktree (`.git` a file naming the
/// git directory).
fn git_head(repo: &Path) -> Option<(String, Vec<PathBuf>)> {
    let dot_git = repo.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = std::fs::read_to_string(&dot_git).ok()?;
        repo.join(text.strip_prefix("gitdir:")?.trim())
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(rel) => git_dir.join(rel.trim()),
        Err(_) => git_dir.clone(),
    };
    let head_path = git_dir.join("HEAD");
    let head = std::fs::read_to_string(&head_path).ok()?;
    let packed = common.join("packed-refs");
    let mut watch = vec![head_path, packed.clone()];
    let commit = match head.trim().strip_prefix("ref:") {
        None => head.trim().to_owned(),
        Some(name) => {
            let name = name.trim();
            let loose = common.join(name);
            watch.push(loose.clone());
            match std::fs::read_to_string(&loose) {
                Ok(c) => c.trim().to_owned(),
                Err(_) => std::fs::read_to_string(&packed)
                    .ok()?
                    .lines()
                    .find_map(|l| {
                        let (sha, r) = l.split_once(' ')?;
                        (r.trim() == name).then(|| sha.to_owned())
                    })?,
            }
        }
    };
    let is_hex = commit.len() >= 40 && commit.chars().all(|c| c.is_ascii_hexdigit());
    is_hex.then_some((commit, watch))
}

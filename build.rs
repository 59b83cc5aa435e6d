//! Builds the XDP program in `xdp-prog/` so that `src/xdp.rs` can embed it.
//!
//! The eBPF crate is built by a nested `cargo build --target bpfel-unknown-none
//! -Z build-std=core` on the same (stable) toolchain with `RUSTC_BOOTSTRAP=1`,
//! the way aya-build 0.2 does it (aya-build itself needs rustc 1.98, see
//! NOTES.md): a private target dir under `OUT_DIR` (sharing the outer one
//! makes cargo wait on its own lock), the outer build's compiler and flag
//! variables removed so they do not leak into a build for another target,
//! and the rustflags aya-ebpf expects (`bpf_target_arch`, BTF).
//!
//! Cargo re-runs this script only when a file under `xdp-prog/` changes, and
//! the nested build is incremental, so an unchanged program costs nothing.

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

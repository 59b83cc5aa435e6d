#!/usr/bin/env bash
# Installs everything softswitch needs on a fresh Debian 12 machine (run as root).
# Idempotent: each step is skipped when its result is already present.
set -euo pipefail

log() { printf '[setup] %s\n' "$*"; }
need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh must run as root (it installs packages): sudo $0" >&2
    exit 1
  fi
}
need_root

APT_PKGS=(
  clang llvm-22-dev libpolly-22-dev libzstd-dev  # bpf-linker (Rust XDP program) and the C struct_ops DCTCP
  bpftool                                          # build time only: vmlinux.h for the struct_ops DCTCP
  iproute2 ethtool iperf3 iputils-ping             # host namespaces and the demo
  libelf-dev zlib1g-dev pkg-config make           # libbpf-rs: libbpf-sys builds its vendored libbpf
  m4 libclang-dev llvm libpcap-dev                 # only for --features xsk-rs (libxdp-sys builds libxdp)
  fonts-dejavu-core                                # text in the experiment plots (plotters)
  tshark                                           # reads --pcap captures back in the netns tests
  slurm-wlm munge                                  # netns-tests/slurm.rs: scripts/slurm-sweep.sh on a Slurm of the test's own
                                                   # (no /etc/slurm/slurm.conf: Debian's slurmctld and slurmd services stay down)
)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
  log "adding rust-src (to build core for the bpfel target)"
  rustup component add rust-src
fi

if ! command -v bpf-linker >/dev/null 2>&1; then
  log "installing bpf-linker 0.13.0 against LLVM 22 (about a minute)"
  PATH="/usr/lib/llvm-22/bin:$PATH" LLVM_SYS_221_PREFIX=/usr/lib/llvm-22 cargo install --locked bpf-linker --version 0.13.0 \
    --no-default-features --features llvm-22
fi

if ! mountpoint -q /sys/fs/bpf; then
  log "mounting bpffs on /sys/fs/bpf"
  mount -t bpf bpf /sys/fs/bpf
fi
log "done"

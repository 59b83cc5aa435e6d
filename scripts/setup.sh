#!/usr/bin/env bash
# Installs everything softswitch needs on a fresh Debian 12 machine (run as root).
# Idempotent: each step is skipped when its result is already present.
#
# Usage: scripts/setup.sh [--install]
#   --install  then also build and install softswitch, softswitch-tg and
#              softswitch-exp (`cargo install --locked --path .`, into
#              $CARGO_HOME/bin: /root/.cargo/bin for root); run again, it
#              builds what changed and replaces the binaries.
# The kernel (Linux >= 6.4, README "Requirements") is yours to provide.
set -euo pipefail

install=0
for arg in "$@"; do
  case "$arg" in
    --install) install=1 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

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
  openssh-server                                   # netns-tests/exp.rs: a fabric part on a "machine" over SSH (the test's own sshd
                                                   # inside a namespace, on port 2222; Debian's ssh service is not started here)
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

if [ "$install" = 1 ]; then
  repo=$(cd "$(dirname "$0")/.." && pwd)
  bin_dir="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
  log "installing softswitch, softswitch-tg and softswitch-exp from $repo (cargo install --locked --path .)"
  # Again and again the same result: cargo builds what changed (in the
  # repository's target directory) and replaces the three binaries.
  (cd "$repo" && cargo install --locked --path .)
  for b in softswitch softswitch-tg softswitch-exp; do
    [ -x "$bin_dir/$b" ] || { echo "setup.sh: $bin_dir/$b is missing after cargo install" >&2; exit 1; }
  done
  log "installed into $bin_dir: softswitch, softswitch-tg, softswitch-exp"
  log "sudo resets PATH (secure_path), so under sudo call them by their full path,"
  log "  sudo $bin_dir/softswitch ...   or keep your PATH: sudo env PATH=\"\$PATH\" softswitch ..."
  case ":$PATH:" in
    *":$bin_dir:"*) ;;
    *) log "$bin_dir is not on this shell's PATH: add it (e.g. in ~/.profile) to call them by name" ;;
  esac
fi
log "done"

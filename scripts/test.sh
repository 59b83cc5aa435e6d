#!/usr/bin/env bash
# Runs the whole test suite: unit tests, then the namespace tests (root).
# Installs what is missing first (scripts/setup.sh). Usage: scripts/test.sh (as root;
# otherwise it re-runs itself with sudo)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  # Not root: ask sudo (where there is one) to re-run us.
  command -v sudo >/dev/null && exec sudo -E "$0" "$@"
  echo "scripts/test.sh needs root (namespace tests, XDP, packages): run it as root" >&2
  exit 1
fi
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# Optimised build: the namespace tests measure throughput through the switch.
# The `ci` profile is release without cross-crate LTO (Cargo.toml): it builds
# in about 60 % of the time, into target/ci (a release build is not reused).
# Namespace tests that measure throughput serialise themselves (netns-tests/common).
# Benchmarks run in test mode in the same invocation: each criterion benchmark
# runs once (a smoke test). Two test threads through the environment, since
# criterion's harness takes no --test-threads.
RUST_TEST_THREADS=2 cargo test --profile ci --lib --bins --tests --examples --benches

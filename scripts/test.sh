#!/usr/bin/env bash
# Runs the whole test suite: unit tests, then the namespace tests (root).
# Installs what is missing first (scripts/setup.sh). Usage: sudo scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh needs root (namespace tests, XDP, packages): sudo scripts/test.sh" >&2
  exit 1
fi
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
# Release build: the namespace tests measure throughput through the switch.
# Namespace tests that measure throughput serialise themselves (netns-tests/common).
cargo test --release --lib --bins --tests --examples -- --test-threads=2
# Benchmarks in test mode: each criterion benchmark runs once (a smoke test).
cargo test --release --benches

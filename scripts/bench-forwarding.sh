#!/usr/bin/env bash
# Forwarding benchmark: softswitch vs the Linux bridge on the same two-host
# topology, measured in one run. TCP throughput (iperf3, MTU 1500, 10 s,
# 3 repetitions, median), 64-byte-frame UDP packet rate, ping RTT; prints
# softswitch/bridge ratios. Usage: sudo scripts/bench-forwarding.sh [switch args]
# e.g. sudo scripts/bench-forwarding.sh --rate 0 --queues 8 --sched dwrr --aqm tcn
# Default switch args: --rate 0 (unshaped, so the switch itself is measured).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root: sudo $0" >&2; exit 1; }
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet
SS=$PWD/target/release/softswitch
SWARGS=("$@")
[ ${#SWARGS[@]} -gt 0 ] || SWARGS=(--rate 0)
P=bf$$
P=${P:0:7}
REPS=${REPS:-3}
SECS=${SECS:-10}
SW_PID=
cleanup() {
  [ -n "$SW_PID" ] && kill -INT "$SW_PID" 2>/dev/null && wait "$SW_PID" 2>/dev/null || true
  ip link del "${P}br" 2>/dev/null || true
  "$SS" topo down --prefix "$P" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
PORTS=$("$SS" topo up --hosts 2 --prefix "$P" 2>/dev/null)
H1=$P-h1; H2=$P-h2; IP2=10.99.0.2
A=${PORTS%,*}; B=${PORTS#*,}

. scripts/bench-lib.sh

echo "== Linux bridge"
ip link add "${P}br" type bridge
ip link set "$A" master "${P}br"; ip link set "$B" master "${P}br"; ip link set "${P}br" up
ip netns exec "$H1" ping -c 2 -i 0.2 "$IP2" >/dev/null
read -r BR_TCP BR_PPS BR_RTT BR_ALL < <(measure)
echo "bridge: TCP ${BR_TCP} Gbit/s (runs: $BR_ALL), UDP 64B ${BR_PPS} kpps, ping p50 ${BR_RTT} us"
ip link del "${P}br"

echo "== softswitch ${SWARGS[*]}"
LOG=$(mktemp)
"$SS" --ports "$PORTS" "${SWARGS[@]}" --stats-socket "/run/softswitch/$P.sock" >"$LOG.out" 2>"$LOG" &
SW_PID=$!
for _ in $(seq 100); do grep -q "forwarding between" "$LOG" && break; sleep 0.1; done
ip netns exec "$H1" ping -c 2 -i 0.2 "$IP2" >/dev/null
read -r SS_TCP SS_PPS SS_RTT SS_ALL < <(measure)
echo "softswitch: TCP ${SS_TCP} Gbit/s (runs: $SS_ALL), UDP 64B ${SS_PPS} kpps, ping p50 ${SS_RTT} us"
kill -INT "$SW_PID"; wait "$SW_PID" || true; SW_PID=
grep -E "^port|drops|^data path" "$LOG.out" || true
rm -f "$LOG" "$LOG.out"

python3 - "$BR_TCP" "$SS_TCP" "$BR_PPS" "$SS_PPS" "$BR_RTT" "$SS_RTT" <<'PY'
import sys
bt, st, bp, sp, br, sr = map(float, sys.argv[1:])
print("== ratios softswitch/bridge")
print(f"TCP throughput ratio   {st/bt:.2f}   (target >= 0.9)")
print(f"UDP 64B packet ratio   {sp/bp:.2f}")
print(f"ping RTT p50 overhead  {sr-br:+.0f} us (softswitch {sr:.0f} us, bridge {br:.0f} us; target <= 20 us)")
PY

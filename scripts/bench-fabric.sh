#!/usr/bin/env bash
# Fabric forwarding benchmark: a chain of K switches in one softswitch
# process (h1 on s1, h2 on sK, unshaped links, no delay; K = 1 2 4 8) against
# the Linux bridge on the same two hosts, measured in one run. TCP
# throughput (iperf3, MTU 1500, SECS s, REPS repetitions, median), 64-byte
# UDP packet rate, ping RTT p50; prints each K's ratio to the bridge and to
# K = 1. Usage: sudo scripts/bench-fabric.sh [switch args]
# Environment: KS ("1 2 4 8"), REPS (3), SECS (5).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root: sudo $0" >&2; exit 1; }
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet
SS=$PWD/target/release/softswitch
SWARGS=("$@")
P=bq$$
P=${P:0:7}
REPS=${REPS:-3}
SECS=${SECS:-5}
KS=${KS:-1 2 4 8}
SW_PID=
TOPO=$(mktemp --suffix .toml)
cleanup() {
  [ -n "$SW_PID" ] && kill -INT "$SW_PID" 2>/dev/null && wait "$SW_PID" 2>/dev/null || true
  ip link del "${P}br" 2>/dev/null || true
  "$SS" topo down --prefix "$P" >/dev/null 2>&1 || true
  rm -f "$TOPO"
}
trap cleanup EXIT INT TERM
PORTS=$("$SS" topo up --hosts 2 --prefix "$P" 2>/dev/null)
H1=$P-h1; H2=$P-h2; IP2=10.99.0.2
A=${PORTS%,*}; B=${PORTS#*,}

. scripts/bench-lib.sh

chain() { # the topology of K switches in a row
  local k=$1 i
  echo '[defaults]'
  echo 'rate = "0"'
  for i in $(seq "$k"); do
    echo '[[switch]]'; echo "name = \"s$i\""
    if [ "$k" = 1 ]; then echo 'hosts = ["h1", "h2"]'
    elif [ "$i" = 1 ]; then echo 'hosts = ["h1"]'
    elif [ "$i" = "$k" ]; then echo 'hosts = ["h2"]'; fi
  done
  for i in $(seq $((k - 1))); do
    echo '[[link]]'; echo "a = \"s$i\""; echo "b = \"s$((i + 1))\""
  done
}

RESULTS=()
echo "== Linux bridge"
ip link add "${P}br" type bridge
ip link set "$A" master "${P}br"; ip link set "$B" master "${P}br"; ip link set "${P}br" up
ip netns exec "$H1" ping -c 2 -i 0.2 "$IP2" >/dev/null
read -r BR_TCP BR_PPS BR_RTT BR_ALL < <(measure)
echo "bridge: TCP ${BR_TCP} Gbit/s (runs: $BR_ALL), UDP 64B ${BR_PPS} kpps, ping p50 ${BR_RTT} us"
ip link del "${P}br"

for K in $KS; do
  chain "$K" > "$TOPO"
  echo "== softswitch: a chain of $K switch(es) ${SWARGS[*]}"
  LOG=$(mktemp)
  "$SS" --topology "$TOPO" --ports "$PORTS" "${SWARGS[@]}" --stats-socket "/run/softswitch/$P.sock" >"$LOG.out" 2>"$LOG" &
  SW_PID=$!
  for _ in $(seq 100); do grep -q "forwarding between" "$LOG" && break; sleep 0.1; done
  ip netns exec "$H1" ping -c 2 -i 0.2 "$IP2" >/dev/null
  read -r T U R ALL < <(measure)
  echo "chain/$K: TCP $T Gbit/s (runs: $ALL), UDP 64B $U kpps, ping p50 $R us"
  kill -INT "$SW_PID"; wait "$SW_PID" || true; SW_PID=
  grep -E "drops: [^n]|NOT FAITHFUL|UMEM|every frame" "$LOG.out" | head -5 || true
  rm -f "$LOG" "$LOG.out"
  RESULTS+=("$K $T $U $R")
done

printf '%s\n' "${RESULTS[@]}" | python3 -c '
import sys
bt, bp, br = map(float, sys.argv[1:4])
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
one = rows[0]
print("== ratios (to the Linux bridge | to the first chain)")
print("switches  TCP Gbit/s  x bridge  x first   UDP kpps  x bridge  x first   ping p50 us  +bridge")
for k, t, u, r in rows:
    print(f"{int(k):8d}  {t:10.2f}  {t/bt:8.2f}  {t/one[1]:7.2f}   {u:8.0f}  {u/bp:8.2f}  {u/one[2]:7.2f}   {r:11.0f}  {r-br:+7.0f}")
' "$BR_TCP" "$BR_PPS" "$BR_RTT"

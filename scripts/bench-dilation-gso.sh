#!/usr/bin/env bash
# Why a dilated run queues more than an undilated one: one long
# DCTCP flow h1 -> h2 through one switch port at RATE (emulated), DCTCP K =
# 30 KB, 100 us (emulated) of delay per port, the switch at each D of DS and
# the hosts' GSO limited to each of GSOS segments per packet (0 = Linux's own
# sizing, ~1 ms of data at the pacing rate in real time). Configurations
# alternate run by run, so all see the same machine. Prints per run: the
# emulated goodput, the receiver port's median and 99th-percentile sojourn
# (emulated), CE marks per packet dequeued there, and the share of its
# backlogged link time lost (the fidelity guard's figure, real time).
# Usage: sudo scripts/bench-dilation-gso.sh
# Environment: RATE (100mbit), DS ("1 4"), GSOS ("0 1"), HOST_D (1: the
#              hosts' timers undilated; "same": dilated by the switch's D),
#              SECS (10), RUNS (2), PREFIX (dg).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && exec sudo -E "$0" "$@"
  echo "scripts/bench-dilation-gso.sh needs root (namespaces, XDP)" >&2
  exit 1
fi
RATE=${RATE:-100mbit}
DS=${DS:-1 4}
GSOS=${GSOS:-0 1}
HOST_D=${HOST_D:-1}
SECS=${SECS:-10}
RUNS=${RUNS:-2}
PREFIX=${PREFIX:-dg}
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet
SS=target/release/softswitch
TMP=$(mktemp -d)
SW_PID=
cleanup() {
  if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then kill -INT "$SW_PID"; wait "$SW_PID" || true; fi
  ip netns pids "$PREFIX-h1" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$PREFIX-h2" 2>/dev/null | xargs -r kill 2>/dev/null || true
  "$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

one() { # D GSO
  local d=$1 gso=$2 hd=$HOST_D
  [ "$hd" = same ] && hd=$d
  local up=(--hosts 2 --prefix "$PREFIX" --dilation "$hd")
  [ "$gso" != 0 ] && up+=(--gso-segs "$gso")
  "$SS" topo up "${up[@]}" >/dev/null 2>"$TMP/up.err" || { cat "$TMP/up.err" >&2; exit 1; }
  local ip2
  ip2=$(ip -n "$PREFIX-h2" -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)
  "$SS" --ports "$PREFIX-h1-sw,$PREFIX-h2-sw" --rate "$RATE" --aqm dctcp --aqm-opt k=30kb \
    --delay 100us --dilation "$d" --json >"$TMP/sw.json" 2>"$TMP/sw.err" &
  SW_PID=$!
  sleep 1.5
  ip netns exec "$PREFIX-h1" ping -c 3 -i 0.2 -q "$ip2" >/dev/null
  ip netns exec "$PREFIX-h2" iperf3 -s -1 -D >/dev/null
  sleep 0.3
  ip netns exec "$PREFIX-h1" iperf3 -c "$ip2" -t "$SECS" -O 2 -J >"$TMP/iperf.json"
  kill -INT "$SW_PID"; wait "$SW_PID" || true; SW_PID=
  "$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1
  python3 - "$d" "$gso" "$hd" "$TMP/sw.json" "$TMP/iperf.json" <<'PY'
import json, sys
d, gso, hd = sys.argv[1:4]
sw = json.load(open(sys.argv[4])); ip = json.load(open(sys.argv[5]))
p = sw["ports"][1]; eg = p["egress"]["port"]
marks = sum(v.get("pkts", 0) for v in eg["marked"].values())
deq = max(1, eg["dequeued"]["pkts"])
gp = ip["end"]["sum_received"]["bits_per_second"] * float(d) / 1e6
print(f"D={d} gso_segs={gso} host_D={hd}  goodput {gp:.1f} Mbit/s  sojourn p50 {eg['sojourn']['p50_us']:.0f} us"
      f" p99 {eg['sojourn']['p99_us']:.0f} us  marks/pkt {marks / deq:.4f}  lost {p['link']['lost_fraction'] * 100:.2f} %")
PY
}

for run in $(seq "$RUNS"); do
  for d in $DS; do
    for gso in $GSOS; do
      one "$d" "$gso"
    done
  done
done

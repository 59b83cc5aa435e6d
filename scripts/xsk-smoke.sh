#!/usr/bin/env bash
# Smoke test of the XDP program + AF_XDP layer with examples/xsk_forward.rs:
#
#   ns sx1 (10.77.0.1) sx1h ── sx1s ┐                    ┌ sx2s ── sx2h (10.77.0.2) ns sx2
#                                   └─ xsk_forward (root ns) ┘
#
# Checks: ping works, iperf3 TCP for 10 s gets Gbit/s, the forwarder's frame
# accounting adds up (0 lost frames), and kill -9 of the forwarder leaves no
# XDP program on the ports. Needs root. Everything it creates starts with
# `sx` and is deleted on exit (trap), whatever happens.
#
#   sudo scripts/xsk-smoke.sh            # builds the example (release) first
#   IPERF_SECONDS=30 FWD_ARGS='--rx 256 --fill 512' sudo scripts/xsk-smoke.sh
#   EXAMPLE=xsk_forward_xskrs FEATURES=xsk-rs sudo scripts/xsk-smoke.sh   # on xsk-rs
#
# FWD_ARGS defaults to `--rx 2048 --fill 4096`: on a 2-vCPU machine shared
# with the iperf3 processes (and anything else) the forwarder is descheduled
# for milliseconds and the library's small default rx ring overflows.
set -euo pipefail

IPERF_SECONDS=${IPERF_SECONDS:-10}
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then echo "run as root: sudo $0" >&2; exit 1; fi
for t in ip ethtool tc iperf3 ping; do
  command -v "$t" >/dev/null || { echo "missing $t: run sudo scripts/setup.sh" >&2; exit 1; }
done

TARGET_DIR=${CARGO_TARGET_DIR:-target}
# EXAMPLE=xsk_forward_xskrs FEATURES=xsk-rs: the same forwarder on xsk-rs.
EXAMPLE=${EXAMPLE:-xsk_forward}
echo "== building examples/$EXAMPLE (release)"
cargo build --release --example "$EXAMPLE" ${FEATURES:+--features "$FEATURES"} >/dev/null
BIN="$TARGET_DIR/release/examples/$EXAMPLE"

FWD_PID=
IPERF_PID=
LOG=$(mktemp /tmp/sx-smoke.XXXXXX)
cleanup() {
  set +e
  [ -n "$IPERF_PID" ] && kill "$IPERF_PID" 2>/dev/null
  [ -n "$FWD_PID" ] && kill "$FWD_PID" 2>/dev/null && wait "$FWD_PID" 2>/dev/null
  ip netns del sx1 2>/dev/null
  ip netns del sx2 2>/dev/null
  ip link del sxbr 2>/dev/null
  ip link del sx1s 2>/dev/null
  ip link del sx2s 2>/dev/null
  rm -f "$LOG"
}
trap cleanup EXIT

echo "== creating namespaces sx1, sx2 and veths sx1s, sx2s"
for i in 1 2; do
  ip netns add sx$i
  ip link add sx${i}s type veth peer name sx${i}h
  ip link set sx${i}h netns sx$i
  sysctl -qw net.ipv6.conf.sx${i}s.disable_ipv6=1
  ip link set sx${i}s up
  ip netns exec sx$i sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  ip -n sx$i link set lo up
  ip -n sx$i addr add 10.77.0.$i/24 dev sx${i}h
  ip -n sx$i link set sx${i}h up
  # Full checksums on the wire (the switch sees real frames), and a qdisc
  # so the veth queues instead of dropping when the forwarder is busy.
  ip netns exec sx$i ethtool -K sx${i}h tx off ${HOST_ETHTOOL:-} >/dev/null
  ip netns exec sx$i tc qdisc replace dev sx${i}h root pfifo limit 1000
done

iperf_run() { # prints the sender and receiver lines
  ip netns exec sx2 iperf3 -s -1 >/dev/null 2>&1 &
  IPERF_PID=$!
  sleep 0.5
  ip netns exec sx1 iperf3 -c 10.77.0.2 -t "$IPERF_SECONDS" -f g | grep -E 'sender|receiver'
  wait "$IPERF_PID" 2>/dev/null || true
  IPERF_PID=
}

if [ "${BASELINE:-1}" = 1 ]; then
  # The machine may be shared and busy: a number means something only next
  # to a baseline measured in the same run.
  echo "== baseline: Linux bridge sxbr between the same veths, iperf3 TCP ${IPERF_SECONDS}s"
  ip link add sxbr type bridge
  ip link set sx1s master sxbr
  ip link set sx2s master sxbr
  ip link set sxbr up
  sleep 0.5
  iperf_run
  ip link del sxbr
fi

start_forwarder() { # $1: seconds
  : >"$LOG"
  "$BIN" sx1s sx2s --seconds "$1" ${FWD_ARGS---rx 2048 --fill 4096} >"$LOG" 2>&1 &
  FWD_PID=$!
  for _ in $(seq 50); do
    grep -q '^port 1' "$LOG" && return 0
    kill -0 "$FWD_PID" 2>/dev/null || { cat "$LOG"; echo "forwarder failed to start" >&2; exit 1; }
    sleep 0.1
  done
  cat "$LOG"; echo "forwarder did not come up" >&2; exit 1
}

echo "== forwarder"
start_forwarder $((IPERF_SECONDS + 8))
cat "$LOG"
ip link show sx1s | grep -q xdp || { echo "FAIL: no XDP program on sx1s" >&2; exit 1; }

echo "== ping 10.77.0.1 -> 10.77.0.2"
ip netns exec sx1 ping -c 5 -i 0.2 -W 1 10.77.0.2 | tail -2

echo "== iperf3 TCP ${IPERF_SECONDS}s"
iperf_run

echo "== waiting for the forwarder to finish and account for its frames"
wait "$FWD_PID" || { cat "$LOG"; echo "FAIL: forwarder exited with an error" >&2; exit 1; }
FWD_PID=
cat "$LOG"
grep -q 'lost frames: 0$' "$LOG" || { echo "FAIL: frames lost" >&2; exit 1; }
if ip link show sx1s | grep -q xdp; then echo "FAIL: XDP still attached after a clean exit" >&2; exit 1; fi

echo "== kill -9 of the forwarder must detach XDP (bpf_link)"
start_forwarder 60
ip link show sx1s | grep -q xdp || { echo "FAIL: no XDP program on sx1s" >&2; exit 1; }
kill -9 "$FWD_PID"; wait "$FWD_PID" 2>/dev/null || true
FWD_PID=
sleep 0.3
for d in sx1s sx2s; do
  if ip link show "$d" | grep -q xdp; then
    ip link show "$d"; echo "FAIL: XDP still attached on $d after kill -9" >&2; exit 1
  fi
done
echo "   no XDP program left on sx1s, sx2s"
echo "== PASS"

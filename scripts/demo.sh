#!/usr/bin/env bash
# The demo: two DCTCP hosts in network namespaces, softswitch between them at
# 1 Gbit/s (emulated) with TCN marking, a 10 s iperf3 transfer, then what the switch and
# the hosts saw. Sets up whatever is missing first. Usage: scripts/demo.sh (as root;
# otherwise it re-runs itself with sudo)
# Environment: AQM (default tcn), RATE (1gbit, emulated), DILATION (time
# dilation D, default 4, where this 2-vCPU machine comes closest to holding
# 1 Gbit/s: the wire runs at RATE / D and every time lasts D times longer;
# 1 = real time; README, "Time dilation"), DURATION (10, real seconds), PREFIX (demo),
# RPS (off: Linux's receive processing, the switch unpinned; auto: the hosts'
# receive processing on every CPU but the last and the switch pinned to the
# last — fewer stalls inside tx kicks, but the sender then processes its ACKs
# in batches and bursts: BENCHMARKS.md, "The hosts' receive processing off
# the switch's CPU"),
# SWITCH_ARGS (more softswitch flags).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  # Not root: ask sudo (where there is one) to re-run us.
  command -v sudo >/dev/null && exec sudo -E "$0" "$@"
  echo "scripts/demo.sh needs root (namespaces, XDP): run it as root" >&2
  exit 1
fi
AQM=${AQM:-tcn}
RATE=${RATE:-1gbit}
DILATION=${DILATION:-4}
SECS=${DURATION:-10}
PREFIX=${PREFIX:-demo}
RPS=${RPS:-off}
PIN=
[ "$RPS" = auto ] && PIN="--cpu last"

bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
echo "[demo] building softswitch (release)"
cargo build --release --quiet
SS=target/release/softswitch
SOCK=/run/softswitch/$PREFIX.sock
SW_PID=
cleanup() {
  if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then kill -INT "$SW_PID"; wait "$SW_PID" || true; fi
  "$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

"$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
echo "[demo] creating hosts ${PREFIX}-h1 and ${PREFIX}-h2 (DCTCP, ECN on, host timers x $DILATION)"
PORTS=$("$SS" topo up --hosts 2 --prefix "$PREFIX" --dilation "$DILATION" --rps "$RPS")
H1=${PREFIX}-h1
H2=${PREFIX}-h2
IP2=$(ip netns exec "$H2" ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)

echo "[demo] starting: softswitch --ports $PORTS --rate $RATE --aqm $AQM --rtt 250us --dilation $DILATION $PIN ${SWITCH_ARGS:-}"
LOG=$(mktemp -d)
# shellcheck disable=SC2086 # SWITCH_ARGS: several flags, split on purpose
"$SS" --ports "$PORTS" --rate "$RATE" --aqm "$AQM" --rtt 250us --dilation "$DILATION" $PIN ${SWITCH_ARGS:-} --stats-socket "$SOCK" \
  >"$LOG/switch.out" 2>"$LOG/switch.err" &
SW_PID=$!
for _ in $(seq 100); do grep -q "forwarding between" "$LOG/switch.err" 2>/dev/null && break; sleep 0.1; done
if ! grep -q "forwarding between" "$LOG/switch.err"; then cat "$LOG/switch.err"; exit 1; fi
cat "$LOG/switch.err"

ip netns exec "$H1" ping -c 3 -i 0.2 "$IP2" | tail -2
ip netns exec "$H2" iperf3 -s -1 -D
sleep 0.3
ip netns exec "$H1" nstat -n
echo "[demo] iperf3 $H1 -> $H2 for ${SECS}s"
if [ "$DILATION" != 1 ]; then
  echo "[demo] time dilation D = $DILATION: iperf3 reports real time and the wire's rate (x $DILATION = emulated); the switch reports emulated time and rates"
fi
ip netns exec "$H1" iperf3 -c "$IP2" -t "$SECS" -i 2 &
IPERF=$!
sleep 2
echo "[demo] the sender's socket (ss -tino): congestion control and ECN"
# The data connection is the one with the most bytes sent; show its cc, ECN, cwnd, RTT.
ip netns exec "$H1" ss -tinoH dst "$IP2" | python3 -c '
import re, sys
conns = sys.stdin.read().split("\nESTAB")
best = max(conns, key=lambda c: int((re.search(r"bytes_sent:(\d+)", c) or [0, 0])[1]))
print(" ".join(re.findall(r"(?:bpf_)?dctcp|\becn\w*|cwnd:\d+|rtt:[\d./]+", best)))'
echo "[demo] the switch, live (softswitch stats --socket $SOCK):"
"$SS" stats --socket "$SOCK" | head -4
wait $IPERF
echo "[demo] the sender's TCP counters (nstat):"
ip netns exec "$H1" nstat | grep -E "TcpExtTCPDeliveredCE|TcpRetransSegs|TcpExtTCPTimeouts|TcpOutSegs" || true
kill -INT "$SW_PID"; wait "$SW_PID" || true; SW_PID=
echo "[demo] the switch's counters at exit:"
cat "$LOG/switch.out"
rm -rf "$LOG"

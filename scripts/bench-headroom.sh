#!/usr/bin/env bash
# Headroom of a shaped port: can this machine hold a 1 Gbit/s
# port with many long DCTCP flows in several queues, and what does the data
# path's waiting policy (--poll busy | adaptive) change? Two hosts, FLOWS
# iperf3 streams h1 -> h2 spread over QUEUES DSCPs (one iperf3 client per
# queue), the switch at RATE with DWRR and AQM. Modes alternate run by run,
# so both see the same machine. Prints per run: goodput as a share of the
# link's TCP payload rate (1448 / 1538 of the wire rate), the fidelity
# verdict and the receiver port's lost share, the switch's CPU use, and the adaptive
# poll's sleeps.
# With DILATION=D (time dilation) the switch and the hosts run D
# times slower: RATE is emulated, the wire runs at RATE / D, goodput is
# printed emulated (the wire's x D), and each run also prints what the
# hosts did per packet, to set against D = 1 — retransmitted segments per
# 1000 sent (iperf3), CE marks per packet and the median sojourn (emulated)
# at the receiver's port.
# Usage: sudo scripts/bench-headroom.sh
# Environment: FLOWS (16), QUEUES (4), RATE (1gbit, emulated), SECS (8, real),
#              RUNS (3), MODES ("busy adaptive"), AQM (tcn), DILATION (1),
#              SWITCH_ARGS (more switch options, e.g. "--buffer 960kb"),
#              PREFIX (hr).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && exec sudo -E "$0" "$@"
  echo "scripts/bench-headroom.sh needs root (namespaces, XDP)" >&2
  exit 1
fi
FLOWS=${FLOWS:-16}
QUEUES=${QUEUES:-4}
RATE=${RATE:-1gbit}
SECS=${SECS:-8}
RUNS=${RUNS:-3}
MODES=${MODES:-busy adaptive}
AQM=${AQM:-tcn}
DILATION=${DILATION:-1}
PREFIX=${PREFIX:-hr}
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet
SS=target/release/softswitch
SOCK=/run/softswitch/$PREFIX.sock
TMP=$(mktemp -d)
SW_PID=
cleanup() {
  if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then kill -INT "$SW_PID"; wait "$SW_PID" || true; fi
  ip netns pids "$PREFIX-h1" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$PREFIX-h2" 2>/dev/null | xargs -r kill 2>/dev/null || true
  "$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
"$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
PORTS=$("$SS" topo up --hosts 2 --prefix "$PREFIX" --dilation "$DILATION")
H1=$PREFIX-h1
H2=$PREFIX-h2
IP2=$(ip netns exec "$H2" ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
RATE_BPS=$(python3 -c "
import re,sys
m=re.fullmatch(r'([0-9.]+)(gbit|mbit|kbit)','$RATE')
print(int(float(m.group(1))*{'gbit':1e9,'mbit':1e6,'kbit':1e3}[m.group(2)]))")

per_q=$(( (FLOWS + QUEUES - 1) / QUEUES ))
for q in $(seq 0 $((QUEUES - 1))); do
  ip netns exec "$H2" iperf3 -s -D -p $((5201 + q)) >/dev/null
done
sleep 0.5

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "# $FLOWS flows in $QUEUES queues, $RATE emulated, D = $DILATION (wire $RATE / $DILATION), $AQM ${SWITCH_ARGS:-}, $SECS s real per run"
printf '%-9s %3s %9s %7s %10s %8s %6s %8s %7s %7s  %s\n' mode run goodput "of link" verdict "rx lost" "cpu" "rtx/1k" "CE/pkt" "p50 us" "poll"
for r in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    "$SS" --ports "$PORTS" --rate "$RATE" --queues "$QUEUES" --sched dwrr --aqm "$AQM" \
      --poll "$mode" --dilation "$DILATION" ${SWITCH_ARGS:-} --json --stats-socket "$SOCK" >"$TMP/sw.json" 2>"$TMP/sw.log" &
    SW_PID=$!
    for _ in $(seq 50); do grep -q "forwarding between" "$TMP/sw.log" && break; sleep 0.1; done
    ip netns exec "$H1" ping -c 1 -W 2 -q "$IP2" >/dev/null
    t0=$(date +%s.%N); c0=$(cpu_ticks "$SW_PID")
    pids=()
    left=$FLOWS
    for q in $(seq 0 $((QUEUES - 1))); do
      n=$(( left < per_q ? left : per_q )); left=$((left - n))
      [ "$n" -gt 0 ] || continue
      # DSCP q -> queue q (the default map: DSCP mod queues); TOS = DSCP << 2.
      ip netns exec "$H1" iperf3 -c "$IP2" -p $((5201 + q)) -t "$SECS" -O 1 -P "$n" -S $((q << 2)) -J \
        >"$TMP/ip$q.json" 2>/dev/null &
      pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(date +%s.%N); c1=$(cpu_ticks "$SW_PID")
    kill -INT "$SW_PID"; wait "$SW_PID" || true; SW_PID=
    python3 - "$TMP" "$RATE_BPS" "$mode" "$r" "$t0" "$t1" "$c0" "$c1" "$(getconf CLK_TCK)" "$DILATION" <<'EOF'
import json, glob, sys
tmp, rate, mode, run = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
t0, t1, c0, c1, hz, d = map(float, sys.argv[5:11])
bps = 0.0
sent = rtx = 0
for f in glob.glob(tmp + "/ip*.json"):
    try:
        end = json.load(open(f))["end"]
        bps += end["sum_received"]["bits_per_second"] * d
        sent += end["sum_sent"]["bytes"]
        rtx += end["sum_sent"].get("retransmits", 0)
    except Exception:
        pass
txt = open(tmp + "/sw.json").read()
j = json.loads(txt[txt.index("{"):])
fid = j.get("fidelity", {})
# The receiver's port: the data's bottleneck (h1's carries the ACKs).
lost = j["ports"][1].get("link", {}).get("lost_fraction", 0.0)
poll = j.get("loop", {}).get("poll")
ps = "" if not poll else f"{poll['sleeps']} sleeps, late {poll['mean_late_us']:.1f}/{poll['max_late_us']:.0f} us"
eg = j["ports"][1]["egress"]["port"]
marks = sum(v.get("pkts", 0) for v in (eg.get("marked") or {}).values())
ce = marks / max(eg["dequeued"]["pkts"], 1)
p50 = eg.get("sojourn", {}).get("p50_us", 0.0)
share = bps / (rate * 1448 / 1538)
cpu = (c1 - c0) / hz / (t1 - t0)
rtxk = 1000 * rtx / max(sent / 1448, 1)
print(f"{mode:<9} {run:>3} {bps/1e6:7.0f}Mb {share*100:6.1f}% {'faithful' if fid.get('faithful') else 'NOT':>10} {lost*100:7.2f}% {cpu*100:5.0f}% {rtxk:8.2f} {ce:7.3f} {p50:7.0f}  {ps}")
if not fid.get("faithful"):
    for x in fid.get("reasons", [])[:3]:
        print("            -", x)
EOF
    rm -f "$TMP"/ip*.json
  done
done

#!/usr/bin/env bash
# Soak test: softswitch at a shaped rate for a long time
# with many flows and churn, checking at the end that nothing leaked and
# everything adds up.
#
#   sudo flock /tmp/softswitch-netns.lock scripts/soak.sh --duration 3600 --out soak-1h
#
# Traffic, on HOSTS namespaces (`softswitch topo up`):
#   * FLOWS long iperf3 flows into h1 (h1's port is the bottleneck), each a
#     loop of LONG-second runs, so long flows also end and start again;
#   * short flows: a new iperf3 connection of 64 KB-1 MB between two random
#     hosts every SHORT_EVERY seconds, and softswitch-tg web-search flows
#     (Poisson, 20 % load) from h2 into h1 on persistent connections;
#   * every CHURN_EVERY seconds one host (round robin) is re-created: its
#     processes killed, its namespace deleted and made again, its veth end
#     moved back in and configured as `topo up` does — while the switch runs
#     on the switch-side end.
#
# The switch's RSS (and heap, fds, threads) is sampled every SAMPLE seconds
# into rss.csv, its live counters into live.csv. Checks at exit, each PASS
# or FAIL in the summary table (summary.txt, summary.json in --out):
#   switch-exit   the switch exited 0 (or 3: NOT FAITHFUL) after SIGINT (it exits non-zero itself
#                 when UMEM frames or counters do not add up)
#   rss-flat      mean RSS of the last quarter of the samples vs the first
#                 quarter after warm-up: growth ≤ max(RSS_PCT %, RSS_SLACK_KB)
#                 — the same for the heap (RssAnon); fds and threads no more
#                 than 2 above the first quarter's largest
#   frames        every UMEM frame accounted for at exit (free + lent + held
#                 + in tx = frames, none held or in tx, fill + rx rings hold
#                 exactly the frames lent for rx)
#   counters      rx + flood copies = tx + drops + filtered + held + drained,
#                 per port (ingress, egress frames and bytes) and switch-wide,
#                 at exit and in every live sample
#   fidelity      the switch's fidelity verdict is faithful
#   traffic       the bottleneck port carried ≥ 50 % of rate × duration and
#                 the planned host re-creations all happened
# Exit status 0 when every check passes, 1 when one fails, 2 on bad usage or
# setup failure. Everything it creates is removed at exit (also on Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  sed -n '/^# Soak test/,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  cat <<'EOF'
Options (defaults in brackets):
  --duration S       seconds of traffic [3600]
  --rate R           shaped rate of every port [300mbit]
  --aqm A            AQM [dctcp]
  --hosts N          host namespaces, ≥ 3 [4]
  --flows N          long iperf3 flows into h1 [4]
  --long S           length of one long-flow run [120]
  --short-every S    seconds between short iperf3 connections [0.5]
  --churn-every S    seconds between host re-creations, 0 = none [60]
  --sample S         RSS sampling interval [60; 10 when --duration < 900]
  --warmup S         samples before this are left out of rss-flat [max(2 samples, 10 % of duration)]
  --rss-pct P        allowed RSS growth, percent [5]
  --rss-slack-kb K   allowed RSS growth however small the RSS, KiB [2048]
  --out DIR          where results go [a new directory under /tmp]
  --prefix P         topology prefix [soak]
  --softswitch PATH  softswitch binary [target/release/softswitch, built if missing]
  --tg PATH          softswitch-tg binary [next to softswitch]
  --switch-args "…"  more arguments for softswitch (e.g. "--max-lost 0.02")
  --fidelity MODE    must: an unfaithful verdict fails the soak; report: it is
                     shown (INFO) but does not fail it [must]
EOF
}

DURATION=3600 RATE=300mbit AQM=dctcp HOSTS=4 FLOWS=4 LONG=120 SHORT_EVERY=0.5
CHURN_EVERY=60 SAMPLE= WARMUP= RSS_PCT=5 RSS_SLACK_KB=2048 OUT= PREFIX=soak
SS= TG= SWITCH_ARGS= FIDELITY=must
while [ $# -gt 0 ]; do
  opt=$1
  case $opt in
    -h|--help) usage; exit 0 ;;
    --duration|--rate|--aqm|--hosts|--flows|--long|--short-every|--churn-every|--sample|--warmup|--rss-pct|--rss-slack-kb|--out|--prefix|--softswitch|--tg|--switch-args|--fidelity)
      [ $# -ge 2 ] || { echo "soak.sh: $opt needs a value" >&2; exit 2; }
      val=$2; shift 2 ;;
    *) echo "soak.sh: unknown option $opt (see --help)" >&2; exit 2 ;;
  esac
  case $opt in
    --duration) DURATION=$val ;; --rate) RATE=$val ;; --aqm) AQM=$val ;;
    --hosts) HOSTS=$val ;; --flows) FLOWS=$val ;; --long) LONG=$val ;;
    --short-every) SHORT_EVERY=$val ;; --churn-every) CHURN_EVERY=$val ;;
    --sample) SAMPLE=$val ;; --warmup) WARMUP=$val ;; --rss-pct) RSS_PCT=$val ;;
    --rss-slack-kb) RSS_SLACK_KB=$val ;; --out) OUT=$val ;; --prefix) PREFIX=$val ;;
    --softswitch) SS=$val ;; --tg) TG=$val ;; --switch-args) SWITCH_ARGS=$val ;;
    --fidelity) FIDELITY=$val ;;
  esac
done
case $FIDELITY in must|report) ;; *) echo "soak.sh: --fidelity $FIDELITY: must or report" >&2; exit 2 ;; esac
isint() { [[ $1 =~ ^[0-9]+$ ]]; }
isnum() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
for v in DURATION HOSTS FLOWS LONG CHURN_EVERY RSS_SLACK_KB; do
  isint "${!v}" || { echo "soak.sh: --$(tr 'A-Z_' 'a-z-' <<<"$v") ${!v}: not a whole number" >&2; exit 2; }
done
isnum "$SHORT_EVERY" && isnum "$RSS_PCT" || { echo "soak.sh: --short-every/--rss-pct: not a number" >&2; exit 2; }
[ "$DURATION" -ge 20 ] || { echo "soak.sh: --duration $DURATION: at least 20 s" >&2; exit 2; }
[ "$HOSTS" -ge 3 ] || { echo "soak.sh: --hosts $HOSTS: at least 3 (long flows, short flows, churn)" >&2; exit 2; }
[ "$FLOWS" -ge 1 ] || { echo "soak.sh: --flows $FLOWS: at least 1" >&2; exit 2; }
if [ -z "$SAMPLE" ]; then
  if [ "$DURATION" -lt 900 ]; then SAMPLE=10; else SAMPLE=60; fi
fi
isint "$SAMPLE" && [ "$SAMPLE" -ge 1 ] || { echo "soak.sh: --sample $SAMPLE: a whole number of seconds ≥ 1" >&2; exit 2; }
if [ -z "$WARMUP" ]; then
  WARMUP=$(( DURATION / 10 )); [ "$WARMUP" -ge $(( 2 * SAMPLE )) ] || WARMUP=$(( 2 * SAMPLE ))
fi
isint "$WARMUP" || { echo "soak.sh: --warmup $WARMUP: not a whole number" >&2; exit 2; }
if [ $(( (DURATION - WARMUP) / SAMPLE )) -lt 4 ]; then
  echo "soak.sh: only $(( (DURATION - WARMUP) / SAMPLE )) RSS samples after the ${WARMUP} s warm-up; need 4 (lower --sample or --warmup)" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "soak.sh needs root (namespaces, XDP): run it with sudo" >&2
  exit 2
fi
for t in ip iperf3 python3 ethtool tc; do
  command -v $t >/dev/null || { echo "soak.sh: $t is not installed (run scripts/setup.sh)" >&2; exit 2; }
done
if [ -z "$SS" ]; then
  SS=target/release/softswitch
  if [ ! -x "$SS" ] || [ ! -x target/release/softswitch-tg ]; then
    echo "[soak] building softswitch (release)"
    cargo build --release --quiet --bin softswitch --bin softswitch-tg
  fi
fi
[ -n "$TG" ] || TG=$(dirname "$SS")/softswitch-tg
[ -x "$SS" ] && [ -x "$TG" ] || { echo "soak.sh: $SS or $TG is not an executable" >&2; exit 2; }
SS=$(realpath "$SS"); TG=$(realpath "$TG")
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/soak.XXXXXX)
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
CDF=$(realpath cdf/websearch.txt)
SOCK=/run/softswitch/$PREFIX-soak.sock

SW_PID= LOOPS=() TOPO_UP=0 CLEANED=0 OLD_NS_INODES=()
kill_in_old_ns() {
  local ino p
  for ino in "$@"; do
    for p in /proc/[0-9]*; do
      [ "$(stat -L -c %i "$p/ns/net" 2>/dev/null)" = "$ino" ] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
  done
  return 0
}
log() { echo "[soak $(date +%T)] $*" | tee -a "$OUT/soak.log" >&2; }
cleanup() {
  [ "$CLEANED" = 1 ] && return; CLEANED=1
  for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$SW_PID" ] && kill -0 "$SW_PID" 2>/dev/null; then
    kill -INT "$SW_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SW_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SW_PID" 2>/dev/null || true
  fi
  if [ "$TOPO_UP" = 1 ]; then "$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true; fi
  [ ${#OLD_NS_INODES[@]} -eq 0 ] || kill_in_old_ns "${OLD_NS_INODES[@]}"
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'log "interrupted"; cleanup; exit 130' INT TERM HUP

# ---- topology ----
"$SS" topo down --prefix "$PREFIX" >/dev/null 2>&1 || true
TOPO_UP=1
PORTS=$("$SS" topo up --hosts "$HOSTS" --prefix "$PREFIX" 2>"$OUT/topo.err") || {
  cat "$OUT/topo.err" >&2; exit 2; }
CC=$("$SS" topo list | awk -v p="$PREFIX" '$1 == p { print $5 }')
ns() { echo "$PREFIX-h$1"; }
ipof() { ip -n "$(ns "$1")" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1; }
declare -a IPS
for i in $(seq "$HOSTS"); do IPS[i]=$(ipof "$i"); done
SUBNET_LEN=$(ip -n "$(ns 1)" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f2)

# Re-creates host $1 while the switch runs on its switch-side veth end:
# kill what runs there, move eth0 out, delete the namespace, make it again
# with topo up's settings, move eth0 back in and configure it. A loop may
# start a process in the old namespace just before it goes: such processes
# are found by the namespace's inode and killed (now and at exit).
recreate_host() {
  local i=$1 n tmp pids ino
  n=$(ns "$i"); tmp="$PREFIX-h$i-mv"
  step() { "$@" || { echo "re-creating $n: failed: $*" >&2; return 1; }; }
  ino=$(stat -L -c %i "/run/netns/$n") || return 1
  OLD_NS_INODES+=("$ino")
  pids=$(ip netns pids "$n" 2>/dev/null || true)
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  step ip -n "$n" link set eth0 down || return 1
  step ip -n "$n" link set eth0 name "$tmp" || return 1
  step ip -n "$n" link set "$tmp" netns 1 || return 1
  step ip netns del "$n" || return 1
  kill_in_old_ns "$ino"
  step ip netns add "$n" || return 1
  local sysctls=(net.ipv4.tcp_ecn=1 "net.ipv4.tcp_congestion_control=$CC" net.ipv4.tcp_no_metrics_save=1)
  if [ -e /proc/sys/net/ipv6 ]; then
    sysctls+=(net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.default.router_solicitations=0)
  fi
  step ip netns exec "$n" sysctl -q -w "${sysctls[@]}" || return 1
  step ip link set "$tmp" netns "$n" || return 1
  step ip -n "$n" link set "$tmp" name eth0 || return 1
  step ip -n "$n" link set lo up || return 1
  step ip -n "$n" addr add "${IPS[i]}/$SUBNET_LEN" dev eth0 || return 1
  step ip -n "$n" link set eth0 up || return 1
  step ip netns exec "$n" ethtool -K eth0 tx off tso off >/dev/null || return 1
  step tc -n "$n" qdisc replace dev eth0 root pfifo limit 1000 || return 1
  kill_in_old_ns "$ino"
}

# ---- switch ----
log "out $OUT; $HOSTS hosts (cc $CC) on $PORTS; rate $RATE aqm $AQM; ${DURATION}s, $FLOWS long flows, short flow every ${SHORT_EVERY}s, host re-created every ${CHURN_EVERY}s, RSS every ${SAMPLE}s"
# shellcheck disable=SC2086
"$SS" --ports "$PORTS" --rate "$RATE" --aqm "$AQM" --rtt 250us --stats-socket "$SOCK" --json \
  $SWITCH_ARGS >"$OUT/switch.json" 2>"$OUT/switch.err" &
SW_PID=$!
for _ in $(seq 150); do
  grep -q "forwarding between" "$OUT/switch.err" 2>/dev/null && break
  kill -0 "$SW_PID" 2>/dev/null || break
  sleep 0.1
done
grep -q "forwarding between" "$OUT/switch.err" || { cat "$OUT/switch.err" >&2; log "the switch did not start"; exit 2; }

# ---- traffic (each a loop that outlives host re-creation) ----
# (stderr of the loop itself off: bash reports every child a re-creation kills)
forever() { while true; do "$@" >/dev/null 2>&1 || sleep 1; done 2>/dev/null; }
NS1=$(ns 1)
for f in $(seq 0 $(( FLOWS - 1 ))); do
  port=$(( 5201 + f ))
  src=$(( 2 + f % (HOSTS - 1) ))
  forever ip netns exec "$NS1" iperf3 -s -p $port & LOOPS+=($!)
  forever ip netns exec "$(ns $src)" iperf3 -c "${IPS[1]}" -p $port -t "$LONG" --connect-timeout 2000 & LOOPS+=($!)
done
for i in $(seq "$HOSTS"); do
  forever ip netns exec "$(ns "$i")" iperf3 -s -p 5300 & LOOPS+=($!)
  forever ip netns exec "$(ns "$i")" "$TG" server --port 5001 & LOOPS+=($!)
done
forever ip netns exec "$(ns 2)" "$TG" client --servers "${IPS[1]}:5001" --cdf "$CDF" --load 0.2 \
  --rate "$RATE" --flows 200 --conns 4 --out /dev/null --timeout 120s & LOOPS+=($!)
short_flows() {
  local n=0 ok=0 a b
  while true; do
    a=$(( RANDOM % HOSTS + 1 )); b=$(( RANDOM % (HOSTS - 1) + 1 )); [ "$b" -ge "$a" ] && b=$(( b + 1 ))
    ( timeout 20 ip netns exec "$(ns "$a")" iperf3 -c "${IPS[b]}" -p 5300 -n "$(( (RANDOM % 16 + 1) * 64 ))K" \
        --connect-timeout 1000 >/dev/null 2>&1 && echo ok >>"$OUT/short.ok" || echo fail >>"$OUT/short.fail" ) &
    n=$(( n + 1 ))
    sleep "$SHORT_EVERY"
  done
}
: >"$OUT/short.ok"; : >"$OUT/short.fail"
short_flows 2>/dev/null & LOOPS+=($!)

# ---- sampling and churn ----
echo "t_s,vmrss_kb,rss_anon_kb,rss_file_kb,rss_shmem_kb,threads,fds" >"$OUT/rss.csv"
echo "t_s,rx_pkts,tx_pkts,drops,backlog_pkts,counters_hold,umem_balanced,faithful" >"$OUT/live.csv"
sample() {
  local t=$1 st
  st=/proc/$SW_PID/status
  [ -r "$st" ] || return 0
  awk -v t="$t" -v fds="$(ls /proc/$SW_PID/fd | wc -l)" '
    /^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} /^RssFile:/ {f=$2} /^RssShmem:/ {s=$2} /^Threads:/ {th=$2}
    END { printf "%s,%s,%s,%s,%s,%s,%s\n", t, r, a, f, s, th, fds }' "$st" >>"$OUT/rss.csv"
  "$SS" stats --socket "$SOCK" --json 2>/dev/null | python3 -c '
import json, sys
t = sys.argv[1]
try:
    v = json.load(sys.stdin)
except Exception:
    sys.exit(0)
ps = v["ports"]
rx = sum(p["io"]["rx_packets"] for p in ps)
tx = sum(p["io"]["tx_packets"] for p in ps)
drops = sum(sum(p["io"]["ingress_drops"]) for p in ps) + sum(
    c["pkts"] for p in ps for c in p["egress"]["port"]["dropped"].values())
bl = sum(p["backlog_pkts"] for p in ps)
flags = [int(bool(v["conservation"]["holds"])), int(bool(v["umem"]["balanced"])), int(bool(v["fidelity"]["faithful"]))]
print(",".join(str(x) for x in [t, rx, tx, drops, bl] + flags))
' "$t" >>"$OUT/live.csv" || true
}
START=$(date +%s)
next_sample=0 next_churn=$CHURN_EVERY churn_host=1 recreated=0 churn_failed=0
planned_churn=0; [ "$CHURN_EVERY" -gt 0 ] && planned_churn=$(( (DURATION - 3) / CHURN_EVERY ))
sample 0
next_sample=$SAMPLE
while true; do
  now=$(( $(date +%s) - START ))
  [ "$now" -lt "$DURATION" ] || break
  kill -0 "$SW_PID" 2>/dev/null || { log "the switch exited early"; break; }
  if [ "$now" -ge "$next_sample" ]; then sample "$now"; next_sample=$(( next_sample + SAMPLE )); fi
  if [ "$CHURN_EVERY" -gt 0 ] && [ "$now" -ge "$next_churn" ]; then
    if recreate_host "$churn_host" 2>>"$OUT/churn.err"; then
      recreated=$(( recreated + 1 ))
      echo "$now,h$churn_host" >>"$OUT/churn.csv"
    else
      churn_failed=$(( churn_failed + 1 )); log "re-creating h$churn_host failed (see churn.err)"
    fi
    churn_host=$(( churn_host % HOSTS + 1 ))
    next_churn=$(( next_churn + CHURN_EVERY ))
  fi
  sleep 1
done
sample "$(( $(date +%s) - START ))"
ELAPSED=$(( $(date +%s) - START ))

# ---- stop ----
for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
LOOPS=()
SW_CODE=0
if kill -0 "$SW_PID" 2>/dev/null; then
  kill -INT "$SW_PID"
fi
wait "$SW_PID" || SW_CODE=$?
SW_PID=
log "switch exited with status $SW_CODE"
SHORT_OK=$(wc -l <"$OUT/short.ok"); SHORT_FAIL=$(wc -l <"$OUT/short.fail")

# ---- checks ----
set +e
python3 - "$OUT" "$SW_CODE" "$ELAPSED" "$WARMUP" "$RSS_PCT" "$RSS_SLACK_KB" "$RATE" "$planned_churn" "$recreated" "$SHORT_OK" "$SHORT_FAIL" "$FIDELITY" <<'EOF'
import csv, json, os, re, sys
out, sw_code, elapsed, warmup, pct, slack = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
rate_s, planned, recreated, short_ok, short_fail = sys.argv[7], int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10]), int(sys.argv[11])
fidelity_mode = sys.argv[12]
checks = []
def check(name, ok, detail, judged=True):
    checks.append({"check": name, "pass": bool(ok), "judged": judged, "detail": detail})

# 3: it ran, but its fidelity guard said NOT FAITHFUL (the fidelity check
# below judges that, by --fidelity).
check("switch-exit", sw_code in (0, 3), f"status {sw_code}" + ("" if sw_code in (0, 3) else " (see switch.err)"))

rows = [r for r in csv.DictReader(open(os.path.join(out, "rss.csv")))]
after = [r for r in rows if int(r["t_s"]) >= warmup]
def kb(r, k): return int(r[k] or 0)
if len(after) >= 4:
    q = max(1, len(after) // 4)
    first, last = after[:q], after[-q:]
    parts, ok = [], True
    for key, label in (("vmrss_kb", "RSS"), ("rss_anon_kb", "heap")):
        a = sum(kb(r, key) for r in first) / len(first)
        b = sum(kb(r, key) for r in last) / len(last)
        allowed = max(a * pct / 100, slack)
        ok &= (b - a) <= allowed
        parts.append(f"{label} {a/1024:.1f} -> {b/1024:.1f} MiB ({(b-a)/1024:+.2f}, allowed +{allowed/1024:.2f})")
    for key in ("fds", "threads"):
        a = max(kb(r, key) for r in first); b = max(kb(r, key) for r in last)
        ok &= b <= a + 2
        parts.append(f"{key} {a} -> {b}")
    check("rss-flat", ok, f"{len(after)} samples after {warmup} s: " + "; ".join(parts))
else:
    check("rss-flat", False, f"only {len(after)} samples after the {warmup} s warm-up")

snap = None
try:
    text = open(os.path.join(out, "switch.json")).read()
    snap = json.loads(text[text.index("{"):])
except Exception as e:
    check("frames", False, f"no JSON exit report ({e})")
    check("counters", False, "no JSON exit report")
    check("fidelity", False, "no JSON exit report")
if snap is not None:
    m = snap.get("umem", {})
    ok = m.get("balanced") and m.get("held_by_app") == 0 and m.get("in_tx") == 0 and m.get("rings_match") is True
    check("frames", ok, f"{m.get('frames')} frames: free {m.get('free')}, lent for rx {m.get('in_fill')} "
          f"(rings hold {m.get('on_rings')}), held {m.get('held_by_app')}, in tx {m.get('in_tx')}")
    c = snap.get("conservation", {})
    live = [r for r in csv.DictReader(open(os.path.join(out, "live.csv")))]
    live_bad = [r["t_s"] for r in live if r["counters_hold"] != "1" or r["umem_balanced"] != "1"]
    ports = snap["ports"]
    sw = c.get("switch", {})
    per_port = all(p["balance"][k]["input"] == p["balance"][k]["output"] for p in ports for k in ("ingress", "egress", "egress_bytes", "host_link"))
    drops = sum(sum(p["io"]["ingress_drops"]) for p in ports) + sum(
        v["pkts"] for p in ports for v in p["egress"]["port"]["dropped"].values())
    tx = sum(p["io"]["tx_packets"] for p in ports)
    check("counters", c.get("holds") is True and per_port and not live_bad and len(live) > 0,
          f"rx + flood copies = {sw.get('input')}, tx + drops + filtered + held + drained = {sw.get('output')} "
          f"(tx {tx}, drops {drops}); {len(ports)} ports x 3 identities; {len(live) - len(live_bad)}/{len(live)} live samples hold"
          + ("" if c.get("holds") else f"; failures: {c.get('failures')}"))
    f = snap.get("fidelity", {})
    worst = max((p["link"]["lost_fraction"] for p in ports), default=0)
    check("fidelity", f.get("faithful") is True or fidelity_mode == "report",
          ("faithful" if f.get("faithful") else "NOT FAITHFUL: " + "; ".join(f.get("reasons", [])))
          + f" (worst port lost {worst*100:.2f} % of backlogged time; stalls {snap.get('loop', {}).get('stalls')})",
          judged=fidelity_mode == "must")
    m_ = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate_s.lower())
    bps = float(m_.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m_.group(2)] if m_ else 0
    tx_bytes = ports[0]["io"]["tx_bytes"]
    frac = tx_bytes * 8 / (bps * elapsed) if bps else 1
    check("traffic", frac >= 0.5 and recreated >= planned,
          f"h1's port carried {tx_bytes*8/elapsed/1e6:.1f} Mbit/s = {frac*100:.0f} % of {rate_s} over {elapsed} s; "
          f"hosts re-created {recreated}/{planned}; short iperf3 flows {short_ok} ok, {short_fail} failed")
fails = [c for c in checks if not c["pass"]]
w = max(len(c["check"]) for c in checks)
lines = ["", f"softswitch soak: {elapsed} s, results in {out}", f"{'check':<{w}}  result  detail"]
for c in checks:
    res = ("PASS" if c["pass"] else "FAIL") if c["judged"] else "INFO"
    lines.append(f"{c['check']:<{w}}  {res:<6}  {c['detail']}")
lines.append(f"SOAK {'PASSED' if not fails else 'FAILED: ' + ', '.join(c['check'] for c in fails)}")
text = "\n".join(lines) + "\n"
sys.stdout.write(text)
open(os.path.join(out, "summary.txt"), "w").write(text)
json.dump({"elapsed_s": elapsed, "checks": checks, "passed": not fails}, open(os.path.join(out, "summary.json"), "w"), indent=1)
sys.exit(1 if fails else 0)
EOF
RC=$?
set -e
exit $RC

#!/usr/bin/env bash
# Dilation invariance of the hosts' side, measured: the flow completion
# times of scenarios/dilation-websearch.toml and the query completion
# times of the RTO-bound scenarios/dilation-incast.toml at D = 1, 4, 16,
# 40 (the papers' 10 Gbit/s on a 250 Mbit/s wire) and 32 and 64 (D = 40 is
# not a power of two: tcp_tso_rtt_log + round(log2 D) treats it as 32, so
# 32 and 64 bracket it), and the negative control — D = 40 with the hosts'
# timers undilated (`--host-dilation 1`), which must come out different —
# each `--repeat 5 --retry-unfaithful 1`, then `softswitch-exp report
# --compare` over each scenario's runs: every number at every D with its
# spread and a verdict against D = 1 (the hosts' timer counters among
# them: host.loss_probes, host.delayed_acks, host.spurious_rtos, …).
#
# The full run takes hours (each scenario's comment estimates its time per
# D: ≈ 4.5 h for the web search, ≈ 2 h for the incast); run it on a quiet
# machine. `--quick` (≈ 10 min) runs each scenario's quick variant at D = 1
# and 4 and the control at D = 4, one repeat each: a check that the
# commands work, not a measurement.
#
# Usage: sudo scripts/dilation-invariance.sh [--quick] [--out DIR]
#            [--only websearch|incast] [--dry-run] [--steps N]
#   --dry-run: print the commands without running them; --steps N: run
#   only the first N commands (a check on a busy machine).
# Environment: PROFILE (release; the cargo profile to build and run with),
#              DS ("1 4 16 32 40 64"), CONTROL_D (40), REPEAT (5),
#              RETRY (1), SCENARIOS ("websearch incast"; also
#              "incast-notlp": the incast with the hosts' TLP and RACK off,
#              which measures what their unstretched 2 ms floors do;
#              "incast-notlp-quickack": that with delayed ACKs off too;
#              "longflows": TCN Fig. 1's 8-flow point with the hosts
#              dilated and Linux's GSO).
# Prints every command it runs (also in <out>/commands.txt) and where the
# results are.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && exec sudo -E "$0" "$@"
  echo "scripts/dilation-invariance.sh needs root (namespaces, XDP)" >&2
  exit 1
fi

QUICK=0
DRY=0
STEPS=0
OUT=
SCENARIOS=${SCENARIOS:-websearch incast}
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=$2; shift ;;
    --only) SCENARIOS=$2; shift ;;
    --dry-run) DRY=1 ;;
    --steps) STEPS=$2; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PROFILE=${PROFILE:-release}
if [ "$QUICK" = 1 ]; then
  DS=${DS:-1 4}
  CONTROL_D=${CONTROL_D:-4}
  REPEAT=${REPEAT:-1}
  QUICK_FLAG=--quick
else
  DS=${DS:-1 4 16 32 40 64}
  CONTROL_D=${CONTROL_D:-40}
  REPEAT=${REPEAT:-5}
  QUICK_FLAG=
fi
RETRY=${RETRY:-1}
OUT=${OUT:-results/dilation-invariance-$(date -u +%Y%m%dT%H%M%SZ)$([ "$QUICK" = 1 ] && echo -quick)}
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --profile "$PROFILE" --quiet --bin softswitch --bin softswitch-exp --bin softswitch-tg
TARGET=${CARGO_TARGET_DIR:-target}
[ "$PROFILE" = dev ] && TARGET_DIR=$TARGET/debug || TARGET_DIR=$TARGET/$PROFILE
EXP=$TARGET_DIR/softswitch-exp
mkdir -p "$OUT"
LOG=$OUT/commands.txt
: >"$LOG"

# Runs "$@", printing it first (and logging it); with --dry-run only
# prints it, with --steps N stops after the N-th.
step=0
run() {
  step=$((step + 1))
  if [ "$STEPS" -gt 0 ] && [ "$step" -gt "$STEPS" ]; then
    echo "(not run: --steps $STEPS) $*" | tee -a "$LOG"
    return 0
  fi
  echo "+ $*" | tee -a "$LOG"
  [ "$DRY" = 1 ] && return 0
  # 3: the results are written, but a kept repeat was NOT FAITHFUL (the
  # comparison counts what held): go on with the next D.
  local status=0
  "$@" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "dilation-invariance.sh: exit status $status: $*" >&2
    exit "$status"
  fi
}

started=$(date +%s)
for s in $SCENARIOS; do
  sc=scenarios/dilation-$s.toml
  [ -f "$sc" ] || { echo "no $sc" >&2; exit 2; }
  dirs=()
  for d in $DS; do
    dir=$OUT/$s-D$d
    run "$EXP" run "$sc" $QUICK_FLAG --no-progress --dilation "$d" --repeat "$REPEAT" \
      --retry-unfaithful "$RETRY" --out "$dir"
    dirs+=("$dir")
  done
  dir=$OUT/$s-D$CONTROL_D-hosts1
  run "$EXP" run "$sc" $QUICK_FLAG --no-progress --dilation "$CONTROL_D" --host-dilation 1 \
    --repeat "$REPEAT" --retry-unfaithful "$RETRY" --out "$dir"
  dirs+=("$dir")
  run "$EXP" report --compare "${dirs[@]}" --out "$OUT/$s-compare"
done

echo
echo "done in $(( ($(date +%s) - started) / 60 )) min; the commands are in $LOG"
for s in $SCENARIOS; do
  echo "$s: runs in $OUT/$s-D*, the comparison (summary.json, stats.csv, figures) in $OUT/$s-compare"
done

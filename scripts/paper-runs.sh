#!/usr/bin/env bash
# Runs the papers' testbed experiments, as the README's Results section lists
# them, each into results/, and archives each finished run into
# archive/<experiment>/<UTC date>-<commit> (softswitch-exp archive), from
# which `softswitch-exp docs` regenerates the docs' tables.
#
# Usage (root, from the repository's top directory, nothing else running):
#   scripts/paper-runs.sh --list            # the experiments and their commands
#   scripts/paper-runs.sh [--plan] NAME...  # run (or only plan) these
#   scripts/paper-runs.sh all               # every one, in the listed order
#   SHARD=K/N scripts/paper-runs.sh NAME    # only shard K of N (archive/<name>/<run>-shardK)
#
# Each run is `--retry-unfaithful 1 --retry-later` (an unfaithful
# combination is run again once, after every other's first attempt: retries
# at once mostly met the same slow machine; README, "Retries") and 5
# repeats but where listed; the exact command is in the
# archived manifest.json (`command`) and in every generated table's caption.
# The runs take hours in all (softswitch-exp plan tells each one's time);
# on a machine whose load comes and goes, fewer repeats hold, and the
# tables say how many held at the first attempt, after a retry, or not.
set -euo pipefail
cd "$(dirname "$0")/.."

EXP=target/release/softswitch-exp

# name | scenario | extra run arguments
EXPERIMENTS=(
  "tcn-fig1|scenarios/tcn-fig1.toml|--repeat 5 --dilation 4 --quick"
  "tcn-fig5|scenarios/tcn-fig5.toml|--repeat 5 --dilation 4"
  "ecnsharp-10g|scenarios/ecnsharp-10g.toml|--repeat 5 --quick"
  "incast-raqm-10g|scenarios/incast-raqm-10g.toml|--repeat 5"
  "pred-flows-10g|scenarios/pred-flows-10g.toml|--repeat 5 --quick"
  "pred-flows-10g-testbed|scenarios/pred-flows-10g-testbed.toml|--repeat 3"
  "diffecn-fig13|scenarios/diffecn-fig13.toml|--repeat 5 --quick"
  # D = 64: at D = 40 the full run does not hold on the AMD EPYC this VM
  # runs on since 2026-12-01 (BENCHMARKS.md, "The machine under the VM changed").
  "diffecn-fig13-full|scenarios/diffecn-fig13.toml|--repeat 5 --dilation 64"
  # D = 64: on the same machine quick repeats held at D = 40 but the full
  # run did not (0 of 31 first attempts in two starts; BENCHMARKS.md, "A
  # quick check does not tell what the full run needs").
  "leafspine-pred|scenarios/leafspine-pred.toml|--repeat 5 --dilation 64"
)

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

list() {
  for e in "${EXPERIMENTS[@]}"; do
    IFS='|' read -r name sc extra <<<"$e"
    printf '%-24s softswitch-exp run %s --retry-unfaithful 1 --retry-later %s\n' "$name" "$sc" "$extra"
  done
}

PLAN_ONLY=0
NAMES=()
for a in "$@"; do
  case $a in
    -h|--help) usage; exit 0 ;;
    --list) list; exit 0 ;;
    --plan) PLAN_ONLY=1 ;;
    all) for e in "${EXPERIMENTS[@]}"; do NAMES+=("${e%%|*}"); done ;;
    -*) echo "paper-runs.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) NAMES+=("$a") ;;
  esac
done
[ ${#NAMES[@]} -gt 0 ] || { usage >&2; exit 2; }

if [ "$PLAN_ONLY" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  echo "paper-runs.sh: running experiments needs root (namespaces, XDP): sudo $0 $*" >&2
  exit 2
fi
# The binaries of this commit (incremental: quick when they are). A plan
# only reads the scenarios: it uses the binary there is, if any.
if [ "$PLAN_ONLY" -eq 0 ] || [ ! -x "$EXP" ]; then
  cargo build --release --locked --bins
fi

commit=$(git rev-parse --short=10 HEAD)
for name in "${NAMES[@]}"; do
  found=""
  for e in "${EXPERIMENTS[@]}"; do
    [ "${e%%|*}" = "$name" ] && found=$e
  done
  [ -n "$found" ] || { echo "paper-runs.sh: no experiment '$name' (--list)" >&2; exit 2; }
  IFS='|' read -r _ sc extra <<<"$found"
  # shellcheck disable=SC2206
  args=(--retry-unfaithful 1 --retry-later $extra)
  if [ -n "${SHARD:-}" ]; then args+=(--shard "$SHARD"); fi
  if [ "$PLAN_ONLY" -eq 1 ]; then
    # What `plan` takes of the run's arguments.
    plan_args=()
    i=0
    while [ $i -lt ${#args[@]} ]; do
      case ${args[$i]} in
        --quick) plan_args+=(--quick) ;;
        --repeat|--dilation) plan_args+=("${args[$i]}" "${args[$((i + 1))]}"); i=$((i + 1)) ;;
        *) ;;
      esac
      i=$((i + 1))
    done
    echo "== $name: $("$EXP" plan "$sc" "${plan_args[@]}" | sed -n 2p)"
    continue
  fi
  run="$(date -u +%Y%m%d)-$commit${SHARD:+-shard${SHARD%%/*}}"
  out="results/$name-$run"
  echo "== $name: $EXP run $sc ${args[*]} --out $out"
  status=0
  "$EXP" run "$sc" "${args[@]}" --no-progress --out "$out" || status=$?
  # 3: written, but a kept repeat was NOT FAITHFUL: archive it all the same
  # (the tables count what held).
  if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    echo "paper-runs.sh: $name failed (status $status); not archived" >&2
    exit "$status"
  fi
  "$EXP" archive "$out" "archive/$name/$run"
done

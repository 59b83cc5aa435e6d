#!/usr/bin/env bash
# Runs a softswitch-exp sweep on a Slurm cluster: a job array whose task K
# runs shard K of N (`softswitch-exp run SCENARIO --shard K/N`) on a node of
# its own, and a job that merges the shards (`softswitch-exp report`) once
# every task has ended, failing if a shard is missing.
#
# Usage: scripts/slurm-sweep.sh SCENARIO --shards N [options] [-- RUN ARGS...]
#
#   --out DIR        the sweep's results (default results/<scenario>-<UTC time>):
#                    shard K in DIR/shard-K, the merge in DIR/merged, the jobs'
#                    logs in DIR/logs, what was submitted in DIR/slurm-jobs.txt
#   --exp PATH       the softswitch-exp every node runs, softswitch and
#                    softswitch-tg beside it (default: softswitch-exp on PATH,
#                    else this checkout's target/release/softswitch-exp)
#   --cpus C         each shard's --cpus-per-task (default: the fewest CPUs of a
#                    node of the partition, from sinfo: all of a node's)
#   --partition P    --time T    --account A    --job-name NAME
#                    given to sbatch (job names: NAME, NAME-report; default
#                    softswitch-<scenario>)
#   --sbatch OPT     any other sbatch option for both jobs (repeatable), e.g.
#                    --sbatch --constraint=bigmem
#   --dry-run        print the plan and the sbatch commands, submit nothing
#   RUN ARGS         for every `softswitch-exp run`: --quick, --repeat 5,
#                    --retry-unfaithful 1, --dilation 40, …
#
# Every path must be one every node sees (a shared file system): the binary,
# the scenario (and its CDF files) and DIR. Each shard runs as root — the job
# is root's when root submits it; otherwise shard.sbatch runs the binary
# through `sudo -n` (a sudoers rule for it on every node). The batch files
# are scripts/slurm/shard.sbatch and scripts/slurm/report.sbatch: plain
# files to adapt; this script passes them their options and arguments.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-2}"
}
die() {
  echo "slurm-sweep: $*" >&2
  exit 2
}

scenario="" shards="" out="" exp="" cpus="" partition="" time_limit="" account=""
job_name="" dry_run=0
sbatch_opts=()
run_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --shards) shards=${2:-}; shift 2 || die "--shards needs N" ;;
    --shards=*) shards=${1#*=}; shift ;;
    --out) out=${2:-}; shift 2 || die "--out needs DIR" ;;
    --out=*) out=${1#*=}; shift ;;
    --exp) exp=${2:-}; shift 2 || die "--exp needs PATH" ;;
    --exp=*) exp=${1#*=}; shift ;;
    --cpus) cpus=${2:-}; shift 2 || die "--cpus needs C" ;;
    --cpus=*) cpus=${1#*=}; shift ;;
    --partition) partition=${2:-}; shift 2 || die "--partition needs P" ;;
    --partition=*) partition=${1#*=}; shift ;;
    --time) time_limit=${2:-}; shift 2 || die "--time needs T" ;;
    --time=*) time_limit=${1#*=}; shift ;;
    --account) account=${2:-}; shift 2 || die "--account needs A" ;;
    --account=*) account=${1#*=}; shift ;;
    --job-name) job_name=${2:-}; shift 2 || die "--job-name needs NAME" ;;
    --job-name=*) job_name=${1#*=}; shift ;;
    --sbatch) sbatch_opts+=("${2:-}"); shift 2 || die "--sbatch needs an option" ;;
    --sbatch=*) sbatch_opts+=("${1#*=}"); shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; run_args=("$@"); break ;;
    -*) die "unknown option $1 (options for softswitch-exp run go after --)" ;;
    *) [ -z "$scenario" ] || die "one scenario only (got $scenario and $1)"; scenario=$1; shift ;;
  esac
done
[ -n "$scenario" ] || usage
[ -f "$scenario" ] || die "no scenario file $scenario"
[[ $shards =~ ^[1-9][0-9]*$ ]] || die "--shards N: a number of shards, at least 1 (got '${shards}')"
[ -z "$cpus" ] || [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "--cpus C: a number (got '$cpus')"
for a in "${run_args[@]}"; do
  case $a in
    --shard|--shard=*|--out|--out=*) die "$a: the script sets --shard and --out of every run itself" ;;
  esac
done

abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
scenario=$(abs "$scenario")
if [ -z "$exp" ]; then
  exp=$(command -v softswitch-exp || true)
  [ -n "$exp" ] || exp=$repo/target/release/softswitch-exp
fi
[ -x "$exp" ] || die "no softswitch-exp at $exp (build it: cargo build --release; or say where: --exp PATH)"
exp=$(abs "$exp")
for sib in softswitch softswitch-tg; do
  [ -x "$(dirname "$exp")/$sib" ] || die "no $sib beside $exp: the runner starts the one beside it"
done
name=$(basename "$scenario" .toml)
[ -n "$out" ] || out=results/$name-$(date -u +%Y%m%d-%H%M%S)
case $out in /*) ;; *) out=$PWD/$out ;; esac
[ -n "$job_name" ] || job_name=softswitch-$name
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  die "$out is not empty: a sweep writes into a directory of its own (--out DIR)"
fi

# What `softswitch-exp plan` needs of the run's arguments.
plan_args=()
for ((i = 0; i < ${#run_args[@]}; i++)); do
  case ${run_args[$i]} in
    --quick|--repeat=*|--first-repeat=*|--dilation=*) plan_args+=("${run_args[$i]}") ;;
    --repeat|--first-repeat|--dilation) plan_args+=("${run_args[$i]}" "${run_args[$((i + 1))]:-}"); i=$((i + 1)) ;;
  esac
done
echo "The work (softswitch-exp plan):"
plan=$("$exp" plan "$scenario" --shards "$shards" "${plan_args[@]}") || die "softswitch-exp plan failed"
printf '%s\n' "$plan" | grep -v '^ ' || true
if printf '%s\n' "$plan" | grep -q '^shard [0-9]*/[0-9]*: 0 combinations'; then
  total=$(printf '%s\n' "$plan" | sed -n 's/^\([0-9]*\) combinations.*/\1/p')
  die "$shards shards of ${total:-too few} combinations: some would run nothing (use at most ${total:-fewer} shards)"
fi

if [ -z "$cpus" ]; then
  # The nodes of the partition the jobs go to: the one asked, or the default.
  p=$partition
  [ -n "$p" ] || p=$(sinfo -h -o '%P' 2>/dev/null | sed -n 's/\*$//p' | head -n1) || true
  cpus=$(sinfo -h -N ${p:+-p "$p"} -o '%c' 2>/dev/null | sort -n | head -n1) || true
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "cannot tell the nodes' CPU count from sinfo${p:+ -p $p}: say --cpus C"
fi

common=()
[ -z "$partition" ] || common+=(--partition="$partition")
[ -z "$account" ] || common+=(--account="$account")
common+=("${sbatch_opts[@]}")
shard_cmd=(sbatch --parsable --array=0-$((shards - 1)) --job-name="$job_name"
  --exclusive --nodes=1 --ntasks=1 --cpus-per-task="$cpus" --mem=0
  --output="$out/logs/shard-%a.out" --chdir="$out")
[ -z "$time_limit" ] || shard_cmd+=(--time="$time_limit")
shard_cmd+=("${common[@]}" "$here/slurm/shard.sbatch" "$exp" "$scenario" "$shards" "$out" "${run_args[@]}")
report_cmd=(sbatch --parsable --dependency=afterany:ARRAY_JOB --job-name="$job_name-report"
  --nodes=1 --ntasks=1 --cpus-per-task=1
  --output="$out/logs/report.out" --chdir="$out"
  "${common[@]}" "$here/slurm/report.sbatch" "$exp" "$shards" "$out")

quoted() { printf '%q ' "$@" | sed 's/ $//'; }
if [ "$dry_run" = 1 ]; then
  echo "Would submit (--dry-run):"
  echo "  $(quoted "${shard_cmd[@]}")"
  echo "  $(quoted "${report_cmd[@]}")"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "note: you are not root: each shard runs \`sudo -n $exp\` (a sudoers rule for it on every node)"
fi

mkdir -p "$out/logs"
echo "Submitting:"
echo "+ $(quoted "${shard_cmd[@]}")"
array_id=$("${shard_cmd[@]}")
array_id=${array_id%%;*}
[[ $array_id =~ ^[0-9]+$ ]] || die "sbatch gave no job id: $array_id"
report_cmd=("${report_cmd[@]/afterany:ARRAY_JOB/afterany:$array_id}")
echo "+ $(quoted "${report_cmd[@]}")"
if ! report_id=$("${report_cmd[@]}"); then
  echo "slurm-sweep: submitting the merge failed; the shards (job $array_id) still run: scancel $array_id, or merge by hand later" >&2
  exit 1
fi
report_id=${report_id%%;*}
{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) by $(id -un) on $(hostname)"
  quoted "${shard_cmd[@]}"; echo
  echo "# -> array job $array_id"
  quoted "${report_cmd[@]}"; echo
  echo "# -> merge job $report_id"
} >"$out/slurm-jobs.txt"

cat <<MSG
array job: $array_id
merge job: $report_id
$shards shards of $name ($job_name, tasks ${array_id}_0 … ${array_id}_$((shards - 1)), $cpus CPUs each, a node each), then the merge (job $report_id, once every shard has ended).
Watch:   squeue -j $array_id,$report_id
         sacct -j $array_id,$report_id --format=JobID,JobName%32,State,ExitCode,Elapsed,NodeList
Logs:    $out/logs/shard-K.out, $out/logs/report.out
Results: $out/shard-K (one per shard), merged into $out/merged (summary.json, stats.csv, figures)
Cancel:  scancel $array_id $report_id
MSG

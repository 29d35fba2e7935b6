#!/usr/bin/env bash
# Runs one scheduler benchmark on one runtime, the way the catalog (sched.toml) and
# bench/sched_compare.py do:
#   run.sh RUNTIME BENCH -p PROCS [--per-proc N] [--mode MODE] [port options...]
# RUNTIME: ours | pthreads | go | tokio;  BENCH: cycle | yield | churn | locality | transfer
# --per-proc N  gives N threads per processor (-t N*PROCS), so every runtime gets the same
#               load at every processor count;
# --mode MODE   cycle: rings100 | rings1 (100 or 1 rings of 5 per processor, the seed's
#               two columns); locality: own | share (-S 0/1); transfer: yield | park (-e 0/1).
# The process is confined to the first PROCS CPUs it may use, for every runtime alike
# (Go and Tokio cannot pin their threads themselves). The program's output is passed
# through unchanged: its last stdout line is the result JSON of docs/format-bench.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

fail() { echo "run.sh: $*" >&2; exit 2; }

(($# >= 2)) || fail "usage: run.sh RUNTIME BENCH -p PROCS [--per-proc N] [--mode MODE] [options]"
runtime=$1 bench=$2
shift 2
case "$bench" in cycle | yield | churn | locality | transfer) ;; *) fail "unknown benchmark '$bench'" ;; esac
case "$runtime" in
  ours | pthreads) program=("$here/c/bin/$bench-$runtime") ;;
  go) program=("$here/go/bin/schedbench" "$bench") ;;
  tokio) program=("$here/rust/target/release/schedbench-tokio" "$bench") ;;
  *) fail "unknown runtime '$runtime' (ours, pthreads, go, tokio)" ;;
esac
[[ -x "${program[0]}" ]] || fail "${program[0]} is not built; run native/schedbench/build.sh"

procs="" per_proc="" mode="" rest=()
while (($#)); do
  case "$1" in
    -p) procs=${2:-}; rest+=(-p "$procs"); shift 2 ;;
    --per-proc) per_proc=${2:-}; shift 2 ;;
    --mode) mode=${2:-}; shift 2 ;;
    *) rest+=("$1"); shift ;;
  esac
done
[[ "$procs" =~ ^[1-9][0-9]*$ ]] || fail "-p needs a positive number of processors"
case "$bench:$mode" in
  *:) ;;
  cycle:rings100) per_proc=500 ;;
  cycle:rings1) per_proc=5 ;;
  locality:own) rest+=(-S 0) ;;
  locality:share) rest+=(-S 1) ;;
  transfer:yield) rest+=(-e 0) ;;
  transfer:park) rest+=(-e 1) ;;
  *) fail "mode '$mode' does not apply to $bench" ;;
esac
if [[ -n "$per_proc" ]]; then
  [[ "$per_proc" =~ ^[1-9][0-9]*$ ]] || fail "--per-proc needs a positive integer"
  rest+=(-t $((per_proc * procs)))
fi

# The first PROCS CPUs of this process's affinity mask.
allowed=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
IFS=, read -ra cpus <<<"$allowed"
((procs <= ${#cpus[@]})) || procs=${#cpus[@]}
chosen=$(IFS=,; echo "${cpus[*]:0:procs}")
exec taskset -c "$chosen" "${program[@]}" "${rest[@]}"

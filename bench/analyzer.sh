#!/usr/bin/env bash
# The analyzer's figures: analysis + test generation of every pair of the POSIX model's
# operations, wall time, CPU time per pair, paths lost to unknown/errors, tests per pair.
# Usage: bash bench/analyzer.sh [OUT_DIR [OPS [TESTGEN_OPTION...]]]   (default:
# out/bench-analyzer, removed first; OPS: comma-separated operations, default all, "paper"
# for the paper's 18; e.g. `--value-cap 1` for one test per isomorphism class)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/bench-analyzer}
ops=${2:-}
shift $(($# < 2 ? $# : 2))
if [ "$ops" = paper ]; then
    ops=open,link,unlink,rename,stat,fstat,lseek,close,pipe,read,write,pread,pwrite,mmap,munmap,mprotect,memread,memwrite
fi
rm -rf "$out"
start=$(date +%s.%N)
scalecheck analyze --model posix ${ops:+--ops "$ops"} --out "$out" --json > "$out.analysis.json"
mid=$(date +%s.%N)
scalecheck testgen "$out" --json "$@" > "$out.testgen.json"
end=$(date +%s.%N)
python3 - "$out" "$start" "$mid" "$end" <<'PY'
import json, sys
out, start, mid, end = sys.argv[1], *map(float, sys.argv[2:])
analysis = json.load(open(f"{out}/analysis/summary.json"))
testgen = json.load(open(f"{out}/testgen.json"))
tests = {tuple(r["pair"]): r["tests"] for r in testgen["pairs"]}
timings = json.load(open(f"{out}/analysis/timings.json"))
cpu = {tuple(row["pair"]): timings["-".join(row["pair"])]["cpu_seconds"] for row in analysis["pairs"]}
print(f"{'pair':24} {'paths':>6} {'commute':>8} {'cpu s':>7} {'tests':>6}")
for row in analysis["pairs"]:
    pair = tuple(row["pair"])
    print(f"{' || '.join(pair):24} {row['paths']:6} {row['commutative_paths']:8} {cpu[pair]:7.2f} {tests[pair]:6}")
t, g = analysis["totals"], testgen["totals"]
print(f"\npairs: {t['pairs']}, paths: {t['paths']} ({t['commutative_paths']} commutative), "
      f"lost to unknown: {t['unknown_paths']}, model errors: {t['error_paths']}")
print(f"tests: {g['tests']} (cap {testgen['cap']}/path; capped paths {g['capped_paths']}, "
      f"unrealizable {g['unrealizable_paths']}, unknown {g['unknown_paths']}, failed {g['failed_paths']})")
print(f"wall: analyze {mid - start:.0f} s + testgen {end - mid:.0f} s = {end - start:.0f} s; "
      f"analysis CPU {sum(cpu.values()):.0f} s (mean {sum(cpu.values()) / len(cpu):.1f} s/pair, "
      f"max {max(cpu.values()):.1f} s)")
PY

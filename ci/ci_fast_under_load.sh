#!/usr/bin/env bash
# The ci-fast suite N times, each under a competing busy loop pinned to one core (issue 20,
# deliverable 5: no scenario's verdict may depend on machine speed). Root only.
#
#   ci/ci_fast_under_load.sh [--runs 10] [--mrct PATH] [--out DIR] [--core 0] [--no-load]
#
# Each run is `mrct suite scenarios/ --tag ci-fast --out DIR/runK` (the README's invocation)
# with `taskset -c CORE sh -c 'while :; do :; done'` running beside it. Prints, per run, the
# suite's exit code, the load average and the verdicts that were not "pass", then the pass count
# of every scenario over all runs. Exit 0 when every run passed.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=10
mrct=""
out=""
core=0
load=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --mrct) mrct=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --core) core=$2; shift 2 ;;
    --no-load) load=0; shift ;;
    *) echo "ci_fast_under_load.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "ci_fast_under_load.sh: --runs $runs: a positive integer" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "ci_fast_under_load.sh: needs root (the suite builds fabrics)" >&2; exit 2; }
if [ -z "$mrct" ]; then
  for c in "$repo"/build/ci/bin/mrct "$repo"/build/release/bin/mrct; do
    [ -x "$c" ] && { mrct=$c; break; }
  done
fi
[ -x "$mrct" ] || { echo "ci_fast_under_load.sh: no mrct binary; use --mrct" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/ci-fast-load.XXXXXX)
mkdir -p "$out"

busy=""
stop_busy() {
  if [ -n "$busy" ]; then
    kill "$busy" 2> /dev/null || true
    wait "$busy" 2> /dev/null || true
    busy=""
  fi
}
trap stop_busy EXIT
trap 'exit 130' INT TERM

echo "# $mrct suite scenarios/ --tag ci-fast, $runs run(s), $(nproc) cores," \
  "$([ $load = 1 ] && echo "busy loop on core $core" || echo "no busy loop"), out $out"
passed=0
for ((k = 1; k <= runs; k++)); do
  if [ $load = 1 ]; then
    taskset -c "$core" sh -c 'while :; do :; done' &
    busy=$!
  fi
  t0=$(date +%s)
  rc=0
  "$mrct" suite "$repo/scenarios" --tag ci-fast --out "$out/run$k" > "$out/run$k.log" 2>&1 || rc=$?
  la=$(cut -d' ' -f1-3 /proc/loadavg)
  stop_busy
  [ $rc -eq 0 ] && passed=$((passed + 1))
  not_passed=$(python3 - "$out/run$k/suite.json" <<'PYEOF'
import json, sys
try:
    res = json.load(open(sys.argv[1]))["results"]
except (OSError, ValueError, KeyError) as e:
    print(f"(no suite.json: {e})")
    sys.exit(0)
print(" ".join(f"{r.get('scenario', r.get('name'))}={r['verdict']}: {r.get('reason', '')[:120]}" for r in res if r["verdict"] != "pass") or "-")
PYEOF
)
  echo "run $k: exit $rc, $(( $(date +%s) - t0 )) s, load $la, not passed: $not_passed"
done
python3 - "$out" "$runs" <<'PYEOF'
import collections, json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
count = collections.Counter()
seen = collections.Counter()
for k in range(1, runs + 1):
    p = os.path.join(out, f"run{k}", "suite.json")
    if not os.path.exists(p):
        continue
    for r in json.load(open(p))["results"]:
        name = r.get("scenario", r.get("name"))
        seen[name] += 1
        count[name] += r["verdict"] == "pass"
for name in sorted(seen):
    print(f"  {name:28} {count[name]}/{seen[name]} pass")
PYEOF
echo "suite passed $passed/$runs runs"
[ "$passed" -eq "$runs" ]

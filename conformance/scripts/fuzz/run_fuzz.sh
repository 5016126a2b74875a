#!/usr/bin/env bash
# Builds the script parser's libFuzzer target (clang, ASan+UBSan, `fuzz` preset) and runs it
# from a seed corpus made of the script library (scenarios/scripts/*.mrcs). Usage:
#   conformance/scripts/fuzz/run_fuzz.sh [seconds, default 60]
# Environment: MRC_FUZZ_BUILD=build dir (default build/fuzz).
set -euo pipefail
secs=${1:-60}
top=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$top"
build=${MRC_FUZZ_BUILD:-build/fuzz}
cmake --preset fuzz -B "$build" -DMRC_SKIP_DIRS="fault-injector;gui;lab;testbed;bench;mrct" \
  > /dev/null
cmake --build "$build" -j 2 --target script_fuzz
work="$build/script-corpus"
rm -rf "$work"
mkdir -p "$work"
cp scenarios/scripts/*.mrcs "$work/"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1
echo "== script_fuzz for ${secs}s (seed corpus: $(ls "$work" | wc -l) scripts)"
set +e
"$build/fuzz/script_fuzz" -max_total_time="$secs" -max_len=8192 -print_final_stats=1 \
  -dict=conformance/scripts/fuzz/script.dict -artifact_prefix="$build/script-" "$work" \
  > "$build/script_fuzz.log" 2>&1
rc=$?
set -e
grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|ERROR|SUMMARY' \
  "$build/script_fuzz.log" || true
[ $rc -eq 0 ] || { echo "script_fuzz found a crash (exit $rc), see $build/script_fuzz.log"; exit 1; }

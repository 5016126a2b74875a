#!/usr/bin/env bash
# Builds the engine libFuzzer targets (clang, ASan+UBSan, `fuzz` preset), writes their seed corpora
# from short simulated transfers (engine_fuzz_corpus), and runs the responder and the requester
# target. Usage:
#   reference-impl/engine/fuzz/run_fuzz.sh [seconds per target, default 60]
# Environment: MRC_FUZZ_BUILD=build dir (default build/fuzz), MRC_FUZZ_PARALLEL=1 runs both
# targets at once (one core each).
set -euo pipefail
secs=${1:-60}
top=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$top"
build=${MRC_FUZZ_BUILD:-build/fuzz}
cmake --preset fuzz -B "$build" \
  -DMRC_SKIP_DIRS="conformance;fault-injector;gui;lab;testbed;bench;mrct" > /dev/null
cmake --build "$build" -j 2 --target responder_fuzz requester_fuzz engine_fuzz_corpus
work="$build/engine-corpus"
rm -rf "$work"
mkdir -p "$work"
"$build/fuzz/engine_fuzz_corpus" "$work/seed"
mkdir -p "$work/responder" "$work/requester"
cp "$work/seed/responder/"* "$work/responder/"
cp "$work/seed/requester/"* "$work/requester/"
# UBSan reports must stop the run (the build recovers from them by default).
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1
run() {
  local t=$1
  "$build/fuzz/${t}_fuzz" -max_total_time="$secs" -max_len=20000 -print_final_stats=1 \
    -artifact_prefix="$build/engine-${t}-" "$work/$t" > "$build/engine-${t}.log" 2>&1
}
report() {
  local t=$1 rc=$2
  echo "== ${t}_fuzz, ${secs}s, seed corpus $(ls "$work/seed/$t" | wc -l) files"
  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb|ERROR|SUMMARY|engine fuzz:' \
    "$build/engine-${t}.log" || true
  [ "$rc" -eq 0 ] || { echo "${t}_fuzz found a crash (exit $rc), see $build/engine-${t}.log"; return 1; }
}
status=0
if [ "${MRC_FUZZ_PARALLEL:-0}" = 1 ]; then
  set +e
  run responder & p1=$!
  run requester & p2=$!
  wait $p1; r1=$?
  wait $p2; r2=$?
  set -e
  report responder $r1 || status=1
  report requester $r2 || status=1
else
  for t in responder requester; do
    set +e
    run $t
    rc=$?
    set -e
    report $t $rc || status=1
  done
fi
exit $status

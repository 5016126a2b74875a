#!/usr/bin/env bash
# The project's test command (README "Quick start", and what .ci/run runs):
#   1. release build with warnings as errors, every unit and CLI test (ctest);
#   2. the same tests under ASan+UBSan;
#   3. a short libFuzzer run of every decoder target (clang, ASan+UBSan).
# Usage: ci/test.sh [--fast]   (--fast: step 1 only)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc)
fast=0
[ "${1:-}" = "--fast" ] && fast=1

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

step "configure + build (preset ci: RelWithDebInfo, -Werror)"
cmake --preset ci > build-ci-configure.log 2>&1 || { cat build-ci-configure.log; exit 1; }
rm -f build-ci-configure.log
cmake --build --preset ci -j "$jobs"

passed=0
failed=0
# Runs ctest and adds its counts to the totals printed at the end.
run_ctest() {
  local log
  log=$(mktemp)
  set +e
  ctest "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  rm -f "$log"
  if [ -n "$line" ]; then
    local total bad
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<< "$line")
    bad=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<< "$line")
    passed=$((passed + total - bad))
    failed=$((failed + bad))
  fi
  return $rc
}

step "tests (release)"
run_ctest --preset ci -j "$jobs" --timeout 600

if [ $fast -eq 0 ]; then
  step "configure + build (preset asan: ASan+UBSan, -Werror)"
  cmake --preset asan > /dev/null
  cmake --build --preset asan -j "$jobs"
  step "tests (ASan+UBSan)"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest --preset asan -j "$jobs" --timeout 900

  step "fuzz smoke (30 s per decoder target)"
  bash wire/fuzz/run_fuzz.sh 30
fi
step "done"
echo "$passed passed, $failed failed"

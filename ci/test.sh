#!/usr/bin/env bash
# The project's test command (README "Quick start", and what .ci/run runs):
#   0. every tracked C++ file is as .clang-format lays it out;
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

step "format (.clang-format on every tracked C++ file)"
if git -C "$top" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$top" ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run --Werror ||
    { echo "ci/test.sh: run clang-format -i on the files above" >&2; exit 1; }
else
  echo "not a git checkout: format check skipped"
fi

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
  # ASan+UBSan on the code that parses untrusted bytes or keeps protocol state: the codec, the
  # engine (alone and on the simulator), the checker, the injector, the hostile-frame
  # crafter (it decodes whatever a tap shows), the lib_mrc.so provider (it owns applications'
  # memory regions) and the script player (it parses scripts and frames). The rest (Python
  # testbed, Qt viewer, namespace tools) already ran above; building it twice would double CI.
  asan_tests="mrc_wire_test mrc_wire_tins_test mrc_engine_test mrc_sim_test mrc_engine_sim_test mrc_check_test mrc_faults_test mrc_hostile_test mrc_provider_test mrc_cq_ring_test mrc_softmrcd_test mrc_scripts_test"
  step "configure + build (preset asan: ASan+UBSan, -Werror): $asan_tests"
  cmake --preset asan -DMRC_SKIP_DIRS="gui;lab;testbed" > /dev/null
  # shellcheck disable=SC2086
  cmake --build --preset asan -j "$jobs" --target $asan_tests
  step "tests (ASan+UBSan)"
  for t in $asan_tests; do
    bin=$(find build/asan -type f -name "$t" -perm -u+x | head -1)
    [ -n "$bin" ] || { echo "missing $t"; failed=$((failed + 1)); continue; }
    log=$(mktemp)
    if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" --gtest_brief=1 > "$log" 2>&1; then
      n=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
      passed=$((passed + n))
      echo "$t: $n passed"
    else
      tail -40 "$log"
      echo "$t: FAILED under ASan+UBSan"
      failed=$((failed + 1))
    fi
    rm -f "$log"
  done

  step "fuzz smoke (20 s per target: frame decoder, capture reader, responder, requester, script parser, device socket)"
  bash wire/fuzz/run_fuzz.sh 20
  MRC_FUZZ_PARALLEL=1 bash reference-impl/engine/fuzz/run_fuzz.sh 20
  bash conformance/scripts/fuzz/run_fuzz.sh 20
  bash reference-impl/provider/run_fuzz.sh 20
fi
step "done"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

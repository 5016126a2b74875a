#!/usr/bin/env bash
# The steps of the GitHub composite action (ci/action/action.yml), runnable anywhere: install
# the Debian/Ubuntu packages, build `mrct`, run a scenario suite against an implementation,
# collect the artifacts and write the Markdown summary. The action only maps its inputs to the
# variables below and uploads the artifacts directory, so testing this script here tests the
# action's logic (ctest: ci_local_action).
#
# Inputs (environment; all optional):
#   MRC_ACTION_SCENARIOS  scenario directory or files, space-separated (default: <repo>/scenarios)
#   MRC_ACTION_TAGS       scenario tags to select, space-separated (default: ci-fast; "" = all)
#   MRC_ACTION_FILTER     regular expression on scenario names
#   MRC_ACTION_DUT        DUT profile (TOML, ci/dut/README.md); empty = the reference endpoint
#   MRC_ACTION_MUTANTS    1 = run the scenarios' mutants instead (checker self-test)
#   MRC_ACTION_INSTALL    1 = install packages with ci/install-deps.sh (default 1)
#   MRC_ACTION_MRCT       an mrct binary to use instead of building one
#   MRC_ACTION_BUILD_DIR  build directory (default <repo>/build/action)
#   MRC_ACTION_OUT        artifacts directory (default ./mrc-artifacts)
#   MRC_ACTION_STRICT     1 = unsupported and not-run scenarios fail too
#   MRC_ACTION_SUMMARY    Markdown summary file (default: $GITHUB_STEP_SUMMARY, else OUT/summary.md)
#   MRC_ACTION_JOBS       scenarios at once (default 1)
#   MRC_ACTION_SHARD      I/N: run share I of N of the (scenario x DUT x seed) matrix (one runner
#                         of N); `mrct suite merge` (ci/action/merge) combines the N reports
#   MRC_ACTION_SEEDS      a seed sweep, e.g. 1-20 or 3,7,11: each scenario once per seed
#   MRC_ACTION_CAPTURES   keep pcaps: all, failed (default: only of cases that did not pass), none
#   MRC_ACTION_API_LIB    a lib_mrc.so: run the API suite on it (`mrct api-suite --lib`) before
#                         the scenarios; its reports go to OUT/api/ and its table to the summary
#   MRC_ACTION_API_ARGS   more `mrct api-suite` options (e.g. "--device mlx5_0"), space-separated
#   MRC_ACTION_API_ENV    environment for the API suite, space-separated NAME=VALUE (e.g.
#                         "MRC_SOFT_IO=loopback" for the reference library without a wire)
# Exit code: the suite's (0 nothing failed, 1 something failed, 2 usage), or the failing step's.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scenarios=${MRC_ACTION_SCENARIOS:-$repo/scenarios}
tags=${MRC_ACTION_TAGS-ci-fast}
filter=${MRC_ACTION_FILTER:-}
dut=${MRC_ACTION_DUT:-}
mutants=${MRC_ACTION_MUTANTS:-0}
install=${MRC_ACTION_INSTALL:-1}
mrct=${MRC_ACTION_MRCT:-}
build_dir=${MRC_ACTION_BUILD_DIR:-$repo/build/action}
out=${MRC_ACTION_OUT:-$PWD/mrc-artifacts}
strict=${MRC_ACTION_STRICT:-0}
summary=${MRC_ACTION_SUMMARY:-${GITHUB_STEP_SUMMARY:-}}
jobs=${MRC_ACTION_JOBS:-1}
captures=${MRC_ACTION_CAPTURES:-failed}
shard=${MRC_ACTION_SHARD:-}
seeds=${MRC_ACTION_SEEDS:-}
api_lib=${MRC_ACTION_API_LIB:-}
api_args=${MRC_ACTION_API_ARGS:-}
api_env=${MRC_ACTION_API_ENV:-}

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -E"

if [ "$install" = 1 ]; then
  step "install packages"
  bash "$repo/ci/install-deps.sh"
fi

if [ -z "$mrct" ]; then
  step "build mrct ($build_dir)"
  log=$(mktemp)
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMRC_BUILD_GUI=OFF -DMRC_BUILD_BENCH=OFF > "$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
  cmake --build "$build_dir" --target mrct -j "$(nproc)"
  mrct=$build_dir/bin/mrct
fi
[ -x "$mrct" ] || { echo "local-action: no mrct binary at $mrct" >&2; exit 2; }
mrct=$(cd "$(dirname "$mrct")" && pwd)/$(basename "$mrct")

mkdir -p "$out"
api_rc=0
if [ -n "$api_lib" ]; then
  step "API suite ($api_lib)"
  [ -f "$api_lib" ] || { echo "local-action: MRC_ACTION_API_LIB=$api_lib: no such file" >&2; exit 2; }
  mkdir -p "$out/api"
  read -r -a extra <<< "$api_args"
  read -r -a envs <<< "$api_env"
  # root: the reference library's device opens AF_PACKET sockets, and the EPERM tests drop
  # CAP_NET_ADMIN themselves.
  $SUDO env "${envs[@]}" "$mrct" api-suite --lib "$(cd "$(dirname "$api_lib")" && pwd)/$(basename "$api_lib")" \
    --json "$out/api/api-suite.json" --junit "$out/api/api-suite.xml" --md "$out/api/api-suite.md" \
    "${extra[@]}" || api_rc=$?
  if [ -f "$out/api/api-suite.md" ] && [ -n "$summary" ]; then
    cat "$out/api/api-suite.md" >> "$summary"
  fi
  echo "API suite: exit $api_rc"
fi

step "suite"
args=(suite)
read -r -a paths <<< "$scenarios"
args+=("${paths[@]}" --out "$out/suite" --mrct "$mrct" --jobs "$jobs" --keep-captures "$captures")
for t in $tags; do args+=(--tag "$t"); done
[ -n "$filter" ] && args+=(--filter "$filter")
[ -n "$dut" ] && args+=(--dut "$(cd "$(dirname "$dut")" && pwd)/$(basename "$dut")")
[ "$mutants" = 1 ] && args+=(--mutants)
[ "$strict" = 1 ] && args+=(--strict)
[ -n "$shard" ] && args+=(--shard "$shard")
[ -n "$seeds" ] && args+=(--seeds "$seeds")
echo "$mrct ${args[*]}"
rc=0
# mrct run/suite exec Debian's python3 with PYTHONPATH=<repo>/testbed; calling the module
# directly does the same without depending on where mrct was built from.
$SUDO env PYTHONPATH="$repo/testbed" MRCT="$mrct" /usr/bin/python3 -m mrctb "${args[@]}" || rc=$?

step "summary"
if [ -f "$out/suite/suite.md" ]; then
  if [ -n "$summary" ]; then
    cat "$out/suite/suite.md" >> "$summary"
  else
    cp "$out/suite/suite.md" "$out/summary.md"
    summary=$out/summary.md
  fi
  echo "summary: $summary"
else
  echo "local-action: the suite wrote no report (exit $rc)" >&2
  [ "$rc" -ne 0 ] || rc=1
fi
[ "$api_rc" -eq 0 ] || [ "$rc" -ne 0 ] || rc=$api_rc
# Artifacts readable by the (non-root) upload step.
[ -z "$SUDO" ] || $SUDO chown -R "$(id -u):$(id -g)" "$out" 2>/dev/null || true
echo "artifacts: $out"
exit "$rc"

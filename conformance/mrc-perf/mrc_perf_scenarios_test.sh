#!/usr/bin/env bash
# Scenarios through mrc-perf and lib_mrc.so (the DUT profile mrc-perf.toml, every role a DUT):
# incast (one mrc-perf node process on the responder serving three requesters) and
# baseline-srv6, with --strict: unsupported or not-run fails too.
# Usage: mrc_perf_scenarios_test.sh MRCT   Exit 0 pass, 1 fail, 77 skipped (needs root).
set -u
mrct=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$mrct" suite "$repo/scenarios/incast.toml" "$repo/scenarios/baseline-srv6.toml" \
  --dut "$repo/conformance/mrc-perf/mrc-perf.toml" --strict --out "$out/suite" --keep-captures none
rc=$?
[ -f "$out/suite/suite.md" ] && cat "$out/suite/suite.md"
exit $rc

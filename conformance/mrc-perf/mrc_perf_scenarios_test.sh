#!/usr/bin/env bash
# Scenarios through mrc-perf and lib_mrc.so (the DUT profile mrc-perf.toml, every role a DUT),
# the two that need the DUT contract's node role: incast (one mrc-perf process on the responder
# serving three requesters) and all-to-all (every host requester and responder twice). Each must
# run (not not-run, unsupported or error), every transfer complete and every byte verify. Their
# full verdicts (checker rules, EV retirement counts) are printed and not yet gated on (`judge ...
# pass`): on the loaded 2-core machine incast still fails MRC-RSP-009 and all-to-all retires EVs
# (README.md, Status). Then the same profile with the reference library's engine running the
# regress-cack mutant (MRC_SOFT_MUTANT, test only: every 8th SACK takes cack_psn back) must fail
# incast on MRC-RSP-002: the checker on the DUT's link-side captures catches a DUT that breaks
# the order rule it now judges per capture point.
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
# judge SUITE_JSON EXPECT N: each of the N results must run, complete and verify, and with EXPECT
# "pass" have verdict pass, with "fail:RULE" verdict fail with RULE among the failing
# expectations ("runs": no verdict asked).
judge() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, expect, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(path))
bad = []
for r in doc["results"]:
    name, verdict = r["scenario"], r["verdict"]
    if r.get("dut") != "mrc-perf+lib_mrc":
        bad.append(f"{name}: run against {r.get('dut')!r}, not the mrc-perf profile")
    if verdict in ("not-run", "unsupported", "error"):
        bad.append(f"{name}: {verdict}: {r.get('reason', '')}")
        continue
    exps = {e["name"]: e for e in r.get("expectations", [])}
    for want in ("transfer completes", "data verified"):
        e = exps.get(want)
        if not e or e["status"] != "pass":
            bad.append(f"{name}: {want}: {e['observed'] if e else 'not judged'}")
    failing = [f"{e['name']}: {e.get('observed', '')}" for e in r.get("expectations", [])
               if e.get("status") == "fail"]
    if expect == "runs":
        print(f"{name}: verdict {verdict} (not gated): " + "; ".join(failing))
    elif expect == "pass":
        if verdict != "pass":
            bad.append(f"{name}: verdict {verdict}: " + "; ".join(failing))
    else:
        rule = expect.split(":", 1)[1]
        if verdict != "fail" or rule not in json.dumps(failing):
            bad.append(f"{name}: verdict {verdict}, expected fail on {rule}: " + "; ".join(failing))
if len(doc["results"]) != n:
    bad.append(f"{len(doc['results'])} results, expected {n}")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
}
rc=0
"$mrct" suite "$repo/scenarios/incast.toml" "$repo/scenarios/all-to-all.toml" \
  --dut "$repo/conformance/mrc-perf/mrc-perf.toml" --out "$out/suite" --keep-captures none
[ -f "$out/suite/suite.md" ] && cat "$out/suite/suite.md"
judge "$out/suite/suite.json" runs 2 || rc=1

# The mutant: the same profile, its commands by absolute path ($MRC_DUT_DIR is this copy's
# folder) and run with the device's engine told to run regress-cack (in the command line: the
# profile's env table may not name MRC_ variables, which belong to the runner).
sed -e "s|\\\$MRC_DUT_DIR|$repo/conformance/mrc-perf|g" \
  -e 's|exec "|MRC_SOFT_MUTANT=regress-cack exec "|' \
  "$repo/conformance/mrc-perf/mrc-perf.toml" >"$out/mutant.toml"
grep -q '^node = .MRC_SOFT_MUTANT=regress-cack exec' "$out/mutant.toml" || {
  echo "FAIL: could not make the mutant profile"
  exit 1
}
"$mrct" suite "$repo/scenarios/incast.toml" --dut "$out/mutant.toml" --out "$out/mutant" \
  --keep-captures none
[ -f "$out/mutant/suite.md" ] && cat "$out/mutant/suite.md"
judge "$out/mutant/suite.json" fail:MRC-RSP-002 1 || rc=1
exit $rc

#!/usr/bin/env bash
# Scenarios through mrc-perf and lib_mrc.so (the DUT profile mrc-perf.toml, every role a DUT),
# the two that need the DUT contract's node role: incast (one mrc-perf process on the responder
# serving three requesters) and all-to-all (every host requester and responder twice). Each must
# run (not not-run, unsupported or error), every transfer complete and every byte and immediate
# verify. The full verdict (checker rules, EV retirement counts) is printed, not gated on: on a
# loaded 2-core machine the software device's timing varies (see README.md).
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
"$mrct" suite "$repo/scenarios/incast.toml" "$repo/scenarios/all-to-all.toml" \
  --dut "$repo/conformance/mrc-perf/mrc-perf.toml" --out "$out/suite" --keep-captures none
[ -f "$out/suite/suite.md" ] && cat "$out/suite/suite.md"
/usr/bin/python3 - "$out/suite/suite.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = []
for r in doc["results"]:
    name, verdict = r["scenario"], r["verdict"]
    if verdict in ("not-run", "unsupported", "error"):
        bad.append(f"{name}: {verdict}: {r.get('reason', '')}")
        continue
    exps = {e["name"]: e for e in r.get("expectations", [])}
    for want in ("transfer completes", "data verified"):
        e = exps.get(want)
        if not e or e["status"] != "pass":
            bad.append(f"{name}: {want}: {e['observed'] if e else 'not judged'}")
    if r.get("dut") != "mrc-perf+lib_mrc":
        bad.append(f"{name}: run against {r.get('dut')!r}, not the mrc-perf profile")
if len(doc["results"]) != 2:
    bad.append(f"{len(doc['results'])} results, expected 2")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY

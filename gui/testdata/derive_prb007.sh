#!/usr/bin/env bash
# Cuts gui/testdata/prb007-run from a real run of `mrct run scenarios/baseline-srv6.toml
# --mutant sparse-reverse-probe` (gui/testdata/README.md): the requester's merged capture
# (view/) around the report's first MRC-PRB-007 gap, with every control frame (EV probes,
# SACKs, endpoint operations: frames under 300 bytes) and one data frame in 50, the endpoints'
# event logs up to the window's end, the checker's report of the run reduced to its failed and
# warned rules, and the run's path table.
# Usage: derive_prb007.sh RUN_DIR OUT_DIR      (needs editcap, tshark and python3)
set -euo pipefail
run=${1:?usage: derive_prb007.sh RUN_DIR OUT_DIR}
out=${2:?usage: derive_prb007.sh RUN_DIR OUT_DIR}
for tool in editcap tshark python3; do
  command -v "$tool" >/dev/null || { echo "derive_prb007.sh: $tool not found" >&2; exit 2; }
done
[ -f "$run/manifest.json" ] || { echo "derive_prb007.sh: $run/manifest.json: no such file" >&2; exit 2; }
read -r view report paths from to < <(python3 - "$run" <<'PY'
import json, sys, os
run = sys.argv[1]
m = json.load(open(os.path.join(run, "manifest.json")))
rep = json.load(open(os.path.join(run, m["report"])))
rule = next((r for r in rep["rules"] if r.get("id") == "MRC-PRB-007"), None)
if rule is None or rule.get("status") not in ("warn", "fail") or not rule.get("evidence"):
    sys.exit(f"{run}: {m['report']}: MRC-PRB-007 has no violation (status "
             f"{rule and rule.get('status')}); run the sparse-reverse-probe mutant")
e = rule["evidence"][0]
if "from_ns" not in e:
    sys.exit(f"{run}: {m['report']}: MRC-PRB-007 evidence[0] has no from_ns")
# From 5 ms before the gap to 130 ms after its start: the mutant's next probe leaves 100 ms
# after the one before the gap (Mutator::kSparseProbeGapNs).
print(m["view_capture"], m["report"], m.get("paths", ""), e["from_ns"] - 5_000_000,
      e["from_ns"] + 130_000_000)
PY
)
mkdir -p "$out/view" "$out/check"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
secs() { python3 -c "import sys; n=int(sys.argv[1]); print(f'{n // 10**9}.{n % 10**9:09d}')" "$1"; }
editcap -A "$(secs "$from")" -B "$(secs "$to")" "$run/$view" "$tmp/window.pcapng"
tshark -r "$tmp/window.pcapng" -Y "frame.len < 300 || frame.number % 50 == 0" -F pcapng \
  -w "$out/view/h1.pcapng"
python3 - "$run/$report" "$out/check/report.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
rep["rules"] = [r for r in rep["rules"] if r.get("status") in ("fail", "warn")]
json.dump(rep, open(sys.argv[2], "w"), indent=1)
PY
# The endpoints' event logs up to the window's end, and each EV's first event with its port:
# they give the lanes their planes (the merged capture has one pcapng interface).
logs=$(python3 - "$run" "$out" "$to" <<'PY'
import json, os, sys
run, out, to = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = json.load(open(os.path.join(run, "manifest.json")))
names = []
os.makedirs(os.path.join(out, "endpoints"), exist_ok=True)
for rel in m.get("event_logs", []):
    seen = set()
    with open(os.path.join(run, rel)) as f, open(os.path.join(out, rel), "w") as g:
        for line in f:
            e = json.loads(line)
            # Later lines only for an EV's first mention with its port (its plane).
            key = (e.get("wev"), "port" in e)
            if e.get("t_ns", 0) <= to or (key[0] is not None and key[1] and key not in seen):
                g.write(line)
            if key[0] is not None and key[1]:
                seen.add(key)
    names.append(rel)
print(json.dumps(names))
PY
)
manifest='{"schema": "mrctb-manifest/1", "view_capture": "view/h1.pcapng", "report": "check/report.json"'
manifest+=", \"event_logs\": $logs"
if [ -n "$paths" ] && [ -f "$run/$paths" ]; then
  cp "$run/$paths" "$out/paths.json"
  manifest+=', "paths": "paths.json"'
fi
echo "$manifest}" >"$out/manifest.json"
echo "$out: $(capinfos -c -M "$out/view/h1.pcapng" | awk -F: '/Number of packets/ {print $2}') frames"

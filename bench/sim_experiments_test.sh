#!/usr/bin/env bash
# Smoke test of bench/sim_experiments.py on a tiny fabric (seconds): every experiment runs, the
# summary has its rows and metrics, the plots are written; without matplotlib and with bad
# options the script exits 2 with a message.
set -euo pipefail
SIM=${MRCT_SIM:?MRCT_SIM: the mrct-sim binary}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

/usr/bin/python3 "$here/sim_experiments.py" --mrct-sim "$SIM" --work "$dir" --seeds 1 \
  --hosts 8 --hosts-per-leaf 4 --spines 2 --size 2000000 --evs-list 4,8 --evs 8 \
  --fail-us 30 --pre-us 20 --flap-us 20 --end-us 80 --bin-us 5 \
  --incast-senders 4 --incast-size 200000 > "$dir/out.txt"
/usr/bin/python3 - "$dir" <<'PY' || fail "summary content"
import json, os, sys
d = sys.argv[1]
s = json.load(open(os.path.join(d, "sim_experiments.json")))
assert sorted((r["evs"], r["fault"]) for r in s["a"]) == [
    (4, "control"), (4, "fail"), (8, "control"), (8, "fail")], s["a"]
assert sorted((r["fault"], r["transport"]) for r in s["b"]) == sorted(
    (f, t) for f in ("control", "fail", "flap") for t in ("mrc", "rc", "spray")), s["b"]
for r in s["a"] + s["b"]:
    if r["fault"] != "control":
        assert r["lost_us"] is not None and "control_recovery_us" in r, r
assert sorted(r["trim"] for r in s["c"]) == [False, True], s["c"]
for r in s["a"] + s["b"]:
    assert r["pre_gbps"] > 0, r
    assert r["recovery_us"] is None or 0 <= r["recovery_us"] <= 50, r
    assert r["delivered_bytes"] > 0, r
for r in s["b"]:
    if r["transport"] == "spray":
        assert r["ev_retirements"] == 0, r
for r in s["c"]:
    assert r["completed"] == r["flows"] == 4, r
for name in ("a_recovery_vs_evs", "a_timeseries", "b_transports", "c_trim"):
    for ext in ("png", "svg"):
        p = os.path.join(d, f"sim_exp_{name}.{ext}")
        assert os.path.getsize(p) > 1000, p
PY
grep -q "^a seed 1 evs=4 fault=fail: recovery_us=" "$dir/out.txt" || fail "table line: $(cat "$dir/out.txt")"

# Without matplotlib (-S: no site-packages) and with a bad option: exit 2 and a message.
set +e
err=$(/usr/bin/python3 -S "$here/sim_experiments.py" --mrct-sim "$SIM" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [[ $err == *"matplotlib is missing"* ]] || fail "no matplotlib: $rc $err"
set +e
err=$(/usr/bin/python3 "$here/sim_experiments.py" --mrct-sim "$SIM" --seeds x 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [[ $err == *"--seeds"* ]] || fail "bad --seeds: $rc $err"
echo "sim_experiments_test: ok"

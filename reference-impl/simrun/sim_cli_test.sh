#!/usr/bin/env bash
# mrct sim end to end: gen, run, JSON out, the --summary directory, determinism by seed, and exit 2 naming file:line on
# bad topology and workload files (with no output file left behind).
set -euo pipefail
SIM=${MRCT_SIM:?MRCT_SIM: the mrct-sim binary}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SIM" gen permutation --nodes 8 --size 65536 --seed 2 -o "$dir/perm.cm"
[ "$(head -1 "$dir/perm.cm")" = "Nodes 8" ] || fail "gen: first line"
"$SIM" gen all-to-all --nodes 4 --size 100 -o "$dir/a2a.cm"
[ "$(sed -n 2p "$dir/a2a.cm")" = "Connections 12" ] || fail "gen all-to-all: $(sed -n 2p "$dir/a2a.cm")"
"$SIM" gen ring --nodes 8 --size 100 --steps 2 --step-us 10 -o "$dir/ring.cm"
[ "$(grep -c ' start 10000000 ' "$dir/ring.cm")" = 8 ] || fail "gen ring: second step"
set +e
"$SIM" gen ring --nodes 8 --steps 0 -o "$dir/bad-ring.cm" 2>/dev/null; rc=$?
set -e
[ $rc -eq 2 ] && [ ! -e "$dir/bad-ring.cm" ] || fail "gen ring --steps 0: exit $rc"
cat > "$dir/t.topo" <<'T'
hosts 8
planes 2
hosts_per_leaf 4
spines 2
fail plane 2 spine 1 down from_us 5 until_us 50
T
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --seed 3 --no-perf -q -o "$dir/a.json"
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --seed 3 --no-perf -q -o "$dir/b.json"
cmp -s "$dir/a.json" "$dir/b.json" || fail "same seed, different JSON"
/usr/bin/python3 - "$dir/a.json" <<'PY' || fail "JSON content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["summary"]["completed"] == 8, j["summary"]
assert j["topology"]["timed_failures"] == 1
assert len(j["flows"]) == 8 and all(f["done"] for f in j["flows"])
assert "perf" not in j
PY

# Bad inputs: exit 2, the file and line in the message, no output written.
printf 'hosts 8\nplanes 2\nhosts_per_leaf 4\nspinez 2\n' > "$dir/bad.topo"
set +e
err=$("$SIM" run --topo "$dir/bad.topo" --cm "$dir/perm.cm" -q -o "$dir/c.json" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad topology: exit $rc"
[[ $err == *"bad.topo:4: unknown key 'spinez'"* ]] || fail "bad topology message: $err"
[ ! -e "$dir/c.json" ] || fail "output written for a bad topology"
printf 'Nodes 8\nConnections 1\n0->9 size 100\n' > "$dir/bad.cm"
set +e
err=$("$SIM" run --topo "$dir/t.topo" --cm "$dir/bad.cm" -q -o "$dir/c.json" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad workload: exit $rc"
[[ $err == *"bad.cm:3: node out of range"* ]] || fail "bad workload message: $err"
[ ! -e "$dir/c.json" ] || fail "output written for a bad workload"
# --transport and --timeseries-us: accepted values reach the JSON, others exit 2.
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --transport rc --timeseries-us 2.5 --no-perf -q \
  -o "$dir/rc.json"
/usr/bin/python3 - "$dir/rc.json" <<'PY' || fail "rc JSON content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["engine"]["transport"] == "rc", j["engine"]
assert j["timeseries"]["bin_ns"] == 2500, j["timeseries"]["bin_ns"]
assert sum(j["timeseries"]["bytes"]) == 8 * 65536
PY
for bad in "--transport tcp" "--timeseries-us -1"; do
  set +e
  # shellcheck disable=SC2086
  "$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" $bad -q -o "$dir/d.json" 2>/dev/null; rc=$?
  set -e
  [ $rc -eq 2 ] && [ ! -e "$dir/d.json" ] || fail "$bad: exit $rc"
done

# --summary DIR: summary.md, result.json and SVG plots that parse as XML and hold the JSON's
# values; the same bytes for one seed; a directory that is not new or empty is refused before
# the run, with nothing written.
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --seed 3 --no-perf -q --timeseries-us 5 \
  --summary "$dir/s1" -o "$dir/s1.json"
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --seed 3 --no-perf -q --timeseries-us 5 \
  --summary "$dir/s2" -o "$dir/s2.json"
for f in summary.md result.json fct_cdf.svg slowdown.svg goodput.svg queues.svg queues_max.svg \
  retransmits.svg; do
  [ -s "$dir/s1/$f" ] || fail "summary: $f missing"
  cmp -s "$dir/s1/$f" "$dir/s2/$f" || fail "summary: $f differs between two runs of one seed"
done
cmp -s "$dir/s1.json" "$dir/s1/result.json" || fail "summary: result.json is not the -o JSON"
! compgen -G "$dir/*.tmp.*" >/dev/null || fail "summary: temporary directory left"
/usr/bin/python3 - "$dir/s1" <<'PY' || fail "summary content"
import json, sys, xml.dom.minidom
d = sys.argv[1]
j = json.load(open(d + "/result.json"))
def series(svg, name):
    doc = xml.dom.minidom.parse(d + "/" + svg)  # raises on malformed XML
    assert doc.documentElement.tagName == "svg", svg
    for pl in doc.getElementsByTagName("polyline"):
        if pl.getAttribute("data-name") == name:
            return [tuple(map(float, p.split(","))) for p in pl.getAttribute("data-values").split()]
    raise AssertionError(f"{svg}: no series {name}")
cdf = series("fct_cdf.svg", "CDF")
assert abs(cdf[-1][0] - j["summary"]["fct_ns"]["max"] / 1e3) < 1e-6 and cdf[-1][1] == 1, cdf[-1]
assert len(cdf) == j["summary"]["completed"] == 8
sd = series("slowdown.svg", "slowdown")
assert abs(sd[-1][1] - j["summary"]["slowdown"]["max"]) < 1e-6, (sd[-1], j["summary"]["slowdown"])
ts = j["timeseries"]
assert ts["bin_ns"] == 5000
good = series("goodput.svg", "all planes")
assert len(good) == len(ts["bytes"])
assert abs(sum(y for _, y in good) * 5000 / 8 - 8 * 65536) < 1e-3, good
for p in range(2):
    pl = series("goodput.svg", f"plane {p + 1}")
    assert all(abs(y * 5000 / 8 - b) < 1e-6 for (_, y), b in zip(pl, ts["plane_bytes"][p]))
rtx = series("retransmits.svg", "retransmissions")
assert sum(y for _, y in rtx) == j["summary"]["retransmits"]["total"]
ret = series("retransmits.svg", "EV retirements")
assert sum(y for _, y in ret) == j["summary"]["ev_retirements"]
for q in j["summary"]["queues"]:
    qs = series("queues.svg", q["class"])
    assert max(y for _, y in qs) <= q["max_backlog_bytes"] / 1e3
xml.dom.minidom.parse(d + "/queues_max.svg")
md = open(d + "/summary.md").read()
assert md.startswith("# mrct sim run: ") and "| seed | 3 |" in md, md[:300]
assert "| topology.timed_failures | 1 |" in md and "![FCT CDF](fct_cdf.svg)" in md
PY
# Without --timeseries-us the summary turns the series on (10 us bins).
"$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" --no-perf -q --summary "$dir/s3" >/dev/null
grep -q '"bin_ns": 10000' "$dir/s3/result.json" || fail "summary: default bin"
set +e
err=$("$SIM" run --topo "$dir/t.topo" --cm "$dir/perm.cm" -q --summary "$dir/s1" -o "$dir/e.json" 2>&1)
rc=$?
set -e
[ $rc -eq 2 ] || fail "summary into a full directory: exit $rc"
[[ $err == *"s1: exists and is not empty"* ]] || fail "summary into a full directory: $err"
[ ! -e "$dir/e.json" ] || fail "summary into a full directory: JSON written"
cmp -s "$dir/s1/result.json" "$dir/s2/result.json" || fail "summary refused but s1 changed"

# Three tiers from flags (the k = 4 fat tree) and SRv6 pinning: completes, deterministic.
"$SIM" gen permutation --nodes 16 --size 65536 --seed 2 -o "$dir/perm16.cm"
t3=(--hosts 16 --planes 2 --tiers 3 --hosts-per-leaf 2 --leaves-per-pod 2 --spines 2 --cores 4)
"$SIM" run "${t3[@]}" --routing srv6 --evs 8 --cm "$dir/perm16.cm" --seed 3 --no-perf -q -o "$dir/t3a.json"
"$SIM" run "${t3[@]}" --routing srv6 --evs 8 --cm "$dir/perm16.cm" --seed 3 --no-perf -q -o "$dir/t3b.json"
cmp -s "$dir/t3a.json" "$dir/t3b.json" || fail "3 tiers: same seed, different JSON"
/usr/bin/python3 - "$dir/t3a.json" <<'PY' || fail "3-tier JSON content"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["summary"]["completed"] == 16, j["summary"]
t = j["topology"]
assert (t["tiers"], t["routing"], t["pods_per_plane"], t["cores_per_plane"]) == (3, "srv6", 4, 4), t
assert "ev_retirements_by_path" in j["summary"], j["summary"]
PY
# A bad 3-tier fail line: exit 2 naming the line, nothing written.
cat > "$dir/bad3.topo" <<'T'
tiers 3
hosts 16
hosts_per_leaf 2
leaves_per_pod 2
spines 2
cores 4
fail plane 1 agg 1 core 2 down
T
set +e
err=$("$SIM" run --topo "$dir/bad3.topo" --cm "$dir/perm16.cm" -q -o "$dir/c.json" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "bad 3-tier topology: exit $rc"
[[ $err == *"bad3.topo:7: agg 1 has no cable to core 2"* ]] || fail "bad 3-tier message: $err"
[ ! -e "$dir/c.json" ] || fail "output written for a bad 3-tier topology"
set +e
err=$("$SIM" run "${t3[@]:0:12}" --cores 3 --cm "$dir/perm16.cm" -q -o "$dir/c.json" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] || fail "--cores 3: exit $rc"
[[ $err == *"flags: tiers 3: cores (3) must be a positive multiple of spines"* ]] || fail "--cores 3: $err"
echo "sim_cli_test: ok"

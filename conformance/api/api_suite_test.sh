#!/bin/bash
# mrct api-suite against the reference lib_mrc.so (SoftMRC, loopback device): every test must
# pass, be unsupported or informational; none may fail. Reports in the three formats are checked
# for shape. The two-node tests run too (--peer-lib: node B on the same library, two network
# namespaces the suite makes and removes). With SOFTMRCD, the same in device mode: the suite
# runs a softmrcd per node and test (mrct api-suite --softmrcd) and none may be left running.
# Usage: api_suite_test.sh MRCT LIB_MRC_SO [SOFTMRCD]
set -euo pipefail
mrct=$1
lib=$2
softmrcd=${3:-}
device=()
mode="in-process"
if [ -n "$softmrcd" ]; then
  device=(--softmrcd "$softmrcd")
  mode="device mode"
fi
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: opening softmrc0 needs CAP_NET_RAW (root)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export MRC_SOFT_IO=loopback
rc=0
dirs_before=$(ls -d /tmp/mrcapi-softmrcd-* 2> /dev/null | sort || true)
"$mrct" api-suite --lib "$lib" --peer-lib "$lib" "${device[@]}" --json "$out/r.json" \
  --junit "$out/r.xml" --md "$out/r.md" &
mpid=$!
wait $mpid || rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL: mrct api-suite exited $rc against the reference library ($mode)"
  exit 1
fi
/usr/bin/python3 - "$out" "$softmrcd" <<'PY'
import json, sys, xml.etree.ElementTree as ET
d, softmrcd = sys.argv[1], sys.argv[2]
r = json.load(open(f"{d}/r.json"))
assert r["softmrcd"] == (softmrcd or None), r["softmrcd"]
tests = r["tests"]
assert len(tests) >= 30, len(tests)
bad = [t for t in tests if t["status"] not in ("pass", "unsupported", "informational")]
assert not bad, bad
assert r["summary"]["fail"] == 0 and r["summary"]["verdict"] == "pass", r["summary"]
assert all(t["id"].startswith("MRC-API-") and t["source"].startswith("API") for t in tests)
two = {t["id"]: t["status"] for t in tests if t["area"] == "two-node"}
assert sorted(two) == [f"MRC-API-{n:03d}" for n in range(43, 50)], two
assert all(s == "pass" for s in two.values()), two
root = ET.parse(f"{d}/r.xml").getroot()
assert root.get("failures") == "0" and int(root.get("tests")) == len(tests)
names = [c.get("name") for c in root.iter("testcase")]
assert sorted(names) == sorted(t["id"] for t in tests)
md = open(f"{d}/r.md").read()
assert "**Verdict: PASS**" in md and all(t["id"] in md for t in tests)
counts = {s: sum(t["status"] == s for t in tests) for s in ("pass", "unsupported", "informational")}
print("reference lib_mrc.so", "(device mode):" if softmrcd else "(in-process):", len(tests),
      "tests", counts)
PY
if [ -n "$softmrcd" ]; then
  # Device mode: every test's device processes are stopped and their directory removed.
  dirs_after=$(ls -d /tmp/mrcapi-softmrcd-* 2> /dev/null | sort || true)
  if [ "$dirs_after" != "$dirs_before" ]; then
    echo "FAIL: socket directories left behind: $dirs_after"; exit 1
  fi
  if pgrep -f -- "--socket /tmp/mrcapi-softmrcd-" > /dev/null; then
    echo "FAIL: softmrcd processes left running:"; pgrep -af -- "--socket /tmp/mrcapi-softmrcd-"
    exit 1
  fi
  # A --softmrcd that is not a program is exit 2 with the option named.
  rc=0
  "$mrct" api-suite --lib "$lib" --softmrcd "$out/none" 2> "$out/err" || rc=$?
  [ "$rc" = 2 ] && grep -q -- "--softmrcd" "$out/err" ||
    { echo "FAIL: bad --softmrcd: rc $rc"; cat "$out/err"; exit 1; }
fi
# Bad input: a path that is not a library is exit 2 with the option named.
rc=0
"$mrct" api-suite --lib "$out/none.so" 2> "$out/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--lib" "$out/err" || { echo "FAIL: bad --lib: rc $rc"; cat "$out/err"; exit 1; }
# The namespaces are gone.
if grep -q "^mrcapi${mpid}[ab]" <<<"$(ip netns list)"; then
  echo "FAIL: namespaces left behind:"; ip netns list | grep "^mrcapi${mpid}"; exit 1
fi
# A two-node test named without --peer-lib is a usage error.
rc=0
"$mrct" api-suite --lib "$lib" --only MRC-API-043 2> "$out/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--peer-lib" "$out/err" || { echo "FAIL: --only MRC-API-043 without --peer-lib: rc $rc"; cat "$out/err"; exit 1; }
echo PASS

#!/bin/bash
# `mrct view --export` as `mrct run` uses it: no display, one image per view, clear errors.
# Usage: export_test.sh MRCT_VIEW MRCT_VIEW_FIXTURE
set -u
VIEW=$1
FIXTURE=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FIXTURE" -o "$dir/run" >/dev/null || fail "fixture"
unset DISPLAY WAYLAND_DISPLAY QT_QPA_PLATFORM  # must work without a display and without help

for v in timeline sequence series all; do
  "$VIEW" --export "$dir/$v.png" --view "$v" --size 1200x700 "$dir/run/a.pcap" 2>"$dir/err" ||
    fail "export $v: $(cat "$dir/err")"
  head -c 8 "$dir/$v.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" || fail "$v.png is not a PNG"
  [ "$(stat -c %s "$dir/$v.png")" -gt 10000 ] || fail "$v.png is suspiciously small"
done
"$VIEW" --export "$dir/t.svg" "$dir/run/a.pcap" || fail "svg export"
grep -q "<svg" "$dir/t.svg" || fail "t.svg is not SVG"

# Filters and a time window.
"$VIEW" --export "$dir/f.png" --plane 1 --kinds first_tx,retransmit,injector_drop,ev_state \
  --from 150us --to 700us "$dir/run/a.pcap" || fail "filtered export"

# --list names the QP and one lane per EV.
"$VIEW" --list "$dir/run/a.pcap" >"$dir/list" || fail "--list"
grep -q "^#0 fd00::1 -> fd00::2 QP 0x100 (a)" "$dir/list" || fail "--list: no flow line: $(head -3 "$dir/list")"
lanes=$(grep -c "EV 0x" "$dir/list")
[ "$lanes" -ge 8 ] || fail "--list: only $lanes EV lanes"

# A run directory as `mrct run` lays it out (captures/, endpoints/, no manifest): opened with no
# other flag, it finds the capture and the event logs and says what it loaded and what is missing.
run="$dir/scenario"
mkdir -p "$run/captures" "$run/endpoints"
cp "$dir/run/a.pcap" "$run/captures/h1-h1-p1.pcap"
for f in "$dir"/run/*events*.jsonl; do cp "$f" "$run/endpoints/"; done
cp "$dir/run/decisions.jsonl" "$run/"
echo '{"verdict": "pass"}' >"$run/result.json"
"$VIEW" --list "$run" >"$dir/runlist" 2>"$dir/err" || fail "--list RUN_DIR: $(cat "$dir/err")"
grep -q "^loaded capture: captures/h1-h1-p1.pcap" "$dir/runlist" || fail "RUN_DIR: capture: $(cat "$dir/runlist")"
grep -q "^loaded event logs: endpoints/" "$dir/runlist" || fail "RUN_DIR: event logs: $(head -5 "$dir/runlist")"
grep -q "^missing checker report" "$dir/runlist" || fail "RUN_DIR: missing report not named"
grep -q "^#0 fd00::1 -> fd00::2 QP 0x100 (a)" "$dir/runlist" || fail "RUN_DIR: no flow line"
"$VIEW" --export "$dir/run.png" "$run" || fail "export of a run directory"
mkdir -p "$dir/empty-run"
"$VIEW" --list "$dir/empty-run" 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no capture in this run directory" "$dir/err" ||
  fail "a directory without captures: exit $rc $(cat "$dir/err")"

# Errors: exit 2 with the reason.
"$VIEW" --export "$dir/x.png" "$dir/missing.pcap" 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] || fail "missing capture: exit $rc"
grep -q "missing.pcap: cannot open" "$dir/err" || fail "missing capture message: $(cat "$dir/err")"
"$VIEW" --export "$dir/x.png" --view pie "$dir/run/a.pcap" 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "bad --view: exit $rc"
"$VIEW" --export "$dir/x.png" --from 5parsecs "$dir/run/a.pcap" 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "not a time" "$dir/err" || fail "bad --from: exit $rc $(cat "$dir/err")"
"$VIEW" --export "$dir/x.png" --qp 0x999 "$dir/run/a.pcap" 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "no such QP" "$dir/err" || fail "bad --qp: exit $rc"
echo "ok"

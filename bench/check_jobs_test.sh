#!/usr/bin/env bash
# mrct check -j N writes the report of -j 1, byte for byte: on captures of bench/check_run.sh's
# generator (check_bench --make_capture) at a small size, the benchmark's own kind (node a's
# interface, profile + decision log) and one with both hosts' captures and every fault kind
# (duplicates, delays, corruption besides drops, trims, ECN marks and dropped SACKs), with the
# profile and decisions and with QPs inferred; every report format, the annotated pcapng too.
# A capture read from a pipe is checked on one thread: its report must not differ either.
#
# Environment: MRCT, CHECK_BENCH (binaries). Exit 0 identical, 1 a difference.
set -euo pipefail
: "${MRCT:?}" "${CHECK_BENCH:?}"
MRCT=$(realpath "$MRCT")
CHECK_BENCH=$(realpath "$CHECK_BENCH")
dir=$(mktemp -d "${TMPDIR:-/tmp}/mrc_check_jobs_$$_XXXX")
trap 'rm -rf "$dir"' EXIT
fail=0

check_all() {  # check_all NAME CAPTURE_ARGS...: -j 1, 2 and 3 with every report
  local name=$1; shift
  local j bad=0
  for j in 1 2 3; do
    local o=$dir/$name.j$j
    (cd "$cap" && "$MRCT" check "$@" -j "$j" -q --json "$o.json" --junit "$o.xml" \
      --markdown "$o.md" --annotate "$o.pcapng" --max-evidence 50 > "$o.out" 2>&1) || true
    [ -s "$o.json" ] || { echo "FAIL $name -j $j: no report"; cat "$o.out"; bad=1; }
  done
  [ "$bad" = 0 ] || { fail=1; return; }
  for j in 2 3; do
    for ext in json xml md pcapng out; do
      if ! cmp -s "$dir/$name.j1.$ext" "$dir/$name.j$j.$ext"; then
        echo "FAIL $name: -j $j .$ext differs from -j 1"
        diff <(head -c 200000 "$dir/$name.j1.$ext") <(head -c 200000 "$dir/$name.j$j.$ext") | head -20 || true
        bad=1
      fi
    done
  done
  [ "$bad" = 0 ] || { fail=1; return; }
  local violations
  violations=$(/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
print(sum(x.get('violations', 0) for x in r['rules']))" "$dir/$name.j1.json" 2>/dev/null || echo '?')
  echo "ok   $name: -j 2 and -j 3 identical to -j 1 ($violations violations judged)"
}

cap=$dir/bench
"$CHECK_BENCH" --make_capture="$cap" --frames=30000 --pmtu=256 > /dev/null
check_all bench-profile a-eth0.pcap --profile dut.json --decisions decisions.jsonl
check_all bench-inferred a-eth0.pcap

cap=$dir/mixed
"$CHECK_BENCH" --make_capture="$cap" --frames=30000 --pmtu=1024 --both_hosts --mixed_faults \
  --seed=11 > /dev/null
check_all mixed-both a-eth0.pcap b-eth0.pcap --profile dut.json --decisions decisions.jsonl
check_all mixed-inferred a-eth0.pcap b-eth0.pcap

# A pipe: one thread whatever -j says, same report as the file.
cap=$dir/bench
(cd "$cap" && "$MRCT" check /dev/stdin@a --profile dut.json --decisions decisions.jsonl -j 2 -q \
  --json "$dir/pipe.json" < a-eth0.pcap) || true
(cd "$cap" && "$MRCT" check a-eth0.pcap@a --profile dut.json --decisions decisions.jsonl -j 2 -q \
  --json "$dir/file.json") || true
if ! cmp -s <(sed 's|/dev/stdin|a-eth0.pcap|' "$dir/pipe.json") "$dir/file.json"; then
  echo "FAIL pipe: the report of /dev/stdin with -j 2 differs from the file's"
  fail=1
else
  echo "ok   pipe: -j 2 on /dev/stdin (one thread) reports what -j 2 on the file does"
fi
exit $fail

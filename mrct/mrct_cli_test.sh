#!/usr/bin/env bash
# End-to-end test of `mrct craft`, `mrct decode` and `mrct check`: what a user sees on the command
# line.
set -euo pipefail
: "${MRCT:?set MRCT to the mrct binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$MRCT" craft -o "$tmp/s.pcap" 2>"$tmp/craft.err" || fail "craft exited $?"
grep -q "wrote" "$tmp/craft.err" || fail "craft said nothing"
"$MRCT" craft --format pcapng -o "$tmp/s.pcapng" 2>/dev/null || fail "craft pcapng"
n=$("$MRCT" craft --list | wc -l)

# One line per frame, nothing dropped, every frame decodes, every ICRC verifies.
"$MRCT" decode "$tmp/s.pcap" > "$tmp/lines.txt"
[ "$(wc -l < "$tmp/lines.txt")" -eq "$n" ] || fail "decode listed $(wc -l < "$tmp/lines.txt") of $n frames"
grep -q "icrc=BAD" "$tmp/lines.txt" && fail "a sample has a bad ICRC"
grep -q "ethertype 0x0806" "$tmp/lines.txt" || fail "the ARP frame was not listed"
"$MRCT" decode --strict "$tmp/s.pcap" > /dev/null || fail "strict decode of the samples failed"
"$MRCT" decode --summary "$tmp/s.pcap" > "$tmp/sum.txt"
grep -q "0 bad ICRC, 0 decode errors" "$tmp/sum.txt" || fail "summary: $(head -1 "$tmp/sum.txt")"
"$MRCT" decode -V -c 3 "$tmp/s.pcapng" > "$tmp/tree.txt"
grep -q "RETH: va" "$tmp/tree.txt" || fail "field tree lacks RETH"

# JSON lines parse and carry the contract's field names.
"$MRCT" decode --json "$tmp/s.pcap" > "$tmp/s.jsonl"
/usr/bin/python3 - "$tmp/s.jsonl" "$n" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), len(rows)
need = {"frame", "ts_ns", "l3", "src", "dst", "sport", "dport", "flow_label", "dscp", "ecn",
        "opcode", "dest_qp", "psn", "ack_req", "pad", "icrc", "icrc_ok"}
roce = [r for r in rows if r["roce"]]
full = [r for r in roce if not r["trimmed"]]
missing = need - set(full[0])
assert not missing, missing
assert all(r["icrc_ok"] for r in full)
assert any("reth.va" in r for r in roce) and any("seth.sack_bitmap" in r for r in roce)
assert any(r.get("roce") is False for r in rows)
PY

# Every field of every header: TSR, NETH cc_type, PSV, vendor bytes, BTH byte 4; reserved bits
# only when non-zero.
/usr/bin/python3 - "$tmp/s.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def some(key):
    assert any(key in r for r in rows), key
for k in ("peth.tsr", "peth.vendor", "erth.tsr", "erth.vendor", "eeth.vendor", "neth.cc_type",
          "neth.psv", "seth.psv", "seth.cc_type", "tseth.tsr", "bth.variant", "ip6.next_header",
          "inner.hop_limit", "srh.routing_type", "pad_bytes"):
    some(k)
assert not any(k.startswith(("bth.reserved", "peth.reserved", "neth.reserved")) for r in rows
               for k in r), "reserved fields listed while zero"
PY
"$MRCT" decode -V "$tmp/s.pcap" > "$tmp/tree_all.txt"
grep -q "NETH: .* cc_type 0 psv 0 sva 0" "$tmp/tree_all.txt" || fail "-V lacks NETH cc_type/psv"
grep -q "PETH: vendor 0 .* tsr 0" "$tmp/tree_all.txt" || fail "-V lacks PETH vendor/tsr"
grep -q "reserved" "$tmp/tree_all.txt" && fail "-V lists zero reserved fields"
# A reserved BTH bit set on the first IPv6 (no SRv6) RoCE frame shows in both views.
/usr/bin/python3 - "$tmp/s.pcap" "$tmp/s.jsonl" "$tmp/rsv.pcap" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
b = bytearray(open(sys.argv[1], "rb").read())
off, n = 24, 0
while off < len(b):
    incl = int.from_bytes(b[off + 8:off + 12], "little")
    r = rows[n]
    if r["roce"] and r.get("l3") == 6 and "inner.src" not in r and "srh.segments" not in r:
        b[off + 16 + 14 + 40 + 8 + 8] |= 0x40  # BTH byte 8 bit 6
        break
    off += 16 + incl
    n += 1
open(sys.argv[3], "wb").write(b)
PY
"$MRCT" decode --json "$tmp/rsv.pcap" > "$tmp/rsv.jsonl"
"$MRCT" decode -V "$tmp/rsv.pcap" > "$tmp/rsv.txt"
grep -q '"bth.reserved_b8_6":1' "$tmp/rsv.jsonl" || fail "JSON hides a set reserved bit"
grep -q "BTH: .* reservedb8_6 0x1" "$tmp/rsv.txt" || fail "-V hides a set reserved bit"

# (Skipped when this mrct was built without the checker.)
if "$MRCT" check --help > /dev/null 2>&1; then
# mrct check: the verdict and its exit code. The samples moved to UDP port 4971 hold nothing the
# default profile recognises as MRC: INCONCLUSIVE, exit 3, and the report says why.
/usr/bin/python3 - "$tmp/s.pcap" "$tmp/s.jsonl" "$tmp/p4971.pcap" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
b = bytearray(open(sys.argv[1], "rb").read())
off, n = 24, 0
while off < len(b):
    incl = int.from_bytes(b[off + 8:off + 12], "little")
    r = rows[n]
    if r.get("dport") == 4791:
        rec = b[off + 16:off + 16 + incl]
        hdr = r["sport"].to_bytes(2, "big") + (4791).to_bytes(2, "big")
        at = rec.find(hdr)
        assert at >= 0
        b[off + 16 + at + 2:off + 16 + at + 4] = (4971).to_bytes(2, "big")
    off += 16 + incl
    n += 1
open(sys.argv[3], "wb").write(b)
PY
set +e
"$MRCT" check "$tmp/p4971.pcap" --json "$tmp/p4971.json" --junit "$tmp/p4971.xml" > "$tmp/p4971.txt" 2>&1; rc=$?
"$MRCT" check "$tmp/s.pcap" --json "$tmp/s.json" > /dev/null 2>&1; rc_s=$?
"$MRCT" check --tolerances bogus "$tmp/s.pcap" > /dev/null 2>&1; rc_bad=$?
set -e
[ $rc -eq 3 ] || fail "check of a capture with no MRC frame exited $rc, want 3: $(cat "$tmp/p4971.txt")"
grep -q "MRC conformance: INCONCLUSIVE" "$tmp/p4971.txt" || fail "no INCONCLUSIVE line"
grep -q "not MRC: .*UDP to port 4971, not the profile's RoCE port 4791" "$tmp/p4971.txt" \
  || fail "the frames not recognised are not explained: $(cat "$tmp/p4971.txt")"
grep -q 'type="inconclusive"' "$tmp/p4971.xml" || fail "JUnit has no inconclusive error"
[ $rc_s -eq 0 ] || [ $rc_s -eq 1 ] || fail "check of the MRC samples exited $rc_s"
[ $rc_bad -eq 2 ] || fail "--tolerances bogus exited $rc_bad, want 2"
/usr/bin/python3 - "$tmp/p4971.json" "$tmp/s.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["verdict"] == "INCONCLUSIVE" and j["exit_code"] == 3, j["verdict"]
assert j["trace"]["mrc_frames"] == 0
assert j["verdict_reasons"] and "no frame was recognised as MRC" in j["verdict_reasons"][0]
u = {x["reason"]: x for x in j["unrecognised"]}
port = [x for r, x in u.items() if r.startswith("UDP to port 4971")]
assert port and port[0]["examples"][0]["frame"] >= 1, u
assert any(r.startswith("not IP (EtherType 0x0806)") for r in u), u
s = json.load(open(sys.argv[2]))
assert s["verdict"] in ("CONFORMING", "NOT CONFORMING") and s["trace"]["mrc_frames"] > 0
assert s["tolerances"]["preset"] == "software"
PY
# --timings: each phase's wall and CPU time on stderr, the reports unchanged (-j 1 and -j 2).
for j in 1 2; do
  set +e
  "$MRCT" check "$tmp/s.pcap" -q -j $j --timings --json "$tmp/s_t$j.json" > "$tmp/s_t$j.out" \
    2> "$tmp/s_t$j.err"; rc_t=$?
  set -e
  [ $rc_t -eq $rc_s ] || fail "check --timings -j $j exited $rc_t, without it $rc_s"
  cmp -s "$tmp/s.json" "$tmp/s_t$j.json" || fail "check --timings -j $j changed the JSON report"
  [ ! -s "$tmp/s_t$j.out" ] || fail "check --timings -q wrote to stdout: $(cat "$tmp/s_t$j.out")"
  for phase in "start-up" "profile" "open captures" "frames" "finish" "teardown" "reports" \
    "summary" "total"; do
    grep -Eq "^mrct check: timings: $phase.* [0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9] +[0-9]+\.[0-9]\$" \
      "$tmp/s_t$j.err" || fail "check --timings -j $j: no '$phase' row: $(cat "$tmp/s_t$j.err")"
  done
done
"$MRCT" check "$tmp/s.pcap" -q 2> "$tmp/s_nt.err" || true
! grep -q "timings" "$tmp/s_nt.err" || fail "check prints timings without --timings"
"$MRCT" check --help > "$tmp/check_help.txt"
grep -q "3 INCONCLUSIVE" "$tmp/check_help.txt" || fail "check --help does not explain exit 3"
grep -q -- "--timings" "$tmp/check_help.txt" || fail "check --help lacks --timings"
grep -q -- "--tolerances" "$tmp/check_help.txt" || fail "check --help lacks --tolerances"
fi

# A flipped payload byte is caught: ICRC BAD, and --strict exits 1.
/usr/bin/python3 - "$tmp/s.pcap" "$tmp/bad.pcap" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
# first record: 24-byte global header + 16-byte record header; flip a byte deep in frame 1.
b[24 + 16 + 150] ^= 0x40
open(sys.argv[2], "wb").write(b)
PY
"$MRCT" decode "$tmp/bad.pcap" > "$tmp/bad.txt"
head -1 "$tmp/bad.txt" | grep -q "icrc=BAD" || fail "flipped byte not detected"
set +e
"$MRCT" decode --strict "$tmp/bad.pcap" > /dev/null; rc=$?
set -e
[ $rc -eq 1 ] || fail "--strict on a bad ICRC exited $rc, want 1"

# Unreadable and truncated files: clear message naming the file, exit 2.
set +e
"$MRCT" decode "$tmp/nope.pcap" 2> "$tmp/e1"; rc1=$?
head -c 100 "$tmp/s.pcap" > "$tmp/cut.pcap"
"$MRCT" decode "$tmp/cut.pcap" > /dev/null 2> "$tmp/e2"; rc2=$?
"$MRCT" decode --bogus 2> /dev/null; rc3=$?
set -e
[ $rc1 -eq 2 ] && grep -q "nope.pcap" "$tmp/e1" || fail "missing file: rc=$rc1 $(cat "$tmp/e1")"
[ $rc2 -eq 2 ] && grep -q "cut.pcap" "$tmp/e2" || fail "truncated file: rc=$rc2 $(cat "$tmp/e2")"
[ $rc3 -eq 2 ] || fail "bad option exited $rc3"
echo "mrct_cli_test: ok ($n frames)"

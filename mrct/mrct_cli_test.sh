#!/usr/bin/env bash
# End-to-end test of `mrct craft` and `mrct decode`: what a user sees on the command line.
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

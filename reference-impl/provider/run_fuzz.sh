#!/usr/bin/env bash
# Builds device_fuzz (the device socket protocol as softmrcd serves it, `fuzz` preset: clang,
# ASan+UBSan), writes a seed corpus of valid request sequences, and runs it.
# Usage: reference-impl/provider/run_fuzz.sh [seconds, default 60]
# Environment: MRC_FUZZ_BUILD=build dir (default build/fuzz).
set -euo pipefail
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${MRC_FUZZ_BUILD:-build/fuzz}
cmake --preset fuzz -B "$build" \
  -DMRC_SKIP_DIRS="conformance;fault-injector;gui;lab;testbed;bench;mrct" > /dev/null
cmake --build "$build" -j 2 --target device_fuzz
work="$build/device-corpus"
rm -rf "$work"
mkdir -p "$work"
# Seeds: [u16 length][request] sequences (devproto.h) that open the device and create a PD,
# a context, a CQ and a QP, then poll, query, post and make a controller call. Handles are
# numbered from 1 per session in creation order.
/usr/bin/python3 - "$work" << 'PY'
import struct, sys
u32 = lambda v: struct.pack('<I', v)
u64 = lambda v: struct.pack('<Q', v)
i32 = lambda v: struct.pack('<i', v)
u8 = lambda v: struct.pack('<B', v)
blob = lambda b: u32(len(b)) + b
msg = lambda op, *p: u32(op) + b''.join(p)
frame = lambda ms: b''.join(struct.pack('<H', len(m)) + m for m in ms)
base = [msg(1, u32(2)), msg(2), msg(7, u64(1)), msg(11, u64(1), u8(0), blob(bytes(8))),
        msg(16, u64(3), i32(16), u64(0), i32(0))]
qp = msg(26, u64(3), blob(bytes(80)), u64(4), u64(4), u64(2))
seeds = {
    'objects': base + [qp, msg(18, u64(4), i32(4)), msg(29, u64(5), i32(1), i32(0), u8(1))],
    'controller': base + [msg(34, u64(1), u64(3)),
                          msg(40, u64(3), u64(5), blob(bytes(56)), i32(3), u8(1),
                              blob(b'uet-1.0-nscc'), u8(0), blob(bytes(48)))],
    'post': base + [qp, msg(30, u64(5), u32(1), u64(7), u32(0), u32(2), u32(0), u64(0x1000),
                            u32(5), u32(1), u64(0x1000), u32(64), u32(9))],
}
for name, ms in seeds.items():
    open(f'{sys.argv[1]}/{name}', 'wb').write(frame(ms))
# The peer writing its completion ring's consumer index (a length with the top bit set): past
# what was produced, then back, between requests that poll and post.
scribble = lambda v: struct.pack('<H', 0x8000) + u64(v)
open(f'{sys.argv[1]}/ring', 'wb').write(
    frame(base + [qp]) + scribble(5) + frame([msg(18, u64(4), i32(4))]) + scribble(2**64 - 3) +
    frame([msg(30, u64(5), u32(0)), msg(17, u64(4))]))
PY
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1
set +e
"$build/fuzz/device_fuzz" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 \
  -artifact_prefix="$build/device-" "$work" > "$build/device.log" 2>&1
rc=$?
set -e
echo "== device_fuzz, ${secs}s, seed corpus 3 files"
grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|ERROR|SUMMARY' \
  "$build/device.log" || true
[ $rc -eq 0 ] || { echo "device_fuzz found a crash (exit $rc), see $build/device.log"; exit 1; }

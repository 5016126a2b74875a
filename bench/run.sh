#!/usr/bin/env bash
# Runs the codec benchmarks and prints each figure next to the peer it is compared with.
# Usage: bench/run.sh [build dir, default build/release]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
if [ ! -x "$build/bench/wire_bench" ]; then
  cmake --preset release -S "$top" > /dev/null
  cmake --build "$build" --target wire_bench
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/bench/wire_bench" --benchmark_format=json --benchmark_out="$out" --benchmark_out_format=json \
  --benchmark_min_time=0.5 > /dev/null
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = {x["name"]: x for x in d["benchmarks"]}
print(f"host: {d['context'].get('host_name','?')}, {d['context']['num_cpus']} CPUs, "
      f"{d['context'].get('mhz_per_cpu','?')} MHz, build {d['context'].get('library_build_type','?')}")
print("\nper packet type (ns/packet):")
print(f"  {'type':34s} {'decode':>8s} {'encode':>8s}")
for name in sorted(k[len('BM_Decode/'):] for k in b if k.startswith('BM_Decode/')):
    dec = b['BM_Decode/' + name]['cpu_time']
    enc = b['BM_Encode/' + name]['cpu_time']
    print(f"  {name:34s} {dec:8.1f} {enc:8.1f}")
for k in b:
    if k.startswith('BM_DecodeVerifyIcrc/'):
        x = b[k]
        print(f"  {k[len('BM_DecodeVerifyIcrc/'):]:34s} decode+ICRC {x['cpu_time']:.1f} ns "
              f"({x['bytes_per_second']/1e9:.2f} GB/s)")
rate = lambda k: b[k]["items_per_second"] / 1e6
mrc, raw, tins, ro = (rate("BM_Capture_MrcDecode"), rate("BM_Capture_RawWalk"),
                      rate("BM_Capture_Libtins"), rate("BM_Capture_ReadOnly"))
icrc = rate("BM_Capture_MrcDecodeVerifyIcrc")
print("\n1M-frame capture (90% WRITE_MIDDLE 256 B, 10% SACK; STEV), one core, M frames/s:")
print(f"  read records only      {ro:8.2f}")
print(f"  raw pointer walk       {raw:8.2f}   (peer: unchecked floor)")
print(f"  mrc decode_frame       {mrc:8.2f}   = {mrc/raw:.2f}x raw walk, {mrc/tins:.1f}x libtins")
print(f"  mrc decode + ICRC      {icrc:8.2f}")
print(f"  libtins EthernetII     {tins:8.2f}   (peer: libtins 4.0 parse of the same file)")
target = "met" if mrc >= 10 and raw / mrc <= 2 else "NOT met"
print(f"\ntarget (>= 10 M/s and within 2x of the raw walk): {target}")
PY

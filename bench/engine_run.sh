#!/usr/bin/env bash
# Runs the reference-engine benchmarks (bench/engine_bench.cc) and prints each figure with the
# go-back-N RoCEv2 RC model it is compared with, and the ratios.
# Usage: bench/engine_run.sh [build dir, default build/release]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
if [ ! -x "$build/bench/engine_bench" ]; then
  cmake --preset release -S "$top" > /dev/null
  cmake --build "$build" -j 2 --target engine_bench
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/bench/engine_bench" --benchmark_format=json --benchmark_out="$out" \
  --benchmark_out_format=json > /dev/null
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = {x["run_name"]: x for x in d["benchmarks"]}
ctx = d["context"]
print(f"host: {ctx.get('host_name', '?')}, {ctx['num_cpus']} CPUs, load {ctx.get('load_avg', '?')}, "
      f"engine_bench {ctx.get('executable', '?')}")

def get(name):
    for k, v in b.items():
        if k.split("/iterations")[0].split("/min_time")[0] == name:
            return v
    raise KeyError(name)

print("\nEngine throughput, 16 MiB of 4 KiB WRITE packets, both endpoints on one core "
      "(rates per CPU second):")
for q in (1, 64):
    x = get(f"BM_EngineDirect/{q}")
    print(f"  engines alone, {q:2d} QP{'s' if q > 1 else ' '}:  {x['pkts/s'] / 1e3:8.1f} k data packets/s"
          f"  ({x['payload_Gb/s']:.1f} Gb/s of payload)")
for q in (1, 64):
    x = get(f"BM_EngineSim/{q}")
    print(f"  + simulator,   {q:2d} QP{'s' if q > 1 else ' '}:  {x['pkts/s'] / 1e3:8.1f} k data packets/s;"
          f"  simulated goodput {x['sim_goodput_Gb/s']:.1f} of {x['line_rate_Gb/s']:.0f} Gb/s"
          f" ({100 * x['sim_goodput_Gb/s'] / x['line_rate_Gb/s']:.1f} %)")

print("\nGoodput of a 16 MiB transfer, 1 % random loss on every frame in both directions "
      "(mean of 3 seeds, T = 16.4 us):")
print(f"  {'':32s} {'loss-free':>10s} {'1 % loss':>10s} {'ratio':>7s}")
rows = [("MRC, 1 plane x 4 paths (NSCC)", "BM_Loss_Mrc1Plane"),
        ("MRC, 1 plane x 4 paths (no CC)", "BM_Loss_Mrc1PlaneNoCc"),
        ("MRC, 2 planes x 4 paths (NSCC)", "BM_Loss_Mrc2Plane"),
        ("RC go-back-N, 1 path", "BM_Loss_Gbn")]
for label, name in rows:
    x = get(name)
    print(f"  {label:32s} {x['loss_free_Gb/s']:8.1f} G {x['loss_1pct_Gb/s']:8.1f} G {x['ratio']:7.3f}")
m1, m2, g = get("BM_Loss_Mrc1Plane"), get("BM_Loss_Mrc2Plane"), get("BM_Loss_Gbn")
print(f"  MRC / go-back-N at 1 % loss, same 100 Gb/s port:  {m1['loss_1pct_Gb/s'] / g['loss_1pct_Gb/s']:.2f}x"
      f"   (2 planes: {m2['loss_1pct_Gb/s'] / g['loss_1pct_Gb/s']:.2f}x)")
print(f"  kept under 1 % loss: MRC {100 * m1['ratio']:.1f} %, go-back-N {100 * g['ratio']:.1f} %"
      f"  -> ratio {m1['ratio'] / g['ratio']:.2f}x")

print("\nOne of 16 paths fails (8 planes x 2 paths, 100 Gb/s ports, failure at 200 us, "
      "goodput = in-order bytes over a sliding 10 us window):")
m, g = get("BM_Recovery_Mrc"), get("BM_Recovery_Gbn")
thr = m["fault_free_Gb/s"] * 15 / 16
print(f"  MRC:  fault-free {m['fault_free_Gb/s']:.1f} Gb/s; back to >= 15/16 of it ({thr:.1f} Gb/s) and "
      f"staying there {m['recovery_us']:.0f} us after the failure;")
print(f"        mean over [fail + 100 us, fail + 400 us] {m['after_Gb/s']:.1f} Gb/s; "
      f"{m['evs_retired']:.0f} EVs retired, the last {m['last_retire_us']:.1f} us after the failure "
      f"(T = {m['timeout_us']:.1f} us)")
if g["recovery_us"] < 0:
    err = (f"the QP errors (RETRY_EXC_ERR) {g['qp_error_after_us']:.0f} us after the failure"
           if g["qp_error_after_us"] >= 0 else "no QP error within the run")
    print(f"  RC go-back-N (its one path is the failed one): fault-free {g['fault_free_Gb/s']:.1f} Gb/s; "
          f"never recovers: {g['after_Gb/s']:.1f} Gb/s after, {err}")
else:
    print(f"  RC go-back-N: back after {g['recovery_us']:.0f} us")
PY

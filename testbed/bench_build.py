#!/usr/bin/python3
"""Topology build / teardown times for multi-plane Clos fabrics (root; Debian's /usr/bin/python3).

    /usr/bin/python3 testbed/bench_build.py                 # 2x(4,2,8) and 8x(4,2,8), both modes
    /usr/bin/python3 testbed/bench_build.py --shape 4,4,2,8 --mode srv6 --repeat 5 --verify

Each run builds the fabric (Mininet nodes, veth links, per-node configuration), optionally checks
reachability, and tears it down; the phases are timed separately. Prints one table row per
(shape, mode) with the median and range over the repeats, and the raw runs as JSON with --json.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mrctb import fabric, plan as planlib  # noqa: E402

PHASES = ("nodes_s", "links_s", "mininet_build_s", "configure_s", "total_s", "stop_s")


def parse_shape(text):
    try:
        planes, t0, t1, hosts = (int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--shape {text!r}: expected PLANES,T0,T1,HOSTS_PER_T0") from None
    return planes, t0, t1, hosts


def one_run(shape, mode, verify):
    plan = planlib.clos(*shape)
    fab = fabric.Fabric(plan, mode)
    t0 = time.monotonic()
    with fab:
        built = time.monotonic()
        verified = None
        if verify:
            results = fab.ping_matrix(planes=[0, plan.planes - 1])
            verified = (sum(results.values()), len(results))
    result = dict(fab.timings)
    result["wall_s"] = time.monotonic() - t0
    result["build_wall_s"] = built - t0
    result["nodes"] = len(plan.nodes())
    result["links"] = len(plan.links)
    result["leftovers"] = fab.cleanup_report["leftovers"]
    if verified:
        result["ping_ok"], result["ping_total"] = verified
    os.rmdir(fab.workdir)  # empty: no captures were taken
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append",
                    help="PLANES,T0,T1,HOSTS_PER_T0 (repeatable; default 2,4,2,8 and 8,4,2,8)")
    ap.add_argument("--mode", action="append", choices=planlib.MODES)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--verify", action="store_true",
                    help="ping every host pair on the first and last plane before teardown")
    ap.add_argument("--json", action="store_true", help="also print every run as JSON")
    args = ap.parse_args()
    shapes = [parse_shape(s) for s in (args.shape or ["2,4,2,8", "8,4,2,8"])]
    modes = args.mode or list(planlib.MODES)
    try:
        fabric.require_root()
    except fabric.FabricError as err:
        print(f"bench_build: {err}", file=sys.stderr)
        return 2

    rows, runs = [], []
    for shape in shapes:
        for mode in modes:
            results = []
            for _ in range(args.repeat):
                results.append(one_run(shape, mode, args.verify))
                runs.append({"shape": shape, "mode": mode, **results[-1]})
            rows.append((shape, mode, results))

    header = (f"{'shape P x (T0,T1,H/T0)':<24} {'mode':<5} {'nodes':>5} {'links':>5} "
              + " ".join(f"{p[:-2]:>15}" for p in PHASES) + "  leftovers  ping")
    print(header)
    for shape, mode, results in rows:
        cells = []
        for phase in PHASES:
            values = [r[phase] for r in results]
            cells.append(f"{statistics.median(values):6.2f} [{min(values):.2f}-{max(values):.2f}]")
        left = sum(len(r["leftovers"]["pids"]) + len(r["leftovers"]["root_interfaces"])
                   for r in results)
        ping = "-"
        if "ping_ok" in results[0]:
            ping = f"{sum(r['ping_ok'] for r in results)}/{sum(r['ping_total'] for r in results)}"
        label = f"{shape[0]} x ({shape[1]},{shape[2]},{shape[3]})"
        print(f"{label:<24} {mode:<5} {results[0]['nodes']:>5} {results[0]['links']:>5} "
              + " ".join(f"{c:>15}" for c in cells) + f"  {left:>9}  {ping}")
    print(f"(seconds: median [min-max] over {args.repeat} runs; total = build, stop = teardown "
          "including the leftover check)")
    if args.json:
        print(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

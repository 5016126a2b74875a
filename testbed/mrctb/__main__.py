"""Command line: /usr/bin/python3 -m mrctb COMMAND (run from testbed/ or with PYTHONPATH=testbed).

  plan           print the address / uSID plan as JSON            (no root)
  paths          print the EV -> SRv6 path table as JSON           (no root)
  da             print one SRv6 outer destination address         (no root)
  script         print the per-node configuration scripts         (no root)
  up             build a fabric and keep it until Ctrl-C / SIGTERM / --duration (root)
  cleanup-stale  kill what a builder killed by SIGKILL left behind (root)
  run            run one scenario end to end: verdict + artifacts (root; `mrct run`)
  suite          run a directory of scenarios against an implementation (root; `mrct suite`)
  suite merge    combine the reports of suite shards (--shard I/N) into one      (no root)
  validate       check scenario files without running them                (no root)

Exit codes: 0 ok, 1 a check failed (up --check) or something was left behind, 2 usage or input
error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import config as configlib
from . import plan as planlib

SHAPE_ARGS = {
    "clos": ("planes", "t0", "t1", "hosts_per_t0"),
    "back_to_back": ("planes",),
    "single_router": ("planes", "hosts"),
    "dumbbell": ("planes", "left", "right"),
    "incast": ("planes", "senders"),
}


def _add_shape_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--shape", choices=sorted(SHAPE_ARGS), default="clos")
    ap.add_argument("--planes", type=int, default=2)
    ap.add_argument("--t0", type=int, default=2, help="clos: T0 switches per plane")
    ap.add_argument("--t1", type=int, default=2, help="clos: T1 switches per plane")
    ap.add_argument("--hosts-per-t0", type=int, default=2, help="clos: hosts under each T0")
    ap.add_argument("--hosts", type=int, default=2, help="single_router: hosts")
    ap.add_argument("--senders", type=int, default=4, help="incast: senders")
    ap.add_argument("--left", type=int, default=2, help="dumbbell: hosts on the left router")
    ap.add_argument("--right", type=int, default=2, help="dumbbell: hosts on the right router")
    ap.add_argument("--locator", default=planlib.DEFAULT_LOCATOR)
    ap.add_argument("--mtu", type=int, default=planlib.DEFAULT_MTU)
    ap.add_argument("--mode", choices=planlib.MODES, default="srv6")


def make_plan(args) -> planlib.Plan:
    params = {name: getattr(args, name) for name in SHAPE_ARGS[args.shape]}
    return planlib.make(args.shape, locator=args.locator, mtu=args.mtu, **params)


def _write(text: str, path: str | None) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def cmd_plan(args) -> int:
    _write(planlib.dumps(make_plan(args).to_json(args.mode)), args.output)
    return 0


def cmd_paths(args) -> int:
    plan = make_plan(args)
    pairs = None
    if args.pair:
        pairs = []
        for text in args.pair:
            src, sep, dst = text.partition(",")
            if not sep:
                raise planlib.PlanError(f"--pair {text!r}: expected SRC,DST")
            plan.host(src)
            plan.host(dst)
            pairs.append((src, dst))
    _write(planlib.dumps(plan.paths_json(args.mode, args.evs, pairs, args.same_t0_via_t1)),
           args.output)
    return 0


def cmd_da(args) -> int:
    path = make_plan(args).srv6_path(args.src, args.dst, args.plane, args.t1_choice)
    print(json.dumps(path.to_dict()) if args.json else path.outer_da)
    return 0


def cmd_script(args) -> int:
    plan = make_plan(args)
    names = args.node or plan.nodes()
    for name in names:
        if name not in plan.hosts and name not in plan.routers:
            raise planlib.PlanError(f"no node {name!r}")
        print(f"# ---- {name}")
        print(configlib.node_config(plan, name, args.mode).script())
    return 0


def cmd_up(args) -> int:
    from . import fabric

    plan = make_plan(args)
    fab = fabric.Fabric(plan, args.mode, workdir=args.workdir, log=lambda m: print(m, flush=True))
    rc = 0
    try:
        rc = _up(fab, plan, args)
    except KeyboardInterrupt:
        rc = 130
    except SystemExit as stop:  # SIGTERM, raised by the fabric's handler
        rc = stop.code if isinstance(stop.code, int) else 1
    print(json.dumps({"cleanup": fab.cleanup_report}), flush=True)
    return rc


def _up(fab, plan, args) -> int:
    rc = 0
    with fab:
        files = fab.write_plan()
        print(json.dumps({"timings": fab.timings, "workdir": fab.workdir, **files,
                          "pids": {n: fab.pid(n) for n in plan.nodes()}}), flush=True)
        if args.check:
            results = fab.ping_matrix()
            failed = sorted(k for k, ok in results.items() if not ok)
            print(json.dumps({"ping_pairs": len(results), "failed": failed}), flush=True)
            rc = 1 if failed else 0
        if args.duration is None:
            print("fabric up; Ctrl-C or SIGTERM tears it down "
                  "(enter a node with: mnexec -a PID bash)", flush=True)
            while True:
                time.sleep(3600)
        else:
            time.sleep(args.duration)
    return rc


def cmd_cleanup_stale(_args) -> int:
    from . import procs

    killed = procs.cleanup_stale(log=lambda msg: print(msg, file=sys.stderr))
    print(json.dumps({"killed": killed}))
    return 1 if procs.stale_states() else 0


def cmd_validate(args) -> int:
    from . import scenario as sclib

    rc = 0
    files = []
    for path in args.paths:
        found = sclib.discover(path)
        if not found:
            print(f"mrctb: {path}: no scenario files", file=sys.stderr)
            rc = 2
        files += found
    for path in files:
        try:
            sc = sclib.load(path)
            print(f"ok  {path}: {sc.name} [{', '.join(sc.tags)}]")
        except sclib.ScenarioError as err:
            print(f"ERR {err}", file=sys.stderr)
            rc = 2
    return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m mrctb", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="address / uSID plan as JSON")
    _add_shape_args(p)
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("paths", help="EV -> path table as JSON")
    _add_shape_args(p)
    p.add_argument("--evs", type=int, help="EVs per host pair (default planes x paths per plane)")
    p.add_argument("--pair", action="append", help="SRC,DST (repeatable; default all pairs)")
    p.add_argument("--same-t0-via-t1", action="store_true",
                   help="hosts under one T0 also get hairpin paths through each T1")
    p.add_argument("-o", "--output")
    p.set_defaults(func=cmd_paths)
    p = sub.add_parser("da", help="one SRv6 outer destination address")
    _add_shape_args(p)
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--plane", type=int, required=True)
    p.add_argument("--t1-choice", type=int, help="clos: the T1 switch index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_da)
    p = sub.add_parser("script", help="per-node configuration scripts")
    _add_shape_args(p)
    p.add_argument("--node", action="append")
    p.set_defaults(func=cmd_script)
    p = sub.add_parser("up", help="build a fabric (root)")
    _add_shape_args(p)
    p.add_argument("--workdir")
    p.add_argument("--check", action="store_true", help="ping every pair on every plane")
    p.add_argument("--duration", type=float, help="tear down after this many seconds")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("cleanup-stale", help="clean up after builders killed by SIGKILL (root)")
    p.set_defaults(func=cmd_cleanup_stale)
    from . import cli

    cli.add_run_parser(sub)
    cli.add_suite_parser(sub)
    cli.add_suite_merge_parser(sub)
    p = sub.add_parser("validate", help="check scenario files (no root)")
    p.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    p.set_defaults(func=cmd_validate)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["suite", "merge"]:  # `mrct suite merge DIR...`
        argv[:2] = ["suite-merge"]
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except planlib.PlanError as err:
        print(f"mrctb: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # FabricError and friends: plain message, no traceback
        from . import fabric

        if isinstance(err, fabric.FabricError):
            print(f"mrctb: {err}", file=sys.stderr)
            return 1 if isinstance(err, fabric.CleanupError) else 2
        raise


if __name__ == "__main__":
    sys.exit(main())

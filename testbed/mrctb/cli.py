"""`run` and `suite` subcommands of `python3 -m mrctb` (what `mrct run` / `mrct suite` exec)."""

from __future__ import annotations

import argparse
import json
import os
import sys

RUN_HELP = """Run one scenario end to end (root): build the fabric, start the endpoints, the
fault injector, the captures and the fault schedule, stop, tear down, check, report.

Prints the verdict, the seed (replay with --seed) and the artifacts directory.
Exit codes: 0 pass (or unsupported by the DUT), 1 fail / incomplete / inconclusive / error, 2
usage or input error (bad scenario, not root, no mrct binary), 130 interrupted."""

SUITE_HELP = """Run every scenario under DIR (or the given files) against an implementation
(the reference endpoint, or --dut PROFILE). Prints a scenario x verdict matrix and writes
suite.json, suite.xml (JUnit) and suite.md into the artifacts directory. Conformance scripts
(*.mrcs) under the same paths run too, through `mrct script run` (--script-target).
Exit codes: 0 nothing failed (unsupported and not-run are listed, and fail only with
--strict), 1 something failed, 2 usage or input error."""


def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="run one scenario (root)", description=RUN_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", metavar="SCENARIO", help="scenario file (TOML)")
    p.add_argument("--seed", type=int, help="seed of the run (default: the scenario's); the "
                   "same seed replays the same injector decisions and data pattern")
    p.add_argument("--out", help="artifacts directory (default artifacts/runs/NAME-TIME)")
    p.add_argument("--mrct", help="mrct binary (default: $MRCT, build/*/bin/mrct, PATH)")
    p.add_argument("--dut", help="DUT profile (TOML, ci/dut/README.md); default: the "
                   "reference endpoint on both sides")
    p.add_argument("--mutant", default="", help="TEST ONLY: run the reference endpoint in a "
                   "mutant mode (mrct endpoint --list-mutants); the checker must catch it")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a scenario value, e.g. --set traffic.messages=200")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the fault-free reference run (goodput %% SLOs become not-run)")
    p.add_argument("--no-check", action="store_true", help="skip the conformance checker")
    p.add_argument("--keep-captures", choices=("all", "failed", "none"), default="all",
                   help="keep the pcaps (default), only when the run did not pass, or never")
    p.add_argument("--validate", action="store_true",
                   help="only parse and validate the scenario (and the --dut profile; no root)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print the result JSON on stdout")
    p.set_defaults(func=cmd_run)


def add_suite_parser(sub) -> None:
    p = sub.add_parser("suite", help="run many scenarios (root)", description=SUITE_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    p.add_argument("--filter", default="", help="regular expression on scenario names")
    p.add_argument("--tag", action="append", default=[],
                   help="only scenarios with this tag (repeatable: any of them), e.g. ci-fast")
    p.add_argument("--exclude-tag", action="append", default=[])
    p.add_argument("--jobs", type=int, default=1, help="scenarios at once (default 1; timing "
                   "SLOs get noisy when runs share 2 cores)")
    p.add_argument("--mutants", action="store_true",
                   help="run each scenario's listed mutants (expect.mutants) instead; a case "
                   "passes when the checker fails the rule the mutant breaks")
    p.add_argument("--seed", type=int)
    p.add_argument("--seeds", default="", help="seed sweep, e.g. 1-10 or 3,7,11: every scenario "
                   "runs once per seed (cases NAME@sSEED); the matrix is scenario x DUT x seed")
    p.add_argument("--shard", default="", metavar="I/N",
                   help="run share I of N of the matrix (cases whose index is I-1 modulo N); "
                   "`mrct suite merge DIR...` combines the N shards' reports into the "
                   "unsharded run's")
    p.add_argument("--out", help="artifacts directory (default artifacts/suite-NAME-TIME)")
    p.add_argument("--mrct")
    p.add_argument("--dut", action="append", default=[],
                   help="DUT profile (TOML); repeatable: every case runs against each (cases "
                   "NAME@DUT when more than one)")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--keep-captures", choices=("all", "failed", "none"), default="failed",
                   help="keep each scenario's pcaps, only for cases that did not pass "
                   "(default: a library run keeps about 3 GB otherwise), or never")
    p.add_argument("--strict", action="store_true", help="unsupported and not-run fail too")
    p.add_argument("--summary", default="", help="append the Markdown table to this file "
                   "(e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--script-target", choices=("engine", "netns"), default="engine",
                   help="where scripts (*.mrcs) play: the reference engine in process on a "
                   "virtual clock (default), or the reference in a namespace pair over "
                   "AF_PACKET in real time; with --dut always netns, through the profile's "
                   "script mode)")
    p.add_argument("--script-tolerance", default="",
                   help="widen every timing window of the scripts on real time by this much "
                   "(mrct script run --tolerance, e.g. 100ms on a loaded machine; default: each "
                   "script's own)")
    p.add_argument("--name", default="", help="suite name in reports")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_suite)


def cmd_run(args) -> int:
    from . import dut as dutlib
    from . import run as runlib
    from . import scenario as sclib

    try:
        overrides = runlib.parse_sets(args.set)
        sc = sclib.load(args.scenario, overrides)
    except (sclib.ScenarioError, runlib.UsageError) as err:
        print(f"mrct run: {err}", file=sys.stderr)
        return 2
    try:
        dut = dutlib.load(args.dut) if args.dut else dutlib.REFERENCE
    except dutlib.DutError as err:
        print(f"mrct run: {err}", file=sys.stderr)
        return 2
    if args.validate:
        print(f"{args.scenario}: ok ({sc.name}: {sc.topology.shape}/{sc.topology.routing}, "
              f"{len(sc.impairs)} impairment(s), {len(sc.faults)} fault(s))"
              + (f"; DUT profile {args.dut}: ok ({dut.name})" if args.dut else ""))
        return 0
    try:
        runlib.require_root()
    except runlib.UsageError as err:
        print(f"mrct run: {err}", file=sys.stderr)
        return 2
    opts = runlib.RunOptions(out_dir=args.out, seed=args.seed, mrct=args.mrct, dut=dut,
                             mutant=args.mutant, reference=not args.no_reference,
                             progress=not args.quiet, check=not args.no_check,
                             keep_captures=args.keep_captures)
    result = runlib.run_scenario(sc, opts)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        runlib.print_verdict(result)
    return runlib.exit_code(result)


def cmd_suite(args) -> int:
    from . import dut as dutlib
    from . import run as runlib
    from . import suite as suitelib

    try:
        seeds = suitelib.parse_seeds(args.seeds) if args.seeds else []
        shard = suitelib.parse_shard(args.shard) if args.shard else None
    except runlib.UsageError as err:
        print(f"mrct suite: {err}", file=sys.stderr)
        return 2
    opts = suitelib.SuiteOptions(paths=args.paths, out_dir=args.out, filter=args.filter,
                                 tags=args.tag, exclude_tags=args.exclude_tag,
                                 jobs=max(1, args.jobs), mutants=args.mutants, seed=args.seed,
                                 mrct=args.mrct, dut_paths=args.dut, seeds=seeds, shard=shard,
                                 reference=not args.no_reference, strict=args.strict,
                                 summary_file=args.summary, progress=not args.quiet,
                                 name=args.name, keep_captures=args.keep_captures,
                                 script_target=args.script_target,
                                 script_tolerance=args.script_tolerance)
    try:
        if args.list:
            for case in suitelib.plan(opts)[1]:
                tags = (" ".join(case.scenario.tags) if case.scenario else
                        " ".join(case.script.tags) if case.script else "INVALID: " + case.error)
                print(f"{case.name}\t{case.path}\t{tags}")
            return 0
        results, _out = suitelib.run_suite(opts)
    except (runlib.UsageError, dutlib.DutError) as err:
        print(f"mrct suite: {err}", file=sys.stderr)
        return 2
    return suitelib.exit_code(results, args.strict)


MERGE_HELP = """Combine the reports of a suite run in shards (mrct suite --shard I/N, one
directory per shard) into one: suite.json, suite.xml and suite.md as the unsharded run writes
them, results in matrix order. Refuses (exit 2, naming the file and field) shards of different
runs, a shard given twice or missing, and a case in no shard or in two.

Exit codes: 0 nothing failed, 1 a case failed (as mrct suite), 2 usage or input error."""


def add_suite_merge_parser(sub) -> None:
    p = sub.add_parser("suite-merge", help="merge the reports of suite shards (no root)",
                       description=MERGE_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", metavar="SHARD_DIR", help="each shard's --out directory")
    p.add_argument("--out", required=True, help="directory for the merged reports")
    p.add_argument("--summary", default="", help="append the Markdown table to this file "
                   "(e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--strict", action="store_true", help="unsupported and not-run fail too")
    p.set_defaults(func=cmd_suite_merge)


def cmd_suite_merge(args) -> int:
    from . import suite as suitelib

    try:
        doc = suitelib.merge_shards(args.dirs)
    except suitelib.MergeError as err:
        print(f"mrct suite merge: {err}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    suitelib.write_reports(doc, args.out, args.summary)
    return suitelib.exit_code(doc["results"], args.strict)

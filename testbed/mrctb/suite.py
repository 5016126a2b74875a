"""`mrct suite DIR`: many scenarios against one implementation; a matrix, JUnit, Markdown, JSON.

Scenarios run one after the other by default: each builds its own fabric, and on a 2-core
machine parallel runs distort the timing-based expectations (goodput, stalls). --jobs N runs
N scenarios at once in separate processes (fabric builds are serialised by a lock).

Conformance scripts (*.mrcs, docs/scripts.md) under the same paths run next to the scenarios:
each through `mrct script run` (the engine target by default, --script-target netns for the
wire), with the same tag selection and mutant mode, merged into the same reports.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import json
import os
import re
import subprocess
import sys
import time

from . import dut as dutlib
from . import report as reportlib
from . import run as runlib
from . import scenario as sclib
from . import tools

SUITE_SCHEMA = "mrctb-suite/1"
FAILING = ("fail", "error", "incomplete", "inconclusive", "interrupted")


@dataclasses.dataclass
class SuiteOptions:
    paths: list
    out_dir: str | None = None
    filter: str = ""
    tags: list = dataclasses.field(default_factory=list)
    exclude_tags: list = dataclasses.field(default_factory=list)
    jobs: int = 1
    mutants: bool = False          # run each scenario's mutants instead of the scenario
    seed: int | None = None
    mrct: str | None = None
    dut_path: str = ""
    reference: bool = True
    strict: bool = False           # not-run / unsupported fail the suite too
    summary_file: str = ""         # append the Markdown here (e.g. $GITHUB_STEP_SUMMARY)
    progress: bool = True
    name: str = ""
    keep_captures: str = "failed"
    script_target: str = "engine"  # engine | netns (mrct script run --target)
    script_tolerance: str = ""     # mrct script run --tolerance ("" = each script's own)


@dataclasses.dataclass
class ScriptMeta:
    """What the suite needs of a script's header (the parser in `mrct script` is the judge of
    the rest: a script that does not parse comes back as an error result)."""
    name: str
    tags: list
    mutants: list


@dataclasses.dataclass
class Case:
    name: str
    path: str
    scenario: sclib.Scenario | None
    mutant: str = ""
    error: str = ""
    script: ScriptMeta | None = None


def discover_scripts(path: str) -> list[str]:
    """Scripts under a directory (recursively, *.mrcs, sorted), or the file itself."""
    if os.path.isfile(path):
        return [path] if path.endswith(".mrcs") else []
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".mrcs")]
    return out


def script_meta(path: str) -> ScriptMeta:
    tags: list = []
    mutants: list = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            toks = line.split("#", 1)[0].split()
            if toks and toks[0] == "tags":
                tags += toks[1:]
            elif toks and toks[0] == "mutants":
                mutants += toks[1:]
    return ScriptMeta(os.path.splitext(os.path.basename(path))[0], tags, mutants)


def collect(opts: SuiteOptions) -> list[Case]:
    files = []
    scripts = []
    for p in opts.paths:
        if not os.path.exists(p):
            raise runlib.UsageError(f"{p}: no such file or directory")
        if not p.endswith(".mrcs"):
            files += sclib.discover(p)
        scripts += discover_scripts(p)
    if not files and not scripts:
        raise runlib.UsageError(f"no scenario files (*.toml) or scripts (*.mrcs) under "
                                f"{', '.join(opts.paths)}")
    rx = re.compile(opts.filter) if opts.filter else None
    cases = []
    for path in files:
        try:
            sc = sclib.load(path)
        except sclib.ScenarioError as err:
            cases.append(Case(os.path.splitext(os.path.basename(path))[0], path, None,
                              error=str(err)))
            continue
        if rx and not rx.search(sc.name):
            continue
        if opts.tags and not set(opts.tags) & set(sc.tags):
            continue
        if set(opts.exclude_tags) & set(sc.tags):
            continue
        if opts.mutants:
            for m in sc.expect.mutants:
                cases.append(Case(f"{sc.name}+{m}", path, sc, mutant=m))
        else:
            cases.append(Case(sc.name, path, sc))
    for path in scripts:
        try:
            meta = script_meta(path)
        except OSError as err:
            cases.append(Case(os.path.basename(path), path, None, error=str(err)))
            continue
        if rx and not rx.search(meta.name):
            continue
        if opts.tags and not set(opts.tags) & set(meta.tags):
            continue
        if set(opts.exclude_tags) & set(meta.tags):
            continue
        if opts.mutants:
            for m in meta.mutants:
                cases.append(Case(f"{meta.name}+{m}", path, None, mutant=m, script=meta))
        else:
            cases.append(Case(meta.name, path, None, script=meta))
    return cases


def run_script_case(case: Case, case_out: str, opts: SuiteOptions) -> dict:
    """One script through `mrct script run`; its JSON result is already in the suite's shape
    (scenario, verdict, reason, tags, timings). A mutant case passes when the script fails."""
    os.makedirs(case_out, exist_ok=True)
    res_path = os.path.join(case_out, "result.json")
    argv = [opts.mrct, "script", "run", case.path, "--target", opts.script_target,
            "--json", res_path, "--pcap-dir", case_out, "-q"]
    if opts.dut_path:
        # The DUT plays the implementation over the wire through its profile's script mode;
        # a profile without one cannot run scripts (said, not passed).
        dut = dutlib.load(opts.dut_path)
        if dutlib.SCRIPT not in dut.commands:
            res = _error_result(case, f"DUT {dut.name} has no script mode (a `script` command "
                                "template, ci/dut/README.md)")
            res["verdict"] = "not-run"
            res["kind"] = "script"
            return res
        if case.mutant:
            res = _error_result(case, "script mutants are mutants of the reference; with a DUT "
                                "they are not run")
            res["verdict"] = "not-run"
            res["kind"] = "script"
            return res
        argv = [opts.mrct, "script", "run", case.path, "--target", "netns", "--dut",
                opts.dut_path, "--json", res_path, "--pcap-dir", case_out, "-q"]
    if case.mutant:
        argv += ["--mutant", case.mutant]
    if opts.script_tolerance:
        argv += ["--tolerance", opts.script_tolerance]
    t0 = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode == 2 or not os.path.exists(res_path):
        res = _error_result(case, f"mrct script run exited {proc.returncode}: "
                            + proc.stdout.strip()[-400:])
        res["kind"] = "script"
        return res
    with open(res_path) as f:
        res = json.load(f)[0]
    res["file"] = case.path
    res["artifacts"] = case_out
    res.setdefault("timings", {})["total_s"] = round(time.monotonic() - t0, 3)
    if case.mutant:
        res["mutant"] = case.mutant
        res["scenario"] = case.name
        caught = res["verdict"] == "fail"
        res["reason"] = (f"caught: {res.get('reason', '')}" if caught else
                         f"the script passes against mutant {case.mutant} (it must fail)")
        res["verdict"] = "pass" if caught else "fail"
    return res


def _error_result(case: Case, reason: str) -> dict:
    return {"schema": runlib.RESULT_SCHEMA, "scenario": case.name, "file": case.path,
            "verdict": "error", "reason": reason, "timings": {"total_s": 0}, "tags": [],
            "expectations": [], "artifacts": ""}


def _mutant_verdict(res: dict) -> dict:
    """A mutant case passes when the checker caught the rule the mutant breaks."""
    out = dict(res)
    out["scenario"] = res.get("scenario", "") + "+" + res.get("mutant", "")
    caught = res.get("mutant_caught")
    if res["verdict"] in ("error", "interrupted", "unsupported", "not-run"):
        return out
    if caught is None:
        out["verdict"] = "incomplete"
    else:
        out["verdict"] = "pass" if caught else "fail"
    return out


def run_suite(opts: SuiteOptions) -> tuple[list[dict], str]:
    runlib.require_root()
    dut = dutlib.load(opts.dut_path) if opts.dut_path else dutlib.REFERENCE
    cases = collect(opts)
    # One binary for the whole suite (a build finishing elsewhere must not change it midway).
    try:
        opts = dataclasses.replace(opts, mrct=tools.find(opts.mrct, ("endpoint",)).path)
    except tools.ToolError as err:
        raise runlib.UsageError(str(err)) from None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = opts.name or ("mutants" if opts.mutants else
                         os.path.basename(os.path.normpath(opts.paths[0])) or "suite")
    out = os.path.abspath(opts.out_dir or os.path.join(os.getcwd(), "artifacts",
                                                         f"suite-{name}-{stamp}"))
    os.makedirs(out, exist_ok=True)
    console = sys.stderr
    print(f"suite {name}: {len(cases)} case(s) against {dut.name}; mrct {opts.mrct}; "
          f"artifacts {out}", file=console, flush=True)
    t0 = time.monotonic()
    results: list[dict] = [None] * len(cases)  # type: ignore[list-item]
    cache: dict = {}

    def one(i: int, case: Case) -> dict:
        case_out = os.path.join(out, case.name)
        if case.script is not None:
            return run_script_case(case, case_out, opts)
        if case.scenario is None:
            return _error_result(case, case.error)
        if opts.jobs > 1:
            return _run_subprocess(case, case_out, opts)
        ropts = runlib.RunOptions(out_dir=case_out, seed=opts.seed, mrct=opts.mrct, dut=dut,
                                  mutant=case.mutant, reference=opts.reference,
                                  reference_cache=cache, progress=opts.progress,
                                  console=console, keep_captures=opts.keep_captures)
        return runlib.run_scenario(case.scenario, ropts)

    interrupted = False
    if opts.jobs <= 1:
        for i, case in enumerate(cases):
            print(f"\n=== [{i + 1}/{len(cases)}] {case.name}", file=console, flush=True)
            try:
                res = one(i, case)
            except KeyboardInterrupt:
                interrupted = True
                res = _error_result(case, "interrupted")
                res["verdict"] = "interrupted"
            results[i] = _mutant_verdict(res) if case.mutant and not case.script else res
            if res.get("verdict") == "interrupted":
                interrupted = True  # Ctrl-C inside a run ends that run, then the suite
            print(f"=== {case.name}: {results[i]['verdict'].upper()} "
                  f"({results[i].get('timings', {}).get('total_s', 0):.1f} s)"
                  + (f" - {results[i]['reason']}" if results[i].get("reason") else ""),
                  file=console, flush=True)
            if interrupted:
                for j in range(i + 1, len(cases)):
                    results[j] = _error_result(cases[j], "not started: suite interrupted")
                    results[j]["verdict"] = "interrupted"
                break
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            futs = {pool.submit(one, i, c): i for i, c in enumerate(cases)}
            for fut in concurrent.futures.as_completed(futs):
                i = futs[fut]
                res = fut.result()
                results[i] = (_mutant_verdict(res) if cases[i].mutant and not cases[i].script
                              else res)
                print(f"=== {cases[i].name}: {results[i]['verdict'].upper()}", file=console,
                      flush=True)
    wall = time.monotonic() - t0
    for r in results:
        r.setdefault("tags", [])
    doc = {"schema": SUITE_SCHEMA, "name": name, "dut": dut.name, "wall_s": round(wall, 2),
           "counts": reportlib.suite_counts(results), "mutants": opts.mutants,
           "results": [{k: v for k, v in r.items() if k not in ("endpoints",)}
                       for r in results]}
    with open(os.path.join(out, "suite.json"), "w") as f:
        json.dump(doc, f, indent=2, default=str)
    with open(os.path.join(out, "suite.xml"), "w") as f:
        f.write(reportlib.suite_junit(results, name))
    md = reportlib.suite_markdown(results, name, dut.name, wall)
    with open(os.path.join(out, "suite.md"), "w") as f:
        f.write(md)
    if opts.summary_file:
        with open(opts.summary_file, "a") as f:
            f.write(md + "\n")
    print("\n" + reportlib.suite_matrix(results), flush=True)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(doc["counts"].items()))
    print(f"\n{len(results)} case(s): {counts}; wall time {wall:.1f} s", flush=True)
    print(f"artifacts: {out} (suite.md, suite.xml, suite.json)", flush=True)
    return results, out


def _run_subprocess(case: Case, case_out: str, opts: SuiteOptions) -> dict:
    argv = [sys.executable, "-m", "mrctb", "run", case.path, "--out", case_out, "--quiet"]
    if opts.seed is not None:
        argv += ["--seed", str(opts.seed)]
    if opts.mrct:
        argv += ["--mrct", opts.mrct]
    if opts.dut_path:
        argv += ["--dut", opts.dut_path]
    if case.mutant:
        argv += ["--mutant", case.mutant]
    if not opts.reference:
        argv.append("--no-reference")
    argv += ["--keep-captures", opts.keep_captures]
    env = dict(os.environ)
    testbed = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = testbed + os.pathsep + env.get("PYTHONPATH", "")
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(os.path.join(case_out, "result.json")) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        return _error_result(case, f"run wrote no result: {err}")


def exit_code(results: list[dict], strict: bool) -> int:
    if any(r["verdict"] == "interrupted" for r in results):
        return 130
    bad = set(FAILING) | ({"not-run", "unsupported"} if strict else set())
    return 1 if any(r["verdict"] in bad for r in results) else 0

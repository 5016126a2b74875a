"""`mrct suite DIR`: many scenarios against one implementation; a matrix, JUnit, Markdown, JSON.

Scenarios run one after the other by default: each builds its own fabric, and on a 2-core
machine parallel runs distort the timing-based expectations (goodput, stalls). --jobs N runs
N scenarios at once in separate processes (fabric builds are serialised by a lock).

Conformance scripts (*.mrcs, docs/scripts.md) under the same paths run next to the scenarios:
each through `mrct script run` (the engine target by default, --script-target netns for the
wire), with the same tag selection and mutant mode, merged into the same reports.

The cases form a matrix: scenario (or mutant) x DUT profile (--dut, repeatable) x seed (--seeds,
a sweep). --shard I/N runs the cases whose index in that matrix is I-1 modulo N, so that N
machines share a library; `mrct suite merge DIR...` puts the N shards' results back into one
report, the one the unsharded run writes (see normalise_*: timings and the artifacts directory
differ from run to run, nothing else may).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import json
import os
import re
import shutil
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
    dut_paths: list = dataclasses.field(default_factory=list)  # more DUTs: the matrix's axis
    seeds: list = dataclasses.field(default_factory=list)      # a seed sweep (overrides seed)
    shard: tuple | None = None     # (I, N): run the share I of N (1-based) of the matrix


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
    seed: int | None = None
    dut_path: str = ""


def parse_seeds(text: str) -> list[int]:
    """"1,2,5-8" -> [1, 2, 5, 6, 7, 8] (order kept, duplicates refused)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise runlib.UsageError(f"--seeds {text!r}: {part!r} is not a seed or a range A-B")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a or b - a >= 100000:
            raise runlib.UsageError(f"--seeds {text!r}: {part!r} is not a range A-B with A <= B")
        out += range(a, b + 1)
    if len(set(out)) != len(out):
        raise runlib.UsageError(f"--seeds {text!r}: a seed is listed twice")
    return out


def parse_shard(text: str) -> tuple[int, int]:
    """"2/4" -> (2, 4)."""
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise runlib.UsageError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(m.group(1)), int(m.group(2))


def dut_paths(opts: SuiteOptions) -> list[str]:
    """The DUT axis of the matrix: "" is the reference endpoint."""
    return ([opts.dut_path] if opts.dut_path else []) + list(opts.dut_paths) or [""]


def matrix(opts: SuiteOptions, cases: list[Case], dut_names: dict) -> list[Case]:
    """The (case x DUT x seed) matrix, in a fixed order: the collected cases (sorted discovery),
    then the DUTs as given, then the seeds as given. Names get @DUT and @sSEED when the axis has
    more than one value. Scripts take no seed, so they are crossed with the DUTs only (a DUT
    plays a script through its profile's script mode)."""
    duts = dut_paths(opts)
    seeds = list(opts.seeds) or [opts.seed]
    out = []
    for c in cases:
        if c.script is not None:
            for d in duts:
                name = c.name + ("@" + dut_names[d] if len(duts) > 1 else "")
                out.append(dataclasses.replace(c, name=name, dut_path=d))
            continue
        for d in duts:
            for sd in seeds:
                name = c.name
                if len(duts) > 1:
                    name += "@" + dut_names[d]
                if len(seeds) > 1:
                    name += f"@s{sd}"
                out.append(dataclasses.replace(c, name=name, seed=sd, dut_path=d))
    return out


def shard_of(cases: list[Case], shard: tuple | None) -> list[Case]:
    """Share I of N: the cases whose matrix index is I-1 modulo N (round robin, so that each
    shard gets a mix of the library's directories)."""
    if not shard:
        return cases
    i, n = shard
    return [c for k, c in enumerate(cases) if k % n == i - 1]


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
    if case.dut_path:
        # The DUT plays the implementation over the wire through its profile's script mode;
        # a profile without one cannot run scripts (said, not passed).
        dut = dutlib.load(case.dut_path)
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
                case.dut_path, "--json", res_path, "--pcap-dir", case_out, "-q"]
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


def run_with_stall_retry(case: Case, case_out: str, run_once, console=None) -> dict:
    """One scenario case, run once more when it did not pass and a reference endpoint of it
    reports a host stall (run.host_stall: a received frame read >= run.HOST_STALL_MS late): its
    verdict was then about the machine, which did not run the endpoint, not about the
    implementation (issue 20: no verdict may depend on machine speed). Once only, and said: the
    second attempt's result carries `retried` (the first verdict, reason and stall, and where its
    artifacts were moved: CASE_OUT.attempt1), and a second failure stands. `run_once()` runs the
    case into case_out and returns its raw result (a mutant's before _mutant_verdict)."""
    res = run_once()
    final = _mutant_verdict(res) if case.mutant else res
    stall = res.get("host_stall") or {}
    if (final.get("verdict") not in FAILING or final.get("verdict") == "interrupted"
            or float(stall.get("late_ms", 0) or 0) < runlib.HOST_STALL_MS):
        return res
    first_out = case_out + ".attempt1"
    shutil.rmtree(first_out, ignore_errors=True)
    if os.path.isdir(case_out):
        os.rename(case_out, first_out)
    if console is not None:
        print(f"=== {case.name}: {final['verdict'].upper()} while the reference "
              f"{stall.get('role', '?')} on {stall.get('node', '?')} read a frame "
              f"{float(stall['late_ms']):.0f} ms late (a host stall): running it once more; "
              f"the first attempt is in {first_out}", file=console, flush=True)
    second = run_once()
    second["retried"] = {"first_verdict": final.get("verdict"),
                         "first_reason": final.get("reason", ""), "host_stall": stall,
                         "first_artifacts": first_out}
    return second


def load_duts(opts: SuiteOptions) -> dict:
    """DUT profile path -> Dut ("" -> the reference); two DUTs may not share a name."""
    paths = dut_paths(opts)
    if len(set(paths)) != len(paths):
        raise runlib.UsageError("--dut: a DUT profile is given twice")
    duts = {p: (dutlib.load(p) if p else dutlib.REFERENCE) for p in paths}
    names = [d.name for d in duts.values()]
    if len(set(names)) != len(names):
        raise runlib.UsageError("--dut: two DUT profiles have the same name: "
                                + ", ".join(sorted(names)))
    return duts


def plan(opts: SuiteOptions) -> tuple[list[Case], list[Case], dict]:
    """(the whole matrix, this shard's cases, the DUTs)."""
    duts = load_duts(opts)
    full = matrix(opts, collect(opts), {p: d.name for p, d in duts.items()})
    return full, shard_of(full, opts.shard), duts


def run_suite(opts: SuiteOptions) -> tuple[list[dict], str]:
    runlib.require_root()
    full, cases, duts = plan(opts)
    dut_label = ", ".join(d.name for d in duts.values())
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
    share = f" (shard {opts.shard[0]}/{opts.shard[1]} of {len(full)})" if opts.shard else ""
    print(f"suite {name}: {len(cases)} case(s){share} against {dut_label}; mrct {opts.mrct}; "
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
            return run_with_stall_retry(case, case_out,
                                        lambda: _run_subprocess(case, case_out, opts))
        ropts = runlib.RunOptions(out_dir=case_out, seed=case.seed, mrct=opts.mrct,
                                  dut=duts[case.dut_path],
                                  mutant=case.mutant, reference=opts.reference,
                                  reference_cache=cache, progress=opts.progress,
                                  console=console, keep_captures=opts.keep_captures)
        return run_with_stall_retry(case, case_out,
                                    lambda: runlib.run_scenario(case.scenario, ropts), console)

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
    doc = {"schema": SUITE_SCHEMA, "name": name, "dut": dut_label, "wall_s": round(wall, 2),
           "counts": reportlib.suite_counts(results), "mutants": opts.mutants,
           "matrix": [c.name for c in full],
           "results": [{k: v for k, v in r.items() if k not in ("endpoints",)}
                       for r in results]}
    if opts.shard:
        doc["shard"] = {"index": opts.shard[0], "count": opts.shard[1]}
    write_reports(doc, out, opts.summary_file)
    return results, out


def write_reports(doc: dict, out: str, summary_file: str = "") -> None:
    """suite.json, suite.xml and suite.md from a suite document; each file is written whole
    (temporary file, then rename) or not at all."""
    results, name, wall = doc["results"], doc["name"], doc["wall_s"]
    agg = reportlib.fault_free_retirements(results)
    doc["fault_free_ev_retirements"] = agg
    md = reportlib.suite_markdown(results, name, doc["dut"], wall)
    texts = {"suite.json": json.dumps(doc, indent=2, default=str),
             "suite.xml": reportlib.suite_junit(results, name), "suite.md": md}
    for fname, text in texts.items():
        tmp = os.path.join(out, fname + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, fname))
    if summary_file:
        with open(summary_file, "a") as f:
            f.write(md + "\n")
    print("\n" + reportlib.suite_matrix(results), flush=True)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(doc["counts"].items()))
    print(f"\n{len(results)} case(s): {counts}; wall time {wall:.1f} s", flush=True)
    if agg is not None:
        print(reportlib.fault_free_line(agg), flush=True)
    print(f"artifacts: {out} (suite.md, suite.xml, suite.json)", flush=True)


class MergeError(Exception):
    """A shard directory that cannot be merged (exit 2); the message names the file and field."""


def merge_shards(dirs: list[str]) -> dict:
    """The suite document of the unsharded run from the N shards' suite.json: same matrix, same
    name, DUTs and mode in every shard, each index 1..N exactly once, each matrix case exactly
    once. Results in matrix order; wall_s is the longest shard's (they ran side by side)."""
    docs = []
    for d in dirs:
        path = os.path.join(d, "suite.json")
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as err:
            raise MergeError(f"{path}: cannot read: {err.strerror}") from None
        except json.JSONDecodeError as err:
            raise MergeError(f"{path}: line {err.lineno}: not JSON: {err.msg}") from None
        if not isinstance(doc, dict) or doc.get("schema") != SUITE_SCHEMA:
            raise MergeError(f"{path}: schema: expected {SUITE_SCHEMA!r}")
        for key, kind in (("name", str), ("dut", str), ("matrix", list), ("results", list),
                          ("shard", dict), ("wall_s", (int, float))):
            if not isinstance(doc.get(key), kind):
                raise MergeError(f"{path}: {key}: missing or not a "
                                 f"{getattr(kind, '__name__', 'number')}"
                                 + (" (not a shard: run with --shard I/N)"
                                    if key == "shard" else ""))
        sh = doc["shard"]
        if not (isinstance(sh.get("index"), int) and isinstance(sh.get("count"), int)
                and 1 <= sh["index"] <= sh["count"]):
            raise MergeError(f"{path}: shard: expected index and count with "
                             f"1 <= index <= count, got {sh!r}")
        docs.append((path, doc))
    if not docs:
        raise MergeError("no shard directories given")
    first_path, first = docs[0]
    n = first["shard"]["count"]
    for path, doc in docs[1:]:
        for key in ("name", "dut", "mutants", "matrix"):
            if doc.get(key) != first.get(key):
                raise MergeError(f"{path}: {key}: differs from {first_path} (shards of one "
                                 "suite run the same library, DUTs and seeds)")
        if doc["shard"]["count"] != n:
            raise MergeError(f"{path}: shard.count: {doc['shard']['count']}, but "
                             f"{first_path} has {n}")
    seen: dict = {}
    for path, doc in docs:
        i = doc["shard"]["index"]
        if i in seen:
            raise MergeError(f"{path}: shard.index: {i} again (also {seen[i]})")
        seen[i] = path
    missing = sorted(set(range(1, n + 1)) - set(seen))
    if missing:
        raise MergeError(f"shard(s) {', '.join(f'{i}/{n}' for i in missing)} missing: "
                         f"{len(docs)} of {n} given")
    by_name: dict = {}
    for path, doc in docs:
        for k, r in enumerate(doc["results"]):
            name = r.get("scenario") if isinstance(r, dict) else None
            if name not in first["matrix"]:
                raise MergeError(f"{path}: results[{k}].scenario: {name!r} is not in the matrix")
            if name in by_name:
                raise MergeError(f"{path}: results[{k}].scenario: {name!r} also in "
                                 f"{by_name[name][0]}")
            by_name[name] = (path, r)
    absent = [m for m in first["matrix"] if m not in by_name]
    if absent:
        raise MergeError(f"{len(absent)} case(s) of the matrix in no shard: "
                         + ", ".join(absent[:5]) + (" ..." if len(absent) > 5 else ""))
    results = [by_name[m][1] for m in first["matrix"]]
    out = {"schema": SUITE_SCHEMA, "name": first["name"], "dut": first["dut"],
           "wall_s": max(doc["wall_s"] for _, doc in docs),
           "counts": reportlib.suite_counts(results), "mutants": first.get("mutants", False),
           "matrix": first["matrix"], "results": results}
    return out


# What may differ between two runs of the same matrix whose reports are "identical": the times
# (wall_s, each result's timings, JUnit time attributes, the Markdown time column and wall time),
# the artifacts directory each run wrote into (each result's paths below it), and the buffer
# addresses a script's frame dumps print (va=0x..., heap addresses of the engine target's
# process: they change with address-space randomisation from one run of a case to the next).
def normalise_json(doc: dict, out_dirs: list) -> dict:
    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k not in ("wall_s", "timings")}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, str):
            return _unprefix(x, out_dirs)
        return x
    return walk(doc)


def normalise_text(text: str, out_dirs: list) -> str:
    text = re.sub(r'time="[0-9.]+"', 'time=""', _unprefix(text, out_dirs))
    text = re.sub(r"wall time [0-9.]+ s", "wall time - s", text)
    return re.sub(r"^(\| [^\n]*? \| [^|\n]* \| )[0-9.]+( \|)", r"\1-\2", text, flags=re.M)


def _unprefix(s: str, out_dirs: list) -> str:
    # Each run writes below its own directory (suite/<case>/..., shard-1/<case>/...): the
    # merged report's results point into the shards' directories.
    for d in out_dirs:
        s = s.replace(os.path.abspath(d).rstrip("/") + "/", "<out>/")
    return re.sub(r"\bva=0x[0-9a-f]+", "va=0x-", s)


def _run_subprocess(case: Case, case_out: str, opts: SuiteOptions) -> dict:
    argv = [sys.executable, "-m", "mrctb", "run", case.path, "--out", case_out, "--quiet"]
    if case.seed is not None:
        argv += ["--seed", str(case.seed)]
    if opts.mrct:
        argv += ["--mrct", opts.mrct]
    if case.dut_path:
        argv += ["--dut", case.dut_path]
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
    # An EV retired in any fault-free run fails the suite, even where the scenario itself does
    # not say ev_retired_max = 0 (a user's library).
    agg = reportlib.fault_free_retirements(results)
    if agg is not None and agg["status"] == "fail":
        return 1
    return 1 if any(r["verdict"] in bad for r in results) else 0

"""`mrct suite --shard I/N`, `--seeds`, repeated `--dut`, and `mrct suite merge`.

The matrix and the merge's checks need no root. ShardedRun runs the ci-fast conformance scripts
once whole and once in three shards, merges the shards, and compares the reports (root and an
mrct binary: `MRCT=build/<dir>/bin/mrct`; skipped otherwise).
"""

import json
import os
import shutil
import subprocess
import unittest

import _util
from mrctb import report as reportlib
from mrctb import run as runlib
from mrctb import suite as suitelib
from mrctb import tools

REPO = os.path.dirname(_util.TESTBED_DIR)
SCENARIOS = os.path.join(REPO, "scenarios")
REFERENCE_DUT = os.path.join(REPO, "ci", "dut", "reference.toml")


def _opts(**kw):
    return suitelib.SuiteOptions(paths=[SCENARIOS], **kw)


class Matrix(unittest.TestCase):
    def test_seeds_and_shards(self):
        self.assertEqual(suitelib.parse_seeds("1,3,5-7"), [1, 3, 5, 6, 7])
        for bad in ("", "a", "3-1", "1,1", "1-"):
            with self.assertRaises(runlib.UsageError, msg=bad):
                suitelib.parse_seeds(bad)
        self.assertEqual(suitelib.parse_shard("2/4"), (2, 4))
        for bad in ("0/4", "5/4", "1", "1/0", "x/y"):
            with self.assertRaises(runlib.UsageError, msg=bad):
                suitelib.parse_shard(bad)

    def test_matrix_is_scenario_x_dut_x_seed(self):
        plain, _, _ = suitelib.plan(_opts())
        scen = [c for c in plain if c.script is None]
        scripts = [c for c in plain if c.script is not None]
        full, _, duts = suitelib.plan(_opts(seeds=[1, 2, 3], dut_paths=["", REFERENCE_DUT]))
        self.assertEqual(len(duts), 2)
        # Scripts take no seed: once per DUT (a DUT plays them through its script mode).
        self.assertEqual(len(full), 6 * len(scen) + 2 * len(scripts))
        names = [c.name for c in full]
        self.assertEqual(len(set(names)), len(names))
        first = scen[0].name
        ref_name = duts[REFERENCE_DUT].name
        self.assertEqual(names[:6], [f"{first}@reference@s1", f"{first}@reference@s2",
                                     f"{first}@reference@s3", f"{first}@{ref_name}@s1",
                                     f"{first}@{ref_name}@s2", f"{first}@{ref_name}@s3"])
        self.assertEqual([c.seed for c in full[:3]], [1, 2, 3])

    def test_two_duts_with_one_name_are_refused(self):
        with self.assertRaises(runlib.UsageError):
            suitelib.plan(_opts(dut_paths=[REFERENCE_DUT, REFERENCE_DUT]))

    def test_shards_partition_the_matrix_deterministically(self):
        full, _, _ = suitelib.plan(_opts(seeds=[1, 2]))
        names = [c.name for c in full]
        for n in (1, 2, 3, 7, len(full) + 2):
            shards = [[c.name for c in suitelib.shard_of(full, (i, n))] for i in range(1, n + 1)]
            flat = [x for s in shards for x in s]
            self.assertEqual(sorted(flat), sorted(names), n)  # every case in exactly one shard
            self.assertEqual(len(flat), len(set(flat)))
            self.assertLessEqual(max(map(len, shards)) - min(map(len, shards)), 1)
        # plan() with --shard: the same share, run after run.
        again = [c.name for c in suitelib.plan(_opts(seeds=[1, 2], shard=(2, 3)))[1]]
        self.assertEqual(again, [c.name for c in suitelib.shard_of(full, (2, 3))])


def _result(name, verdict="pass", t=1.0, out="/x"):
    return {"schema": runlib.RESULT_SCHEMA, "scenario": name, "verdict": verdict,
            "reason": "" if verdict == "pass" else "it broke", "tags": ["t"],
            "timings": {"total_s": t}, "expectations": [], "artifacts": f"{out}/{name}"}


def _doc(results, matrix, shard=None, wall=3.0):
    doc = {"schema": suitelib.SUITE_SCHEMA, "name": "lib", "dut": "reference", "wall_s": wall,
           "counts": reportlib.suite_counts(results), "mutants": False, "matrix": matrix,
           "results": results}
    if shard:
        doc["shard"] = {"index": shard[0], "count": shard[1]}
    return doc


class FaultFreeRetirements(unittest.TestCase):
    """The suite's count of EV retirements over every fault-free run, all seeds (issue 17)."""

    @staticmethod
    def _run(name, seed, retired, fault_free=True, verdict="pass", mutant=""):
        r = _result(f"{name}@s{seed}", verdict)
        r.update(file=f"/lib/{name}.toml", seed=seed, fault_free=fault_free,
                 ev_retired=retired, mutant=mutant)
        return r

    def test_one_retirement_in_one_seed_fails_the_suite(self):
        clean = [self._run(n, s, 0) for n in ("a", "b") for s in (1, 2, 3)]
        # Faulted scenarios retire EVs on purpose; mutants are meant to misbehave.
        others = [self._run("flap", 1, 9, fault_free=False), self._run("a", 1, 4, mutant="m")]
        agg = reportlib.fault_free_retirements(clean + others)
        self.assertEqual((agg["status"], agg["total"], agg["runs"], agg["scenarios"]),
                         ("pass", 0, 6, 2))
        self.assertEqual(agg["seeds"], [1, 2, 3])
        self.assertEqual(suitelib.exit_code(clean + others, False), 0)
        # Seed 2 of b retires one EV and its own expectations let it pass (a scenario of a
        # user's library without ev_retired_max): the suite fails all the same.
        bad = list(clean)
        bad[4] = self._run("b", 2, 1)
        agg = reportlib.fault_free_retirements(bad + others)
        self.assertEqual((agg["status"], agg["total"]), ("fail", 1))
        self.assertEqual(agg["retiring"], [{"scenario": "b@s2", "seed": 2, "retired": 1}])
        self.assertEqual(suitelib.exit_code(bad + others, False), 1)
        line = reportlib.fault_free_line(agg)
        self.assertIn("fault-free EV retirements: 1 in 6 of 6 run(s) (2 scenario(s), "
                      "seeds 1, 2, 3), expected 0: FAIL; retired in b@s2 (seed 2): 1", line)
        with _util.TempDir() as d:
            suitelib.write_reports(_doc(bad + others, [r["scenario"] for r in bad + others]), d)
            with open(os.path.join(d, "suite.md")) as f:
                self.assertIn(line, f.read())
            with open(os.path.join(d, "suite.json")) as f:
                self.assertEqual(json.load(f)["fault_free_ev_retirements"]["total"], 1)

    def test_runs_that_report_nothing_are_named_not_counted_as_zero(self):
        runs = [self._run("a", 1, None, verdict="error"), self._run("a", 2, 0)]
        agg = reportlib.fault_free_retirements(runs)
        self.assertEqual((agg["status"], agg["reported"], agg["not_reported"]),
                         ("pass", 1, ["a@s1"]))
        agg = reportlib.fault_free_retirements(runs[:1])
        self.assertEqual(agg["status"], "not-run")
        self.assertIsNone(reportlib.fault_free_retirements([_result("x")]))


class Merge(unittest.TestCase):
    """merge_shards() on hand-made shard documents."""

    MATRIX = ["a", "b", "c", "d", "e"]

    def _shards(self, d, n=2, drop=None, dup=None):
        dirs = []
        for i in range(1, n + 1):
            out = os.path.join(d, f"shard-{i}")
            os.makedirs(out)
            res = [_result(m, "fail" if m == "c" else "pass", 0.5 * k, out)
                   for k, m in enumerate(self.MATRIX) if k % n == i - 1 and m != drop]
            if dup and i == 1:
                res.append(_result(dup, out=out))
            with open(os.path.join(out, "suite.json"), "w") as f:
                json.dump(_doc(res, self.MATRIX, (i, n), wall=i), f)
            dirs.append(out)
        return dirs

    def test_merge_equals_the_unsharded_report(self):
        with _util.TempDir() as d:
            whole = os.path.join(d, "whole")
            os.makedirs(whole)
            res = [_result(m, "fail" if m == "c" else "pass", 9.0, whole) for m in self.MATRIX]
            suitelib.write_reports(_doc(res, self.MATRIX, wall=40.0), whole)
            dirs = self._shards(d, 3)
            merged = os.path.join(d, "merged")
            proc = _util.run_cli("suite", "merge", *dirs, "--out", merged)
            self.assertEqual(proc.returncode, 1, proc.stderr)  # "c" failed: as mrct suite
            with open(os.path.join(merged, "suite.json")) as f:
                doc = json.load(f)
            self.assertEqual([r["scenario"] for r in doc["results"]], self.MATRIX)
            self.assertEqual(doc["wall_s"], 3)
            self.assertNotIn("shard", doc)
            _assert_same_reports(self, whole, [whole], merged, dirs)

    def test_merge_refuses_what_does_not_add_up(self):
        with _util.TempDir() as d:
            cases = {"missing shard": (self._shards(os.path.join(d, "m"), 3)[:2],
                                       "shard(s) 3/3 missing"),
                     "shard twice": (self._shards(os.path.join(d, "t"), 2)[:1] * 2,
                                     "shard.index: 1 again"),
                     "case in no shard": (self._shards(os.path.join(d, "n"), 2, drop="b"),
                                          "in no shard: b"),
                     "case twice": (self._shards(os.path.join(d, "w"), 2, dup="b"),
                                    "'b' also in")}
            for what, (dirs, msg) in cases.items():
                proc = _util.run_cli("suite", "merge", *dirs, "--out", os.path.join(d, "o"))
                self.assertEqual(proc.returncode, 2, what)
                self.assertIn(msg, proc.stderr, what)
                self.assertFalse(os.path.exists(os.path.join(d, "o", "suite.json")), what)
            # Shards of another run (other matrix), and a run that was not sharded.
            other = self._shards(os.path.join(d, "x"), 2)
            with open(os.path.join(other[1], "suite.json")) as f:
                doc = json.load(f)
            doc["matrix"] = doc["matrix"][:-1]
            with open(os.path.join(other[1], "suite.json"), "w") as f:
                json.dump(doc, f)
            proc = _util.run_cli("suite", "merge", *other, "--out", os.path.join(d, "o"))
            self.assertEqual(proc.returncode, 2)
            self.assertIn("shard-2/suite.json: matrix: differs", proc.stderr)
            del doc["shard"]
            with open(os.path.join(other[1], "suite.json"), "w") as f:
                json.dump(doc, f)
            proc = _util.run_cli("suite", "merge", other[1], "--out", os.path.join(d, "o"))
            self.assertEqual(proc.returncode, 2)
            self.assertIn("shard: missing", proc.stderr)
            with open(os.path.join(other[1], "suite.json"), "w") as f:
                f.write("{\n  nope")
            proc = _util.run_cli("suite", "merge", other[1], "--out", os.path.join(d, "o"))
            self.assertEqual(proc.returncode, 2)
            self.assertIn("suite.json: line 2: not JSON", proc.stderr)


def _assert_same_reports(test, a, a_dirs, b, b_dirs):
    """The reports in a and b are identical but for timings and artifact directories."""
    with open(os.path.join(a, "suite.json")) as f:
        ja = suitelib.normalise_json(json.load(f), a_dirs)
    with open(os.path.join(b, "suite.json")) as f:
        jb = suitelib.normalise_json(json.load(f), b_dirs)
    test.assertEqual(ja, jb)
    for name in ("suite.xml", "suite.md"):
        with open(os.path.join(a, name)) as f:
            ta = suitelib.normalise_text(f.read(), a_dirs)
        with open(os.path.join(b, name)) as f:
            tb = suitelib.normalise_text(f.read(), b_dirs)
        test.assertEqual(ta, tb, name)


def _mrct():
    try:
        return tools.find(os.environ.get("MRCT"), ("script",)).path
    except tools.ToolError:
        return None


@unittest.skipIf(os.geteuid() != 0, "mrct suite needs root")
class ShardedRun(unittest.TestCase):
    def test_three_shards_merged_equal_the_whole_run(self):
        mrct = _mrct()
        if mrct is None:
            self.skipTest("no mrct binary with the script subcommand (set MRCT)")
        scripts = os.path.join(SCENARIOS, "scripts")
        with _util.TempDir() as d:
            def suite(out, *extra):
                proc = _util.run_cli("suite", scripts, "--tag", "ci-fast", "--mrct", mrct,
                                     "--out", out, "--name", "scripts", "-q", *extra,
                                     timeout=600)
                self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
                return proc.returncode
            whole = os.path.join(d, "whole")
            rc = suite(whole)
            dirs = [os.path.join(d, f"shard-{i}") for i in (1, 2, 3)]
            for i, out in enumerate(dirs, 1):
                suite(out, "--shard", f"{i}/3")
            merged = os.path.join(d, "merged")
            proc = _util.run_cli("suite", "merge", *dirs, "--out", merged)
            self.assertEqual(proc.returncode, rc, proc.stderr)
            with open(os.path.join(whole, "suite.json")) as f:
                self.assertGreater(len(json.load(f)["results"]), 3)
            _assert_same_reports(self, whole, [whole], merged, dirs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

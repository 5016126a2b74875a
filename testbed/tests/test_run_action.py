"""ci/local-action.sh (the steps of the vendor action) on a tiny suite (root).

Run: MRCT=build/<dir>/bin/mrct /usr/bin/python3 testbed/tests/run_root.py test_run_action
"""

import json
import os
import subprocess
import unittest
import xml.etree.ElementTree as ET

import _util
from mrctb import report as reportlib
from mrctb import tools

REPO = os.path.dirname(_util.TESTBED_DIR)


def _mrct():
    try:
        return tools.find(os.environ.get("MRCT"), ("endpoint",)).path
    except tools.ToolError:
        return None


@_util.requires_root
class LocalAction(unittest.TestCase):
    def test_tiny_suite_through_the_action_steps(self):
        mrct = _mrct()
        if mrct is None:
            self.skipTest("no mrct binary with the endpoint subcommand")
        with _util.TempDir() as d:
            summary = os.path.join(d, "step-summary.md")
            env = dict(os.environ, MRC_ACTION_INSTALL="0", MRC_ACTION_MRCT=mrct,
                       MRC_ACTION_TAGS="", MRC_ACTION_FILTER="^baseline-srv6$",
                       MRC_ACTION_DUT=os.path.join(REPO, "ci", "dut", "reference.toml"),
                       MRC_ACTION_OUT=os.path.join(d, "artifacts"),
                       MRC_ACTION_SUMMARY=summary)
            # The API suite on the build's reference library (loopback device: no wire).
            api_lib = os.path.join(os.path.dirname(os.path.dirname(mrct)), "lib", "lib_mrc.so")
            if os.path.exists(api_lib):
                env.update(MRC_ACTION_API_LIB=api_lib, MRC_ACTION_API_ENV="MRC_SOFT_IO=loopback")
            env.pop("GITHUB_STEP_SUMMARY", None)
            proc = subprocess.run(["bash", os.path.join(REPO, "ci", "local-action.sh")],
                                  env=env, capture_output=True, text=True, timeout=600, cwd=d)
            out = os.path.join(d, "artifacts", "suite")
            root = ET.parse(os.path.join(out, "suite.xml")).getroot()
            self.assertEqual(root.get("tests"), "1")
            with open(summary) as f:
                text = f.read()
            self.assertIn("| baseline-srv6 |", text)
            self.assertIn("reference-as-dut", text)
            self.assertIn(f"artifacts: {os.path.join(d, 'artifacts')}", proc.stdout)
            failed = int(root.get("failures")) + int(root.get("errors"))
            # The action's exit code is the suite's: 0 exactly when nothing failed. (Whether
            # the scenario passes is the suite's business, judged in its own reports; this
            # test is about the action's steps.)
            self.assertEqual(proc.returncode, 1 if failed else 0, proc.stdout + proc.stderr)
            with open(os.path.join(out, "suite.json")) as f:
                verdict = json.load(f)["results"][0]["verdict"]
            self.assertIn(f"| baseline-srv6 | {reportlib.STATUS_MARK[verdict]} |", text)
            self.assertTrue(os.path.isdir(os.path.join(out, "baseline-srv6", "captures")))
            if os.path.exists(api_lib):
                api = os.path.join(d, "artifacts", "api")
                for name in ("api-suite.json", "api-suite.xml", "api-suite.md"):
                    self.assertTrue(os.path.exists(os.path.join(api, name)), name)
                self.assertIn("# MRC API conformance", text)
                with open(os.path.join(api, "api-suite.json")) as f:
                    self.assertTrue(json.load(f)["tests"])


if __name__ == "__main__":
    unittest.main()

"""Root tests: teardown leaves no process, namespace or interface behind, whatever happens."""

import json
import os
import signal
import subprocess
import time
import unittest
from unittest import mock

import _util
from _util import requires_root
from mrctb import config, plan as planlib, procs

if _util.root_skip_reason() is None:
    from mrctb import fabric


def start_up_process(*args):
    proc = subprocess.Popen([_util.PYTHON, "-m", "mrctb", "up"] + list(args),
                            cwd=_util.TESTBED_DIR, env=_util.traffic_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def read_json_line(proc, key, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"builder exited early: {proc.stderr.read()}")
        if line.startswith("{") and key in line:
            return json.loads(line)
    raise AssertionError(f"no {key} line within {timeout_s} s")


@requires_root
class CleanupTest(unittest.TestCase):
    def assert_nothing_left(self, namespaces, plan):
        self.assertTrue(namespaces)
        deadline = time.monotonic() + 3
        while procs.pids_in_netns(namespaces) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = procs.pids_in_netns(namespaces)
        self.assertEqual(left, [], [procs.cmdline(p) for p in left])
        self.assertEqual(set(plan.ifnames()) & procs.root_ifnames(), set())

    def test_normal_exit(self):
        p = planlib.clos(2, 2, 2, 2)
        with _util.TempDir() as d:
            with fabric.Fabric(p, "srv6", workdir=d) as fab:
                namespaces = fab.namespaces()
                self.assertEqual(len(namespaces), len(p.nodes()))
                cap = fab.capture("p1t1s0-d1")
                state = procs.state_path(os.getpid())
                self.assertTrue(os.path.exists(state))
            self.assertEqual(fab.cleanup_report["leftovers"], {"pids": [], "root_interfaces": []})
            self.assertFalse(procs.alive(cap.proc.pid))
            self.assertFalse(os.path.exists(state))
            self.assertTrue(os.path.exists(cap.path))
        self.assert_nothing_left(namespaces, p)

    def test_mininet_link_deletion_path(self):
        # delete_links=True: Mininet's own Link.stop() removes every veth one by one.
        p = planlib.single_router(2)
        with _util.TempDir() as d:
            with fabric.Fabric(p, "srv6", workdir=d, delete_links=True) as fab:
                namespaces = fab.namespaces()
                self.assertTrue(fab.ping("h1", "fd00:101:2::2", dev="h1-p2"))
        self.assertEqual(fab.cleanup_report["leftovers"], {"pids": [], "root_interfaces": []})
        self.assert_nothing_left(namespaces, p)

    def test_exception_kills_strays(self):
        p = planlib.single_router(2)
        with _util.TempDir() as d:
            with self.assertRaisesRegex(RuntimeError, "boom"):
                with fabric.Fabric(p, "ecmp", workdir=d) as fab:
                    namespaces = fab.namespaces()
                    fab.capture("h1-p2")
                    tracked = fab.popen("h2", ["sleep", "1000"])
                    # Started behind the fabric's back, in its own session: must go too.
                    stray = subprocess.Popen(["mnexec", "-da", str(fab.pid("p2r0")), "sleep",
                                              "1001"], stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    raise RuntimeError("boom")
            stray.wait(timeout=5)
            self.assertIsNotNone(tracked.poll())
        self.assertEqual(fab.cleanup_report["leftovers"], {"pids": [], "root_interfaces": []})
        self.assert_nothing_left(namespaces, p)

    def test_failed_build_cleans_up(self):
        real = config.all_configs

        def broken(plan, mode):
            configs = real(plan, mode)
            configs["p1r0"].batch.append("link set dev no-such-port up")
            return configs

        p = planlib.single_router(1)
        with _util.TempDir() as d:
            fab = fabric.Fabric(p, "srv6", workdir=d)
            with mock.patch.object(config, "all_configs", broken):
                with self.assertRaisesRegex(fabric.FabricError, "p1r0: rc=1"):
                    fab.start()
        self.assertEqual(fab.cleanup_report["leftovers"], {"pids": [], "root_interfaces": []})
        self.assert_nothing_left(fab.namespaces(), p)

    def _signal_running_builder(self, sig, expected_rc):
        p = planlib.clos(2, 2, 2, 2)
        with _util.TempDir() as d:
            proc = start_up_process("--shape", "clos", "--planes", "2", "--workdir", d)
            try:
                info = read_json_line(proc, "timings")
                namespaces = {procs.netns_of(pid) for pid in info["pids"].values()}
                self.assertNotIn(None, namespaces)
                proc.send_signal(sig)
                out, err = proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
            self.assertEqual(proc.returncode, expected_rc, err)
            self.assertNotIn("Traceback", err)
            report = json.loads(out.strip().splitlines()[-1])["cleanup"]
            self.assertEqual(report["leftovers"], {"pids": [], "root_interfaces": []})
            self.assertFalse(os.path.exists(procs.state_path(proc.pid)))
        self.assert_nothing_left(namespaces, p)

    def test_sigterm(self):
        self._signal_running_builder(signal.SIGTERM, 128 + signal.SIGTERM)

    def test_sigint(self):
        self._signal_running_builder(signal.SIGINT, 130)

    def test_signal_during_build(self):
        # SIGTERM while nodes are still being created: the builder's own verification covers
        # every namespace it recorded, and its state file only disappears if that passed.
        with _util.TempDir() as d:
            proc = start_up_process("--shape", "clos", "--planes", "8", "--t0", "4", "--t1", "2",
                                    "--hosts-per-t0", "8", "--workdir", d)
            state = procs.state_path(proc.pid)
            namespaces = set()
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    try:
                        with open(state) as f:
                            namespaces = set(json.load(f)["namespaces"])
                    except (OSError, ValueError):
                        namespaces = set()
                    if len(namespaces) >= 5:
                        break
                    time.sleep(0.01)
                self.assertGreaterEqual(len(namespaces), 5)
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
            self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
            self.assertFalse(os.path.exists(state), "builder reported leftovers")
        self.assert_nothing_left(namespaces, planlib.clos(8, 4, 2, 8))

    def test_cleanup_stale_after_sigkill(self):
        p = planlib.back_to_back(2)
        with _util.TempDir() as d:
            proc = start_up_process("--shape", "back_to_back", "--planes", "2", "--workdir", d)
            orphan = None
            try:
                info = read_json_line(proc, "timings")
                namespaces = {procs.netns_of(pid) for pid in info["pids"].values()}
                # A detached process keeps a namespace alive after its builder dies.
                orphan = subprocess.Popen(["mnexec", "-da", str(info["pids"]["h1"]), "sleep",
                                           "1002"], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.2)
                proc.kill()
                proc.communicate(timeout=10)
                self.assertTrue(os.path.exists(procs.state_path(proc.pid)))
                # The node shells exit on their own once the pty closes; the orphan stays.
                deadline = time.monotonic() + 5
                while (procs.pids_in_netns(namespaces) != [orphan.pid]
                       and time.monotonic() < deadline):
                    time.sleep(0.05)
                self.assertEqual(procs.pids_in_netns(namespaces), [orphan.pid])
                result = _util.run_cli("cleanup-stale")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertGreaterEqual(json.loads(result.stdout)["killed"], 1)
                orphan.wait(timeout=5)
            finally:
                if proc.poll() is None:
                    proc.kill()
                if orphan is not None and orphan.poll() is None:
                    orphan.kill()
                    orphan.wait()
        self.assertFalse(os.path.exists(procs.state_path(proc.pid)))
        self.assert_nothing_left(namespaces, p)


if __name__ == "__main__":
    unittest.main()

"""Shared helpers for the testbed tests (imported first so that `mrctb` is importable)."""

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TESTBED_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTBED_DIR not in sys.path:
    sys.path.insert(0, TESTBED_DIR)

PYTHON = "/usr/bin/python3"


def root_skip_reason():
    """Why root-only tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    try:
        importlib.import_module("mininet.net")
    except ImportError:
        return f"mininet not importable by {sys.executable} (use Debian's {PYTHON})"
    for tool in ("mnexec", "ip", "tcpdump", "ethtool", "ping"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    return None


def requires_root(cls):
    reason = root_skip_reason()
    return unittest.skip(reason)(cls) if reason else cls


def traffic_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = TESTBED_DIR
    return env


def run_cli(*args, timeout=60):
    return subprocess.run([PYTHON, "-m", "mrctb"] + list(args), cwd=TESTBED_DIR,
                          capture_output=True, text=True, timeout=timeout, env=traffic_env())


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="mrctb-test-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def start_receiver(fab, host, port, count, timeout_s=5.0, bind="::"):
    """Starts a UDP receiver in `host` and waits until it is bound."""
    proc = fab.traffic(host, ["recv", "--bind", bind, "--port", str(port), "--count", str(count),
                              "--timeout", str(timeout_s)])
    line = proc.stdout.readline().decode().strip()
    if line != "READY":
        err = proc.stderr.read().decode()
        raise AssertionError(f"receiver on {host} did not start: {line!r} {err}")
    return proc


def collect(proc, timeout_s=15.0):
    out, err = proc.communicate(timeout=timeout_s)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    datagrams = [d for d in lines if "payload" in d]
    return datagrams, err.decode()


def send_srv6(fab, host, specs, errors=None):
    """Sends hand-built SRv6 packets from `host`; returns how many left the socket. Send errors
    (no route at the source) are appended to `errors` if given, else they fail the call."""
    data = "".join(json.dumps(s) + "\n" for s in specs).encode()
    proc = fab.run(host, [PYTHON, "-m", "mrctb.traffic", "send-srv6"], input=data,
                   env=traffic_env(), timeout=60)
    result = json.loads(proc.stdout.decode().splitlines()[-1])
    if errors is None and result["errors"]:
        raise AssertionError(f"send errors on {host}: {result['errors']}")
    if errors is not None:
        errors.extend(result["errors"])
    return result["sent"]


def ev_specs(plan, src, dst, evs, dport=4791, tag=""):
    """One raw SRv6 packet spec per EV entry (as produced by Plan.ev_paths)."""
    specs = []
    for e in evs:
        specs.append({
            "outer_src": e["outer_src"], "outer_da": e["outer_da"],
            "inner_src": str(plan.host(src).gid), "inner_dst": str(plan.host(dst).gid),
            "sport": 49152 + e["ev"], "dport": dport, "flow_label": e["ev"],
            "payload": f"{tag}{src}>{dst} ev={e['ev']} da={e['outer_da']}",
        })
    return specs

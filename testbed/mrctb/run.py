"""`mrct run SCENARIO`: one scenario file in, a verdict and an artifacts directory out.

Steps: build the fabric (plan -> namespaces), add the control network, splice fault injector
relays into the impaired links, start the captures and the injector, start the servers
(responders) and clients (requesters) in their host namespaces, drive the fault schedule while
the transfer runs, stop everything and tear the fabric down, then judge: the conformance checker
over the captures and the injector's decision log, and the scenario's expectations (transfer
completes, data verified, goodput against the same scenario without faults, stalls, QP errors,
...). Every step that could not run is reported as not-run, never as passed.

Artifacts (one directory per run):
  result.json        everything below in one object (schema mrctb-run/1)
  manifest.json      the artifacts below that exist, by kind, relative paths (schema
                     mrctb-manifest/1): what `mrct view RUN_DIR` opens
  summary.md         one page: verdict, expectations, endpoints, faults, checker, plot
  goodput.svg        delivered data per path over time (responder side)
  run.log            what the runner did, with times
  plan.json, paths.json, scenario.toml   the fabric and the input
  endpoints/<node>-<role>.{stdout,stderr,json,events.jsonl}
  captures/*.pcap    one file per capture point, <node>-<iface>.pcap
  injector.json, decisions.jsonl, injector.stdout   the relay's config, decision log, summary
  faults.jsonl       every fault action as it happened (monotonic and wall clock)
  check/             checker inputs (dut-profile.json) and reports (JSON, JUnit, Markdown)
  reference/         the fault-free reference run (when a relative goodput SLO needs it)
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import re
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib

from . import dut as dutlib
from . import fabric as fabriclib
from . import physical
from . import plan as planlib
from . import procs
from . import report as reportlib
from . import scenario as sclib
from . import splice
from . import tools

RESULT_SCHEMA = "mrctb-run/1"
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
POLL_S = 0.002
BUILD_LOCK = os.path.join(procs.STATE_DIR, "build.lock")
SERVER_GRACE_S = 20.0
# Checker tolerances for emulated fabrics, under the scenario's own [expect.tolerances].
# Endpoints and switches here are processes and softirqs on a shared 2-core VM, not NICs and
# ASICs. Measured at load average 9: the reference responder answers every A/RTX packet, but
# its loop runs late (median 2.1 ms, p99 6.7 ms, max 8.0 ms at its own port), where the
# checker's T_ack_max (1 ms) assumes hardware; and a data packet took 20.008 ms from the
# requester's port to the responder's, just beyond the 20 ms window in which the checker
# recognises one packet seen at two capture points (it then judged the arrival a second
# transmission without RTX). Reports list the tolerances used.
# Checker tolerances for namespaces on a shared 2-core host: responders answer late (a loaded
# event loop), packets queue for tens of ms in relays, and a software endpoint takes SACKs off
# its per-port sockets in batches, so after a SKIP it may legitimately send on the marked EV
# once only one of the other EVs had its turn (MRC-EV-008).
# The same loop can also stall for tens of ms when a dozen processes share the two cores, so a
# SACK may come up to 100 ms late (MRC-RSP-009: a missing one still fails).
SOFTWARE_FABRIC_TOLERANCES = {"t_ack_max_ns": 100_000_000, "dedup_window_ns": 200_000_000,
                              "skip_rotation_fraction": 0.3}
# Measured: with the machine loaded, a NACK captured at the switch end reached the DUT's engine
# 2.98 ms later (trim-congestion, reference as DUT), so 2 ms made MRC-EV-008 fire on the
# reference.
LINK_SIDE_REACTION_NS = 4_000_000


class UsageError(Exception):
    """Bad input or environment: exit 2."""


@dataclasses.dataclass
class RunOptions:
    out_dir: str | None = None       # default artifacts/<scenario>/<timestamp>
    seed: int | None = None
    mrct: str | None = None
    dut: dutlib.Dut = dataclasses.field(default_factory=lambda: dutlib.REFERENCE)
    mutant: str = ""
    reference: bool = True           # run the fault-free reference when an SLO needs it
    reference_cache: dict | None = None  # fault_free_key -> reference result (suites)
    progress: bool = True
    console: object = None           # file for progress / messages (default stderr)
    check: bool = True
    is_reference: bool = False       # the fault-free reference of another run
    keep_captures: str = "all"       # all | failed (drop them when the run passed) | none


class Log:
    """run.log with monotonic offsets, echoed to the console."""

    def __init__(self, path: str | None, console, echo: bool = True, prefix: str = ""):
        self.t0 = time.monotonic()
        self.prefix = prefix
        self.f = open(path, "a") if path else None
        self.console = console
        self.echo = echo
        self._live = False

    def __call__(self, msg: str, echo: bool = True) -> None:
        line = f"[{time.monotonic() - self.t0:7.2f}] {self.prefix}{msg}"
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()
        if self.echo and echo:
            self.clear_live()
            print(line, file=self.console, flush=True)

    def live(self, text: str) -> None:
        if not self.echo:
            return
        if getattr(self.console, "isatty", lambda: False)():
            self.console.write("\r\033[K" + text)
            self.console.flush()
            self._live = True

    def clear_live(self) -> None:
        if self._live:
            self.console.write("\r\033[K")
            self.console.flush()
            self._live = False

    def close(self) -> None:
        self.clear_live()
        if self.f:
            self.f.close()
            self.f = None


# ------------------------------------------------------------------------------------------------
# namespace counters: /proc/<pid>/net/dev of a node shell, no subprocess per poll
# ------------------------------------------------------------------------------------------------
def netdev(pid: int) -> dict[str, tuple[int, int, int, int]]:
    """{ifname: (rx_bytes, rx_packets, tx_bytes, tx_packets)} of a process's namespace."""
    out = {}
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f.readlines()[2:]:
                name, _, rest = line.partition(":")
                v = rest.split()
                out[name.strip()] = (int(v[0]), int(v[1]), int(v[8]), int(v[9]))
    except (OSError, ValueError, IndexError):
        pass
    return out


class Monitor:
    """Bytes received on the responders' plane ports: the traffic start (t0), progress, and
    data_bytes triggers."""

    def __init__(self, fab: fabriclib.Fabric, servers: list[str], cabled: frozenset = frozenset()):
        self.fab = fab
        # (pid, interfaces, column of netdev()): a host's own ports, rx; a port on a physical
        # interface (`cabled`, physical.py) is counted at the router's end of the cable, tx.
        self.points = []
        for h in servers:
            ports = fab.plan.ports_of(h)
            self.points.append((fab.pid(h), [p.ifname for p in ports if p.ifname not in cabled],
                                0))
            for p in ports:
                if p.ifname in cabled:
                    self.points.append((fab.pid(p.peer.node), [p.peer.ifname], 2))
        self.base = self._total()
        self.bytes = 0
        self.t0_ns: int | None = None
        self.t0_wall_ns: int | None = None
        self._cand: tuple[int, int] | None = None
        self._prev = 0
        self.last = (time.monotonic_ns(), 0)
        self.rate_bps = 0.0

    def _total(self) -> int:
        total = 0
        for pid, ifs, col in self.points:
            dev = netdev(pid)
            total += sum(dev[i][col] for i in ifs if i in dev)
        return total

    def poll(self, now_ns: int) -> None:
        self.bytes = self._total() - self.base
        if self.t0_ns is None:
            # Hosts send the odd MLD report (~100 B) on their own; the transfer is the first
            # burst of 1000 B or more within 20 ms.
            if self._cand is not None and now_ns - self._cand[0] > 20_000_000:
                self._cand = None
            if self._cand is None and self.bytes > self._prev:
                self._cand = (now_ns, self._prev)
            if self._cand is not None and self.bytes - self._cand[1] >= 1000:
                self.t0_ns = self._cand[0]
                self.t0_wall_ns = time.time_ns() - (now_ns - self.t0_ns)
            self._prev = self.bytes
        t_last, b_last = self.last
        if now_ns - t_last >= 500_000_000:
            self.rate_bps = (self.bytes - b_last) * 8e9 / (now_ns - t_last)
            self.last = (now_ns, self.bytes)


# ------------------------------------------------------------------------------------------------
# fault schedule
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Item:
    fault: sclib.Fault
    k: int                  # repetition
    phase: str              # "start" | "end"
    due_ns: int | None = None
    done: bool = False


class Scheduler:
    """Time- and event-triggered fault actions, driven by tick() from the run loop."""

    def __init__(self, sc: sclib.Scenario, fab: fabriclib.Fabric, injector, log: Log,
                 record):
        self.sc, self.fab, self.injector, self.log, self.record = sc, fab, injector, log, record
        self.items: list[_Item] = []
        for f in sc.faults:
            for k in range(f.repeat):
                self.items.append(_Item(f, k, "start"))
                if f.for_ms is not None:
                    self.items.append(_Item(f, k, "end"))
        self.fired: dict[tuple[str, str], int] = {}  # (fault, phase of first rep) -> ns
        self.trigger_ns: dict[str, int] = {}
        self.errors: list[str] = []
        # One worker per fault: its actions run in order, and a slow action (a few `ip` calls
        # through mnexec) of one fault does not delay the others.
        self._queues: dict[str, queue.Queue] = {}
        self._threads: list[threading.Thread] = []
        self._executed = 0
        # Actions of different faults on the same node must not interleave (a link_up
        # re-applies the node's routes, computed from which of its ports are down).
        self._node_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        for f in sc.faults:  # workers exist before t0: no thread start on the clock
            self._worker(f.name)

    def pending(self) -> int:
        return sum(1 for i in self.items if not i.done)

    def _trigger_time(self, f: sclib.Fault, t0: int, data_bytes: int,
                      inj_counts: dict, now: int) -> int | None:
        if f.name in self.trigger_ns:
            return self.trigger_ns[f.name]
        tr = f.trigger
        at = None
        if tr.at_ms is not None:
            at = t0 + int(tr.at_ms * 1e6)
        elif tr.fault:
            key = (tr.fault, tr.edge)
            if key in self.fired:
                at = self.fired[key] + int(tr.delay_ms * 1e6)
        elif tr.data_bytes:
            if data_bytes >= tr.data_bytes:
                at = now + int(tr.delay_ms * 1e6)
        elif tr.injector:
            if inj_counts.get(tr.injector, 0) >= tr.count:
                at = now + int(tr.delay_ms * 1e6)
        if at is not None:
            self.trigger_ns[f.name] = at
        return at

    def tick(self, now: int, t0: int | None, data_bytes: int, inj_counts: dict) -> None:
        if t0 is None:
            return
        for item in self.items:
            if item.done:
                continue
            f = item.fault
            if item.phase == "start":
                base = self._trigger_time(f, t0, data_bytes, inj_counts, now)
                if base is None:
                    continue
                item.due_ns = base + int(item.k * (f.period_ms or 0) * 1e6)
            elif item.due_ns is None:
                continue  # set when its start ran
            if now < item.due_ns:
                continue
            item.done = True
            self._dispatch(item, t0)

    def _dispatch(self, item: _Item, t0: int) -> None:
        self._worker(item.fault.name).put((item, time.monotonic_ns(), t0))

    def _worker(self, name: str) -> queue.Queue:
        if name not in self._queues:
            q: queue.Queue = queue.Queue()
            self._queues[name] = q

            def work(q=q):
                while True:
                    job = q.get()
                    if job is None:
                        return
                    self._execute(*job)
                    self._executed += 1

            t = threading.Thread(target=work, name=f"fault-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self._queues[name]

    def drain(self, timeout_s: float = 10.0) -> None:
        """Waits for dispatched actions to finish, then ends the workers."""
        for q in self._queues.values():
            q.put(None)
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _execute(self, item: _Item, now: int, t0: int) -> None:
        f = item.fault
        t_before = time.monotonic_ns()
        wall_before = time.time_ns()
        detail, error = "", ""
        locks = self._locks_for(f)
        try:
            for lock in locks:
                lock.acquire()
            t_before = time.monotonic_ns()
            wall_before = time.time_ns()
            detail = self._act(f, item.phase)
        except Exception as err:  # a failed action is recorded and judged, the run goes on
            error = str(err)
            self.errors.append(f"{f.name} {item.phase}: {err}")
        finally:
            for lock in locks:
                lock.release()
        t_after = time.monotonic_ns()
        if item.phase == "start" and f.for_ms is not None:
            for other in self.items:
                if other.fault is f and other.k == item.k and other.phase == "end":
                    other.due_ns = t_after + int(f.for_ms * 1e6)
        key = (f.name, item.phase)
        if item.k == 0:
            self.fired.setdefault(key, t_before)
        if item.phase == "start" and f.for_ms is None and item.k == 0:
            self.fired.setdefault((f.name, "end"), t_after)
        ev = {"fault": f.name, "action": f.action, "target": f.target if f.rule is None
              else ",".join(f.rule["links"]), "phase": item.phase, "rep": item.k,
              "trigger": f.trigger.describe(), "t_ms": (t_before - t0) / 1e6,
              "done_ms": (t_after - t0) / 1e6, "planned_ms": (item.due_ns - t0) / 1e6,
              "dispatched_ms": (now - t0) / 1e6,
              "t_wall_ns": wall_before, "detail": detail, "error": error}
        self.record(ev)
        self.log(f"fault {f.name}: {f.action} {item.phase} {ev['target']} at "
                 f"+{ev['t_ms']:.1f} ms{' ERROR ' + error if error else ''}")

    def _nodes_of(self, f: sclib.Fault) -> set[str]:
        plan = self.fab.plan
        if f.action in ("rule_add", "rule_remove"):
            return {"(injector)"}
        if f.action in ("node_down", "node_up"):
            return {f.target} | {p.peer.node for p in plan.ports_of(f.target)}
        if f.action in ("plane_down", "plane_up"):
            idx = f.target - 1  # the scenario names plane numbers, 1-based
            return {lk.a.node for lk in plan.links if lk.plane == idx} | \
                {lk.b.node for lk in plan.links if lk.plane == idx}
        link = plan.link(f.target)
        return {link.a.node, link.b.node}

    def _locks_for(self, f: sclib.Fault) -> list[threading.Lock]:
        with self._locks_guard:
            return [self._node_locks.setdefault(n, threading.Lock())
                    for n in sorted(self._nodes_of(f))]

    def _act(self, f: sclib.Fault, phase: str) -> str:
        fab, plan = self.fab, self.fab.plan
        down = (phase == "start")
        if f.action in ("link_up", "node_up", "plane_up"):
            down = False
        if f.action in ("link_down", "link_up", "flap"):
            fab.set_link(f.target, up=not down, end=f.end)
            return f"{plan.link(f.target).name} {'down' if down else 'up'} ({f.end})"
        if f.action in ("node_down", "node_up"):
            for port in plan.ports_of(f.target):
                fab.set_link(port.link, up=not down, end=f.target)
            return f"{len(plan.ports_of(f.target))} link(s) of {f.target}"
        if f.action in ("plane_down", "plane_up"):
            # The plane's switches are gone: every host port of the plane loses carrier (the
            # switch ends go down), which is what a NIC sees and reports as port status.
            n, idx = 0, f.target - 1  # the scenario names plane numbers, 1-based
            for host in plan.hosts.values():
                port = host.ports[idx]
                fab.set_link(port.link, up=not down, end=port.peer.node)
                n += 1
            for link in plan.links:
                if (link.plane == idx and link.a.node in plan.routers
                        and link.b.node in plan.routers):
                    fab.set_link(link.name, up=not down)
                    n += 1
            return f"{n} link(s) of plane {f.target}"
        if f.action == "rule_add":
            if phase == "end":
                return self.injector.remove_rule(f.name)
            return self.injector.add_rule(f.rule)
        if f.action == "rule_remove":
            return self.injector.remove_rule(f.target)
        raise RuntimeError(f"unknown action {f.action}")

    def unfired(self) -> list[str]:
        out = []
        for item in self.items:
            if not item.done:
                out.append(f"{item.fault.name} ({item.phase} #{item.k + 1}, "
                           f"{item.fault.trigger.describe()})")
        return out


# ------------------------------------------------------------------------------------------------
# injector
# ------------------------------------------------------------------------------------------------
class Injector:
    def __init__(self, fab, mrct: tools.Mrct, out: str, links: list[dict], rules: list[dict],
                 seed: int, pcap: bool, log: Log):
        self.fab, self.mrct, self.out, self.log = fab, mrct, out, log
        self.links = links
        self.config_path = os.path.join(out, "injector.json")
        self.log_path = os.path.join(out, "decisions.jsonl")
        self.sock = os.path.join(procs.STATE_DIR, f"inject-{os.getpid()}-{id(self) % 10000}.sock")
        self.stdout_path = os.path.join(out, "injector.stdout")
        self.stderr_path = os.path.join(out, "injector.stderr")
        cfg = {"seed": seed, "log_pass": True, "link": links, "rule": rules}
        with open(self.config_path, "w") as f:
            json.dump(cfg, f, indent=2)
        self.pcap = pcap
        self.proc = None
        self.summary: dict = {}
        self.counts: dict = {}
        self._last_stats = 0

    def check_config(self) -> None:
        proc = subprocess.run([self.mrct.path, "inject", "check", "-c", self.config_path],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise UsageError(f"injector rejects the scenario's rules: "
                             f"{(proc.stderr or proc.stdout).strip()}")

    def start(self) -> None:
        os.makedirs(procs.STATE_DIR, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sock)
        argv = [self.mrct.path, "inject", "run", "-c", self.config_path, "--log", self.log_path,
                "--control", self.sock]
        if self.pcap:
            argv += ["--pcap-dir", os.path.join(self.out, "captures"), "--node", splice.INJ_NODE]
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = self.fab.popen(splice.INJ_NODE, argv, stdout=self._out, stderr=self._err)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise fabriclib.FabricError(f"injector exited rc={self.proc.returncode}: "
                                            f"{_tail(self.stderr_path)}")
            with contextlib.suppress(OSError, ValueError):
                if splice.injector_call(self.sock, {"cmd": "stats"}).get("ok"):
                    return
            time.sleep(0.02)
        raise fabriclib.FabricError("injector control socket not ready after 10 s")

    def stats(self, now_ns: int, every_ns: int = 50_000_000) -> dict:
        if self.proc is None or now_ns - self._last_stats < every_ns:
            return self.counts
        self._last_stats = now_ns
        with contextlib.suppress(OSError, ValueError):
            reply = splice.injector_call(self.sock, {"cmd": "stats"}, timeout_s=0.5)
            if reply.get("ok"):
                self.counts = splice.injector_counts(reply.get("stats") or {})
        return self.counts

    def _rule_json(self, rule: dict) -> dict:
        r = {k: v for k, v in rule.items() if k != "links"}
        names = []
        for sel in rule["links"]:
            names += [lk.name for lk in sclib.select_links(self.fab.plan, sel)]
        r["link"] = sorted(set(names))
        return r

    def add_rule(self, rule: dict) -> str:
        reply = splice.injector_call(self.sock, {"cmd": "add_rule", "rule": self._rule_json(rule)})
        if not reply.get("ok"):
            raise RuntimeError(f"injector add_rule: {reply.get('error')}")
        return f"rule {reply.get('name')} added"

    def remove_rule(self, name: str) -> str:
        reply = splice.injector_call(self.sock, {"cmd": "remove_rule", "name": name})
        if not reply.get("ok"):
            raise RuntimeError(f"injector remove_rule {name}: {reply.get('error')}")
        return f"rule {name} removed"

    def close(self) -> None:
        """After teardown, whatever happened: no socket file or open log left."""
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f is not None and not f.closed:
                f.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sock)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self._out, self._err):
            f.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sock)
        with contextlib.suppress(OSError):
            with open(self.stdout_path) as f:
                for line in f:
                    if line.startswith("{"):
                        with contextlib.suppress(json.JSONDecodeError):
                            obj = json.loads(line)
                            if "summary" in obj:
                                self.summary = obj["summary"]
        if self.summary:
            self.counts = splice.injector_counts(self.summary)


def _tail(path: str, n: int = 800) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------
# endpoints
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Endpoint:
    pair: str
    role: str
    node: str
    peer: str
    env: dict
    argv: list
    is_dut: bool
    stdout_path: str
    stderr_path: str
    result_path: str
    events_path: str
    proc: subprocess.Popen | None = None
    t_start: float = 0.0
    t_end: float = 0.0
    rc: int | None = None
    result: dict | None = None
    timed_out: bool = False
    stopped: str = ""      # why the runner ended it early
    # Node mode: the host's one `mrct endpoint node` process that plays this role towards this
    # peer (one connection of several); its result holds one object per connection.
    process: "Endpoint | None" = None

    def summary(self) -> dict:
        return {"pair": self.pair, "role": self.role, "node": self.node, "peer": self.peer,
                "is_dut": self.is_dut, "command": dutlib.describe_command(self.argv),
                "rc": self.rc, "timed_out": self.timed_out, "stopped": self.stopped,
                "seconds": round(self.t_end - self.t_start, 3) if self.t_end else None,
                "result": self.result, "stdout": os.path.basename(self.stdout_path),
                "stderr": os.path.basename(self.stderr_path),
                "error": "" if self.rc in (0, None) else _tail(self.stderr_path, 400)}

    def load_result(self) -> None:
        if self.process is not None:
            node = self.process.result or {}
            for conn in node.get("connections") or []:
                if conn.get("role") == self.role and conn.get("peer") == self.peer:
                    self.result = conn
                    return
            if node:
                self.result = {"error": f"the node process of {self.node} reports no "
                               f"{self.role} connection with {self.peer}: "
                               f"{node.get('error') or 'no such connection'}"}
            return
        for path in (self.result_path, self.stdout_path):
            with contextlib.suppress(OSError):
                with open(path) as f:
                    lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
                for line in reversed(lines):
                    with contextlib.suppress(json.JSONDecodeError):
                        obj = json.loads(line)
                        if isinstance(obj, dict):
                            self.result = obj
                            return


def srv6_ev_profile(plan: planlib.Plan, src: str, dst: str, evs: int | None, path: str) -> None:
    lines = [f"# SRv6 EVs {src} -> {dst}: one per path, from the fabric's path table",
             'mode = "explicit"']
    for e in plan.ev_paths(src, dst, evs, "srv6"):
        lines += ["", "[[evs]]", f"port = {e['port']}",
                  f'da = "{e["outer_da"]}"   # EV {e["ev"]}: {" ".join(e["hops"])}']
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def endpoint_env(sc: sclib.Scenario, plan: planlib.Plan, role: str, node: str, peer: str,
                 ctl: dict, out: str, files: dict, mrct: str, seed: int, mutant: str,
                 ev_profile: str, pcap_prefix: str) -> dict:
    host = plan.host(node)
    ports = plan.ports_of(node)
    pr, tr = sc.profiles, sc.traffic
    messages = tr.messages_per_qp()
    env = {
        "MRC_ROLE": role, "MRC_SCENARIO": sc.name, "MRC_NODE": node, "MRC_PEER_NODE": peer,
        "MRC_IFACES": ",".join(p.ifname for p in ports), "MRC_PLANES": str(len(ports)),
        "MRC_NEXT_HOPS": ",".join(f"{p.ifname}={p.peer.mac}" for p in ports),
        "MRC_PORT_ADDRS": ",".join(str(p.addr) for p in ports),
        "MRC_GID": str(host.gid), "MRC_PEER_GID": str(plan.host(peer).gid),
        "MRC_CTL_ADDR": ctl[node], "MRC_CTL_PORT": str(sclib.DEFAULT_CTL_PORT),
        "MRC_PEER_CTL_ADDR": ctl[peer], "MRC_EV_FORMAT": sc.ev_format,
        "MRC_EV_PROFILE": ev_profile,
        "MRC_EVS_PER_PLANE": str(pr.evs_per_plane) if pr.evs_per_plane else "",
        "MRC_CC": pr.cc, "MRC_CC_PROFILE": pr.cc_profile, "MRC_PMTU": str(pr.pmtu),
        "MRC_MPR": str(pr.mpr), "MRC_WIMM": str(pr.wimm), "MRC_TIMEOUT": str(pr.timeout),
        "MRC_RETRY": pr.retry, "MRC_PROBE_INTERVAL_US": f"{pr.probe_interval_us:g}",
        "MRC_IO": pr.io, "MRC_OP": tr.op, "MRC_SIZE": str(tr.size),
        "MRC_MESSAGES": str(messages) if messages else "",
        "MRC_DURATION_S": f"{tr.duration_s:g}" if tr.duration_s else "",
        "MRC_QPS": str(tr.qps), "MRC_TX_DEPTH": str(tr.tx_depth),
        "MRC_STALL_S": f"{tr.stall_s:g}", "MRC_SEED": str(seed), "MRC_OUT": out,
        "MRC_EVENT_LOG": os.path.join(out, f"{node}-{role}.events.jsonl"),
        "MRC_RESULT": os.path.join(out, f"{node}-{role}.json"),
        "MRC_PLAN": files["plan"], "MRC_PATHS": files["paths"], "MRC_MUTANT": mutant,
        "MRC_PCAP_PREFIX": pcap_prefix, "MRCT": mrct,
    }
    return env


def _without_option(argv: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        else:
            out.append(a)
    return out


def node_argv(env: dict, servers: list[str], clients: int,
              peer_profiles: list[tuple[str, str]]) -> list[str]:
    """`mrct endpoint node` for a host that takes part in several pairs: one process writes to
    every server of the host's pairs and accepts every client (one engine, so one QPN space
    and one set of plane sockets per host)."""
    # --ev-profile (the first peer's) stays as the default; --peer-ev-profile names each peer's.
    argv = _without_option(dutlib.reference_argv(env), "--server")
    if servers:
        argv += ["--server", ",".join(servers)]
    if clients:
        argv += ["--clients", str(clients), "--listen", env["MRC_CTL_ADDR"],
                 "--accept-timeout", "60"]
    for gid, path in peer_profiles:
        argv += ["--peer-ev-profile", f"{gid}={path}"]
    return argv


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------
def default_out_dir(sc: sclib.Scenario) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join(os.getcwd(), "artifacts", "runs", f"{sc.name}-{stamp}")


@contextlib.contextmanager
def build_lock():
    """Serialises fabric builds of parallel runs (Mininet creates veths in the root namespace
    under the plan's interface names before moving them)."""
    os.makedirs(procs.STATE_DIR, exist_ok=True)
    with open(BUILD_LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def require_root() -> None:
    if os.geteuid() != 0:
        raise UsageError("mrct run needs root: it builds network namespaces, veth links and "
                         "routes, and the endpoints and the injector open AF_PACKET sockets. "
                         "Run it as root (sudo mrct run ...). Validating a scenario does not "
                         "need root: mrct run --validate FILE")


# A reference endpoint that read a received frame this late (its JSON's loop.rx_late_max_ns) was
# not run by its host for that long: CPU contention or a stalled vCPU, not the protocol. 20 ms is
# the runtime's own "late" mark (reference-impl/runtime/loop.cc, kRxLateNs): above the 3-7 ms of
# silence a loaded 2-core host showed under six busy loops, below the software preset's timing
# tolerances such a stall breaks (T_ack_max 100 ms). The suite runs a failed case with such a
# stall once more (suite.run_with_stall_retry).
HOST_STALL_MS = 20.0


def host_stall(endpoints: list[dict]) -> dict | None:
    """The longest receive-ring wait among the reference's own endpoints (not a DUT's: what a DUT
    reports about itself is not taken on trust), from {node, role, is_dut, result} objects (the
    keys of Endpoint.summary()); None when no reference endpoint reported one."""
    worst = None
    for e in endpoints:
        if e.get("is_dut"):
            continue
        loop = (e.get("result") or {}).get("loop") or {}
        late = loop.get("rx_late_max_ns")
        if not isinstance(late, (int, float)) or isinstance(late, bool):
            continue
        if worst is None or late / 1e6 > worst["late_ms"]:
            worst = {"node": e.get("node", "?"), "role": e.get("role", "?"),
                     "late_ms": round(late / 1e6, 3),
                     "frames_over_20ms": loop.get("rx_late_over_20ms", 0)}
    return worst


def run_scenario(sc: sclib.Scenario, opts: RunOptions) -> dict:
    """Runs one scenario; returns the result object (also written to result.json)."""
    return _Run(sc, opts).execute()


class _Run:
    def __init__(self, sc: sclib.Scenario, opts: RunOptions):
        self.sc = sc
        self.opts = opts
        self.seed = sc.seed if opts.seed is None else opts.seed
        self.out = os.path.abspath(opts.out_dir or default_out_dir(sc))
        self.console = opts.console or sys.stderr
        self.result: dict = {
            "schema": RESULT_SCHEMA, "scenario": sc.name, "file": os.path.abspath(sc.path),
            "description": sc.description, "outcome": sc.outcome, "tags": sc.tags,
            "seed": self.seed, "dut": opts.dut.name, "mutant": opts.mutant,
            "verdict": "error", "reason": "", "artifacts": self.out, "timings": {},
            "endpoints": [], "faults": [], "expectations": [], "injector": {}, "checker": {},
            # For the suite's count over every fault-free run (report.fault_free_retirements).
            "fault_free": not sc.has_faults(), "ev_retired": None,
        }
        self.faults: list[dict] = []
        self.endpoints: list[Endpoint] = []
        self.injector: Injector | None = None
        self.monitor: Monitor | None = None
        self.attached: list = []  # physical.Attached: tester interfaces in the fabric
        self.scheduler: Scheduler | None = None
        self.cleanup: dict | None = None
        self.mrct: tools.Mrct | None = None
        self.reference: dict | None = None
        self.capture_map: dict[str, dict] = {}  # capture file -> {node, port}
        self.node_mode = False
        self.node_procs: dict[str, Endpoint] = {}  # node mode: host -> its process
        self.server_caps: dict[int, list[str]] = {}
        self.t_transfer = (0.0, 0.0)
        self.mutant_role = "both"

    # --------------------------------------------------------------------------------------------
    def execute(self) -> dict:
        t_start = time.monotonic()
        os.makedirs(self.out, exist_ok=True)
        self.log = Log(os.path.join(self.out, "run.log"), self.console,
                       echo=self.opts.progress,
                       prefix="reference | " if self.opts.is_reference else "")
        self.log(f"scenario {self.sc.name} ({self.sc.path}), seed {self.seed}, "
                 f"implementation {self.opts.dut.name}"
                 + (f", MUTANT {self.opts.mutant}" if self.opts.mutant else ""))
        self.log(f"artifacts: {self.out}")
        with contextlib.suppress(OSError):
            shutil.copyfile(self.sc.path, os.path.join(self.out, "scenario.toml"))
        try:
            self._execute()
        except (UsageError, tools.ToolError) as err:
            self.result.update(verdict="error", reason=str(err), usage_error=True)
            self.log(f"error: {err}")
        except KeyboardInterrupt:
            self.result.update(verdict="interrupted", reason="interrupted (Ctrl-C)")
            self.log("interrupted; the fabric was torn down")
        except SystemExit as stop:
            self.result.update(verdict="interrupted", reason=f"terminated (exit {stop.code})")
            self.log("terminated; the fabric was torn down")
        except (fabriclib.FabricError, planlib.PlanError, OSError) as err:
            self.result.update(verdict="error", reason=f"{type(err).__name__}: {err}")
            self.log(f"error: {err}")
        finally:
            self._drop_captures()
            self.result["timings"]["total_s"] = round(time.monotonic() - t_start, 3)
            self.result["faults"] = self.faults
            self.result["endpoints"] = [e.summary() for e in self.endpoints]
            if self.cleanup is not None:
                self.result["cleanup"] = self.cleanup
            self._write_outputs()
            self.log.close()
        return self.result

    def _drop_captures(self) -> None:
        """--keep-captures: pcaps are most of a run's bytes (full frames: the checker verifies
        ICRCs), so CI keeps them only for runs that did not pass."""
        policy = self.opts.keep_captures
        if policy == "all" or (policy == "failed" and self.result["verdict"] != "pass"):
            return
        freed = 0
        for sub in ("captures", "view", os.path.join("reference", "captures")):
            d = os.path.join(self.out, sub)
            if not os.path.isdir(d):
                continue
            for name in os.listdir(d):
                if name.endswith((".pcap", ".pcapng")):
                    path = os.path.join(d, name)
                    freed += os.path.getsize(path)
                    os.unlink(path)
        if freed:
            self.result["captures_removed"] = f"{freed / 1e6:.0f} MB of captures removed " \
                                              f"(--keep-captures {policy})"
            self.log(self.result["captures_removed"])

    def _manifest(self) -> dict:
        """What the run left, by kind, as paths relative to the run directory: the viewer reads
        this instead of guessing from file names. Lists only files that exist."""
        def rel(path: str) -> str:
            return os.path.relpath(path, self.out)

        def exists(path: str) -> bool:
            return os.path.exists(path) and os.path.getsize(path) > 0

        client = next((e for e in self.endpoints if e.role == "client"), None)
        captures = []
        for path, where in sorted(self.capture_map.items()):
            full = path if os.path.isabs(path) else os.path.join(self.out, path)
            if exists(full):
                entry = {"path": rel(full), "node": where.get("node"), "port": where.get("port")}
                if client and where.get("node") == client.node:
                    entry["role"] = "requester"
                elif any(e.node == where.get("node") and e.role == "server"
                         for e in self.endpoints):
                    entry["role"] = "responder"
                captures.append(entry)
        view = [os.path.join("view", n) for n in sorted(os.listdir(os.path.join(self.out, "view")))
                if n.endswith((".pcap", ".pcapng"))] if os.path.isdir(
                    os.path.join(self.out, "view")) else []
        report = (self.result.get("checker") or {}).get("json")
        m = {"schema": "mrctb-manifest/1", "scenario": self.sc.name,
             "verdict": self.result.get("verdict"),
             "requester": client.node if client else None,
             "view_capture": view[0] if view else None,
             "captures": captures,
             "event_logs": [rel(e.events_path) for e in self.endpoints
                            if exists(e.events_path)],
             "decision_logs": [n for n in ("decisions.jsonl",)
                               if exists(os.path.join(self.out, n))],
             "report": rel(report) if report and exists(report) else None,
             "paths": "paths.json" if exists(os.path.join(self.out, "paths.json")) else None,
             "plan": "plan.json" if exists(os.path.join(self.out, "plan.json")) else None}
        return m

    def _write_outputs(self) -> None:
        with contextlib.suppress(OSError):
            with open(os.path.join(self.out, "manifest.json"), "w") as f:
                json.dump(self._manifest(), f, indent=2)
                f.write("\n")
        with open(os.path.join(self.out, "result.json"), "w") as f:
            json.dump(self.result, f, indent=2, default=str)
            f.write("\n")
        self.result["artifacts_list"] = self._artifacts_list()
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write(reportlib.summary_markdown(self.result))
        self.result.pop("artifacts_list", None)

    def _artifacts_list(self) -> list:
        desc = {"result.json": "the whole result as JSON", "run.log": "runner log",
                "manifest.json": "the artifacts by kind (what `mrct view RUN_DIR` opens)",
                "goodput.svg": "goodput per path over time", "goodput.png": "the viewer's plot",
                "plan.json": "fabric plan", "paths.json": "EV -> path table",
                "scenario.toml": "the scenario as run", "injector.json": "injector config",
                "decisions.jsonl": "injector decision log", "faults.jsonl": "fault actions",
                "captures": "pcap per capture point", "endpoints": "endpoint outputs and "
                "event logs", "check": "checker profile and reports",
                "reference": "fault-free reference run",
                "viewer.png": "per-path timelines, sequence plot and series (mrct view)",
                "view": "the requester's captures merged for the viewer"}
        out = []
        for name in sorted(os.listdir(self.out)):
            if name in desc:
                out.append((name + ("/" if os.path.isdir(os.path.join(self.out, name)) else ""),
                            desc[name]))
        return out

    # --------------------------------------------------------------------------------------------
    def _execute(self) -> None:
        sc, opts = self.sc, self.opts
        require_root()
        need = ["endpoint"]
        uses_injector = bool(sc.impairs or sc.passthrough or any(f.rule for f in sc.faults))
        if uses_injector:
            need.append("inject")
        self.mrct = tools.find(opts.mrct, tuple(need))
        self.log(f"mrct: {self.mrct.path}")
        reason = dutlib.unsupported_reason(opts.dut, sc)
        if reason:
            self.result.update(verdict="unsupported", reason=reason)
            self.log(f"unsupported: {reason}")
            return
        plan = sc.topology.make_plan()
        self._check_physical(plan)
        pairs = sc.pairs(plan)
        hosts_used: dict[str, int] = {}
        for c, s in pairs:
            hosts_used[c] = hosts_used.get(c, 0) + 1
            hosts_used[s] = hosts_used.get(s, 0) + 1
        multi = sorted(h for h, n in hosts_used.items() if n > 1)
        # Hosts in several pairs run one `mrct endpoint node` process each (every role of the
        # host on one engine). The DUT contract starts one process per role and pair, and the
        # mutants act on one client or server, so neither applies there.
        self.node_mode = bool(multi)
        dut_plays = opts.dut.plays("client") or opts.dut.plays("server")
        if multi and (opts.mutant or (dut_plays and dutlib.NODE not in opts.dut.commands)):
            self.result.update(verdict="not-run", reason=(
                f"pattern {sc.traffic.pattern} puts {len(pairs)} endpoint pairs on hosts that "
                f"take part in several ({', '.join(multi)}); that runs one endpoint process "
                "per host, " + ("not a mutant" if opts.mutant else
                                f"and the DUT profile {opts.dut.name} has no `node` command "
                                "(ci/dut/README.md)")))
            self.log(self.result["reason"])
            return
        if opts.mutant:
            known = self.mrct.mutants()
            if opts.mutant not in known:
                raise UsageError(f"--mutant {opts.mutant!r}: unknown; the endpoint has "
                                 f"{', '.join(sorted(known))}")
            self.result["mutant_rule"], self.mutant_role = known[opts.mutant]
            self.result["mutant_role"] = self.mutant_role
        if (sc.expect.goodput_min_pct is not None and opts.reference and sc.has_faults()):
            self._reference_run()

        t_build = time.monotonic()
        fab = fabriclib.Fabric(plan, sc.topology.routing,
                               workdir=os.path.join(self.out, "captures"),
                               log=lambda m: self.log(m))
        try:
            with build_lock():
                fab.start()  # cleans up after itself when the build fails
            try:
                self._in_fabric(fab, plan, pairs, uses_injector, t_build)
            finally:
                # Also on Ctrl-C / SIGTERM (the fabric turns them into exceptions) and errors:
                # nothing of the run survives it.
                self._detach_physical(fab)
                try:
                    fab.stop()
                except fabriclib.CleanupError as err:
                    self.log(f"cleanup: {err}")
                if self.injector:
                    self.injector.close()
        finally:
            self.cleanup = fab.cleanup_report
            if fab.cleanup_report and any(fab.cleanup_report.get("leftovers", {}).values()):
                self.log(f"cleanup left something behind: {fab.cleanup_report}")
            self.result["timings"]["teardown_s"] = round(fab.timings.get("stop_s", 0), 3)
        self._judge()

    def _detach_physical(self, fab) -> None:
        """Ends the DUT namespaces' processes, gives the tester interfaces back and removes the
        namespaces' control ports (the fabric's teardown does the rest)."""
        if not self.sc.physical:
            return
        for ep in self.endpoints + list(self.node_procs.values()):
            proc = getattr(ep, "proc", None)
            if ep.node in physical.netns_of(self.sc.physical) and proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        for err in physical.detach(fab, self.attached):
            self.log(f"cleanup: {err}")
        self.attached = []
        for host, ns in physical.netns_of(self.sc.physical).items():
            physical.remove_control_port(host, ns)

    def _cabled(self, plan) -> frozenset:
        """The host ports on physical interfaces (their names in the plan)."""
        return frozenset(plan.ports_of(m.host)[m.plane].ifname for m in self.sc.physical)

    def _check_physical(self, plan) -> None:
        """[hosts.<name>] (physical.py): bad mappings are usage errors naming the scenario key.
        A host whose DUT machine is a namespace of the tester (netns) runs; one on another
        machine does not yet (mrct run cannot start the DUT program there)."""
        sc = self.sc
        if not sc.physical:
            return
        bad = physical.problems(sc.physical, plan)
        if bad:
            raise UsageError("; ".join(f"{sc.path}: {sclib.format_key(k)}: {msg}"
                                       for k, msg in bad))
        remote = sorted({m.host for m in sc.physical if not m.netns})
        if remote:
            raise UsageError(f"{sc.path}: hosts.{remote[0]}: a DUT machine other than a "
                             "namespace of the tester (netns = ...) is not run by mrct run yet: "
                             "it cannot start the DUT program there")
        cabled = {plan.ports_of(m.host)[m.plane].link for m in sc.physical}
        sels = list(sc.passthrough) + [x for imp in sc.impairs for x in imp.links]
        sels += [x for f in sc.faults if f.rule for x in f.rule["links"]]
        for sel in sels:
            hit = sorted(cabled & {lk.name for lk in sclib.select_links(plan, sel)})
            if hit:
                raise UsageError(f"{sc.path}: hosts: link {hit[0]} is a real cable here; the "
                                 "injector cannot relay it (impair the router's other links)")

    def _reference_run(self) -> None:
        sc, opts = self.sc, self.opts
        key = sc.fault_free_key()
        cache = opts.reference_cache
        if cache is not None and key in cache:
            self.reference = cache[key]
            self.log(f"fault-free reference: reused ({self.reference.get('goodput_gbps')} Gbit/s)")
            return
        self.log("fault-free reference run (same fabric and traffic, no faults) for the "
                 "relative goodput SLO")
        ref_opts = dataclasses.replace(opts, out_dir=os.path.join(self.out, "reference"),
                                       mrct=self.mrct.path,
                                       reference=False, mutant="", check=False,
                                       is_reference=True)
        ref = _Run(sc.without_faults(), ref_opts)
        ref.seed = self.seed
        res = ref.execute()
        gbps = res.get("goodput_gbps")
        self.reference = {"verdict": res["verdict"], "goodput_gbps": gbps,
                          "artifacts": res["artifacts"]}
        if cache is not None and res["verdict"] == "pass":
            cache[key] = self.reference
        self.log(f"fault-free reference: {res['verdict']}, {gbps} Gbit/s")

    # --------------------------------------------------------------------------------------------
    def _in_fabric(self, fab, plan, pairs, uses_injector, t_build) -> None:
        sc, opts = self.sc, self.opts
        endpoint_hosts = sorted({h for p in pairs for h in p}, key=lambda h: plan.host(h).number)
        duts = physical.netns_of(sc.physical)
        if sc.physical:
            self.attached = physical.attach(fab, sc.physical)
            with open(os.path.join(self.out, "wiring.json"), "w") as f:
                json.dump(physical.wiring(plan, sc.topology.routing, sc.physical), f, indent=2)
            for host, ns in sorted(duts.items()):
                with open(os.path.join(self.out, f"{host}-config.sh"), "w") as f:
                    f.write(physical.host_script(plan, sc.topology.routing, host))
                physical.configure_netns(plan, sc.topology.routing, host, ns)
                self.log(f"{host}: ports on tester interface(s) "
                         f"{', '.join(m.iface for m in sc.physical if m.host == host)}, "
                         f"DUT machine = namespace {ns}")
        ctl = splice.add_control_network(fab, [h for h in endpoint_hosts if h not in duts])
        for host in endpoint_hosts:
            if host in duts:
                ctl[host] = physical.add_control_port(fab, host, duts[host], len(ctl))
        files = fab.write_plan(self.out)
        relays = []
        if uses_injector:
            wanted = []
            for sel in sc.passthrough:
                wanted += sclib.select_links(plan, sel)
            for imp in sc.impairs:
                for sel in imp.links:
                    wanted += sclib.select_links(plan, sel)
            for f in sc.faults:
                if f.rule:
                    for sel in f.rule["links"]:
                        wanted += sclib.select_links(plan, sel)
            uniq = list({lk.name: lk for lk in wanted}.values())
            relays = splice.splice_links(fab, uniq)
            self.log(f"injector relays on {len(relays)} link(s): "
                     f"{', '.join(r['name'] for r in relays)}")
        self.result["timings"]["build_s"] = round(time.monotonic() - t_build, 3)

        # captures
        capdir = os.path.join(self.out, "captures")
        os.makedirs(capdir, exist_ok=True)
        epdir = os.path.join(self.out, "endpoints")
        os.makedirs(epdir, exist_ok=True)
        points = set(sc.capture.points)
        own_pcap = "endpoints" in points
        wire_hosts = set()
        dut_roles = {r for r in dutlib.ROLES if opts.dut.plays(r)}
        for c, s in pairs:
            for node, role in ((c, "client"), (s, "server")):
                if "wire" in points or (own_pcap and role in dut_roles):
                    wire_hosts.add(node)
        if plan.shape == "back_to_back" and wire_hosts:
            self.log("note: wire captures on back_to_back cables see only what the peer "
                     "receives")
        snap = sc.capture.snaplen or None
        for host in sorted(wire_hosts):
            for port in plan.ports_of(host):
                peer = port.peer
                cap = fab.capture(peer.ifname, snaplen=snap,
                                  path=os.path.join(capdir, f"{peer.node}-{peer.ifname}.pcap"))
                # the host's frames, seen at the switch end of its cable (the veth may reorder)
                self.capture_map[cap.path] = {"node": host, "port": port.plane + 1,
                                              "side": "link"}
        for p in points:
            if p in sclib.CAPTURE_POINTS:
                continue
            port = plan.port(p)
            cap = fab.capture(p, snaplen=snap,
                              path=os.path.join(capdir, f"{port.node}-{p}.pcap"))
            self.capture_map[cap.path] = {"node": port.node, "port": port.plane + 1}
        if "routers" in points:
            for router in plan.routers.values():
                for port in router.ports:
                    cap = fab.capture(port.ifname, snaplen=snap,
                                      path=os.path.join(capdir,
                                                        f"{router.name}-{port.ifname}.pcap"))
                    self.capture_map[cap.path] = {"node": router.name, "port": port.plane + 1}

        # injector
        if uses_injector:
            rules = []
            for imp in sc.impairs:
                rule = dict(imp.rule)
                names = []
                for sel in imp.links:
                    names += [lk.name for lk in sclib.select_links(plan, sel)]
                rule["link"] = sorted(set(names))
                if imp.start_ms is None:
                    rules.append(rule)
                else:
                    # a timed rule: added and removed through the control socket at t0 + ms
                    sc.faults.append(sclib.Fault(
                        imp.name, "rule_add", None,
                        sclib.Trigger(at_ms=imp.start_ms),
                        for_ms=(imp.stop_ms - imp.start_ms) if imp.stop_ms is not None else None,
                        rule={"links": imp.links, **imp.rule}))
            self.injector = Injector(fab, self.mrct, self.out, relays, rules, self.seed,
                                     "impaired" in points or sc.capture.injector_pcap, self.log)
            self.injector.check_config()
            self.injector.start()
            self.log(f"injector running ({len(rules)} rule(s) from the start, seed {self.seed})")

        # endpoints
        if self.node_mode:
            self._node_endpoints(plan, pairs, ctl, epdir, capdir, files, own_pcap)
        for i, (c, s) in enumerate(pairs if not self.node_mode else []):
            pair = f"{c}->{s}"
            for role, node, peer in (("server", s, c), ("client", c, s)):
                ev_profile = sc.profiles.ev_profile
                if sc.ev_format == "srv6" and not ev_profile:
                    ev_profile = os.path.join(epdir, f"{node}-{role}.ev.toml")
                    evs = (sc.profiles.evs_per_plane * plan.planes
                           if sc.profiles.evs_per_plane else None)
                    srv6_ev_profile(plan, node, peer, evs, ev_profile)
                is_dut = opts.dut.plays(role)
                prefix = os.path.join(capdir, node) if own_pcap else ""
                mutant = opts.mutant if self.mutant_role in ("both", role) else ""
                env = endpoint_env(sc, plan, role, node, peer, ctl, epdir, files,
                                   self.mrct.path, self.seed, mutant, ev_profile, prefix)
                env.update(opts.dut.env if is_dut else {})
                argv, is_dut = dutlib.command_for(opts.dut, role, env)
                ep = Endpoint(pair, role, node, peer, env, argv, is_dut,
                              os.path.join(epdir, f"{node}-{role}.stdout"),
                              os.path.join(epdir, f"{node}-{role}.stderr"),
                              env["MRC_RESULT"], env["MRC_EVENT_LOG"])
                self.endpoints.append(ep)
                if own_pcap and not is_dut:
                    for port in plan.ports_of(node):
                        self.capture_map[f"{prefix}-{port.ifname}.pcap"] = {
                            "node": node, "port": port.plane + 1}
            for port in plan.ports_of(s):
                self.server_caps.setdefault(port.plane, [])
        for path, where in self.capture_map.items():
            if any(where["node"] == e.node for e in self.endpoints if e.role == "server"):
                self.server_caps.setdefault(where["port"] - 1, []).append(path)

        servers = [e for e in self.endpoints if e.role == "server"]
        clients = [e for e in self.endpoints if e.role == "client"]
        server_nodes = sorted({e.node for e in servers}, key=lambda h: plan.host(h).number)
        if self.node_mode:
            # Every node listens before it connects out (connects retry until the peer listens).
            nodes = list(self.node_procs.values())
            self.monitor = Monitor(fab, server_nodes, self._cabled(plan))
            self.scheduler = Scheduler(sc, fab, self.injector, self.log, self._record_fault)
            t_clients = time.monotonic()
            for ep in nodes:
                self._start(fab, ep)
        else:
            for ep in servers:
                self._start(fab, ep)
            time.sleep(0.05)
            self.monitor = Monitor(fab, server_nodes, self._cabled(plan))
            self.scheduler = Scheduler(sc, fab, self.injector, self.log, self._record_fault)
            t_clients = time.monotonic()
            for ep in clients:
                self._start(fab, ep)
        self.log(f"transfer: {len(clients)} client(s), {sc.traffic.pattern}, "
                 f"{sc.traffic.op} {sclib.format_size(sc.traffic.size)} x "
                 + (f"{sc.traffic.duration_s:g} s" if sc.traffic.duration_s else
                    f"{sc.traffic.messages_per_qp()} msg") + f" x {sc.traffic.qps} QP"
                 + (f", {len(self.node_procs)} node process(es)" if self.node_mode else ""))
        if self.node_mode:
            self._wait(fab, list(self.node_procs.values()), [], t_clients)
            for ep in self.endpoints:
                proc = ep.process
                ep.proc, ep.rc, ep.t_start, ep.t_end = proc.proc, proc.rc, proc.t_start, proc.t_end
                ep.timed_out, ep.stopped = proc.timed_out, proc.stopped
                ep.load_result()
        else:
            self._wait(fab, clients, servers, t_clients)
        self.t_transfer = (t_clients, time.monotonic())
        self.result["timings"]["transfer_s"] = round(self.t_transfer[1] - t_clients, 3)
        if self.injector:
            self.injector.stop()
            self.result["injector"] = {"counts": self.injector.counts,
                                       "summary": self.injector.summary,
                                       "log": "decisions.jsonl", "links": relays}
        fab.stop_captures()
        with open(os.path.join(self.out, "faults.jsonl"), "w") as f:
            for ev in self.faults:
                f.write(json.dumps(ev) + "\n")

    def _node_endpoints(self, plan, pairs, ctl, epdir, capdir, files, own_pcap) -> None:
        """Node mode: one process per host, one logical endpoint per (pair, role) for judging."""
        sc = self.sc
        hosts = sorted({h for p in pairs for h in p}, key=lambda h: plan.host(h).number)
        evs = sc.profiles.evs_per_plane * plan.planes if sc.profiles.evs_per_plane else None
        for host in hosts:
            servers = [s for c, s in pairs if c == host]
            clients = [c for c, s in pairs if s == host]
            peers = list(dict.fromkeys(servers + clients))
            profiles = []
            if sc.ev_format == "srv6" and not sc.profiles.ev_profile:
                # The EVs towards each peer are that peer's paths (outer DAs end at its host).
                for peer in peers:
                    path = os.path.join(epdir, f"{host}-to-{peer}.ev.toml")
                    srv6_ev_profile(plan, host, peer, evs, path)
                    profiles.append((str(plan.host(peer).gid), path))
            roles = ({"client"} if servers else set()) | ({"server"} if clients else set())
            is_dut = self.opts.dut.serves_node(roles)
            prefix = os.path.join(capdir, host) if own_pcap else ""
            env = endpoint_env(sc, plan, "node", host, peers[0], ctl, epdir, files,
                               self.mrct.path, self.seed, "",
                               profiles[0][1] if profiles else sc.profiles.ev_profile, prefix)
            # The node role's part of the DUT contract (ci/dut/README.md).
            env.update(MRC_SERVERS=",".join(f"{s}={ctl[s]}" for s in servers),
                       MRC_CLIENTS=str(len(clients)),
                       MRC_PEER_EV_PROFILES=",".join(f"{g}={p}" for g, p in profiles))
            if is_dut:
                env.update(self.opts.dut.env)
                argv = ["/bin/sh", "-c", self.opts.dut.commands[dutlib.NODE]]
            else:
                argv = node_argv(env, [ctl[s] for s in servers], len(clients), profiles)
            proc = Endpoint(f"{host} (node)", "node", host, ",".join(peers), env, argv, is_dut,
                            os.path.join(epdir, f"{host}-node.stdout"),
                            os.path.join(epdir, f"{host}-node.stderr"),
                            env["MRC_RESULT"], env["MRC_EVENT_LOG"])
            self.node_procs[host] = proc
            if own_pcap and not is_dut:
                for port in plan.ports_of(host):
                    self.capture_map[f"{prefix}-{port.ifname}.pcap"] = {
                        "node": host, "port": port.plane + 1}
        for c, s in pairs:
            for role, node, peer in (("server", s, c), ("client", c, s)):
                proc = self.node_procs[node]
                self.endpoints.append(Endpoint(
                    f"{c}->{s}", role, node, peer, proc.env, proc.argv, proc.is_dut,
                    proc.stdout_path,
                    proc.stderr_path, proc.result_path, proc.events_path, process=proc))
            for port in plan.ports_of(s):
                self.server_caps.setdefault(port.plane, [])

    def _record_fault(self, ev: dict) -> None:
        self.faults.append(ev)

    def _start(self, fab, ep: Endpoint) -> None:
        env = dict(os.environ)
        env.update(ep.env)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ep.result_path)
        out = open(ep.stdout_path, "wb")
        err = open(ep.stderr_path, "wb")
        try:
            dut_ns = physical.netns_of(self.sc.physical).get(ep.node)
            if dut_ns:
                ep.proc = physical.popen(fab, dut_ns, ep.argv, env=env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=ep.env["MRC_OUT"])
            else:
                ep.proc = fab.popen(ep.node, ep.argv, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL,
                                    cwd=ep.env["MRC_OUT"])
        finally:
            out.close()
            err.close()
        ep.t_start = time.monotonic()
        impl = "DUT " + self.opts.dut.name if ep.is_dut else "reference"
        self.log(f"{ep.role} on {ep.node} ({impl}): "
                 f"{dutlib.describe_command(ep.argv)}", echo=False)

    def _wait(self, fab, clients, servers, t_clients) -> None:
        sc = self.sc
        deadline = t_clients + sc.timeout_s
        last_progress = 0.0
        while True:
            now = time.monotonic()
            now_ns = time.monotonic_ns()
            self.monitor.poll(now_ns)
            inj = self.injector.stats(now_ns) if self.injector else {}
            self.scheduler.tick(now_ns, self.monitor.t0_ns, self.monitor.bytes, inj)
            for ep in clients + servers:
                if ep.rc is None and ep.proc.poll() is not None:
                    ep.rc = ep.proc.returncode
                    ep.t_end = now
                    self.log(f"{ep.role} {ep.node} exited rc={ep.rc} after "
                             f"{ep.t_end - ep.t_start:.2f} s")
            if all(ep.rc is not None for ep in clients):
                break
            # A server that dies early (setup error) leaves its client waiting for the
            # control connection; end the client too.
            for s in servers:
                if s.rc not in (None, 0) and now - s.t_end > 2:
                    for c in clients:
                        if c.pair == s.pair and c.rc is None and not c.stopped:
                            c.stopped = f"its server {s.node} failed (rc={s.rc})"
                            self.log(f"server {s.node} failed (rc={s.rc}): "
                                     f"{_tail(s.stderr_path, 200)}; stopping its client")
                            c.proc.kill()
            if now > deadline:
                killed = False
                for ep in clients:
                    if ep.rc is None and not ep.timed_out:
                        ep.timed_out = True
                        ep.proc.kill()
                        killed = True
                if killed:
                    self.log(f"timeout: the transfer did not finish within {sc.timeout_s:g} s")
                time.sleep(POLL_S)
                continue
            if now - last_progress >= (0.25 if self.log.console.isatty() else 2.0):
                last_progress = now
                self._progress(now - t_clients, clients, inj)
            time.sleep(POLL_S)
        self.log.clear_live()
        self.scheduler.drain()
        # faults still due after the transfer (e.g. an "end" after the last message)
        unfired = self.scheduler.unfired()
        if unfired:
            self.log(f"not fired before the transfer ended: {'; '.join(unfired)}")
        grace_end = time.monotonic() + SERVER_GRACE_S
        while any(ep.rc is None for ep in servers) and time.monotonic() < grace_end:
            for ep in servers:
                if ep.rc is None and ep.proc.poll() is not None:
                    ep.rc = ep.proc.returncode
                    ep.t_end = time.monotonic()
            time.sleep(0.02)
        for ep in servers:
            if ep.rc is None:
                ep.timed_out = True
                ep.proc.kill()
                ep.rc = ep.proc.wait()
                ep.t_end = time.monotonic()
                self.log(f"server {ep.node} did not exit {SERVER_GRACE_S:g} s after its client; "
                         "killed")
        for ep in clients + servers:
            ep.load_result()

    def _progress(self, elapsed: float, clients, inj: dict) -> None:
        m = self.monitor
        running = sum(1 for c in clients if c.rc is None)
        fired = sum(1 for i in self.scheduler.items if i.done)
        parts = [f"+{elapsed:5.1f} s", f"data {m.bytes / 1e6:8.1f} MB",
                 f"{m.rate_bps / 1e6:7.0f} Mbit/s", f"clients running {running}/{len(clients)}"]
        if self.scheduler.items:
            parts.append(f"faults {fired}/{len(self.scheduler.items)}")
        acted = [f"{k} {inj[k]}" for k in ("drop", "trim", "ecn", "corrupt", "dup", "delay")
                 if inj.get(k)]
        if acted:
            parts.append("injector " + " ".join(acted))
        text = " | ".join(parts)
        if self.log.console.isatty():
            self.log.live(text)
        else:
            self.log(text)

    # --------------------------------------------------------------------------------------------
    # judging
    # --------------------------------------------------------------------------------------------
    def _judge(self) -> None:
        sc = self.sc
        clients = [e for e in self.endpoints if e.role == "client"]
        servers = [e for e in self.endpoints if e.role == "server"]
        dut_eps = [e for e in self.endpoints if e.is_dut]
        for e in dut_eps:
            if dutlib.cannot_run(e.rc):
                # /bin/sh's "not found" / "cannot execute": the DUT set-up is broken. Never
                # "unsupported", and not a judged failure either (which an expected-failure
                # scenario would count as a pass).
                self.result.update(verdict="error",
                                   reason=f"the DUT command ({self.opts.dut.name}, {e.role}) "
                                   f"could not be run: sh exit {e.rc}: "
                                   f"{_tail(e.stderr_path, 300) or '(no message)'}")
                self.log(self.result["reason"])
                return
        for e in dut_eps:
            why = dutlib.unsupported_signal(e.rc, e.result)
            if why:
                self.result.update(verdict="unsupported",
                                   reason=f"the DUT ({self.opts.dut.name}) does not support "
                                   f"this scenario ({why})")
                self.log(self.result["reason"])
                return
        gbps = sum((c.result or {}).get("gbit_per_s", 0) or 0 for c in clients)
        self.result["goodput_gbps"] = round(gbps, 4)
        self._plot()
        if self.opts.check:
            self._check()
            self._viewer()
        else:
            self.result["checker"] = {"status": "not-run", "reason": "not asked for "
                                      "(--no-check)" if not self.opts.is_reference else
                                      "fault-free reference run"}
        exps = self.result["expectations"]
        ex = sc.expect

        def add(name, expected, observed, status, detail=""):
            exps.append({"name": name, "expected": expected, "observed": observed,
                         "status": status, "detail": detail})

        errors = [(c.result or {}).get("error") or (c.result or {}).get("peer_error") or
                  ("" if c.rc == 0 else _tail(c.stderr_path, 300)) for c in clients]
        ok = [c.rc == 0 and not e for c, e in zip(clients, errors)]
        if ex.completes:
            add("transfer completes", "every client completes",
                "; ".join(f"{c.node}: rc {c.rc}{' (timeout)' if c.timed_out else ''}"
                          f"{' (' + c.stopped + ')' if c.stopped else ''}"
                          f"{' ' + e[:160] if e else ''}" for c, e in zip(clients, errors)),
                "pass" if all(ok) else "fail")
        else:
            add("transfer fails", "every client fails",
                "; ".join(f"{c.node}: rc {c.rc}" for c in clients),
                "pass" if not any(ok) else "fail")
        if ex.qp_error:
            seen = [e for e in errors if ex.qp_error in (e or "")]
            ev_seen = self._events_with_status(ex.qp_error)
            add("expected QP error", ex.qp_error,
                (seen[0][:160] if seen else "") or (f"{ev_seen} completion event(s) with it"
                                                    if ev_seen else "not seen"),
                "pass" if len(seen) == len(clients) or ev_seen else "fail")
        if ex.data_verified:
            vs = [(c.result or {}).get("verify") for c in clients]
            if any(v is None for v in vs):
                add("data verified", "all messages verified", "no verification reported",
                    "fail" if all(c.result for c in clients) else "not-run")
            else:
                bad = sum(v.get("messages_bad", 0) for v in vs)
                checked = sum(v.get("messages_checked", 0) for v in vs)
                imm = [v.get("imm") or {} for v in vs]
                imm_bad = sum(i.get("missing", 0) + i.get("duplicates", 0) for i in imm)
                add("data verified", "all messages verified",
                    f"{checked - bad}/{checked} messages ok"
                    + (f", {imm_bad} immediate data missing/duplicated" if imm_bad else ""),
                    "pass" if checked > 0 and bad == 0 and imm_bad == 0 else "fail")
        if ex.goodput_min_gbps is not None:
            add("goodput", f">= {ex.goodput_min_gbps:g} Gbit/s", f"{gbps:.3f} Gbit/s",
                "pass" if gbps >= ex.goodput_min_gbps else "fail")
        if ex.goodput_min_pct is not None:
            if not sc.has_faults():
                add("goodput vs fault-free", f">= {ex.goodput_min_pct:g} %", "the scenario has "
                    "no faults: 100 %", "pass")
            elif not self.reference or not self.reference.get("goodput_gbps"):
                why = ("no reference run (--no-reference)" if not self.opts.reference else
                       "the fault-free reference run ended "
                       f"{(self.reference or {}).get('verdict')}")
                add("goodput vs fault-free", f">= {ex.goodput_min_pct:g} %", why, "not-run")
            else:
                ref = self.reference["goodput_gbps"]
                pct = 100.0 * gbps / ref
                self.result["goodput_pct_of_reference"] = round(pct, 1)
                add("goodput vs fault-free", f">= {ex.goodput_min_pct:g} % of {ref:.3f} Gbit/s",
                    f"{pct:.1f} % ({gbps:.3f} Gbit/s)",
                    "pass" if pct >= ex.goodput_min_pct else "fail")
        if ex.max_stall_ms is not None:
            stall = self._max_stall_ms(clients)
            if stall is None:
                add("max stall", f"<= {ex.max_stall_ms:g} ms", "no completion events (the "
                    "client wrote no event log)", "not-run")
            else:
                add("max stall", f"<= {ex.max_stall_ms:g} ms", f"{stall:.1f} ms",
                    "pass" if stall <= ex.max_stall_ms else "fail")
        retired = [((c.result or {}).get("ev") or {}).get("retired") for c in clients]
        if retired and all(isinstance(v, int) for v in retired):
            self.result["ev_retired"] = sum(retired)
        for lim, cmp in ((ex.ev_retired_min, "min"), (ex.ev_retired_max, "max")):
            if lim is None:
                continue
            want = f"{'>=' if cmp == 'min' else '<='} {lim}"
            vals = retired
            if any(v is None for v in vals):
                add("EVs retired", want, "not reported", "not-run")
            else:
                good = sum(vals) >= lim if cmp == "min" else sum(vals) <= lim
                add("EVs retired", want, str(sum(vals)), "pass" if good else "fail")
        for name, lim, cmp in (("retransmissions", ex.retransmits_min, "min"),
                               ("retransmissions", ex.retransmits_max, "max")):
            if lim is None:
                continue
            vals = [((c.result or {}).get("retransmissions") or {}).get("total") for c in clients]
            wire = (self.result.get("checker") or {}).get("retransmissions")
            if any(v is None for v in vals) and wire is None:
                add(name, f"{cmp} {lim}", "not reported", "not-run")
                continue
            total = sum(vals) if all(v is not None for v in vals) else wire
            good = total >= lim if cmp == "min" else total <= lim
            seen = str(total) if all(v is not None for v in vals) else \
                f"{total} (counted by the checker on the wire; the endpoints report none)"
            add(name, f"{'>=' if cmp == 'min' else '<='} {lim}", seen,
                "pass" if good else "fail")
        if ex.injector_min:
            counts = (self.result.get("injector") or {}).get("counts") or {}
            for action, n in sorted(ex.injector_min.items()):
                add(f"injector {action}", f">= {n}", str(counts.get(action, 0)),
                    "pass" if counts.get(action, 0) >= n else "fail")
        if ex.events_min:
            counts: dict = {}
            have_log = False
            for ep, ev in self._events():
                have_log = True
                counts[ev.get("kind")] = counts.get(ev.get("kind"), 0) + 1
            for kind, n in sorted(ex.events_min.items()):
                if not have_log:
                    add(f"{kind} events", f">= {n}", "no endpoint event log", "not-run")
                else:
                    add(f"{kind} events", f">= {n}", str(counts.get(kind, 0)),
                        "pass" if counts.get(kind, 0) >= n else "fail")
        if sc.faults:
            unfired = self.scheduler.unfired() if self.scheduler else ["(schedule not started)"]
            errs = self.scheduler.errors if self.scheduler else []
            add("faults applied", "every scheduled fault action ran",
                "all ran" if not unfired and not errs else "; ".join(unfired + errs)[:300],
                "pass" if not unfired and not errs else "fail")
        chk = self.result.get("checker") or {}
        if self.opts.is_reference:
            pass  # the fault-free reference: only its goodput and completion matter
        elif chk.get("status") == "not-run":
            add("checker verdict", ex.verdict, chk.get("reason", "not run"), "not-run")
        elif chk:
            add("checker verdict", ex.verdict, *checker_expectation(ex.verdict, chk))
            statuses = {r["id"]: r.get("status") for r in chk.get("rules", [])}
            for rid in ex.must_fail:
                st = _rule_status(statuses, rid)
                add(f"rule {rid} fails", "fail", st or "absent",
                    "pass" if st == "fail" else "fail")
            if self.opts.mutant and self.result.get("mutant_rule"):
                rid = self.result["mutant_rule"]
                st = _rule_status(statuses, rid)
                # A rule of warning severity (MRC-PRB-007) reports its violations as "warn".
                self.result["mutant_caught"] = st in ("fail", "warn")
                self.result["mutant_rule_status"] = st
        if any(e.timed_out for e in servers):
            add("servers exit", "every server exits after its client", "a server had to be "
                "killed", "fail")
        statuses = [e["status"] for e in exps]
        if self.opts.mutant:
            caught = self.result.get("mutant_caught")
            rid = self.result.get("mutant_rule")
            if caught is None:
                self.result.update(verdict="incomplete",
                                   reason=f"mutant {self.opts.mutant}: the checker did not run, "
                                   f"so whether {rid} catches it is unknown")
            else:
                # A mutant run does not conform by construction; the question is whether
                # the checker caught the rule the mutant breaks.
                self.result.update(verdict="fail", reason=(
                    f"mutant {self.opts.mutant}: {rid} "
                    + (f"{self.result.get('mutant_rule_status')}ed (caught)" if caught else
                       f"is {self.result.get('mutant_rule_status') or 'absent'} (NOT caught)")))
        elif "fail" in statuses:
            self.result.update(verdict="fail", reason="; ".join(
                f"{e['name']}: expected {e['expected']}, observed {e['observed']}"
                for e in exps if e["status"] == "fail")[:600])
        elif "inconclusive" in statuses:
            # Not a pass: the checker had nothing (or not everything asked for) to judge.
            self.result.update(verdict="inconclusive", reason="; ".join(
                f"{e['name']}: {e['observed']}" for e in exps
                if e["status"] == "inconclusive")[:600])
        elif "not-run" in statuses:
            self.result.update(verdict="incomplete", reason="not run: " + "; ".join(
                f"{e['name']} ({e['observed']})" for e in exps if e["status"] == "not-run"))
        else:
            self.result.update(verdict="pass", reason="")
        # Node mode: the loop is the host's one process, whose result holds the connections.
        stall = host_stall([{"node": e.node, "role": e.role, "is_dut": e.is_dut,
                             "result": e.process.result if e.process is not None
                             and e.process.result else e.result} for e in self.endpoints])
        if stall is not None:
            self.result["host_stall"] = stall
            if stall["late_ms"] >= HOST_STALL_MS:
                self.log(f"host stall: the reference {stall['role']} on {stall['node']} read a "
                         f"received frame {stall['late_ms']:.0f} ms after it arrived "
                         f"({stall['frames_over_20ms']} frame(s) over 20 ms): its host did not "
                         "run it, and timing verdicts of this run may be the machine's")
        self.log(f"verdict: {self.result['verdict'].upper()}"
                 + (f" - {self.result['reason']}" if self.result["reason"] else ""))

    def _events(self):
        seen = set()
        for ep in self.endpoints:
            if ep.events_path in seen:  # node mode: the roles of a host share its log
                continue
            seen.add(ep.events_path)
            with contextlib.suppress(OSError):
                with open(ep.events_path) as f:
                    for line in f:
                        with contextlib.suppress(json.JSONDecodeError):
                            yield ep, json.loads(line)

    def _events_with_status(self, status: str) -> int:
        return sum(1 for _, ev in self._events()
                   if ev.get("kind") == "completion" and ev.get("status") == status)

    def _max_stall_ms(self, clients) -> float | None:
        worst = None
        for c in clients:
            times = []
            with contextlib.suppress(OSError):
                with open(c.events_path) as f:
                    for line in f:
                        if '"completion"' in line:
                            with contextlib.suppress(json.JSONDecodeError, KeyError):
                                times.append(json.loads(line)["t_ns"])
            if len(times) >= 2:
                times.sort()
                gap = max(b - a for a, b in zip(times, times[1:])) / 1e6
                worst = gap if worst is None else max(worst, gap)
        return worst

    def _plot(self) -> None:
        if not self.server_caps or not self.mrct:
            return
        plan = self.sc.topology.make_plan()
        client = next((e.node for e in self.endpoints if e.role == "client"), None)
        server = next((e.node for e in self.endpoints if e.role == "server"), None)
        label_paths = {}
        if self.sc.ev_format == "srv6" and client and server:
            for e in plan.ev_paths(client, server, None, "srv6"):
                via = f" via T1 {e['t1']}" if e.get("t1") is not None else ""
                # Planes are named 1-based (= the NIC port) as in the report and the viewer.
                label_paths[(e["plane"], e["ev"])] = (f"plane {e['plane'] + 1} EV {e['ev']}"
                                                      f"{via}")

        def label(plane, wev):
            return label_paths.get((plane, wev), f"plane {plane + 1} EV {wev}")

        frames = {}
        for plane, paths in self.server_caps.items():
            frames[plane] = [f for path in paths if os.path.exists(path)
                             for f in reportlib.decode_frames(self.mrct.path, path, '"WRITE_')]
        series = reportlib.goodput_series(frames, bin_ms=10.0, path_label=label)
        markers = []
        t0_ns = series.get("t0_ns") or 0
        if t0_ns:
            for ev in self.faults:
                markers.append(((ev["t_wall_ns"] - t0_ns) / 1e6, f"{ev['fault']} {ev['phase']}"))
        if self.monitor and self.monitor.t0_wall_ns:
            self.result["t0_wall_ns"] = self.monitor.t0_wall_ns
        svg = reportlib.goodput_svg(series, f"{self.sc.name}: goodput per path "
                                    f"(seed {self.seed})", markers)
        with open(os.path.join(self.out, "goodput.svg"), "w") as f:
            f.write(svg)
        with open(os.path.join(self.out, "goodput.json"), "w") as f:
            json.dump(series, f)
        self.result["goodput_plot"] = "goodput.svg"
        self.result["goodput_paths"] = {k: v["bytes"] for k, v in series["paths"].items()}

    def _viewer(self) -> None:
        """The viewer's per-path timelines of the first requester as PNG (`mrct view --export`),
        when mrct was built with the viewer. Never affects the verdict."""
        info: dict = {"status": "not-run"}
        self.result["viewer"] = info
        sibling = os.path.join(os.path.dirname(self.mrct.path), "mrct-view")
        if self.mrct.has("view"):
            cmd = [self.mrct.path, "view"]
        elif os.access(sibling, os.X_OK):
            cmd = [sibling]
        else:
            info["reason"] = "mrct was built without the viewer (MRC_BUILD_GUI=OFF)"
            return
        client = next((e for e in self.endpoints if e.role == "client"), None)
        caps = sorted((w["port"], p) for p, w in self.capture_map.items()
                      if client and w["node"] == client.node and os.path.exists(p))
        if not caps:
            info["reason"] = "no capture of the requester"
            return
        d = os.path.join(self.out, "view")
        os.makedirs(d, exist_ok=True)
        capture = caps[0][1]
        if len(caps) > 1:
            merged = os.path.join(d, f"{client.node}.pcapng")
            if shutil.which("mergecap") and subprocess.run(
                    ["mergecap", "-F", "pcapng", "-w", merged] + [p for _, p in caps],
                    capture_output=True, timeout=120).returncode == 0:
                capture = merged
        # The capture first: --events takes several files and would swallow it.
        argv = cmd + [capture, "--export", os.path.join(self.out, "viewer.png"), "--view", "all",
                      "--no-detect"]
        events = [e.events_path for e in self.endpoints if os.path.exists(e.events_path)]
        if events:
            argv += ["--events"] + events
        decisions = os.path.join(self.out, "decisions.jsonl")
        if os.path.exists(decisions):
            argv += ["--decisions", decisions]
        report = (self.result.get("checker") or {}).get("json")
        if report and os.path.exists(report):
            argv += ["--report", report]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            info["reason"] = "mrct view --export timed out"
            return
        if proc.returncode == 0 and os.path.exists(os.path.join(self.out, "viewer.png")):
            info.update(status="ran", png="viewer.png")
            self.result["viewer_png"] = "viewer.png"
        else:
            info["reason"] = f"mrct view exited {proc.returncode}: {proc.stderr.strip()[-300:]}"
        with open(os.path.join(d, "view.stderr"), "w") as f:
            f.write(proc.stderr)

    # --------------------------------------------------------------------------------------------
    def _check(self) -> None:
        """The conformance checker over the captures and the decision log."""
        chk: dict = {"status": "not-run"}
        self.result["checker"] = chk
        if not self.mrct.has("check"):
            chk["reason"] = f"{self.mrct.path} has no `check` subcommand (conformance checker " \
                            "not built)"
            self.log(f"checker: not run: {chk['reason']}")
            return
        caps = [p for p in self.capture_map if os.path.exists(p) and os.path.getsize(p) > 24]
        if not caps:
            chk["reason"] = "no capture with frames (capture points: " \
                            f"{', '.join(self.sc.capture.points)})"
            self.log(f"checker: not run: {chk['reason']}")
            return
        d = os.path.join(self.out, "check")
        os.makedirs(d, exist_ok=True)
        profile = self._checker_profile(caps)
        prof_path = os.path.join(d, "dut-profile.json")
        with open(prof_path, "w") as f:
            json.dump(profile, f, indent=2)
        outs = {"json": os.path.join(d, "report.json"), "junit": os.path.join(d, "report.xml"),
                "markdown": os.path.join(d, "report.md")}
        # Captures first: --decisions, --only and --skip take several values each.
        argv = [self.mrct.path, "check"]
        for path in caps:
            where = self.capture_map[path]
            argv.append(f"{path}@{where['node']}:{where['port']}")
        argv += ["--profile", prof_path, "--json", outs["json"], "--junit", outs["junit"],
                 "--markdown", outs["markdown"]]
        decisions = os.path.join(self.out, "decisions.jsonl")
        if os.path.exists(decisions):
            argv += ["--decisions", decisions]  # its closing summary line is skipped by mrct check
        skip = dict(dutlib.rules_to_skip(self.opts.dut, self.mrct.rules()))
        for rid in self.sc.expect.skip_rules:
            skip[rid] = "skipped by the scenario"
        for rid in self.sc.expect.rules:
            argv += ["--only", rid]
        for rid in sorted(skip):
            argv += ["--skip", rid]
        t = time.monotonic()
        self.log(f"checker: {len(caps)} capture(s)"
                 + (", decision log" if os.path.exists(decisions) else ""))
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
        self.result["timings"]["check_s"] = round(time.monotonic() - t, 3)
        with open(os.path.join(d, "check.stdout"), "w") as f:
            f.write(proc.stdout)
        with open(os.path.join(d, "command.txt"), "w") as f:
            # Rerun with --annotate FILE.pcapng for a merged capture with a comment on every
            # violating frame (not made by default: it is another copy of every capture).
            f.write(dutlib.describe_command(argv) + "\n")
        with open(os.path.join(d, "check.stderr"), "w") as f:
            f.write(proc.stderr)
        chk.update(rc=proc.returncode, command=dutlib.describe_command(argv),
                   skipped={k: v for k, v in skip.items()},
                   tolerances=profile.get("tolerances", {}))
        verdict = CHECK_VERDICTS.get(proc.returncode)
        if verdict is None:
            chk.update(status="not-run", reason=f"mrct check exited {proc.returncode}: "
                       f"{proc.stderr.strip()[-400:]}")
            self.log(f"checker: {chk['reason']}")
            return
        report = {}
        with contextlib.suppress(OSError, json.JSONDecodeError):
            with open(outs["json"]) as f:
                report = json.load(f)
        chk.update(checker_outcome(proc.returncode, report),
                   markdown=outs["markdown"], json=outs["json"], junit=outs["junit"])
        self.log(f"checker: {chk['verdict']} {chk['counts']}"
                 + (" failed: " + ", ".join(r["id"] for r in chk["failed"]) if chk["failed"]
                    else "")
                 + (" inconclusive: " + "; ".join(chk["inconclusive"])
                    if chk["inconclusive"] else ""))

    def _checker_caps(self) -> dict:
        """Checker capabilities of the QPs: a QP's responder is the server, its requester the
        client; with a DUT in one role the capabilities that describe the other role come from
        the reference endpoint."""
        dut, ref = self.opts.dut, dutlib.REFERENCE.checker_capabilities
        server = dut.checker_capabilities if dut.plays("server") else ref
        client = dut.checker_capabilities if dut.plays("client") else ref
        return {"trim_nack": server["trim_nack"], "svc_time": server["svc_time"],
                "trim_nack_dest_unsupported": client["trim_nack_dest_unsupported"],
                # dynamic MPR is enabled only when both sides agreed
                "dynamic_mpr": server["dynamic_mpr"] and client["dynamic_mpr"]}

    def _checker_profile(self, caps: list[str]) -> dict:
        sc = self.sc
        plan = sc.topology.make_plan()
        nodes = sorted({e.node for e in self.endpoints}, key=lambda h: plan.host(h).number)
        pr = sc.profiles
        lin, exp = (int(x) for x in pr.retry.split(":"))
        defaults: dict = {"ev_format": sc.ev_format, "mpr": pr.mpr, "mpr_dest": pr.mpr,
                          "max_wimm_dest": pr.wimm, "timeout": pr.timeout,
                          "retry": {"linear": lin, "exp": exp},
                          "capabilities": self._checker_caps()}
        if pr.pmtu:
            defaults["pmtu"] = pr.pmtu
        if sc.ev_format == "srv6" and not pr.ev_profile:
            evs = pr.evs_per_plane * plan.planes if pr.evs_per_plane else None
            pairs = sc.pairs(plan)
            c, s = pairs[0]
            # The outer DA of each EV (MRC-EV-007) is per host pair: the defaults only carry it
            # when every QP runs between the same two hosts.
            one_pair = len({(a, b) for a, b in pairs}) == 1
            defaults["evs"] = [{"wev": e["ev"], "port": e["port"],
                                **({"da": e["outer_da"]} if one_pair and e.get("outer_da")
                                   else {})}
                               for e in plan.ev_paths(c, s, evs, "srv6")]
        cc = _nscc_numbers(pr.cc_profile) if pr.cc != "none" else None
        if cc:
            defaults["cc"] = cc
        profile = {
            "name": sc.name,
            "comment": "generated by mrct run from the scenario and the fabric plan",
            "nodes": [{"name": n, "addrs": [str(plan.host(n).gid)] +
                       [str(p.addr) for p in plan.ports_of(n)]} for n in nodes],
            "captures": {os.path.basename(p): {k: v for k, v in self.capture_map[p].items()
                                               if k in ("node", "port", "side")}
                         for p in caps},
            "defaults": defaults,
        }
        if sc.topology.routing == "srv6" and sc.ev_format == "srv6":
            profile["srv6_locator"] = str(plan.locator.network_address)
        tol = dict(SOFTWARE_FABRIC_TOLERANCES)
        if any(self.capture_map[p].get("side") == "link" for p in caps):
            # The requester is seen from the switch end of its cable: a SACK captured there
            # still has to cross the link and the DUT's receive path before it can react.
            tol["reaction_ns"] = LINK_SIDE_REACTION_NS
        profile["tolerances"] = {**tol, **sc.expect.tolerances}
        return profile


# `mrct check` exit codes -> the checker verdict a scenario expects ("pass" / "fail") or
# "inconclusive" (exit 3: nothing recognised as MRC, or nothing to judge for a rule family the run
# asked for). Any other exit is a checker that did not run.
CHECK_VERDICTS = {0: "pass", 1: "fail", 3: "inconclusive"}


def checker_outcome(rc: int, report: dict) -> dict:
    """What result.json keeps of a `mrct check` run: its verdict from the exit code and, from the
    JSON report, the rule statuses, the failed and warned rules (with their first evidence, which
    names the margin: "23.08 ms ... limit 22.62 ms") and why a run was inconclusive."""
    rules = report.get("results") or report.get("rules") or []

    def first(r):
        ev = r.get("evidence") or []
        return ev[0].get("message", "") if ev else ""

    return {"status": "ran", "rc": rc, "verdict": CHECK_VERDICTS[rc],
            "report_verdict": report.get("verdict"),
            "inconclusive": list(report.get("verdict_reasons") or []),
            "unrecognised": [{"reason": u.get("reason"), "frames": u.get("frames")}
                             for u in (report.get("unrecognised") or [])][:10],
            "counts": _count_statuses(rules),
            # Data retransmissions the checker saw on the wire (each PSN's copies after its
            # first), for a DUT whose API cannot report its own (mrc-perf: mrc.h has no call).
            "retransmissions": (sum(int(f.get("retransmissions") or 0) for f in report["flows"])
                                if isinstance(report.get("flows"), list) else None),
            "rules": [{"id": r.get("id"), "status": r.get("status"),
                       "violations": r.get("violations"), "reason": r.get("reason", "")}
                      for r in rules],
            "failed": [{"id": r.get("id"), "statement": r.get("statement", ""),
                        "violations": r.get("violations"), "first": first(r)}
                       for r in rules if r.get("status") == "fail"],
            "warned": [{"id": r.get("id"), "statement": r.get("statement", ""),
                        "violations": r.get("violations"), "first": first(r)}
                       for r in rules if r.get("status") == "warn"]}


def checker_expectation(expected: str, chk: dict) -> tuple[str, str]:
    """(observed, status) of the "checker verdict" expectation. An inconclusive checker is never
    a pass, whatever the scenario expected: its status is "inconclusive"."""
    failed_ids = [f["id"] for f in chk.get("failed", [])]
    verdict = chk.get("verdict", "?")
    if verdict == "inconclusive":
        return ("inconclusive: " + "; ".join(chk.get("inconclusive") or ["no reason given"]),
                "inconclusive")
    observed = verdict + (f" ({', '.join(failed_ids)})" if failed_ids else "")
    return observed, "pass" if verdict == expected else "fail"


def _nscc_numbers(path: str) -> dict | None:
    """base_rtt and target_delay of an NSCC profile file, for MRC-CC-002 (None: not NSCC)."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            t = tomllib.load(f).get("nscc", {})
        base, target = int(t["base_rtt"]), int(t["target_delay"])
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None
    return {"base_rtt_ns": base, "target_delay_ns": target}


def _count_statuses(rules: list[dict]) -> dict:
    out: dict = {}
    for r in rules:
        out[r.get("status")] = out.get(r.get("status"), 0) + 1
    return out


def _rule_status(statuses: dict, rid: str) -> str | None:
    if rid in statuses:
        return statuses[rid]
    matching = [st for k, st in statuses.items() if k and k.startswith(rid + "-")]
    if not matching:
        return None
    return "fail" if "fail" in matching else matching[0]


def exit_code(result: dict) -> int:
    if result.get("usage_error"):
        return EXIT_USAGE
    if result["verdict"] in ("pass", "unsupported"):
        return EXIT_PASS
    if result["verdict"] == "interrupted":
        return 130
    return EXIT_FAIL


def print_verdict(result: dict, out=None) -> None:
    out = out or sys.stdout
    v = result["verdict"]
    line = f"{result['scenario']}: {v.upper()}"
    if result.get("reason"):
        line += f" - {result['reason']}"
    print(line, file=out)
    if result.get("goodput_gbps") is not None:
        extra = ""
        if result.get("goodput_pct_of_reference") is not None:
            extra = f" ({result['goodput_pct_of_reference']} % of the fault-free run)"
        print(f"goodput: {result['goodput_gbps']} Gbit/s{extra}", file=out)
    print(f"seed: {result['seed']}  (replay: mrct run {result['file']} --seed {result['seed']})",
          file=out)
    print(f"artifacts: {result['artifacts']}", file=out)
    print(f"summary: {os.path.join(result['artifacts'], 'summary.md')}", file=out)


def parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[a-z_]+\.[a-z_0-9]+", key):
            raise UsageError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. "
                             "traffic.messages=200")
        out[key] = value
    return out

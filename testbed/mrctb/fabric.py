"""Builds a Plan into Mininet namespaces and tears it down without leaving anything behind.

    from mrctb import plan, fabric
    with fabric.Fabric(plan.clos(2, 2, 2, 2), mode="srv6") as fab:
        fab.ping("h1", "fd00:101:4::2", dev="h1-p2")

Every node (hosts and routers) is a Mininet host (an unnamed network namespace with a shell);
links are plain veth pairs (mininet.link.Link); there are no switches, no OVS and no controller.
Routers are hosts with IPv6 forwarding on. Cleanup never uses `mn -c` or mininet.clean: it stops
what this process started and verifies that nothing is left.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from . import capture as capturelib
from . import config as configlib
from . import plan as planlib
from . import procs

TESTBED_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"  # Debian's interpreter: the one that can import mininet


class FabricError(RuntimeError):
    pass


class CleanupError(FabricError):
    """Something of ours survived teardown (listed in .leftovers)."""

    def __init__(self, message: str, leftovers: dict):
        super().__init__(message)
        self.leftovers = leftovers


def require_root() -> None:
    if os.geteuid() != 0:
        raise FabricError("building a fabric needs root (network namespaces, veth, tcpdump)")
    for tool in ("mnexec", "ip", "sysctl", "ethtool", "tcpdump"):
        if shutil.which(tool) is None:
            raise FabricError(f"required tool {tool!r} not found in PATH")


def _import_mininet():
    try:
        from mininet.link import Intf, Link
        from mininet.net import Mininet
        from mininet.node import Host
    except ImportError as err:
        raise FabricError(f"cannot import mininet ({err}); run with Debian's {PYTHON} "
                          "(apt package mininet)") from None
    return Mininet, Host, Link, Intf


class Fabric:
    """A built plan. Use as a context manager; cleanup also runs on SIGINT and SIGTERM."""

    def __init__(self, plan: planlib.Plan, mode: str = "srv6", workdir: str | None = None,
                 handle_signals: bool = True, log=None, delete_links: bool = False):
        planlib._check_mode(mode)
        self.plan = plan
        self.mode = mode
        self.workdir = workdir
        self.handle_signals = handle_signals
        self.delete_links = delete_links  # True: Mininet deletes each veth one by one at stop
        self.log = log or (lambda msg: None)
        self.net = None
        self.timings: dict[str, float] = {}
        self.captures: list[capturelib.Capture] = []
        self.cleanup_report: dict | None = None
        self._nodes: dict[str, object] = {}
        self._pids: dict[str, int] = {}
        self._namespaces: set[str] = set()
        self._shell_pids: set[int] = set()
        self._procs: list[subprocess.Popen] = []
        self._state_path: str | None = None
        self._old_handlers: dict[int, object] = {}
        self._pending_signal: int | None = None
        self._down: set[str] = set()  # interfaces set administratively down by set_link()
        self._stopped = False
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------
    # lifecycle
    # ----------------------------------------------------------------------------------------
    def __enter__(self) -> "Fabric":
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.stop()
        except CleanupError as err:
            if exc is None:
                raise
            print(f"mrctb: cleanup after {exc_type.__name__}: {err}", file=sys.stderr)
        return False

    def start(self) -> "Fabric":
        require_root()
        if self.workdir is None:
            self.workdir = tempfile.mkdtemp(prefix="mrctb-")
        os.makedirs(self.workdir, exist_ok=True)
        self._install_signal_handlers()
        try:
            self._build()
        except BaseException:
            try:
                self.stop()
            except CleanupError as err:
                print(f"mrctb: cleanup after failed build: {err}", file=sys.stderr)
            raise
        return self

    def _build(self) -> None:
        Mininet, Host, Link, Intf = _import_mininet()

        class PlanIntf(Intf):
            # Interfaces are configured in one batch per node (config.py); Intf's default
            # config would spend four ifconfig round trips per interface on the node's pty.
            def config(self, **_params):
                return {}

        t_start = time.monotonic()
        self.net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False)
        for name in self.plan.nodes():
            node = self.net.addHost(name, cls=Host, ip=None, inNamespace=True)
            self._nodes[name] = node
            self._pids[name] = node.pid
            self._shell_pids.add(node.pid)
            ns = procs.netns_of(node.pid)
            if ns is None:
                raise FabricError(f"node {name}: shell pid {node.pid} vanished")
            self._namespaces.add(ns)
            self._save_state()
        t_nodes = time.monotonic()
        for link in self.plan.links:
            self.net.addLink(self._nodes[link.a.node], self._nodes[link.b.node], cls=Link,
                             intf=PlanIntf, intfName1=link.a.ifname, intfName2=link.b.ifname,
                             addr1=link.a.mac, addr2=link.b.mac)
        t_links = time.monotonic()
        self.net.build()
        self.net.start()
        t_mn = time.monotonic()
        self._configure()
        t_end = time.monotonic()
        self.timings = {"nodes_s": t_nodes - t_start, "links_s": t_links - t_nodes,
                        "mininet_build_s": t_mn - t_links, "configure_s": t_end - t_mn,
                        "total_s": t_end - t_start}
        self.log(f"built {self.plan.shape} ({len(self.plan.nodes())} nodes, "
                 f"{len(self.plan.links)} links, mode {self.mode}) in {t_end - t_start:.2f} s")

    def _configure(self) -> None:
        configs = configlib.all_configs(self.plan, self.mode)
        running = []
        for name, cfg in configs.items():
            proc = self._nodes[name].popen(["sh", "-s"], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            running.append((name, proc, cfg.script()))
        errors = []
        # Feed and collect in parallel threads: each script's stdin is written while the others
        # already run, so the kernel work overlaps on both cores.
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            futures = {pool.submit(p.communicate, s.encode(), 60): n for n, p, s in running}
            for fut in concurrent.futures.as_completed(futures):
                name = futures[fut]
                out, err = fut.result()
                proc = next(p for n, p, _ in running if n == name)
                if proc.returncode != 0:
                    errors.append(f"{name}: rc={proc.returncode}: "
                                  f"{(err or out).decode(errors='replace').strip()}")
        if errors:
            raise FabricError("node configuration failed:\n  " + "\n  ".join(sorted(errors)))

    def _save_state(self) -> None:
        self._state_path = procs.write_state(self._namespaces, self.plan.ifnames(),
                                             sorted(self._shell_pids))

    def stop(self) -> dict:
        """Stops captures and processes, stops Mininet, verifies nothing is left. Idempotent."""
        with self._lock:
            if self._stopped:
                return self.cleanup_report or {}
            self._stopped = True
        self._defer_signals()
        t0 = time.monotonic()
        notes = []
        try:
            try:
                capturelib.stop_all(self.captures)
            except Exception as err:  # keep tearing down whatever happens
                notes.append(f"captures: {err}")
                for cap in self.captures:
                    if cap.proc is not None and cap.proc.poll() is None:
                        cap.proc.kill()
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
                try:
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    notes.append(f"pid {proc.pid} did not exit")
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
            # Anything else living in our namespaces (started through node.cmd('... &'), or by a
            # user through mnexec) goes now; the node shells are left to net.stop().
            strays = [p for p in procs.pids_in_netns(self._namespaces) if p not in self._shell_pids]
            left = procs.kill_all(strays)
            if left:
                notes.append(f"could not kill {left}")
            if self.net is not None:
                if not self.delete_links:
                    # Link.stop() deletes every veth with two `ip link del` through the node ptys,
                    # and each deletion waits for an RCU grace period: ~45 ms per link here, 14 s
                    # for a 320-link fabric. The veths live only inside the node namespaces,
                    # which the kernel dismantles in one batch once the node shells exit, so
                    # net.stop() skips them; _verify_clean() checks that nothing is left.
                    self.net.links = []
                try:
                    self.net.stop()
                except Exception as err:
                    notes.append(f"net.stop(): {err}")
            leftovers = self._verify_clean()
            if any(leftovers.values()):
                # Last resort for our own processes only; then report.
                procs.kill_all(leftovers["pids"])
                leftovers = self._verify_clean(wait_s=1.0)
            self.timings["stop_s"] = time.monotonic() - t0
            self.cleanup_report = {"leftovers": leftovers, "notes": notes,
                                   "stop_s": self.timings["stop_s"]}
            if not any(leftovers.values()):
                procs.remove_state(self._state_path)
                self._state_path = None
            else:
                raise CleanupError(f"left behind after teardown: {leftovers}", leftovers)
            return self.cleanup_report
        finally:
            self._restore_signals()

    def _verify_clean(self, wait_s: float = 3.0) -> dict:
        ifnames = set(self.plan.ifnames()) | {configlib.SID_DEV}
        deadline = time.monotonic() + wait_s
        while True:
            pids = procs.pids_in_netns(self._namespaces)
            pids += [p.pid for p in self._procs if procs.alive(p.pid) and p.pid not in pids]
            pids += [p for p in self._shell_pids if procs.alive(p) and p not in pids]
            root_ifs = sorted(ifnames & procs.root_ifnames())
            if (not pids and not root_ifs) or time.monotonic() >= deadline:
                return {"pids": sorted(pids), "root_interfaces": root_ifs}
            time.sleep(0.05)

    # ----------------------------------------------------------------------------------------
    # signals: SIGINT / SIGTERM unwind through __exit__, and cannot interrupt the cleanup
    # ----------------------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum, _frame):
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, on_signal)

    def _defer_signals(self) -> None:
        if not self._old_handlers:
            return

        def remember(signum, _frame):
            self._pending_signal = signum

        for sig in self._old_handlers:
            signal.signal(sig, remember)

    def _restore_signals(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers = {}
        pending, self._pending_signal = self._pending_signal, None
        if pending is not None and sys.exc_info()[0] is None:
            if pending == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + pending)

    # ----------------------------------------------------------------------------------------
    # running things inside nodes
    # ----------------------------------------------------------------------------------------
    def pid(self, node: str) -> int:
        try:
            return self._pids[node]
        except KeyError:
            raise FabricError(f"no node {node!r}") from None

    def node(self, name: str):
        try:
            return self._nodes[name]
        except KeyError:
            raise FabricError(f"no node {name!r}") from None

    def namespaces(self) -> set[str]:
        return set(self._namespaces)

    def run(self, node: str, args: list[str], timeout: float = 30, check: bool = True,
            input: bytes | str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
        """Runs a command in a node's namespace and waits for it."""
        text = isinstance(input, str)
        proc = subprocess.run(["mnexec", "-a", str(self.pid(node))] + list(args), input=input,
                              capture_output=True, timeout=timeout, text=text or None,
                              env=env)
        if check and proc.returncode != 0:
            err = proc.stderr if text else (proc.stderr or b"").decode(errors="replace")
            raise FabricError(f"{node}: {' '.join(args)}: rc={proc.returncode}: {err.strip()}")
        return proc

    def sh(self, node: str, script: str, timeout: float = 30, check: bool = True) -> str:
        proc = self.run(node, ["sh", "-c", script], timeout=timeout, check=check)
        return proc.stdout.decode(errors="replace")

    def popen(self, node: str, args: list[str], **kwargs) -> subprocess.Popen:
        """Starts a process in a node's namespace; it is killed at teardown if still running."""
        proc = self.node(node).popen(list(args), **kwargs)
        self._procs.append(proc)
        return proc

    def traffic(self, node: str, args: list[str], **kwargs) -> subprocess.Popen:
        """Starts `python3 -m mrctb.traffic ARGS` in a node."""
        env = dict(os.environ)
        env["PYTHONPATH"] = TESTBED_DIR + os.pathsep + env.get("PYTHONPATH", "")
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return self.popen(node, [PYTHON, "-m", "mrctb.traffic"] + list(args), env=env, **kwargs)

    # ----------------------------------------------------------------------------------------
    # links
    # ----------------------------------------------------------------------------------------
    def _link_ends(self, name: str, end: str) -> list[planlib.Port]:
        link = self.plan.link(name)
        if end == "both":
            return [link.a, link.b]
        if end in ("a", link.a.node, link.a.ifname):
            return [link.a]
        if end in ("b", link.b.node, link.b.ifname):
            return [link.b]
        raise FabricError(f"link {link.name}: end {end!r} is neither a/b, a node nor an "
                          "interface of the link")

    def set_link(self, name: str, up: bool, end: str = "both") -> None:
        """Administratively sets one or both interfaces of a link down or up.

        Down: the kernel drops the routes and neighbours through the interface (the peer only
        sees carrier loss, its routes stay and point into a dead link). Up: the interface comes
        back and the node's static neighbours and routes are re-applied."""
        state = "up" if up else "down"
        ports = self._link_ends(name, end)
        for port in ports:
            self.run(port.node, ["ip", "link", "set", "dev", port.ifname, state])
            if up:
                self._down.discard(port.ifname)
            else:
                self._down.add(port.ifname)
        if up:
            for node in {port.node for port in ports}:
                self.restore_static(node)

    def restore_static(self, node: str) -> None:
        """Re-applies a node's static neighbours and routes (idempotent)."""
        lines = configlib.restore_lines(self.plan, node, self.mode, frozenset(self._down))
        batch = "\n".join(lines) + "\n"
        self.run(node, ["ip", "-6", "-batch", "-"], input=batch.encode())

    def link_down(self, name: str, end: str = "both") -> None:
        self.set_link(name, False, end)

    def link_up(self, name: str, end: str = "both") -> None:
        self.set_link(name, True, end)

    def flap(self, name: str, down_s: float, end: str = "both") -> dict:
        """Takes a link down for down_s seconds; returns the measured down interval."""
        t_down = time.monotonic_ns()
        self.link_down(name, end)
        t_after_down = time.monotonic_ns()
        time.sleep(max(0.0, down_s - (t_after_down - t_down) / 1e9))
        t_up = time.monotonic_ns()
        self.link_up(name, end)
        t_after_up = time.monotonic_ns()
        return {"link": self.plan.link(name).name, "down_ns": t_down, "down_done_ns": t_after_down,
                "up_ns": t_up, "up_done_ns": t_after_up,
                "down_s": (t_after_up - t_after_down) / 1e9}

    def link_state(self, name: str) -> dict[str, dict]:
        """{ifname: {"admin_up", "carrier", "addrs"}} for both ends of a link."""
        out = {}
        for port in self._link_ends(name, "both"):
            link = json.loads(self.run(port.node, ["ip", "-j", "link", "show", "dev",
                                                   port.ifname]).stdout)[0]
            addrs = json.loads(self.run(port.node, ["ip", "-j", "-6", "addr", "show", "dev",
                                                    port.ifname]).stdout)
            out[port.ifname] = {
                "admin_up": "UP" in link.get("flags", []),
                "carrier": "LOWER_UP" in link.get("flags", []),
                "addrs": [a["local"] for entry in addrs for a in entry.get("addr_info", [])
                          if a.get("scope") == "global"],
            }
        return out

    def counters(self, node: str, ifname: str) -> dict:
        data = json.loads(self.run(node, ["ip", "-j", "-s", "link", "show", "dev", ifname]).stdout)
        stats = data[0]["stats64"]
        return {"rx_packets": stats["rx"]["packets"], "tx_packets": stats["tx"]["packets"],
                "rx_bytes": stats["rx"]["bytes"], "tx_bytes": stats["tx"]["bytes"],
                "rx_dropped": stats["rx"]["dropped"], "tx_dropped": stats["tx"]["dropped"]}

    # ----------------------------------------------------------------------------------------
    # captures
    # ----------------------------------------------------------------------------------------
    def capture(self, ifname: str, path: str | None = None, bpf_filter: str | None = None,
                snaplen: int | None = None) -> capturelib.Capture:
        """Starts tcpdump on any host or router port; returns once tcpdump is listening.
        Default snap length: the whole frame at the plan's MTU (Ethernet + one VLAN tag)."""
        port = self.plan.port(ifname)
        if snaplen is None:
            snaplen = self.plan.mtu + 18
        if path is None:
            path = os.path.join(self.workdir, f"{port.node}-{ifname}.pcap")
        cap = capturelib.Capture(lambda n, cmd, **kw: self.node(n).popen(cmd, **kw), port.node,
                                 ifname, path, snaplen, bpf_filter)
        self.captures.append(cap)
        cap.start()
        return cap

    def stop_captures(self) -> list[capturelib.CaptureResult]:
        return capturelib.stop_all(self.captures)

    # ----------------------------------------------------------------------------------------
    # reachability and SRv6 helpers
    # ----------------------------------------------------------------------------------------
    def ping(self, src: str, dst_addr: str, dev: str | None = None, count: int = 1,
             timeout_s: float = 2.0) -> bool:
        args = ["ping", "-6", "-n", "-q", "-c", str(count), "-W", str(timeout_s)]
        if dev:
            args += ["-I", dev]
        return self.run(src, args + [str(dst_addr)], check=False,
                        timeout=timeout_s * count + 5).returncode == 0

    def ping_matrix(self, planes: list[int] | None = None, target: str = "port",
                    workers: int = 16) -> dict[tuple[str, str, int], bool]:
        """Pings every ordered host pair on every plane from the source's plane port (ping -I).

        target "port": the destination's port address on that plane (only routed in that plane);
        target "gid": the destination's GID, with the source bound to the plane port."""
        if target not in ("port", "gid"):
            raise FabricError(f"ping_matrix target {target!r}: expected 'port' or 'gid'")
        planes = list(range(self.plan.planes)) if planes is None else planes
        jobs = []
        for p in planes:
            for src in self.plan.hosts.values():
                for dst in self.plan.hosts.values():
                    if src.name != dst.name:
                        addr = dst.ports[p].addr if target == "port" else dst.gid
                        jobs.append((src.name, dst.name, p, str(addr), src.ports[p].ifname))
        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(self.ping, s, a, dev): (s, d, p) for s, d, p, a, dev in jobs}
            for fut in concurrent.futures.as_completed(futures):
                results[futures[fut]] = fut.result()
        return results

    def add_srv6_route(self, src: str, dst: str, plane: int, t1: int | None = None,
                       table: int | None = None, prefix: str | None = None) -> planlib.Srv6Path:
        """Makes the kernel of `src` encapsulate traffic for dst's GID (or `prefix`) on one SRv6
        path (H.Encaps.Red, no SRH). Default table: the plane's policy table, used by sockets
        bound to the plane port."""
        if self.mode != "srv6":
            raise FabricError("add_srv6_route needs a fabric built in srv6 mode")
        path = self.plan.srv6_path(src, dst, plane, t1)
        table = planlib.PLANE_TABLE_BASE + plane if table is None else table
        prefix = prefix or f"{self.plan.host(dst).gid}/128"
        self.run(src, ["ip", "-6", "route", "replace", prefix, "table", str(table), "encap",
                       "seg6", "mode", "encap.red", "segs", str(path.outer_da), "dev", path.egress])
        return path

    def del_route(self, node: str, prefix: str, table: int | None = None) -> None:
        args = ["ip", "-6", "route", "del", prefix]
        if table is not None:
            args += ["table", str(table)]
        self.run(node, args)

    def write_plan(self, directory: str | None = None, evs: int | None = None) -> dict[str, str]:
        directory = directory or self.workdir
        os.makedirs(directory, exist_ok=True)
        files = {"plan": os.path.join(directory, "plan.json"),
                 "paths": os.path.join(directory, "paths.json")}
        with open(files["plan"], "w") as f:
            f.write(planlib.dumps(self.plan.to_json(self.mode)))
        with open(files["paths"], "w") as f:
            f.write(planlib.dumps(self.plan.paths_json(self.mode, evs)))
        return files


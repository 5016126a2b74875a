"""Real NICs as scenario hosts (mrctb/physical.py).

No root: [hosts.<name>] parsing and its errors (scenario key named), and the checks of a
mapping against the machine's interfaces (missing, MTU too small, in use) on canned `ip -j`
output. Root (test_physical_root, through run_root.py): a veth pair stands in for the cable and
a namespace of the test's own for the DUT machine; the fabric takes one end as h2's port, the
DUT namespace is configured by host_script(), and h1 reaches h2 across the emulated router and
the cable; at teardown the interface is back under its own name and MTU.
"""

import json
import os
import subprocess
import unittest

import _util
from mrctb import physical, plan as planlib, scenario as sclib, tools


def _mrct():
    try:
        return tools.find(None, ("endpoint",))
    except tools.ToolError:
        return None


MRCT = _mrct() if os.geteuid() == 0 else None

BASE = """
[scenario]
name = "phys"
[topology]
shape = "single_router"
planes = {planes}
hosts = 2
"""


def load(hosts_toml: str, planes: int = 1):
    return sclib.loads(BASE.format(planes=planes) + hosts_toml, "phys.toml")


class Parse(unittest.TestCase):
    def test_one_plane_iface(self):
        sc = load('[hosts.h2]\niface = "enp1s0"\n')
        self.assertEqual([(m.host, m.plane, m.iface) for m in sc.physical], [("h2", 0, "enp1s0")])

    def test_per_plane_list_with_an_emulated_plane(self):
        sc = load('[hosts.h1]\nifaces = ["", "enp2s0"]\n', planes=2)
        self.assertEqual([(m.host, m.plane, m.iface) for m in sc.physical], [("h1", 1, "enp2s0")])

    def test_errors_name_the_key(self):
        cases = [
            ('[hosts.h9]\niface = "x"\n', "hosts.h9", "no host 'h9'"),
            ('[hosts.h2]\nifce = "x"\n', "hosts.h2.ifce", "did you mean 'iface'"),
            ('[hosts.h2]\niface = 3\n', "hosts.h2.iface", "must be a string"),
            ('[hosts.h2]\nifaces = ["a", "b"]\n', "hosts.h2.ifaces", "2 name(s) for the 1"),
            ('[hosts.h1]\niface = "a"\n[hosts.h2]\niface = "a"\n', "hosts.h2.iface",
             "already the cable of h1"),
            ('[hosts.h2]\niface = "a/b"\n', "hosts.h2.iface", "not an interface name"),
        ]
        for text, key, words in cases:
            with self.subTest(key=key):
                with self.assertRaises(sclib.ScenarioError) as cm:
                    load(text)
                self.assertIn(key, str(cm.exception))
                self.assertIn(words, str(cm.exception))
        with self.assertRaises(sclib.ScenarioError) as cm:
            load('[hosts.h1]\niface = "a"\n', planes=2)
        self.assertIn("hosts.h1.iface", str(cm.exception))
        self.assertIn("give ifaces", str(cm.exception))


def fake_ip(links: dict, routes=()):
    """An `ip -j` stand-in: links by name ({"mtu", "max_mtu", "addr_info", "master"})."""
    def ip(args):
        if args[0] in ("route", "-6"):
            return list(routes) if args[0] == "route" else []
        name = args[-1]
        if name not in links:
            return []
        return [dict({"ifname": name, "link_type": "ether", "mtu": 1500, "max_mtu": 65535,
                      "addr_info": []}, **links[name])]
    return ip


class Problems(unittest.TestCase):
    def setUp(self):
        self.plan = planlib.single_router(1, 2)

    def check(self, links, routes=(), exists=True):
        m = [physical.Mapping("h2", 0, "nic0", ("hosts", "h2", "iface"))]
        return physical.problems(m, self.plan, ip=fake_ip(links, routes),
                                 exists=lambda _p: exists)

    def test_good(self):
        self.assertEqual(self.check({"nic0": {"addr_info": [
            {"family": "inet6", "local": "fe80::1", "scope": "link"}]}}), [])

    def test_missing(self):
        m = [physical.Mapping("h2", 0, "mrcnosuch0", ("hosts", "h2", "iface"))]
        out = physical.problems(m, self.plan)  # the real /sys/class/net
        self.assertEqual(len(out), 1)
        self.assertEqual(out[0][0], ("hosts", "h2", "iface"))
        self.assertIn("mrcnosuch0 (for h2 plane 0): no such interface", out[0][1])

    def test_mtu_too_small(self):
        out = self.check({"nic0": {"max_mtu": 1500}})
        self.assertEqual(len(out), 1)
        self.assertIn(f"MTU at most 1500, the fabric needs {self.plan.mtu}", out[0][1])

    def test_in_use(self):
        for links, routes, words in [
            ({"nic0": {"addr_info": [{"local": "192.0.2.1", "scope": "global"}]}}, (),
             "in use: it holds 192.0.2.1"),
            ({"nic0": {"master": "br0"}}, (), "in use: a port of br0"),
            ({"nic0": {}}, ({"dst": "default", "dev": "nic0"},), "routes through it (default)"),
        ]:
            with self.subTest(words=words):
                out = self.check(links, routes)
                self.assertEqual(len(out), 1)
                self.assertIn(words, out[0][1])

    def test_not_ethernet(self):
        out = self.check({"nic0": {"link_type": "none"}})
        self.assertIn("not an Ethernet interface", out[0][1])


class Wiring(unittest.TestCase):
    def test_sheet_and_script(self):
        plan = planlib.single_router(1, 2)
        m = [physical.Mapping("h2", 0, "enp1s0", ("hosts", "h2", "iface"))]
        w = physical.wiring(plan, "srv6", m)
        port = plan.ports_of("h2")[0]
        self.assertEqual(w["ports"][0]["tester_iface"], "enp1s0")
        self.assertEqual(w["ports"][0]["dut_addr"], f"{port.addr}/64")
        self.assertEqual(w["ports"][0]["dut_mac"], port.mac)
        self.assertEqual(w["ports"][0]["router_port"], port.peer.ifname)
        s = physical.host_script(plan, "srv6", "h2")
        self.assertIn(f"ip link set dev {port.ifname} address {port.mac} mtu {plan.mtu} up", s)
        self.assertIn(f"addr add {port.addr}/64 dev {port.ifname}", s)


@_util.requires_root
class StandInCable(unittest.TestCase):
    """A veth pair is the cable, a namespace the DUT machine."""

    def test_h2_on_a_tester_interface(self):
        from mrctb import fabric
        pid = os.getpid()
        ns, tester_if = f"mrcdut{pid}", f"mrcc{pid}"
        plan = planlib.single_router(1, 2)
        port = plan.ports_of("h2")[0]
        mapping = [physical.Mapping("h2", 0, tester_if, ("hosts", "h2", "iface"))]
        run = lambda *a: subprocess.run(list(a), check=True, capture_output=True)  # noqa: E731
        run("ip", "netns", "add", ns)
        try:
            # The DUT's end is named as the plan's host port (host_script configures it).
            run("ip", "link", "add", tester_if, "mtu", "1500", "type", "veth", "peer", "name",
                port.ifname, "netns", ns)
            self.assertEqual(physical.problems(mapping, plan), [])
            with _util.TempDir() as tmp:
                fab = fabric.Fabric(plan, "srv6", workdir=tmp)
                fab.start()
                try:
                    attached = physical.attach(fab, mapping)
                    script = physical.host_script(plan, "srv6", "h2")
                    subprocess.run(["ip", "netns", "exec", ns, "sh", "-s"], input=script.encode(),
                                   check=True, capture_output=True)
                    # The cable: the router reaches the DUT's port, h1 reaches it through the
                    # router, by port address and by GID (the host routes of the plan).
                    self.assertTrue(fab.ping(port.peer.node, str(port.addr)))
                    self.assertTrue(fab.ping("h1", str(port.addr)))
                    self.assertTrue(fab.ping("h1", str(plan.host("h2").gid), count=2))
                    self.assertEqual(physical.detach(fab, attached), [])
                    attached = []
                finally:
                    if attached:
                        physical.detach(fab, attached)
                    report = fab.stop()
                self.assertFalse(any(report["leftovers"].values()), report)
            # Back in this namespace, own name, own MTU.
            info = subprocess.run(["ip", "-j", "link", "show", "dev", tester_if],
                                  capture_output=True, text=True, check=True).stdout
            self.assertIn('"mtu":1500', info.replace(" ", ""))
        finally:
            subprocess.run(["ip", "link", "del", tester_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


RUN = """
[scenario]
name = "physical-h2"
[topology]
shape = "single_router"
planes = 2
hosts = 2
[hosts.h2]
ifaces = ["{t0}", "{t1}"]
netns = "{ns}"
[traffic]
pairs = [["h1", "h2"]]
size = "64K"
messages = 200
[capture]
points = ["wire"]
"""


@_util.requires_root
@unittest.skipIf(MRCT is None, "no mrct binary with the endpoint subcommand")
class RunWithStandIn(unittest.TestCase):
    """mrct run with h2 on two tester interfaces (veth cables) and its endpoint in a namespace
    standing in for the DUT machine: the transfer, captures and checker verdict as usual."""

    def test_run(self):
        pid = os.getpid()
        ns = f"mrcdutr{pid}"
        testers = [f"mrcr{pid}p{i}" for i in range(2)]
        plan = planlib.single_router(2, 2)
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            for t, port in zip(testers, plan.ports_of("h2")):
                subprocess.run(["ip", "link", "add", t, "type", "veth", "peer", "name",
                                port.ifname, "netns", ns], check=True)
            with _util.TempDir() as d:
                path = os.path.join(d, "physical-h2.toml")
                with open(path, "w") as f:
                    f.write(RUN.format(t0=testers[0], t1=testers[1], ns=ns))
                out = os.path.join(d, "out")
                proc = subprocess.run([_util.PYTHON, "-m", "mrctb", "run", path, "--out", out],
                                      cwd=_util.TESTBED_DIR, capture_output=True, text=True,
                                      timeout=300, env=_util.traffic_env())
                with open(os.path.join(out, "result.json")) as f:
                    res = json.load(f)
                exp = {e["name"]: e["status"] for e in res["expectations"]}
                self.assertEqual(exp.get("transfer completes"), "pass", proc.stdout[-3000:])
                self.assertEqual(exp.get("data verified"), "pass", res["expectations"])
                self.assertEqual(res["checker"].get("status"), "ran", res["checker"])
                self.assertEqual(res["verdict"], "pass", (res["verdict"], res.get("checker")))
                self.assertEqual(proc.returncode, 0)
                self.assertEqual(res.get("cleanup", {}).get("leftovers"),
                                 {"pids": [], "root_interfaces": []})
                with open(os.path.join(out, "wiring.json")) as f:
                    wiring = json.load(f)
                self.assertEqual([p["tester_iface"] for p in wiring["ports"]], testers)
                self.assertTrue(os.path.exists(os.path.join(out, "h2-config.sh")))
                # The wire captures of h2 were taken on the tester interfaces (under the router
                # ports' names) and hold its traffic.
                caps = os.listdir(os.path.join(out, "captures"))
                for port in plan.ports_of("h2"):
                    name = f"{port.peer.node}-{port.peer.ifname}.pcap"
                    self.assertIn(name, caps)
                    self.assertGreater(os.path.getsize(os.path.join(out, "captures", name)),
                                       10000)
            for t in testers:  # back in the root namespace under their own names
                self.assertTrue(os.path.exists(os.path.join("/sys/class/net", t)), t)
        finally:
            for t in testers:
                subprocess.run(["ip", "link", "del", t], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def test_missing_interface_is_exit_2_naming_the_key(self):
        with _util.TempDir() as d:
            path = os.path.join(d, "bad.toml")
            with open(path, "w") as f:
                f.write(RUN.format(t0="mrcnosuch0", t1="mrcnosuch1", ns="mrcnosuchns"))
            proc = subprocess.run([_util.PYTHON, "-m", "mrctb", "run", path, "--out",
                                   os.path.join(d, "out")], cwd=_util.TESTBED_DIR,
                                  capture_output=True, text=True, timeout=120,
                                  env=_util.traffic_env())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("hosts.h2.netns: mrcnosuchns: no such network namespace", proc.stderr)


if __name__ == "__main__":
    unittest.main()

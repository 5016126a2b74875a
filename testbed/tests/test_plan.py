"""Plan generator, configuration rendering and CLI tests (no root needed)."""

import ipaddress
import json
import unittest

import _util  # noqa: F401  (puts testbed/ on sys.path)
from mrctb import config, plan as planlib
from mrctb.plan import PlanError


# ---------------------------------------------------------------------------------------------
# A forwarding simulator over the rendered routes: proves that the uSIDs the plan hands out and
# the routes the builder installs agree, for every pair and EV, without a kernel.
# ---------------------------------------------------------------------------------------------
class Fib:
    def __init__(self, plan, mode):
        self.plan = plan
        self.mode = mode
        self.tables = {}
        self.owner = {}  # port address -> node
        self.local = {}
        for name in plan.nodes():
            if plan.is_host(name):
                routes, _ = config.host_routes(plan, name, mode)
                routes = [r for r in routes if r.table is None]
                local = {plan.host(name).gid}
            else:
                routes = config.router_routes(plan, name, mode)
                local = {plan.router(name).loopback}
            entries = []
            for port in plan.ports_of(name):
                self.owner[port.addr] = name
                local.add(port.addr)
                link = plan.link(port.link)
                entries.append((link.subnet, ("connected", port)))
            for r in routes:
                net = ipaddress.IPv6Network(r.prefix)
                if r.encap:
                    kind = "end" if "End flavors next-csid" in r.encap else "decap"
                    entries.append((net, (kind, r.dev)))
                else:
                    entries.append((net, ("via", r.nexthops)))
            self.tables[name] = entries
            self.local[name] = local

    def lookup(self, node, addr):
        best = None
        for net, action in self.tables[node]:
            if addr in net and (best is None or net.prefixlen > best[0].prefixlen):
                best = (net, action)
        return best

    def check_hop(self, node, hop):
        port = self.plan.port(hop.dev)
        assert port.node == node, f"{node}: nexthop dev {hop.dev} belongs to {port.node}"
        assert port.peer.addr == hop.via, f"{node}: {hop.via} is not the peer on {hop.dev}"
        return self.owner[hop.via]

    def srv6(self, src, da):
        """All (router trail, delivering node, egress) outcomes of sending to `da` from src."""
        outcomes = []

        def step(node, da, trail, egress, depth):
            if depth > 32:
                raise AssertionError(f"loop: {trail}")
            if node != src and da in self.local[node]:
                outcomes.append((trail, node, egress, "local"))
                return
            found = self.lookup(node, da)
            if found is None:
                outcomes.append((trail, node, egress, "no route"))
                return
            kind = found[1][0]
            if kind == "end":
                value = int(da)
                arg = value & ((1 << 80) - 1)
                if arg == 0:
                    outcomes.append((trail, node, egress, "end of container at router"))
                    return
                shifted = (value & ~((1 << 96) - 1)) | (arg << 16)
                step(node, ipaddress.IPv6Address(shifted), trail + [node], egress, depth + 1)
            elif kind == "decap":
                outcomes.append((trail, node, egress, "decap"))
            elif kind == "connected":
                port = found[1][1]
                peer = port.peer.node
                outcomes.append((trail, peer, egress or port.ifname, "connected"))
            else:
                for hop in found[1][1]:
                    nxt = self.check_hop(node, hop)
                    step(nxt, da, trail, egress or hop.dev, depth + 1)

        step(src, da, [], None, 0)
        return outcomes


class UsidTest(unittest.TestCase):
    def test_layout_is_plane_role_index(self):
        self.assertEqual(planlib.usid_value(1, planlib.ROLE_T1, 3), 0x1203)
        self.assertEqual(planlib.decode_usid(0xF3FF), (15, 3, 255))
        self.assertEqual(planlib.usid_text(0x0100), "0100")

    def test_usid_is_never_end_of_container(self):
        self.assertNotEqual(planlib.usid_value(0, planlib.ROLE_T0, 0), 0)

    def test_out_of_range_fields_are_rejected(self):
        with self.assertRaisesRegex(PlanError, "plane 16"):
            planlib.usid_value(16, planlib.ROLE_T0, 0)
        with self.assertRaisesRegex(PlanError, "index 256"):
            planlib.usid_value(0, planlib.ROLE_T0, 256)
        with self.assertRaisesRegex(PlanError, "role 7"):
            planlib.usid_value(0, 7, 0)

    def test_container_places_usids_after_the_locator(self):
        p = planlib.clos(1, 1, 1, 1)
        self.assertEqual(str(p.container([0x1a01, 0x2b02, 0x3c03])), "fcbb:0:1a01:2b02:3c03::")
        with self.assertRaisesRegex(PlanError, "7 uSIDs"):
            p.container([1] * 7)
        with self.assertRaisesRegex(PlanError, "position 1"):
            p.container([1, 0])

    def test_prefixes(self):
        p = planlib.clos(2, 1, 1, 1)
        self.assertEqual(str(p.usid_prefix(0x1201)), "fcbb:0:1201::/48")
        self.assertEqual(str(p.plane_locator(1)), "fcbb:0:1000::/36")
        self.assertEqual(str(planlib.plane_prefix(3)), "fd00:103::/32")

    def test_locator_checks(self):
        with self.assertRaisesRegex(PlanError, "must be a /32"):
            planlib.clos(1, 1, 1, 1, locator="fcbb::/48")
        with self.assertRaisesRegex(PlanError, "overlaps"):
            planlib.clos(1, 1, 1, 1, locator="fd00:1::/32")
        with self.assertRaisesRegex(PlanError, "locator 'nonsense'"):
            planlib.clos(1, 1, 1, 1, locator="nonsense")
        p = planlib.clos(1, 1, 1, 2, locator="fc00:beef::/32")
        self.assertEqual(p.srv6_da("h1", "h2", 0), "fc00:beef:100:302::")


class ClosPlanTest(unittest.TestCase):
    def setUp(self):
        self.p = planlib.clos(2, 2, 2, 2)

    def test_counts(self):
        for planes, t0, t1, hpt in [(2, 2, 2, 2), (2, 4, 2, 8), (8, 4, 2, 8), (3, 1, 5, 3)]:
            p = planlib.clos(planes, t0, t1, hpt)
            self.assertEqual(len(p.hosts), t0 * hpt)
            self.assertEqual(len(p.routers), planes * (t0 + t1))
            self.assertEqual(len(p.links), planes * (t0 * hpt + t0 * t1))
            for host in p.hosts.values():
                self.assertEqual(sorted(host.ports), list(range(planes)))

    def test_addresses_unique_and_ula(self):
        p = planlib.clos(8, 4, 2, 8)
        seen = set()
        for host in p.hosts.values():
            seen.add(host.gid)
        for router in p.routers.values():
            seen.add(router.loopback)
        for link in p.links:
            self.assertTrue(link.subnet.subnet_of(planlib.plane_prefix(link.plane)))
            for port in link.ends():
                self.assertIn(port.addr, link.subnet)
                seen.add(port.addr)
        self.assertEqual(len(seen), len(p.hosts) + len(p.routers) + 2 * len(p.links))
        for addr in seen:
            self.assertIn(addr, planlib.ULA_FABRIC)
        macs = [port.mac for link in p.links for port in link.ends()]
        self.assertEqual(len(macs), len(set(macs)))

    def test_gid_is_loopback_and_same_on_every_plane(self):
        h3 = self.p.host("h3")
        self.assertEqual(str(h3.gid), "fd00:a::3")
        js = self.p.to_json()
        host = next(h for h in js["hosts"] if h["name"] == "h3")
        self.assertEqual(host["gid"], "fd00:a::3")
        self.assertEqual([port["plane"] for port in host["ports"]], [0, 1])
        self.assertEqual([port["port"] for port in host["ports"]], [1, 2])

    def test_interface_names(self):
        names = self.p.ifnames()
        self.assertEqual(len(names), len(set(names)))
        for h in self.p.hosts.values():
            for plane, port in h.ports.items():
                self.assertEqual(port.ifname, f"{h.name}-p{plane + 1}")
        big = planlib.clos(16, 16, 16, 15)
        self.assertTrue(all(len(n) <= 15 for n in big.ifnames()))

    def test_names_carry_the_plane_number_reports_give(self):
        # Issue 18, deliverable 6: one plane numbering. Every node, interface and link name (and
        # so every capture file, node-ifname.pcap) says pN for the plane whose NIC port the
        # checker report and viewer call N (= index + 1); names with the 0-based index
        # (h1-p0, p0t0s0) said "plane 0" for port 1.
        import re
        shapes = [planlib.clos(2, 2, 2, 1), planlib.back_to_back(2),
                  planlib.single_router(2, 3), planlib.incast(2, 2), planlib.dumbbell(2, 1, 1)]
        for plan in shapes:
            for link in plan.links:
                number = link.plane + 1
                for port in link.ends():
                    m = re.fullmatch(r"(h\d+-p(\d+))|p(\d+)(t[01]s\d+|r\d+)-[du]\d+",
                                     port.ifname)
                    self.assertIsNotNone(m, port.ifname)
                    self.assertEqual(int(m[2] or m[3]), number, f"{plan.shape}: {port.ifname}")
                for node in (link.a.node, link.b.node):
                    if node in plan.routers:
                        self.assertEqual(int(re.match(r"p(\d+)", node)[1]), number, node)
                if "@p" in link.name:
                    self.assertTrue(link.name.endswith(f"@p{number}"), link.name)
        # The plan's JSON says port = plane number for each host port, as its name does.
        for host in self.p.to_json()["hosts"]:
            for port in host["ports"]:
                self.assertTrue(port["ifname"].endswith(f"-p{port['port']}"), port)

    def test_usids_per_switch_per_plane(self):
        usids = [r.usid for r in self.p.routers.values()]
        self.assertEqual(len(usids), len(set(usids)))
        self.assertEqual(self.p.router("p2t0s1").usid, 0x1101)
        self.assertEqual(self.p.router("p1t1s1").usid, 0x0201)
        for router in self.p.routers.values():
            self.assertEqual(planlib.decode_usid(router.usid)[0], router.plane)
        self.assertEqual(self.p.decap_usid("h4", 1), 0x1304)

    def test_outer_da_cross_t0(self):
        path = self.p.srv6_path("h1", "h4", plane=1, t1=1)
        self.assertEqual(str(path.outer_da), "fcbb:0:1100:1201:1101:1304::")
        self.assertEqual(path.hops, ["p2t0s0", "p2t1s1", "p2t0s1", "h4"])
        self.assertEqual(path.egress, "h1-p2")
        self.assertEqual(str(path.outer_src), str(self.p.host("h1").ports[1].addr))
        self.assertEqual(self.p.srv6_da("h4", "h1", 0, 0), "fcbb:0:101:200:100:301::")

    def test_outer_da_same_t0(self):
        self.assertEqual(self.p.srv6_da("h1", "h2", 0), "fcbb:0:100:302::")
        hairpin = self.p.srv6_path("h1", "h2", 0, t1=1)
        self.assertEqual(hairpin.hops, ["p1t0s0", "p1t1s1", "p1t0s0", "h2"])
        self.assertEqual(str(hairpin.outer_da), "fcbb:0:100:201:100:302::")

    def test_path_errors(self):
        with self.assertRaisesRegex(PlanError, "2 equal-cost paths"):
            self.p.srv6_path("h1", "h4", 0)
        with self.assertRaisesRegex(PlanError, "no T1 switch 2"):
            self.p.srv6_path("h1", "h4", 0, t1=2)
        with self.assertRaisesRegex(PlanError, "plane 2 outside"):
            self.p.srv6_path("h1", "h4", 2, t1=0)
        with self.assertRaisesRegex(PlanError, "both h1"):
            self.p.srv6_path("h1", "h1", 0)
        with self.assertRaisesRegex(PlanError, "no host 'h9'"):
            self.p.srv6_path("h1", "h9", 0)

    def test_every_ev_path_forwards_hop_by_hop(self):
        for p in (planlib.clos(2, 2, 2, 2), planlib.clos(3, 3, 3, 2)):
            fib = Fib(p, "srv6")
            for src in p.hosts:
                for dst in p.hosts:
                    if src == dst:
                        continue
                    for e in p.ev_paths(src, dst, same_t0_via_t1=True):
                        outcomes = fib.srv6(src, ipaddress.IPv6Address(e["outer_da"]))
                        self.assertEqual(
                            outcomes, [(e["hops"][:-1], dst, e["egress"], "decap")],
                            f"{src}->{dst} ev {e['ev']} {e['outer_da']}")

    def test_gid_and_port_routes_reach_everything(self):
        for mode in planlib.MODES:
            p = planlib.clos(2, 2, 3, 2)
            fib = Fib(p, mode)
            for src in p.nodes():
                for host in p.hosts.values():
                    # planes are separate fabrics: a router only reaches its own plane's ports
                    ports = [port for port in host.ports.values()
                             if p.is_host(src) or port.plane == p.router(src).plane]
                    targets = [host.gid] + [port.addr for port in ports]
                    if src == host.name:
                        continue
                    for addr in targets:
                        outcomes = fib.srv6(src, addr)
                        self.assertTrue(outcomes)
                        for trail, node, _, how in outcomes:
                            self.assertEqual(node, host.name, f"{src} -> {addr}: {how} {trail}")
                            self.assertIn(how, ("local", "connected"))

    def test_ev_enumeration(self):
        p = planlib.clos(2, 2, 2, 2)
        evs = p.ev_paths("h1", "h4")
        self.assertEqual(len(evs), 4)
        self.assertEqual([(e["plane"], e["t1"]) for e in evs], [(0, 0), (1, 0), (0, 1), (1, 1)])
        self.assertEqual(len({e["outer_da"] for e in evs}), 4)
        more = p.ev_paths("h1", "h4", evs=16)
        self.assertEqual([e["plane"] for e in more], [0, 1] * 8)
        self.assertEqual(more[4]["outer_da"], more[0]["outer_da"])
        same = p.ev_paths("h1", "h2")
        self.assertEqual(len(same), 4)
        self.assertEqual({e["t1"] for e in same}, {None})
        self.assertEqual(len({e["outer_da"] for e in same}), 2)
        hairpin = p.ev_paths("h1", "h2", same_t0_via_t1=True)
        self.assertEqual(len({e["outer_da"] for e in hairpin}), 4)
        ecmp = p.ev_paths("h1", "h4", mode="ecmp")
        self.assertEqual([e["port"] for e in ecmp], [1, 2, 1, 2])
        self.assertIsNone(ecmp[0]["outer_da"])
        with self.assertRaisesRegex(PlanError, "evs = 0"):
            p.ev_paths("h1", "h4", evs=0)
        with self.assertRaisesRegex(PlanError, "routing mode 'bgp'"):
            p.ev_paths("h1", "h4", mode="bgp")

    def test_paths_json(self):
        js = json.loads(planlib.dumps(self.p.paths_json()))
        self.assertEqual(js["schema"], "mrctb-paths/1")
        self.assertEqual(js["evs_per_pair"], 4)
        self.assertEqual(len(js["pairs"]), 12)
        entry = js["pairs"][0]["evs"][0]
        self.assertEqual(set(entry), {"ev", "plane", "port", "t1", "egress", "outer_src",
                                      "outer_da", "usids", "hops"})
        pair = next(x for x in js["pairs"] if x["src"] == "h1" and x["dst"] == "h4")
        self.assertEqual(pair["evs"][3]["outer_da"], "fcbb:0:1100:1201:1101:1304::")
        self.assertEqual(pair["evs"][3]["usids"], ["1100", "1201", "1101", "1304"])
        self.assertEqual(pair["dst_gid"], "fd00:a::4")

    def test_plan_json(self):
        js = json.loads(planlib.dumps(self.p.to_json("ecmp")))
        self.assertEqual(js["schema"], "mrctb-plan/1")
        self.assertEqual(js["mode"], "ecmp")
        self.assertEqual(len(js["routers"]), 8)
        self.assertEqual(len(js["links"]), 16)
        self.assertEqual(js["plane_locators"], ["fcbb::/36", "fcbb:0:1000::/36"])
        r = next(x for x in js["routers"] if x["name"] == "p2t1s0")
        self.assertEqual(r["usid"], "1200")
        self.assertEqual(r["usid_prefix"], "fcbb:0:1200::/48")
        self.assertEqual([port["ifname"] for port in r["ports"]], ["p2t1s0-d0", "p2t1s0-d1"])

    def test_bad_shapes(self):
        with self.assertRaisesRegex(PlanError, "planes = 0"):
            planlib.clos(0, 1, 1, 1)
        with self.assertRaisesRegex(PlanError, "planes = 17"):
            planlib.clos(17, 1, 1, 1)
        with self.assertRaisesRegex(PlanError, "at most 255"):
            planlib.clos(1, 16, 1, 16)
        with self.assertRaisesRegex(PlanError, "t1 = 'x'"):
            planlib.clos(1, 1, "x", 1)
        with self.assertRaisesRegex(PlanError, "unknown shape 'ring'"):
            planlib.make("ring")
        with self.assertRaisesRegex(PlanError, "shape clos"):
            planlib.make("clos", planes=1)
        with self.assertRaisesRegex(PlanError, "mtu = 100"):
            planlib.clos(1, 1, 1, 1, mtu=100)

    def test_link_lookup(self):
        link = self.p.link("p1t0s0:p1t1s1")
        self.assertIs(self.p.link("p1t1s1:p1t0s0"), link)
        self.assertIs(self.p.link("p1t0s0-u1"), link)
        self.assertIs(self.p.link("p1t1s1-d0"), link)
        self.assertIs(self.p.link("h1-p2"), self.p.link("p2t0s0:h1"))
        with self.assertRaisesRegex(PlanError, "no link 'x:y'"):
            self.p.link("x:y")


class SmallShapesTest(unittest.TestCase):
    def test_back_to_back(self):
        p = planlib.back_to_back(2)
        self.assertEqual(len(p.routers), 0)
        path = p.srv6_path("h2", "h1", 1)
        self.assertEqual(path.usids, [0x1301])
        self.assertEqual(path.hops, ["h1"])
        self.assertIs(p.link("h2:h1@p2"), p.link("h1-p2"))
        fib = Fib(p, "srv6")
        self.assertEqual(fib.srv6("h2", path.outer_da), [([], "h1", "h2-p2", "decap")])

    def test_single_router(self):
        p = planlib.single_router(2)
        self.assertEqual(sorted(p.routers), ["p1r0", "p2r0"])
        self.assertEqual(p.srv6_da("h1", "h2", 1), "fcbb:0:1100:1302::")

    def test_dumbbell(self):
        p = planlib.dumbbell(2, left=2, right=3)
        self.assertEqual(p.roles["right"], ["h3", "h4", "h5"])
        self.assertEqual(p.srv6_path("h1", "h5", 0).hops, ["p1r0", "p1r1", "h5"])
        self.assertEqual(p.srv6_path("h4", "h5", 0).hops, ["p1r1", "h5"])
        self.assertEqual(p.link("p1r0-u0").name, "p1r0:p1r1")

    def test_incast(self):
        p = planlib.incast(3, senders=5)
        self.assertEqual(p.roles["receiver"], ["h6"])
        self.assertEqual(len(p.hosts), 6)
        self.assertEqual(p.srv6_da("h5", "h6", 2), "fcbb:0:2100:2306::")

    def test_every_shape_forwards_every_ev(self):
        for p in (planlib.back_to_back(3), planlib.single_router(2, 3), planlib.dumbbell(2, 2, 2),
                  planlib.incast(2, 3)):
            fib = Fib(p, "srv6")
            for src in p.hosts:
                for dst in p.hosts:
                    if src != dst:
                        for e in p.ev_paths(src, dst):
                            self.assertEqual(fib.srv6(src, ipaddress.IPv6Address(e["outer_da"])),
                                             [(e["hops"][:-1], dst, e["egress"], "decap")],
                                             f"{p.shape} {src}->{dst} {e}")


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.p = planlib.clos(2, 2, 2, 2)

    def test_router_srv6(self):
        cfg = config.node_config(self.p, "p2t1s0", "srv6")
        script = cfg.script()
        self.assertIn("route add fcbb:0:1200::/48 encap seg6local action End flavors next-csid "
                      "lblen 32 nflen 16 dev sid0", script)
        self.assertEqual(cfg.sysctls["net.ipv6.conf.all.forwarding"], "1")
        self.assertEqual(cfg.sysctls["net.ipv6.conf.p2t1s0-d1.seg6_enabled"], "1")
        self.assertEqual(cfg.sysctls["net.ipv6.conf.all.seg6_enabled"], "1")
        self.assertEqual(cfg.sysctls["net.ipv6.conf.p2t1s0-d1.keep_addr_on_down"], "1")
        self.assertEqual(cfg.ethtool_tx_off, [])
        self.assertEqual(script.count("nud permanent"), 2)
        # T1 -> T0 uSIDs: one downlink each
        self.assertIn("route add fcbb:0:1101::/48 via fd00:101:7::1 dev p2t1s0-d1 onlink", script)

    def test_router_ecmp(self):
        script = config.node_config(self.p, "p1t0s0", "ecmp").script()
        self.assertNotIn("seg6", script)
        self.assertIn("net.ipv6.fib_multipath_hash_policy=3", script)
        self.assertIn("net.ipv6.fib_multipath_hash_fields=0x3f", script)
        self.assertIn("route add fd00:a::4/128 nexthop via fd00:100:5::2 dev p1t0s0-u0 "
                      "nexthop via fd00:100:6::2 dev p1t0s0-u1", script.replace(" onlink", ""))

    def test_host_srv6(self):
        cfg = config.node_config(self.p, "h4", "srv6")
        script = cfg.script()
        self.assertIn("route add fcbb:0:1304::/48 encap seg6local action End.DT6 table local "
                      "dev sid0", script)
        self.assertIn("addr add fd00:a::4/128 dev lo nodad", script)
        self.assertIn("rule add oif h4-p2 lookup 101 pref 1101", script)
        self.assertIn("rule add from fd00:101:4::2 lookup 101 pref 1001", script)
        self.assertEqual(cfg.sysctls["net.ipv6.conf.all.forwarding"], "0")
        self.assertEqual(cfg.sysctls["net.ipv6.seg6_flowlabel"], "0")
        self.assertEqual(cfg.ethtool_tx_off, ["h4-p1", "h4-p2"])
        self.assertIn("ethtool -K h4-p2 tx off", script)
        self.assertIn("link set dev h4-p1 mtu 9000 up", script)

    def test_host_ecmp_has_no_seg6(self):
        cfg = config.node_config(self.p, "h1", "ecmp")
        self.assertNotIn("seg6", cfg.script())
        self.assertIn("route add fd00:a::/64 nexthop via fd00:100:1::1 dev h1-p1 nexthop via "
                      "fd00:101:1::1 dev h1-p2", cfg.script().replace(" onlink", ""))

    def test_every_node_has_a_script(self):
        configs = config.all_configs(planlib.clos(8, 4, 2, 8), "srv6")
        self.assertEqual(len(configs), 32 + 48)
        for name, cfg in configs.items():
            self.assertTrue(cfg.script().startswith("set -e\n"), name)


class CliTest(unittest.TestCase):
    def test_paths_command(self):
        proc = _util.run_cli("paths", "--shape", "clos", "--planes", "2", "--t0", "2", "--t1", "2",
                             "--hosts-per-t0", "2", "--pair", "h1,h4", "--evs", "8")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        js = json.loads(proc.stdout)
        self.assertEqual(len(js["pairs"]), 1)
        self.assertEqual(len(js["pairs"][0]["evs"]), 8)

    def test_da_command(self):
        proc = _util.run_cli("da", "--src", "h1", "--dst", "h4", "--plane", "1", "--t1-choice", "1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "fcbb:0:1100:1201:1101:1304::")

    def test_usage_errors_exit_2_with_message(self):
        proc = _util.run_cli("da", "--src", "h1", "--dst", "h4", "--plane", "1")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("2 equal-cost paths", proc.stderr)
        proc = _util.run_cli("plan", "--planes", "40")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("planes = 40", proc.stderr)
        proc = _util.run_cli("paths", "--pair", "h1")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("expected SRC,DST", proc.stderr)

    def test_plan_and_script_commands(self):
        proc = _util.run_cli("plan", "--shape", "incast", "--senders", "3", "--mode", "ecmp")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout)["roles"]["receiver"], ["h4"])
        proc = _util.run_cli("script", "--shape", "back_to_back", "--node", "h1")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("End.DT6", proc.stdout)


if __name__ == "__main__":
    unittest.main()

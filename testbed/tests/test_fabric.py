"""Root integration tests: real kernels forwarding real frames through Mininet namespaces.

Skipped (not failed) when not root or when mininet / tools are missing.
"""

import ipaddress
import json
import os
import struct
import time
import unittest

import _util
from _util import requires_root
from mrctb import pcap, plan as planlib, procs

if _util.root_skip_reason() is None:
    from mrctb import fabric


class FabricCase(unittest.TestCase):
    """One fabric per test class (building costs about half a second)."""

    PLAN = None
    MODE = "srv6"

    @classmethod
    def setUpClass(cls):
        cls.tmp = _util.TempDir()
        cls.workdir = cls.tmp.__enter__()
        cls.plan = cls.PLAN()
        cls.fab = fabric.Fabric(cls.plan, cls.MODE, workdir=cls.workdir)
        cls.fab.start()

    @classmethod
    def tearDownClass(cls):
        try:
            report = cls.fab.stop()
            assert not any(report["leftovers"].values()), report
        finally:
            cls.tmp.__exit__(None, None, None)

    def assert_ping_matrix(self, target="port"):
        check_ping_matrix(self, self.plan, self.fab, target)

    def assert_all_ev_paths_deliver(self, same_t0_via_t1=False, port=4791):
        return check_all_ev_paths(self, self.plan, self.fab, same_t0_via_t1, port)


def check_ping_matrix(tc, plan, fab, target="port"):
    results = fab.ping_matrix(target=target)
    hosts = len(plan.hosts)
    tc.assertEqual(len(results), plan.planes * hosts * (hosts - 1))
    failed = sorted(k for k, ok in results.items() if not ok)
    tc.assertEqual(failed, [], f"unreachable (src, dst, plane) via {target}")


def check_all_ev_paths(tc, plan, fab, same_t0_via_t1=False, port=4791):
    """Sends one hand-built SRv6 packet per (pair, EV); each must arrive exactly once."""
    expected = {h: set() for h in plan.hosts}
    specs = {h: [] for h in plan.hosts}
    for src in plan.hosts:
        for dst in plan.hosts:
            if src == dst:
                continue
            evs = plan.ev_paths(src, dst, same_t0_via_t1=same_t0_via_t1)
            for spec in _util.ev_specs(plan, src, dst, evs, dport=port):
                specs[src].append(spec)
                expected[dst].add(spec["payload"])
    receivers = {h: _util.start_receiver(fab, h, port, len(expected[h]), 8.0,
                                         bind=str(plan.host(h).gid))
                 for h in plan.hosts}
    for src, batch in specs.items():
        tc.assertEqual(_util.send_srv6(fab, src, batch), len(batch))
    for host, proc in receivers.items():
        datagrams, err = _util.collect(proc)
        got = [d["payload"] for d in datagrams]
        tc.assertEqual(sorted(got), sorted(expected[host]), f"at {host}: {err}")
    return sum(len(v) for v in expected.values())


@requires_root
class BackToBackEcmpTest(FabricCase):
    PLAN = staticmethod(lambda: planlib.back_to_back(2))
    MODE = "ecmp"

    def test_every_plane_reaches_the_peer(self):
        self.assert_ping_matrix("port")
        self.assert_ping_matrix("gid")

    def test_no_seg6_routes(self):
        routes = self.fab.sh("h1", "ip -6 route show")
        self.assertNotIn("seg6", routes)


@requires_root
class BackToBackSrv6Test(FabricCase):
    PLAN = staticmethod(lambda: planlib.back_to_back(2))

    def test_every_plane_reaches_the_peer(self):
        self.assert_ping_matrix("port")

    def test_srv6_decapsulation_on_every_plane(self):
        self.assertEqual(self.assert_all_ev_paths_deliver(), 4)


@requires_root
class ClosEcmpTest(FabricCase):
    PLAN = staticmethod(lambda: planlib.clos(2, 2, 2, 2))
    MODE = "ecmp"

    def test_every_pair_on_every_plane(self):
        self.assert_ping_matrix("port")
        self.assert_ping_matrix("gid")

    def test_sysctls_applied(self):
        out = self.fab.sh("p1t0s0", "sysctl -n net.ipv6.fib_multipath_hash_policy "
                          "net.ipv6.fib_multipath_hash_fields net.ipv6.conf.all.forwarding "
                          "net.ipv6.conf.p1t0s0-u1.keep_addr_on_down")
        self.assertEqual(out.split(), ["3", "63", "1", "1"])
        out = self.fab.sh("h1", "sysctl -n net.ipv6.conf.all.forwarding; "
                          "ethtool -k h1-p2 | grep '^tx-checksumming'; "
                          "ip -6 neigh show dev h1-p1")
        self.assertIn("0\ntx-checksumming: off", out)
        self.assertIn("PERMANENT", out)

    def _uplink_spread(self, args, auto_flowlabels="1"):
        """Sends UDP h1 -> h3 (other T0) on plane 0 and counts the datagrams on each T0 uplink,
        from captures filtered on the test's port (counters would include MLD and ICMP)."""
        self.fab.sh("h1", f"sysctl -q -w net.ipv6.auto_flowlabels={auto_flowlabels}")
        self._port = getattr(self, "_port", 20000) + 1
        caps = [self.fab.capture(f"p1t0s0-u{k}", bpf_filter=f"udp dst port {self._port}",
                                 path=os.path.join(self.workdir, f"spread{self._port}-{k}.pcap"))
                for k in (0, 1)]
        try:
            proc = self.fab.traffic("h1", ["send-udp", "--dst", "fd00:a::3", "--dport",
                                           str(self._port), "--src", "fd00:a::1",
                                           "--dev", "h1-p1"] + args)
            out, err = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0, err)
            time.sleep(0.1)
        finally:
            self.fab.sh("h1", "sysctl -q -w net.ipv6.auto_flowlabels=1")
            for cap in caps:
                cap.stop()
        sent = json.loads(out.decode())["sent"]
        return sent, [len(pcap.packets(cap.path)) for cap in caps]

    def test_ecmp_hashes_l4_source_port(self):
        # Flow labels pinned to 0 (auto labels off), so only the port can move the hash.
        sent, spread = self._uplink_spread(["--sports", "20000:20063"], auto_flowlabels="0")
        self.assertEqual(sent, 64)
        self.assertEqual(sum(spread), 64)
        self.assertTrue(all(n > 0 for n in spread), f"datagrams per T0 uplink {spread}")

    def test_ecmp_hashes_flow_label(self):
        sent, spread = self._uplink_spread(["--sport", "20000", "--flowlabels", "1:64"],
                                           auto_flowlabels="0")
        self.assertEqual(sent, 64)
        self.assertEqual(sum(spread), 64)
        self.assertTrue(all(n > 0 for n in spread), f"datagrams per T0 uplink {spread}")

    def test_one_flow_stays_on_one_path(self):
        sent, spread = self._uplink_spread(["--sport", "20001", "--flowlabels", "7",
                                            "--count", "64"], auto_flowlabels="0")
        self.assertEqual(sent, 64)
        self.assertEqual(sorted(spread), [0, 64], f"datagrams per T0 uplink {spread}")


@requires_root
class ClosSrv6Test(FabricCase):
    PLAN = staticmethod(lambda: planlib.clos(2, 2, 2, 2))

    def test_every_pair_on_every_plane(self):
        self.assert_ping_matrix("port")
        self.assert_ping_matrix("gid")

    def test_router_has_usid_end_route(self):
        routes = self.fab.sh("p2t1s1", "ip -6 route show fcbb:0:1201::/48")
        self.assertIn("seg6local action End flavors next-csid lblen 32 nflen 16", routes)

    def test_every_ev_path_including_hairpins_delivers(self):
        # 4 hosts x 3 peers x (2 planes x 2 T1) EVs
        self.assertEqual(self.assert_all_ev_paths_deliver(same_t0_via_t1=True), 48)

    def test_kernel_encap_shifts_one_usid_per_hop(self):
        path = self.plan.srv6_path("h1", "h4", plane=1, t1=1)
        points = ["h1-p2", "p2t0s0-u1", "p2t1s1-d1", "p2t0s1-d1", "h4-p2"]
        caps = [self.fab.capture(i) for i in points]
        rx = _util.start_receiver(self.fab, "h4", 4792, 1, 5.0, bind="fd00:a::4")
        self.fab.add_srv6_route("h1", "h4", plane=1, t1=1)
        try:
            proc = self.fab.traffic("h1", ["send-udp", "--dst", "fd00:a::4", "--dport", "4792",
                                           "--src", "fd00:a::1", "--sport", "4999",
                                           "--dev", "h1-p2", "--flowlabels", "0x12345",
                                           "--payload", "encap-red"])
            proc.communicate(timeout=10)
            datagrams, err = _util.collect(rx)
        finally:
            self.fab.del_route("h1", "fd00:a::4/128", table=101)
        self.assertEqual([d["payload"][:9] for d in datagrams], ["encap-red"], err)
        for result in self.fab.stop_captures():
            self.assertEqual((result.returncode, result.dropped_by_kernel), (0, 0))
        for cap in caps:
            with open(cap.path, "rb") as f:
                self.assertEqual(struct.unpack("<I", f.read(4))[0], pcap.MAGIC_NS)
        seen = []
        for cap in caps:
            hits = [p for p in pcap.packets(cap.path)
                    if p.inner and p.dport == 4792 and p.payload.startswith(b"encap-red")]
            self.assertEqual(len(hits), 1, f"{cap.ifname}: {len(hits)} matching packets")
            seen.append(hits[0])
        das = [int(ipaddress.IPv6Address(p.outer.dst)) for p in seen]
        self.assertEqual(str(ipaddress.IPv6Address(das[0])), str(path.outer_da))
        loc_mask = ((1 << 32) - 1) << 96
        for before, after in zip(das[:3], das[1:4]):
            arg = before & ((1 << 96) - 1)
            self.assertEqual(after, (before & loc_mask) | ((arg << 16) & ((1 << 96) - 1)))
        self.assertEqual(das[4], das[3])  # the last hop to the host does not shift
        self.assertEqual(str(ipaddress.IPv6Address(das[3])), "fcbb:0:1304::")
        self.assertEqual([p.outer.hop_limit for p in seen], [64, 63, 62, 61, 61])
        self.assertEqual({p.outer.src for p in seen}, {str(path.outer_src)})
        self.assertEqual({p.outer.flow_label for p in seen}, {0x12345})  # copied from inner
        self.assertEqual({(p.inner.src, p.inner.dst) for p in seen}, {("fd00:a::1", "fd00:a::4")})
        stamps = [p.ts_ns for p in seen]
        self.assertEqual(stamps, sorted(stamps))

    def test_wrong_plane_usid_is_refused_at_the_source(self):
        # A plane-0 uSID path bound to the plane-1 port has no route: planes do not mix.
        path = self.plan.srv6_path("h2", "h3", plane=0, t1=0)
        spec = _util.ev_specs(self.plan, "h2", "h3", [dict(path.to_dict(), ev=0)], dport=4793)[0]
        spec["dev"] = "h2-p2"
        errors = []
        self.assertEqual(_util.send_srv6(self.fab, "h2", [spec], errors), 0)
        self.assertEqual([e["error"] for e in errors], ["Network is unreachable"])

    def test_unknown_usid_is_dropped_by_the_router(self):
        # T0 p1t0s1 is not next to h1: p1t0s0 has no route for its uSID as the *first* hop
        # after its own, so the packet dies there, not at the destination.
        bogus = str(self.plan.container([0x0100, 0x0105, 0x0303]))
        rx = _util.start_receiver(self.fab, "h3", 4794, 1, 1.0)
        spec = _util.ev_specs(self.plan, "h1", "h3", [{"ev": 0, "outer_src": "fd00:100:1::2",
                                                      "outer_da": bogus}], dport=4794)[0]
        self.assertEqual(_util.send_srv6(self.fab, "h1", [spec]), 1)
        self.assertEqual(_util.collect(rx)[0], [])


@requires_root
class ClosFlapTest(FabricCase):
    PLAN = staticmethod(lambda: planlib.clos(2, 2, 2, 2))

    def _deliveries(self, t1, port):
        evs = [dict(self.plan.srv6_path("h1", "h3", 0, t1).to_dict(), ev=t1)]
        rx = _util.start_receiver(self.fab, "h3", port, 1, 1.0)
        _util.send_srv6(self.fab, "h1", _util.ev_specs(self.plan, "h1", "h3", evs, dport=port))
        return len(_util.collect(rx)[0])

    def test_flap_t0_t1_link(self):
        link = "p1t0s0:p1t1s0"
        self.assertEqual(self._deliveries(0, 5000), 1)
        self.fab.link_down(link)
        state = self.fab.link_state(link)
        self.assertEqual({s["admin_up"] for s in state.values()}, {False})
        # keep_addr_on_down: the addresses stay while the link is down
        self.assertEqual(state["p1t0s0-u0"]["addrs"], ["fd00:100:5::1"])
        self.assertEqual(self._deliveries(0, 5001), 0)
        self.assertEqual(self._deliveries(1, 5002), 1)
        self.fab.link_up(link)
        state = self.fab.link_state(link)
        self.assertEqual({s["carrier"] for s in state.values()}, {True})
        self.assertIn("PERMANENT", self.fab.sh("p1t0s0", "ip -6 neigh show dev p1t0s0-u0"))
        self.assertIn("via fd00:100:5::2",
                      self.fab.sh("p1t0s0", "ip -6 route show fcbb:0:200::/48"))
        self.assertEqual(self._deliveries(0, 5003), 1)

    def test_access_link_down_keeps_the_router_usid(self):
        # The T0's End route must survive any one of its ports going down.
        self.fab.link_down("h1-p1")
        try:
            path = self.plan.srv6_path("h2", "h3", 0, 0)
            rx = _util.start_receiver(self.fab, "h3", 5010, 1, 1.0)
            _util.send_srv6(self.fab, "h2", _util.ev_specs(self.plan, "h2", "h3",
                                                           [dict(path.to_dict(), ev=0)], 5010))
            self.assertEqual(len(_util.collect(rx)[0]), 1)
        finally:
            self.fab.link_up("h1-p1")
        self.assertTrue(self.fab.ping("h1", "fd00:100:3::2", dev="h1-p1"))

    def test_flap_helper_timing(self):
        record = self.fab.flap("p1t0s1-u1", 0.3)
        self.assertEqual(record["link"], "p1t0s1:p1t1s1")
        self.assertGreaterEqual(record["down_s"], 0.29)
        self.assertLess(record["down_s"], 1.0)
        self.assertEqual({s["carrier"] for s in self.fab.link_state("p1t0s1:p1t1s1").values()},
                         {True})

    def test_flap_one_end(self):
        self.fab.link_down("h2-p1", end="h2")
        state = self.fab.link_state("h2-p1")
        self.assertFalse(state["h2-p1"]["admin_up"])
        self.assertTrue(state["p1t0s0-d1"]["admin_up"])
        self.assertFalse(state["p1t0s0-d1"]["carrier"])
        self.fab.link_up("h2-p1", end="h2")
        with self.assertRaises(fabric.FabricError):
            self.fab.link_down("h2-p1", end="h3")


@requires_root
class SmallShapesSrv6Test(unittest.TestCase):
    def test_shapes_build_and_forward(self):
        shapes = [planlib.single_router(2), planlib.dumbbell(2, 2, 1), planlib.incast(2, 3)]
        for p in shapes:
            with self.subTest(shape=p.shape), _util.TempDir() as d:
                with fabric.Fabric(p, "srv6", workdir=d) as fab:
                    check_ping_matrix(self, p, fab, "port")
                    delivered = check_all_ev_paths(self, p, fab)
                    n = len(p.hosts)
                    self.assertEqual(delivered, n * (n - 1) * p.planes)
                self.assertFalse(any(fab.cleanup_report["leftovers"].values()))

    def test_small_shapes_ecmp(self):
        for p in (planlib.dumbbell(2, 1, 2), planlib.incast(1, 4)):
            with self.subTest(shape=p.shape), _util.TempDir() as d:
                with fabric.Fabric(p, "ecmp", workdir=d) as fab:
                    results = fab.ping_matrix(target="gid")
                    self.assertTrue(all(results.values()), results)


@requires_root
class CaptureTest(unittest.TestCase):
    def test_capture_on_router_port_with_ns_timestamps(self):
        p = planlib.single_router(1)
        with _util.TempDir() as d, fabric.Fabric(p, "ecmp", workdir=d) as fab:
            cap = fab.capture("p1r0-d1")
            self.assertEqual(cap.path, os.path.join(d, "p1r0-p1r0-d1.pcap"))
            self.assertTrue(fab.ping("h1", "fd00:a::2", count=3, timeout_s=1))
            res = cap.stop()
            self.assertEqual(res.captured, len(pcap.packets(cap.path)))
            echoes = [x for x in pcap.packets(cap.path) if x.icmp6_type in (128, 129)]
            self.assertEqual(len(echoes), 6)
            stamps = [x.ts_ns for x in echoes]
            self.assertEqual(stamps, sorted(stamps))
            self.assertGreater(stamps[0], 10**18)  # ns since the epoch, not us
            self.assertFalse(procs.alive(cap.proc.pid))


if __name__ == "__main__":
    unittest.main()

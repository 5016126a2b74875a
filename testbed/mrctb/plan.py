"""Address, uSID and path plan for multi-plane fabrics (pure Python, no root needed).

Everything the builder installs and everything the endpoint needs to address a path comes from
one Plan object, so the JSON the endpoint reads and the routes the kernel holds cannot drift
apart. The numbering rules are documented in testbed/README.md ("Locator and address plan").

Conventions:
  * a plane's index `plane` is 0-based (the uSID plane nibble, addresses, routing tables);
    its number, the NIC port number, is plane + 1 (MRC's per-EV `port` is 1-based), and every
    name carries the number: h1-p1 is h1's NIC port 1, p1t0s0 a T0 switch of plane 1, so
    capture files (node-ifname.pcap) read as the checker's and viewer's ports do;
  * hosts are 1-based (h1, h2, ...), switches 0-based within their tier and plane;
  * a uSID is 16 bits: plane (4) | role (4) | index (8); role 1 = T0/edge router,
    2 = T1/core router, 3 = host decapsulation (uDT6). A uSID is therefore never 0x0000,
    which RFC 9800 reserves as the end-of-container marker.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import json
from typing import Iterable

LBL_BITS = 32  # locator block length (F3216)
NFL_BITS = 16  # uSID (locator-node-function) length
MAX_USIDS = (128 - LBL_BITS) // NFL_BITS  # six uSIDs fit in one container

DEFAULT_LOCATOR = "fcbb:0::/32"
GID_PREFIX = ipaddress.IPv6Network("fd00:a::/64")
ULA_FABRIC = ipaddress.IPv6Network("fd00::/8")
PLANE_TABLE_BASE = 100  # host policy-routing table for plane p is 100 + p
DEFAULT_MTU = 9000  # PMTU 4096 + SRv6 + SRH needs >= 4248 B (docs/wire-format.md)

ROLE_T0 = 1
ROLE_T1 = 2
ROLE_HOST = 3

MAX_PLANES = 16  # the plane nibble of a uSID
MAX_INDEX = 255  # the index byte of a uSID
MAX_IFNAME = 15  # Linux IFNAMSIZ - 1

MODES = ("srv6", "ecmp")
PLAN_SCHEMA = "mrctb-plan/1"
PATHS_SCHEMA = "mrctb-paths/1"


class PlanError(ValueError):
    """A shape parameter or a path request that the plan cannot satisfy."""


def usid_value(plane: int, role: int, index: int) -> int:
    if not 0 <= plane < MAX_PLANES:
        raise PlanError(f"plane {plane} outside 0..{MAX_PLANES - 1} (4-bit plane field of a uSID)")
    if role not in (ROLE_T0, ROLE_T1, ROLE_HOST):
        raise PlanError(f"uSID role {role} unknown")
    if not 0 <= index <= MAX_INDEX:
        raise PlanError(f"index {index} outside 0..{MAX_INDEX} (8-bit index field of a uSID)")
    return (plane << 12) | (role << 8) | index


def usid_text(usid: int) -> str:
    return f"{usid:04x}"


def decode_usid(usid: int) -> tuple[int, int, int]:
    """(plane, role, index) of a uSID built by usid_value()."""
    return usid >> 12, (usid >> 8) & 0xF, usid & 0xFF


def plane_prefix(plane: int) -> ipaddress.IPv6Network:
    """Every link subnet and router loopback of one plane lives in this /32."""
    return ipaddress.IPv6Network(((0xFD00 << 112) | ((0x100 + plane) << 96), 32))


def _check_locator(locator: str | ipaddress.IPv6Network) -> ipaddress.IPv6Network:
    try:
        net = ipaddress.IPv6Network(locator)
    except ValueError as err:
        raise PlanError(f"locator {locator!r}: {err}") from None
    if net.prefixlen != LBL_BITS:
        raise PlanError(f"locator {net} must be a /{LBL_BITS} (F3216 block)")
    if net.overlaps(ULA_FABRIC):
        raise PlanError(f"locator {net} overlaps the fabric addresses {ULA_FABRIC}")
    return net


@dataclasses.dataclass
class Port:
    node: str
    ifname: str
    plane: int
    addr: ipaddress.IPv6Address
    mac: str
    link: str = ""
    peer: "Port | None" = dataclasses.field(default=None, repr=False)


@dataclasses.dataclass
class Link:
    name: str  # "<node a>:<node b>"
    plane: int
    number: int  # 1-based within the plane; selects the /64
    subnet: ipaddress.IPv6Network
    a: Port
    b: Port

    def ends(self) -> tuple[Port, Port]:
        return self.a, self.b


@dataclasses.dataclass
class Host:
    name: str
    number: int  # 1-based
    gid: ipaddress.IPv6Address
    group: int  # T0 index (Clos), side (dumbbell), 0 otherwise
    ports: dict[int, Port] = dataclasses.field(default_factory=dict)  # plane -> port


@dataclasses.dataclass
class Router:
    name: str
    plane: int
    tier: str  # "t0", "t1" (Clos) or "r" (small shapes)
    role: int
    index: int
    usid: int
    loopback: ipaddress.IPv6Address
    ports: list[Port] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Srv6Path:
    src: str
    dst: str
    plane: int
    hops: list[str]  # nodes after src, ending with dst
    usids: list[int]
    outer_da: ipaddress.IPv6Address
    outer_src: ipaddress.IPv6Address  # the source host's port address on this plane
    egress: str  # source host's interface
    t1: int | None  # the T1 the path crosses (Clos), else None

    def to_dict(self) -> dict:
        return {
            "plane": self.plane,
            "port": self.plane + 1,
            "t1": self.t1,
            "egress": self.egress,
            "outer_src": str(self.outer_src),
            "outer_da": str(self.outer_da),
            "usids": [usid_text(u) for u in self.usids],
            "hops": list(self.hops),
        }


class Plan:
    """Nodes, links, addresses and uSIDs of one fabric; all planes share the host set."""

    def __init__(self, shape: str, params: dict, planes: int, locator=DEFAULT_LOCATOR,
                 mtu: int = DEFAULT_MTU):
        if not 1 <= planes <= MAX_PLANES:
            raise PlanError(f"planes = {planes}: must be 1..{MAX_PLANES}")
        if not 1280 <= mtu <= 65535:
            raise PlanError(f"mtu = {mtu}: must be 1280..65535 (IPv6 minimum 1280)")
        self.shape = shape
        self.params = dict(params)
        self.planes = planes
        self.locator = _check_locator(locator)
        self.mtu = mtu
        self.hosts: dict[str, Host] = {}
        self.routers: dict[str, Router] = {}
        self.links: list[Link] = []
        self.roles: dict[str, list[str]] = {}  # shape-specific host roles (incast senders, ...)
        self._links_by_name: dict[str, Link] = {}
        self._ports_by_ifname: dict[str, Port] = {}
        self._link_count = collections.Counter()
        self._adj_cache: dict[int, dict[str, list[tuple[Port, Port]]]] = {}
        self._dist_cache: dict[tuple[int, frozenset], dict[str, int]] = {}
        self._max_choices: dict[bool, int] = {}

    # ----------------------------------------------------------------------------------------
    # construction
    # ----------------------------------------------------------------------------------------
    def add_host(self, number: int, group: int = 0) -> Host:
        if not 1 <= number <= MAX_INDEX:
            raise PlanError(f"host number {number} outside 1..{MAX_INDEX} (8-bit uSID index)")
        name = f"h{number}"
        if name in self.hosts:
            raise PlanError(f"host {name} defined twice")
        host = Host(name, number, GID_PREFIX[number], group)
        self.hosts[name] = host
        return host

    def add_router(self, name: str, plane: int, tier: str, role: int, index: int) -> Router:
        if name in self.routers or name in self.hosts:
            raise PlanError(f"node {name} defined twice")
        usid = usid_value(plane, role, index)
        loopback = plane_prefix(plane)[usid]
        router = Router(name, plane, tier, role, index, usid, loopback)
        self.routers[name] = router
        return router

    def connect(self, plane: int, a_node: str, a_ifname: str, b_node: str, b_ifname: str) -> Link:
        """Adds a plane-p link; end a gets ::1, end b ::2 of the link's /64."""
        for ifname in (a_ifname, b_ifname):
            if len(ifname) > MAX_IFNAME:
                raise PlanError(f"interface name {ifname!r} longer than {MAX_IFNAME} characters")
            if ifname in self._ports_by_ifname:
                raise PlanError(f"interface name {ifname!r} used twice")
        self._link_count[plane] += 1
        number = self._link_count[plane]
        if number > 0xFFFF:
            raise PlanError(f"plane {plane} has more than 65535 links")
        base = int(plane_prefix(plane).network_address)
        subnet = ipaddress.IPv6Network((base | (number << 80), 64))
        name = f"{a_node}:{b_node}"
        if a_node in self.hosts and b_node in self.hosts:
            name += f"@p{plane + 1}"  # back-to-back hosts share one cable per plane
        if name in self._links_by_name:
            raise PlanError(f"second link between {a_node} and {b_node}")

        def mac(end: int) -> str:
            return f"02:{plane:02x}:{number >> 8:02x}:{number & 0xFF:02x}:00:{end:02x}"

        a = Port(a_node, a_ifname, plane, subnet[1], mac(1), name)
        b = Port(b_node, b_ifname, plane, subnet[2], mac(2), name)
        a.peer, b.peer = b, a
        link = Link(name, plane, number, subnet, a, b)
        self.links.append(link)
        self._links_by_name[name] = link
        for port in (a, b):
            self._ports_by_ifname[port.ifname] = port
            if port.node in self.hosts:
                host = self.hosts[port.node]
                if plane in host.ports:
                    raise PlanError(f"host {port.node} has two ports on plane {plane}")
                host.ports[plane] = port
            elif port.node in self.routers:
                router = self.routers[port.node]
                if router.plane != plane:
                    raise PlanError(f"router {port.node} (plane {router.plane}) "
                                    f"linked on plane {plane}")
                router.ports.append(port)
            else:
                raise PlanError(f"link {name}: unknown node {port.node}")
        self._adj_cache.clear()
        self._dist_cache.clear()
        self._max_choices.clear()
        return link

    def validate(self) -> None:
        for host in self.hosts.values():
            missing = [p for p in range(self.planes) if p not in host.ports]
            if missing:
                raise PlanError(f"host {host.name} has no port on plane(s) {missing}")

    # ----------------------------------------------------------------------------------------
    # lookups
    # ----------------------------------------------------------------------------------------
    def nodes(self) -> list[str]:
        return list(self.hosts) + list(self.routers)

    def is_host(self, name: str) -> bool:
        return name in self.hosts

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise PlanError(f"no host {name!r} (hosts: {', '.join(self.hosts)})") from None

    def router(self, name: str) -> Router:
        try:
            return self.routers[name]
        except KeyError:
            raise PlanError(f"no router {name!r}") from None

    def ports_of(self, node: str) -> list[Port]:
        if node in self.hosts:
            return [self.hosts[node].ports[p] for p in sorted(self.hosts[node].ports)]
        return list(self.router(node).ports)

    def port(self, ifname: str) -> Port:
        try:
            return self._ports_by_ifname[ifname]
        except KeyError:
            raise PlanError(f"no interface {ifname!r} in the plan") from None

    def link(self, name: str) -> Link:
        """A link by its name "a:b" (either order) or by either of its interface names."""
        if name in self._links_by_name:
            return self._links_by_name[name]
        if ":" in name:
            a, _, b = name.partition(":")
            b, at, plane = b.partition("@")
            rev = f"{b}:{a}{at}{plane}"
            if rev in self._links_by_name:
                return self._links_by_name[rev]
        if name in self._ports_by_ifname:
            return self._links_by_name[self._ports_by_ifname[name].link]
        raise PlanError(f"no link {name!r} (use 'nodeA:nodeB' or an interface name)")

    def ifnames(self) -> list[str]:
        return [port.ifname for link in self.links for port in link.ends()]

    def t1_router(self, plane: int, t1: int) -> Router:
        name = f"p{plane + 1}t1s{t1}"
        if name not in self.routers:
            raise PlanError(f"shape {self.shape!r} has no T1 switch {t1} on plane {plane + 1}")
        return self.routers[name]

    def node_key(self, name: str) -> tuple[int, int]:
        if name in self.hosts:
            return ROLE_HOST, self.hosts[name].number
        router = self.routers[name]
        return router.role, router.index

    # ----------------------------------------------------------------------------------------
    # uSIDs and locator
    # ----------------------------------------------------------------------------------------
    def decap_usid(self, host: str, plane: int) -> int:
        return usid_value(plane, ROLE_HOST, self.host(host).number)

    def usid_prefix(self, usid: int) -> ipaddress.IPv6Network:
        """The /48 a node owns: locator block followed by its uSID."""
        base = int(self.locator.network_address)
        return ipaddress.IPv6Network((base | (usid << (128 - LBL_BITS - NFL_BITS)),
                                      LBL_BITS + NFL_BITS))

    def plane_locator(self, plane: int) -> ipaddress.IPv6Network:
        """Every uSID of a plane starts with the plane nibble, so one /36 covers the plane."""
        base = int(self.locator.network_address)
        return ipaddress.IPv6Network((base | (plane << (128 - LBL_BITS - 4)), LBL_BITS + 4))

    def container(self, usids: Iterable[int]) -> ipaddress.IPv6Address:
        usids = list(usids)
        if not usids:
            raise PlanError("empty uSID list")
        if len(usids) > MAX_USIDS:
            raise PlanError(f"{len(usids)} uSIDs do not fit one container (max {MAX_USIDS})")
        value = int(self.locator.network_address)
        for i, usid in enumerate(usids):
            if not 0 < usid <= 0xFFFF:
                raise PlanError(f"uSID {usid:#x} at position {i} is not a 16-bit non-zero value")
            value |= usid << (128 - LBL_BITS - NFL_BITS * (i + 1))
        return ipaddress.IPv6Address(value)

    # ----------------------------------------------------------------------------------------
    # forwarding graph
    # ----------------------------------------------------------------------------------------
    def adjacency(self, plane: int) -> dict[str, list[tuple[Port, Port]]]:
        if plane not in self._adj_cache:
            adj: dict[str, list[tuple[Port, Port]]] = collections.defaultdict(list)
            for link in self.links:
                if link.plane == plane:
                    adj[link.a.node].append((link.a, link.b))
                    adj[link.b.node].append((link.b, link.a))
            self._adj_cache[plane] = dict(adj)
        return self._adj_cache[plane]

    def distances(self, plane: int, sources: Iterable[str]) -> dict[str, int]:
        """Hop counts to the nearest source; hosts never forward, so only sources and routers
        are expanded."""
        key = (plane, frozenset(sources))
        if key not in self._dist_cache:
            adj = self.adjacency(plane)
            dist = {s: 0 for s in key[1]}
            queue = collections.deque(sorted(key[1]))
            while queue:
                node = queue.popleft()
                if node in self.hosts and node not in key[1]:
                    continue
                for _, peer in adj.get(node, []):
                    if peer.node not in dist:
                        dist[peer.node] = dist[node] + 1
                        queue.append(peer.node)
            self._dist_cache[key] = dist
        return self._dist_cache[key]

    def next_hops(self, plane: int, node: str, targets: Iterable[str]) -> list[tuple[Port, Port]]:
        """(own port, peer port) pairs on equal-cost shortest paths from node to the targets."""
        targets = frozenset(targets)
        dist = self.distances(plane, targets)
        if node not in dist or dist[node] == 0:
            return []
        hops = []
        for own, peer in self.adjacency(plane).get(node, []):
            if dist.get(peer.node) == dist[node] - 1 and (peer.node in self.routers
                                                         or peer.node in targets):
                hops.append((own, peer))
        return hops

    def shortest_paths(self, plane: int, src: str, dst: str) -> list[list[str]]:
        """Every shortest node sequence from src to dst (the list starts after src and ends with
        dst), ordered by the (role, index) of its nodes."""
        dist = self.distances(plane, [dst])
        if src not in dist:
            raise PlanError(f"{dst} unreachable from {src} on plane {plane}")
        paths: list[list[str]] = []

        def walk(node: str, acc: list[str]) -> None:
            if node == dst:
                paths.append(acc)
                return
            for _, peer in self.next_hops(plane, node, [dst]):
                walk(peer.node, acc + [peer.node])

        walk(src, [])
        paths.sort(key=lambda p: [self.node_key(n) for n in p])
        return paths

    # ----------------------------------------------------------------------------------------
    # SRv6 paths and EVs
    # ----------------------------------------------------------------------------------------
    def srv6_path(self, src: str, dst: str, plane: int, t1: int | None = None) -> Srv6Path:
        """The uSID path from src to dst on a plane.

        t1 picks the T1 switch of a Clos (the "T0 uplink number" of the MRC paper); for hosts under
        the same T0 it yields a hairpin T0 -> T1 -> T0. Without t1 the shortest path must be
        unique."""
        src_host, dst_host = self.host(src), self.host(dst)
        if src == dst:
            raise PlanError(f"source and destination are both {src}")
        if not 0 <= plane < self.planes:
            raise PlanError(f"plane {plane} outside 0..{self.planes - 1}")
        if t1 is not None:
            via = self.t1_router(plane, t1).name
            first = self.shortest_paths(plane, src, via)
            second = self.shortest_paths(plane, via, dst)
            hops = first[0] + second[0]
        else:
            paths = self.shortest_paths(plane, src, dst)
            if len(paths) != 1:
                raise PlanError(f"{src} -> {dst} on plane {plane} has {len(paths)} equal-cost "
                                "paths; choose one with t1=")
            hops = paths[0]
        usids = [self.routers[n].usid for n in hops[:-1]] + [self.decap_usid(dst, plane)]
        t1_used = next((self.routers[n].index for n in hops[:-1] if self.routers[n].tier == "t1"),
                       None)
        port = src_host.ports[plane]
        del dst_host
        return Srv6Path(src, dst, plane, hops, usids, self.container(usids), port.addr, port.ifname,
                        t1_used)

    def srv6_da(self, src: str, dst: str, plane: int, t1: int | None = None) -> str:
        return str(self.srv6_path(src, dst, plane, t1).outer_da)

    def path_choices(self, src: str, dst: str, plane: int, same_t0_via_t1: bool = False
                     ) -> list[Srv6Path]:
        """The distinct paths an EV can select on one plane, in EV order."""
        t1s = sorted(r.index for r in self.routers.values() if r.plane == plane and r.tier == "t1")
        if t1s:
            shortest = self.shortest_paths(plane, src, dst)
            crosses_t1 = any(self.routers[n].tier == "t1" for n in shortest[0][:-1])
            if crosses_t1 or same_t0_via_t1:
                return [self.srv6_path(src, dst, plane, t1) for t1 in t1s]
            return [self.srv6_path(src, dst, plane)]
        result = []
        for hops in self.shortest_paths(plane, src, dst):
            usids = [self.routers[n].usid for n in hops[:-1]] + [self.decap_usid(dst, plane)]
            port = self.hosts[src].ports[plane]
            result.append(Srv6Path(src, dst, plane, hops, usids, self.container(usids), port.addr,
                                   port.ifname, None))
        return result

    def ev_paths(self, src: str, dst: str, evs: int | None = None, mode: str = "srv6",
                 same_t0_via_t1: bool = False) -> list[dict]:
        """EV -> path for one ordered host pair.

        plane = ev % planes; choice = (ev // planes) % (number of paths on that plane), so
        consecutive EVs alternate planes and every plane gets the same number of EVs when evs is
        a multiple of planes."""
        _check_mode(mode)
        choices = {p: self.path_choices(src, dst, p, same_t0_via_t1) for p in range(self.planes)}
        if evs is None:
            evs = self.planes * self.max_choices(same_t0_via_t1)
        if not 1 <= evs <= 65536:
            raise PlanError(f"evs = {evs}: must be 1..65536")
        out = []
        for ev in range(evs):
            plane = ev % self.planes
            paths = choices[plane]
            path = paths[(ev // self.planes) % len(paths)]
            entry = {"ev": ev}
            if mode == "srv6":
                entry.update(path.to_dict())
            else:
                port = self.hosts[src].ports[plane]
                entry.update({"plane": plane, "port": plane + 1, "t1": None, "egress": port.ifname,
                              "outer_src": None, "outer_da": None, "usids": None, "hops": None})
            out.append(entry)
        return out

    def max_choices(self, same_t0_via_t1: bool = False) -> int:
        """The largest number of paths any host pair has on any plane (cached)."""
        if same_t0_via_t1 not in self._max_choices:
            self._max_choices[same_t0_via_t1] = self._count_max_choices(same_t0_via_t1)
        return self._max_choices[same_t0_via_t1]

    def _count_max_choices(self, same_t0_via_t1: bool) -> int:
        best = 1
        names = list(self.hosts)
        for src in names:
            for dst in names:
                if src != dst:
                    for p in range(self.planes):
                        best = max(best, len(self.path_choices(src, dst, p, same_t0_via_t1)))
        return best

    def paths_json(self, mode: str = "srv6", evs: int | None = None,
                   pairs: Iterable[tuple[str, str]] | None = None,
                   same_t0_via_t1: bool = False) -> dict:
        _check_mode(mode)
        if pairs is None:
            pairs = [(s, d) for s in self.hosts for d in self.hosts if s != d]
        if evs is None:
            evs = self.planes * self.max_choices(same_t0_via_t1)
        out_pairs = []
        for src, dst in pairs:
            out_pairs.append({
                "src": src, "dst": dst,
                "src_gid": str(self.host(src).gid), "dst_gid": str(self.host(dst).gid),
                "evs": self.ev_paths(src, dst, evs, mode, same_t0_via_t1),
            })
        return {
            "schema": PATHS_SCHEMA,
            "shape": self.shape,
            "params": self.params,
            "mode": mode,
            "planes": self.planes,
            "locator": str(self.locator),
            "lbl_bits": LBL_BITS,
            "nfl_bits": NFL_BITS,
            "evs_per_pair": evs,
            "ev_rule": "plane = ev % planes; choice = (ev // planes) % len(paths on plane)",
            "same_t0_via_t1": same_t0_via_t1,
            "pairs": out_pairs,
        }

    # ----------------------------------------------------------------------------------------
    # JSON
    # ----------------------------------------------------------------------------------------
    def to_json(self, mode: str = "srv6") -> dict:
        _check_mode(mode)

        def port_dict(port: Port) -> dict:
            return {"ifname": port.ifname, "plane": port.plane, "addr": str(port.addr),
                    "prefixlen": 64, "mac": port.mac, "link": port.link, "peer": port.peer.node,
                    "peer_ifname": port.peer.ifname, "peer_addr": str(port.peer.addr),
                    "peer_mac": port.peer.mac}

        hosts = []
        for host in self.hosts.values():
            ports = []
            for plane in sorted(host.ports):
                d = port_dict(host.ports[plane])
                d["port"] = plane + 1
                d["table"] = PLANE_TABLE_BASE + plane
                d["decap_usid"] = usid_text(self.decap_usid(host.name, plane))
                d["decap_prefix"] = str(self.usid_prefix(self.decap_usid(host.name, plane)))
                ports.append(d)
            hosts.append({"name": host.name, "number": host.number, "gid": str(host.gid),
                          "group": host.group, "ports": ports})
        routers = [{"name": r.name, "plane": r.plane, "tier": r.tier, "index": r.index,
                    "usid": usid_text(r.usid), "usid_prefix": str(self.usid_prefix(r.usid)),
                    "loopback": str(r.loopback), "ports": [port_dict(p) for p in r.ports]}
                   for r in self.routers.values()]
        links = [{"name": link.name, "plane": link.plane, "subnet": str(link.subnet),
                  "a": {"node": link.a.node, "ifname": link.a.ifname, "addr": str(link.a.addr),
                        "mac": link.a.mac},
                  "b": {"node": link.b.node, "ifname": link.b.ifname, "addr": str(link.b.addr),
                        "mac": link.b.mac}}
                 for link in self.links]
        return {
            "schema": PLAN_SCHEMA,
            "shape": self.shape,
            "params": self.params,
            "mode": mode,
            "planes": self.planes,
            "mtu": self.mtu,
            "locator": str(self.locator),
            "lbl_bits": LBL_BITS,
            "nfl_bits": NFL_BITS,
            "gid_prefix": str(GID_PREFIX),
            "plane_prefixes": [str(plane_prefix(p)) for p in range(self.planes)],
            "plane_locators": [str(self.plane_locator(p)) for p in range(self.planes)],
            "roles": self.roles,
            "hosts": hosts,
            "routers": routers,
            "links": links,
        }


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise PlanError(f"routing mode {mode!r}: expected one of {', '.join(MODES)}")


def _positive(name: str, value: int, limit: int = MAX_INDEX) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
        raise PlanError(f"{name} = {value!r}: must be an integer 1..{limit}")
    return value


# --------------------------------------------------------------------------------------------
# shapes
# --------------------------------------------------------------------------------------------
def clos(planes: int, t0: int, t1: int, hosts_per_t0: int, **kw) -> Plan:
    """Two-tier multi-plane Clos: per plane, t0 leaf switches each linked to every one of t1
    spines; host i hangs off T0 (i-1)//hosts_per_t0 on every plane."""
    _positive("planes", planes, MAX_PLANES)
    _positive("t0", t0, MAX_INDEX + 1)
    _positive("t1", t1, MAX_INDEX + 1)
    _positive("hosts_per_t0", hosts_per_t0)
    if t0 * hosts_per_t0 > MAX_INDEX:
        raise PlanError(f"t0 * hosts_per_t0 = {t0 * hosts_per_t0} hosts: at most {MAX_INDEX}")
    plan = Plan("clos", {"planes": planes, "t0": t0, "t1": t1, "hosts_per_t0": hosts_per_t0},
                planes, **kw)
    for i in range(1, t0 * hosts_per_t0 + 1):
        plan.add_host(i, group=(i - 1) // hosts_per_t0)
    for p in range(planes):
        n = p + 1  # the plane's number, in every name
        for j in range(t0):
            plan.add_router(f"p{n}t0s{j}", p, "t0", ROLE_T0, j)
        for k in range(t1):
            plan.add_router(f"p{n}t1s{k}", p, "t1", ROLE_T1, k)
        # access links first so that host h's link number on every plane is h
        for host in plan.hosts.values():
            j, d = divmod(host.number - 1, hosts_per_t0)
            plan.connect(p, f"p{n}t0s{j}", f"p{n}t0s{j}-d{d}", host.name, f"{host.name}-p{n}")
        for j in range(t0):
            for k in range(t1):
                plan.connect(p, f"p{n}t0s{j}", f"p{n}t0s{j}-u{k}",
                             f"p{n}t1s{k}", f"p{n}t1s{k}-d{j}")
    plan.validate()
    return plan


def back_to_back(planes: int = 1, **kw) -> Plan:
    """Two hosts, one direct cable per plane."""
    _positive("planes", planes, MAX_PLANES)
    plan = Plan("back_to_back", {"planes": planes}, planes, **kw)
    plan.add_host(1)
    plan.add_host(2)
    for p in range(planes):
        n = p + 1  # the plane's number, in every name
        plan.connect(p, "h1", f"h1-p{n}", "h2", f"h2-p{n}")
    plan.validate()
    return plan


def _star(plan: Plan, hosts: int) -> None:
    for i in range(1, hosts + 1):
        plan.add_host(i)
    for p in range(plan.planes):
        n = p + 1  # the plane's number, in every name
        plan.add_router(f"p{n}r0", p, "r", ROLE_T0, 0)
        for host in plan.hosts.values():
            plan.connect(p, f"p{n}r0", f"p{n}r0-d{host.number - 1}", host.name,
                         f"{host.name}-p{n}")


def single_router(planes: int = 1, hosts: int = 2, **kw) -> Plan:
    """Hosts (default A=h1, B=h2) through one router per plane."""
    _positive("planes", planes, MAX_PLANES)
    _positive("hosts", hosts)
    if hosts < 2:
        raise PlanError("single_router needs at least 2 hosts")
    plan = Plan("single_router", {"planes": planes, "hosts": hosts}, planes, **kw)
    _star(plan, hosts)
    plan.validate()
    return plan


def incast(planes: int = 1, senders: int = 4, **kw) -> Plan:
    """senders hosts h1..hN and one receiver h(N+1) on one router per plane."""
    _positive("planes", planes, MAX_PLANES)
    _positive("senders", senders, MAX_INDEX - 1)
    plan = Plan("incast", {"planes": planes, "senders": senders}, planes, **kw)
    _star(plan, senders + 1)
    plan.roles = {"senders": [f"h{i}" for i in range(1, senders + 1)],
                  "receiver": [f"h{senders + 1}"]}
    plan.validate()
    return plan


def dumbbell(planes: int = 1, left: int = 2, right: int = 2, **kw) -> Plan:
    """left hosts on router r0, right hosts on router r1, one r0-r1 bottleneck per plane."""
    _positive("planes", planes, MAX_PLANES)
    _positive("left", left)
    _positive("right", right)
    if left + right > MAX_INDEX:
        raise PlanError(f"left + right = {left + right} hosts: at most {MAX_INDEX}")
    plan = Plan("dumbbell", {"planes": planes, "left": left, "right": right}, planes, **kw)
    for i in range(1, left + right + 1):
        plan.add_host(i, group=0 if i <= left else 1)
    for p in range(planes):
        n = p + 1  # the plane's number, in every name
        plan.add_router(f"p{n}r0", p, "r", ROLE_T0, 0)
        plan.add_router(f"p{n}r1", p, "r", ROLE_T0, 1)
        for host in plan.hosts.values():
            side = host.group
            d = host.number - 1 if side == 0 else host.number - 1 - left
            plan.connect(p, f"p{n}r{side}", f"p{n}r{side}-d{d}", host.name, f"{host.name}-p{n}")
        plan.connect(p, f"p{n}r0", f"p{n}r0-u0", f"p{n}r1", f"p{n}r1-u0")
    plan.roles = {"left": [f"h{i}" for i in range(1, left + 1)],
                  "right": [f"h{i}" for i in range(left + 1, left + right + 1)]}
    plan.validate()
    return plan


SHAPES = {
    "clos": clos,
    "back_to_back": back_to_back,
    "single_router": single_router,
    "dumbbell": dumbbell,
    "incast": incast,
}


def make(shape: str, **params) -> Plan:
    try:
        factory = SHAPES[shape]
    except KeyError:
        raise PlanError(f"unknown shape {shape!r}: expected one of {', '.join(SHAPES)}") from None
    try:
        return factory(**params)
    except TypeError as err:
        raise PlanError(f"shape {shape}: {err}") from None


def dumps(obj: dict) -> str:
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"

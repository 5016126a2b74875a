"""Per-node kernel configuration derived from a Plan (pure Python; rendering only).

Each node gets one /bin/sh script: a single `sysctl -w` with every knob, one `ip -6 -batch -`
with links, addresses, static neighbours, routes and rules, then `ethtool -K ... tx off` on host
ports. One process tree per node keeps a 80-node build at a few hundred processes instead of
thousands of `ip` calls through Mininet's pty.
"""

from __future__ import annotations

import dataclasses
import ipaddress

from . import plan as planlib

SEG6_END_USID = "seg6local action End flavors next-csid lblen {lbl} nflen {nfl}"
SEG6_DECAP = "seg6local action End.DT6 table local"
# Hash on src/dst address, next header, flow label, L4 source and destination port
# (Documentation/networking/ip-sysctl.rst, fib_multipath_hash_fields, policy 3).
HASH_POLICY = 3
HASH_FIELDS = 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0020
# seg6local routes hang off a per-node ifb device that nothing ever takes down: a route's device
# going admin down deletes the route, and `lo` cannot carry them (the kernel turns routes via lo
# into reject routes).
SID_DEV = "sid0"
RULE_PREF_FROM = 1000
RULE_PREF_OIF = 1100


@dataclasses.dataclass
class Nexthop:
    via: ipaddress.IPv6Address
    dev: str


@dataclasses.dataclass
class Route:
    prefix: str
    nexthops: list[Nexthop] = dataclasses.field(default_factory=list)
    encap: str = ""  # lwtunnel encap, with `dev`
    dev: str = ""
    table: int | None = None  # None = main

    def render(self, verb: str = "add") -> str:
        words = ["route", verb, self.prefix]
        if self.table is not None:
            words += ["table", str(self.table)]
        if self.encap:
            words += ["encap", self.encap, "dev", self.dev]
        elif len(self.nexthops) == 1:
            hop = self.nexthops[0]
            words += ["via", str(hop.via), "dev", hop.dev, "onlink"]
        else:
            for hop in self.nexthops:
                words += ["nexthop", "via", str(hop.via), "dev", hop.dev, "onlink"]
        # `onlink`: every gateway is the peer of a point-to-point veth. Without it the kernel
        # validates the gateway by a lookup in the route's own table, which in a plane table
        # finds the plane's gateway route and fails with "No route to host", depending on
        # whether the peer's carrier is already up (a race at build time and after flaps).
        return " ".join(words)


@dataclasses.dataclass
class NodeConfig:
    name: str
    is_host: bool
    sysctls: dict[str, str]
    batch: list[str]  # `ip -6 -batch` lines
    ethtool_tx_off: list[str]

    def script(self) -> str:
        lines = ["set -e"]
        if self.sysctls:
            args = " ".join(f"{k}={v}" for k, v in self.sysctls.items())
            lines.append(f"sysctl -q -w {args}")
        lines.append("ip -6 -batch - <<'MRCTB_EOF'")
        lines += self.batch
        lines.append("MRCTB_EOF")
        for ifname in self.ethtool_tx_off:
            lines.append(f"ethtool -K {ifname} tx off >/dev/null")
        return "\n".join(lines) + "\n"


def _sysctls(plan: planlib.Plan, node: str, mode: str) -> dict[str, str]:
    is_host = plan.is_host(node)
    ifnames = [p.ifname for p in plan.ports_of(node)]
    s: dict[str, str] = {}
    confs = ["all", "default", "lo"] + ifnames
    for conf in confs:
        # Addresses must survive flaps, or a flapped link comes back without its subnet.
        s[f"net.ipv6.conf.{conf}.keep_addr_on_down"] = "1"
        s[f"net.ipv6.conf.{conf}.accept_dad"] = "0"
        s[f"net.ipv6.conf.{conf}.accept_ra"] = "0"
        s[f"net.ipv6.conf.{conf}.router_solicitations"] = "0"
        if mode == "srv6":
            s[f"net.ipv6.conf.{conf}.seg6_enabled"] = "1"
    s["net.ipv6.conf.all.forwarding"] = "0" if is_host else "1"
    s["net.ipv6.fib_multipath_hash_policy"] = str(HASH_POLICY)
    s["net.ipv6.fib_multipath_hash_fields"] = hex(HASH_FIELDS)
    if is_host and mode == "srv6":
        # Outer flow label = inner flow label, so the EV stripe survives encapsulation (MRP0 C.1).
        s["net.ipv6.seg6_flowlabel"] = "0"
    return s


def _neighbour_lines(plan: planlib.Plan, node: str) -> list[str]:
    out = []
    for port in plan.ports_of(node):
        peer = port.peer
        # Permanent entries: no NDP, so a flap drops packets instead of parking them in the
        # neighbour queue for seconds (research/environment.md section 5).
        out.append(f"neigh replace {peer.addr} lladdr {peer.mac} dev {port.ifname} nud permanent")
    return out


def _hops(pairs) -> list[Nexthop]:
    return [Nexthop(peer.addr, own.ifname) for own, peer in pairs]


def router_routes(plan: planlib.Plan, name: str, mode: str) -> list[Route]:
    router = plan.router(name)
    plane = router.plane
    connected = {port.link for port in router.ports}
    routes: list[Route] = []
    for host in plan.hosts.values():
        hops = plan.next_hops(plane, name, [host.name])
        if hops:
            routes.append(Route(f"{host.gid}/128", _hops(hops)))
    for link in plan.links:
        if link.plane != plane or link.name in connected:
            continue
        hops = plan.next_hops(plane, name, [link.a.node, link.b.node])
        if hops:
            routes.append(Route(str(link.subnet), _hops(hops)))
    for other in plan.routers.values():
        if other.plane != plane or other.name == name:
            continue
        hops = plan.next_hops(plane, name, [other.name])
        if hops:
            routes.append(Route(f"{other.loopback}/128", _hops(hops)))
    if mode == "srv6":
        end = SEG6_END_USID.format(lbl=planlib.LBL_BITS, nfl=planlib.NFL_BITS)
        routes.append(Route(str(plan.usid_prefix(router.usid)), encap=end, dev=SID_DEV))
        for other in plan.routers.values():
            if other.plane != plane or other.name == name:
                continue
            hops = plan.next_hops(plane, name, [other.name])
            if hops:
                routes.append(Route(str(plan.usid_prefix(other.usid)), _hops(hops)))
        for host in plan.hosts.values():
            hops = plan.next_hops(plane, name, [host.name])
            if hops:
                routes.append(Route(str(plan.usid_prefix(plan.decap_usid(host.name, plane))),
                                    _hops(hops)))
    return routes


def host_routes(plan: planlib.Plan, name: str, mode: str) -> tuple[list[Route], list[str]]:
    host = plan.host(name)
    routes: list[Route] = []
    rules: list[str] = []
    gateways = {p: Nexthop(port.peer.addr, port.ifname) for p, port in sorted(host.ports.items())}
    # Unbound traffic to another GID may leave on any plane (ECMP across the NIC ports).
    routes.append(Route(str(planlib.GID_PREFIX), list(gateways.values())))
    for p, gw in gateways.items():
        table = planlib.PLANE_TABLE_BASE + p
        routes.append(Route(str(planlib.plane_prefix(p)), [gw]))
        routes.append(Route(str(planlib.ULA_FABRIC), [gw], table=table))
        if mode == "srv6":
            routes.append(Route(str(plan.plane_locator(p)), [gw]))
            routes.append(Route(str(plan.plane_locator(p)), [gw], table=table))
            routes.append(Route(str(plan.usid_prefix(plan.decap_usid(name, p))), encap=SEG6_DECAP,
                                dev=SID_DEV))
        # Traffic sourced from a port address, or bound to a port (SO_BINDTODEVICE, ping -I),
        # stays on that port's plane.
        rules.append(f"rule add from {host.ports[p].addr} lookup {table} pref {RULE_PREF_FROM + p}")
        rules.append(f"rule add oif {gw.dev} lookup {table} pref {RULE_PREF_OIF + p}")
    return routes, rules


def restore_lines(plan: planlib.Plan, name: str, mode: str,
                  down: frozenset[str] = frozenset()) -> list[str]:
    """Static neighbours and routes of a node as idempotent `replace` lines, leaving out
    interfaces in `down`.

    Setting an interface administratively down makes IPv6 delete every single-nexthop route and
    every neighbour entry through it (multipath nexthops are only marked dead), so a link coming
    back up needs its node's static configuration re-applied, as a router re-installs its
    configured static routes when a port returns."""
    planlib._check_mode(mode)
    lines = [line for line, port in zip(_neighbour_lines(plan, name), plan.ports_of(name))
             if port.ifname not in down]
    if plan.is_host(name):
        routes, _ = host_routes(plan, name, mode)
    else:
        routes = router_routes(plan, name, mode)
    for route in routes:
        if not route.encap:
            route.nexthops = [hop for hop in route.nexthops if hop.dev not in down]
            if not route.nexthops:
                continue
        lines.append(route.render("replace"))
    return lines


def node_config(plan: planlib.Plan, name: str, mode: str) -> NodeConfig:
    planlib._check_mode(mode)
    is_host = plan.is_host(name)
    batch = ["link set dev lo up"]
    if mode == "srv6":
        batch += [f"link add {SID_DEV} type ifb", f"link set dev {SID_DEV} up"]
    for port in plan.ports_of(name):
        batch.append(f"link set dev {port.ifname} mtu {plan.mtu} up")
    if is_host:
        batch.append(f"addr add {plan.host(name).gid}/128 dev lo nodad")
    else:
        batch.append(f"addr add {plan.router(name).loopback}/128 dev lo nodad")
    for port in plan.ports_of(name):
        batch.append(f"addr add {port.addr}/64 dev {port.ifname} nodad")
    batch += _neighbour_lines(plan, name)
    if is_host:
        routes, rules = host_routes(plan, name, mode)
    else:
        routes, rules = router_routes(plan, name, mode), []
    batch += [r.render() for r in routes]
    batch += rules
    ethtool = [p.ifname for p in plan.ports_of(name)] if is_host else []
    return NodeConfig(name, is_host, _sysctls(plan, name, mode), batch, ethtool)


def all_configs(plan: planlib.Plan, mode: str) -> dict[str, NodeConfig]:
    return {name: node_config(plan, name, mode) for name in plan.nodes()}

"""Things a scenario run adds to a built Fabric: an out-of-band control network and fault
injector relays spliced into links.

Both live in extra Mininet nodes (network namespaces) registered with the fabric, so the
fabric's teardown and leak check cover them like any other node.

Control network: a Linux bridge in node `ctl0`, one veth per endpoint host (`h<i>-ctl`, IPv4
10.77.0.<i>/16). The endpoints exchange QPNs, PSNs and keys over it (like perftest's TCP
exchange); it is not part of the fabric, so a fabric fault (all paths down) never cuts the
control connection and a run can still report what happened.

Relay splice: link A:B (veth ifA <-> ifB) becomes ifA <-> x<n>a [inj0] x<n>b <-> ifB. The
link's interface names, MACs and addresses stay as they were, so the plan, the routes, the
static neighbours, the EV path table and fabric.link_down()/flap() keep working; `mrct inject`
relays frames between x<n>a and x<n>b with AF_PACKET sockets. Direction "ab" of the relay is
from the link's end a (the first node of its name) to end b.
"""

from __future__ import annotations

import ipaddress
import json
import socket

from . import config as configlib
from . import fabric as fabriclib
from . import plan as planlib
from . import procs

CTL_NODE = "ctl0"
INJ_NODE = "inj0"
CTL_BRIDGE = "br0"
CTL_NET = ipaddress.IPv4Network("10.77.0.0/16")


def add_node(fab: fabriclib.Fabric, name: str):
    """Adds a namespace node to a running fabric and registers it for teardown and leak checks.

    Uses the fabric's bookkeeping (the same fields Fabric._build fills), so Fabric.stop() kills
    what runs in it, stops its shell and verifies it is gone."""
    from mininet.node import Host

    if name in fab._nodes:
        raise fabriclib.FabricError(f"node {name} exists already")
    node = fab.net.addHost(name, cls=Host, ip=None, inNamespace=True)
    fab._nodes[name] = node
    fab._pids[name] = node.pid
    fab._shell_pids.add(node.pid)
    ns = procs.netns_of(node.pid)
    if ns is None:
        raise fabriclib.FabricError(f"node {name}: shell pid {node.pid} vanished")
    fab._namespaces.add(ns)
    fab._save_state()
    # Nothing in these nodes talks IPv6 itself (no NDP/MLD noise in relayed or bridged traffic).
    fab.run(name, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                   "net.ipv6.conf.default.disable_ipv6=1"])
    fab.run(name, ["ip", "link", "set", "dev", "lo", "up"])
    return node


def ctl_addr(plan: planlib.Plan, host: str) -> str:
    n = plan.host(host).number
    return str(CTL_NET.network_address + (n // 256) * 256 + (n % 256))


def ctl_ifname(host: str) -> str:
    return f"{host}-ctl"


def add_control_network(fab: fabriclib.Fabric, hosts: list[str]) -> dict[str, str]:
    """Bridge + one veth per host; returns {host: control address}."""
    add_node(fab, CTL_NODE)
    fab.run(CTL_NODE, ["ip", "link", "add", CTL_BRIDGE, "type", "bridge", "stp_state", "0",
                       "forward_delay", "0"])
    fab.run(CTL_NODE, ["ip", "link", "set", "dev", CTL_BRIDGE, "up"])
    ctl_pid = str(fab.pid(CTL_NODE))
    addrs = {}
    for i, host in enumerate(hosts):
        hif, cif = ctl_ifname(host), f"c{i}"
        fab.run(host, ["ip", "link", "add", hif, "type", "veth", "peer", "name", cif, "netns",
                       ctl_pid])
        fab.run(host, ["sysctl", "-q", "-w", f"net.ipv6.conf.{hif}.disable_ipv6=1"])
        addr = ctl_addr(fab.plan, host)
        fab.run(host, ["ip", "addr", "add", f"{addr}/{CTL_NET.prefixlen}", "dev", hif])
        fab.run(host, ["ip", "link", "set", "dev", hif, "up"])
        fab.run(CTL_NODE, ["ip", "link", "set", "dev", cif, "master", CTL_BRIDGE, "up"])
        addrs[host] = addr
    return addrs


def _iface_sysctls(plan: planlib.Plan, node: str, mode: str, ifname: str) -> list[str]:
    allsys = configlib._sysctls(plan, node, mode)
    out = [f"{k}={v}" for k, v in allsys.items() if f".{ifname}." in k]
    if not plan.is_host(node):
        out.append(f"net.ipv6.conf.{ifname}.forwarding=1")
    return out


def splice_links(fab: fabriclib.Fabric, links: list[planlib.Link]) -> list[dict]:
    """Moves every link in `links` behind a relay in node inj0. Returns the relay's [[link]]
    entries: {"name", "a", "b", "plane"}."""
    if not links:
        return []
    add_node(fab, INJ_NODE)
    inj_pid = str(fab.pid(INJ_NODE))
    plan = fab.plan
    out = []
    for n, link in enumerate(links):
        xa, xb = f"x{n}a", f"x{n}b"
        a, b = link.a, link.b
        # Deleting one end deletes the pair; the kernel drops the routes and neighbours through
        # it, restore_static() puts them back once the new veths are configured.
        fab.run(a.node, ["ip", "link", "del", "dev", a.ifname])
        for port, relay_if in ((a, xa), (b, xb)):
            fab.run(port.node, ["ip", "link", "add", port.ifname, "address", port.mac, "mtu",
                                str(plan.mtu), "type", "veth", "peer", "name", relay_if,
                                "netns", inj_pid])
            fab.run(INJ_NODE, ["ip", "link", "set", "dev", relay_if, "mtu", str(plan.mtu), "up"])
            ctl = _iface_sysctls(plan, port.node, fab.mode, port.ifname)
            if ctl:
                fab.run(port.node, ["sysctl", "-q", "-w"] + ctl)
            fab.run(port.node, ["ip", "link", "set", "dev", port.ifname, "up"])
            fab.run(port.node, ["ip", "-6", "addr", "add", f"{port.addr}/64", "dev", port.ifname,
                                "nodad"])
            if plan.is_host(port.node):
                fab.run(port.node, ["ethtool", "-K", port.ifname, "tx", "off"])
        for node in {a.node, b.node}:
            fab.restore_static(node)
        out.append({"name": link.name, "a": xa, "b": xb, "plane": link.plane})
    return out


# ------------------------------------------------------------------------------------------------
# injector control socket (one JSON object per line each way)
# ------------------------------------------------------------------------------------------------
def injector_call(sock_path: str, request: dict, timeout_s: float = 2.0) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(sock_path)
        s.sendall((json.dumps(request) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.decode() or "{}")


def injector_counts(stats: dict) -> dict[str, int]:
    """Action -> count over every link and direction of a `stats` reply."""
    out: dict[str, int] = {}
    for link in (stats.get("links") or {}).values():
        for side in link.values():
            if isinstance(side, dict):
                for k, v in side.items():
                    if isinstance(v, int):
                        out[k] = out.get(k, 0) + v
    return out

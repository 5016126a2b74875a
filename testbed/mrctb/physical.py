"""Real NICs as scenario hosts: a host's plane ports cabled to physical interfaces of the tester.

    [hosts.h2]
    iface = "enp1s0"                 # h2 has one plane: its port is the tester's enp1s0
    # ifaces = ["enp1s0", "enp2s0"]  # one interface per plane, plane 0 first ("" = emulated)

A mapped port's fabric side is the tester's interface: it moves into the namespace of the router
the host's cable ends on, under that router port's name, and gets the port's address, MTU,
static neighbours and routes, as the veth it replaces had, and the plan's MAC of that port. At
teardown it goes back to the root namespace under its own name with its own MTU and MAC, down (the kernel would otherwise hand it back
under the router port's name when the namespace goes).

The DUT machine on the other end of the cable is configured as the plan's host: its port takes
the host port's address, MAC and routes (wiring() and host_script(): written into the run's
artifacts as wiring.json and <host>-config.sh). What runs on it is the DUT's business; the
tester runs the fabric, the reference peers, the injector and the captures.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess

from . import config as configlib
from . import plan as planlib

SYS_NET = "/sys/class/net"


@dataclasses.dataclass
class Mapping:
    host: str
    plane: int
    iface: str
    key: tuple  # the scenario key it came from, for messages: ("hosts", "h2", "iface")
    # The DUT machine is this network namespace of the tester (a stand-in, or a DUT NIC in the
    # tester cabled back to it): mrct run configures it as the host and runs the host's
    # endpoints in it. "" = another machine, which mrct run cannot drive yet.
    netns: str = ""


@dataclasses.dataclass
class Attached:
    mapping: Mapping
    router: str
    ifname: str      # the router port's name the interface took
    mtu: int         # the interface's own MTU and MAC, restored at detach
    mac: str
    was_up: bool


def parse(ctx, doc: dict, plan: planlib.Plan) -> list[Mapping]:
    """The [hosts.<name>] tables of a scenario. ctx: scenario._Ctx (fail(key, message))."""
    hosts = doc.get("hosts", {})
    if not isinstance(hosts, dict):
        ctx.fail(("hosts",), "must be a table of hosts: [hosts.h2] iface = \"enp1s0\"")
    out: list[Mapping] = []
    seen: dict[str, tuple] = {}
    for host, t in hosts.items():
        k = ("hosts", host)
        if host not in plan.hosts:
            ctx.fail(k, f"no host {host!r} in this topology (hosts: {', '.join(plan.hosts)})")
        if not isinstance(t, dict):
            ctx.fail(k, "must be a table: iface = \"enp1s0\" or ifaces = [...]")
        ctx.known(t, k, ("iface", "ifaces", "netns"))
        planes = len(plan.ports_of(host))
        if "iface" in t and "ifaces" in t:
            ctx.fail(k + ("ifaces",), "give iface (every plane) or ifaces (one per plane), "
                     "not both")
        if "iface" in t:
            name = ctx.str_(t, k, "iface", "")
            if planes != 1:
                ctx.fail(k + ("iface",), f"{host} has {planes} plane ports: give ifaces = "
                         f"[one interface per plane] ({planes} names, \"\" for a plane left "
                         "emulated)")
            names, key = [name], k + ("iface",)
        else:
            names, key = ctx.strs(t, k, "ifaces", []), k + ("ifaces",)
            if len(names) != planes:
                ctx.fail(key, f"{len(names)} name(s) for the {planes} plane port(s) of {host}")
        for plane, name in enumerate(names):
            if not name:
                continue
            if len(name) > planlib.MAX_IFNAME or "/" in name or name in (".", ".."):
                ctx.fail(key, f"{name!r} is not an interface name")
            if name in seen:
                ctx.fail(key, f"{name} is already the cable of {seen[name][1]} plane "
                         f"{seen[name][2]}")
            seen[name] = (key, host, plane)
            out.append(Mapping(host, plane, name, key))
        netns = ctx.str_(t, k, "netns", "")
        if netns:
            if not all(names) or not names:
                ctx.fail(k + ("netns",), f"the DUT namespace needs every port of {host} on a "
                         "tester interface (no \"\" in ifaces)")
            if "/" in netns or netns in (".", ".."):
                ctx.fail(k + ("netns",), f"{netns!r} is not a namespace name")
            for m in out:
                if m.host == host:
                    m.netns = netns
    return out


def netns_of(mappings: list[Mapping]) -> dict[str, str]:
    """{host: DUT namespace} of the hosts run in a namespace of the tester."""
    return {m.host: m.netns for m in mappings if m.netns}


def _ip_json(args: list[str]) -> list:
    p = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        return []
    try:
        return json.loads(p.stdout or "[]")
    except ValueError:
        return []


def problems(mappings: list[Mapping], plan: planlib.Plan, ip=None,
             exists=os.path.exists) -> list[tuple[tuple, str]]:
    """What makes a mapping unusable on this machine: (scenario key, message) for each; empty
    when every interface exists in this namespace, can take the plan's MTU and is not in use
    (no address other than link-local, no master, no route through it)."""
    ip = ip or _ip_json
    out = []
    routes = ip(["route", "show", "table", "all"]) + ip(["-6", "route", "show", "table", "all"])
    for m in mappings:
        where = f"{m.iface} (for {m.host} plane {m.plane})"
        if m.netns and not exists(os.path.join("/run/netns", m.netns)):
            out.append((m.key[:2] + ("netns",), f"{m.netns}: no such network namespace "
                        "(ip netns list)"))
            continue
        if not exists(os.path.join(SYS_NET, m.iface)):
            out.append((m.key, f"{where}: no such interface on this machine"))
            continue
        info = ip(["-d", "addr", "show", "dev", m.iface])
        if not info:
            out.append((m.key, f"{where}: cannot read it (ip -j -d addr show dev {m.iface})"))
            continue
        link = info[0]
        if link.get("link_type") != "ether":
            out.append((m.key, f"{where}: not an Ethernet interface ({link.get('link_type')})"))
            continue
        max_mtu = int(link.get("max_mtu") or link.get("mtu") or 0)
        if max_mtu and max_mtu < plan.mtu:
            out.append((m.key, f"{where}: MTU at most {max_mtu}, the fabric needs {plan.mtu} "
                        "(topology.mtu; PMTU + SRv6 headers, docs/scenarios.md)"))
            continue
        used = [a.get("local") for a in link.get("addr_info", [])
                if a.get("scope") != "link"]
        if used:
            out.append((m.key, f"{where}: in use: it holds {', '.join(map(str, used))}"))
            continue
        if link.get("master"):
            out.append((m.key, f"{where}: in use: a port of {link['master']}"))
            continue
        via = sorted({r.get("dst", "?") for r in routes if r.get("dev") == m.iface
                      and r.get("table") != "local"})
        if via:
            out.append((m.key, f"{where}: in use: routes through it ({', '.join(via[:3])})"))
    return out


def attach(fab, mappings: list[Mapping]) -> list[Attached]:
    """Replaces each mapped host port's cable by the tester's interface (see the module doc).
    Returns what detach() needs; on an error, detaches what it attached and raises."""
    plan = fab.plan
    done: list[Attached] = []
    try:
        for m in mappings:
            port = plan.ports_of(m.host)[m.plane]
            rport = port.peer
            info = _ip_json(["link", "show", "dev", m.iface])[0]
            a = Attached(m, rport.node, rport.ifname, int(info.get("mtu", 1500)),
                         info.get("address", ""), "UP" in info.get("flags", []))
            # Deleting the router's end deletes the pair (the emulated host keeps no port on
            # this plane: its namespace stays, unused, so that teardown is unchanged).
            fab.run(rport.node, ["ip", "link", "del", "dev", rport.ifname])
            subprocess.run(["ip", "link", "set", "dev", m.iface, "down"], check=True)
            subprocess.run(["ip", "link", "set", "dev", m.iface, "netns",
                            str(fab.pid(rport.node))], check=True)
            done.append(a)
            fab.run(rport.node, ["ip", "link", "set", "dev", m.iface, "name", rport.ifname])
            # The plan's MAC: the DUT and the router's neighbours know the port by it.
            fab.run(rport.node, ["ip", "link", "set", "dev", rport.ifname, "mtu",
                                 str(plan.mtu), "address", rport.mac])
            sysctls = [f"{k}={v}" for k, v in configlib._sysctls(plan, rport.node,
                                                                  fab.mode).items()
                       if f".{rport.ifname}." in k]
            sysctls.append(f"net.ipv6.conf.{rport.ifname}.forwarding=1")
            fab.run(rport.node, ["sysctl", "-q", "-w"] + sysctls)
            fab.run(rport.node, ["ip", "link", "set", "dev", rport.ifname, "up"])
            fab.run(rport.node, ["ip", "-6", "addr", "add", f"{rport.addr}/64", "dev",
                                 rport.ifname, "nodad"])
            fab.restore_static(rport.node)
    except BaseException:
        detach(fab, done)
        raise
    return done


def detach(fab, attached: list[Attached]) -> list[str]:
    """Gives the interfaces back (root namespace, own name and MTU, down unless they were up).
    Returns what could not be undone."""
    errors = []
    for a in reversed(attached):
        steps = [(True, ["ip", "link", "set", "dev", a.ifname, "down"]),
                 (True, ["ip", "link", "set", "dev", a.ifname, "name", a.mapping.iface]),
                 (True, ["ip", "link", "set", "dev", a.mapping.iface, "netns", "1"]),
                 (False, ["ip", "link", "set", "dev", a.mapping.iface, "mtu", str(a.mtu)])]
        if a.mac:
            steps.append((False, ["ip", "link", "set", "dev", a.mapping.iface, "address", a.mac]))
        if a.was_up:
            steps.append((False, ["ip", "link", "set", "dev", a.mapping.iface, "up"]))
        for in_router, cmd in steps:
            try:
                if in_router:
                    # the name before the rename, or after it, whichever the interface has now
                    r = fab.run(a.router, cmd, check=False)
                    rc = r.returncode
                else:
                    rc = subprocess.run(cmd, capture_output=True, check=False).returncode
            except Exception as err:  # keep giving back the others
                errors.append(f"{a.mapping.iface}: {' '.join(cmd)}: {err}")
                continue
            if rc != 0 and not (in_router and cmd[-1] == "down"):
                errors.append(f"{a.mapping.iface}: {' '.join(cmd)} failed")
    return errors


def wiring(plan: planlib.Plan, mode: str, mappings: list[Mapping]) -> dict:
    """The wiring sheet: per mapped port, the tester interface, the DUT port's address, MAC,
    prefix and gateway, and the MTU."""
    ports = []
    for m in mappings:
        port = plan.ports_of(m.host)[m.plane]
        rport = port.peer
        ports.append({"host": m.host, "plane": m.plane, "nic_port": m.plane + 1,
                      "tester_iface": m.iface, "router": rport.node,
                      "router_port": rport.ifname, "router_addr": str(rport.addr),
                      "router_mac": rport.mac, "dut_port": port.ifname,
                      "dut_addr": f"{port.addr}/64", "dut_mac": port.mac,
                      "dut_gid": str(plan.host(m.host).gid), "mtu": plan.mtu})
    return {"schema": "mrctb-wiring/1", "routing": mode, "ports": ports}


def host_script(plan: planlib.Plan, mode: str, host: str) -> str:
    """The /bin/sh script that configures a Linux DUT machine as `host` of the plan (the one the
    testbed runs in an emulated host's namespace): sysctls, the port's address and MAC, static
    neighbours, per-plane routes. Its ports must carry the plan's names (dut_port in wiring())."""
    lines = ["#!/bin/sh", "# Configures this machine as " + host + " of the scenario's plan "
             "(mrctb physical.host_script).", "set -e"]
    for port in plan.ports_of(host):
        lines.append(f"ip link set dev {port.ifname} address {port.mac} mtu {plan.mtu} up")
    return "\n".join(lines) + "\n" + configlib.node_config(plan, host, mode).script()


# ------------------------------------------------------------------------------------------------
# A DUT machine that is a namespace of the tester (Mapping.netns)
# ------------------------------------------------------------------------------------------------
def configure_netns(plan: planlib.Plan, mode: str, host: str, netns: str) -> None:
    """Runs host_script() in the namespace, unless it is configured as the host already (the
    host's GID on its loopback: a second run, or a fault-free reference run, in it)."""
    lo = subprocess.run(["ip", "netns", "exec", netns, "ip", "-6", "-j", "addr", "show", "dev",
                         "lo"], capture_output=True, text=True, check=False).stdout
    if f'"{plan.host(host).gid}"' in lo.replace(" ", ""):
        return
    p = subprocess.run(["ip", "netns", "exec", netns, "sh", "-s"],
                       input=host_script(plan, mode, host).encode(), capture_output=True,
                       check=False)
    if p.returncode != 0:
        raise RuntimeError(f"configuring namespace {netns} as {host}: "
                           f"{(p.stderr or p.stdout).decode(errors='replace').strip()}")


def add_control_port(fab, host: str, netns: str, index: int) -> str:
    """The host's port on the control network (splice.add_control_network) in its DUT
    namespace. Returns its address."""
    from . import splice
    hif, cif = splice.ctl_ifname(host), f"c{index}"
    fab.run(splice.CTL_NODE, ["ip", "link", "add", cif, "type", "veth", "peer", "name", hif,
                              "netns", netns])
    addr = splice.ctl_addr(fab.plan, host)
    for cmd in (["sysctl", "-q", "-w", f"net.ipv6.conf.{hif}.disable_ipv6=1"],
                ["ip", "addr", "add", f"{addr}/{splice.CTL_NET.prefixlen}", "dev", hif],
                ["ip", "link", "set", "dev", hif, "up"]):
        subprocess.run(["ip", "netns", "exec", netns] + cmd, check=True, capture_output=True)
    fab.run(splice.CTL_NODE, ["ip", "link", "set", "dev", cif, "master", splice.CTL_BRIDGE,
                              "up"])
    return addr


def popen(fab, netns: str, args: list[str], **kwargs) -> subprocess.Popen:
    """Starts a process in the DUT namespace; the fabric kills it at teardown if it still runs
    (as it does the processes of its own nodes)."""
    proc = subprocess.Popen(["ip", "netns", "exec", netns] + list(args), **kwargs)
    fab._procs.append(proc)  # Fabric.popen's list: stop() kills and reaps what is left
    return proc


def remove_control_port(host: str, netns: str) -> None:
    from . import splice
    subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "del", splice.ctl_ifname(host)],
                   capture_output=True, check=False)

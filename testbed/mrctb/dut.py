"""The DUT contract: how an implementation under test plugs into `mrct run` / `mrct suite`.

In the style of the QUIC interop runner: the implementation is a shell command template for
one endpoint role (client = MRC requester, server = MRC responder), started inside the host's
network namespace with everything it needs in MRC_* environment variables (ENV_VARS below,
ci/dut/README.md). Exit code 0 means the transfer completed; "this scenario is not supported"
is said only explicitly, by exit code 69 (EXIT_UNSUPPORTED, sysexits' EX_UNAVAILABLE) or by
`"unsupported": "<reason>"` in the result JSON; anything else is a failure. In particular 126
and 127 are what /bin/sh returns when the command cannot be run or is not found: an error of the
DUT set-up, reported with the shell's message, never "unsupported". The other role is played by
the reference endpoint (`mrct endpoint`).

A DUT profile (TOML) names the command templates and the optional capabilities; scenarios that
need a capability the DUT lacks are reported unsupported without running, and checker rules
that depend on a missing capability are skipped with that reason.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import tomllib

from . import scenario as sclib

# name -> meaning (documented in ci/dut/README.md; a test keeps both in step)
ENV_VARS = {
    "MRC_ROLE": "client (requester, writes) or server (responder, receives and verifies)",
    "MRC_SCENARIO": "scenario name",
    "MRC_NODE": "this host's node name (h1, h2, ...)",
    "MRC_PEER_NODE": "the peer host's node name",
    "MRC_IFACES": "plane interfaces, comma-separated; NIC port n (1-based) = the n-th",
    "MRC_PLANES": "number of planes (= interfaces)",
    "MRC_NEXT_HOPS": "IFACE=MAC of each plane's next hop, comma-separated",
    "MRC_PORT_ADDRS": "this host's IPv6 address on each plane port, comma-separated",
    "MRC_GID": "this node's GID (IPv6, on lo): source/destination of RoCE packets",
    "MRC_PEER_GID": "the peer's GID",
    "MRC_CTL_ADDR": "this host's address on the out-of-band control network (IPv4)",
    "MRC_CTL_PORT": "TCP port of the control connection (the server listens on it)",
    "MRC_PEER_CTL_ADDR": "the peer's control address (the client connects to it)",
    "MRC_EV_FORMAT": "srv6, stev or udp",
    "MRC_EV_PROFILE": "EV profile TOML (explicit EVs: for srv6 the outer DA of every path); "
                      "empty = generated EVs",
    "MRC_EVS_PER_PLANE": "generated EVs per plane (stev/udp)",
    "MRC_CC": "nscc, none or empty (the implementation's default)",
    "MRC_CC_PROFILE": "CC profile TOML, or empty",
    "MRC_PMTU": "path MTU 256..4096, 0 = the largest the interfaces carry",
    "MRC_MPR": "MPR window, 128-PSN units",
    "MRC_WIMM": "server: WRITE_WITH_IMM messages in flight it accepts",
    "MRC_TIMEOUT": "QP local ACK timeout exponent t (1.024 us * 2^t)",
    "MRC_RETRY": "LINEAR:EXP retry counts",
    "MRC_PROBE_INTERVAL_US": "probe interval of retired EVs, microseconds",
    "MRC_IO": "reference endpoint I/O back end (packet | socket); others may ignore it",
    "MRC_OP": "write or write_with_imm",
    "MRC_SIZE": "message size, bytes",
    "MRC_MESSAGES": "messages per QP (empty with MRC_DURATION_S)",
    "MRC_DURATION_S": "seconds to run (empty with MRC_MESSAGES)",
    "MRC_QPS": "queue pairs",
    "MRC_TX_DEPTH": "outstanding messages per QP",
    "MRC_STALL_S": "client: give up after this many seconds without a completion",
    "MRC_SEED": "seed of the run (data pattern, engine randomness)",
    "MRC_OUT": "a directory for this endpoint's own files (logs, captures)",
    "MRC_EVENT_LOG": "where to write the event log (JSON lines), if the implementation has one",
    "MRC_RESULT": "where to write the result JSON object (or print it as the last stdout line)",
    "MRC_PLAN": "the fabric's plan.json (addresses, ports, MACs)",
    "MRC_PATHS": "the fabric's paths.json (EV -> path table)",
    "MRC_PCAP_PREFIX": "optional: capture every frame this endpoint sends and receives into "
                       "PREFIX-<iface>.pcap (empty = do not)",
    "MRC_MUTANT": "reference endpoint only: test-only mutant mode, empty = none",
    "MRCT": "path of the mrct binary (for the reference endpoint)",
    "MRC_SERVERS": "node role: the servers this host writes to, NODE=CTL_ADDR comma-separated",
    "MRC_CLIENTS": "node role: how many client connections this host accepts",
    "MRC_PEER_EV_PROFILES": "node role, srv6: GID=EV_PROFILE_TOML of each peer, comma-separated",
}
EXIT_UNSUPPORTED = 69       # the harness says "this scenario is not supported" (EX_UNAVAILABLE)
EXIT_SH_CANNOT_RUN = 126    # /bin/sh: found but not executable
EXIT_SH_NOT_FOUND = 127     # /bin/sh: command not found
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ROLES = ("client", "server")
# The command template of a host that takes part in several endpoint pairs (incast,
# all-to-all): one process serves every connection of the host, as a NIC does.
NODE = "node"
# The command template of the script mode: one process plays the implementation of a conformance
# script (*.mrcs), driven over JSON lines on stdin/stdout (`mrct script run --dut`).
SCRIPT = "script"


class DutError(ValueError):
    pass


@dataclasses.dataclass
class Dut:
    name: str = "reference"
    description: str = ""
    path: str = ""                 # profile file ("" = built in)
    role: str = ""                 # role the DUT plays in runs: client | server | both
    commands: dict = dataclasses.field(default_factory=dict)  # role -> shell template
    env: dict = dataclasses.field(default_factory=dict)
    capabilities: dict = dataclasses.field(default_factory=dict)
    checker_capabilities: dict = dataclasses.field(default_factory=dict)

    @property
    def builtin(self) -> bool:
        return not self.commands

    def plays(self, role: str) -> bool:
        return not self.builtin and (self.role == "both" or self.role == role)

    def serves_node(self, roles: set[str]) -> bool:
        """Whether a host with these roles (of several pairs) runs the DUT's `node` command:
        the profile has one and the DUT plays one of the host's roles."""
        return NODE in self.commands and any(self.plays(r) for r in roles)

    def has(self, capability: str) -> bool:
        return bool(self.capabilities.get(capability, True))


# Capabilities the checker's DUT profile knows (conformance/check.h Capabilities); passed on.
CHECKER_CAPS = ("trim_nack", "trim_nack_dest_unsupported", "dynamic_mpr", "svc_time")
# Defaults when a profile does not list a capability: what the MRC API makes mandatory is on,
# optional features are off.
CAP_DEFAULTS = {"imm": True, "srv6": True, "stev": True, "udp": True, "multi_plane": True,
                "trim_nack": True, "trim_nack_dest_unsupported": False, "dynamic_mpr": False,
                "svc_time": False, "port_status": True, "ev_retire": True, "multi_qp": True}
# What `mrct endpoint` does: its engine's DeviceCaps (trim_nack, dynamic_mpr, svc_time all on)
# and every QP it connects enables MRC_QP_CAP_DYNAMIC_MPR (reference-impl/runtime/transfer.cc).
# port_status stays claimed: the engine implements it, and a scenario that shows the runtime
# not reacting to a NIC port going down should fail, not be skipped.
_REFERENCE_CAPS = {**CAP_DEFAULTS, "dynamic_mpr": True, "svc_time": True}
REFERENCE = Dut(name="reference", description="the reference endpoint (mrct endpoint) on both "
                "sides", capabilities=_REFERENCE_CAPS,
                checker_capabilities={k: _REFERENCE_CAPS[k] for k in CHECKER_CAPS})


def load(path: str) -> Dut:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DutError(f"{path}: cannot read: {err}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DutError(f"{path}: TOML syntax: {err}") from None
    lines = sclib.key_lines(text)

    def fail(key: tuple, msg: str):
        line = 0
        k = key
        while k and not line:
            line = lines.get(k, 0)
            k = k[:-1]
        where = f"{path}:{line}" if line else path
        raise DutError(f"{where}: {sclib.format_key(key)}: {msg}")

    for k in doc:
        if k not in ("dut", "capabilities"):
            fail((k,), "unknown section; expected [dut] and [capabilities]")
    d = doc.get("dut", {})
    if not isinstance(d, dict):
        fail(("dut",), "must be a table")
    for k in d:
        if k not in ("name", "description", "role", "client", "server", NODE, SCRIPT, "env"):
            fail(("dut", k), "unknown key; expected name, description, role, client, server, "
                 "node, script, env")
    dut = Dut(path=os.path.abspath(path))
    for key in ("name", "description", "role"):
        if key in d and not isinstance(d[key], str):
            fail(("dut", key), f"must be a string, got {type(d[key]).__name__} {d[key]!r}")
    dut.name = d.get("name", os.path.splitext(os.path.basename(path))[0])
    if not dut.name.strip() or any(c in dut.name for c in "\0\n\r"):
        fail(("dut", "name"), f"{dut.name!r}: must be a non-empty single line")
    dut.description = d.get("description", "")
    for role in ROLES + (NODE, SCRIPT):
        if role in d:
            if not isinstance(d[role], str) or not d[role].strip():
                fail(("dut", role), "must be a non-empty shell command")
            dut.commands[role] = d[role]
    if not any(r in dut.commands for r in ROLES):
        fail(("dut",), "give a command template for at least one role: client = \"...\" or "
             "server = \"...\"")
    dut.role = d.get("role", "client" if "client" in dut.commands else "server")
    if dut.role not in ("client", "server", "both"):
        fail(("dut", "role"), f"{dut.role!r}: expected client, server or both")
    for role in ROLES if dut.role == "both" else (dut.role,):
        if role not in dut.commands:
            fail(("dut", "role"), f"role {role} needs a `{role}` command template")
    env = d.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        fail(("dut", "env"), "must be a table of strings")
    for k, v in env.items():
        if not ENV_NAME.fullmatch(k):
            fail(("dut", "env", k), "not an environment variable name (letters, digits and _, "
                 "not starting with a digit)")
        if k in ENV_VARS or k.startswith("MRC_"):
            fail(("dut", "env", k), "MRC_ names (and MRCT) belong to the runner; choose "
                 "another name")
        if "\0" in v:
            fail(("dut", "env", k), "the value contains a NUL byte")
    dut.env = dict(env)
    caps = doc.get("capabilities", {})
    if not isinstance(caps, dict):
        fail(("capabilities",), "must be a table")
    for k, v in caps.items():
        if k not in CAP_DEFAULTS:
            fail(("capabilities", k), f"unknown capability; expected {', '.join(CAP_DEFAULTS)}")
        if not isinstance(v, bool):
            fail(("capabilities", k), "must be true or false")
    dut.capabilities = {**CAP_DEFAULTS, **caps}
    dut.checker_capabilities = {k: dut.capabilities[k] for k in CHECKER_CAPS}
    # Where the templates run: the profile's folder, so adapters next to it are found.
    dut.env.setdefault("MRC_DUT_DIR", os.path.dirname(dut.path))
    return dut


def unsupported_signal(rc: int | None, result: dict | None) -> str:
    """The reason a DUT gave for "not supported", or "" when it gave none. Only the explicit
    signals count: exit code EXIT_UNSUPPORTED or a non-empty "unsupported" string in its
    result JSON."""
    why = (result or {}).get("unsupported")
    if isinstance(why, str) and why.strip():
        return why.strip()
    if rc == EXIT_UNSUPPORTED:
        return f"exit code {EXIT_UNSUPPORTED}"
    return ""


def cannot_run(rc: int | None) -> bool:
    """The shell could not run the DUT command (not found, not executable)."""
    return rc in (EXIT_SH_CANNOT_RUN, EXIT_SH_NOT_FOUND)


def required_capabilities(sc: sclib.Scenario) -> list[str]:
    """What a scenario needs from an implementation: declared plus implied."""
    need = list(sc.requires)
    if sc.traffic.op == "write_with_imm":
        need.append("imm")
    need.append(sc.ev_format)
    if sc.topology.planes > 1:
        need.append("multi_plane")
    if sc.traffic.qps > 1:
        need.append("multi_qp")
    return sorted(set(need))


def unsupported_reason(dut: Dut, sc: sclib.Scenario) -> str:
    missing = [c for c in required_capabilities(sc) if not dut.has(c)]
    return f"DUT {dut.name} lacks capability {', '.join(missing)}" if missing else ""


def rules_to_skip(dut: Dut, catalogue: list[dict]) -> dict[str, str]:
    """Rule id -> reason, for rules whose catalogued capability the DUT does not have."""
    out = {}
    for rule in catalogue:
        need = str(rule.get("capability", "") or "")
        for cap in CAP_DEFAULTS:
            if re.search(rf"\b{cap}\b", need, re.IGNORECASE) and not dut.has(cap):
                out[rule["id"]] = f"DUT {dut.name} lacks capability {cap}"
    return out


# ------------------------------------------------------------------------------------------------
# the reference endpoint, driven by the same environment
# ------------------------------------------------------------------------------------------------
def reference_argv(env: dict) -> list[str]:
    """`mrct endpoint` command line from the MRC_* environment (ci/dut/run_endpoint.sh does the
    same in shell; a test keeps them equal)."""
    role = env["MRC_ROLE"]
    argv = [env["MRCT"], "endpoint", role, "--json", "--ifaces", env["MRC_IFACES"],
            "--gid", env["MRC_GID"], "--port", env["MRC_CTL_PORT"],
            "--ev-format", env["MRC_EV_FORMAT"], "--io", env["MRC_IO"],
            "--timeout", env["MRC_TIMEOUT"], "--retry", env["MRC_RETRY"],
            "--mpr", env["MRC_MPR"], "--wimm", env["MRC_WIMM"],
            "--probe-interval-us", env["MRC_PROBE_INTERVAL_US"],
            "--seed", env["MRC_SEED"], "--name", env["MRC_NODE"]]
    for hop in filter(None, env.get("MRC_NEXT_HOPS", "").split(",")):
        argv += ["--next-hop", hop]
    if role == "server":
        argv += ["--listen", env["MRC_CTL_ADDR"]]
    else:
        argv += ["--server", env["MRC_PEER_CTL_ADDR"], "--size", env["MRC_SIZE"],
                 "--qps", env["MRC_QPS"], "--tx-depth", env["MRC_TX_DEPTH"],
                 "--stall", env["MRC_STALL_S"]]
        if env.get("MRC_DURATION_S"):
            argv += ["--duration", env["MRC_DURATION_S"]]
        else:
            argv += ["--iters", env["MRC_MESSAGES"]]
        if env["MRC_OP"] == "write_with_imm":
            argv.append("--imm")
    if env.get("MRC_EV_PROFILE"):
        argv += ["--ev-profile", env["MRC_EV_PROFILE"]]
    elif env.get("MRC_EVS_PER_PLANE"):
        argv += ["--evs", str(int(env["MRC_EVS_PER_PLANE"]) * int(env["MRC_PLANES"]))]
    if env.get("MRC_CC_PROFILE"):
        argv += ["--cc-profile", env["MRC_CC_PROFILE"]]
    if env.get("MRC_CC"):
        argv += ["--cc", env["MRC_CC"]]
    if env.get("MRC_PMTU", "0") != "0":
        argv += ["--pmtu", env["MRC_PMTU"]]
    if env.get("MRC_EVENT_LOG"):
        argv += ["--event-log", env["MRC_EVENT_LOG"]]
    if env.get("MRC_PCAP_PREFIX"):
        argv += ["--pcap", env["MRC_PCAP_PREFIX"]]
    if env.get("MRC_MUTANT"):
        argv += ["--mutant", env["MRC_MUTANT"]]
    return argv


def command_for(dut: Dut, role: str, env: dict) -> tuple[list[str], bool]:
    """(argv, is_dut) for one endpoint role."""
    if dut.plays(role):
        return ["/bin/sh", "-c", dut.commands[role]], True
    return reference_argv(env), False


def describe_command(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)

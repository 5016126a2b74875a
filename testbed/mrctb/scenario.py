"""Scenario files (TOML): parsing and validation, no root needed.

A scenario says which fabric to build, which endpoints talk, what goes wrong on the way and
what the run must show. docs/scenarios.md is the reference; this module is its validator.
Every error names the file, the line and the key:

    scenarios/flap.toml:23: fault[0].for_ms: must be a number > 0, got -5

tomllib reports no positions for keys, so key_lines() scans the text once and maps every key
path to the line that defines it (tables, arrays of tables, dotted keys, inline tables).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import tomllib
from typing import Any

from . import physical
from . import plan as planlib

SCHEMA_VERSION = 1
SHAPE_PARAMS = {
    "clos": ("planes", "t0", "t1", "hosts_per_t0"),
    "back_to_back": ("planes",),
    "single_router": ("planes", "hosts"),
    "dumbbell": ("planes", "left", "right"),
    "incast": ("planes", "senders"),
}
PATTERNS = ("pairs", "all_to_all", "incast")
OPS = ("write", "write_with_imm")
EV_FORMATS = ("srv6", "stev", "udp")
IO_KINDS = ("packet", "socket")
FAULT_ACTIONS = ("link_down", "link_up", "flap", "node_down", "node_up", "plane_down",
                 "plane_up", "rule_add", "rule_remove")
# Injector rule models (fault-injector/README.md "Models"); the injector validates their keys.
IMPAIR_TYPES = ("loss", "drop", "blackhole", "gilbert", "delay", "reorder", "dup", "corrupt",
                "trim", "ecn", "rate", "flap")
CAPTURE_POINTS = ("endpoints", "wire", "impaired", "routers", "none")
INJECTOR_ACTIONS = ("drop", "trim", "delay", "dup", "corrupt", "ecn", "pass")
VERDICTS = ("pass", "fail")
# Event kinds of the endpoint event log (reference-impl/engine/engine.h EventKind).
EVENT_KINDS = ("qp_state", "ev_state", "cwnd", "retransmit", "completion", "async", "drop",
               "nack_rx", "probe", "port_status", "ep_response", "mpr", "reverse_ev")
CAPABILITIES = ("imm", "srv6", "stev", "udp", "multi_plane", "trim_nack",
                "trim_nack_dest_unsupported", "dynamic_mpr", "svc_time", "port_status",
                "ev_retire", "multi_qp")
DEFAULT_CTL_PORT = 18515


class ScenarioError(ValueError):
    """A scenario that cannot be run as written. str() is 'file:line: key: message'."""

    def __init__(self, path: str, line: int, key: str, message: str):
        self.path, self.line, self.key, self.message = path, line, key, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


# ------------------------------------------------------------------------------------------------
# key -> line
# ------------------------------------------------------------------------------------------------
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _split_key(text: str) -> list[str] | None:
    """'a."b.c".d' -> ['a', 'b.c', 'd']; None when it is not a TOML key."""
    parts, i, text = [], 0, text.strip()
    while i < len(text):
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            return None
        if text[i] in "\"'":
            q = text[i]
            j = text.find(q, i + 1)
            if j < 0:
                return None
            parts.append(text[i + 1:j])
            i = j + 1
        else:
            m = _BARE.match(text, i)
            if not m:
                return None
            parts.append(m.group(0))
            i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text):
            if text[i] != ".":
                return None
            i += 1
    return parts or None


_INLINE_KEY = re.compile(r"""\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
                         r"""(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")


class _ValueScan:
    """State of a value that may span lines: open brackets and an open multi-line string.
    `stack` holds, per open bracket, the key path of an inline table relative to the line's
    key, or None inside an array (keys within arrays resolve to the array's own line)."""

    def __init__(self):
        self.stack: list = []
        self.in_str: str | None = None

    @property
    def depth(self) -> int:
        return len(self.stack)

    def scan(self, text: str) -> list[tuple]:
        """Consumes one line (or the rest of one); returns the inline-table keys found."""
        i, keys = 0, []
        expect_key, last_key = False, ()
        while i < len(text):
            if self.in_str:
                if text.startswith(self.in_str, i):
                    i += len(self.in_str)
                    self.in_str = None
                    continue
                if self.in_str in ('"', '"""') and text[i] == "\\":
                    i += 2
                    continue
                i += 1
                continue
            c = text[i]
            if expect_key and not c.isspace():
                expect_key = False
                m = _INLINE_KEY.match(text, i)
                if m:
                    parts = _split_key(m.group(1))
                    if parts:
                        last_key = tuple(parts)
                        keys.append(self.stack[-1] + last_key)
                    i = m.end()
                    continue
            if c == "#":
                break
            if text.startswith('"""', i) or text.startswith("'''", i):
                self.in_str = text[i:i + 3]
                i += 3
                continue
            if c in "\"'":
                self.in_str = c
                i += 1
                continue
            if c == "{":
                parent = self.stack[-1] if self.stack else ()
                self.stack.append(None if parent is None else parent + last_key)
                expect_key, last_key = self.stack[-1] is not None, ()
            elif c == "[":
                self.stack.append(None)
            elif c in "]}":
                if self.stack:
                    self.stack.pop()
            elif c == ",":
                expect_key = bool(self.stack) and self.stack[-1] is not None
            i += 1
        if self.in_str in ('"', "'"):
            self.in_str = None  # single-line strings end at the line end
        return keys


def key_lines(text: str) -> dict[tuple, int]:
    """Maps key paths to 1-based line numbers: ('topology', 'planes') -> 7,
    ('fault', 1, 'at_ms') -> 30 (the second [[fault]]), ('fault', 1) -> its header line."""
    lines: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    table: tuple = ()
    value = _ValueScan()
    value_key: tuple = ()  # the key whose value is still open

    def resolve(parts: list[str]) -> tuple:
        out: tuple = ()
        for part in parts:
            out = out + (part,)
            if out in counts:
                out = out + (counts[out],)
        return out

    for no, raw in enumerate(text.splitlines(), 1):
        if value.in_str or value.depth > 0:
            for k in value.scan(raw):
                lines.setdefault(value_key + k, no)
            continue
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("[["):
            end = s.find("]]")
            parts = _split_key(s[2:end]) if end > 0 else None
            if parts:
                base = resolve(parts[:-1]) + (parts[-1],)
                counts[base] = counts.get(base, -1) + 1
                # sub-arrays of a new element start counting again
                for k in [k for k in counts if len(k) > len(base) and k[:len(base)] == base]:
                    del counts[k]
                table = base + (counts[base],)
                lines.setdefault(table, no)
            continue
        if s.startswith("["):
            end = s.find("]")
            parts = _split_key(s[1:end]) if end > 0 else None
            if parts:
                table = resolve(parts)
                lines.setdefault(table, no)
            continue
        # key = value (the '=' outside quotes)
        eq, q = -1, None
        for i, c in enumerate(s):
            if q:
                if c == q:
                    q = None
            elif c in "\"'":
                q = c
            elif c == "=":
                eq = i
                break
        if eq < 0:
            continue
        parts = _split_key(s[:eq])
        if not parts:
            continue
        value_key = table + tuple(parts)
        lines.setdefault(value_key, no)
        for k in value.scan(s[eq + 1:]):
            lines.setdefault(value_key + k, no)
    return lines


def format_key(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


# ------------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Topology:
    shape: str = "clos"
    routing: str = "srv6"
    planes: int = 2
    t0: int = 2
    t1: int = 2
    hosts_per_t0: int = 1
    hosts: int = 2
    senders: int = 2
    left: int = 1
    right: int = 1
    mtu: int = planlib.DEFAULT_MTU
    locator: str = planlib.DEFAULT_LOCATOR

    def params(self) -> dict:
        return {k: getattr(self, k) for k in SHAPE_PARAMS[self.shape]}

    def make_plan(self) -> planlib.Plan:
        return planlib.make(self.shape, locator=self.locator, mtu=self.mtu, **self.params())


@dataclasses.dataclass
class Profiles:
    ev_format: str = ""          # "" = srv6 with srv6 routing, stev with ecmp
    evs_per_plane: int = 0       # 0 = srv6: every path of the plane once; stev/udp: 4
    ev_profile: str = ""         # explicit EV profile file (absolute after loading)
    cc_profile: str = ""
    cc: str = ""                 # "nscc" | "none" | "" (endpoint default)
    pmtu: int = 0
    mpr: int = 8
    wimm: int = 128
    timeout: int = 14            # QP local ACK timeout exponent: 1.024 us * 2^t
    retry: str = "7:7"
    probe_interval_us: float = 1000.0
    io: str = "packet"

    def resolved_ev_format(self, routing: str) -> str:
        return self.ev_format or ("srv6" if routing == "srv6" else "stev")


@dataclasses.dataclass
class Traffic:
    pattern: str = "pairs"
    pairs: list = dataclasses.field(default_factory=list)    # [[client, server]]; [] = default
    receiver: str = ""
    senders: list = dataclasses.field(default_factory=list)
    op: str = "write"
    size: int = 65536
    qps: int = 1
    tx_depth: int = 64
    messages: int = 0
    bytes: int = 0
    duration_s: float = 0.0
    stall_s: float = 10.0

    def messages_per_qp(self) -> int:
        """Messages each QP writes (0 with duration_s)."""
        if self.duration_s:
            return 0
        if self.bytes:
            return max(1, -(-self.bytes // self.size))
        return self.messages or 1000


@dataclasses.dataclass
class Impair:
    name: str
    links: list            # link selectors as written
    rule: dict             # the injector rule (type + model keys + match keys)
    start_ms: float | None = None  # added through the control socket at t0 + start_ms
    stop_ms: float | None = None   # removed at t0 + stop_ms
    line: int = 0


@dataclasses.dataclass
class Trigger:
    """When a fault fires: at_ms after t0, or after an event (+ delay_ms)."""
    at_ms: float | None = None
    fault: str = ""                # after another fault ...
    edge: str = "start"            # ... started or ended
    data_bytes: int = 0            # after this many RoCE bytes crossed the capture points
    injector: str = ""             # after the injector counted `count` decisions of this action
    count: int = 1
    delay_ms: float = 0.0

    def describe(self) -> str:
        if self.at_ms is not None:
            return f"at {self.at_ms:g} ms"
        if self.fault:
            what = f"{self.edge} of {self.fault}"
        elif self.data_bytes:
            what = f"{self.data_bytes} data bytes"
        else:
            what = f"{self.count} injector {self.injector} decision(s)"
        return f"after {what}" + (f" + {self.delay_ms:g} ms" if self.delay_ms else "")


@dataclasses.dataclass
class Fault:
    name: str
    action: str
    target: Any                    # link / node selector (str) or plane (int) or rule name
    trigger: Trigger
    for_ms: float | None = None    # flap / auto-restore
    repeat: int = 1
    period_ms: float | None = None
    end: str = "both"              # link_down/link_up/flap: which end(s)
    rule: dict | None = None       # rule_add: the injector rule
    line: int = 0


@dataclasses.dataclass
class Capture:
    points: list = dataclasses.field(default_factory=lambda: ["endpoints"])
    snaplen: int = 0               # 0 = whole frames
    injector_pcap: bool = False    # also the relay's own per-side pcaps


@dataclasses.dataclass
class Expect:
    verdict: str = "pass"          # the checker's verdict
    rules: list = dataclasses.field(default_factory=list)        # only these (ids / prefixes)
    skip_rules: list = dataclasses.field(default_factory=list)
    must_fail: list = dataclasses.field(default_factory=list)    # rules that must fail
    completes: bool = True
    data_verified: bool = True
    goodput_min_pct: float | None = None
    goodput_min_gbps: float | None = None
    max_stall_ms: float | None = None
    qp_error: str = ""
    ev_retired_min: int | None = None
    ev_retired_max: int | None = None  # 0 in every fault-free scenario (no impair, no fault)
    retransmits_min: int | None = None
    retransmits_max: int | None = None
    injector_min: dict = dataclasses.field(default_factory=dict)  # action -> count
    events_min: dict = dataclasses.field(default_factory=dict)    # event-log kind -> count
    mutants: list = dataclasses.field(default_factory=list)
    tolerances: dict = dataclasses.field(default_factory=dict)    # checker tolerances


@dataclasses.dataclass
class Scenario:
    path: str
    name: str
    description: str = ""
    outcome: str = ""              # the expected outcome in words (summary, docs)
    tags: list = dataclasses.field(default_factory=list)
    seed: int = 1
    timeout_s: float = 120.0
    requires: list = dataclasses.field(default_factory=list)
    topology: Topology = dataclasses.field(default_factory=Topology)
    profiles: Profiles = dataclasses.field(default_factory=Profiles)
    traffic: Traffic = dataclasses.field(default_factory=Traffic)
    impairs: list = dataclasses.field(default_factory=list)
    faults: list = dataclasses.field(default_factory=list)
    capture: Capture = dataclasses.field(default_factory=Capture)
    expect: Expect = dataclasses.field(default_factory=Expect)
    raw: dict = dataclasses.field(default_factory=dict, repr=False)
    # [hosts.<name>] iface/ifaces: physical.Mapping per host port on a tester interface.
    physical: list = dataclasses.field(default_factory=list)
    # Links that get a relay with no rule: the fault-free reference of a scenario keeps the
    # relays of the impaired links, so that the relay's own cost is in both runs.
    passthrough: list = dataclasses.field(default_factory=list)

    @property
    def ev_format(self) -> str:
        return self.profiles.resolved_ev_format(self.topology.routing)

    def has_faults(self) -> bool:
        return bool(self.impairs or self.faults)

    def without_faults(self) -> "Scenario":
        """The same fabric and traffic with no impairment and no fault: the goodput reference."""
        links = [sel for imp in self.impairs for sel in imp.links]
        links += [sel for f in self.faults if f.rule for sel in f.rule["links"]]
        clone = dataclasses.replace(self, impairs=[], faults=[], name=self.name + "@nofault",
                                    expect=Expect(verdict="pass"),
                                    passthrough=sorted(set(links + self.passthrough)))
        return clone

    def fault_free_key(self) -> str:
        """Scenarios with equal keys share a fault-free reference run."""
        t = dataclasses.asdict(self.topology)
        p = dataclasses.asdict(self.profiles)
        tr = dataclasses.asdict(self.traffic)
        links = sorted({sel for imp in self.impairs for sel in imp.links} |
                       {sel for f in self.faults if f.rule for sel in f.rule["links"]} |
                       set(self.passthrough))
        return repr((sorted(t.items()), sorted(p.items()), sorted(tr.items()), self.seed, links))

    def pairs(self, plan: planlib.Plan) -> list[tuple[str, str]]:
        """(client = requester, server = responder) host pairs."""
        return expand_pairs(self, plan)


# ------------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------------
class _Ctx:
    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = key_lines(text)

    def line(self, key: tuple) -> int:
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return 0

    def fail(self, key: tuple, message: str):
        raise ScenarioError(self.path, self.line(key), format_key(key), message)

    def known(self, table: dict, key: tuple, allowed) -> None:
        for k in table:
            if k not in allowed:
                near = difflib.get_close_matches(k, list(allowed), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                self.fail(key + (k,), f"unknown key{hint}; expected one of "
                          f"{', '.join(sorted(allowed))}")

    # typed getters ---------------------------------------------------------------------------
    def table(self, doc: dict, key: tuple, name: str) -> dict:
        v = doc.get(name, {})
        if not isinstance(v, dict):
            self.fail(key + (name,), "must be a table")
        return v

    def int_(self, t: dict, key: tuple, name: str, default, lo=None, hi=None):
        if name not in t:
            return default
        v = t[name]
        if not isinstance(v, int) or isinstance(v, bool):
            self.fail(key + (name,), f"must be an integer, got {_show(v)}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bound = (f"in {lo}..{hi}" if lo is not None and hi is not None
                     else f">= {lo}" if lo is not None else f"<= {hi}")
            self.fail(key + (name,), f"must be {bound}, got {v}")
        return v

    def num(self, t: dict, key: tuple, name: str, default, lo=None, hi=None, open_lo=False):
        if name not in t:
            return default
        v = t[name]
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            self.fail(key + (name,), f"must be a number, got {_show(v)}")
        if not math.isfinite(v):
            self.fail(key + (name,), f"must be a finite number, got {_show(v)}")
        if lo is not None and (v < lo or (open_lo and v == lo)):
            rel = ">" if open_lo else ">="
            self.fail(key + (name,), f"must be a number {rel} {lo:g}, got {v:g}")
        if hi is not None and v > hi:
            self.fail(key + (name,), f"must be a number <= {hi:g}, got {v:g}")
        return float(v)

    def str_(self, t: dict, key: tuple, name: str, default, choices=None):
        if name not in t:
            return default
        v = t[name]
        if not isinstance(v, str):
            self.fail(key + (name,), f"must be a string, got {_show(v)}")
        if choices is not None and v not in choices:
            near = difflib.get_close_matches(v, list(choices), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            self.fail(key + (name,), f"{v!r} is not one of {', '.join(choices)}{hint}")
        return v

    def bool_(self, t: dict, key: tuple, name: str, default):
        if name not in t:
            return default
        v = t[name]
        if not isinstance(v, bool):
            self.fail(key + (name,), f"must be true or false, got {_show(v)}")
        return v

    def strs(self, t: dict, key: tuple, name: str, default, choices=None):
        if name not in t:
            return list(default)
        v = t[name]
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self.fail(key + (name,), f"must be a string or a list of strings, got {_show(v)}")
        if choices is not None:
            for x in v:
                if x not in choices:
                    self.fail(key + (name,), f"{x!r} is not one of {', '.join(choices)}")
        return list(v)

    def size(self, t: dict, key: tuple, name: str, default):
        if name not in t:
            return default
        try:
            return parse_size(t[name])
        except ValueError as err:
            self.fail(key + (name,), str(err))


def _show(v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # nan, inf, -inf: the spelling TOML uses
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    return str(v)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*$", re.IGNORECASE)


def parse_size(value) -> int:
    """4096, "64K", "1M", "1.5G", "512KiB" -> bytes (binary multiples)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"must be > 0, got {value}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be a size (bytes, or a string like \"64K\"), got {_show(value)}")
    m = _SIZE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a size (bytes with an optional K/M/G suffix)")
    mult = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[(m.group(2) or "")[:1].upper()]
    n = int(float(m.group(1)) * mult)
    if n <= 0:
        raise ValueError(f"{value!r}: must be > 0")
    return n


def format_size(n: int) -> str:
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % mult == 0 and n >= mult:
            return f"{n // mult}{unit}"
    return str(n)


TOP_KEYS = ("scenario", "topology", "hosts", "profiles", "traffic", "impair", "fault", "capture",
            "expect")


def load(path: str, overrides: dict | None = None) -> Scenario:
    """Reads and validates a scenario file. Raises ScenarioError."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ScenarioError(path, 0, "", f"cannot read: {err.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(path, text_line(data, err.start), "", "not UTF-8") from None
    return loads(text, path, overrides)


def text_line(data: bytes, offset: int) -> int:
    return data[:offset].count(b"\n") + 1


def loads(text: str, path: str = "<string>", overrides: dict | None = None) -> Scenario:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = int(m.group(1)) if m else 0
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        raise ScenarioError(path, line, "", f"TOML syntax: {msg}") from None
    ctx = _Ctx(path, text)
    ctx.known(doc, (), TOP_KEYS)
    sc = Scenario(path=path, name=os.path.splitext(os.path.basename(path))[0], raw=doc)
    base_dir = os.path.dirname(os.path.abspath(path)) if path != "<string>" else os.getcwd()

    # [scenario]
    t = ctx.table(doc, (), "scenario")
    k = ("scenario",)
    ctx.known(t, k, ("name", "description", "outcome", "tags", "seed", "timeout_s", "requires",
                     "schema"))
    ctx.int_(t, k, "schema", SCHEMA_VERSION, SCHEMA_VERSION, SCHEMA_VERSION)
    sc.name = ctx.str_(t, k, "name", sc.name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]*", sc.name):
        ctx.fail(k + ("name",), f"{sc.name!r}: use letters, digits, '-', '_', '.'")
    sc.description = ctx.str_(t, k, "description", "")
    sc.outcome = ctx.str_(t, k, "outcome", "")
    sc.tags = ctx.strs(t, k, "tags", [])
    sc.seed = ctx.int_(t, k, "seed", 1, 0, 2**63 - 1)
    sc.timeout_s = ctx.num(t, k, "timeout_s", 120.0, 0, open_lo=True)
    sc.requires = ctx.strs(t, k, "requires", [], CAPABILITIES)

    # [topology]
    t = ctx.table(doc, (), "topology")
    k = ("topology",)
    ctx.known(t, k, ("shape", "routing", "planes", "t0", "t1", "hosts_per_t0", "hosts",
                     "senders", "left", "right", "mtu", "locator"))
    topo = Topology()
    topo.shape = ctx.str_(t, k, "shape", topo.shape, tuple(SHAPE_PARAMS))
    topo.routing = ctx.str_(t, k, "routing", topo.routing, planlib.MODES)
    for name in ("planes", "t0", "t1", "hosts_per_t0", "hosts", "senders", "left", "right"):
        if name in t and name not in SHAPE_PARAMS[topo.shape]:
            ctx.fail(k + (name,), f"not a parameter of shape {topo.shape!r} (it takes "
                     f"{', '.join(SHAPE_PARAMS[topo.shape])})")
        hi = planlib.MAX_PLANES if name == "planes" else 255
        setattr(topo, name, ctx.int_(t, k, name, getattr(topo, name), 1, hi))
    topo.mtu = ctx.int_(t, k, "mtu", topo.mtu, 1280, 65535)
    topo.locator = ctx.str_(t, k, "locator", topo.locator)
    sc.topology = topo
    nodes, links = fabric_size(topo)
    if nodes > MAX_FABRIC_NODES or links > MAX_FABRIC_LINKS:
        ctx.fail(k + ("shape",), f"a {topo.shape} of {nodes} nodes and {links} links: this "
                 f"testbed builds at most {MAX_FABRIC_NODES} nodes and {MAX_FABRIC_LINKS} links "
                 "(one network namespace per node, one veth pair per link)")
    try:
        plan = topo.make_plan()
    except planlib.PlanError as err:
        ctx.fail(k, str(err))
    # [hosts.<name>]: hosts (or plane ports) cabled to physical interfaces (physical.py)
    sc.physical = physical.parse(ctx, doc, plan)

    # [profiles]
    t = ctx.table(doc, (), "profiles")
    k = ("profiles",)
    ctx.known(t, k, [f.name for f in dataclasses.fields(Profiles)])
    pr = Profiles()
    pr.ev_format = ctx.str_(t, k, "ev_format", "", EV_FORMATS)
    if topo.routing == "srv6" and pr.ev_format not in ("", "srv6"):
        pass  # an stev/udp EV over an SRv6 fabric uses the fabric's plain IPv6 routes: allowed
    if topo.routing == "ecmp" and pr.ev_format == "srv6":
        ctx.fail(k + ("ev_format",), "srv6 EVs need routing = \"srv6\" (the ECMP fabric has no "
                 "uSID routes)")
    pr.evs_per_plane = ctx.int_(t, k, "evs_per_plane", 0, 1, 4096)
    for name in ("ev_profile", "cc_profile"):
        v = ctx.str_(t, k, name, "")
        if v:
            full = v if os.path.isabs(v) else os.path.normpath(os.path.join(base_dir, v))
            if not os.path.isfile(full):
                ctx.fail(k + (name,), f"no such file: {full}")
            v = full
        setattr(pr, name, v)
    pr.cc = ctx.str_(t, k, "cc", "", ("nscc", "none"))
    pr.pmtu = ctx.int_(t, k, "pmtu", 0)
    if pr.pmtu not in (0, 256, 512, 1024, 2048, 4096):
        ctx.fail(k + ("pmtu",), f"must be 256, 512, 1024, 2048 or 4096, got {pr.pmtu}")
    pr.mpr = ctx.int_(t, k, "mpr", pr.mpr, 1, 255)
    pr.wimm = ctx.int_(t, k, "wimm", pr.wimm, 1, 1024)
    pr.timeout = ctx.int_(t, k, "timeout", pr.timeout, 0, 31)
    pr.retry = ctx.str_(t, k, "retry", pr.retry)
    m = re.fullmatch(r"(\d+):(\d+)", pr.retry)
    if not m or int(m.group(1)) > 7 or int(m.group(2)) > 25:
        ctx.fail(k + ("retry",), f"{pr.retry!r}: expected \"LINEAR:EXP\", LINEAR 0..7, EXP 0..25 "
                 "(25 = forever)")
    pr.probe_interval_us = ctx.num(t, k, "probe_interval_us", pr.probe_interval_us, 0,
                                   open_lo=True)
    pr.io = ctx.str_(t, k, "io", pr.io, IO_KINDS)
    sc.profiles = pr

    # [traffic]
    t = ctx.table(doc, (), "traffic")
    k = ("traffic",)
    ctx.known(t, k, ("pattern", "pairs", "receiver", "senders", "op", "size", "qps", "tx_depth",
                     "messages", "bytes", "duration_s", "stall_s"))
    tr = Traffic()
    tr.pattern = ctx.str_(t, k, "pattern", tr.pattern, PATTERNS)
    if "pairs" in t:
        if tr.pattern != "pairs":
            ctx.fail(k + ("pairs",), f"only with pattern = \"pairs\" (pattern is {tr.pattern!r})")
        v = t["pairs"]
        if (not isinstance(v, list) or not v or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(h, str) for h in p)
                for p in v)):
            ctx.fail(k + ("pairs",), "must be a non-empty list of [client, server] host names")
        for i, (a, b) in enumerate(v):
            for h in (a, b):
                if h not in plan.hosts:
                    ctx.fail(k + ("pairs",), f"pair {i}: no host {h!r} in this topology (hosts: "
                             f"{', '.join(plan.hosts)})")
            if a == b:
                ctx.fail(k + ("pairs",), f"pair {i}: {a} talks to itself")
        tr.pairs = [list(p) for p in v]
    for name in ("receiver",):
        if name in t:
            if tr.pattern != "incast":
                ctx.fail(k + (name,), "only with pattern = \"incast\"")
            tr.receiver = ctx.str_(t, k, name, "", tuple(plan.hosts))
    if "senders" in t:
        if tr.pattern != "incast":
            ctx.fail(k + ("senders",), "only with pattern = \"incast\"")
        tr.senders = ctx.strs(t, k, "senders", [], tuple(plan.hosts))
    tr.op = ctx.str_(t, k, "op", tr.op, OPS)
    tr.size = ctx.size(t, k, "size", tr.size)
    if tr.size > 0xFFFFFFFF:
        ctx.fail(k + ("size",), "at most 4G - 1 bytes per message")
    tr.qps = ctx.int_(t, k, "qps", tr.qps, 1, 1024)
    tr.tx_depth = ctx.int_(t, k, "tx_depth", tr.tx_depth, 1, 16384)
    amounts = [n for n in ("messages", "bytes", "duration_s") if n in t]
    if len(amounts) > 1:
        ctx.fail(k + (amounts[1],), f"give one of messages, bytes, duration_s (also {amounts[0]})")
    tr.messages = ctx.int_(t, k, "messages", 0, 1, 2**40)
    tr.bytes = ctx.size(t, k, "bytes", 0)
    tr.duration_s = ctx.num(t, k, "duration_s", 0.0, 0, open_lo=True)
    tr.stall_s = ctx.num(t, k, "stall_s", tr.stall_s, 0, open_lo=True)
    sc.traffic = tr
    need = registered_bytes(tr)
    avail = memory_available()
    if avail and need > avail // 2:
        key = "messages" if "messages" in t else ("tx_depth" if "tx_depth" in t else "size")
        ctx.fail(k + (key,), f"qps x min(messages, tx_depth) x size = {format_size(need)} of "
                 f"registered memory per endpoint, beyond half of this machine's available "
                 f"memory ({format_size(avail)}; both endpoints run here)")
    try:
        pairs = expand_pairs(sc, plan)
    except planlib.PlanError as err:
        ctx.fail(k + ("pattern",), str(err))

    # [[impair]]
    imp = doc.get("impair", [])
    if not isinstance(imp, list):
        ctx.fail(("impair",), "must be an array of tables: [[impair]]")
    names = set()
    for i, t in enumerate(imp):
        k = ("impair", i)
        if not isinstance(t, dict):
            ctx.fail(k, "must be a table")
        name = ctx.str_(t, k, "name", f"impair{i}")
        if name in names:
            ctx.fail(k + ("name",), f"{name!r} used twice")
        names.add(name)
        links = ctx.strs(t, k, "links", [])
        if not links:
            ctx.fail(k + ("links",), "required: the links to impair (\"nodeA:nodeB\", an "
                     "interface, \"host:h2\", \"node:p1t1s0\", \"plane:2\" or \"all\")")
        for sel in links:
            try:
                select_links(plan, sel)
            except planlib.PlanError as err:
                ctx.fail(k + ("links",), str(err))
        typ = ctx.str_(t, k, "type", "", IMPAIR_TYPES)
        if not typ:
            ctx.fail(k + ("type",), f"required: one of {', '.join(IMPAIR_TYPES)}")
        start = ctx.num(t, k, "start_ms", None, 0)
        stop = ctx.num(t, k, "stop_ms", None, 0)
        if start is not None and stop is not None and stop <= start:
            ctx.fail(k + ("stop_ms",), f"must be after start_ms ({start:g})")
        for bad in ("link", "plane"):
            if bad in t:
                ctx.fail(k + (bad,), "the relay's link and plane come from `links`")
        rule = {kk: vv for kk, vv in t.items() if kk not in ("links", "start_ms", "stop_ms")}
        rule["name"] = name
        _check_rule_values(ctx, k, rule)
        sc.impairs.append(Impair(name, links, rule, start, stop, ctx.line(k)))

    # [[fault]]
    fl = doc.get("fault", [])
    if not isinstance(fl, list):
        ctx.fail(("fault",), "must be an array of tables: [[fault]]")
    fault_names = set()
    for i, t in enumerate(fl):
        k = ("fault", i)
        if not isinstance(t, dict):
            ctx.fail(k, "must be a table")
        ctx.known(t, k, ("name", "action", "target", "at_ms", "after", "delay_ms", "for_ms",
                         "repeat", "period_ms", "end", "rule"))
        name = ctx.str_(t, k, "name", f"fault{i}")
        if name in fault_names:
            ctx.fail(k + ("name",), f"{name!r} used twice")
        fault_names.add(name)
        action = ctx.str_(t, k, "action", "", FAULT_ACTIONS)
        if not action:
            ctx.fail(k + ("action",), f"required: one of {', '.join(FAULT_ACTIONS)}")
        f = Fault(name, action, None, Trigger(), line=ctx.line(k))
        if action in ("plane_down", "plane_up"):
            f.target = ctx.int_(t, k, "target", None, 1, topo.planes)
            if f.target is None:
                ctx.fail(k + ("target",), "required: the plane number (1..planes)")
        elif action == "rule_remove":
            f.target = ctx.str_(t, k, "target", "")
            if f.target not in names and f.target not in _rule_add_names(fl):
                ctx.fail(k + ("target",), f"{f.target!r} names no [[impair]] or rule_add fault")
        elif action == "rule_add":
            if "target" in t:
                ctx.fail(k + ("target",), "rule_add takes `rule` (with its `links`), no target")
            r = t.get("rule")
            if not isinstance(r, dict):
                ctx.fail(k + ("rule",), "required: an inline table with links, type and the "
                         "model's keys")
            links = ctx.strs(r, k + ("rule",), "links", [])
            if not links:
                ctx.fail(k + ("rule", "links"), "required")
            for sel in links:
                try:
                    select_links(plan, sel)
                except planlib.PlanError as err:
                    ctx.fail(k + ("rule", "links"), str(err))
            ctx.str_(r, k + ("rule",), "type", "", IMPAIR_TYPES) or ctx.fail(
                k + ("rule", "type"), f"required: one of {', '.join(IMPAIR_TYPES)}")
            rule = {kk: vv for kk, vv in r.items() if kk != "links"}
            rule["name"] = name
            _check_rule_values(ctx, k + ("rule",), rule)
            f.rule = {"links": links, **rule}
        else:
            f.target = ctx.str_(t, k, "target", "")
            if not f.target:
                ctx.fail(k + ("target",), "required: a link (\"nodeA:nodeB\" or an interface) "
                         if action.startswith(("link", "flap")) else "required: a node name")
            try:
                if action in ("node_down", "node_up"):
                    if f.target not in plan.hosts and f.target not in plan.routers:
                        raise planlib.PlanError(f"no node {f.target!r}")
                else:
                    plan.link(f.target)
            except planlib.PlanError as err:
                ctx.fail(k + ("target",), str(err))
        if "rule" in t and action != "rule_add":
            ctx.fail(k + ("rule",), "only with action = \"rule_add\"")
        # trigger
        f.trigger = _trigger(ctx, t, k, fl)
        f.for_ms = ctx.num(t, k, "for_ms", None, 0, open_lo=True)
        if action == "flap" and f.for_ms is None:
            ctx.fail(k + ("for_ms",), "required for a flap: how long the link stays down")
        if f.for_ms is not None and action in ("link_up", "node_up", "plane_up", "rule_remove"):
            ctx.fail(k + ("for_ms",), f"not with {action}")
        f.repeat = ctx.int_(t, k, "repeat", 1, 1, 10000)
        f.period_ms = ctx.num(t, k, "period_ms", None, 0, open_lo=True)
        if f.repeat > 1:
            if f.period_ms is None:
                ctx.fail(k + ("period_ms",), "required with repeat > 1")
            if f.for_ms is not None and f.period_ms <= f.for_ms:
                ctx.fail(k + ("period_ms",), f"must exceed for_ms ({f.for_ms:g})")
        f.end = ctx.str_(t, k, "end", "both")
        if "end" in t and action not in ("link_down", "link_up", "flap"):
            ctx.fail(k + ("end",), "only for link_down, link_up and flap")
        if action in ("link_down", "link_up", "flap") and f.end != "both":
            link = plan.link(f.target)
            if f.end not in ("a", "b", link.a.node, link.b.node, link.a.ifname, link.b.ifname):
                ctx.fail(k + ("end",), f"{f.end!r}: expected both, a, b, a node or an "
                         f"interface of {link.name}")
        sc.faults.append(f)
    for i, f in enumerate(sc.faults):
        if f.trigger.fault and f.trigger.fault not in fault_names:
            ctx.fail(("fault", i, "after"), f"no fault named {f.trigger.fault!r}")
        if f.trigger.fault == f.name:
            ctx.fail(("fault", i, "after"), "a fault cannot wait for itself")
    _check_trigger_cycles(ctx, sc.faults)

    # [capture]
    t = ctx.table(doc, (), "capture")
    k = ("capture",)
    ctx.known(t, k, ("points", "snaplen", "injector_pcap"))
    cap = Capture()
    pts = ctx.strs(t, k, "points", cap.points)
    for p in pts:
        if p in CAPTURE_POINTS:
            continue
        try:
            plan.port(p)
        except planlib.PlanError:
            ctx.fail(k + ("points",), f"{p!r}: expected {', '.join(CAPTURE_POINTS)} or an "
                     "interface name of the plan")
    if "none" in pts and len(pts) > 1:
        ctx.fail(k + ("points",), "\"none\" excludes every other point")
    cap.points = pts
    cap.snaplen = ctx.int_(t, k, "snaplen", 0, 64, 65535)
    cap.injector_pcap = ctx.bool_(t, k, "injector_pcap", False)
    sc.capture = cap

    # [expect]
    t = ctx.table(doc, (), "expect")
    k = ("expect",)
    ctx.known(t, k, [f.name for f in dataclasses.fields(Expect)])
    ex = Expect()
    ex.verdict = ctx.str_(t, k, "verdict", ex.verdict, VERDICTS)
    ex.rules = ctx.strs(t, k, "rules", [])
    ex.skip_rules = ctx.strs(t, k, "skip_rules", [])
    ex.must_fail = ctx.strs(t, k, "must_fail", [])
    for key_name, ids in (("rules", ex.rules), ("skip_rules", ex.skip_rules),
                          ("must_fail", ex.must_fail)):
        for rid in ids:
            if not re.fullmatch(r"MRC(-[A-Z]+(-\d{3})?)?", rid):
                ctx.fail(k + (key_name,), f"{rid!r} is not a rule ID or prefix "
                         "(MRC-<AREA>-<nnn> or MRC-<AREA>)")
    if ex.must_fail and ex.verdict == "pass":
        if "verdict" in t:
            ctx.fail(k + ("must_fail",), "rules that must fail make the checker verdict fail; "
                     "set verdict = \"fail\"")
        ex.verdict = "fail"
    ex.completes = ctx.bool_(t, k, "completes", True)
    ex.data_verified = ctx.bool_(t, k, "data_verified", ex.completes)
    if ex.data_verified and not ex.completes:
        ctx.fail(k + ("data_verified",), "a transfer that does not complete cannot verify")
    ex.goodput_min_pct = ctx.num(t, k, "goodput_min_pct", None, 0, 1000)
    ex.goodput_min_gbps = ctx.num(t, k, "goodput_min_gbps", None, 0)
    if ex.goodput_min_pct is not None and tr.duration_s:
        pass  # duration runs compare bytes per second too
    ex.max_stall_ms = ctx.num(t, k, "max_stall_ms", None, 0, open_lo=True)
    ex.qp_error = ctx.str_(t, k, "qp_error", "")
    if ex.qp_error and ex.completes:
        if "completes" in t:
            ctx.fail(k + ("qp_error",), "an expected QP error means completes = false")
        ex.completes = False
        ex.data_verified = False
    ex.ev_retired_min = ctx.int_(t, k, "ev_retired_min", None, 0)
    ex.ev_retired_max = ctx.int_(t, k, "ev_retired_max", None, 0)
    if (ex.ev_retired_max is not None and ex.ev_retired_min is not None
            and ex.ev_retired_max < ex.ev_retired_min):
        ctx.fail(k + ("ev_retired_max",), f"{ex.ev_retired_max} is below ev_retired_min "
                 f"({ex.ev_retired_min})")
    ex.retransmits_min = ctx.int_(t, k, "retransmits_min", None, 0)
    ex.retransmits_max = ctx.int_(t, k, "retransmits_max", None, 0)
    im = t.get("injector_min", {})
    if not isinstance(im, dict):
        ctx.fail(k + ("injector_min",), "must be a table: action = count")
    for a, n in im.items():
        if a not in INJECTOR_ACTIONS:
            ctx.fail(k + ("injector_min", a),
                     f"not an injector action ({', '.join(INJECTOR_ACTIONS)})")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            ctx.fail(k + ("injector_min", a), "must be an integer >= 0")
    ex.injector_min = dict(im)
    em = t.get("events_min", {})
    if not isinstance(em, dict):
        ctx.fail(k + ("events_min",), "must be a table: event kind = count")
    for kind, n in em.items():
        if kind not in EVENT_KINDS:
            ctx.fail(k + ("events_min", kind), f"not an endpoint event kind "
                     f"({', '.join(EVENT_KINDS)})")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            ctx.fail(k + ("events_min", kind), "must be an integer >= 0")
    ex.events_min = dict(em)
    if ex.injector_min and not sc.impairs and not any(f.rule for f in sc.faults):
        ctx.fail(k + ("injector_min",), "the scenario has no injector ([[impair]] or rule_add)")
    ex.mutants = ctx.strs(t, k, "mutants", [])
    tol = t.get("tolerances", {})
    if not isinstance(tol, dict):
        ctx.fail(k + ("tolerances",), "must be a table of checker tolerances")
    for name, v in tol.items():
        if not _finite_ge0(v):
            ctx.fail(k + ("tolerances", name), f"must be a finite number >= 0, got {_show(v)}")
    ex.tolerances = dict(tol)
    sc.expect = ex

    if overrides:
        apply_overrides(sc, overrides)
    del pairs
    return sc


# What the testbed builds: one network namespace per node, one veth pair per link. The scenario
# library's largest fabric has 12 nodes; 512 / 2048 leave room for bigger ones while refusing
# in milliseconds what would take minutes and gigabytes to plan (a 16-plane 255 x 255 Clos).
MAX_FABRIC_NODES = 512
MAX_FABRIC_LINKS = 2048


def fabric_size(topo: Topology) -> tuple[int, int]:
    """(nodes, links) of a topology, computed from its parameters without building the plan."""
    p = topo.planes
    if topo.shape == "clos":
        hosts = topo.t0 * topo.hosts_per_t0
        return hosts + p * (topo.t0 + topo.t1), p * (hosts + topo.t0 * topo.t1)
    if topo.shape == "back_to_back":
        return 2, p
    if topo.shape == "single_router":
        return topo.hosts + p, p * topo.hosts
    if topo.shape == "incast":
        return topo.senders + 1 + p, p * (topo.senders + 1)
    if topo.shape == "dumbbell":
        hosts = topo.left + topo.right
        return hosts + 2 * p, p * (hosts + 1)
    return 0, 0


def registered_bytes(tr: Traffic) -> int:
    """Memory one endpoint registers: a slot of `size` bytes per outstanding message per QP
    (the least the reference endpoint accepts: choose_slots in reference-impl/runtime/
    endpoint_main.cc)."""
    msgs = tr.messages_per_qp()
    slots = tr.tx_depth if not msgs else min(msgs, tr.tx_depth)
    return tr.qps * slots * tr.size


def memory_available() -> int:
    """MemAvailable of this machine in bytes, 0 when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _finite_ge0(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and v >= 0)


def _rule_add_names(faults: list) -> set:
    return {t.get("name", f"fault{i}") for i, t in enumerate(faults)
            if isinstance(t, dict) and t.get("action") == "rule_add"}


def _check_rule_values(ctx: _Ctx, key: tuple, rule: dict) -> None:
    """Light checks of injector rule values; the injector's own `check` validates the rest."""
    for name in ("p", "p_gb", "p_bg", "loss_good", "loss_bad"):
        if name in rule:
            v = rule[name]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
                ctx.fail(key + (name,), f"must be a probability in [0, 1], got {_show(v)}")
    for name in ("from_ms", "until_ms", "delay_us", "jitter_us", "down_for_ms", "down_at_ms",
                 "period_ms"):
        if name in rule:
            v = rule[name]
            if not _finite_ge0(v):
                ctx.fail(key + (name,), f"must be a finite number >= 0, got {_show(v)}")


def _trigger(ctx: _Ctx, t: dict, k: tuple, faults: list) -> Trigger:
    tr = Trigger()
    has_at, has_after = "at_ms" in t, "after" in t
    if has_at and has_after:
        ctx.fail(k + ("after",), "give at_ms (time-based) or after (event-based), not both")
    if not has_at and not has_after:
        ctx.fail(k + ("at_ms",), "required: at_ms (ms after traffic start) or after = {...}")
    tr.delay_ms = ctx.num(t, k, "delay_ms", 0.0, 0)
    if has_at:
        tr.at_ms = ctx.num(t, k, "at_ms", None, 0)
        if "delay_ms" in t:
            ctx.fail(k + ("delay_ms",), "only with after (at_ms is already a time)")
        return tr
    a = t["after"]
    ka = k + ("after",)
    if isinstance(a, str):
        a = {"fault": a}
    if not isinstance(a, dict):
        ctx.fail(ka, "must be a fault name or a table: { fault = \"x\", edge = \"end\" }, "
                 "{ data_bytes = \"4M\" } or { injector = \"drop\", count = 10 }")
    ctx.known(a, ka, ("fault", "edge", "data_bytes", "injector", "count"))
    kinds = [n for n in ("fault", "data_bytes", "injector") if n in a]
    if len(kinds) != 1:
        ctx.fail(ka, "name exactly one event: fault, data_bytes or injector")
    if "fault" in a:
        tr.fault = ctx.str_(a, ka, "fault", "")
        tr.edge = ctx.str_(a, ka, "edge", "start", ("start", "end"))
    elif "data_bytes" in a:
        tr.data_bytes = ctx.size(a, ka, "data_bytes", 0)
    else:
        tr.injector = ctx.str_(a, ka, "injector", "", INJECTOR_ACTIONS)
        tr.count = ctx.int_(a, ka, "count", 1, 1)
    if "edge" in a and "fault" not in a:
        ctx.fail(ka + ("edge",), "only with fault")
    if "count" in a and "injector" not in a:
        ctx.fail(ka + ("count",), "only with injector")
    return tr


def _check_trigger_cycles(ctx: _Ctx, faults: list) -> None:
    by_name = {f.name: f for f in faults}
    for i, f in enumerate(faults):
        seen, cur = {f.name}, f
        while cur.trigger.fault:
            cur = by_name[cur.trigger.fault]
            if cur.name in seen:
                ctx.fail(("fault", i, "after"), f"faults wait for each other in a cycle "
                         f"({' -> '.join(sorted(seen))})")
            seen.add(cur.name)


# ------------------------------------------------------------------------------------------------
# selectors and pairs
# ------------------------------------------------------------------------------------------------
def select_links(plan: planlib.Plan, selector: str) -> list[planlib.Link]:
    """Links named by a selector: "a:b" / an interface, "host:h2" (its access links),
    "node:p1t1s0" (every link of a node), "plane:2", "plane:2:core" (T0-T1 links of a plane),
    "all"."""
    kind, _, arg = selector.partition(":")
    if selector == "all":
        return list(plan.links)
    if kind == "host":
        host = plan.host(arg)
        return [plan.link(p.link) for p in plan.ports_of(host.name)]
    if kind == "node":
        if arg not in plan.hosts and arg not in plan.routers:
            raise planlib.PlanError(f"{selector!r}: no node {arg!r}")
        return [plan.link(p.link) for p in plan.ports_of(arg)]
    if kind == "plane":
        num, _, part = arg.partition(":")
        # Plane numbers as the names and reports give them: 1..planes (index + 1).
        if not num.isdigit() or not 1 <= int(num) <= plan.planes:
            raise planlib.PlanError(f"{selector!r}: plane must be 1..{plan.planes}")
        links = [lk for lk in plan.links if lk.plane == int(num) - 1]
        if part == "core":
            links = [lk for lk in links if lk.a.node in plan.routers and lk.b.node in plan.routers]
        elif part == "access":
            links = [lk for lk in links if lk.a.node in plan.hosts or lk.b.node in plan.hosts]
        elif part:
            raise planlib.PlanError(f"{selector!r}: expected plane:N, plane:N:core or "
                                    "plane:N:access")
        if not links:
            raise planlib.PlanError(f"{selector!r} selects no link")
        return links
    return [plan.link(selector)]


def expand_pairs(sc: Scenario, plan: planlib.Plan) -> list[tuple[str, str]]:
    tr = sc.traffic
    hosts = list(plan.hosts)
    if tr.pattern == "pairs":
        if tr.pairs:
            return [tuple(p) for p in tr.pairs]
        if plan.shape == "dumbbell":
            left, right = plan.roles["left"], plan.roles["right"]
            return list(zip(left, right))
        return [(hosts[0], hosts[-1])]
    if tr.pattern == "all_to_all":
        return [(a, b) for a in hosts for b in hosts if a != b]
    receiver = tr.receiver or (plan.roles.get("receiver") or [hosts[-1]])[0]
    senders = tr.senders or [h for h in (plan.roles.get("senders") or hosts) if h != receiver]
    if receiver in senders:
        raise planlib.PlanError(f"incast receiver {receiver} is also a sender")
    if not senders:
        raise planlib.PlanError("incast needs at least one sender")
    return [(s, receiver) for s in senders]


def apply_overrides(sc: Scenario, overrides: dict) -> None:
    """--set section.key=value from the command line (validated like the file)."""
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        obj = {"topology": sc.topology, "profiles": sc.profiles, "traffic": sc.traffic,
               "expect": sc.expect, "capture": sc.capture}.get(section)
        if obj is None and section == "scenario":
            obj = sc
        if obj is None or not key or not hasattr(obj, key):
            raise ScenarioError(sc.path, 0, dotted, "--set: unknown key")
        current = getattr(obj, key)
        try:
            if isinstance(current, bool):
                value = {"true": True, "false": False}[str(value).lower()]
            elif isinstance(current, int):
                value = parse_size(value) if key in ("size", "bytes") else int(value)
            elif isinstance(current, float) or current is None:
                value = float(value)
        except (KeyError, ValueError):
            raise ScenarioError(sc.path, 0, dotted, f"--set: bad value {value!r}") from None
        setattr(obj, key, value)


def discover(path: str) -> list[str]:
    """Scenario files under a directory (recursively, *.toml, sorted), or the file itself.
    Files under a `profiles/` folder are profiles, not scenarios."""
    if os.path.isfile(path):
        return [path]
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in ("profiles", "dut") and not d.startswith("."))
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".toml")]
    return out

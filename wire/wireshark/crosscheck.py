#!/usr/bin/python3
"""Cross-check the MRC codec against Wireshark, field by field, for every frame.

Two independent decoders read the same captures:
  * `mrct decode --json` (the project's codec, wire/*.cc), one JSON object per frame;
  * `tshark -T pdml` with Wireshark's own Ethernet/IP/IPv6/SRH/UDP/InfiniBand dissectors and
    this directory's Lua plugin (mrp0.lua) for the MRC extension headers.

Every key mrct prints for a frame must be matched by a comparison (or be listed in
NOT_COMPARED with the reason), and every comparison must agree. Comparisons:
  builtin  Wireshark's built-in dissectors: frame, Ethernet, VLAN, IPv4, IPv6 (outer and inner),
           SRH, UDP, and the InfiniBand BTH / RETH / AETH / ImmDt / ICRC / payload of RoCE frames
  plugin   the Lua plugin's mrc.* fields on MRC opcodes (same names as mrct's keys)
  derived  values both sides must agree on that neither prints directly (e.g. the WEV of a plain
           RoCEv2 frame recomputed from tshark's UDP port and flow label)
  error    mrct's decode error vs the plugin's expert info (truncated header, bad pad)

Captures: the sample set from `mrct craft`, plus (unless --no-variants) a derived capture
with every MRC sample cut short after each byte of its headers (IP and UDP lengths kept
consistent) and with its BTH flags and extension headers filled with pseudo-random bytes.

Exit status: 0 all frames compared and no mismatch; 1 mismatches or uncovered keys;
77 tshark is missing (ctest reports the test as skipped); 2 usage or tool failure.
--selftest-mutate[=KEY] changes one mrct value before comparing and exits 0 only when the
comparison reports that change (and nothing else) as a mismatch.

Standard library only; run with Debian's /usr/bin/python3.
"""

import argparse
import collections
import ipaddress
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MRC_OPCODES = {0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xCB, 0xD1, 0xD8, 0xD9, 0xDC, 0xDD, 0xDE}
ROCE_PORT = 4791

# mrct keys that no comparison covers, with the reason. Keys are (key, frame class) where the
# class is "any", "rc" (RoCE frame with a non-MRC opcode) or "error" (frame with a decode error).
NOT_COMPARED = {
    ("frame", "any"): "join key: mrct and tshark both number frames from 1",
    ("icrc_ok", "rc"): "the built-in InfiniBand dissector does not verify the ICRC, and the plugin "
                       "verifies it only on MRC opcodes",
    ("atomic.va", "rc"): "Wireshark 4.0's AtomicETH has no VA field",
    ("atomic.rkey", "rc"): "Wireshark 4.0's AtomicETH has no R_Key field",
    ("payload_len", "error"): "mrct prints payload_len 0 on a frame it could not decode; the plugin "
                              "prints no payload length there",
    ("error", "rc"): "decode errors are compared with the plugin's expert infos, which exist only for "
                     "MRC opcodes; the built-in dissector's malformed-packet note names no layer",
}

# Plugin fields with no mrct counterpart: reserved bits the codec keeps but does not print, and
# presentation helpers. Listed so that an unexpected plugin field shows up in the report.
PLUGIN_ONLY = {
    "mrc.variant", "mrc.bth.rsvd6", "mrc.bth.rsvd_lo", "mrc.tseth.reserved",
    "mrc.seth.reserved0", "mrc.seth.rsvd_b1", "mrc.seth.cc_flags_rsvd", "mrc.cc.rsvd",
    "mrc.neth.reserved0", "mrc.neth.reserved12", "mrc.neth.cc_type", "mrc.neth.cc_flags_rsvd",
    "mrc.neth.psv", "mrc.neth.reserved17", "mrc.peth.reserved0", "mrc.peth.vendor",
    "mrc.peth.reserved6", "mrc.peth.tsr", "mrc.peth.reserved_tsr", "mrc.erth.reserved0",
    "mrc.erth.rsvd_b1", "mrc.erth.reserved2", "mrc.erth.vendor", "mrc.erth.reserved8",
    "mrc.erth.tsr", "mrc.erth.reserved_tsr", "mrc.eeth.reserved0", "mrc.eeth.rsvd_b1",
    "mrc.eeth.vendor", "mrc.eeth.reserved12", "mrc.eeth.reserved32", "mrc.payload",
    "mrc.pad_bytes", "mrc.icrc_computed",
}

# mrct key -> plugin field, where the name is not simply "mrc." + key.
PLUGIN_NAME = {"neth.code": "mrc.nack_code"}
# mrct keys holding a value-string name of a plugin field (compared with the field's label).
PLUGIN_VALUE_NAME = {"opcode_name": "mrc.opcode", "neth.code_name": "mrc.nack_code"}
# Keys of the outer layers and of the frame; the built-in comparisons handle them.
FRAME_KEYS = {
    "frame", "ts_ns", "len", "roce", "eth.src", "eth.dst", "eth.type", "vlan.id", "l3", "src",
    "dst", "dscp", "ecn", "flow_label", "ttl", "hop_limit", "srh.segments_left",
    "srh.last_entry", "srh.segments", "inner.src", "inner.dst", "inner.flow_label",
    "inner.dscp", "inner.ecn", "sport", "dport", "udp.length", "udp.checksum", "error",
}

# Built-in InfiniBand fields for keys of the BTH (all RoCE frames) and of the IBTA headers.
BUILTIN_BTH = [
    ("opcode", "infiniband.bth.opcode"), ("se", "infiniband.bth.se"),
    ("mig_req", "infiniband.bth.m"), ("pad", "infiniband.bth.padcnt"),
    ("tver", "infiniband.bth.tver"), ("pkey", "infiniband.bth.p_key"),
    ("dest_qp", "infiniband.bth.destqp"), ("ack_req", "infiniband.bth.a"),
    ("psn", "infiniband.bth.psn"),
]
BUILTIN_IBTA = [
    ("reth.va", "infiniband.reth.va"), ("reth.rkey", "infiniband.reth.r_key"),
    ("reth.len", "infiniband.reth.dmalen"), ("aeth.syndrome", "infiniband.aeth.syndrome"),
    ("aeth.msn", "infiniband.aeth.msn"), ("atomic.swap_add", "infiniband.atomiceth.swapdt"),
    ("atomic.compare", "infiniband.atomiceth.cmpdt"),
    ("atomic_ack.orig", "infiniband.atomicacketh.origremdt"),
]
BUILTIN_IBTA_BYTES = [("imm", "infiniband.immdt"), ("ieth.rkey", "infiniband.ieth")]


class ToolError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Captures
# ----------------------------------------------------------------------------------------------

def read_pcap(path):
    """Frames of a classic pcap file as (ts_sec, ts_frac, bytes); also returns the header."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 24:
        raise ToolError(f"{path}: not a pcap file (only {len(data)} bytes)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ToolError(f"{path}: not a classic pcap file (magic {magic.hex()})")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    frames = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            raise ToolError(f"{path}: record at offset {off - 16} runs past the end of the file")
        frames.append((sec, frac, data[off:off + incl]))
        off += incl
    return data[:24], linktype, frames


def write_pcap(path, header, frames):
    with open(path, "wb") as fh:
        fh.write(header)
        endian = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        for sec, frac, frame, *orig in frames:
            # orig: the frame's length on the wire when the capture kept fewer bytes.
            fh.write(struct.pack(endian + "IIII", sec, frac, len(frame), orig[0] if orig else len(frame)))
            fh.write(frame)


def ipv4_checksum(header):
    total = 0
    for i in range(0, len(header), 2):
        total += (header[i] << 8) | header[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def locate_udp(frame):
    """Offsets of the IP headers and of the UDP header of an Ethernet frame, or None."""
    if len(frame) < 14:
        return None
    off = 14
    ethertype = struct.unpack(">H", frame[12:14])[0]
    if ethertype == 0x8100 and len(frame) >= 18:
        ethertype = struct.unpack(">H", frame[16:18])[0]
        off = 18
    ips = []
    if ethertype == 0x0800:
        ihl = (frame[off] & 0x0F) * 4
        if frame[off + 9] != 17:
            return None
        ips.append((4, off))
        return ips, off + ihl
    if ethertype != 0x86DD:
        return None
    ips.append((6, off))
    nh = frame[off + 6]
    off += 40
    for _ in range(8):
        if nh == 17:
            return ips, off
        if nh == 41:
            ips.append((6, off))
            nh = frame[off + 6]
            off += 40
        elif nh in (0, 43, 60):
            nh, off = frame[off], off + (frame[off + 1] + 1) * 8
        else:
            return None
    return None


def shorten(frame, ips, udp_off, payload_len):
    """The frame with its UDP payload cut to payload_len bytes and every length field fixed."""
    out = bytearray(frame[:udp_off + 8 + payload_len])
    end = len(out)
    struct.pack_into(">H", out, udp_off + 4, 8 + payload_len)
    for version, off in ips:
        if version == 4:
            struct.pack_into(">H", out, off + 2, end - off)
            struct.pack_into(">H", out, off + 10, 0)
            ihl = (out[off] & 0x0F) * 4
            struct.pack_into(">H", out, off + 10, ipv4_checksum(out[off:off + ihl]))
        else:
            struct.pack_into(">H", out, off + 4, end - off - 40)
    return bytes(out)


def scramble(frame, udp_off, rng):
    """The frame with BTH bytes 1..11 and the extension headers replaced by random bytes.

    The opcode stays, so the same header stack is read with every field non-zero; the pad count
    and TS bit change with the random bytes, which moves payload, pad and ICRC boundaries too.
    """
    out = bytearray(frame)
    start = udp_off + 8 + 1
    end = min(len(out), udp_off + 8 + 12 + 40)
    for i in range(start, end):
        out[i] = rng.randrange(256)
    return bytes(out)


def derive_variants(src_pcap, dst_pcap, snap_pcap, mrct_records):
    """Writes copies of every MRC sample: truncated and scrambled ones to dst_pcap (names
    returned) and, to snap_pcap, ones cut by a snap length (captured bytes < wire length;
    returned as the number of UDP payload bytes each kept)."""
    header, linktype, frames = read_pcap(src_pcap)
    if linktype != 1:
        raise ToolError(f"{src_pcap}: link type {linktype}, expected Ethernet (1)")
    rng = random.Random(4791)
    out, names, snapped, snap_kept = [], [], [], []
    for index, (sec, frac, frame) in enumerate(frames):
        rec = mrct_records.get(index + 1, {})
        if rec.get("opcode") not in MRC_OPCODES:
            continue
        where = locate_udp(frame)
        if where is None:
            continue
        ips, udp_off = where
        udp_payload = len(frame) - udp_off - 8
        # Every cut inside BTH + headers + ICRC, plus the frame one byte short of complete.
        cuts = sorted(set(range(0, min(udp_payload, 12 + 40 + 4 + 2))) | {udp_payload - 1})
        for n in cuts:
            if n >= 0:
                out.append((sec, frac, shorten(frame, ips, udp_off, n)))
                names.append(f"frame {index + 1} cut to {n} B of UDP payload")
        for k in range(3):
            out.append((sec, frac, scramble(frame, udp_off, rng)))
            names.append(f"frame {index + 1} scrambled #{k + 1}")
        for n in range(0, min(udp_payload, 12 + 40 + 4 + 2)):
            snapped.append((sec, frac, frame[:udp_off + 8 + n], len(frame)))
            snap_kept.append(n)
    write_pcap(dst_pcap, header, out)
    write_pcap(snap_pcap, header, snapped)
    return names, snap_kept


# ----------------------------------------------------------------------------------------------
# Decoders
# ----------------------------------------------------------------------------------------------

def run(cmd, what):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise ToolError(f"{what}: cannot run {cmd[0]}: {e}") from e
    if proc.returncode != 0:
        raise ToolError(f"{what} exited with {proc.returncode}: {' '.join(cmd)}\n"
                        f"{proc.stderr.decode(errors='replace')}")
    return proc.stdout, proc.stderr.decode(errors="replace")


def mrct_decode(mrct, capture):
    out, _ = run([mrct, "decode", "--json", capture], "mrct decode")
    records = {}
    for lineno, line in enumerate(out.decode().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ToolError(f"mrct decode --json {capture}: line {lineno} is not JSON: {e}") from e
        records[rec["frame"]] = rec
    return records


class Packet:
    """One PDML packet: per protocol instance, field name -> list of (show, showname, pos)."""

    def __init__(self):
        self.protos = []  # (proto name, {field: [(show, showname)]}, [expert (name, message)])

    def layers(self, name):
        return [fields for proto, fields, _ in self.protos if proto == name]

    def first(self, proto, field):
        for fields in self.layers(proto):
            if field in fields:
                return fields[field][0]
        return None

    def anywhere(self, field):
        """A field wherever PDML put it (tshark wraps some protocols as fields, e.g. data)."""
        for _, fields, _ in self.protos:
            if field in fields:
                return fields[field][0]
        return None

    def experts(self, proto):
        return [e for p, _, experts in self.protos if p == proto for e in experts]

    def comment(self):
        c = self.first("pkt_comment", "frame.comment")
        return c[0] if c else ""


def collect(elem, fields, experts):
    for child in elem:
        if child.tag == "proto":
            continue  # a nested protocol (e.g. ipv6.routing) is its own entry
        if child.tag != "field":
            continue
        name = child.get("name", "")
        if name == "_ws.expert":
            kind = next((c.get("name") for c in child if c.get("name", "").startswith(("mrc.expert.", "_ws.malformed"))), None)
            msg = next((c.get("show") for c in child if c.get("name") == "_ws.expert.message"), "")
            if kind:
                experts.append((kind, msg))
            continue
        if name:
            fields.setdefault(name, []).append(
                (child.get("show", ""), child.get("showname", ""), int(child.get("pos", "0") or 0)))
        collect(child, fields, experts)


def walk_protos(elem, packet):
    for child in elem:
        if child.tag == "proto":
            fields, experts = {}, []
            packet.protos.append((child.get("name"), fields, experts))
            collect(child, fields, experts)
            walk_protos(child, packet)
        elif child.tag == "field":
            walk_protos(child, packet)


def tshark_decode(tshark, lua, capture, workdir):
    pdml = os.path.join(workdir, os.path.basename(capture) + ".pdml")
    cmd = [tshark, "-n", "-r", capture, "-X", f"lua_script:{lua}", "-T", "pdml"]
    with open(pdml, "wb") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, check=False)
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise ToolError(f"tshark exited with {proc.returncode}: {' '.join(cmd)}\n{stderr}")
    lua_errors = [l for l in stderr.splitlines() if "Lua" in l or "lua" in l]
    packets = {}
    number = 0
    for _, elem in ET.iterparse(pdml, events=("end",)):
        if elem.tag != "packet":
            continue
        number += 1
        packet = Packet()
        walk_protos(elem, packet)
        packets[number] = packet
        elem.clear()
    return packets, lua_errors


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------

def to_int(text):
    text = text.strip()
    if text in ("True", "true"):
        return 1
    if text in ("False", "false"):
        return 0
    if re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+", text):
        return int(text.replace(":", ""), 16)  # FT_BYTES shown as aa:bb:cc
    return int(text, 0)


def norm(value):
    """Canonical form of an mrct value (bool -> int, IPv6 compressed, MAC lowercase)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            return value.lower() if re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", value) else value
    if isinstance(value, list):
        return [norm(v) for v in value]
    return value


def norm_show(show, like):
    """A PDML 'show' string in the form of the mrct value it is compared with."""
    if isinstance(like, (bool, int)):
        return to_int(show)
    return norm(show)


def value_label(showname):
    """The value-string label of a field, e.g. 'Opcode: SACK (0xdc)' -> 'SACK'."""
    text = showname.split(" = ", 1)[1] if " = " in showname else showname
    text = text.split(": ", 1)[1] if ": " in text else text
    m = re.fullmatch(r"(.*) \((?:0x)?[0-9a-fA-F]+\)", text)
    label = m.group(1) if m else text
    return "" if label.startswith("Unknown") else label


IBTA_NAME_EDITS = [
    ("Reliable Connection (RC) - ", "RC "), ("RDMA ", ""), (" with Immediate", " IMM"),
    (" with Invalidate", " INV"), ("CmpSwap", "CMP SWAP"), ("FetchAdd", "FETCH ADD"),
    ("READ response", "READ RESPONSE"),
]


def ibta_name(showname):
    """Wireshark's IBTA opcode label in the codec's spelling (RC_WRITE_ONLY_IMM, ...)."""
    label = value_label(showname)
    for old, new in IBTA_NAME_EDITS:
        label = label.replace(old, new)
    return label.upper().replace(" ", "_")


def carried_error(rec):
    """mrct's decode error as (kind, layer, frame offset, need, have), or None."""
    err = rec.get("error")
    if err is None:
        return None
    m = re.fullmatch(r"truncated (.+?) at offset (\d+): need (\d+) bytes, have (\d+)", err)
    if m:
        return ("truncated", m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
    m = re.fullmatch(r"pad count (\d+) exceeds the payload in payload at offset (\d+)", err)
    if m:
        return ("bad_pad", "payload", int(m.group(2)), int(m.group(1)), None)
    return ("other", err, None, None, None)


def plugin_error(packet):
    """The plugin's expert info for the same conditions, in carried_error's form."""
    for kind, msg in packet.experts("mrc"):
        if kind == "mrc.expert.truncated":
            m = re.fullmatch(r"(\S+) truncated at offset (\d+): need (\d+) bytes, have (-?\d+)", msg)
            if m:
                return ("truncated", m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))
            return ("truncated", msg, None, None, None)
        if kind == "mrc.expert.bad_pad":
            m = re.fullmatch(r"pad count (\d+) exceeds the \d+ bytes after the headers at offset (\d+)", msg)
            if m:
                return ("bad_pad", "payload", int(m.group(2)), int(m.group(1)), None)
            return ("bad_pad", msg, None, None, None)
    return None


class Checker:
    def __init__(self, verbose=False):
        self.stats = collections.OrderedDict()  # label -> [compared, mismatched]
        self.mismatches = []
        self.uncovered = []
        self.unmapped_plugin = collections.Counter()
        self.frames = 0
        self.frames_compared = 0
        self.verbose = verbose

    def compare(self, ctx, label, ours, theirs, keys):
        """ours: mrct value (normalised); theirs: Wireshark value or None when absent."""
        entry = self.stats.setdefault(label, [0, 0])
        entry[0] += 1
        ctx["compared"] += 1
        ctx["consumed"].update(keys)
        if ours != theirs:
            entry[1] += 1
            self.mismatches.append((ctx["capture"], ctx["frame"], ctx["name"], label, keys, ours, theirs))

    def frame(self, capture, number, name, rec, pkt):
        ctx = {"capture": capture, "frame": number, "name": name, "compared": 0, "consumed": set()}
        self.frames += 1
        if pkt is None:
            self.mismatches.append((capture, number, name, "frame missing in tshark output", (),
                                    "present", None))
            return
        cmp = lambda label, key, theirs: self.compare(ctx, label, norm(rec[key]), theirs, (key,))

        # Frame.
        cmp("builtin frame.len <-> len", "len", to_int(pkt.first("geninfo", "len")[0]))
        epoch = pkt.first("frame", "frame.time_epoch")
        stamp = None
        if epoch is not None:
            sec, _, frac = epoch[0].partition(".")
            stamp = int(sec) * 10**9 + int((frac + "000000000")[:9])
        cmp("builtin frame.time_epoch <-> ts_ns", "ts_ns", stamp)

        # Ethernet and VLAN.
        if "eth.src" in rec:
            cmp("builtin eth.src <-> eth.src", "eth.src", norm_show(pkt.first("eth", "eth.src")[0], ""))
            cmp("builtin eth.dst <-> eth.dst", "eth.dst", norm_show(pkt.first("eth", "eth.dst")[0], ""))
            if pkt.layers("vlan"):
                cmp("builtin vlan.etype <-> eth.type", "eth.type", to_int(pkt.first("vlan", "vlan.etype")[0]))
            else:
                cmp("builtin eth.type <-> eth.type", "eth.type", to_int(pkt.first("eth", "eth.type")[0]))
        if "vlan.id" in rec:
            v = pkt.first("vlan", "vlan.id")
            cmp("builtin vlan.id <-> vlan.id", "vlan.id", to_int(v[0]) if v else None)

        # IP: the outer header is the first IPv4/IPv6 layer, SRv6's inner one the second IPv6 layer.
        ip_layers = [(p, f) for p, f, _ in pkt.protos if p in ("ip", "ipv6")]
        if "l3" in rec or ip_layers:
            got = {"ip": 4, "ipv6": 6}[ip_layers[0][0]] if ip_layers else None
            self.compare(ctx, "builtin first IP layer <-> l3", rec.get("l3"), got, ("l3",))

        def field(fields, name, like=0):
            v = fields.get(name)
            return norm_show(v[0][0], like) if v else None

        if rec.get("l3") == 4 and ip_layers and ip_layers[0][0] == "ip":
            f = ip_layers[0][1]
            cmp("builtin ip.src <-> src", "src", field(f, "ip.src", ""))
            cmp("builtin ip.dst <-> dst", "dst", field(f, "ip.dst", ""))
            cmp("builtin ip.dsfield.dscp <-> dscp", "dscp", field(f, "ip.dsfield.dscp"))
            cmp("builtin ip.dsfield.ecn <-> ecn", "ecn", field(f, "ip.dsfield.ecn"))
            cmp("builtin ip.ttl <-> ttl", "ttl", field(f, "ip.ttl"))
            # IPv4 has no flow label; the codec reports 0.
            self.compare(ctx, "derived IPv4 (no flow label) <-> flow_label = 0", rec["flow_label"], 0,
                         ("flow_label",))
        if rec.get("l3") == 6 and ip_layers and ip_layers[0][0] == "ipv6":
            f = ip_layers[0][1]
            cmp("builtin ipv6.src <-> src", "src", field(f, "ipv6.src", ""))
            cmp("builtin ipv6.dst <-> dst", "dst", field(f, "ipv6.dst", ""))
            cmp("builtin ipv6.tclass.dscp <-> dscp", "dscp", field(f, "ipv6.tclass.dscp"))
            cmp("builtin ipv6.tclass.ecn <-> ecn", "ecn", field(f, "ipv6.tclass.ecn"))
            cmp("builtin ipv6.flow <-> flow_label", "flow_label", field(f, "ipv6.flow"))
            cmp("builtin ipv6.hlim <-> hop_limit", "hop_limit", field(f, "ipv6.hlim"))
        if "srh.segments_left" in rec:
            f = (pkt.layers("ipv6.routing") or [{}])[0]
            cmp("builtin ipv6.routing.segleft <-> srh.segments_left", "srh.segments_left",
                field(f, "ipv6.routing.segleft"))
            cmp("builtin ipv6.routing.srh.last_entry <-> srh.last_entry", "srh.last_entry",
                field(f, "ipv6.routing.srh.last_entry"))
            cmp("builtin ipv6.routing.srh.addr[] <-> srh.segments", "srh.segments",
                [norm(seg[0]) for seg in f.get("ipv6.routing.srh.addr", [])])
        if "inner.src" in rec:
            v6 = [f for p, f in ip_layers if p == "ipv6"]
            f = v6[1] if len(v6) > 1 else {}
            cmp("builtin inner ipv6.src <-> inner.src", "inner.src", field(f, "ipv6.src", ""))
            cmp("builtin inner ipv6.dst <-> inner.dst", "inner.dst", field(f, "ipv6.dst", ""))
            cmp("builtin inner ipv6.flow <-> inner.flow_label", "inner.flow_label", field(f, "ipv6.flow"))
            cmp("builtin inner ipv6.tclass.dscp <-> inner.dscp", "inner.dscp", field(f, "ipv6.tclass.dscp"))
            cmp("builtin inner ipv6.tclass.ecn <-> inner.ecn", "inner.ecn", field(f, "ipv6.tclass.ecn"))

        # UDP.
        udp = (pkt.layers("udp") or [{}])[-1]
        if "sport" in rec:
            cmp("builtin udp.srcport <-> sport", "sport", field(udp, "udp.srcport"))
            cmp("builtin udp.dstport <-> dport", "dport", field(udp, "udp.dstport"))
            cmp("builtin udp.length <-> udp.length", "udp.length", field(udp, "udp.length"))
            cmp("builtin udp.checksum <-> udp.checksum", "udp.checksum", field(udp, "udp.checksum"))

        ib = (pkt.layers("infiniband") or [None])[0]
        # mrct calls a frame RoCE once it has read a whole BTH; so does the built-in dissector
        # when it shows the PSN (the BTH's last field).
        if rec.get("dport") == ROCE_PORT or "roce" in rec:
            full_bth = ib is not None and "infiniband.bth.psn" in ib
            self.compare(ctx, "builtin infiniband.bth complete <-> roce", norm(rec.get("roce")), int(full_bth),
                         ("roce",))

        if rec.get("roce"):
            ibf = ib or {}
            for key, name in BUILTIN_BTH:
                cmp(f"builtin {name} <-> {key}", key, field(ibf, name))
            # IBTA's 7 reserved bits of byte 8 hold MRC's RTX (bit 5) and TS (bit 4).
            r7 = field(ibf, "infiniband.bth.reserved7")
            self.compare(ctx, "builtin infiniband.bth.reserved7 & 0x30 <-> rtx<<5 | ts<<4",
                         int(rec["rtx"]) << 5 | int(rec["ts"]) << 4, None if r7 is None else r7 & 0x30,
                         ("rtx", "ts"))
            mrc_op = rec["opcode"] in MRC_OPCODES
            if mrc_op:
                self.plugin(ctx, rec, pkt)
            else:
                self.builtin_ibta(ctx, rec, pkt, ibf, udp, ip_layers)

        # A UDP payload too short for a BTH: mrct has no opcode, so look at the first byte.
        first_byte = None
        if not rec.get("roce") and rec.get("dport") == ROCE_PORT:
            payload = udp.get("udp.payload")
            first_byte = int(payload[0][0][:2], 16) if payload and payload[0][0] else None
            if first_byte is None:
                # No opcode to dispatch on: the plugin must stay silent, and the codec must
                # report a BTH cut to the UDP payload tshark saw.
                theirs = plugin_error(pkt) if pkt.layers("mrc") else None
                if theirs is None and "udp.length" in udp and "udp.srcport" in udp:
                    # The BTH would start right after the 8-byte UDP header.
                    bth_offset = udp["udp.srcport"][0][2] + 8
                    theirs = ("truncated", "BTH", bth_offset, 12, to_int(udp["udp.length"][0][0]) - 8)
                self.compare(ctx, "error mrct BTH error on empty payload <-> plugin silent, udp.length",
                             carried_error(rec), theirs, ("error",))
            elif first_byte in MRC_OPCODES:
                self.compare(ctx, "error mrct error <-> plugin expert (kind, layer, offset, need, have)",
                             carried_error(rec), plugin_error(pkt) if pkt.layers("mrc") else None,
                             ("error",))

        # mrct keys nobody compared are a coverage gap, unless listed with a reason.
        classes = {"any"}
        if "error" in rec:
            classes.add("error")
        if rec.get("roce") and rec["opcode"] not in MRC_OPCODES:
            classes.add("rc")
        if first_byte is not None and first_byte not in MRC_OPCODES:
            classes.add("rc")
        for key in rec:
            if key in ctx["consumed"] or any((key, c) in NOT_COMPARED for c in classes):
                continue
            self.uncovered.append((capture, number, name, key))
        if ctx["compared"]:
            self.frames_compared += 1
        else:
            self.mismatches.append((capture, number, name, "no field compared", (), None, None))

    def builtin_ibta(self, ctx, rec, pkt, ibf, udp, ip_layers):
        def field(name):
            v = ibf.get(name)
            return to_int(v[0][0]) if v else None

        for key, name in BUILTIN_IBTA + BUILTIN_IBTA_BYTES:
            if key in rec:
                self.compare(ctx, f"builtin {name} <-> {key}", norm(rec[key]), field(name), (key,))
        op = ibf.get("infiniband.bth.opcode")
        self.compare(ctx, "builtin infiniband.bth.opcode label <-> opcode_name", rec["opcode_name"],
                     ibta_name(op[0][1]) if op else None, ("opcode_name",))
        if "icrc" in rec:
            crc = field("infiniband.invariant.crc")
            # Wireshark shows the ICRC's four bytes as a big-endian number; the codec reads the
            # trailer little-endian, as RoCEv2 stores it.
            swapped = None if crc is None else int.from_bytes(crc.to_bytes(4, "big"), "little")
            self.compare(ctx, "builtin infiniband.invariant.crc (byte-swapped) <-> icrc", rec["icrc"], swapped,
                         ("icrc",))
        if "error" not in rec:
            data = pkt.anywhere("data.len")
            got = to_int(data[0]) if data else 0
            self.compare(ctx, "builtin data.len <-> payload_len + pad", rec["payload_len"] + rec["pad"], got,
                         ("payload_len",))
        self.compare(ctx, "derived non-MRC opcode <-> trimmed = false", norm(rec["trimmed"]), 0, ("trimmed",))
        # The WEV and EV format of a plain RoCEv2 frame, recomputed from tshark's headers.
        v6 = [f for p, f in ip_layers if p == "ipv6"]
        sport = to_int(udp["udp.srcport"][0][0]) if "udp.srcport" in udp else None
        if len(v6) >= 2:
            fmt = "srv6"
        elif ip_layers and ip_layers[0][0] == "ipv6" and to_int(v6[0]["ipv6.flow"][0][0]) != 0:
            fmt = "stev"
        else:
            fmt = "udp"
        self.compare(ctx, "derived tshark ip/udp <-> ev_format", rec["ev_format"], fmt, ("ev_format",))
        if fmt == "udp" or sport is None:
            wev = sport
        else:
            wev = (to_int(v6[-1]["ipv6.flow"][0][0]) & 0xFFFF) << 16 | sport
        self.compare(ctx, "derived tshark udp.srcport/ipv6.flow <-> wev (LOW_IN_SPORT)", rec["wev"], wev, ("wev",))

    def plugin(self, ctx, rec, pkt):
        layers = pkt.layers("mrc")
        fields = layers[0] if layers else {}
        if not layers:
            self.compare(ctx, "plugin MRC tree present", 1, 0, ())
        seen = set(fields)
        mapped = set()
        for key, value in rec.items():
            if key in FRAME_KEYS or key in BUILTIN_SKIP_PLUGIN:
                continue
            if key in PLUGIN_VALUE_NAME:
                name = PLUGIN_VALUE_NAME[key]
                got = value_label(fields[name][0][1]) if name in fields else None
                self.compare(ctx, f"plugin {name} label <-> {key}", value, got, (key,))
                continue
            if key == "payload_len" and "error" in rec:
                continue
            name = PLUGIN_NAME.get(key, "mrc." + key)
            mapped.add(name)
            got = norm_show(fields[name][0][0], value) if name in fields else None
            self.compare(ctx, f"plugin {name} <-> {key}", norm(value), got, (key,))
        # A plugin field for an mrct key that this frame lacks is a disagreement too.
        for name in seen:
            if not name.startswith("mrc.") or name in mapped or name in PLUGIN_ONLY:
                continue
            if name in ("mrc.seth.sack_base",):
                continue
            key = {v: k for k, v in PLUGIN_NAME.items()}.get(name, name[4:])
            if key in ALL_MRCT_KEYS:
                if key == "payload_len" and "error" in rec:
                    continue
                self.compare(ctx, f"plugin {name} <-> {key}", "absent", "present", (key,))
            else:
                self.unmapped_plugin[name] += 1
        if "seth.cack_psn" in rec and "seth.sack_offset" in rec:
            expect = (rec["seth.cack_psn"] + rec["seth.sack_offset"]) % (1 << 24)
            got = fields.get("mrc.seth.sack_base")
            self.compare(ctx, "derived mrc.seth.sack_base <-> seth.cack_psn + seth.sack_offset", expect,
                         to_int(got[0][0]) if got else None, ("seth.cack_psn", "seth.sack_offset"))
        ours = carried_error(rec)
        theirs = plugin_error(pkt) if layers else None
        if ours is not None or theirs is not None:
            self.compare(ctx, "error mrct error <-> plugin expert (kind, layer, offset, need, have)", ours, theirs,
                         ("error",))
        for kind, msg in pkt.experts("mrc"):
            if kind == "mrc.expert.internal":
                self.compare(ctx, "plugin internal error", None, msg, ())


# Keys the plugin does not repeat because they belong to the outer layers (handled above).
BUILTIN_SKIP_PLUGIN = set()
ALL_MRCT_KEYS = set()


def report(checker, out):
    width = max([len(label) for label in checker.stats] + [20])
    out.write(f"\n{'comparison':<{width}}  {'compared':>8}  {'mismatch':>8}\n")
    out.write(f"{'-' * width}  {'-' * 8}  {'-' * 8}\n")
    groups = collections.OrderedDict()
    for label, (n, bad) in checker.stats.items():
        groups.setdefault(label.split(" ", 1)[0], []).append((label, n, bad))
    total = total_bad = 0
    for group in ("builtin", "plugin", "derived", "error"):
        for label, n, bad in groups.get(group, []):
            out.write(f"{label:<{width}}  {n:>8}  {bad:>8}\n")
            total += n
            total_bad += bad
    for group, rows in groups.items():
        if group not in ("builtin", "plugin", "derived", "error"):
            for label, n, bad in rows:
                out.write(f"{label:<{width}}  {n:>8}  {bad:>8}\n")
                total += n
                total_bad += bad
    out.write(f"{'-' * width}  {'-' * 8}  {'-' * 8}\n")
    out.write(f"{'total':<{width}}  {total:>8}  {total_bad:>8}\n")
    per_group = {g: sum(n for _, n, _ in rows) for g, rows in groups.items()}
    out.write("by kind: " + ", ".join(f"{g} {n}" for g, n in per_group.items()) + "\n")
    out.write(f"frames: {checker.frames}, compared: {checker.frames_compared}, "
              f"field comparisons: {total}, mismatches: {len(checker.mismatches)}, "
              f"uncovered mrct keys: {len(checker.uncovered)}\n")
    if checker.unmapped_plugin:
        out.write("plugin fields with no mrct counterpart (not compared): "
                  + ", ".join(sorted(checker.unmapped_plugin)) + "\n")
    if NOT_COMPARED:
        out.write("not compared, by design:\n")
        for (key, klass), why in NOT_COMPARED.items():
            out.write(f"  {key} ({klass} frames): {why}\n")
    for capture, frame, name, label, keys, ours, theirs in checker.mismatches:
        out.write(f"MISMATCH {capture} frame {frame} [{name}] {label}: mrct={ours!r} wireshark={theirs!r}\n")
    for capture, frame, name, key in checker.uncovered:
        out.write(f"UNCOVERED {capture} frame {frame} [{name}] mrct key {key!r} has no comparison\n")


def mutate(records, key):
    """Changes the first value of `key` in frame order; returns the frame number."""
    for number in sorted(records):
        rec = records[number]
        if key not in rec:
            continue
        value = rec[key]
        if isinstance(value, bool):
            rec[key] = not value
        elif isinstance(value, int):
            rec[key] = value + 1
        elif isinstance(value, str):
            rec[key] = value + "-mutated"
        elif isinstance(value, list) and value:
            rec[key] = ["::1"] + value[1:]
        else:
            continue
        return number
    return None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mrct", required=True, help="path of the mrct binary")
    parser.add_argument("--tshark", default=None, help="tshark to use (default: from PATH)")
    parser.add_argument("--lua", default=os.path.join(HERE, "mrp0.lua"), help="the MRC Lua plugin")
    parser.add_argument("--capture", default=None,
                        help="compare this capture instead of crafting the sample set")
    parser.add_argument("--no-variants", action="store_true",
                        help="skip the truncated and scrambled copies of the MRC samples")
    parser.add_argument("--selftest-mutate", nargs="?", const="neth.nack_psn", default=None, metavar="KEY",
                        help="perturb the first mrct value of KEY (default neth.nack_psn) and require "
                             "that exactly that change is reported")
    parser.add_argument("--keep", metavar="DIR", help="write captures and PDML to DIR and keep them")
    args = parser.parse_args(argv)

    tshark = args.tshark or shutil.which("tshark")
    if not tshark or not os.path.exists(tshark):
        print("crosscheck: tshark not found; install the Debian package tshark to run this check",
              file=sys.stderr)
        return 77
    if not os.access(args.mrct, os.X_OK):
        print(f"crosscheck: mrct binary {args.mrct!r} is not executable", file=sys.stderr)
        return 2
    if not os.path.exists(args.lua):
        print(f"crosscheck: Lua plugin {args.lua!r} not found", file=sys.stderr)
        return 2

    workdir = args.keep or tempfile.mkdtemp(prefix="mrc-crosscheck-")
    os.makedirs(workdir, exist_ok=True)
    try:
        captures = []
        snap_kept = []
        if args.capture:
            captures.append((args.capture, None))
        else:
            samples_ng = os.path.join(workdir, "samples.pcapng")
            samples = os.path.join(workdir, "samples.pcap")
            run([args.mrct, "craft", "--format", "pcapng", "-o", samples_ng], "mrct craft")
            run([args.mrct, "craft", "-o", samples], "mrct craft")
            captures.append((samples_ng, None))
            if not args.no_variants:
                records = mrct_decode(args.mrct, samples)
                variants = os.path.join(workdir, "variants.pcap")
                snapped = os.path.join(workdir, "snapped.pcap")
                names, snap_kept = derive_variants(samples, variants, snapped, records)
                captures.append((variants, names))

        decoded = []
        for capture, names in captures:
            records = mrct_decode(args.mrct, capture)
            packets, lua_errors = tshark_decode(tshark, args.lua, capture, workdir)
            decoded.append((capture, names, records, packets, lua_errors))
            for rec in records.values():
                ALL_MRCT_KEYS.update(rec)

        mutated = None
        if args.selftest_mutate:
            for capture, _, records, _, _ in decoded:
                frame = mutate(records, args.selftest_mutate)
                if frame is not None:
                    mutated = (os.path.basename(capture), frame, args.selftest_mutate)
                    break
            if mutated is None:
                print(f"crosscheck: no frame has mrct key {args.selftest_mutate!r} to mutate", file=sys.stderr)
                return 2

        checker = Checker()
        lua_error_lines = []
        for capture, names, records, packets, lua_errors in decoded:
            base = os.path.basename(capture)
            lua_error_lines += [f"{base}: {l}" for l in lua_errors]
            if len(packets) != len(records):
                checker.mismatches.append((base, 0, "", "frame count", (), len(records), len(packets)))
            for number in sorted(records):
                pkt = packets.get(number)
                if names is not None:
                    name = names[number - 1] if number - 1 < len(names) else ""
                else:
                    name = pkt.comment() if pkt else ""
                checker.frame(base, number, name, records[number], pkt)

        report(checker, sys.stdout)
        robust_failures = []
        if snap_kept:
            # Snap-truncated copies: mrct sees only the captured bytes (an IP-level error), so
            # nothing to compare; the plugin must still dissect every one without a Lua error.
            packets, lua_errors = tshark_decode(tshark, args.lua, snapped, workdir)
            lua_error_lines += [f"snapped.pcap: {l}" for l in lua_errors]
            with_tree = 0
            for number, kept in enumerate(snap_kept, 1):
                pkt = packets.get(number)
                has_tree = pkt is not None and bool(pkt.layers("mrc"))
                with_tree += has_tree
                internal = [m for k, m in (pkt.experts("mrc") if pkt else []) if k == "mrc.expert.internal"]
                if pkt is None or has_tree != (kept >= 1) or internal:
                    robust_failures.append(f"snapped.pcap frame {number} ({kept} B of UDP payload captured): "
                                           f"MRC tree {'present' if has_tree else 'absent'}"
                                           + (f", plugin error {internal[0]!r}" if internal else ""))
            print(f"snap-length robustness: {len(snap_kept)} frames cut by the capture, {with_tree} with an "
                  f"MRC tree, {len(robust_failures)} failures")
            for line in robust_failures:
                print(f"ROBUSTNESS {line}")
        for line in lua_error_lines:
            print(f"LUA ERROR {line}")

        if mutated:
            capture, frame, key = mutated
            hits = [m for m in checker.mismatches if m[0] == capture and m[1] == frame and key in m[4]]
            others = [m for m in checker.mismatches if m not in hits]
            print(f"\nselftest: mutated {key!r} of {capture} frame {frame}: "
                  f"{len(hits)} mismatch(es) report it, {len(others)} other mismatch(es)")
            if hits and not others and not lua_error_lines and not robust_failures:
                print("selftest: PASS (the crosscheck detects a perturbed codec value)")
                return 0
            print("selftest: FAIL")
            return 1

        ok = not checker.mismatches and not checker.uncovered and not lua_error_lines \
            and not robust_failures and checker.frames_compared == checker.frames
        print("\ncrosscheck: " + ("PASS" if ok else "FAIL"))
        return 0 if ok else 1
    except ToolError as e:
        print(f"crosscheck: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Cross-check the MRC codec against Wireshark, field by field, for every frame.

Two independent decoders read the same captures:
  * `mrct decode --json` (the project's codec, wire/*.cc), one JSON object per frame;
  * `tshark -T pdml` with Wireshark's own Ethernet/IP/IPv6/SRH/UDP/InfiniBand dissectors and
    this directory's Lua plugin (mrp0.lua) for the MRC extension headers.

Every key mrct prints for a frame must be matched by a comparison (or be listed in
NOT_COMPARED with the reason), and every comparison must agree. Kinds of comparison:
  builtin  Wireshark's built-in dissectors: frame, Ethernet, VLAN, IPv4, IPv6 (outer and
           inner), SRH, UDP, and the InfiniBand BTH / RETH / AETH / ImmDt / ICRC / payload
  plugin   the Lua plugin's mrc.* fields on MRC opcodes (named after mrct's keys)
  derived  values neither side prints directly but both must agree on (e.g. the WEV of a plain
           RoCEv2 frame, recomputed from tshark's UDP port and flow label)
  error    mrct's decode error vs the plugin's expert info (layer, offset, need, have)

Captures: the sample set of `mrct craft`, plus (unless --no-variants) every MRC sample cut
short after each byte of its headers (IP and UDP lengths kept consistent), with its BTH flags
and extension headers replaced by pseudo-random bytes, and cut by a capture snap length (only
checked for a clean dissection: mrct sees a truncated IP packet there).

Exit status: 0 every frame compared and no mismatch; 1 mismatches, uncovered keys or plugin
errors; 77 tshark is missing (ctest reports the test as skipped); 2 usage or tool failure.
With --selftest-mutate[=KEY] one mrct value is changed before comparing, and the exit status
is 0 only if that change, and nothing else, is reported as a mismatch.

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
BTH_BYTES = 12
# Cuts and scrambling reach this far into the UDP payload: BTH + the largest MRC stack
# (METH+TSETH+RETH+ImmDt = 28, SETH+CC_STATE = 36, EETH = 36) + ICRC, with some room.
HEADER_REACH = BTH_BYTES + 40 + 4 + 2

# mrct keys no comparison covers, with the reason, as (key, frame class). Classes: "any";
# "rc" for a RoCE frame whose opcode is not an MRC one; "error" for a frame mrct could not
# decode completely.
NOT_COMPARED = {
    ("frame", "any"): "join key: mrct and tshark both number frames from 1",
    ("icrc_ok", "rc"): "the built-in InfiniBand dissector does not verify the ICRC, and the "
                       "plugin verifies it only on MRC opcodes",
    ("atomic.va", "rc"): "Wireshark 4.0's AtomicETH has no VA field",
    ("atomic.rkey", "rc"): "Wireshark 4.0's AtomicETH has no R_Key field",
    ("payload_len", "error"): "mrct prints payload_len 0 on a frame it could not decode; the "
                              "plugin prints no payload length there",
    ("error", "rc"): "decode errors are compared with the plugin's expert infos, which exist "
                     "only for MRC opcodes; the built-in dissector's malformed-packet note "
                     "names no layer",
}

# Plugin fields with no mrct key: reserved bits the codec keeps but does not print, and
# presentation helpers (mrc.seth.sack_base is checked as a derived value). Listed so that an
# unexpected plugin field shows up in the report.
PLUGIN_ONLY = {
    "mrc.variant", "mrc.bth.rsvd6", "mrc.bth.rsvd_lo", "mrc.tseth.reserved",
    "mrc.seth.reserved0", "mrc.seth.rsvd_b1", "mrc.seth.cc_flags_rsvd", "mrc.seth.sack_base",
    "mrc.cc.rsvd", "mrc.neth.reserved0", "mrc.neth.reserved12", "mrc.neth.cc_type",
    "mrc.neth.cc_flags_rsvd", "mrc.neth.psv", "mrc.neth.reserved17", "mrc.peth.reserved0",
    "mrc.peth.vendor", "mrc.peth.reserved6", "mrc.peth.tsr", "mrc.peth.reserved_tsr",
    "mrc.erth.reserved0", "mrc.erth.rsvd_b1", "mrc.erth.reserved2", "mrc.erth.vendor",
    "mrc.erth.reserved8", "mrc.erth.tsr", "mrc.erth.reserved_tsr", "mrc.eeth.reserved0",
    "mrc.eeth.rsvd_b1", "mrc.eeth.vendor", "mrc.eeth.reserved12", "mrc.eeth.reserved32",
    "mrc.payload", "mrc.pad_bytes", "mrc.icrc_computed",
}

# mrct key -> plugin field, where the field is not simply "mrc." + key.
PLUGIN_NAME = {"neth.code": "mrc.nack_code"}
PLUGIN_KEY = {field: key for key, field in PLUGIN_NAME.items()}
# mrct keys that hold the value-string label of a plugin field.
PLUGIN_VALUE_NAME = {"opcode_name": "mrc.opcode", "neth.code_name": "mrc.nack_code"}
# Keys of the frame and its outer layers: compared with the built-in dissectors only.
FRAME_KEYS = {
    "frame", "ts_ns", "len", "roce", "eth.src", "eth.dst", "eth.type", "vlan.id", "l3", "src",
    "dst", "dscp", "ecn", "flow_label", "ttl", "hop_limit", "srh.segments_left",
    "srh.last_entry", "srh.segments", "inner.src", "inner.dst", "inner.flow_label",
    "inner.dscp", "inner.ecn", "sport", "dport", "udp.length", "udp.checksum", "error",
}

# Keys the decoder JSON gained when every field of every header became visible (issue 21).
# The outer headers' fields against Wireshark's built-in dissectors (mrct key -> tshark field;
# the value as tshark shows it, after `scale`): compared in outer_layers().
OUTER_IP4 = [("ip4.ihl", "ip.hdr_len", 4), ("ip4.total_length", "ip.len", 1),
             ("ip4.id", "ip.id", 1), ("ip4.frag_offset", "ip.frag_offset", 1),
             ("ip4.protocol", "ip.proto", 1), ("ip4.checksum", "ip.checksum", 1)]
OUTER_IP6 = [("ip6.payload_length", "ipv6.plen"), ("ip6.next_header", "ipv6.nxt")]
INNER_IP6 = [("inner.payload_length", "ipv6.plen"), ("inner.next_header", "ipv6.nxt"),
             ("inner.hop_limit", "ipv6.hlim")]
SRH_FIELDS = [("srh.next_header", "ipv6.routing.nxt"), ("srh.hdr_ext_len", "ipv6.routing.len"),
              ("srh.routing_type", "ipv6.routing.type"), ("srh.flags", "ipv6.routing.srh.flags"),
              ("srh.tag", "ipv6.routing.srh.tag")]
# MRC reserved fields mrct prints only when non-zero, against the plugin's field for the same
# bits (absent in mrct = 0): compared in plugin(), present or not.
RESERVED_PLUGIN = {
    "bth.reserved_b8_6": "mrc.bth.rsvd6", "bth.reserved_b8_lo": "mrc.bth.rsvd_lo",
    "cc.reserved": "mrc.cc.rsvd", "eeth.reserved_b1": "mrc.eeth.rsvd_b1",
    "erth.reserved_b1": "mrc.erth.rsvd_b1", "neth.reserved_cc_flags": "mrc.neth.cc_flags_rsvd",
    "seth.reserved_b1": "mrc.seth.rsvd_b1", "seth.reserved_byte0": "mrc.seth.reserved0",
    "seth.reserved_cc_flags": "mrc.seth.cc_flags_rsvd", "eeth.reserved12": "mrc.eeth.reserved12",
}
PLUGIN_NAME.update(RESERVED_PLUGIN)
PLUGIN_NAME["bth.variant"] = "mrc.variant"
PLUGIN_KEY = {field: key for key, field in PLUGIN_NAME.items()}
# What Wireshark 4.0 has no field for, with the reason.
NOT_COMPARED.update({
    ("bth.variant", "rc"): "the built-in InfiniBand dissector shows no field for BTH byte 4 "
                           "(IBTA reserved); on MRC opcodes the plugin's mrc.variant is compared",
    ("pad_bytes", "error"): "on a frame mrct could not decode, it prints pad_bytes 0 and the "
                            "plugin shows no pad",
})
FRAME_KEYS |= {k for k, _, _ in OUTER_IP4} | {k for k, _ in OUTER_IP6 + INNER_IP6 + SRH_FIELDS}
FRAME_KEYS |= {"ip4.flags", "vlan.pcp", "vlan.dei"}

# Built-in InfiniBand fields: the BTH (every RoCE frame) and the IBTA headers.
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
    ("imm", "infiniband.immdt"), ("ieth.rkey", "infiniband.ieth"),
]
# Wireshark's IBTA opcode labels, rewritten into the codec's names (RC_WRITE_ONLY_IMM, ...).
IBTA_NAME_EDITS = [
    ("Reliable Connection (RC) - ", "RC "), ("RDMA ", ""), (" with Immediate", " IMM"),
    (" with Invalidate", " INV"), ("CmpSwap", "CMP SWAP"), ("FetchAdd", "FETCH ADD"),
    ("READ response", "READ RESPONSE"),
]


class ToolError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Captures
# ----------------------------------------------------------------------------------------------

PCAP_LE = (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
PCAP_BE = (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d")


def read_pcap(path):
    """A classic pcap file as (file header, link type, [(sec, frac, bytes)])."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 24 or data[:4] not in PCAP_LE + PCAP_BE:
        raise ToolError(f"{path}: not a classic pcap file")
    endian = "<" if data[:4] in PCAP_LE else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    frames = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            raise ToolError(f"{path}: record at offset {off - 16} runs past the end of the file")
        frames.append((sec, frac, data[off:off + incl]))
        off += incl
    return data[:24], linktype, frames


def write_pcap(path, header, frames):
    """frames: (sec, frac, bytes[, length on the wire when the capture kept fewer bytes])."""
    endian = "<" if header[:4] in PCAP_LE else ">"
    with open(path, "wb") as fh:
        fh.write(header)
        for sec, frac, frame, *wire_len in frames:
            orig = wire_len[0] if wire_len else len(frame)
            fh.write(struct.pack(endian + "IIII", sec, frac, len(frame), orig))
            fh.write(frame)


def ipv4_checksum(header):
    total = sum((header[i] << 8) | header[i + 1] for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def locate_udp(frame):
    """([(IP version, offset)], UDP offset) of an Ethernet frame, or None."""
    if len(frame) < 14:
        return None
    off = 14
    ethertype = struct.unpack(">H", frame[12:14])[0]
    if ethertype == 0x8100 and len(frame) >= 18:
        ethertype = struct.unpack(">H", frame[16:18])[0]
        off = 18
    if ethertype == 0x0800:
        if frame[off + 9] != 17:
            return None
        return [(4, off)], off + (frame[off] & 0x0F) * 4
    if ethertype != 0x86DD:
        return None
    ips = [(6, off)]
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
            ihl = (out[off] & 0x0F) * 4
            struct.pack_into(">H", out, off + 2, end - off)
            struct.pack_into(">H", out, off + 10, 0)
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
    for i in range(udp_off + 8 + 1, min(len(out), udp_off + 8 + HEADER_REACH)):
        out[i] = rng.randrange(256)
    return bytes(out)


def derive_variants(src_pcap, variants_pcap, snapped_pcap, mrct_records):
    """Writes copies of every MRC sample of src_pcap.

    variants_pcap: cut after each header byte (lengths fixed) and scrambled; their names are
    returned. snapped_pcap: cut by a snap length (wire length kept); the number of UDP payload
    bytes each kept is returned.
    """
    header, linktype, frames = read_pcap(src_pcap)
    if linktype != 1:
        raise ToolError(f"{src_pcap}: link type {linktype}, expected Ethernet (1)")
    rng = random.Random(ROCE_PORT)  # fixed seed: the same variants on every run
    variants, names, snapped, snap_kept = [], [], [], []
    for index, (sec, frac, frame) in enumerate(frames):
        number = index + 1
        if mrct_records.get(number, {}).get("opcode") not in MRC_OPCODES:
            continue
        where = locate_udp(frame)
        if where is None:
            continue
        ips, udp_off = where
        payload = len(frame) - udp_off - 8
        for n in sorted(set(range(min(payload, HEADER_REACH))) | {payload - 1}):
            variants.append((sec, frac, shorten(frame, ips, udp_off, n)))
            names.append(f"frame {number} cut to {n} B of UDP payload")
        for k in range(3):
            variants.append((sec, frac, scramble(frame, udp_off, rng)))
            names.append(f"frame {number} scrambled #{k + 1}")
        for n in range(min(payload, HEADER_REACH)):
            snapped.append((sec, frac, frame[:udp_off + 8 + n], len(frame)))
            snap_kept.append(n)
    write_pcap(variants_pcap, header, variants)
    write_pcap(snapped_pcap, header, snapped)
    return names, snap_kept


# ----------------------------------------------------------------------------------------------
# The two decoders
# ----------------------------------------------------------------------------------------------

def run(cmd, what):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise ToolError(f"{what}: cannot run {cmd[0]}: {e}") from e
    if proc.returncode != 0:
        raise ToolError(f"{what} exited with {proc.returncode}: {' '.join(cmd)}\n"
                        f"{proc.stderr.decode(errors='replace')}")
    return proc.stdout


def mrct_decode(mrct, capture):
    """Frame number -> the JSON object `mrct decode --json` prints for it."""
    records = {}
    out = run([mrct, "decode", "--json", capture], "mrct decode")
    for lineno, line in enumerate(out.decode().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ToolError(f"mrct decode --json {capture}: line {lineno}: {e}") from e
        records[rec["frame"]] = rec
    return records


class Packet:
    """One PDML packet: protocol instances in order, each with its fields by name, as lists of
    (show, showname, pos), and its expert infos as (expert field, message)."""

    def __init__(self):
        self.protos = []  # (name, {field: [(show, showname, pos)]}, [(expert, message)])

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


def collect_fields(elem, fields, experts):
    for child in elem:
        if child.tag != "field":
            continue  # a nested <proto> (e.g. ipv6.routing) is an entry of its own
        name = child.get("name", "")
        if name == "_ws.expert":
            kind = next((c.get("name") for c in child
                         if c.get("name", "").startswith("mrc.expert.")), None)
            message = next((c.get("show") for c in child
                            if c.get("name") == "_ws.expert.message"), "")
            if kind:
                experts.append((kind, message))
            continue
        if name:
            pos = int(child.get("pos") or 0)
            entry = (child.get("show", ""), child.get("showname", ""), pos)
            fields.setdefault(name, []).append(entry)
        collect_fields(child, fields, experts)


def collect_protos(elem, packet):
    for child in elem:
        if child.tag == "proto":
            fields, experts = {}, []
            packet.protos.append((child.get("name"), fields, experts))
            collect_fields(child, fields, experts)
        if child.tag in ("proto", "field"):
            collect_protos(child, packet)


def tshark_decode(tshark, lua, capture, workdir):
    """Frame number -> Packet, and the lines tshark wrote about Lua on stderr."""
    pdml = os.path.join(workdir, os.path.basename(capture) + ".pdml")
    # Checksum verification on: Wireshark then also vets the codec's IPv4 and UDP checksums.
    cmd = [tshark, "-n", "-r", capture, "-X", f"lua_script:{lua}", "-T", "pdml",
           "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"]
    # A private HOME keeps the user's Wireshark profile and personal plugins (perhaps another
    # copy of mrp0.lua) out of the comparison.
    env = dict(os.environ, HOME=workdir, XDG_CONFIG_HOME=os.path.join(workdir, "config"))
    with open(pdml, "wb") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, check=False, env=env)
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise ToolError(f"tshark exited with {proc.returncode}: {' '.join(cmd)}\n{stderr}")
    lua_errors = [line for line in stderr.splitlines() if "lua" in line.lower()]
    packets = {}
    for _, elem in ET.iterparse(pdml, events=("end",)):
        if elem.tag == "packet":
            packet = Packet()
            collect_protos(elem, packet)
            packets[len(packets) + 1] = packet
            elem.clear()
    return packets, lua_errors


# ----------------------------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------------------------

def to_int(text):
    """A PDML 'show' of a number, boolean or byte string (aa:bb:cc) as an int."""
    text = text.strip()
    if text in ("True", "true"):
        return 1
    if text in ("False", "false"):
        return 0
    if re.fullmatch(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2})+", text):
        return int(text.replace(":", ""), 16)
    return int(text, 0)


def norm(value):
    """Canonical form of a value: bool -> int, IP addresses compressed, MACs lowercase."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            pass
        if re.fullmatch(r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}", value):
            return value.lower()
    return value


def norm_show(show, like):
    """A PDML 'show' in the form of the mrct value `like` it is compared with."""
    return to_int(show) if isinstance(like, (bool, int)) else norm(show)


def value_label(showname):
    """The value-string label of a field: 'Opcode: SACK (0xdc)' -> 'SACK'."""
    text = showname.split(" = ", 1)[1] if " = " in showname else showname
    text = text.split(": ", 1)[1] if ": " in text else text
    m = re.fullmatch(r"(.*) \((?:0x)?[0-9a-fA-F]+\)", text)
    label = m.group(1) if m else text
    return "" if label.startswith("Unknown") else label


def ibta_name(showname):
    label = value_label(showname)
    for old, new in IBTA_NAME_EDITS:
        label = label.replace(old, new)
    return label.upper().replace(" ", "_")


def mrct_error(rec):
    """mrct's decode error as (kind, layer, frame offset, need, have), or None."""
    err = rec.get("error")
    if err is None:
        return None
    m = re.fullmatch(r"truncated (.+?) at offset (\d+): need (\d+) bytes, have (\d+)", err)
    if m:
        return ("truncated", m[1], int(m[2]), int(m[3]), int(m[4]))
    m = re.fullmatch(r"pad count (\d+) exceeds the payload in payload at offset (\d+)", err)
    if m:
        return ("bad_pad", "payload", int(m[2]), int(m[1]), None)
    return ("other", err, None, None, None)


def plugin_error(packet):
    """The plugin's expert info for the same conditions, in mrct_error's form, or None."""
    for kind, msg in packet.experts("mrc"):
        if kind == "mrc.expert.truncated":
            m = re.fullmatch(r"(\S+) truncated at offset (\d+): need (\d+) bytes, have (-?\d+)",
                             msg)
            if m:
                return ("truncated", m[1], int(m[2]), int(m[3]), int(m[4]))
            return ("truncated", msg, None, None, None)
        if kind == "mrc.expert.bad_pad":
            m = re.fullmatch(r"pad count (\d+) exceeds the \d+ bytes after the headers "
                             r"at offset (\d+)", msg)
            if m:
                return ("bad_pad", "payload", int(m[2]), int(m[1]), None)
            return ("bad_pad", msg, None, None, None)
    return None


def show(fields, name, like=0):
    """The first value of a field in a protocol's field dict, shaped like `like`, or None."""
    v = fields.get(name)
    return norm_show(v[0][0], like) if v else None


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------

class Frame:
    """One frame under comparison: the mrct record, the tshark packet, and what was compared."""

    def __init__(self, capture, number, name, rec, pkt, crafted):
        self.capture, self.number, self.name = capture, number, name
        self.rec, self.pkt = rec, pkt
        self.crafted = crafted  # encoded by mrct craft, not altered afterwards
        self.compared = 0
        self.consumed = set()


class Checker:
    def __init__(self, all_mrct_keys):
        self.all_mrct_keys = all_mrct_keys  # every key mrct printed for any frame of the run
        self.stats = collections.OrderedDict()  # label -> [compared, mismatched]
        self.mismatches = []  # (capture, frame, name, label, keys, mrct value, wireshark value)
        self.uncovered = []
        self.unmapped_plugin = collections.Counter()
        self.frames = 0
        self.frames_compared = 0

    def compare(self, fr, label, ours, theirs, keys):
        """ours: mrct's value (normalised); theirs: Wireshark's, None when absent."""
        entry = self.stats.setdefault(label, [0, 0])
        entry[0] += 1
        fr.compared += 1
        fr.consumed.update(keys)
        if ours != theirs:
            entry[1] += 1
            self.mismatches.append((fr.capture, fr.number, fr.name, label, keys, ours, theirs))

    def key(self, fr, label, key, theirs):
        """Compares mrct's value of `key` with `theirs`."""
        self.compare(fr, label, norm(fr.rec[key]), theirs, (key,))

    def frame(self, capture, number, name, rec, pkt, crafted):
        self.frames += 1
        if pkt is None:
            self.mismatches.append((capture, number, name, "frame in tshark output", (),
                                    "present", None))
            return
        fr = Frame(capture, number, name, rec, pkt, crafted)
        self.outer_layers(fr)
        if rec.get("roce"):
            self.bth(fr)
            if rec["opcode"] in MRC_OPCODES:
                self.plugin(fr)
            else:
                self.ibta(fr)
        first_byte = self.short_bth(fr)

        classes = {"any"}
        if "error" in rec:
            classes.add("error")
        if rec.get("roce") and rec["opcode"] not in MRC_OPCODES:
            classes.add("rc")
        if first_byte is not None and first_byte not in MRC_OPCODES:
            classes.add("rc")
        for key in rec:
            if key not in fr.consumed and not any((key, c) in NOT_COMPARED for c in classes):
                self.uncovered.append((capture, number, name, key))
        if fr.compared:
            self.frames_compared += 1
        else:
            self.mismatches.append((capture, number, name, "fields compared", (), ">0", 0))

    def outer_layers(self, fr):
        rec, pkt = fr.rec, fr.pkt
        self.key(fr, "builtin frame.len <-> len", "len", to_int(pkt.first("geninfo", "len")[0]))
        epoch = pkt.first("frame", "frame.time_epoch")
        stamp = None
        if epoch is not None:
            sec, _, frac = epoch[0].partition(".")
            stamp = int(sec) * 10**9 + int((frac + "000000000")[:9])
        self.key(fr, "builtin frame.time_epoch <-> ts_ns", "ts_ns", stamp)

        eth = (pkt.layers("eth") or [{}])[0]
        vlan = (pkt.layers("vlan") or [None])[0]
        if "eth.src" in rec:
            self.key(fr, "builtin eth.src <-> eth.src", "eth.src", show(eth, "eth.src", ""))
            self.key(fr, "builtin eth.dst <-> eth.dst", "eth.dst", show(eth, "eth.dst", ""))
            if vlan is not None:
                self.key(fr, "builtin vlan.etype <-> eth.type", "eth.type",
                         show(vlan, "vlan.etype"))
            else:
                self.key(fr, "builtin eth.type <-> eth.type", "eth.type", show(eth, "eth.type"))
        if "vlan.id" in rec:
            self.key(fr, "builtin vlan.id <-> vlan.id", "vlan.id", show(vlan or {}, "vlan.id"))
        if "vlan.pcp" in rec:
            self.key(fr, "builtin vlan.priority <-> vlan.pcp", "vlan.pcp",
                     show(vlan or {}, "vlan.priority"))
            self.key(fr, "builtin vlan.dei <-> vlan.dei", "vlan.dei", show(vlan or {}, "vlan.dei"))

        # The outer IP header is the first IPv4/IPv6 layer; SRv6's inner one the second IPv6.
        ips = [(p, f) for p, f, _ in pkt.protos if p in ("ip", "ipv6")]
        if "l3" in rec or ips:
            got = {"ip": 4, "ipv6": 6}[ips[0][0]] if ips else None
            self.compare(fr, "builtin first IP layer <-> l3", rec.get("l3"), got, ("l3",))
        if rec.get("l3") == 4 and ips and ips[0][0] == "ip":
            f = ips[0][1]
            self.key(fr, "builtin ip.src <-> src", "src", show(f, "ip.src", ""))
            self.key(fr, "builtin ip.dst <-> dst", "dst", show(f, "ip.dst", ""))
            self.key(fr, "builtin ip.dsfield.dscp <-> dscp", "dscp", show(f, "ip.dsfield.dscp"))
            self.key(fr, "builtin ip.dsfield.ecn <-> ecn", "ecn", show(f, "ip.dsfield.ecn"))
            self.key(fr, "builtin ip.ttl <-> ttl", "ttl", show(f, "ip.ttl"))
            for key, name, scale in OUTER_IP4:
                if key in rec:
                    got = show(f, name)
                    self.key(fr, f"builtin {name} <-> {key}", key,
                             None if got is None else got // scale)
            if "ip4.flags" in rec:
                self.key(fr, "builtin ip.flags <-> ip4.flags", "ip4.flags", show(f, "ip.flags"))
            # The codec writes the header checksum (crosscheck.py's own cuts recompute it).
            self.compare(fr, "builtin ip.checksum.status = Good <-> IPv4 frame", 1,
                         show(f, "ip.checksum.status"), ())
            self.key(fr, "derived IPv4 has no flow label <-> flow_label = 0", "flow_label", 0)
        if rec.get("l3") == 6 and ips and ips[0][0] == "ipv6":
            f = ips[0][1]
            self.key(fr, "builtin ipv6.src <-> src", "src", show(f, "ipv6.src", ""))
            self.key(fr, "builtin ipv6.dst <-> dst", "dst", show(f, "ipv6.dst", ""))
            self.key(fr, "builtin ipv6.tclass.dscp <-> dscp", "dscp", show(f, "ipv6.tclass.dscp"))
            self.key(fr, "builtin ipv6.tclass.ecn <-> ecn", "ecn", show(f, "ipv6.tclass.ecn"))
            self.key(fr, "builtin ipv6.flow <-> flow_label", "flow_label", show(f, "ipv6.flow"))
            self.key(fr, "builtin ipv6.hlim <-> hop_limit", "hop_limit", show(f, "ipv6.hlim"))
            for key, name in OUTER_IP6:
                if key in rec:
                    self.key(fr, f"builtin {name} <-> {key}", key, show(f, name))
        if "srh.segments_left" in rec:
            f = (pkt.layers("ipv6.routing") or [{}])[0]
            self.key(fr, "builtin ipv6.routing.segleft <-> srh.segments_left", "srh.segments_left",
                     show(f, "ipv6.routing.segleft"))
            self.key(fr, "builtin ipv6.routing.srh.last_entry <-> srh.last_entry", "srh.last_entry",
                     show(f, "ipv6.routing.srh.last_entry"))
            self.key(fr, "builtin ipv6.routing.srh.addr[] <-> srh.segments", "srh.segments",
                     [norm(seg[0]) for seg in f.get("ipv6.routing.srh.addr", [])])
            for key, name in SRH_FIELDS:
                if key in rec:
                    self.key(fr, f"builtin {name} <-> {key}", key, show(f, name))
        if "inner.src" in rec:
            v6 = [f for p, f in ips if p == "ipv6"]
            f = v6[1] if len(v6) > 1 else {}
            self.key(fr, "builtin inner ipv6.src <-> inner.src", "inner.src",
                     show(f, "ipv6.src", ""))
            self.key(fr, "builtin inner ipv6.dst <-> inner.dst", "inner.dst",
                     show(f, "ipv6.dst", ""))
            self.key(fr, "builtin inner ipv6.flow <-> inner.flow_label", "inner.flow_label",
                     show(f, "ipv6.flow"))
            self.key(fr, "builtin inner ipv6.tclass.dscp <-> inner.dscp", "inner.dscp",
                     show(f, "ipv6.tclass.dscp"))
            self.key(fr, "builtin inner ipv6.tclass.ecn <-> inner.ecn", "inner.ecn",
                     show(f, "ipv6.tclass.ecn"))
            for key, name in INNER_IP6:
                if key in rec:
                    self.key(fr, f"builtin inner {name} <-> {key}", key, show(f, name))

        udp = self.udp(fr)
        if "sport" in rec:
            self.key(fr, "builtin udp.srcport <-> sport", "sport", show(udp, "udp.srcport"))
            self.key(fr, "builtin udp.dstport <-> dport", "dport", show(udp, "udp.dstport"))
            self.key(fr, "builtin udp.length <-> udp.length", "udp.length", show(udp, "udp.length"))
            self.key(fr, "builtin udp.checksum <-> udp.checksum", "udp.checksum",
                     show(udp, "udp.checksum"))
            if rec["udp.checksum"] != 0 and fr.crafted:
                # A non-zero checksum the codec computed (EncodeOptions::udp_checksum).
                self.compare(fr, "builtin udp.checksum.status = Good <-> udp.checksum != 0", 1,
                             show(udp, "udp.checksum.status"), ("udp.checksum",))
        # mrct calls a frame RoCE once it has read a whole BTH; the built-in dissector has read
        # one when it shows the PSN, the BTH's last field.
        if rec.get("dport") == ROCE_PORT or "roce" in rec:
            ib = (fr.pkt.layers("infiniband") or [{}])[0]
            self.compare(fr, "builtin infiniband.bth complete <-> roce", norm(rec.get("roce")),
                         int("infiniband.bth.psn" in ib), ("roce",))

    @staticmethod
    def udp(fr):
        return (fr.pkt.layers("udp") or [{}])[-1]

    def bth(self, fr):
        rec = fr.rec
        ib = (fr.pkt.layers("infiniband") or [{}])[0]
        for key, name in BUILTIN_BTH:
            self.key(fr, f"builtin {name} <-> {key}", key, show(ib, name))
        # IBTA's seven reserved bits of BTH byte 8 hold MRC's RTX (bit 5) and TS (bit 4).
        r7 = show(ib, "infiniband.bth.reserved7")
        # Bit 6 and bits 3..0 stay reserved (mrct prints them only when non-zero).
        self.compare(fr, "builtin infiniband.bth.reserved7 <-> reserved_b8_6<<6 | rtx<<5 | ts<<4 "
                     "| reserved_b8_lo",
                     rec.get("bth.reserved_b8_6", 0) << 6 | int(rec["rtx"]) << 5 |
                     int(rec["ts"]) << 4 | rec.get("bth.reserved_b8_lo", 0),
                     r7, ("rtx", "ts", "bth.reserved_b8_6", "bth.reserved_b8_lo"))

    def ibta(self, fr):
        """A RoCE frame with an IBTA opcode: the built-in dissector decodes all of it."""
        rec, pkt = fr.rec, fr.pkt
        ib = (pkt.layers("infiniband") or [{}])[0]
        for key, name in BUILTIN_IBTA:
            if key in rec:
                self.key(fr, f"builtin {name} <-> {key}", key, show(ib, name))
        op = ib.get("infiniband.bth.opcode")
        self.key(fr, "builtin infiniband.bth.opcode label <-> opcode_name", "opcode_name",
                 ibta_name(op[0][1]) if op else None)
        if "icrc" in rec:
            crc = show(ib, "infiniband.invariant.crc")
            # Wireshark shows the ICRC's four bytes as a big-endian number; the codec reads the
            # trailer little-endian, as RoCEv2 stores it.
            swapped = None if crc is None else int.from_bytes(crc.to_bytes(4, "big"), "little")
            self.key(fr, "builtin infiniband.invariant.crc (byte-swapped) <-> icrc", "icrc",
                     swapped)
        if "error" not in rec:
            # The built-in dissector hands payload and pad on to the data dissector.
            data = pkt.anywhere("data.len")
            self.compare(fr, "builtin data.len <-> payload_len + pad_bytes",
                         rec["payload_len"] + rec["pad_bytes"], to_int(data[0]) if data else 0,
                         ("payload_len", "pad_bytes"))
        self.key(fr, "derived non-MRC opcode <-> trimmed = false", "trimmed", 0)
        # The EV format and WEV, recomputed from tshark's IP and UDP headers.
        ips = [(p, f) for p, f, _ in pkt.protos if p in ("ip", "ipv6")]
        v6 = [f for p, f in ips if p == "ipv6"]
        sport = show(self.udp(fr), "udp.srcport")
        if len(v6) >= 2:
            fmt = "srv6"
        elif ips and ips[0][0] == "ipv6" and show(v6[0], "ipv6.flow") != 0:
            fmt = "stev"
        else:
            fmt = "udp"
        self.key(fr, "derived tshark ip/udp <-> ev_format", "ev_format", fmt)
        wev = sport
        if fmt != "udp" and sport is not None:
            wev = (show(v6[-1], "ipv6.flow") & 0xFFFF) << 16 | sport
        self.key(fr, "derived tshark udp.srcport, ipv6.flow <-> wev (LOW_IN_SPORT)", "wev", wev)

    def plugin(self, fr):
        """A RoCE frame with an MRC opcode: the plugin's mrc.* fields against mrct's keys."""
        rec, pkt = fr.rec, fr.pkt
        layers = pkt.layers("mrc")
        fields = layers[0] if layers else {}
        if not layers:
            self.compare(fr, "plugin MRC tree present", 1, 0, ())
        mapped = set()
        for key, value in rec.items():
            if key in FRAME_KEYS or (key in ("payload_len", "pad_bytes") and "error" in rec):
                continue
            if key in RESERVED_PLUGIN:
                continue  # below, present or not
            if key == "pad_bytes":
                # The plugin shows the pad as a byte string (absent when there is none).
                pad = fields.get("mrc.pad_bytes")
                got = len(pad[0][0].split(":")) if pad and pad[0][0] else 0
                self.compare(fr, "plugin mrc.pad_bytes length <-> pad_bytes", value, got, (key,))
                continue
            if key in PLUGIN_VALUE_NAME:
                name = PLUGIN_VALUE_NAME[key]
                got = value_label(fields[name][0][1]) if name in fields else None
                self.compare(fr, f"plugin {name} label <-> {key}", value, got, (key,))
                continue
            name = PLUGIN_NAME.get(key, "mrc." + key)
            mapped.add(name)
            self.key(fr, f"plugin {name} <-> {key}", key, show(fields, name, value))
        # Reserved fields: mrct prints them when non-zero; the plugin shows them whenever the
        # header is there. Either way the values agree (absent in mrct = 0).
        for key, name in RESERVED_PLUGIN.items():
            if key not in rec and (name not in fields or "error" in rec):
                continue  # no such header, or cut short where mrct printed nothing
            if key == "eeth.reserved12":
                theirs = fields[name][0][0].replace(":", "").lower() if name in fields else None
                ours = rec.get(key, "00" * 16)
            else:
                theirs = show(fields, name)
                ours = rec.get(key, 0)
            self.compare(fr, f"plugin {name} <-> {key} (0 when absent)", ours, theirs, (key,))
        # A plugin field standing for an mrct key this frame lacks is a disagreement too.
        for name in fields:
            if not name.startswith("mrc.") or name in mapped or name in PLUGIN_ONLY:
                continue
            key = PLUGIN_KEY.get(name, name[len("mrc."):])
            if key not in self.all_mrct_keys:
                self.unmapped_plugin[name] += 1
            elif not (key == "payload_len" and "error" in rec):
                self.compare(fr, f"plugin {name} <-> {key}", "absent", "present", (key,))
        if "seth.cack_psn" in rec and "seth.sack_offset" in rec:
            expect = (rec["seth.cack_psn"] + rec["seth.sack_offset"]) % (1 << 24)
            self.compare(fr, "derived mrc.seth.sack_base <-> seth.cack_psn + seth.sack_offset",
                         expect, show(fields, "mrc.seth.sack_base"),
                         ("seth.cack_psn", "seth.sack_offset"))
        ours = mrct_error(rec)
        theirs = plugin_error(pkt) if layers else None
        if ours is not None or theirs is not None:
            self.compare(fr, "error mrct error <-> plugin expert (kind, layer, offset, need, have)",
                         ours, theirs, ("error",))
        for kind, msg in pkt.experts("mrc"):
            if kind == "mrc.expert.internal":
                self.compare(fr, "plugin internal error", None, msg, ())

    def short_bth(self, fr):
        """A UDP payload too short for a BTH: mrct reports no opcode, so the first payload byte
        decides whether the plugin takes the packet. Returns that byte (None if no payload)."""
        rec, pkt = fr.rec, fr.pkt
        if rec.get("roce") or rec.get("dport") != ROCE_PORT:
            return None
        udp = self.udp(fr)
        payload = udp.get("udp.payload")
        first_byte = int(payload[0][0][:2], 16) if payload and payload[0][0] else None
        theirs = plugin_error(pkt) if pkt.layers("mrc") else None
        if first_byte is None:
            # Nothing to dispatch on: the plugin stays silent, and the codec must report a BTH
            # cut to the UDP payload tshark saw, right after the UDP header.
            if theirs is None and "udp.length" in udp and "udp.srcport" in udp:
                theirs = ("truncated", "BTH", udp["udp.srcport"][0][2] + 8, BTH_BYTES,
                          show(udp, "udp.length") - 8)
            self.compare(fr, "error mrct BTH error, empty payload <-> plugin silent, udp.length",
                         mrct_error(rec), theirs, ("error",))
        elif first_byte in MRC_OPCODES:
            self.compare(fr, "error mrct error <-> plugin expert (kind, layer, offset, need, have)",
                         mrct_error(rec), theirs, ("error",))
        return first_byte


def check_snapped(tshark, lua, capture, snap_kept, workdir):
    """Frames cut by a snap length: the plugin must build an MRC tree whenever a byte of UDP
    payload was captured, without a Lua error. Returns (frames with a tree, failures, Lua
    error lines)."""
    packets, lua_errors = tshark_decode(tshark, lua, capture, workdir)
    with_tree, failures = 0, []
    for number, kept in enumerate(snap_kept, 1):
        pkt = packets.get(number)
        has_tree = pkt is not None and bool(pkt.layers("mrc"))
        with_tree += has_tree
        internal = [m for k, m in (pkt.experts("mrc") if pkt else []) if k == "mrc.expert.internal"]
        if pkt is None or has_tree != (kept >= 1) or internal:
            failures.append(f"frame {number} ({kept} B of UDP payload captured): MRC tree "
                            f"{'present' if has_tree else 'absent'}"
                            + (f", plugin error {internal[0]!r}" if internal else ""))
    return with_tree, failures, lua_errors


def report(checker, out):
    labels = list(checker.stats)
    width = max([len(label) for label in labels] + [20])
    kinds = ("builtin", "plugin", "derived", "error")
    order = sorted(labels, key=lambda l: kinds.index(l.split(" ", 1)[0])
                   if l.split(" ", 1)[0] in kinds else len(kinds))
    out.write(f"\n{'comparison':<{width}}  {'compared':>8}  {'mismatch':>8}\n")
    out.write(f"{'-' * width}  {'-' * 8}  {'-' * 8}\n")
    by_kind = collections.Counter()
    for label in order:
        n, bad = checker.stats[label]
        by_kind[label.split(" ", 1)[0]] += n
        out.write(f"{label:<{width}}  {n:>8}  {bad:>8}\n")
    total = sum(n for n, _ in checker.stats.values())
    bad_total = sum(bad for _, bad in checker.stats.values())
    out.write(f"{'-' * width}  {'-' * 8}  {'-' * 8}\n")
    out.write(f"{'total':<{width}}  {total:>8}  {bad_total:>8}\n")
    out.write("by kind: " + ", ".join(f"{k} {n}" for k, n in by_kind.items()) + "\n")
    out.write(f"frames: {checker.frames}, every field compared: {checker.frames_compared}, "
              f"field comparisons: {total}, mismatches: {len(checker.mismatches)}, "
              f"uncovered mrct keys: {len(checker.uncovered)}\n")
    if checker.unmapped_plugin:
        out.write("plugin fields with no mrct counterpart (not compared): "
                  + ", ".join(sorted(checker.unmapped_plugin)) + "\n")
    out.write("not compared, by design:\n")
    for (key, klass), why in NOT_COMPARED.items():
        out.write(f"  {key} ({klass} frames): {why}\n")
    for capture, frame, name, label, _, ours, theirs in checker.mismatches:
        out.write(f"MISMATCH {capture} frame {frame} [{name}] {label}: "
                  f"mrct={ours!r} wireshark={theirs!r}\n")
    for capture, frame, name, key in checker.uncovered:
        out.write(f"UNCOVERED {capture} frame {frame} [{name}] mrct key {key!r}: no comparison\n")


def mutate(records, key):
    """Changes the first value of `key` in frame order; returns the frame number or None."""
    for number in sorted(records):
        rec = records[number]
        value = rec.get(key)
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


def crosscheck(args, tshark, workdir):
    captures = []  # (path, frame names or None to use the pcapng comments)
    snapped, snap_kept = None, []
    if args.capture:
        captures.append((args.capture, None))
    else:
        samples_ng = os.path.join(workdir, "samples.pcapng")
        samples = os.path.join(workdir, "samples.pcap")
        run([args.mrct, "craft", "--format", "pcapng", "-o", samples_ng], "mrct craft")
        run([args.mrct, "craft", "-o", samples], "mrct craft")
        captures.append((samples_ng, None))
        if not args.no_variants:
            variants = os.path.join(workdir, "variants.pcap")
            snapped = os.path.join(workdir, "snapped.pcap")
            names, snap_kept = derive_variants(samples, variants, snapped,
                                               mrct_decode(args.mrct, samples))
            captures.append((variants, names))

    decoded, all_keys, lua_errors = [], set(), []
    for capture, names in captures:
        records = mrct_decode(args.mrct, capture)
        packets, errors = tshark_decode(tshark, args.lua, capture, workdir)
        lua_errors += [f"{os.path.basename(capture)}: {line}" for line in errors]
        decoded.append((os.path.basename(capture), names, records, packets))
        for rec in records.values():
            all_keys.update(rec)

    mutated = None
    if args.selftest_mutate:
        for base, _, records, _ in decoded:
            frame = mutate(records, args.selftest_mutate)
            if frame is not None:
                mutated = (base, frame, args.selftest_mutate)
                break
        if mutated is None:
            raise ToolError(f"no frame has mrct key {args.selftest_mutate!r} to mutate")

    checker = Checker(all_keys)
    for base, names, records, packets in decoded:
        if len(packets) != len(records):
            checker.mismatches.append((base, 0, "", "frame count", (), len(records), len(packets)))
        for number in sorted(records):
            pkt = packets.get(number)
            if names is not None:
                name = names[number - 1] if number <= len(names) else ""
            else:
                name = pkt.comment() if pkt else ""
            checker.frame(base, number, name, records[number], pkt,
                          crafted=names is None and not args.capture)
    report(checker, sys.stdout)

    robust_failures = []
    if snapped:
        with_tree, robust_failures, errors = check_snapped(tshark, args.lua, snapped, snap_kept,
                                                           workdir)
        lua_errors += [f"snapped.pcap: {line}" for line in errors]
        print(f"snap-length robustness: {len(snap_kept)} frames cut by the capture, {with_tree} "
              f"with an MRC tree, {len(robust_failures)} failures")
        for line in robust_failures:
            print(f"ROBUSTNESS snapped.pcap {line}")
    for line in lua_errors:
        print(f"LUA ERROR {line}")

    if mutated:
        base, frame, key = mutated
        hits = [m for m in checker.mismatches if m[0] == base and m[1] == frame and key in m[4]]
        others = len(checker.mismatches) - len(hits)
        print(f"\nselftest: mutated {key!r} of {base} frame {frame}: {len(hits)} mismatch(es) "
              f"report it, {others} other mismatch(es)")
        ok = bool(hits) and not others and not lua_errors and not robust_failures
        print("selftest: " + ("PASS (a perturbed codec value is detected)" if ok else "FAIL"))
        return 0 if ok else 1

    ok = (not checker.mismatches and not checker.uncovered and not lua_errors
          and not robust_failures and checker.frames_compared == checker.frames)
    print("\ncrosscheck: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv):
    parser = argparse.ArgumentParser(
        description="Compare `mrct decode --json` with tshark + the MRC Lua plugin.")
    parser.add_argument("--mrct", required=True, help="the mrct binary")
    parser.add_argument("--tshark", help="tshark to use (default: from PATH)")
    parser.add_argument("--lua", default=os.path.join(HERE, "mrp0.lua"), help="the Lua plugin")
    parser.add_argument("--capture", help="compare this capture instead of the crafted samples")
    parser.add_argument("--no-variants", action="store_true",
                        help="only the samples: no truncated, scrambled or snap-cut copies")
    parser.add_argument("--selftest-mutate", nargs="?", const="neth.nack_psn", metavar="KEY",
                        help="change the first mrct value of KEY (default neth.nack_psn) and "
                             "pass only if exactly that change is reported")
    parser.add_argument("--keep", metavar="DIR", help="keep captures and PDML in DIR")
    args = parser.parse_args(argv)

    tshark = args.tshark or shutil.which("tshark")
    if not tshark or not os.path.exists(tshark):
        print("crosscheck: tshark not found (Debian package tshark); skipping", file=sys.stderr)
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
        return crosscheck(args, tshark, workdir)
    except ToolError as e:
        print(f"crosscheck: {e}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

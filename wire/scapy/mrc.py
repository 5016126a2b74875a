"""Scapy layers for MRC (Multipath Reliable Connection) under a wire profile.

Written from docs/wire-format.md (MRP0 and the open choices of section 19), independently of the
C++ codec: the tests (mrc_scapy_test.py) cross-check the two in both directions.

    from mrc import *                     # wire/scapy on sys.path
    bind(load_profile("scenarios/profiles/wire-4971-high.toml"))   # or bind() for MRP0
    p = (Ether() / IPv6(src=..., dst=..., fl=0x0003) / UDP(sport=0xa5c1, dport=4791) /
         MRC_BTH(opcode=0xCA, dest_qp=0x22, psn=7, ts=1) / MRC_METH(msn=1) /
         MRC_TSETH(ts16=0x1234) / MRC_RETH(va=0x1000, rkey=1, dma_len=5) /
         MRC_Payload(data=b"hello"))
    wrpcap("x.pcap", p)                   # the ICRC is computed when built

Every header is its own layer; the BTH opcode (and TS bit) decide which follow, as in the
profile's opcode table. The last layer, MRC_Payload, holds the payload, the pad bytes and the
ICRC (absent on trimmed packets: outer DSCP TRIMMED or TRIMMED_LASTHOP).
"""
import struct
import tomllib
import zlib

from scapy.fields import (BitField, ByteField, IntField, LongField, ShortField, SignedShortField,
                          StrFixedLenField, StrField, ThreeBytesField, XByteField, XIntField,
                          XLongField, XShortField)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, bind_layers, split_layers

__all__ = [
    "MRP0", "load_profile", "parse_profile", "bind", "profile", "MRC_BTH", "MRC_METH",
    "MRC_TSETH", "MRC_RETH", "MRC_ImmDt", "MRC_AETH", "MRC_SETH", "MRC_CCState", "MRC_NETH",
    "MRC_PETH", "MRC_ERTH", "MRC_EETH", "MRC_AtomicETH", "MRC_AtomicAckETH", "MRC_IETH",
    "MRC_Payload", "carry_wev", "wev_from_carriage", "OPCODES",
]

# ---------------------------------------------------------------------------------------------
# Wire profile (docs/wire-format.md section 19): the same TOML files the C++ tools read.
# ---------------------------------------------------------------------------------------------
MRP0 = {
    "name": "MRP0",
    "udp": {"ports": [4791]},
    "ev": {"stripe": "low_in_sport", "ecmp_flow_label": "zero"},
    "headers": {"eeth_op_bits": "5..4", "eeth_sva_bit": 3, "sva": True, "cc_type": 0},
    "trim": {"bytes": 20},
    "srv6": {"outer_traffic_class": "copy", "wev_carriage": "sport_and_flow_label"},
    "dscp": {"no_trim": 0, "trimmable": 4, "trimmable_retx": 8, "trimmed": 12,
             "trimmed_lasthop": 16, "control": 46},
}

_CHOICES = {
    ("ev", "stripe"): ("low_in_sport", "high_in_sport"),
    ("ev", "ecmp_flow_label"): ("zero", "ev"),
    ("headers", "eeth_op_bits"): ("5..4", "3..2"),
    ("srv6", "outer_traffic_class"): ("copy", "zero"),
    ("srv6", "wev_carriage"): ("sport_and_flow_label", "none"),
}


def parse_profile(text, origin="<profile>"):
    """A profile dict: MRP0 with the file's keys applied. ValueError names origin and key."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{origin}: not TOML: {e}") from None
    prof = {k: (dict(v) if isinstance(v, dict) else v) for k, v in MRP0.items()}
    for key, val in doc.items():
        if key not in MRP0:
            raise ValueError(f"{origin}: {key}: unknown key")
        if key == "name":
            if not isinstance(val, str) or not val:
                raise ValueError(f"{origin}: name: expected a non-empty string")
            prof["name"] = val
            continue
        if not isinstance(val, dict):
            raise ValueError(f"{origin}: {key}: expected a table")
        for k, v in val.items():
            if k not in MRP0[key]:
                raise ValueError(f"{origin}: {key}.{k}: unknown key")
            if (key, k) in _CHOICES and v not in _CHOICES[(key, k)]:
                raise ValueError(f"{origin}: {key}.{k}: expected one of {_CHOICES[(key, k)]}")
            prof[key][k] = v
    ports = prof["udp"]["ports"]
    if not ports or any(not isinstance(p, int) or not 0 < p < 65536 for p in ports):
        raise ValueError(f"{origin}: udp.ports: expected a non-empty array of ports 1..65535")
    op_shift = 4 if prof["headers"]["eeth_op_bits"] == "5..4" else 2
    if prof["headers"]["eeth_sva_bit"] in (op_shift, op_shift + 1):
        raise ValueError(f"{origin}: headers.eeth_sva_bit overlaps the EETH op bits")
    return prof


def load_profile(path):
    with open(path, "rb") as f:
        return parse_profile(f.read().decode(), path)


_profile = MRP0
_bound_ports = []


def profile():
    """The profile the layers use now (bind() sets it)."""
    return _profile


def bind(prof=None):
    """Binds MRC_BTH to the profile's UDP destination ports (MRP0 when None)."""
    global _profile, _bound_ports
    prof = prof or MRP0
    for port in _bound_ports:
        split_layers(UDP, MRC_BTH, dport=port)
    _bound_ports = list(prof["udp"]["ports"])
    for port in _bound_ports:
        bind_layers(UDP, MRC_BTH, dport=port)
    _profile = prof
    return prof


# ---------------------------------------------------------------------------------------------
# EV carriage (section 10 and 19)
# ---------------------------------------------------------------------------------------------
def carry_wev(fmt, wev, prof=None):
    """(UDP source port, flow label) carrying `wev` in format udp, stev or srv6."""
    prof = prof or _profile
    if fmt == "srv6" and prof["srv6"]["wev_carriage"] == "none":
        return 0, 0
    lo, hi = wev & 0xFFFF, (wev >> 16) & 0xFFFF
    if fmt == "udp":
        return lo, (lo if prof["ev"]["ecmp_flow_label"] == "ev" else 0)
    if prof["ev"]["stripe"] == "low_in_sport":
        return lo, hi
    return hi, lo


def wev_from_carriage(fmt, sport, flow_label, prof=None):
    prof = prof or _profile
    if fmt == "srv6" and prof["srv6"]["wev_carriage"] == "none":
        return 0
    if fmt == "udp":
        return sport
    fl = flow_label & 0xFFFF
    return (fl << 16 | sport) if prof["ev"]["stripe"] == "low_in_sport" else (sport << 16 | fl)


# ---------------------------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------------------------
class _MrcHeader(Packet):
    """A header after the BTH: the next one is decided by the BTH's opcode."""

    def guess_payload_class(self, payload):
        return _next_after(self)


class MRC_BTH(Packet):
    name = "MRC BTH"
    fields_desc = [
        XByteField("opcode", 0xCA),
        BitField("se", 0, 1), BitField("mig_req", 0, 1), BitField("pad_count", None, 2),
        BitField("tver", 0, 4),
        XShortField("pkey", 0xFFFF),
        XByteField("variant", 0),  # reserved, masked in the ICRC
        ThreeBytesField("dest_qp", 0),
        BitField("ack_req", 0, 1), BitField("rsvd_b8_6", 0, 1), BitField("rtx", 0, 1),
        BitField("ts", 0, 1), BitField("rsvd_b8_lo", 0, 4),
        ThreeBytesField("psn", 0),
    ]

    def guess_payload_class(self, payload):
        return _next_after(self)

    def post_build(self, p, pay):
        # Pad count from the payload layer (data padded to 4 bytes), then the ICRC.
        pl = self.getlayer(MRC_Payload)
        if self.pad_count is None:
            pad = len(pl.pad) if pl is not None and pl.pad is not None else (
                (-len(pl.data)) % 4 if pl is not None else 0)
            p = p[:1] + bytes([(p[1] & 0xCF) | (pad << 4)]) + p[2:]
        if pl is not None and pl.icrc is None and not _trimmed(self):
            pay = pay[:-4] + struct.pack("<I", _icrc(self, p, pay[:-4]))
        return p + pay


class MRC_METH(_MrcHeader):
    name = "MRC METH"
    fields_desc = [ShortField("rqmsn", 0), ShortField("msn", 0)]


def _tsr_fields(ts_name):
    return [ShortField(ts_name, 0), BitField("tsr", 0, 1), BitField("reserved_tsr", 0, 11),
            BitField("ftype", 1, 4)]


class MRC_TSETH(_MrcHeader):
    name = "MRC TSETH"
    fields_desc = _tsr_fields("ts16")


class MRC_RETH(_MrcHeader):
    name = "MRC RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dma_len", 0)]


class MRC_ImmDt(_MrcHeader):
    name = "MRC ImmDt"
    fields_desc = [XIntField("imm", 0)]


class MRC_AETH(_MrcHeader):
    name = "MRC AETH"
    fields_desc = [XByteField("syndrome", 0x1F), ThreeBytesField("msn", 0)]


def _profile_cc_type_at_byte_16(self, p, pay):
    """post_build of SETH and NETH: cc_type (high nibble of byte 16) left unset takes the
    profile's NSCC cc_type."""
    if self.cc_type is None:
        p = p[:16] + bytes([(_profile["headers"]["cc_type"] << 4) | (p[16] & 0x0F)]) + p[17:]
    return p + pay


class MRC_SETH(_MrcHeader):
    name = "MRC SETH"
    fields_desc = [
        XByteField("byte0", 0),
        BitField("rsvd_b1_7", 0, 1), BitField("m", 0, 2), BitField("rsvd_b1_4_2", 0, 3),
        BitField("pr", 0, 1), BitField("rsvd_b1_0", 0, 1),
        SignedShortField("ack_psn_offset", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0), ShortField("dpdcid", 0),
        XByteField("port_status", 0),
        ThreeBytesField("cack_psn", 0),
        BitField("cc_type", None, 4), BitField("cc_flags_rsvd", 0, 2), BitField("psv", 0, 1),
        BitField("sva", 0, 1),
        ByteField("mpr", 0),
        SignedShortField("sack_offset", 1),
        XLongField("sack_bitmap", 0),
    ]

    post_build = _profile_cc_type_at_byte_16


class MRC_CCState(_MrcHeader):
    name = "MRC CC_STATE"
    fields_desc = [
        ShortField("ts_echo", 0),
        BitField("rsvd_bit", 0, 1), BitField("ooo_count", 0, 15),
        BitField("rc", 0, 1), BitField("rcv_cwnd_pen", 0, 7),
        ThreeBytesField("rcvd_bytes", 0),
    ]


class MRC_NETH(_MrcHeader):
    name = "MRC NETH"
    fields_desc = [
        XShortField("reserved0", 0),
        XByteField("nack_code", 0x01), XByteField("vendor_code", 0),
        XIntField("entropy", 0),
        ShortField("spdcid", 0), ShortField("dpdcid", 0),
        XByteField("reserved12", 0),
        ThreeBytesField("nack_psn", 0),
        BitField("cc_type", None, 4), BitField("cc_flags_rsvd", 0, 2), BitField("psv", 0, 1),
        BitField("sva", 0, 1),
        BitField("m", 0, 2), BitField("reserved17", 0, 6),
        ShortField("ts_echo", 0),
    ]

    post_build = _profile_cc_type_at_byte_16


class MRC_PETH(_MrcHeader):
    name = "MRC PETH"
    fields_desc = [
        StrFixedLenField("reserved0", b"\0\0\0", 3), XByteField("vendor", 0),
        ShortField("probe_id", 0), XShortField("reserved6", 0),
        ShortField("spdcid", 0), ShortField("dpdcid", 0),
    ] + _tsr_fields("ts16")


class MRC_ERTH(_MrcHeader):
    name = "MRC ERTH"
    fields_desc = [
        XByteField("reserved0", 0),
        BitField("rsvd_b1", 0, 6), BitField("op", 0, 2),
        XByteField("reserved2", 0), XByteField("vendor", 0),
        XIntField("port_status_mask", 0), XIntField("reserved8", 0),
    ] + _tsr_fields("ts16")


class MRC_EETH(_MrcHeader):
    """Byte 1 depends on the profile (op at bits 5..4 or 3..2, SVA bit): it is kept as a byte
    and read/written through the op and sva properties."""
    name = "MRC EETH"
    fields_desc = [
        XByteField("reserved0", 0),
        XByteField("b1", None),
        XByteField("status", 0), XByteField("vendor", 0),
        XIntField("entropy", 0), XIntField("port_status_mask", 0),
        StrFixedLenField("reserved12", b"\0" * 16, 16),
        ShortField("ts_echo", 0), ShortField("svc_time", 0),
        XIntField("reserved32", 0),
    ]

    def __init__(self, *args, op=None, sva=None, **kw):
        super().__init__(*args, **kw)
        if op is not None or sva is not None:
            self.b1 = _eeth_b1(op or 0, bool(sva))

    @property
    def op(self):
        return ((self.b1 or 0) >> _eeth_shift()) & 3

    @property
    def sva(self):
        return bool(((self.b1 or 0) >> _profile["headers"]["eeth_sva_bit"]) & 1)

    @property
    def rsvd_b1(self):
        return (self.b1 or 0) & ~((3 << _eeth_shift()) | (1 << _profile["headers"]["eeth_sva_bit"])) & 0xFF


def _eeth_shift():
    return 4 if _profile["headers"]["eeth_op_bits"] == "5..4" else 2


def _eeth_b1(op, sva):
    return (op & 3) << _eeth_shift() | (int(sva) << _profile["headers"]["eeth_sva_bit"])


class MRC_AtomicETH(_MrcHeader):
    name = "IBTA AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), LongField("swap_add", 0),
                   LongField("compare", 0)]


class MRC_AtomicAckETH(_MrcHeader):
    name = "IBTA AtomicAckETH"
    fields_desc = [LongField("orig", 0)]


class MRC_IETH(_MrcHeader):
    name = "IBTA IETH"
    fields_desc = [XIntField("rkey", 0)]


class MRC_Payload(Packet):
    """Payload, pad bytes and ICRC (little-endian, as RoCEv2 carries it); no ICRC when trimmed."""
    name = "MRC payload"
    fields_desc = [StrField("data", b""), StrField("pad", None), XIntField("icrc", None)]

    def do_dissect(self, s):
        bth = self.getlayer(MRC_BTH) or _find_under(self, MRC_BTH)
        if bth is not None and _trimmed(bth):
            self.data, self.pad, self.icrc = s, b"", None
            self.raw_packet_cache = None
            return b""
        body, icrc = (s[:-4], s[-4:]) if len(s) >= 4 else (s, b"")
        pad = bth.pad_count if bth is not None else 0
        self.data, self.pad = body[:len(body) - pad], body[len(body) - pad:]
        self.icrc = struct.unpack("<I", icrc)[0] if len(icrc) == 4 else None
        return b""

    def self_build(self):
        pad = self.pad if self.pad is not None else b"\0" * ((-len(self.data)) % 4)
        bth = _find_under(self, MRC_BTH)
        if bth is not None and _trimmed(bth):
            return bytes(self.data)
        icrc = struct.pack("<I", self.icrc) if self.icrc is not None else b"\0\0\0\0"
        return bytes(self.data) + bytes(pad) + icrc


# ---------------------------------------------------------------------------------------------
# Opcode table: the extension headers that follow the BTH (section 6).
# ---------------------------------------------------------------------------------------------
_DATA = (MRC_METH, "TSETH?", MRC_RETH)
OPCODES = {
    0xC6: ("WRITE_FIRST", _DATA), 0xC7: ("WRITE_MIDDLE", _DATA), 0xC8: ("WRITE_LAST", _DATA),
    0xC9: ("WRITE_LAST_IMM", _DATA + (MRC_ImmDt,)), 0xCA: ("WRITE_ONLY", _DATA),
    0xCB: ("WRITE_ONLY_IMM", _DATA + (MRC_ImmDt,)),
    0xD1: ("TRANSPORT_ACK", (MRC_AETH,)), 0xD8: ("ENDPOINT_REQUEST", (MRC_ERTH,)),
    0xD9: ("ENDPOINT_RESPONSE", (MRC_EETH,)), 0xDC: ("SACK", (MRC_SETH, MRC_CCState)),
    0xDD: ("NACK", (MRC_NETH,)), 0xDE: ("RELIABILITY_PROBE", (MRC_PETH,)),
    # IBTA RC, so that plain RoCEv2 decodes too.
    0x00: ("RC_SEND_FIRST", ()), 0x01: ("RC_SEND_MIDDLE", ()), 0x02: ("RC_SEND_LAST", ()),
    0x03: ("RC_SEND_LAST_IMM", (MRC_ImmDt,)), 0x04: ("RC_SEND_ONLY", ()),
    0x05: ("RC_SEND_ONLY_IMM", (MRC_ImmDt,)), 0x06: ("RC_WRITE_FIRST", (MRC_RETH,)),
    0x07: ("RC_WRITE_MIDDLE", ()), 0x08: ("RC_WRITE_LAST", ()),
    0x09: ("RC_WRITE_LAST_IMM", (MRC_ImmDt,)), 0x0A: ("RC_WRITE_ONLY", (MRC_RETH,)),
    0x0B: ("RC_WRITE_ONLY_IMM", (MRC_RETH, MRC_ImmDt)), 0x0C: ("RC_READ_REQUEST", (MRC_RETH,)),
    0x0D: ("RC_READ_RESPONSE_FIRST", (MRC_AETH,)), 0x0E: ("RC_READ_RESPONSE_MIDDLE", ()),
    0x0F: ("RC_READ_RESPONSE_LAST", (MRC_AETH,)), 0x10: ("RC_READ_RESPONSE_ONLY", (MRC_AETH,)),
    0x11: ("RC_ACKNOWLEDGE", (MRC_AETH,)),
    0x12: ("RC_ATOMIC_ACKNOWLEDGE", (MRC_AETH, MRC_AtomicAckETH)),
    0x13: ("RC_CMP_SWAP", (MRC_AtomicETH,)), 0x14: ("RC_FETCH_ADD", (MRC_AtomicETH,)),
    0x16: ("RC_SEND_LAST_INV", (MRC_IETH,)), 0x17: ("RC_SEND_ONLY_INV", (MRC_IETH,)),
    0x81: ("CNP", ()),
}


def _find_under(pkt, cls):
    p = pkt.underlayer
    while p is not None:
        if isinstance(p, cls):
            return p
        p = p.underlayer
    return None


def _stack(bth):
    entry = OPCODES.get(bth.opcode)
    if entry is None:
        return None
    out = []
    for h in entry[1]:
        if h == "TSETH?":
            if bth.ts:
                out.append(MRC_TSETH)
        else:
            out.append(h)
    return out


def _next_after(layer):
    bth = layer if isinstance(layer, MRC_BTH) else _find_under(layer, MRC_BTH)
    stack = _stack(bth) if bth is not None else None
    if stack is None:
        return MRC_Payload
    if isinstance(layer, MRC_BTH):
        i = 0
    else:
        i = stack.index(type(layer)) + 1 if type(layer) in stack else len(stack)
    if i < len(stack):
        # A trimmed packet ends where the switch cut it: no further header that does not fit.
        return stack[i]
    return MRC_Payload


def _ip_layers(bth):
    """(RoCE IP header, outer IP header) under the BTH."""
    ips = []
    p = bth.underlayer
    while p is not None:
        if isinstance(p, (IP, IPv6)):
            ips.append(p)
        p = p.underlayer
    if not ips:
        return None, None
    return ips[0], ips[-1]


def _trimmed(bth):
    """Trimmed data packet: outer DSCP is the profile's TRIMMED or TRIMMED_LASTHOP."""
    entry = OPCODES.get(bth.opcode)
    if entry is None or bth.opcode < 0xC6 or bth.opcode > 0xCB:
        return False
    _, outer = _ip_layers(bth)
    if outer is None:
        return False
    tos = outer.tos if isinstance(outer, IP) else outer.tc
    d = _profile["dscp"]
    return (tos >> 2) in (d["trimmed"], d["trimmed_lasthop"])


def _icrc(bth, bth_bytes, rest):
    """RoCEv2 ICRC over the RoCE IP header (inner in SRv6), UDP, BTH and what follows, with the
    variant fields set to ones (section 11.1)."""
    ip, _ = _ip_layers(bth)
    udp = bth.underlayer
    udp_len = 8 + len(bth_bytes) + len(rest) + 4
    if isinstance(ip, IPv6):
        hdr = bytearray(40)
        hdr[0] = 0x6F
        hdr[1:4] = b"\xff\xff\xff"
        hdr[4:6] = struct.pack("!H", udp_len)
        hdr[6] = 17
        hdr[7] = 0xFF
        hdr[8:24] = _addr6(ip.src)
        hdr[24:40] = _addr6(ip.dst)
    else:
        ihl = ip.ihl or 5
        opts = bytes(ip.options) if ip.options else b""
        hdr = bytearray(20)
        hdr[0] = 0x40 | ihl
        hdr[1] = 0xFF
        hdr[2:4] = struct.pack("!H", ihl * 4 + udp_len)
        hdr[4:6] = struct.pack("!H", ip.id if ip.id is not None else 1)
        hdr[6:8] = struct.pack("!H", (int(ip.flags) << 13) | (ip.frag or 0))
        hdr[8] = 0xFF
        hdr[9] = 17
        hdr[10:12] = b"\xff\xff"
        hdr[12:16] = bytes(int(x) for x in ip.src.split("."))
        hdr[16:20] = bytes(int(x) for x in ip.dst.split("."))
        hdr += opts
    u = struct.pack("!HHH", udp.sport, udp.dport, udp_len) + b"\xff\xff"
    b = bytearray(bth_bytes)
    b[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(hdr) + u + bytes(b) + bytes(rest)) & 0xFFFFFFFF


def _addr6(a):
    import socket
    return socket.inet_pton(socket.AF_INET6, a)


bind(MRP0)

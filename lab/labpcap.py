"""Minimal pcap reader and RoCEv2 header parser for the lab's analysis (stdlib only).

This is not the project's codec (that is mrct decode): it only pulls the BTH/RETH/AETH fields the
RC timing analysis needs, and it is a third, independent reading of the same bytes for the
interop check. Malformed input raises PcapError naming the file and offset.
"""
import struct

ROCE_PORT = 4791
LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276

# IBTA RC opcodes (transport 000).
OP_NAMES = {
    0x00: "RC_SEND_FIRST", 0x01: "RC_SEND_MIDDLE", 0x02: "RC_SEND_LAST",
    0x03: "RC_SEND_LAST_WITH_IMMEDIATE", 0x04: "RC_SEND_ONLY", 0x05: "RC_SEND_ONLY_WITH_IMMEDIATE",
    0x06: "RC_RDMA_WRITE_FIRST", 0x07: "RC_RDMA_WRITE_MIDDLE", 0x08: "RC_RDMA_WRITE_LAST",
    0x09: "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0A: "RC_RDMA_WRITE_ONLY",
    0x0B: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0C: "RC_RDMA_READ_REQUEST",
    0x0D: "RC_RDMA_READ_RESPONSE_FIRST", 0x0E: "RC_RDMA_READ_RESPONSE_MIDDLE",
    0x0F: "RC_RDMA_READ_RESPONSE_LAST", 0x10: "RC_RDMA_READ_RESPONSE_ONLY",
    0x11: "RC_ACKNOWLEDGE", 0x12: "RC_ATOMIC_ACKNOWLEDGE",
}
FIRST_OPS = {0x00, 0x06}
LAST_OPS = {0x02, 0x03, 0x08, 0x09}
ONLY_OPS = {0x04, 0x05, 0x0A, 0x0B}
REQUEST_DATA_OPS = set(range(0x00, 0x0C))
READ_REQUEST = 0x0C
READ_RESPONSE_OPS = {0x0D, 0x0E, 0x0F, 0x10}
READ_RESPONSE_END = {0x0F, 0x10}
ACK = 0x11
RETH_OPS = {0x06, 0x0A, 0x0B, 0x0C}
AETH_OPS = {0x0D, 0x0F, 0x10, 0x11, 0x12}


class PcapError(Exception):
    pass


def read_pcap(path):
    """Yields (ts_ns, linktype, frame bytes) for every record of a classic pcap file."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 24:
        raise PcapError(f"{path}: offset 0: file too short for a pcap header ({len(data)} bytes)")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise PcapError(f"{path}: offset 0: not a classic pcap file (magic {magic.hex()})")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise PcapError(f"{path}: offset {off}: truncated record header")
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + incl > len(data):
            raise PcapError(f"{path}: offset {off}: record of {incl} bytes runs past the end")
        ts = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        yield ts, linktype, data[off:off + incl]
        off += incl


def _l3_offset(frame, linktype):
    """(ethertype, offset of the L3 header) or (None, None)."""
    if linktype == LINKTYPE_ETHERNET:
        if len(frame) < 14:
            return None, None
        et = struct.unpack("!H", frame[12:14])[0]
        off = 14
        while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
            et = struct.unpack("!H", frame[off + 2:off + 4])[0]
            off += 4
        return et, off
    if linktype == LINKTYPE_LINUX_SLL and len(frame) >= 16:
        return struct.unpack("!H", frame[14:16])[0], 16
    if linktype == LINKTYPE_LINUX_SLL2 and len(frame) >= 20:
        return struct.unpack("!H", frame[0:2])[0], 20
    return None, None


def parse_roce(frame, linktype=LINKTYPE_ETHERNET):
    """The RoCEv2 fields of one frame as a dict, or None when it is not UDP/4791 RoCEv2."""
    et, off = _l3_offset(frame, linktype)
    if et == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 0x0F) * 4
        if frame[off + 9] != 17:
            return None
        src = ".".join(str(b) for b in frame[off + 12:off + 16])
        dst = ".".join(str(b) for b in frame[off + 16:off + 20])
        l4 = off + ihl
        family = 4
    elif et == 0x86DD and len(frame) >= off + 40:
        if frame[off + 6] != 17:
            return None  # extension headers are not used by rxe
        src = frame[off + 8:off + 24].hex()
        dst = frame[off + 24:off + 40].hex()
        l4 = off + 40
        family = 6
    else:
        return None
    if len(frame) < l4 + 8 + 12:
        return None
    sport, dport, ulen = struct.unpack("!HHH", frame[l4:l4 + 6])
    if dport != ROCE_PORT:
        return None
    b = l4 + 8
    opcode = frame[b]
    pkt = {
        "family": family, "src": src, "dst": dst, "sport": sport,
        "opcode": opcode, "destqp": int.from_bytes(frame[b + 5:b + 8], "big"),
        "ackreq": bool(frame[b + 8] & 0x80), "psn": int.from_bytes(frame[b + 9:b + 12], "big"),
        "frame_len": len(frame), "udp_len": ulen, "bth_offset": b,
    }
    h = b + 12
    if opcode in RETH_OPS and len(frame) >= h + 16:
        pkt["reth_va"], pkt["reth_rkey"], pkt["reth_len"] = struct.unpack("!QII", frame[h:h + 16])
        h += 16
    if opcode in AETH_OPS and len(frame) >= h + 4:
        pkt["aeth_syndrome"] = frame[h]
        pkt["aeth_msn"] = int.from_bytes(frame[h + 1:h + 4], "big")
        h += 4
    # payload = everything between the headers and the 4-byte ICRC
    pkt["payload_len"] = max(0, l4 + ulen - 4 - h)
    return pkt


def roce_packets(path):
    """[(ts_ns, parsed dict)] for the RoCEv2 frames of a capture."""
    out = []
    for ts, lt, frame in read_pcap(path):
        p = parse_roce(frame, lt)
        if p is not None:
            out.append((ts, p))
    return out

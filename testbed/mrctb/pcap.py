"""Minimal pcap reader and IPv6 / IPv6-in-IPv6 / SRH / UDP field decoder (struct only).

Good enough for the testbed's own checks (which uSID DA was seen where, hop limits, ports); the
project's real decoder is `mrct decode`.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
ETH_IPV6 = 0x86DD
ETH_VLAN = (0x8100, 0x88A8)
NH_HOPOPT, NH_ROUTING, NH_FRAGMENT, NH_DSTOPTS = 0, 43, 44, 60
NH_IPV6, NH_UDP = 41, 17


class PcapError(ValueError):
    pass


@dataclasses.dataclass
class Record:
    index: int  # 0-based frame number
    ts_ns: int
    data: bytes
    orig_len: int


@dataclasses.dataclass
class Ip6:
    src: str
    dst: str
    hop_limit: int
    flow_label: int
    traffic_class: int
    next_header: int  # after extension headers
    srh_segments: list[str] | None = None
    segments_left: int | None = None


@dataclasses.dataclass
class Packet:
    index: int
    ts_ns: int
    outer: Ip6 | None = None
    inner: Ip6 | None = None  # IPv6-in-IPv6 (SRv6 encapsulation)
    sport: int | None = None
    dport: int | None = None
    payload: bytes = b""
    icmp6_type: int | None = None


def read_pcap(path: str) -> tuple[int, list[Record]]:
    """(link type, records). Accepts micro- and nanosecond pcap in either byte order."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise PcapError(f"{path}: {len(data)} bytes, shorter than a pcap file header (24)")
    for endian in ("<", ">"):
        magic = struct.unpack(endian + "I", data[:4])[0]
        if magic in (MAGIC_US, MAGIC_NS):
            break
    else:
        raise PcapError(f"{path}: bad magic {data[:4].hex()} at byte 0 (not a pcap file)")
    scale = 1 if magic == MAGIC_NS else 1000
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    records = []
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise PcapError(f"{path}: truncated record header at byte {off}")
        sec, frac, incl, orig = struct.unpack(endian + "IIII", data[off:off + 16])
        if off + 16 + incl > len(data):
            raise PcapError(f"{path}: truncated record data at byte {off + 16} "
                            f"(need {incl}, have {len(data) - off - 16})")
        records.append(Record(len(records), sec * 1_000_000_000 + frac * scale,
                              data[off + 16:off + 16 + incl], orig))
        off += 16 + incl
    return linktype, records


def _ip6(buf: bytes, off: int) -> tuple[Ip6, int] | None:
    if len(buf) < off + 40 or buf[off] >> 4 != 6:
        return None
    first, _plen, nh, hlim = struct.unpack("!IHBB", buf[off:off + 8])
    hdr = Ip6(str(ipaddress.IPv6Address(buf[off + 8:off + 24])),
              str(ipaddress.IPv6Address(buf[off + 24:off + 40])), hlim, first & 0xFFFFF,
              (first >> 20) & 0xFF, nh)
    off += 40
    while nh in (NH_HOPOPT, NH_ROUTING, NH_DSTOPTS, NH_FRAGMENT):
        if len(buf) < off + 8:
            return None
        next_nh, ext_len = buf[off], buf[off + 1]
        size = 8 if nh == NH_FRAGMENT else (ext_len + 1) * 8
        if len(buf) < off + size:
            return None
        if nh == NH_ROUTING and buf[off + 2] == 4:  # SRH (RFC 8754)
            hdr.segments_left = buf[off + 3]
            last = buf[off + 4]
            hdr.srh_segments = [str(ipaddress.IPv6Address(buf[off + 8 + 16 * i:off + 24 + 16 * i]))
                                for i in range(last + 1) if off + 24 + 16 * i <= off + size]
        nh = next_nh
        off += size
    hdr.next_header = nh
    return hdr, off


def decode(record: Record, linktype: int = LINKTYPE_ETHERNET) -> Packet:
    pkt = Packet(record.index, record.ts_ns)
    buf = record.data
    if linktype != LINKTYPE_ETHERNET or len(buf) < 14:
        return pkt
    ethertype = struct.unpack("!H", buf[12:14])[0]
    off = 14
    while ethertype in ETH_VLAN and len(buf) >= off + 4:
        ethertype = struct.unpack("!H", buf[off + 2:off + 4])[0]
        off += 4
    if ethertype != ETH_IPV6:
        return pkt
    parsed = _ip6(buf, off)
    if parsed is None:
        return pkt
    pkt.outer, off = parsed
    nh = pkt.outer.next_header
    if nh == NH_IPV6:
        parsed = _ip6(buf, off)
        if parsed is None:
            return pkt
        pkt.inner, off = parsed
        nh = pkt.inner.next_header
    if nh == NH_UDP and len(buf) >= off + 8:
        pkt.sport, pkt.dport, length, _ = struct.unpack("!HHHH", buf[off:off + 8])
        pkt.payload = buf[off + 8:off + max(8, length)]
    elif nh == 58 and len(buf) > off:
        pkt.icmp6_type = buf[off]
    return pkt


def packets(path: str) -> list[Packet]:
    linktype, records = read_pcap(path)
    return [decode(r, linktype) for r in records]

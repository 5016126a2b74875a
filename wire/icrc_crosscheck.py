#!/usr/bin/python3
"""Cross-checks the codec's ICRC against implementations we did not write.

IPv4 frames: scapy's RoCE layer (scapy.contrib.roce) recomputes the ICRC.
IPv6 frames: the Linux rxe driver's algorithm (rxe_icrc.c), restated here with zlib.crc32.
Usage: icrc_crosscheck.py MRCT_BINARY. Exit 0 when every RoCE frame agrees, 1 otherwise,
77 when scapy is missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    from scapy.all import Ether, IP, IPv6, UDP, PcapReader, bind_layers  # noqa: F401
    from scapy.contrib.roce import BTH
except ImportError as e:  # pragma: no cover
    print(f"icrc_crosscheck: scapy not available ({e})")
    sys.exit(77)


def rxe_ipv6_icrc(frame: bytes, ip_off: int) -> int:
    """ICRC as rxe computes it for RoCEv2 over IPv6 (variant fields set to ones)."""
    ip = bytearray(frame[ip_off:ip_off + 40])
    ip[0] |= 0x0F                 # priority (TC high nibble)
    ip[1:4] = b"\xff\xff\xff"     # TC low nibble + flow label
    ip[7] = 0xFF                  # hop limit
    udp_len = struct.unpack("!H", frame[ip_off + 44:ip_off + 46])[0]
    udp = bytearray(frame[ip_off + 40:ip_off + 48])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(frame[ip_off + 48:ip_off + 60])
    bth[4] = 0xFF
    rest = frame[ip_off + 60:ip_off + 40 + udp_len - 4]
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + rest) & 0xFFFFFFFF


def main() -> int:
    mrct = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cap = os.path.join(tmp, "s.pcap")
        subprocess.run([mrct, "craft", "-o", cap], check=True, stderr=subprocess.DEVNULL)
        rows = [json.loads(l) for l in subprocess.run([mrct, "decode", "--json", cap], check=True,
                                                         capture_output=True, text=True).stdout.splitlines()]
        frames = [bytes(p) for p in PcapReader(cap)]
    assert len(rows) == len(frames)
    checked = {"scapy-ipv4": 0, "rxe-ipv6": 0}
    bad = 0
    for row, frame in zip(rows, frames):
        if not row.get("roce") or row.get("trimmed") or "icrc" not in row:
            continue
        ours = row["icrc"]
        if row["l3"] == 4:
            pkt = Ether(frame)
            theirs_bytes = pkt[BTH].compute_icrc(None)
            theirs = struct.unpack("<I", theirs_bytes)[0]
            key = "scapy-ipv4"
        else:
            ip_off = 14 + (4 if "vlan.id" in row else 0)
            if "inner.src" in row:   # SRv6: the ICRC covers the inner header only (MRP0)
                ip_off += 40 + (24 if "srh.segments_left" in row else 0)
            theirs = rxe_ipv6_icrc(frame, ip_off)
            key = "rxe-ipv6"
        # The trailer is stored little-endian; the JSON carries it read that way.
        trailer = struct.unpack("<I", frame[-4:])[0] if not row.get("vlan.id") else None
        if ours != theirs or (trailer is not None and trailer != theirs):
            print(f"frame {row['frame']} ({row.get('opcode_name')}): mrct 0x{ours:08x}, {key} 0x{theirs:08x}")
            bad += 1
        checked[key] += 1
    print(f"icrc_crosscheck: {checked['scapy-ipv4']} IPv4 frames vs scapy, "
          f"{checked['rxe-ipv6']} IPv6 frames vs the rxe algorithm, {bad} mismatches")
    return 1 if bad or not all(checked.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

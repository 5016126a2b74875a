"""pcap reader / decoder and packet builder tests (no root needed)."""

import ipaddress
import os
import struct
import unittest

import _util
from mrctb import pcap, traffic

ETH = bytes.fromhex("020000000002" "020000000001" "86dd")


def write_pcap(path, frames, nano=True, big_endian=False):
    e = ">" if big_endian else "<"
    magic = pcap.MAGIC_NS if nano else pcap.MAGIC_US
    with open(path, "wb") as f:
        f.write(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1))
        for ts_ns, data in frames:
            frac = ts_ns % 1_000_000_000 if nano else (ts_ns % 1_000_000_000) // 1000
            f.write(struct.pack(e + "IIII", ts_ns // 1_000_000_000, frac, len(data), len(data)))
            f.write(data)


SPEC = {"outer_src": "fd00:101:1::2", "outer_da": "fcbb:0:1100:1201:1101:1304::",
        "inner_src": "fd00:a::1", "inner_dst": "fd00:a::4", "sport": 49153, "dport": 4791,
        "flow_label": 0xABCDE, "payload": "hello", "hop_limit": 61}


class PacketBuilderTest(unittest.TestCase):
    def test_udp_checksum_verifies(self):
        seg = traffic.udp6("fd00:a::1", "fd00:a::4", 1234, 4791, b"abc")
        addrs = [ipaddress.IPv6Address(a).packed for a in ("fd00:a::1", "fd00:a::4")]
        pseudo = addrs[0] + addrs[1] + struct.pack("!I3xB", len(seg), 17)
        self.assertEqual(traffic.checksum16(pseudo + seg), 0)

    def test_srv6_packet_layout(self):
        pkt = traffic.srv6_packet(SPEC)
        self.assertEqual(len(pkt), 40 + 40 + 8 + 5)
        self.assertEqual(pkt[6], 41)  # outer next header: IPv6
        self.assertEqual(pkt[7], 61)
        self.assertEqual(struct.unpack("!I", pkt[0:4])[0] & 0xFFFFF, 0xABCDE)
        self.assertEqual(pkt[40 + 6], 17)


class PcapReaderTest(unittest.TestCase):
    def test_decodes_srv6_frame_in_all_formats(self):
        frame = ETH + traffic.srv6_packet(SPEC)
        with _util.TempDir() as d:
            for nano in (True, False):
                for big in (True, False):
                    path = os.path.join(d, f"x{nano}{big}.pcap")
                    write_pcap(path, [(1_700_000_000_123_456_789, frame)], nano, big)
                    (pkt,) = pcap.packets(path)
                    self.assertEqual(pkt.ts_ns, 1_700_000_000_123_456_789 if nano
                                     else 1_700_000_000_123_456_000)
                    self.assertEqual(pkt.outer.dst, "fcbb:0:1100:1201:1101:1304::")
                    self.assertEqual(pkt.outer.hop_limit, 61)
                    self.assertEqual(pkt.outer.flow_label, 0xABCDE)
                    self.assertEqual(pkt.inner.dst, "fd00:a::4")
                    self.assertEqual((pkt.sport, pkt.dport, pkt.payload), (49153, 4791, b"hello"))

    def test_srh_is_parsed(self):
        inner = (traffic.ipv6_header("fd00:a::1", "fd00:a::4", 17, 8)
                 + struct.pack("!HHHH", 1, 2, 8, 0))
        srh = (struct.pack("!BBBBBBH", 41, 2, 4, 1, 0, 0, 0)
               + ipaddress.IPv6Address("fcbb:0:1304::").packed)
        outer = traffic.ipv6_header("fd00:101:1::2", "fcbb:0:1100::", 43, len(srh) + len(inner))
        with _util.TempDir() as d:
            path = os.path.join(d, "srh.pcap")
            write_pcap(path, [(0, ETH + outer + srh + inner)])
            (pkt,) = pcap.packets(path)
            self.assertEqual(pkt.outer.segments_left, 1)
            self.assertEqual(pkt.outer.srh_segments, ["fcbb:0:1304::"])
            self.assertEqual(pkt.inner.dst, "fd00:a::4")
            self.assertEqual(pkt.dport, 2)

    def test_errors_name_file_and_offset(self):
        with _util.TempDir() as d:
            path = os.path.join(d, "bad.pcap")
            with open(path, "wb") as f:
                f.write(b"\x00" * 24)
            with self.assertRaisesRegex(pcap.PcapError, r"bad\.pcap: bad magic 00000000 at byte 0"):
                pcap.read_pcap(path)
            write_pcap(path, [(0, ETH + b"\x60" * 50)])
            with open(path, "r+b") as f:
                f.truncate(24 + 16 + 10)
            with self.assertRaisesRegex(pcap.PcapError, "truncated record data at byte 40"):
                pcap.read_pcap(path)

    def test_garbage_frames_do_not_crash(self):
        with _util.TempDir() as d:
            path = os.path.join(d, "junk.pcap")
            frames = [(i, ETH + bytes([0x60]) + bytes(range(i))) for i in range(0, 120, 7)]
            frames.append((1, b"\x01\x02"))
            write_pcap(path, frames)
            for pkt in pcap.packets(path):
                self.assertIsNone(pkt.inner)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""Cross-checks the Scapy MRC layer (mrc.py) and the C++ codec in both directions, under MRP0
and each variant profile in scenarios/profiles/wire-*.toml:

1. `mrct craft --profile P` frames dissect in Scapy with every field equal to `mrct decode --json`.
2. Frames built in Scapy (every MRC opcode, each EV carriage, trimmed) decode with
   `mrct decode --json --profile P` with every field equal and a valid ICRC.

Usage: mrc_scapy_test.py MRCT SOURCE_DIR. Exit 0 when everything agrees, 1 otherwise.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from scapy.all import IP, UDP, Ether, IPv6, Raw, rdpcap, wrpcap  # noqa: E402

import mrc  # noqa: E402
from mrc import (MRC_AETH, MRC_BTH, MRC_CCState, MRC_EETH, MRC_ERTH, MRC_ImmDt,  # noqa: E402
                 MRC_METH, MRC_NETH, MRC_Payload, MRC_PETH, MRC_RETH, MRC_SETH, MRC_TSETH)


def roce_ip(p):
    """(RoCE IP header, outer IP header): they differ in SRv6 (IPv6-in-IPv6)."""
    found = []
    layer = p
    while layer:
        if isinstance(layer, (IP, IPv6)):
            found.append(layer)
        layer = layer.payload
    return found[-1], found[0]


def g(cls, field):
    return lambda p: getattr(p[cls], field) if cls in p else None


def dscp(p):
    outer = roce_ip(p)[1]
    return (outer.tos if isinstance(outer, IP) else outer.tc) >> 2


def pkt_icrc(p):
    return p[MRC_Payload].icrc


# JSON key of `mrct decode --json` -> the same field read from the Scapy dissection.
FIELDS = {
    "sport": g(UDP, "sport"), "dport": g(UDP, "dport"),
    "dscp": dscp,
    "flow_label": lambda p: roce_ip(p)[1].fl if isinstance(roce_ip(p)[1], IPv6) else 0,
    "inner.flow_label": lambda p: roce_ip(p)[0].fl if roce_ip(p)[0] is not roce_ip(p)[1] else None,
    "opcode": g(MRC_BTH, "opcode"), "dest_qp": g(MRC_BTH, "dest_qp"), "psn": g(MRC_BTH, "psn"),
    "se": lambda p: bool(p[MRC_BTH].se), "mig_req": lambda p: bool(p[MRC_BTH].mig_req),
    "pad": g(MRC_BTH, "pad_count"), "tver": g(MRC_BTH, "tver"), "pkey": g(MRC_BTH, "pkey"),
    "ack_req": lambda p: bool(p[MRC_BTH].ack_req), "rtx": lambda p: bool(p[MRC_BTH].rtx),
    "ts": lambda p: bool(p[MRC_BTH].ts),
    "meth.rqmsn": g(MRC_METH, "rqmsn"), "meth.msn": g(MRC_METH, "msn"),
    "tseth.ts16": g(MRC_TSETH, "ts16"), "tseth.tsr": g(MRC_TSETH, "tsr"),
    "tseth.ftype": g(MRC_TSETH, "ftype"),
    "reth.va": g(MRC_RETH, "va"), "reth.rkey": g(MRC_RETH, "rkey"),
    "reth.len": g(MRC_RETH, "dma_len"), "imm": g(MRC_ImmDt, "imm"),
    "aeth.syndrome": g(MRC_AETH, "syndrome"), "aeth.msn": g(MRC_AETH, "msn"),
    "seth.m": g(MRC_SETH, "m"), "seth.pr": lambda p: bool(p[MRC_SETH].pr),
    "seth.ack_psn_offset": g(MRC_SETH, "ack_psn_offset"), "seth.entropy": g(MRC_SETH, "entropy"),
    "seth.spdcid": g(MRC_SETH, "spdcid"), "seth.dpdcid": g(MRC_SETH, "dpdcid"),
    "seth.port_status": g(MRC_SETH, "port_status"), "seth.cack_psn": g(MRC_SETH, "cack_psn"),
    "seth.cc_type": g(MRC_SETH, "cc_type"), "seth.psv": lambda p: bool(p[MRC_SETH].psv),
    "seth.sva": lambda p: bool(p[MRC_SETH].sva), "seth.mpr": g(MRC_SETH, "mpr"),
    "seth.sack_offset": g(MRC_SETH, "sack_offset"), "seth.sack_bitmap": g(MRC_SETH, "sack_bitmap"),
    "cc.ts_echo": g(MRC_CCState, "ts_echo"), "cc.ooo_count": g(MRC_CCState, "ooo_count"),
    "cc.rc": lambda p: bool(p[MRC_CCState].rc), "cc.rcv_cwnd_pen": g(MRC_CCState, "rcv_cwnd_pen"),
    "cc.rcvd_bytes": g(MRC_CCState, "rcvd_bytes"),
    "neth.code": g(MRC_NETH, "nack_code"), "neth.vendor_code": g(MRC_NETH, "vendor_code"),
    "neth.entropy": g(MRC_NETH, "entropy"), "neth.spdcid": g(MRC_NETH, "spdcid"),
    "neth.dpdcid": g(MRC_NETH, "dpdcid"), "neth.nack_psn": g(MRC_NETH, "nack_psn"),
    "neth.m": g(MRC_NETH, "m"), "neth.sva": lambda p: bool(p[MRC_NETH].sva),
    "neth.ts_echo": g(MRC_NETH, "ts_echo"),
    # Fields the decoder may add (issue 21 deliverable 4): compared when present.
    "neth.cc_type": g(MRC_NETH, "cc_type"), "neth.psv": lambda p: bool(p[MRC_NETH].psv),
    "peth.probe_id": g(MRC_PETH, "probe_id"), "peth.spdcid": g(MRC_PETH, "spdcid"),
    "peth.dpdcid": g(MRC_PETH, "dpdcid"), "peth.ts16": g(MRC_PETH, "ts16"),
    "peth.ftype": g(MRC_PETH, "ftype"), "peth.tsr": g(MRC_PETH, "tsr"),
    "erth.op": g(MRC_ERTH, "op"), "erth.port_status_mask": g(MRC_ERTH, "port_status_mask"),
    "erth.ts16": g(MRC_ERTH, "ts16"), "erth.ftype": g(MRC_ERTH, "ftype"),
    "erth.tsr": g(MRC_ERTH, "tsr"),
    "eeth.op": lambda p: p[MRC_EETH].op, "eeth.sva": lambda p: p[MRC_EETH].sva,
    "eeth.status": g(MRC_EETH, "status"), "eeth.entropy": g(MRC_EETH, "entropy"),
    "eeth.port_status_mask": g(MRC_EETH, "port_status_mask"),
    "eeth.ts_echo": g(MRC_EETH, "ts_echo"), "eeth.svc_time": g(MRC_EETH, "svc_time"),
    "payload_len": lambda p: len(p[MRC_Payload].data) if MRC_Payload in p else 0,
    "icrc": pkt_icrc,
}


def decode_json(mrct, cap, profile_arg):
    out = subprocess.run([mrct, "decode", "--json", "--profile", profile_arg, cap], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def compare(rows, pkts, what, errors):
    """Every FIELDS key present in a RoCE row equals the Scapy field. Returns the count."""
    n = 0
    for row, p in zip(rows, pkts):
        if not row.get("roce"):
            continue
        if MRC_BTH not in p:
            errors.append(f"{what} frame {row['frame']}: Scapy found no MRC BTH "
                          f"(dport {row.get('dport')})")
            continue
        for key, read in FIELDS.items():
            if key not in row:
                continue
            if key == "icrc" and row.get("trimmed"):
                continue
            try:
                theirs = read(p)
            except (IndexError, AttributeError, TypeError) as e:
                errors.append(f"{what} frame {row['frame']} {row.get('opcode_name')}: {key}: {e}")
                continue
            if theirs is None:
                continue
            if theirs != row[key]:
                errors.append(f"{what} frame {row['frame']} {row.get('opcode_name')}: {key}: "
                              f"mrct {row[key]!r}, scapy {theirs!r}")
            n += 1
    return n


GID_A, GID_B = "fd00:100::1", "fd00:200::1"
# Explicit addresses: Scapy would otherwise resolve the destination MAC on the host's network.
MAC_A, MAC_B = "02:00:00:00:01:01", "02:00:00:00:02:01"


def scapy_frames(prof):
    """One packet of every MRC opcode in each carriage, plus trimmed data, built in Scapy."""
    port = prof["udp"]["ports"][0]
    d = prof["dscp"]
    wev = 0x0007BEEF
    out = []

    def outer(fmt, tc_dscp, wev_, switch_dscp=False):
        sport, fl = mrc.carry_wev(fmt, wev_, prof)
        tc = tc_dscp << 2 | 2
        if fmt == "udp4":
            return Ether(src=MAC_A, dst=MAC_B) / IP(src="192.0.2.1", dst="192.0.2.2", tos=tc) / UDP(sport=sport,
                                                                                  dport=port)
        if fmt in ("udp6", "stev"):
            sport, fl = mrc.carry_wev("udp" if fmt == "udp6" else "stev", wev_, prof)
            return Ether(src=MAC_A, dst=MAC_B) / IPv6(src=GID_A, dst=GID_B, tc=tc, fl=fl) / UDP(sport=sport,
                                                                              dport=port)
        sport, fl = mrc.carry_wev("srv6", wev_, prof)
        # A trimming switch writes its DSCP on the outer header whatever the sender put there.
        otc = tc if prof["srv6"]["outer_traffic_class"] == "copy" or switch_dscp else 0
        return (Ether(src=MAC_A, dst=MAC_B) / IPv6(src="fd00:1::1", dst="fcbb:0:101:201:301:e01::", tc=otc, fl=fl,
                               nh=41) /
                IPv6(src=GID_A, dst=GID_B, tc=tc, fl=fl) / UDP(sport=sport, dport=port))

    for fmt in ("udp4", "udp6", "stev", "srv6"):
        w = wev & 0xFFFF if fmt in ("udp4", "udp6") else wev
        def data(op, ts=1, rtx=0):
            p = (outer(fmt, d["trimmable"], w) /
                 MRC_BTH(opcode=op, dest_qp=0x22, psn=1000 + op, ts=ts, rtx=rtx, ack_req=1) /
                 MRC_METH(rqmsn=3, msn=41))
            if ts:
                p = p / MRC_TSETH(ts16=0x1234)
            return p / MRC_RETH(va=0x7f0000100000, rkey=0xabc001, dma_len=3000)

        for op in (0xC6, 0xC7, 0xC8, 0xCA):
            out.append(data(op) / MRC_Payload(data=bytes(range(37)) * 3))
        out.append(data(0xC9) / MRC_ImmDt(imm=0xdeadbeef) / MRC_Payload(data=b"abcde"))
        out.append(data(0xCB, ts=0) / MRC_ImmDt(imm=0x1) / MRC_Payload(data=b"xy"))
        out.append(data(0xC7, rtx=1) / MRC_Payload(data=b"\x11" * 64))
        # Trimmed as a switch leaves it: the profile's trim size after UDP, no ICRC.
        full = data(0xC7) / MRC_Payload(data=b"\x22" * 200)
        body = bytes(full[MRC_BTH])[:prof["trim"]["bytes"]]
        out.append(Ether(bytes(outer(fmt, d["trimmed"], w, switch_dscp=True) / Raw(body))))
        ctrl = lambda: outer(fmt, d["control"], 0x00051E07 if fmt not in ("udp4", "udp6") else 0x1E07)  # noqa: E731,E501
        out.append(ctrl() / MRC_BTH(opcode=0xDC, dest_qp=0x11, psn=1001) /
                   MRC_SETH(m=1, ack_psn_offset=-2, entropy=w, spdcid=0x22, dpdcid=0x11,
                            port_status=0xFF, psv=1, sva=1, cack_psn=1001, mpr=3, sack_offset=2,
                            sack_bitmap=0x8000000000000005) /
                   MRC_CCState(ts_echo=0x1234, ooo_count=2, rc=1, rcv_cwnd_pen=64,
                               rcvd_bytes=13) / MRC_Payload())
        out.append(ctrl() / MRC_BTH(opcode=0xDD, dest_qp=0x11, psn=1007) /
                   MRC_NETH(nack_code=0x02, entropy=w, spdcid=0x22, dpdcid=0x11, nack_psn=1007,
                            m=1, sva=1, ts_echo=0x4321) / MRC_Payload())
        out.append(ctrl() / MRC_BTH(opcode=0xD1, dest_qp=0x11, psn=1006) /
                   MRC_AETH(syndrome=0x1F, msn=41) / MRC_Payload())
        out.append(outer(fmt, d["trimmable"], w) / MRC_BTH(opcode=0xDE, dest_qp=0x22, ack_req=1) /
                   MRC_PETH(probe_id=7, spdcid=0x11, dpdcid=0x22, ts16=0x2222, tsr=1) /
                   MRC_Payload())
        out.append(outer(fmt, d["trimmable"], w) / MRC_BTH(opcode=0xD8, dest_qp=2, psn=0x42) /
                   MRC_ERTH(op=1, port_status_mask=0x1FE, ts16=0x3333) / MRC_Payload())
        out.append(ctrl() / MRC_BTH(opcode=0xD9, dest_qp=2, psn=0x42) /
                   MRC_EETH(op=1, sva=True, status=0, entropy=w, port_status_mask=0x1FE,
                            ts_echo=0x3340, svc_time=0x0D) / MRC_Payload())
    return out


def main():
    mrct, src = sys.argv[1], sys.argv[2]
    variants = [("MRP0", None)] + [
        (os.path.join(src, "scenarios", "profiles", f), None)
        for f in ("wire-4971-high.toml", "wire-pcap-view.toml", "wire-mrc-client.toml")]
    errors = []
    total = {"craft->scapy": 0, "scapy->mrct": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for arg, _ in variants:
            prof = mrc.MRP0 if arg == "MRP0" else mrc.load_profile(arg)
            mrc.bind(prof)
            name = prof["name"]
            # 1. mrct craft -> Scapy.
            cap = os.path.join(tmp, "craft.pcap")
            subprocess.run([mrct, "craft", "-o", cap, "--profile", arg], check=True,
                           stderr=subprocess.DEVNULL)
            rows = decode_json(mrct, cap, arg)
            pkts = rdpcap(cap)
            if len(rows) != len(pkts):
                errors.append(f"{name}: {len(rows)} JSON rows, {len(pkts)} frames")
            n = compare(rows, pkts, f"{name} craft->scapy", errors)
            errors += [f"{name} craft frame {r['frame']}: mrct: {r['error']}" for r in rows
                       if r.get("roce") and r.get("error")]
            roce = sum(1 for r in rows if r.get("roce"))
            total["craft->scapy"] += n
            # 2. Scapy -> mrct decode.
            built = scapy_frames(prof)
            cap2 = os.path.join(tmp, "scapy.pcap")
            wrpcap(cap2, built)
            rows2 = decode_json(mrct, cap2, arg)
            pkts2 = rdpcap(cap2)
            for r in rows2:
                if not r.get("roce"):
                    errors.append(f"{name} scapy->mrct frame {r['frame']}: not RoCE to mrct")
                elif r.get("error"):
                    errors.append(f"{name} scapy->mrct frame {r['frame']}: {r['error']}")
                elif not r.get("trimmed") and r.get("icrc_ok") is not True:
                    errors.append(f"{name} scapy->mrct frame {r['frame']} {r.get('opcode_name')}:"
                                  f" ICRC not valid to mrct")
            n2 = compare(rows2, pkts2, f"{name} scapy->mrct", errors)
            total["scapy->mrct"] += n2
            print(f"{name}: craft->scapy {roce} RoCE frames, {n} fields equal; "
                  f"scapy->mrct {len(built)} frames, {n2} fields equal")
    for e in errors[:40]:
        print(e)
    if len(errors) > 40:
        print(f"... {len(errors) - 40} more")
    ok = not errors and all(v > 1000 for v in total.values())
    print(f"mrc_scapy_test: {total}, {len(errors)} differences: {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

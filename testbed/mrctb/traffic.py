"""Tiny traffic tools run inside the namespaces (python3 -m mrctb.traffic ...).

  recv      --bind ADDR --port N [--count N] [--timeout S]
            prints READY once bound, one JSON object per datagram, then {"done": ..., "received": n}
  send-udp  --dst ADDR --dport N [--src ADDR] [--sport N | --sports A:B] [--flowlabels A:B]
            [--dev IFACE] [--count N] [--payload TEXT] [--gap-us N]
            one datagram per (sport, flow label) combination, `count` times
  send-srv6 [--dev IFACE] [--gap-us N] < JSON lines
            {"outer_src", "outer_da", "inner_src", "inner_dst", "sport", "dport", "flow_label",
             "payload", "hop_limit"}: IPv6-in-IPv6 built by hand and sent on a raw socket, the way
            an MRC endpoint emits SRv6 packets (outer DA = uSID path, inner DA = peer GID)
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import select
import socket
import struct
import sys
import time

IPV6_FLOWINFO_SEND = 33
IPPROTO_IPV6 = 41
NH_UDP = 17


def checksum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp6(src: str, dst: str, sport: int, dport: int, payload: bytes) -> bytes:
    length = 8 + len(payload)
    pseudo = (ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
              + struct.pack("!I3xB", length, NH_UDP))
    header = struct.pack("!HHHH", sport, dport, length, 0)
    csum = checksum16(pseudo + header + payload) or 0xFFFF
    return struct.pack("!HHHH", sport, dport, length, csum) + payload


def ipv6_header(src: str, dst: str, next_header: int, payload_len: int, hop_limit: int = 64,
                flow_label: int = 0, traffic_class: int = 0) -> bytes:
    first = (6 << 28) | ((traffic_class & 0xFF) << 20) | (flow_label & 0xFFFFF)
    return (struct.pack("!IHBB", first, payload_len, next_header, hop_limit)
            + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed)


def srv6_packet(spec: dict) -> bytes:
    payload = spec.get("payload", "").encode()
    flow = int(spec.get("flow_label", 0))
    hop_limit = int(spec.get("hop_limit", 64))
    udp = udp6(spec["inner_src"], spec["inner_dst"], int(spec["sport"]), int(spec["dport"]),
               payload)
    inner = ipv6_header(spec["inner_src"], spec["inner_dst"], NH_UDP, len(udp), 64, flow) + udp
    return ipv6_header(spec["outer_src"], spec["outer_da"], IPPROTO_IPV6, len(inner), hop_limit,
                       flow) + inner


def _range(text: str | None, default: int) -> list[int]:
    if text is None:
        return [default]
    lo, _, hi = text.partition(":")
    lo_i = int(lo, 0)
    hi_i = int(hi, 0) if hi else lo_i
    if hi_i < lo_i:
        raise SystemExit(f"bad range {text!r}: end before start")
    return list(range(lo_i, hi_i + 1))


def cmd_recv(args) -> int:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((args.bind, args.port))
    print("READY", flush=True)
    received = 0
    deadline = time.monotonic() + args.timeout
    while args.count == 0 or received < args.count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            break
        data, addr = sock.recvfrom(65535)
        received += 1
        print(json.dumps({"src": addr[0], "sport": addr[1], "len": len(data),
                          "payload": data.decode(errors="replace")}), flush=True)
    print(json.dumps({"done": True, "received": received}), flush=True)
    return 0


def cmd_send_udp(args) -> int:
    sent = 0
    gap = args.gap_us / 1e6
    sports = _range(args.sports, args.sport)
    labels = _range(args.flowlabels, 0)
    socks = {}
    for _ in range(args.count):
        for sport in sports:
            if sport not in socks:
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                if args.dev:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, args.dev.encode())
                s.setsockopt(IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1)
                s.bind((args.src or "::", sport))
                socks[sport] = s
            for label in labels:
                payload = f"{args.payload} sport={sport} fl={label} n={sent}".encode()
                socks[sport].sendto(payload, (args.dst, args.dport, label, 0))
                sent += 1
                if gap:
                    time.sleep(gap)
    for s in socks.values():
        s.close()
    print(json.dumps({"sent": sent}), flush=True)
    return 0


def cmd_send_srv6(args) -> int:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    if args.dev:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, args.dev.encode())
    sent = 0
    errors = []
    gap = args.gap_us / 1e6
    for lineno, line in enumerate(sys.stdin, 1):
        line = line.strip()
        if not line:
            continue
        try:
            spec = json.loads(line)
            packet = srv6_packet(spec)
        except (ValueError, KeyError) as err:
            print(f"stdin line {lineno}: bad packet spec: {err}", file=sys.stderr)
            return 2
        if spec.get("dev"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, spec["dev"].encode())
        try:
            sock.sendto(packet, (spec["outer_da"], 0))
            sent += 1
        except OSError as err:  # no route on this host: report it, keep going
            errors.append({"line": lineno, "outer_da": spec["outer_da"], "error": err.strerror})
        if gap:
            time.sleep(gap)
    print(json.dumps({"sent": sent, "errors": errors}), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m mrctb.traffic")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", default="::")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--count", type=int, default=0,
                   help="stop after N datagrams (0 = until timeout)")
    r.add_argument("--timeout", type=float, default=5.0)
    u = sub.add_parser("send-udp")
    u.add_argument("--dst", required=True)
    u.add_argument("--dport", type=int, required=True)
    u.add_argument("--src")
    u.add_argument("--sport", type=int, default=0)
    u.add_argument("--sports")
    u.add_argument("--flowlabels")
    u.add_argument("--dev")
    u.add_argument("--count", type=int, default=1)
    u.add_argument("--payload", default="mrctb")
    u.add_argument("--gap-us", type=int, default=0)
    s = sub.add_parser("send-srv6")
    s.add_argument("--dev")
    s.add_argument("--gap-us", type=int, default=0)
    args = ap.parse_args(argv)
    return {"recv": cmd_recv, "send-udp": cmd_send_udp, "send-srv6": cmd_send_srv6}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

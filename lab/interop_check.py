#!/usr/bin/python3
"""Interop check of the codec against captures of a RoCE stack nobody here wrote (Linux rxe).

For every capture:
  1. `mrct decode --json --strict` decodes every frame; every RoCEv2 frame has its ICRC checked and
     correct (100 %); exit status 0.
  2. A flipped byte is detected: for a data frame (payload byte), a header byte (BTH PSN) and an
     ACK, a one-frame capture with that byte flipped makes `mrct decode --strict` fail and report
     icrc_ok=false; the same frame unflipped passes (control).
  3. tshark's infiniband dissector agrees with mrct on every RoCE frame: bth.opcode, bth.psn,
     bth.destqp, bth.a, reth.va / r_key / dmalen, aeth.syndrome / msn, invariant.crc.
  4. labpcap.py (a third, minimal reading) agrees on the RoCE frame count and opcode/PSN/QP.

Usage: interop_check.py [--mrct PATH] [--tshark PATH | --no-tshark] [--json OUT] PCAP...
Exit 0 when every check passes, 1 otherwise, 2 on usage errors. Stdlib only.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import labpcap  # noqa: E402

# mrct --json key -> tshark field (ints compared numerically)
FIELD_MAP = [
    ("opcode", "infiniband.bth.opcode"),
    ("psn", "infiniband.bth.psn"),
    ("dest_qp", "infiniband.bth.destqp"),
    ("ack_req", "infiniband.bth.a"),
    ("reth.va", "infiniband.reth.va"),
    ("reth.rkey", "infiniband.reth.r_key"),
    ("reth.len", "infiniband.reth.dmalen"),
    ("aeth.syndrome", "infiniband.aeth.syndrome"),
    ("aeth.msn", "infiniband.aeth.msn"),
    ("icrc", "infiniband.invariant.crc"),  # byte order differs, see the comparison
]


def mrct_decode(mrct, path):
    r = subprocess.run([mrct, "decode", "--json", "--strict", path], capture_output=True, text=True)
    frames = []
    for i, line in enumerate(r.stdout.splitlines()):
        if not line.strip():
            continue
        try:
            frames.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise RuntimeError(f"{path}: mrct decode --json line {i + 1} is not JSON: {e}")
    return r.returncode, frames, r.stderr.strip()


# RDMA payload is opaque data, but tshark offers it to heuristic sub-dissectors; "Ethernet over
# IB" takes a 2-byte perftest payload for an Ethernet header, throws, and the ICRC field is never
# reached. Those heuristics are switched off (when this tshark knows them).
TSHARK_NO_HEUR = ["--disable-heuristic", "eth_over_ib", "--disable-heuristic", "mellanox_eoib"]


def tshark_fields(tshark, path):
    cmd = [tshark, "-r", path, "-n", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f",
           "-e", "frame.number"]
    for _, f in FIELD_MAP:
        cmd += ["-e", f]
    r = subprocess.run(cmd[:1] + TSHARK_NO_HEUR + cmd[1:], capture_output=True, text=True)
    if r.returncode != 0 and "No such protocol" in r.stderr:
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tshark failed on {path}: {r.stderr.strip()[-300:]}")
    out = {}
    for line in r.stdout.splitlines():
        cols = line.split("\t")
        if len(cols) < 1 + len(FIELD_MAP) or not cols[1]:
            continue  # not dissected as InfiniBand
        vals = {}
        for (key, _), v in zip(FIELD_MAP, cols[1:]):
            if v == "":
                continue
            if v in ("True", "False"):
                vals[key] = v == "True"
            else:
                vals[key] = int(v, 0)
        out[int(cols[0])] = vals
    return out


def write_pcap(path, linktype, frames):
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
        for ts, data in frames:
            fh.write(struct.pack("<IIII", ts // 10**9, (ts % 10**9) // 1000, len(data), len(data)))
            fh.write(data)


def flip_checks(mrct, path, decoded, tmpdir):
    """Flips one byte in up to three frames and checks that mrct's ICRC check catches each."""
    records = list(labpcap.read_pcap(path))
    picks = []
    data_frame = next((d for d in decoded if d.get("roce") and d.get("payload_len", 0) > 0), None)
    ack_frame = next((d for d in decoded if d.get("roce") and d.get("opcode") == 0x11), None)
    if data_frame:
        # last payload byte: the 4 bytes before the ICRC trailer
        picks.append(("payload byte", data_frame, len(records[data_frame["frame"] - 1][2]) - 5))
        picks.append(("BTH PSN byte", data_frame, None))
    if ack_frame:
        picks.append(("ACK AETH MSN byte", ack_frame, len(records[ack_frame["frame"] - 1][2]) - 5))
    results = []
    for what, d, off in picks:
        ts, lt, frame = records[d["frame"] - 1]
        frame = bytearray(frame)
        if off is None:
            off = labpcap.parse_roce(bytes(frame), lt)["bth_offset"] + 11  # low PSN byte
        frame[off] ^= 0x01
        ctrl = os.path.join(tmpdir, "control.pcap")
        bad = os.path.join(tmpdir, "flipped.pcap")
        write_pcap(ctrl, lt, [(ts, records[d["frame"] - 1][2])])
        write_pcap(bad, lt, [(ts, bytes(frame))])
        rc_ctrl, f_ctrl, _ = mrct_decode(mrct, ctrl)
        rc_bad, f_bad, _ = mrct_decode(mrct, bad)
        icrc_bad = bool(f_bad) and f_bad[0].get("icrc_ok") is False
        ok = rc_ctrl == 0 and bool(f_ctrl) and f_ctrl[0].get("icrc_ok") is True and rc_bad != 0 \
            and (icrc_bad or "error" in (f_bad[0] if f_bad else {}))
        results.append({"what": what, "frame": d["frame"], "offset": off, "opcode": d["opcode"],
                        "control_rc": rc_ctrl, "flipped_rc": rc_bad, "flipped_icrc_ok":
                        f_bad[0].get("icrc_ok") if f_bad else None, "detected": ok})
    return results


def check_one(path, mrct, tshark):
    rep = {"pcap": os.path.basename(path), "problems": []}
    rc, frames, err = mrct_decode(mrct, path)
    roce = [f for f in frames if f.get("roce")]
    rep.update(frames=len(frames), roce=len(roce), mrct_rc=rc,
               decode_errors=sum(1 for f in frames if "error" in f),
               icrc_ok=sum(1 for f in roce if f.get("icrc_ok") is True),
               icrc_bad=sum(1 for f in roce if f.get("icrc_ok") is False),
               icrc_unchecked=sum(1 for f in roce if "icrc_ok" not in f))
    ops = {}
    for f in roce:
        name = f.get("opcode_name") or str(f.get("opcode"))
        ops[name] = ops.get(name, 0) + 1
    rep["opcodes"] = ops
    if rc != 0:
        rep["problems"].append(f"{rep['pcap']}: mrct decode --strict exit {rc}: {err[-200:]}")
    if rep["decode_errors"]:
        first = next(f for f in frames if "error" in f)
        rep["problems"].append(f"{rep['pcap']}: {rep['decode_errors']} decode errors, first frame "
                               f"{first['frame']}: {first['error']}")
    if rep["icrc_bad"] or rep["icrc_unchecked"]:
        rep["problems"].append(f"{rep['pcap']}: ICRC verified on {rep['icrc_ok']}/{len(roce)} RoCE "
                               f"frames ({rep['icrc_bad']} bad, {rep['icrc_unchecked']} unchecked)")
    # third reading
    mine = labpcap.roce_packets(path)
    rep["labpcap_roce"] = len(mine)
    if len(mine) != len(roce):
        rep["problems"].append(f"{rep['pcap']}: labpcap sees {len(mine)} RoCE frames, mrct {len(roce)}")
    else:
        diff = sum(1 for (_, p), f in zip(mine, roce)
                   if (p["opcode"], p["psn"], p["destqp"]) != (f["opcode"], f["psn"], f["dest_qp"]))
        rep["labpcap_mismatches"] = diff
        if diff:
            rep["problems"].append(f"{rep['pcap']}: labpcap and mrct differ on {diff} frames")
    # tshark
    if tshark:
        ts = tshark_fields(tshark, path)
        compared = mismatched = missing = 0
        examples = []
        by_no = {f["frame"]: f for f in roce}
        if set(ts) != set(by_no):
            rep["problems"].append(f"{rep['pcap']}: tshark dissects {len(ts)} frames as InfiniBand, "
                                   f"mrct {len(by_no)} as RoCE")
        for no, tv in ts.items():
            mv = by_no.get(no)
            if mv is None:
                continue
            for key, _ in FIELD_MAP:
                if key not in tv and key not in mv:
                    continue
                if key not in tv:
                    missing += 1  # tshark stopped before this field (reported, not compared)
                    if len(examples) < 5:
                        examples.append(f"frame {no} {key}: tshark has no value")
                    continue
                compared += 1
                a, b = mv.get(key), tv.get(key)
                if key == "icrc" and isinstance(a, int):
                    # mrct gives the trailer read little-endian (wire.h), tshark big-endian
                    a = int.from_bytes(a.to_bytes(4, "little"), "big")
                if isinstance(a, bool) or isinstance(b, bool):
                    a, b = bool(a), bool(b)
                if a != b:
                    mismatched += 1
                    if len(examples) < 5:
                        examples.append(f"frame {no} {key}: mrct {a} tshark {b}")
        rep["tshark"] = {"frames": len(ts), "fields_compared": compared, "mismatches": mismatched,
                         "fields_missing_in_tshark": missing, "examples": examples}
        if missing:
            rep["problems"].append(f"{rep['pcap']}: tshark gave no value for {missing} fields mrct "
                                   f"decoded: {'; '.join(examples)}")
        if mismatched:
            rep["problems"].append(f"{rep['pcap']}: tshark disagrees on {mismatched}/{compared} "
                                   f"fields: {'; '.join(examples)}")
    with tempfile.TemporaryDirectory() as tmp:
        flips = flip_checks(mrct, path, frames, tmp)
    rep["flips"] = flips
    for fl in flips:
        if not fl["detected"]:
            rep["problems"].append(f"{rep['pcap']}: flipped {fl['what']} of frame {fl['frame']} "
                                   f"(offset {fl['offset']}) not detected: {fl}")
    return rep


def check(pcaps, mrct, tshark=None, min_roce=1):
    report = {"mrct": mrct, "tshark": tshark, "captures": [], "problems": []}
    for p in pcaps:
        try:
            r = check_one(p, mrct, tshark)
        except (RuntimeError, labpcap.PcapError, OSError) as e:
            r = {"pcap": os.path.basename(p), "problems": [str(e)]}
        report["captures"].append(r)
        report["problems"] += r["problems"]
    caps = report["captures"]
    tot = {k: sum(c.get(k, 0) for c in caps) for k in ("frames", "roce", "icrc_ok", "icrc_bad",
                                                       "decode_errors")}
    tot["flips_detected"] = sum(1 for c in caps for f in c.get("flips", []) if f["detected"])
    tot["flips"] = sum(len(c.get("flips", [])) for c in caps)
    tot["tshark_fields_compared"] = sum(c.get("tshark", {}).get("fields_compared", 0) for c in caps)
    tot["tshark_mismatches"] = sum(c.get("tshark", {}).get("mismatches", 0) for c in caps)
    report["totals"] = tot
    if pcaps and tot["roce"] < min_roce:
        report["problems"].append(f"only {tot['roce']} RoCE frames in {len(pcaps)} captures "
                                  f"(expected at least {min_roce})")
    if tot["flips"] == 0 and pcaps:
        report["problems"].append("no frame was suitable for the flipped-byte check")
    report["ok"] = not report["problems"]
    return report


def summary_lines(report):
    t = report["totals"]
    pct = 100.0 * t["icrc_ok"] / t["roce"] if t["roce"] else 0.0
    lines = [f"interop: {len(report['captures'])} captures, {t['frames']} frames, {t['roce']} RoCE, "
             f"decode errors {t['decode_errors']}, ICRC ok {t['icrc_ok']}/{t['roce']} ({pct:.2f} %), "
             f"flipped bytes detected {t['flips_detected']}/{t['flips']}"]
    if report.get("tshark"):
        lines.append(f"interop: tshark agreement {t['tshark_fields_compared'] - t['tshark_mismatches']}"
                     f"/{t['tshark_fields_compared']} fields")
    else:
        lines.append("interop: tshark not available, field comparison not run")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pcaps", nargs="+")
    ap.add_argument("--mrct", default=os.environ.get("MRCT"))
    ap.add_argument("--tshark", default=shutil.which("tshark"))
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--json", help="write the full report here")
    a = ap.parse_args()
    if not a.mrct or not os.path.isfile(a.mrct):
        print("interop_check: --mrct (or $MRCT) must name the mrct binary", file=sys.stderr)
        return 2
    rep = check(a.pcaps, a.mrct, None if a.no_tshark else a.tshark)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    for c in rep["captures"]:
        if "roce" in c:
            print(f"{c['pcap']}: {c['frames']} frames, {c['roce']} RoCE, ICRC ok {c['icrc_ok']}, "
                  f"errors {c['decode_errors']}, tshark mismatches "
                  f"{c.get('tshark', {}).get('mismatches', '-')}, flips detected "
                  f"{sum(f['detected'] for f in c['flips'])}/{len(c['flips'])}")
    for line in summary_lines(rep):
        print(line)
    for p in rep["problems"]:
        print(f"PROBLEM: {p}")
    return 0 if rep["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

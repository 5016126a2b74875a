#!/usr/bin/python3
"""The Lua dissector under each shipped wire-profile file (MRC_WIRE_PROFILE) agrees with
`mrct decode --json --profile FILE` on the fields a profile changes: which frames are MRC (the
UDP port), the WEV (stripe, ECMP flow label, SRv6 carriage), the EETH op and SVA bits, and the
trimmed state. Under MRP0 the same variant captures must disagree (the check can fail).

Usage: variant_check.py --mrct MRCT --lua mrp0.lua --profiles DIR. Exit 77 without tshark.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

FIELDS = [("mrc.opcode", "opcode"), ("mrc.wev", "wev"), ("mrc.eeth.op", "eeth.op"),
          ("mrc.eeth.sva", "eeth.sva"), ("mrc.trimmed", "trimmed")]


def tshark_rows(lua, cap, profile):
    env = dict(os.environ, MRC_WIRE_PROFILE=profile or "")
    cmd = ["tshark", "-n", "-X", f"lua_script:{lua}", "-r", cap, "-T", "fields", "-E",
           "separator=|", "-E", "occurrence=f"]
    for f, _ in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return [line.split("|") for line in out.splitlines()]


def as_value(s):
    if s == "":
        return None
    if s in ("True", "False"):
        return s == "True"
    return int(s, 0)


def compare(rows, js, name):
    diffs, n = [], 0
    for r, j in zip(rows, js):
        mrc_in_mrct = j.get("roce") and j.get("opcode", 0) >= 0xC6
        mrc_in_lua = r[0] != ""
        if bool(mrc_in_mrct) != mrc_in_lua:
            diffs.append(f"{name} frame {j['frame']}: MRC to mrct {bool(mrc_in_mrct)}, "
                         f"to the dissector {mrc_in_lua}")
            continue
        if not mrc_in_lua:
            continue
        for (_, key), val in zip(FIELDS, r):
            if key not in j:
                continue
            theirs = as_value(val)
            if theirs is None:
                continue
            if theirs != j[key]:
                diffs.append(f"{name} frame {j['frame']} {j.get('opcode_name')}: {key}: "
                             f"mrct {j[key]!r}, dissector {theirs!r}")
            n += 1
    return n, diffs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mrct", required=True)
    ap.add_argument("--lua", required=True)
    ap.add_argument("--profiles", required=True)
    a = ap.parse_args()
    if not shutil.which("tshark"):
        print("variant_check: tshark not installed")
        return 77
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in ("wire-4971-high.toml", "wire-mrc-client.toml", "wire-pcap-view.toml"):
            prof = os.path.join(a.profiles, v)
            cap = os.path.join(tmp, v + ".pcap")
            subprocess.run([a.mrct, "craft", "-o", cap, "--profile", prof], check=True,
                           stderr=subprocess.DEVNULL)
            js = [json.loads(l) for l in subprocess.run(
                [a.mrct, "decode", "--json", "--profile", prof, cap], check=True,
                capture_output=True, text=True).stdout.splitlines()]
            n, diffs = compare(tshark_rows(a.lua, cap, prof), js, v)
            bad += diffs
            # Without the profile the dissector must read the same capture differently.
            n0, diffs0 = compare(tshark_rows(a.lua, cap, None), js, v + " (no profile)")
            print(f"{v}: {n} fields equal with the profile; without it {len(diffs0)} differences")
            if n < 50:
                bad.append(f"{v}: only {n} fields compared")
            if not diffs0:
                bad.append(f"{v}: the dissector without the profile agrees too: the check is blind")
    for d in bad[:30]:
        print(d)
    print("variant_check:", "ok" if not bad else f"FAIL ({len(bad)})")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

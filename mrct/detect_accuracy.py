#!/usr/bin/python3
"""Accuracy of `mrct detect` on sample captures of each wire variant.

Variants: every shipped profile (scenarios/profiles/wire-*.toml) and, for each parameter, a
profile that changes that parameter alone to an alternative of docs/wire-format.md section 19.
Captures per variant: the crafted sample set (`mrct craft --profile`, every packet type in
every carriage) and a reference conversation (`mrct craft --reference --profile`: two engine
endpoints on the simulator). Each parameter the detector prints is compared with the variant's.

Outcomes per (variant, capture, parameter): ok (right value, confidence > 0), WRONG (another
value, confidence > 0), none (confidence 0: no evidence in the capture, MRP0's value kept; it
counts as ok only if that is the variant's value, and the changed parameter of a one-parameter
variant must have evidence in the sample set unless NO_EVIDENCE_EXPECTED names it).

Prints a table per parameter and per variant; exit 1 on any WRONG or on missing evidence, 2 on
a tool failure. Standard library only; run with Debian's /usr/bin/python3.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import tomllib

# (TOML section, key) in the order the tables list them.
PARAMS = [("udp", "ports"), ("ev", "stripe"), ("ev", "ecmp_flow_label"),
          ("headers", "eeth_op_bits"), ("headers", "eeth_sva_bit"), ("headers", "sva"),
          ("headers", "cc_type"), ("trim", "bytes"), ("srv6", "outer_traffic_class"),
          ("srv6", "wev_carriage"), ("dscp", "control")]
# One-parameter variants: the alternative each parameter takes (a TOML fragment).
ONE_PARAM = {
    "udp.ports": "[udp]\nports = [4971]\n",
    "ev.stripe": "[ev]\nstripe = \"high_in_sport\"\n",
    "ev.ecmp_flow_label": "[ev]\necmp_flow_label = \"ev\"\n",
    "headers.eeth_op_bits": "[headers]\neeth_op_bits = \"3..2\"\neeth_sva_bit = 1\n",
    "headers.sva": "[headers]\nsva = false\n",
    "headers.cc_type": "[headers]\ncc_type = 2\n",
    "trim.bytes": "[trim]\nbytes = 32\n",
    "srv6.outer_traffic_class": "[srv6]\nouter_traffic_class = \"zero\"\n",
    "srv6.wev_carriage": "[srv6]\nwev_carriage = \"none\"\n",
    "dscp.control": "[dscp]\ncontrol = 40\n",
}
# A changed parameter the sample set cannot show, with the reason.
NO_EVIDENCE_EXPECTED = {
    "headers.sva": "sva = false means SVA is never set; a capture without SVA is also what an "
                   "MRP0 DUT that reports no service time sends, so absence proves nothing",
}


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def flat(doc, defaults):
    """{"udp.ports": value, ...} of a parsed profile, absent keys from `defaults`."""
    out = {}
    for sec, key in PARAMS:
        name = f"{sec}.{key}"
        value = doc.get(sec, {}).get(key, defaults.get(name) if defaults else None)
        if name == "udp.ports" and isinstance(value, list):
            value = value[:1]  # a profile sends on its first port; that is what a capture shows
        out[name] = value
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mrct", required=True)
    ap.add_argument("--profiles", required=True, help="scenarios/profiles")
    args = ap.parse_args()

    with open(os.path.join(args.profiles, "wire-mrp0.toml"), "rb") as fh:
        defaults = flat(tomllib.load(fh), None)
    variants = []  # (name, path, changed parameter or None)
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(os.listdir(args.profiles)):
            if f.startswith("wire-") and f.endswith(".toml"):
                variants.append((f[:-5], os.path.join(args.profiles, f), None))
        for param, frag in ONE_PARAM.items():
            path = os.path.join(tmp, f"one-{param}.toml")
            with open(path, "w") as fh:
                fh.write(f"name = \"one-{param}\"\n{frag}")
            variants.append((f"only {param}", path, param))

        per_param = collections.defaultdict(collections.Counter)
        rows = []
        failures = []
        for name, path, changed in variants:
            with open(path, "rb") as fh:
                want = flat(tomllib.load(fh), defaults)
            sets = {"samples": [os.path.join(tmp, "s.pcap")],
                    "reference": [os.path.join(tmp, "ref", "a-eth0.pcapng"),
                                  os.path.join(tmp, "ref", "b-eth0.pcapng")]}
            rc, _, err = run([args.mrct, "craft", "-o", sets["samples"][0], "--profile", path])
            if rc != 0:
                print(f"mrct craft --profile {path}: exit {rc}: {err}", file=sys.stderr)
                return 2
            rc, _, err = run([args.mrct, "craft", "--reference", os.path.join(tmp, "ref"),
                              "--profile", path])
            if rc != 0:
                print(f"mrct craft --reference --profile {path}: exit {rc}: {err}",
                      file=sys.stderr)
                return 2
            for set_name, caps in sets.items():
                rc, out, err = run([args.mrct, "detect", *caps])
                if rc != 0:
                    print(f"mrct detect ({name}, {set_name}): exit {rc}: {err}", file=sys.stderr)
                    return 2
                got = flat(tomllib.loads(out), None)
                conf = {m[1]: float(m[2]) for m in
                        re.finditer(r"^(\S+) = .*?\(confidence ([0-9.]+)", err, re.M)}
                cells = []
                for param in want:
                    c = conf.get(param, 0.0)
                    if c > 0:
                        outcome = "ok" if got[param] == want[param] else "WRONG"
                    else:
                        outcome = "none" if got[param] == want[param] else "none-differs"
                    per_param[param][outcome] += 1
                    if outcome == "WRONG":
                        failures.append(f"{name} ({set_name}): {param} detected {got[param]}, "
                                        f"want {want[param]} (confidence {c:.2f})")
                    if (param == changed and set_name == "samples" and outcome != "ok"
                            and param not in NO_EVIDENCE_EXPECTED):
                        failures.append(f"{name} (samples): the changed parameter {param} was "
                                        f"not detected ({outcome}, got {got[param]})")
                    mark = {"ok": "ok", "WRONG": "WRONG", "none": "-",
                            "none-differs": "miss"}[outcome]
                    cells.append(mark + ("*" if param == changed else ""))
                rows.append((name, set_name, cells))

    print("Detection per parameter (all variants x {samples, reference}):")
    print(f"{'parameter':28} {'ok':>4} {'wrong':>6} {'no evidence':>12} {'missed':>7}  accuracy")
    tot = collections.Counter()
    for param in defaults:
        c = per_param[param]
        tot.update(c)
        judged = c["ok"] + c["WRONG"]
        acc = f"{100.0 * c['ok'] / judged:.0f}% of {judged}" if judged else "-"
        print(f"{param:28} {c['ok']:>4} {c['WRONG']:>6} {c['none']:>12} "
              f"{c['none-differs']:>7}  {acc}")
    judged = tot["ok"] + tot["WRONG"]
    print(f"{'all':28} {tot['ok']:>4} {tot['WRONG']:>6} {tot['none']:>12} "
          f"{tot['none-differs']:>7}  {100.0 * tot['ok'] / max(judged, 1):.1f}% of {judged}")
    print("\nPer variant and capture (ok = detected with evidence, - = no evidence and the "
          "default is right,\nmiss = no evidence and the default is wrong, * = the parameter "
          "the variant changes):")
    short = [p.split(".")[-1][:10] for p in defaults]
    print(f"{'variant':34} {'capture':10} " + " ".join(f"{s:>10}" for s in short))
    for name, set_name, cells in rows:
        print(f"{name:34} {set_name:10} " + " ".join(f"{c:>10}" for c in cells))
    for param, why in NO_EVIDENCE_EXPECTED.items():
        print(f"\nnot detectable: {param}: {why}")
    if failures:
        print("\nFAIL:\n  " + "\n  ".join(failures))
        return 1
    print("\ndetect_accuracy: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

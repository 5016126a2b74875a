#!/usr/bin/python3
"""Side by side: the same transfer under the same faults, with RC over the Linux rxe driver and
with MRC over the reference engine.

  RC/rxe        perftest ib_write_bw between two rxe devices (`mrct lab baseline`): real kernel
                RC, timings from the requester-side capture.
  RC/sim        the simulator's go-back-N RC model with rxe's parameters (67 ms ACK timeout,
                128 unacknowledged PSNs, AckReq every 64 packets), on one path of 8.
  RC/sim, MRC timer   the same with MRC's ACK timeout: separates "a shorter timer" from
                "multipath + selective recovery".
  MRC/rxe wire  measured: mrc-perf through lib_mrc.so attached to the same two rxe devices
                (`mrct lab mrc`: MRs registered on rxe, the reference engine on AF_PACKET
                sockets of the same veths), same transfer, same netem faults; goodput,
                latency, stalls and retransmissions from the requester-side capture exactly as
                RC/rxe's (labreport.analyze_mrc, decoded by `mrct decode --json`); mrc-perf's
                own figures (mrc_post_send to completion) in the "tool" column.
  MRC/sim       the reference engine (mrc_engine) on the simulator, spraying over 8 paths: an
                extra row, kept for the comparison with the model.

The simulated fabric is calibrated to the lab: every link runs at the goodput rxe reached with
no fault, the transfer is the baseline's (messages x bytes, 128 outstanding), the loss is the same
percentage on one hop each way, and the flap takes one of 8 paths down at the same point of the
transfer and for as long as the lab's flap lasted. For RC that path is its only path: the worst
case, which 1 RC flow in 8 meets when flows hash evenly; the other 7 see no fault at all.

Latency runs (one WRITE at a time, no fault, same boot): ib_write_lat next to mrc-perf
--test write_lat, both timed from the capture (first transmission -> the ACK that covers the
WRITE), with the tools' own figures and the MRC/RC ratios in a second table.

Writes <out>/<name>.json and <out>/<name>.md. Stdlib only.
Usage: side_by_side.py --baseline DIR [--sbs PATH] [--seeds 1,2,3] [--out lab/results]
       (DIR: `mrct lab baseline` or `mrct lab mrc` output; with mrc-perf runs in it the family
       is v6 and the measured MRC row is filled)
       side_by_side.py --run-lab [...]      (runs `mrct lab baseline --plan quick --family v4`)
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LAB = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, LAB)
import labreport  # noqa: E402


MRC_ROW = "MRC/rxe wire (lib_mrc.so, measured)"


def latency_params(runs):
    r = next((r for n, r in runs.items() if n.startswith(("v6-write_lat-clean",
                                                           "mrc-write_lat-clean"))), None)
    if not r:
        return None
    a = r.get("args", "").split()

    def arg(*flags):
        for fl in flags:
            if fl in a[:-1]:
                return a[a.index(fl) + 1]
        return "?"
    return f"{arg('-n', '--iters')} WRITEs of {arg('-s', '--size')} B, IPv6 GIDs"


def find_sbs(explicit):
    if explicit:
        return explicit
    cands = sorted(glob.glob(os.path.join(os.path.dirname(LAB), "build", "*", "bin", "mrc_lab_sbs")),
                   key=os.path.getmtime)
    return cands[-1] if cands else None


def sim_run(sbs, args):
    r = subprocess.run([sbs] + [str(a) for a in args], capture_output=True, text=True)
    if not r.stdout.strip():
        raise RuntimeError(f"mrc_lab_sbs {' '.join(map(str, args))} failed: {r.stderr.strip()[-300:]}")
    d = json.loads(r.stdout)
    comp = [c if c >= 0 else None for c in d["completion_ns"]]
    first = [t if t >= 0 else None for t in d["first_tx_ns"]]
    done = [c for c in comp if c is not None]
    payload = len(done) * d["params"]["msg_bytes"]
    st = labreport.timeline_stats(first, comp, done, payload)
    ok = d.get("status_counts", {})
    st["status"] = ok
    st["all_success"] = sum(v for k, v in ok.items() if "SUCCESS" in k.upper()) == len(comp)
    st["counters"] = d["counters"]
    st["params"] = d["params"]
    st["wall_s"] = round(d["wall_s"], 2)
    if "error" in d:
        st["error"] = d["error"]
    return st


def aggregate(runs):
    """Seed runs -> {metric: {mean, min, max}} for the table, plus the runs themselves."""
    def vals(f):
        return [v for v in (f(r) for r in runs) if v is not None]

    def agg(v):
        return None if not v else {"mean": round(statistics.mean(v), 4), "min": round(min(v), 4),
                                   "max": round(max(v), 4)}
    return {
        "seeds": len(runs),
        "completed": agg(vals(lambda r: r.get("completed"))),
        "all_success": all(r.get("all_success") for r in runs),
        "goodput_gbps": agg(vals(lambda r: r.get("goodput_gbps"))),
        "p50_ms": agg(vals(lambda r: r.get("latency_us", {}).get("p50", 0) / 1e3)),
        "p99_ms": agg(vals(lambda r: r.get("latency_us", {}).get("p99", 0) / 1e3)),
        "p999_ms": agg(vals(lambda r: r.get("latency_us", {}).get("p999", 0) / 1e3)),
        "max_ms": agg(vals(lambda r: r.get("latency_us", {}).get("max", 0) / 1e3)),
        "stall_ms": agg(vals(lambda r: r.get("progress", {}).get("stall_time_ms"))),
        "stalls": agg(vals(lambda r: r.get("progress", {}).get("stalls"))),
        "max_gap_ms": agg(vals(lambda r: r.get("progress", {}).get("max_gap_ms"))),
        "retransmits": agg(vals(lambda r: r.get("counters", {}).get("retransmits",
                                                                       r.get("retransmitted")))),
        "runs": runs,
    }


def capture_row(run, all_success):
    """A measured run's row from its capture analysis (labreport.analyze_rc / analyze_mrc)."""
    a = run.get("analysis", {})
    if not a or "error" in a or not a.get("completed"):
        return None
    row = {"seeds": 1, "completed": {"mean": a.get("completed")}, "all_success": all_success,
           "client_rc": run["client_rc"], "source": "capture"}
    lat = a.get("latency_us", {})
    pr = a.get("progress", {})
    for k, v in (("goodput_gbps", a.get("goodput_gbps")), ("p50_ms", lat.get("p50")),
                 ("p99_ms", lat.get("p99")), ("p999_ms", lat.get("p999")), ("max_ms", lat.get("max")),
                 ("stall_ms", pr.get("stall_time_ms")), ("stalls", pr.get("stalls")),
                 ("max_gap_ms", pr.get("max_gap_ms")), ("retransmits", a.get("retransmitted"))):
        if v is not None and k in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
            v = v / 1e3
        row[k] = None if v is None else {"mean": v, "min": v, "max": v}
    row["analysis"] = a
    return row


def rxe_row(run):
    a = run.get("analysis", {})
    row = capture_row(run, run["ok"] and a.get("completed") == a.get("messages"))
    if row is None:
        return None
    pt = run.get("perftest", {})
    if "bw_average_gb_per_sec" in pt:
        row["tool"] = f"perftest {pt['bw_average_gb_per_sec']:.3f} Gb/s"
    elif pt.get("t_typical_usec") is not None:
        row["tool"] = f"perftest typical {pt['t_typical_usec']:.1f} us (half round trip)"
    return row


def mrc_perf_figure(m):
    lat = m.get("latency_us", {})
    txt = f"mrc-perf {m['gbit_per_s']:.3f} Gb/s" if "gbit_per_s" in m else "mrc-perf"
    if lat.get("p99") is not None:
        txt += (f", post->completion p50 / p99 {lat.get('p50', 0) / 1e3:.2f} / "
                f"{lat['p99'] / 1e3:.2f} ms")
    return txt


def mrc_perf_row(run):
    """A measured MRC run (`mrct lab mrc`): the capture's figures, as RC/rxe's. A run of a lab
    older than the MRC capture (no pcap) keeps mrc-perf's goodput only: its latency
    (mrc_post_send to completion, behind 127 queued messages) is not the same quantity and stays
    out of the wire columns."""
    m = run.get("mrc_perf") or {}
    if "gbit_per_s" not in m:
        return None
    ok = run["ok"] and bool(m.get("ok"))
    row = capture_row(run, ok)
    if row is None:
        row = {"seeds": 1, "completed": {"mean": m.get("messages")}, "all_success": ok,
               "client_rc": run["client_rc"], "source": "mrc-perf (no capture)",
               "goodput_gbps": {"mean": m["gbit_per_s"], "min": m["gbit_per_s"],
                                "max": m["gbit_per_s"]}}
        why = (run.get("analysis") or {}).get("error")
        if why:
            row["analysis_error"] = why
    row["tool"] = mrc_perf_figure(m)
    row["mrc_perf"] = m
    row["rxe_counters_delta"] = run.get("rxe_counters_delta")
    return row


def ratio(a, b):
    return None if a is None or b in (None, 0) else round(a / b, 2)


def latency_table(runs):
    """The latency runs (ib_write_lat, mrc-perf write_lat), or None when the lab had none."""
    rc = next((r for n, r in runs.items() if n.startswith("v6-write_lat-clean")), None)
    mrc = next((r for n, r in runs.items() if n.startswith("mrc-write_lat-clean")), None)
    if not rc and not mrc:
        return None
    out = {}
    for name, r in (("RC/rxe ib_write_lat (Linux kernel)", rc),
                    ("MRC/rxe mrc-perf write_lat (lib_mrc.so)", mrc)):
        if r is None:
            out[name] = None
            continue
        a = r.get("analysis") or {}
        row = {"client_rc": r["client_rc"], "ok": r["ok"], "args": r.get("args"),
               "messages": a.get("messages"), "completed": a.get("completed"),
               "wire_us": a.get("latency_us"), "retransmitted": a.get("retransmitted"),
               "analysis_error": a.get("error")}
        if r.get("tool") == "mrc-perf":
            m = r.get("mrc_perf") or {}
            row["ok"] = r["ok"] and bool(m.get("ok"))
            row["tool_us"] = {k: m.get("latency_us", {}).get(k) for k in ("p50", "p99", "p999")}
            row["tool_what"] = "mrc_post_send -> completion"
        else:
            pt = r.get("perftest") or {}
            row["tool_us"] = {"p50": pt.get("t_typical_usec"),
                              "p99": pt.get("99pct_percentile_usec"),
                              "p999": pt.get("99_9pct_percentile_usec")}
            row["tool_what"] = "perftest -C: half the ping-pong round trip (typical, 99 %, 99.9 %)"
        out[name] = row
    rows = list(out.values())
    if all(rows) and all(x.get("wire_us") for x in rows):
        out["MRC / RC"] = {k: ratio(rows[1]["wire_us"].get(k), rows[0]["wire_us"].get(k))
                           for k in ("p50", "p99", "p999", "max")}
    return out


def fmt(m, key, digits=2):
    v = m.get(key) if m else None
    if not v:
        return "-"
    if v.get("min") is None or v["min"] == v["max"]:
        return f"{v['mean']:.{digits}f}"
    return f"{v['mean']:.{digits}f} ({v['min']:.{digits}f}-{v['max']:.{digits}f})"


def markdown(rep):
    p = rep["params"]
    env = rep["environment"]
    L = [f"# Side by side: RC over rxe vs MRC through lib_mrc.so on the same rxe devices "
         f"({rep['date']})", "",
         "Generated by `lab/side_by_side.py`; raw numbers in the JSON next to this file.", "",
         "## What ran", "",
         f"* Transfer: {p['messages']} RDMA WRITEs of {p['msg_bytes']} B, {p['window']} outstanding "
         "(perftest `ib_write_bw` defaults), 4096 B path MTU.",
         f"* RC/rxe: Linux {env.get('kernel')} rdma_rxe, two devices on a veth/bridge wire "
         f"({env.get('mode')} mode), perftest, timings from the requester-side capture (on "
         f"{env.get('capture_if') or 'mrcA0'}). Faults by netem on the bridge ports (carrier "
         "kept).",
         f"* Simulator: one plane of {p['paths']} paths, every link {p['link_gbps']} Gb/s "
         f"({'given with --link-gbps' if p.get('link_given') else '= RC/rxe' + chr(39) + 's no-fault goodput'}), {p['prop_ns']} ns per link; unloaded RTT "
         f"{p['base_rtt_us']:.0f} us. RC model: ACK timeout {p['rc_timeout_ms']:.1f} ms, 128 PSN "
         f"window, AckReq every 64 packets, on path 0. MRC: {p['mrc_evs']} EVs, ACK timeout "
         f"{p['mrc_timeout_ms']:.2f} ms, probe interval {p['mrc_probe_ms']:.2f} ms, MPR 128 PSNs, "
         "no congestion control (RC has none either).",
         *([f"* MRC/rxe wire (measured): `mrc-perf` through `lib_mrc.so` attached to the same "
            "two rxe devices (MRs registered with `ibv_reg_mr` on rxe, rxe's rkeys), the reference "
            "engine on AF_PACKET sockets of the same veths, IPv6 GIDs, the same transfer "
            f"({p['messages']} x {p['msg_bytes']} B, {p['window']} outstanding) and the same "
            "netem faults, captured on the same interface as RC/rxe; its goodput, latency, "
            "stalls and retransmissions come from that capture (decoded by `mrct decode "
            "--json`) with RC/rxe's definitions (where the lab kept no capture, see the notes). "
            "mrc-perf's own figures are in the last column "
            "(its latency runs from `mrc_post_send`, so a message's wait behind the 127 queued "
            "before it counts: not comparable with the wire columns). RC/rxe ran on the IPv6 "
            "GIDs in the same boot."]
           if rep.get("measured_mrc") else
           ["* MRC/rxe wire: not run (the baseline has no `mrct lab mrc` runs)."]),
         f"* Loss: {p['loss_pct']} % per packet on one hop in each direction (rxe: both bridge "
         "ports; simulator: every leaf->spine link).",
         f"* Flap: one link of {p['paths']} dark for {p['flap_ms']:.0f} ms starting "
         f"{p['flap_at_ms']:.0f} ms after the first data packet (the lab's measured flap). RC's "
         "flow is on that link (worst case; with even hashing 7 RC flows in 8 see nothing).",
         f"* Simulator figures: mean (min-max) over seeds {', '.join(map(str, p['seeds']))}; "
         "RC/rxe: one run.", "",
         "Latency = completion - first transmission of the message. Stall = a gap between "
         "message completions (messages completed at the same instant count once) longer than "
         "10x the run's median gap; stall ms is their sum.", ""]
    cols = ("| transport | done | goodput Gb/s | p50 ms | p99 ms | p99.9 ms | max ms | stalls | "
            "stall ms | max gap ms | rtx pkts | tool's own figure |")
    for fault in ("none", "loss", "flap"):
        L += [f"## Fault: {rep['fault_names'][fault]}", "", cols, "|" + "---|" * 12]
        for name, m in rep["rows"][fault].items():
            if m is None:
                L.append(f"| {name} | not run | | | | | | | | | | |")
                continue
            done = m.get("completed", {}).get("mean")
            done_s = "-" if done is None else f"{done:.0f}/{p['messages']}"
            if not m.get("all_success"):
                done_s += " (QP error)" if m.get("client_rc", 0) != 0 or done != p["messages"] else ""
            # goodput over the messages that made it before a QP error would flatter the run
            gp = fmt(m, 'goodput_gbps', 3) if m.get("all_success") or done == p["messages"] else "-"
            L.append(f"| {name} | {done_s} | {gp} | {fmt(m, 'p50_ms')} | "
                     f"{fmt(m, 'p99_ms')} | {fmt(m, 'p999_ms')} | {fmt(m, 'max_ms')} | "
                     f"{fmt(m, 'stalls', 0)} | {fmt(m, 'stall_ms', 1)} | {fmt(m, 'max_gap_ms', 1)} | "
                     f"{fmt(m, 'retransmits', 0)} | {m.get('tool', '')} |")
        r = rep.get("ratios", {}).get(fault)
        if r:
            L.append("")
            L.append("MRC/rxe over RC/rxe (both from the capture): " + ", ".join(
                f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in r.items()) + ".")
        L.append("")
    lt = rep.get("latency")
    if lt:
        L += ["## One WRITE at a time (latency), no fault", "",
              f"`ib_write_lat` and `mrc-perf --test write_lat` in the same boot, "
              f"{rep['latency_params']}. Wire = the requester-side capture: first transmission "
              "of the WRITE to the first ACK covering it (RC: AETH ACK; MRC: transport ACK), "
              "the same definition as above. Tool = each program's own figure (they measure "
              "different things: perftest's ping-pong half round trip, mrc-perf's post to "
              "completion).", "",
              "| transport | done | wire p50 us | wire p99 us | wire p99.9 us | wire max us | "
              "rtx pkts | tool p50 / p99 / p99.9 us | tool measures |", "|" + "---|" * 9]
        for name, x in lt.items():
            if name == "MRC / RC":
                continue
            if x is None:
                L.append(f"| {name} | not run | | | | | | | |")
                continue
            w = x.get("wire_us") or {}
            t = x.get("tool_us") or {}

            def us(v):
                return "-" if v is None else f"{v:.1f}"
            done = "-" if x.get("completed") is None else f"{x['completed']}/{x['messages']}"
            if not x.get("ok"):
                done += f" (exit {x['client_rc']})"
            L.append(f"| {name} | {done} | {us(w.get('p50'))} | {us(w.get('p99'))} | "
                     f"{us(w.get('p999'))} | {us(w.get('max'))} | {x.get('retransmitted', '-')} | "
                     f"{us(t.get('p50'))} / {us(t.get('p99'))} / {us(t.get('p999'))} | "
                     f"{x['tool_what']} |")
        if lt.get("MRC / RC"):
            L.append("")
            L.append("MRC/rxe over RC/rxe, wire latency: " + ", ".join(
                f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in lt["MRC / RC"].items()) + ".")
        L.append("")
    L += ["## Reading it", ""] + [f"* {n}" for n in rep["notes"]] + [""]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", help="output directory of `mrct lab baseline` (has results.json)")
    ap.add_argument("--run-lab", action="store_true", help="run the lab's quick v4 baseline first")
    ap.add_argument("--family", default="v4", choices=["v4", "v6"])
    ap.add_argument("--sbs", help="mrc_lab_sbs binary (default build/*/bin/mrc_lab_sbs)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--link-gbps", type=float, help="override the calibration (needed when the "
                    "RC clean run failed)")
    ap.add_argument("--out", default=os.path.join(LAB, "results"))
    ap.add_argument("--name", default="side_by_side")
    a = ap.parse_args()
    sbs = find_sbs(a.sbs)
    if not sbs or not os.path.isfile(sbs):
        print("side_by_side: mrc_lab_sbs not found (ninja mrc_lab_sbs, or --sbs)", file=sys.stderr)
        return 2
    base = a.baseline
    if a.run_lab:
        base = tempfile.mkdtemp(prefix="mrc-sbs-lab-")
        r = subprocess.run([os.path.join(LAB, "mrct-lab"), "baseline", "--plan", "quick",
                            "--family", a.family, "--out", base])
        if r.returncode not in (0, 1):
            print(f"side_by_side: the lab baseline failed (exit {r.returncode})", file=sys.stderr)
            return r.returncode
    if not base or not os.path.isfile(os.path.join(base, "results.json")):
        print("side_by_side: --baseline DIR (with results.json) or --run-lab is needed",
              file=sys.stderr)
        return 2
    with open(os.path.join(base, "results.json")) as fh:
        lab = json.load(fh)
    runs = {r["name"]: r for r in lab["runs"]}
    measured = any(r.get("tool") == "mrc-perf" for r in runs.values())
    fam = "v6" if measured else a.family

    def pick(prefix):
        c = [r for n, r in runs.items() if n.startswith(f"{fam}-write_bw-{prefix}")]
        return c[0] if c else None
    rxe = {"none": pick("clean"), "loss": pick("loss"), "flap": pick("flap")}

    def pick_mrc(prefix):
        c = [r for n, r in runs.items() if n.startswith(f"mrc-write_bw-{prefix}")]
        return c[0] if c else None
    mrc_real = {"none": pick_mrc("clean"), "loss": pick_mrc("loss"), "flap": pick_mrc("flap")}
    if not rxe["none"] or "goodput_gbps" not in rxe["none"].get("analysis", {}):
        print(f"side_by_side: no analysed {fam}-write_bw-clean run in {base}", file=sys.stderr)
        return 2
    clean = rxe["none"]["analysis"]
    clean_ok = rxe["none"]["ok"] and clean.get("completed") == clean.get("messages")
    if not clean_ok and not a.link_gbps:
        # a failed run's goodput is not the wire's: the simulator needs it from elsewhere
        print(f"side_by_side: {fam}-write_bw-clean did not complete (client exit "
              f"{rxe['none']['client_rc']}); give the simulator's link rate with --link-gbps",
              file=sys.stderr)
        return 2
    link = a.link_gbps or round(clean["goodput_gbps"], 4)
    args0 = rxe["none"]["args"].split()

    def arg(flag, default):
        return int(args0[args0.index(flag) + 1]) if flag in args0[:-1] else default
    msg_bytes = arg("-s", 65536)
    # the transfer as asked (-n), not as far as a failed run got
    messages = arg("-n", clean["messages"])
    loss_pct = float(rxe["loss"]["fault"].split(":")[1]) if rxe["loss"] else 1.0
    flap_at_ms, flap_ms = 400.0, 200.0
    fr = rxe["flap"]
    if fr and "flap" in fr and "first_tx_ns" in fr.get("analysis", {}):
        flap_at_ms = (fr["flap"]["down_us"] * 1e3 - fr["analysis"]["first_tx_ns"]) / 1e6
        flap_ms = (fr["flap"]["up_us"] - fr["flap"]["down_us"]) / 1e3
    seeds = [int(s) for s in a.seeds.split(",")]
    common = ["--messages", messages, "--msg-bytes", msg_bytes, "--window", 128, "--paths", 8,
              "--link-gbps", link, "--loss-pct", loss_pct,
              "--flap-at-ns", int(flap_at_ms * 1e6), "--flap-ns", int(flap_ms * 1e6),
              "--flap-path", 0]
    t0 = time.time()
    rows = {f: {} for f in ("none", "loss", "flap")}
    mrc_runs = {f: [sim_run(sbs, common + ["--transport", "mrc", "--fault", f, "--seed", s])
                    for s in seeds] for f in rows}
    mparams = mrc_runs["none"][0]["params"]["mrc"]
    mrc_timeout_ns = int(mparams["timeout_us"] * 1e3)
    for f in rows:
        rows[f]["RC/rxe (Linux kernel)"] = rxe_row(rxe[f]) if rxe[f] else None
        rows[f][MRC_ROW] = mrc_perf_row(mrc_real[f]) if mrc_real[f] else None
        rows[f]["RC/sim, rxe timers"] = aggregate(
            [sim_run(sbs, common + ["--transport", "rc", "--fault", f, "--seed", s]) for s in seeds])
        if f != "none":
            rows[f]["RC/sim, MRC timer"] = aggregate(
                [sim_run(sbs, common + ["--transport", "rc", "--fault", f, "--seed", s,
                                        "--rc-timeout-ns", mrc_timeout_ns]) for s in seeds])
        rows[f]["MRC/sim (reference engine, simulated)"] = aggregate(mrc_runs[f])
    sim_wall = time.time() - t0
    rc0 = rows["none"]["RC/sim, rxe timers"]["runs"][0]["params"]

    def g(f, n):
        m = rows[f].get(n)
        return (m or {}).get("goodput_gbps", {}) or {}
    notes = []
    for f in ("loss", "flap"):
        for n in ("RC/rxe (Linux kernel)", MRC_ROW,
                  "RC/sim, rxe timers", "MRC/sim (reference engine, simulated)"):
            ok = all((rows[x].get(n) or {}).get("all_success") for x in ("none", f))
            a0, a1 = g("none", n).get("mean"), g(f, n).get("mean")
            if ok and a0 and a1:
                notes.append(f"{n} under {f}: goodput {100 * a1 / a0:.0f} % of its no-fault run.")
    if a.link_gbps:
        notes.append(f"The simulator's links run at {link} Gb/s, given with --link-gbps "
                     f"(RC/rxe's no-fault goodput in this run: "
                     f"{clean.get('goodput_gbps', 0):.3f} Gb/s"
                     f"{'' if clean_ok else ', and the run did not complete'}).")
    for f in rows:
        r = rxe[f]
        if r and not r["ok"]:
            # perftest's own words for why the QP stopped ("Failed status 9: ...")
            why = ""
            cp = os.path.join(base, f"{r['name']}.client.txt")
            if os.path.isfile(cp):
                with open(cp, errors="replace") as fh:
                    why = next((x.strip() for x in fh if x.strip().startswith("Failed status")), "")
            notes.append(f"RC/rxe {r['name']} did not complete (client exit {r['client_rc']}"
                         f"{': perftest ' + repr(why) if why else ''}); its latency columns cover "
                         "the messages completed before the QP error.")
    ratios = {}
    for f in rows:
        rc_m, mrc_m = rows[f].get("RC/rxe (Linux kernel)"), rows[f].get(MRC_ROW)
        if rc_m and mrc_m and rc_m.get("source") == mrc_m.get("source") == "capture" \
                and rc_m.get("all_success") and mrc_m.get("all_success"):
            ratios[f] = {k.replace("_gbps", "").replace("_ms", ""):
                         ratio(mrc_m[k]["mean"], rc_m[k]["mean"])
                         for k in ("goodput_gbps", "p50_ms", "p99_ms", "p999_ms")
                         if mrc_m.get(k) and rc_m.get(k)}
    if measured:
        nocap = [f for f in rows if (rows[f].get(MRC_ROW) or {}).get("source", "").startswith(
            "mrc-perf")]
        if nocap:
            notes.append("MRC/rxe wire under " + ", ".join(nocap) + ": the lab kept no capture "
                         "of these MRC runs (labs before 2026-11-28 did not capture MRC), so "
                         "their goodput is mrc-perf's and the latency, stall and retransmission "
                         "columns stay empty rather than hold mrc-perf's post-to-completion "
                         "latency, which is another quantity; rerun `mrct lab mrc` for them.")
        if len(nocap) < len(rows):
            notes.append("MRC/rxe wire: done counts the messages completed in the capture (the "
                         "transport ACK covering the message's last PSN); mrc-perf verified "
                         "every byte at the responder as well when its run says ok.")
        else:
            notes.append("MRC/rxe wire: done counts the messages mrc-perf completed and "
                         "verified.")
    # the latency runs belong to `mrct lab mrc`; a baseline's write_lat has no MRC peer
    lat_table = latency_table(runs) if measured else None
    notes += [
        "RC/rxe runs inside a TCG guest on a shared 2-core host (load average at the run: "
        f"{', '.join(f'{x:.1f}' for x in lab.get('host_loadavg', []))}); even its no-fault run "
        "retransmits (go-backs without a NAK; rxe1's duplicate_request counter shows the "
        "originals had arrived), which we attribute to the starved guest, so RC/rxe figures are "
        "noisier than the simulator's and vary from run to run.",
        "RC/sim vs RC/rxe is the check on the simulator's RC model: both go back N on a NAK and "
        "wait a full ACK timeout when the tail of a burst is lost.",
        f"For the flap, RC/sim shows the flow on the failed link; {100 * 7 / 8:.1f} % of RC flows "
        "(7 in 8) would run as in the no-fault table.",
        "The RC model gives up after 7 timeouts without progress (RETRY_EXC_ERR), as the IBTA "
        "retry count and RoCE NICs do; rxe instead treats retry_cnt 7 (perftest's default) as "
        "'retry forever' (rxe_comp.c), so RC/rxe never fails on a flap, it only waits.",
        f"Simulator runs took {sim_wall:.0f} s of wall time in all.",
    ]
    rep = {"date": time.strftime("%Y-%m-%d"), "baseline": os.path.abspath(base),
           "measured_mrc": measured,
           "environment": {"mode": lab.get("mode"), "kernel": lab.get("kernel"),
                           "capture_if": ", ".join(sorted({(r.get("capture") or {}).get(
                               "interface", "mrcA0") for r in runs.values()
                               if r.get("capture")})),
                           "host_loadavg": lab.get("host_loadavg"), "host_cpus": lab.get("host_cpus")},
           "params": {"messages": messages, "msg_bytes": msg_bytes, "window": 128, "paths": 8,
                      "link_gbps": link, "link_given": bool(a.link_gbps), "prop_ns": rc0["prop_ns"], "base_rtt_us": rc0["base_rtt_us"],
                      "loss_pct": loss_pct, "flap_at_ms": flap_at_ms, "flap_ms": flap_ms,
                      "rc_timeout_ms": 67.108864, "mrc_timeout_ms": mparams["timeout_us"] / 1e3,
                      "mrc_probe_ms": mparams["probe_interval_us"] / 1e3, "mrc_evs": mparams["evs"],
                      "seeds": seeds},
           "fault_names": {"none": "none", "loss": f"{loss_pct:g} % random loss",
                           "flap": f"one link of 8 down for {flap_ms:.0f} ms"},
           "rows": rows, "ratios": ratios, "latency": lat_table,
           "latency_params": latency_params(runs), "notes": notes}
    os.makedirs(a.out, exist_ok=True)
    jp = os.path.join(a.out, a.name + ".json")
    # the per-seed runs carry no per-message arrays, so the JSON stays small
    with open(jp, "w") as fh:
        json.dump(rep, fh, indent=1)
    md = markdown(rep)
    with open(os.path.join(a.out, a.name + ".md"), "w") as fh:
        fh.write(md)
    print(md)
    print(f"written {jp} and {a.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

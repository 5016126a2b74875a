#!/usr/bin/python3
"""The experiments of docs/simulation.md ("Experiments") with `mrct sim`: runs mrct-sim for each
experiment and seed, writes a JSON summary and PNG/SVG plots (matplotlib).

  a  time back to full goodput after a link failure against the number of EVs per QP
  b  MRC against single-path RC (go-back-N, one hashed path per QP) and against spraying without
     EV retirement, on the same fabric and permutation, with a cable failed for good and a flap
  c  trimming on and off: an incast into small queues

Recovery time (a, b): goodput is the bytes placed at the destinations per bin (mrct sim run
--timeseries-us), summed over all hosts. The pre-failure level is its mean over the bins of
[fail - pre, fail). The recovery time is the time from the failure to the start of the first bin
from which every bin up to the horizon holds at least 95 % of that level (0 when no bin fell
below). The horizon is the end of the run, or the start of the bin of the first flow completion
if a flow completes earlier (completions lower the aggregate). "not recovered" when even the last
bin is below. Each failure run has a fault-free control with the same seed (identical up to the
failure): the control's own "recovery time" at the same instant is the metric's noise floor, and
the bytes the control placed before the horizon minus the failure run's, divided by the
pre-failure rate, is the goodput lost to the failure in microseconds of full goodput
(lost_us). The goodput may settle below the pre-failure level (a failure can take away more than
the transport wins back); the settling time is the time from the failure to the start of the
first bin from which every bin up to the horizon holds at least 98 % of the final level (the
mean over the last --final-us before the horizon).

  bench/sim_experiments.py --mrct-sim build/release/bin/mrct-sim --seeds 1,2 --out docs/img
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USAGE = 2


def die(msg):
    print("sim_experiments: " + msg, file=sys.stderr)
    sys.exit(USAGE)


try:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "mrct-sim-experiments"  # SVGs identical run to run
    import matplotlib.pyplot as plt
except ImportError:
    die("matplotlib is missing: install python3-matplotlib (ci/install-deps.sh does) and run "
        "this script with /usr/bin/python3")


def int_list(text, name):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        die(f"--{name}: a comma-separated list of integers, got {text!r}")
    if not v or any(x <= 0 for x in v):
        die(f"--{name}: positive integers, got {text!r}")
    return v


class Runner:
    def __init__(self, args):
        self.a = args
        self.work = args.work
        os.makedirs(self.work, exist_ok=True)
        self.cms = {}

    def cm(self, kind, seed, extra):
        key = (kind, seed, tuple(extra))
        if key in self.cms:
            return self.cms[key]
        path = os.path.join(self.work, f"{kind}_s{seed}_" + "_".join(extra).replace("-", "") +
                            ".cm")
        cmd = [self.a.mrct_sim, "gen", kind, "--nodes", str(self.a.hosts), "--seed", str(seed),
               "-o", path] + extra
        subprocess.run(cmd, check=True)
        self.cms[key] = (path, cmd)
        return self.cms[key]

    def topo(self, name, fail_lines):
        a = self.a
        path = os.path.join(self.work, name + ".topo")
        with open(path, "w") as f:
            f.write(f"hosts {a.hosts}\nplanes {a.planes}\nhosts_per_leaf {a.hosts_per_leaf}\n"
                    f"spines {a.spines}\nfabric_rate_gbps {a.fabric_gbps:g}\n")
            for line in fail_lines:
                f.write(line + "\n")
        return path

    def run(self, name, topo, cm, seed, extra, end_us):
        out = os.path.join(self.work, name + ".json")
        cmd = [self.a.mrct_sim, "run", "--topo", topo, "--cm", cm, "--seed", str(seed),
               "--end-us", str(end_us), "--timeseries-us", str(self.a.bin_us), "--no-perf", "-q",
               "-o", out] + extra
        if self.a.reuse and os.path.exists(out):
            with open(out) as f:
                return json.load(f), cmd
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 1):  # 1: some flows still running at --end-us
            die(f"{shlex.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
        with open(out) as f:
            return json.load(f), cmd


def goodput_gbps(result):
    ts = result["timeseries"]
    bin_ns = ts["bin_ns"]
    return bin_ns, [b * 8 / bin_ns for b in ts["bytes"]]


def recovery(result, fail_us, pre_us, end_us, final_us, threshold=0.95, settle=0.98):
    """The recovery-time metric of the module docstring. Times in us."""
    bin_ns, g = goodput_gbps(result)
    bin_us = bin_ns / 1000
    first_done = min((f["start_ns"] + f["fct_ns"] for f in result["flows"] if f["done"]),
                     default=None)
    horizon_us = end_us
    if first_done is not None:
        horizon_us = min(horizon_us, (first_done // bin_ns) * bin_us)
    k_fail = int(round(fail_us / bin_us))
    k_pre = int(round((fail_us - pre_us) / bin_us))
    k_end = min(len(g), int(horizon_us // bin_us))
    if k_pre < 0 or k_end <= k_fail or k_pre >= k_fail:
        return {"error": "the failure must be at least --pre-us after 0 and before the horizon"}
    pre = sum(g[k_pre:k_fail]) / (k_fail - k_pre)
    post = g[k_fail:k_end]
    level = threshold * pre
    last_bad = max((i for i, v in enumerate(post) if v < level), default=None)
    if last_bad is None:
        rec = 0.0
    elif last_bad == len(post) - 1:
        rec = None
    else:
        rec = (last_bad + 1) * bin_us
    k_final = max(0, len(post) - int(round(final_us / bin_us)))
    final = sum(post[k_final:]) / max(1, len(post) - k_final)
    last_unsettled = max((i for i, v in enumerate(post[:k_final]) if v < settle * final),
                         default=None)
    return {"pre_gbps": pre, "min_ratio": min(post) / pre if pre > 0 else 0.0,
            "recovery_us": rec, "horizon_us": horizon_us, "final_ratio": final / pre,
            "settle_us": 0.0 if last_unsettled is None else (last_unsettled + 1) * bin_us,
            "placed_by_horizon": sum(result["timeseries"]["bytes"][:k_end])}


def summary_row(result):
    s = result["summary"]
    q = {c["class"]: c for c in s["queues"]}
    return {
        "completed": s["completed"], "flows": s["flows"],
        "with_error": s["completed_with_error"],
        "fct_p50_us": s["fct_ns"]["p50"] / 1000, "fct_p99_us": s["fct_ns"]["p99"] / 1000,
        "fct_max_us": s["fct_ns"]["max"] / 1000,
        "data_packets": s["data_packets_sent"], "retransmits": s["retransmits"]["total"],
        "rtx_timeout": s["retransmits"]["timeout"], "rtx_sack_gap": s["retransmits"]["sack_gap"],
        "rtx_nack": s["retransmits"]["nack"],
        "ev_retirements": s["ev_retirements"],
        "drops": sum(c["drops"] for c in q.values()),
        "trims": sum(c["trims"] for c in q.values()),
        "delivered_bytes": sum(result["timeseries"]["bytes"]),
        "rc_go_backs": s.get("rc", {}).get("go_backs"),
    }


def save(fig, out, name):
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(out, f"{name}.{ext}"), dpi=110, bbox_inches="tight",
                    **({"metadata": {"Date": None}} if ext == "svg" else {}))
    plt.close(fig)


def plot_series(ax, result, label, end_us=None, **kw):
    bin_ns, g = goodput_gbps(result)
    if end_us is not None:  # leave out a bin that starts at the end of the run (it is empty)
        g = g[:int(end_us * 1000 // bin_ns)]
    ax.plot([k * bin_ns / 1000 for k in range(len(g))], [v / 1000 for v in g], label=label,
            drawstyle="steps-post", **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mrct-sim", default=os.path.join(TOP, "build", "release", "bin", "mrct-sim"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "mrct-sim-experiments"),
                    help="topology, workload and result files")
    ap.add_argument("--out", default=None, help="summary.json and plots (default: --work)")
    ap.add_argument("--experiments", default="a,b,c")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--planes", type=int, default=2)
    ap.add_argument("--hosts-per-leaf", type=int, default=8)
    ap.add_argument("--spines", type=int, default=8)
    ap.add_argument("--fabric-gbps", type=float, default=400,
                    help="leaf-spine cables (default: a core with twice the hosts' capacity, so "
                         "that the capacity a failed cable takes away is not what limits)")
    ap.add_argument("--size", type=int, default=32_000_000, help="bytes per permutation flow")
    ap.add_argument("--evs-list", default="4,8,16,32,64,128", help="experiment a")
    ap.add_argument("--evs", type=int, default=32, help="EVs per QP in b and c")
    ap.add_argument("--fail", default="plane 1 leaf 0 spine 0",
                    help="what fails (a 'fail' line of the topology file without 'down ...')")
    ap.add_argument("--fail-us", type=float, default=300)
    ap.add_argument("--flap-us", type=float, default=100, help="b: the flap's length")
    ap.add_argument("--pre-us", type=float, default=100)
    ap.add_argument("--end-us", type=float, default=800)
    ap.add_argument("--final-us", type=float, default=200,
                    help="the final level: mean goodput over this long before the horizon")
    ap.add_argument("--reuse", action="store_true",
                    help="use the result files already in --work (same options), e.g. to plot again")
    ap.add_argument("--bin-us", type=float, default=10)
    ap.add_argument("--incast-senders", type=int, default=32)
    ap.add_argument("--incast-size", type=int, default=1_000_000)
    ap.add_argument("--incast-queue-bytes", type=int, default=131072)
    ap.add_argument("--incast-ecn-bytes", type=int, default=32768)
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    args = ap.parse_args()
    args.mrct_sim = os.path.abspath(args.mrct_sim)
    if not os.access(args.mrct_sim, os.X_OK):
        die(f"--mrct-sim {args.mrct_sim}: not an executable (cmake --preset release && "
            "cmake --build build/release --target mrct-sim)")
    seeds = int_list(args.seeds, "seeds")
    evs_list = int_list(args.evs_list, "evs-list")
    exps = set(args.experiments.split(","))
    if not exps or not exps <= {"a", "b", "c"}:
        die(f"--experiments: a subset of a,b,c, got {args.experiments!r}")
    if args.fail_us - args.pre_us < 0 or args.fail_us >= args.end_us:
        die("--fail-us must be at least --pre-us and below --end-us")
    out = args.out or args.work
    os.makedirs(out, exist_ok=True)
    R = Runner(args)
    fail_down = f"fail {args.fail} down from_us {args.fail_us:g}"
    flap = f"fail {args.fail} down from_us {args.fail_us:g} until_us {args.fail_us + args.flap_us:g}"
    topo_fail = R.topo("fail", [fail_down])
    topo_flap = R.topo("flap", [flap])
    topo_ctl = R.topo("control", [])
    summary = {"config": vars(args), "definition": __doc__.split("\n\n")[2].replace("\n", " "),
               "commands": {}, "a": [], "b": [], "c": []}

    jobs = []  # (experiment, row, name, topo, cm, seed, extra, end_us)
    for seed in seeds:
        cm, gen = R.cm("permutation", seed, ["--size", str(args.size)])
        summary["commands"][f"gen permutation seed {seed}"] = shlex.join(gen)
        if "a" in exps:
            for evs in evs_list:
                for fault, topo in (("fail", topo_fail), ("control", topo_ctl)):
                    jobs.append(("a", {"seed": seed, "evs": evs, "fault": fault},
                                 f"a_evs{evs}_s{seed}" + ("_ctl" if fault == "control" else ""),
                                 topo, cm, seed, ["--evs", str(evs)], args.end_us))
        if "b" in exps:
            for fault, topo in (("fail", topo_fail), ("flap", topo_flap), ("control", topo_ctl)):
                for tr in ("mrc", "rc", "spray"):
                    jobs.append(("b", {"seed": seed, "fault": fault, "transport": tr},
                                 f"b_{fault}_{tr}_s{seed}", topo, cm, seed,
                                 ["--transport", tr, "--evs", str(args.evs)], args.end_us))
        if "c" in exps:
            icm, igen = R.cm("incast", seed, ["--senders", str(args.incast_senders), "--dst", "0",
                                              "--size", str(args.incast_size)])
            summary["commands"][f"gen incast seed {seed}"] = shlex.join(igen)
            topo_c = R.topo("incast", [])
            for trim in (True, False):
                extra = ["--evs", str(args.evs), "--queue-bytes", str(args.incast_queue_bytes),
                         "--ecn-threshold-bytes", str(args.incast_ecn_bytes)]
                if not trim:
                    extra.append("--no-trim")
                jobs.append(("c", {"seed": seed, "trim": trim}, f"c_trim{int(trim)}_s{seed}",
                             topo_c, icm, seed, extra, 100_000))

    def one(job):
        exp, row, name, topo, cm, seed, extra, end_us = job
        print(f"sim_experiments: {name}", file=sys.stderr, flush=True)
        result, cmd = R.run(name, topo, cm, seed, extra, end_us)
        row = dict(row, name=name, command=shlex.join(cmd), **summary_row(result))
        if exp in ("a", "b"):
            row.update(recovery(result, args.fail_us, args.pre_us, args.end_us, args.final_us))
        return exp, row, result

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(one, jobs))
    results = {}
    for exp, row, result in done:
        results[row["name"]] = result
    rows = {row["name"]: row for _, row, _ in done}
    for exp, row, result in done:
        if exp in ("a", "b") and row["fault"] != "control":
            ctl = rows[(f"a_evs{row['evs']}_s{row['seed']}_ctl" if exp == "a" else
                        f"b_control_{row['transport']}_s{row['seed']}")]
            k = min(row["horizon_us"], ctl["horizon_us"])
            bin_ns = result["timeseries"]["bin_ns"]
            n = int(k * 1000 // bin_ns)
            mine = sum(result["timeseries"]["bytes"][:n])
            theirs = sum(results[ctl["name"]]["timeseries"]["bytes"][:n])
            row["lost_us"] = (theirs - mine) * 8 / row["pre_gbps"] / 1000 if row["pre_gbps"] else None
            row["control_recovery_us"] = ctl["recovery_us"]
        summary[exp].append(row)
    with open(os.path.join(out, "sim_experiments.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")

    fail_label = f"{args.fail} down at {args.fail_us:g} us"
    if "a" in exps:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        horizon = args.end_us - args.fail_us
        for seed in seeds:
            rows = [r for r in summary["a"] if r["seed"] == seed and r["fault"] == "fail"]
            ys = [r["recovery_us"] if r["recovery_us"] is not None else horizon for r in rows]
            ax1.plot([r["evs"] for r in rows], ys, marker="o", label=f"seed {seed}")
            ax2.plot([r["evs"] for r in rows], [r["lost_us"] for r in rows], marker="o",
                     label=f"seed {seed}")
        ax1.axhline(horizon, color="grey", ls=":", lw=1, label="not recovered by the end")
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xticks(evs_list, [str(e) for e in evs_list])
            ax.set_xlabel("EVs per QP")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        ax1.set_ylabel("time back to >= 95 % goodput (us)")
        ax2.set_ylabel("goodput lost to the failure (us of full goodput)")
        fig.suptitle(f"(a) {args.hosts} hosts x {args.planes} planes, permutation, {fail_label}")
        save(fig, out, "sim_exp_a_recovery_vs_evs")
        fig, ax = plt.subplots(figsize=(9, 4))
        for evs in evs_list:
            plot_series(ax, results[f"a_evs{evs}_s{seeds[0]}"], f"{evs} EVs", args.end_us)
        ax.axvline(args.fail_us, color="k", ls=":", lw=1)
        ax.set_xlim(0, args.end_us)
        ax.set_xlabel("simulated time (us)")
        ax.set_ylabel(f"aggregate goodput (Tb/s, {args.bin_us:g} us bins)")
        ax.set_title(f"(a) goodput around the failure ({fail_label}), seed {seeds[0]}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, out, "sim_exp_a_timeseries")
    if "b" in exps:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
        for ax, fault in zip(axes, ("fail", "flap")):
            for tr in ("mrc", "rc", "spray"):
                plot_series(ax, results[f"b_{fault}_{tr}_s{seeds[0]}"], tr, args.end_us)
            ax.axvline(args.fail_us, color="k", ls=":", lw=1)
            if fault == "flap":
                ax.axvline(args.fail_us + args.flap_us, color="k", ls=":", lw=1)
            ax.set_title((f"{args.fail} down for good at {args.fail_us:g} us"
                                         if fault == "fail" else
                                         f"{args.fail} down {args.fail_us:g}-"
                                         f"{args.fail_us + args.flap_us:g} us"), fontsize=9)
            ax.set_xlim(0, args.end_us)
            ax.set_xlabel("simulated time (us)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0].set_ylabel(f"aggregate goodput (Tb/s, {args.bin_us:g} us bins)")
        fig.suptitle(f"(b) MRC, go-back-N RC and spraying without retirement, seed {seeds[0]}")
        save(fig, out, "sim_exp_b_transports")
    if "c" in exps:
        fig, ax = plt.subplots(figsize=(9, 4))
        for trim in (True, False):
            plot_series(ax, results[f"c_trim{int(trim)}_s{seeds[0]}"],
                        "trim on" if trim else "trim off (drop)")
        ax.set_xlabel("simulated time (us)")
        ax.set_ylabel(f"goodput into the receiver (Tb/s, {args.bin_us:g} us bins)")
        ax.set_title(f"(c) incast {args.incast_senders}:1 x {args.incast_size} B, queues "
                     f"{args.incast_queue_bytes} B, seed {seeds[0]}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, out, "sim_exp_c_trim")

    # The table the docs quote.
    for exp in sorted(exps):
        for r in summary[exp]:
            keys = [k for k in ("evs", "fault", "transport", "trim") if k in r]
            rec = r.get("recovery_us", "-")
            rec = "not recovered" if rec is None else rec
            lost = r.get("lost_us")
            lost = "-" if lost is None else f"{lost:.1f}"
            print(f"{exp} seed {r['seed']} " + " ".join(f"{k}={r[k]}" for k in keys) +
                  f": recovery_us={rec} min_ratio={r.get('min_ratio', float('nan')):.3f} "
                  f"settle_us={r.get('settle_us', '-')} final_ratio={r.get('final_ratio', float('nan')):.3f} "
                  f"lost_us={lost} completed={r['completed']}/{r['flows']} fct_p50_us={r['fct_p50_us']:.1f} "
                  f"fct_p99_us={r['fct_p99_us']:.1f} delivered_MB={r['delivered_bytes'] / 1e6:.1f} "
                  f"rtx={r['retransmits']} drops={r['drops']} trims={r['trims']} "
                  f"retired={r['ev_retirements']}")
    print(f"sim_experiments: wrote {os.path.join(out, 'sim_experiments.json')} and plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())

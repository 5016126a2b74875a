#!/usr/bin/python3
"""`mrct sim` against uet-htsim on the same connection matrix: wall time, events/s, peak RSS and
FCT percentiles side by side (docs/simulation.md).

uet-htsim is built OUTSIDE the repository from a git directory you fetched (never committed):
  bench/sim_vs_htsim.py --htsim-git /path/to/uet-htsim.git --sizes 128,512,1024

Both tools run the same permutation file (written by `mrct sim gen permutation`), 2,000,000
bytes per flow, with `--failed` top-tier cables at a quarter of their rate (htsim: -failed,
which degrades that many links to 25 %). Peak RSS comes from wait4() of each child.

`--tiers 2,3` runs each size on both shapes where htsim builds it: 2 tiers (htsim: N = K^2 / 2;
`mrct sim`: the non-blocking leaf-spine it always used) and 3 tiers, htsim's default k-ary fat
tree (N = K^3 / 4: 128 hosts for K = 8, 1,024 for K = 16), which `mrct sim` builds alike:
K / 2 hosts per leaf, K pods of K / 2 leaves and K / 2 aggregation switches, K^2 / 4 cores.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, **kw)


def build_htsim(git_dir, work):
    """git archive into `work` and build htsim_uec there (Release). Returns the binary."""
    rev = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "--short", "HEAD"],
                         check=True, capture_output=True, text=True).stdout.strip()
    src = os.path.join(work, "uet-htsim-" + rev)
    binary = os.path.join(src, "htsim", "sim", "build", "datacenter", "htsim_uec")
    if os.path.exists(binary):
        return binary, rev
    os.makedirs(src, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", "HEAD", "htsim"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "x", "-C", src], input=archive, check=True)
    sim = os.path.join(src, "htsim", "sim")
    sh(["cmake", "-S", sim, "-B", os.path.join(sim, "build"), "-DCMAKE_BUILD_TYPE=Release"],
       stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", os.path.join(sim, "build"), "-j", "2", "--target", "htsim_uec"],
       stdout=subprocess.DEVNULL)
    return binary, rev


def timed(cmd, stdout_path, cwd=None):
    """Runs cmd, stdout to a file; returns (exit code, wall s, CPU s, peak RSS MB)."""
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    with open(stdout_path, "w") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    i = max(0, min(len(v) - 1, -(-int(q * 1000) * len(v) // 1000) - 1))
    return v[i]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--htsim-git", help="uet-htsim git directory (from the fetch tool)")
    ap.add_argument("--htsim", help="an htsim_uec binary already built (instead of --htsim-git)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "mrct-sim-bench"),
                    help="build and output directory (outside the repository)")
    ap.add_argument("--mrct-sim", default=os.path.join(TOP, "build", "release", "bin", "mrct-sim"),
                    help="mrct-sim binary (an optimized build: cmake --preset release; "
                         "cmake --build build/release --target mrct-sim)")
    ap.add_argument("--sizes", default="128,512,1024")
    ap.add_argument("--planes", type=int, default=1, help="mrct sim planes (htsim: 1)")
    ap.add_argument("--failed", type=int, default=8)
    ap.add_argument("--bytes", type=int, default=2_000_000)
    ap.add_argument("--paths", type=int, default=128, help="htsim -paths and mrct sim --evs")
    ap.add_argument("--end-us", type=int, default=3000)
    ap.add_argument("--tiers", default="2,3",
                    help="fabric shapes to compare: 2 (leaf-spine), 3 (k-ary fat tree)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    if a.htsim:
        htsim, rev = a.htsim, "given"
    elif a.htsim_git:
        htsim, rev = build_htsim(a.htsim_git, a.work)
    else:
        ap.error("give --htsim-git or --htsim")
    if not os.access(a.mrct_sim, os.X_OK):
        ap.error(f"{a.mrct_sim}: not built (cmake --preset release && cmake --build "
                 f"build/release --target mrct-sim)")

    rows = []
    for n in [int(x) for x in a.sizes.split(",")]:
        cm = os.path.join(a.work, f"perm_{n}n_{a.bytes}b.cm")
        sh([a.mrct_sim, "gen", "permutation", "--nodes", str(n), "--size", str(a.bytes),
            "--seed", str(a.seed), "-o", cm])
        for tiers in [int(x) for x in a.tiers.split(",")]:
            if tiers == 3:
                k = round((4 * n) ** (1 / 3))
                if k * k * k // 4 != n or k % 2:
                    print(f"skip: {n} hosts is not a 3-tier fat tree (K^3 / 4)", file=sys.stderr)
                    continue
                # htsim's default 3-tier fat tree of K-port switches, built alike.
                shape = ["--tiers", "3", "--hosts-per-leaf", str(k // 2), "--leaves-per-pod",
                         str(k // 2), "--spines", str(k // 2), "--cores", str(k * k // 4)]
            else:
                # A non-blocking 2-tier Clos of the same size.
                hpl = 32 if n >= 512 else 16
                shape = ["--hosts-per-leaf", str(hpl), "--spines", str(hpl)]
            # htsim
            hout = os.path.join(a.work, f"htsim_{n}_{tiers}t.txt")
            hcmd = [htsim, "-tm", cm, "-end", str(a.end_us), "-sender_cc_only",
                    "-load_balancing_algo", "oblivious", "-paths", str(a.paths),
                    "-failed", str(a.failed), "-tiers", str(tiers), "-seed", str(a.seed)]
            rc, wall, cpu, rss = timed(hcmd, hout, cwd=a.work)
            fct = []
            with open(hout, errors="replace") as f:
                for line in f:
                    m = re.search(r"finished at ([0-9.eE+-]+)", line)
                    if m:
                        fct.append(float(m.group(1)))
            rows.append(dict(tool=f"htsim {tiers}-tier", n=n, rc=rc, wall=wall, cpu=cpu, rss=rss,
                             events=None, done=len(fct), flows=n, p50=pct(fct, .5),
                             p99=pct(fct, .99), max=max(fct) if fct else float("nan"),
                             cmd=" ".join(hcmd), rev=rev))
            # mrct sim
            mout = os.path.join(a.work, f"mrct_{n}_{tiers}t.json")
            mcmd = [a.mrct_sim, "run", "--cm", cm, "--hosts", str(n), "--planes", str(a.planes),
                    *shape, "--failed", str(a.failed), "--evs", str(a.paths), "--end-us",
                    str(a.end_us), "--seed", str(a.seed), "-q", "-o", mout]
            rc, wall, cpu, rss = timed(mcmd, os.devnull)
            j = json.load(open(mout)) if os.path.exists(mout) else {"flows": [], "summary": {}}
            mf = [f["fct_ns"] / 1e3 for f in j["flows"] if f["done"]]
            rows.append(dict(tool=f"mrct sim {tiers}-tier", n=n, rc=rc, wall=wall, cpu=cpu,
                             rss=rss, events=j["summary"].get("events"), done=len(mf), flows=n,
                             p50=pct(mf, .5), p99=pct(mf, .99),
                             max=max(mf) if mf else float("nan"),
                             rtx=j["summary"].get("retransmits", {}).get("total"),
                             cmd=" ".join(mcmd)))

    load = open("/proc/loadavg").read().split()[:3]
    print(f"\nload average at the end: {' '.join(load)} on {os.cpu_count()} CPUs")
    print(f"htsim: {rev}; CPU: " + next((l.split(":", 1)[1].strip() for l in
                                         open("/proc/cpuinfo") if l.startswith("model name")), "?"))
    print(f"{'tool':<16} {'hosts':>5} {'done':>9} {'wall s':>8} {'CPU s':>7} {'Mev/CPU-s':>9} "
          f"{'RSS MB':>7} {'FCT p50 us':>10} {'p99 us':>8} {'max us':>8}")
    for r in rows:
        ev = f"{r['events'] / r['cpu'] / 1e6:.2f}" if r["events"] and r["cpu"] else "n/a"
        print(f"{r['tool']:<16} {r['n']:>5} {str(r['done']) + '/' + str(r['flows']):>9} "
              f"{r['wall']:>8.1f} {r['cpu']:>7.1f} {ev:>9} {r['rss']:>7.0f} {r['p50']:>10.0f} {r['p99']:>8.0f} "
              f"{r['max']:>8.0f}")
    print("\ncommands:")
    for r in rows:
        print("  " + r["cmd"])
    json.dump(rows, open(os.path.join(a.work, "table.json"), "w"), indent=1)


if __name__ == "__main__":
    main()

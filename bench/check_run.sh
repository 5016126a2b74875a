#!/usr/bin/env bash
# Conformance checker throughput (issue 6, deliverable 7): frames/s of `mrct check` with every rule
# enabled on a 1M-frame MRP0 capture of the reference engine (bench/check_bench.cc makes it), next
# to a raw read of the file, `mrct decode --summary` and tshark on the same file, with the ratios,
# the peak memory and the load average at the time of each figure (the machine may be shared).
# `mrct check` runs with -j 1 and -j 2 (pipelined: decode + ICRC on one thread, the rules on
# another), side by side with wall and CPU time, and the script checks that both write the same
# reports byte for byte.
#
# Usage: bench/check_run.sh [build dir, default build/release] [PMTU ...]  (default PMTUs: 256 1024)
# Environment: FRAMES (default 1000000), RUNS (best of, default 3), TMPDIR (captures are kept in
# $TMPDIR/mrc_check_bench_<FRAMES>_<PMTU> and reused), NO_TSHARK=1 to skip tshark.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build/release}" 2>/dev/null && pwd || echo "${1:-$top/build/release}")
[ $# -gt 0 ] && shift
pmtus=${*:-256 1024}
frames=${FRAMES:-1000000}
runs=${RUNS:-3}
if [ ! -x "$build/bench/check_bench" ] || [ ! -x "$build/bin/mrct" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake --preset release -S "$top" > /dev/null
  cmake --build "$build" -j 2 --target check_bench mrct
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for pmtu in $pmtus; do
  dir=${TMPDIR:-/tmp}/mrc_check_bench_${frames}_${pmtu}
  if [ ! -f "$dir/a-eth0.pcap" ] || [ ! -f "$dir/dut.json" ]; then
    "$build/bench/check_bench" --make_capture="$dir" --frames="$frames" --pmtu="$pmtu"
  fi
  "$build/bench/check_bench" --capture_dir="$dir" --benchmark_format=json \
    --benchmark_out="$out/bench_$pmtu.json" --benchmark_out_format=json \
    --benchmark_repetitions="$runs" --benchmark_report_aggregates_only=true > /dev/null
  echo "load average after the in-process benchmarks: $(cut -d' ' -f1-3 /proc/loadavg)" \
    > "$out/load_$pmtu.txt"
  /usr/bin/python3 - "$build" "$dir" "$pmtu" "$runs" "$out/bench_$pmtu.json" \
    "$out/load_$pmtu.txt" "${NO_TSHARK:-}" <<'PY'
import json, os, shutil, subprocess, sys, threading, time

build, cap_dir, pmtu, runs, bench_json, load_file, no_tshark = sys.argv[1:8]
runs = int(runs)
pcap = os.path.join(cap_dir, "a-eth0.pcap")
mrct = os.path.join(build, "bin", "mrct")


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def measure(cmd, cwd):
    """Best of `runs` by wall time: wall, user, sys, peak RSS (rusage) and peak anonymous RSS."""
    best = None
    for _ in range(runs):
        load = loadavg()
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        anon = [0]

        def sample():
            path = f"/proc/{p.pid}/status"
            while p.returncode is None:
                try:
                    for line in open(path):
                        if line.startswith("RssAnon:"):
                            anon[0] = max(anon[0], int(line.split()[1]))
                except OSError:
                    return
                time.sleep(0.005)

        th = threading.Thread(target=sample)
        th.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        th.join()
        r = dict(wall=wall, user=ru.ru_utime, sys=ru.ru_stime, rss_kb=ru.ru_maxrss,
                 anon_kb=anon[0], load=load, rc=p.returncode)
        if best is None or r["wall"] < best["wall"]:
            best = r
    return best


d = json.load(open(bench_json))
b = {}
for x in d["benchmarks"]:  # the median when there were repetitions, else the one run
    if x.get("aggregate_name", "median") == "median":
        b[x["run_name"]] = x


def rate(name):
    for k, v in b.items():
        if k.startswith(name):
            return v["items_per_second"] / 1e6, v["cpu_time"], v["real_time"]
    raise KeyError(name)


frames = int(next(iter(b.values()))["frames"])
size_mb = os.path.getsize(pcap) / 1e6
print(f"\n=== {frames} frames, PMTU {pmtu} B ({size_mb:.0f} MB): {pcap}")
print(f"host: {d['context'].get('host_name', '?')}, {d['context']['num_cpus']} CPUs; "
      f"{open(load_file).read().strip()}")
print("\nin-process (check_bench, median of runs; M frames/s of wall time, CPU ms per run):")
rows = [("raw read (CaptureReader only)", "BM_ReadOnly"),
        ("read + decode_frame + ICRC", "BM_DecodeIcrc/"),
        ("decode + ICRC, frames in memory", "BM_DecodeIcrcInMemory"),
        ("checker, frames in memory", "BM_CheckerFrames/1/"),
        ("same, -j 2 (CPU: the decoding thread)", "BM_CheckerFrames/2/"),
        ("check_files (profile + decision log)", "BM_CheckFiles"),
        ("check_files (QPs inferred)", "BM_CheckInferred")]
for label, name in rows:
    r, cpu, real = rate(name)
    print(f"  {label:40s} {r:7.2f} M/s   cpu {cpu:7.1f} ms   wall {real:7.1f} ms")
for path in ("table", "pclmul", "vpclmul512"):  # the CRC-32 methods this CPU has
    if f"BM_Crc32Frames/{path}/real_time" in b:
        r, cpu, real = rate(f"BM_Crc32Frames/{path}/")
        print(f"  {'CRC-32 of every frame, ' + path:40s} {r:7.2f} M/s   cpu {cpu:7.1f} ms   "
              f"wall {real:7.1f} ms")
mem_dec = rate("BM_DecodeIcrcInMemory")[1]
mem_chk = rate("BM_CheckerFrames/1/")[1]
print(f"  checker's own work (in memory, minus decode + ICRC): "
      f"{(mem_chk - mem_dec) * 1e6 / frames:.0f} ns/frame")

full = [mrct, "check", "a-eth0.pcap", "--profile", "dut.json", "--decisions", "decisions.jsonl",
        "-q"]
cmds = [("mrct check (all rules, profile + decisions)", full),
        ("mrct check -j 2 (all rules, profile + decisions)", full + ["-j", "2"]),
        ("mrct check (all rules, QPs inferred)", [mrct, "check", "a-eth0.pcap", "-q"]),
        ("mrct check -j 2 (all rules, QPs inferred)", [mrct, "check", "a-eth0.pcap", "-q", "-j", "2"]),
        ("mrct decode --summary", [mrct, "decode", "--summary", "a-eth0.pcap"])]
if not no_tshark and shutil.which("tshark"):
    cmds += [("tshark -r FILE > /dev/null", ["tshark", "-r", "a-eth0.pcap"]),
             ("tshark -r FILE -T fields -e frame.number",
              ["tshark", "-r", "a-eth0.pcap", "-T", "fields", "-e", "frame.number"])]
print(f"\nprocesses on the file (best of {runs} by wall time; peak RSS includes the mapped capture):")
res = {}
for label, cmd in cmds:
    r = measure(cmd, cap_dir)
    res[label] = r
    print(f"  {label:44s} {r['wall']:7.3f} s  {frames / r['wall'] / 1e6:6.2f} M/s  "
          f"user {r['user']:6.2f} s sys {r['sys']:5.2f} s  peak RSS {r['rss_kb'] / 1024:6.0f} MiB  "
          f"anon {r['anon_kb'] / 1024:5.0f} MiB  exit {r['rc']}  (load {r['load']})")

# Where the process's time goes outside the rules: mrct check --timings, one run each of -j 1 and
# -j 2 (wall and CPU per phase; "others" is the judging thread's CPU with -j 2).
for j in ("1", "2"):
    load = loadavg()
    p = subprocess.run(full + ["-j", j, "--timings"], cwd=cap_dir, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    rows = [l[len("mrct check: timings: "):] for l in p.stderr.splitlines()
            if l.startswith("mrct check: timings: ")]
    print(f"\nphases of mrct check -j {j} (profile + decisions; --timings, one run, load {load}):")
    for l in rows:
        print("  " + l)

# -j 2 must write the very report of -j 1 (JSON, JUnit, Markdown, annotated pcapng).
outdir = os.path.dirname(bench_json)
same = True
for mode in ("profile", "inferred"):
    reps = []
    for j in ("1", "2"):
        base = os.path.join(outdir, f"report_{pmtu}_{mode}_j{j}")
        cmd = (full if mode == "profile" else [mrct, "check", "a-eth0.pcap", "-q"]) + [
            "-j", j, "--json", base + ".json", "--junit", base + ".xml", "--markdown",
            base + ".md", "--annotate", base + ".pcapng"]
        subprocess.run(cmd, cwd=cap_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        reps.append(b"".join(open(base + ext, "rb").read()
                             for ext in (".json", ".xml", ".md", ".pcapng")))
    same = same and reps[0] == reps[1]
print(f"\nreports of -j 2 byte-identical to -j 1 (JSON, JUnit, Markdown, annotated pcapng; "
      f"with profile + decisions and inferred): {'yes' if same else 'NO'}")

chk = res["mrct check (all rules, profile + decisions)"]
chk_rate = frames / chk["wall"] / 1e6
cpu_rate = frames / (chk["user"] + chk["sys"]) / 1e6
chk2 = res["mrct check -j 2 (all rules, profile + decisions)"]
print("\n-j 1 and -j 2 side by side (profile + decisions):")
for label, r in (("-j 1", chk), ("-j 2", chk2)):
    cpu = r["user"] + r["sys"]
    line = (f"  {label}: wall {r['wall']:.3f} s = {frames / r['wall'] / 1e6:5.2f} M/s, "
            f"CPU {cpu:.3f} s = {frames / cpu / 1e6:5.2f} M frames per CPU-second")
    if "tshark -r FILE > /dev/null" in res:
        t = res["tshark -r FILE > /dev/null"]
        line += (f"; {t['wall'] / r['wall']:5.1f}x tshark -r by wall time, "
                 f"{(t['user'] + t['sys']) / cpu:5.1f}x by CPU time")
    print(line + f"  (load {r['load']})")
print("\nratios:")
read_rate = rate("BM_ReadOnly")[0]
print(f"  mrct check vs raw read:        {chk_rate / read_rate:6.3f} of the read rate "
      f"({chk_rate:.2f} vs {read_rate:.2f} M/s)")
dec = res["mrct decode --summary"]
print(f"  mrct check vs decode --summary: {dec['wall'] / chk['wall']:6.3f}x "
      f"({chk['wall']:.3f} s vs {dec['wall']:.3f} s)")
for k in ("tshark -r FILE > /dev/null", "tshark -r FILE -T fields -e frame.number"):
    if k in res:
        cpu_x = (res[k]["user"] + res[k]["sys"]) / (chk["user"] + chk["sys"])
        print(f"  mrct check vs {k:40s} {res[k]['wall'] / chk['wall']:6.1f}x faster "
              f"({res[k]['wall']:.2f} s vs {chk['wall']:.3f} s; CPU time {cpu_x:.1f}x)")
print(f"\ntarget >= 3 M frames/s, one core, all rules: "
      f"{'met' if chk_rate >= 3 else 'NOT met'} by mrct check "
      f"({chk_rate:.2f} M/s wall, {cpu_rate:.2f} M/s of CPU time); "
      f"in-memory checker {rate('BM_CheckerFrames/1/')[0]:.2f} M/s")
if "tshark -r FILE > /dev/null" in res:
    x = res["tshark -r FILE > /dev/null"]["wall"] / chk["wall"]
    x2 = res["tshark -r FILE > /dev/null"]["wall"] / chk2["wall"]
    print(f"target >= 30x tshark -r: {'met' if x >= 30 else 'NOT met'} with -j 1 ({x:.1f}x), "
          f"{'met' if x2 >= 30 else 'NOT met'} with -j 2 ({x2:.1f}x)")
PY
done

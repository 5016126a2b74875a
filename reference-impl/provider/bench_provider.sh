#!/usr/bin/env bash
# lib_mrc.so's figures next to their peers, with the ratios (issue 22, item 8): two namespaces
# joined by one veth pair (MTU 9000), the same path for every column:
#   in-process  mrc-perf through lib_mrc.so, the device inside each process
#   device      mrc-perf through lib_mrc.so in device mode, a softmrcd per namespace
#   mrct        `mrct endpoint` (the same engine and runtime, its own tool; BUILD_DIR/bin/mrct, or
#               BUILD_DIR/bin/mrc_endpoint, the same tool built alone)
# Figures: write bandwidth (64 KiB WRITEs, 1 QP), write latency (64 B, one at a time: p50,
# p99), message rate (64 B WRITEs on 1 and on 64 QPs), memory per QP, and the cost of one
# empty mrc_poll_cq / one mrc_post_send call (lib_mrc.so only: call_cost); and iperf3 -u's
# goodput on the same pair with each column's write bandwidth over it (bench_runtime.sh's ratio).
# MRC_SOFT_TX_RING / MRC_SOFT_RX_COALESCE_US in the environment reach the lib_mrc.so columns
# (in-process and softmrcd), not the mrct one.
#
# The write bandwidth (issue 19) is measured like bench_runtime.sh's endpoint against iperf3:
# each round runs `iperf3 -u -b 0 -l 4096 -t 3` on the pair, then each column moves --bytes
# (default 1G, 16384 WRITEs of 64 KiB, several seconds: a 300-message run was mostly the
# congestion window's ramp and varied 2x between runs) in WRITEs of --size bytes (default 64 KiB)
# with --tx-depth WRs in flight on 1 QP (default 16, mrc-perf's own default; every column the
# same). For each column it prints Gbit/s, the ratio to the same round's iperf3 goodput, and
# CPU seconds per GiB: for lib_mrc.so every process of the column (mrc-perf client and server,
# application and device threads, and both softmrcds over the run in device mode); for mrct its
# two loops' CPU (its JSON's cpu_s, as bench_runtime.sh counts it: the processes' own set-up, a
# 1 GiB buffer filled and verified, is left out); iperf3's from its own report (client +
# server), as bench_runtime.sh counts it. The lib_mrc.so columns' CPU includes their processes'
# set-up (the device opened, its rings mapped, the MRs registered): with --bytes well below 1G
# it dominates (64M: 8-10 s/GiB). With --rounds N > 1, each figure per round and the median.
# --post-list N (default 1): the lib_mrc.so columns post N WRs per mrc_post_send call (mrc-perf
# --post-list, perftest's --post_list); in device mode each call is a round trip to softmrcd.
#
# Usage: bench_provider.sh BUILD_DIR [SCALE] [--bw-only] [--bytes SIZE] [--size BYTES]
#        [--tx-depth N] [--post-list N] [--rounds N]
#   BUILD_DIR/bin holds mrc-perf, softmrcd, mrc_provider_call_cost, mrct or mrc_endpoint; SCALE
#   multiplies the message counts of the message rates: 1000 and 50 per QP times SCALE on 1 and
#   64 QPs (default 4). SIZE: bytes of each bandwidth run, with K, M or G (powers of 2), a
#   multiple of --size. --bw-only: the bandwidth rounds and iperf3 only.
# Root (namespaces, AF_PACKET).
# Prints the table on stdout; every run's raw output stays in $BENCH_OUT (default a temporary
# directory, removed) when set. Exit 0, 1 when a run failed (its output is printed), 2 usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/veth_pair.sh"
usage() {
  echo "usage: bench_provider.sh BUILD_DIR [SCALE] [--bw-only] [--bytes SIZE] [--size BYTES]" \
    "[--tx-depth N] [--post-list N] [--rounds N] (BUILD_DIR/bin: mrc-perf, softmrcd, mrc_provider_call_cost," \
    "and mrct or mrc_endpoint)" >&2
  exit 2
}
if [ $# -lt 1 ] || [ ! -x "$1/bin/mrc-perf" ] || [ ! -x "$1/bin/softmrcd" ] ||
  [ ! -x "$1/bin/mrc_provider_call_cost" ] ||
  { [ ! -x "$1/bin/mrct" ] && [ ! -x "$1/bin/mrc_endpoint" ]; }; then
  usage
fi
bin=$(cd "$1/bin" && pwd)
shift
if [ -x "$bin/mrct" ]; then
  endpoint=("$bin/mrct" endpoint)
else
  endpoint=("$bin/mrc_endpoint")
fi
scale=4
case ${1:-} in [0-9]*)
  scale=$1
  shift
  ;;
esac
case $scale in '' | *[!0-9]* | 0)
  echo "bench_provider.sh: SCALE must be a positive whole number, not '$scale'" >&2
  exit 2
  ;;
esac
bw_only=0
bytes_arg=1G
msg=65536
depth=16
post_list=1
rounds=1
while [ $# -gt 0 ]; do
  case $1 in
    --bw-only) bw_only=1 && shift ;;
    --bytes) [ $# -ge 2 ] || usage && bytes_arg=$2 && shift 2 ;;
    --tx-depth) [ $# -ge 2 ] || usage && depth=$2 && shift 2 ;;
    --post-list) [ $# -ge 2 ] || usage && post_list=$2 && shift 2 ;;
    --size) [ $# -ge 2 ] || usage && msg=$2 && shift 2 ;;
    --rounds) [ $# -ge 2 ] || usage && rounds=$2 && shift 2 ;;
    *) usage ;;
  esac
done
case $bytes_arg in
  *[Kk]) bw_bytes=$((${bytes_arg%?} * 1024)) ;;
  *[Mm]) bw_bytes=$((${bytes_arg%?} * 1024 * 1024)) ;;
  *[Gg]) bw_bytes=$((${bytes_arg%?} * 1024 * 1024 * 1024)) ;;
  *) bw_bytes=$bytes_arg ;;
esac
if ! [[ $msg =~ ^[1-9][0-9]*$ ]] || ! [[ $bw_bytes =~ ^[1-9][0-9]*$ ]] ||
  [ $((bw_bytes % msg)) -ne 0 ]; then
  echo "bench_provider.sh: --bytes must be a multiple of --size, not '$bytes_arg'" >&2
  exit 2
fi
if ! [[ $depth =~ ^[1-9][0-9]*$ ]] || ! [[ $rounds =~ ^[1-9][0-9]*$ ]] ||
  ! [[ $post_list =~ ^[1-9][0-9]*$ ]] || [ "$post_list" -gt 64 ]; then
  echo "bench_provider.sh: --tx-depth and --rounds take positive whole numbers, --post-list" \
    "1 to 64" >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "bench_provider.sh: needs root (network namespaces, AF_PACKET)" >&2
  exit 2
fi
a=smbn$$a
b=smbn$$b
ia=smbn$$x
ib=smbn$$y
out=${BENCH_OUT:-}
keep=1
if [ -z "$out" ]; then
  out=$(mktemp -d)
  keep=0
fi
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  veth_pair_down "$a" "$b"
  [ $keep = 1 ] || rm -rf "$out"
}
trap cleanup EXIT
set -e
veth_pair_up "$a" "$b" "$ia" "$ib" 10.81.0 fd81
set +e
port=$((20000 + $$ % 20000))

ip netns exec "$a" env MRC_SOFT_IFACES="$ia" MRC_SOFT_GID=fd81::1 "$bin/softmrcd" \
  --socket "$out/a.sock" > "$out/daemon-a.log" 2>&1 &
dpid_a=$!
pids+=("$dpid_a")
ip netns exec "$b" env MRC_SOFT_IFACES="$ib" MRC_SOFT_GID=fd81::2 "$bin/softmrcd" \
  --socket "$out/b.sock" > "$out/daemon-b.log" 2>&1 &
dpid_b=$!
pids+=("$dpid_b")
for _ in $(seq 100); do
  [ -S "$out/a.sock" ] && [ -S "$out/b.sock" ] && break
  sleep 0.1
done

# The environment of each column's processes, per namespace.
env_of() {  # MODE SIDE
  local side=$2 ifc gid
  if [ "$side" = a ]; then ifc=$ia gid=fd81::1; else ifc=$ib gid=fd81::2; fi
  if [ "$1" = device ]; then
    echo "MRC_SOFT_DEVICE=$out/$side.sock"
  else
    echo "MRC_SOFT_IFACES=$ifc MRC_SOFT_GID=$gid"
  fi
}

# CPU seconds (user + system) both softmrcds have used so far (ip netns exec and env exec, so
# the pids are softmrcd's).
daemons_cpu_s() {
  local ticks=0 p f
  for p in "$dpid_a" "$dpid_b"; do
    read -ra f < "/proc/$p/stat" || continue
    ticks=$((ticks + f[13] + f[14]))  # utime, stime (fields 14, 15; comm has no spaces)
  done
  echo "$ticks $(getconf CLK_TCK)" | awk '{ printf "%.3f\n", $1 / $2 }'
}

failed=0
# One client run of a column; its output in $out/NAME.json, the CPU seconds of its processes
# (client and server; both softmrcds' too in device mode) in $out/NAME.cpu. mrc-perf: a server
# for the run.
run() {  # NAME MODE CLIENT_ARGS...
  local name=$1 mode=$2
  shift 2
  local rc d0
  d0=$(daemons_cpu_s)
  local tm=(/usr/bin/time -f "%U %S")
  if [ "$mode" = mrct ]; then
    ip netns exec "$a" "${tm[@]}" -o "$out/$name.server.time" timeout 300 "${endpoint[@]}" \
      server --json --ifaces "$ia" --gid fd81::1 --port "$port" --ev-format stev \
      --listen 10.81.0.1 > "$out/$name.server.json" 2>&1 &
    local spid=$!
    sleep 0.5
    ip netns exec "$b" "${tm[@]}" -o "$out/$name.client.time" timeout 300 "${endpoint[@]}" \
      client --json --ifaces "$ib" --gid fd81::2 --port "$port" --ev-format stev \
      --server 10.81.0.1 "$@" > "$out/$name.json" 2>&1
    rc=$?
    wait "$spid"
  else
    local ea eb
    read -ra ea <<< "$(env_of "$mode" a)"
    read -ra eb <<< "$(env_of "$mode" b)"
    ip netns exec "$a" "${tm[@]}" -o "$out/$name.server.time" env "${ea[@]}" timeout 300 \
      "$bin/mrc-perf" server --port "$port" --gid fd81::1 --clients 1 \
      > "$out/$name.server.json" 2>&1 &
    local spid=$!
    sleep 0.5
    ip netns exec "$b" "${tm[@]}" -o "$out/$name.client.time" env "${eb[@]}" timeout 300 \
      "$bin/mrc-perf" client 10.81.0.1 --port "$port" --gid fd81::2 "$@" \
      > "$out/$name.json" 2>&1
    rc=$?
    wait "$spid"
  fi
  local dcpu=0
  [ "$mode" = device ] && dcpu=$(echo "$d0 $(daemons_cpu_s)" | awk '{ print $2 - $1 }')
  cat "$out/$name.client.time" "$out/$name.server.time" 2> /dev/null |
    awk -v d="$dcpu" '{ s += $1 + $2 } END { printf "%.3f\n", s + d }' > "$out/$name.cpu"
  if [ $rc -ne 0 ]; then
    echo "run $name ($mode) failed (exit $rc):" >&2
    cat "$out/$name.json" "$out/$name.server.json" >&2
    failed=1
  fi
}

# iperf3 -u on the same veth pair, the reference the runtime's bench measures the endpoint
# against (bench_runtime.sh): goodput = rate x (1 - loss), 4 KiB datagrams, unpaced.
run_iperf() {  # NAME
  ip netns exec "$a" timeout 60 iperf3 -s -1 -B fd81::1 -p "$port" > /dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  ip netns exec "$b" timeout 60 iperf3 -u -c fd81::1 -B fd81::2 -p "$port" -b 0 -l 4096 -t 3 -J \
    > "$out/$1.json" 2>&1 || { cat "$out/$1.json" >&2; failed=1; }
  wait "$spid"
}

# The write bandwidth in rounds: iperf3, then each column, so that a slow spell of the host
# shows in the same round's iperf3 too. Message counts, not durations: `mrct endpoint` runs by
# --duration failed their control exchange here (the client got no answer from the server), by
# --iters they complete.
bw=(--size "$msg" --qps 1 --tx-depth "$depth" --iters $((bw_bytes / msg)))
have_iperf=0
command -v iperf3 > /dev/null && have_iperf=1
for ((r = 1; r <= rounds; r++)); do
  [ $have_iperf = 1 ] && run_iperf "iperf3-$r"
  run "bw-inproc-$r" inproc --test write_bw "${bw[@]}" --post-list "$post_list"
  run "bw-device-$r" device --test write_bw "${bw[@]}" --post-list "$post_list"
  run "bw-mrct-$r" mrct "${bw[@]}"
done

if [ $bw_only = 0 ]; then
rate1=(--size 64 --qps 1 --tx-depth 16 --iters $((1000 * scale)))
rate64=(--size 64 --qps 64 --tx-depth 16 --iters $((50 * scale)))
for m in inproc device; do
  run "lat-$m" "$m" --test write_lat --size 64 --iters 2000
  run "rate1-$m" "$m" --test write_bw "${rate1[@]}"
  run "rate64-$m" "$m" --test write_bw "${rate64[@]}"
done
run lat-mrct mrct --size 64 --qps 1 --tx-depth 1 --iters 2000
run rate1-mrct mrct "${rate1[@]}"
run rate64-mrct mrct "${rate64[@]}"

# Memory per QP. lib_mrc.so: call_cost's resident-set growth for 64 more QPs in RTS (and the
# device process's, in device mode). mrct endpoint: peak resident set of a client with 65 QPs
# minus one with 1 QP (64 B messages, 10 each), over 64.
read -ra ea <<< "$(env_of inproc a)"
read -ra ed <<< "$(env_of device a)"
ip netns exec "$a" env "${ea[@]}" "$bin/mrc_provider_call_cost" fd81::2 200000 1000 \
  > "$out/cost-inproc.json" 2>&1 || { cat "$out/cost-inproc.json" >&2; failed=1; }
ip netns exec "$a" env "${ed[@]}" CALL_COST_DEVICE_PID=$dpid_a \
  "$bin/mrc_provider_call_cost" fd81::2 200000 1000 > "$out/cost-device.json" 2>&1 ||
  { cat "$out/cost-device.json" >&2; failed=1; }
for q in 1 65; do
  ip netns exec "$a" timeout 120 "${endpoint[@]}" server --json --ifaces "$ia" \
    --gid fd81::1 --port "$port" --ev-format stev --listen 10.81.0.1 > /dev/null 2>&1 &
  spid=$!
  sleep 0.5
  ip netns exec "$b" /usr/bin/time -f "maxrss_kib %M" -o "$out/mem-mrct-$q.txt" timeout 120 \
    "${endpoint[@]}" client --json --ifaces "$ib" --gid fd81::2 --port "$port" \
    --ev-format stev --server 10.81.0.1 --size 64 --qps "$q" --iters 10 > /dev/null 2>&1 ||
    failed=1
  wait "$spid"
done
fi

python3 - "$out" "$rounds" "$bw_only" "$bw_bytes" "$depth" "$msg" "$post_list" << 'EOF'
import json, os, statistics, sys
out, rounds, bw_only = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
bw_bytes, depth, msg = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
post_list = int(sys.argv[7])

def fig(name, key):
    try:
        text = open(os.path.join(out, name)).read()
    except OSError:
        return None
    dec, found, i = json.JSONDecoder(), None, 0
    while (i := text.find("{", i)) >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        v = obj
        for k in key.split("."):
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None:
            found = v
        i = end
    return found

def mem_mrct():
    try:
        kib = {q: int(open(os.path.join(out, f"mem-mrct-{q}.txt")).read().split()[-1])
               for q in (1, 65)}
    except (OSError, ValueError, IndexError):
        return None
    return (kib[65] - kib[1]) / 64

def per_qp(name):
    app = fig(name, "qp64_rss_kib")
    dev = fig(name, "qp64_device_rss_kib")
    if app is None:
        return None
    return (app + (dev if dev is not None and dev >= 0 else 0)) / 64

def f(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
def ratio(x, y):
    return f"{x / y:.2f}" if x is not None and y not in (None, 0) else "-"
def med(vs):
    vs = [v for v in vs if v is not None]
    return statistics.median(vs) if vs else None
def iperf(r):  # goodput Gbit/s, CPU s/GiB (client + server, from iperf3's own report)
    try:
        j = json.load(open(os.path.join(out, f"iperf3-{r}.json")))
        s, cpu = j["end"]["sum"], j["end"]["cpu_utilization_percent"]
    except (OSError, ValueError, KeyError):
        return None, None
    good = s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100) / 1e9
    secs = float(s.get("seconds", 3))
    gib = good * 1e9 / 8 * secs / 2**30
    return good, ((cpu["host_total"] + cpu["remote_total"]) / 100 * secs / gib if gib else None)
def cpu_per_gib(name):
    if "mrct" in name:  # the loops' CPU, as bench_runtime.sh counts the endpoint's
        c, s = fig(name + ".json", "cpu_s"), fig(name + ".server.json", "cpu_s")
        cpu = c + s if c is not None and s is not None else None
    else:
        try:
            cpu = float(open(os.path.join(out, name + ".cpu")).read())
        except (OSError, ValueError):
            return None
    moved = fig(name + ".json", "bytes")
    return cpu / (moved / 2**30) if moved else None

cols = ("inproc", "device", "mrct")
bw = {c: [fig(f"bw-{c}-{r}.json", "gbit_per_s") for r in range(1, rounds + 1)] for c in cols}
cpu = {c: [cpu_per_gib(f"bw-{c}-{r}") for r in range(1, rounds + 1)] for c in cols}
ip = [iperf(r) for r in range(1, rounds + 1)]
print(f"# write bandwidth: {bw_bytes / 2**30:.3g} GiB in {msg} B WRITEs, 1 QP, {depth} in flight"
      f" ({post_list} per post call for lib_mrc.so);"
      f" {rounds} round(s) of iperf3 -u -b 0 -l 4096 -t 3 then each column")
print(f"{'write bandwidth':28} {'Gbit/s':>8} {'x iperf3':>8} {'CPU s/GiB':>9}   per round: "
      "Gbit/s (x iperf3, CPU s/GiB)")
rows = [("iperf3 -u goodput", [g for g, _ in ip], [1.0 if g else None for g, _ in ip],
         [c for _, c in ip])]
for c, label in zip(cols, ("in-process (lib_mrc.so)", "device (softmrcd)", "mrct endpoint")):
    rs = [x / g if x is not None and g else None for x, (g, _) in zip(bw[c], ip)]
    rows.append((label, bw[c], rs, cpu[c]))
for label, g, rs, cs in rows:
    per = ", ".join(f"{f(a)} ({f(b)}, {f(d)})" for a, b, d in zip(g, rs, cs))
    print(f"{label:28} {f(med(g)):>8} {f(med(rs)):>8} {f(med(cs)):>9}   {per}")
if bw_only:
    sys.exit(0)

print()
rows = [
    ("write latency 64 B p50 (us)", "latency_us.p50", "lat"),
    ("write latency 64 B p99 (us)", "latency_us.p99", "lat"),
    ("message rate 64 B, 1 QP (msg/s)", "msg_per_s", "rate1"),
    ("message rate 64 B, 64 QPs (msg/s)", "msg_per_s", "rate64"),
]
print(f"{'figure':42} {'in-process':>11} {'device':>11} {'mrct endp.':>11} "
      f"{'dev/inproc':>10} {'inproc/mrct':>11} {'dev/mrct':>9}")
i, d, m = (med(bw[c]) for c in cols)
print(f"{f'write bandwidth, {msg} B, 1 QP (Gbit/s)':42} {f(i):>11} {f(d):>11} {f(m):>11} "
      f"{ratio(d, i):>10} {ratio(i, m):>11} {ratio(d, m):>9}")
for label, key, run in rows:
    i, d, m = (fig(f"{run}-{c}.json", key) for c in cols)
    print(f"{label:42} {f(i):>11} {f(d):>11} {f(m):>11} {ratio(d, i):>10} "
          f"{ratio(i, m):>11} {ratio(d, m):>9}")
i, d, m = per_qp("cost-inproc.json"), per_qp("cost-device.json"), mem_mrct()
print(f"{'memory per QP (KiB; device: app + softmrcd)':42} {f(i):>11} {f(d):>11} {f(m):>11} "
      f"{ratio(d, i):>10} {ratio(i, m):>11} {ratio(d, m):>9}")
for label, key in (("empty mrc_poll_cq (ns per call)", "poll_ns"),
                   ("mrc_post_send, one WRITE (ns per call)", "post_ns")):
    i, d = fig("cost-inproc.json", key), fig("cost-device.json", key)
    print(f"{label:42} {f(i):>11} {f(d):>11} {'-':>11} {ratio(d, i):>10} {'-':>11} {'-':>9}")
EOF
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
exit $failed

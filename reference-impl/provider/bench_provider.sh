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
# Usage: bench_provider.sh BUILD_DIR [SCALE]   (BUILD_DIR/bin holds mrc-perf, softmrcd,
# mrc_provider_call_cost, mrct or mrc_endpoint; SCALE multiplies the message counts: 300, 1000
# and 50 per QP times SCALE for bandwidth, 1-QP and 64-QP message rate; default 4).
# Root (namespaces, AF_PACKET).
# Prints the table on stdout; every run's raw output stays in $BENCH_OUT (default a temporary
# directory, removed) when set. Exit 0, 1 when a run failed (its output is printed), 2 usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/veth_pair.sh"
if [ $# -lt 1 ] || [ ! -x "$1/bin/mrc-perf" ] || [ ! -x "$1/bin/softmrcd" ] ||
  [ ! -x "$1/bin/mrc_provider_call_cost" ] ||
  { [ ! -x "$1/bin/mrct" ] && [ ! -x "$1/bin/mrc_endpoint" ]; }; then
  echo "usage: bench_provider.sh BUILD_DIR [SCALE] (BUILD_DIR/bin: mrc-perf, softmrcd," \
    "mrc_provider_call_cost, and mrct or mrc_endpoint)" >&2
  exit 2
fi
bin=$(cd "$1/bin" && pwd)
if [ -x "$bin/mrct" ]; then
  endpoint=("$bin/mrct" endpoint)
else
  endpoint=("$bin/mrc_endpoint")
fi
scale=${2:-4}
case $scale in '' | *[!0-9]* | 0)
  echo "bench_provider.sh: SCALE must be a positive whole number, not '$scale'" >&2
  exit 2
  ;;
esac
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
pids+=("$!")
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

failed=0
# One client run of a column; its output in $out/NAME.json. mrc-perf: a server for the run.
run() {  # NAME MODE CLIENT_ARGS...
  local name=$1 mode=$2
  shift 2
  local rc
  if [ "$mode" = mrct ]; then
    ip netns exec "$a" timeout 300 "${endpoint[@]}" server --json --ifaces "$ia" \
      --gid fd81::1 --port "$port" --ev-format stev --listen 10.81.0.1 \
      > "$out/$name.server.json" 2>&1 &
    local spid=$!
    sleep 0.5
    ip netns exec "$b" timeout 300 "${endpoint[@]}" client --json --ifaces "$ib" \
      --gid fd81::2 --port "$port" --ev-format stev --server 10.81.0.1 "$@" \
      > "$out/$name.json" 2>&1
    rc=$?
    wait "$spid"
  else
    local ea eb
    read -ra ea <<< "$(env_of "$mode" a)"
    read -ra eb <<< "$(env_of "$mode" b)"
    ip netns exec "$a" env "${ea[@]}" timeout 300 "$bin/mrc-perf" server \
      --port "$port" --gid fd81::1 --clients 1 > "$out/$name.server.json" 2>&1 &
    local spid=$!
    sleep 0.5
    ip netns exec "$b" env "${eb[@]}" timeout 300 "$bin/mrc-perf" client 10.81.0.1 \
      --port "$port" --gid fd81::2 "$@" > "$out/$name.json" 2>&1
    rc=$?
    wait "$spid"
  fi
  if [ $rc -ne 0 ]; then
    echo "run $name ($mode) failed (exit $rc):" >&2
    cat "$out/$name.json" "$out/$name.server.json" >&2
    failed=1
  fi
}

# Message counts, not durations: `mrct endpoint` runs by --duration failed their control
# exchange here (the client got no answer from the server), by --iters they complete.
bw=(--size 65536 --qps 1 --tx-depth 16 --iters $((300 * scale)))
rate1=(--size 64 --qps 1 --tx-depth 16 --iters $((1000 * scale)))
rate64=(--size 64 --qps 64 --tx-depth 16 --iters $((50 * scale)))
for m in inproc device; do
  run "bw-$m" "$m" --test write_bw "${bw[@]}"
  run "lat-$m" "$m" --test write_lat --size 64 --iters 2000
  run "rate1-$m" "$m" --test write_bw "${rate1[@]}"
  run "rate64-$m" "$m" --test write_bw "${rate64[@]}"
done
run bw-mrct mrct "${bw[@]}"
run lat-mrct mrct --size 64 --qps 1 --tx-depth 1 --iters 2000
run rate1-mrct mrct "${rate1[@]}"
run rate64-mrct mrct "${rate64[@]}"

# iperf3 -u on the same veth pair, the reference the runtime's bench measures the endpoint
# against (bench_runtime.sh): goodput = rate x (1 - loss), 4 KiB datagrams, unpaced.
if command -v iperf3 > /dev/null; then
  ip netns exec "$a" timeout 60 iperf3 -s -1 -B fd81::1 -p "$port" > /dev/null 2>&1 &
  spid=$!
  sleep 0.5
  ip netns exec "$b" timeout 60 iperf3 -u -c fd81::1 -B fd81::2 -p "$port" -b 0 -l 4096 -t 3 -J \
    > "$out/iperf3.json" 2>&1 || { cat "$out/iperf3.json" >&2; failed=1; }
  wait "$spid"
fi

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

python3 - "$out" << 'EOF'
import json, os, sys
out = sys.argv[1]

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

rows = [
    ("write bandwidth, 64 KiB, 1 QP (Gbit/s)", "gbit_per_s", "bw", True),
    ("write latency 64 B p50 (us)", "latency_us.p50", "lat", False),
    ("write latency 64 B p99 (us)", "latency_us.p99", "lat", False),
    ("message rate 64 B, 1 QP (msg/s)", "msg_per_s", "rate1", True),
    ("message rate 64 B, 64 QPs (msg/s)", "msg_per_s", "rate64", True),
]
def f(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
def ratio(x, y):
    return f"{x / y:.2f}" if x is not None and y not in (None, 0) else "-"
print(f"{'figure':42} {'in-process':>11} {'device':>11} {'mrct endp.':>11} "
      f"{'dev/inproc':>10} {'inproc/mrct':>11} {'dev/mrct':>9}")
for label, key, run, _ in rows:
    i, d, m = (fig(f"{run}-{c}.json", key) for c in ("inproc", "device", "mrct"))
    print(f"{label:42} {f(i):>11} {f(d):>11} {f(m):>11} {ratio(d, i):>10} "
          f"{ratio(i, m):>11} {ratio(d, m):>9}")
# The write bandwidth against iperf3 -u on the same pair (the runtime bench's ratio).
try:
    s = json.load(open(os.path.join(out, "iperf3.json")))["end"]["sum"]
    ig = s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100) / 1e9
except (OSError, ValueError, KeyError):
    ig = None
i, d, m = (fig(f"bw-{c}.json", "gbit_per_s") for c in ("inproc", "device", "mrct"))
print(f"{'iperf3 -u goodput, 4 KiB datagrams (Gbit/s)':42} {f(ig):>11}")
print(f"{'write bandwidth / iperf3 -u goodput':42} {ratio(i, ig):>11} {ratio(d, ig):>11} "
      f"{ratio(m, ig):>11}")
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

#!/usr/bin/env bash
# Goodput of one `mrct endpoint` client/server pair over veth paths through Linux routers in
# namespaces, compared with `iperf3 -u` on the same plane-1 path and with the engine alone in
# memory (`mrct endpoint memory`). Root only; the namespaces are removed on exit.
#
#   bench_runtime.sh [--planes N] [--bytes 1G] [--size 1M] [--loss PCT] [--bin PATH]
#                    [--iperf-seconds S] [--extra "endpoint options"] [--rounds N]
#                    [--compare "endpoint options"] [--napi off|router|all]
#
# --bin: an `mrct` binary (run as `mrct endpoint`) or `mrc_endpoint`; default: the first of
# build/release/bin/mrct, build/*/bin/mrct, build/*/bin/mrc_endpoint that works.
# --loss: drop PCT % of UDP/4791 packets in plane 1's router (nft numgen) for the endpoint runs.
# --rounds N: N rounds of iperf3, then the endpoint (then the --compare endpoint), so that a load
#   change on the machine hits all of them; prints every round and the medians (single runs on a
#   shared 2-core machine vary by +-25 %). The ratio is the median of the per-round ratios.
# --compare OPTS: in every round, a second endpoint run with OPTS instead of --extra (an A/B of
#   an option on the same topology within the same minute), reported in its own rows.
# --napi MODE: threaded NAPI receive on the veths (topo.sh napi), for iperf3 and the endpoint
#   alike; default off (every downstream softirq runs in the sender's system call).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
planes=8
bytes=1G
size=1M
loss=0
bin=""
iperf_s=5
extra=""
rounds=1
compare=""
have_compare=0
napi=off
while [ $# -gt 0 ]; do
  case "$1" in
    --planes) planes=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --iperf-seconds) iperf_s=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --compare) compare=$2; have_compare=1; shift 2 ;;
    --napi) napi=$2; shift 2 ;;
    *) echo "bench_runtime.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_runtime.sh: --rounds must be a positive integer, got '$rounds'" >&2; exit 2; }
case "$napi" in off | router | all) ;; *) echo "bench_runtime.sh: --napi must be off, router or all, got '$napi'" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "bench_runtime.sh: needs root" >&2; exit 2; }

tobytes() { numfmt --from=iec "$1"; }
total=$(tobytes "$bytes")
msg=$(tobytes "$size")
iters=$(( total / msg ))

run_ep=()
if [ -n "$bin" ]; then
  case "$bin" in *mrct) run_ep=("$bin" endpoint) ;; *) run_ep=("$bin") ;; esac
else
  for c in "$root"/build/release/bin/mrct "$root"/build/*/bin/mrct; do
    if [ -x "$c" ] && "$c" endpoint --help >/dev/null 2>&1; then run_ep=("$c" endpoint); break; fi
  done
  if [ ${#run_ep[@]} -eq 0 ]; then
    for c in "$root"/build/release/bin/mrc_endpoint "$root"/build/*rel*/bin/mrc_endpoint "$root"/build/*/bin/mrc_endpoint; do
      if [ -x "$c" ]; then run_ep=("$c"); break; fi
    done
  fi
fi
[ ${#run_ep[@]} -gt 0 ] || { echo "bench_runtime.sh: no mrct/mrc_endpoint binary; use --bin" >&2; exit 2; }

prefix="mrcbn$$"
tmp=$(mktemp -d)
cleanup() {
  bash "$here/topo.sh" down "$prefix" || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ia=$(seq -s, -f 'a%g' 1 "$planes")
ib=$(seq -s, -f 'b%g' 1 "$planes")
bash "$here/topo.sh" up "$prefix" "$planes" stev
napi_threads() { ps -e -o pid=,comm= | awk '$2 ~ /^napi\// {print $1}' | sort; }
napi_threads > "$tmp/napi.before"
bash "$here/topo.sh" napi "$prefix" "$planes" "$napi"
# The NAPI threads this topology made (the new ones): their CPU is part of either side's cost.
napi_threads | comm -13 "$tmp/napi.before" - > "$tmp/napi.pids"
# CPU ns of those threads so far (first field of /proc/PID/schedstat: time on a CPU).
napi_cpu_ns() {
  local t=0 pid ns
  while read -r pid; do
    ns=$(cut -d' ' -f1 "/proc/$pid/schedstat" 2>/dev/null || echo 0)
    t=$((t + ns))
  done < "$tmp/napi.pids"
  echo "$t"
}
A=${prefix}a
B=${prefix}b
R1=${prefix}r1
echo "# ${run_ep[*]} | $planes planes, $bytes in $size messages ($iters), $(nproc) cores, veth NAPI $napi, load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- iperf3 -u on plane 1 (A a1 -> r1 -> b1), the path of the endpoint's port 1.
# Prints "goodput_gbps loss_pct cpu_s_per_gib".
run_iperf() {
  ip netns exec "$A" ip -6 route replace fd00:a::2/128 via fd00:1:1::1 dev a1
  ip netns exec "$B" ip -6 route replace fd00:a::1/128 via fd00:2:1::1 dev b1
  ip netns exec "$B" iperf3 -s -1 -B fd00:a::2 -p 5299 >/dev/null 2>&1 &
  local ipid=$!
  sleep 0.5
  local n0; n0=$(napi_cpu_ns)
  ip netns exec "$A" iperf3 -u -c fd00:a::2 -B fd00:a::1 -p 5299 -b 0 -l 4096 -t "$iperf_s" -J > "$tmp/iperf.json" || true
  wait "$ipid" || true
  echo $(( $(napi_cpu_ns) - n0 )) > "$tmp/iperf.napi"
  # Back to the multipath routes topo.sh made (the endpoint resolves each plane's gateway from them).
  ip netns exec "$A" ip -6 route del fd00:a::2/128
  ip netns exec "$B" ip -6 route del fd00:a::1/128
  for ((p = 1; p <= planes; p++)); do
    x=$(printf '%x' "$p")
    ip netns exec "$A" ip -6 route append fd00:a::2/128 via "fd00:1:$x::1" dev "a$p"
    ip netns exec "$B" ip -6 route append fd00:a::1/128 via "fd00:2:$x::1" dev "b$p"
  done
  python3 - "$tmp/iperf.json" "$iperf_s" "$(cat "$tmp/iperf.napi")" <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    s = j["end"]["sum"]
    cpu = j["end"]["cpu_utilization_percent"]
except (ValueError, KeyError, OSError):
    print("0 100 0 0 0 0")  # iperf3 failed: a zero that the summary shows as such
    sys.exit(0)
good = s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100) / 1e9
secs = float(s.get("seconds", sys.argv[2]))
# CPU seconds of both iperf3 processes (and of the topology's NAPI threads) per GiB delivered
gib = good * 1e9 / 8 * secs / 2**30
napi_s = int(sys.argv[3]) / 1e9
cpu_s = (cpu["host_total"] + cpu["remote_total"]) / 100 * secs + napi_s
# datagrams sent per second and UDP payload bytes per datagram
pkts = s.get("packets", 0)
per_frame = s["bytes"] / pkts if pkts else 0
print(f"{good:.3f} {s.get('lost_percent', 0):.2f} {cpu_s / gib if gib else 0:.3f} "
      f"{pkts / secs if secs else 0:.0f} {per_frame:.0f} {napi_s / gib if gib else 0:.3f}")
EOF
}

if [ "$loss" != 0 ]; then
  cat > "$tmp/loss.nft" <<EOF
table inet mrcbench {
  chain loss {
    type filter hook forward priority 0;
    udp dport 4791 numgen random mod 100 < $loss counter drop
  }
}
EOF
fi

# --- the endpoint over all planes. run_endpoint TAG "OPTIONS" writes $tmp/TAG.{client,server}.json
# and $tmp/TAG.rc ("client_rc server_rc"). --ctl-timeout 120: on a loaded machine a 1 GiB run
# can outlast the default 10 s the control channel waits for the peer's result.
run_endpoint() {
  local tag=$1 opts=$2
  if [ "$loss" != 0 ]; then ip netns exec "$R1" nft -f "$tmp/loss.nft"; fi
  local n0; n0=$(napi_cpu_ns)
  ip netns exec "$B" "${run_ep[@]}" server --ifaces "$ib" --accept-timeout 30 --ctl-timeout 120 --json $opts > "$tmp/$tag.server.json" 2> "$tmp/$tag.server.err" &
  local spid=$!
  sleep 0.3
  set +e
  ip netns exec "$A" "${run_ep[@]}" client --server fd00:ff::b --ifaces "$ia" --size "$size" --iters "$iters" --ctl-timeout 120 --json $opts > "$tmp/$tag.client.json" 2> "$tmp/$tag.client.err"
  local crc=$?
  wait "$spid"
  local src=$?
  set -e
  echo "$crc $src" > "$tmp/$tag.rc"
  echo $(( $(napi_cpu_ns) - n0 )) > "$tmp/$tag.napi"
  if [ "$loss" != 0 ]; then
    echo "# $tag: nft on plane 1: $(ip netns exec "$R1" nft list ruleset | grep -o 'packets [0-9]* bytes [0-9]*' | head -1) dropped"
    ip netns exec "$R1" nft delete table inet mrcbench
  fi
}

for ((r = 1; r <= rounds; r++)); do
  echo "$(run_iperf) $(cut -d' ' -f1 /proc/loadavg)" > "$tmp/r$r.iperf"
  run_endpoint "r$r.a" "$extra"
  if [ "$have_compare" = 1 ]; then run_endpoint "r$r.b" "$compare"; fi
done

# --- the engine alone
"${run_ep[@]}" memory --planes "$planes" --size "$size" --iters "$iters" --json $extra > "$tmp/memory.json" 2>&1 || true

python3 - "$tmp" "$rounds" "$have_compare" "$extra" "$compare" <<'EOF'
import json, os, statistics, sys
d, rounds, have_compare = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
labels = {"a": sys.argv[4] or "(default)", "b": sys.argv[5] or "(default)"}
kinds = ["a", "b"] if have_compare else ["a"]
def last(p):
    j = None
    try:
        for line in open(os.path.join(d, p)):
            line = line.strip()
            if line.startswith("{"): j = json.loads(line)
    except OSError:
        pass
    return j
def text(p):
    try:
        return open(os.path.join(d, p)).read().strip()
    except OSError:
        return ""
ok = True
iperf = []  # per round: (gbps, cpu_s_per_gib, loss_pct, load, frames_per_s, bytes_per_frame, napi_s_per_gib)
runs = {k: [] for k in kinds}  # per kind: (round, gbps, cpu_s_per_gib, frames_per_s, bytes_per_frame, acks_per_gib, napi_s_per_gib)
notes = []
for r in range(1, rounds + 1):
    g, lossp, cpu, fps, bpf, napi_s, load = text(f"r{r}.iperf").split()
    iperf.append((float(g), float(cpu), float(lossp), float(load), float(fps), float(bpf), float(napi_s)))
    for k in kinds:
        c, s = last(f"r{r}.{k}.client.json"), last(f"r{r}.{k}.server.json")
        crc, src = (int(x) for x in text(f"r{r}.{k}.rc").split())
        if c is None or s is None or crc != 0 or src != 0:
            ok = False
            notes.append(f"round {r} endpoint {labels[k]}: FAILED, client rc {crc}, server rc {src}: "
                         f"{text(f'r{r}.{k}.client.err')} {text(f'r{r}.{k}.server.err')}")
            continue
        gib = c["bytes"] / 2**30
        v = s.get("verify", {})
        rt = c["retransmissions"]
        napi_s = int(text(f"r{r}.{k}.napi") or 0) / 1e9
        # data frames the client sent (retransmissions included) and frames the server sent back
        data_frames = sum(p["tx_frames"] for p in c.get("ports", []))
        ack_frames = sum(p["tx_frames"] for p in s.get("ports", []))
        runs[k].append((r, c["gbit_per_s"], (c["cpu_s"] + s["cpu_s"] + napi_s) / gib if gib else 0,
                        data_frames / c["seconds"] if c["seconds"] else 0,
                        c["bytes"] / data_frames if data_frames else 0,
                        ack_frames / gib if gib else 0, napi_s / gib if gib else 0))
        notes.append(f"round {r} endpoint {labels[k]}: {c['planes']} planes, {c['bytes']} B, "
                     f"{c['seconds']:.2f} s, CPU s/GiB client {c['cpu_s'] / gib:.3f} server "
                     f"{s['cpu_s'] / gib:.3f}, retransmissions {rt['total']} (timeout {rt['timeout']}, "
                     f"nack {rt['nack']}, sack_gap {rt['sack_gap']}), EV retirements "
                     f"{c.get('ev', {}).get('retired', 0)}, verified "
                     f"{v.get('messages_checked', 0) - v.get('messages_bad', 0)}/"
                     f"{v.get('messages_checked', 0)} messages, client frames per transmit "
                     f"system call {data_frames / max(1, c.get('loop', {}).get('tx_syscalls', 0)):.1f}")
med = statistics.median
def ratio(r, g):
    ig = iperf[r - 1][0]
    return g / ig if ig > 0 else 0.0
# CPU s/GiB: both processes (endpoint: both loop threads) plus the topology's NAPI threads
# (--napi; "NAPI" shows their share). frames/s and B/frame: data frames (iperf3: datagrams, UDP
# payload bytes; endpoint: frames the client sent, retransmissions included, goodput bytes per
# frame); ACKs/GiB: frames the server sent back.
print(f"{'':40} {'Gbit/s':>8} {'CPU s/GiB':>10} {'ratio':>7} {'frames/s':>9} {'B/frame':>8} "
      f"{'ACKs/GiB':>9} {'NAPI':>6}")
def row(name, g, cpu, rat, fps, bpf, acks, napi_s, tail=""):
    a = f"{acks:9.0f}" if acks is not None else f"{'-':>9}"
    print(f"{name:40} {g:8.3f} {cpu:10.3f} {rat:7.2f} {fps:9.0f} {bpf:8.0f} {a} {napi_s:6.3f}{tail}")
if rounds > 1:
    for r in range(1, rounds + 1):
        ig, icpu, il, load, ifps, ibpf, inapi = iperf[r - 1]
        print(f"round {r} (load {load:.2f})")
        row("  iperf3 -u (plane 1)", ig, icpu, 1.0, ifps, ibpf, None, inapi, f"   loss {il}%")
        for k in kinds:
            for rr, g, cpu, fps, bpf, acks, napi_s in runs[k]:
                if rr == r:
                    row("  endpoint " + labels[k], g, cpu, ratio(r, g), fps, bpf, acks, napi_s)
pre = f"median of {rounds}: " if rounds > 1 else ""
ig = med([x[0] for x in iperf])
row(pre + "iperf3 -u (plane 1)", ig, med([x[1] for x in iperf]), 1.0, med([x[4] for x in iperf]),
    med([x[5] for x in iperf]), None, med([x[6] for x in iperf]),
    f"   loss {med([x[2] for x in iperf]):.2f}%")
for k in kinds:
    if not runs[k]:
        continue
    name = pre + "endpoint" + (" " + labels[k] if have_compare else "")
    # the ratio: median of the per-round ratios (each against the iperf3 run of its round)
    row(name, med([x[1] for x in runs[k]]), med([x[2] for x in runs[k]]),
        med([ratio(x[0], x[1]) for x in runs[k]]), med([x[3] for x in runs[k]]),
        med([x[4] for x in runs[k]]), med([x[5] for x in runs[k]]), med([x[6] for x in runs[k]]),
        f"   {len(runs[k])}/{rounds} runs")
m = last("memory.json")
if m:
    print(f"{'engine in memory':40} {m['gbit_per_s']:8.3f} {m['cpu_s_per_gib']:10.3f} "
          f"{m['gbit_per_s'] / ig if ig else 0:7.2f}")
for n in notes:
    print(n)
print("load at end", " ".join(open("/proc/loadavg").read().split()[:3]))
sys.exit(0 if ok else 1)
EOF

#!/usr/bin/env bash
# Goodput of one `mrct endpoint` client/server pair over veth paths through Linux routers in
# namespaces, compared with `iperf3 -u` on the same plane-1 path and with the engine alone in
# memory (`mrct endpoint memory`). Root only; the namespaces are removed on exit.
#
#   bench_runtime.sh [--planes N] [--bytes 1G] [--size 1M] [--loss PCT] [--bin PATH]
#                    [--iperf-seconds S] [--extra "endpoint options"]
#
# --bin: an `mrct` binary (run as `mrct endpoint`) or `mrc_endpoint`; default: the first of
# build/release/bin/mrct, build/*/bin/mrc_endpoint that works.
# --loss: drop PCT % of UDP/4791 packets in plane 1's router (nft numgen) for the endpoint runs.
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
while [ $# -gt 0 ]; do
  case "$1" in
    --planes) planes=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --iperf-seconds) iperf_s=$2; shift 2 ;;
    --extra) extra=$2; shift 2 ;;
    *) echo "bench_runtime.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
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
A=${prefix}a
B=${prefix}b
R1=${prefix}r1
echo "# ${run_ep[*]} | $planes planes, $bytes in $size messages ($iters), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- iperf3 -u on plane 1 (A a1 -> r1 -> b1), the path of the endpoint's port 1.
ip netns exec "$A" ip -6 route replace fd00:a::2/128 via fd00:1:1::1 dev a1
ip netns exec "$B" ip -6 route replace fd00:a::1/128 via fd00:2:1::1 dev b1
ip netns exec "$B" iperf3 -s -1 -B fd00:a::2 -p 5299 >/dev/null 2>&1 &
ipid=$!
sleep 0.5
ip netns exec "$A" iperf3 -u -c fd00:a::2 -B fd00:a::1 -p 5299 -b 0 -l 4096 -t "$iperf_s" -J > "$tmp/iperf.json" || true
wait "$ipid" || true
# Back to the multipath routes topo.sh made (the endpoint resolves each plane's gateway from them).
ip netns exec "$A" ip -6 route del fd00:a::2/128
ip netns exec "$B" ip -6 route del fd00:a::1/128
for ((p = 1; p <= planes; p++)); do
  x=$(printf '%x' "$p")
  ip netns exec "$A" ip -6 route append fd00:a::2/128 via "fd00:1:$x::1" dev "a$p"
  ip netns exec "$B" ip -6 route append fd00:a::1/128 via "fd00:2:$x::1" dev "b$p"
done
read -r iperf_gbps iperf_loss iperf_cpu <<<"$(python3 - "$tmp/iperf.json" "$iperf_s" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
s = j["end"]["sum"]
good = s["bits_per_second"] * (1 - s.get("lost_percent", 0) / 100) / 1e9
cpu = j["end"]["cpu_utilization_percent"]
secs = float(sys.argv[2])
# CPU seconds of both iperf3 processes per GiB delivered
gib = good * 1e9 / 8 * secs / 2**30
cpu_s = (cpu["host_total"] + cpu["remote_total"]) / 100 * secs
print(f"{good:.3f} {s.get('lost_percent', 0):.2f} {cpu_s / gib if gib else 0:.3f}")
EOF
)"

if [ "$loss" != 0 ]; then
  cat > "$tmp/loss.nft" <<EOF
table inet mrcbench {
  chain loss {
    type filter hook forward priority 0;
    udp dport 4791 numgen random mod 100 < $loss counter drop
  }
}
EOF
  ip netns exec "$R1" nft -f "$tmp/loss.nft"
fi

# --- the endpoint over all planes
ip netns exec "$B" "${run_ep[@]}" server --ifaces "$ib" --accept-timeout 30 --json $extra > "$tmp/server.json" 2> "$tmp/server.err" &
spid=$!
sleep 0.3
set +e
ip netns exec "$A" "${run_ep[@]}" client --server fd00:ff::b --ifaces "$ia" --size "$size" --iters "$iters" --json $extra > "$tmp/client.json" 2> "$tmp/client.err"
crc=$?
wait "$spid"
src=$?
set -e
if [ "$loss" != 0 ]; then
  echo "# nft on plane 1: $(ip netns exec "$R1" nft list ruleset | grep -o 'packets [0-9]* bytes [0-9]*' | head -1) dropped"
fi

# --- the engine alone
"${run_ep[@]}" memory --planes "$planes" --size "$size" --iters "$iters" --json $extra > "$tmp/memory.json" 2>&1 || true

python3 - "$tmp" "$crc" "$src" "$iperf_gbps" "$iperf_loss" "$iperf_cpu" <<'EOF'
import json, sys, os
d, crc, src = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
iperf, iperf_loss, iperf_cpu = float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
def last(p):
    j = None
    for line in open(os.path.join(d, p)):
        line = line.strip()
        if line.startswith("{"): j = json.loads(line)
    return j
c, s, m = last("client.json"), last("server.json"), last("memory.json")
if c is None or s is None:
    print("endpoint run failed:", open(os.path.join(d, "client.err")).read(), open(os.path.join(d, "server.err")).read())
    sys.exit(1)
gib = c["bytes"] / 2**30
ep_cpu = (c["cpu_s"] + s["cpu_s"]) / gib if gib else 0
v = s.get("verify", {})
print(f"{'':24} {'Gbit/s':>8} {'CPU s/GiB':>10} {'ratio':>7}")
print(f"{'iperf3 -u (plane 1)':24} {iperf:8.3f} {iperf_cpu:10.3f} {'1.00':>7}   loss {iperf_loss}%")
print(f"{'endpoint':24} {c['gbit_per_s']:8.3f} {ep_cpu:10.3f} {c['gbit_per_s'] / iperf if iperf else 0:7.2f}"
      f"   {c['planes']} planes, {c['bytes']} B, {c['seconds']:.2f} s")
if m:
    print(f"{'engine in memory':24} {m['gbit_per_s']:8.3f} {m['cpu_s_per_gib']:10.3f} {m['gbit_per_s'] / iperf if iperf else 0:7.2f}")
r = c["retransmissions"]
print(f"retransmissions {r['total']} (timeout {r['timeout']}, nack {r['nack']}, sack_gap {r['sack_gap']}), "
      f"EV retirements {c.get('ev', {}).get('retired', 0)}, "
      f"verified {v.get('messages_checked', 0) - v.get('messages_bad', 0)}/{v.get('messages_checked', 0)} messages, "
      f"client rc {crc}, server rc {src}")
sys.exit(0 if crc == 0 and src == 0 else 1)
EOF

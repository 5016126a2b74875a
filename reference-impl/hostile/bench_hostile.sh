#!/usr/bin/env bash
# Goodput of one `mrct endpoint` transfer under each hostile flood, next to the flood-free run
# (issue 20: >= 0.9x). Root only; namespaces mrcbh<pid>* are removed on exit.
#
#   bench_hostile.sh [--rate 100000] [--seconds 8] [--rounds 1] [--planes 2] [--size 256K]
#                    [--kinds "unexp-event ev-probe ..."] [--mrct PATH] [--hostile PATH]
#                    [--flood-cpu N] [--endpoint-cpus LIST]
#
# Topology as reference-impl/runtime/topo.sh (STEV, PLANES planes) plus an attacker namespace
# on plane 1's router. Every run, flood-free included, does the same: the transfer starts, the
# attacker learns from a tap on the router (mrc_hostile learn), the tap is removed, and the
# attacker floods one kind at --rate frames/s until the transfer ends (none for "none").
# Goodput is the client's gbit_per_s over the whole --seconds transfer. wrong-rkey and
# va-outside are not benchmarked: by verbs RC semantics they end the transfer (the test checks
# that it ends at once). The generator's achieved rate is printed: on a loaded host it may be
# below --rate, and then the figure is for that rate. --flood-cpu pins the generator (and the
# kernel forwarding it runs inline: veth, the router, the victim's socket) to one CPU and
# --endpoint-cpus the client and server to others (taskset lists), so that a flood competes
# with the transfer for what it would compete for on a real host (the victim's receive path),
# not for the transfer's own CPU; the flood-free run is pinned the same way.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
topo="$here/../runtime/topo.sh"
rate=100000
seconds=8
rounds=1
planes=2
size=256K
kinds="unexp-event ev-probe psn-ahead old-psn port-status bad-icrc"
mrct=""
hostile=""
flood_cpu=""
endpoint_cpus=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --planes) planes=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --kinds) kinds=$2; shift 2 ;;
    --mrct) mrct=$2; shift 2 ;;
    --hostile) hostile=$2; shift 2 ;;
    --flood-cpu) flood_cpu=$2; shift 2 ;;
    --endpoint-cpus) endpoint_cpus=$2; shift 2 ;;
    *) echo "bench_hostile.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench_hostile.sh: needs root" >&2; exit 2; }
for c in "$root"/build/ci/bin "$root"/build/release/bin; do
  [ -z "$mrct" ] && [ -x "$c/mrct" ] && mrct=$c/mrct
  [ -z "$hostile" ] && [ -x "$c/mrc_hostile" ] && hostile=$c/mrc_hostile
done
[ -x "$mrct" ] && [ -x "$hostile" ] || { echo "bench_hostile.sh: need mrct and mrc_hostile (--mrct, --hostile)" >&2; exit 2; }
# `mrct endpoint ROLE` or the stand-alone `mrc_endpoint ROLE` (the same tool).
ep=("$mrct" endpoint)
[ "$(basename "$mrct")" = mrc_endpoint ] && ep=("$mrct")
[ -z "$endpoint_cpus" ] || ep=(taskset -c "$endpoint_cpus" "${ep[@]}")
pin=()
[ -z "$flood_cpu" ] || pin=(--cpu "$flood_cpu")

prefix="mrcbh$$"
A=${prefix}a
B=${prefix}b
C=${prefix}c
R1=${prefix}r1
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  bash "$topo" down "$prefix" > /dev/null 2>&1 || true
  ip netns del "$C" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bash "$topo" up "$prefix" "$planes" stev 9000 > /dev/null
ip netns add "$C"
ip link add c1 netns "$C" mtu 9000 type veth peer name rc netns "$R1" mtu 9000
ip netns exec "$C" ip link set lo up
ip netns exec "$C" ip link set c1 up
ip netns exec "$R1" ip link set rc up
router_mac=$(ip netns exec "$R1" cat /sys/class/net/rc/address)
ia=$(seq -s, -f 'a%g' 1 "$planes")
ib=$(seq -s, -f 'b%g' 1 "$planes")

# run KIND: one transfer, learning, then KIND's flood (or none); prints one result line.
run() {
  local kind=$1 name=$1-$2
  ip netns exec "$B" "${ep[@]}" server --ifaces "$ib" --accept-timeout 20 --buffer-limit 64M --json \
    > "$tmp/$name-server.json" 2> "$tmp/$name-server.err" &
  local spid=$!
  pids+=("$spid")
  sleep 0.3
  ip netns exec "$A" "${ep[@]}" client --server fd00:ff::b --ifaces "$ia" --size "$size" \
    --duration "$seconds" --buffer-limit 64M --json > "$tmp/$name-client.json" 2> "$tmp/$name-client.err" &
  local cpid=$!
  pids+=("$cpid")
  local t0
  t0=$(date +%s.%N)
  sleep 0.3
  ip netns exec "$R1" tc qdisc add dev ra clsact
  ip netns exec "$R1" tc qdisc add dev rb clsact
  for d in ra rb; do
    ip netns exec "$R1" tc filter add dev "$d" ingress protocol all u32 match u32 0 0 action mirred egress mirror dev rc
  done
  local learnt=1
  ip netns exec "$C" "$hostile" learn --iface c1 --out "$tmp/learned.json" --timeout-s 10 \
    2> "$tmp/$name-learn.err" || learnt=0
  ip netns exec "$R1" tc qdisc del dev ra clsact
  ip netns exec "$R1" tc qdisc del dev rb clsact
  local left
  left=$(python3 -c "print(max(0.1, $seconds - ($(date +%s.%N) - $t0) - 0.1))")
  echo '{}' > "$tmp/$name-flood.json"
  if [ "$kind" != none ] && [ $learnt = 1 ]; then
    ip netns exec "$C" "$hostile" flood --iface c1 --learned "$tmp/learned.json" \
      --next-hop-mac "$router_mac" --kind "$kind" --rate "$rate" --seconds "$left" "${pin[@]}" \
      > "$tmp/$name-flood.json"
  fi
  local crc=0 src=0
  wait "$cpid" || crc=$?
  wait "$spid" || src=$?
  python3 - "$tmp" "$name" "$crc" "$src" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, os, sys
d, name, crc, src, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def last(p):
    j = None
    try:
        for line in open(os.path.join(d, p)):
            if line.strip().startswith("{"):
                j = json.loads(line)
    except OSError:
        pass
    return j or {}
c, s, f = last(f"{name}-client.json"), last(f"{name}-server.json"), last(f"{name}-flood.json")
v = s.get("verify", {})
ok = crc == 0 and src == 0 and v.get("messages_bad", 1) == 0
print(f"{name.rsplit('-', 1)[0]:12} {c.get('gbit_per_s', 0):7.3f} "
      f"{f.get('sent', 0):>9} {f.get('rate', 0):>9.0f} "
      f"{s.get('peak_rss_kib', 0) / 1024:8.1f} {c.get('peak_rss_kib', 0) / 1024:8.1f} "
      f"{s.get('engine', {}).get('peer_state_entries', -1):>5} "
      f"{sum(p.get('rx_ring_drops', 0) for p in s.get('ports', [])):>8} "
      f"{c.get('retransmissions', {}).get('total', 0):>6} "
      f"{f.get('frames_per_syscall', 0):>6.1f} "
      f"{'verified' if ok else f'FAILED c{crc} s{src}'}  load {load}", flush=True)
if not ok:
    for p in (f"{name}-client.err", f"{name}-server.err"):
        try:
            print("#   " + p + ": " + open(os.path.join(d, p)).read().strip()[-300:], flush=True)
        except OSError:
            pass
PYEOF
}

echo "# ${ep[*]}, $planes planes STEV, $size messages, ${seconds} s transfers, flood $rate frames/s" \
  "(generator on CPU ${flood_cpu:-any}, endpoints on ${endpoint_cpus:-any}); $(nproc) cores"
for ((r = 1; r <= rounds; r++)); do
  echo "# round $r"
  printf '%-12s %7s %9s %9s %8s %8s %5s %8s %6s %6s\n' kind Gbit/s sent frames/s srvRSSMi cliRSSMi peers \
    srvRingDrop cliRtx perCall
  for k in none $kinds; do
    run "$k" "$r" | tee -a "$tmp/results.txt"
  done
done
python3 - "$tmp/results.txt" <<'PYEOF'
import collections, statistics, sys
g = collections.defaultdict(list)
rate = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    g[f[0]].append(float(f[1]))
    rate[f[0]].append(float(f[3]))
base = statistics.median(g["none"])
print(f"# medians over {len(g['none'])} round(s); flood-free {base:.3f} Gbit/s")
for k, v in g.items():
    if k == "none":
        continue
    m = statistics.median(v)
    print(f"{k:12} {m:7.3f} Gbit/s  {m / base if base else 0:5.2f}x flood-free"
          f"  at {statistics.median(rate[k]):.0f} frames/s")
PYEOF

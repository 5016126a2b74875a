#!/usr/bin/env bash
# Device mode carries what in-process mode carries: two namespaces joined by a veth pair, a
# softmrcd in each, and the programs that run in-process elsewhere run here with
# MRC_SOFT_DEVICE set: mrc-perf (write_bw over a size sweep, write_imm on 4 QPs, write_lat, all
# verified by the server), the walkthrough (WRITEs, probes, an EV event), and call_cost (an
# empty mrc_poll_cq and mrc_post_send, which must work through the completion ring and the
# socket).
# Usage: device_perf_netns_test.sh SOFTMRCD MRC_PERF WALKTHROUGH CALL_COST
# Exit 0 pass, 1 fail, 77 skipped (needs root). Namespaces are pid-named and always removed.
set -u
. "$(dirname "$0")/veth_pair.sh"
daemon=$1
perf=$2
walk=$3
cost=$4
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, AF_PACKET)"
  exit 77
fi
a=smdp$$a
b=smdp$$b
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  veth_pair_down "$a" "$b"
  rm -rf "$tmp"
}
trap cleanup EXIT
set -e
veth_pair_up "$a" "$b" "smdp$$x" "smdp$$y" 10.79.0 fd79
set +e
ip netns exec "$a" env MRC_SOFT_IFACES="smdp$$x" MRC_SOFT_GID=fd79::1 "$daemon" \
  --socket "$tmp/a.sock" > "$tmp/daemon-a.log" 2>&1 &
pids+=("$!")
ip netns exec "$b" env MRC_SOFT_IFACES="smdp$$y" MRC_SOFT_GID=fd79::2 "$daemon" \
  --socket "$tmp/b.sock" > "$tmp/daemon-b.log" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do
  [ -S "$tmp/a.sock" ] && [ -S "$tmp/b.sock" ] && break
  sleep 0.1
done
port=$((20000 + $$ % 20000))
A=(ip netns exec "$a" env MRC_SOFT_DEVICE="$tmp/a.sock")
B=(ip netns exec "$b" env MRC_SOFT_DEVICE="$tmp/b.sock")
fails=0
check() {  # NAME EXPECTED_RC RC FILE PATTERN...
  local name=$1 want=$2 got=$3 file=$4
  shift 4
  local ok=1
  [ "$got" -eq "$want" ] || ok=0
  for pat in "$@"; do grep -q -- "$pat" "$file" || ok=0; done
  if [ $ok = 1 ]; then
    echo "ok   $name"
  else
    echo "FAIL $name (exit $got, expected $want)"
    cat "$file"
    fails=$((fails + 1))
  fi
}

"${A[@]}" timeout 300 "$perf" server --port "$port" --gid fd79::1 > "$tmp/server.log" 2>&1 &
spid=$!
pids+=("$spid")
"${B[@]}" timeout 120 "$perf" client 10.79.0.1 --port "$port" --gid fd79::2 --test write_bw \
  --sweep 1:1M --iters 20 --tx-depth 8 > "$tmp/sweep.json" 2>&1
check "device mode: mrc-perf write_bw sweep 1 B..1 MiB, verified" 0 $? "$tmp/sweep.json" \
  '"size":1,' '"size":1048576,' '"messages_bad":0'
if grep -q '"ok":false' "$tmp/sweep.json"; then
  echo "FAIL a sweep point did not verify"
  fails=$((fails + 1))
fi
"${B[@]}" timeout 120 "$perf" client 10.79.0.1 --port "$port" --gid fd79::2 --test write_imm \
  --size 4096 --iters 300 --qps 4 --tx-depth 16 > "$tmp/imm.json" 2>&1
check "device mode: mrc-perf write_imm on 4 QPs, every immediate once" 0 $? "$tmp/imm.json" \
  '"messages":1200' '"missing":0,"duplicates":0' '"ok":true'
"${B[@]}" timeout 120 "$perf" client 10.79.0.1 --port "$port" --gid fd79::2 --test write_lat \
  --size 64 --iters 200 > "$tmp/lat.json" 2>&1
check "device mode: mrc-perf write_lat" 0 $? "$tmp/lat.json" '"latency_us":{"min":' '"ok":true'
kill "$spid" 2> /dev/null
wait "$spid" 2> /dev/null

"${A[@]}" timeout 90 "$walk" server "$port" 64 65536 > "$tmp/walk-server.log" 2>&1 &
spid=$!
pids+=("$spid")
"${B[@]}" timeout 90 "$walk" client 10.79.0.1 "$port" 64 65536 > "$tmp/walk-client.log" 2>&1
crc=$?
wait "$spid"
check "device mode: walkthrough server verified every byte" 0 $? "$tmp/walk-server.log" "0 wrong"
check "device mode: walkthrough client (probes, EV event)" 0 $crc "$tmp/walk-client.log" \
  "probe responses" "EV event ASSUMED_BAD"

"${A[@]}" timeout 60 "$cost" fd79::2 20000 200 > "$tmp/cost.json" 2>&1
check "device mode: call_cost" 0 $? "$tmp/cost.json" '"mode":"device"' '"poll_ns":'
cat "$tmp/cost.json"

if [ $fails -ne 0 ]; then
  for f in daemon-a daemon-b server; do
    echo "--- $f"
    cat "$tmp/$f.log"
  done
  exit 1
fi
exit 0

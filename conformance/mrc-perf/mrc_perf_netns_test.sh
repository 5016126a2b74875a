#!/usr/bin/env bash
# mrc-perf between two network namespaces over a veth pair, through lib_mrc.so's software
# device: write_bw over a message-size sweep, write_imm on several QPs (one WR per post call and
# lists of 8), write_lat, a run by duration; then mrc-perf as the client of the reference endpoint (`mrct endpoint server`)
# and as its server, so the two speak the same exchange and data pattern, and a data mismatch
# is reported (the client lies about its seed: the server's verification must fail).
# Usage: mrc_perf_netns_test.sh MRC_PERF MRCT
# Exit 0 pass, 1 fail, 77 skipped (needs root). Namespaces are pid-named and always removed.
set -u
. "$(dirname "$0")/../../reference-impl/provider/veth_pair.sh"
perf=$1
mrct=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, AF_PACKET)"
  exit 77
fi
a=mperf$$a
b=mperf$$b
tmp=$(mktemp -d)
spid=
cleanup() {
  [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
  veth_pair_down "$a" "$b"
  rm -rf "$tmp"
}
trap cleanup EXIT
set -e
veth_pair_up "$a" "$b" "mpf$$x" "mpf$$y" 10.78.0 fd78
set +e
port=$((20000 + $$ % 20000))
fails=0
# Arrays, not functions: a background job then is the process itself (ip netns exec, env and
# timeout exec one another), so killing $! ends the server.
A=(ip netns exec "$a" env MRC_SOFT_IFACES="mpf$$x" MRC_SOFT_GID=fd78::1)
B=(ip netns exec "$b" env MRC_SOFT_IFACES="mpf$$y" MRC_SOFT_GID=fd78::2)
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
server_start() {  # the mrc-perf server, accepting clients until killed
  "${A[@]}" timeout 300 "$perf" server --port "$port" --gid fd78::1 > "$tmp/server.log" 2>&1 &
  spid=$!
}
server_stop() {
  kill "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  spid=
}

server_start
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --test write_bw \
  --sweep 1:1M --iters 20 --tx-depth 8 > "$tmp/sweep.json" 2>&1
check "write_bw sweep 1 B..1 MiB, verified" 0 $? "$tmp/sweep.json" '"size":1,' \
  '"size":1048576,' '"messages_bad":0'
if grep -q '"ok":false' "$tmp/sweep.json"; then
  echo "FAIL a sweep point did not verify"; fails=$((fails + 1))
fi
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --test write_imm \
  --size 4096 --iters 300 --qps 4 --tx-depth 16 > "$tmp/imm.json" 2>&1
check "write_imm on 4 QPs: every immediate, once" 0 $? "$tmp/imm.json" '"messages":1200' \
  '"missing":0,"duplicates":0' '"messages_checked":' '"ok":true'
# WRs posted in lists (one mrc_post_send call for up to 8), 4 QPs: every message and immediate
# arrives once and verifies, as with one WR per call.
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --test write_imm \
  --size 4096 --iters 301 --qps 4 --tx-depth 16 --post-list 8 > "$tmp/list.json" 2>&1
check "write_imm with --post-list 8" 0 $? "$tmp/list.json" '"messages":1204' \
  '"missing":0,"duplicates":0' '"messages_bad":0' '"ok":true'
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --test write_lat \
  --size 64 --iters 200 > "$tmp/lat.json" 2>&1
check "write_lat: latency percentiles" 0 $? "$tmp/lat.json" '"latency_us":{"min":' '"ok":true'
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --size 65536 \
  --duration 1 --qps 2 > "$tmp/dur.json" 2>&1
check "write_bw for 1 s on 2 QPs" 0 $? "$tmp/dur.json" '"ok":true'
server_stop

# mrc-perf against the reference endpoint, both ways (the DUT contract's exchange).
ip netns exec "$a" timeout 120 "$mrct" endpoint server --json --ifaces "mpf$$x" --gid fd78::1 \
  --port "$port" --ev-format stev --listen 10.78.0.1 > "$tmp/ref-server.json" 2>&1 &
spid=$!
sleep 0.5
"${B[@]}" timeout 120 "$perf" client 10.78.0.1 --port "$port" --gid fd78::2 --test write_imm \
  --size 65536 --iters 200 --qps 2 > "$tmp/to-ref.json" 2>&1
check "mrc-perf client -> mrct endpoint server" 0 $? "$tmp/to-ref.json" '"messages_bad":0' \
  '"ok":true'
wait "$spid"; spid=
"${A[@]}" timeout 120 "$perf" server --port "$port" --gid fd78::1 --clients 1 > "$tmp/perf-server.json" 2>&1 &
spid=$!
sleep 0.5
ip netns exec "$b" timeout 120 "$mrct" endpoint client --json --ifaces "mpf$$y" --gid fd78::2 \
  --port "$port" --ev-format stev --server 10.78.0.1 --size 65536 --iters 200 --qps 2 --imm \
  > "$tmp/from-ref.json" 2>&1
check "mrct endpoint client -> mrc-perf server" 0 $? "$tmp/from-ref.json" '"messages_bad":0'
wait "$spid"
check "mrc-perf server verified the reference's data" 0 $? "$tmp/perf-server.json" \
  '"role":"server"' '"ok":true'
spid=

# A client whose data does not follow the pattern the server expects: MRCPERF_TEST_SEED_SKEW
# makes the client fill its buffers with another seed than the one it announces.
server_start
"${B[@]}" MRCPERF_TEST_SEED_SKEW=1 timeout 120 "$perf" client 10.78.0.1 --port "$port" \
  --gid fd78::2 --size 4096 --iters 50 > "$tmp/bad.json" 2>&1
check "wrong data is reported and fails" 1 $? "$tmp/bad.json" '"messages_bad":50' '"ok":false'
server_stop

[ $fails -eq 0 ] || exit 1
exit 0

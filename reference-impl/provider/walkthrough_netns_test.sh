#!/usr/bin/env bash
# SoftMRC between two network namespaces: our walkthrough program (walkthrough.c) as server in
# one and client in the other, over a veth pair, through lib_mrc.so's software device.
# Usage: walkthrough_netns_test.sh WALKTHROUGH_BINARY [MESSAGES BYTES]
# Exit 0 pass, 1 fail, 77 skipped (needs root). Namespaces are pid-named and always removed.
set -u
. "$(dirname "$0")/veth_pair.sh"
bin=$1
messages=${2:-64}
bytes=${3:-65536}
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, AF_PACKET)"
  exit 77
fi
a=smrc$$a
b=smrc$$b
tmp=$(mktemp -d)
cleanup() {
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null
  veth_pair_down "$a" "$b"
  rm -rf "$tmp"
}
trap cleanup EXIT
set -e
veth_pair_up "$a" "$b" "smrc$$x" "smrc$$y" 10.77.0 fd77
set +e
port=$((20000 + $$ % 20000))
ip netns exec "$a" env MRC_SOFT_IFACES="smrc$$x" timeout 90 "$bin" server "$port" \
  "$messages" "$bytes" > "$tmp/server.log" 2>&1 &
spid=$!
ip netns exec "$b" env MRC_SOFT_IFACES="smrc$$y" timeout 90 "$bin" client 10.77.0.1 "$port" \
  "$messages" "$bytes" > "$tmp/client.log" 2>&1
crc=$?
wait "$spid"
src=$?
spid=
echo "--- server (exit $src)"
cat "$tmp/server.log"
echo "--- client (exit $crc)"
cat "$tmp/client.log"
if [ "$src" -ne 0 ] || [ "$crc" -ne 0 ]; then
  exit 1
fi
grep -q "0 wrong" "$tmp/server.log" || exit 1
grep -q "probe responses" "$tmp/client.log" || exit 1
grep -q "EV event ASSUMED_BAD" "$tmp/client.log" || exit 1
exit 0

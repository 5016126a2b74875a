#!/usr/bin/env bash
# SoftMRC between two network namespaces: our walkthrough program (walkthrough.c) as server in
# one and client in the other, over a veth pair, through lib_mrc.so's software device.
# Usage: walkthrough_netns_test.sh WALKTHROUGH_BINARY [MESSAGES BYTES]
# Exit 0 pass, 1 fail, 77 skipped (needs root). Namespaces are pid-named and always removed.
set -u
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
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
set -e
ip netns add "$a"
ip netns add "$b"
ip link add "smrc$$x" type veth peer name "smrc$$y"
ip link set "smrc$$x" netns "$a"
ip link set "smrc$$y" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "smrc$$x"
ip -n "$b" addr add 10.77.0.2/24 dev "smrc$$y"
ip -n "$a" addr add fd77::1/64 dev "smrc$$x" nodad
ip -n "$b" addr add fd77::2/64 dev "smrc$$y" nodad
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set "smrc$$x" mtu 9000 up
ip -n "$b" link set "smrc$$y" mtu 9000 up
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

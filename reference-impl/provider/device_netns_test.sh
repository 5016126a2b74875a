#!/usr/bin/env bash
# One SoftMRC device per node (softmrcd) shared by processes: two namespaces joined by a veth
# pair, a softmrcd in each. Node A: a controller process (walkthrough controller) configures
# the EV format, EV and CC profiles and holds the EV event CQ; an application process
# (walkthrough client) names those profiles on its QP and writes to node B. Node B: an
# application (walkthrough server) running as nobody without any capability, whose controller
# call must fail with EPERM. The controller probes node B over every EV (answered by B's
# device) and marks an EV ASSUMED_BAD: the event, raised on the client's QP, reaches the
# controller's process.
# Usage: device_netns_test.sh SOFTMRCD WALKTHROUGH [MESSAGES BYTES]
# Exit 0 pass, 1 fail, 77 skipped (needs root). Namespaces are pid-named and always removed.
set -u
. "$(dirname "$0")/veth_pair.sh"
daemon=$1
bin=$2
messages=${3:-64}
bytes=${4:-65536}
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, AF_PACKET)"
  exit 77
fi
if ! command -v setpriv > /dev/null; then
  echo "SKIP: needs setpriv (util-linux) to run an application without privileges"
  exit 77
fi
a=smrd$$a
b=smrd$$b
tmp=$(mktemp -d)
chmod 755 "$tmp"
mkdir "$tmp/ctl"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  wait 2> /dev/null
  veth_pair_down "$a" "$b"
  rm -rf "$tmp"
}
trap cleanup EXIT
set -e
veth_pair_up "$a" "$b" "smrd$$x" "smrd$$y" 10.78.0 fd78
set +e
ip netns exec "$a" env MRC_SOFT_IFACES="smrd$$x" "$daemon" --socket "$tmp/a.sock" \
  > "$tmp/daemon-a.log" 2>&1 &
pids+=($!)
ip netns exec "$b" env MRC_SOFT_IFACES="smrd$$y" "$daemon" --socket "$tmp/b.sock" \
  > "$tmp/daemon-b.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do
  [ -S "$tmp/a.sock" ] && [ -S "$tmp/b.sock" ] && break
  sleep 0.1
done
port=$((20000 + $$ % 20000))
# Node B's application: user nobody, no capabilities at all (not even CAP_NET_RAW: the device
# process owns the ports).
ip netns exec "$b" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
  --bounding-set=-all env MRC_SOFT_DEVICE="$tmp/b.sock" WALKTHROUGH_CTL_DIR="$tmp/ctl" \
  WALKTHROUGH_EXPECT_EPERM=1 timeout 90 "$bin" server "$port" "$messages" "$bytes" \
  > "$tmp/server.log" 2>&1 &
spid=$!
pids+=($spid)
ip netns exec "$a" env MRC_SOFT_DEVICE="$tmp/a.sock" timeout 90 "$bin" controller "$tmp/ctl" \
  > "$tmp/controller.log" 2>&1 &
cpid=$!
pids+=($cpid)
ip netns exec "$a" env MRC_SOFT_DEVICE="$tmp/a.sock" WALKTHROUGH_CTL_DIR="$tmp/ctl" timeout 90 \
  "$bin" client 10.78.0.2 "$port" "$messages" "$bytes" > "$tmp/client.log" 2>&1
crc=$?
wait "$spid"
src=$?
wait "$cpid"
ctlrc=$?
for f in controller client server daemon-a daemon-b; do
  echo "--- $f"
  cat "$tmp/$f.log"
done
echo "exits: controller $ctlrc, client $crc, server $src"
[ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && [ "$ctlrc" -eq 0 ] || exit 1
grep -q "0 wrong" "$tmp/server.log" || exit 1
grep -q "refused with EPERM" "$tmp/server.log" || exit 1
grep -q "probe responses" "$tmp/controller.log" || exit 1
grep -q "[1-9][0-9]* probe responses" "$tmp/controller.log" || exit 1
grep -q "EV event ASSUMED_BAD" "$tmp/controller.log" || exit 1
exit 0

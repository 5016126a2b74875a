#!/usr/bin/env bash
# Where should the endpoint drop a hostile 4 KiB frame on its veth: tc ingress, native (veth)
# XDP or generic XDP? Per-frame cost of the whole path (AF_PACKET send with qdisc bypass, the
# veth, the hook, the drop) with one flat-out sender pinned to CPU 1, the hooks interleaved;
# "ip6-stack" is no program (the frame, to an address not ours, dies in the IPv6 input path).
# Root; namespaces fx20g<pid>/fx20v<pid>, removed on exit. Needs clang (bpf target) and gcc.
#   N=400000 LEN=4154 ROUNDS=3 run.sh     (docs/performance.md, "Hostile floods")
set -eu
here=$(cd "$(dirname "$0")" && pwd)
N=${N:-400000}; LEN=${LEN:-4154}; ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
G=fx20g$$; V=fx20v$$
trap 'ip netns del $G 2>/dev/null; ip netns del $V 2>/dev/null; rm -rf "$out"' EXIT
gcc -O2 -o "$out/send" "$here/send.c"
clang -O2 -target bpf -I/usr/include/"$(gcc -dumpmachine)" -c "$here/drop_bpf.c" -o "$out/drop.o"
ip netns add $G; ip netns add $V
ip link add g0 netns $G mtu 9000 type veth peer name v0 netns $V mtu 9000
ip -n $G link set g0 up; ip -n $V link set lo up
ip -n $V addr add fd00:99::3/64 dev v0 nodad; ip -n $V link set v0 up
one() { echo "$1: $(ip netns exec $G "$out/send" g0 "$N" "$LEN")"; }
for ((r = 1; r <= ROUNDS; r++)); do
  one ip6-stack
  ip netns exec $V tc qdisc add dev v0 clsact
  ip netns exec $V tc filter add dev v0 ingress bpf da obj "$out/drop.o" sec tc
  one tc-ingress
  ip netns exec $V tc qdisc del dev v0 clsact
  ip -n $V link set dev v0 xdpdrv obj "$out/drop.o" sec xdp.frags
  one xdp-native
  ip -n $V link set dev v0 xdpdrv off
  ip -n $V link set dev v0 xdpgeneric obj "$out/drop.o" sec xdp.frags
  one xdp-generic
  ip -n $V link set dev v0 xdpgeneric off
done

# Sourced by the provider's namespace tests (walkthrough, mrc-perf): two network namespaces
# joined by one veth pair, the way two hosts with one NIC port each are cabled.
# veth_pair_up NS_A NS_B IF_A IF_B V4_NET V6_NET: IF_A in NS_A gets V4_NET.1/24 and V6_NET::1/64,
# IF_B in NS_B .2 and ::2 (no DAD); loopback up, MTU 9000. Exits the script on failure (set -e).
# veth_pair_down NS_A NS_B: removes both namespaces (and with them the pair); never fails.
veth_pair_up() {
  local a=$1 b=$2 ifa=$3 ifb=$4 v4=$5 v6=$6
  ip netns add "$a"
  ip netns add "$b"
  ip link add "$ifa" type veth peer name "$ifb"
  ip link set "$ifa" netns "$a"
  ip link set "$ifb" netns "$b"
  ip -n "$a" addr add "$v4.1/24" dev "$ifa"
  ip -n "$b" addr add "$v4.2/24" dev "$ifb"
  ip -n "$a" addr add "$v6::1/64" dev "$ifa" nodad
  ip -n "$b" addr add "$v6::2/64" dev "$ifb" nodad
  for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
  ip -n "$a" link set "$ifa" mtu 9000 up
  ip -n "$b" link set "$ifb" mtu 9000 up
}
veth_pair_down() {
  ip netns del "$1" 2>/dev/null
  ip netns del "$2" 2>/dev/null
  return 0
}

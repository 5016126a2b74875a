#!/usr/bin/env bash
# Two hosts over N planes, one Linux router namespace per plane, for the runtime's integration
# tests and benchmark. Root only. Everything it creates is named after PREFIX, and `down`
# removes it all (deleting a namespace deletes the veths in it).
#
#   topo.sh up   PREFIX PLANES stev|srv6 [MTU]
#   topo.sh down PREFIX
#   topo.sh napi PREFIX PLANES off|router|all  (threaded NAPI receive on the veths, below)
#   topo.sh evprofile PLANES EVS_PER_PLANE a|b      (SRv6 EV profile TOML on stdout)
#
# Namespaces: PREFIXa, PREFIXb (hosts), PREFIXr1..PREFIXrN (plane routers).
# Host A: GID fd00:a::1 on lo, plane p on interface a<p> (fd00:1:<p>::a/64), control link actl
#         (fd00:ff::a/64). Host B: fd00:a::2, b<p> (fd00:2:<p>::b/64), bctl (fd00:ff::b/64).
# Router p: ra (fd00:1:<p>::1) towards A, rb (fd00:2:<p>::1) towards B.
# stev: plain IPv6 routes to the GIDs. srv6: locator fcbb:0::/32 (F3216), router uSID
#       <p>100 (End, next-csid), host decap uSIDs <p>301 (A) and <p>302 (B) with End.DT6 table
#       local; outer DA A->B on plane p is fcbb:0:<p>100:<p>302::.
set -euo pipefail

cmd=${1:-}
prefix=${2:-}

die() { echo "topo.sh: $*" >&2; exit 2; }

[ -n "$cmd" ] || die "usage: topo.sh up|down|napi|evprofile ..."

if [ "$cmd" = evprofile ]; then
  planes=${2:?planes}; per=${3:?evs per plane}; side=${4:?a or b}
  dst=302; [ "$side" = b ] && dst=301
  echo "# SRv6 EV profile for host $side: $per EV(s) per plane, outer DA = router uSID, decap uSID"
  echo 'mode = "explicit"'
  for ((k = 0; k < per; k++)); do
    for ((p = 1; p <= planes; p++)); do
      x=$(printf '%x' "$p")
      printf '[[evs]]\nport = %d\nda = "fcbb:0:%s100:%s%s::"\n' "$p" "$x" "$x" "$dst"
    done
  done
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[[ "$prefix" =~ ^[a-z][a-z0-9]{1,10}$ ]] || die "PREFIX must be 2-11 lowercase letters/digits"

A=${prefix}a
B=${prefix}b

if [ "$cmd" = down ]; then
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}(a|b|r[0-9]+)$" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  exit 0
fi

# Threaded NAPI receive: `ethtool -K gro on` gives a veth a NAPI instance (its peer's transmit
# queues the skb in a ring instead of receiving it inline), `threaded` runs that NAPI poll in a
# kernel thread of its own. Without it, everything a frame costs downstream (the router's
# forwarding, the receiving host's socket or ring copy) runs in the *sender's* system call, on
# the sender's CPU; with it the scheduler can put that work on another core. router: the
# routers' veths (ra, rb) only, so a frame's forwarding and delivery run in the router's thread;
# all: the hosts' plane veths too. off: back to inline receive.
if [ "$cmd" = napi ]; then
  planes=${3:?planes}
  mode=${4:?off, router or all}
  case "$mode" in off | router | all) ;; *) die "napi mode must be off, router or all, got '$mode'" ;; esac
  [[ "$planes" =~ ^[0-9]+$ ]] && [ "$planes" -ge 1 ] && [ "$planes" -le 15 ] || die "PLANES must be 1..15, got '$planes'"
  for ((p = 1; p <= planes; p++)); do
    grep -q "^${prefix}r$p\b" <<<"$(ip netns list)" || die "no namespace ${prefix}r$p (topo.sh up first)"
  done
  for ((p = 1; p <= planes; p++)); do
    links=("${prefix}r$p ra" "${prefix}r$p rb" "$A a$p" "$B b$p")
    for ((i = 0; i < 4; i++)); do
      set -- ${links[$i]}
      on=0
      if [ "$mode" = all ] || { [ "$mode" = router ] && [ $i -lt 2 ]; }; then on=1; fi
      if [ $on = 1 ]; then
        ip netns exec "$1" ethtool -K "$2" gro on >/dev/null
        ip netns exec "$1" sh -c "echo 1 > /sys/class/net/$2/threaded"
      else
        ip netns exec "$1" sh -c "echo 0 > /sys/class/net/$2/threaded" 2>/dev/null || true
        ip netns exec "$1" ethtool -K "$2" gro off >/dev/null
      fi
    done
  done
  exit 0
fi

[ "$cmd" = up ] || die "unknown command $cmd"
planes=${3:?planes}
mode=${4:?stev or srv6}
mtu=${5:-9000}
[ "$planes" -ge 1 ] && [ "$planes" -le 15 ] || die "PLANES must be 1..15"
[ "$mode" = stev ] || [ "$mode" = srv6 ] || die "mode must be stev or srv6"

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

sysctls() {
  local ns=$1 fwd=$2
  nsx "$ns" sysctl -qw net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1 \
    net.ipv6.conf.all.seg6_enabled=1 net.ipv6.conf.default.seg6_enabled=1 \
    net.ipv6.conf.all.forwarding="$fwd" net.ipv6.conf.all.accept_dad=0 \
    net.ipv6.conf.default.accept_dad=0
}

mac() { nsx "$1" cat "/sys/class/net/$2/address"; }

ip netns add "$A"
ip netns add "$B"
sysctls "$A" 0
sysctls "$B" 0
nsx "$A" ip link set dev lo up
nsx "$B" ip link set dev lo up
nsx "$A" ip -6 addr add fd00:a::1/128 dev lo
nsx "$B" ip -6 addr add fd00:a::2/128 dev lo

ip link add actl netns "$A" mtu "$mtu" type veth peer name bctl netns "$B" mtu "$mtu"
nsx "$A" ip link set dev actl up
nsx "$B" ip link set dev bctl up
nsx "$A" ip -6 addr add fd00:ff::a/64 dev actl nodad
nsx "$B" ip -6 addr add fd00:ff::b/64 dev bctl nodad

for ((p = 1; p <= planes; p++)); do
  x=$(printf '%x' "$p")
  R=${prefix}r$p
  ip netns add "$R"
  sysctls "$R" 1
  nsx "$R" ip link set dev lo up
  ip link add "a$p" netns "$A" mtu "$mtu" type veth peer name ra netns "$R" mtu "$mtu"
  ip link add "b$p" netns "$B" mtu "$mtu" type veth peer name rb netns "$R" mtu "$mtu"
  for pair in "$A a$p" "$B b$p" "$R ra" "$R rb"; do
    set -- $pair
    nsx "$1" sysctl -qw "net.ipv6.conf.$2.seg6_enabled=1" "net.ipv6.conf.$2.keep_addr_on_down=1"
    nsx "$1" ip link set dev "$2" up
  done
  nsx "$A" ip -6 addr add "fd00:1:$x::a/64" dev "a$p" nodad
  nsx "$R" ip -6 addr add "fd00:1:$x::1/64" dev ra nodad
  nsx "$R" ip -6 addr add "fd00:2:$x::1/64" dev rb nodad
  nsx "$B" ip -6 addr add "fd00:2:$x::b/64" dev "b$p" nodad
  # Hosts send complete frames; kernel-built packets (ICMP, control) get real checksums too.
  nsx "$A" ethtool -K "a$p" tx off >/dev/null
  nsx "$B" ethtool -K "b$p" tx off >/dev/null

  if [ "$mode" = stev ]; then
    nsx "$R" ip -6 route add fd00:a::1/128 via "fd00:1:$x::a" dev ra
    nsx "$R" ip -6 route add fd00:a::2/128 via "fd00:2:$x::b" dev rb
    nsx "$A" ip -6 route append fd00:a::2/128 via "fd00:1:$x::1" dev "a$p"
    nsx "$B" ip -6 route append fd00:a::1/128 via "fd00:2:$x::1" dev "b$p"
  else
    # Static neighbours, as the testbed sets them: no NDP on the SRv6 data path.
    nsx "$A" ip -6 neigh add "fd00:1:$x::1" lladdr "$(mac "$R" ra)" dev "a$p" nud permanent
    nsx "$R" ip -6 neigh add "fd00:1:$x::a" lladdr "$(mac "$A" "a$p")" dev ra nud permanent
    nsx "$R" ip -6 neigh add "fd00:2:$x::b" lladdr "$(mac "$B" "b$p")" dev rb nud permanent
    nsx "$B" ip -6 neigh add "fd00:2:$x::1" lladdr "$(mac "$R" rb)" dev "b$p" nud permanent
    nsx "$R" ip -6 route add "fcbb:0:${x}100::/48" encap seg6local action End flavors next-csid \
      lblen 32 nflen 16 dev ra
    nsx "$R" ip -6 route add "fcbb:0:${x}301::/48" via "fd00:1:$x::a" dev ra
    nsx "$R" ip -6 route add "fcbb:0:${x}302::/48" via "fd00:2:$x::b" dev rb
    nsx "$A" ip -6 route add "fcbb:0:${x}000::/36" via "fd00:1:$x::1" dev "a$p"
    nsx "$B" ip -6 route add "fcbb:0:${x}000::/36" via "fd00:2:$x::1" dev "b$p"
    nsx "$A" ip -6 route add "fcbb:0:${x}301::/48" encap seg6local action End.DT6 table local dev "a$p"
    nsx "$B" ip -6 route add "fcbb:0:${x}302::/48" encap seg6local action End.DT6 table local dev "b$p"
  fi
done

# labjob.sh: the lab's job library (bash). Sourced by every job, in the qemu guest (LAB_MODE=vm)
# and on a host whose kernel has rdma_rxe (LAB_MODE=host), so both run the same commands.
#
# The wire: two rxe devices in the initial network namespace (the 6.1 rxe driver opens its UDP
# 4791 socket there only), each on its own veth, the two veth peers joined by a bridge. Faults are
# applied on the bridge ports' egress (netem), so the capture on the requester's veth (mrcA0) sees
# every packet rxe0 sent before any loss and every packet it received after it.
#
#   mrcrxe0 - mrcA0 ==veth== mrcA1 -[mrcbr0]- mrcB1 ==veth== mrcB0 - mrcrxe1
#   10.211.0.1 / fd00:211::1                                10.211.0.2 / fd00:211::2
#
# Both addresses are local to the same kernel, which would deliver 10.211.0.1 -> 10.211.0.2
# through lo (rxe drops what arrives on lo). Policy rules ahead of the local table send locally
# generated traffic between the two addresses out of the sender's veth, and accept_local lets the
# receiving veth take a packet whose source is a local address.
#
# Inputs (environment): LAB_MODE, LAB_OUT (results, brought back), LAB_TMP (scratch).

LAB_A=mrcA0 LAB_A_BR=mrcA1 LAB_B=mrcB0 LAB_B_BR=mrcB1 LAB_BR=mrcbr0
LAB_RXE_A=mrcrxe0 LAB_RXE_B=mrcrxe1
LAB_V4_A=10.211.0.1 LAB_V4_B=10.211.0.2
LAB_V6_A=fd00:211::1 LAB_V6_B=fd00:211::2
LAB_MTU=${LAB_MTU:-9000}
LAB_PORT=${LAB_PORT:-18515}
LAB_RULES_MOVED=0
: "${LAB_OUT:=/tmp/lab-out}" "${LAB_TMP:=/tmp}" "${LAB_MODE:=host}"

lab_t() { echo "${EPOCHREALTIME}"; }
lab_since() { awk -v a="$1" -v b="${2:-$EPOCHREALTIME}" 'BEGIN{printf "%.3f", b-a}'; }
lab_log() { echo "[lab $(lab_since "$LAB_T0")s] $*"; }
lab_sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN{printf "%.3f", m/1000}')"; }

lab_job_start() {
  LAB_T0=$EPOCHREALTIME
  mkdir -p "$LAB_OUT" "$LAB_TMP"
  if [ "$LAB_MODE" = host ]; then
    trap 'lab_net_down' EXIT
    trap 'exit 130' INT TERM
  fi
}

# --------------------------------------------------------------------------------------------
# network
# --------------------------------------------------------------------------------------------
lab_sysctl() { [ -e "/proc/sys/$1" ] && echo "$2" > "/proc/sys/$1"; }

lab_net_up() {
  if [ "$LAB_MODE" = host ]; then
    for m in veth bridge sch_netem rdma_rxe; do modprobe "$m" 2>/dev/null; done
  fi
  lab_net_down quiet
  # rxe under TCG is CPU-starved: without a deep per-CPU backlog, bursts of a 128-deep perftest
  # window overflow it and the "clean" runs see drops nobody injected (softnet_stat column 2).
  read -r LAB_OLD_BACKLOG < /proc/sys/net/core/netdev_max_backlog
  echo "$LAB_OLD_BACKLOG" > "$LAB_TMP/netdev_max_backlog.orig"
  echo "${LAB_BACKLOG:-50000}" > /proc/sys/net/core/netdev_max_backlog
  ip link add "$LAB_A" type veth peer name "$LAB_A_BR" || return 1
  ip link add "$LAB_B" type veth peer name "$LAB_B_BR" || return 1
  ip link add "$LAB_BR" type bridge || return 1
  local d
  for d in "$LAB_A_BR" "$LAB_B_BR" "$LAB_BR"; do
    lab_sysctl "net/ipv6/conf/$d/disable_ipv6" 1
  done
  for d in "$LAB_A" "$LAB_B" "$LAB_A_BR" "$LAB_B_BR" "$LAB_BR"; do
    ip link set dev "$d" mtu "$LAB_MTU"
  done
  ip link set dev "$LAB_A_BR" master "$LAB_BR"
  ip link set dev "$LAB_B_BR" master "$LAB_BR"
  # The bridge is a local interface too: with the default arp_ignore=0 it answers the flooded
  # "who has 10.211.0.2" with its own MAC (the address is local, on mrcB0), and rxe0 then sends
  # part of its traffic to the bridge, which swallows it. Only the owner may answer.
  ip link set dev "$LAB_BR" arp off
  for d in all "$LAB_A" "$LAB_B"; do
    lab_sysctl "net/ipv4/conf/$d/accept_local" 1
    lab_sysctl "net/ipv4/conf/$d/rp_filter" 0
    lab_sysctl "net/ipv4/conf/$d/arp_ignore" 1
    lab_sysctl "net/ipv4/conf/$d/arp_announce" 2
  done
  for d in "$LAB_A" "$LAB_B"; do
    lab_sysctl "net/ipv6/conf/$d/keep_addr_on_down" 1   # a link flap must not drop the GID
    lab_sysctl "net/ipv6/conf/$d/accept_dad" 0
  done
  ip addr add "$LAB_V4_A/24" dev "$LAB_A"
  ip addr add "$LAB_V4_B/24" dev "$LAB_B"
  ip -6 addr add "$LAB_V6_A/64" dev "$LAB_A" nodad
  ip -6 addr add "$LAB_V6_B/64" dev "$LAB_B" nodad
  for d in "$LAB_BR" "$LAB_A_BR" "$LAB_B_BR" "$LAB_A" "$LAB_B"; do ip link set dev "$d" up; done
  local f
  for f in "" -6; do
    local a b
    if [ -z "$f" ]; then a=$LAB_V4_A b=$LAB_V4_B; else a=$LAB_V6_A b=$LAB_V6_B; fi
    ip $f rule add pref 100 iif lo from "$a" to "$b" lookup 100
    ip $f rule add pref 101 iif lo from "$b" to "$a" lookup 101
    ip $f route add "$b" dev "$LAB_A" src "$a" table 100
    ip $f route add "$a" dev "$LAB_B" src "$b" table 101
    ip $f rule add pref 1000 lookup local
    ip $f rule del pref 0 lookup local
  done
  LAB_RULES_MOVED=1
  rdma link add "$LAB_RXE_A" type rxe netdev "$LAB_A" || { echo "@@LAB ERROR rdma link add $LAB_RXE_A failed"; return 1; }
  rdma link add "$LAB_RXE_B" type rxe netdev "$LAB_B" || { echo "@@LAB ERROR rdma link add $LAB_RXE_B failed"; return 1; }
  # GIDs appear asynchronously (netdev address events)
  local i
  for i in $(seq 1 100); do
    LAB_GID4_A=$(lab_gid_index "$LAB_RXE_A" "$LAB_V4_A")
    LAB_GID4_B=$(lab_gid_index "$LAB_RXE_B" "$LAB_V4_B")
    LAB_GID6_A=$(lab_gid_index "$LAB_RXE_A" "$LAB_V6_A")
    LAB_GID6_B=$(lab_gid_index "$LAB_RXE_B" "$LAB_V6_B")
    [ -n "$LAB_GID4_A" ] && [ -n "$LAB_GID4_B" ] && [ -n "$LAB_GID6_A" ] && [ -n "$LAB_GID6_B" ] && break
    sleep 0.1
  done
  if [ -z "$LAB_GID4_A$LAB_GID4_B" ] || [ -z "$LAB_GID6_A" ] || [ -z "$LAB_GID6_B" ]; then
    echo "@@LAB ERROR RoCEv2 GIDs missing: v4 $LAB_GID4_A/$LAB_GID4_B v6 $LAB_GID6_A/$LAB_GID6_B"
    lab_gid_table "$LAB_RXE_A"; lab_gid_table "$LAB_RXE_B"
    return 1
  fi
  # the wire really is the wire: a ping from A's address must cross the bridge
  local before after
  before=$(cat "/sys/class/net/$LAB_B/statistics/rx_packets")
  ping -c 1 -W 2 -I "$LAB_V4_A" "$LAB_V4_B" > /dev/null 2>&1
  ping -c 1 -W 2 -I "$LAB_V6_A" "$LAB_V6_B" > /dev/null 2>&1
  after=$(cat "/sys/class/net/$LAB_B/statistics/rx_packets")
  if [ "$after" -le "$before" ]; then
    echo "@@LAB ERROR traffic between $LAB_V4_A and $LAB_V4_B does not cross the veth wire"
    return 1
  fi
  # each end must know the other end's own MAC (not the bridge's)
  local mac_a mac_b
  read -r mac_a < "/sys/class/net/$LAB_A/address"
  read -r mac_b < "/sys/class/net/$LAB_B/address"
  if ! ip neigh show "$LAB_V4_B" dev "$LAB_A" | grep -q "lladdr $mac_b" ||
     ! ip -6 neigh show "$LAB_V6_B" dev "$LAB_A" | grep -q "lladdr $mac_b"; then
    echo "@@LAB ERROR $LAB_A resolves $LAB_V4_B/$LAB_V6_B to the wrong MAC (want $mac_b):"
    ip neigh show dev "$LAB_A"; ip -6 neigh show dev "$LAB_A"
    return 1
  fi
  lab_log "rxe up: $LAB_RXE_A($LAB_A) <-> $LAB_RXE_B($LAB_B), RoCEv2 GID index v4 $LAB_GID4_A/$LAB_GID4_B, v6 $LAB_GID6_A/$LAB_GID6_B"
  {
    echo "{\"mode\": \"$LAB_MODE\", \"kernel\": \"$(uname -r)\","
    echo " \"requester\": {\"dev\": \"$LAB_RXE_A\", \"netdev\": \"$LAB_A\", \"v4\": \"$LAB_V4_A\", \"v6\": \"$LAB_V6_A\", \"gid_v4\": $LAB_GID4_A, \"gid_v6\": $LAB_GID6_A},"
    echo " \"responder\": {\"dev\": \"$LAB_RXE_B\", \"netdev\": \"$LAB_B\", \"v4\": \"$LAB_V4_B\", \"v6\": \"$LAB_V6_B\", \"gid_v4\": $LAB_GID4_B, \"gid_v6\": $LAB_GID6_B},"
    echo " \"netdev_mtu\": $LAB_MTU,"
    local mhz
    mhz=$(awk -F: '/^cpu MHz/{gsub(/ /,"",$2); print $2; exit}' /proc/cpuinfo)
    echo " \"netdev_max_backlog\": $(cat /proc/sys/net/core/netdev_max_backlog), \"cpu_mhz\": ${mhz:-null},"
    echo " \"perftest\": \"$(ib_write_bw --version 2>&1 | head -1)\", \"cpus\": $(nproc)}"
  } > "$LAB_OUT/setup.json"
}

lab_net_down() {
  local q=$1
  local d
  for d in "$LAB_RXE_A" "$LAB_RXE_B"; do
    [ -e "/sys/class/infiniband/$d" ] && rdma link delete "$d" 2>/dev/null
  done
  if [ "$LAB_RULES_MOVED" = 1 ] || ip rule show 2>/dev/null | grep -q '^1000:.*lookup local'; then
    local f
    for f in "" -6; do
      ip $f rule show | grep -q '^0:.*lookup local' || ip $f rule add pref 0 lookup local
      ip $f rule del pref 1000 lookup local 2>/dev/null
      ip $f rule del pref 100 2>/dev/null
      ip $f rule del pref 101 2>/dev/null
      ip $f route flush table 100 2>/dev/null
      ip $f route flush table 101 2>/dev/null
    done
    LAB_RULES_MOVED=0
  fi
  for d in "$LAB_A" "$LAB_B" "$LAB_BR"; do
    ip link show dev "$d" > /dev/null 2>&1 && ip link del dev "$d"
  done
  if [ -f "$LAB_TMP/netdev_max_backlog.orig" ]; then
    cat "$LAB_TMP/netdev_max_backlog.orig" > /proc/sys/net/core/netdev_max_backlog
    rm -f "$LAB_TMP/netdev_max_backlog.orig"
  fi
  [ -n "$q" ] || lab_log "network torn down"
  return 0
}

# RoCEv2 GID index of an address on an rxe device (empty when not there yet).
lab_gid_index() {
  local dev=$1 addr=$2 want
  if [[ $addr == *:* ]]; then
    want=$(lab_ip6_full "$addr")
  else
    want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${addr//./ })
  fi
  # bash builtins only: the table has 1024 entries and a fork per entry is slow under TCG
  local g i v t
  for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
    i=${g##*/}
    read -r v < "$g" 2>/dev/null || continue
    [ "$v" = "$want" ] || continue
    read -r t < "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i" 2>/dev/null || continue
    [ "$t" = "RoCE v2" ] || continue
    echo "$i"
    return 0
  done
}

# fd00:211::1 -> fd00:0211:0000:0000:0000:0000:0000:0001 (the sysfs GID form)
lab_ip6_full() {
  local a=$1 head tail n i out=""
  if [[ $a == *::* ]]; then head=${a%%::*} tail=${a##*::}; else head=$a tail=""; fi
  local -a H T
  IFS=: read -r -a H <<< "$head"
  IFS=: read -r -a T <<< "$tail"
  n=$((8 - ${#H[@]} - ${#T[@]}))
  local -a all=("${H[@]}")
  for ((i = 0; i < n; i++)); do all+=(0); done
  all+=("${T[@]}")
  for i in "${all[@]}"; do out+=$(printf '%04x:' "0x${i:-0}"); done
  echo "${out%:}"
}

lab_gid_table() {
  local dev=$1 g i t v
  echo "GID table of $dev:"
  for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
    i=${g##*/}
    read -r t < "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$i" 2>/dev/null || continue
    read -r v < "$g"
    echo "  $i $v $t"
  done
}

lab_counters() {  # prints "dev.counter=value" for both devices (builtins: no fork per file)
  local d f v
  for d in "$LAB_RXE_A" "$LAB_RXE_B"; do
    for f in /sys/class/infiniband/$d/ports/1/hw_counters/*; do
      read -r v < "$f" && echo "$d.${f##*/}=$v"
    done
  done
  for d in "$LAB_A" "$LAB_B" "$LAB_A_BR" "$LAB_B_BR"; do
    for f in tx_packets rx_packets tx_dropped rx_dropped; do
      read -r v < "/sys/class/net/$d/statistics/$f" && echo "$d.$f=$v"
    done
  done
  local a b rest drops=0
  while read -r a b rest; do drops=$((drops + 16#$b)); done < /proc/net/softnet_stat
  echo "softnet.dropped=$drops"
}

lab_wait_listen() {  # port timeout_s: wait until a TCP listener is on the port
  local hex end
  hex=$(printf '%04X' "$1")
  end=$(awk -v t="$EPOCHREALTIME" -v d="$2" 'BEGIN{printf "%d", t+d}')
  while [ "${EPOCHREALTIME%.*}" -lt "$end" ]; do
    grep -q ":$hex [0-9A-F:]* 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

# --------------------------------------------------------------------------------------------
# faults (on the bridge ports: the endpoints keep their carrier, like a fabric link failing)
# --------------------------------------------------------------------------------------------
lab_fault_clear() {
  tc qdisc del dev "$LAB_A_BR" root 2>/dev/null
  tc qdisc del dev "$LAB_B_BR" root 2>/dev/null
  ip link set dev "$LAB_B_BR" up 2>/dev/null
  return 0
}
lab_fault_loss() {  # percent per direction
  tc qdisc replace dev "$LAB_B_BR" root netem loss "$1%" &&
    tc qdisc replace dev "$LAB_A_BR" root netem loss "$1%"
}
lab_link_block() {  # on|off: drop everything both ways (a dead fabric link, carrier kept)
  # one tc process for both directions: every fork counts when the guest is starved
  if [ "$1" = on ]; then
    printf 'qdisc replace dev %s root netem loss 100%%\nqdisc replace dev %s root netem loss 100%%\n' \
      "$LAB_B_BR" "$LAB_A_BR" > "$LAB_TMP/block_on.tc"
    tc -batch "$LAB_TMP/block_on.tc"
  else
    printf 'qdisc del dev %s root\nqdisc del dev %s root\n' "$LAB_B_BR" "$LAB_A_BR" > "$LAB_TMP/block_off.tc"
    tc -force -batch "$LAB_TMP/block_off.tc" 2>/dev/null
    return 0
  fi
}
# Background: after at_ms, take the link down for down_ms. kind blackhole (carrier kept) or
# carrier (the bridge port goes down, so rxe1's netdev loses carrier: port DOWN then ACTIVE).
lab_flap_bg() {
  local at=$1 down=$2 kind=$3 file=$4
  (
    renice -n -20 -p "$BASHPID" > /dev/null 2>&1  # keep the flap's own timing tight
    # count from the first data packets, not from the client's start: a TCG guest takes a second
    # or more to start perftest and connect
    local base v i
    read -r base < "/sys/class/net/$LAB_A/statistics/tx_packets"
    for ((i = 0; i < 6000; i++)); do
      read -r v < "/sys/class/net/$LAB_A/statistics/tx_packets"
      [ $((v - base)) -ge 32 ] && break
      sleep 0.01
    done
    local t_data=$EPOCHREALTIME
    lab_sleep_ms "$at"
    local t_down=$EPOCHREALTIME
    if [ "$kind" = carrier ]; then ip link set dev "$LAB_B_BR" down; else lab_link_block on; fi
    lab_sleep_ms "$down"
    local t_up=$EPOCHREALTIME
    if [ "$kind" = carrier ]; then ip link set dev "$LAB_B_BR" up; else lab_link_block off; fi
    echo "\"flap\": {\"kind\": \"$kind\", \"data_seen_us\": ${t_data/./}, \"down_us\": ${t_down/./}, \"up_us\": ${t_up/./}, \"planned_at_ms\": $at, \"planned_ms\": $down},"> "$file"
  ) &
  LAB_FLAP_PID=$!
}

# The requester-side capture of one run: every RoCEv2 frame (UDP 4791) on LAB_CAP_IF.
# Default mrcA0, the requester's own veth (the baseline's captures). The MRC runtime transmits
# with PACKET_QDISC_BYPASS, and frames sent that way skip the capture taps of the sending
# interface: a capture on mrcA0 holds only what MRC received. So `mrct lab mrc` captures every
# run, RC's and MRC's alike, on mrcA1, the veth's other end: it receives everything mrcA0 sent
# (before the fault, which is on mrcA1's and mrcB1's egress) and transmits to mrcA0 what survived
# netem (the tap of an egress runs after the qdisc). Same place for both transports, so their
# wire timings mean the same.
lab_cap_start() {  # NAME: tcpdump on $LAB_CAP_IF into $LAB_TMP/NAME.pcap, returns once it listens
  local name=$1 i
  tcpdump -i "${LAB_CAP_IF:-$LAB_A}" -s 0 -B 32768 -Z root -w "$LAB_TMP/$name.pcap" "udp port 4791" \
    > "$LAB_TMP/$name.tcpdump.txt" 2>&1 &
  LAB_CAP_PID=$!
  for i in $(seq 1 200); do grep -q "listening on" "$LAB_TMP/$name.tcpdump.txt" && break; sleep 0.05; done
}
lab_cap_stop() {  # NAME: stops the capture; LAB_CAP_CAPTURED / LAB_CAP_DROPPED from tcpdump
  local name=$1
  sleep 1.2   # tcpdump hands packets over in blocks retired after 1 s
  kill -INT "$LAB_CAP_PID" 2>/dev/null
  wait "$LAB_CAP_PID"
  LAB_CAP_PID=
  LAB_CAP_CAPTURED=$(sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$LAB_TMP/$name.tcpdump.txt")
  LAB_CAP_DROPPED=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$LAB_TMP/$name.tcpdump.txt")
}
lab_cap_save() {  # NAME: the capture to $LAB_OUT
  # one 9p request per block: busybox cp/mv copy in small blocks, ten times slower over 9p
  dd if="$LAB_TMP/$1.pcap" of="$LAB_OUT/$1.pcap" bs=512k 2>/dev/null && rm -f "$LAB_TMP/$1.pcap"
}

# --------------------------------------------------------------------------------------------
# one perftest run: server on rxe1, client (the requester) on rxe0, capture on LAB_CAP_IF (mrcA0)
# --------------------------------------------------------------------------------------------
# lab_perf NAME TOOL FAMILY FAULT [perftest args...]
#   FAULT: none | loss:PCT | flap:AT_MS:DOWN_MS | carrier:AT_MS:DOWN_MS
# Writes NAME.pcap, NAME.client.txt, NAME.server.txt, NAME.meta.json into $LAB_OUT.
lab_perf() {
  local name=$1 tool=$2 fam=$3 fault=$4
  shift 4
  local ga gb
  if [ "$fam" = v6 ]; then ga=$LAB_GID6_A gb=$LAB_GID6_B; else ga=$LAB_GID4_A gb=$LAB_GID4_B; fi
  local port=$LAB_PORT
  LAB_PORT=$((LAB_PORT + 1))
  local tmo=${LAB_RUN_TIMEOUT:-120}
  local ts0=$EPOCHREALTIME
  lab_fault_clear
  lab_counters > "$LAB_TMP/$name.cnt0"
  lab_cap_start "$name"
  local ts1=$EPOCHREALTIME
  timeout $((tmo + 15)) "$tool" -d "$LAB_RXE_B" -x "$gb" -p "$port" -F "$@" > "$LAB_OUT/$name.server.txt" 2>&1 &
  local spid=$!
  if ! lab_wait_listen "$port" 20; then
    echo "@@LAB WARN $name: server did not listen on $port"
  fi
  local ts2=$EPOCHREALTIME
  local flapfile=$LAB_TMP/$name.flap
  : > "$flapfile"
  case $fault in
    loss:*) lab_fault_loss "${fault#loss:}" ;;
    flap:*) IFS=: read -r _ at down <<< "$fault"; lab_flap_bg "$at" "$down" blackhole "$flapfile" ;;
    carrier:*) IFS=: read -r _ at down <<< "$fault"; lab_flap_bg "$at" "$down" carrier "$flapfile" ;;
  esac
  local t0=$EPOCHREALTIME
  timeout "$tmo" "$tool" -d "$LAB_RXE_A" -x "$ga" -p "$port" -F "$@" 127.0.0.1 > "$LAB_OUT/$name.client.txt" 2>&1
  local crc=$?
  local t1=$EPOCHREALTIME
  wait "$spid"
  local src=$?
  [ -n "$LAB_FLAP_PID" ] && wait "$LAB_FLAP_PID" 2>/dev/null
  LAB_FLAP_PID=
  lab_fault_clear
  lab_cap_stop "$name"
  lab_counters > "$LAB_TMP/$name.cnt1"
  local ts3=$EPOCHREALTIME
  lab_cap_save "$name"
  local ts4=$EPOCHREALTIME
  local cap=$LAB_CAP_CAPTURED drop=$LAB_CAP_DROPPED
  {
    echo "{\"name\": \"$name\", \"tool\": \"$tool\", \"family\": \"$fam\", \"fault\": \"$fault\","
    echo " \"args\": \"$*\", \"client_rc\": $crc, \"server_rc\": $src,"
    echo " \"t_start_us\": ${t0/./}, \"t_end_us\": ${t1/./}, \"gid_index\": [$ga, $gb],"
    cat "$flapfile"
    echo " \"captured\": ${cap:-null}, \"capture_dropped\": ${drop:-null}, \"capture_if\": \"${LAB_CAP_IF:-$LAB_A}\","
    echo " \"steps_s\": {\"tcpdump_start\": $(lab_since "$ts0" "$ts1"), \"server_listen\": $(lab_since "$ts1" "$ts2"),"
    echo "   \"client\": $(lab_since "$t0" "$t1"), \"drain_and_stop\": $(lab_since "$t1" "$ts3"), \"save\": $(lab_since "$ts3" "$ts4")},"
    echo " \"counters_before\": {"
    sed 's/^\(.*\)=\(.*\)$/  "\1": \2,/' "$LAB_TMP/$name.cnt0" | sed '$ s/,$//'
    echo " }, \"counters_after\": {"
    sed 's/^\(.*\)=\(.*\)$/  "\1": \2,/' "$LAB_TMP/$name.cnt1" | sed '$ s/,$//'
    echo " }}"
  } > "$LAB_OUT/$name.meta.json"
  lab_log "$name: client rc=$crc server rc=$src $(lab_since "$t0" "$t1")s captured=${cap:-?} dropped=${drop:-?}"
  grep -A1 -E '^ *#bytes' "$LAB_OUT/$name.client.txt" | tail -1 | sed 's/^/    /'
  return $crc
}

# --------------------------------------------------------------------------------------------
# MRC through lib_mrc.so on the same two rxe devices (`mrct lab mrc`): the provider attaches to
# rxe (its PDs and MRs are rxe's, its data path the reference engine on AF_PACKET sockets of
# mrcA0/mrcB0). The programs come in as job files with their libraries (mrct-lab --elf).
# --------------------------------------------------------------------------------------------
# lab_mrc NAME FAULT [mrc-perf client args...]: mrc-perf server on rxe1 (one client), client (the
# requester) on rxe0, GIDs fd00:211::1/2, control over TCP on 127.0.0.1 as perftest's.
# Writes NAME.pcap (the requester-side capture, on LAB_CAP_IF as lab_perf's), NAME.client.json
# (mrc-perf's result), NAME.client.txt (stderr), NAME.server.txt and NAME.meta.json (times, flap
# timestamps, capture counts, rxe hw_counters and netdev counters before/after).
lab_mrc() {
  local name=$1 fault=$2
  shift 2
  local bin=${LAB_MRC_PERF:-$LAB_FILES/mrc-perf}
  local port=$LAB_PORT
  LAB_PORT=$((LAB_PORT + 1))
  local tmo=${LAB_RUN_TIMEOUT:-120}
  lab_fault_clear
  lab_counters > "$LAB_TMP/$name.cnt0"
  lab_cap_start "$name"
  timeout $((tmo + 15)) "$bin" server --device "$LAB_RXE_B" --gid "$LAB_V6_B" --port "$port" \
    --clients 1 > "$LAB_OUT/$name.server.txt" 2>&1 &
  local spid=$!
  lab_wait_listen "$port" 30 || echo "@@LAB WARN $name: mrc-perf server did not listen on $port"
  local flapfile=$LAB_TMP/$name.flap
  : > "$flapfile"
  case $fault in
    loss:*) lab_fault_loss "${fault#loss:}" ;;
    flap:*) IFS=: read -r _ at down <<< "$fault"; lab_flap_bg "$at" "$down" blackhole "$flapfile" ;;
    carrier:*) IFS=: read -r _ at down <<< "$fault"; lab_flap_bg "$at" "$down" carrier "$flapfile" ;;
  esac
  local t0=$EPOCHREALTIME
  timeout "$tmo" "$bin" client 127.0.0.1 --port "$port" --device "$LAB_RXE_A" --gid "$LAB_V6_A" \
    "$@" > "$LAB_OUT/$name.client.json" 2> "$LAB_OUT/$name.client.txt"
  local crc=$?
  local t1=$EPOCHREALTIME
  wait "$spid"
  local src=$?
  [ -n "$LAB_FLAP_PID" ] && wait "$LAB_FLAP_PID" 2>/dev/null
  LAB_FLAP_PID=
  lab_fault_clear
  lab_cap_stop "$name"
  lab_counters > "$LAB_TMP/$name.cnt1"
  lab_cap_save "$name"
  {
    echo "{\"name\": \"$name\", \"tool\": \"mrc-perf\", \"family\": \"v6\", \"fault\": \"$fault\","
    echo " \"args\": \"$*\", \"client_rc\": $crc, \"server_rc\": $src,"
    echo " \"t_start_us\": ${t0/./}, \"t_end_us\": ${t1/./},"
    cat "$flapfile"
    echo " \"captured\": ${LAB_CAP_CAPTURED:-null}, \"capture_dropped\": ${LAB_CAP_DROPPED:-null}, \"capture_if\": \"${LAB_CAP_IF:-$LAB_A}\","
    echo " \"counters_before\": {"
    sed 's/^\(.*\)=\(.*\)$/  "\1": \2,/' "$LAB_TMP/$name.cnt0" | sed '$ s/,$//'
    echo " }, \"counters_after\": {"
    sed 's/^\(.*\)=\(.*\)$/  "\1": \2,/' "$LAB_TMP/$name.cnt1" | sed '$ s/,$//'
    echo " }}"
  } > "$LAB_OUT/$name.meta.json"
  lab_log "$name: client rc=$crc server rc=$src $(lab_since "$t0" "$t1")s captured=${LAB_CAP_CAPTURED:-?} dropped=${LAB_CAP_DROPPED:-?}"
  head -c 600 "$LAB_OUT/$name.client.json" | sed 's/^/    /'
  [ -s "$LAB_OUT/$name.client.txt" ] && tail -5 "$LAB_OUT/$name.client.txt" | sed 's/^/    stderr: /'
  return $crc
}

# lab_attach: the provider's rxe attach test (reference-impl/provider/rxe_attach_test.c), then
# what rxe counted while MRC frames reached its UDP 4791 socket.
lab_attach() {
  local bin=${LAB_ATTACH_TEST:-$LAB_FILES/mrc_rxe_attach_test}
  lab_counters > "$LAB_TMP/attach.cnt0"
  timeout 120 "$bin" "$LAB_RXE_A" "$LAB_V6_A" "$LAB_RXE_B" "$LAB_V6_B" > "$LAB_OUT/attach.txt" 2>&1
  local rc=$?
  lab_counters > "$LAB_TMP/attach.cnt1"
  cat "$LAB_OUT/attach.txt"
  # what rxe counted: the provider's MRC frames go to rxe's socket too (it drops unknown QPNs)
  awk -F= 'NR == FNR { a[$1] = $2; next } a[$1] != $2 { print "    " $1 ": " a[$1] " -> " $2 }' \
    "$LAB_TMP/attach.cnt0" "$LAB_TMP/attach.cnt1" > "$LAB_OUT/attach.counters.txt"
  cat "$LAB_OUT/attach.counters.txt"
  lab_log "attach test: rc=$rc"
  return $rc
}

lab_attach_only() {
  lab_net_up || return 1
  lab_attach
}

# The side by side over real rxe: RC perftest and MRC (mrc-perf, lib_mrc.so) on the same wire,
# same transfer (LAB_BW_ITERS x LAB_BW_SIZE, 128 outstanding), same faults (none, loss, flap),
# IPv6 GIDs (the MRC engine speaks RoCEv2 over IPv6); then one WRITE at a time, clean
# (ib_write_lat next to mrc-perf --test write_lat, LAB_LAT_ITERS x LAB_LAT_SIZE). Every run is
# captured on mrcA1 (lab_cap_start says why). The attach test runs between the RC and the MRC
# runs.
lab_mrc_plan() {
  local size=${LAB_BW_SIZE:-65536} n=${LAB_BW_ITERS:-1000}
  local lsize=${LAB_LAT_SIZE:-2} nl=${LAB_LAT_ITERS:-1000}
  local loss=${LAB_LOSS_PCT:-1} fat=${LAB_FLAP_AT_MS:-400} fms=${LAB_FLAP_MS:-200}
  local bw=(-s "$size" -n "$n" --report_gbits)
  # -C: TSC cycles, as the baseline's latency runs (perftest's own calibration fails under TCG)
  local lat=(-s "$lsize" -n "$nl" -C)
  local mrc=(--test write_bw --size "$size" --iters "$n" --tx-depth 128)
  local mlat=(--test write_lat --size "$lsize" --iters "$nl")
  [ -n "$LAB_MRC_CC" ] && mrc+=(--cc-profile "$LAB_MRC_CC") && mlat+=(--cc-profile "$LAB_MRC_CC")
  # both transports captured where MRC's transmissions are visible (lab_cap_start)
  local LAB_CAP_IF=$LAB_A_BR
  lab_net_up || return 1
  local fails=0
  # RC first, before any MRC process has touched the devices
  if [ -z "$LAB_MRC_ONLY" ]; then
    lab_perf v6-write_bw-clean ib_write_bw v6 none "${bw[@]}" || fails=$((fails + 1))
    lab_perf "v6-write_bw-loss$loss" ib_write_bw v6 "loss:$loss" "${bw[@]}" || fails=$((fails + 1))
    lab_perf "v6-write_bw-flap${fms}ms" ib_write_bw v6 "flap:$fat:$fms" "${bw[@]}" || fails=$((fails + 1))
    lab_perf v6-write_lat-clean ib_write_lat v6 none "${lat[@]}" || fails=$((fails + 1))
  fi
  lab_attach || fails=$((fails + 1))
  lab_mrc mrc-write_bw-clean none "${mrc[@]}" || fails=$((fails + 1))
  lab_mrc "mrc-write_bw-loss$loss" "loss:$loss" "${mrc[@]}" || fails=$((fails + 1))
  lab_mrc "mrc-write_bw-flap${fms}ms" "flap:$fat:$fms" "${mrc[@]}" || fails=$((fails + 1))
  lab_mrc mrc-write_lat-clean none "${mlat[@]}" || fails=$((fails + 1))
  lab_counters > "$LAB_OUT/counters-final.txt"
  lab_log "mrc plan done: $fails step(s) failed"
  return $fails
}

# --------------------------------------------------------------------------------------------
# plans
# --------------------------------------------------------------------------------------------
lab_baseline() {
  local plan=$1
  shift
  local fams=("$@")
  [ ${#fams[@]} -gt 0 ] || fams=(v4 v6)
  local size=${LAB_BW_SIZE:-65536} n=${LAB_BW_ITERS:-1000} nl=${LAB_LAT_ITERS:-1000}
  local loss=${LAB_LOSS_PCT:-1} fat=${LAB_FLAP_AT_MS:-400} fms=${LAB_FLAP_MS:-200}
  # -C: latency in TSC cycles, converted on the host with the guest's cpu MHz (perftest's own
  # calibration rejects its samples under a loaded TCG guest and prints "inf")
  local bw=(-s "$size" -n "$n" --report_gbits) lat=(-s 2 -n "$nl" -C)
  if [ -n "$LAB_QP_TIMEOUT" ]; then bw+=(-u "$LAB_QP_TIMEOUT"); lat+=(-u "$LAB_QP_TIMEOUT"); fi
  lab_net_up || return 1
  local fails=0 f
  local tools=(ib_write_bw ib_write_lat ib_send_bw ib_read_bw)
  [ "$plan" = quick ] && tools=(ib_write_bw ib_write_lat)
  for f in "${fams[@]}"; do
    local t
    for t in "${tools[@]}"; do
      local a=("${bw[@]}")
      [[ $t == *_lat ]] && a=("${lat[@]}")
      lab_perf "$f-${t#ib_}-clean" "$t" "$f" none "${a[@]}" || fails=$((fails + 1))
    done
  done
  for f in "${fams[@]}"; do
    local t
    for t in "${tools[@]}"; do
      [ "$plan" = quick ] && [ "$f" != v4 -o "$t" != ib_write_bw ] && continue
      local a=("${bw[@]}")
      local tmo=${LAB_RUN_TIMEOUT:-120}
      # a lost final ACK can leave a latency client retrying forever (see README): cap it
      [[ $t == *_lat ]] && a=("${lat[@]}") && tmo=45
      LAB_RUN_TIMEOUT=$tmo lab_perf "$f-${t#ib_}-loss$loss" "$t" "$f" "loss:$loss" "${a[@]}" || fails=$((fails + 1))
    done
    lab_perf "$f-write_bw-flap${fms}ms" ib_write_bw "$f" "flap:$fat:$fms" "${bw[@]}" || fails=$((fails + 1))
    [ "$plan" = quick ] && continue
    lab_perf "$f-write_bw-carrier${fms}ms" ib_write_bw "$f" "carrier:$fat:$fms" "${bw[@]}" || fails=$((fails + 1))
  done
  lab_counters > "$LAB_OUT/counters-final.txt"
  lab_log "baseline done: $fails run(s) with a non-zero client exit"
  return 0
}

lab_selftest() {
  lab_net_up || return 1
  local rc=0
  lab_perf v4-write_bw-selftest ib_write_bw v4 none -s 65536 -n 200 --report_gbits || rc=1
  lab_perf v6-send_bw-selftest ib_send_bw v6 none -s 8192 -n 100 --report_gbits || rc=1
  lab_perf v4-read_bw-selftest ib_read_bw v4 none -s 16384 -n 50 --report_gbits || rc=1
  lab_perf v6-write_lat-selftest ib_write_lat v6 none -s 64 -n 100 -C || rc=1
  return $rc
}

#!/usr/bin/env bash
# Hostile traffic against `mrct endpoint` (ctest hostile_netns, root only; exit 77 otherwise).
#
#   hostile_netns_test.sh MRC_HOSTILE ENDPOINT_CMD...     (e.g. build/ci/bin/mrct endpoint)
#
# Two hosts over two planes (topo.sh, namespaces mrch<pid>{a,b,r1,r2}) and an attacker
# namespace mrch<pid>c on plane 1's router. The router mirrors both directions of plane 1 to
# the attacker (a tap), which learns the server's QPN, a PSN, the R_Key and a VA from one data
# packet and the client's QPN and EV from one SACK (mrc_hostile learn), then injects frames
# through the router (mrc_hostile flood, AF_PACKET) with the client's or server's GID as source.
# Everything is bounded: 5,000 frames per kind at 10,000 frames/s (the test's own addresses
# only), and the whole test takes about 20-30 s.
#
# Run 0: no attack, the counters the attacks should move stay near zero.
# Run 1: one transfer under six floods in turn (spoofed NACK UNEXP_EVENT, EV probes, PSNs far
#        ahead, old-PSN duplicates, port-status updates from random GIDs, bad ICRC); each moves
#        its counter by about what was sent, replies stay rate-limited, per-peer state and peak
#        RSS stay flat, and the transfer completes with its data verified.
# Runs 2-3: a wrong R_Key / a VA outside the region just ahead of the newest data PSN on the
#        tap (kept on during these floods): in the window, not received yet.
#        Verbs RC semantics: the server's QP goes to ERR and NAKs; the client must fail at once
#        with the NAK's status, not after its 30 s stall timeout of probes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
topo="$here/../runtime/topo.sh"
[ $# -ge 2 ] || { echo "usage: $0 MRC_HOSTILE ENDPOINT_CMD..." >&2; exit 2; }
hostile=$1
shift
ep=("$@")
if [ "$(id -u)" -ne 0 ]; then echo "SKIPPED: needs root"; exit 77; fi
for t in ip tc python3; do
  command -v "$t" > /dev/null || { echo "SKIPPED: no $t"; exit 77; }
done

prefix="mrch$$"
C="${prefix}c"
A="${prefix}a"
B="${prefix}b"
R1="${prefix}r1"
tmp=$(mktemp -d)
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  bash "$topo" down "$prefix" > /dev/null 2>&1 || true
  ip netns del "$C" 2> /dev/null || true
  if grep -qE "^${prefix}(a|b|c|r[0-9]+)( |$)" <<<"$(ip netns list 2> /dev/null)"; then
    echo "FAIL: namespaces of $prefix left behind" >&2
    rc=1
  fi
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for f in "$tmp"/*.err "$tmp"/*.json; do
      [ -s "$f" ] && { echo "--- $f"; tail -c 3000 "$f"; echo; }
    done
  fi
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Namespaces of earlier runs that crashed (their pid is gone).
for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E '^mrch[0-9]+(a|b|c|r[0-9]+)$' || true); do
  pid=$(sed -E 's/^mrch([0-9]+).*/\1/' <<< "$ns")
  [ -d "/proc/$pid" ] || ip netns del "$ns" 2> /dev/null || true
done

bash "$topo" up "$prefix" 2 stev 9000 > /dev/null
ip netns add "$C"
ip link add c1 netns "$C" mtu 9000 type veth peer name rc netns "$R1" mtu 9000
ip netns exec "$C" ip link set lo up
ip netns exec "$C" ip link set c1 up
ip netns exec "$R1" ip link set rc up
ip netns exec "$C" ip -6 addr add fd00:3:1::c/64 dev c1 nodad
ip netns exec "$R1" ip -6 addr add fd00:3:1::1/64 dev rc nodad
router_mac=$(ip netns exec "$R1" cat /sys/class/net/rc/address)

tap_on() {
  ip netns exec "$R1" tc qdisc add dev ra clsact
  ip netns exec "$R1" tc qdisc add dev rb clsact
  for d in ra rb; do
    ip netns exec "$R1" tc filter add dev "$d" ingress protocol all u32 match u32 0 0 action mirred egress mirror dev rc
  done
}
tap_off() {
  ip netns exec "$R1" tc qdisc del dev ra clsact
  ip netns exec "$R1" tc qdisc del dev rb clsact
}

# start_transfer NAME CLIENT_ARGS...: server in B, client in A, both in the background.
start_transfer() {
  local name=$1
  shift
  ip netns exec "$B" "${ep[@]}" server --ifaces b1,b2 --accept-timeout 20 --buffer-limit 32M --json \
    > "$tmp/$name-server.json" 2> "$tmp/$name-server.err" &
  spid=$!
  pids+=("$spid")
  sleep 0.3
  ip netns exec "$A" "${ep[@]}" client --server fd00:ff::b --ifaces a1,a2 --size 256K --buffer-limit 32M --json "$@" \
    > "$tmp/$name-client.json" 2> "$tmp/$name-client.err" &
  cpid=$!
  pids+=("$cpid")
  t_start=$(date +%s.%N)
}
wait_transfer() {
  set +e
  wait "$cpid"
  crc=$?
  t_client=$(echo "$(date +%s.%N) - $t_start" | bc)
  wait "$spid"
  src=$?
  set -e
}
learn() {
  tap_on
  ip netns exec "$C" "$hostile" learn --iface c1 --out "$tmp/learned.json" --timeout-s 10 \
    2> "$tmp/learn.err"
  tap_off
}
flood() {
  ip netns exec "$C" "$hostile" flood --iface c1 --learned "$tmp/learned.json" \
    --next-hop-mac "$router_mac" --rate 10000 "$@"
}

echo "== run 0: no attack"
start_transfer run0 --duration 2
wait_transfer
[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: the flood-free run failed (client $crc, server $src)"; exit 1; }

echo "== run 1: six floods during one transfer"
start_transfer run1 --duration 6
sleep 0.5
learn
cat "$tmp/learn.err"
: > "$tmp/floods.jsonl"
for k in unexp-event ev-probe psn-ahead old-psn port-status bad-icrc; do
  flood --kind "$k" --count 5000 | tee -a "$tmp/floods.jsonl"
done
wait_transfer
[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: transfer under floods: client $crc, server $src"; exit 1; }

# refused_write_run N KIND: a 20 s transfer hit by 2,000 frames the server must refuse; the tap
# stays on while flooding, so the sweep follows the client's newest PSN. Writes runN.rc.
refused_write_run() {
  local n=$1 kind=$2
  start_transfer "run$n" --duration 20
  sleep 0.5
  tap_on
  ip netns exec "$C" "$hostile" learn --iface c1 --out "$tmp/learned.json" --timeout-s 10 \
    2> "$tmp/learn.err"
  flood --kind "$kind" --count 2000 | tee "$tmp/flood$n.json"
  tap_off
  wait_transfer
  echo "client exit $crc after ${t_client}s, server exit $src"
  echo "$crc $src $t_client" > "$tmp/run$n.rc"
}

echo "== run 2: wrong R_Key"
refused_write_run 2 wrong-rkey

echo "== run 3: VA outside the region"
refused_write_run 3 va-outside

python3 - "$tmp" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def last(p):
    j = None
    for line in open(os.path.join(d, p)):
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
    if j is None:
        sys.exit(f"FAIL: no JSON result in {p}")
    return j
fails = []
def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        fails.append(what)
sent = {}
for line in open(os.path.join(d, "floods.jsonl")):
    j = json.loads(line)
    sent[j["kind"]] = j["sent"]
c0, s0 = last("run0-client.json"), last("run0-server.json")
c1, s1 = last("run1-client.json"), last("run1-server.json")
def ring_drops(r):
    return sum(p["rx_ring_drops"] for p in r["ports"])
# Frames the receive ring dropped never reach the engine (the loop is slow to drain on a loaded
# host); they are added to what the engine counted, and shown.
def moved(name, r0, r1, key, n, frac=0.9, rings=False):
    a, b = r0[key[0]][key[1]], r1[key[0]][key[1]]
    extra = ring_drops(r1) - ring_drops(r0) if rings else 0
    check(b - a + extra >= frac * n, f"{name}: {key[0]}.{key[1]} {a} -> {b} for {n} frames sent"
          + (f" (+{extra} dropped by the receive ring)" if rings else ""))
for r, who in ((s1, "server"), (c1, "client")):
    check(not r["error"], f"run 1 {who}: no error ({r['error']!r})")
v = s1["verify"]
check(v["messages_checked"] > 0 and v["messages_bad"] == 0,
      f"run 1: data verified ({v['messages_checked'] - v['messages_bad']}/{v['messages_checked']})")
# The kernel receive filter refuses NACKs naming no outstanding PSN before the engine sees
# them (rx_filter.nacks_not_outstanding); the rest the engine drops (refused.fatal_rejected).
nacks_out = lambda r: r["rx_filter"].get("nacks_not_outstanding", 0)
a = c0["refused"]["fatal_rejected"] + nacks_out(c0)
b = c1["refused"]["fatal_rejected"] + nacks_out(c1)
check(b - a >= 0.9 * sent["unexp-event"],
      f"unexp-event: refused.fatal_rejected + rx_filter.nacks_not_outstanding {a} -> {b} for "
      f"{sent['unexp-event']} frames sent ({nacks_out(c1) - nacks_out(c0)} in the kernel)")
# mrct endpoint answers a peer's endpoint requests, and all strangers' together, at 64 + 1,000/s
answered = s1["engine"]["ep_requests_rx"] - s1["engine"]["ep_responses_limited"]
check(answered <= 0.25 * (sent["ev-probe"] + sent["port-status"]),
      f"endpoint responses rate-limited: {answered} answered, "
      f"{s1['engine']['ep_responses_limited']} limited")
# The kernel receive filter (reference-impl/runtime/rx_filter.cc) refuses duplicates and PSNs
# beyond the window before the engine sees them, 64 then one per QP and ms excepted: its counters are
# added to the engine's. The bad-ICRC frames are old PSNs, so it refuses them as duplicates
# without reading their ICRC (it cannot); old-psn and bad-icrc are therefore judged together.
filt = lambda r, k: r["rx_filter"][k]
check(s1["rx_filter"]["on"], "run 1: the kernel receive filter is on")
def moved_sum(name, terms, n):
    a = sum(f(s0) for f in terms.values())
    b = sum(f(s1) for f in terms.values())
    extra = ring_drops(s1) - ring_drops(s0)
    check(b - a + extra >= 0.9 * n, f"{name}: {' + '.join(terms)} {a} -> {b} for {n} frames sent "
          f"(+{extra} dropped by the receive ring)")
moved_sum("psn-ahead", {"refused.out_of_window_rx": lambda r: r["refused"]["out_of_window_rx"],
                        "rx_filter.out_of_window": lambda r: filt(r, "out_of_window")},
          sent["psn-ahead"])
moved_sum("old-psn + bad-icrc", {"packets.duplicates_rx": lambda r: r["packets"]["duplicates_rx"],
                                 "engine.rx_bad_icrc": lambda r: r["engine"]["rx_bad_icrc"],
                                 "rx_filter.duplicates": lambda r: filt(r, "duplicates")},
          sent["old-psn"] + sent["bad-icrc"])
# Endpoint requests: the kernel passes 64 then one EV probe per ms from a peer and 64 then one
# request per ms from all other nodes together; the rest are counted in rx_filter.ep_*_limited.
moved_sum("ev-probe + port-status", {"engine.ep_requests_rx": lambda r: r["engine"]["ep_requests_rx"],
                                     "rx_filter.ep_peer_limited": lambda r: filt(r, "ep_peer_limited"),
                                     "rx_filter.ep_stranger_limited":
                                         lambda r: filt(r, "ep_stranger_limited")},
          sent["ev-probe"] + sent["port-status"])
moved_sum("port-status", {"engine.port_status_unknown_peer":
                              lambda r: r["engine"]["port_status_unknown_peer"],
                          "rx_filter.ep_stranger_limited": lambda r: filt(r, "ep_stranger_limited")},
          sent["port-status"])
# Most of them refused in the kernel: at 10,000 frames/s 64 then one per ms reach the engine.
n_dup_oor = sent["psn-ahead"] + sent["old-psn"] + sent["bad-icrc"]
in_kernel = sum(filt(s1, k) - filt(s0, k) for k in ("duplicates", "out_of_window"))
check(in_kernel >= 0.5 * n_dup_oor,
      f"refused in the kernel: {in_kernel} of {n_dup_oor} ({filt(s1, 'sampled')} passed on)")
# and what reaches the engine answered at 64 + 1,000/s per QP: no reply for what the kernel
# refused, the engine's bucket for the rest
held = s1["refused"]["replies_limited"] + in_kernel
check(held >= 0.5 * n_dup_oor,
      f"replies to PSNs far ahead and duplicates rate-limited: {held} of {n_dup_oor} held back "
      f"({s1['refused']['replies_limited']} by the engine)")
check(s1["packets"]["nacks_sent"] <= 0.25 * sent["psn-ahead"],
      f"NACK PSN_OOR_WINDOW: {s1['packets']['nacks_sent']} sent for {sent['psn-ahead']} frames")
check(s1["engine"]["peer_state_entries"] <= 2 and c1["engine"]["peer_state_entries"] <= 2,
      f"per-peer state bounded: server {s1['engine']['peer_state_entries']}, "
      f"client {c1['engine']['peer_state_entries']} entries after {sent['port-status']} GIDs")
rss0, rss1 = s0["peak_rss_kib"], s1["peak_rss_kib"]
check(rss1 <= rss0 + 8192, f"server peak RSS flat: {rss0} KiB without, {rss1} KiB under floods")
for run, kind, key in (("run2", "wrong-rkey", "remote_access_errors"),
                       ("run3", "va-outside", "remote_access_errors")):
    crc, src, t = open(os.path.join(d, f"{run}.rc")).read().split()
    c, s = last(f"{run}-client.json"), last(f"{run}-server.json")
    refused = s["refused"]["remote_access_errors"] + s["refused"]["invalid_requests"]
    check(refused >= 1, f"{kind}: server refused it ({s['refused']})")
    check(int(crc) == 1 and "REM_" in c["error"],
          f"{kind}: client failed with the NAK's status (exit {crc}: {c['error']!r})")
    check(float(t) < 12, f"{kind}: client failed within {float(t):.1f} s of a 20 s transfer, "
          "not after a 30 s stall")
if fails:
    sys.exit(f"{len(fails)} check(s) failed")
print("all checks passed")
PYEOF

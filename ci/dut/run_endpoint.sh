#!/bin/sh
# DUT adapter for the reference endpoint: turns the MRC_* environment of the DUT contract
# (ci/dut/README.md) into `mrct endpoint` options. A vendor writes the same kind of script for
# their own implementation; reference.toml plugs this one in as the "DUT".
#
# Exit codes are the contract's: 0 transfer completed and verified, 69 scenario not supported,
# anything else a failure (127 is /bin/sh's "command not found": a broken set-up, never
# "unsupported").
set -eu

role=${MRC_ROLE:?MRC_ROLE not set (client or server)}
mrct=${MRCT:-mrct}

# What this adapter cannot do: say so with 69 (the contract's "unsupported") instead of failing.
case "$MRC_EV_FORMAT" in
  srv6|stev|udp) ;;
  *) echo "run_endpoint.sh: EV format $MRC_EV_FORMAT not supported" >&2; exit 69 ;;
esac

set -- endpoint "$role" --json --ifaces "$MRC_IFACES" --gid "$MRC_GID" --port "$MRC_CTL_PORT" \
  --ev-format "$MRC_EV_FORMAT" --io "${MRC_IO:-packet}" --timeout "$MRC_TIMEOUT" \
  --retry "$MRC_RETRY" --mpr "$MRC_MPR" --wimm "$MRC_WIMM" \
  --probe-interval-us "$MRC_PROBE_INTERVAL_US" --seed "$MRC_SEED" --name "$MRC_NODE"

# IFACE=MAC,IFACE=MAC -> --next-hop IFACE=MAC ...
old_ifs=$IFS
IFS=,
for hop in ${MRC_NEXT_HOPS:-}; do
  [ -n "$hop" ] && set -- "$@" --next-hop "$hop"
done
IFS=$old_ifs

if [ "$role" = server ]; then
  set -- "$@" --listen "$MRC_CTL_ADDR"
else
  set -- "$@" --server "$MRC_PEER_CTL_ADDR" --size "$MRC_SIZE" --qps "$MRC_QPS" \
    --tx-depth "$MRC_TX_DEPTH" --stall "$MRC_STALL_S"
  if [ -n "${MRC_DURATION_S:-}" ]; then
    set -- "$@" --duration "$MRC_DURATION_S"
  else
    set -- "$@" --iters "$MRC_MESSAGES"
  fi
  [ "$MRC_OP" = write_with_imm ] && set -- "$@" --imm
fi

if [ -n "${MRC_EV_PROFILE:-}" ]; then
  set -- "$@" --ev-profile "$MRC_EV_PROFILE"
elif [ -n "${MRC_EVS_PER_PLANE:-}" ]; then
  set -- "$@" --evs "$((MRC_EVS_PER_PLANE * MRC_PLANES))"
fi
[ -n "${MRC_CC_PROFILE:-}" ] && set -- "$@" --cc-profile "$MRC_CC_PROFILE"
[ -n "${MRC_CC:-}" ] && set -- "$@" --cc "$MRC_CC"
[ "${MRC_PMTU:-0}" != 0 ] && set -- "$@" --pmtu "$MRC_PMTU"
[ -n "${MRC_EVENT_LOG:-}" ] && set -- "$@" --event-log "$MRC_EVENT_LOG"
[ -n "${MRC_PCAP_PREFIX:-}" ] && set -- "$@" --pcap "$MRC_PCAP_PREFIX"
[ -n "${MRC_MUTANT:-}" ] && set -- "$@" --mutant "$MRC_MUTANT"

# The result JSON goes to stdout (the runner reads its last JSON line) and to $MRC_RESULT.
if [ -n "${MRC_RESULT:-}" ]; then
  rc=0
  "$mrct" "$@" > "$MRC_RESULT.tmp" || rc=$?
  cat "$MRC_RESULT.tmp"
  mv "$MRC_RESULT.tmp" "$MRC_RESULT"
  exit $rc
fi
exec "$mrct" "$@"

#!/usr/bin/env bash
# Conformance scripts over the wire (`mrct script run --target netns`): a namespace pair per
# script, the reference runtime in one, the player on AF_PACKET in the other, real time.
#   scripts_netns_test.sh subset   the scripts tagged `wire` pass against the reference
#   scripts_netns_test.sh mutants  a few scripts pass against the reference and fail against
#                                  each mutant their header names, over the wire
# Needs root (namespaces): skipped (77) without. Fails if a namespace of this run is left over.
set -euo pipefail
: "${MRCT:?}" "${SCRIPTS:?}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case "${1:-subset}" in
  subset)
    set +e
    "$MRCT" script run "$SCRIPTS" --tag wire --target netns -q --json "$out/r.json"
    rc=$?
    set -e
    ls "$out/pcap/"*.pcapng > /dev/null  # the captures were written next to the report
    ;;
  mutants)
    set +e
    "$MRCT" script run "$SCRIPTS/rsp-sack-entropy-echo.mrcs" "$SCRIPTS/rsp-nack-trimmed.mrcs" \
      "$SCRIPTS/req-nack-trimmed.mrcs" "$SCRIPTS/hostile-bad-rkey.mrcs" \
      "$SCRIPTS/req-sack-always-skip.mrcs" --target netns --mutants
    rc=$?
    set -e
    ;;
  *) echo "usage: $0 subset|mutants"; exit 2 ;;
esac
left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^mrcs-" || true)
for ns in $left; do
  # Only namespaces whose creator is gone are leftovers (other runs may be under way).
  pid=${ns#mrcs-}; pid=${pid%%-*}
  if ! kill -0 "$pid" 2>/dev/null; then echo "leftover namespace $ns"; rc=1; fi
done
exit $rc

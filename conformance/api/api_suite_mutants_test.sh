#!/bin/bash
# The API suite can fail: run it against the shim (testdata/mrc_shim.c) that wraps the reference
# lib_mrc.so and breaks one behaviour per MRC_SHIM_BREAK value; each breakage must be caught by
# its own test ID(s) and no other. Prints the mutant table. Usage: SCRIPT MRCT SHIM_SO
# Every run is the whole suite with the two-node tests (--peer-lib SHIM: both nodes broken
# alike). A breakage of a behaviour the one-node and two-node tests both judge (byte_len, a lost
# immediate, a crash in polling) is caught by each of them.
set -euo pipefail
mrct=$1
shim=$2
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: opening softmrc0 needs CAP_NET_RAW (root)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export MRC_SOFT_IO=loopback
# mode | breakage | test IDs that must fail (exactly) | test IDs that must read unsupported
cases=(
  "none|pass-through (no breakage)||"
  "trunc_1m|a WRITE of 1 MiB or more loses its last byte|MRC-API-043|"
  "byte_len_16bit|receive completions' byte_len kept in 16 bits|MRC-API-044|"
  "late_completion|the 20th WRITE completion held back behind the next one of its QP|MRC-API-045|"
  "no_retries|the configured retries ignored (none made), read back as set|MRC-API-046|"
  "dereg_noop|ibv_dereg_mr leaves the MR and its rkey valid|MRC-API-047|"
  "mr_oversize|an MR reaches past its registered length|MRC-API-048|"
  "mr_remote_write|ibv_reg_mr grants remote write not asked for|MRC-API-049|"
  "busy_errno|wrong errno: destroy_context EINVAL instead of EBUSY|MRC-API-008|"
  "accept_read|post_send accepts RDMA READ|MRC-API-025|"
  "no_state_check|modify_qp RESET -> RTR accepted|MRC-API-014|"
  "max_timeout|MRC_QP_TIMEOUT > 24 clamped, not refused|MRC-API-021|"
  "retry_range|retry linear_cnt > 7 / exp_cnt > 25 clamped|MRC-API-022|"
  "hide_ev_event|opt_attr hides MRC_CTL_OPT_CAP_EV_EVENT||MRC-API-035"
  "crash|mrc_poll_cq segfaults|MRC-API-007 MRC-API-024 MRC-API-038 MRC-API-040 MRC-API-043 MRC-API-044 MRC-API-045 MRC-API-046 MRC-API-047 MRC-API-048 MRC-API-049|"
  "hang|mrc_create_qp_hint never returns|MRC-API-010|"
  "wrong_byte_len|receive completions report byte_len + 1|MRC-API-038 MRC-API-044|"
  "ignore_max_wimm|MRC_QP_MAX_WIMM above the device max clamped, not refused|MRC-API-023|"
  "lose_sixth_imm|the sixth receive completion with immediate is lost|MRC-API-040 MRC-API-045|"
  "no_cq_err|CQ overrun: IBV_EVENT_CQ_ERR swallowed|MRC-API-039|"
  "no_eperm|controller call without CAP_NET_ADMIN succeeds|MRC-API-041|"
  "probe_lost|one endpoint probe response fewer than arrived|MRC-API-042|"
  "no_ev_event|the EV event CQ never delivers an event|MRC-API-035|"
)
status=0
printf '| MRC_SHIM_BREAK | breakage | failed test IDs | expected | verdict |\n|---|---|---|---|---|\n'
for c in "${cases[@]}"; do
  IFS='|' read -r mode what want_fail want_unsup <<< "$c"
  rc=0
  limit=30  # seconds per test; the hang is caught at 8
  [ "$mode" = hang ] && limit=8
  MRC_SHIM_BREAK=$mode "$mrct" api-suite --lib "$shim" --peer-lib "$shim" --timeout $limit -q \
    --json "$out/$mode.json" > "$out/$mode.log" 2>&1 || rc=$?
  got=$(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(" ".join(sorted(t["id"] for t in r["tests"] if t["status"] == "fail")))
print(" ".join(sorted(t["id"] for t in r["tests"] if t["status"] == "unsupported")))
' "$out/$mode.json")
  got_fail=$(sed -n 1p <<< "$got")
  got_unsup=$(sed -n 2p <<< "$got")
  verdict=ok
  [ "$got_fail" = "$want_fail" ] || verdict="WRONG"
  for u in $want_unsup; do grep -qw "$u" <<< "$got_unsup" || verdict="WRONG ($u not unsupported)"; done
  want_rc=0; [ -n "$want_fail" ] && want_rc=1
  [ "$rc" = "$want_rc" ] || verdict="WRONG (exit $rc)"
  printf '| %s | %s | %s | %s | %s |\n' "$mode" "$what" "${got_fail:--}" "${want_fail:--}" \
    "$verdict"
  [ "$verdict" = ok ] || { status=1; cat "$out/$mode.log"; }
done
exit $status

#!/bin/sh
# DUT adapter: runs mrc-perf (built on mrc.h, mrc_ctl.h and libibverbs only) with the library
# named by LIB_MRC, every parameter from the DUT contract's MRC_* environment
# (ci/dut/README.md). mrc-perf.toml plugs it in for every role, the node role included.
#
#   LIB_MRC       the lib_mrc.so under test (preloaded: its mrc_* and ibv_* entry points are
#                 the ones mrc-perf calls); empty: the one mrc-perf was linked with
#   MRCPERF_BIN   the mrc-perf binary; default: next to $MRCT (the build's bin/)
set -eu
bin=${MRCPERF_BIN:-$(dirname "${MRCT:?MRCT not set}")/mrc-perf}
if [ -n "${LIB_MRC:-}" ]; then
  [ -f "$LIB_MRC" ] || { echo "run_mrc_perf.sh: LIB_MRC=$LIB_MRC: no such file" >&2; exit 2; }
  export LD_PRELOAD="$LIB_MRC${LD_PRELOAD:+:$LD_PRELOAD}"
fi
# The reference library's device settings (SoftMRC reads these; a vendor library has its own
# way to learn its ports and GID and ignores them): the plane interfaces are the device's
# ports, the node GID (on lo) its source GID, the scenario's EV format its wire format.
export MRC_SOFT_IFACES="$MRC_IFACES" MRC_SOFT_GID="$MRC_GID" MRC_SOFT_EV_FORMAT="$MRC_EV_FORMAT"
# Scenarios run on a shared machine whose processes are regularly not scheduled for tens of ms:
# hold a first timeout while the peer is silent, as `mrct endpoint` does by default
# (--silent-peer-grace-ms 100). Conformance scripts are silent on purpose and time the timeout
# to its window, so script mode keeps every first timeout at T.
if [ "${MRC_ROLE:-}" != script ]; then
  export MRC_SOFT_SILENT_PEER_GRACE_MS="${MRC_SOFT_SILENT_PEER_GRACE_MS:-100}"
fi
exec "$bin" --dut

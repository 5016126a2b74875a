#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs them from a seed corpus made of
# the sample capture. Usage: wire/fuzz/run_fuzz.sh [seconds per target, default 60]
set -euo pipefail
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
cmake --preset fuzz -DMRC_SKIP_DIRS="reference-impl;conformance;fault-injector;gui;lab;testbed;bench" > /dev/null
cmake --build --preset fuzz --target decode_fuzz capture_fuzz mrct
work=build/fuzz/corpus
rm -rf "$work"
mkdir -p "$work/decode" "$work/capture"
build/fuzz/bin/mrct craft --corpus "$work/decode" 2>/dev/null
build/fuzz/bin/mrct craft -o "$work/capture/sample.pcap" 2>/dev/null
build/fuzz/bin/mrct craft --format pcapng -o "$work/capture/sample.pcapng" 2>/dev/null
for t in decode capture; do
  echo "== ${t}_fuzz for ${secs}s (seed corpus: $(ls "$work/$t" | wc -l) files)"
  set +e
  build/fuzz/fuzz/${t}_fuzz -max_total_time="$secs" -max_len=9000 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/${t}-" "$work/$t" > "build/fuzz/${t}.log" 2>&1
  rc=$?
  set -e
  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|ERROR|SUMMARY' "build/fuzz/${t}.log" || true
  [ $rc -eq 0 ] || { echo "${t}_fuzz found a crash (exit $rc), see build/fuzz/${t}.log"; exit 1; }
done

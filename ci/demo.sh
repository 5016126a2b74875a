#!/usr/bin/env bash
# The README's main command: build, then run the default scenario end to end (a 2-plane SRv6
# fabric in network namespaces, the reference endpoint on both hosts, captures, the conformance
# checker) and print its verdict and artifacts. Before that, a one-second look at the codec:
# the sample capture with every MRP0 packet type in every EV carriage, decoded.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)"
mrct=$top/build/release/bin/mrct
out=artifacts/demo
mkdir -p "$out"
"$mrct" craft -o "$out/sample.pcapng" --format pcapng
"$mrct" decode --summary --strict "$out/sample.pcapng"

scenario=scenarios/baseline-srv6.toml
echo
echo "== mrct run $scenario"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo --preserve-env=MRCT)
MRCT=$mrct "${sudo_cmd[@]}" "$mrct" run "$scenario"

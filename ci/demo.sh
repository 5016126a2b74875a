#!/usr/bin/env bash
# The README's main command: build, write the sample MRP0 capture (every packet type in every
# EV carriage) and decode it. Artifacts go to artifacts/demo/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cmake --preset release > /dev/null
cmake --build --preset release -j "$(nproc)" --target mrct
mrct=build/release/bin/mrct
out=artifacts/demo
mkdir -p "$out"
"$mrct" craft -o "$out/sample.pcapng" --format pcapng
"$mrct" decode "$out/sample.pcapng" > "$out/decode.txt"
"$mrct" decode --json "$out/sample.pcapng" > "$out/decode.jsonl"
"$mrct" decode --summary --strict "$out/sample.pcapng"
echo
echo "artifacts: $out/ (sample.pcapng, decode.txt, decode.jsonl)"
echo "open in Wireshark with the MRP0 plugin: wireshark -X lua_script:wire/wireshark/mrp0.lua $out/sample.pcapng"

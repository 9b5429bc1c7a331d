#!/usr/bin/env bash
# Prints the path of the default benchmark recording, generating it first when missing: `maidian gen` with
# 3,000 users over 120 minutes (about 200,000 records, the size of the recordings the figures in
# bench/README.md were taken on). Pass your own recording to the benchmarks instead (RECORDING=... for
# `make bench`, the second argument of bench/rounds.sh) to measure on recorded production traffic
# (`maidian record`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build -c release --show-bin-path)/maidian
out=.build/bench/gen-3000u-120m-seed3.ndjson.zst
if [ ! -s "$out" ]; then
    mkdir -p "$(dirname "$out")"
    "$bin" gen --users 3000 --minutes 120 --seed 3 --out "$out.tmp" >&2
    mv "$out.tmp" "$out"
fi
echo "$out"

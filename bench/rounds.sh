#!/usr/bin/env bash
# The speed figures of the issues, taken together in rounds so that they can be compared on a machine
# whose speed drifts: per round, the zstd floor and the simdjson reference (C/C++ on the same record
# values), `maidian bench` with the issue-2 stages and with the full pipeline, and `maidian bench-match`.
# Each line is the best of its runs, in events per CPU second of the benchmark thread.
#
#   swift build -c release && bench/rounds.sh [ROUNDS] [RECORDING]   (default: scripts/bench-recording.sh)
#
# Needs libzstd-dev (and libsimdjson-dev for the reference; left out when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
recording=${2:-$(scripts/bench-recording.sh)}
bin=$(swift build -c release --show-bin-path)/maidian
work=${TMPDIR:-/tmp}/maidian-rounds
mkdir -p "$work"
[ -s "$work/values.bin" ] || python3 bench/dump_values.py "$recording" "$work/values.bin" >/dev/null
[ -x "$work/zstd_floor" ] || cc -O2 bench/zstd_floor.c -lzstd -o "$work/zstd_floor"
if [ ! -x "$work/simdjson_walk" ] && [ -f /usr/include/simdjson.h ]; then
    g++ -O3 -march=native -std=c++17 bench/simdjson_walk.cpp -lsimdjson -lzstd -o "$work/simdjson_walk"
fi
events=$("$bin" bench bench/issue2.yaml --recording "$recording" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')

best_cpu() { sort -n | head -1; }
for r in $(seq 1 "$rounds"); do
    echo "round $r ($(uptime | sed 's/.*load average/load average/'))"
    floor=$("$work/zstd_floor" "$work/values.bin" 3 | sed -E 's/.*bytes: ([0-9.]+) s CPU/\1/' | best_cpu)
    printf '  %-34s %9.0f events per CPU second (%.3f s)\n' "zstd floor (decompression only)" "$(echo "$events / $floor" | bc -l)" "$floor"
    if [ -x "$work/simdjson_walk" ]; then
        ref=$("$work/simdjson_walk" "$work/values.bin" 3 | sed -E 's/.*JSON: ([0-9.]+) s CPU.*/\1/' | best_cpu)
        printf '  %-34s %9.0f events per CPU second (%.3f s)\n' "zstd + simdjson walk (reference)" "$(echo "$events / $ref" | bc -l)" "$ref"
    fi
    for p in bench/issue2.yaml pipelines/app-analytics.yaml; do
        out=$("$bin" bench "$p" --recording "$recording" --runs 3 --json 2>/dev/null)
        printf '  %-34s %9s events per CPU second (%s s)\n' "maidian bench $(basename "$p")" \
            "$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["events_per_cpu_s"])')" \
            "$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_seconds"])')"
    done
    "$bin" bench-match --rules 10,1000,10000 --runs 15 --recording "$recording" --json 2>/dev/null | python3 -c '
import json, sys
rows = json.load(sys.stdin)
for r in rows:
    print("  %-34s %9d events per CPU second" % ("maidian bench-match, %d rules" % r["rules"], r["events_per_cpu_s"]))
print("  %-34s %9.2f" % ("bench-match 10,000 / 10 rules", rows[-1]["events_per_cpu_s"] / rows[0]["events_per_cpu_s"]))'
done

#!/usr/bin/env bash
# Issue 16's shares in one sitting, as interleaved rounds: per round the simdjson reference, the whole job offline
# (`maidian bench`, sample rules) and one worker through the embedded broker (`through_broker.py`, which also runs
# `maidian bench` over its default 8 partitions and over the broker's). Prints one line per round with the shares:
# share8 against the offline figure over 8 partitions, shareP against the offline figure over the broker's P.
#
#   swift build -c release && bench/broker_rounds.sh [ROUNDS] [RECORDING] [BIN] [PARTITIONS (32)]
#
# OFFLINE_RUNS=3 makes each offline figure the best of 3 passes (steadier shares, about 15 s more a round).
# INTERNAL_PARTITIONS=N gives the group's internal topic N partitions (default: as many as the raw topic), and the
# offline figure over the broker's partitions the same.
# The broker keeps 5 MiB per partition: bench-3k needs 32 (through_broker.py refuses a run that lost records).
#
# Needs libzstd-dev and libsimdjson-dev (for the reference), and what `make deps` installs.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-4}
recording=$(realpath "${2:-$(scripts/bench-recording.sh)}")
bin=${3:-$(swift build -c release --show-bin-path)/maidian}
partitions=${4:-32}
work=${TMPDIR:-/tmp}/maidian-rounds
mkdir -p "$work"
[ -s "$work/values.bin" ] || python3 bench/dump_values.py "$recording" "$work/values.bin" >/dev/null
[ -x "$work/simdjson_walk" ] || g++ -O3 -march=native -std=c++17 bench/simdjson_walk.cpp -lsimdjson -lzstd -o "$work/simdjson_walk"

printf '%-6s %9s %9s %8s %9s %10s %8s %8s\n' round ref_s job_s job/ref broker_s events/s share8 "share$partitions"
for r in $(seq 1 "$rounds"); do
    ref=$("$work/simdjson_walk" "$work/values.bin" 3 | sed -E 's/.*JSON: ([0-9.]+) s CPU.*/\1/' | sort -n | head -1)
    job=$("$bin" bench pipelines/app-analytics.yaml --recording "$recording" --runs 3 --json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_seconds"])')
    python3 bench/through_broker.py "$recording" --bin "$bin" --partitions "$partitions" --offline-runs "${OFFLINE_RUNS:-1}" \
        --internal-partitions "${INTERNAL_PARTITIONS:-$partitions}" --json | tail -1 | python3 -c '
import json, sys
r, ref, job = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
d = json.load(sys.stdin)
eps = d["events_per_second"]
print("%-6s %9.3f %9.3f %8.2f %9.3f %10d %8.2f %8.2f" % (r, ref, job, ref / job, d["seconds_assignment_to_end"], eps,
      eps / d["offline_events_per_cpu_second"], eps / d["offline_same_partitions_events_per_cpu_second"]))' "$r" "$ref" "$job"
done

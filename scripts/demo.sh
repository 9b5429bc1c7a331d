#!/usr/bin/env bash
# `make demo`: generate traffic, start an embedded broker, load the traffic into the raw topic, run the
# pipeline until the end of the input, and show what came out.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${MAIDIAN_BIN:-$(swift build -c release --show-bin-path)/maidian}"   # MAIDIAN_BIN: another build
OUT=demo-out
mkdir -p "$OUT"

echo "▶ generating traffic: 200 users, 30 minutes"
"$BIN" gen --users 200 --minutes 30 --seed 7 --out "$OUT/demo.ndjson.zst"

echo "▶ starting the embedded broker"
"$BIN" broker --topics events.raw:8,events.enriched:8,events.dlq:4,metrics.counts:4,metrics.dwell:4,crash.trails:4,demo.partials:4 --log-level warning > "$OUT/broker.addr" &
BROKER_PID=$!
trap 'kill $BROKER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$OUT/broker.addr" ] && break; sleep 0.1; done
export MAIDIAN_BROKERS="$(head -1 "$OUT/broker.addr")"
echo "  bootstrap: $MAIDIAN_BROKERS"

echo "▶ loading the recording into events.raw"
"$BIN" produce "$OUT/demo.ndjson.zst" --topic events.raw --log-level warning

echo "▶ running pipelines/app-analytics.yaml until the end of the input"
MAIDIAN_GROUP=demo MAIDIAN_SESSION_TIMEOUT=6s "$BIN" run pipelines/app-analytics.yaml --until-end --log-level notice

echo "▶ what came out"
"$BIN" peek events.enriched events.dlq metrics.counts metrics.dwell crash.trails --log-level warning

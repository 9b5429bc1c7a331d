#!/usr/bin/env bash
# Runs the XCTest suites (built by `swift build --build-tests`) in three lanes at once (run by `make test`).
#
# Why: the broker suites (RecoveryTests, ChaosTests, the worker and checkpoint tests) spend most of their time
# waiting on wall-clock events (session timeouts, producers that pace traffic over 20-30 s, kills on a
# schedule) and use about half a core; run one after the other, the suites made CI take more than its 30
# minutes while the two cores were half idle. Each test class runs in exactly one lane, each lane in a
# process of its own; every line a lane prints is prefixed with its name; the script fails if any lane fails.
# LANES=1 runs everything in one process, as `swift test` does.
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
bin=$("$SWIFT" build --show-bin-path)
xctest=$(ls -d "$bin"/*PackageTests.xctest | head -n 1)
export MAIDIAN_BIN=${MAIDIAN_BIN:-$bin/maidian}

if [ "${LANES:-3}" = 1 ]; then
  exec "$xctest"
fi

# Lanes by test class, sized from CI's per-test times; the last lane takes every class the others do not name.
lanes=(
  "recovery:MaidianIntegrationTests.RecoveryTests MaidianIntegrationTests.BackfillReplayTests"
  "broker:MaidianIntegrationTests.ChaosTests MaidianRuntimeTests.CheckpointReplayTests MaidianRuntimeTests.WorkerTests
         MaidianKafkaTests.KafkaConsumerTests"
  "rest:"
)
classes=$("$xctest" --list-tests | grep / | cut -d/ -f1 | sort -u)
named=""
for lane in "${lanes[@]}"; do
  for c in ${lane#*:}; do
    grep -qx "$c" <<<"$classes" || { echo "test-lanes: no test class $c (renamed? update scripts/test-lanes.sh)" >&2; exit 1; }
    named+="$c"$'\n'
  done
done

start=$(date +%s)
run_lane() {  # name, comma-separated classes
  local name=$1 selection=$2 t0 status
  t0=$(date +%s)
  "$xctest" "$selection" 2>&1 | sed -u "s/^/[$name] /"
  status=${PIPESTATUS[0]}
  echo "[$name] lane finished with status $status after $(( $(date +%s) - t0 )) s"
  return "$status"
}
pids=() names=()
for lane in "${lanes[@]}"; do
  name=${lane%%:*} members=${lane#*:}
  if [ -z "$members" ]; then
    selection=$(grep -vxF -f <(printf '%s' "$named") <<<"$classes" | paste -sd, -)
  else
    selection=$(printf '%s\n' $members | paste -sd, -)
  fi
  run_lane "$name" "$selection" & pids+=($!) names+=("$name")
done
failed=""
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=" ${names[$i]}"
done
echo "test lanes: $(( $(date +%s) - start )) s in all; $([ -n "$failed" ] && echo "failed:$failed" || echo "all passed")"
[ -z "$failed" ]

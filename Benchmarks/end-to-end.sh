#!/usr/bin/env bash
# End-to-end and per-stage benchmarks of the relay (release build), each figure beside a floor measured in
# the same run on this machine:
#   1. throughput: 200k events, 300 B payloads, mock Kafka + mock APNs (0 ms); relay in its own process
#      (events/s, p50/p99 consume→result latency, CPU s per 100k events, peak RSS, context switches/event);
#      floors: kcat consume | kcat produce (CPU/message) + h2load against the same mock (CPU/request)
#   2. the same at 40 ms RTT with 1 KiB payloads: events/s, connections the pool opened; floor: h2load
#      over that many connections at the same RTT
#   3. per stage: decode + validate (DecodeBenchmark), provider-token signing (floor: openssl speed),
#      offset-ledger operations (floor: Set insert+remove), result encoding
#   4. memory under backpressure: APNs withholds every reply, Kafka full of events: RSS over time
#   5. paced: 1k events/s and half the measured maximum: CPU per event (÷ full speed) and latency
#   6. slow APNs (1.5k answers/s), 20k events, default configuration: duplicate pushes, events not delivered,
#      CPU per event (÷ full speed), context switches per event; floor: h2load's own CPU per request at 1.5k
#      answers/s ÷ at full speed, against the same mock
#   7. relay threads with 1 and with 64 APNs connections open
#   8. idle: relay CPU (% of a core) with its connections open and no events for IDLE_SECONDS
#   9. allocations, retains + releases, clock reads and copies per event at full speed, in total and by stage (a
#      relay run of its own with Benchmarks/AllocationCounter preloaded)
#  10. the Kafka side as the work grows: 100k events on 16 and on 128 partitions, 1M on 128 (CPU, context
#      switches, peak RSS, librdkafka threads' CPU), each beside kcat on the same topic; then 128 ÷ 16
#      partitions and 1M ÷ 100k backlog (PARTITION_RUNS=EVENTSxPARTITIONS,… to change the runs)
#  11. priority lanes, mock APNs at 1.5k answers/s: urgent events at 20/s in an urgent topic behind a 200k
#      bulk backlog (consume → result and produce → result p50/p99/max), the same topic read as bulk (before),
#      app B at 20/s behind app A's 100k backlog in one lane, bulk's rate while urgent flows ÷ bulk alone
#      (LANE_BACKLOG, LANE_SECONDS)
#  12. tracing off / on at 1 % and 100 % sampling / collector down (TRACING_EVENTS)
#  13. kafka.exactlyOnce: paired runs in turn, off then on: CPU per event and events/s to a read_committed
#      reader (EOS_EVENTS, EOS_PAIRS); produce → visible p99 for a read_committed reader at 1k events/s
#
# Usage: Benchmarks/end-to-end.sh            (env: SKIP_BUILD=1, EVENTS=200000, PARTITIONS=32,
#                                             RTT_EVENTS=40000, BACKPRESSURE_SECONDS=30, PACED_SECONDS=10,
#                                             SLOW_EVENTS=20000, IDLE_SECONDS=20, ALLOC_EVENTS=100000, TRACING_EVENTS=100000,
#                                             PARTITION_RUNS=100000x16,100000x128,1000000x128,
#                                             LANE_BACKLOG=200000, LANE_SECONDS=20,
#                                             EOS_EVENTS=100000, EOS_PAIRS=2,
#                                             BENCH_TABLE=file)
# Prints `figure | value | floor | relay/floor` at the end and appends the rows to $BENCH_TABLE if set.
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-200000}
PARTITIONS=${PARTITIONS:-32}   # librdkafka 2.0.2's mock keeps ~5 MB per partition: 200k x ~560 B needs >= 24
RTT_EVENTS=${RTT_EVENTS:-40000}
BACKPRESSURE_SECONDS=${BACKPRESSURE_SECONDS:-30}
SCRATCH=.build-release

# The relay under test is built as the image ships it (the Dockerfile: the Swift runtime and Foundation linked
# in, `--static-swift-stdlib`), in a scratch path of its own. Measured beside a dynamically linked build of
# the same source: 10-15 % less CPU per event (no calls through the PLT into libswiftCore) and 8 MiB less
# resident memory (fewer pages touched by relocations at start). APNS_RELAY_BINARY overrides it.
RELAY_SCRATCH=.build-release-static

if [[ -z "${SKIP_BUILD:-}" ]]; then
  for product in apns-relay EndToEndBenchmark DecodeBenchmark; do
    swift build -c release --scratch-path "$SCRATCH" --product "$product" >&2
  done
  [[ -n "${APNS_RELAY_BINARY:-}" ]] || swift build -c release --static-swift-stdlib --scratch-path "$RELAY_SCRATCH" --product apns-relay >&2
fi
BIN="$SCRATCH/release"
export APNS_RELAY_BINARY=${APNS_RELAY_BINARY:-$RELAY_SCRATCH/release/apns-relay}
echo "relay under test: $APNS_RELAY_BINARY"
# The allocation counter the `allocations` mode preloads into the relay (EndToEndBenchmark looks beside itself).
gcc -O2 -fno-omit-frame-pointer -shared -fPIC -o "$BIN/libbench-allocation-counter.so" Benchmarks/AllocationCounter/allocation-counter.c -ldl
ROWS=$(mktemp)
trap 'rm -f "$ROWS"' EXIT

run() { # prints the benchmark's lines and keeps its ROW lines
  "$@" | tee >(grep '^ROW|' | cut -d'|' -f2- >>"$ROWS") | grep -v '^ROW|'
}

echo "== decode + validate (DecodeBenchmark)"
DECODE=$("$BIN/DecodeBenchmark")
echo "$DECODE"
# Rows "300 B | simdjson fields | fast path + rules | valijson | JSONSerialization".
awk -F'|' '/^[0-9]+ B/ { gsub(/ +$/, "", $1); gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3);
  gsub(/^ +| +$/, "", $4); r2 = $2; r3 = $3; sub(/ µs/, "", r2); sub(/ µs/, "", r3);
  printf "stage: decode+validate µs, %s|%s|simdjson fields %s (valijson %s)|%.2f\n", $1, $3, $2, $4, r3 / r2 }' \
  <<<"$DECODE" >>"$ROWS"

run "$BIN/EndToEndBenchmark" stages
run "$BIN/EndToEndBenchmark" throughput --events "$EVENTS" --partitions "$PARTITIONS" --payload 300
# Paced runs, against the full-speed figures just measured: CPU per event at 1k events/s (a relay's usual
# day costs what a backlog costs per event, or the design spends its time waking up), and the latency at
# half the maximum rate (with fetch.wait.max.ms=10: librdkafka's mock broker holds a fetch that found no data
# for the whole fetch.wait.max.ms, a Kafka broker answers when data arrives; see PacedAndSlow.swift).
FULL_NS=$(awk -F'|' '/^e2e CPU s\/100k events \(0 ms/ { printf "%d", $2 * 10000 }' "$ROWS")
MAX_RATE=$(awk -F'|' '/^e2e events\/s \(0 ms/ { printf "%d", $2 }' "$ROWS")
run "$BIN/EndToEndBenchmark" paced --rate 1000 --seconds "${PACED_SECONDS:-10}" --full-speed-ns "${FULL_NS:-0}"
run "$BIN/EndToEndBenchmark" paced --rate "$(( ${MAX_RATE:-2000} / 2 ))" --seconds "${PACED_SECONDS:-10}" --full-speed-ns "${FULL_NS:-0}" --fetch-wait-ms 10
run "$BIN/EndToEndBenchmark" slow-apns --events "${SLOW_EVENTS:-20000}" --answers 1500 --full-speed-ns "${FULL_NS:-0}"
run "$BIN/EndToEndBenchmark" allocations --events "${ALLOC_EVENTS:-100000}" --partitions "$PARTITIONS" --payload 300
run "$BIN/EndToEndBenchmark" threads --connections 64
run "$BIN/EndToEndBenchmark" idle --seconds "${IDLE_SECONDS:-20}"
run "$BIN/EndToEndBenchmark" throughput --events "$RTT_EVENTS" --partitions "$PARTITIONS" --payload 1024 --rtt-ms 40
run "$BIN/EndToEndBenchmark" backpressure --events 60000 --seconds "$BACKPRESSURE_SECONDS"
run "$BIN/EndToEndBenchmark" partitions --runs "${PARTITION_RUNS:-100000x16,100000x128,1000000x128}"
run "$BIN/EndToEndBenchmark" lanes --backlog "${LANE_BACKLOG:-200000}" --seconds "${LANE_SECONDS:-20}"
run "$BIN/EndToEndBenchmark" tracing --events "${TRACING_EVENTS:-100000}" --partitions "$PARTITIONS"
run "$BIN/EndToEndBenchmark" exactly-once --events "${EOS_EVENTS:-100000}" --partitions "$PARTITIONS" --pairs "${EOS_PAIRS:-2}"

echo
echo "== apns-relay benchmarks ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
{ echo "figure|relay|floor (same run)|relay/floor"; cat "$ROWS"; } | column -t -s'|'
if [[ -n "${BENCH_TABLE:-}" ]]; then cat "$ROWS" >>"$BENCH_TABLE"; fi

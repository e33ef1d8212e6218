#!/usr/bin/env bash
# Consume-path benchmark: KafkaConsumer vs kcat, same topic, same mock cluster, one run.
# Usage: Benchmarks/kafka-consume.sh [RECORDS] [PARTITIONS]   (defaults 160000 records over 16 partitions:
# the librdkafka 2.0.2 mock keeps only ~5 MB per partition, so stay under ~15k 200-byte records each).
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-160000}
PARTITIONS=${2:-16}

swift build -c release --product apns-relay-sandbox >&2
swift build -c release --product KafkaConsumeBenchmark >&2
BIN=$(swift build -c release --show-bin-path)

OUT=$(mktemp)
"$BIN/apns-relay-sandbox" mock-kafka --brokers 1 --topic "bench:$PARTITIONS" >"$OUT" &
MOCK=$!
trap 'kill $MOCK 2>/dev/null || true; rm -f "$OUT"' EXIT
for _ in $(seq 100); do [ -s "$OUT" ] && break; sleep 0.1; done
BOOTSTRAP=$(head -1 "$OUT")
echo "mock cluster at $BOOTSTRAP; $RECORDS keyed 200-byte records over $PARTITIONS partitions" >&2

"$BIN/KafkaConsumeBenchmark" produce --bootstrap "$BOOTSTRAP" --count "$RECORDS"
echo "# KafkaConsumer, default bufferCapacity (10000): pauses/resumes when the app falls behind"
"$BIN/KafkaConsumeBenchmark" consume --bootstrap "$BOOTSTRAP" --count "$RECORDS"
echo "# KafkaConsumer, buffer large enough never to pause"
"$BIN/KafkaConsumeBenchmark" consume --bootstrap "$BOOTSTRAP" --count "$RECORDS" --buffer 1000000
echo "# KafkaConsumer, large buffer, no storeOffset per record"
"$BIN/KafkaConsumeBenchmark" consume --bootstrap "$BOOTSTRAP" --count "$RECORDS" --buffer 1000000 --no-store
echo "# kcat -C -e on the same topic"
"$BIN/KafkaConsumeBenchmark" kcat --bootstrap "$BOOTSTRAP" --count "$RECORDS"

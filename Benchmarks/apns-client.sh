#!/usr/bin/env bash
# APNsClient throughput (release) against the mock APNs, beside h2load against the same mock.
#
#  1. 0 ms latency, 100-byte payloads: client requests/s and client CPU per request (getrusage of the tool),
#     h2load requests/s and h2load CPU per request (/proc/<pid>/stat), same mock, same connection count.
#  2. 40 ms injected RTT (mock delays replies and WINDOW_UPDATEs), 1 KiB payloads: the pool's rate and the
#     connections it opened; h2load's rate with the same connection count.
#
# Usage: Benchmarks/apns-client.sh [requests]    (default 200000)
# Env:   SKIP_BUILD=1 reuses .build-release; ONLY=0ms or ONLY=40ms runs one part.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-200000}
WORK=$(mktemp -d /tmp/apns-client-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

if [[ -z "${SKIP_BUILD:-}" ]]; then
  swift build -c release --scratch-path .build-release --product apns-mock >&2
  swift build -c release --scratch-path .build-release --product apns-client-tool >&2
fi
MOCK=.build-release/release/apns-mock
TOOL=.build-release/release/apns-client-tool
KID=BENCHKEY01; TEAM=BENCHTEAM1
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/key.p8" 2>/dev/null
TICK=$(getconf CLK_TCK)

start_mock() { # extra mock args...
  "$MOCK" --threads 1 --key-id "$KID" --team-id "$TEAM" --public-key "$WORK/key.p8" --max-streams 1000 "$@" \
    >"$WORK/mock.out" 2>"$WORK/mock.err" &
  MOCK_PID=$!; PIDS+=("$MOCK_PID")
  for _ in $(seq 100); do grep -q '^listening' "$WORK/mock.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(grep -oP '^listening port=\K[0-9]+' "$WORK/mock.out")
  CA=$(grep -oP '^listening port=[0-9]+ ca=\K\S+' "$WORK/mock.out")
}
stop_mock() { kill -TERM "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true; }

jwt() { # the tool mints the same token the client sends
  "$TOOL" token --key "$WORK/key.p8" --kid "$KID" --team "$TEAM" --now "$(date +%s)"
}

h2load_run() { # requests connections streams payload-file
  local token; token=$(printf 'ab%.0s' {1..32})
  h2load -n "$1" -c "$2" -m "$3" -d "$4" -H "authorization: bearer $(jwt)" -H "apns-topic: com.example.app" \
    -H "apns-push-type: alert" "https://127.0.0.1:$PORT/3/device/$token" > "$WORK/h2load.out" &
  local pid=$!
  sleep 0.2
  local before; before=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
  local last=$before
  while kill -0 "$pid" 2>/dev/null; do last=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo "$last"); sleep 0.05; done
  wait "$pid" || true
  local rps; rps=$(grep -oP 'finished in [^,]+, \K[0-9.]+(?= req/s)' "$WORK/h2load.out")
  local ok; ok=$(grep -oP '\K[0-9]+(?= succeeded)' "$WORK/h2load.out")
  awk -v rps="$rps" -v ok="$ok" -v t=$((last)) -v hz="$TICK" -v n="$1" -v c="$2" -v m="$3" \
    'BEGIN { printf "h2load  rate=%.0f/s ok=%d cpu_us_per_request>=%.2f connections=%d streams=%d\n", rps, ok, (t/hz)*1e6/n, c, m }'
}

printf '{"aps":{"alert":"hello"},"pad":"%s"}' "$(head -c 68 /dev/zero | tr '\0' x)" > "$WORK/p100"
printf '{"aps":{"alert":"hello"},"pad":"%s"}' "$(head -c 992 /dev/zero | tr '\0' x)" > "$WORK/p1k"

if [[ "${ONLY:-0ms}" == 0ms ]]; then
echo "== 0 ms latency, 100-byte payloads, $REQUESTS requests =="
start_mock
for conns in 1 2; do
  echo -n "client  "; "$TOOL" bench --port "$PORT" --ca "$CA" --key "$WORK/key.p8" --kid "$KID" --team "$TEAM" \
    --requests "$REQUESTS" --concurrency 2000 --payload 100 --min-connections "$conns" --max-connections "$conns"
  h2load_run "$REQUESTS" "$conns" 1000 "$WORK/p100"
done
stop_mock
fi

[[ "${ONLY:-40ms}" == 40ms ]] || exit 0
echo "== 40 ms RTT, 1 KiB payloads =="
start_mock --rtt-ms 40
echo -n "client  "; "$TOOL" bench --port "$PORT" --ca "$CA" --key "$WORK/key.p8" --kid "$KID" --team "$TEAM" \
  --requests "$REQUESTS" --concurrency 8000 --payload 1024 --min-connections 4 --max-connections 32
for conns in 16 32; do h2load_run "$REQUESTS" "$conns" 1000 "$WORK/p1k"; done
stop_mock

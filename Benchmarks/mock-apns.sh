#!/usr/bin/env bash
# Throughput of the mock APNs server (release build, one event-loop thread) next to nghttpd, both over TLS
# with ALPN h2, driven by h2load: 4 connections x 100 streams, 300-byte POSTs.
# Prints requests/s and server CPU per request (utime+stime from /proc/<pid>/stat).
#
# Usage: Benchmarks/mock-apns.sh [requests]   (default 400000)
# Env:   SKIP_BUILD=1 to reuse .build-release; CONNECTIONS, STREAMS to change the load shape.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-400000}
CONNECTIONS=${CONNECTIONS:-4}
STREAMS=${STREAMS:-100}
WORK=$(mktemp -d /tmp/mock-apns-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

if [[ -z "${SKIP_BUILD:-}" ]]; then
  swift build -c release --scratch-path .build-release --product apns-mock >&2
fi
MOCK=.build-release/release/apns-mock

# Provider key and an ES256 JWT (openssl signs DER; the mock accepts DER and raw r||s).
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$WORK/key.p8"
openssl ec -in "$WORK/key.p8" -pubout -out "$WORK/key.pub" 2>/dev/null
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
KID=BENCHKEY01; TEAM=BENCHTEAM1
HEADER=$(printf '{"alg":"ES256","kid":"%s"}' "$KID" | b64url)
CLAIMS=$(printf '{"iss":"%s","iat":%d}' "$TEAM" "$(date +%s)" | b64url)
SIG=$(printf '%s.%s' "$HEADER" "$CLAIMS" | openssl dgst -sha256 -sign "$WORK/key.p8" | b64url)
JWT="$HEADER.$CLAIMS.$SIG"
TOKEN=$(printf 'ab%.0s' {1..32})
head -c 300 /dev/zero | tr '\0' 'x' > "$WORK/payload"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

run_h2load() { # url extra-args...
  local url=$1; shift
  h2load -n "$REQUESTS" -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "$@" "$url"
}

report() { # name pid h2load-output ticks-before ticks-after
  local name=$1 out=$3 before=$4 after=$5
  local rps ok
  rps=$(grep -oP 'finished in [^,]+, \K[0-9.]+(?= req/s)' <<<"$out")
  ok=$(grep -oP '\K[0-9]+(?= succeeded)' <<<"$out")
  awk -v n="$name" -v rps="$rps" -v ok="$ok" -v t=$((after - before)) -v hz="$TICK" -v req="$REQUESTS" \
    'BEGIN { printf "%-8s %10.0f req/s  %8d ok  server CPU %6.2f s  %6.2f us/request\n", n, rps, ok, t/hz, (t/hz)*1e6/req }'
}

# --- mock ---
"$MOCK" --threads 1 --key-id "$KID" --team-id "$TEAM" --public-key "$WORK/key.pub" --max-streams 1000 >"$WORK/mock.out" 2>"$WORK/mock.err" &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
for _ in $(seq 100); do grep -q '^listening' "$WORK/mock.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(grep -oP '^listening port=\K[0-9]+' "$WORK/mock.out")
URL="https://127.0.0.1:$PORT/3/device/$TOKEN"
H=(-H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert")
# Warm-up (also checks that requests are accepted).
WARM=$(h2load -n 2000 -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$URL")
grep -q 'status codes: 2000 2xx' <<<"$WARM" || { echo "mock warm-up failed:"; echo "$WARM"; exit 1; }
B=$(cpu_ticks "$MOCK_PID"); OUT=$(run_h2load "$URL" "${H[@]}"); A=$(cpu_ticks "$MOCK_PID")
grep -q "status codes: $REQUESTS 2xx" <<<"$OUT" || { echo "mock run had failures:"; echo "$OUT"; }
MOCK_LINE=$(report mock "$MOCK_PID" "$OUT" "$B" "$A")
kill -TERM "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true

# --- nghttpd (one worker, TLS, serves an empty file for the same path) ---
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/srv.key" -out "$WORK/srv.pem" \
  -days 1 -subj /CN=localhost 2>/dev/null
mkdir -p "$WORK/docroot/3/device"; : > "$WORK/docroot/3/device/$TOKEN"
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
nghttpd --address=127.0.0.1 -n 1 -d "$WORK/docroot" "$NPORT" "$WORK/srv.key" "$WORK/srv.pem" >/dev/null 2>&1 &
NG_PID=$!; PIDS+=("$NG_PID")
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$NPORT") 2>/dev/null && break; sleep 0.1; done
NURL="https://127.0.0.1:$NPORT/3/device/$TOKEN"
h2load -n 2000 -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$NURL" >/dev/null
B=$(cpu_ticks "$NG_PID"); OUT=$(run_h2load "$NURL" "${H[@]}"); A=$(cpu_ticks "$NG_PID")
NG_LINE=$(report nghttpd "$NG_PID" "$OUT" "$B" "$A")

echo "h2load: $REQUESTS requests, $CONNECTIONS connections x $STREAMS streams, 300-byte POST, TLS + ALPN h2"
echo "$MOCK_LINE"
echo "$NG_LINE"

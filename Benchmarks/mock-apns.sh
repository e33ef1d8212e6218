#!/usr/bin/env bash
# Throughput of the mock APNs server (release build, one event-loop thread) next to two floors, all over TLS
# with ALPN h2, driven by h2load: 4 connections x 100 streams, 300-byte POSTs.
#   nio-floor  the mock's own stack (NIOSSL + NIOHTTP2Handler at the frame level, one event loop) answering
#              200 and checking nothing (Benchmarks/NIOHTTP2Floor): what the mock's own work costs on top;
#   nghttpd    nghttp2's server, one worker: what a C HTTP/2 server does on this machine.
# Prints requests/s and server CPU per request (utime+stime from /proc/<pid>/stat) for every round and the
# median over the rounds. Rounds alternate the servers so all see the same machine weather; on a machine with
# two or more cores the servers run on CPU 1 and h2load on CPU 0 (fewer migrations, steadier figures).
#
# Usage: Benchmarks/mock-apns.sh [requests]   (default 400000 per round)
# Env:   SKIP_BUILD=1 to reuse .build-release; ROUNDS (default 5); CONNECTIONS, STREAMS to change the load shape.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-400000}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-4}
STREAMS=${STREAMS:-100}
WORK=$(mktemp -d /tmp/mock-apns-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

if [[ -z "${SKIP_BUILD:-}" ]]; then
  swift build -c release --scratch-path .build-release --product apns-mock >&2
  swift build -c release --scratch-path .build-release --product nio-h2-floor >&2
fi
MOCK=.build-release/release/apns-mock
FLOOR=.build-release/release/nio-h2-floor

SERVER_CPU=(); CLIENT_CPU=()
if [[ $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then
  SERVER_CPU=(taskset -c 1); CLIENT_CPU=(taskset -c 0)
fi

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
H=(-H "authorization: bearer $JWT" -H "apns-topic: com.example.bench" -H "apns-push-type: alert")

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# One measured h2load run against a running server; prints "req/s us/request".
measure() { # name pid url
  local name=$1 pid=$2 url=$3 out before after rps
  before=$(cpu_ticks "$pid")
  out=$("${CLIENT_CPU[@]}" h2load -n "$REQUESTS" -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$url")
  after=$(cpu_ticks "$pid")
  grep -q "status codes: $REQUESTS 2xx" <<<"$out" || { echo "$name run had failures:" >&2; echo "$out" >&2; exit 1; }
  rps=$(grep -oP 'finished in [^,]+, \K[0-9.]+(?= req/s)' <<<"$out")
  awk -v rps="$rps" -v t=$((after - before)) -v hz="$TICK" -v req="$REQUESTS" \
    'BEGIN { printf "%.0f %.2f\n", rps, (t / hz) * 1e6 / req }'
}

# --- mock: one event-loop thread ---
"${SERVER_CPU[@]}" "$MOCK" --threads 1 --key-id "$KID" --team-id "$TEAM" --public-key "$WORK/key.pub" \
  --max-streams 1000 >"$WORK/mock.out" 2>"$WORK/mock.err" &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
for _ in $(seq 100); do grep -q '^listening' "$WORK/mock.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(grep -oP '^listening port=\K[0-9]+' "$WORK/mock.out")
URL="https://127.0.0.1:$PORT/3/device/$TOKEN"
# Warm-up (also checks that requests are accepted).
WARM=$(h2load -n 2000 -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$URL")
grep -q 'status codes: 2000 2xx' <<<"$WARM" || { echo "mock warm-up failed:"; echo "$WARM"; exit 1; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/srv.key" -out "$WORK/srv.pem" \
  -days 1 -subj /CN=localhost 2>/dev/null

# --- nio-floor: the mock's stack, no APNs work ---
"${SERVER_CPU[@]}" "$FLOOR" "$WORK/srv.pem" "$WORK/srv.key" >"$WORK/floor.out" 2>&1 &
FLOOR_PID=$!; PIDS+=("$FLOOR_PID")
for _ in $(seq 100); do grep -q '^listening' "$WORK/floor.out" 2>/dev/null && break; sleep 0.1; done
FURL="https://127.0.0.1:$(grep -oP '^listening port=\K[0-9]+' "$WORK/floor.out")/3/device/$TOKEN"
h2load -n 2000 -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$FURL" >/dev/null

# --- nghttpd: one worker, TLS, serves an empty file for the same path ---
mkdir -p "$WORK/docroot/3/device"; : > "$WORK/docroot/3/device/$TOKEN"
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${SERVER_CPU[@]}" nghttpd --address=127.0.0.1 -n 1 -d "$WORK/docroot" "$NPORT" "$WORK/srv.key" "$WORK/srv.pem" \
  >/dev/null 2>&1 &
NG_PID=$!; PIDS+=("$NG_PID")
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$NPORT") 2>/dev/null && break; sleep 0.1; done
NURL="https://127.0.0.1:$NPORT/3/device/$TOKEN"
h2load -n 2000 -c "$CONNECTIONS" -m "$STREAMS" -d "$WORK/payload" "${H[@]}" "$NURL" >/dev/null

echo "h2load: $REQUESTS requests x $ROUNDS rounds, $CONNECTIONS connections x $STREAMS streams, 300-byte POST," \
  "TLS + ALPN h2${SERVER_CPU:+; server on CPU 1, h2load on CPU 0}"
: > "$WORK/mock.rounds"; : > "$WORK/nio-floor.rounds"; : > "$WORK/nghttpd.rounds"
for round in $(seq "$ROUNDS"); do
  m=$(measure mock "$MOCK_PID" "$URL"); echo "$m" >> "$WORK/mock.rounds"
  f=$(measure nio-floor "$FLOOR_PID" "$FURL"); echo "$f" >> "$WORK/nio-floor.rounds"
  n=$(measure nghttpd "$NG_PID" "$NURL"); echo "$n" >> "$WORK/nghttpd.rounds"
  read -r mr mc <<<"$m"; read -r fr fc <<<"$f"; read -r nr nc <<<"$n"
  printf 'round %d: mock %6d req/s %5.2f us/req   nio-floor %6d req/s %5.2f us/req   nghttpd %6d req/s %5.2f us/req\n' \
    "$round" "$mr" "$mc" "$fr" "$fc" "$nr" "$nc"
done
kill -TERM "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
summary() { # name file
  local rps cpu lo hi
  rps=$(cut -d' ' -f1 "$2" | median); cpu=$(cut -d' ' -f2 "$2" | median)
  lo=$(cut -d' ' -f1 "$2" | sort -n | head -1); hi=$(cut -d' ' -f1 "$2" | sort -n | tail -1)
  printf '%-9s %10.0f req/s  server CPU %6.2f us/request  (median of %d rounds; req/s range %d-%d)\n' \
    "$1" "$rps" "$cpu" "$ROUNDS" "$lo" "$hi"
}
summary mock "$WORK/mock.rounds"
summary nio-floor "$WORK/nio-floor.rounds"
summary nghttpd "$WORK/nghttpd.rounds"

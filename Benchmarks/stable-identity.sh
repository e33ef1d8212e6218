#!/usr/bin/env bash
# What a crashed relay's successor costs a read_committed reader with kafka.exactlyOnce, by whether it keeps the
# crashed one's kafka.transactionalId (a StatefulSet pod keeps its name) or gets a new one (a Deployment's
# replacement pod):
#
#   On noida-db (a Kafka-protocol broker with transactions), with the mock APNs: events are produced into the
#   input topic at RATE/s throughout; a read_committed and a read_uncommitted reader follow the results
#   topic. The relay is frozen (SIGSTOP) the moment the read_uncommitted reader receives a record, i.e. inside
#   the transaction writing it; if, after SETTLE_MS, that reader holds records the read_committed one does
#   not, a transaction is open and the relay is SIGKILLed (otherwise it is resumed and frozen again at a later
#   record). Its successor starts at once:
#     stable: the same kafka.transactionalId and kafka.groupInstanceId
#     new:    a new kafka.transactionalId, the same kafka.groupInstanceId (noida-db never expires a dead
#             member's session, so a new instance id would stall the group for a reason of its own; on Kafka
#             a Deployment's pod also has a new one, and pays kafka.sessionTimeoutMs for it on top)
#   Measured: how long a read_committed reader (kcat, polled from the position the reader had at the kill)
#   waits for its next result, from the SIGKILL and from the successor's start, bounded by 2 x
#   kafka.transactionTimeoutMs from the kill. noida-db never aborts a timed-out
#   transaction, so the new-identity case shows only that nothing but the timeout would end the wait; Kafka's
#   transaction coordinator aborts it after transaction.timeout.ms, found by a sweep every
#   transaction.abort.timed.out.transaction.cleanup.interval.ms (broker, default 10 s).
#
# Usage: Benchmarks/stable-identity.sh [BINARY_DIR]   (apns-relay and apns-mock from BINARY_DIR; without it
#        they are built in release into .build-release, or with SKIP_BUILD=1 taken from the first of
#        .build-release/release, .build/release, .build/debug that has them; APNS_RELAY_BINARY overrides the relay)
# Env:   RUNS=3 (per case), RATE=200 (events/s), TRANSACTION_TIMEOUT_MS=10000 (kafka.transactionTimeoutMs),
#        SETTLE_MS=500, BENCH_TABLE=file (rows `figure|relay|floor|ratio` are appended to it)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
RATE=${RATE:-200}
TRANSACTION_TIMEOUT_MS=${TRANSACTION_TIMEOUT_MS:-10000}
SETTLE_MS=${SETTLE_MS:-500}
# kafka.transactionTimeoutMs must exceed kafka.transactionIntervalMs (100) plus relay.requestTimeoutMs (10 s by
# default): a shorter APNs deadline lets the run use a short transaction timeout. The mock answers at once.
REQUEST_TIMEOUT_MS=$(( TRANSACTION_TIMEOUT_MS / 2 ))
DEADLINE_MS=$(( 2 * TRANSACTION_TIMEOUT_MS ))
HELPER=Benchmarks/stable-identity/stream.py

if [[ $# -ge 1 ]]; then
  BIN=$1
elif [[ -z "${SKIP_BUILD:-}" ]]; then
  for product in apns-relay apns-mock; do swift build -c release --scratch-path .build-release --product "$product" >&2; done
  BIN=.build-release/release
else
  BIN=
  for dir in .build-release/release .build/release .build/debug; do
    if [[ -x $dir/apns-relay && -x $dir/apns-mock ]]; then BIN=$dir; break; fi
  done
  [[ -n $BIN ]] || { echo "no apns-relay and apns-mock in .build-release/release, .build/release or .build/debug" >&2; exit 1; }
fi
RELAY=${APNS_RELAY_BINARY:-$BIN/apns-relay}
MOCK=$BIN/apns-mock
NOIDA=$(ls .venv/lib/python3*/site-packages/noida_db/noida-db 2>/dev/null | head -1 || true)
# The broker itself, not .venv/bin/noida-db: that script runs it as a child, and a SIGTERM to the script leaves
# the broker running.
[[ -n $NOIDA ]] || { echo "noida-db is not in .venv: .venv/bin/pip install -r Tests/requirements.txt" >&2; exit 1; }
chmod +x "$NOIDA" 2>/dev/null || true
for tool in kcat python3 openssl; do command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }; done
echo "relay $RELAY, mock $MOCK, broker $NOIDA"
echo "kafka.exactlyOnce true, kafka.transactionTimeoutMs $TRANSACTION_TIMEOUT_MS, kafka.transactionIntervalMs 100," \
  "relay.requestTimeoutMs $REQUEST_TIMEOUT_MS; $RATE events/s; $RUNS runs per case; every wait ends after $(( DEADLINE_MS / 1000 )) s"

WORK=$(mktemp -d /tmp/stable-identity.XXXXXX)
PIDS=()
# Without the wait, bash reports each job it killed ("Killed ...") on stderr.
kill_quietly() { { kill -KILL "$1" && wait "$1"; } 2>/dev/null || true; }
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill_quietly "$pid"; done
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { printf '%s' "$EPOCHREALTIME"; }
log_ms() { # log pattern since: ms from since to the first log line with pattern (-1: none)
  local at; at=$(grep -m1 "$2" "$1" | grep -oP '"timestamp":"\K[^"]+' || true)
  [[ -n $at ]] || { echo -1; return; }
  elapsed_ms "$3" "$(date -d "$at" +%s.%N)"
}
before() { awk -v n="$EPOCHREALTIME" -v d="$1" 'BEGIN { exit !(n < d) }'; }
elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
lines() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_listening() { # port seconds
  local until=$(( SECONDS + $2 ))
  while (( SECONDS < until )); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

stop_pid() { # pid seconds: SIGTERM, SIGKILL once the deadline passes
  local pid=$1 until=$(( SECONDS + $2 ))
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < until )); do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# One signing key for the run: the relay signs provider tokens with it, the mock checks them with it.
KEY_ID=STABLEID01; TEAM_ID=STABLETEAM
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/key.p8" 2>/dev/null
"$MOCK" --threads 1 --key-id "$KEY_ID" --team-id "$TEAM_ID" --public-key "$WORK/key.p8" >"$WORK/mock.out" 2>"$WORK/mock.err" &
PIDS+=("$!")
for _ in $(seq 100); do grep -q '^listening' "$WORK/mock.out" 2>/dev/null && break; sleep 0.1; done
APNS_PORT=$(grep -oP '^listening port=\K[0-9]+' "$WORK/mock.out") || { echo "the mock APNs did not listen:" >&2; cat "$WORK/mock.err" >&2; exit 1; }
APNS_CA=$(grep -oP '^listening port=[0-9]+ ca=\K\S+' "$WORK/mock.out")

start_relay() { # transactional-id log-file; sets RELAY_PID
  # env -i: the relay refuses APNS_RELAY_* variables it does not know (APNS_RELAY_BINARY among them).
  env -i PATH="$PATH" HOME="$HOME" \
    APNS_RELAY_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
    APNS_RELAY_KAFKA_GROUP_ID=stable-identity \
    APNS_RELAY_KAFKA_GROUP_INSTANCE_ID=stable-identity-0 \
    APNS_RELAY_KAFKA_SESSION_TIMEOUT_MS=6000 \
    APNS_RELAY_KAFKA_STATISTICS_INTERVAL_MS=0 \
    APNS_RELAY_KAFKA_EXACTLY_ONCE=true \
    APNS_RELAY_KAFKA_TRANSACTIONAL_ID="$1" \
    APNS_RELAY_KAFKA_TRANSACTION_INTERVAL_MS=100 \
    APNS_RELAY_KAFKA_TRANSACTION_TIMEOUT_MS="$TRANSACTION_TIMEOUT_MS" \
    APNS_RELAY_RELAY_REQUEST_TIMEOUT_MS="$REQUEST_TIMEOUT_MS" \
    APNS_RELAY_APNS_TOKEN_KEY_ID="$KEY_ID" \
    APNS_RELAY_APNS_TOKEN_TEAM_ID="$TEAM_ID" \
    APNS_RELAY_APNS_TOKEN_PRIVATE_KEY_FILE="$WORK/key.p8" \
    APNS_RELAY_APNS_CA_FILE="$APNS_CA" \
    APNS_RELAY_APNS_PRODUCTION_HOST=127.0.0.1 \
    APNS_RELAY_APNS_PRODUCTION_PORT="$APNS_PORT" \
    APNS_RELAY_APNS_DEVELOPMENT_HOST=127.0.0.1 \
    APNS_RELAY_APNS_DEVELOPMENT_PORT="$APNS_PORT" \
    APNS_RELAY_ADMIN_PORT=0 \
    APNS_RELAY_LOG_LEVEL=info \
    "$RELAY" run >"$2" 2>&1 &
  RELAY_PID=$!
  PIDS+=("$RELAY_PID")
}

# Results of one run, read by the summary: "case kill_ms start_ms written_after_start duplicates" (ms -1: none
# within the deadline).
RESULTS=$WORK/results.txt
: >"$RESULTS"

one_run() { # case (stable|new) index
  local kind=$1 index=$2 dir="$WORK/$1-$2"
  mkdir -p "$dir"
  local port; port=$(free_port)
  BOOTSTRAP=127.0.0.1:$port
  "$NOIDA" start --only kafka --host 127.0.0.1 --kafka-port "$port" --data-dir "$dir/noida" >"$dir/noida.log" 2>&1 &
  local noida=$!; PIDS+=("$noida")
  wait_listening "$port" 20 || { echo "noida-db did not listen on $port:" >&2; tail -20 "$dir/noida.log" >&2; return 1; }
  # A metadata request for a topic creates it (noida-db creates topics on first use, with one partition).
  for topic in apns-notifications apns-results apns-removed-tokens apns-removed-channels apns-dead-letters; do
    timeout 20 kcat -L -b "$BOOTSTRAP" -t "$topic" >/dev/null
  done

  local reader
  for reader in committed uncommitted; do
    local isolation=read_committed extra=()
    [[ $reader == uncommitted ]] && { isolation=read_uncommitted; extra=(--arm "$dir/arm" --stopped "$dir/stopped"); }
    kcat -C -u -q -b "$BOOTSTRAP" -t apns-results -o beginning -X isolation.level="$isolation" -f '%o %k\n' \
      > >(python3 "$HELPER" stamp --out "$dir/$reader.log" "${extra[@]}") 2>"$dir/$reader.err" &
    PIDS+=("$!")
  done
  # The stream goes on through the crash and the restart, as production would; the helper's own deadline ends
  # it if this script does not.
  kcat -P -b "$BOOTSTRAP" -t apns-notifications -K $'\t' -X linger.ms=5 \
    < <(python3 "$HELPER" events --rate "$RATE" --seconds 600) 2>"$dir/producer.err" &
  local producer=$!; PIDS+=("$producer")

  start_relay stable-identity-0 "$dir/relay-1.log"
  local relay=$RELAY_PID
  # Steady state first: a second's worth of committed results.
  local until=$(( SECONDS + 120 ))
  while (( $(lines "$dir/committed.log") < RATE )); do
    (( SECONDS < until )) || { echo "$kind $index: no steady stream of committed results within 120 s; relay log:" >&2; tail -30 "$dir/relay-1.log" >&2; return 1; }
    kill -0 "$relay" 2>/dev/null || { echo "$kind $index: the relay exited; its log:" >&2; tail -30 "$dir/relay-1.log" >&2; return 1; }
    sleep 0.1
  done

  # Freeze the relay inside a transaction; kill it once the readers show that one is open.
  local attempts=0 open=0 killed
  until=$(( SECONDS + 60 ))
  while (( SECONDS < until )); do
    attempts=$(( attempts + 1 ))
    rm -f "$dir/stopped"
    echo "$relay" >"$dir/arm"
    local armed=$(( SECONDS + 10 ))
    while [[ ! -f $dir/stopped ]] && (( SECONDS < armed )); do sleep 0.005; done
    [[ -f $dir/stopped ]] || { rm -f "$dir/arm"; echo "$kind $index: no result record within 10 s of arming" >&2; return 1; }
    sleep "$(awk -v ms="$SETTLE_MS" 'BEGIN { print ms / 1000 }')"
    if (( $(lines "$dir/uncommitted.log") > $(lines "$dir/committed.log") )); then open=1; break; fi
    kill -CONT "$relay"
    sleep 0.2
  done
  (( open )) || { echo "$kind $index: never froze the relay inside an open transaction in $attempts attempts" >&2; return 1; }
  local behind=$(( $(lines "$dir/uncommitted.log") - $(lines "$dir/committed.log") ))
  killed=$(now); kill_quietly "$relay"
  local uncommitted_at_kill; uncommitted_at_kill=$(lines "$dir/uncommitted.log")
  local open_last; open_last=$(tail -1 "$dir/uncommitted.log" | cut -d' ' -f2)

  local id=stable-identity-0
  [[ $kind == new ]] && id=stable-identity-replacement-$index
  local started; started=$(now)
  start_relay "$id" "$dir/relay-2.log"
  relay=$RELAY_PID

  # The next committed result, until the deadline from the kill, read by a read_committed consumer started
  # afresh from the reader's position at the kill, again and again. Not the reader that has been waiting: on
  # noida-db, a librdkafka 2.0.2 read_committed consumer whose fetch position has passed an abort marker never
  # shows the successor's records (with the same transactional id they carry the same producer id, which
  # noida-db apparently still lists as aborted to fetches that start after the marker); one that fetches from
  # before the marker shows them. A poll costs about 10 ms of kcat start-up, which bounds the error.
  local from; from=$(( $(tail -1 "$dir/committed.log" | cut -d' ' -f2) + 1 ))
  local deadline_s; deadline_s=$(awk -v k="$killed" -v d="$DEADLINE_MS" 'BEGIN { printf "%.6f", k + d / 1000 }')
  local seen="" polls=0 record
  while before "$deadline_s"; do
    polls=$(( polls + 1 ))
    record=$(timeout 5 kcat -C -e -q -c 1 -b "$BOOTSTRAP" -t apns-results -o "$from" -X isolation.level=read_committed \
      -f '%o %k\n' 2>/dev/null || true)
    if [[ -n $record ]]; then
      seen=$(now)
      # A record of the killed relay's open transaction would mean it was not open after all.
      (( ${record%% *} > open_last )) || { echo "$kind $index: read_committed showed offset ${record%% *}, one of the killed relay's (up to $open_last)" >&2; return 1; }
      break
    fi
    kill -0 "$relay" 2>/dev/null || { echo "$kind $index: the successor exited; its log:" >&2; tail -30 "$dir/relay-2.log" >&2; return 1; }
    sleep 0.02
  done
  local written=$(( $(lines "$dir/uncommitted.log") - uncommitted_at_kill ))
  local from_kill=-1 from_start=-1
  if [[ -n $seen ]]; then from_kill=$(elapsed_ms "$killed" "$seen"); from_start=$(elapsed_ms "$started" "$seen"); fi
  # Where the successor's start went: registering its transactional id (which aborts the predecessor's
  # transaction when the id is the same) and joining the group, from its log's timestamps.
  local ready assigned
  ready=$(log_ms "$dir/relay-2.log" 'transactional producer ready' "$started")
  assigned=$(log_ms "$dir/relay-2.log" 'partitions assigned' "$started")
  # Exactly once still holds: no key twice among the committed results, read from the start by a new reader.
  local committed duplicates
  committed=$(timeout 60 kcat -C -e -q -b "$BOOTSTRAP" -t apns-results -o beginning -X isolation.level=read_committed -f '%k\n' 2>/dev/null || true)
  duplicates=$(sort <<<"$committed" | uniq -d | wc -l)
  local summary="$kind $index: frozen in an open transaction at attempt $attempts ($behind records uncommitted);"
  summary+=" successor's producer ready after $ready ms, partitions assigned after $assigned ms;"
  if [[ -n $seen ]]; then
    summary+=" next committed result (offset ${record%% *}) $from_kill ms after the SIGKILL, $from_start ms after the successor started ($polls polls)"
  else
    summary+=" no committed result within $(( DEADLINE_MS / 1000 )) s of the SIGKILL ($polls polls), while the successor wrote $written records that only read_uncommitted sees"
  fi
  echo "$summary; $duplicates duplicate keys among $(grep -c . <<<"$committed" || true) committed results"
  echo "$kind $from_kill $from_start $written $duplicates $ready $assigned" >>"$RESULTS"

  stop_pid "$relay" 30
  stop_pid "$producer" 5
  stop_pid "$noida" 5
  # The readers end with the broker (kcat -C keeps retrying a broker that is gone, so they are killed).
  local pid
  for pid in "${PIDS[@]:1}"; do kill_quietly "$pid"; done
  PIDS=("${PIDS[0]}")
  return 0
}

for kind in stable new; do
  for index in $(seq "$RUNS"); do one_run "$kind" "$index"; done
done

# min / median / max of a case's column (ms → s), only over runs that saw a result.
stats() { # case column
  awk -v k="$1" -v c="$2" '$1 == k && $c >= 0 { print $c / 1000 }' "$RESULTS" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "none"; exit } m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "%.2f %.2f %.2f %d\n", m, v[1], v[NR], NR }'
}
read -r s_kill s_kill_min s_kill_max s_n <<<"$(stats stable 2)"
read -r s_start s_start_min s_start_max _ <<<"$(stats stable 3)"
new_seen=$(awk '$1 == "new" && $2 >= 0' "$RESULTS" | wc -l)
new_runs=$(awk '$1 == "new"' "$RESULTS" | wc -l)
deadline_s=$(( DEADLINE_MS / 1000 ))

echo
echo "== stable identity ($(nproc) cores; kafka.transactionTimeoutMs $TRANSACTION_TIMEOUT_MS, $RATE events/s, noida-db)"
if [[ $s_kill == none ]]; then
  echo "stable identity: the read_committed reader saw no result within $deadline_s s in any run"
else
  read -r s_ready s_ready_min s_ready_max _ <<<"$(stats stable 6)"
  echo "stable identity: read_committed reader waited $s_kill s (min $s_kill_min, max $s_kill_max; $s_n runs) from SIGKILL for the next result; $s_start s (min $s_start_min, max $s_start_max) after the successor started, whose producer was ready (the predecessor's transaction aborted) after $s_ready s (min $s_ready_min, max $s_ready_max)"
fi
if (( new_seen == 0 )); then
  echo "new identity:    reader saw no result within $deadline_s s (2x transaction.timeout.ms) in $new_runs of $new_runs runs, the successor writing meanwhile: noida-db never aborts the open transaction; Kafka's coordinator aborts it after transaction.timeout.ms (+ up to transaction.abort.timed.out.transaction.cleanup.interval.ms, default 10 s)"
else
  read -r n_kill n_kill_min n_kill_max n_n <<<"$(stats new 2)"
  echo "new identity:    reader waited $n_kill s (min $n_kill_min, max $n_kill_max) in $n_n of $new_runs runs; in the others nothing within $deadline_s s"
fi

ROWS=$WORK/rows.txt
: >"$ROWS"
if [[ $s_kill != none ]]; then
  new_label="new transactional id: > $deadline_s (none within 2x timeout)"
  (( new_seen == 0 )) || new_label="new transactional id: $new_seen of $new_runs runs saw one"
  ratio=$(awk -v s="$s_kill" -v d="$deadline_s" 'BEGIN { printf "< %.3f", s / d }')
  printf 'exactly-once crash, SIGKILL → next read_committed result, s (txn timeout %d s; median, min–max)|%s (%s–%s)|%s|%s\n' \
    "$(( TRANSACTION_TIMEOUT_MS / 1000 ))" "$s_kill" "$s_kill_min" "$s_kill_max" "$new_label" "$ratio" >>"$ROWS"
  printf 'exactly-once crash, successor start → next read_committed result, s (same transactional id)|%s (%s–%s)||\n' \
    "$s_start" "$s_start_min" "$s_start_max" >>"$ROWS"
fi
column -t -s'|' "$ROWS"
if [[ -n "${BENCH_TABLE:-}" ]]; then cat "$ROWS" >>"$BENCH_TABLE"; fi

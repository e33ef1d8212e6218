#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer binaries and runs each target for FUZZ_SECONDS, then prints one line per target
# (executions, exec/s, libFuzzer's cov/ft, corpus size, and for event-json the line coverage of Sources/CEventJSON).
# Fuzz/README.md says why it is built this way.
#
#   FUZZ_SECONDS=60                  per target
#   FUZZ_TARGETS="event-json …"      a subset (names as in Fuzz/corpus/)
#   FUZZ_MERGE=1                     afterwards, merge what the run found into Fuzz/corpus/<target>, minimised
#                                    (-set_cover_merge=1), to commit
#
# Everything it builds and writes is under .build-fuzz/ (git-ignored); a crashing input is left in
# .build-fuzz/crashes/<target>/ and the run fails, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/.build-fuzz
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=${FUZZ_TARGETS:-event-json event-decoder configuration apns-answer}
BIN=$(dirname "$(command -v swiftc)")
CLANGXX=$BIN/clang++
LLVM_PROFDATA=$BIN/llvm-profdata
LLVM_COV=$BIN/llvm-cov
mkdir -p "$OUT/bin"

# Rebuild $1 when any of the other files is newer.
stale() { local target=$1; shift; [ ! -x "$target" ] || [ -n "$(find "$@" -newer "$target" -print -quit)" ]; }

CEJ_SOURCES=("$ROOT"/Sources/CEventJSON/*.cpp "$ROOT/Fuzz/EventJSON/EventJSONFuzz.cpp" "$ROOT/Fuzz/Drivers/event_json_fuzzer.cpp")
CEJ_FLAGS=(-std=c++17 -g -O1 -fuse-ld=lld -I"$ROOT/Sources/CEventJSON/include" -I"$ROOT/Fuzz/EventJSON/include"
  -DAPNS_RELAY_EVENT_SCHEMA="\"$ROOT/Schemas/notification-event.schema.json\"")

build_event_json() {
  # Straight from the sources, with UBSan as well (SwiftPM cannot add it to Swift), so simdjson, nlohmann and
  # valijson (headers, instantiated here) are instrumented with our code.
  if stale "$OUT/bin/event-json" "${CEJ_SOURCES[@]}" "$ROOT"/Sources/CEventJSON "$ROOT"/Fuzz/EventJSON; then
    echo "== building event-json (clang++ -fsanitize=fuzzer,address,undefined)"
    "$CLANGXX" "${CEJ_FLAGS[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      "${CEJ_SOURCES[@]}" -lsimdjson -o "$OUT/bin/event-json"
  fi
}

build_event_json_coverage() {
  # The same entry, uninstrumented for fuzzing, with clang's source coverage: replays a corpus once (-runs=0).
  if stale "$OUT/bin/event-json-coverage" "${CEJ_SOURCES[@]}" "$ROOT"/Sources/CEventJSON "$ROOT"/Fuzz/EventJSON; then
    echo "== building event-json-coverage (-fprofile-instr-generate -fcoverage-mapping)"
    "$CLANGXX" "${CEJ_FLAGS[@]}" -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping \
      "${CEJ_SOURCES[@]}" -lsimdjson -o "$OUT/bin/event-json-coverage"
  fi
}

build_swift() {
  # FuzzTargets and everything it depends on, Swift compiled with -sanitize=fuzzer,address (coverage counters +
  # ASan), in a scratch path of its own so the normal .build is never touched. C targets are left as they are:
  # the C++ one is fuzzed on its own (event-json), and instrumenting BoringSSL would only slow the build.
  echo "== building FuzzTargets (swift build --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address)"
  swift build --scratch-path "$OUT" --target FuzzTargets -Xswiftc -sanitize=fuzzer,address 2>&1 \
    | grep -E "error|warning: unre|Compiling FuzzTargets|Build of target" || true
  [ -f "$OUT/debug/Modules/FuzzTargets.swiftmodule" ] || { echo "error: FuzzTargets did not build" >&2; exit 1; }
  # The driver, linked with the objects of that build: only FuzzTargets' closure is ever built here, without the
  # build tools (*-tool.build) SwiftPM makes for plugins.
  local objects modulemaps
  mapfile -t objects < <(find "$OUT/debug/" -path '*.build/*.o' ! -path '*-tool.build/*' | sort)
  # Importing FuzzTargets loads the C modules below it: SwiftPM's generated module maps and our system libraries'.
  modulemaps=()
  while read -r map; do modulemaps+=(-Xcc "-fmodule-map-file=$map"); done \
    < <(find "$OUT/debug/" -path '*.build/module.modulemap'; find "$OUT/checkouts" -path '*/include/module.modulemap'
         ls "$ROOT"/Sources/C*/module.modulemap)
  # The driver uses `package` declarations, so it joins the package under the name SwiftPM gave it (from the
  # checkout's directory name), read from FuzzTargets' own compile command.
  local package
  package=$(grep -E 'args: \[.*"-module-name","FuzzTargets"' "$OUT/debug.yaml" | grep -oE -- '-package-name","[^"]+"' | head -1 | cut -d'"' -f3)
  [ -n "$package" ] || { echo "error: cannot find FuzzTargets' -package-name in $OUT/debug.yaml" >&2; exit 1; }
  if stale "$OUT/bin/apns-relay-fuzz" "$ROOT/Fuzz/Drivers/FuzzMain.swift" "${objects[@]}"; then
    echo "== linking apns-relay-fuzz (${#objects[@]} objects)"
    swiftc -parse-as-library -sanitize=fuzzer,address -g -use-ld=lld -package-name "$package" -I "$OUT/debug/Modules" "${modulemaps[@]}" \
      "$ROOT/Fuzz/Drivers/FuzzMain.swift" "${objects[@]}" -lsimdjson -lstdc++ -lm -o "$OUT/bin/apns-relay-fuzz"
  fi
}

needs_cxx=0
needs_swift=0
for t in $FUZZ_TARGETS; do
  if [ "$t" = event-json ]; then needs_cxx=1; else needs_swift=1; fi
done
if [ $needs_cxx = 1 ]; then build_event_json; build_event_json_coverage; fi
if [ $needs_swift = 1 ]; then build_swift; fi

export SWIFT_BACKTRACE=enable=no        # libFuzzer reports the crash and keeps the input
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}  # the targets keep one decoder/schema per process on purpose
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The files each Swift target is about (a regex over the paths libFuzzer prints).
declare -A SOURCES_OF=(
  [event-decoder]='Sources/Relay/Event/'
  [configuration]='Sources/RelayApp/(ConfigurationFile|ConfigurationSources|SettingsReader|RelayAppConfiguration)'
  [apns-answer]='Sources/APNsClient/Transport/Response(Head|Body)|Sources/APNsCore/(DeliveryDecision|APNsReason)'
)
summary=()
failed=0
for t in $FUZZ_TARGETS; do
  seeds=$ROOT/Fuzz/corpus/$t
  work=$OUT/corpus/$t
  crashes=$OUT/crashes/$t
  log=$OUT/logs/$t.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  if [ $t = event-json ]; then cmd=("$OUT/bin/event-json"); else cmd=(env APNS_RELAY_FUZZ_TARGET=$t "$OUT/bin/apns-relay-fuzz"); fi
  dict=()
  [ -f "$ROOT/Fuzz/dictionaries/$t.dict" ] && dict=(-dict="$ROOT/Fuzz/dictionaries/$t.dict")
  echo "== fuzzing $t for ${FUZZ_SECONDS} s (log: $log)"
  set +e
  "${cmd[@]}" "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
    -max_len=8192 -artifact_prefix="$crashes/" "$work" "$seeds" > "$log" 2>&1
  status=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
  line="$t: ${execs:-?} executions, ${rate:-?} exec/s, ${cov:-cov: ?}, corpus $(ls "$work" | wc -l) (committed before the run: $(ls "$seeds" | wc -l))"
  if [ $status != 0 ]; then
    failed=1
    line="$line — FAILED (exit $status): $(ls -t "$crashes" | head -1 | sed "s|^|$crashes/|")"
    grep -E 'ERROR|SUMMARY|Fatal error|fuzz target:|precondition|runtime error' "$log" | head -5
  elif [ $t = event-json ]; then
    # Line coverage of the C++ under test, replaying the committed corpus and this run's.
    rm -f "$OUT"/event-json-*.profraw
    LLVM_PROFILE_FILE="$OUT/event-json-%p.profraw" "$OUT/bin/event-json-coverage" -runs=0 "$work" "$seeds" > /dev/null 2>&1 || true
    "$LLVM_PROFDATA" merge -sparse "$OUT"/event-json-*.profraw -o "$OUT/event-json.profdata"
    "$LLVM_COV" report "$OUT/bin/event-json-coverage" -instr-profile="$OUT/event-json.profdata" \
      "$ROOT"/Sources/CEventJSON/*.cpp "$ROOT"/Sources/CEventJSON/*.h > "$OUT/logs/event-json-lines.txt"
    line="$line; lines of Sources/CEventJSON: $(awk '/^TOTAL/ { print $(NF-3) }' "$OUT/logs/event-json-lines.txt") (per file: .build-fuzz/logs/event-json-lines.txt)"
  elif [ -n "${SOURCES_OF[$t]:-}" ]; then
    # Swift: no second build with source coverage; libFuzzer's own per-function edge counts (-print_coverage) over
    # the functions written in the fuzzed files instead. Debug Swift has an edge to each overflow trap, never
    # taken, so 100 % is out of reach.
    "${cmd[@]}" -print_coverage=1 -runs=0 "$work" "$seeds" > "$OUT/logs/$t-coverage.txt" 2>&1 || true
    edges=$(grep -E '^(UN)?COVERED_FUNC: ' "$OUT/logs/$t-coverage.txt" | grep -E "${SOURCES_OF[$t]}" | grep -vE ':0$' \
      | awk '{ split($5, e, "/"); reached += e[1]; total += e[2]; functions++; if (e[1] > 0) entered++ }
             END { if (total) printf "%d/%d (%.1f%%), functions entered %d/%d", reached, total, 100 * reached / total, entered, functions }')
    line="$line; edges reached in the functions of ${SOURCES_OF[$t]}: ${edges:-?} (per function: .build-fuzz/logs/$t-coverage.txt)"
  fi
  summary+=("$line")
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ $status = 0 ]; then
    mkdir -p "$OUT/merged/$t" && rm -f "$OUT/merged/$t"/*
    # The fewest inputs that reach every edge and comparison reached (without hit-count buckets: -merge=1 alone
    # keeps about six times as many files for the same edges).
    "${cmd[@]}" -set_cover_merge=1 -use_counters=0 -max_len=8192 "$OUT/merged/$t" "$seeds" "$work" >> "$OUT/logs/$t-merge.log" 2>&1
    # Regression inputs (a bug's reproducer, named regression-*) stay whatever coverage they add.
    find "$seeds" -type f ! -name 'regression-*' -delete && cp "$OUT/merged/$t"/* "$seeds"/
    echo "merged into $seeds: $(ls "$seeds" | wc -l) inputs"
  fi
done

echo
echo "== fuzzing, ${FUZZ_SECONDS} s per target"
printf '%s\n' "${summary[@]}"
exit $failed

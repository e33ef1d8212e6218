# apns-relay — the two commands a new user needs are `make demo` and `make test`.
# Each installs what it needs (Debian packages, a Python venv for test tooling) when missing.

SHELL := /bin/bash
SWIFT ?= swift
VENV := .venv
PY := $(VENV)/bin/python

# Debian packages: build-time libraries, plus independent peers the tests drive (kcat, nghttp2 tools, tinyproxy),
# and bubblewrap, which starts the chart's pod as the kubelet would (read-only root, mounts, its user).
APT_BUILD := librdkafka-dev libnghttp2-dev libssl-dev pkg-config libsimdjson-dev libvalijson-dev nlohmann-json3-dev
APT_TEST := kcat nghttp2-client nghttp2-server python3-venv tinyproxy prometheus bubblewrap openssl
# The benchmarks also read the relay's /metrics (curl) and build an allocation counter (gcc).
APT_BENCH := curl gcc

.PHONY: all build release demo test test-swift test-python deps deps-test venv librdkafka-current bench faults soak fuzz image-check clean help

all: build

help:
	@echo "make demo         run the whole pipeline on an embedded mock Kafka cluster + mock APNs"
	@echo "make test         build and run every test (Swift, schemas, chart)"
	@echo "make bench        release benchmarks, each beside a floor measured in the same run"
	@echo "make soak         a day in production, compressed: SOAK_MINUTES (65) of traffic and faults, watched for leaks"
	@echo "make fuzz         libFuzzer (ASan, UBSan for C++): event JSON, configuration, APNs answers, FUZZ_SECONDS (60) each"
	@echo "make image-check  the Dockerfile's runtime stage, assembled without Docker, starts and pushes (root)"

# Installs missing Debian packages; explains itself when it cannot.
define apt_ensure
	@missing=""; for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if ! command -v apt-get >/dev/null; then echo "error: missing packages:$$missing, and apt-get is not available. Install them with your package manager." >&2; exit 1; fi; \
		if [ "$$(id -u)" != 0 ]; then SUDO=sudo; command -v sudo >/dev/null || { echo "error: missing packages:$$missing; run as root or install them: apt-get install$$missing" >&2; exit 1; }; fi; \
		echo "Installing Debian packages:$$missing"; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null || { echo "error: apt-get install$$missing failed" >&2; exit 1; }; \
	fi
endef

deps:
	$(call apt_ensure,$(APT_BUILD))

deps-test: deps
	$(call apt_ensure,$(APT_TEST))

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product apns-relay

# The demo shares the debug build with `make test` (a release build takes much longer on a small machine);
# after `make release` it brings that build up to date and uses it.
demo: deps
	@if [ -x .build/release/apns-relay ]; then \
	  $(SWIFT) build -c release --product apns-relay-sandbox && .build/release/apns-relay-sandbox demo; \
	else \
	  $(SWIFT) build --product apns-relay-sandbox && .build/debug/apns-relay-sandbox demo; \
	fi

venv: deps-test
	@test -x $(PY) || python3 -m venv $(VENV)
	@{ $(PY) -c 'import jsonschema, helm_python, kubernetes_validate, yaml, matplotlib, confluent_kafka' 2>/dev/null && test -x $(VENV)/bin/noida-db; } || $(VENV)/bin/pip install -q -r Tests/requirements.txt

test: deps-test venv test-swift test-python

# The suite's output is long and CI keeps only its tail: when it fails, the failures are repeated last.
# A crash prints the crashed thread only (a backtrace of every thread of a test process with hundreds of them
# once ran past CI's time limit), and the run is stopped after TEST_TIMEOUT seconds so that a hang still ends
# with its evidence printed.
TEST_TIMEOUT ?= 2700
# The suites on noida-db run after the rest, alone: its consumers spin a core each (it answers an empty fetch at
# once, whatever fetch.wait.max.ms says), and beside the parallel suite they starved other tests past their
# deadlines (a CI run saw them take 46-65 s instead of 7 s, and two unrelated tests time out).
NOIDA_SUITES := SecondBrokerTests|TransactionTests|ExactlyOnceTests|DashboardEndToEndTests
# Every suite that talks to a broker runs twice: on Debian 12's librdkafka (2.0.2, what the build links) and on a
# current one, the self-contained build the image ships (Tests/image/librdkafka.txt), loaded through
# LD_LIBRARY_PATH from the venv's confluent-kafka wheel (Tests/requirements.txt, the same version).
KAFKA_SUITES := KafkaTests|RelayTests
LIBRDKAFKA_CURRENT := $(CURDIR)/.build/librdkafka-current
librdkafka-current: venv
	@lib=$$($(PY) -c 'import confluent_kafka, glob, os; d = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs"); print(sorted(glob.glob(os.path.join(d, "librdkafka-*.so.1")))[0])') \
	  && mkdir -p $(LIBRDKAFKA_CURRENT) && ln -sf "$$lib" $(LIBRDKAFKA_CURRENT)/librdkafka.so.1 \
	  && $(PY) -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])' > $(LIBRDKAFKA_CURRENT)/version
test-swift: librdkafka-current
	$(SWIFT) build --build-tests
	@mkdir -p .build; set -o pipefail; \
	export SWIFT_BACKTRACE=enable=yes,interactive=no,threads=crashed,registers=none,images=none; \
	current=$$(cat $(LIBRDKAFKA_CURRENT)/version); \
	{ timeout --kill-after=60 $(TEST_TIMEOUT) $(SWIFT) test --skip-build --parallel --skip '$(NOIDA_SUITES)' && \
	  timeout --kill-after=60 600 $(SWIFT) test --skip-build --filter '$(NOIDA_SUITES)' && \
	  echo "== the Kafka suites again, on librdkafka $$current ($(LIBRDKAFKA_CURRENT))" && \
	  LD_LIBRARY_PATH=$(LIBRDKAFKA_CURRENT) KAFKA_TESTS_LIBRDKAFKA_VERSION=$$current \
	    timeout --kill-after=60 $(TEST_TIMEOUT) $(SWIFT) test --skip-build --parallel --filter '$(KAFKA_SUITES)' --skip '$(NOIDA_SUITES)' && \
	  LD_LIBRARY_PATH=$(LIBRDKAFKA_CURRENT) KAFKA_TESTS_LIBRDKAFKA_VERSION=$$current \
	    timeout --kill-after=60 600 $(SWIFT) test --skip-build --filter '$(NOIDA_SUITES)'; } 2>&1 | tee .build/test-swift.log; status=$$?; \
	if [ $$status != 0 ]; then echo; echo "== make test-swift failed (exit $$status); the failures, from .build/test-swift.log:"; \
		case $$status in 124|137) echo "the suite did not finish within $(TEST_TIMEOUT) s";; esac; \
		grep -E '✘|error:|Fatal error|Crash|signal [0-9]+' .build/test-swift.log | cut -c1-600 | tail -n 40; \
		grep -A 40 -E 'Program crashed' .build/test-swift.log | cut -c1-300 | head -n 60; fi; \
	exit $$status

test-python: venv
	@for t in Tests/schema/check_*.py Tests/build/check_*.py Tests/chart/test_*.py Tests/peers/test_*.py Tests/pod/test_*.py; do [ -f "$$t" ] || continue; echo "== $$t"; $(PY) $$t || exit 1; done

# Every Benchmarks/*.sh, then one table: the rows end-to-end.sh writes to $$BENCH_TABLE, plus the summary
# lines of the other scripts (consume path vs kcat, mock APNs vs nghttpd). Logs stay in bench-results/.
bench: deps-test venv
	$(call apt_ensure,$(APT_BENCH))
	@mkdir -p bench-results; : > bench-results/table.txt
	@for b in Benchmarks/*.sh; do [ -f "$$b" ] || continue; echo "== $$b"; \
		BENCH_TABLE=$(CURDIR)/bench-results/table.txt bash $$b 2>&1 | tee bench-results/$$(basename $$b .sh).log; \
		[ "$${PIPESTATUS[0]}" = 0 ] || exit 1; done
	@grep -hE '^(KafkaConsumer|kcat)[^:]*: [0-9]+ records' bench-results/kafka-consume.log 2>/dev/null \
		| sed -E 's/^([^:]*): .* = ([0-9]+) records\/s, CPU .* = ([0-9.]+) µs\/record/kafka consume, \1|\2 rec\/s, \3 µs\/rec||/' >> bench-results/table.txt || true
	@grep -hE '^(mock|nio-floor|nghttpd) +[0-9]+ req/s' bench-results/mock-apns.log 2>/dev/null \
		| awk '{ printf "mock APNs server (h2load, median), %s|%s req/s, %s us/req||\n", $$1, $$2, $$6 }' >> bench-results/table.txt || true
	@echo; echo "== apns-relay benchmarks, one table ($$(nproc) cores; floors measured in the same run)"
	@{ echo "figure|relay|floor (same run)|relay/floor"; cat bench-results/table.txt; } | column -t -s'|'

# Fault-injection runs at full size (make test runs them reduced): kills, broker outages, APNs faults,
# rebalance churn, input fuzzing; then the exactly-once runs on noida-db. Prints one line per run and the totals.
faults: deps-test
	$(SWIFT) build --build-tests
	@mkdir -p bench-results
	@APNS_RELAY_FAULTS=full $(SWIFT) test --skip-build --filter 'RelayTests.FaultTests' 2>&1 | tee bench-results/faults.log; \
		status=$${PIPESTATUS[0]}; echo; grep -E '^fault [^:]+: events' bench-results/faults.log; \
		grep -E '^fault [^:]+: events' bench-results/faults.log \
		| sed -E 's/.*events ([0-9]+), kills ([0-9]+), faults ([0-9]+), lost ([0-9]+), duplicates ([0-9]+).*/\1 \2 \3 \4 \5/' \
		| awk '{ e += $$1; k += $$2; f += $$3; l += $$4; d += $$5; n++ } END { printf "faults total: %d runs, events %d, kills %d, faults %d, lost %d, duplicates %d\n", n, e, k, f, l, d }'; \
		first=$$status; \
		APNS_RELAY_FAULTS=full $(SWIFT) test --skip-build --filter 'RelayTests.ExactlyOnceTests' 2>&1 | tee bench-results/faults-exactly-once.log; \
		status=$${PIPESTATUS[0]}; echo; echo "with kafka.exactlyOnce (noida-db; read_committed duplicates, target 0, beside the at-least-once figures above):"; \
		grep -E '^(exactly once|zombie)' bench-results/faults-exactly-once.log; [ $$first = 0 ] && exit $$status; exit $$first

# A day in production, compressed: the release relay for SOAK_MINUTES (default 65: two provider-token rotations)
# between the mock cluster and the mock APNs, a paced production-like stream and a fault schedule, watched every
# 10 s. Writes bench-results/soak/ (summary.txt, samples.csv, faults.csv, soak.png, the relays' logs).
# `make test` runs a 150-second form of it.
SOAK_MINUTES ?= 65
soak: deps-test venv
	$(SWIFT) build -c release --product apns-relay
	$(SWIFT) build --build-tests
	@mkdir -p bench-results/soak; set -o pipefail; \
	APNS_RELAY_BINARY=$(CURDIR)/.build/release/apns-relay APNS_RELAY_SOAK_MINUTES=$(SOAK_MINUTES) \
	APNS_RELAY_SOAK_OUTPUT=$(CURDIR)/bench-results/soak \
	$(SWIFT) test --skip-build --filter 'RelayTests.SoakTests' 2>&1 | tee bench-results/soak/test.log

# Fuzz targets (Fuzz/README.md) built with the toolchain's clang under .build-fuzz/, FUZZ_SECONDS each; one line per
# target (executions, exec/s, cov/ft, corpus; line coverage for the C++). A crash fails it and leaves the input in
# .build-fuzz/crashes/<target>/. FUZZ_TARGETS picks some; FUZZ_MERGE=1 merges the finds into Fuzz/corpus/, minimised.
# `make test` replays Fuzz/corpus/ (FuzzCorpusTests).
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash Fuzz/fuzz.sh

clean:
	rm -rf .build .build-* $(VENV)

# The Dockerfile's default image (the relay only), checked without a Docker engine (Tests/image/check.sh says how):
# needs root, network the first time, and a release build of the relay and its test peers in .build-image/
# (measured on 2 cores beside other builds: 10-15 minutes the first time; about 2 minutes after a change, seconds
# without one).
image-check: deps venv
	@$(PY) -c 'import docker' 2>/dev/null || $(VENV)/bin/pip install -q -r Tests/image/requirements.txt
	PYTHON=$(CURDIR)/$(PY) bash Tests/image/check.sh

# syntax=docker/dockerfile:1
# apns-relay container image: a Swift build stage and a slim Debian runtime that holds the relay and nothing else.
#
#   docker build -t apns-relay:0.3.0 .          the relay (the last stage, `runtime`; the tag: `apns-relay --version`,
#                                               the chart's appVersion)
#   docker run --rm apns-relay:0.3.0 --version
#   docker build --target sandbox -t apns-relay-sandbox:0.3.0 .
#                                               the relay beside the mock APNs (apns-mock) and the mock Kafka cluster
#                                               (apns-relay-sandbox): for demos and tests, never for production
#
# Base images are pinned by digest: a tag moves when it is rebuilt, a digest names one image, so the same commit builds
# on the same toolchain and the same Debian files everywhere. Each digest is the tag's multi-platform index (amd64 and
# arm64 pull through it); the tag beside it is what it was read from. To move to the tag's current image, read its
# digest and replace it here:
#   docker buildx imagetools inspect swift:6.3-bookworm      (the "Digest:" line; or `crane digest swift:6.3-bookworm`)
#   docker buildx imagetools inspect debian:bookworm-slim
# or let Renovate or Dependabot (docker ecosystem) propose it: both read these ARG lines and update the digest.
# Then `make image-check`, which builds the runtime stage's file set from Debian bookworm without Docker.
#
# The toolchain: Swift 6.1+ is what Package.swift asks for, but swift-configuration's manifest needs tools 6.2, and
# the project is developed and tested with 6.3 (this digest: Swift 6.3.3 on Debian bookworm). Override with
# --build-arg SWIFT_IMAGE=… (a bookworm image, so the -dev libraries match the runtime's).
ARG SWIFT_IMAGE=swift:6.3-bookworm@sha256:7060a792f4cd9eaa0d00826d941cec00ab8d252d33b8b28bc8e105f51f2dba73
# debian:bookworm-slim as built on 2026-10-05 (debian:bookworm-20261005-slim).
ARG RUNTIME_IMAGE=debian:bookworm-slim@sha256:7c7b2c966bc9ee8cedfeef67e0e279108992c77681fa595db4a9d65c06ccc587

# ---------------------------------------------------------------------------------------------------------------
FROM ${SWIFT_IMAGE} AS build

# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka-dev libnghttp2-dev libssl-dev libsimdjson-dev libvalijson-dev nlohmann-json3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Package.resolved is the record of which package versions the tests ran with; the build uses exactly those
# (--force-resolved-versions fails when the file is stale instead of resolving anew; `make test` checks it against
# Package.swift: Tests/build/check_resolved.py). Its revisions are those of the package repositories it was resolved
# against (README, "Container image").
COPY Package.swift Package.resolved ./
# Package.swift names every target (tests, benchmarks and fuzz targets too), so all their folders must be present.
COPY Sources ./Sources
COPY Schemas ./Schemas
COPY Tests ./Tests
COPY Benchmarks ./Benchmarks
COPY Fuzz ./Fuzz
# Only the relay: the runtime image holds nothing else (the sandbox stage builds the mocks for itself).
RUN swift build -c release --force-resolved-versions --static-swift-stdlib --product apns-relay \
 && install -D -m 0755 "$(swift build -c release --force-resolved-versions --show-bin-path)/apns-relay" /out/apns-relay \
 && strip /out/apns-relay

# ---------------------------------------------------------------------------------------------------------------
# The mocks, for the sandbox target only (BuildKit builds a stage only when the target asked for needs it).
FROM build AS build-sandbox
RUN swift build -c release --force-resolved-versions --static-swift-stdlib --product apns-mock \
 && swift build -c release --force-resolved-versions --static-swift-stdlib --product apns-relay-sandbox \
 && bin="$(swift build -c release --force-resolved-versions --show-bin-path)" \
 && install -m 0755 "$bin/apns-mock" "$bin/apns-relay-sandbox" /out/ \
 && strip /out/apns-mock /out/apns-relay-sandbox

# ---------------------------------------------------------------------------------------------------------------
# A current librdkafka. Debian 12 packages 2.0.2 (January 2023: no OIDC, cooperative-sticky aborting on shutdown,
# three years of consumer-group and transaction fixes missing), and Debian 13's 2.8 needs a Debian 13 base, whose
# sonames (simdjson) the bookworm build stage does not link. This is the self-contained build Confluent ships in
# its Python client's wheel: OpenSSL, Cyrus SASL, libcurl (OIDC), zstd and lz4 linked in, only rd_kafka_*
# symbols exported (nothing to collide with the system OpenSSL that the APNs side uses), glibc 2.28 or later.
# Pinned by hash (Tests/image/librdkafka.txt); `make test` runs the Kafka suites on the same build.
FROM ${RUNTIME_IMAGE} AS librdkafka
ARG TARGETARCH
COPY Tests/image/librdkafka.txt /tmp/librdkafka.txt
# hadolint ignore=DL3008,DL3013
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip patchelf \
 && rm -rf /var/lib/apt/lists/* \
 && case "${TARGETARCH:-amd64}" in \
      amd64) platform=manylinux_2_28_x86_64 ;; \
      arm64) platform=manylinux_2_28_aarch64 ;; \
      *) echo "no librdkafka wheel for ${TARGETARCH}" >&2; exit 1 ;; \
    esac \
 && pip download --no-deps --only-binary=:all: --platform "$platform" --python-version 3.11 --implementation cp \
      --require-hashes -r /tmp/librdkafka.txt -d /tmp/wheel \
 && python3 -c 'import glob, zipfile; w = zipfile.ZipFile(glob.glob("/tmp/wheel/*.whl")[0]); n = [x for x in w.namelist() if x.startswith("confluent_kafka.libs/librdkafka-")]; assert len(n) == 1, n; open("/tmp/librdkafka.so.1", "wb").write(w.read(n[0]))' \
    # The wheel names its copy librdkafka-<hash>.so.1; the loader's cache must know it by the soname the relay asks for.
 && patchelf --set-soname librdkafka.so.1 /tmp/librdkafka.so.1 \
 && install -D -m 0644 /tmp/librdkafka.so.1 /out/librdkafka.so.1

# ---------------------------------------------------------------------------------------------------------------
# What both images run on: the shared libraries the binaries link (the Swift runtime and Foundation are static),
# certificates, time zones, and the non-root user.
FROM ${RUNTIME_IMAGE} AS runtime-base
# The relay asks for the soname librdkafka.so.1; /usr/local/lib is on the loader's path (ldconfig below).
COPY --from=librdkafka /out/librdkafka.so.1 /usr/local/lib/

# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libnghttp2-14 libssl3 libsimdjson14 libstdc++6 zlib1g ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && ldconfig \
 && groupadd --system --gid 65532 apns-relay \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin apns-relay \
 && mkdir -p /etc/apns-relay

# ---------------------------------------------------------------------------------------------------------------
# docker build --target sandbox: `apns-relay-sandbox demo`, or its mock Kafka cluster and apns-mock as peers of a relay.
FROM runtime-base AS sandbox
COPY --from=build /out/apns-relay /usr/local/bin/
COPY --from=build-sandbox /out/apns-mock /out/apns-relay-sandbox /usr/local/bin/
LABEL org.opencontainers.image.title="apns-relay-sandbox" \
      org.opencontainers.image.description="apns-relay with a mock Kafka cluster and a mock APNs, for demos and tests"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/apns-relay-sandbox"]
CMD ["demo"]

# ---------------------------------------------------------------------------------------------------------------
# The default target (the last stage): the relay only; no mock is in this image or linked into its binary.
FROM runtime-base AS runtime
COPY --from=build /out/apns-relay /usr/local/bin/
LABEL org.opencontainers.image.title="apns-relay" \
      org.opencontainers.image.description="Kafka → JSON Schema validation → APNs (HTTP/2) → Kafka results"
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# Admin endpoint: /metrics, /healthz, /readyz.
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/apns-relay"]
CMD ["run", "--config", "/etc/apns-relay/relay.yaml"]

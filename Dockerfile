# syntax=docker/dockerfile:1
# apns-relay container image: a Swift build stage and a slim Debian runtime.
#
#   docker build -t apns-relay:0.3.0 .          (the tag: `apns-relay --version`, the chart's appVersion)
#   docker run --rm apns-relay:0.3.0 --version
#
# The toolchain: Swift 6.1+ is what Package.swift asks for, but swift-configuration's manifest needs tools 6.2,
# and the project is developed and tested with 6.3. Override with --build-arg SWIFT_IMAGE=… (a bookworm image,
# so the -dev libraries match the runtime's).
ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------------------------------------------
FROM ${SWIFT_IMAGE} AS build

# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka-dev libnghttp2-dev libssl-dev libsimdjson-dev libvalijson-dev nlohmann-json3-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Package.swift names every target (tests and benchmarks too), so all their folders must be present.
COPY Package.swift Package.resolve[d] ./
COPY Sources ./Sources
COPY Schemas ./Schemas
COPY Tests ./Tests
COPY Benchmarks ./Benchmarks
RUN swift build -c release --static-swift-stdlib --product apns-relay \
 && swift build -c release --static-swift-stdlib --product apns-mock \
 && swift build -c release --static-swift-stdlib --product apns-relay-sandbox \
 && mkdir -p /out \
 && cp "$(swift build -c release --show-bin-path)/apns-relay" "$(swift build -c release --show-bin-path)/apns-mock" "$(swift build -c release --show-bin-path)/apns-relay-sandbox" /out/ \
 && if command -v strip >/dev/null; then strip /out/apns-relay /out/apns-mock /out/apns-relay-sandbox; fi

# ---------------------------------------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE} AS runtime

# Shared libraries the binaries link (the Swift runtime and Foundation are static).
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      librdkafka1 libnghttp2-14 libssl3 libsimdjson14 libstdc++6 zlib1g ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 apns-relay \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin apns-relay \
 && mkdir -p /etc/apns-relay

COPY --from=build /out/apns-relay /out/apns-mock /out/apns-relay-sandbox /usr/local/bin/

LABEL org.opencontainers.image.title="apns-relay" \
      org.opencontainers.image.description="Kafka → JSON Schema validation → APNs (HTTP/2) → Kafka results"

# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# Admin endpoint: /metrics, /healthz, /readyz.
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/apns-relay"]
CMD ["run", "--config", "/etc/apns-relay/relay.yaml"]

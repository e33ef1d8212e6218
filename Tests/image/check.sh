#!/usr/bin/env bash
# make image-check: proves the Dockerfile's runtime stage would start, without a Docker engine.
#
# It assembles the runtime image's file set the way the Dockerfile does — a Debian bookworm minbase root
# (debootstrap, standing in for debian:bookworm-slim) with the runtime packages the Dockerfile installs, its
# non-root user, and apns-relay and apns-mock built as the build stage builds them (release, static Swift
# standard library, stripped) — then runs, inside it (chroot) as that user: `apns-relay --version`, a sandbox
# (`apns-relay-sandbox mock-kafka` and `apns-mock`), and `apns-relay check` and `send` against it.
#
# Needs root (debootstrap and chroot), network access to deb.debian.org the first time (the root file system
# is kept in .build-image/ and reused while the Dockerfile's package list is unchanged), and a release build
# (measured on 2 cores: 5–6 minutes the first time, about a minute after). Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."

WORK=$PWD/.build-image
ROOTFS=$WORK/rootfs
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
say() { printf '\n== %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
  echo "error: make image-check needs root (debootstrap and chroot); run it with sudo" >&2
  exit 1
fi

# What the Dockerfile's runtime stage installs and which user it runs as: read from the Dockerfile itself,
# so this check cannot drift from it.
RUNTIME=$(sed -n '/^FROM .* AS runtime/,$p' Dockerfile)
PACKAGES=$(printf '%s\n' "$RUNTIME" | sed -n '/--no-install-recommends/{n;p;q}' | tr -d '\\' | xargs)
ACCOUNT=$(printf '%s\n' "$RUNTIME" | grep -E '^ *&& (groupadd|useradd|mkdir)' | sed -E 's/^ *&& //; s/ *\\$//')
USERSPEC=$(printf '%s\n' "$RUNTIME" | sed -n 's/^USER //p')
[ -n "$PACKAGES" ] && [ -n "$ACCOUNT" ] && [ -n "$USERSPEC" ] || { echo "error: cannot read the runtime stage from Dockerfile" >&2; exit 1; }
echo "runtime packages: $PACKAGES"
echo "user: $USERSPEC"

STAMP="bookworm minbase $PACKAGES"
if [ ! -f "$WORK/rootfs.stamp" ] || [ "$(cat "$WORK/rootfs.stamp")" != "$STAMP" ]; then
  say "Debian bookworm root with the runtime packages (debootstrap; a few minutes, once)"
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
  rm -rf "$ROOTFS" "$WORK/rootfs.stamp"
  mkdir -p "$WORK"
  debootstrap --variant=minbase --include="$(echo "$PACKAGES" | tr ' ' ',')" bookworm "$ROOTFS" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; echo "error: debootstrap failed (log: $WORK/debootstrap.log)" >&2; exit 1; }
  chroot "$ROOTFS" /bin/sh -c "$(printf '%s\n' "$ACCOUNT" | paste -sd';')"
  echo "$STAMP" > "$WORK/rootfs.stamp"
fi

say "apns-relay and apns-mock as the build stage builds them (release, static Swift stdlib, stripped)"
swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --product apns-relay
swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --product apns-mock
swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --product apns-relay-sandbox
BIN=$(swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --show-bin-path)
install -m 0755 "$BIN/apns-relay" "$BIN/apns-mock" "$BIN/apns-relay-sandbox" "$ROOTFS/usr/local/bin/"
strip "$ROOTFS/usr/local/bin/apns-relay" "$ROOTFS/usr/local/bin/apns-mock" "$ROOTFS/usr/local/bin/apns-relay-sandbox"

# Only the packages above may satisfy the binaries: nothing from this machine's libraries.
missing=$(chroot "$ROOTFS" /bin/sh -c 'for b in /usr/local/bin/apns-relay /usr/local/bin/apns-mock /usr/local/bin/apns-relay-sandbox; do ldd "$b"; done' | grep 'not found' || true)
[ -z "$missing" ] || { echo "error: libraries the runtime stage lacks:" >&2; echo "$missing" >&2; exit 1; }

SANDBOX=/tmp/image-check
cleanup() {
  [ -n "${KAFKA_PID:-}" ] && kill "$KAFKA_PID" 2>/dev/null || true
  [ -n "${MOCK_PID:-}" ] && kill "$MOCK_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  umount "$ROOTFS/proc" 2>/dev/null || true
  umount "$ROOTFS/dev" 2>/dev/null || true
}
trap cleanup EXIT
mount -t proc proc "$ROOTFS/proc"
mount --bind /dev "$ROOTFS/dev"
# A container runtime provides these at start (the image has none); so do we.
cp /etc/hosts /etc/resolv.conf "$ROOTFS/etc/"
in_image() { chroot --userspec="$USERSPEC" "$ROOTFS" "$@"; }
# In the background, `exec` makes $! the program's own pid (chroot execs it), so cleanup can stop it.
in_image_bg() { exec chroot --userspec="$USERSPEC" "$ROOTFS" "$@"; }

say "apns-relay --version, as user $USERSPEC"
VERSION=$(in_image /usr/local/bin/apns-relay --version)
CHART=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' helm/apns-relay/Chart.yaml)
echo "$VERSION (chart appVersion $CHART)"
[ "$VERSION" = "$CHART" ] || { echo "error: the binary says $VERSION, the chart's appVersion is $CHART" >&2; exit 1; }
in_image /usr/local/bin/apns-mock --version

say "a sandbox inside the image: mock Kafka and mock APNs"
rm -rf "$ROOTFS$SANDBOX"
mkdir -p "$ROOTFS$SANDBOX"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$ROOTFS$SANDBOX/AuthKey.p8" 2>/dev/null
chown -R "$USERSPEC" "$ROOTFS$SANDBOX"
chmod 0700 "$ROOTFS$SANDBOX"
in_image_bg /usr/local/bin/apns-relay-sandbox mock-kafka --brokers 1 --topic apns-notifications:3 --topic apns-results:3 \
  --topic apns-removed-tokens:3 --topic apns-removed-channels:3 --topic apns-dead-letters:3 > "$WORK/kafka.txt" 2> "$WORK/kafka.log" &
KAFKA_PID=$!
in_image_bg /usr/local/bin/apns-mock --port 0 --tls-dir "$SANDBOX/mock-tls" --key-id ABC123DEFG --team-id DEF123GHIJ \
  --public-key "$SANDBOX/AuthKey.p8" > "$WORK/apns.txt" 2> "$WORK/apns.log" &
MOCK_PID=$!
for _ in $(seq 1 150); do [ -s "$WORK/kafka.txt" ] && [ -s "$WORK/apns.txt" ] && break; sleep 0.2; done
[ -s "$WORK/kafka.txt" ] && [ -s "$WORK/apns.txt" ] || { cat "$WORK/kafka.log" "$WORK/apns.log" >&2; echo "error: the sandbox did not start" >&2; exit 1; }
BOOTSTRAP=$(head -1 "$WORK/kafka.txt")
APNS_PORT=$(sed -n 's/.*port=\([0-9]*\).*/\1/p' "$WORK/apns.txt")
cat > "$ROOTFS$SANDBOX/relay.yaml" <<YAML
kafka:
  bootstrapServers: $BOOTSTRAP
apns:
  token: { keyId: ABC123DEFG, teamId: DEF123GHIJ, privateKeyFile: $SANDBOX/AuthKey.p8 }
  topics: [com.example.app]
  production: { host: localhost, port: $APNS_PORT }
  development: { host: localhost, port: $APNS_PORT }
  caFile: $SANDBOX/mock-tls/ca.pem
admin: { port: 0 }
YAML
chown "$USERSPEC" "$ROOTFS$SANDBOX/relay.yaml"

say "apns-relay check, inside the image"
in_image /usr/local/bin/apns-relay check --config "$SANDBOX/relay.yaml"
say "apns-relay send, inside the image"
in_image /usr/local/bin/apns-relay send --config "$SANDBOX/relay.yaml" \
  --device-token 5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e --topic com.example.app

say "image-check passed: the runtime stage starts, reaches Kafka and APNs, and pushes"

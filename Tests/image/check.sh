#!/usr/bin/env bash
# make image-check: proves the Dockerfile's default image (its last stage, `runtime`) would start and push, without a
# Docker engine.
#
# It assembles that image's file set the way the Dockerfile does: a Debian bookworm minbase root (debootstrap,
# standing in for debian:bookworm-slim) with the packages and the non-root user of the `runtime-base` stage, and
# what the `runtime` stage copies, built as the build stage builds it (release, the versions in Package.resolved,
# static Swift standard library, stripped). Then:
#   - the build stage's files (the context after .dockerignore, then its COPY lines) load as a package, so
#     `docker build` has every folder Package.swift names;
#   - every library the binaries link is in the root; the relay links no mock, and no apns-mock or apns-relay-sandbox
#     is in the root;
#   - inside the root (chroot), as the image's user: `apns-relay --version` is the chart's appVersion, and `apns-relay
#     check` and `send` reach a mock Kafka cluster and a mock APNs. Those two are test peers, not part of the image:
#     they run on the host, built from the same scratch path;
#   - it lists the root's packages with their versions, and the relay's size.
#
# debootstrap is not the pinned debian:bookworm-slim digest: the root holds today's bookworm packages from the mirror
# (as the Dockerfile's `apt-get install` does at build time), and minbase keeps documentation the slim image drops.
# What it proves is that the package list, the user and the binaries fit together on bookworm.
#
# Needs root (debootstrap and chroot), network access to deb.debian.org the first time (the root file system is kept
# in .build-image/ and reused while the Dockerfile's package list and user are unchanged), docker-py (the Python
# `docker` package: its .dockerignore matcher), and a release build of the three products (measured on 2 cores
# beside other builds: 10-15 minutes the first time; after, about 2 minutes with a change or a new root, seconds
# without). Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."

WORK=$PWD/.build-image
ROOTFS=$WORK/rootfs
SCRATCH=$WORK/build
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SWIFT=${SWIFT:-swift}
# The build stage's flags; --force-resolved-versions builds what Package.resolved pins or fails.
BUILD_FLAGS=(-c release --force-resolved-versions --static-swift-stdlib --scratch-path "$SCRATCH")
# Binaries that exist for tests and demos only: never in the runtime image.
TEST_ONLY=(apns-mock apns-relay-sandbox)
say() { printf '\n== %s\n' "$*"; }
fail() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "make image-check needs root (debootstrap and chroot); run it with sudo"

# The Dockerfile's stages, read from the Dockerfile itself so that this check cannot drift from it.
stage() { awk -v name="$1" '/^FROM /{on = ($NF == name)} on' Dockerfile; }
BUILD_STAGE=$(stage build)
BASE_STAGE=$(stage runtime-base)
RUNTIME_STAGE=$(stage runtime)
[ "$(grep '^FROM ' Dockerfile | tail -1 | awk '{print $NF}')" = runtime ] \
  || fail "the Dockerfile's last stage (what \`docker build .\` produces) is not \`runtime\`"
PACKAGES=$(printf '%s\n' "$BASE_STAGE" | sed -n '/--no-install-recommends/{n;p;q}' | tr -d '\\' | xargs)
ACCOUNT=$(printf '%s\n' "$BASE_STAGE" | grep -E '^ *&& (groupadd|useradd|mkdir)' | sed -E 's/^ *&& //; s/ *\\$//')
USERSPEC=$(printf '%s\n' "$RUNTIME_STAGE" | sed -n 's/^USER //p')
# What the runtime stage copies out of the build stage: /out/<product> names the SwiftPM product.
PRODUCTS=$(printf '%s\n' "$RUNTIME_STAGE" | sed -n 's/^COPY --from=build //p' | tr ' ' '\n' | sed -n 's#^/out/##p' | xargs)
[ -n "$PACKAGES" ] && [ -n "$ACCOUNT" ] && [ -n "$USERSPEC" ] && [ -n "$PRODUCTS" ] \
  || fail "cannot read the runtime-base and runtime stages from Dockerfile"
echo "runtime packages: $PACKAGES"
echo "user: $USERSPEC"
echo "copied into the runtime stage: $PRODUCTS"
for product in $PRODUCTS; do
  for test_only in "${TEST_ONLY[@]}"; do
    [ "$product" != "$test_only" ] || fail "the runtime stage copies $product, which exists for tests only"
  done
done

say "the build stage's files: the context after .dockerignore, then its COPY lines"
CONTEXT=$WORK/context
rm -rf "$CONTEXT"
mkdir -p "$CONTEXT"
printf '%s\n' "$BUILD_STAGE" > "$WORK/build-stage"
"${PYTHON:-python3}" - "$CONTEXT" "$WORK/build-stage" <<'PY' || exit 1
import pathlib, shlex, shutil, sys
try:
    from docker.utils.build import exclude_paths  # docker-py: the rules `docker build` applies to .dockerignore
except ImportError:
    sys.exit("error: the build context check needs docker-py: pip install -r Tests/image/requirements.txt")
root, out = pathlib.Path("."), pathlib.Path(sys.argv[1])
patterns = [line.strip() for line in open(".dockerignore") if line.strip() and not line.lstrip().startswith("#")]
context = exclude_paths(str(root), patterns)
copied = 0
for line in open(sys.argv[2]):
    words = shlex.split(line)
    if not words or words[0] != "COPY" or any(w.startswith("--") for w in words[1:]):
        continue
    *sources, destination = words[1:]
    for source in (s.rstrip("/") for s in sources):
        if (root / source).is_file() and source in context:
            # A file: into the folder a trailing slash names, else to that name.
            pairs = [(source, out / destination / pathlib.Path(source).name if destination.endswith("/")
                      else out / destination)]
        else:
            # A folder: its contents, into the destination.
            pairs = [(path, out / destination / pathlib.Path(path).relative_to(source))
                     for path in sorted(context) if path.startswith(source + "/") and (root / path).is_file()]
        if not pairs:
            sys.exit(f"error: COPY {source}: not in the build context (missing, or excluded by .dockerignore)")
        for path, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / path, target)
            copied += 1
print(f"{copied} files in the build stage's /src")
PY
"$SWIFT" package --package-path "$CONTEXT" --scratch-path "$WORK/context-build" describe --type json > "$WORK/context.json" \
  2> "$WORK/context.log" || { cat "$WORK/context.log" >&2; fail "the build stage's files are not a package SwiftPM loads"; }
[ -f "$CONTEXT/Package.resolved" ] || fail "the build stage has no Package.resolved"
echo "Package.swift loads there, with Package.resolved"

STAMP="bookworm minbase $PACKAGES $ACCOUNT"
if [ ! -f "$WORK/rootfs.stamp" ] || [ "$(cat "$WORK/rootfs.stamp")" != "$STAMP" ]; then
  say "Debian bookworm root with the runtime packages (debootstrap; a few minutes, once)"
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
  rm -rf "$ROOTFS" "$WORK/rootfs.stamp"
  mkdir -p "$WORK"
  debootstrap --variant=minbase --include="$(echo "$PACKAGES" | tr ' ' ',')" bookworm "$ROOTFS" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; fail "debootstrap failed (log: $WORK/debootstrap.log)"; }
  chroot "$ROOTFS" /bin/sh -c "$(printf '%s\n' "$ACCOUNT" | paste -sd';')"
  echo "$STAMP" > "$WORK/rootfs.stamp"
fi

say "the runtime stage's binaries ($PRODUCTS) and the test peers (${TEST_ONLY[*]}), as the build stages build them"
for product in $PRODUCTS "${TEST_ONLY[@]}"; do
  "$SWIFT" build "${BUILD_FLAGS[@]}" --product "$product"
done
BIN=$("$SWIFT" build "${BUILD_FLAGS[@]}" --show-bin-path)
# A root left by an earlier run may hold binaries the Dockerfile no longer copies.
rm -f "$ROOTFS"/usr/local/bin/*
for product in $PRODUCTS; do
  install -m 0755 "$BIN/$product" "$ROOTFS/usr/local/bin/"
  strip "$ROOTFS/usr/local/bin/$product"
done

say "the runtime's librdkafka, fetched as the Dockerfile's librdkafka stage fetches it (by hash)"
WHEEL_PINS=$(stage librdkafka | sed -n 's/^COPY \(Tests\/[^ ]*\) .*/\1/p')
[ -n "$WHEEL_PINS" ] && [ -f "$WHEEL_PINS" ] || fail "cannot read the librdkafka stage's pinned wheel from Dockerfile"
WHEELS=$WORK/librdkafka-wheel
rm -rf "$WHEELS"
"${PYTHON:-python3}" -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
  --implementation cp --require-hashes -r "$WHEEL_PINS" -d "$WHEELS" || fail "pip download of $WHEEL_PINS failed"
"${PYTHON:-python3}" - "$WHEELS" "$ROOTFS/usr/local/lib/librdkafka.so.1" <<'PY' || exit 1
import glob, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
names = [n for n in wheel.namelist() if n.startswith("confluent_kafka.libs/librdkafka-")]
if len(names) != 1:
    sys.exit(f"error: the wheel holds {names}, not one librdkafka")
open(sys.argv[2], "wb").write(wheel.read(names[0]))
PY
# As the stage does: the wheel's copy is named librdkafka-<hash>.so.1, and the loader looks the relay's
# librdkafka.so.1 up by soname.
command -v patchelf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patchelf >/dev/null; }
patchelf --set-soname librdkafka.so.1 "$ROOTFS/usr/local/lib/librdkafka.so.1"
find "$ROOTFS/usr/local/lib" -maxdepth 1 -name 'librdkafka-*' -delete
chmod 0644 "$ROOTFS/usr/local/lib/librdkafka.so.1"
chroot "$ROOTFS" ldconfig
chroot "$ROOTFS" ldconfig -p | grep 'librdkafka.so.1 ' || fail "the loader does not find /usr/local/lib/librdkafka.so.1"

say "the image holds the relay only"
# Swift symbols name their module (length-prefixed in the mangling); KafkaMock would import librdkafka's mock cluster.
for product in $PRODUCTS; do
  mocks=$(nm "$BIN/$product" | grep -oE '(8APNsMock|9KafkaMock|12RelaySandbox)' | sort -u | xargs || true)
  [ -z "$mocks" ] || fail "$product links test code: ${mocks}"
  ! nm -D --undefined-only "$BIN/$product" | grep -q 'rd_kafka_mock_' || fail "$product imports librdkafka's mock cluster"
done
found=$(find "$ROOTFS" -xdev -type f \( -name apns-mock -o -name apns-relay-sandbox \) | sed "s#^$ROOTFS##")
[ -z "$found" ] || fail "test-only binaries in the image: $found"
echo "no ${TEST_ONLY[*]} in the root; $PRODUCTS links no APNsMock, KafkaMock or RelaySandbox code"

# Only the packages above may satisfy the binaries: nothing from this machine's libraries.
missing=$(for product in $PRODUCTS; do chroot "$ROOTFS" ldd "/usr/local/bin/$product"; done | grep 'not found' || true)
[ -z "$missing" ] || { echo "$missing" >&2; fail "libraries the runtime stage lacks (above)"; }

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

say "apns-relay --version, inside the image as user $USERSPEC"
VERSIONS=$(in_image /usr/local/bin/apns-relay --version)
VERSION=$(printf '%s\n' "$VERSIONS" | head -1)
CHART=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' helm/apns-relay/Chart.yaml)
printf '%s\n' "$VERSIONS"
echo "(chart appVersion $CHART)"
[ "$VERSION" = "$CHART" ] || fail "the binary says $VERSION, the chart's appVersion is $CHART"
KAFKA_VERSION=$(printf '%s\n' "$VERSIONS" | sed -n 's/^librdkafka //p')
printf '%s\n' "$KAFKA_VERSION" | awk -F. '{ exit !($1 > 2 || ($1 == 2 && $2 >= 8)) }' \
  || fail "the image runs librdkafka $KAFKA_VERSION; it must be 2.8 or later"

say "test peers on the host, outside the image: mock Kafka (apns-relay-sandbox mock-kafka) and mock APNs (apns-mock)"
# The files both sides read live in the image's /tmp: the relay sees $SANDBOX, the host $ROOTFS$SANDBOX.
SHARED=$ROOTFS$SANDBOX
rm -rf "$SHARED"
mkdir -p "$SHARED"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$SHARED/AuthKey.p8" 2>/dev/null
"$BIN/apns-relay-sandbox" mock-kafka --brokers 1 --topic apns-notifications:3 --topic apns-results:3 \
  --topic apns-removed-tokens:3 --topic apns-removed-channels:3 --topic apns-dead-letters:3 > "$WORK/kafka.txt" 2> "$WORK/kafka.log" &
KAFKA_PID=$!
"$BIN/apns-mock" --port 0 --tls-dir "$SHARED/mock-tls" --key-id ABC123DEFG --team-id DEF123GHIJ \
  --public-key "$SHARED/AuthKey.p8" > "$WORK/apns.txt" 2> "$WORK/apns.log" &
MOCK_PID=$!
for _ in $(seq 1 150); do [ -s "$WORK/kafka.txt" ] && [ -s "$WORK/apns.txt" ] && break; sleep 0.2; done
[ -s "$WORK/kafka.txt" ] && [ -s "$WORK/apns.txt" ] || { cat "$WORK/kafka.log" "$WORK/apns.log" >&2; fail "the test peers did not start within 30 s"; }
BOOTSTRAP=$(head -1 "$WORK/kafka.txt")
APNS_PORT=$(sed -n 's/.*port=\([0-9]*\).*/\1/p' "$WORK/apns.txt")
echo "mock Kafka at $BOOTSTRAP, mock APNs on port $APNS_PORT"
cat > "$SHARED/relay.yaml" <<YAML
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
# The relay reads them as the image's user; the key stays private to it.
chown -R "$USERSPEC" "$SHARED"
chmod 0700 "$SHARED"

say "apns-relay check, inside the image"
in_image /usr/local/bin/apns-relay check --config "$SANDBOX/relay.yaml"
say "apns-relay send, inside the image"
in_image /usr/local/bin/apns-relay send --config "$SANDBOX/relay.yaml" \
  --device-token 5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e --topic com.example.app

say "the image's packages (dpkg-query -W in the root; debootstrap minbase plus the runtime packages)"
chroot "$ROOTFS" dpkg-query -W -f='${Package} ${Version}\n' | column -c 120
echo "$(chroot "$ROOTFS" dpkg-query -W -f='.\n' | wc -l) packages, $(chroot "$ROOTFS" dpkg-query -W -f='${Installed-Size}\n' \
  | awk '{ kib += $1 } END { printf "%.0f MiB", kib / 1024 }') installed"
# Without what the image does not keep: apt's lists (the Dockerfile removes them) and debootstrap's downloaded .debs.
echo "root file system: $(cd "$ROOTFS" && du -sh --exclude=./proc --exclude=./dev --exclude=./tmp \
  --exclude=./var/lib/apt/lists --exclude=./var/cache/apt . | cut -f1)"
for product in $PRODUCTS; do
  size=$(stat -c %s "$ROOTFS/usr/local/bin/$product")
  echo "$product: $size bytes ($(numfmt --to=iec-i --suffix=B "$size")), stripped, static Swift runtime"
done

say "image-check passed: the runtime stage holds the relay only, starts, reaches Kafka and APNs, and pushes"

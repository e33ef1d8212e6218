#!/usr/bin/env python3
"""An authenticating, TLS-terminating Kafka-protocol gateway for tests.

Why it exists: the relay must be tested against a Kafka listener that *enforces* SASL (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512, OAUTHBEARER, including OIDC client credentials) and TLS/mTLS, and that refuses a wrong secret.
librdkafka's mock cluster (`apns-relay-sandbox mock-kafka`) speaks only PLAINTEXT and has no SASL, so this
gateway sits in front of it and does the security part the way a real broker does:

    client (librdkafka: relay, kcat, confluent_kafka)  --TLS? SASL?-->  gateway  --plaintext-->  mock broker

* It answers ApiVersions itself (the mock does not advertise SaslHandshake/SaslAuthenticate, and librdkafka
  will not start SASL PLAIN/SCRAM/OAUTHBEARER unless the broker lists them).
* It runs the broker side of SASL before it forwards a single byte upstream; a wrong secret gets
  SASL_AUTHENTICATION_FAILED (58) and the connection is closed, as Kafka does.
* After authentication it forwards frames both ways, rewriting the broker addresses in Metadata,
  FindCoordinator and DescribeCluster responses so every broker the client learns about is another gateway
  listener (one per upstream broker, opened on first sight), never the unprotected upstream.

Stdlib only (Python 3.11). One thread per client connection, which owns both sockets (client and upstream):
an OpenSSL connection must not be read and written from two threads at once.

    python3 Tests/peers/kafka_gateway.py --upstream 127.0.0.1:9092 --mechanism SCRAM-SHA-512 \
        --user relay --password-file /tmp/pw [--tls-cert s.pem --tls-key s.key [--client-ca ca.pem]] \
        [--oidc-client-id relay --oidc-client-secret-file /tmp/secret]

--upstream takes mock-kafka's bootstrap line as is (HOST:PORT[,HOST:PORT...]). When ready the gateway prints
one JSON line on stdout: {"bootstrap": "127.0.0.1:PORT[,...]"[, "tokenEndpoint": "http://127.0.0.1:P/token"]}.
Stderr gets one line per connection outcome with running counters ("... authenticated=3 refused=1"); no
password, client secret or token is ever written there.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import secrets
import selectors
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Kafka API keys the gateway looks into.
PRODUCE, METADATA, FIND_COORDINATOR, SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE, DESCRIBE_CLUSTER = (
    0, 3, 10, 17, 18, 36, 60)
# Error codes it sends.
UNSUPPORTED_SASL_MECHANISM, UNSUPPORTED_VERSION, SASL_AUTHENTICATION_FAILED = 33, 35, 58
# The first flexible version (compact encodings, tagged fields, request header v2 / response header v1) of the
# APIs whose bodies the gateway parses. ApiVersions responses keep response header v0 even when flexible.
FLEXIBLE_FROM = {PRODUCE: 9, METADATA: 9, FIND_COORDINATOR: 3, API_VERSIONS: 3, SASL_AUTHENTICATE: 2,
                 DESCRIBE_CLUSTER: 0}
# Highest versions whose responses this file can parse; the advertised ApiVersions are clamped to these so a
# client never picks a version the rewriter does not know.
MAX_PARSED_VERSION = {METADATA: 12, FIND_COORDINATOR: 4, API_VERSIONS: 3, DESCRIBE_CLUSTER: 1}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_ITERATIONS = 4096
AUTH_DEADLINE_S = 30.0  # a client that has not authenticated by then is dropped
TLS_HANDSHAKE_TIMEOUT_S = 10.0
DRAIN_TIMEOUT_S = 5.0  # how long a closing pair may take to write what it still owes the side left open
MAX_FRAME = 100 * 1024 * 1024


# ---------------------------------------------------------------------------------------------------------------
# Wire encoding
# ---------------------------------------------------------------------------------------------------------------

class Truncated(Exception):
    """A frame ended before the field being read."""


class Reader:
    """Sequential reader over one Kafka frame (without its 4-byte size prefix)."""

    def __init__(self, data: bytes, pos: int = 0):
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Truncated(f"need {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise Truncated("varint too long")

    def string(self, compact: bool) -> str | None:
        """A (nullable) string: int16 length, or uvarint length+1 when compact; -1 / 0 mean null."""
        n = self.uvarint() - 1 if compact else self.int16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes_(self, compact: bool) -> bytes | None:
        n = self.uvarint() - 1 if compact else self.int32()
        return None if n < 0 else self.take(n)

    def array_len(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.int32()

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()                  # tag
            self.take(self.uvarint())       # size, then the value, which the gateway does not need


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def enc_string(s: str | None, compact: bool = False) -> bytes:
    if s is None:
        return uvarint(0) if compact else i16(-1)
    raw = s.encode()
    return (uvarint(len(raw) + 1) if compact else i16(len(raw))) + raw


def enc_bytes(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its 4-byte size, as every Kafka frame is."""
    return i32(len(payload)) + payload


def is_flexible(api_key: int, version: int) -> bool:
    first = FLEXIBLE_FROM.get(api_key)
    return first is not None and version >= first


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def parse_request_header(payload: bytes) -> RequestHeader:
    """Request header v1 (api key, version, correlation id, client id), plus tagged fields (v2) if flexible."""
    r = Reader(payload)
    api_key, api_version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.string(compact=False)  # stays a non-compact nullable string even in header v2
    if is_flexible(api_key, api_version):
        r.tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos)


def produce_expects_response(header: RequestHeader, payload: bytes) -> bool:
    """False for acks=0 Produce requests: the broker sends nothing back for them."""
    r = Reader(payload, header.body_offset)
    if header.api_version >= 3:
        r.string(compact=is_flexible(PRODUCE, header.api_version))  # transactional_id
    return r.int16() != 0


# ---------------------------------------------------------------------------------------------------------------
# ApiVersions: asked upstream once, answered by the gateway
# ---------------------------------------------------------------------------------------------------------------

def read_frame_blocking(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("upstream closed the connection")
            buf += chunk
        return bytes(buf)
    return exactly(struct.unpack(">i", exactly(4))[0])


def query_upstream_api_versions(host: str, port: int, timeout: float = 10.0) -> list[tuple[int, int, int]]:
    """ApiVersions v0 (the simple, non-flexible form every broker answers) to learn the upstream's APIs."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(frame(i16(API_VERSIONS) + i16(0) + i32(1) + enc_string("kafka-gateway")))
        r = Reader(read_frame_blocking(sock))
    r.int32()  # correlation id
    error = r.int16()
    if error:
        raise RuntimeError(f"upstream ApiVersions v0 failed with error {error}")
    return [(r.int16(), r.int16(), r.int16()) for _ in range(r.array_len(compact=False))]


def advertised_apis(upstream: list[tuple[int, int, int]], sasl: bool) -> list[tuple[int, int, int]]:
    """The upstream's list, clamped to what the rewriter parses, plus the SASL APIs the gateway serves."""
    apis = {}
    for key, lo, hi in upstream:
        if key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            continue  # the gateway, not the upstream, decides about SASL
        hi = min(hi, MAX_PARSED_VERSION.get(key, hi))
        if hi >= lo:
            apis[key] = (key, lo, hi)
    apis[API_VERSIONS] = (API_VERSIONS, 0, MAX_PARSED_VERSION[API_VERSIONS])  # answered by the gateway itself
    if sasl:
        apis[SASL_HANDSHAKE] = (SASL_HANDSHAKE, 0, 1)
        apis[SASL_AUTHENTICATE] = (SASL_AUTHENTICATE, 0, 1)
    return [apis[k] for k in sorted(apis)]


def api_versions_response(correlation_id: int, version: int, apis: list[tuple[int, int, int]]) -> bytes:
    """An ApiVersions response frame. Always response header v0 (clients parse it before they know versions)."""
    if version > MAX_PARSED_VERSION[API_VERSIONS]:
        # What Kafka does for a version it does not know: v0 body, UNSUPPORTED_VERSION, and its own range, so
        # the client retries with a version both sides have.
        entries = [a for a in apis if a[0] == API_VERSIONS]
        body = i16(UNSUPPORTED_VERSION) + i32(len(entries)) + b"".join(i16(k) + i16(lo) + i16(hi)
                                                                      for k, lo, hi in entries)
        return frame(i32(correlation_id) + body)
    if version >= 3:
        body = (i16(0) + uvarint(len(apis) + 1)
                + b"".join(i16(k) + i16(lo) + i16(hi) + uvarint(0) for k, lo, hi in apis)
                + i32(0) + uvarint(0))  # throttle_time_ms, no tagged fields (no features)
    else:
        body = i16(0) + i32(len(apis)) + b"".join(i16(k) + i16(lo) + i16(hi) for k, lo, hi in apis)
        if version >= 1:
            body += i32(0)
    return frame(i32(correlation_id) + body)


# ---------------------------------------------------------------------------------------------------------------
# Broker address rewriting (Metadata, FindCoordinator, DescribeCluster responses)
# ---------------------------------------------------------------------------------------------------------------

def _read_host_port(r: Reader, compact: bool, edits: list, mapper) -> None:
    """Reads host and port at the reader's position and records their replacement by the gateway's address."""
    start = r.pos
    host = r.string(compact)
    port = r.int32()
    if host and port > 0:
        new_host, new_port = mapper(host, port)
        edits.append((start, r.pos, enc_string(new_host, compact) + i32(new_port)))


def _apply(payload: bytes, edits: list) -> bytes:
    out, last = bytearray(), 0
    for start, end, replacement in edits:
        out += payload[last:start] + replacement
        last = end
    out += payload[last:]
    return frame(bytes(out))


def rewrite_response(api_key: int, version: int, payload: bytes, mapper) -> bytes:
    """Re-encodes a response frame with every broker address replaced by mapper(host, port).

    Only the host/port fields change; everything else is copied byte for byte, so the parser stops at the last
    address and the rest of the body (topics, partitions, ...) never has to be understood.
    """
    flexible = is_flexible(api_key, version)
    r = Reader(payload)
    r.int32()  # correlation id
    if flexible:
        r.tagged_fields()  # response header v1
    edits: list = []
    if api_key == METADATA:
        if version >= 3:
            r.int32()  # throttle_time_ms
        for _ in range(r.array_len(flexible)):
            r.int32()  # node_id
            _read_host_port(r, flexible, edits, mapper)
            if version >= 1:
                r.string(flexible)  # rack
            if flexible:
                r.tagged_fields()
    elif api_key == FIND_COORDINATOR:
        if version >= 1:
            r.int32()  # throttle_time_ms
        if version >= 4:
            for _ in range(r.array_len(compact=True)):  # one entry per coordinator key
                r.string(compact=True)  # key
                r.int32()  # node_id
                _read_host_port(r, True, edits, mapper)
                r.int16()  # error_code
                r.string(compact=True)  # error_message
                r.tagged_fields()
        else:
            r.int16()  # error_code
            if version >= 1:
                r.string(flexible)  # error_message
            r.int32()  # node_id
            _read_host_port(r, flexible, edits, mapper)
    elif api_key == DESCRIBE_CLUSTER:
        r.int32()  # throttle_time_ms
        r.int16()  # error_code
        r.string(compact=True)  # error_message
        if version >= 1:
            r.int8()  # endpoint_type
        r.string(compact=True)  # cluster_id
        r.int32()  # controller_id
        for _ in range(r.array_len(compact=True)):
            r.int32()  # broker_id
            _read_host_port(r, True, edits, mapper)
            r.string(compact=True)  # rack
            r.tagged_fields()
    return _apply(payload, edits)


# ---------------------------------------------------------------------------------------------------------------
# SASL mechanisms (broker side)
# ---------------------------------------------------------------------------------------------------------------

class AuthFailed(Exception):
    """Authentication failed; str(self) is safe to send to the client and to log (never holds a secret)."""


def read_secret(path: str) -> str:
    """Read on every authentication so a test can rotate the secret while the gateway runs."""
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip("\r\n")


def safe(text: str | None, limit: int = 64) -> str:
    """A client-supplied name for the log: printable, bounded."""
    if text is None:
        return "-"
    cleaned = "".join(c if c.isprintable() and not c.isspace() else "?" for c in text)
    return cleaned[:limit] + ("..." if len(cleaned) > limit else "")


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class Step:
    """One server step: bytes for the client; done when authentication succeeded."""
    challenge: bytes
    done: bool


class PlainServer:
    """RFC 4616: one message, authzid NUL authcid NUL password."""

    name = "PLAIN"

    def __init__(self, config: "Config"):
        self.config = config
        self.user: str | None = None

    def step(self, data: bytes) -> Step:
        parts = data.split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("Authentication failed: malformed PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.user = user
        if authzid and authzid != user:
            raise AuthFailed(f"Authentication failed: user '{safe(user)}' may not act as '{safe(authzid)}'")
        expected = read_secret(self.config.password_file) if self.config.password_file else None
        if (user != self.config.user or expected is None
                or not hmac.compare_digest(password.encode(), expected.encode())):
            raise AuthFailed(f"Authentication failed: invalid credentials for user '{safe(user)}'")
        return Step(b"", True)


class ScramServer:
    """RFC 5802 / RFC 7677 server side: client-first, server-first, client-final, server-final."""

    def __init__(self, config: "Config", hash_name: str):
        self.config, self.hash_name = config, hash_name
        self.name = "SCRAM-SHA-256" if hash_name == "sha256" else "SCRAM-SHA-512"
        self.user: str | None = None
        self.state = "first"

    def _h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def step(self, data: bytes) -> Step:
        text = data.decode("utf-8", "replace")
        if self.state == "first":
            return self._client_first(text)
        if self.state == "final":
            return self._client_final(text)
        raise AuthFailed("Authentication failed: unexpected SCRAM message")

    def _client_first(self, text: str) -> Step:
        # gs2-header: "n,," or "y,," (no channel binding), optionally with "a=authzid"; "p=" would ask for
        # channel binding, which Kafka does not offer.
        try:
            cbind, authzid, bare = text.split(",", 2)
        except ValueError:
            raise AuthFailed("Authentication failed: malformed SCRAM client-first message") from None
        if cbind not in ("n", "y"):
            raise AuthFailed("Authentication failed: SCRAM channel binding is not supported")
        attrs = dict(a.split("=", 1) for a in bare.split(",") if "=" in a)
        if "n" not in attrs or "r" not in attrs:
            raise AuthFailed("Authentication failed: malformed SCRAM client-first message")
        self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        self.gs2_header = f"{cbind},{authzid},"
        self.client_first_bare = bare
        self.nonce = attrs["r"] + b64url(secrets.token_bytes(18))
        # Salt and salted password are derived afresh from the password file on every authentication (the file
        # may have been rotated). An unknown user still gets a plausible challenge, as Kafka gives, and fails at
        # the proof, so the outcome does not tell which part was wrong.
        salt = secrets.token_bytes(16)
        known = self.user == self.config.user and self.config.password_file
        password = read_secret(self.config.password_file) if known else secrets.token_hex(16)
        self.salted = hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, SCRAM_ITERATIONS)
        self.known = bool(known)
        self.server_first = f"r={self.nonce},s={base64.b64encode(salt).decode()},i={SCRAM_ITERATIONS}"
        self.state = "final"
        return Step(self.server_first.encode(), False)

    def _client_final(self, text: str) -> Step:
        self.state = "over"
        fail = AuthFailed(f"Authentication failed: invalid credentials for user '{safe(self.user)}'")
        if ",p=" not in text:
            raise fail
        without_proof, proof_b64 = text.rsplit(",p=", 1)
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        # RFC 5802 wants r equal to the server-first nonce. librdkafka sends client nonce + that nonce (the
        # client nonce twice), and Kafka's ScramSaslServer accepts any r that *ends with* its nonce; so does this.
        if not attrs.get("r", "").endswith(self.nonce):
            raise AuthFailed("Authentication failed: SCRAM nonce mismatch")
        if attrs.get("c") != base64.b64encode(self.gs2_header.encode()).decode():
            raise AuthFailed("Authentication failed: SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise fail from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_key = self._hmac(self.salted, b"Client Key")
        stored_key = self._h(client_key)
        signature = self._hmac(stored_key, auth_message)
        if len(proof) != len(signature):
            raise fail
        recovered_client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not self.known or not hmac.compare_digest(self._h(recovered_client_key), stored_key):
            raise fail
        server_signature = self._hmac(self._hmac(self.salted, b"Server Key"), auth_message)
        return Step(b"v=" + base64.b64encode(server_signature), True)


class OAuthBearerServer:
    """RFC 7628: one client message "n,,\\x01auth=Bearer <token>\\x01...\\x01\\x01"; an empty reply on success."""

    name = "OAUTHBEARER"

    def __init__(self, config: "Config", issuer: "TokenIssuer | None"):
        self.config, self.issuer = config, issuer
        self.user: str | None = None

    def step(self, data: bytes) -> Step:
        text = data.decode("utf-8", "replace")
        gs2, _, rest = text.partition("\x01")
        if not gs2.startswith(("n,", "y,")):
            raise AuthFailed("Authentication failed: malformed OAUTHBEARER message")
        pairs = dict(kv.split("=", 1) for kv in rest.split("\x01") if "=" in kv)
        scheme, _, token = pairs.get("auth", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise AuthFailed("Authentication failed: no bearer token")
        claims = self.issuer.verify(token) if self.issuer else verify_unsecured_jwt(token)
        self.user = claims.get("sub")
        if self.issuer is None and self.config.user is not None and self.user != self.config.user:
            raise AuthFailed(f"Authentication failed: invalid token for principal '{safe(self.user)}'")
        # Kafka would answer a bad token with {"status":"invalid_token"} and wait for a \x01; like Kafka towards
        # its clients in the end, the gateway just fails the SaslAuthenticate with 58 (raised above).
        return Step(b"", True)


def _jwt_parts(token: str) -> tuple[dict, dict, str, str]:
    try:
        head_b64, payload_b64, sig_b64 = token.split(".")
        header = json.loads(b64url_decode(head_b64))
        claims = json.loads(b64url_decode(payload_b64))
    except (ValueError, TypeError):
        raise AuthFailed("Authentication failed: malformed token") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise AuthFailed("Authentication failed: malformed token")
    return header, claims, f"{head_b64}.{payload_b64}", sig_b64


def _check_expiry(claims: dict) -> None:
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or exp <= time.time():
        raise AuthFailed(f"Authentication failed: token for principal '{safe(str(claims.get('sub')))}' "
                         "is expired or has no exp")


def verify_unsecured_jwt(token: str) -> dict:
    """librdkafka's default token (sasl.oauthbearer.config=principal=NAME): alg none, empty signature."""
    header, claims, _, sig = _jwt_parts(token)
    if header.get("alg") != "none" or sig:
        raise AuthFailed("Authentication failed: only unsecured (alg none) tokens are accepted here")
    if not claims.get("sub"):
        raise AuthFailed("Authentication failed: token has no sub")
    _check_expiry(claims)
    return claims


class TokenIssuer:
    """Signs (HS256, a key made at start) the tokens the OIDC endpoint hands out, and verifies them."""

    def __init__(self, lifetime_s: int):
        self.key = secrets.token_bytes(32)
        self.lifetime_s = lifetime_s

    def issue(self, subject: str, scope: str, issuer_url: str) -> str:
        now = int(time.time())
        header = {"alg": "HS256", "typ": "JWT", "kid": "kafka-gateway"}
        claims = {"iss": issuer_url, "sub": subject, "aud": "kafka", "iat": now, "exp": now + self.lifetime_s,
                  "scope": scope, "jti": secrets.token_hex(8)}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        return f"{signing_input}.{b64url(self._sign(signing_input))}"

    def _sign(self, signing_input: str) -> bytes:
        return hmac.new(self.key, signing_input.encode(), hashlib.sha256).digest()

    def verify(self, token: str) -> dict:
        header, claims, signing_input, sig = _jwt_parts(token)
        try:
            signature = b64url_decode(sig)
        except ValueError:
            signature = b""
        if header.get("alg") != "HS256" or not hmac.compare_digest(signature, self._sign(signing_input)):
            raise AuthFailed("Authentication failed: token was not issued by this token endpoint")
        _check_expiry(claims)
        return claims


# ---------------------------------------------------------------------------------------------------------------
# OIDC token endpoint (client credentials)
# ---------------------------------------------------------------------------------------------------------------

def start_token_endpoint(config: "Config", issuer: TokenIssuer, stats: "Stats") -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # the default line would go to stderr unfiltered
            pass

        def _reply(self, status: int, body: dict, extra: dict | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self):
            if urllib.parse.urlsplit(self.path).path != "/token":
                return self._reply(404, {"error": "not_found"})
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
            client_id, secret = self._credentials(form)
            grant = form.get("grant_type", [""])[0]
            if grant != "client_credentials":
                stats.log("token refused", client_id=safe(client_id), reason="unsupported_grant_type",
                          refused=True)
                return self._reply(400, {"error": "unsupported_grant_type"})
            expected = read_secret(config.oidc_client_secret_file)
            if (client_id != config.oidc_client_id or secret is None
                    or not hmac.compare_digest(secret.encode(), expected.encode())):
                stats.log("token refused", client_id=safe(client_id), reason="invalid_client", refused=True)
                return self._reply(401, {"error": "invalid_client"}, {"WWW-Authenticate": 'Basic realm="token"'})
            scope = form.get("scope", [""])[0]
            token = issuer.issue(client_id, scope, config.token_endpoint)
            stats.log("token issued", client_id=safe(client_id), scope=safe(scope or "-"))
            self._reply(200, {"access_token": token, "token_type": "bearer", "expires_in": issuer.lifetime_s,
                              "scope": scope})

        def _credentials(self, form: dict) -> tuple[str | None, str | None]:
            """HTTP Basic (RFC 6749 2.3.1) first, else the client_id/client_secret form fields."""
            auth = self.headers.get("Authorization", "")
            if auth[:6].lower() == "basic ":
                try:
                    user, _, password = base64.b64decode(auth[6:].strip()).decode().partition(":")
                    return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
                except ValueError:
                    return None, None
            return form.get("client_id", [None])[0], form.get("client_secret", [None])[0]

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="token-endpoint", daemon=True).start()
    return server


# ---------------------------------------------------------------------------------------------------------------
# Gateway
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Config:
    upstream: list[tuple[str, int]]
    mechanism: str | None = None
    user: str | None = None
    password_file: str | None = None
    tls: ssl.SSLContext | None = None
    mtls: bool = False
    oidc_client_id: str | None = None
    oidc_client_secret_file: str | None = None
    token_endpoint: str = ""
    verbose: bool = False
    apis: list = field(default_factory=list)


class Stats:
    """Running counters, printed on every outcome line so a test can assert a refusal really happened."""

    def __init__(self):
        self.lock = threading.Lock()
        self.authenticated = 0
        self.refused = 0

    def log(self, event: str, refused: bool = False, authenticated: bool = False, **fields) -> None:
        with self.lock:
            self.refused += refused
            self.authenticated += authenticated
            words = [event] + [f"{k}={v}" for k, v in fields.items()]
            words += [f"authenticated={self.authenticated}", f"refused={self.refused}"]
            print(" ".join(words), file=sys.stderr, flush=True)


class Gateway:
    """Owns the listeners: one per upstream broker, opened the first time a response names that broker."""

    def __init__(self, config: Config, stats: Stats):
        self.config, self.stats = config, stats
        self.lock = threading.Lock()
        self.listeners: dict[tuple[str, int], socket.socket] = {}
        self.connections: set[Connection] = set()
        self.issuer: TokenIssuer | None = None

    def listener_for(self, host: str, port: int) -> tuple[str, int]:
        """The gateway address that stands for upstream broker host:port (opened on first use)."""
        with self.lock:
            sock = self.listeners.get((host, port))
            if sock is None:
                sock = socket.create_server(("127.0.0.1", 0), backlog=64)
                self.listeners[(host, port)] = sock
                threading.Thread(target=self._accept_loop, args=(sock, (host, port)),
                                 name=f"listener-{host}:{port}", daemon=True).start()
                if self.config.verbose:
                    self.stats.log("listening", address=f"127.0.0.1:{sock.getsockname()[1]}",
                                   upstream=f"{host}:{port}")
            return "127.0.0.1", sock.getsockname()[1]

    def _accept_loop(self, sock: socket.socket, upstream: tuple[str, int]) -> None:
        while True:
            try:
                client, peer = sock.accept()
            except OSError:
                return  # listener closed at shutdown
            conn = Connection(self, client, peer, upstream)
            with self.lock:
                self.connections.add(conn)
            threading.Thread(target=conn.run, name=f"conn-{peer[1]}", daemon=True).start()

    def drop_connections(self) -> None:
        """Hangs up on every client, as a broker restart does (SIGUSR1): clients connect and authenticate again."""
        with self.lock:
            connections = list(self.connections)
        for conn in connections:
            try:
                conn.client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.stats.log("dropped", connections=len(connections))

    def new_sasl_server(self):
        mech = self.config.mechanism
        if mech == "PLAIN":
            return PlainServer(self.config)
        if mech == "SCRAM-SHA-256":
            return ScramServer(self.config, "sha256")
        if mech == "SCRAM-SHA-512":
            return ScramServer(self.config, "sha512")
        return OAuthBearerServer(self.config, self.issuer)

    def close(self) -> None:
        with self.lock:
            for sock in self.listeners.values():
                sock.close()


class Connection:
    """One client connection and (once the client is authenticated) its own upstream connection.

    A single thread drives both sockets, non-blocking, through a selector: responses go back in request order
    because the upstream connection is private to this client and answers in order.
    """

    def __init__(self, gateway: Gateway, sock: socket.socket, peer, upstream: tuple[str, int]):
        self.gw, self.config, self.stats = gateway, gateway.config, gateway.stats
        self.client = sock
        self.peer = f"{peer[0]}:{peer[1]}"
        self.upstream_addr = upstream
        self.upstream: socket.socket | None = None
        self.client_in, self.client_out = bytearray(), bytearray()
        self.upstream_in, self.upstream_out = bytearray(), bytearray()
        self.pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version) awaiting a response
        self.state = "handshake" if self.config.mechanism else "open"
        self.raw_sasl = False      # SaslHandshake v0: the SASL tokens follow as bare size-prefixed frames
        self.sasl = None
        self.drain_to = None       # the pair is ending: write what is owed to this socket, then close both
        self.drain_deadline = 0.0
        self.done = False
        self.tls_note = "no"
        self.deadline = time.monotonic() + AUTH_DEADLINE_S

    # -- lifecycle --

    def run(self) -> None:
        try:
            self.client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small responses, no Nagle wait
            if self.config.tls and not self._tls_handshake():
                return
            if self.state == "open":
                self.stats.log("accepted", authenticated=True, mechanism="none", tls=self.tls_note,
                               peer=self.peer)
                self._connect_upstream()
            self.client.setblocking(False)
            self._loop()
        except Exception as e:  # a broken peer must never take the gateway down
            if self.config.verbose:
                self.stats.log("connection error", peer=self.peer, error=safe(repr(e), 200))
        finally:
            with self.gw.lock:
                self.gw.connections.discard(self)
            for sock in (self.client, self.upstream):
                if sock is not None:
                    try:
                        sock.close()
                    except OSError:
                        pass

    def _tls_handshake(self) -> bool:
        self.client.settimeout(TLS_HANDSHAKE_TIMEOUT_S)
        try:
            tls = self.config.tls.wrap_socket(self.client, server_side=True, do_handshake_on_connect=False)
            self.client = tls
            tls.do_handshake()
        except (ssl.SSLError, OSError) as e:
            reason = getattr(e, "reason", None) or e.__class__.__name__
            self.stats.log("tls refused:", peer=self.peer, reason=json.dumps(safe(str(reason), 120)),
                           refused=True)
            return False
        note = tls.version() or "tls"
        if self.config.mtls:
            subject = dict(x[0] for x in tls.getpeercert().get("subject", ()))
            note += f" client_cert=CN:{safe(subject.get('commonName'))}"
        self.tls_note = note.replace(" ", ",")
        return True

    def _connect_upstream(self) -> None:
        try:
            self.upstream = socket.create_connection(self.upstream_addr, timeout=10)
        except OSError as e:
            self.stats.log("upstream unreachable", upstream=f"{self.upstream_addr[0]}:{self.upstream_addr[1]}",
                           error=safe(str(e), 120), peer=self.peer)
            raise
        self.upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.upstream.setblocking(False)

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            while not self.done:
                if self.drain_to is not None:
                    if not self._owed(self.drain_to) or time.monotonic() > self.drain_deadline:
                        return
                elif self.state != "open" and time.monotonic() > self.deadline:
                    self._refuse("authentication timed out", close_now=True)
                    return
                self._register(sel)
                for key, events in sel.select(timeout=0.5):
                    if events & selectors.EVENT_WRITE:
                        self._flush(key.fileobj)
                    if events & selectors.EVENT_READ and not self.done and self.drain_to is None:
                        self._read(key.fileobj)
                    if self.done:
                        return
        finally:
            sel.close()

    def _owed(self, sock) -> bytearray:
        return self.client_out if sock is self.client else self.upstream_out

    def _end(self, drain_to) -> None:
        """Ends the pair once what is owed to drain_to (the side still worth writing to) has been written."""
        if self.drain_to is None:
            self.drain_to = drain_to
            self.drain_deadline = time.monotonic() + DRAIN_TIMEOUT_S

    def _register(self, sel: selectors.BaseSelector) -> None:
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            out = self._owed(sock)
            if self.drain_to is None:
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
            else:
                events = selectors.EVENT_WRITE if sock is self.drain_to and out else 0
            registered = sock in sel.get_map()
            if not events:
                if registered:
                    sel.unregister(sock)
            elif registered:
                sel.modify(sock, events)
            else:
                sel.register(sock, events)

    # -- socket I/O --

    def _read(self, sock) -> None:
        inbuf = self.client_in if sock is self.client else self.upstream_in
        eof = False
        while True:
            try:
                chunk = sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                break
            except OSError:  # reset: treat as a hang-up
                chunk = b""
            if not chunk:
                eof = True
                break
            inbuf += chunk
            if not isinstance(sock, ssl.SSLSocket):
                break  # plain sockets: one read per wake-up; SSL ones are drained (select cannot see their buffer)
        self._handle_frames(sock, inbuf)
        if eof and self.drain_to is None:
            # Either side hanging up ends the pair, but what it sent before still goes to the other side
            # (an acks=0 Produce from a client that exits right after writing it, say).
            other = self.upstream if sock is self.client else self.client
            if other is None:
                self.done = True
            else:
                self._end(other)

    def _handle_frames(self, sock, inbuf: bytearray) -> None:
        handler = self._client_frame if sock is self.client else self._upstream_frame
        while len(inbuf) >= 4 and not self.done:
            size = struct.unpack(">i", inbuf[:4])[0]
            if size < 0 or size > MAX_FRAME:
                self.done = True
                return
            if len(inbuf) < 4 + size:
                break
            payload = bytes(inbuf[4:4 + size])
            del inbuf[:4 + size]
            handler(payload)
            if self.drain_to is not None:  # refused: nothing more from this client is looked at
                inbuf.clear()
                return

    def _flush(self, sock) -> None:
        out = self._owed(sock)
        while out:
            try:
                n = sock.send(out[:262144])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                return
            except OSError:
                self.done = True
                return
            del out[:n]

    # -- protocol --

    def _client_frame(self, payload: bytes) -> None:
        if self.state == "open":
            return self._forward_request(payload)
        if self.raw_sasl:
            return self._sasl_round(payload, header=None)
        try:
            header = parse_request_header(payload)
        except Truncated:
            return self._refuse("malformed request header", close_now=True)
        if header.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and header.api_version > 1:
            return self._refuse(f"api_key={header.api_key} v{header.api_version} was not advertised",
                                close_now=True)
        if header.api_key == API_VERSIONS:
            self.client_out += api_versions_response(header.correlation_id, header.api_version,
                                                     self.config.apis)
        elif header.api_key == SASL_HANDSHAKE and self.state == "handshake":
            self._sasl_handshake(header, payload)
        elif header.api_key == SASL_AUTHENTICATE and self.state == "authenticate":
            try:
                auth_bytes = Reader(payload, header.body_offset).bytes_(compact=False) or b""
            except Truncated:
                return self._refuse("malformed SaslAuthenticate", close_now=True)
            self._sasl_round(auth_bytes, header)
        else:
            self._refuse(f"api_key={header.api_key} before authentication", close_now=True)

    def _sasl_handshake(self, header: RequestHeader, payload: bytes) -> None:
        try:
            requested = Reader(payload, header.body_offset).string(compact=False)
        except Truncated:
            requested = None
        mechanisms = [self.config.mechanism]
        ok = requested == self.config.mechanism
        body = i16(0 if ok else UNSUPPORTED_SASL_MECHANISM) + i32(len(mechanisms)) + b"".join(
            enc_string(m) for m in mechanisms)
        self.client_out += frame(i32(header.correlation_id) + body)
        if not ok:
            self._refuse(f"unsupported mechanism {safe(requested)}", mechanism=safe(requested))
            return
        self.sasl = self.gw.new_sasl_server()
        self.state = "authenticate"
        self.raw_sasl = header.api_version == 0

    def _sasl_round(self, auth_bytes: bytes, header: RequestHeader | None) -> None:
        try:
            step = self.sasl.step(auth_bytes)
        except AuthFailed as e:
            if header is not None:  # v0 raw framing has no error response: Kafka just closes
                self.client_out += self._sasl_authenticate_response(header, SASL_AUTHENTICATION_FAILED, str(e), b"")
            self._refuse(str(e), user=safe(self.sasl.user))
            return
        except (OSError, UnicodeError) as e:  # e.g. the password file vanished mid-rotation
            if header is not None:
                self.client_out += self._sasl_authenticate_response(
                    header, SASL_AUTHENTICATION_FAILED, "Authentication failed: server error", b"")
            self._refuse(f"server error {e.__class__.__name__}", user=safe(self.sasl.user))
            return
        if header is None:
            self.client_out += frame(step.challenge)
        else:
            self.client_out += self._sasl_authenticate_response(header, 0, None, step.challenge)
        if step.done:
            self.state = "open"
            self.raw_sasl = False
            self.stats.log("authenticated", authenticated=True, mechanism=self.sasl.name,
                           user=safe(self.sasl.user), tls=self.tls_note, peer=self.peer)
            self._connect_upstream()

    @staticmethod
    def _sasl_authenticate_response(header: RequestHeader, error: int, message: str | None,
                                    auth_bytes: bytes) -> bytes:
        body = i16(error) + enc_string(message) + enc_bytes(auth_bytes)
        if header.api_version >= 1:
            body += i64(0)  # session_lifetime_ms: 0, no re-authentication required
        return frame(i32(header.correlation_id) + body)

    def _refuse(self, reason: str, close_now: bool = False, **fields) -> None:
        fields = {"mechanism": self.config.mechanism or "none", **fields}
        # reason is quoted (it has spaces); it only ever holds names, never a secret.
        self.stats.log("refused", refused=True, **fields, reason=json.dumps(reason), peer=self.peer)
        self._end(self.client)
        if close_now:
            self.done = True

    def _forward_request(self, payload: bytes) -> None:
        try:
            header = parse_request_header(payload)
            expects = header.api_key != PRODUCE or produce_expects_response(header, payload)
        except Truncated:
            self.done = True
            return
        if header.api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            # Re-authentication (KIP-368) is never asked for (session lifetime 0); anything else is a bug.
            self.done = True
            return
        if header.api_key == API_VERSIONS and not self.pending and not self.upstream_out:
            # Nothing is in flight, so answering here keeps the response order, and the upstream never sees an
            # ApiVersions version it may not know (the mock of librdkafka 2.0 stops at v2; clients start at v3).
            self.client_out += api_versions_response(header.correlation_id, header.api_version, self.config.apis)
            return
        if expects:
            self.pending[header.correlation_id] = (header.api_key, header.api_version)
        self.upstream_out += frame(payload)

    def _upstream_frame(self, payload: bytes) -> None:
        correlation_id = struct.unpack(">i", payload[:4])[0] if len(payload) >= 4 else None
        api_key, version = self.pending.pop(correlation_id, (None, None))
        if api_key == API_VERSIONS:
            # Asked while other requests were in flight, so it went upstream to keep the order; its answer is
            # replaced by the gateway's (SASL APIs, clamped versions).
            self.client_out += api_versions_response(correlation_id, version, self.config.apis)
        elif api_key in (METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER):
            try:
                self.client_out += rewrite_response(api_key, version, payload, self.gw.listener_for)
            except Truncated as e:
                self.stats.log("unparsable response", api_key=api_key, version=version, error=safe(str(e), 120))
                self.done = True
        else:
            self.client_out += frame(payload)


# ---------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------

def host_ports(text: str) -> list[tuple[str, int]]:
    """HOST:PORT[,HOST:PORT...], as mock-kafka prints its bootstrap servers."""
    out = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {text!r}")
        out.append((host.strip("[]"), int(port)))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", type=host_ports, required=True,
                   help="plaintext bootstrap broker(s) HOST:PORT[,HOST:PORT...]; others are found in Metadata")
    p.add_argument("--mechanism", choices=MECHANISMS, help="SASL mechanism to enforce (none: no SASL)")
    p.add_argument("--user", help="the one accepted user (PLAIN/SCRAM; sub of unsecured OAUTHBEARER tokens)")
    p.add_argument("--password-file", help="file holding the user's password, re-read on every authentication")
    p.add_argument("--tls-cert", help="PEM server certificate (chain): listeners speak TLS 1.2+")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--client-ca", help="PEM CA: require and verify a client certificate (mTLS)")
    p.add_argument("--oidc-client-id", help="run an OIDC client-credentials token endpoint for this client id")
    p.add_argument("--oidc-client-secret-file", help="file holding the client secret, re-read on every request")
    p.add_argument("--oidc-token-lifetime", type=int, default=3600, help="seconds an issued token is valid")
    p.add_argument("--verbose", action="store_true", help="also log listeners and connection errors")
    args = p.parse_args(argv)
    if args.oidc_client_id or args.oidc_client_secret_file:
        if not (args.oidc_client_id and args.oidc_client_secret_file):
            p.error("--oidc-client-id and --oidc-client-secret-file go together")
        if args.mechanism not in (None, "OAUTHBEARER"):
            p.error("--oidc-* needs --mechanism OAUTHBEARER")
        args.mechanism = "OAUTHBEARER"
    if args.mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (args.user and args.password_file):
        p.error(f"--mechanism {args.mechanism} needs --user and --password-file")
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        p.error("--client-ca needs --tls-cert/--tls-key")
    return args


def tls_context(cert: str, key: str, client_ca: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    return ctx


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = Config(upstream=args.upstream, mechanism=args.mechanism, user=args.user,
                    password_file=args.password_file, mtls=bool(args.client_ca),
                    oidc_client_id=args.oidc_client_id, oidc_client_secret_file=args.oidc_client_secret_file,
                    verbose=args.verbose)
    if args.tls_cert:
        config.tls = tls_context(args.tls_cert, args.tls_key, args.client_ca)
    try:
        upstream_apis = query_upstream_api_versions(*config.upstream[0])
    except (OSError, RuntimeError, Truncated) as e:
        print(f"kafka_gateway: upstream {config.upstream[0][0]}:{config.upstream[0][1]} unusable: {e}",
              file=sys.stderr)
        return 2
    config.apis = advertised_apis(upstream_apis, sasl=bool(config.mechanism))

    stats = Stats()
    gateway = Gateway(config, stats)
    ready: dict[str, str] = {}
    token_server = None
    if config.oidc_client_id:
        gateway.issuer = TokenIssuer(args.oidc_token_lifetime)
        token_server = start_token_endpoint(config, gateway.issuer, stats)
        config.token_endpoint = f"http://127.0.0.1:{token_server.server_address[1]}/token"
    ready["bootstrap"] = ",".join("%s:%d" % gateway.listener_for(*up) for up in config.upstream)
    if token_server:
        ready["tokenEndpoint"] = config.token_endpoint

    stop = threading.Event()
    # A parent may start us with signals blocked (Foundation's Process passes its thread's mask on): unblock
    # the ones we act on, or SIGTERM would never arrive.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1})
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=gateway.drop_connections, daemon=True).start())
    print(json.dumps(ready), flush=True)
    while not stop.wait(0.5):
        pass
    gateway.close()
    if token_server:
        token_server.shutdown()
        token_server.server_close()
    print(f"stopped authenticated={stats.authenticated} refused={stats.refused}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

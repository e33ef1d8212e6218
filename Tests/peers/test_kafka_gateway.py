#!/usr/bin/env python3
"""Tests of Tests/peers/kafka_gateway.py: real librdkafka clients through the gateway to librdkafka's mock cluster.

For each security setup (passthrough, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with unsecured tokens,
OAUTHBEARER through the gateway's OIDC token endpoint, TLS, mTLS, SASL_SSL with SCRAM) records are produced
through the gateway and consumed back in a consumer group (so FindCoordinator and OffsetCommit go through it
too), with confluent_kafka (librdkafka 2.16, from .venv) and kcat (Debian's, librdkafka 2.0.2); then a client
with a wrong secret (or no / an untrusted client certificate) must get an authentication error, the gateway's
refused counter must have gone up, and no secret may appear in its stderr. Raw-socket tests check every
Metadata / FindCoordinator / ApiVersions version byte for byte against the mock's own answers, on the mock of
the system librdkafka and, when the .venv has it, of librdkafka 2.16.

    .venv/bin/python Tests/peers/test_kafka_gateway.py          # one line per test, "N passed, N failed" last
    .venv/bin/python Tests/peers/test_kafka_gateway.py scram    # only the tests whose name contains a word given
    python3 -m pytest Tests/peers -q                            # the same tests under pytest

Needs .build/debug/apns-relay-sandbox (the mock cluster), openssl, and kcat and/or confluent_kafka (under a
python without it, the .venv's site-packages are used when they match this interpreter).
"""
from __future__ import annotations

import base64
import concurrent.futures
import errno
import glob
import json
import logging
import os
import pathlib
import queue
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
SANDBOX = REPO / ".build" / "debug" / "apns-relay-sandbox"
GATEWAY = HERE / "kafka_gateway.py"
VENV_SITE = REPO / ".venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"

sys.path.insert(0, str(HERE))
import kafka_gateway as kg  # noqa: E402  (the encoders, for the raw-protocol tests)


def _import_confluent_kafka():
    """confluent_kafka from this interpreter, else from the repo's .venv (same Python version: same ABI)."""
    try:
        import confluent_kafka
        return confluent_kafka
    except ImportError:
        pass
    if (VENV_SITE / "confluent_kafka").is_dir():
        sys.path.append(str(VENV_SITE))
        try:
            import confluent_kafka
            return confluent_kafka
        except ImportError:
            return None
    return None


ck = _import_confluent_kafka()
KCAT = shutil.which("kcat")
USER = "relay"
SCENARIO_TIMEOUT_S = 30.0


class Skip(Exception):
    pass


def skip(reason: str):
    if "pytest" in sys.modules:
        import pytest
        pytest.skip(reason)
    raise Skip(reason)


# ---------------------------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------------------------

class LinePump:
    """Reads a pipe's lines on a thread, so every wait on them can have a deadline."""

    def __init__(self, pipe):
        self.queue: queue.Queue = queue.Queue()
        self.lines: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe):
        for line in pipe:
            with self.lock:
                self.lines.append(line)
            self.queue.put(line)
        self.queue.put(None)

    def next_line(self, timeout: float, what: str) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{what}: no line within {timeout:.0f} s") from None
        if line is None:
            raise AssertionError(f"{what}: exited before printing a line")
        return line.strip()

    def text(self) -> str:
        with self.lock:
            return "".join(self.lines)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    """Polls predicate until it returns a truthy value; the deadline is the verdict, the interval is not."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Mock:
    """librdkafka's mock cluster from apns-relay-sandbox; lib_dir swaps in another librdkafka."""

    def __init__(self, topics: list[str], log: pathlib.Path, lib_dir: pathlib.Path | None = None,
                 brokers: int = 1):
        env = dict(os.environ)
        if lib_dir:
            env["LD_LIBRARY_PATH"] = str(lib_dir)
        args = [str(SANDBOX), "mock-kafka", "--brokers", str(brokers)]
        for t in topics:
            args += ["--topic", f"{t}:2"]
        self.log = open(log, "w")
        deadline = time.monotonic() + 60
        while True:
            try:
                self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
                break
            except OSError as e:
                # ETXTBSY: a build is writing the binary right now; it is usable again once linked.
                if e.errno != errno.ETXTBSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        try:
            self.bootstrap = LinePump(self.proc.stdout).next_line(20, "mock-kafka")
        except AssertionError:
            self.stop()
            raise
        host, port = self.bootstrap.split(",")[0].rsplit(":", 1)
        self.host, self.port = host, int(port)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


class Gateway:
    """kafka_gateway.py as a subprocess: its ready line, its stderr, its counters."""

    def __init__(self, *args: str, upstream: str | None = None):
        cmd = [sys.executable, str(GATEWAY), "--upstream", upstream or ENV.mock.bootstrap, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err = LinePump(self.proc.stderr)
        try:
            ready = json.loads(LinePump(self.proc.stdout).next_line(15, "kafka_gateway"))
        except AssertionError as e:
            self.proc.kill()
            raise AssertionError(f"{e}; stderr: {self.err.text()[-2000:]}") from None
        self.bootstrap: str = ready["bootstrap"]
        self.port = int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])
        self.token_endpoint: str | None = ready.get("tokenEndpoint")

    def stderr(self) -> str:
        return self.err.text()

    def counter(self, name: str) -> int:
        found = re.findall(rf"\b{name}=(\d+)", self.stderr())
        return int(found[-1]) if found else 0

    def wait_refused(self, at_least: int = 1, timeout: float = 10):
        wait_until(lambda: self.counter("refused") >= at_least, timeout, f"refused >= {at_least} in the gateway log")

    def stop(self):
        """SIGTERM must end it cleanly: exit 0, no traceback."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError("gateway did not exit within 10 s of SIGTERM")
        assert self.proc.returncode == 0, f"gateway exit {self.proc.returncode}: {self.stderr()[-2000:]}"
        assert "Traceback" not in self.stderr(), self.stderr()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.stop()
        elif self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


# ---------------------------------------------------------------------------------------------------------------
# Module environment: certificates, secrets, the mock clusters
# ---------------------------------------------------------------------------------------------------------------

OPENSSL_CONF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
authorityKeyIdentifier = keyid
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
"""


def make_certificates(d: pathlib.Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 (SAN IP), a client certificate; and a rogue CA + client."""
    conf = d / "openssl.cnf"
    conf.write_text(OPENSSL_CONF)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)

    out = {}
    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", *ec, "-config", conf, "-extensions", "ca", "-days", "2",
                "-subj", f"/CN=peers test {ca}", "-keyout", d / f"{ca}.key", "-out", d / f"{ca}.pem")
        out[ca] = str(d / f"{ca}.pem")
    for name, cn, section, ca in (("server", "127.0.0.1", "server", "ca"), ("client", USER, "client", "ca"),
                                  ("rogue-client", USER, "client", "rogue-ca")):
        openssl("req", *ec, "-config", conf, "-subj", f"/CN={cn}", "-keyout", d / f"{name}.key",
                "-out", d / f"{name}.csr")
        openssl("x509", "-req", "-in", d / f"{name}.csr", "-CA", d / f"{ca}.pem", "-CAkey", d / f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-extfile", conf, "-extensions", section,
                "-out", d / f"{name}.pem")
        out[name], out[f"{name}-key"] = str(d / f"{name}.pem"), str(d / f"{name}.key")
    return out


class Env:
    def __init__(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="peers-gateway-"))
        self.mock = self.current_mock = None
        try:
            self._start()
        except BaseException:
            self.close()  # teardown_module never sees a half-made Env
            raise

    def _start(self):
        self.certs = make_certificates(self.tmp)
        self.password = "pw-" + secrets.token_urlsafe(12)
        self.wrong_password = "wrong-" + secrets.token_urlsafe(12)
        self.password_file = self._secret_file("password", self.password)
        self.client_secret = "cs-" + secrets.token_urlsafe(12)
        self.wrong_client_secret = "wrongcs-" + secrets.token_urlsafe(12)
        self.client_secret_file = self._secret_file("client-secret", self.client_secret)
        topics = [f"peers-{s}-{client}" for s in SCENARIOS for client in ("ck", "kcat")] + ["peers-raw"]
        # The .venv's confluent_kafka wheel ships a current librdkafka; the sandbox loads it instead of the
        # system one through LD_LIBRARY_PATH (as the Makefile's second Kafka pass does), giving a newer mock
        # (flexible Metadata up to v12, FindCoordinator v3). PEERS_MOCK=current runs the scenarios on it too.
        lib_dir = None
        libs = sorted(glob.glob(str(VENV_SITE / "confluent_kafka.libs" / "librdkafka-*.so.1")))
        if libs:
            lib_dir = self.tmp / "librdkafka-current"
            lib_dir.mkdir()
            (lib_dir / "librdkafka.so.1").symlink_to(libs[0])
        on_current = os.environ.get("PEERS_MOCK") == "current" and lib_dir is not None
        self.mock = Mock(topics, self.tmp / "mock.log", lib_dir if on_current else None)
        self.current_mock = Mock(["peers-raw"], self.tmp / "mock-current.log", lib_dir) if lib_dir else None

    def _secret_file(self, name: str, value: str) -> str:
        path = self.tmp / name
        path.write_text(value + "\n")
        return str(path)

    def close(self):
        for m in (self.mock, self.current_mock):
            if m:
                m.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


ENV: Env = None  # type: ignore[assignment]
SCENARIOS = ("passthrough", "plain", "scram256", "scram512", "oauth", "oidc", "tls", "mtls", "saslssl",
             "multibroker")


def setup_module(module=None):
    global ENV
    if not SANDBOX.is_file():
        raise RuntimeError(f"{SANDBOX} is missing: build it first (swift build --product apns-relay-sandbox)")
    if ENV is None:
        ENV = Env()


def teardown_module(module=None):
    global ENV, _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)  # scenarios end on their own deadlines
        _POOL = None
        _STARTED.clear()
    if ENV is not None:
        ENV.close()
        ENV = None


# ---------------------------------------------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------------------------------------------

# librdkafka's own log lines (the refused clients' FAIL lines) go here instead of the test's stderr.
LIBRDKAFKA_LOG = logging.getLogger("peers.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.propagate = False
AUTH_ERRORS = ("_AUTHENTICATION",)
TLS_ERRORS = ("_SSL", "_TRANSPORT")  # a failed handshake, or (TLS 1.3) the server's alert on the first read


def kcat_args(conf: dict) -> list[str]:
    return [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]


def ck_round_trip(bootstrap: str, conf: dict, topic: str, n: int = 5) -> str:
    """Produce n records, then consume them back in a new consumer group and commit (the coordinator path)."""
    errors: list = []
    common = {"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append, "logger": LIBRDKAFKA_LOG}
    values = {f"{topic}-{i}-{uuid.uuid4().hex[:8]}" for i in range(n)}
    delivered: list = []
    producer = ck.Producer({**common, "linger.ms": 5})
    for v in sorted(values):
        producer.produce(topic, v.encode(), on_delivery=lambda err, msg: delivered.append(err))
    remaining = producer.flush(15)
    assert remaining == 0 and len(delivered) == n and not any(delivered), (
        f"produce: {remaining} undelivered, reports {delivered}, errors {[e.str() for e in errors]}")
    consumer = ck.Consumer({**common, "group.id": f"{topic}-{uuid.uuid4().hex[:8]}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen: set = set()
        deadline = time.monotonic() + 25
        while not values <= seen and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
        assert values <= seen, f"consumed {len(seen & values)} of {n}; errors {[e.str() for e in errors]}"
        consumer.commit(asynchronous=False)  # OffsetCommit goes to the coordinator FindCoordinator named
    finally:
        consumer.close()
    bad = [e.str() for e in errors if e.name() in AUTH_ERRORS + ("_SSL",)]
    assert not bad, f"the good client saw {bad}"
    return f"confluent_kafka {ck.libversion()[0]}: {n} records round trip"


def ck_refused(bootstrap: str, conf: dict, expected: tuple[str, ...]) -> str:
    """A client with a wrong secret must be told so (error callback), not just time out."""
    errors: list = []
    producer = ck.Producer({"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append,
                            "logger": LIBRDKAFKA_LOG})

    def refused():
        producer.poll(0.1)  # serves the error callback
        return any(e.name() in expected for e in errors)

    wait_until(refused, 15,
               f"a confluent_kafka error in {expected}; got {[(e.name(), e.str()) for e in errors]}")
    first = next(e for e in errors if e.name() in expected)
    return f"{first.name()}: {first.str()}"


def kcat_round_trip(bootstrap: str, conf: dict, topic: str, n: int = 5, produce_conf: dict | None = None) -> str:
    x = kcat_args(conf)
    values = {f"{topic}-{i}-{uuid.uuid4().hex[:8]}" for i in range(n)}
    r = subprocess.run([KCAT, "-b", bootstrap, *x, *kcat_args(produce_conf or {}), "-P", "-t", topic],
                       input="\n".join(sorted(values)) + "\n", capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, f"kcat -P: {r.stderr[-1500:]}"
    r = subprocess.run([KCAT, "-b", bootstrap, *x, "-X", "auto.offset.reset=earliest", "-q", "-c", str(n),
                        "-G", f"{topic}-{uuid.uuid4().hex[:8]}", topic],
                       capture_output=True, text=True, timeout=25)
    assert r.returncode == 0, f"kcat -G: {r.stderr[-1500:]}"
    got = set(r.stdout.split())
    assert got == values, f"kcat consumed {sorted(got)}, produced {sorted(values)}"
    return f"kcat (librdkafka {KCAT_LIBRDKAFKA}): {n} records round trip"


def kcat_refused(bootstrap: str, conf: dict, expected_words: tuple[str, ...]) -> str:
    r = subprocess.run([KCAT, "-b", bootstrap, *kcat_args(conf), "-L", "-m", "4"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0, f"kcat -L with a wrong secret succeeded: {r.stdout[:500]}"
    assert any(w in r.stderr for w in expected_words), f"kcat said: {r.stderr[-1500:]}"
    return next(line for line in r.stderr.splitlines() if any(w in line for w in expected_words))[-160:]


def _kcat_librdkafka() -> str:
    if not KCAT:
        return "-"
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"librdkafka ([\d.]+)", out)
    return m.group(1) if m else "?"


KCAT_LIBRDKAFKA = _kcat_librdkafka()


def kcat_has_oidc() -> bool:
    """kcat's librdkafka only does OIDC when built with libcurl (Debian's 2.0.2 build is not)."""
    r = subprocess.run([KCAT, "-X", "sasl.oauthbearer.method=oidc", "-b", "127.0.0.1:1", "-L", "-m", "0"],
                       capture_output=True, text=True, timeout=10)
    return "not supported in this build" not in r.stderr


# ---------------------------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------------------------

def sasl(mechanism: str, password: str, tls: bool = False) -> dict:
    conf = {"security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": USER, "sasl.password": password}
    if tls:
        conf["ssl.ca.location"] = ENV.certs["ca"]
    return conf


def run_scenario(name: str, gateway_args: list[str], good, bad=None, expected=AUTH_ERRORS,
                 kcat_words=("Authentication failed",), kcat_good=True, kcat_bad="same", produce_conf=None,
                 check_log=None) -> list[str]:
    """Good clients round-trip records while bad ones are refused, all at once; returns one note per client.

    good/bad are client configurations (dicts, or functions of the gateway for the OIDC token URL); kcat_bad
    "same" reuses bad for kcat, a dict gives kcat its own bad configuration, None skips it. check_log gets the
    gateway's stderr for scenario-specific assertions.
    """
    if ck is None and not KCAT:
        skip("neither confluent_kafka nor kcat is available")
    notes = []
    with Gateway(*gateway_args) as gw:
        resolve = (lambda c: c(gw) if callable(c) else c)
        good_conf, bad_conf = resolve(good), resolve(bad)
        kcat_bad_conf = bad_conf if kcat_bad == "same" else resolve(kcat_bad)
        jobs = {}
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            if ck:
                jobs["confluent_kafka good"] = pool.submit(ck_round_trip, gw.bootstrap, good_conf,
                                                           f"peers-{name}-ck")
                if bad_conf is not None:
                    jobs["confluent_kafka bad"] = pool.submit(ck_refused, gw.bootstrap, bad_conf, expected)
            if KCAT:
                if kcat_good:
                    jobs["kcat good"] = pool.submit(kcat_round_trip, gw.bootstrap, good_conf,
                                                    f"peers-{name}-kcat", produce_conf=produce_conf)
                if kcat_bad_conf is not None:
                    jobs["kcat bad"] = pool.submit(kcat_refused, gw.bootstrap, kcat_bad_conf, kcat_words)
            notes += [f"{k}: {f.result(timeout=SCENARIO_TIMEOUT_S)}" for k, f in jobs.items()]
        assert gw.counter("authenticated") >= 1, gw.stderr()
        if bad_conf is not None or kcat_bad_conf is not None:
            gw.wait_refused(1)  # the control: a refusal really happened on the gateway's side
        else:
            assert gw.counter("refused") == 0, gw.stderr()
        log = gw.stderr()
        assert_no_secrets(log)
        if check_log:
            check_log(log)
    return notes


def assert_no_secrets(log: str):
    for word in (ENV.password, ENV.wrong_password, ENV.client_secret, ENV.wrong_client_secret):
        assert word not in log, f"a secret is in the gateway's stderr:\n{log}"


def scenario_passthrough():
    """No TLS, no SASL: the control. Nothing may be refused; kcat produces with acks=0 (no Produce response)."""
    return run_scenario("passthrough", [], good={}, produce_conf={"acks": "0"})


def scenario_plain():
    return run_scenario("plain", ["--mechanism", "PLAIN", "--user", USER, "--password-file", ENV.password_file],
                        good=sasl("PLAIN", ENV.password), bad=sasl("PLAIN", ENV.wrong_password))


def scenario_scram256():
    return run_scenario("scram256", ["--mechanism", "SCRAM-SHA-256", "--user", USER,
                                     "--password-file", ENV.password_file],
                        good=sasl("SCRAM-SHA-256", ENV.password), bad=sasl("SCRAM-SHA-256", ENV.wrong_password))


def scenario_scram512():
    return run_scenario("scram512", ["--mechanism", "SCRAM-SHA-512", "--user", USER,
                                     "--password-file", ENV.password_file],
                        good=sasl("SCRAM-SHA-512", ENV.password), bad=sasl("SCRAM-SHA-512", ENV.wrong_password))


def unsecured_oauth(principal: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": f"principal={principal}"}


def scenario_oauth():
    """librdkafka's own unsecured JWT (alg none) for principal relay; another principal is refused."""
    return run_scenario("oauth", ["--mechanism", "OAUTHBEARER", "--user", USER],
                        good=unsecured_oauth(USER), bad=unsecured_oauth("mallory"))


def oidc(gw: Gateway, secret: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": USER,
            "sasl.oauthbearer.client.secret": secret, "sasl.oauthbearer.token.endpoint.url": gw.token_endpoint,
            "sasl.oauthbearer.scope": "kafka"}


def scenario_oidc():
    """Client credentials at the gateway's token endpoint (an http:// URL); a wrong client secret gets no token,
    and a token the endpoint did not issue (kcat's unsecured one) is refused by the broker side."""
    if ck is None:
        skip("OIDC needs confluent_kafka (kcat's librdkafka has no OIDC)")
    kcat_good = bool(KCAT) and kcat_has_oidc()
    notes = [] if kcat_good or not KCAT else [
        f"kcat (librdkafka {KCAT_LIBRDKAFKA}) has no OIDC (built without libcurl): kcat only checks that an "
        "unsecured token is refused"]
    return notes + run_scenario(
        "oidc", ["--oidc-client-id", USER, "--oidc-client-secret-file", ENV.client_secret_file],
        good=lambda gw: oidc(gw, ENV.client_secret), bad=lambda gw: oidc(gw, ENV.wrong_client_secret),
        kcat_good=kcat_good, kcat_bad=unsecured_oauth(USER), check_log=check_token_refused)


def check_token_refused(log: str):
    assert "token refused client_id=relay reason=invalid_client" in log, log


def scenario_tls():
    """Server certificate only; a client that does not trust the CA aborts the handshake (gateway: tls refused)."""
    good = {"security.protocol": "SSL", "ssl.ca.location": ENV.certs["ca"]}
    bad = {"security.protocol": "SSL", "ssl.ca.location": ENV.certs["rogue-ca"]}
    return run_scenario("tls", ["--tls-cert", ENV.certs["server"], "--tls-key", ENV.certs["server-key"]],
                        good=good, bad=bad, expected=TLS_ERRORS, kcat_words=("SSL", "certificate"))


def scenario_mtls():
    """A client certificate is required and verified: none (confluent_kafka) or a rogue CA's (kcat) is refused."""
    base = {"security.protocol": "SSL", "ssl.ca.location": ENV.certs["ca"]}
    good = {**base, "ssl.certificate.location": ENV.certs["client"], "ssl.key.location": ENV.certs["client-key"]}
    rogue = {**base, "ssl.certificate.location": ENV.certs["rogue-client"],
             "ssl.key.location": ENV.certs["rogue-client-key"]}
    gw_args = ["--tls-cert", ENV.certs["server"], "--tls-key", ENV.certs["server-key"],
               "--client-ca", ENV.certs["ca"]]

    def check(log: str):
        assert "client_cert=CN:relay" in log and "tls refused:" in log, log

    return run_scenario("mtls", gw_args, good=good, bad=base, expected=TLS_ERRORS, kcat_bad=rogue,
                        kcat_words=("SSL", "certificate", "Disconnected", "transport"), check_log=check)


def scenario_saslssl():
    gw_args = ["--tls-cert", ENV.certs["server"], "--tls-key", ENV.certs["server-key"],
               "--mechanism", "SCRAM-SHA-512", "--user", USER, "--password-file", ENV.password_file]

    def check(log: str):
        assert re.search(r"authenticated mechanism=SCRAM-SHA-512 user=relay tls=TLSv1\.[23]", log), log

    return run_scenario("saslssl", gw_args, good=sasl("SCRAM-SHA-512", ENV.password, tls=True),
                        bad=sasl("SCRAM-SHA-512", ENV.wrong_password, tls=True), check_log=check)


def scenario_multibroker():
    """Three upstream brokers: a gateway listener for each (the bootstrap list), and Metadata names only those."""
    mock = Mock(["peers-multibroker-ck", "peers-multibroker-kcat"], ENV.tmp / "mock-3.log", brokers=3)
    try:
        with Gateway("--mechanism", "SCRAM-SHA-256", "--user", USER, "--password-file", ENV.password_file,
                     upstream=mock.bootstrap) as gw:
            conf = sasl("SCRAM-SHA-256", ENV.password)
            assert len(gw.bootstrap.split(",")) == 3, gw.bootstrap
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                jobs = [pool.submit(ck_round_trip, gw.bootstrap, conf, "peers-multibroker-ck")] if ck else []
                if KCAT:
                    jobs.append(pool.submit(kcat_round_trip, gw.bootstrap.split(",")[0], conf,
                                            "peers-multibroker-kcat"))
                notes = [f.result(timeout=SCENARIO_TIMEOUT_S) for f in jobs]
            if ck:
                producer = ck.Producer({"bootstrap.servers": gw.bootstrap.split(",")[0], **conf,
                                        "logger": LIBRDKAFKA_LOG})
                brokers = {f"{b.host}:{b.port}" for b in producer.list_topics(timeout=10).brokers.values()}
                assert brokers == set(gw.bootstrap.split(",")), (brokers, gw.bootstrap, mock.bootstrap)
                notes.append(f"Metadata names the 3 gateway listeners {sorted(brokers)}")
            assert gw.counter("refused") == 0, gw.stderr()
            assert_no_secrets(gw.stderr())
            return notes
    finally:
        mock.stop()


# The scenarios run concurrently (a consumer group's first join waits ~3 s in the mock, so one after the other
# they would take most of a minute); each test_* below waits for its own scenario and reports it.
_STARTED: dict[str, concurrent.futures.Future] = {}
_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def start_scenarios(names=SCENARIOS):
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(len(SCENARIOS), thread_name_prefix="scenario")
    for name in names:
        if name not in _STARTED:
            _STARTED[name] = _POOL.submit(globals()[f"scenario_{name}"])


def finish_scenario(name: str):
    start_scenarios()  # under pytest the first scenario test starts them all
    try:
        notes = _STARTED[name].result(timeout=SCENARIO_TIMEOUT_S * 2)
    except Skip as e:
        skip(str(e))
    for note in notes:
        print(f"    {name}: {note}")


TEST_SCENARIO = {"test_passthrough": "passthrough", "test_plain": "plain", "test_scram_sha_256": "scram256",
                 "test_scram_sha_512": "scram512", "test_oauthbearer_unsecured": "oauth",
                 "test_oauthbearer_oidc": "oidc", "test_tls": "tls", "test_mtls": "mtls",
                 "test_sasl_ssl_scram": "saslssl", "test_multiple_brokers": "multibroker"}


def test_passthrough():
    finish_scenario("passthrough")


def test_plain():
    finish_scenario("plain")


def test_scram_sha_256():
    finish_scenario("scram256")


def test_scram_sha_512():
    finish_scenario("scram512")


def test_oauthbearer_unsecured():
    finish_scenario("oauth")


def test_oauthbearer_oidc():
    finish_scenario("oidc")


def test_tls():
    finish_scenario("tls")


def test_mtls():
    finish_scenario("mtls")


def test_sasl_ssl_scram():
    finish_scenario("saslssl")


def test_multiple_brokers():
    finish_scenario("multibroker")


def test_oidc_token_endpoint():
    """The endpoint itself: Basic or form credentials, a JWT librdkafka can parse, 401 for a wrong secret."""
    with Gateway("--oidc-client-id", USER, "--oidc-client-secret-file", ENV.client_secret_file) as gw:
        def post(form: dict, basic: tuple[str, str] | None):
            req = urllib.request.Request(gw.token_endpoint, data=urllib.parse.urlencode(form).encode())
            if basic:
                req.add_header("Authorization", "Basic " + base64.b64encode(":".join(basic).encode()).decode())
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        status, body = post({"grant_type": "client_credentials", "scope": "kafka"}, (USER, ENV.client_secret))
        assert status == 200 and body["token_type"] == "bearer" and body["expires_in"] == 3600, body
        header, claims, _ = (json.loads(kg.b64url_decode(p)) if i < 2 else p
                             for i, p in enumerate(body["access_token"].split(".")))
        assert header["alg"] == "HS256" and claims["sub"] == USER and claims["scope"] == "kafka", claims
        assert claims["iat"] <= time.time() < claims["exp"], claims
        status, form_body = post({"grant_type": "client_credentials", "client_id": USER,
                                  "client_secret": ENV.client_secret}, None)
        assert status == 200, form_body
        assert post({"grant_type": "client_credentials"}, (USER, ENV.wrong_client_secret)) == (
            401, {"error": "invalid_client"})
        assert post({"grant_type": "password"}, (USER, ENV.client_secret))[0] == 400
        gw.wait_refused(2)
        log = gw.stderr()
        for word in (ENV.client_secret, ENV.wrong_client_secret, body["access_token"], form_body["access_token"]):
            assert word not in log, log


def test_password_rotation():
    """The password file is re-read on every authentication: after a rotation the old one is refused."""
    if ck is None:
        skip("needs confluent_kafka")
    path = ENV.tmp / "rotating-password"
    old, new = "old-" + secrets.token_urlsafe(9), "new-" + secrets.token_urlsafe(9)
    path.write_text(old)
    with Gateway("--mechanism", "SCRAM-SHA-256", "--user", USER, "--password-file", str(path)) as gw:
        def metadata_ok(password: str):
            producer = ck.Producer({"bootstrap.servers": gw.bootstrap, **sasl("SCRAM-SHA-256", password),
                                    "logger": LIBRDKAFKA_LOG})
            return producer.list_topics(timeout=10).brokers

        assert metadata_ok(old)
        path.write_text(new + "\n")
        before = gw.counter("refused")
        ck_refused(gw.bootstrap, sasl("SCRAM-SHA-256", old), AUTH_ERRORS)
        gw.wait_refused(before + 1)
        assert metadata_ok(new)
        assert old not in gw.stderr() and new not in gw.stderr(), gw.stderr()


# ---------------------------------------------------------------------------------------------------------------
# Raw protocol: every version of the rewritten responses, byte for byte against the mock's own
# ---------------------------------------------------------------------------------------------------------------

class RawClient:
    """A bare Kafka-protocol client: frames in, frames out."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation_id = 100

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Sends one request; returns the response payload (without size prefix)."""
        self.correlation_id += 1
        header = kg.i16(api_key) + kg.i16(version) + kg.i32(self.correlation_id) + kg.enc_string("peers-raw")
        if kg.is_flexible(api_key, version):
            header += kg.uvarint(0)
        self.send(header + body)
        payload = self.receive()
        assert kg.Reader(payload).int32() == self.correlation_id
        return payload

    def send(self, payload: bytes):
        self.sock.sendall(kg.frame(payload))

    def receive(self) -> bytes:
        return kg.read_frame_blocking(self.sock)

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def api_versions(client: RawClient, version: int) -> dict[int, tuple[int, int]]:
    body = kg.enc_string("peers", True) + kg.enc_string("1", True) + kg.uvarint(0) if version >= 3 else b""
    r = kg.Reader(client.request(kg.API_VERSIONS, version, body))
    r.int32()  # response header v0 always, even for v3
    assert r.int16() == 0
    apis = {}
    for _ in range(r.array_len(compact=version >= 3)):
        key, lo, hi = r.int16(), r.int16(), r.int16()
        if version >= 3:
            r.tagged_fields()
        apis[key] = (lo, hi)
    if version >= 1:
        r.int32()  # throttle
    if version >= 3:
        r.tagged_fields()
    assert r.pos == len(r.data), "trailing bytes in the ApiVersions response"
    return apis


def metadata_request(version: int, topic: str) -> bytes:
    flexible = version >= 9
    body = kg.uvarint(2) if flexible else kg.i32(1)
    if version >= 10:
        body += bytes(16)  # topic id: zero, the name counts
    body += kg.enc_string(topic, flexible)
    if flexible:
        body += kg.uvarint(0)
    if version >= 4:
        body += b"\x00"  # allow_auto_topic_creation
    if 8 <= version <= 10:
        body += b"\x00"  # include_cluster_authorized_operations
    if version >= 8:
        body += b"\x00"  # include_topic_authorized_operations
    if flexible:
        body += kg.uvarint(0)
    return body


def find_coordinator_request(version: int, group: str) -> bytes:
    if version >= 4:
        return b"\x00" + kg.uvarint(2) + kg.enc_string(group, True) + kg.uvarint(0)
    body = kg.enc_string(group, version >= 3)
    if version >= 1:
        body += b"\x00"  # key_type: group
    if version >= 3:
        body += kg.uvarint(0)
    return body


def expected_rewrite(upstream_payload: bytes, compact: bool, up_port: int, gw_port: int) -> bytes:
    """The upstream's response with its one broker address replaced by the gateway's, found by bytes alone."""
    address = kg.enc_string("127.0.0.1", compact)
    needle = address + kg.i32(up_port)
    assert upstream_payload.count(needle) == 1, "the mock's response should name its broker once"
    return kg.frame(upstream_payload.replace(needle, address + kg.i32(gw_port)))


def check_raw_protocol(mock: Mock) -> list[str]:
    notes = []
    with Gateway("--mechanism", "PLAIN", "--user", USER, "--password-file", ENV.password_file,
                 upstream=mock.bootstrap) as gw:
        client = RawClient(gw.port)
        apis = {v: api_versions(client, v) for v in range(4)}
        assert all(a == apis[3] for a in apis.values()), "ApiVersions v0-v3 must list the same APIs"
        assert apis[3][kg.SASL_HANDSHAKE] == (0, 1) and apis[3][kg.SASL_AUTHENTICATE] == (0, 1)
        # A version past v3: UNSUPPORTED_VERSION in the v0 layout, with the range to retry in.
        r = kg.Reader(client.request(kg.API_VERSIONS, 9, b""))
        r.int32()
        assert r.int16() == kg.UNSUPPORTED_VERSION
        # SaslHandshake v0: the SASL token follows as a bare frame (the pre-KIP-152 framing).
        r = kg.Reader(client.request(kg.SASL_HANDSHAKE, 0, kg.enc_string("PLAIN")))
        r.int32()
        assert r.int16() == 0
        client.send(f"\0{USER}\0{ENV.password}".encode())
        assert client.receive() == b"", "PLAIN success is an empty bare frame"
        direct = RawClient(mock.port)
        for api, request in ((kg.METADATA, lambda v: metadata_request(v, "peers-raw")),
                             (kg.FIND_COORDINATOR, lambda v: find_coordinator_request(v, "peers-raw-group"))):
            lo, hi = apis[3][api]
            for version in range(lo, hi + 1):
                direct.correlation_id = client.correlation_id
                upstream = direct.request(api, version, request(version))
                through = client.request(api, version, request(version))
                expected = expected_rewrite(upstream, kg.is_flexible(api, version), mock.port, gw.port)
                assert kg.frame(through) == expected, f"api {api} v{version}: rewritten response differs"
            notes.append(f"{'Metadata' if api == kg.METADATA else 'FindCoordinator'} v{lo}-v{hi}")
        direct.close()
        client.close()

        # SaslHandshake v1 + SaslAuthenticate v0 (no session lifetime in the response), then a forwarded request.
        client = RawClient(gw.port)
        client.request(kg.SASL_HANDSHAKE, 1, kg.enc_string("PLAIN"))
        r = kg.Reader(client.request(kg.SASL_AUTHENTICATE, 0, kg.enc_bytes(f"\0{USER}\0{ENV.password}".encode())))
        r.int32()
        assert (r.int16(), r.string(False), r.bytes_(False), r.pos == len(r.data)) == (0, None, b"", True)
        assert client.request(kg.METADATA, 1, metadata_request(1, "peers-raw"))
        client.close()

        # Refusals: a wrong password on the bare-frame path, an unknown mechanism, a request before SASL.
        before = gw.counter("refused")
        client = RawClient(gw.port)
        client.request(kg.SASL_HANDSHAKE, 0, kg.enc_string("PLAIN"))
        client.send(f"\0{USER}\0{ENV.wrong_password}".encode())
        assert client.closed_by_peer()
        client = RawClient(gw.port)
        r = kg.Reader(client.request(kg.SASL_HANDSHAKE, 1, kg.enc_string("GSSAPI")))
        r.int32()
        assert r.int16() == kg.UNSUPPORTED_SASL_MECHANISM and r.array_len(False) == 1
        assert r.string(False) == "PLAIN" and client.closed_by_peer()
        client = RawClient(gw.port)
        client.send(kg.i16(kg.METADATA) + kg.i16(1) + kg.i32(7) + kg.enc_string("x") + metadata_request(1, "t"))
        assert client.closed_by_peer()
        gw.wait_refused(before + 3)
        assert ENV.wrong_password not in gw.stderr() and ENV.password not in gw.stderr()
    return notes


def test_raw_protocol_system_mock():
    notes = check_raw_protocol(ENV.mock)
    print(f"    raw, mock of the system librdkafka: {', '.join(notes)} byte for byte")


def test_raw_protocol_current_mock():
    if ENV.current_mock is None:
        skip("the .venv has no confluent_kafka wheel with a current librdkafka")
    notes = check_raw_protocol(ENV.current_mock)
    print(f"    raw, mock of librdkafka {ck.libversion()[0] if ck else '(wheel)'}: {', '.join(notes)} byte for byte")


def test_rewrite_versions_offline():
    """Versions no mock serves: FindCoordinator v4 (coordinator array), Metadata with two brokers, flexible v12."""
    seen = []

    def mapper(host, port):
        seen.append((host, port))
        return "127.0.0.1", 40000 + port % 1000

    tag = kg.uvarint(0)
    # FindCoordinator v4: header v1, throttle, [key, node, host, port, error, message, tags], tags.
    entries = [("g1", 1, "broker-a.example", 9092), ("g2", 2, "broker-b.example", 9093)]

    def fc4(rows):
        return kg.i32(5) + tag + kg.i32(0) + kg.uvarint(len(rows) + 1) + b"".join(
            kg.enc_string(k, True) + kg.i32(n) + kg.enc_string(h, True) + kg.i32(p) + kg.i16(0)
            + kg.enc_string(None, True) + tag for k, n, h, p in rows) + tag

    got = kg.rewrite_response(kg.FIND_COORDINATOR, 4, fc4(entries), mapper)
    assert got == kg.frame(fc4([(k, n, "127.0.0.1", 40000 + p % 1000) for k, n, _, p in entries]))
    assert seen == [("broker-a.example", 9092), ("broker-b.example", 9093)]

    # Metadata v12: header v1, throttle, brokers [node, host, port, rack, tags], then a tail kept verbatim.
    tail = kg.enc_string("cluster", True) + kg.i32(1) + kg.uvarint(1) + tag

    def md12(rows):
        return kg.i32(6) + tag + kg.i32(0) + kg.uvarint(len(rows) + 1) + b"".join(
            kg.i32(n) + kg.enc_string(h, True) + kg.i32(p) + kg.enc_string(rack, True) + tag
            for n, h, p, rack in rows) + tail

    brokers = [(1, "b1.example", 9092, "r1"), (2, "b2.example", 9094, None)]
    got = kg.rewrite_response(kg.METADATA, 12, md12(brokers), mapper)
    assert got == kg.frame(md12([(n, "127.0.0.1", 40000 + p % 1000, r) for n, _, p, r in brokers]))
    # DescribeCluster v1 (always flexible): throttle, error, message, endpoint type, cluster id, controller,
    # brokers [id, host, port, rack, tags], authorized operations, tags.
    def dc1(host, port):
        return (kg.i32(8) + tag + kg.i32(0) + kg.i16(0) + kg.enc_string(None, True) + b"\x01"
                + kg.enc_string("cluster", True) + kg.i32(1) + kg.uvarint(2) + kg.i32(1)
                + kg.enc_string(host, True) + kg.i32(port) + kg.enc_string(None, True) + tag + kg.i32(0) + tag)

    assert kg.rewrite_response(kg.DESCRIBE_CLUSTER, 1, dc1("b3.example", 9095), mapper) == kg.frame(
        dc1("127.0.0.1", 40095))
    # Produce: acks=0 has no response, whatever the header and transactional id encodings.
    for version, txn in ((2, b""), (7, kg.enc_string("txn")), (9, kg.enc_string("txn", True)),
                         (9, kg.enc_string(None, True))):
        for acks in (0, 1, -1):
            header = kg.i16(kg.PRODUCE) + kg.i16(version) + kg.i32(1) + kg.enc_string("c")
            header += kg.uvarint(0) if version >= 9 else b""
            payload = header + txn + kg.i16(acks) + kg.i32(1000)
            parsed = kg.parse_request_header(payload)
            assert kg.produce_expects_response(parsed, payload) == (acks != 0), (version, acks)
    # A coordinator-not-available answer (no host) is passed on untouched.
    none = kg.i32(7) + kg.i32(0) + kg.i16(15) + kg.enc_string("not yet") + kg.i32(-1) + kg.enc_string("") + kg.i32(-1)
    assert kg.rewrite_response(kg.FIND_COORDINATOR, 1, none, mapper) == kg.frame(none)


def test_disconnects_propagate():
    """A client hanging up closes its upstream connection, and an upstream hanging up closes the client's."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    accepted: queue.Queue = queue.Queue()

    def serve():
        # The gateway's start-up ApiVersions v0 query is the first connection; answer it, then hand the rest over.
        conn, _ = server.accept()
        with conn:
            correlation_id = kg.Reader(kg.read_frame_blocking(conn), 4).int32()
            apis = [(kg.METADATA, 0, 2), (kg.API_VERSIONS, 0, 2)]
            conn.sendall(kg.frame(kg.i32(correlation_id) + kg.i16(0) + kg.i32(len(apis))
                                  + b"".join(kg.i16(k) + kg.i16(lo) + kg.i16(hi) for k, lo, hi in apis)))
        while True:
            try:
                accepted.put(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    try:
        with Gateway(upstream=f"127.0.0.1:{server.getsockname()[1]}") as gw:
            client = RawClient(gw.port)
            assert api_versions(client, 3)[kg.METADATA] == (0, 2)  # answered by the gateway itself
            upstream = accepted.get(timeout=10)
            upstream.settimeout(10)
            client.close()
            assert upstream.recv(1) == b"", "the upstream connection outlived its client"
            upstream.close()

            client = RawClient(gw.port)
            upstream = accepted.get(timeout=10)
            upstream.close()
            assert client.closed_by_peer(), "the client connection outlived its upstream"
            client.close()
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------------------------
# Direct run: one line per test, "N passed, N failed" last
# ---------------------------------------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    words = [w.lower() for w in argv[1:]]
    tests = [(name, fn) for name, fn in globals().items()
             if name.startswith("test_") and callable(fn) and (not words or any(w in name for w in words))]
    passed = failed = skipped = 0
    started = time.monotonic()
    setup_module()
    try:
        start_scenarios([TEST_SCENARIO[name] for name, _ in tests if name in TEST_SCENARIO])
        for name, fn in tests:
            t0 = time.monotonic()
            try:
                fn()
            except Skip as e:
                skipped += 1
                print(f"skip {name}: {e}", flush=True)
                continue
            except Exception:
                failed += 1
                print(f"FAIL {name} ({time.monotonic() - t0:.1f} s)\n{traceback.format_exc()}", flush=True)
                continue
            passed += 1
            print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        teardown_module()
    print(f"{passed} passed, {failed} failed, {skipped} skipped in {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The pod's peers, each an independent process or server on 127.0.0.1: librdkafka's mock cluster
(`apns-relay-sandbox mock-kafka`), noida-db (a second Kafka-protocol broker, with transactions), the
authenticating SASL/TLS gateway in front of the mock cluster (Tests/peers/kafka_gateway.py), the mock APNs
(`apns-mock`), kcat as producer and reader and a small OTLP/HTTP receiver."""
from __future__ import annotations

import http.server
import json
import os
import pathlib
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / ".build" / "debug"
KAFKA_GATEWAY = ROOT / "Tests" / "peers" / "kafka_gateway.py"


class PeerFailure(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, within: float, what: str, poll: float = 0.05):
    """Returns condition()'s first truthy value; raises naming what did not happen by the deadline."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise PeerFailure(f"{what} did not happen within {within:.0f} s")
        time.sleep(poll)


class Process:
    """A child process with its output in files; stop() is SIGTERM, then SIGKILL."""

    def __init__(self, name: str, argv: list[str], workdir: pathlib.Path):
        self.name = name
        self.stdout_path = workdir / f"{name}.stdout"
        self.stderr_path = workdir / f"{name}.stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def first_line(self, within: float) -> str:
        def line():
            if self.popen.poll() is not None:
                raise PeerFailure(f"{self.name} exited ({self.popen.returncode}): {self.stderr()[-1500:]}")
            text = self.stdout_path.read_text(errors="replace")
            return text.split("\n")[0] if "\n" in text else None
        return wait_until(line, within, f"{self.name} printing where it listens")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


# --- Kafka -----------------------------------------------------------------------------------------------

def mock_kafka(workdir: pathlib.Path, topics: list[str], partitions: int = 3) -> tuple[Process, str]:
    argv = [str(BUILD / "apns-relay-sandbox"), "mock-kafka", "--brokers", "1"]
    for topic in topics:
        argv += ["--topic", f"{topic}:{partitions}"]
    process = Process("mock-kafka", argv, workdir)
    return process, process.first_line(30).strip()


def noida_binary() -> pathlib.Path:
    """The broker binary itself: .venv/bin/noida-db is a Python script whose SIGTERM leaves the broker running."""
    for lib in sorted((ROOT / ".venv" / "lib").glob("python*/site-packages/noida_db/noida-db")):
        os.chmod(lib, 0o755)
        return lib
    raise PeerFailure("noida-db is not installed in .venv (make test installs it from Tests/requirements.txt)")


def noida(workdir: pathlib.Path, topics: list[str], partitions: int = 3) -> tuple[Process, str]:
    port = free_port()
    data = workdir / "noida-data"
    data.mkdir()
    process = Process("noida", [str(noida_binary()), "start", "--only", "kafka", "--host", "127.0.0.1",
                                "--kafka-port", str(port), "--data-dir", str(data)], workdir)

    def listening():
        if process.popen.poll() is not None:
            raise PeerFailure(f"noida-db exited: {process.stderr()[-1500:]}{process.stdout_path.read_text()[-1500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return True
        except OSError:
            return False
    wait_until(listening, 30, "noida-db accepting connections")
    create_topics(("127.0.0.1", port), topics, partitions)
    return process, f"127.0.0.1:{port}"


class KafkaGateway:
    """Tests/peers/kafka_gateway.py in front of a plaintext broker: the broker the relay sees, enforcing SASL
    and/or TLS as a secured cluster does (a wrong secret or certificate is refused). Its stderr has one line per
    connection outcome, with running counters; never a secret."""

    def __init__(self, workdir: pathlib.Path, upstream: str, *args: str):
        self.process = Process("kafka-gateway", [sys.executable, str(KAFKA_GATEWAY), "--upstream", upstream, *args],
                               workdir)
        self.bootstrap = json.loads(self.process.first_line(30))["bootstrap"]

    def outcomes(self, event: str) -> list[dict[str, str]]:
        """The stderr lines of one outcome ("authenticated", "accepted", "refused", …) as their key=value fields."""
        return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in self.process.stderr().splitlines()
                if line.split(" ", 1)[0] == event]

    def counter(self, name: str) -> int:
        found = re.findall(rf"\b{name}=(\d+)", self.process.stderr())
        return int(found[-1]) if found else 0

    def stop(self) -> None:
        self.process.stop()


def kafka_tls_certificates(directory: pathlib.Path) -> dict[str, pathlib.Path]:
    """A CA, the broker's certificate for 127.0.0.1 (where librdkafka connects and checks the name, its
    ssl.endpoint.identification.algorithm being https) and a client certificate (CN relay), all signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "openssl.cnf"
    conf.write_text("[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n"
                    "[ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
                    "subjectKeyIdentifier = hash\n"
                    "[server]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n"
                    "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n"
                    "[client]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n"
                    "extendedKeyUsage = clientAuth\n")

    def p(name: str) -> str:
        return str(directory / name)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-config", p("openssl.cnf"), "-extensions", "ca", "-days", "2",
            "-subj", "/CN=Test Kafka cluster CA", "-keyout", p("ca.key"), "-out", p("ca.crt"))
    for name, subject in (("broker", "/CN=127.0.0.1"), ("user", "/CN=relay")):
        openssl("req", *ec, "-config", p("openssl.cnf"), "-subj", subject, "-keyout", p(f"{name}.key"),
                "-out", p(f"{name}.csr"))
        openssl("x509", "-req", "-in", p(f"{name}.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", p("openssl.cnf"),
                "-extensions", "server" if name == "broker" else "client", "-out", p(f"{name}.crt"))
    return {"ca": directory / "ca.crt", "broker": directory / "broker.crt", "broker-key": directory / "broker.key",
            "user": directory / "user.crt", "user-key": directory / "user.key"}


def create_topics(address: tuple[str, int], topics: list[str], partitions: int) -> None:
    """A CreateTopics request (v2) by hand: kcat cannot create topics, and a producer's auto-creation would put a
    record into the relay's input."""
    def string(text: str) -> bytes:
        data = text.encode()
        return struct.pack(">h", len(data)) + data
    body = struct.pack(">i", len(topics))
    for topic in topics:
        body += string(topic) + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">i?", 30000, False)
    request = struct.pack(">hhi", 19, 2, 1) + string("apns-relay-pod-test") + body
    with socket.create_connection(address, 10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        response = _read_exactly(sock, size)
    offset = 4 + 4  # correlation id, throttle time
    count = struct.unpack_from(">i", response, offset)[0]
    offset += 4
    for _ in range(count):
        length = struct.unpack_from(">h", response, offset)[0]
        name = response[offset + 2:offset + 2 + length].decode()
        offset += 2 + length
        error = struct.unpack_from(">h", response, offset)[0]
        offset += 2
        message_length = struct.unpack_from(">h", response, offset)[0]
        offset += 2 + max(message_length, 0)
        if error not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise PeerFailure(f"CreateTopics {name}: error {error}")


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise PeerFailure("the broker closed the connection")
        data += chunk
    return data


def produce(bootstrap: str, topic: str, records: list[tuple[str, str]], headers: dict[str, str] | None = None) -> None:
    argv = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "message.timeout.ms=30000"]
    for name, value in (headers or {}).items():
        argv += ["-H", f"{name}={value}"]
    text = "".join(f"{key}\t{value}\n" for key, value in records)
    done = subprocess.run(argv, input=text.encode(), capture_output=True, timeout=60)
    if done.returncode != 0:
        raise PeerFailure(f"kcat could not produce to {topic}: {done.stderr.decode()[-800:]}")


def read_all(bootstrap: str, topic: str, committed_only: bool = False) -> list[dict]:
    """Every record of the topic from its beginning to its end now (kcat -e), as kcat -J prints them."""
    argv = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-J"]
    if committed_only:
        argv += ["-X", "isolation.level=read_committed"]
    done = subprocess.run(argv, capture_output=True, timeout=60)
    if done.returncode != 0:
        raise PeerFailure(f"kcat could not read {topic}: {done.stderr.decode()[-800:]}")
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


class TopicFollower:
    """A kcat consumer following a topic from its beginning; waits are on the records it prints."""

    def __init__(self, bootstrap: str, topic: str, workdir: pathlib.Path, committed_only: bool = False):
        argv = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-q", "-J", "-u"]
        if committed_only:
            argv += ["-X", "isolation.level=read_committed"]
        self.records: list[dict] = []
        self.changed = threading.Condition()
        self.stderr_path = workdir / f"kcat-{topic}.stderr"
        self.popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(self.stderr_path, "wb"),
                                      stdin=subprocess.DEVNULL)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                self.records.append(record)
                self.changed.notify_all()

    def wait_for(self, predicate, within: float, what: str):
        deadline = time.monotonic() + within
        with self.changed:
            while True:
                value = predicate(self.records)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerFailure(f"{what} did not happen within {within:.0f} s")
                self.changed.wait(left)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()


# --- APNs --------------------------------------------------------------------------------------------------

class MockAPNs:
    def __init__(self, workdir: pathlib.Path, keys: list[tuple[str, str, pathlib.Path]],
                 client_ca: pathlib.Path | None = None):
        argv = [str(BUILD / "apns-mock"), "--port", "0", "--tls-dir", str(workdir / "apns-tls"), "--control-port", "0"]
        for key_id, team_id, pem in keys:
            argv += ["--key-id", key_id, "--team-id", team_id, "--public-key", str(pem)]
        if client_ca:
            argv += ["--client-ca-file", str(client_ca)]
        self.process = Process("apns-mock", argv, workdir)
        line = self.process.first_line(30)
        fields = dict(part.split("=", 1) for part in line.split()[1:])
        self.port = int(fields["port"])
        self.ca = pathlib.Path(fields["ca"])
        self.control = int(fields["control"])

    def stats(self) -> dict:
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.control}/stats", timeout=10) as response:
            return json.load(response)

    def stop(self) -> None:
        self.process.stop()


def openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, timeout=60)
    if done.returncode != 0:
        raise PeerFailure(f"openssl {' '.join(args[:2])}: {done.stderr.decode()[-500:]}")


def signing_key(path: pathlib.Path) -> pathlib.Path:
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
    return path


def client_certificate(directory: pathlib.Path, bundle_id: str) -> dict[str, pathlib.Path]:
    """A CA and a client certificate for one app, its subject UID the bundle id (as in APNs certificates)."""
    def p(name):
        return str(directory / name)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=Test Push CA")
    openssl("req", *ec, "-keyout", p("client.key"), "-out", p("client.csr"),
            "-subj", f"/UID={bundle_id}/CN=Apple Push Services: {bundle_id}")
    openssl("x509", "-req", "-in", p("client.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
            "-out", p("client.pem"), "-days", "2")
    return {"ca": directory / "ca.pem", "certificate": directory / "client.pem", "key": directory / "client.key"}


# --- OTLP/HTTP -----------------------------------------------------------------------------------------------

class OTLPReceiver:
    """Accepts OTLP/HTTP trace exports (POST /v1/traces) and keeps their bodies."""

    def __init__(self):
        self.bodies: list[bytes] = []
        self.content_types: list[str] = []
        self.changed = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                ok = self.path == "/v1/traces"
                if ok:
                    with receiver.changed:
                        receiver.bodies.append(body)
                        receiver.content_types.append(self.headers.get("Content-Type", ""))
                        receiver.changed.notify_all()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, predicate, within: float, what: str):
        deadline = time.monotonic() + within
        with self.changed:
            while not predicate(b"".join(self.bodies)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerFailure(f"{what} did not happen within {within:.0f} s ({len(self.bodies)} exports came)")
                self.changed.wait(left)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

#!/usr/bin/env python3
"""The chart's pod, started as the kubelet starts it (Tests/pod/kubelet.py), against real peers on 127.0.0.1.

Per value set the chart is rendered in-process (helm-python-sdk, as Tests/chart/test_chart.py does), the rendered
Deployment's or StatefulSet's pod is started in a bubblewrap sandbox with its environment, volumes, user and
read-only root, its probes are polled on their schedule, and then it must: become ready; deliver pushes produced
with kcat (one result each, status delivered, APNs' mock counting them); for token credentials, take a new key
and key id swapped into the mounted Secret as the kubelet swaps it (apns_relay_signing_key_reloads_total
{result="rotated"}) and keep delivering; exit 0 on SIGTERM within terminationGracePeriodSeconds with exactly one
result per event. With Kafka security (kafka.sasl, kafka.tls) the relay reaches the broker through the
authenticating gateway (Tests/peers/kafka_gateway.py), which must log the relay's authenticated session, and a
password rotated in the mounted Secret must be read again (apns_relay_kafka_password_reloads_total
{result="rotated"}). Broken copies of the chart, or a wrong secret, must fail, naming what broke them.

    .venv/bin/python Tests/pod/test_pod.py           # one line per case, "N passed, N failed" last; exit 1 on failure
    .venv/bin/python Tests/pod/test_pod.py defaults  # only the cases whose name contains a word given
    .venv/bin/python -m pytest Tests/pod -q          # every case, as one pytest test

Needs the debug build (.build/debug/apns-relay, apns-mock, apns-relay-sandbox), bwrap, kcat, openssl and the
.venv of Tests/requirements.txt (helm-python-sdk, PyYAML, noida-db).
"""
from __future__ import annotations

import base64
import concurrent.futures
import copy
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

try:
    import helm_python as helm
    import yaml
except ImportError as error:  # pragma: no cover - a setup problem, said plainly
    print(f"error: {error}. Install the test tooling: pip install -r Tests/requirements.txt", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)

import kubelet  # noqa: E402
import peers  # noqa: E402
from kubelet import PodFailure  # noqa: E402
from peers import PeerFailure  # noqa: E402

ROOT = HERE.parents[1]
CHART = ROOT / "helm" / "apns-relay"
RELAY = ROOT / ".build" / "debug" / "apns-relay"
RELEASE, NAMESPACE = "apns-relay", "messaging"
TEAM = "TEAM000001"
KEY_1, KEY_2 = "KEY0000001", "KEY0000002"
BUNDLE = "com.example.app"
TOPICS = ["apns-notifications", "apns-results", "apns-removed-tokens", "apns-removed-channels", "apns-dead-letters"]
# The Kafka user (a Strimzi KafkaUser's Secret and its cluster CA's, as the chart README's example has them), its
# password and the one it is rotated to. Commas and a backslash: a password the former chart, which passed it
# through a comma-separated variable, could not carry.
SASL_USER = "relay"
SASL_PASSWORD, SASL_PASSWORD_2 = "pod-test-Secr3t!,a\\b", "pod-test-r0tated,%$"
KAFKA_USER_SECRET, KAFKA_CA_SECRET = "relay-kafka-user", "kafka-cluster-ca-cert"
# Generous, for a busy two-core machine; each wait says what did not happen. None of them is a verdict by itself.
READY_WITHIN = 120.0
RESULTS_WITHIN = 90.0

# An extra Service of the namespace, beside the chart's: its name begins with the release's, so its service-link
# variables (APNS_RELAY_EXTRA_SERVICE_HOST, …) look like the relay's own configuration variables.
EXTRA_SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "apns-relay-extra", "namespace": NAMESPACE},
                 "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 8080, "targetPort": 8080,
                                                          "protocol": "TCP"},
                                                         {"name": "grpc", "port": 9095, "protocol": "TCP"}]}}

ADMIN_SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "apns-relay-admin", "namespace": NAMESPACE},
                 "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}}

_active: set = set()  # the Runs under way, for an interrupted test to stop
_active_lock = threading.Lock()
_stop = threading.Event()  # set on SIGINT/SIGTERM of the test itself: every case winds down


def merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(chart_dir: pathlib.Path, values: dict) -> list[dict]:
    rendered = helm.Chart.load(chart_dir).render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    found = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc.setdefault("metadata", {}).setdefault("namespace", NAMESPACE)
                found.append(doc)
    return found


def secret(name: str, data: dict[str, bytes]) -> dict:
    """A Secret as `kubectl create secret generic` makes it."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def event(event_id: str, number: int) -> str:
    token = f"{number:064x}"[-64:].replace("0", "5", 8)
    return json.dumps({"id": event_id, "deviceToken": token, "topic": BUNDLE, "pushType": "alert", "priority": 10,
                       "payload": {"aps": {"alert": {"title": "pod test", "body": event_id}}},
                       "metadata": {"case": event_id.split("-")[0]}}, separators=(",", ":"))


def metrics(port: int, within: float = 30.0) -> str:
    """The relay's /metrics; a scrape that times out (a busy machine) is tried again until `within` passes."""
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def metric_value(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


class CaseFailure(Exception):
    pass


# --- one pod's life ------------------------------------------------------------------------------------------

class PodCase:
    """What one value set needs: its peers, its values and Secrets, and its extra checks."""

    def __init__(self, name: str, *, broker: str = "mock", auth: str = "token", values: dict | None = None,
                 inject_service_links: bool | None = None, rotate: bool = True, kafka_security: str | None = None,
                 kafka_password: str = SASL_PASSWORD,
                 tracing: bool = False, chart_edits: list[tuple[str, str, str]] | None = None,
                 expect_failure: list[str] | None = None, events: int = 3, description: str = "",
                 services: list[dict] | None = None, config_maps: list[dict] | None = None,
                 expect_env: dict[str, str] | None = None):
        self.name, self.broker, self.auth = name, broker, auth
        self.values = values or {}
        self.inject_service_links = inject_service_links
        self.rotate = rotate and auth == "token"
        # None (plaintext), "scram-tls" (SASL SCRAM-SHA-512 over TLS) or "mtls" (a client certificate), enforced
        # by the Kafka gateway in front of the broker; kafka_password is what the Secret holds.
        self.kafka_security, self.kafka_password, self.tracing = kafka_security, kafka_password, tracing
        self.chart_edits = chart_edits or []
        self.expect_failure = expect_failure
        self.events = events
        self.description = description
        self.services = services or []
        self.config_maps = config_maps or []
        self.expect_env = expect_env or {}


class Run:
    def __init__(self, case: PodCase, workdir: pathlib.Path):
        self.case = case
        self.workdir = workdir
        self.cleanups: list = []
        self.notes: list[str] = []

    def cleanup(self) -> None:
        while self.cleanups:
            try:
                self.cleanups.pop()()
            except Exception:  # noqa: BLE001 - cleanup goes on whatever one step did
                pass

    def chart_dir(self) -> pathlib.Path:
        if not self.case.chart_edits:
            return CHART
        copy_dir = self.workdir / "chart"
        shutil.copytree(CHART, copy_dir)
        for relative_glob, pattern, replacement in self.case.chart_edits:
            changed = False
            for path in sorted(copy_dir.glob(relative_glob)):
                text = path.read_text()
                new = re.sub(pattern, replacement, text)
                if new != text:
                    path.write_text(new)
                    changed = True
            if not changed:
                raise CaseFailure(f"could not break the chart: /{pattern}/ matches nothing in {relative_glob}")
        return copy_dir

    def execute(self) -> str:
        case, workdir = self.case, self.workdir
        # Peers.
        if case.broker == "noida":
            kafka, broker = peers.noida(workdir, TOPICS)
        else:
            kafka, broker = peers.mock_kafka(workdir, TOPICS)
        self.cleanups.append(kafka.stop)
        bootstrap = broker
        gateway = None
        kafka_values: dict = {}
        if case.kafka_security:
            gateway, kafka_values, kafka_secrets = self.kafka_gateway(broker)
            bootstrap = gateway.bootstrap
        key_1 = peers.signing_key(workdir / "key-1.p8")
        key_2 = peers.signing_key(workdir / "key-2.p8")
        user_objects = [EXTRA_SERVICE] + case.services + case.config_maps
        certificate = None
        if case.auth == "certificate":
            (workdir / "client-ca").mkdir()
            certificate = peers.client_certificate(workdir / "client-ca", BUNDLE)
            apns = peers.MockAPNs(workdir, [], client_ca=certificate["ca"])
        else:
            # Apple keeps both keys valid through a rotation (README "Rotating the signing key"); so does the mock.
            apns = peers.MockAPNs(workdir, [(KEY_1, TEAM, key_1), (KEY_2, TEAM, key_2)])
        self.cleanups.append(apns.stop)
        otlp = None
        if case.tracing:
            otlp = peers.OTLPReceiver()
            self.cleanups.append(otlp.stop)
        admin_port = peers.free_port()

        values = {"kafka": {"bootstrapServers": bootstrap},
                  "admin": {"port": admin_port},
                  "apns": {"production": {"host": "localhost", "port": apns.port},
                           "development": {"host": "localhost", "port": apns.port},
                           "ca": {"existingSecret": "apns-ca"}}}
        user_objects.append(secret("apns-ca", {"ca.pem": apns.ca.read_bytes()}))
        if case.auth == "token":
            values["apns"]["token"] = {"teamId": TEAM, "existingSecret": "apns-key", "existingSecretKeyIdKey": "keyId"}
            user_objects.append(secret("apns-key", {"AuthKey.p8": key_1.read_bytes(), "keyId": KEY_1.encode() + b"\n"}))
        else:
            values["apns"]["auth"] = "certificate"
            values["apns"]["certificate"] = {"existingSecret": "apns-cert"}
            user_objects.append(secret("apns-cert", {"tls.crt": certificate["certificate"].read_bytes(),
                                                     "tls.key": certificate["key"].read_bytes()}))
        if gateway:
            values["kafka"].update(kafka_values)
            user_objects += kafka_secrets
        if otlp:
            values["tracing"] = {"otlpEndpoint": f"http://127.0.0.1:{otlp.port}"}
        values = merge(values, case.values)
        (workdir / "values.yaml").write_text(yaml.safe_dump(values))
        objects = render(self.chart_dir(), values) + user_objects

        (workdir / "pod").mkdir()
        pod = kubelet.Pod(objects, workdir / "pod", RELAY, NAMESPACE, inject_service_links=case.inject_service_links)
        self.cleanups.append(pod.kill)
        follower = peers.TopicFollower(broker, "apns-results", workdir, committed_only=case.broker == "noida")
        self.cleanups.append(follower.stop)

        pod.start()
        links = sorted(k for k in pod.env if k.startswith("APNS_RELAY_") and ("_SERVICE_" in k or "_PORT" in k))
        if case.inject_service_links and not {"APNS_RELAY_SERVICE_HOST", "APNS_RELAY_EXTRA_SERVICE_HOST"} <= set(links):
            raise CaseFailure(f"the service-link variables were not injected (the control of this case): {links}")
        try:
            ready_after = self.wait_ready(pod, admin_port)
        except CaseFailure as error:
            if gateway is None:
                raise
            # The broker's side beside the relay's (a broken case's expected words are matched in both).
            refused = gateway.counter("refused")
            raise CaseFailure(f"{error}\n    kafka gateway: {gateway.counter('authenticated')} authenticated, {refused} "
                              "refused" + ("; the gateway refused the relay's login" if refused else "")) from None
        seen = pod.process_environment()
        if case.inject_service_links:
            missing = [k for k in ("APNS_RELAY_SERVICE_HOST", "APNS_RELAY_EXTRA_SERVICE_HOST",
                                   "APNS_RELAY_EXTRA_PORT_8080_TCP_ADDR") if k not in seen]
            if missing:
                raise CaseFailure(f"the relay's process lacks the injected variables {missing}")
        wrong_env = {k: seen.get(k) for k, v in case.expect_env.items() if seen.get(k) != v}
        if wrong_env:
            raise CaseFailure(f"the relay's process environment has {wrong_env}, want {case.expect_env}")
        if case.expect_env.get("APNS_RELAY_LOG_FORMAT") == "text" and pod.stderr_path.read_text().startswith("{"):
            raise CaseFailure("APNS_RELAY_LOG_FORMAT=text from envFrom reached the process but the relay logs JSON")
        if "APNS_RELAY_KAFKA_TRANSACTIONAL_ID" in seen and pod.name not in seen["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"]:
            raise CaseFailure(f"the transactional id {seen['APNS_RELAY_KAFKA_TRANSACTIONAL_ID']!r} is not the pod's "
                              f"name {pod.name} (README: a pod keeps its transactional id across restarts)")
        self.notes.append(f"{pod.kind} pod {pod.name} ready after {ready_after:.1f} s")
        shown = "enableServiceLinks " + (json.dumps(pod.spec["enableServiceLinks"]) if "enableServiceLinks" in pod.spec
                                         else "unset (true)")
        self.notes.append(f"{len(links)} APNS_RELAY_* service-link variables ({shown})" if links
                          else f"no service links ({shown})")

        produced: list[str] = []

        def push(count: int, label: str, headers: dict | None = None) -> list[str]:
            ids = [f"{case.name}-{label}{n}" for n in range(count)]
            peers.produce(broker, "apns-notifications", [(i, event(i, len(produced) + n + 1)) for n, i in enumerate(ids)],
                          headers=headers)
            produced.extend(ids)
            return ids

        def delivered(ids: list[str], what: str) -> None:
            def all_there(records):
                seen = {}
                for record in records:
                    try:
                        result = json.loads(record["payload"])
                    except (TypeError, ValueError):
                        continue
                    if result.get("id") in ids:
                        seen[result["id"]] = result
                return seen if len(seen) == len(ids) else None
            try:
                seen = follower.wait_for(all_there, RESULTS_WITHIN, f"a result for each of {what} ({len(ids)} events)")
            except PeerFailure as error:
                self.check_alive(pod)
                raise CaseFailure(pod.diagnose(str(error)))
            bad = {i: r for i, r in seen.items() if r.get("outcome") != "delivered" or r.get("status") != 200}
            if bad:
                raise CaseFailure(f"{what}: not delivered: {json.dumps(bad)[:1500]}")
            self.check_alive(pod)

        first = push(case.events, "a")
        traced_id = None
        trace_id = secrets.token_hex(16)
        if case.tracing:
            traced_id = push(1, "traced", headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})[0]
            first.append(traced_id)
        delivered(first, "the first pushes")
        if gateway:
            self.check_kafka_security(pod, gateway)
            if case.kafka_security == "scram-tls":
                self.rotate_kafka_password(pod, admin_port, gateway)

        if case.rotate:
            self.rotate_key(pod, admin_port, key_2)
            self.check_projection(pod)
            second = push(case.events, "b")
            delivered(second, "the pushes after the key swap")

        if (case.values.get("kafka") or {}).get("exactlyOnce"):
            text = metrics(admin_port)
            committed = metric_value(text, "apns_relay_transactions_total", outcome="committed")
            other = {o: metric_value(text, "apns_relay_transactions_total", outcome=o) for o in ("aborted", "fenced")}
            if committed < 1 or any(other.values()):
                raise CaseFailure(f"exactly-once: {committed:.0f} transactions committed, {other} (want ≥ 1 and none)")
            self.notes.append(f"{committed:.0f} transactions committed, none aborted or fenced")

        accepted = apns.stats().get("accepted")
        if isinstance(accepted, int) and accepted < len(produced):
            raise CaseFailure(f"the mock APNs accepted {accepted} pushes, {len(produced)} results say delivered")

        # The kubelet's SIGTERM; SIGKILL after the grace period.
        grace = pod.spec.get("terminationGracePeriodSeconds", 30)
        in_time, code, took = pod.terminate()
        if not in_time:
            raise CaseFailure(pod.diagnose(f"the relay did not exit within terminationGracePeriodSeconds ({grace} s) "
                                           "after SIGTERM: the kubelet would SIGKILL it"))
        if code != 0:
            raise CaseFailure(pod.diagnose(f"the relay exited {code} on SIGTERM (want 0)"))
        self.notes.append(f"SIGTERM: exit 0 after {took:.1f} s (grace {grace} s)")

        results = peers.read_all(broker, "apns-results", committed_only=case.broker == "noida")
        counts: dict[str, int] = {}
        for record in results:
            try:
                result_id = json.loads(record["payload"]).get("id")
            except (TypeError, ValueError):
                continue
            counts[result_id] = counts.get(result_id, 0) + 1
        wrong = {i: counts.get(i, 0) for i in produced if counts.get(i, 0) != 1}
        if wrong:
            raise CaseFailure(f"after the shutdown, not exactly one result per event: {wrong}")
        self.notes.append(f"{len(produced)} events, one delivered result each")

        if otlp:
            otlp.wait_for(lambda body: all(i.encode() in body for i in produced), 30,
                          "an exported span naming each event's id")
            otlp.wait_for(lambda body: bytes.fromhex(trace_id) in body, 30,
                          f"a span in the producer's trace {trace_id} (its traceparent header)")
            if not all("protobuf" in t for t in otlp.content_types):
                raise CaseFailure(f"OTLP exports not protobuf: {set(otlp.content_types)}")
            self.notes.append(f"{len(otlp.bodies)} OTLP exports name every event, the producer's trace continues")
        return "; ".join(self.notes)

    def check_alive(self, pod: kubelet.Pod) -> None:
        if not pod.running():
            raise CaseFailure(pod.diagnose(f"the relay exited ({pod.process.returncode})"))
        for kind in ("startup", "liveness"):
            prober = pod.probers.get(kind)
            if prober and prober.failed_out.is_set():
                raise CaseFailure(pod.diagnose(
                    f"{kind}Probe failed {prober.failure_threshold} times in a row: the kubelet would restart the "
                    f"container ({prober.last_error})"))

    def wait_ready(self, pod: kubelet.Pod, admin_port: int) -> float:
        """Until the readiness probe succeeds; a failure names the field when the relay exits, a startup or
        liveness probe fails out, or readiness fails failureThreshold times while the relay itself says ready."""
        began = time.monotonic()
        deadline = began + READY_WITHIN
        readiness = pod.probers.get("readiness")
        if readiness is None:
            raise CaseFailure(f"{pod.cwhere}.readinessProbe: none rendered; nothing says when the pod is ready")
        while True:
            if _stop.is_set():
                raise CaseFailure("interrupted")
            if readiness.succeeded.is_set():
                return time.monotonic() - began
            if not pod.running():
                pod.stop_probers()
                raise CaseFailure(pod.diagnose(f"the relay exited ({pod.process.returncode}) before it was ready"))
            self.check_alive(pod)
            if readiness.consecutive_definite_failures >= readiness.failure_threshold:
                # The relay's own answer, on the port its configuration names: ready there but refused or
                # answered otherwise to the probe means the probe asks the wrong place (a time-out, which a busy
                # machine makes, is no such evidence: the pod then just has until READY_WITHIN to be ready).
                _, config = pod.relay_config()
                port = (config.get("admin") or {}).get("port", admin_port)
                if _ready_at(port):
                    raise CaseFailure(pod.diagnose(
                        f"readinessProbe failed {readiness.consecutive_failures} times in a row "
                        f"({readiness.last_error}) while the relay answers /readyz 200 on its admin port {port}"))
            if time.monotonic() > deadline:
                raise CaseFailure(pod.diagnose(f"the pod was not ready within {READY_WITHIN:.0f} s (readiness: "
                                               f"{readiness.last_error or 'no answer yet'})"))
            pod.wake.wait(0.5)
            pod.wake.clear()

    def rotate_key(self, pod: kubelet.Pod, admin_port: int, new_key: pathlib.Path) -> None:
        """The key Secret updated in place: the kubelet writes a new timestamped folder and renames a temporary
        symlink over ..data; the relay must notice within its reload interval and keep delivering."""
        before = metric_value(metrics(admin_port), "apns_relay_signing_key_reloads_total", result="rotated")
        pod.update_secret("apns-key", {"AuthKey.p8": new_key.read_bytes(), "keyId": KEY_2.encode() + b"\n"})
        _, config = pod.relay_config()
        interval_ms = (config.get("apns") or {}).get("keyReloadIntervalMs", 10000)
        within = 3 * interval_ms / 1000 + 30

        def rotated():
            self.check_alive(pod)
            text = metrics(admin_port)
            refused = metric_value(text, "apns_relay_signing_key_reloads_total", result="refused")
            if refused:
                raise CaseFailure(pod.diagnose(f"the relay refused the swapped key ({refused:.0f} refused reloads)"))
            return metric_value(text, "apns_relay_signing_key_reloads_total", result="rotated") > before
        try:
            peers.wait_until(rotated, within, 'apns_relay_signing_key_reloads_total{result="rotated"} rising after the '
                             "Secret's ..data swap", poll=0.25)
        except PeerFailure as error:
            raise CaseFailure(pod.diagnose(str(error)))
        # The count and the log line are two writes: the line may land a moment after the count is scraped.
        try:
            peers.wait_until(lambda: KEY_2 in pod.stderr_path.read_text(errors="replace"), 30,
                             f"the relay's log naming the new key id {KEY_2} after it counted the rotation", poll=0.1)
        except PeerFailure as error:
            raise CaseFailure(str(error))
        self.notes.append(f"key Secret swapped ({KEY_1}→{KEY_2}): reload counted as rotated")

    def check_projection(self, pod: kubelet.Pod) -> None:
        """What the container sees of the updates, as in Kubernetes: the Secret volume shows the new key id, and
        relay.yaml, mounted by subPath, stays the file the container started with when its ConfigMap changes."""
        token_dir = next((t for t, _, m in pod.mount_table if m["name"] == "apns-token"), None)
        if token_dir is None:
            raise CaseFailure(f"no apns-token volume mounted: {[t for t, _, _ in pod.mount_table]}")
        if pod.read_inside(f"{token_dir}/keyId").strip() != KEY_2.encode():
            raise CaseFailure(f"the container does not see the updated Secret in {token_dir}/keyId")
        config_path, _ = pod.relay_config()
        configmap = next(o for o in pod.objects if o["kind"] == "ConfigMap" and "relay.yaml" in o.get("data", {}))
        before = pod.read_inside(config_path)
        pod.update_configmap(configmap["metadata"]["name"],
                             {"relay.yaml": configmap["data"]["relay.yaml"] + "# changed after the start\n"})
        if pod.read_inside(config_path) != before:
            raise CaseFailure(f"{config_path} (a subPath mount) changed with its ConfigMap; Kubernetes never updates "
                              "a subPath mount")
        self.notes.append("Secret update visible in the volume, subPath relay.yaml unchanged")

    def kafka_gateway(self, broker: str) -> tuple[peers.KafkaGateway, dict, list[dict]]:
        """The gateway enforcing this case's Kafka security in front of the broker, the chart values that meet it,
        and the Secrets those values name, laid out as Strimzi makes them (the KafkaUser's Secret, holding more
        than the relay needs, and <cluster>-cluster-ca-cert)."""
        case, workdir = self.case, self.workdir
        certificates = peers.kafka_tls_certificates(workdir / "kafka-tls")
        tls_args = ["--tls-cert", str(certificates["broker"]), "--tls-key", str(certificates["broker-key"])]
        ca_secret = secret(KAFKA_CA_SECRET, {"ca.crt": certificates["ca"].read_bytes(), "ca.p12": b"unused",
                                              "ca.password": b"unused"})
        if case.kafka_security == "scram-tls":
            # What the broker accepts: the gateway reads the file on every authentication.
            self.broker_password = workdir / "broker-password"
            self.broker_password.write_text(SASL_PASSWORD)
            gateway = peers.KafkaGateway(workdir, broker, "--mechanism", "SCRAM-SHA-512", "--user", SASL_USER,
                                         "--password-file", str(self.broker_password), *tls_args)
            jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{SASL_USER}" ' \
                   f'password="{case.kafka_password}";'
            values = {"sasl": {"mechanism": "SCRAM-SHA-512", "username": SASL_USER, "existingSecret": KAFKA_USER_SECRET,
                               "reloadIntervalMs": 1000},
                      "tls": {"caSecret": KAFKA_CA_SECRET}}
            secrets_ = [secret(KAFKA_USER_SECRET, {"password": case.kafka_password.encode(),
                                                   "sasl.jaas.config": jaas.encode()}), ca_secret]
        elif case.kafka_security == "mtls":
            gateway = peers.KafkaGateway(workdir, broker, *tls_args, "--client-ca", str(certificates["ca"]))
            values = {"tls": {"caSecret": KAFKA_CA_SECRET, "existingSecret": KAFKA_USER_SECRET}}
            secrets_ = [secret(KAFKA_USER_SECRET, {"ca.crt": certificates["ca"].read_bytes(),
                                                   "user.crt": certificates["user"].read_bytes(),
                                                   "user.key": certificates["user-key"].read_bytes(),
                                                   "user.p12": b"unused", "user.password": b"unused"}), ca_secret]
        else:
            raise CaseFailure(f"unknown kafka_security {case.kafka_security!r}")
        self.cleanups.append(gateway.stop)
        return gateway, values, secrets_

    def check_kafka_security(self, pod: kubelet.Pod, gateway: peers.KafkaGateway) -> None:
        """The broker saw the relay prove who it is (the control: without it the gateway forwards nothing, and
        this finds no session), over TLS; the secrets reached the container as the mounted files relay.yaml names,
        and nowhere else: not its environment, not its log."""
        _, config = pod.relay_config()
        kafka = config.get("kafka") or {}
        if self.case.kafka_security == "scram-tls":
            sessions = [o for o in gateway.outcomes("authenticated")
                        if o.get("mechanism") == "SCRAM-SHA-512" and o.get("user") == SASL_USER
                        and o.get("tls", "").startswith("TLS")]
            what = f"SASL SCRAM-SHA-512 sessions of user {SASL_USER} over TLS"
        else:
            sessions = [o for o in gateway.outcomes("accepted") if o.get("tls", "").startswith("TLS")
                        and f"client_cert=CN:{SASL_USER}" in o.get("tls", "")]
            what = f"TLS sessions with client certificate CN={SASL_USER}"
        if not sessions:
            raise CaseFailure(f"the Kafka gateway logged no {what}: {gateway.process.stderr()[-1500:]}")
        if gateway.counter("refused"):
            raise CaseFailure(f"the Kafka gateway refused the relay {gateway.counter('refused')} times: "
                              f"{gateway.process.stderr()[-1500:]}")
        seen = pod.process_environment()
        secret_texts = [SASL_PASSWORD, SASL_PASSWORD_2, "PRIVATE KEY"]
        leaked = sorted(k for k, v in seen.items() if any(s in v for s in secret_texts) or "SASL" in k)
        if leaked:
            raise CaseFailure(f"a Kafka secret is in the relay's environment: {leaked}")
        if self.case.kafka_security == "scram-tls":
            password_file = (kafka.get("sasl") or {}).get("passwordFile", "")
            if pod.read_inside(password_file).decode() != SASL_PASSWORD:
                raise CaseFailure(f"{password_file} in the container is not the Secret's password")
            # Only the key the relay needs is projected from the KafkaUser's Secret.
            jaas = pathlib.PurePosixPath(password_file).parent / "sasl.jaas.config"
            if pod.sandbox_path(str(jaas)) is not None:
                raise CaseFailure(f"{jaas}: the Secret's other keys are mounted too (the volume's items select one)")
        stderr = pod.stderr_path.read_text(errors="replace")
        if any(s in stderr for s in secret_texts[:2]):
            raise CaseFailure("the relay's log holds the Kafka password")
        self.notes.append(f"{len(sessions)} {what} at the gateway, none refused; secrets only as mounted files")

    def rotate_kafka_password(self, pod: kubelet.Pod, admin_port: int, gateway: peers.KafkaGateway) -> None:
        """The password rotated as an operator rotates it: on the broker first, then in the Secret, which the
        kubelet updates in the mounted directory (a subPath mount would never change); the relay reads the file
        again within kafka.sasl.reloadIntervalMs and counts the new password."""
        name = "apns_relay_kafka_password_reloads_total"
        before = metric_value(metrics(admin_port), name, result="rotated")
        self.broker_password.write_text(SASL_PASSWORD_2)
        user_secret = next(o for o in pod.objects if o["kind"] == "Secret" and o["metadata"]["name"] == KAFKA_USER_SECRET)
        data = {k: base64.b64decode(v) for k, v in user_secret["data"].items()}
        data["password"] = SASL_PASSWORD_2.encode()
        pod.update_secret(KAFKA_USER_SECRET, data)
        _, config = pod.relay_config()
        sasl = (config.get("kafka") or {}).get("sasl") or {}
        if pod.read_inside(sasl["passwordFile"]).decode() != SASL_PASSWORD_2:
            raise CaseFailure(f"the container does not see the updated Secret in {sasl['passwordFile']}")
        within = 3 * sasl.get("reloadIntervalMs", 10000) / 1000 + 30

        def rotated():
            self.check_alive(pod)
            text = metrics(admin_port)
            refused = metric_value(text, name, result="refused")
            if refused:
                raise CaseFailure(pod.diagnose(f"the relay refused the rotated password file ({refused:.0f} refused)"))
            return metric_value(text, name, result="rotated") > before
        try:
            peers.wait_until(rotated, within, f'{name}{{result="rotated"}} rising after the Secret\'s ..data swap',
                             poll=0.25)
        except PeerFailure as error:
            raise CaseFailure(pod.diagnose(str(error)))
        if SASL_PASSWORD_2 in pod.stderr_path.read_text(errors="replace"):
            raise CaseFailure("the relay's log holds the rotated Kafka password")
        self.notes.append("Kafka password rotated in the Secret: the relay read the new one from the mounted file")


def _ready_at(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


# --- the cases -----------------------------------------------------------------------------------------------

def broken_cases() -> list[PodCase]:
    wrong_port = peers.free_port()
    templates = "templates/*"  # the pod template may live in a .tpl helper
    return [
        # The relay itself writes nowhere (traced: no file opened for writing), so the write comes from a start
        # script of the kind people put in front of an entrypoint.
        PodCase("broken-readonly-root", rotate=False, events=1,
                description="a start script writing a marker file into the read-only root",
                chart_edits=[(templates, r'\n(\s*)(args: \["run")',
                              r'\n\1command: ["/bin/sh", "-c", "date > /var/tmp/apns-relay.started && exec '
                              r'/usr/local/bin/apns-relay \\"$@\\"", "apns-relay"]\n\1\2')],
                expect_failure=["securityContext.readOnlyRootFilesystem", "/var/tmp/apns-relay.started", "EROFS"]),
        # With service links on, a Service named like a configuration key's prefix (apns-relay-admin) hands the
        # relay APNS_RELAY_ADMIN_PORT=tcp://…, which it must refuse; only enableServiceLinks: false avoids it.
        PodCase("broken-service-links", rotate=False, events=1, services=[ADMIN_SERVICE],
                description="enableServiceLinks true beside a Service named apns-relay-admin",
                chart_edits=[(templates, r"enableServiceLinks: \w+", "enableServiceLinks: true")],
                expect_failure=["enableServiceLinks true", "APNS_RELAY_ADMIN_PORT", "apns-relay-admin"]),
        # A startup probe that never succeeds: the kubelet restarts the container after failureThreshold failures
        # (made short through the chart's own values, so the case ends in seconds).
        PodCase("broken-startup-port", rotate=False, events=1,
                values={"startupProbe": {"enabled": True, "periodSeconds": 1, "failureThreshold": 3}},
                description=f"the startup probe on port {wrong_port}",
                chart_edits=[(templates, r"(startupProbe:\s*\n\s*httpGet:\s*\n\s*path: /healthz\s*\n\s*port:) metrics",
                              rf"\g<1> {wrong_port}")],
                expect_failure=["startupProbe failed 3 times", "startupProbe.httpGet.port", str(wrong_port),
                                "nothing listens"]),
        PodCase("broken-mountpath", rotate=False, events=1,
                description="the token Secret's mountPath moved away from where relay.yaml looks",
                chart_edits=[(templates, r'mountPath: \{\{ include "apns-relay.tokenDir" \. \}\}',
                              "mountPath: /etc/apns-relay/token")],
                expect_failure=["volumeMounts[", "mountPath /etc/apns-relay/token",
                                "/etc/apns-relay/apns-token/AuthKey.p8"]),
        # The control of the sasl case: the gateway refuses a password it does not know, and the relay says so.
        PodCase("broken-kafka-password", kafka_security="scram-tls", kafka_password="not-the-password", rotate=False,
                events=1, description="a Kafka password in the Secret that the broker does not accept",
                expect_failure=["Kafka refused the relay's credentials", "SCRAM-SHA-512 as user 'relay'",
                                "kafka.sasl.passwordFile", "kafka gateway: 0 authenticated",
                                "the gateway refused the relay's login"]),
        # The control of the rotation: a subPath mount (what the chart must not use) never sees the Secret change.
        PodCase("broken-kafka-subpath", kafka_security="scram-tls", rotate=False, events=1,
                description="the Kafka password file mounted by subPath",
                chart_edits=[(templates, r'(- name: kafka-sasl\n(\s*)mountPath: \{\{ include "apns-relay.kafkaSaslDir" \. \}\})',
                              r"\1/password\n\2subPath: password")],
                expect_failure=["does not see the updated Secret in /etc/apns-relay/kafka-sasl/password"]),
        PodCase("broken-readiness-port", rotate=False, events=1,
                description=f"the readiness probe on port {wrong_port}",
                chart_edits=[(templates, r"(path: /readyz\s*\n\s*port:) metrics", rf"\g<1> {wrong_port}")],
                expect_failure=["readinessProbe.httpGet.port", str(wrong_port), "nothing listens"]),
    ]


def cases() -> list[PodCase]:
    return [
        PodCase("defaults", description="release apns-relay, the chart's defaults"),
        PodCase("links", rotate=False, inject_service_links=True,
                description="defaults with every service-link variable injected whatever enableServiceLinks says"),
        PodCase("exactlyonce", broker="noida", values={"kafka": {"exactlyOnce": True}},
                description="kafka.exactlyOnce on noida-db, results read read_committed"),
        PodCase("certificate", auth="certificate",
                values={"startupProbe": {"enabled": True},
                        "extraEnvFrom": [{"configMapRef": {"name": "relay-env"}}],
                        "extraEnv": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                     {"name": "APNS_RELAY_KAFKA_CLIENT_ID", "value": "relay-$(NODE)-$$(NODE)"}]},
                config_maps=[{"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "relay-env", "namespace": NAMESPACE},
                              "data": {"APNS_RELAY_LOG_FORMAT": "text"}}],
                expect_env={"APNS_RELAY_LOG_FORMAT": "text", "APNS_RELAY_KAFKA_CLIENT_ID": "relay-node-1-$(NODE)"},
                description="apns.auth certificate (mutual TLS), the startup probe, extraEnvFrom and extraEnv"),
        PodCase("sasl", kafka_security="scram-tls",
                description="kafka.sasl SCRAM-SHA-512 over kafka.tls (the password and the CA from Strimzi-style "
                            "Secrets) through the authenticating Kafka gateway; the password rotated in the Secret"),
        PodCase("mtls", kafka_security="mtls", rotate=False,
                description="kafka.tls with a client certificate (mutual TLS) through the Kafka gateway"),
        PodCase("tracing", tracing=True, values={"startupProbe": {"enabled": True}},
                description="tracing.otlpEndpoint at an OTLP/HTTP receiver, with the startup probe"),
    ] + broken_cases()


def run_case(case: PodCase, base: pathlib.Path) -> tuple[bool, str]:
    workdir = base / case.name
    workdir.mkdir()
    run = Run(case, workdir)
    with _active_lock:
        _active.add(run)
    began = time.monotonic()
    try:
        try:
            detail = run.execute()
            failure = None
        except (CaseFailure, PodFailure, PeerFailure) as error:
            failure = str(error)
        except Exception:  # noqa: BLE001 - a bug in the test is a failure with its traceback
            failure = traceback.format_exc()
    finally:
        run.cleanup()
        with _active_lock:
            _active.discard(run)
    took = time.monotonic() - began
    if case.expect_failure is None:
        if failure is None:
            return True, f"PASS {case.name}: {case.description} — {detail} ({took:.0f} s)"
        return False, f"FAIL {case.name}: {case.description}\n  {failure} ({took:.0f} s)"
    if failure is None:
        return False, f"FAIL {case.name}: {case.description} — the broken chart ran ({detail}); the test caught nothing"
    missing = [m for m in case.expect_failure if m not in failure]
    first = failure.split("\n    relay stderr")[0].replace("\n", " ")
    if missing:
        return False, f"FAIL {case.name}: {case.description} — failed, but the message lacks {missing}:\n  {failure}"
    return True, f"PASS {case.name}: {case.description} — caught: {first} ({took:.0f} s)"


def preflight() -> str | None:
    for binary in ("apns-relay", "apns-mock", "apns-relay-sandbox"):
        if not (ROOT / ".build" / "debug" / binary).exists():
            return f".build/debug/{binary} is missing: build first (swift build --build-tests)"
    for tool in ("bwrap", "kcat", "openssl"):
        if not shutil.which(tool):
            return f"{tool} is not installed (make deps-test installs it)"
    return None


def main(argv: list[str]) -> int:
    problem = preflight()
    if problem:
        print(f"FAIL setup: {problem}")
        print("0 passed, 1 failed")
        return 1
    selected = [c for c in cases() if not argv or any(word in c.name for word in argv)]
    base = pathlib.Path(tempfile.mkdtemp(prefix="apns-relay-pod-"))
    passed = failed = 0
    began = time.monotonic()

    def interrupted(number, frame):
        _stop.set()
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    keep = os.environ.get("POD_TEST_KEEP") == "1"
    # Two pods at a time: each has its own peers and ports; more would only make a two-core machine slower.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    try:
        futures = [pool.submit(run_case, case, base) for case in selected]
        for future in concurrent.futures.as_completed(futures):
            ok, line = future.result()
            print(line, flush=True)
            passed += ok
            failed += not ok
    except KeyboardInterrupt:
        _stop.set()
        failed += 1
        print("FAIL interrupted")
        # Stop every pod and peer now: the cases' own waits would otherwise run to their deadlines.
        with _active_lock:
            running = list(_active)
        for run in running:
            run.cleanup()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"(kept {base})")
    print(f"(ran {time.monotonic() - began:.0f} s)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def test_rendered_pod_runs_against_real_peers():
    """Under pytest (python -m pytest Tests/pod): every case, as the script runs them; a FAIL line says which."""
    assert main([]) == 0, "a pod case failed: see its FAIL line in the captured output"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

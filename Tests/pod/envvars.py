"""What Kubernetes puts into a container's environment besides the pod spec's own values: `$(VAR)` expansion
(third_party/forked/golang/expansion), service-link variables (pkg/kubelet/envvars) and resource quantities."""
from __future__ import annotations

import json
import re

# --- $(VAR) expansion ------------------------------------------------------------------------------------------

def expand(value: str, *contexts: dict) -> str:
    """Kubernetes' expansion (third_party/forked/golang/expansion): `$(NAME)` is replaced when NAME is defined in
    one of the contexts (first wins) and left as written otherwise; `$$` is a literal `$`; any other `$` stays."""
    out = []
    checkpoint = 0
    cursor = 0
    while cursor < len(value):
        if value[cursor] == "$" and cursor + 1 < len(value):
            out.append(value[checkpoint:cursor])
            rest = value[cursor + 1:]
            if rest[0] == "$":
                out.append("$")
                advance = 1
            elif rest[0] == "(":
                close = rest.find(")")
                if close < 0:
                    out.append("$(")
                    advance = 1
                else:
                    name = rest[1:close]
                    for context in contexts:
                        if name in context:
                            out.append(context[name])
                            break
                    else:
                        out.append(f"$({name})")
                    advance = close + 1
            else:
                out.append("$" + rest[0])
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(value[checkpoint:])
    return "".join(out)


# --- service links -----------------------------------------------------------------------------------------------

def service_link_env(services: list[dict]) -> dict[str, str]:
    """The variables the kubelet gives a pod for Services (pkg/kubelet/envvars.FromServices): per Service with a
    cluster IP, <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT, <NAME>_SERVICE_PORT_<PORTNAME> per named port, and the
    Docker-link ones <NAME>_PORT (first port), <NAME>_PORT_<port>_<PROTO>, …_PROTO, …_PORT, …_ADDR per port."""
    env: dict[str, str] = {}
    for service in services:
        spec = service.get("spec", {})
        ip = spec.get("clusterIP")
        if not ip or ip == "None":
            continue
        name = service["metadata"]["name"].upper().replace("-", "_")
        ports = spec.get("ports", [])
        if not ports:
            continue
        env[f"{name}_SERVICE_HOST"] = ip
        env[f"{name}_SERVICE_PORT"] = str(ports[0]["port"])
        for port in ports:
            if port.get("name"):
                env[f"{name}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
        for index, port in enumerate(ports):
            protocol = port.get("protocol", "TCP")
            url = f"{protocol.lower()}://{ip}:{port['port']}"
            if index == 0:
                env[f"{name}_PORT"] = url
            prefix = f"{name}_PORT_{port['port']}_{protocol.upper()}"
            env[prefix] = url
            env[f"{prefix}_PROTO"] = protocol.lower()
            env[f"{prefix}_PORT"] = str(port["port"])
            env[f"{prefix}_ADDR"] = ip
    return env


def with_cluster_ips(services: list[dict]) -> list[dict]:
    """Services as the API server stores them: a ClusterIP Service gets an address from the service range."""
    out = []
    for index, service in enumerate(services):
        service = json.loads(json.dumps(service))
        spec = service.setdefault("spec", {})
        if spec.get("type", "ClusterIP") in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("clusterIP"):
            spec["clusterIP"] = f"10.96.{10 + index // 250}.{10 + index % 250}"
        out.append(service)
    return out


KUBERNETES_SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default"},
                      "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}}


# --- quantities --------------------------------------------------------------------------------------------------

_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "m": 10**-3, "": 1}


def quantity(text) -> float:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return float(match.group(1)) * _SUFFIXES[match.group(2)]

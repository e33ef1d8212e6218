"""The chart's pod started the way the kubelet and a container runtime start it, without a cluster.

What is emulated, and how (each step follows the kubelet's own code: pkg/kubelet/kubelet_pods.go,
pkg/volume/util/atomic_writer.go, pkg/kubelet/envvars, third_party/forked/golang/expansion, prober/):

- the pod template of the rendered Deployment or StatefulSet, its pod named as that controller names pods;
- the container's environment: `envFrom`, then `env` in order (`value` with `$(VAR)` expansion against what came
  before and the service variables; `valueFrom` secretKeyRef / configMapKeyRef / fieldRef / resourceFieldRef
  resolved from the objects), then the service-link variables of every Service of the namespace unless the pod
  says `enableServiceLinks: false` (the `kubernetes` Service's always, as the kubelet does);
- `command`/`args` over the image's ENTRYPOINT/CMD (read from the Dockerfile), `$(VAR)` expanded;
- ConfigMap and Secret volumes in the atomic writer's layout (a timestamped folder, `..data` pointing at it,
  one symlink per top-level path), `items`, `defaultMode`/`mode`, fsGroup's group ownership; an update swaps
  `..data` by renaming a temporary symlink over it; `subPath` binds the resolved file (so it never sees an
  update); emptyDir as a tmpfs of its sizeLimit;
- the root file system from the host's libraries with the image's files (/usr/local/bin/apns-relay, its user),
  /proc, /dev and a read-only /sys, read-only with `readOnlyRootFilesystem`; runAsUser/runAsGroup through a user
  namespace, no capabilities, its own pid namespace with the entrypoint as pid 1 (as in a container), the pod's
  name as host name, the host's network;
- startup, liveness and readiness probes on the kubelet's schedule (initialDelaySeconds, periodSeconds,
  timeoutSeconds, failureThreshold; liveness and readiness only after startup succeeded); a startup or liveness
  probe failing failureThreshold times in a row is where the kubelet would restart the container: a failure.

Not emulated (said here so nobody reads more into a pass): seccomp profiles, cgroup limits (resources),
image pulls, a node's DNS. A single uid is mapped into the sandbox, so file ownership is collapsed onto the
container's user: each file's owner bits are set to what the container's user would get from the kubelet's
ownership (root, group fsGroup), and its group and other bits are kept.
"""
from __future__ import annotations

import base64
import json
import math
import os
import pathlib
import random
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid

from atomic_writer import ProjectedFiles
from envvars import KUBERNETES_SERVICE, expand, quantity, service_link_env, with_cluster_ips
from probes import Prober

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
CLUSTER_DOMAIN = "cluster.local"


class PodFailure(Exception):
    """The pod could not start or stay healthy; the message names the rendered field that broke it."""


# --- the image ------------------------------------------------------------------------------------------------

def image_config(dockerfile: pathlib.Path = DOCKERFILE) -> dict:
    """ENTRYPOINT, CMD, USER and ENV of the Dockerfile's runtime stage (read from it, so this cannot drift)."""
    text = dockerfile.read_text()
    match = re.search(r"^FROM \S+ AS runtime\s*$(.*)", text, re.M | re.S)
    if not match:
        raise AssertionError("Dockerfile has no runtime stage (FROM … AS runtime)")
    stage = match.group(1)
    found = {"entrypoint": [], "cmd": [], "user": None, "env": {}}
    for line in stage.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENTRYPOINT":
            found["entrypoint"] = json.loads(rest)
        elif word == "CMD":
            found["cmd"] = json.loads(rest)
        elif word == "USER":
            found["user"] = rest.strip()
        elif word == "ENV":
            for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', rest):
                found["env"][name] = value.strip('"')
    if not found["entrypoint"] or found["user"] is None:
        raise AssertionError(f"cannot read ENTRYPOINT/USER of the Dockerfile's runtime stage: {found}")
    return found



# --- the pod -------------------------------------------------------------------------------------------------

def _pod_name(kind: str, name: str) -> str:
    if kind == "StatefulSet":
        return f"{name}-0"
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' SafeEncodeString alphabet
    return f"{name}-{''.join(random.choices(alphabet, k=10))}-{''.join(random.choices(alphabet, k=5))}"


class Pod:
    """The rendered workload's pod, started in a bubblewrap sandbox.

    objects: every rendered object plus the ones the user created (Secrets, ConfigMaps, Services).
    """

    def __init__(self, objects: list[dict], workdir: pathlib.Path, binary: pathlib.Path, namespace: str,
                 inject_service_links: bool | None = None, pod_ip: str = "127.0.0.1"):
        self.objects = objects
        self.workdir = workdir
        self.binary = binary
        self.namespace = namespace
        self.pod_ip = pod_ip
        self.inject_service_links = inject_service_links
        self.image = image_config()
        workloads = [o for o in objects if o.get("kind") in ("Deployment", "StatefulSet")]
        if len(workloads) != 1:
            raise AssertionError(f"want one Deployment or StatefulSet, the chart rendered {[o['kind'] for o in workloads]}")
        self.workload = workloads[0]
        self.kind = self.workload["kind"]
        self.name = _pod_name(self.kind, self.workload["metadata"]["name"])
        self.template = self.workload["spec"]["template"]
        self.spec = self.template["spec"]
        self.where = f"{self.kind} {self.workload['metadata']['name']}: spec.template.spec"
        for field in ("initContainers", "ephemeralContainers", "hostNetwork", "hostPID"):
            if self.spec.get(field):
                # Loud rather than skipped: a pass must not hide a part of the pod this test never ran.
                raise PodFailure(f"{self.where}.{field}: not emulated by this test")
        containers = self.spec["containers"]
        if len(containers) != 1:
            raise PodFailure(f"{self.where}.containers: {len(containers)} containers; this test runs one")
        self.container_index = 0
        self.container = containers[0]
        self.cwhere = f"{self.where}.containers[{self.container_index}]"
        self.uid = str(uuid.uuid4())
        self.labels = dict(self.template.get("metadata", {}).get("labels", {}))
        if self.kind == "StatefulSet":
            self.labels["statefulset.kubernetes.io/pod-name"] = self.name
            self.labels["apps.kubernetes.io/pod-index"] = "0"
        else:
            self.labels["pod-template-hash"] = self.name.split("-")[-2]
        self.annotations = dict(self.template.get("metadata", {}).get("annotations", {}))
        self.process: subprocess.Popen | None = None
        self.relay_pid: int | None = None
        self.stderr_path = workdir / "relay.stderr"
        self.stdout_path = workdir / "relay.stdout"
        self.probers: dict[str, Prober] = {}
        self.wake = threading.Event()
        self.volume_dirs: dict[str, ProjectedFiles] = {}
        self.mount_table: list[tuple[str, pathlib.Path | None, dict]] = []  # (mountPath, host path, mount)
        self.exit_code: int | None = None
        self.env: dict[str, str] = {}
        self.service_link_names: dict[str, str] = {}  # variable → the Service it came from
        self.argv: list[str] = []

    # objects ---------------------------------------------------------------------------------------------

    def _object(self, kind: str, name: str) -> dict | None:
        for obj in self.objects:
            if obj.get("kind") == kind and obj["metadata"]["name"] == name:
                return obj
        return None

    def _secret_data(self, name: str) -> dict[str, bytes] | None:
        secret = self._object("Secret", name)
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
        return data

    def _configmap_data(self, name: str) -> dict[str, bytes] | None:
        configmap = self._object("ConfigMap", name)
        if configmap is None:
            return None
        data = {k: v.encode() for k, v in (configmap.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (configmap.get("binaryData") or {}).items()})
        return data

    # security context -------------------------------------------------------------------------------------

    def _security(self, key: str, default=None):
        container = self.container.get("securityContext") or {}
        pod = self.spec.get("securityContext") or {}
        if key in container:
            return container[key]
        if key in pod:
            return pod[key]
        return default

    def identity(self) -> tuple[int, int, list[int]]:
        image_user = self.image["user"].split(":")
        uid = self._security("runAsUser", int(image_user[0]))
        gid = self._security("runAsGroup", int(image_user[1]) if len(image_user) > 1 else 0)
        groups = [gid]
        pod = self.spec.get("securityContext") or {}
        if "fsGroup" in pod:
            groups.append(pod["fsGroup"])
        groups += pod.get("supplementalGroups", [])
        return uid, gid, groups

    def _sandbox_mode(self, mode: int) -> int:
        """A projected file's mode inside the single-uid sandbox: the kubelet makes it root's, group fsGroup with
        group read added (SetVolumeOwnership); the container's user gets the bits of the class it falls in."""
        uid, _, groups = self.identity()
        fs_group = (self.spec.get("securityContext") or {}).get("fsGroup")
        owner_gid = 0
        if fs_group is not None:
            mode |= 0o440
            owner_gid = fs_group
        if uid == 0:
            effective = (mode >> 6) & 7
        elif owner_gid in groups:
            effective = (mode >> 3) & 7
        else:
            effective = mode & 7
        return (effective << 6) | (mode & 0o077)

    # environment ------------------------------------------------------------------------------------------

    def _field(self, path: str, where: str) -> str:
        simple = {
            "metadata.name": self.name, "metadata.namespace": self.namespace, "metadata.uid": self.uid,
            "spec.nodeName": "node-1", "spec.serviceAccountName": self.spec.get("serviceAccountName", "default"),
            "status.hostIP": self.pod_ip, "status.hostIPs": self.pod_ip, "status.podIP": self.pod_ip,
            "status.podIPs": self.pod_ip,
        }
        if path in simple:
            return simple[path]
        match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if match:
            return (self.labels if match.group(1) == "labels" else self.annotations).get(match.group(2), "")
        raise PodFailure(f"{where}.fieldPath {path}: not a field the downward API offers")

    def _resource(self, ref: dict, where: str) -> str:
        resources = self.container.get("resources") or {}
        kind, _, name = ref["resource"].partition(".")
        value = (resources.get(kind) or {}).get(name)
        if value is None:
            value = {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "20Gi"}.get(name)  # the node's allocatable
        if value is None:
            raise PodFailure(f"{where}.resource {ref['resource']}: unknown resource")
        divisor = quantity(ref.get("divisor", "1"))
        return str(math.ceil(quantity(value) / divisor))

    def environment(self) -> dict[str, str]:
        """The container's environment, built in the kubelet's order (makeEnvironmentVariables)."""
        links = self.inject_service_links
        if links is None:
            links = self.spec.get("enableServiceLinks", True)
        services = with_cluster_ips([o for o in self.objects if o.get("kind") == "Service"
                                     and o["metadata"].get("namespace", self.namespace) == self.namespace])
        service_env = service_link_env([KUBERNETES_SERVICE] + (services if links else []))
        env: dict[str, str] = {}
        for index, source in enumerate(self.container.get("envFrom") or []):
            where = f"{self.cwhere}.envFrom[{index}]"
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                ref, data = source["configMapRef"], self._configmap_data(source["configMapRef"]["name"])
                what = "ConfigMap"
                values = {k: v.decode() for k, v in (data or {}).items()}
            else:
                ref, data = source["secretRef"], self._secret_data(source["secretRef"]["name"])
                what = "Secret"
                values = {k: v.decode() for k, v in (data or {}).items()}
            if data is None:
                if ref.get("optional"):
                    continue
                raise PodFailure(f"{where}.{'configMapRef' if what == 'ConfigMap' else 'secretRef'}.name "
                                 f"{ref['name']}: no such {what} (CreateContainerConfigError)")
            for key, value in values.items():
                env[prefix + key] = value
        declared = [var["name"] for var in self.container.get("env") or []]
        for index, var in enumerate(self.container.get("env") or []):
            where = f"{self.cwhere}.env[{index}]"
            name = var["name"]
            if "valueFrom" not in var:
                env[name] = expand(var.get("value", ""), env, service_env)
                # Kubernetes leaves $(X) as written when X is declared only further down: the program would get
                # the literal text, e.g. as its password or transactional id.
                for later in re.findall(r"\$\(([^)]*)\)", env[name]):
                    if later in declared[index + 1:]:
                        raise PodFailure(f"{where}.value of {name}: $({later}) is declared after it "
                                         f"(env[{declared.index(later, index + 1)}]), so Kubernetes does not "
                                         f"expand it and the container gets '{env[name]}'")
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                env[name] = self._field(source["fieldRef"]["fieldPath"], f"{where}.valueFrom.fieldRef")
            elif "resourceFieldRef" in source:
                env[name] = self._resource(source["resourceFieldRef"], f"{where}.valueFrom.resourceFieldRef")
            elif "secretKeyRef" in source or "configMapKeyRef" in source:
                secret = "secretKeyRef" in source
                ref = source["secretKeyRef" if secret else "configMapKeyRef"]
                data = self._secret_data(ref["name"]) if secret else self._configmap_data(ref["name"])
                field = f"{where}.valueFrom.{'secretKeyRef' if secret else 'configMapKeyRef'}"
                what = "Secret" if secret else "ConfigMap"
                if data is None or ref["key"] not in data:
                    if ref.get("optional"):
                        continue
                    problem = f"no such {what}" if data is None else f"{what} {ref['name']} has no key {ref['key']}"
                    raise PodFailure(f"{field} {ref['name']}/{ref['key']}: {problem} (CreateContainerConfigError)")
                env[name] = data[ref["key"]].decode()
            else:
                raise PodFailure(f"{where}.valueFrom: no source this test knows ({list(source)})")
        self.service_link_names = {}
        for service in [KUBERNETES_SERVICE] + (services if links else []):
            for name in service_link_env([service]):
                if name not in env:
                    self.service_link_names[name] = service["metadata"]["name"]
        for name, value in service_env.items():
            env.setdefault(name, value)
        # What the container runtime adds: the image's ENV, PATH, HOSTNAME and HOME (from the user's passwd entry).
        for name, value in self.image["env"].items():
            env.setdefault(name, value)
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.setdefault("HOSTNAME", self.name)
        env.setdefault("HOME", "/nonexistent")
        return env

    def command(self, env: dict[str, str]) -> list[str]:
        """command/args over the image's ENTRYPOINT/CMD (kubelet's ExpandContainerCommandAndArgs)."""
        command = self.container.get("command")
        args = self.container.get("args")
        if command:
            argv = list(command) + list(args or [])
        else:
            argv = list(self.image["entrypoint"]) + list(args if args is not None else self.image["cmd"])
        return [expand(part, env) for part in argv]

    # volumes ----------------------------------------------------------------------------------------------

    def _volume_files(self, index: int, volume: dict) -> dict[str, tuple[bytes, int]] | None:
        """What a ConfigMap or Secret volume holds: path → (content, mode); None when it is not one."""
        where = f"{self.where}.volumes[{index}]"
        if "secret" in volume:
            source, what, field = volume["secret"], "Secret", "secret"
            name = source.get("secretName")
            data = self._secret_data(name)
        elif "configMap" in volume:
            source, what, field = volume["configMap"], "ConfigMap", "configMap"
            name = source.get("name")
            data = self._configmap_data(name)
        else:
            return None
        if data is None:
            if source.get("optional"):
                return {}
            key = "secretName" if what == "Secret" else "name"
            raise PodFailure(f"{where}.{field}.{key} {name}: no such {what} (MountVolume.SetUp failed: the pod "
                             f"stays ContainerCreating)")
        default_mode = source.get("defaultMode", 0o644)
        files: dict[str, tuple[bytes, int]] = {}
        if "items" in source:
            for item_index, item in enumerate(source["items"]):
                if item["key"] not in data:
                    if source.get("optional"):
                        continue
                    raise PodFailure(f"{where}.{field}.items[{item_index}].key {item['key']}: {what} {name} has no "
                                     f"such key (MountVolume.SetUp failed)")
                files[item["path"]] = (data[item["key"]], self._sandbox_mode(item.get("mode", default_mode)))
        else:
            for key, content in data.items():
                files[key] = (content, self._sandbox_mode(default_mode))
        return files

    def _lay_out_volumes(self) -> list[str]:
        """Host folders for the volumes; the bwrap arguments that mount them at the container's mountPaths."""
        volumes = {v["name"]: (i, v) for i, v in enumerate(self.spec.get("volumes") or [])}
        mounts = list(enumerate(self.container.get("volumeMounts") or []))
        # Parents before children, as container runtimes order mounts (by the number of path components).
        mounts.sort(key=lambda pair: len(pathlib.PurePosixPath(pair[1]["mountPath"]).parts))
        args: list[str] = []
        for index, mount in mounts:
            where = f"{self.cwhere}.volumeMounts[{index}]"
            if mount["name"] not in volumes:
                raise PodFailure(f"{where}.name {mount['name']}: no volume of that name in spec.volumes")
            volume_index, volume = volumes[mount["name"]]
            target = mount["mountPath"]
            if "emptyDir" in volume:
                limit = volume["emptyDir"].get("sizeLimit")
                if "subPath" in mount:
                    raise PodFailure(f"{where}.subPath: an emptyDir subPath is not emulated here")
                if limit:
                    args += ["--size", str(int(quantity(limit)))]
                args += ["--perms", "0777", "--tmpfs", target]  # emptyDir folders are 0777
                self.mount_table.append((target, None, mount))
                continue
            files = self._volume_files(volume_index, volume)
            if files is None:
                kinds = [k for k in volume if k != "name"]
                raise PodFailure(f"{self.where}.volumes[{volume_index}] ({mount['name']}): volume type {kinds} is "
                                 f"not emulated by this test")
            projected = self.volume_dirs.get(mount["name"])
            if projected is None:
                projected = ProjectedFiles(self.workdir / "volumes" / mount["name"])
                projected.write(files)
                self.volume_dirs[mount["name"]] = projected
            if "subPath" in mount:
                source = projected.directory / mount["subPath"]
                if not source.exists():
                    raise PodFailure(f"{where}.subPath {mount['subPath']}: volume {mount['name']} has no such path "
                                     f"(CreateContainerConfigError)")
                # The kubelet binds the file the subPath resolves to now: later updates swap ..data and are not seen.
                resolved = pathlib.Path(os.path.realpath(source))
                args += ["--ro-bind", str(resolved), target]
                self.mount_table.append((target, resolved, mount))
            else:
                # ConfigMap and Secret volumes are always mounted read-only.
                args += ["--ro-bind", str(projected.directory), target]
                self.mount_table.append((target, projected.directory, mount))
        return args

    def update_secret(self, name: str, data: dict[str, bytes]) -> None:
        """A Secret updated through the API: every volume of it is rewritten as the kubelet's sync does."""
        secret = self._object("Secret", name)
        if secret is None:
            raise AssertionError(f"no Secret {name} to update")
        secret["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
        secret.pop("stringData", None)
        for index, volume in enumerate(self.spec.get("volumes") or []):
            if volume.get("secret", {}).get("secretName") == name and volume["name"] in self.volume_dirs:
                self.volume_dirs[volume["name"]].write(self._volume_files(index, volume))

    def update_configmap(self, name: str, data: dict[str, str]) -> None:
        """A ConfigMap updated through the API: its volumes are rewritten (subPath mounts keep the old file)."""
        configmap = self._object("ConfigMap", name)
        if configmap is None:
            raise AssertionError(f"no ConfigMap {name} to update")
        configmap["data"] = dict(data)
        for index, volume in enumerate(self.spec.get("volumes") or []):
            if volume.get("configMap", {}).get("name") == name and volume["name"] in self.volume_dirs:
                self.volume_dirs[volume["name"]].write(self._volume_files(index, volume))

    def read_inside(self, path: str) -> bytes:
        """A file as the running container sees it (through its mount namespace)."""
        return pathlib.Path(f"/proc/{self.relay_pid}/root{path}").read_bytes()

    def process_environment(self) -> dict[str, str]:
        """The environment the container's process actually has."""
        raw = pathlib.Path(f"/proc/{self.relay_pid}/environ").read_bytes()
        return dict(item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item)

    # the root file system ---------------------------------------------------------------------------------

    def _root_args(self, uid: int, gid: int) -> list[str]:
        etc = self.workdir / "etc"
        etc.mkdir(exist_ok=True)
        (etc / "passwd").write_text(f"root:x:0:0:root:/root:/bin/sh\napns-relay:x:{uid}:{gid}::/nonexistent:/usr/sbin/nologin\n")
        (etc / "group").write_text(f"root:x:0:\napns-relay:x:{gid}:\n")
        (etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n{self.pod_ip}\t{self.name}\n")
        (etc / "resolv.conf").write_text(f"search {self.namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n"
                                         "nameserver 127.0.0.1\noptions ndots:5\n")
        (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
        (etc / "hostname").write_text(self.name + "\n")
        args = ["--dir", "/usr", "--dir", "/usr/local/bin", "--dir", "/etc", "--dir", "/etc/apns-relay",
                "--dir", "/var", "--perms", "1777", "--dir", "/tmp", "--perms", "1777", "--dir", "/var/tmp"]
        for sub in ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "share"):
            if pathlib.Path("/usr", sub).is_dir():
                args += ["--ro-bind", f"/usr/{sub}", f"/usr/{sub}"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = pathlib.Path("/", top)
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{top}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{top}"]
        # The debug build links Swift's shared runtime from the toolchain (the image's release build is static).
        if pathlib.Path("/opt/swift").is_dir():
            args += ["--ro-bind", "/opt/swift", "/opt/swift"]
        for name in ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "hostname"):
            args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
        for name in ("ld.so.cache", "ld.so.conf", "localtime", "ssl", "ca-certificates", "ca-certificates.conf"):
            if os.path.lexists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        # /sys read-only, as container runtimes mount it (the relay reads its CPU budget there).
        args += ["--ro-bind", str(self.binary), "/usr/local/bin/apns-relay", "--proc", "/proc", "--dev", "/dev",
                 "--ro-bind", "/sys", "/sys"]
        return args

    def sandbox_argv(self) -> list[str]:
        uid, gid, groups = self.identity()
        where_sc = f"{self.cwhere}.securityContext"
        if self._security("runAsNonRoot") and uid == 0:
            raise PodFailure(f"{where_sc}.runAsNonRoot: the container would run as root (runAsUser 0): "
                             "CreateContainerConfigError")
        if self._security("privileged"):
            raise PodFailure(f"{where_sc}.privileged: a privileged container is not emulated")
        caps = (self.container.get("securityContext") or {}).get("capabilities") or {}
        argv = ["bwrap", "--unshare-user", "--uid", str(uid), "--gid", str(gid), "--unshare-pid", "--unshare-ipc",
                "--unshare-uts", "--hostname", self.name, "--unshare-cgroup-try", "--die-with-parent", "--as-pid-1",
                "--new-session"]
        # A container runtime drops what securityContext.capabilities.drop names from its default set; the chart
        # drops ALL (anything else would be a difference for this test to report).
        if caps.get("drop") == ["ALL"] and not caps.get("add"):
            argv += ["--cap-drop", "ALL"]
        else:
            raise PodFailure(f"{where_sc}.capabilities: {caps} — only drop [ALL] is emulated")
        argv += self._root_args(uid, gid)
        argv += self._lay_out_volumes()
        if self._security("readOnlyRootFilesystem", False):
            argv += ["--remount-ro", "/"]
        argv += ["--clearenv"]
        for name, value in self.env.items():
            argv += ["--setenv", name, value]
        argv += ["--chdir", self.container.get("workingDir", "/")]
        return argv

    # running ----------------------------------------------------------------------------------------------

    def port_number(self, port, where: str) -> int:
        if isinstance(port, int):
            return port
        if str(port).isdigit():
            return int(port)
        for container_port in self.container.get("ports") or []:
            if container_port.get("name") == port:
                return container_port["containerPort"]
        raise PodFailure(f"{where} '{port}': no container port of that name in {self.cwhere}.ports")

    def start(self) -> None:
        self.env = self.environment()
        self.argv = self.command(self.env)
        sandbox = self.sandbox_argv()
        info_read, info_write = os.pipe()
        sandbox = sandbox[:1] + ["--info-fd", str(info_write)] + sandbox[1:]
        (self.workdir / "command.txt").write_text(shlex.join(sandbox + ["--"] + self.argv) + "\n")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(sandbox + ["--"] + self.argv, stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL, pass_fds=(info_write,))
        os.close(info_write)
        started = time.monotonic()
        with os.fdopen(info_read) as info:
            text = info.read()
        try:
            self.relay_pid = json.loads(text)["child-pid"]
        except (ValueError, KeyError):
            self.process.wait(10)
            raise PodFailure(f"bwrap did not start the container: {self.stderr_tail()}")
        self._start_probers(started)

    def _start_probers(self, started: float) -> None:
        startup = None
        for kind in ("startup", "liveness", "readiness"):
            spec = self.container.get(f"{kind}Probe")
            if not spec:
                continue
            where = f"{self.cwhere}.{kind}Probe"
            if "httpGet" not in spec:
                raise PodFailure(f"{where}: only httpGet probes are emulated")
            port = self.port_number(spec["httpGet"]["port"], f"{where}.httpGet.port")
            host = spec["httpGet"].get("host", self.pod_ip)
            prober = Prober(kind, spec, port, host, started, self.wake, after=startup if kind != "startup" else None)
            self.probers[kind] = prober
            if kind == "startup":
                startup = prober
        for prober in self.probers.values():
            prober.start()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stderr_tail(self, lines: int = 25) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, number: int) -> None:
        if self.relay_pid and self.running():
            try:
                os.kill(self.relay_pid, number)
            except ProcessLookupError:
                pass

    def stop_probers(self) -> None:
        for prober in self.probers.values():
            prober.stop_event.set()
        self.wake.set()

    def kill(self) -> None:
        self.stop_probers()
        if self.process and self.process.poll() is None:
            self.signal(signal.SIGKILL)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def terminate(self) -> tuple[bool, int | None, float]:
        """SIGTERM to the container's pid 1, SIGKILL after terminationGracePeriodSeconds (as the kubelet does).
        Returns (exited within the grace period, exit code, seconds it took)."""
        grace = self.spec.get("terminationGracePeriodSeconds", 30)
        self.stop_probers()
        began = time.monotonic()
        self.signal(signal.SIGTERM)
        try:
            code = self.process.wait(grace)
            return True, code, time.monotonic() - began
        except subprocess.TimeoutExpired:
            self.kill()
            return False, self.process.returncode, time.monotonic() - began

    # what the sandbox shows --------------------------------------------------------------------------------

    def sandbox_path(self, path: str) -> pathlib.Path | None:
        """The host file a path inside the container is, following the mount table (None: not there)."""
        best = None
        for target, host, mount in self.mount_table:
            if path == target or path.startswith(target.rstrip("/") + "/"):
                if best is None or len(target) > len(best[0]):
                    best = (target, host, mount)
        if best is None:
            return None
        target, host, _ = best
        if host is None:
            return None  # an emptyDir: nothing of the image's or the objects' is there
        relative = path[len(target):].lstrip("/")
        candidate = host / relative if relative else host
        return candidate if candidate.exists() else None

    def relay_config(self) -> tuple[str, dict]:
        """The --config file the command line names, as the container sees it."""
        import yaml
        if "--config" not in self.argv:
            return "", {}
        path = self.argv[self.argv.index("--config") + 1]
        host = self.sandbox_path(path)
        if host is None:
            return path, {}
        return path, yaml.safe_load(host.read_text()) or {}

    def diagnose(self, symptom: str) -> str:
        """Maps what went wrong to the rendered field that caused it; symptom is what was observed."""
        findings: list[str] = []
        stderr = self.stderr_tail(60)
        config_path, config = self.relay_config()
        if config_path and not config:
            findings.append(f"{self.cwhere}.args --config {config_path}: no volumeMount provides that file "
                            f"(mounts: {', '.join(t for t, _, _ in self.mount_table)})")
        # Files relay.yaml names that the sandbox does not have.
        for key, path in _paths_named(config):
            if self.sandbox_path(path) is not None:
                continue
            findings.append(self._missing_file(key, path, config_path))
        readonly_root = self._security("readOnlyRootFilesystem", False)
        refused = [line for line in stderr.splitlines() if "Read-only file system" in line or "EROFS" in line]
        if refused:
            paths = re.findall(r"(/[\w.\-/]+)", refused[0])
            written = paths[0] if paths else refused[0].strip()
            covered = [t for t, host, _ in self.mount_table if host is not None
                       and (written == t or written.startswith(t.rstrip("/") + "/"))]
            if readonly_root and not covered:
                findings.append(f"{self.cwhere}.securityContext.readOnlyRootFilesystem: the container wrote to "
                                f"{written} (EROFS), which no writable volume (emptyDir) covers")
            else:
                findings.append(f"{self.cwhere}.volumeMounts: the container wrote to {written} on a read-only mount "
                                "(EROFS)")
        # Keys the chart renders into relay.yaml that this relay does not know: the chart and the image disagree.
        for key, where in re.findall(r"unknown configuration key '([\w.]+)' in (\S+)", stderr):
            volume = next((m["name"] for t, _, m in self.mount_table if t == where), "?")
            source = next((v.get("configMap", {}).get("name") for v in self.spec.get("volumes") or []
                           if v["name"] == volume), None)
            findings.append(f"ConfigMap {source} data.relay.yaml (volume {volume} at {where}): the chart renders "
                            f"{key}, which this relay does not know: the chart and the image disagree")
        for name in re.findall(r"unknown environment variable (\w+)", stderr):
            if name in self.service_link_names:
                continue  # said below, with the Service it came from
            declared = [i for i, var in enumerate(self.container.get("env") or []) if var["name"] == name]
            field = f"env[{declared[0]}]" if declared else "envFrom"
            findings.append(f"{self.cwhere}.{field}: {name} is not a variable this relay reads")
        named = sorted(n for n in self.service_link_names if re.search(rf"\b{n}\b", stderr))
        if named:
            shown = json.dumps(self.spec["enableServiceLinks"]) if "enableServiceLinks" in self.spec else "unset (true)"
            findings.append(f"{self.where}.enableServiceLinks {shown}: the container got the service-link variable "
                            f"{named[0]} of Service {self.service_link_names[named[0]]}, and the relay read it")
        admin = (config.get("admin") or {}) if isinstance(config, dict) else {}
        admin_port = admin.get("port")
        for kind, prober in self.probers.items():
            if not (prober.failures and (prober.failed_out.is_set() or not prober.succeeded.is_set())):
                continue
            where = f"{self.cwhere}.{kind}Probe.httpGet"
            spec_port = prober.spec["httpGet"]["port"]
            if admin_port is not None and prober.port != admin_port:
                shown = spec_port if isinstance(spec_port, int) else f"{spec_port} ({prober.port})"
                findings.append(f"{where}.port {shown}: nothing listens there ({prober.last_error}); the relay's "
                                f"admin.port in {config_path} is {admin_port}")
            elif prober.last_error.startswith("HTTP 404"):
                findings.append(f"{where}.path {prober.path}: the relay answers 404 ({prober.last_error})")
        metrics = [p for p in self.container.get("ports") or [] if p.get("name") == "metrics"]
        if admin_port is not None and metrics and metrics[0]["containerPort"] != admin_port:
            findings.append(f"{self.cwhere}.ports[metrics].containerPort {metrics[0]['containerPort']}: the relay "
                            f"listens on admin.port {admin_port}")
        if not findings:
            findings.append("no rendered field explains it")
        text = f"{symptom}\n    cause: " + "\n    cause: ".join(findings)
        if stderr:
            text += "\n    relay stderr (tail):\n      " + "\n      ".join(stderr.splitlines()[-12:])
        return text

    def _missing_file(self, key: str, path: str, config_path: str) -> str:
        """A file relay.yaml names is not in the container: which mount should have brought it, and where it is."""
        name = pathlib.PurePosixPath(path).name
        volumes = {v["name"]: v for v in self.spec.get("volumes") or []}
        for index, mount in enumerate(self.container.get("volumeMounts") or []):
            volume = volumes.get(mount["name"], {})
            source = volume.get("secret") or volume.get("configMap")
            if not source:
                continue
            paths = [item["path"] for item in source.get("items", [])]
            if name in paths and "subPath" not in mount:
                return (f"{self.cwhere}.volumeMounts[{index}].mountPath {mount['mountPath']}: {config_path} names "
                        f"{path} ({key}), which is not mounted (volume {mount['name']} puts {name} at "
                        f"{mount['mountPath'].rstrip('/')}/{name})")
        return (f"{self.cwhere}.volumeMounts: {config_path} names {path} ({key}), which no volumeMount provides "
                f"(mounts: {', '.join(t for t, _, _ in self.mount_table)})")


def _paths_named(config, prefix: str = "") -> list[tuple[str, str]]:
    """(key, path) of every file the relay's configuration names (keys ending in File)."""
    found = []
    if isinstance(config, dict):
        for key, value in config.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                found += _paths_named(value, name + ".")
            elif isinstance(value, str) and key.endswith("File") and value.startswith("/"):
                found.append((name, value))
    return found

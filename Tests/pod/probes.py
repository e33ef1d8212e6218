"""HTTP probes on the kubelet's schedule (pkg/kubelet/prober)."""
from __future__ import annotations

import http.client
import socket
import threading
import time


class Prober(threading.Thread):
    """One probe on the kubelet's schedule: the first run after initialDelaySeconds from container start, then every
    periodSeconds; each request within timeoutSeconds; success is an HTTP status 200–399."""

    def __init__(self, kind: str, spec: dict, port: int, host: str, started_at: float, wake: threading.Event,
                 after: "Prober | None" = None):
        super().__init__(daemon=True, name=f"{kind}-probe")
        self.kind, self.spec, self.port, self.host = kind, spec, port, host
        self.path = spec["httpGet"].get("path", "/")
        self.initial_delay = spec.get("initialDelaySeconds", 0)
        self.period = spec.get("periodSeconds", 10)
        self.timeout = spec.get("timeoutSeconds", 1)
        self.failure_threshold = spec.get("failureThreshold", 3)
        self.success_threshold = spec.get("successThreshold", 1)
        self.started_at, self.wake, self.after = started_at, wake, after  # wake: the pod's waiters look again
        self.stop_event = threading.Event()
        self.consecutive_failures = 0
        self.consecutive_successes = 0
        # Failures in a row that say something about the probe's target (refused, an HTTP status), leaving out
        # time-outs: a busy machine makes those, so they are no evidence that the probe asks the wrong place.
        self.consecutive_definite_failures = 0
        self.successes = 0
        self.failures = 0
        self.last_error = ""
        self.succeeded = threading.Event()   # startup: done; readiness: ready (the pod's Ready condition)
        self.failed_out = threading.Event()  # startup or liveness: the kubelet would restart the container

    def probe_once(self) -> tuple[bool, str]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request("GET", self.path, headers={"User-Agent": "kube-probe/1.31"})
            response = connection.getresponse()
            response.read()
            if 200 <= response.status < 400:
                return True, f"HTTP {response.status}"
            return False, f"HTTP {response.status} from {self.path}"
        except ConnectionRefusedError:
            return False, f"connection refused on {self.host}:{self.port}"
        except socket.timeout:
            return False, f"no answer within timeoutSeconds {self.timeout} on {self.host}:{self.port}{self.path}"
        except OSError as error:
            return False, f"{error} on {self.host}:{self.port}"
        finally:
            connection.close()

    def run(self) -> None:
        if self.after is not None:
            # Liveness and readiness begin once the startup probe has succeeded (kubelet prober/worker.go).
            while not self.after.succeeded.wait(0.05):
                if self.stop_event.is_set() or self.after.failed_out.is_set():
                    return
        next_at = max(self.started_at + self.initial_delay, time.monotonic())
        while not self.stop_event.is_set():
            wait = next_at - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                return
            next_at += self.period
            ok, detail = self.probe_once()
            if self.stop_event.is_set():
                return
            if ok:
                self.successes += 1
                self.consecutive_failures = 0
                self.consecutive_definite_failures = 0
                self.consecutive_successes += 1
                if self.consecutive_successes >= self.success_threshold:
                    self.succeeded.set()
                if self.kind == "startup" and self.succeeded.is_set():
                    return  # a startup probe stops once it has succeeded
            else:
                self.failures += 1
                self.last_error = detail
                self.consecutive_successes = 0
                self.consecutive_failures += 1
                if not detail.startswith("no answer within"):
                    self.consecutive_definite_failures += 1
                if self.kind == "readiness":
                    self.succeeded.clear()
                # Failed out (the kubelet would restart the container) on definite failures only: time-outs are
                # what a busy machine makes, and a verdict must not depend on its speed. A relay that hangs still
                # fails the case, by the deadlines of readiness and delivery.
                if self.consecutive_definite_failures >= self.failure_threshold:
                    if self.kind in ("startup", "liveness"):
                        self.failed_out.set()
                        self.wake.set()
                        return
            self.wake.set()

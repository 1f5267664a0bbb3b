"""A real Kubernetes API server for simulated nodes: etcd and kube-apiserver on 127.0.0.1, nothing else.

No kubelet, no controller manager, no scheduler: only the API server with its real admission, real RBAC and
real optimistic concurrency, and one Node object per simulated node (the gate's whole world). Users are
static tokens (``--token-auth-file``):

- ``admin`` (group ``system:masters``): sets up the lab and plays the operator (a taint burnin did not set);
- ``burnin-gate``: least privilege, bound to the ClusterRole the caller passes (the tests: the one
  packaging/kubernetes/rbac.yaml ships: get, list, patch nodes; patch nodes/status);
- ``nobody``: authenticated, no rights at all.

Each user has a kubeconfig file (:meth:`K8sLab.kubeconfig`). kube-apiserver is built from Debian's
``kubernetes`` source package by .ci/build-kube-apiserver into ``/var/cache/burnin/kube-apiserver-<version>/``
(``$BURNIN_K8S_CACHE``), or named by ``$BURNIN_KUBE_APISERVER``; etcd is Debian's ``etcd-server``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE_ENV = "BURNIN_K8S_CACHE"
BINARY_ENV = "BURNIN_KUBE_APISERVER"
DEFAULT_CACHE = "/var/cache/burnin"
USERS = ("admin", "burnin-gate", "nobody")
START_TIMEOUT_S = 180.0  # a failure limit: kube-apiserver's first start on a loaded 2-core machine

GATE_BINDING: dict[str, Any] = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "burnin-gate"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "burnin-gate"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "burnin-gate"}],
}


def apiserver_binary() -> Path | None:
    """``$BURNIN_KUBE_APISERVER``, else the newest cached build; None when there is none."""
    named = os.environ.get(BINARY_ENV)
    if named:
        return Path(named) if Path(named).is_file() else None
    cache = Path(os.environ.get(CACHE_ENV, DEFAULT_CACHE))
    builds = sorted(cache.glob("kube-apiserver-*/kube-apiserver"), key=lambda p: p.stat().st_mtime)
    return builds[-1] if builds else None


def missing() -> list[str]:
    """What the lab needs and this machine lacks (empty: it can start)."""
    need = [] if apiserver_binary() is not None else ["kube-apiserver (.ci/build-kube-apiserver)"]
    if shutil.which("etcd") is None:
        need.append("etcd (etcd-server)")
    return need


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class K8sLab:
    """etcd + kube-apiserver under ``state``; :meth:`start`, then :meth:`stop` (idempotent)."""

    state: Path
    port: int = 0
    tokens: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.state / "certs" / "apiserver.crt"

    def kubeconfig(self, user: str) -> Path:
        return self.state / f"kubeconfig-{user}"

    # ------------------------------------------------------------------ lifecycle

    def start(self, nodes: list[str], role: dict[str, Any]) -> K8sLab:
        """Start both, bind ``role`` (a ClusterRole named ``burnin-gate``: the one burnin ships) to the user
        ``burnin-gate``, register ``nodes``."""
        binary = apiserver_binary()
        if binary is None or shutil.which("etcd") is None:
            raise RuntimeError(f"the Kubernetes lab needs {', '.join(missing())}")
        self.state.mkdir(parents=True, exist_ok=True)
        try:
            self._start_etcd()
            self._start_apiserver(binary)
            for user in USERS:
                self._write_kubeconfig(user)
            self.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
            self.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", GATE_BINDING)
            for node in nodes:
                self.add_node(node)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.state / f"{name}.log").open("wb")
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()
        self.processes[name] = proc
        return proc

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        data = self.state / "etcd"
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            "etcd", "--name", "lab", "--data-dir", str(data),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"lab=http://127.0.0.1:{peer}",
        ])
        self._wait("etcd", lambda: _http_ok(f"{self.etcd_url}/health"))

    def _start_apiserver(self, binary: Path) -> None:
        self.tokens = {user: secrets.token_hex(16) for user in USERS}
        groups = {"admin": "system:masters"}
        (self.state / "tokens.csv").write_text(
            "".join(f'{token},{user},{user},"{groups.get(user, "")}"\n' for user, token in self.tokens.items()))
        key = self.state / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        self.port = free_port()
        self._spawn("kube-apiserver", [
            str(binary), "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--insecure-port", "0", "--cert-dir", str(self.state / "certs"),
            "--token-auth-file", str(self.state / "tokens.csv"), "--authorization-mode", "RBAC",
            "--service-account-key-file", str(key), "--service-account-signing-key-file", str(key),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", "10.96.0.0/24", "--enable-priority-and-fairness=false",
        ])
        self._wait("kube-apiserver", self._ready)

    def _ready(self) -> bool:
        if not self.ca_file.exists():
            return False
        try:
            return bool(self.request("GET", "/readyz", raw=True) == "ok")
        except (OSError, urllib.error.URLError, ssl.SSLError, ValueError):
            return False

    def _wait(self, name: str, ready: Any) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        proc = self.processes[name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}: {self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} not ready within {START_TIMEOUT_S:g} s: {self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.state / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        for name in ("kube-apiserver", "etcd"):
            proc = self.processes.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)

    # ------------------------------------------------------------------ the API, as admin

    def _write_kubeconfig(self, user: str) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": self.server,
                                                      "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
        }
        path = self.kubeconfig(user)
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML: the client reads it as is
        path.chmod(0o600)

    def request(self, method: str, path: str, body: Any = None, *, user: str = "admin", raw: bool = False,
                content_type: str = "application/json") -> Any:
        """One API call; the answer as JSON (``raw``: as text). HTTPError for a status >= 400."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.server}{path}", data=data, method=method, headers={  # noqa: S310
            "Authorization": f"Bearer {self.tokens[user]}", "Content-Type": content_type,
            "Accept": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:  # noqa: S310 - https only
            text = answer.read().decode()
        return text if raw else json.loads(text)

    def add_node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.request("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"lab": "burnin"}}})
        return node

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.request("GET", f"/api/v1/nodes/{name}")
        return node

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        suffix = "/status" if status else ""
        node: dict[str, Any] = self.request("PATCH", f"/api/v1/nodes/{name}{suffix}", patch,
                                            content_type="application/strategic-merge-patch+json")
        return node

    def taints(self, name: str) -> list[dict[str, Any]]:
        return list((self.node(name).get("spec") or {}).get("taints") or [])

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        found = [c for c in (self.node(name).get("status") or {}).get("conditions") or [] if c.get("type") == kind]
        return found[0] if found else None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - the lab's own etcd
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False

"""The Kubernetes API: read Node objects and patch them, each call bounded, errors as one line.

Credentials, in this order: the kubeconfig file ``$KUBECONFIG`` names (or ``~/.kube/config``), else the
in-cluster service account (``$KUBERNETES_SERVICE_HOST``). Nodes are plain dicts (the API's JSON), so the
gate's policy (:mod:`burnin.gate.kubernetes`) stays pure and readable.

Every write is a patch that carries the ``metadata.resourceVersion`` it was computed from: the API server
refuses it with 409 Conflict when another controller changed the Node since (optimistic concurrency), and
the caller reads again and recomputes (:func:`burnin.gate.kubernetes_apply.update_node`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from burnin.text import printable

QUICK_TIMEOUT = 10.0  # seconds for one API call
CONFLICT = 409
FORBIDDEN = 403
NOT_FOUND = 404
UNAUTHORIZED = 401


class KubeError(Exception):
    """An API call failed: ``status`` is the HTTP status (None: no answer, no credentials)."""

    def __init__(self, message: str, status: int | None = None, *, config: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.config = config  # no credentials, or a kubeconfig that cannot be loaded

    @property
    def conflict(self) -> bool:
        return self.status == CONFLICT

    @property
    def denied(self) -> bool:
        return self.status in (FORBIDDEN, UNAUTHORIZED)


class NodeApi(Protocol):
    """What the gate needs from the API server (a real :class:`KubeClient`, or another one in tests)."""

    def get_node(self, name: str) -> dict[str, Any]: ...

    def list_nodes(self) -> list[dict[str, Any]]: ...

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]: ...


def kubeconfig_path() -> Path | None:
    """``$KUBECONFIG`` (its first file), else ``~/.kube/config`` when it exists; None: none."""
    named = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if named:
        return Path(named)
    default = Path("~/.kube/config").expanduser()
    return default if default.is_file() else None


class KubeClient:
    """The official ``kubernetes`` client, configured once, used through JSON in and out."""

    def __init__(self, *, timeout: float = QUICK_TIMEOUT) -> None:
        self.timeout = timeout
        self._api: Any = None
        self.server = ""

    def _core(self) -> Any:
        if self._api is not None:
            return self._api
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        configuration = client.Configuration()
        path = kubeconfig_path()
        try:
            if path is not None:
                config.load_kube_config(config_file=str(path),  # type: ignore[no-untyped-call]
                                        client_configuration=configuration)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                raise KubeError("no Kubernetes credentials: set KUBECONFIG, or run in a pod with a service account",
                                config=True)
        except (ConfigException, OSError, ValueError, TypeError) as exc:
            where = f"kubeconfig {path}" if path is not None else "in-cluster config"
            raise KubeError(printable(f"cannot load the {where}: {exc}", limit=300), config=True) from None
        configuration.retries = 1
        self.server = str(configuration.host)
        self._api = client.CoreV1Api(client.ApiClient(configuration))
        return self._api

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        api = self._core()
        try:
            response = getattr(api, method)(*args, _preload_content=False, _request_timeout=self.timeout,
                                            **kwargs)
            document: dict[str, Any] = json.loads(response.data)
            return document
        except ApiException as exc:
            raise KubeError(printable(f"{what}: {exc.status} {api_message(exc.body, exc.reason)}", limit=300),
                            exc.status) from None
        except (HTTPError, OSError) as exc:
            raise KubeError(printable(f"{what}: no answer from the API server {self.server}: {exc}",
                                      limit=300)) from None
        except ValueError as exc:
            raise KubeError(printable(f"{what}: the API server's answer is not JSON: {exc}", limit=300)) from None

    def get_node(self, name: str) -> dict[str, Any]:
        return self._call(f"get node {name}", "read_node", name)

    def list_nodes(self) -> list[dict[str, Any]]:
        items = self._call("list nodes", "list_node").get("items")
        return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []

    def patch_node(self, name: str, patch: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        """A strategic-merge patch of the Node (``status``: of its status subresource)."""
        method = "patch_node_status" if status else "patch_node"
        what = f"patch node {name}{'/status' if status else ''}"
        return self._call(what, method, name, patch, _content_type="application/strategic-merge-patch+json")


def api_message(body: object, fallback: object = "") -> str:
    """The ``message`` of a Kubernetes ``Status`` answer, else the reason phrase."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if isinstance(document, dict) and isinstance(document.get("message"), str):
            return str(document["message"])
    return str(fallback or "")

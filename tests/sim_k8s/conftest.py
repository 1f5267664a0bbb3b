"""A real Kubernetes API server (etcd + kube-apiserver on 127.0.0.1, burnin_lab.k8s) with one Node per simulated node.

Real admission, real RBAC, real optimistic concurrency: the gate runs as the least-privilege user
``burnin-gate`` (the ClusterRole docs/kubernetes.md ships), the operator is ``admin``. A missing
kube-apiserver build (.ci/build-kube-apiserver) or etcd skips the tier, except under CI where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from folder_labs import folder_lab

from burnin_lab import k8s as k8s_lab

RUN_NODES = [f"sim{n:02d}" for n in range(1, 9)]
OTHER_NODES = ["watch01", "probe01", "race01", "rbac01", "brk01", "brk02", "brk03", "solo01"]
RBAC = Path(__file__).resolve().parents[2] / "packaging" / "kubernetes" / "rbac.yaml"


@folder_lab
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[k8s_lab.K8sLab]:
    need = k8s_lab.missing()
    if need:
        message = f"sim-k8s tier needs {', '.join(need)}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    [role] = [d for d in yaml.safe_load_all(RBAC.read_text(encoding="utf-8")) if d["kind"] == "ClusterRole"]
    # The tier's tests share one fleet, so burnin's taints from one count against the next one's breaker
    # budget: a budget the size of the fleet here; the breaker's own test narrows it in its own folder.
    from burnin.breaker import state
    from burnin.breaker.budget import Settings

    folder = tmp_path_factory.mktemp("k8s-state")
    state.save(folder=folder, settings=Settings(nodes=len(RUN_NODES + OTHER_NODES)))
    lab = k8s_lab.K8sLab(tmp_path_factory.mktemp("k8s")).start(RUN_NODES + OTHER_NODES, role)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BURNIN_STATE_DIR", str(folder))
        try:
            yield lab
        finally:
            lab.stop()

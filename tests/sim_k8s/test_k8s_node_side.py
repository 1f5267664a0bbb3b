"""The node side against a real kube-apiserver: `burnin watch --gate kubernetes` and `burnin probe --gate kubernetes`.

Each daemon finds its own Node by ``$KUBERNETES_NODE_NAME`` (the DaemonSet's downward API) while burnin's own
name stays the simulated node's: the Node objects here are named apart on purpose (watch01, probe01).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from k8s_support import CLI, burnin, our_condition, our_taints

from burnin.gate.kubernetes import NO_EXECUTE, NO_SCHEDULE
from burnin.sim import SimNode, apply_fault, build_node, clear_faults, parse_fault_spec
from burnin.topology import find_topology
from burnin_lab.k8s import K8sLab

pytestmark = pytest.mark.xdist_group("k8s")

XID_79 = "NVRM: Xid (PCI:0000:52:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
SOURCE_TIMEOUT = "60"  # a failure limit for the probe's sources on a loaded machine, not a measurement


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> SimNode:
    return build_node(tmp_path_factory.mktemp("k8snode") / "node", find_topology("hgx-h100-8gpu"), "sim01")


def _wait(what: str, check: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None,
          logs: Callable[[], str] = str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"exited {proc.returncode} waiting for {what}: {logs()}")
        time.sleep(0.05)
    pytest.fail(f"no {what} within {timeout:g} s: {logs()}")


def _journal(path: Path) -> list[dict[str, Any]]:
    """The watch's journal entries; a last line still being written is not one yet."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


@pytest.fixture
def watch(k8s: K8sLab, node: SimNode, tmp_path: Path) -> Iterator[dict[str, Any]]:
    log = tmp_path / "kernel.log"
    err_path, out_path = tmp_path / "err.txt", tmp_path / "out.txt"
    env = {**os.environ, **node.environment(), "KUBECONFIG": str(k8s.kubeconfig("burnin-gate")),
           "KUBERNETES_NODE_NAME": "watch01"}
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen([*CLI, "watch", "--gate", "kubernetes", "--node", "sim01", "--kernel-log", str(log),
                                 "--kernel-log-format", "dmesg", "--no-nvml", "--probe-interval", "3600",
                                 "--state-dir", str(tmp_path / "state")],
                                env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    logs = lambda: out_path.read_text() + err_path.read_text()  # noqa: E731
    try:
        _wait("the watch following its log", lambda: "No such file" in err_path.read_text(), proc, logs)
        yield {"proc": proc, "log": log, "logs": logs, "journal": tmp_path / "state" / "events.jsonl"}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_watch_evicts_with_a_noexecute_taint_on_its_own_node(k8s: K8sLab, watch: dict[str, Any]) -> None:
    fresh = watch["log"].with_name("kernel.log.new")
    fresh.write_text(f"[ 1234.567890] {XID_79}\n", encoding="utf-8")
    written = time.time()
    os.replace(fresh, watch["log"])
    _wait("burnin's NoExecute taint on watch01", lambda: any(t["effect"] == NO_EXECUTE
                                                             for t in our_taints(k8s, "watch01")),
          watch["proc"], watch["logs"])
    seen = time.time()
    # the taint is the first of the watch's two patches (the taint, then the condition), and the watch journals
    # the eviction once both are answered: the journal entry is the event the condition and the entry wait on
    _wait("the eviction in the watch's journal", lambda: bool(_journal(watch["journal"])), watch["proc"],
          watch["logs"])
    [taint] = our_taints(k8s, "watch01")
    assert taint["value"] == "GPU-04"
    condition = our_condition(k8s, "watch01")
    assert condition is not None and condition["status"] == "False" and "Xid 79" in condition["message"]
    [entry] = _journal(watch["journal"])
    assert entry["action"] == "evict" and entry["out_of_pool"] is True
    # the issue asks for the taint within 2 s of the line: measured and printed, not asserted (a loaded
    # machine must not fail the test); the report quotes it
    print(f"watch01: line written -> detected {entry['detected_at'] - written:.3f} s, detected -> tainted (both "
          f"patches answered) {entry['acted_at'] - entry['detected_at']:.3f} s; the test saw the taint after "
          f"{seen - written:.3f} s (its own polling included)")
    assert our_taints(k8s, "sim01") == []  # burnin's name is not the Node's: the Node named by the downward API


def test_probe_drains_and_undrains_through_the_kubernetes_gate(k8s: K8sLab, node: SimNode) -> None:
    env = {**node.environment(), "KUBERNETES_NODE_NAME": "", "BURNIN_K8S_NODE_MAP": "sim01=probe01"}
    apply_fault(node.dir, parse_fault_spec("xid:79@gpu2"))
    try:
        failed = burnin(k8s, "probe", "--timeout", SOURCE_TIMEOUT, "--gate", "kubernetes", "--drain", env=env)
    finally:
        clear_faults(node.dir)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    [taint] = our_taints(k8s, "probe01")
    assert (taint["effect"], taint["value"]) == (NO_SCHEDULE, "GPU-04")
    condition = our_condition(k8s, "probe01")
    assert condition is not None and condition["status"] == "False"

    healthy = burnin(k8s, "probe", "--timeout", SOURCE_TIMEOUT, "--gate", "kubernetes", "--undrain", env=env)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert our_taints(k8s, "probe01") == []
    condition = our_condition(k8s, "probe01")
    assert condition is not None and condition["status"] == "True"


def test_probe_without_rights_is_exit_2_and_one_line(k8s: K8sLab, node: SimNode) -> None:
    env = {**node.environment(), "BURNIN_K8S_NODE_MAP": "sim01=rbac01"}
    apply_fault(node.dir, parse_fault_spec("xid:79@gpu2"))
    try:
        proc = burnin(k8s, "probe", "--timeout", SOURCE_TIMEOUT, "--gate", "kubernetes", "--drain", env=env,
                      user="nobody")
    finally:
        clear_faults(node.dir)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "may not patch Nodes" in proc.stderr and "forbidden" in proc.stderr
    assert our_taints(k8s, "rbac01") == []

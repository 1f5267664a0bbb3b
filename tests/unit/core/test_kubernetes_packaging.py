"""What docs/kubernetes.md ships: the node-problem-detector monitor config, the RBAC, the DaemonSet sketch.

The monitor config is checked against NPD's own format (pkg/custompluginmonitor/types: the fields it reads,
its validation) and against the real configs NPD ships (../shared/reference-pending/node-problem-detector).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from burnin.cli.main import build_parser

REPO = Path(__file__).resolve().parents[3]
PACKAGING = REPO / "packaging" / "kubernetes"
GLOBAL_KEYS = {"invoke_interval", "timeout", "max_output_length", "concurrency",
               "enable_message_change_based_condition_update", "skip_initial_status"}
RULE_KEYS = {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$")


def _seconds(text: str) -> float:
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ns|us|ms|s|m|h)", text))


def _npd_reference() -> Path:
    override = os.environ.get("BURNIN_REFERENCE_DIR")
    reference = Path(override) if override else REPO.parent / "shared" / "reference"
    path = reference.parent / "reference-pending" / "node-problem-detector"
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"NPD reference configs not found at {path} (CI must have ../shared)")
        pytest.skip(f"NPD reference configs not found at {path}")
    return path


def _monitor() -> dict[str, Any]:
    config: dict[str, Any] = json.loads((PACKAGING / "burnin-npd-monitor.json").read_text(encoding="utf-8"))
    return config


def test_the_monitor_config_is_npd_custom_plugin_format() -> None:
    config = _monitor()
    assert config["plugin"] == "custom"
    assert set(config["pluginConfig"]) <= GLOBAL_KEYS
    assert config["pluginConfig"]["max_output_length"] == 80
    global_timeout = _seconds(config["pluginConfig"]["timeout"])
    assert all(_DURATION.match(config["pluginConfig"][key]) for key in ("timeout", "invoke_interval"))
    defaults = {c["type"] for c in config["conditions"]}
    for rule in config["rules"]:
        assert set(rule) <= RULE_KEYS and rule["type"] in ("temporary", "permanent")
        assert _DURATION.match(rule["timeout"]) and _seconds(rule["timeout"]) <= global_timeout  # NPD's Validate
        if rule["type"] == "permanent":
            assert rule["condition"] in defaults  # NPD: a permanent problem needs its default condition
        # the plugin's own arguments are burnin probe's, and its output fits NPD's cut
        args = build_parser("probe").parse_args(rule["args"])
        assert args.format == "npd" and args.max_output_length == config["pluginConfig"]["max_output_length"]
        assert args.timeout * 3 < _seconds(rule["timeout"])


def test_the_monitor_config_has_the_shape_of_npds_shipped_ones() -> None:
    ours = _monitor()
    for path in sorted(_npd_reference().glob("*.json")):
        theirs = json.loads(path.read_text(encoding="utf-8"))
        if theirs.get("plugin") != "custom":
            continue
        assert set(ours) == set(theirs), path.name
        for rule in theirs["rules"]:
            assert set(rule) <= RULE_KEYS, path.name  # our key list is NPD's own


def test_the_rbac_grants_only_nodes_and_the_daemonset_finds_its_node() -> None:
    documents = list(yaml.safe_load_all((PACKAGING / "rbac.yaml").read_text(encoding="utf-8")))
    [role] = [d for d in documents if d["kind"] == "ClusterRole"]
    granted = {(resource, verb) for rule in role["rules"] for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == {("nodes", "get"), ("nodes", "list"), ("nodes", "patch"), ("nodes/status", "patch")}
    [daemonset] = yaml.safe_load_all((PACKAGING / "daemonset.yaml").read_text(encoding="utf-8"))
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["KUBERNETES_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert container["command"][:4] == ["burnin", "watch", "--gate", "kubernetes"]
    build_parser("watch").parse_args(container["command"][1:])

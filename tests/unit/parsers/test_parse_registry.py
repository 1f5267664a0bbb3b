"""The lazy registry, ``parse`` and ``to_jsonable``."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import subprocess
import sys

import pytest

from burnin.errors import ParseError, UsageError
from burnin.parsers import PARSERS, get_parser, parse, to_jsonable

EXPECTED_TOOLS = {
    "nvidia-smi-topo",
    "nvidia-smi-q",
    "nvidia-smi-nvlink",
    "nvidia-smi-query",
    "nccl-tests",
    "ibstat",
    "ibstatus",
    "ibv-devinfo",
    "nvbandwidth",
    "p2p-bandwidth",
    "megatron-log",
    "dmesg-xid",
    "lscpu",
    "numactl",
    "lspci",
    "dcgmi-diag",
    "dcgmi-health",
    "perftest",
    "nvidia-smi-dmon",
    "ibdev2netdev",
    "ip-route",
    "ip-addr",
    "ip-link",
    "nccl-info",
    "mlxconfig",
    "mlnx-qos",
    "sysctl",
    "cpu-bind",
    "sacctmgr-events",
}


def test_registry_names_the_contract_tools() -> None:
    assert set(PARSERS) == EXPECTED_TOOLS


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_entry_imports(tool: str) -> None:
    module_name, _, func_name = PARSERS[tool].partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    assert callable(func) and get_parser(tool) is func


@pytest.mark.proc
def test_importing_the_package_is_lazy() -> None:
    code = "import sys, burnin.parsers as p; print(sorted(m for m in sys.modules if m.startswith('burnin.parsers.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_tool_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown tool 'nope'"):
        parse("nope", "text")


def test_public_names_other_code_imports() -> None:
    from burnin.parsers.cpu import parse_lscpu, parse_numactl_hardware
    from burnin.parsers.dcgmi import parse_dcgmi_diag
    from burnin.parsers.dmesg import XidEvent, XidReport, parse_xid_events
    from burnin.parsers.ibstat import IbCa, IbPort, IbstatReport, parse_ibstat, parse_ibstatus
    from burnin.parsers.lspci import LspciReport, PciDevice, parse_lspci
    from burnin.parsers.megatron import parse_megatron_log
    from burnin.parsers.nccl_tests import NcclRun, parse_nccl_tests
    from burnin.parsers.nvbandwidth import parse_nvbandwidth, parse_p2p_bandwidth
    from burnin.parsers.nvidia_smi import (
        SmiGpu,
        SmiQuery,
        TopoMatrix,
        parse_nvlink,
        parse_query_csv,
        parse_smi_query,
        parse_topo_matrix,
    )

    names = {f.name for f in dataclasses.fields(TopoMatrix)}
    assert {"gpus", "nics", "links", "cpu_affinity", "numa_affinity", "nic_names"} <= names
    xid_fields = {f.name for f in dataclasses.fields(XidEvent)}
    assert {"pci", "xid", "pid", "text", "timestamp"} <= xid_fields
    assert {"port", "state", "physical_state", "rate_gbps", "link_layer"} <= {
        f.name for f in dataclasses.fields(IbPort)
    }
    assert {"name", "type", "firmware", "ports"} <= {f.name for f in dataclasses.fields(IbCa)}
    pci_fields = {f.name for f in dataclasses.fields(PciDevice)}
    assert {"lnksta_downgraded", "acs_cap", "acs_ctl", "numa_node"} <= pci_fields
    classes: tuple[type, ...] = (
        XidReport,
        IbstatReport,
        LspciReport,
        NcclRun,
        SmiQuery,
        SmiGpu,
        TopoMatrix,
    )
    for cls in classes:
        params = vars(cls)["__dataclass_params__"]
        assert params.frozen and "__slots__" in vars(cls)
    for func in (
        parse_lscpu,
        parse_numactl_hardware,
        parse_dcgmi_diag,
        parse_xid_events,
        parse_ibstat,
        parse_ibstatus,
        parse_lspci,
        parse_megatron_log,
        parse_nccl_tests,
        parse_nvbandwidth,
        parse_p2p_bandwidth,
        parse_nvlink,
        parse_query_csv,
        parse_smi_query,
        parse_topo_matrix,
    ):
        assert callable(func)


def test_records_are_frozen() -> None:
    rep = parse("dmesg-xid", "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.events = ()  # type: ignore[attr-defined]


def test_to_jsonable() -> None:
    @dataclasses.dataclass(frozen=True)
    class Inner:
        x: float
        items: tuple[int, ...]

    @dataclasses.dataclass(frozen=True)
    class Outer:
        inner: Inner
        table: dict[int, str]
        bad: float
        tags: frozenset[str]

    data = to_jsonable(Outer(Inner(1.5, (1, 2)), {3: "a"}, math.nan, frozenset({"b", "a"})))
    assert data == {
        "inner": {"x": 1.5, "items": [1, 2]},
        "table": {"3": "a"},
        "bad": None,
        "tags": ["a", "b"],
    }
    json.dumps(data, allow_nan=False)


def test_parse_error_carries_tool_and_excerpt() -> None:
    with pytest.raises(ParseError) as exc:
        parse("lspci", "lspci: Unable to load libkmod resources: error -2\n")
    assert exc.value.tool == "lspci"
    assert "libkmod" in exc.value.excerpt


def _record_classes() -> dict[str, type]:
    import typing

    out: dict[str, type] = {}
    for tool in PARSERS:
        func = get_parser(tool)
        todo = [typing.get_type_hints(func)["return"]]
        while todo:
            hint = todo.pop()
            if dataclasses.is_dataclass(hint) and isinstance(hint, type):
                if hint.__name__ not in out:
                    out[hint.__name__] = hint
                    todo.extend(typing.get_type_hints(hint).values())
            else:
                todo.extend(typing.get_args(hint))
    return out


def test_json_doc_names_every_key() -> None:
    """docs/parse-json.md documents every field of every record (keys are a contract)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "parse-json.md").read_text()
    classes = _record_classes()
    assert len(classes) > 20
    missing = sorted(
        f"{name}.{field.name}"
        for name, cls in classes.items()
        for field in dataclasses.fields(cls)
        if f"`{field.name}`" not in doc and f"`{field.name}[]`" not in doc
    )
    assert missing == []
    for tool in PARSERS:
        assert f"## {tool}\n" in doc

"""Pure parsers: tool text in, frozen typed records out.

Importing this package is cheap: each parser module is imported only when its
tool is first asked for. Parsers never do I/O and raise only
:class:`burnin.errors.ParseError` on input they cannot read.

The JSON form of every record (``to_jsonable``) is documented in
``docs/parse-json.md``; its keys are a contract.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, cast

from burnin.errors import UsageError

#: tool name -> "module:function". Explicit on purpose: grep finds every parser.
PARSERS: dict[str, str] = {
    "nvidia-smi-topo": "burnin.parsers.nvidia_smi:parse_topo_matrix",
    "nvidia-smi-q": "burnin.parsers.nvidia_smi:parse_smi_query",
    "nvidia-smi-nvlink": "burnin.parsers.nvidia_smi:parse_nvlink",
    "nvidia-smi-query": "burnin.parsers.nvidia_smi:parse_query_csv",
    "nccl-tests": "burnin.parsers.nccl_tests:parse_nccl_tests",
    "ibstat": "burnin.parsers.ibstat:parse_ibstat",
    "ibstatus": "burnin.parsers.ibstat:parse_ibstatus",
    "ibv-devinfo": "burnin.parsers.ibv_devinfo:parse_ibv_devinfo",
    "nvbandwidth": "burnin.parsers.nvbandwidth:parse_nvbandwidth",
    "p2p-bandwidth": "burnin.parsers.p2p_bandwidth:parse_p2p_bandwidth",
    "megatron-log": "burnin.parsers.megatron:parse_megatron_log",
    "dmesg-xid": "burnin.parsers.dmesg:parse_xid_events",
    "lscpu": "burnin.parsers.cpu:parse_lscpu",
    "numactl": "burnin.parsers.cpu:parse_numactl_hardware",
    "lspci": "burnin.parsers.lspci:parse_lspci",
    "dcgmi-diag": "burnin.parsers.dcgmi:parse_dcgmi_diag",
    "dcgmi-health": "burnin.parsers.dcgmi_health:parse_dcgmi_health",
    "perftest": "burnin.parsers.perftest:parse_perftest",
    "nvidia-smi-dmon": "burnin.parsers.dmon:parse_dmon",
    # storage fabric (check-catalog 8, STO)
    "ibdev2netdev": "burnin.parsers.ibdev2netdev:parse_ibdev2netdev",
    "ip-route": "burnin.parsers.iproute:parse_ip_route",
    "ip-addr": "burnin.parsers.iproute:parse_ip_addr",
    "ip-link": "burnin.parsers.iproute:parse_ip_link",
    "nccl-info": "burnin.parsers.nccl_info:parse_nccl_info",
    "mlxconfig": "burnin.parsers.mlxconfig:parse_mlxconfig_query",
    "mlnx-qos": "burnin.parsers.mlnx_qos:parse_mlnx_qos",
    "sysctl": "burnin.parsers.sysctl:parse_sysctl",
    "cpu-bind": "burnin.parsers.cpubind:parse_cpu_bind",
    "sacctmgr-events": "burnin.parsers.sacctmgr:parse_sacctmgr_events",
}

__all__ = ["PARSERS", "get_parser", "iter_json", "parse", "to_jsonable"]


def get_parser(tool: str) -> Callable[[str], object]:
    """Import and return the parser function registered for ``tool``."""
    try:
        target = PARSERS[tool]
    except KeyError:
        known = ", ".join(sorted(PARSERS))
        raise UsageError(f"unknown tool {tool!r}; known tools: {known}") from None
    module_name, _, func_name = target.partition(":")
    module = importlib.import_module(module_name)
    return cast("Callable[[str], object]", getattr(module, func_name))


def parse(tool: str, text: str) -> object:
    """Parse ``text`` as the output of ``tool``; raises ParseError or UsageError."""
    return get_parser(tool)(text)


def to_jsonable(record: object) -> object:
    """Turn a record into JSON-ready data: dataclasses -> dicts, tuples -> lists.

    Mapping keys become strings. Floats that JSON cannot carry (NaN, infinity)
    become ``None``.
    """
    return _convert(record)


def _convert(value: Any) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _convert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_convert(v) for v in items]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def iter_json(record: object, indent: int = 2) -> Iterator[str]:
    """``json.dumps(to_jsonable(record), indent=indent)`` in pieces, without building the converted tree.

    A record parsed from hundreds of MB of output is written as it is walked; its
    JSON-ready copy (dicts are several times bigger than slotted records) never
    exists. DEL is written ``\\u007f`` like every other control character.
    """
    yield from _pieces(record, 0, indent)


def _pieces(value: Any, level: int, indent: int) -> Iterator[str]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield from _object([(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)], level, indent)
    elif isinstance(value, dict):
        yield from _object(list({str(k): v for k, v in value.items()}.items()), level, indent)
    elif isinstance(value, (list, tuple, set, frozenset)):
        items: Any = sorted(value) if isinstance(value, (set, frozenset)) else value
        if not items:
            yield "[]"
            return
        inner = "\n" + " " * (indent * (level + 1))
        yield "["
        for i, item in enumerate(items):
            yield inner if i == 0 else "," + inner
            yield from _pieces(item, level + 1, indent)
        yield "\n" + " " * (indent * level) + "]"
    elif isinstance(value, float) and not math.isfinite(value):
        yield "null"
    elif isinstance(value, datetime):
        yield _scalar(value.isoformat())
    else:
        yield _scalar(value)


def _object(items: list[tuple[str, Any]], level: int, indent: int) -> Iterator[str]:
    if not items:
        yield "{}"
        return
    inner = "\n" + " " * (indent * (level + 1))
    yield "{"
    for i, (key, item) in enumerate(items):
        yield (inner if i == 0 else "," + inner) + _scalar(key) + ": "
        yield from _pieces(item, level + 1, indent)
    yield "\n" + " " * (indent * level) + "}"


def _scalar(value: object) -> str:
    text = json.dumps(value)
    return text.replace("\x7f", "\\u007f") if "\x7f" in text else text

"""STO-03 (storage traffic): the judge on measured sections, the write tools' output parsers, the site settings,
and the measurement over a fake transport (counters before/after, the tool's bytes)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from burnin.checks.storage_traffic import judge_traffic, storage_traffic
from burnin.errors import ParseError, UsageError
from burnin.evaluate.verdict import Status, Unmeasurable
from burnin.facts import Facts
from burnin.launch.ssh import TransportLauncher
from burnin.parsers.storage_io import parse_dd_bytes, parse_fio_bytes
from burnin.resources import topologies_dir
from burnin.storage.measure import StorageSettings, load_storage_settings, measure_node
from burnin.topology.model import Topology
from burnin.transport.base import CommandResult

GIB = 1 << 30


def section(compute: dict[str, dict[str, int]] | None = None, storage: dict[str, dict[str, int]] | None = None,
            written: int = GIB) -> dict[str, Any]:
    return {"bytes_written": written, "bytes_read": written, "mounts": ["/mnt/home"],
            "compute": compute if compute is not None else {"mlx5_0": {"xmit": 0, "rcv": 0},
                                                           "mlx5_2": {"xmit": 4096, "rcv": 0}},
            "storage": storage if storage is not None else {"enp41s0f0np0": {"tx": GIB + 5_000_000, "rx": GIB}}}


def test_passes_when_the_bluefield_carried_the_bytes_and_compute_hcas_stayed_quiet() -> None:
    verdict = judge_traffic("n1", section())
    assert verdict.status is Status.PASS, verdict.reason


def test_fails_naming_the_compute_hca_and_its_bytes_against_the_bytes_written() -> None:
    verdict = judge_traffic("n1", section(compute={"mlx5_0": {"xmit": 0, "rcv": 0},
                                                   "mlx5_2": {"xmit": GIB, "rcv": GIB}},
                                          storage={"enp41s0f0np0": {"tx": 0, "rx": 0}}))
    assert verdict.status is Status.FAIL
    assert "mlx5_2 compute HCA moved 2147483648 bytes (xmit 1073741824, rcv 1073741824)" in verdict.reason
    assert f"{GIB} bytes written" in verdict.reason and "mlx5_0" not in verdict.reason


def test_one_percent_is_the_line() -> None:
    limit = GIB // 100
    under = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": limit - 1, "rcv": 0}}))
    at = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": limit, "rcv": 0}}))
    assert under.status is Status.PASS and at.status is Status.FAIL


def test_fails_when_the_bluefield_netdevs_did_not_carry_the_writes() -> None:
    verdict = judge_traffic("n1", section(storage={"enp41s0f0np0": {"tx": GIB // 2, "rx": 0}}))
    assert verdict.status is Status.FAIL and f"transmitted {GIB // 2} bytes" in verdict.reason


def test_counter_going_backwards_is_incomplete_not_pass() -> None:
    verdict = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": -5, "rcv": 0}}))
    assert verdict.status is Status.INCOMPLETE


@pytest.mark.parametrize("bad", [{"bytes_written": 0}, {"bytes_written": None}, {"compute": {}}, {"storage": {}}])
def test_nothing_to_judge_is_unmeasurable(bad: dict[str, Any]) -> None:
    with pytest.raises(Unmeasurable):
        judge_traffic("n1", {**section(), **bad})


def topology() -> Topology:
    from burnin.topology.load import load_topology

    return load_topology(topologies_dir() / "hgx-h100-8gpu.yaml")


@pytest.mark.parametrize("data,cause", [
    ({}, "--suite storage"),
    ({"storage_traffic": {"error": "reading the byte counters: cat exited 1"}}, "cat exited 1"),
    ({"storage_traffic": {"unavailable": "ssh offers no transport"}}, "no transport"),
])
def test_not_measured_is_incomplete_with_the_cause(data: dict[str, Any], cause: str) -> None:
    verdict = storage_traffic(Facts("n1", data), topology())
    assert verdict.status is Status.INCOMPLETE and cause in verdict.reason


# ------------------------------------------------------------------ parsers

DD_STDERR = "1024+0 records in\n1024+0 records out\n1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.912 s, 1.2 GB/s\n"


def test_dd_summary_line() -> None:
    assert parse_dd_bytes(DD_STDERR) == GIB
    with pytest.raises(ParseError):
        parse_dd_bytes("dd: failed to open '/mnt/x': Permission denied\n")


def test_fio_json_sums_the_jobs_of_one_direction() -> None:
    text = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + json.dumps(
        {"fio version": "fio-3.35", "jobs": [{"read": {"io_bytes": 0}, "write": {"io_bytes": GIB}},
                                              {"read": {"io_bytes": 0}, "write": {"io_bytes": 5}}]})
    assert parse_fio_bytes(text, "write") == GIB + 5 and parse_fio_bytes(text, "read") == 0
    with pytest.raises(ParseError):
        parse_fio_bytes('{"jobs": [{"write": {}}]}', "write")
    with pytest.raises(ParseError):
        parse_fio_bytes("fio: pid=0, err=2/file:filesetup.c", "write")


# ------------------------------------------------------------------ settings


def test_settings_defaults_and_file(tmp_path: Path) -> None:
    assert load_storage_settings(None) == StorageSettings("auto", 1024, 600.0)
    good = tmp_path / "s.yaml"
    good.write_text("tool: dd\nsize_mib: 64\n")
    assert load_storage_settings(good) == StorageSettings("dd", 64, 600.0)


@pytest.mark.parametrize("text,word", [("tool: cp\n", "tool"), ("size_mib: 0\n", "size_mib"),
                                       ("sizes: 4\n", "unknown key sizes"), ("- 1\n", "mapping")])
def test_settings_mistakes_are_usage_errors(tmp_path: Path, text: str, word: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=word):
        load_storage_settings(path)


# ------------------------------------------------------------------ measurement over a fake transport


class FakeNode:
    """A node whose counters move as its dd writes: ``on_ib`` sends the bytes to mlx5_2 instead."""

    name = "fake"

    def __init__(self, on_ib: bool) -> None:
        self.on_ib = on_ib
        self.values = {"mlx5_2/port_xmit_data": 10, "mlx5_2/port_rcv_data": 20, "bf0/tx_bytes": 100,
                       "bf0/rx_bytes": 200}
        self.argvs: list[list[str]] = []

    def _key(self, path: str) -> str:
        parts = path.split("/")
        return f"{parts[-5]}/{parts[-1]}" if "infiniband" in path else f"{parts[-3]}/{parts[-1]}"

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CommandResult:
        self.argvs.append(list(argv))
        if argv[0] == "cat":
            out = "".join(f"{self.values[self._key(p)]}\n" for p in argv[1:])
            return CommandResult(node, tuple(argv), 0, out, "", 0.0)
        if argv[0] == "dd":
            write = any(a.startswith("of=/mnt") for a in argv)
            if self.on_ib:
                self.values["mlx5_2/port_xmit_data" if write else "mlx5_2/port_rcv_data"] += GIB // 4
            else:
                self.values["bf0/tx_bytes" if write else "bf0/rx_bytes"] += GIB
            return CommandResult(node, tuple(argv), 0, "", DD_STDERR, 0.0)
        return CommandResult(node, tuple(argv), 0, "", "", 0.0)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("on_ib", [False, True])
def test_measure_node_records_the_deltas_in_bytes(on_ib: bool) -> None:
    node = FakeNode(on_ib)
    got = measure_node(TransportLauncher(node, name="fake"), "n1", root="/", mounts=["/mnt/home"],
                       compute_hcas=["mlx5_2"], storage_netdevs=["bf0"], settings=StorageSettings("dd", 1024))
    assert got["bytes_written"] == GIB and got["bytes_read"] == GIB and got["tool"] == "dd"
    expected_ib = GIB if on_ib else 0
    assert got["compute"] == {"mlx5_2": {"xmit": expected_ib, "rcv": expected_ib}}
    assert got["storage"] == {"bf0": {"tx": GIB - expected_ib, "rx": GIB - expected_ib}}
    assert ["rm", "-f", "/mnt/home/.burnin-sto03-n1"] in node.argvs
    verdict = judge_traffic("n1", got)
    assert verdict.status is (Status.FAIL if on_ib else Status.PASS), verdict.reason


def test_a_failed_write_is_an_error_not_a_measurement() -> None:
    class Failing(FakeNode):
        def run(self, node: str, argv: Sequence[str], **kw: Any) -> CommandResult:
            if argv[0] == "dd":
                return CommandResult(node, tuple(argv), 1, "", "dd: failed to open: Read-only file system\n", 0.0)
            return super().run(node, argv, **kw)

    got = measure_node(TransportLauncher(Failing(False), name="fake"), "n1", root="/", mounts=["/mnt/home"],
                       compute_hcas=["mlx5_2"], storage_netdevs=["bf0"], settings=StorageSettings("dd", 1))
    assert "write with dd" in got["error"] and "bytes_written" not in got
    assert storage_traffic(Facts("n1", {"storage_traffic": got}), topology()).status is Status.INCOMPLETE


def test_ip_routed_onto_the_compute_fabric_counts_on_the_ipoib_netdev() -> None:
    # IPoIB traffic of a veth lab node (or a port counter that lags) shows on the netdev, byte for byte.
    verdict = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": 0, "rcv": 0, "ipoib_tx": GIB, "ipoib_rx": 7}},
                                          storage={"enp41s0f0np0": {"tx": 0, "rx": 0}}))
    assert verdict.status is Status.FAIL
    assert f"mlx5_2 compute HCA's IPoIB netdev moved {GIB + 7} bytes (tx {GIB}, rx 7)" in verdict.reason


def test_the_larger_of_port_and_ipoib_counters_is_judged() -> None:
    limit = GIB // 100
    quiet_netdev = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": limit, "rcv": 0, "ipoib_tx": 0,
                                                                   "ipoib_rx": 0}}))
    quiet_port = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": 0, "rcv": 0, "ipoib_tx": limit - 1,
                                                                 "ipoib_rx": 0}}))
    assert quiet_netdev.status is Status.FAIL and "xmit" in quiet_netdev.reason
    assert quiet_port.status is Status.PASS


def test_an_ipoib_counter_going_backwards_is_incomplete() -> None:
    verdict = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": 0, "rcv": 0, "ipoib_tx": -1, "ipoib_rx": 0}}))
    assert verdict.status is Status.INCOMPLETE and "IPoIB tx_bytes delta" in verdict.reason


def test_a_missing_counter_is_named_once_and_not_called_a_reset() -> None:
    verdict = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": 0, "rcv": 0, "ipoib_tx": 0}}))
    assert verdict.status is Status.INCOMPLETE
    assert "mlx5_2: IPoIB rx_bytes delta not reported" in verdict.reason
    assert "mlx5_2: mlx5_2" not in verdict.reason and "went backwards" not in verdict.reason
    negative = judge_traffic("n1", section(compute={"mlx5_2": {"xmit": -1, "rcv": 0}}))
    assert "(a counter reset or went backwards)" in negative.reason

"""``burnin soak`` reaches its nodes through the dispatcher registry, and over Slurm through one allocation.

- every registered ``--via`` name opens through the registry with the soak's context, and a
  checkpoint gives ``--resume`` the same options back;
- the soak's nodes are the dispatcher's launcher held for the soak: commands and samples of
  the nodes asked for (the Slurm launcher's own flow: tests/unit/launch/test_launch_slurm.py).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from burnin.cli import soak_cmd
from burnin.cli.main import build_parser
from burnin.dispatch import registry
from burnin.errors import UsageError
from burnin.launch.slurm import SlurmLauncher
from burnin.launch.ssh import TransportLauncher
from burnin.soak.nodes import SAMPLE_SOURCES, open_nodes
from burnin.transport.base import CommandResult
from burnin.transport.slurm_jobs import SlurmJobs


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser("soak").parse_args(["soak", *argv])


class _Opened:
    nodes = ["n1"]
    topology_by_node: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(registry.DISPATCHERS))
def test_every_registered_via_name_opens_through_the_registry(name: str, monkeypatch: pytest.MonkeyPatch,
                                                               h100_topology: Any, tmp_path: Path) -> None:
    opened: list[tuple[argparse.Namespace, Any]] = []
    module = registry._module(name)
    monkeypatch.setattr(module, "open_dispatcher", lambda args, context: opened.append((args, context)) or _Opened())
    args = _parse("--via", name, "--duration", "1h", "--out", str(tmp_path / "out"))
    soak_cmd._check(args)
    dispatcher = soak_cmd._dispatcher(args, h100_topology, "hgx-h100-8gpu", tmp_path / "out")
    assert isinstance(dispatcher, _Opened) and len(opened) == 1
    given, context = opened[0]
    assert given.via == name
    assert context.suites == ("soak",) and context.state_dir == tmp_path / "out" / soak_cmd.SIM_RACK
    assert context.topology is h100_topology and context.topology_ref == "hgx-h100-8gpu"


@pytest.mark.parametrize("argv", [
    ["--sim", "3", "--fault", "sim01:mce", "--fault", "sim02:xid-at:10:79"],
    ["--via", "ssh", "--hosts", "n[1-2]", "--inventory", "inv.yaml", "--ssh-config", "cfg", "--fanout", "5",
     "--accept-new-host-keys"],
    ["--via", "slurm", "--nodes", "n[1-4]", "--partition", "p", "--reservation", "r", "--collector", "/opt/c.pyz"],
])
def test_a_checkpoint_gives_resume_the_dispatcher_options_back(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    args = _parse(*argv, "--duration", "1h", "--gate", "slurm")
    command = json.loads(json.dumps(soak_cmd._command(args, 3600.0)))  # as the checkpoint stores it
    rebuilt = soak_cmd._namespace(command)
    for dest in soak_cmd._dispatch_defaults():
        value = getattr(args, dest)
        expected = value.resolve() if isinstance(value, Path) else value
        assert getattr(rebuilt, dest) == expected, dest
    assert (rebuilt.gate, rebuilt.dry_run) == ("slurm", False)


def test_a_checkpoint_that_spelled_out_its_options_still_resumes() -> None:
    legacy = {"sim": None, "faults": [], "via": "ssh", "hosts": "n[1-2]", "inventory": "/etc/inv.yaml",
              "ssh_config": None, "accept_new_host_keys": True, "fanout": 7, "gate": "none", "dry_run": False}
    rebuilt = soak_cmd._namespace(legacy)
    assert (rebuilt.via, rebuilt.hosts, rebuilt.fanout) == ("ssh", "n[1-2]", 7)
    assert rebuilt.inventory == Path("/etc/inv.yaml")
    assert rebuilt.accept_new_host_keys and registry.selected(rebuilt) == "ssh"


@pytest.mark.parametrize(("argv", "message"), [
    (["--duration", "1h"], "no nodes: pass --sim"),
    (["--via", "slurm", "--duration", "1h", "--fault", "sim01:mce"], "--fault needs --sim"),
    (["--via", "ssh", "--sim", "2", "--duration", "1h"], "does not go with --via ssh"),
    (["--resume", "x", "--nodes", "n1", "--via", "slurm"], "drop --via, --nodes"),
])
def test_mistakes_about_nodes_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        soak_cmd._check(_parse(*argv))


# ---------------------------------------------------------------- the soak's nodes through a launcher


class _Transport:
    name = "fake"

    def __init__(self) -> None:
        self.ran: list[tuple[str, tuple[str, ...], bytes | None]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Any = None) -> CommandResult:
        self.ran.append((node, tuple(argv), stdin))
        if "burnin.collector" in argv:
            return CommandResult(node, tuple(argv), 0, json.dumps({"sources": {}, "node": node}), "", 0.0)
        return CommandResult(node, tuple(argv), 0, "ok\n", "", 0.0)

    def close(self) -> None:
        pass


def test_the_soaks_nodes_run_commands_and_sample_only_the_nodes_asked_for() -> None:
    transport = _Transport()
    nodes, failure = open_nodes(TransportLauncher(transport, name="fake"), ["n1", "n2", "n3"], hold_s=60.0)
    assert failure is None and nodes.nodes == ["n1", "n2", "n3"]
    results = nodes.run(["n1", "n2"], ["gpu_burn", "10"], timeout=5, stdin=b"x")
    assert {n: r.ok for n, r in results.items()} == {"n1": True, "n2": True}
    assert sorted(transport.ran) == [("n1", ("gpu_burn", "10"), b"x"), ("n2", ("gpu_burn", "10"), b"x")]
    transport.ran.clear()
    sampled = nodes.sample(timeout=5, nodes=["n3"])
    assert list(sampled) == ["n3"] and sampled["n3"].data["node"] == "n3" and [r[0] for r in transport.ran] == ["n3"]
    assert "--sources" in transport.ran[0][1] and SAMPLE_SOURCES in transport.ran[0][1]


class _Busy:
    """Slurm that knows n1..n3 (n3 drained by someone else) and grants no allocation."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        self.calls.append(list(argv))
        if argv[0] == "scontrol":
            states = ["n1 State=IDLE", "n2 State=IDLE", "n3 State=IDLE+DRAIN Reason=dimm [root@t]"]
            return CommandResult("c", tuple(argv), 0, "".join(f"NodeName={s}\n" for s in states), "", 0.0)
        return CommandResult("c", tuple(argv), 1, "", "salloc: error: Invalid partition name specified", 0.1)


def test_nodes_that_cannot_be_held_are_one_line_and_give_everything_back() -> None:
    fake = _Busy()
    _, failure = open_nodes(SlurmLauncher(SlurmJobs(fake)), ["n1", "n2", "n3"], hold_s=3600.0)
    assert failure is not None and failure.startswith("no Slurm allocation for the soak: salloc exited 1")
    assert [c[0] for c in fake.calls] == ["scontrol", "salloc"]
    salloc = fake.calls[1]
    assert {"--exclusive", "--ntasks-per-node=1", "--immediate=300", "--nodelist=n[1-2]"} <= set(salloc)

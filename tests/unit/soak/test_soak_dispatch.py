"""``burnin soak`` reaches its nodes through the dispatcher registry, and over Slurm through one allocation.

- every registered ``--via`` name opens through the registry with the soak's context, and a
  checkpoint gives ``--resume`` the same options back;
- the soak's nodes come from what the dispatcher's launcher offers (a transport, Slurm steps);
- :class:`SlurmNodes` (a fake Slurm client): one exclusive allocation, the collector and a
  command's input shipped once, a step per node, one collector step per sample (a step per
  node when it reaches none), held nodes left unreachable, everything released on close.
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
from burnin.dispatch.base import JobLauncher, simulated_time_of
from burnin.errors import UsageError
from burnin.facts import Facts
from burnin.nodes import expand
from burnin.soak.nodes import DispatcherNodes, open_nodes
from burnin.soak.slurm_nodes import STDIN_FROM_FILE, SlurmNodes
from burnin.transport.base import CommandResult
from burnin.transport.slurm import CONTROLLER
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


# ---------------------------------------------------------------- what the launcher offers


class _Transport:
    name = "fake"

    def __init__(self) -> None:
        self.ran: list[tuple[str, tuple[str, ...], bytes | None]] = []

    def run(self, node: str, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None,
            env: Any = None) -> CommandResult:
        self.ran.append((node, tuple(argv), stdin))
        return CommandResult(node, tuple(argv), 0, "ok\n", "", 0.0)

    def close(self) -> None:
        pass


class _Dispatcher:
    def __init__(self, launcher: JobLauncher, nodes: Sequence[str] = ("n1", "n2")) -> None:
        self.nodes = list(nodes)
        self.topology_by_node: dict[str, str] = {}
        self._launcher = launcher
        self.gathered: list[str] = []

    def gather(self, *, sources: str, timeout: float, on_done: Any = None) -> dict[str, Facts]:
        self.gathered.append(sources)
        return {n: Facts(n, {"sources": {}}) for n in self.nodes}

    def launcher(self, facts: Any) -> JobLauncher:
        return self._launcher

    def close(self) -> None:
        pass


def test_a_launcher_with_a_transport_runs_commands_through_it_and_samples_by_gathering() -> None:
    transport = _Transport()
    dispatcher = _Dispatcher(JobLauncher("fake", "mpirun", transport=transport))
    nodes = open_nodes(dispatcher, fanout=4, hold_s=60.0)  # type: ignore[arg-type]
    assert isinstance(nodes, DispatcherNodes)
    results = nodes.run(["n1", "n2"], ["gpu_burn", "10"], timeout=5, stdin=b"x")
    assert {n: r.ok for n, r in results.items()} == {"n1": True, "n2": True}
    assert sorted(transport.ran) == [("n1", ("gpu_burn", "10"), b"x"), ("n2", ("gpu_burn", "10"), b"x")]
    assert set(nodes.sample(timeout=5, nodes=["n1"])) >= {"n1"} and dispatcher.gathered
    assert simulated_time_of(dispatcher, 3600.0) is None  # real nodes: the soak runs on the wall clock


def test_a_launcher_offering_neither_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="offers neither a transport nor Slurm steps"):
        open_nodes(_Dispatcher(JobLauncher("odd", "mpirun")), fanout=4, hold_s=60.0)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Slurm


def _node_line(name: str, state: str = "IDLE", reason: str = "") -> str:
    why = f" Reason={reason} [root@2024-01-01T00:00:00]" if reason else ""
    return f"NodeName={name} Arch=x86_64 CPUTot=64 State={state} ThreadsPerCore=1{why}"


class FakeSlurm:
    """Slurm's client commands, answered; every argv kept in order."""

    def __init__(self, nodes: str, *, salloc: bool = True, sample_ok: bool = True) -> None:
        self.nodes = nodes
        self.salloc = salloc
        self.sample_ok = sample_ok
        self.calls: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float = 10.0) -> CommandResult:
        argv = list(argv)
        self.calls.append(argv)
        tool = argv[0]
        if tool == "scontrol":
            return self._ok(argv, stdout=self.nodes)
        if tool == "salloc":
            if not self.salloc:
                return CommandResult(CONTROLLER, tuple(argv), 1, "", "salloc: error: Invalid partition", 0.1)
            return self._ok(argv, stderr="salloc: Granted job allocation 42\n")
        if tool == "srun":
            listed = expand(next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1])
            if "--label" in argv:  # the collector step
                if not self.sample_ok and len(listed) > 1:
                    return CommandResult(CONTROLLER, tuple(argv), 1, "", "srun: error: Unable to create step", 0.1)
                out = "".join(f"{k}: @burnin-node {n}@\n{k}: " + json.dumps({"sources": {}, "from": n})
                              + f"\n{k}: @burnin-exit 0@\n" for k, n in enumerate(listed))
                return self._ok(argv, stdout=out)
            return self._ok(argv, stdout=f"ran on {listed[0]}\n")
        return self._ok(argv)

    @staticmethod
    def _ok(argv: list[str], *, stdout: str = "", stderr: str = "") -> CommandResult:
        return CommandResult(CONTROLLER, tuple(argv), 0, stdout, stderr, 0.1)

    def tools(self) -> list[str]:
        return [c[0] if c[0] != "srun" else ("srun-collect" if "--label" in c else "srun") for c in self.calls]


STATES = "\n".join([_node_line("n1"), _node_line("n2"), _node_line("n3", "IDLE+DRAIN", "bad dimm")])


def _opened(fake: FakeSlurm, tmp_path: Path, nodes: Sequence[str] = ("n1", "n2", "n3")) -> SlurmNodes:
    soak = SlurmNodes(SlurmJobs(fake), nodes, log_file=tmp_path / "slurm-commands.log")
    soak.open(time_limit_s=3 * 3600 + 600, wait_s=30)
    return soak


def test_one_exclusive_allocation_for_the_nodes_slurm_runs_jobs_on(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    soak = _opened(fake, tmp_path)
    assert fake.tools() == ["scontrol", "salloc", "sbcast"]
    salloc = fake.calls[1]
    assert "--exclusive" in salloc and "--nodelist=n[1-2]" in salloc and "--time=190" in salloc
    assert fake.calls[2][-1].startswith("/tmp/burnin-soak-42-") and fake.calls[2][-1].endswith("-collector.pyz")
    held = soak.sample(timeout=10, nodes=["n3"])["n3"]
    assert held.unreachable == "Slurm will start no job on n3: State=IDLE+DRAIN, Reason='bad dimm'"
    assert not soak.run(["n3"], ["stress-ng"], timeout=5)["n3"].ok
    assert "$ salloc --no-shell" in (tmp_path / "slurm-commands.log").read_text()


def test_a_step_per_node_and_the_input_shipped_once(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    soak = _opened(fake, tmp_path)
    fake.calls.clear()
    for _ in range(2):
        results = soak.run(["n1", "n2"], ["python3", "-", "60"], timeout=60, stdin=b"print('burn')\n")
        assert {n: (r.ok, r.argv, r.stdout) for n, r in results.items()} == {
            "n1": (True, ("python3", "-", "60"), "ran on n1\n"), "n2": (True, ("python3", "-", "60"), "ran on n2\n")}
    assert fake.tools() == ["sbcast", "srun", "srun", "srun", "srun"]
    shipped = fake.calls[0][-1]
    assert shipped.startswith("/tmp/burnin-soak-42-") and shipped.endswith("-stdin")
    step = fake.calls[1]
    assert step[:2] == ["srun", "--jobid=42"] and "--label" not in step
    assert step[step.index("sh"):] == ["sh", "-c", STDIN_FROM_FILE, "sh", shipped, "python3", "-", "60"]


def test_a_sample_is_one_collector_step_and_a_step_per_node_when_it_reaches_none(tmp_path: Path) -> None:
    fake = FakeSlurm("\n".join([_node_line("n1"), _node_line("n2")]))
    soak = _opened(fake, tmp_path, ("n1", "n2"))
    fake.calls.clear()
    facts = soak.sample(timeout=20)
    assert {n: f.data.get("from") for n, f in facts.items()} == {"n1": "n1", "n2": "n2"}
    assert fake.tools() == ["srun-collect"] and "--nodelist=n[1-2]" in fake.calls[0]
    fake.sample_ok = False
    fake.calls.clear()
    facts = soak.sample(timeout=20)
    assert {n: f.data.get("from") for n, f in facts.items()} == {"n1": "n1", "n2": "n2"}
    assert fake.tools() == ["srun-collect"] * 3


def test_close_removes_what_was_shipped_then_releases_the_allocation(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES)
    soak = _opened(fake, tmp_path)
    soak.run(["n1"], ["python3", "-"], timeout=5, stdin=b"x")
    fake.calls.clear()
    soak.close()
    assert fake.tools() == ["srun", "scancel"]
    removed = fake.calls[0][fake.calls[0].index("rm"):]
    assert removed[:2] == ["rm", "-f"] and len(removed) == 4
    assert all(path.startswith("/tmp/burnin-soak-42-") for path in removed[2:])
    assert fake.calls[1] == ["scancel", "42"]


def test_no_allocation_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    fake = FakeSlurm(STATES, salloc=False)
    with pytest.raises(UsageError, match="no Slurm allocation for the soak: salloc exited 1: salloc: error: Invalid"):
        _opened(fake, tmp_path)
    assert fake.tools() == ["scontrol", "salloc"]
    with pytest.raises(UsageError, match="no node of the soak can run a Slurm job: Slurm will start no job on n3"):
        _opened(FakeSlurm(STATES), tmp_path, ("n3",))

"""`burnin probe --serve` and its client on simulated nodes: the resident probe judges as the one-shot does.

Every request gathers and judges afresh (a fault that appears between two requests is seen by the
second), acts on --drain through the gate, and whatever keeps the resident probe from answering a
verdict makes the client run the one-shot probe instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from probe_gate_support import DRIVER, write_gate

from burnin.sim import SimNode, apply_fault, build_rack, parse_fault_spec
from burnin.topology.model import Topology

SOURCE_TIMEOUT = "60"  # a failure limit on a loaded machine, not a measurement
WAIT_S = 300  # how long a server may take to end (a failure limit on a loaded machine, not a measurement)


class Lab:
    """A simulated node, its client script, and a one-shot stand-in that records being run."""

    def __init__(self, tmp_path: Path, node: SimNode) -> None:
        self.tmp = tmp_path
        self.node = node
        self.address = tmp_path / "run" / "probe.addr"
        self.gate_log = tmp_path / "drains.jsonl"
        self.one_shots = tmp_path / "one-shots.log"
        write_gate(tmp_path / "gates")
        one_shot = tmp_path / "burnin-one-shot"
        driver = tmp_path / "gates" / "driver.py"
        driver.write_text(DRIVER, encoding="utf-8")
        one_shot.write_text(f'#!/bin/sh\necho "$@" >> {self.one_shots}\n'
                            f'exec {sys.executable} {driver} {tmp_path / "gates"} "$@"\n', encoding="utf-8")
        one_shot.chmod(0o755)
        self.env = {**os.environ, **node.environment(), "PROBE_GATE_LOG": str(self.gate_log),
                    "BURNIN": str(one_shot)}
        script = subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--client", "--address-file",
                                 str(self.address), "--topology", "hgx-h100-8gpu", "--timeout", SOURCE_TIMEOUT,
                                 "--gate", "recording"], env=self.env, capture_output=True, text=True, check=True)
        self.client = tmp_path / "burnin-healthcheck"
        self.client.write_text(script.stdout, encoding="utf-8")
        self.server: subprocess.Popen[str] | None = None

    def serve(self, *args: str) -> str:
        """Start the resident probe; its first line once it listens (it has probed once by then)."""
        self.server = subprocess.Popen([sys.executable, "-c", DRIVER, str(self.tmp / "gates"), "probe", "--serve",
                                        "--address-file", str(self.address), "--gate", "recording", *args],
                                       env=self.env, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        assert self.server.stdout is not None
        return self.server.stdout.readline()

    def ask(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(self.client), *args], env=self.env, cwd=self.tmp, capture_output=True,
                              text=True, timeout=300, check=False)

    def one_shot_runs(self) -> list[str]:
        """The flags the client passed on to each one-shot probe it ran (after the server's options)."""
        runs = self.one_shots.read_text(encoding="utf-8").splitlines() if self.one_shots.exists() else []
        for run in runs:
            assert run.startswith(f"probe --topology hgx-h100-8gpu --timeout {SOURCE_TIMEOUT} --gate recording")
        return [" ".join(run.split()[7:]) for run in runs]

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            self.server.communicate(timeout=WAIT_S)


@pytest.fixture
def lab(tmp_path: Path, h100_topology: Topology) -> Iterator[Lab]:
    node = build_rack(tmp_path / "rack", h100_topology, ["sim01"], {})[0]
    the_lab = Lab(tmp_path, node)
    yield the_lab
    the_lab.stop()


def test_the_resident_probe_judges_each_request_afresh_and_drains(lab: Lab) -> None:
    assert "serving on 127.0.0.1:" in lab.serve("--timeout", SOURCE_TIMEOUT)
    assert oct(lab.address.stat().st_mode & 0o777) == "0o600"  # who cannot read the token cannot ask
    healthy = lab.ask("--drain")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.startswith("burnin: OK (39 checks") and len(healthy.stdout.splitlines()) == 1
    apply_fault(lab.node.dir, parse_fault_spec("xid:79@gpu2"))  # appears after the server's own first probe
    failed = lab.ask("--drain")
    assert failed.returncode == 1
    assert failed.stdout.startswith("burnin: FAIL GPU-04 ") and "Xid 79" in failed.stdout and "gpu2" in failed.stdout
    (drain,) = [json.loads(line) for line in lab.gate_log.read_text(encoding="utf-8").splitlines()]
    assert drain["node"] == "sim01" and drain["reason"].startswith("burnin: GPU-04")
    assert lab.ask().returncode == 1  # no --drain: judged, not drained again
    assert len(lab.gate_log.read_text(encoding="utf-8").splitlines()) == 1
    assert lab.one_shot_runs() == []  # every answer came from the resident probe
    lab.stop()
    assert not lab.address.exists()  # a stopped server leaves no address behind


def test_without_a_resident_probe_the_client_runs_the_one_shot_probe(lab: Lab) -> None:
    apply_fault(lab.node.dir, parse_fault_spec("xid:79@gpu2"))
    no_file = lab.ask("--drain")  # nothing ever served: no address file
    assert no_file.returncode == 1 and no_file.stdout.startswith("burnin: FAIL GPU-04 ")
    lab.address.parent.mkdir(parents=True, exist_ok=True)
    lab.address.write_text("1 0123456789abcdef\n", encoding="utf-8")  # nobody listens on port 1
    assert lab.ask().returncode == 1
    assert lab.one_shot_runs() == ["--drain", ""]
    assert len(lab.gate_log.read_text(encoding="utf-8").splitlines()) == 1  # the one-shot probe drained


def test_a_wrong_token_is_refused_and_the_one_shot_probe_judges(lab: Lab) -> None:
    lab.serve("--timeout", SOURCE_TIMEOUT)
    port = lab.address.read_text(encoding="utf-8").split()[0]
    lab.address.chmod(0o644)
    lab.address.write_text(f"{port} not-the-token\n", encoding="utf-8")
    apply_fault(lab.node.dir, parse_fault_spec("xid:79@gpu2"))
    proc = lab.ask("--drain")
    assert proc.returncode == 1 and proc.stdout.startswith("burnin: FAIL GPU-04 ")
    assert lab.one_shot_runs() == ["--drain"]
    assert len(lab.gate_log.read_text(encoding="utf-8").splitlines()) == 1  # drained once: by the one-shot probe


def test_a_source_that_hangs_is_incomplete_and_the_server_exits_after_answering(lab: Lab) -> None:
    lab.serve("--timeout", "3")
    dmesg = Path(lab.node.environment()["PATH"].split(os.pathsep)[0]) / "dmesg"
    # killed at its timeout, dmesg leaves a child that holds its output open: the source's thread stays stuck
    dmesg.write_text("#!/bin/sh\nsleep 30 &\nexec sleep 30\n", encoding="utf-8")
    proc = lab.ask()
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout.startswith("burnin: INCOMPLETE ") and "timed out" in proc.stdout
    assert lab.server is not None
    assert lab.server.wait(timeout=WAIT_S) == 0  # its abandoned thread goes with it; systemd starts a fresh one
    assert lab.one_shot_runs() == []


def test_the_client_takes_only_drain_and_undrain(lab: Lab) -> None:
    proc = lab.ask("--json")
    assert proc.returncode == 2 and "unknown argument '--json'" in proc.stderr
    assert lab.one_shot_runs() == []


def test_serve_refuses_one_shot_flags(lab: Lab) -> None:
    proc = subprocess.run([sys.executable, "-m", "burnin.cli.main", "probe", "--serve", "--drain"], env=lab.env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2 and "--serve takes no" in proc.stderr and "Traceback" not in proc.stderr


def test_a_server_whose_burnin_changed_on_disk_answers_stale_and_exits(lab: Lab) -> None:
    """An upgrade under a running server: the next request is judged by the one-shot probe (the new code)."""
    import burnin
    from burnin.resources import topologies_dir

    copy = lab.tmp / "installed"
    shutil.copytree(Path(burnin.__file__).parent, copy / "burnin", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(topologies_dir(), copy / "burnin" / "_data" / "topologies")  # as a wheel carries them
    lab.env["PYTHONPATH"] = os.pathsep.join([str(copy), lab.env.get("PYTHONPATH", "")])
    lab.serve("--timeout", SOURCE_TIMEOUT)
    assert lab.ask().returncode == 0 and lab.one_shot_runs() == []
    checks_gpu = copy / "burnin" / "checks" / "gpu.py"  # a module the probe loaded
    checks_gpu.write_text(checks_gpu.read_text(encoding="utf-8") + "\n# upgraded\n", encoding="utf-8")
    proc = lab.ask("--drain")
    assert proc.returncode == 0 and proc.stdout.startswith("burnin: OK (")
    assert lab.one_shot_runs() == ["--drain"]
    assert lab.server is not None and lab.server.wait(timeout=WAIT_S) == 0

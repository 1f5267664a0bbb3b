"""srun --label output back into one result per node: long lines, interleaving, failures."""

from __future__ import annotations

import json

from burnin.launch.gather import facts_from_result
from burnin.transport.base import CommandResult
from burnin.transport.slurm import split_step

NODES = ["sim01", "sim02", "sim03"]


def _facts(node: str) -> str:
    return json.dumps({"hostname": node, "sources": {"pci": {"ok": True}},
                       "pad": [f"{node}-{i}" for i in range(3000)]}, separators=(",", ":"))


def _task_output(node: str, body: str, status: int | None) -> list[str]:
    """The task's stdout lines as srun relays them: long lines cut into chunks."""
    lines = ["", f"@burnin-node {node}@"]
    lines += [body[i:i + 1000] for i in range(0, len(body), 1000)] if body else []
    if status is not None:
        lines += ["", f"@burnin-exit {status}@"]
    return lines


def _interleave(per_task: dict[int, list[str]]) -> str:
    """Round-robin the tasks' lines with their labels, like concurrent tasks."""
    out: list[str] = []
    width = len(str(max(per_task)))
    longest = max(len(lines) for lines in per_task.values())
    for index in range(longest):
        for task, lines in per_task.items():
            if index < len(lines):
                out.append(f"{task:>{width}}: {lines[index]}")
    return "\n".join(out) + "\n"


def test_chunked_and_interleaved_output_is_rebuilt_per_node() -> None:
    # Task numbers do not follow the node order: the marker, not the label, names the node.
    stdout = _interleave({0: _task_output("sim03", _facts("sim03"), 0),
                          1: _task_output("sim01", _facts("sim01"), 0),
                          2: _task_output("sim02", _facts("sim02"), 0)})
    step = CommandResult("slurm", ("srun",), 0, stdout, "", 2.0)
    results = split_step(step, NODES, node_timeout_s=30, node_argv=["python3", "/tmp/c.pyz"])
    assert list(results) == NODES
    for node, result in results.items():
        assert result.ok and result.argv == ("python3", "/tmp/c.pyz")
        facts = facts_from_result(result)
        assert facts.unreachable is None
        assert facts.data["hostname"] == node and len(facts.data["pad"]) == 3000


def test_a_failed_task_is_incomplete_for_its_node_only() -> None:
    stdout = _interleave({0: _task_output("sim01", _facts("sim01"), 0),
                          1: _task_output("sim02", "", 139),
                          2: _task_output("sim03", _facts("sim03"), 0)})
    stderr = ("1: Segmentation fault\n"
              "srun: error: sim02: task 1: Exited with exit code 139\n")
    step = CommandResult("slurm", ("srun",), 139, stdout, stderr, 1.0)
    results = split_step(step, NODES, node_timeout_s=30, node_argv=["python3", "/tmp/c.pyz"])
    assert results["sim01"].ok and results["sim03"].ok
    bad = results["sim02"]
    assert bad.exit_status == 139 and not bad.ok
    assert "Segmentation fault" in bad.stderr and "sim02: task 1" in bad.stderr
    assert facts_from_result(bad).unreachable.startswith("python3 exited 139")  # type: ignore[union-attr]
    assert facts_from_result(results["sim01"]).unreachable is None


def test_a_node_that_ran_no_task_gets_srun_own_words() -> None:
    stdout = _interleave({0: _task_output("sim01", _facts("sim01"), 0)})
    stderr = ("srun: error: Task launch for StepId=5.0 failed on node sim02: Communication failure\n"
              "srun: error: Application launch failed: Communication failure\n")
    step = CommandResult("slurm", ("srun",), 1, stdout, stderr, 1.0)
    results = split_step(step, ["sim01", "sim02"], node_timeout_s=30)
    assert results["sim01"].ok
    assert results["sim02"].exit_status is None
    assert results["sim02"].error is not None and "srun ran no task on sim02" in results["sim02"].error
    assert "Communication failure" in results["sim02"].error


def test_a_step_cut_off_by_the_timeout_keeps_what_finished() -> None:
    stdout = _interleave({0: _task_output("sim01", _facts("sim01"), 0),
                          1: _task_output("sim02", _facts("sim02")[:5000], None)})
    step = CommandResult("slurm", ("srun",), None, stdout, "", 60.0, timed_out=True)
    results = split_step(step, NODES, node_timeout_s=30)
    assert results["sim01"].ok
    assert results["sim02"].timed_out and results["sim02"].error is not None
    assert "no complete result from sim02" in results["sim02"].error
    assert results["sim03"].timed_out and "before sim03 reported" in (results["sim03"].error or "")
    assert facts_from_result(results["sim02"]).unreachable is not None


def test_node_names_are_matched_whole() -> None:
    stdout = _interleave({0: _task_output("sim1", _facts("sim1"), 0)})
    stderr = "srun: error: sim10: task 1: Exited with exit code 1\n"
    step = CommandResult("slurm", ("srun",), 1, stdout, stderr, 1.0)
    results = split_step(step, ["sim1", "sim10"], node_timeout_s=30)
    assert "sim10" not in results["sim1"].stderr
    assert "sim10: task 1" in results["sim10"].stderr


def test_unknown_marker_names_are_ignored() -> None:
    stdout = _interleave({0: _task_output("intruder", _facts("intruder"), 0)})
    step = CommandResult("slurm", ("srun",), 0, stdout, "", 1.0)
    results = split_step(step, ["sim01"], node_timeout_s=30)
    assert list(results) == ["sim01"] and not results["sim01"].ok

"""Text a node printed is shown escaped on every surface: terminal summary, HTML, drain reasons, probe.

A node's IB rate, module version, GPU name or dmesg line may carry ESC, NUL or
C1 bytes (``\\x9b`` is a one-byte CSI). Shown raw they clear or rewrite the
operator's terminal, corrupt report.html and reach Slurm's drain reasons.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from burnin.cli.summary import print_summary
from burnin.evaluate.verdict import Status, Verdict
from burnin.gate.decide import NodeDecision
from burnin.gate.slurm import REASON_LIMIT, SlurmNode, burnin_reason, execute, plan
from burnin.probe import ProbeResult
from burnin.report.html import render
from burnin.session import RunResult
from burnin.text import has_control

# What nodes might print: a CSI that clears the screen, a NUL, a one-byte C1 CSI,
# an OSC that retitles the terminal (ended by BEL), a bidi override.
RATE = "\x1b[2J400\x00 Gb/sec \x9b31m"
GPU_NAME = "NVIDIA H100\x1b]0;pwned\x07 80GB HBM3\u202e"
DMESG = "NVRM: Xid (PCI:0000:18:00): 79, \x1b[31mGPU has fallen off the bus\x1b[0m"
ESCAPED = ("\\x1b[2J", "\\x00", "\\x9b", "\\x1b]0;pwned\\x07", "\\u202e")


def _no_raw_control(text: str) -> bool:
    """True when no line of ``text`` holds a control character (line breaks between lines allowed)."""
    return not any(has_control(line) for line in text.split("\n"))


def _decisions() -> dict[str, NodeDecision]:
    return {
        "sim01": NodeDecision("sim01", False, ("IB-02",), (),
                              (f"IB-02 mlx5_0 rate {RATE} (expected >= 400 Gb/s)",)),
        "sim02": NodeDecision("sim02", True),
        "sim03": NodeDecision("sim03", False, ("GPU-01", "XID-01"), (),
                              (f"GPU-01 gpu0 is {GPU_NAME} (expected NVIDIA H100 80GB HBM3)",
                               f"XID-01 fatal Xid 79 in dmesg: {DMESG}")),
    }


def test_terminal_summary_shows_node_text_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(RunResult(tmp_path, _decisions(), {}, 1), "hgx-h100-8gpu", 1.5)
    out = capsys.readouterr().out
    assert "REJECTED sim01: failed IB-02" in out
    for escaped in ESCAPED:
        assert escaped in out
    assert _no_raw_control(out), repr(out)


def test_report_html_carries_no_raw_control_bytes(tmp_path: Path) -> None:
    # gate.json as a run writes it (JSON keeps the bytes as \u001b; loading restores them).
    gate = {
        "topology": "hgx-h100-8gpu", "created": "2025-01-01T00:00:00Z\x1b[2J",
        "summary": {"nodes": 3, "admitted": 1, "rejected": 2},
        "admitted": "sim02", "rejected": "sim[01,03]",
        "nodes": {node: {"admitted": d.admitted, "failed": list(d.failed), "incomplete": list(d.incomplete),
                         "reasons": list(d.reasons)} for node, d in _decisions().items()},
    }
    (tmp_path / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    verdicts = [{"node": "sim01", "check": "IB-02", "status": "fail"},
                {"node": "sim03", "check": "GPU-01", "status": "fail"}]
    (tmp_path / "verdicts.json").write_text(json.dumps(verdicts), encoding="utf-8")
    page = render(tmp_path).read_text(encoding="utf-8")
    for escaped in ESCAPED:
        assert escaped in page
    assert '<code class="fail">sim[01,03]</code>' in page  # the markup itself is untouched
    assert "<td class=\"fail\">GPU-01, XID-01</td>" in page  # joined (Markup) values escaped once
    assert _no_raw_control(page), [line for line in page.split("\n") if has_control(line)]


def test_drain_reason_is_one_escaped_line() -> None:
    reason = burnin_reason(f"XID-01 {DMESG}\nsecond line\r\n{RATE}")
    assert reason.startswith("burnin: XID-01 NVRM: Xid")
    assert "\\x1b[31mGPU has fallen off the bus" in reason and "second line" in reason
    assert not has_control(reason) and len(reason) <= REASON_LIMIT
    assert burnin_reason(reason) == reason  # escaping twice changes nothing (the gate compares reasons)


def test_gate_plan_and_its_output_escape_node_and_slurm_text() -> None:
    decisions = _decisions()
    current = {
        "sim01": SlurmNode("sim01", "IDLE"),
        "sim02": SlurmNode("sim02", "IDLE"),
        # A reason someone else set, as scontrol shows it, with an escape sequence in it.
        "sim03": SlurmNode("sim03", "IDLE+DRAIN", "psu \x1b[2Jswap\x00"),
    }
    actions = plan(decisions, current)
    drains = [a for a in actions if a.action == "drain"]
    assert [a.target for a in drains] == ["sim01"]
    reason_arg = drains[0].argv[-1]
    assert reason_arg.startswith("Reason=burnin: IB-02 mlx5_0 rate \\x1b[2J400\\x00")
    assert not has_control(reason_arg)
    dry = io.StringIO()
    execute(actions, dry_run=True, out=dry)
    shown = io.StringIO()
    execute([a for a in actions if a.action == "keep"], dry_run=False, out=shown)
    for text in (dry.getvalue(), shown.getvalue()):
        assert "psu \\x1b[2Jswap\\x00" in text
        assert _no_raw_control(text), repr(text)


def test_probe_line_and_drain_reason_are_escaped() -> None:
    verdicts = (
        Verdict("GPU-01", "n1", Status.FAIL, GPU_NAME, "NVIDIA H100 80GB HBM3",
                f"GPU-01 gpu0 is {GPU_NAME}\n(expected NVIDIA H100 80GB HBM3)"),
        Verdict("XID-01", "n1", Status.FAIL, "79", "none", f"XID-01 {DMESG}"),
    )
    result = ProbeResult("n1", verdicts, 0.2)
    line = result.line()
    assert line.startswith("burnin: FAIL GPU-01,XID-01 GPU-01 gpu0 is NVIDIA H100\\x1b]0;pwned\\x07")
    assert "\\x1b[31mGPU has fallen off the bus" in line
    assert not has_control(line)  # one line: the newline a node sent is a space
    drain = result.drain_reason()
    assert drain.startswith("burnin: GPU-01,XID-01 gpu0 is NVIDIA H100\\x1b]0;pwned\\x07")
    assert not has_control(drain) and len(drain) <= 200

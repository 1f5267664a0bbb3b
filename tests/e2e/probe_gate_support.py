"""A gate that records the drains it is asked for, and a driver that runs burnin with it registered: the resident
probe's tests (test_probe_serve, test_probe_ask) see what the server drained without a Slurm."""

from __future__ import annotations

from pathlib import Path

RECORDING_GATE = '''
import json, os

class RecordingGate:
    name = "recording"

    def drain(self, node, reason, *, dry_run=False):
        with open(os.environ["PROBE_GATE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"node": node, "reason": reason}) + "\\n")
        return True

    def resume(self, node, *, passed=(), dry_run=False):
        return False

    def apply(self, decisions, *, dry_run, out=None, err=None):
        return True
'''

DRIVER = """
import sys
sys.path.insert(0, sys.argv.pop(1))
from burnin.gate.registry import GATES
GATES["recording"] = "recording_gate:RecordingGate"
from burnin.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
"""``python -c DRIVER GATES_DIR ARGS...``: burnin with the gate ``recording`` (it appends to $PROBE_GATE_LOG)."""


def write_gate(folder: Path) -> Path:
    """The recording gate's module in ``folder`` (created), for DRIVER's first argument."""
    folder.mkdir()
    (folder / "recording_gate.py").write_text(RECORDING_GATE, encoding="utf-8")
    return folder

"""Run `burnin sim up` then `sim down` under a reaper that, like a PID 1 that never reaps, collects nothing.

Usage: python tests/lab_zombies_harness.py STATE_DIR ssh|slurm

This process makes itself a child subreaper, so whatever `sim up` leaves
running is re-parented to it instead of to PID 1. Once `sim down` has
returned it lists its children: each one's state, name and, for a zombie,
its exit status (it then reaps them). Prints one JSON document.
"""

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
state, kind = sys.argv[1], sys.argv[2]
cli = [sys.executable, "-m", "burnin.cli.main", "sim"]
up = subprocess.run([*cli, "up", f"--{kind}", "2", "--state", state], capture_output=True, text=True)
lab = json.loads(Path(state, "lab.json").read_text()) if up.returncode == 0 else {}
down = subprocess.run([*cli, "down", "--state", state], capture_output=True, text=True)

left = {}
for entry in Path("/proc").iterdir():
    if not entry.name.isdigit():
        continue
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        continue
    fields = stat.rpartition(")")[2].split()
    if int(fields[1]) == os.getpid():
        left[int(entry.name)] = {"state": fields[0], "comm": stat[stat.index("(") + 1:stat.rindex(")")]}
for pid, info in left.items():
    if info["state"] == "Z":
        info["exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps({"up": [up.returncode, up.stderr], "down": [down.returncode, down.stderr], "lab": lab,
                  "left": left}))

"""The soak's tools of a simulated node that follow its simulated clock, in the real tools' formats.

Copied to ``<node>/out/soak/tools.py`` and run by the shims ``bin/gpu_burn``
and ``bin/dcgmi`` (standard library only, started with ``python -S``); the
other soak tools (stress-ng, STREAM, numactl, nvme) are shell shims printing
pre-rendered outputs (:mod:`burnin.sim.soak_shims`). What these two print
follows two files:

- ``out/soak/node.json`` (rendered from the node's state): GPUs, sockets,
  health flags DCGM would see;
- ``<node>/soak.json`` (written by the soak's simulated world as its clock
  moves, :mod:`burnin.sim.soak`): the simulated time ``t`` (seconds since the
  soak started) and each GPU's throughput drift.

A simulated tool takes no time: the soak's simulated clock runs it when its
stage ends (``t``), and the tool reports the interval ``[t - seconds, t]``.
In a world on the wall clock (``wall_clock``: a lab soaked by a real-time
soak, over Slurm or SSH) ``gpu_burn`` takes the seconds it is given, as the
real one does, and prints its progress as it goes.
Numbers wobble by a small, repeatable noise (a hash of node, GPU and time).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

GPU_BURN_GFLOPS = {"FLOATS": 51000.0, "DOUBLES": 25500.0, "TENSOR": 420000.0}
STEPS = 10


def node_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def node() -> dict[str, Any]:
    return _load(os.path.join(node_dir(), "out", "soak", "node.json"))


def world() -> dict[str, Any]:
    return _load(os.path.join(node_dir(), "soak.json"))


def wobble(*parts: object, spread: float = 0.005) -> float:
    """A repeatable factor in [1 - spread, 1 + spread]."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=4).digest()
    return 1.0 + spread * (int.from_bytes(digest, "big") / 0xFFFFFFFF * 2.0 - 1.0)


def drift_factor(drift: dict[str, Any], gpu: int, t: float) -> float:
    rate, most = drift.get(str(gpu), (0.0, 0.0))
    return 1.0 - min(float(most), float(rate) * max(0.0, t) / 3600.0)


def _stamp(t: float) -> str:
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(1_700_000_000 + t))


def gpu_burn(args: list[str]) -> int:
    mode = "FLOATS"
    seconds = 10
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "-d":
            mode = "DOUBLES"
        elif arg == "-tc":
            mode = "TENSOR"
        elif arg in ("-i", "-m", "-c"):
            rest = rest[1:]
        elif arg.isdigit():
            seconds = int(arg)
        elif arg in ("-h", "--help"):
            print("GPU Burn\nUsage: gpu_burn [OPTIONS] [TIME]\n\n-d\tUse doubles\n-tc\tTry to use Tensor cores")
            return 0
        else:
            print(f"Couldn't parse argument: {arg}", file=sys.stderr)
            return 1
    info, now = node(), world()
    gpus = info.get("gpus", [])
    t_end = float(now.get("t", seconds))
    name = info.get("name", "sim")
    drift = now.get("throughput_drift", {})
    lines = [f"Burning for {seconds} seconds."]
    lines += [f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})" for g in gpus]
    precision = "DOUBLES" if mode == "DOUBLES" else "FLOATS"
    lines += [f"Initialized device {g['index']} with 81079 MB of memory (80484 MB available, using 72436 MB of "
              f"it), using {precision}" for g in gpus]
    lines.append("Results are 268435456 bytes each, thus performing 267 iterations")
    processed = [0] * len(gpus)
    pace = seconds / STEPS if now.get("wall_clock") else 0.0
    for step in range(1, STEPS + 1):
        if pace:
            print("\n".join(lines), flush=True)
            lines = []
            time.sleep(pace)
        t = t_end - seconds + seconds * step / STEPS
        rates = []
        for k, g in enumerate(gpus):
            base = GPU_BURN_GFLOPS[mode] * wobble(name, g["index"], spread=0.015)
            rate = base * drift_factor(drift, g["index"], t) * wobble(name, g["index"], round(t))
            processed[k] += int(rate * seconds / STEPS / 2000)
            rates.append(rate)
        procd = " - ".join(f"{processed[k]} ({rates[k]:.0f} Gflop/s)" for k in range(len(gpus)))
        errors = " - ".join("0" for _ in gpus)
        temps = " - ".join(f"{g.get('temperature_c', 60)} C" for g in gpus)
        lines.append(f"{100.0 * step / STEPS:.1f}%  proc'd: {procd}   errors: {errors}   temps: {temps} ")
        lines.append(f"\tSummary at:   {_stamp(t)}")
        lines.append("")
    lines += ["Killing processes with SIGTERM (soft kill)"]
    lines += [f"Freed memory for dev {g['index']}" for g in gpus]
    lines += ["Uninitted cublas", "done", "", f"Tested {len(gpus)} GPUs:"]
    lines += [f"\tGPU {g['index']}: OK" for g in gpus]
    print("\n".join(lines))
    return 0


_DCGM_TESTS = (
    ("Deployment", ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                    "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes",
                    "Inforom")),
    ("Integration", ("PCIe",)),
    ("Hardware", ("GPU Memory", "Diagnostic")),
    ("Stress", ("Targeted Stress", "Targeted Power", "Memory Bandwidth")),
)
_PER_GPU = frozenset({"Integration", "Hardware", "Stress"})
# Level 1 runs the deployment (software) tests only; level 2 adds integration and hardware ones.
_LEVEL_CATEGORIES = {"1": ("Deployment",), "2": ("Deployment", "Integration", "Hardware")}
DCGM_VERSION = "3.3.5"
_NO_HOSTENGINE = ("Error: unable to establish a connection to the specified host: localhost\n"
                  "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.")
_EXIT_NO_HOSTENGINE = 256 - 21  # DCGM_ST_CONNECTION_NOT_VALID
_CELL = 45  # dcgmi diag cuts a detail's text every 45 characters, mid-word (shared/reference/dcgmi)


def _dcgm_results(info: dict[str, Any], category: str, name: str) -> list[dict[str, Any]]:
    gpus = info.get("gpus", [])
    if category not in _PER_GPU:
        failing = [(int(g["index"]), message) for g in gpus
                   for test, message in g.get("dcgm_deployment") or [] if test == name]
        if not failing:
            return [{"status": "Pass"}]
        return [{"gpu_ids": str(index), "status": "Fail", "warnings": [{"warning": message}]}
                for index, message in failing]
    results = []
    for g in gpus:
        memory_fault = name == "GPU Memory" and bool(g.get("dcgm_fail"))
        result: dict[str, Any] = {"gpu_id": str(g["index"]), "status": "Fail" if memory_fault else "Pass"}
        if memory_fault:
            result["warnings"] = [{"warning": str(g["dcgm_fail"])}]
        results.append(result)
    return results


def _row(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<46} |"


def _detail_rows(kind: str, text: str) -> list[str]:
    chunks = [text[i:i + _CELL] for i in range(0, len(text), _CELL)] or [""]
    return [_row(kind if k == 0 else "", chunk) for k, chunk in enumerate(chunks)]


def _gpu_list(ids: list[str]) -> str:
    return ("GPU: " if len(ids) == 1 else "GPUs: ") + ", ".join(ids)


def _dcgm_table(info: dict[str, Any], categories: list[dict[str, Any]]) -> list[str]:
    """dcgmi diag's text table (DCGM 3.x, as in shared/reference/dcgmi)."""
    border = "+---------------------------+------------------------------------------------+"
    dcgm = info.get("dcgm") or {}
    lines = ["Successfully ran diagnostic for group.", border, _row("Diagnostic", "Result"),
             border.replace("-", "="), "|-----  Metadata  ----------+------------------------------------------------|",
             _row("DCGM Version", DCGM_VERSION), _row("Driver Version Detected", str(dcgm.get("driver", ""))),
             _row("GPU Device IDs Detected", ",".join(dcgm.get("device_ids", [])))]
    for number, entry in enumerate(categories):
        name = entry["category"]
        edge = "|" if number == 0 else "+"
        lines.append(f"{edge}-----  {name}  " + "-" * max(1, 18 - len(name)) + "+" + "-" * 48 + edge)
        for test in entry["tests"]:
            results = test["results"]
            failed = [r for r in results if r["status"] == "Fail"]
            if entry["category"] not in _PER_GPU:
                lines.append(_row(test["name"], "Fail" if failed else "Pass"))
            else:
                passed = [r["gpu_id"] for r in results if r["status"] == "Pass"]
                bad = [r["gpu_id"] for r in failed]
                if not bad:
                    lines.append(_row(test["name"], "Pass - All"))
                elif not passed:
                    lines.append(_row(test["name"], f"Fail - {_gpu_list(bad)}"))
                else:
                    lines += [_row(test["name"], f"Pass - {_gpu_list(passed)}"), _row("", f"Fail - {_gpu_list(bad)}")]
            for result in failed:
                for warning in result.get("warnings", []):
                    lines += _detail_rows("Error" if entry["category"] not in _PER_GPU else "Warning",
                                          str(warning["warning"]))
    lines.append(border)
    return lines


def diag_report(info: dict[str, Any], level: str, as_json: bool) -> tuple[str, int]:
    """What ``dcgmi diag -r LEVEL [-j]`` prints (with its last newline) and its exit status, for the node
    ``info`` (``out/soak/node.json``). The simulator also renders ``diag -r 1`` ahead (the node suite runs it on
    every node: :mod:`burnin.sim.soak_shims`) from this same function."""
    if not (info.get("dcgm") or {}).get("hostengine", True):
        return _NO_HOSTENGINE + "\n", _EXIT_NO_HOSTENGINE
    wanted = _LEVEL_CATEGORIES.get(level)
    categories: list[dict[str, Any]] = [
        {"category": category,
         "tests": [{"name": name, "results": _dcgm_results(info, category, name)} for name in names]}
        for category, names in _DCGM_TESTS if wanted is None or category in wanted]
    failed = any(r["status"] == "Fail" for entry in categories for test in entry["tests"] for r in test["results"])
    doc = {"DCGM GPU Diagnostic": {"test_categories": categories, "version": DCGM_VERSION}}
    text = json.dumps(doc, indent=4) if as_json else "\n".join(_dcgm_table(info, categories))
    return text + "\n", 1 if failed else 0


def dcgmi(args: list[str]) -> int:
    if len(args) < 3 or args[0] != "diag" or "-r" not in args:
        print("Usage: dcgmi diag -r <level> [-j] (burnin simulator)", file=sys.stderr)
        return 255
    level = args[args.index("-r") + 1] if args.index("-r") + 1 < len(args) else ""
    if level not in ("1", "2", "3", "4"):
        print(f"Error: Invalid run level '{level}'", file=sys.stderr)
        return 255
    text, status = diag_report(node(), level, "-j" in args)
    sys.stdout.write(text)
    return status


TOOLS = {"gpu_burn": gpu_burn, "dcgmi": dcgmi}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in TOOLS:
        print(f"burnin simulator: no tool {argv[:1]}", file=sys.stderr)
        return 127
    return TOOLS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""GPU firmware versions (INV-02) through the real pynvml and the simulated libnvidia-ml.so.1.

The library answers nvmlDeviceGetVbiosVersion, nvmlDeviceGetInforomImageVersion and
nvmlDeviceGetInforomVersion with NVML's signatures and return codes; pynvml passes its own
buffer sizes (NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32, NVML_DEVICE_INFOROM_VERSION_BUFFER_SIZE 16).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnin.parsers.nvidia_smi import parse_smi_query
from burnin.sim import SimNode, build_rack
from burnin.sim.build import render_node
from burnin.sim.state import GpuState
from burnin.topology import Topology

Env = Callable[[SimNode], dict[str, str]]
Dirs = Callable[[str], Path]

NOT_SUPPORTED, INVALID_ARGUMENT, INSUFFICIENT_SIZE, GPU_IS_LOST = 3, 2, 7, 15

# Every GPU's firmware as pynvml returns it, or the NVML error code, plus the raw C calls with odd arguments.
PROBE = r'''
import ctypes, json
import pynvml as n

def ask(fn, *args):
    try:
        return fn(*args)
    except n.NVMLError as exc:
        return exc.value

n.nvmlInit()
out = {"gpus": []}
for index in range(n.nvmlDeviceGetCount()):
    try:
        h = n.nvmlDeviceGetHandleByIndex(index)
    except n.NVMLError as exc:
        out["gpus"].append({"handle": exc.value})
        continue
    out["gpus"].append({
        "vbios": ask(n.nvmlDeviceGetVbiosVersion, h),
        "image": ask(n.nvmlDeviceGetInforomImageVersion, h),
        "oem": ask(n.nvmlDeviceGetInforomVersion, h, n.NVML_INFOROM_OEM),
        "ecc": ask(n.nvmlDeviceGetInforomVersion, h, n.NVML_INFOROM_ECC),
        "power": ask(n.nvmlDeviceGetInforomVersion, h, n.NVML_INFOROM_POWER),
        "den": ask(n.nvmlDeviceGetInforomVersion, h, n.NVML_INFOROM_DEN),
        "past_count": ask(n.nvmlDeviceGetInforomVersion, h, n.NVML_INFOROM_COUNT),
    })
h = n.nvmlDeviceGetHandleByIndex(0)
vbios = n._nvmlGetFunctionPointer("nvmlDeviceGetVbiosVersion")
out["vbios_small_buffer"] = vbios(h, ctypes.create_string_buffer(8), ctypes.c_uint(8))
out["vbios_null_buffer"] = vbios(h, None, ctypes.c_uint(32))
exact = ctypes.create_string_buffer(16)  # "G520.0200.00.05" is 15 characters: fits NVML's 16 with its NUL
image = n._nvmlGetFunctionPointer("nvmlDeviceGetInforomImageVersion")
out["image_exact_buffer"] = [image(h, exact, ctypes.c_uint(16)), exact.value.decode()]
n.nvmlShutdown()
out["after_shutdown"] = ask(n.nvmlDeviceGetVbiosVersion, h)
print(json.dumps(out))
'''


def _probe(env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.rack
def test_healthy_firmware_as_the_real_h100_capture(healthy_node: SimNode, env_of: Env,
                                                   sim_topology: Topology) -> None:
    firmware = sim_topology.gpus.firmware
    assert firmware is not None
    out = _probe(env_of(healthy_node))
    assert len(out["gpus"]) == 8
    for gpu in out["gpus"]:
        assert gpu == {"vbios": firmware.vbios, "image": firmware.inforom_image, "oem": "2.1", "ecc": "7.16",
                       "power": NOT_SUPPORTED, "den": NOT_SUPPORTED, "past_count": INVALID_ARGUMENT}
    assert out["vbios_small_buffer"] == INSUFFICIENT_SIZE
    assert out["vbios_null_buffer"] == INVALID_ARGUMENT
    assert out["image_exact_buffer"] == [0, "G520.0200.00.05"]
    assert out["after_shutdown"] == 1  # NVML_ERROR_UNINITIALIZED


@pytest.mark.rack
def test_vbios_mismatch_changes_the_target_gpu_only(sim_dir: Dirs, sim_topology: Topology, env_of: Env) -> None:
    node, = build_rack(sim_dir("vbios"), sim_topology, ["sim02"], {"sim02": ["vbios-mismatch@gpu3"]})
    out = _probe(env_of(node))
    vbios = [g["vbios"] for g in out["gpus"]]
    assert vbios == ["96.00.74.00.01"] * 3 + ["96.00.74.00.0D"] + ["96.00.74.00.01"] * 4
    assert {g["image"] for g in out["gpus"]} == {"G520.0200.00.05"}
    smi = subprocess.run(["nvidia-smi", "-q"], env=env_of(node), capture_output=True, text=True, timeout=30,
                         check=False)
    assert [g.vbios_version for g in parse_smi_query(smi.stdout).gpus] == vbios


@pytest.mark.rack
def test_an_unreported_version_is_not_supported_and_a_lost_gpu_is_lost(sim_dir: Dirs, sim_topology: Topology,
                                                                      env_of: Env) -> None:
    node, = build_rack(sim_dir("fw-na"), sim_topology, ["sim03"], {"sim03": ["gpu-lost@gpu1"]})
    state = node.state()
    state.gpus[5].vbios = ""
    state.gpus[5].inforom_oem = ""
    render_node(node.dir, state)
    out = _probe(env_of(node))
    assert out["gpus"][1] == {"handle": GPU_IS_LOST}
    assert out["gpus"][5]["vbios"] == NOT_SUPPORTED and out["gpus"][5]["oem"] == NOT_SUPPORTED
    assert out["gpus"][5]["image"] == "G520.0200.00.05"


FIRMWARE_LINES = [
    "    VBIOS Version                         : 96.00.74.00.01",
    "    Inforom Version",
    "        Image Version                     : G520.0200.00.05",
    "        OEM Object                        : 2.1",
    "        ECC Object                        : 7.16",
    "        Power Management Object           : N/A",
]


@pytest.mark.rack
def test_the_nvidia_smi_shim_prints_the_inforom_section(healthy_node: SimNode, env_of: Env) -> None:
    text = subprocess.run(["nvidia-smi", "-q"], env=env_of(healthy_node), capture_output=True, text=True,
                          timeout=30, check=False).stdout
    lines = text.splitlines()
    for line in FIRMWARE_LINES:
        assert lines.count(line) == 8, line
    block = lines.index(FIRMWARE_LINES[1])
    assert lines[block:block + 5] == FIRMWARE_LINES[1:]


def test_the_shims_firmware_lines_are_the_real_captures(reference_dir: Path) -> None:
    """Spacing included, as nvidia-smi 535.183.01 prints them on an 8x H100."""
    real = (reference_dir / "nvidia-smi" / "q-full-h100-8gpu-driver535.183.01.txt").read_text(encoding="utf-8")
    lines = real.splitlines()
    for line in FIRMWARE_LINES:
        assert lines.count(line) == 8, line
    block = lines.index(FIRMWARE_LINES[1])
    assert lines[block:block + 5] == FIRMWARE_LINES[1:]


def test_gpu_state_defaults_are_the_captures() -> None:
    fields = GpuState.model_fields
    assert (fields["vbios"].default, fields["inforom_image"].default) == ("96.00.74.00.01", "G520.0200.00.05")
    assert (fields["inforom_oem"].default, fields["inforom_ecc"].default, fields["inforom_power"].default) == (
        "2.1", "7.16", "")


@pytest.mark.rack
def test_the_collector_records_an_unreadable_version_and_inv02_is_incomplete(
        sim_dir: Dirs, sim_topology: Topology, env_of: Env) -> None:
    """Collector (real pynvml) -> facts -> INV-02: an error is kept by field name, never read as a version."""
    from burnin.checks import evaluate
    from burnin.facts import Facts

    node, = build_rack(sim_dir("fw-collect"), sim_topology, ["sim04"], {"sim04": ["vbios-mismatch@gpu6"]})
    state = node.state()
    state.gpus[2].inforom_image = ""
    render_node(node.dir, state)
    argv = [sys.executable, "-m", "burnin.collector", "--root", str(node.root), "--sources", "nvml"]
    proc = subprocess.run(argv, env=env_of(node), capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    gpus = data["nvml"]["gpus"]
    assert gpus[2]["inforom"]["image"] is None
    assert gpus[2]["errors"]["inforom_image"] == "NVML_ERROR_NOT_SUPPORTED"
    assert gpus[0]["inforom"] == {"image": "G520.0200.00.05", "oem": "2.1", "ecc": "7.16", "power": None}
    assert gpus[6]["vbios"] == "96.00.74.00.0D"
    verdict = evaluate("INV-02", Facts("sim04", data), sim_topology)
    # the mismatch on gpu6 is named; gpu2 is said to be unmeasured
    assert verdict.status.value == "fail"
    assert verdict.reason.startswith("INV-02 gpu6 VBIOS 96.00.74.00.0D (expected VBIOS 96.00.74.00.01 as on "
                                     "gpu0-1,3-5,7 and per topology hgx-h100-8gpu)"), verdict.reason
    assert "not measured: gpu2 InfoROM version: NVML_ERROR_NOT_SUPPORTED" in verdict.reason

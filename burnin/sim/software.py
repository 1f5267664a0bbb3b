"""The simulated host's software stack (INV-10) and the fault that breaks it.

A healthy node runs the topology's golden versions (``software``) where it names
them, else the simulator's own: the kernel release in ``/proc/sys/kernel/osrelease``
(and ``/proc/version``, the boot line of the kernel log), the OFED release that
``ofed_info -s`` prints, ``libnccl.so.<version>`` under ``/usr/lib/x86_64-linux-gnu``
(with the ``libnccl.so.2`` symlink the package ships) and the DCGM version
``dcgmi --version`` prints. The simulator's own values agree with what its other
tools print: NCCL 2.21.5 (the nccl-tests stand-in), DCGM 3.3.5 (``dcgmi diag``),
MLNX_OFED 24.04-0.6.6 (the mlx5_core module version).

``ofed_info -s`` and ``dcgmi --version`` print the documented shapes
(``MLNX_OFED_LINUX-24.04-0.6.6.0:``; ``Version : 3.3.5`` and the build lines, then
the host engine's); the reference set holds no real capture of either.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from burnin.topology.model import Topology

if TYPE_CHECKING:
    from burnin.sim.faults import Fault
    from burnin.sim.state import NodeState

KERNEL_RELEASE = "5.15.0-112-generic"
OFED_RELEASE = "MLNX_OFED_LINUX-24.04-0.6.6.0"
NCCL_VERSION = "2.21.5"
DCGM_VERSION = "3.3.5"
NCCL_DIR = "usr/lib/x86_64-linux-gnu"
# Real Ubuntu 22.04 kernels: the one a drifted node boots instead (the other when it already runs the first).
ALT_KERNELS = ("5.15.0-91-generic", "5.15.0-112-generic")

OFED_INFO_SCRIPT = r'''out="${0%/*}/../out/ofed_info"
case "$*" in
  -s) exec cat "$out/s.txt" ;;
  -n) exec cat "$out/n.txt" ;;
  *) echo "Usage: ofed_info [-s|-n] (burnin simulator: the short forms only)" >&2; exit 1 ;;
esac
'''

# Put in front of the soak's dcgmi shim: the version needs no Python.
DCGMI_VERSION_PREFIX = r'''case "$1" in
  -v|--version) exec cat "${0%/*}/../out/dcgmi/version.txt" ;;
esac
'''


def software_state(topology: Topology) -> dict[str, Any]:
    """HostState fields of a healthy node: the topology's golden versions where it names them."""
    manifest = topology.software
    return {
        "kernel_release": (manifest and manifest.kernel) or KERNEL_RELEASE,
        "ofed_release": (manifest and manifest.ofed) or OFED_RELEASE,
        "nccl_version": (manifest and manifest.nccl) or NCCL_VERSION,
        "dcgm_version": (manifest and manifest.dcgm) or DCGM_VERSION,
    }


def software_files(state: NodeState) -> tuple[dict[str, str], dict[str, str]]:
    """(files, symlinks) below the root: the NCCL library under its versioned name and the soname link."""
    version = state.host.nccl_version
    library = f"{NCCL_DIR}/libnccl.so.{version}"
    files = {library: f"burnin simulator: stands for NCCL {version} (not a library)"}
    links = {f"{NCCL_DIR}/libnccl.so.{version.split('.')[0]}": library}
    return files, links


def _build(version: str, what: str) -> dict[str, str]:
    digest = hashlib.blake2b(f"dcgm/{version}/{what}".encode(), digest_size=20).hexdigest()
    return {"Version": version, "Build ID": str(int(digest[:4], 16) % 90 + 10), "Build Date": "2024-03-06",
            "Build Type": "Release", "Commit ID": digest, "Branch Name": "rel_dcgm_" + "_".join(version.split(".")[:2]),
            "CPU Arch": "x86_64",
            "Build Platform": "Linux 4.15.0-180-generic #189-Ubuntu SMP Wed May 18 14:13:57 UTC 2022 x86_64",
            "CRC": digest[:32]}


def dcgmi_version(state: NodeState) -> str:
    """``dcgmi --version``: dcgmi's build lines, then the host engine's (the same DCGM) when it answers."""
    version = state.host.dcgm_version
    client = "".join(f"{key} : {value}\n" for key, value in _build(version, "dcgmi").items())
    if not state.host.dcgm.hostengine:
        return client
    engine = "".join(f"{key} : {value}\n" for key, value in _build(version, "nv-hostengine").items())
    return client + "\nHostengine build info:\n" + engine


def outputs(state: NodeState) -> dict[str, str]:
    """``out/<path>`` -> text for the ofed_info and ``dcgmi --version`` shims."""
    release = state.host.ofed_release
    version = re.search(r"-([0-9].*)$", release)
    return {
        "ofed_info/s.txt": f"{release}:\n",
        "ofed_info/n.txt": f"{version.group(1) if version else release}\n",
        "dcgmi/version.txt": dcgmi_version(state),
    }


def kernel_drift(state: NodeState, fault: Fault) -> None:
    """The node booted another kernel than its fleet's."""
    current = state.host.kernel_release
    state.host.kernel_release = ALT_KERNELS[0] if current != ALT_KERNELS[0] else ALT_KERNELS[1]


SOFTWARE_MUTATORS = {"kernel-drift": kernel_drift}

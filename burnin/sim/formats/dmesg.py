"""Kernel ring buffer as ``dmesg`` prints it: plain, ``-T`` (ctime), ``-t`` and ISO time formats.

Boot lines come from the node's state (kernel, cmdline, PCI functions, the
NVIDIA module version), then fault events: Xid lines in the driver's real
format ``NVRM: Xid (PCI:0000:BB:DD): N, pid=..., <text>`` and link messages.
"""

from __future__ import annotations

import time

from burnin.sim.state import NodeState

BOOT_EPOCH = 1718006400  # Mon Jun 10 08:00:00 2024 UTC: the simulated boot
TIME_FORMATS = ("plain", "ctime", "notime", "iso")


def cmdline(state: NodeState) -> str:
    parts = [f"BOOT_IMAGE=/boot/vmlinuz-{state.host.kernel_release}",
             "root=UUID=7c1c5d0e-5a52-4c1b-9b0e-2f3c1f4b8a11", "ro"]
    if state.host.cmdline_iommu:
        parts.append(state.host.cmdline_iommu)
    parts += ["pci=realloc=off", "console=tty0", "console=ttyS0,115200n8"]
    return " ".join(parts)


def _events(state: NodeState) -> list[tuple[float, str]]:
    host = state.host
    events: list[tuple[float, str]] = [
        (0.0, f"Linux version {host.kernel_release} (buildd@lcy02-amd64-051) (gcc (Ubuntu "
              "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #122-Ubuntu SMP "
              "Thu May 23 07:48:21 UTC 2024 (Ubuntu 5.15.0-112.122-generic 5.15.153)"),
        (0.0, f"Command line: {cmdline(state)}"),
        (0.0, "DMI: NVIDIA DGXH100/DGXH100, BIOS 1.1.3 03/30/2023"),
    ]
    if host.cmdline_iommu:
        events.append((0.812345, "DMAR: IOMMU enabled"))
        if host.iommu_type == "identity":
            events.append((1.504811, "iommu: Default domain type: Passthrough (set via kernel command line)"))
        else:
            events.append((1.504811, "iommu: Default domain type: Translated "))
    for k, device in enumerate(d for d in state.pci if d.kind in ("gpu", "hca")):
        events.append((2.5 + 0.0131 * k, f"pci {device.bdf}: [{device.vendor[2:]}:{device.device[2:]}] "
                                         f"type 00 class {device.class_code}"))
    for k, hca in enumerate(h for h in state.hcas if h.bus_id in state.pci_index()):
        events.append((8.2 + 0.173 * k, f"mlx5_core {hca.bus_id}: firmware version: {hca.fw_ver}"))
        events.append((8.21 + 0.173 * k, f"mlx5_core {hca.bus_id}: 504.112 Gb/s available PCIe "
                                         "bandwidth (32.0 GT/s PCIe x16 link)"))
    events += [
        (12.113402, "nvidia: loading out-of-tree module taints kernel."),
        (12.201557, "nvidia-nvlink: Nvlink Core is being initialized, major device number 508"),
        (12.354019, f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {host.module_version}  "
                    "Sun May 12 19:39:15 UTC 2024"),
        (13.052310, "nvidia-uvm: Loaded the UVM driver, major device number 506."),
    ]
    events += [(m.uptime_s, m.text) for m in host.messages]
    seen: set[str] = set()
    by_bus = {g.bus_id: g for g in state.gpus}
    for event in host.xids:
        short = event.bus_id.rsplit(".", 1)[0]
        gpu = by_bus.get(event.bus_id)
        if gpu is not None and event.bus_id not in seen:
            seen.add(event.bus_id)
            events.append((event.uptime_s, f"NVRM: GPU at PCI:{short}: {gpu.uuid}"))
            events.append((event.uptime_s, f"NVRM: GPU Board Serial Number: {gpu.serial}"))
        events.append((event.uptime_s, f"NVRM: Xid (PCI:{short}): {event.xid}, {event.pid}, {event.text}"))
    events.sort(key=lambda e: e[0])
    return events


def _stamp(uptime: float, fmt: str) -> str:
    seconds = int(uptime)
    micros = round((uptime - seconds) * 1_000_000)
    if fmt == "plain":
        return f"[{seconds:5d}.{micros:06d}] "
    if fmt == "ctime":
        return "[" + time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(BOOT_EPOCH + seconds)) + "] "
    if fmt == "iso":
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(BOOT_EPOCH + seconds)) + f",{micros:06d}+00:00 "
    return ""


def dmesg(state: NodeState, fmt: str = "plain") -> str:
    """The ring buffer in one of TIME_FORMATS."""
    return "".join(f"{_stamp(uptime, fmt)}{text}\n" for uptime, text in _events(state))

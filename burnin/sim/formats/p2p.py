"""The CUDA sample ``p2pBandwidthLatencyTest``'s text (standard library only: simulated nodes carry a copy).

Sections, order and ``printf`` formats follow the sample's source
(cuda-samples ``Samples/5_Domain_Specific/p2pBandwidthLatencyTest``): the
``[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]`` banner, one ``Device: N,
NAME, pciBusID: %x, pciDeviceID: %x, pciDomainID:%x`` line per GPU, the
``Device=D CAN|CANNOT Access Peer Device=P`` lines and their note, the
connectivity matrix (``%6d`` cells, a tab after the row id), four bandwidth
matrices (``   D\\D`` then ``%6d `` column ids; rows ``%6d `` then ``%6.02f ``
cells) and two latency matrices (a ``   GPU`` table, then ``   CPU``), and the
closing note. The real H100 sample (shared/reference/p2pBandwidthLatencyTest)
quotes the P2P-enabled writes matrix in this layout.
"""

from __future__ import annotations

from collections.abc import Sequence

BANNER = "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"
ACCESS_NOTE = ("\n***NOTE: In case a device doesn't have P2P access to other one, it falls back to normal memcopy "
               "procedure.\nSo you can see lesser Bandwidth (GB/s) and unstable Latency (us) in those cases.\n\n")
CLOSING_NOTE = ("\nNOTE: The CUDA Samples are not meant for performance measurements. Results may vary when GPU "
                "Boost is enabled.\n")
BANDWIDTH_TITLES = (
    "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
    "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
)
LATENCY_TITLES = ("P2P=Disabled Latency Matrix (us)", "P2P=Enabled Latency (P2P Writes) Matrix (us)")
Matrix = Sequence[Sequence[float]]


def devices(found: Sequence[tuple[str, int, int, int]]) -> str:
    """The ``Device:`` lines (after the banner); ``found``: (name, PCI bus, PCI device, PCI domain) per GPU."""
    return "".join(f"Device: {i}, {name}, pciBusID: {bus:x}, pciDeviceID: {dev:x}, pciDomainID:{domain:x}\n"
                   for i, (name, bus, dev, domain) in enumerate(found))


def access(can: Sequence[Sequence[bool]]) -> str:
    """The peer access lines, their note and the connectivity matrix (the diagonal prints 1)."""
    count = len(can)
    out = "".join(f"Device={i} {'CAN' if can[i][j] else 'CANNOT'} Access Peer Device={j}\n"
                  for i in range(count) for j in range(count) if i != j)
    out += ACCESS_NOTE + "P2P Connectivity Matrix\n     D\\D" + "".join(f"{j:6d}" for j in range(count)) + "\n"
    for i in range(count):
        out += f"{i:6d}\t" + "".join(f"{1 if i == j or can[i][j] else 0:6d}" for j in range(count)) + "\n"
    return out


def _table(axis: str, values: Matrix) -> str:
    out = f"   {axis}" + "".join(f"{j:6d} " for j in range(len(values))) + "\n"
    for i, row in enumerate(values):
        out += f"{i:6d} " + "".join(f"{v:6.02f} " for v in row) + "\n"
    return out


def bandwidth(title: str, values: Matrix) -> str:
    return f"{title}\n" + _table("D\\D", values)


def latency(title: str, gpu: Matrix, cpu: Matrix) -> str:
    return f"{title}\n" + _table("GPU", gpu) + "\n" + _table("CPU", cpu)

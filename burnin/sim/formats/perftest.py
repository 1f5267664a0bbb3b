"""perftest's ``ib_write_bw`` text (standard library only: simulated nodes carry a copy).

The layout follows the real ConnectX-7 NDR client output of the reference set
(docs/design.md; ``--report_gbits``): the dashed
lines, the title, the tab-separated settings block, ``local address`` /
``remote address`` lines (one pair per QP), the result header and a row
printed with perftest's own ``REPORT_FMT`` (``" %-7lu    %-10lu       %-7.2lf
           %-7.2lf\\t\\t     %-7.6lf"``). The ``--use_cuda`` set-up lines follow
perftest's source (``src/cuda_memory.c``); no real ``--use_cuda`` sample
exists yet, so their place before the settings block is [U].
"""

from __future__ import annotations

from collections.abc import Sequence

RESULT_LINE = "-" * 87
RESULT_HEADER_G = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
WAITING = ("\n************************************\n"
           "* Waiting for client to connect... *\n"
           "************************************\n")


def settings_block(device: str, *, qps: int, link_type: str = "IB", title: str = "RDMA_Write BW Test") -> str:
    """The dashed title and settings block, as ``ib_write_bw`` prints it."""
    return (
        f"{RESULT_LINE}\n"
        f"                    {title}\n"
        f" Dual-port       : OFF\t\tDevice         : {device}\n"
        f" Number of qps   : {qps}\t\tTransport type : IB\n"
        " Connection type : RC\t\tUsing SRQ      : OFF\n"
        " PCIe relax order: ON\t\tLock-free      : OFF\n"
        " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF\n"
        " TX depth        : 128\n"
        " CQ Moderation   : 1\n"
        " CQE Poll Batch  : Dynamic\n"
        " Mtu             : 4096[B]\n"
        f" Link type       : {link_type}\n"
        " Max inline data : 0[B]\n"
        " rdma_cm QPs\t : OFF\n"
        " Data ex. method : Ethernet\n"
        f"{RESULT_LINE}\n"
    )


def addresses(lid: int, qpn: int, psn: int, vaddr: int, *, qps: int, remote_lid: int) -> str:
    """``local address`` lines (one per QP), then the remote side's, then a dashed line."""
    local = [f" local address: LID {lid:#04x} QPN {qpn + q:#06x} PSN {(psn * (q + 3)) & 0xffffff:#06x} "
             f"RKey 0x1fff00 VAddr {vaddr + q * 0x100000:#016x}" for q in range(qps)]
    remote = [f" remote address: LID {remote_lid:#04x} QPN {qpn + qps + q:#06x} "
              f"PSN {(psn * (q + 7)) & 0xffffff:#06x} RKey 0x1fff00 VAddr {vaddr + (qps + q) * 0x100000:#016x}"
              for q in range(qps)]
    return "\n".join([*local, *remote, RESULT_LINE]) + "\n"


def result_row(size: int, iterations: int, peak_gbps: float, average_gbps: float) -> str:
    """One result row in perftest's REPORT_FMT, with the message rate in Mpps."""
    rate = average_gbps * 1e9 / 8 / size / 1e6 if size else 0.0
    return (f" {size:<7d}    {iterations:<10d}       {peak_gbps:<7.2f}            {average_gbps:<7.2f}"
            f"\t\t     {rate:<7.6f}\n")


def cuda_setup(index: int, bus_ids: Sequence[str], gpu_name: str, pid: int, buffer_bytes: int) -> str:
    """perftest's ``--use_cuda=N`` set-up lines (``init_gpu`` and the buffer allocation)."""
    lines = ["initializing CUDA", "Listing all CUDA devices in system:"]
    for n, bus_id in enumerate(bus_ids):
        bus = bus_id.split(":")[-2] if bus_id.count(":") >= 2 else bus_id.split(":")[0]
        lines.append(f"CUDA device {n}: PCIe address is {bus.upper()}:00")
    lines += ["", f"Picking device No. {index}", f"[pid = {pid}, dev = {index}] device name = [{gpu_name}]",
              "creating CUDA Ctx", "making it the current CUDA Ctx", "CUDA device integrated: 0",
              f"allocated GPU buffer of a {buffer_bytes} address at 0x7ffc2a3e5d40 for type CUDA_MEM_DEVICE"]
    return "\n".join(lines) + "\n"


def client_report(device: str, *, qps: int, size: int, iterations: int, peak_gbps: float, average_gbps: float,
                  lid: int, qpn: int, psn: int, vaddr: int, link_type: str = "IB") -> str:
    """What the client of ``ib_write_bw --report_gbits`` prints after any CUDA set-up lines."""
    return (settings_block(device, qps=qps, link_type=link_type)
            + addresses(lid, qpn, psn, vaddr, qps=qps, remote_lid=lid)
            + RESULT_HEADER_G + "\n"
            + result_row(size, iterations, peak_gbps, average_gbps)
            + RESULT_LINE + "\n")


def server_report(device: str, *, qps: int, lid: int, qpn: int, psn: int, vaddr: int, link_type: str = "IB") -> str:
    """The server side: the waiting banner, settings, addresses and the empty result frame."""
    return (WAITING + settings_block(device, qps=qps, link_type=link_type)
            + addresses(lid, qpn + qps, psn ^ 0x5a5a5a, vaddr + 0x40000000, qps=qps, remote_lid=lid)
            + RESULT_HEADER_G + "\n" + RESULT_LINE + "\n")

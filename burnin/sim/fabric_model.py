"""Simulated ``*_perf`` (nccl-tests), ``nvbandwidth``, ``p2pBandwidthLatencyTest`` and ``ib_write_bw``: real
formats, bandwidth from node health.

Standard library only: each simulated node carries a copy as
``out/fabric/model.py``, run by its ``bin/all_reduce_perf`` (and the other
``*_perf``), ``bin/nvbandwidth``, ``bin/p2pBandwidthLatencyTest`` and ``bin/ib_write_bw`` shims with
whatever ``python3`` the node has (``ib_write_bw`` prints through ``perftest_format.py``, a copy of
:mod:`burnin.sim.formats.perftest`, ``p2pBandwidthLatencyTest`` through ``p2p_format.py``, a copy of
:mod:`burnin.sim.formats.p2p`; ``traffic.py``, a copy of :mod:`burnin.sim.traffic`, grows the NVLink
counters of a GPU whose link retrains under traffic, for every node a tool moves data on).
It reads ``out/fabric/health.json`` of every member of the job, found
next to its own node directory (``<rack>/nodes/<member>/``).

Who is in the job: ``BURNIN_SIM_JOB_NODES`` (a comma list: burnin's local
simulated jobs); else, a rank that ``mpirun`` started (OpenMPI's
``OMPI_COMM_WORLD_RANK``/``_SIZE``), the nodes its ranks report
when they meet (``rendezvous.py``, a copy of :mod:`burnin.sim.rendezvous`: each
rank writes its host name, node and pid under the mpirun job's id, as
nccl-tests' ranks gather their lines through MPI), in rank order (a rank's devices
follow its place among its node's ranks, as nccl-tests' local rank); else, inside
a Slurm step (``PMI_RANK``/``PMIX_RANK`` set), the step's nodes; else this node
alone. Only rank 0 prints the table, as nccl-tests does, with every rank's
``#  Rank`` line: under mpirun the rank's own pid and host name (the lab's nodes
each have their own), the others wait until rank 0 is done, as MPI ranks end
together.

NCCL's own settings on each member: the process environment, else the member's
``root/etc/nccl.conf`` (NCCL reads the file with ``setenv(..., 0)``: the
environment wins, and the file's first setting of a key). With
``NCCL_DEBUG=INFO`` (and ``NCCL_DEBUG_SUBSYS``, default ``INIT,BOOTSTRAP,ENV``)
each member's ranks print NCCL's INFO lines in the real format
(shared/reference-pending/nccl): ``NCCL_IB_HCA set to``, ``Bootstrap : Using``,
``NET/IB : Using [0]mlx5_0:1/IB ... [RO]; OOB IF:ADDR<0>`` (the active HCAs its
``NCCL_IB_HCA`` selects, InfiniBand ports as ``/IB``, Ethernet ones as
``/RoCE``), ``Using network IB`` and one ring channel per compute HCA through
the network (the storage devices NCCL opened carry none: no GPU sits next to
them [U]). A simulated job's one process prints every member's lines; an MPI
rank prints its own node's.

The model (figures from shared/reference/NUMBERS.md; the shape is [U]):

- one node, all_reduce: 480 GB/s with NVLS, which needs every NVLink up;
  otherwise the ring rate (367 GB/s); times the slowest GPU's NVLink share
  (active links / links x its bandwidth factor); a GPU without peer access
  leaves NCCL its shared-memory path through the host (24 GB/s) [U];
- several nodes: each rail (HCA, one per GPU) carries 46 GB/s of busbw; a ring
  goes as fast as the slowest rail of the slowest member (the HCA's share, its
  link rate and its leaf switch port's share: ``rail-degraded``), times the
  number of rails every member has up, capped by the members' intra-node ring;
- busbw ramps up with message size; seeded noise (``BURNIN_SIM_NOISE``, a
  fraction, default 0.005; ``BURNIN_SIM_SEED``); ``BURNIN_SIM_PACE`` (default 0)
  makes a run take that many wall seconds per second it models (1: as long as
  the real tool);
- ``nccl_wrong``: non-zero ``#wrong`` from 1 KiB up; ``nccl_hang``: the header
  and the first rows, then nothing (until killed);
- nvbandwidth: the device-to-device pairs at the lower NVLink share of the two
  GPUs, ``N/A`` for a pair without peer access [U]; host copies at the GPU's
  PCIe share;
- p2pBandwidthLatencyTest: P2P writes at 376 GB/s (the real 8x H100 matrix's
  median) times the pair's lower NVLink share, P2P latency 2.5 us (catalog
  NVL-03: ~2-3 us); a pair without peer access prints 0 in the connectivity
  matrix and copies through host memory (38 GB/s, 14.5 us), as do all pairs
  with P2P disabled [U];
- ``ib_write_bw`` (perftest): the server (no host argument) prints its banner
  and exits; the client writes through the HCA at 392 Gb/s (the real sample)
  times the HCA's bandwidth factor, or with ``--use_cuda=N`` at 388 Gb/s times
  the lower of that factor and GPU N's PCIe share; loopback stays inside the
  HCA, so the link rate does not limit it [U]. A port that is down, an unknown
  device, a missing or lost GPU fail as perftest does.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
import time

TYPE_CHECKING = False  # typing costs an import on every simulated tool run; the annotations are strings
if TYPE_CHECKING:
    from typing import Any

NVLS_GBPS = 480.0
RING_GBPS = {"all_reduce": 367.0, "all_gather": 361.4, "reduce_scatter": 362.9, "alltoall": 340.0,
             "sendrecv": 370.0, "broadcast": 370.0, "reduce": 370.0}
RAIL_GBPS = 46.0
INTER_SHAPE = {"alltoall": 0.8}
HALF_SIZE = {1: 32 << 20, 2: 64 << 20}
LATENCY_US = {1: 10.0, 2: 25.0}
DEFAULT_NOISE = 0.005
MPI_WAIT_S = 120.0  # rank 0 waits this long for every rank of an mpirun job to report
WHOLE_LINES_BYTES = 1024
"""A rank's output is written in pieces of at most this size, each ending a line (:func:`write_lines`)."""
NVB = {
    "host_to_device_memcpy_ce": ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", "host", 55.3),
    "device_to_host_memcpy_ce": ("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", "host", 55.1),
    "host_to_device_bidirectional_memcpy_ce": ("memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", "host", 52.0),
    "device_to_host_bidirectional_memcpy_ce": ("memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)", "host", 51.8),
    "device_to_device_memcpy_read_ce": ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "peer", 392.0),
    "device_to_device_memcpy_write_ce": ("memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", "peer", 396.4),
    "device_to_device_bidirectional_memcpy_read_ce": ("memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)",
                                                      "peer", 783.0),
    "device_to_device_bidirectional_memcpy_write_ce": ("memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)",
                                                       "peer", 783.7),
}
SHM_GBPS = 24.0  # single-node collectives through host memory when a GPU has no peer access [U]
P2P_GBPS = {"uni": 376.0, "bi": 742.0}  # P2P writes: the real 8x H100 sample's median; both ways [U]
P2P_HOST_GBPS = {"uni": 38.0, "bi": 56.0}  # copies staged through host memory (P2P disabled or refused) [U]
P2P_SELF_GBPS = {"uni": 2520.0, "bi": 2540.0}  # a GPU copying within itself (the real sample's diagonal)
P2P_LATENCY_US = {"p2p": 2.5, "host": 14.5, "self": 2.1}  # GPU-timed; catalog NVL-03: P2P ~2-3 us [U]
P2P_CPU_LATENCY_US = {"p2p": 2.2, "host": 12.0, "self": 2.0}  # the CPU table: submitting the copies [U]
WRITE_BW_HOST_GBPS = 392.0  # the real CX-7 NDR ib_write_bw --report_gbits sample: 392.34 Gb/s average
WRITE_BW_CUDA_GBPS = 388.0  # GPU memory through the HCA's PCIe switch: a little below host memory [U]
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
PERFTEST_FLAGS = {"-F", "--report_gbits", "--report-both", "-R", "-a", "-b", "-z"}
PERFTEST_OPTIONS = {"-d": "d", "--ib-dev": "d", "-s": "s", "--size": "s", "-n": "n", "--iters": "n", "-q": "q",
                    "--qp": "q", "-p": "p", "--port": "p", "-D": "D", "--duration": "D", "-x": "x", "-i": "i",
                    "-m": "m", "--use_cuda": "use_cuda"}
_PAD = " " * 30
HEADER = (
    f"#{_PAD}                                out-of-place                       in-place          \n"
    "#       size         count      type   redop    root"
    "     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                        "
    "       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n"
)
_RANGE = re.compile(r"^([^\[]*)\[([^\]]+)\](.*)$")
_SIZE = re.compile(r"^(\d+)([KMGkmg]?)$")
FLAGS_WITH_VALUE = set("tgbeifnmwNpcodrzyTGCaRxIJSM")


class SimFailure(Exception):
    """What the real tool would print before exiting 1."""


def expand(nodeset: str) -> list[str]:
    """``sim[01-03,07],gpu5`` -> names (enough of ClusterShell's syntax for Slurm's lists)."""
    parts, depth, cur = [], 0, ""
    for ch in nodeset:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    names: list[str] = []
    for part in filter(None, (p.strip() for p in parts)):
        match = _RANGE.match(part)
        if match is None:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            width = len(lo)
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi or lo) + 1)]
    return names


def size_bytes(text: str) -> int:
    match = _SIZE.match(text.strip())
    if match is None:
        raise SimFailure(f"invalid size {text!r}")
    return int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]


class Node:
    def __init__(self, name: str, data: dict[str, Any]) -> None:
        self.name = name
        self.data = data
        self.gpus: list[dict[str, Any]] = data["gpus"]

    def gpu_share(self, index: int) -> float:
        gpu = self.gpus[index]
        return (gpu["active"] / gpu["links"] if gpu["links"] else 0.0) * float(gpu["factor"])

    @property
    def nvlink_share(self) -> float:
        return min((self.gpu_share(i) for i in range(len(self.gpus))), default=0.0)

    @property
    def all_links_up(self) -> bool:
        return all(g["active"] == g["links"] for g in self.gpus)

    def peer_access(self, a: int, b: int) -> bool:
        """CUDA grants peer access between GPUs ``a`` and ``b`` (fault p2p-disabled refuses every pair with one)."""
        return bool(self.gpus[a].get("p2p", True) and self.gpus[b].get("p2p", True))

    @property
    def all_peers(self) -> bool:
        return all(g.get("p2p", True) for g in self.gpus)

    def ring(self, base: float) -> float:
        """The node's intra-node collective rate: over NVLink, or through host memory without peer access."""
        return base * self.nvlink_share if self.all_peers else min(base, SHM_GBPS)

    def rails(self, selector: str | None) -> list[dict[str, Any]]:
        return [h for h in self.data["hcas"] if h["up"] and selected(h["name"], selector)]


def selected(name: str, selector: str | None) -> bool:
    """NCCL_IB_HCA semantics: ``=`` exact names, ``^`` excludes, else name prefixes; ``:port`` ignored."""
    if not selector:
        return True
    text, exclude, exact = selector.strip(), False, False
    if text.startswith("^"):
        exclude, text = True, text[1:]
    if text.startswith("="):
        exact, text = True, text[1:]
    items = [item.split(":")[0].strip() for item in text.split(",") if item.strip()]
    hit = any(name == item if exact else name.startswith(item) for item in items)
    return hit != exclude


def conf_value(member: str, key: str) -> str | None:
    """``key`` in the member's ``/etc/nccl.conf`` as NCCL reads it: ``#`` lines skipped, the first setting wins."""
    path = os.path.join(os.path.dirname(node_dir()), member, "root", "etc", "nccl.conf")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#") and name == key:
            return value
    return None


def nccl_setting(member: str, key: str) -> str | None:
    """What NCCL on ``member`` uses for ``key``: the environment, else the member's nccl.conf."""
    if key in os.environ:
        return os.environ[key]
    return conf_value(member, key)


def debug_enabled(member: str, *subsystems: str) -> bool:
    """NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS (``^`` inverts; ``ALL``) let a line of ``subsystems`` through."""
    if (nccl_setting(member, "NCCL_DEBUG") or "").upper() not in ("INFO", "TRACE"):
        return False
    mask = (nccl_setting(member, "NCCL_DEBUG_SUBSYS") or "INIT,BOOTSTRAP,ENV").upper().replace(" ", "")
    invert = mask.startswith("^")
    names = set(mask.lstrip("^").split(","))
    return ("ALL" in names or any(s in names for s in subsystems)) != invert


def rank_pid(node: str, gpu: int) -> int:
    return 20000 + int(hashlib.sha256(f"{node}{gpu}".encode()).hexdigest()[:4], 16)


def info_lines(node: Node, n_index: int, members: list[Node], *, host: str | None = None,
               pid: int | None = None) -> list[str]:
    """NCCL's INFO lines of ``node`` (member ``n_index`` of the job) at init, as its process ``host:pid`` prints them
    (default: the node's name and a modelled pid)."""
    host, pid = host or node.name, pid or rank_pid(node.name, 0)
    lines: list[str] = []

    def info(message: str, *subsystems: str, dev: int = 0, tid: int = pid) -> None:
        if debug_enabled(host, *subsystems):
            lines.append(f"{host}:{pid}:{tid} [{dev}] NCCL INFO {message}")

    oob = str(node.data.get("oob") or "lo:127.0.0.1")
    ifname = nccl_setting(host, "NCCL_SOCKET_IFNAME")
    if ifname is not None:
        info(f"NCCL_SOCKET_IFNAME set by environment to {ifname}", "ENV")
    info(f"Bootstrap : Using {oob}<0>", "INIT", "BOOTSTRAP")
    selector = nccl_setting(host, "NCCL_IB_HCA")
    if selector:
        info(f"NCCL_IB_HCA set to {selector}", "NET", "ENV")
    opened = node.rails(selector)
    if not opened:
        info("NET/IB : No device found.", "INIT", "NET")
        info(f"NET/Socket : Using [0]{oob}<0>", "INIT", "NET")
        info("Using network Socket", "INIT", "NET")
        return lines
    listing = " ".join(f"[{i}]{h['name']}:1/{'RoCE' if h.get('link_layer') == 'Ethernet' else 'IB'}"
                       for i, h in enumerate(opened))
    info(f"NET/IB : Using {listing} [RO]; OOB {oob}<0>", "INIT", "NET")
    info("Using network IB", "INIT", "NET")
    if len(members) < 2:
        return lines
    gpus = max(1, len(node.gpus))
    count = len(members)
    compute = [i for i, h in enumerate(opened) if h.get("role") == "compute"]
    for channel, index in enumerate(compute):
        gpu = channel % gpus
        me = n_index * gpus + gpu
        prev, after = ((n_index - 1) % count) * gpus + gpu, ((n_index + 1) % count) * gpus + gpu
        tid = pid + 1 + gpu
        info(f"Channel {channel:02d}/0 : {prev}[{gpu}] -> {me}[{gpu}] [receive] via NET/IB/{index}/GDRDMA",
             "INIT", "NET", dev=gpu, tid=tid)
        info(f"Channel {channel:02d}/0 : {me}[{gpu}] -> {after}[{gpu}] [send] via NET/IB/{index}/GDRDMA",
             "INIT", "NET", dev=gpu, tid=tid)
    return lines


def _host_name() -> str:
    """The host's name, as a real rank prints it (socket is imported only by a rank of a real mpirun job)."""
    import socket

    return socket.gethostname()


def node_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sibling(module: str, package_module: str) -> Any:
    """A helper module: its copy next to this file on a node, the package module in the repository."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        return importlib.import_module(package_module)


def record_traffic(nodes: list[Node]) -> None:
    """Data moved over the NVLink of these nodes: counters of a link that retrains under load grow."""
    traffic = _sibling("traffic", "burnin.sim.traffic")
    for node in nodes:
        traffic.record(os.path.join(os.path.dirname(node_dir()), node.name), node.gpus)


def load(name: str) -> Node:
    path = os.path.join(os.path.dirname(node_dir()), name, "out", "fabric", "health.json")
    try:
        with open(path, encoding="utf-8") as handle:
            return Node(name, json.load(handle))
    except OSError:
        raise SimFailure(f"NCCL WARN Bootstrap : no route to host {name}") from None


def end_with_daemon() -> None:
    """This rank ends (SIGTERM) when the process that started it, mpirun or its node's orted, is gone.

    A real rank is tied to that daemon through PMIx and aborts once the link is lost; this one only meets
    the others through files (:mod:`burnin.sim.rendezvous`) and would wait out :data:`MPI_WAIT_S` alone.
    An mpirun killed before it could stop its own node's ranks (``timeout -k`` on a loaded machine) left
    rank 0 running after a run was interrupted. Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere nothing.

    The daemon is the parent the tool's shim saw when it started (``BURNIN_SIM_LAUNCHER_PID``, its
    ``$PPID``), not the parent now: Python's start-up takes a tenth of a second, and an mpirun killed in
    it had already handed the rank to a subreaper, which the request would then have watched instead.
    """
    import ctypes
    import signal

    parent = _launcher_pid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the daemon went before the request was made: it will not be delivered
        os.kill(os.getpid(), signal.SIGTERM)


def _launcher_pid() -> int:
    """The pid that started this tool: the shim's ``$PPID`` where it gave one, else the parent now."""
    text = os.environ.get("BURNIN_SIM_LAUNCHER_PID", "")
    return int(text) if text.isdigit() and int(text) > 0 else os.getppid()


class MpiRank:
    """A rank that ``mpirun`` started: its place in the job, from OpenMPI's environment."""

    def __init__(self, rank: int, size: int, job: str) -> None:
        self.rank, self.size, self.job = rank, size, job

    @classmethod
    def from_environment(cls) -> MpiRank | None:
        env = os.environ
        if env.get("BURNIN_SIM_JOB_NODES") or "OMPI_COMM_WORLD_SIZE" not in env:
            return None
        try:
            rank, size = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        except (KeyError, ValueError):
            raise SimFailure("mpirun's OMPI_COMM_WORLD_RANK/SIZE are not numbers") from None
        if not 0 <= rank < size:
            raise SimFailure(f"OMPI_COMM_WORLD_RANK {rank} outside a world of {size}")
        job = "|".join(env.get(k, "") for k in ("OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri",
                                                  "PMIX_NAMESPACE"))
        end_with_daemon()
        return cls(rank, size, job)

    def meet(self, me: str) -> tuple[str, list[dict[str, Any]]]:
        """Report this rank and read every rank's report: (the job's folder, reports in rank order)."""
        rendezvous = _sibling("rendezvous", "burnin.sim.rendezvous")
        where = rendezvous.folder("mpi", self.job)
        record = {"rank": self.rank, "node": me, "host": _host_name(), "pid": os.getpid()}
        try:
            return where, rendezvous.meet(where, self.rank, self.size, record, MPI_WAIT_S)
        except rendezvous.Missing as exc:
            raise SimFailure(f"NCCL WARN Bootstrap : {exc}") from None


def rank_and_members(me: str) -> tuple[int, list[str]]:
    rank_text = next((os.environ[v] for v in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK") if v in os.environ),
                     None)
    explicit = os.environ.get("BURNIN_SIM_JOB_NODES")
    if explicit:
        return 0, [n for n in explicit.split(",") if n]
    if rank_text is not None:
        nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST") or me
        return int(rank_text), expand(nodes)
    return 0, [me]


def rng_for(*parts: object) -> random.Random:
    seed = os.environ.get("BURNIN_SIM_SEED", "0")
    digest = hashlib.sha256("|".join(str(p) for p in (seed, *parts)).encode()).hexdigest()
    return random.Random(digest)  # noqa: S311 - reproducible simulated noise


def pace() -> float:
    """``BURNIN_SIM_PACE``: wall seconds a *_perf run takes per second it models (default 0: no wait); 1 runs as
    long as the real tool (a few seconds for 8 B to 8 GiB), so a run can be watched, or interrupted, while it runs."""
    try:
        value = float(os.environ.get("BURNIN_SIM_PACE", "0"))
    except ValueError:
        return 0.0
    return value if 0.0 < value < 1000.0 else 0.0


def noise() -> float:
    try:
        return float(os.environ.get("BURNIN_SIM_NOISE", DEFAULT_NOISE))
    except ValueError:
        return DEFAULT_NOISE


# ---------------------------------------------------------------- nccl-tests


def parse_perf_args(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            raise SimFailure("USAGE: all_reduce_perf [-b minbytes] [-e maxbytes] [-f stepfactor] [-g ngpus] "
                             "[-n iters] [-w warmup] [-c check] (burnin simulator)")
        if len(arg) >= 2 and arg[0] == "-" and arg[1] in FLAGS_WITH_VALUE:
            value = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if arg[2:] else 2
            opts[arg[1]] = value
            continue
        raise SimFailure(f"invalid option -- '{arg.lstrip('-')}'")
    return opts


def peak_busbw(collective: str, members: list[Node]) -> float:
    nvls = os.environ.get("NCCL_NVLS_ENABLE", "1") != "0"
    ring = RING_GBPS.get(collective, 360.0)
    if len(members) == 1:
        node = members[0]
        if nvls and collective == "all_reduce" and node.all_links_up and node.all_peers:
            return NVLS_GBPS * node.nvlink_share
        return node.ring(ring)
    intra = min(n.ring(ring) for n in members)
    rails = [n.rails(nccl_setting(n.name, "NCCL_IB_HCA")) for n in members]
    for node, usable in zip(members, rails, strict=True):
        if not usable:
            raise SimFailure(f"{node.name}: NCCL WARN NET/IB : No device found.")
    count = min(len(r) for r in rails)
    slowest = min(rail_share(h) for r in rails for h in r)
    inter = count * RAIL_GBPS * slowest * INTER_SHAPE.get(collective, 1.0)
    scale = 1.0 - 0.02 * max(0.0, (len(members) / 2) ** 0.5 - 1)
    return float(min(inter * scale, intra))


def rail_share(hca: dict[str, Any]) -> float:
    """What one rail of a multi-node run passes, against an NDR400 rail: the HCA's own share, its link rate and
    its leaf switch port (``switch``: fault rail-degraded; loopback through the HCA never sees it)."""
    return float(hca["factor"]) * float(hca.get("switch", 1.0)) * float(hca["rate_gbps"]) / 400.0


def bus_factor(collective: str, ranks: int) -> float:
    if ranks < 2:
        return 1.0
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (ranks - 1) / ranks
    return 1.0


def fmt_time(us: float) -> str:
    if us < 100:
        return f"{us:7.2f}"
    if us < 10000:
        return f"{us:7.1f}"
    return f"{us:7.0f}"


def perf(collective: str, args: list[str]) -> int:
    opts = parse_perf_args(args)
    me = os.path.basename(node_dir())
    mpi = MpiRank.from_environment()
    if mpi is not None:
        return mpi_perf(collective, opts, me, mpi)
    rank, names = rank_and_members(me)
    members = [load(name) for name in names]
    own = [m for m in members if os.environ.get("BURNIN_SIM_JOB_NODES") or m.name == me]
    record_traffic(own)
    if rank != 0:
        return other_rank(own, members)
    return table(collective, opts, members, own, model_rank_lines(members))


def model_rank_lines(members: list[Node]) -> list[str]:
    """``#  Rank`` lines of a job whose ranks did not report themselves: one per GPU of every member."""
    lines = []
    for n_index, node in enumerate(members):
        for gpu in node.gpus:
            lines.append(rank_line(n_index * len(node.gpus) + gpu["index"], rank_pid(node.name, gpu["index"]),
                                   node.name, gpu, node.data["gpu_name"]))
    return lines


def write_lines(lines: list[str]) -> None:
    """Write ``lines`` (each ending in a newline) to stdout in flushed pieces that each end a line.

    mpirun forwards each rank's output in the pieces the rank wrote, next to the other ranks' pieces; a
    line that stdout's buffer split in two would come out with another rank's piece inside it. NCCL
    flushes each INFO line as it prints it; the rank lines and the INFO lines here are written whole too.
    """
    piece = ""
    for line in lines:
        if piece and len(piece) + len(line) > WHOLE_LINES_BYTES:
            sys.stdout.write(piece)
            sys.stdout.flush()
            piece = ""
        piece += line
    sys.stdout.write(piece)
    sys.stdout.flush()


def rank_line(rank: int, pid: int, host: str, gpu: dict[str, Any], name: str) -> str:
    return f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host} device {gpu['index']:2d} [{gpu['bus_id']}] {name}\n"


def other_rank(own: list[Node], members: list[Node], *, real: bool = False) -> int:
    """A rank that prints no table: its own nodes' NCCL INFO lines (``real``: with its own host name and pid);
    a hung job never ends."""
    host, pid = (_host_name(), os.getpid()) if real else (None, None)
    for member in own:
        write_lines([f"{line}\n" for line in info_lines(member, members.index(member), members, host=host, pid=pid)])
    sys.stdout.flush()
    if any(n.data.get("nccl_hang") for n in members):
        time.sleep(86400)
    return 0


def mpi_perf(collective: str, opts: dict[str, str], me: str, mpi: MpiRank) -> int:
    """One rank of an mpirun job: meet the others, then rank 0 prints the table with every rank's line."""
    gpus_per_proc = int(opts.get("g", "1"))
    where, reports = mpi.meet(me)
    rendezvous = _sibling("rendezvous", "burnin.sim.rendezvous")
    names = list(dict.fromkeys(str(r["node"]) for r in reports))
    members = [load(name) for name in names]
    mine = members[names.index(me)]
    # a rank's local rank: its place among the ranks of its node (nccl-tests: among those of its host name)
    local = [[r["node"] for r in reports[:index]].count(r["node"]) for index, r in enumerate(reports)]
    record_traffic([mine])
    if mpi.rank != 0:
        other_rank([mine] if local[mpi.rank] == 0 else [], members, real=True)
        return int(rendezvous.wait_done(where, mpi.rank))
    status = 1
    try:
        lines = []
        for report, place in zip(reports, local, strict=True):
            node = members[names.index(str(report["node"]))]
            for offset in range(gpus_per_proc):
                device = place * gpus_per_proc + offset
                if device >= len(node.gpus):
                    raise SimFailure(f"{node.name}: Test CUDA failure common.cu:1093 'invalid device ordinal'")
                lines.append(rank_line(int(report["rank"]) * gpus_per_proc + offset, int(report["pid"]),
                                       str(report["host"]), node.gpus[device], node.data["gpu_name"]))
        status = table(collective, opts, members, [mine], lines, real=True)
    finally:
        rendezvous.finish(where, mpi.size, status)
    return status


def table(collective: str, opts: dict[str, str], members: list[Node], own: list[Node], rank_lines: list[str], *,
          real: bool = False) -> int:
    """Rank 0's output: the header, every rank's line, its own nodes' INFO lines (``real``: with its own host name
    and pid), the table, paced (:func:`pace`)."""
    names = [n.name for n in members]
    hang = any(n.data.get("nccl_hang") for n in members)
    out = sys.stdout
    gpus_per_proc = int(opts.get("g", "1"))
    threads = int(opts.get("t", "1"))
    lo, hi = size_bytes(opts.get("b", "32M")), size_bytes(opts.get("e", "32M"))
    factor = int(opts.get("f", "2"))
    iters, warmup = int(opts.get("n", "20")), int(opts.get("w", "1"))
    check = opts.get("c", "1") != "0"
    out.write(f"# nThread {threads} nGpus {gpus_per_proc} minBytes {lo} maxBytes {hi} step: {factor}(factor) "
              f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: {int(check)} graph: 0\n#\n"
              "# Using devices\n")
    write_lines(rank_lines)
    cuda = int(members[0].data["cuda"])
    out.write(f"NCCL version 2.21.5+cuda{cuda // 1000}.{cuda % 1000 // 10}\n")
    for node in members:
        if len(node.gpus) < gpus_per_proc or any(g["lost"] for g in node.gpus):
            out.flush()
            raise SimFailure(f"{node.name}: Test CUDA failure common.cu:1093 'invalid device ordinal'")
    host, pid = (_host_name(), os.getpid()) if real else (None, None)
    for member in own:
        write_lines([f"{line}\n" for line in info_lines(member, members.index(member), members, host=host, pid=pid)])
    out.write("#\n" + HEADER)
    out.flush()
    ranks = sum(len(n.gpus) for n in members)
    peak = peak_busbw(collective, members)
    sigma = noise()
    rng = rng_for(collective, ",".join(names), os.environ.get("NCCL_IB_HCA", ""),
                  os.environ.get("NCCL_NVLS_ENABLE", "1"))
    peak *= max(0.3, 1.0 + rng.gauss(0.0, sigma))
    kind = 1 if len(members) == 1 else 2
    wrong_total, bw_sum, bw_count, rows = 0, 0.0, 0, 0
    size, slowdown = lo, pace()
    while size <= hi:
        per_elem = 4
        count = size // per_elem if collective in ("all_reduce", "sendrecv", "broadcast", "reduce") \
            else size // (per_elem * max(1, ranks))
        redop = "sum" if collective in ("all_reduce", "reduce_scatter", "reduce") else "none"
        cells, row_us = [], 0.0
        for _ in range(2):
            # latency, then a ramp: half the peak near HALF_SIZE, the peak at large sizes
            algbw_peak = peak * (1.0 + rng.gauss(0.0, sigma / 3)) / bus_factor(collective, ranks)
            ramp = 1.0 + HALF_SIZE[kind] / max(size, HALF_SIZE[kind])
            t_us = LATENCY_US[kind] + size / (algbw_peak * 1e3) * ramp
            row_us += (iters + warmup) * t_us
            algbw = size / (t_us * 1e3)
            busbw = algbw * bus_factor(collective, ranks)
            wrong = 0
            if any(n.data.get("nccl_wrong") for n in members) and size >= 1024:
                wrong = 1 + count // (1 << 22)
            wrong_total += wrong
            bw_sum += busbw
            bw_count += 1
            cells.append(f"  {fmt_time(t_us)}  {algbw:6.2f}  {busbw:6.2f}  {(str(wrong) if check else 'N/A'):>5}")
        if slowdown:
            time.sleep(row_us * 1e-6 * slowdown)
        out.write(f"{size:12d}  {count:12d}  {'float':>8}  {redop:>6}  {-1:6d}" + "".join(cells) + "\n")
        out.flush()
        rows += 1
        if hang and rows >= 12:
            time.sleep(86400)
        size = size * factor if factor > 1 else size + (size or 1)
    out.write(f"# Out of bounds values : {wrong_total} {'FAILED' if wrong_total else 'OK'}\n")
    out.write(f"# Avg bus bandwidth    : {bw_sum / max(1, bw_count):g} \n#\n")
    return 0


# ---------------------------------------------------------------- nvbandwidth


def nvbandwidth(args: list[str]) -> int:
    wanted: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-t", "--testcase"):
            wanted.append(args[i + 1] if i + 1 < len(args) else "")
            i += 2
            continue
        if arg in ("-i", "--testSamples", "-b", "--bufferSize"):
            i += 2
            continue
        if arg in ("-l", "--list"):
            sys.stdout.write("".join(f"{n}, {name}\n" for n, name in enumerate(NVB)))
            return 0
        if arg in ("-d", "--disableAffinity", "-s", "--skipVerification", "-v", "--verbose", "-m", "--useMean"):
            i += 1
            continue
        raise SimFailure(f"unrecognised option '{arg}' (burnin simulator: -j is not simulated)")
    for name in wanted:
        if name not in NVB:
            raise SimFailure(f"ERROR: Testcase {name} not found!")
    node = load(os.path.basename(node_dir()))
    record_traffic([node])
    data = node.data
    out = sys.stdout
    out.write("nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n\n"
              f"CUDA Runtime Version: {data['cuda']}\nCUDA Driver Version: {data['cuda']}\n"
              f"Driver Version: {data['driver']}\n\n")
    for gpu in node.gpus:
        out.write(f"Device {gpu['index']}: {data['gpu_name']} (0000{gpu['bus_id']})\n")
    out.write("\n")
    for gpu in node.gpus:
        if gpu["lost"]:
            out.flush()
            raise SimFailure(f"ERROR: CUDA_ERROR_UNKNOWN on device {gpu['index']}")
    rng = rng_for("nvbandwidth", node.name)
    count = len(node.gpus)
    for name in wanted or list(NVB):
        title, kind, base = NVB[name]
        out.write(f"Running {name}.\n{title}\n")
        out.write("  " + "".join(f"{c:10d}" for c in range(count)) + "\n")
        total = 0.0
        rows = [[-1]] if kind == "host" else [[r] for r in range(count)]
        for row in rows:
            cells = []
            for col in range(count):
                if kind == "peer" and (row[0] == col or not node.peer_access(row[0], col)):
                    cells.append(f"{'N/A':>10}")
                    continue
                share = node.gpus[col]["pcie"] if kind == "host" else min(node.gpu_share(row[0]),
                                                                            node.gpu_share(col))
                value = base * share * (1.0 + rng.gauss(0.0, noise() / 2))
                total += value
                cells.append(f"{value:10.2f}")
            out.write(f"{max(row[0], 0):2d}" + "".join(cells) + "\n")
        out.write(f"\nSUM {name} {total:.2f}\n\n")
    return 0


# ---------------------------------------------------------------- p2pBandwidthLatencyTest


def _p2p_values(node: Node, rng: random.Random, way: str, enabled: bool) -> list[list[float]]:
    """One bandwidth matrix: a GPU within itself, P2P writes at the pair's NVLink share, or through the host."""
    count, sigma = len(node.gpus), noise() / 2
    rows = []
    for a in range(count):
        row = []
        for b in range(count):
            if a == b:
                base = P2P_SELF_GBPS[way]
            elif enabled and node.peer_access(a, b):
                base = P2P_GBPS[way] * min(node.gpu_share(a), node.gpu_share(b))
            else:
                base = P2P_HOST_GBPS[way]
            row.append(max(0.01, base * (1.0 + rng.gauss(0.0, sigma))))
        rows.append(row)
    return rows


def _p2p_latency(node: Node, rng: random.Random, table: dict[str, float], enabled: bool) -> list[list[float]]:
    count = len(node.gpus)
    return [[table["self" if a == b else "p2p" if enabled and node.peer_access(a, b) else "host"]
             * (1.0 + abs(rng.gauss(0.0, noise()))) for b in range(count)] for a in range(count)]


def p2p(args: list[str]) -> int:
    """The CUDA sample: every matrix it prints (its options change nothing here)."""
    if "--help" in args or "-help" in args:
        sys.stdout.write("Usage:  p2pBandwidthLatencyTest [OPTION]...\n"
                         "Tests bandwidth/latency of GPU pairs using P2P and without P2P\n")
        return 0
    fmt = _sibling("p2p_format", "burnin.sim.formats.p2p")
    node = load(os.path.basename(node_dir()))
    out = sys.stdout
    out.write(fmt.BANNER + "\n")
    if any(g["lost"] for g in node.gpus):
        out.write("Cuda failure p2pBandwidthLatencyTest.cu:632: 'unknown error'\n")
        out.flush()
        raise SimFailure("")
    record_traffic([node])
    devices = []
    for gpu in node.gpus:
        domain, bus, device = (int(part, 16) for part in gpu["bus_id"].split(":"))
        devices.append((node.data["gpu_name"], bus, device, domain))
    count = len(node.gpus)
    out.write(fmt.devices(devices))
    out.write(fmt.access([[a != b and node.peer_access(a, b) for b in range(count)] for a in range(count)]))
    rng = rng_for("p2p", node.name)
    for title, way, enabled in zip(fmt.BANDWIDTH_TITLES, ("uni", "uni", "bi", "bi"), (False, True, False, True),
                                   strict=True):
        out.write(fmt.bandwidth(title, _p2p_values(node, rng, way, enabled)))
    for title, enabled in zip(fmt.LATENCY_TITLES, (False, True), strict=True):
        out.write(fmt.latency(title, _p2p_latency(node, rng, P2P_LATENCY_US, enabled),
                              _p2p_latency(node, rng, P2P_CPU_LATENCY_US, enabled)))
    out.write(fmt.CLOSING_NOTE)
    return 0


# ---------------------------------------------------------------- perftest ib_write_bw


def _perftest_format() -> Any:
    """The format module: a copy next to this file on a node, the package module in the repository."""
    try:
        import perftest_format  # type: ignore[import-not-found]
    except ImportError:
        from burnin.sim.formats import perftest as perftest_format
    return perftest_format


def parse_perftest_args(args: list[str]) -> tuple[dict[str, str], str | None]:
    """``-d mlx5_0 -s 1048576 --use_cuda=2 ... [server]`` -> (options, server or None)."""
    opts: dict[str, str] = {}
    server: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg[2:].partition("=")
            opts[key] = value
        elif arg in PERFTEST_FLAGS:
            opts[arg.lstrip("-")] = ""
        elif arg in PERFTEST_OPTIONS:
            if i + 1 >= len(args):
                raise SimFailure(f" Parser function exited with Error (option {arg} needs a value)")
            opts[PERFTEST_OPTIONS[arg]] = args[i + 1]
            i += 1
        elif arg.startswith("-"):
            raise SimFailure(f"ib_write_bw: unrecognized option '{arg}'\n Parser function exited with Error")
        else:
            server = arg
        i += 1
    return opts, server


def _int_option(opts: dict[str, str], key: str, default: int) -> int:
    try:
        return int(opts.get(key, default))
    except ValueError:
        raise SimFailure(f" Parser function exited with Error (invalid {key} {opts[key]!r})") from None


def write_bw_gbps(node: Node, hca: dict[str, Any], gpu: dict[str, Any] | None) -> float:
    """Loopback RDMA write through one HCA: its own share, and the GPU's PCIe share with --use_cuda."""
    if gpu is None:
        return WRITE_BW_HOST_GBPS * float(hca["factor"])
    return WRITE_BW_CUDA_GBPS * min(float(hca["factor"]), float(gpu["pcie"]))


def ib_write_bw(args: list[str]) -> int:
    fmt = _perftest_format()
    opts, server = parse_perftest_args(args)
    device = opts.get("d") or opts.get("ib-dev") or ""
    size = _int_option(opts, "s", 65536)
    iterations = _int_option(opts, "n", 5000)
    qps = _int_option(opts, "q", 1)
    node = load(os.path.basename(node_dir()))
    hca = next((h for h in node.data["hcas"] if h["name"] == device), None)
    if hca is None:
        raise SimFailure(f"IB device {device} not found\n Unable to find the Infiniband/RoCE device")
    if not hca["up"]:
        raise SimFailure(" Port number 1 state is Down\n Couldn't get context for the device")
    digest = int(hashlib.sha256(f"{node.name}{device}{server}".encode()).hexdigest()[:8], 16)
    lid = 1 + digest % 0x200
    qpn, psn, vaddr = 0x40 + digest % 0x80, digest & 0xffffff, 0x7E0000000000 + (digest & 0xFFFFF) * 0x1000
    out = sys.stdout
    gpu: dict[str, Any] | None = None
    if "use_cuda" in opts:
        index = _int_option(opts, "use_cuda", 0)
        if index < 0 or index >= len(node.gpus):
            out.write("initializing CUDA\n")
            out.flush()
            raise SimFailure(f"No such device ID ({index}) exists in system\nCouldn't init GPU context: 1")
        gpu = node.gpus[index]
        out.write(fmt.cuda_setup(index, [g["bus_id"] for g in node.gpus], node.data["gpu_name"],
                                 20000 + digest % 30000, 2 * size))
        if gpu["lost"]:
            out.write("cuCtxCreate() error=999\n")
            out.flush()
            raise SimFailure("Couldn't init GPU context: 1")
    if server is None:
        out.write(fmt.server_report(device, qps=qps, lid=lid, qpn=qpn, psn=psn, vaddr=vaddr))
        return 0
    value = write_bw_gbps(node, hca, gpu)
    if server not in LOOPBACK_NAMES and server != node.name:
        peer = load(server)
        peer_hca = next((h for h in peer.data["hcas"] if h["name"] == device and h["up"]), None)
        if peer_hca is None:
            raise SimFailure(" Unable to Connect the HCA's through the link")
        value = min(value * float(hca.get("switch", 1.0)),
                    write_bw_gbps(peer, peer_hca, None) * float(peer_hca.get("switch", 1.0)))
    rng = rng_for("ib_write_bw", node.name, device, "cuda" if gpu is not None else "host", server)
    average = max(0.01, value * (1.0 + rng.gauss(0.0, noise() / 2)))
    peak = average * (1.0 + abs(rng.gauss(0.0, noise() / 4)))
    out.write(fmt.client_report(device, qps=qps, size=size, iterations=iterations, peak_gbps=peak,
                                average_gbps=average, lid=lid, qpn=qpn, psn=psn, vaddr=vaddr))
    if gpu is not None:
        out.write("destroying current CUDA Ctx\n")
    return 0


def main(argv: list[str]) -> int:
    try:
        if len(argv) >= 2 and argv[0] == "perf":
            return perf(argv[1], argv[2:])
        if argv and argv[0] == "nvbandwidth":
            return nvbandwidth(argv[1:])
        if argv and argv[0] == "ib_write_bw":
            return ib_write_bw(argv[1:])
        if argv and argv[0] == "p2pBandwidthLatencyTest":
            return p2p(argv[1:])
        raise SimFailure("usage: model.py perf COLLECTIVE ARGS... | nvbandwidth ARGS... | ib_write_bw ARGS... | "
                         "p2pBandwidthLatencyTest ARGS...")
    except SimFailure as exc:
        sys.stdout.flush()
        if str(exc):
            sys.stderr.write(f"{exc}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

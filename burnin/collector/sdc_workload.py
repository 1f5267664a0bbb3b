"""burnin's silent-data-corruption workload (GPU-14): bitwise-deterministic kernels on every GPU, digests out.

The collector's ``sdc`` source runs this file with the node's own python (``python3 -c SOURCE [--size N]
[--repeat R]``, :mod:`burnin.collector.sdc`), in the node suite and after each GPU stress stage of the soak.
Standard library plus torch only; nothing of burnin is imported by it.

Every GPU computes the same kernels on the same inputs (made on the CPU from fixed seeds, then copied to
the GPU), with deterministic algorithms (``torch.use_deterministic_algorithms``, cuBLAS's fixed workspace,
no TF32 or reduced-precision reductions), so a healthy GPU's results are bit for bit those of every other
GPU of its model on the same driver, CUDA and torch: matmuls in BF16, FP16 and FP32, elementwise
kernels in FP32 and BF16, and row reductions (sum, softmax) in FP32. Each result's BLAKE2b digest is
printed; the controller compares them across the node's GPUs and the run's nodes
(:mod:`burnin.checks.sdc`). The kernels run ``--repeat`` times: a digest that changes between repeats on
one GPU is reported as unstable.

Output: one JSON document on stdout::

    {"burnin_sdc": 1, "torch": "2.13.0", "cuda": "12.4", "size": 1024, "repeat": 2, "seconds": 1.9,
     "gpus": [{"index": 0, "bus_id": "0000:1b:00.0", "name": "NVIDIA H100 80GB HBM3",
               "digests": {"matmul/bf16": "3fa2...", ...}, "unstable": []}, ...]}

or ``{"burnin_sdc": 1, "error": "..."}`` (exit 2) when torch is missing or sees no GPU: not measured.

On a node of burnin's simulator (``BURNIN_SIM_NODE`` set), where torch has no CUDA, each simulated GPU
computes on the CPU, and the simulator's ``out/sdc/node.json`` beside the node's NVML state names the
GPUs, caps the size (a CPU core is no GPU) and says which GPUs compute a kernel wrong (a fault): that
GPU's result of that kernel gets one bit flipped before its digest, as a GPU with a bad unit would return
it (:mod:`burnin.sim.sdc`). The kernels, their inputs and digests are a real node's; what differs is where
the GPUs come from, and that a simulated rack computes each distinct answer once: every simulated GPU is
the same CPU, so the first of the rack's nodes to need an answer imports torch and computes it, and the
others read it from the rack's cache file (named by ``node.json``, locked while it is filled in). A lab's
node (another user, whose python3 has no torch) appends the simulator's torch (``BURNIN_SIM_TORCH_PATH``)
to its path.

Run it by hand: ``python3 burnin/collector/sdc_workload.py [--size 1024] [--repeat 2]``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

FORMAT = 1
SEED = 20251201
DIGEST_BYTES = 16
KERNELS = ("matmul/bf16", "matmul/fp16", "matmul/fp32", "elementwise/fp32", "elementwise/bf16", "reduce-sum/fp32",
           "softmax/fp32")
SIM_NODE_ENV = "BURNIN_SIM_NODE"
SIM_NVML_ENV = "BURNIN_SIM_NVML"
SIM_TORCH_PATH_ENV = "BURNIN_SIM_TORCH_PATH"
SIM_FILE = os.path.join("out", "sdc", "node.json")


def tensor_digest(torch: Any, tensor: Any) -> str:
    """BLAKE2b of the tensor's bytes as the GPU left them (copied to the host, read in place, no numpy)."""
    host = tensor.detach().contiguous().cpu()
    raw = host.view(torch.uint8) if host.element_size() == 1 else host.reshape(-1).view(torch.uint8)
    data = ctypes.string_at(raw.data_ptr(), raw.numel()) if raw.numel() else b""
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).hexdigest()


def inputs(torch: Any, size: int, seed: int = SEED) -> dict[str, Any]:
    """The kernels' inputs, made on the CPU from a fixed seed: the same bits for every GPU and node."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(size, size, generator=generator, dtype=torch.float32)
    b = torch.randn(size, size, generator=generator, dtype=torch.float32)
    return {"a": a, "b": b}


def flip_bit(torch: Any, tensor: Any) -> Any:
    """The tensor with the lowest bit of its first element flipped (a simulated fault's wrong result)."""
    out = tensor.detach().contiguous().clone()
    flat = out.reshape(-1)
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]
    flat.view(width)[0] ^= 1
    return out


def compute(torch: Any, device: str, data: dict[str, Any], wrong: frozenset[str] = frozenset()) -> dict[str, str]:
    """Each kernel's digest on ``device``; a kernel in ``wrong`` (simulator only) returns one bit off."""
    a, b = data["a"].to(device), data["b"].to(device)
    results = {
        "matmul/bf16": lambda: torch.matmul(a.bfloat16(), b.bfloat16()),
        "matmul/fp16": lambda: torch.matmul((a * 0.25).half(), (b * 0.25).half()),
        "matmul/fp32": lambda: torch.matmul(a, b),
        "elementwise/fp32": lambda: torch.sin(a) * torch.exp(-b.abs()) + torch.tanh(a * b),
        "elementwise/bf16": lambda: torch.sin(a.bfloat16()) * b.bfloat16() + a.bfloat16(),
        "reduce-sum/fp32": lambda: (a * b).sum(dim=1),
        "softmax/fp32": lambda: torch.softmax(a, dim=1),
    }
    digests = {}
    for kernel in KERNELS:
        result = results[kernel]()
        if kernel in wrong:
            result = flip_bit(torch, result)
        digests[kernel] = tensor_digest(torch, result)
    return digests


def deterministic(torch: Any) -> None:
    """Bitwise-reproducible kernels: an op without a deterministic implementation raises instead of running."""
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def simulated_node() -> dict[str, Any] | None:
    """The simulator's description of this node's GPUs (None on a real node)."""
    state = os.environ.get(SIM_NVML_ENV)
    if not os.environ.get(SIM_NODE_ENV) or not state:
        return None
    try:
        with open(os.path.join(os.path.dirname(state), SIM_FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _cuda_devices(torch: Any) -> list[dict[str, Any]]:
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        bus = getattr(props, "pci_bus_id", None)
        bus_id = (f"{int(getattr(props, 'pci_domain_id', 0)):04x}:{int(bus):02x}:"
                  f"{int(getattr(props, 'pci_device_id', 0)):02x}.0") if bus is not None else None
        devices.append({"index": index, "device": f"cuda:{index}", "bus_id": bus_id, "name": props.name,
                        "wrong": frozenset()})
    return devices


def _sim_devices(sim: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"index": int(g["index"]), "device": "cpu", "bus_id": str(g["bus_id"]), "name": str(g.get("name", "")),
             "wrong": frozenset(str(k) for k in g.get("wrong") or ())} for g in sim.get("gpus", [])]


def test_devices(torch: Any, devices: list[dict[str, Any]], size: int, repeat: int) -> list[dict[str, Any]]:
    """Each device's digests (the first of ``repeat`` runs) and the kernels whose digest changed between runs."""
    data = inputs(torch, size)
    gpus = []
    for dev in devices:
        first = compute(torch, dev["device"], data, dev["wrong"])
        unstable: set[str] = set()
        for _ in range(repeat - 1):
            again = compute(torch, dev["device"], data, dev["wrong"])
            unstable.update(k for k in KERNELS if again[k] != first[k])
        if dev["device"].startswith("cuda"):
            torch.cuda.synchronize(dev["device"])
        gpus.append({"index": dev["index"], "bus_id": dev["bus_id"], "name": dev["name"], "digests": first,
                     "unstable": sorted(unstable)})
    return gpus


def run(torch: Any, size: int, repeat: int) -> dict[str, Any]:
    """Every GPU's digests, ``repeat`` times each (the document printed on stdout)."""
    deterministic(torch)
    if not torch.cuda.is_available():
        raise LookupError(f"torch {torch.__version__} sees no CUDA device (torch.version.cuda "
                          f"{torch.version.cuda})")
    devices = _cuda_devices(torch)
    if not devices:
        raise LookupError("no GPU to test")
    start = time.monotonic()
    gpus = test_devices(torch, devices, size, repeat)
    return {"burnin_sdc": FORMAT, "torch": str(torch.__version__), "cuda": torch.version.cuda, "size": size,
            "repeat": repeat, "seconds": round(time.monotonic() - start, 3), "gpus": gpus}


def run_simulated(sim: dict[str, Any], size: int, repeat: int) -> dict[str, Any]:
    """A simulated node's GPUs, CPU stand-ins, through the rack's cache (:func:`_rack_cache`)."""
    devices = _sim_devices(sim)
    if not devices:
        raise LookupError("no GPU to test")
    size = min(size, int(sim.get("max_size") or size))  # a simulated GPU is a CPU core
    version = _torch_version()  # torch missing: ImportError, as the import would
    state = os.environ.get(SIM_NVML_ENV) or ""
    cache_file = sim.get("cache")
    path = os.path.join(os.path.dirname(state), str(cache_file)) if cache_file else None
    wrong_sets = {_wrong_key(dev["wrong"]) for dev in devices}
    start = time.monotonic()
    with _rack_cache(path, f"{FORMAT}/{size}/{repeat}/{version}") as entry:
        missing = sorted(w for w in wrong_sets if w not in entry.setdefault("results", {}))
        if missing:
            torch = importlib.import_module("torch")
            deterministic(torch)
            torch.set_num_threads(1)  # the simulated GPUs share this machine's cores
            stand_ins = [{"index": 0, "device": "cpu", "bus_id": "", "name": "",
                          "wrong": frozenset(w.split("|")) - {""}} for w in missing]
            for key, gpu in zip(missing, test_devices(torch, stand_ins, size, repeat), strict=True):
                entry["results"][key] = {"digests": gpu["digests"], "unstable": gpu["unstable"]}
            entry.update(torch=str(torch.__version__), cuda=torch.version.cuda)
        gpus = [{"index": dev["index"], "bus_id": dev["bus_id"], "name": dev["name"],
                 **entry["results"][_wrong_key(dev["wrong"])]} for dev in devices]
        return {"burnin_sdc": FORMAT, "torch": entry["torch"], "cuda": entry["cuda"], "size": size, "repeat": repeat,
                "seconds": round(time.monotonic() - start, 3), "computed": bool(missing), "gpus": gpus}


def _torch_version() -> str:
    """The version of the torch this python would import, without importing it, from its ``version.py``
    (a simulated node's collector runs this after every gather: torch's import costs seconds and
    ``importlib.metadata`` ~0.1 s of CPU, a scan of every installed distribution)."""
    spec = importlib.util.find_spec("torch")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise ImportError("No module named 'torch'")
    path = os.path.join(locations[0], "version.py")
    try:
        with open(path, encoding="utf-8") as source:
            lines = source.read().splitlines()
    except (OSError, ValueError) as exc:
        raise ImportError(f"{path} unreadable: {exc}") from None
    for line in lines:
        name, equals, value = line.partition("=")
        if equals and name.strip() == "__version__":
            return value.strip().strip("'\"")
    raise ImportError(f"{path} names no __version__")


def _wrong_key(wrong: frozenset[str]) -> str:
    return "|".join(sorted(wrong))


@contextlib.contextmanager
def _rack_cache(path: str | None, key: str) -> Iterator[dict[str, Any]]:
    """A simulated rack's digests by key, held under a lock while the caller fills it in.

    Every simulated GPU is the same CPU: what one node of the rack computed with torch for a size, a
    repeat count, a torch and a set of wrong kernels, every node would. The first node to need it imports
    torch and computes it; the others, waiting on the lock, read it (the rack's nodes start together, and
    torch's import costs seconds of CPU each). The file is rewritten in place (the simulator makes it
    writable for a lab's node user); without one (none named, not writable): computed here.
    """
    if path is None:
        yield {}
        return
    try:
        lock = open(path + ".lock", "a")  # noqa: SIM115 - held until the entry is written
    except OSError:
        yield {}
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            store = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - rewritten in place below, under the lock
        except OSError:
            yield {}
            return
        with store:
            store.seek(0)
            try:
                cache = json.loads(store.read() or "{}")
            except ValueError:
                cache = {}
            cache = cache if isinstance(cache, dict) else {}
            entry = cache.setdefault(key, {})
            before = json.dumps(entry, sort_keys=True)
            yield entry
            if json.dumps(entry, sort_keys=True) != before:
                store.seek(0)
                store.truncate()
                json.dump(cache, store)


def _option(argv: list[str], name: str, default: int) -> int:
    if name not in argv:
        return default
    position = argv.index(name) + 1
    value = argv[position] if position < len(argv) else ""
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name} takes a positive whole number, not {value!r}")
    return int(value)


def main(argv: list[str]) -> int:
    try:
        size = _option(argv, "--size", 1024)
        repeat = _option(argv, "--repeat", 2)
    except ValueError as exc:
        print(json.dumps({"burnin_sdc": FORMAT, "error": str(exc)}))
        return 2
    # cuBLAS's deterministic workspace and CUDA's device order (NVML's, by PCI bus) before CUDA starts
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    warnings.filterwarnings("ignore")  # torch warns about a missing numpy, which nothing here uses
    sim = simulated_node()
    if sim is not None and os.environ.get(SIM_TORCH_PATH_ENV):
        sys.path.append(os.environ[SIM_TORCH_PATH_ENV])  # a lab node's python3: the simulator's torch
    try:
        if sim is not None:
            document = run_simulated(sim, size, repeat)
        else:
            document = run(importlib.import_module("torch"), size, repeat)
    except ImportError as exc:
        print(json.dumps({"burnin_sdc": FORMAT, "error": f"torch not importable by {sys.executable}: {exc}"}))
        return 2
    except LookupError as exc:
        print(json.dumps({"burnin_sdc": FORMAT, "error": str(exc)}))
        return 2
    except Exception as exc:  # noqa: BLE001 - a kernel that raises is reported, not a traceback
        print(json.dumps({"burnin_sdc": FORMAT, "error": f"{type(exc).__name__}: {exc}"}))
        return 3
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

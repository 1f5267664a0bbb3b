"""burnin's portable GPU stress: torch matmuls on every GPU, reported in gpu_burn's format.

The soak sends this file on stdin to ``python3 - SECONDS`` on a node without
gpu_burn (``gpu.tool: auto``, the default, or ``builtin``). Standard library
plus torch only; nothing of burnin is imported on the node.

Each GPU gets a thread that multiplies two bf16 matrices (8192 x 8192) again
and again on its own stream; every tenth of the run it prints gpu_burn's
progress line (``proc'd: N (R Gflop/s) - ...   errors: E - ...   temps: T C -
...``), with R the rate of that tenth. Every few products it compares the
result with the first one computed on that GPU: a GPU that computes wrong
results counts an error, as gpu_burn's compare kernel does. It ends with
``Tested N GPUs:`` and ``GPU i: OK`` or ``FAULTY``, like gpu_burn.

Run it by hand: ``python3 burnin/soak/gpustress.py 60 [--devices 0,1] [--size 8192]``.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from pathlib import Path
from typing import Any

STEPS = 10
CHECK_EVERY = 16


def _torch() -> Any:
    return importlib.import_module("torch")


def script_bytes() -> bytes:
    """This file, to send on stdin to a node's ``python3 -``."""
    return Path(__file__).read_bytes()


class Worker:
    def __init__(self, device: int, size: int) -> None:
        self.device = device
        self.size = size
        self.products = 0
        self.errors = 0
        self.failed: str | None = None
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        torch = _torch()
        try:
            torch.cuda.set_device(self.device)
            generator = torch.Generator(device=f"cuda:{self.device}").manual_seed(1234 + self.device)
            a = torch.randn(self.size, self.size, device=f"cuda:{self.device}", dtype=torch.bfloat16,
                            generator=generator)
            b = torch.randn(self.size, self.size, device=f"cuda:{self.device}", dtype=torch.bfloat16,
                            generator=generator)
            reference = a @ b
            out = torch.empty_like(reference)
            torch.cuda.synchronize(self.device)
            self.ready.set()
            while not self.stop.is_set():
                for _ in range(CHECK_EVERY):
                    torch.matmul(a, b, out=out)
                torch.cuda.synchronize(self.device)
                if not torch.equal(out, reference):
                    self.errors += 1
                self.products += CHECK_EVERY
        except Exception as exc:  # noqa: BLE001 - a dead worker is reported like gpu_burn's (DIED!)
            self.failed = f"{type(exc).__name__}: {exc}"
            self.ready.set()


def _temperature(device: int) -> str:
    try:
        return f"{int(_torch().cuda.temperature(device))} C"
    except Exception:  # noqa: BLE001 - no pynvml behind torch: gpu_burn prints "--" too
        return "--"


def main(argv: list[str]) -> int:
    torch = _torch()
    seconds = int(argv[0]) if argv and argv[0].isdigit() else 10
    size = int(argv[argv.index("--size") + 1]) if "--size" in argv else 8192
    count = torch.cuda.device_count()
    devices = [int(d) for d in argv[argv.index("--devices") + 1].split(",")] if "--devices" in argv \
        else list(range(count))
    if not devices:
        print("No CUDA devices")
        return 1
    print(f"Burning for {seconds} seconds.")
    for device in devices:
        props = torch.cuda.get_device_properties(device)
        uuid = getattr(props, "uuid", None)
        print(f"GPU {device}: {props.name} (UUID: GPU-{uuid if uuid is not None else device})")
    workers = [Worker(d, size) for d in devices]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    for worker in workers:
        worker.ready.wait()
    flop = 2.0 * size ** 3
    start = last = time.monotonic()
    done = [0] * len(workers)
    for step in range(1, STEPS + 1):
        time.sleep(max(0.0, start + seconds * step / STEPS - time.monotonic()))
        now = time.monotonic()
        counts = [w.products for w in workers]
        rates = [(c - d) * flop / max(1e-9, now - last) / 1e9 for c, d in zip(counts, done, strict=True)]
        done, last = counts, now
        procd = " - ".join(f"{-1 if w.failed else c} ({r:.0f} Gflop/s)"
                           for w, c, r in zip(workers, counts, rates, strict=True))
        errors = " - ".join(f"{w.errors} " + ("(DIED!)" if w.failed else "(WARNING!)" if w.errors else "")
                            for w in workers)
        temps = " - ".join(_temperature(w.device) for w in workers)
        print(f"{100.0 * step / STEPS:.1f}%  proc'd: {procd}   errors: {errors}  temps: {temps} ", flush=True)
    for worker in workers:
        worker.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    print("done\n")
    print(f"Tested {len(workers)} GPUs:")
    for worker in workers:
        print(f"\tGPU {worker.device}: {'FAULTY' if worker.errors or worker.failed else 'OK'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""NVML events through pynvml: an event set on every GPU, waited on in a thread.

Each session initialises NVML, registers every GPU for the event types it
offers among :data:`~burnin.watch.events.NVML_WANTED` and waits with a
timeout. ``NVML_ERROR_GPU_IS_LOST`` names no GPU: the handles are asked in turn
and each newly lost one becomes a ``gpu-lost`` event. Any other NVML error (the
driver reloaded, the library gone) ends the session; a new one starts after a
back-off (0.5 s doubling to 30 s), so the watch survives pynvml errors and NVML
restarts. While no session holds a registered event set, :attr:`available` is
clear and the daemon falls back to the polling probe.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from burnin.watch.events import NVML_KINDS, NVML_WANTED, Kind, WatchEvent, gpu_bus

Emit = Callable[[WatchEvent], None]
Log = Callable[[str], None]

ERROR_TIMEOUT = 10
ERROR_GPU_IS_LOST = 15
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 30.0


class EventsUnavailable(Exception):
    """NVML answers, but no GPU can be registered for events."""


def _address(handle: Any) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlWatch:
    def __init__(self, emit: Emit, log: Log, *, wait_ms: int = 1000) -> None:
        self.emit = emit
        self.log = log
        self.wait_ms = wait_ms
        self.available = threading.Event()
        self.labels: dict[str, str] = {}  # GPU bus -> gpuN, for the kernel log's events
        self.sessions = 0
        self.gave_up: str | None = None  # set when pynvml cannot be imported at all
        self._lost: set[str] = set()
        self._last_error: str | None = None

    def run(self, stop: threading.Event) -> None:
        try:
            import pynvml
        except ImportError as exc:
            self.gave_up = f"pynvml not importable ({exc})"
            self.log(f"NVML events unavailable: {self.gave_up}")
            return
        backoff = BACKOFF_FIRST_S
        while not stop.is_set():
            started = time.monotonic()
            try:
                self._session(pynvml, stop)
            except EventsUnavailable as exc:
                self._report(f"NVML events unavailable: {exc}")
                backoff = BACKOFF_MAX_S
            except pynvml.NVMLError as exc:
                self._report(f"NVML: {exc}")
            except Exception as exc:  # noqa: BLE001 - the daemon outlives anything pynvml raises
                self._report(f"NVML: unexpected {type(exc).__name__}: {exc}")
            finally:
                self.available.clear()
            if stop.is_set():
                return
            if time.monotonic() - started > BACKOFF_MAX_S:
                backoff = BACKOFF_FIRST_S  # the session ran a while: this is a fresh failure
            stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _report(self, message: str) -> None:
        if message != self._last_error:
            self.log(f"{message}; retrying")
            self._last_error = message

    def _session(self, nv: Any, stop: threading.Event) -> None:
        nv.nvmlInit()
        try:
            handles = self._handles(nv)
            event_set = nv.nvmlEventSetCreate()
            try:
                registered = self._register(nv, handles, event_set)
                if not registered:
                    raise EventsUnavailable(f"none of {len(handles)} GPUs offers events")
                self.sessions += 1
                self._last_error = None
                self.available.set()
                self.log(f"NVML events on {len(registered)} GPUs (session {self.sessions})")
                self._wait_loop(nv, handles, event_set, stop)
            finally:
                nv.nvmlEventSetFree(event_set)
        finally:
            self.available.clear()
            try:
                nv.nvmlShutdown()
            except nv.NVMLError:
                pass

    def _handles(self, nv: Any) -> dict[int, tuple[Any, str]]:
        """index -> (handle, bus) of every GPU that answers; newly lost ones become events."""
        handles: dict[int, tuple[Any, str]] = {}
        labels = dict(self.labels)
        for index in range(nv.nvmlDeviceGetCount()):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                bus = gpu_bus(_text(nv.nvmlDeviceGetPciInfo(handle).busId))
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) != ERROR_GPU_IS_LOST:
                    raise
                continue  # lost before this session: known, or reported when it was lost
            handles[index] = (handle, bus)
            labels[bus] = f"gpu{index}"
            self._lost.discard(bus)  # answers again (reset, or a simulated fault cleared)
        self.labels = labels  # replaced whole: the kernel-log thread reads it without a lock
        return handles

    def _register(self, nv: Any, handles: dict[int, tuple[Any, str]], event_set: Any) -> list[int]:
        registered: list[int] = []
        for index, (handle, _) in handles.items():
            try:
                mask = nv.nvmlDeviceGetSupportedEventTypes(handle) & NVML_WANTED
                if mask:
                    nv.nvmlDeviceRegisterEvents(handle, mask, event_set)
                    registered.append(index)
            except nv.NVMLError as exc:
                self.log(f"NVML: gpu{index}: cannot register events: {exc}")
        return registered

    def _wait_loop(self, nv: Any, handles: dict[int, tuple[Any, str]], event_set: Any,
                   stop: threading.Event) -> None:
        by_address = {_address(handle): (index, bus) for index, (handle, bus) in handles.items()}
        while not stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(event_set, self.wait_ms)
            except nv.NVMLError as exc:
                code = getattr(exc, "value", None)
                if code == ERROR_TIMEOUT:
                    continue
                if code == ERROR_GPU_IS_LOST and self._find_lost(nv, handles):
                    continue
                raise  # a new session re-registers what is left
            kind = NVML_KINDS.get(int(data.eventType))
            if kind is None:
                continue
            index, bus = by_address.get(_address(data.device), (None, ""))
            code = int(data.eventData) if kind in (Kind.XID, Kind.RECOVERY_ACTION) else None
            text = f"NVML event 0x{int(data.eventType):x} data {int(data.eventData)}"
            self.emit(WatchEvent("nvml", kind, bus, code, text, time.time(),
                                 label=None if index is None else f"gpu{index}"))

    def _find_lost(self, nv: Any, handles: dict[int, tuple[Any, str]]) -> bool:
        """Emit a gpu-lost event for every GPU that newly answers GPU_IS_LOST; True if any did."""
        found = False
        for index, (handle, bus) in handles.items():
            if bus in self._lost:
                continue
            try:
                nv.nvmlDeviceGetUUID(handle)
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) != ERROR_GPU_IS_LOST:
                    continue
                self._lost.add(bus)
                found = True
                self.emit(WatchEvent("nvml", Kind.GPU_LOST, bus, None, "NVML: GPU is lost", time.time(),
                                     label=f"gpu{index}"))
        return found

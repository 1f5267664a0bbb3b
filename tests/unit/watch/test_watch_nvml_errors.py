"""The NVML thread outlives whatever pynvml raises: a stand-in module scripts the failures."""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from collections.abc import Iterator

import pytest

from burnin.watch.events import Kind, WatchEvent
from burnin.watch.nvml import NvmlWatch


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class _Data:
    def __init__(self, device: object, event_type: int, data: int) -> None:
        self.device, self.eventType, self.eventData = device, event_type, data


def _fake_pynvml(script: list[object], stop: threading.Event) -> types.ModuleType:
    """nvmlInit fails as ``script`` says (an exception, or None for success), then waits deliver one Xid."""
    module = types.ModuleType("pynvml")
    handle = ctypes.pointer(ctypes.c_int(7))
    waits: list[object] = [NVMLError(10), _Data(handle, 0x8, 79)]

    def init() -> None:
        step = script.pop(0) if script else None
        if isinstance(step, BaseException):
            raise step

    def wait(event_set: object, timeout_ms: int) -> object:
        if not waits:
            stop.set()
            raise NVMLError(10)
        step = waits.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: handle  # type: ignore[attr-defined]
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:1B:00.0")  # type: ignore[attr-defined]
    module.nvmlEventSetCreate = lambda: object()  # type: ignore[attr-defined]
    module.nvmlEventSetFree = lambda s: None  # type: ignore[attr-defined]
    module.nvmlDeviceGetSupportedEventTypes = lambda h: 0xFFFF  # type: ignore[attr-defined]
    module.nvmlDeviceRegisterEvents = lambda h, mask, s: None  # type: ignore[attr-defined]
    module.nvmlEventSetWait_v2 = wait  # type: ignore[attr-defined]
    return module


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_unexpected_exceptions_and_nvml_errors_lead_to_a_new_session(monkeypatch: pytest.MonkeyPatch,
                                                                      stop: threading.Event) -> None:
    script: list[object] = [RuntimeError("ctypes went away"), NVMLError(9)]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(script, stop))
    monkeypatch.setattr("burnin.watch.nvml.BACKOFF_FIRST_S", 0.01)
    events: list[WatchEvent] = []
    messages: list[str] = []
    watch = NvmlWatch(events.append, messages.append)
    thread = threading.Thread(target=watch.run, args=(stop,), daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert any("unexpected RuntimeError: ctypes went away" in m for m in messages), messages
    assert "NVML: 9; retrying" in messages, messages
    assert watch.sessions == 1
    (event,) = events
    assert (event.kind, event.device, event.code, event.label) == (Kind.XID, "0000:1b:00", 79, "gpu0")
    assert watch.labels == {"0000:1b:00": "gpu0"}


def test_missing_pynvml_gives_up_cleanly(monkeypatch: pytest.MonkeyPatch, stop: threading.Event) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    messages: list[str] = []
    watch = NvmlWatch(lambda e: None, messages.append)
    watch.run(stop)
    assert watch.gave_up is not None and not watch.available.is_set()
    assert "NVML events unavailable: pynvml not importable" in messages[0]


def _handles_nv(errors: dict[int, int]) -> types.SimpleNamespace:
    """A stand-in NVML with three GPUs; ``errors``: index -> the NVML error its handle raises."""

    def handle(index: int) -> object:
        if index in errors:
            raise NVMLError(errors[index])
        return ctypes.pointer(ctypes.c_int(index))

    return types.SimpleNamespace(
        NVMLError=NVMLError, nvmlDeviceGetCount=lambda: 3, nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=f"00000000:{0x1b + h.contents.value:02X}:00.0"))


def test_a_gpu_lost_before_the_session_is_left_out_another_error_ends_it() -> None:
    watch = NvmlWatch(lambda event: None, lambda text: None)
    handles = watch._handles(_handles_nv({1: 15}))  # NVML_ERROR_GPU_IS_LOST
    assert sorted(handles) == [0, 2]
    assert watch.labels == {"0000:1b:00": "gpu0", "0000:1d:00": "gpu2"}
    with pytest.raises(NVMLError):
        watch._handles(_handles_nv({1: 999}))

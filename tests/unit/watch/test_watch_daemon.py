"""The daemon's decisions: never act twice on one incident, escalate only, record everything once."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from watch_support import FakeSlurm

from burnin.watch import daemon
from burnin.watch.actions import SlurmActor
from burnin.watch.daemon import WatchConfig, Watcher
from burnin.watch.events import Action, Kind, Policy, WatchEvent, classify
from burnin.watch.records import KernelRecord


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _watcher(tmp_path: Path, slurm: FakeSlurm, clock: Clock, *, dry_run: bool = False,
             policy: Policy | None = None) -> tuple[Watcher, io.StringIO]:
    out = io.StringIO()
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=False,
                         dedupe_window=60.0, policy=policy or Policy(), dry_run=dry_run)
    actor = SlurmActor("sim01", client=slurm, dry_run=dry_run, out=out, poll_s=0.001)
    watcher = Watcher(config, actor=actor, out=out, err=io.StringIO(), clock=clock, background=lambda work: work())
    return watcher, out


def _xid(code: int, clock: Clock, source: str = "kmsg", bus: str = "0000:1b:00") -> WatchEvent:
    return WatchEvent(source, Kind.XID, bus, code, f"NVRM: Xid (PCI:{bus}): {code}", clock(), label="gpu3")


def _journal(tmp_path: Path, kind: str | None = None) -> list[dict]:  # type: ignore[type-arg]
    """Incident entries (``kind`` None), or the entries of one kind (``job-released``)."""
    path = tmp_path / "state" / "events.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in entries if (e["kind"] == kind if kind else e["kind"] != "job-released")]


def test_xid_79_evicts_once_though_nvml_and_the_kernel_both_report_it(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, out = _watcher(tmp_path, slurm, clock)
    entry = watcher.handle(_xid(79, clock, "nvml"))
    clock.now += 0.2
    assert watcher.handle(_xid(79, clock, "kmsg")) is None
    assert entry is not None and entry["action"] == "evict" and entry["requeued"] == ["41"]
    assert slurm.commands().count("scontrol requeue") == 1
    assert slurm.reason == "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"
    (recorded,) = [e for e in _journal(tmp_path) if e.get("kind") == "xid"]
    assert recorded["check"] == "GPU-04" and recorded["source"] == "nvml"
    assert recorded["detected_at"] <= recorded["acted_at"]
    assert "EVICT GPU-04 gpu3 Xid 79" in out.getvalue()
    assert watcher.incidents.duplicates == 1
    (released,) = _journal(tmp_path, "job-released")
    assert released["job"] == "41" and released["ok"] and released["released_at"] >= recorded["acted_at"]
    assert ["scontrol", "update", "JobId=41", "StartTime=now+3"] in slurm.calls
    assert "job 41 may start again (StartTime=now+3)" in out.getvalue()


def test_xid_63_is_only_recorded(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, out = _watcher(tmp_path, slurm, clock)
    entry = watcher.handle(_xid(63, clock))
    assert entry is not None and entry["action"] == "record" and entry["steps"] == []
    assert slurm.calls == []
    assert [e["code"] for e in _journal(tmp_path)] == [63]
    assert "record GPU-04 gpu3 Xid 63 (row-remapping event)" in out.getvalue()


def test_repeats_within_the_window_are_one_incident_later_ones_a_new_one(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    for _ in range(5):  # an Xid storm: each repeat within the window of the last one
        watcher.handle(_xid(13, clock))
        clock.now += 30
    assert len(_journal(tmp_path)) == 1
    clock.now += 61
    watcher.handle(_xid(13, clock))
    assert len(_journal(tmp_path)) == 2


def test_node_is_escalated_never_acted_on_twice(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(74, clock))  # NVLink error: drain
    assert slurm.commands().count("scontrol update") == 1 and slurm.jobs == ["41"]
    clock.now += 1
    watcher.handle(_xid(79, clock))  # escalates: evict (drain again with the new reason, requeue)
    assert slurm.jobs == []
    clock.now += 1
    slurm.jobs.append("42")  # must not happen on a drained node, but if it did, no second eviction
    entry = watcher.handle(_xid(79, clock, bus="0000:29:00"))
    assert entry is not None and entry["action"] == "none" and "already evicted" in entry["note"]
    assert slurm.jobs == ["42"]
    assert [e["action"] for e in _journal(tmp_path)] == ["drain", "evict", "none"]


def test_a_node_resumed_since_is_acted_on_again(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(79, clock))
    slurm.state, slurm.reason, slurm.jobs = "MIXED", "", ["42"]  # an operator resumed it, a job landed
    clock.now += 5
    entry = watcher.handle(_xid(79, clock, bus="0000:29:00"))
    assert entry is not None and entry["action"] == "evict" and entry["requeued"] == ["42"]


def test_a_restarted_watch_remembers_what_it_did(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    first, _ = _watcher(tmp_path, slurm, clock)
    first.handle(_xid(79, clock))
    clock.now += 10
    second, _ = _watcher(tmp_path, slurm, clock)
    assert second.handle(_xid(79, clock)) is None  # the same incident, heard after the restart
    entry = second.handle(_xid(48, clock))
    assert entry is not None and entry["action"] == "none"


def test_failed_action_is_retried(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"], fail={"scontrol --oneliner"}), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    entry = watcher.handle(_xid(79, clock))
    assert entry is not None and entry["out_of_pool"] is False
    slurm.fail.clear()
    clock.now += 2.5
    watcher._retry_due(clock())
    entries = _journal(tmp_path)
    assert [e.get("retry") for e in entries] == [None, 1]
    assert entries[1]["out_of_pool"] and entries[1]["requeued"] == ["41"]


def test_dry_run_prints_and_records_but_calls_nothing(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, out = _watcher(tmp_path, slurm, clock, dry_run=True)
    watcher.handle(_xid(79, clock))
    assert slurm.calls == []
    text = out.getvalue()
    assert "scontrol update NodeName=sim01 State=DRAIN 'Reason=burnin: GPU-04 gpu3 Xid 79" in text
    assert 'scontrol requeue "$job"' in text
    assert _journal(tmp_path)[0]["dry_run"] is True


def test_ib_port_down_with_site_policy_drain_keeps_the_job(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock, policy=Policy(ib_port_down=Action.DRAIN))
    event = WatchEvent("kmsg", Kind.IB_PORT_DOWN, "0000:4f:00.0", None,
                       "mlx5_core 0000:4f:00.0: Port module event: module 0, Cable unplugged", clock(),
                       label="mlx5_2")
    entry = watcher.handle(event)
    assert entry is not None and entry["action"] == "drain" and entry["check"] == "IB-01"
    assert slurm.jobs == ["41"] and slurm.reason.startswith("burnin: IB-01 mlx5_2 port down")


def test_the_same_xid_again_after_an_operator_resumed_the_node_is_a_new_incident(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(79, clock))
    clock.now += 0.01
    assert watcher.handle(_xid(79, clock)) is None  # the kernel log's sighting of the same event: no second action
    slurm.state, slurm.reason, slurm.jobs = "MIXED", "", ["42"]  # resumed within the window; a job landed
    clock.now += 5
    entry = watcher.handle(_xid(79, clock))  # same GPU, same Xid
    assert entry is not None and entry["action"] == "evict" and entry["requeued"] == ["42"]
    assert [e["action"] for e in _journal(tmp_path) if e["kind"] == "xid"] == ["evict", "evict"]


def _gpu(root: Path, bus: str) -> None:
    device = root / "sys/bus/pci/devices" / f"{bus}.0"
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x10de\n")
    (device / "class").write_text("0x030200\n")


def _kernel_watcher(tmp_path: Path, root: Path) -> Watcher:
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=tmp_path / "kmsg", use_nvml=False,
                         root=str(root), dry_run=True)
    return Watcher(config, out=io.StringIO(), err=io.StringIO())


def _heard(watcher: Watcher) -> list[WatchEvent]:
    found = []
    while (event := watcher.events.get(timeout=0)) is not None:
        found.append(event)
    return found


def test_a_gpu_sysfs_lists_later_is_known_at_the_next_rescan_not_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _gpu(root, "0000:1b:00")
    watcher = _kernel_watcher(tmp_path, root)
    line = KernelRecord(1, 2, 4, "NVRM: Xid (PCI:0000:52:00): 79, GPU has fallen off the bus.")
    _gpu(root, "0000:52:00")  # hot-added after the start
    watcher._kernel_record(line, 1.0)
    (early,) = _heard(watcher)
    assert early.foreign == "not a GPU of this node"  # sysfs is not read again for every line
    watcher._devices_read -= daemon.RESCAN_S
    watcher._kernel_record(line, 2.0)
    (later,) = _heard(watcher)
    assert later.foreign == "" and classify(later).action is Action.EVICT


def test_a_line_of_a_known_device_or_no_event_reads_no_sysfs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _gpu(root, "0000:1b:00")
    watcher = _kernel_watcher(tmp_path, root)
    watcher._devices_read -= daemon.RESCAN_S
    due = watcher._devices_read
    watcher._kernel_record(KernelRecord(1, 2, 4, "usb 1-1: new high-speed USB device"), 1.0)
    watcher._kernel_record(KernelRecord(2, 2, 4, "NVRM: Xid (PCI:0000:1b:00): 13, x"), 1.0)
    assert watcher._devices_read == due and [e.code for e in _heard(watcher)] == [13]


def test_an_untrusted_event_like_line_is_said_once_and_counted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _gpu(root, "0000:1b:00")
    watcher = _kernel_watcher(tmp_path, root)
    forged = KernelRecord(1, 2, 4, "NVRM: Xid (PCI:0000:1b:00): 79, x", trusted=False, origin="kmsg facility 1 (user)")
    plain = KernelRecord(2, 2, 4, "hello", trusted=False, origin="kmsg facility 1 (user)")
    watcher._kernel_record(forged, 1.0)
    assert "not acted on" in watcher.err.getvalue()  # type: ignore[attr-defined]  # said at the first
    for record in (plain, forged, forged):
        watcher._kernel_record(record, 1.0)
    assert _heard(watcher) == []
    assert (watcher.untrusted, watcher.forged) == (4, 3)
    said = watcher.err.getvalue()  # type: ignore[attr-defined]
    assert said.count("not acted on, not written by the kernel (kmsg facility 1 (user))") == 1


def test_no_gpu_known_is_said_at_start(tmp_path: Path) -> None:
    watcher = _kernel_watcher(tmp_path, tmp_path / "empty-root")
    stop = threading.Event()
    stop.set()
    assert watcher.run(stop) == 0
    said = watcher.err.getvalue()  # type: ignore[attr-defined]
    assert "no GPU listed in" in said and "Xids in the kernel log will be recorded, not acted on" in said
    assert "format auto" in said and "0 lines not the kernel's" in said


def test_a_failed_action_is_retried_three_times_then_left_recorded(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"], fail={"scontrol --oneliner"}), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(79, clock))
    for _ in range(6):
        clock.now += daemon.RETRY_S + 0.5
        watcher._retry_due(clock())
    assert [e.get("retry") for e in _journal(tmp_path)] == [None, 1, 2, 3]
    assert watcher._retries == []


def test_nvmls_gpus_count_as_the_nodes_as_nvml_names_them(tmp_path: Path) -> None:
    """NVML replaces its labels whole when its GPUs change; sysfs's devices are read again on a rescan."""
    root = tmp_path / "root"
    _gpu(root, "0000:1b:00")
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=tmp_path / "kmsg", use_nvml=True,
                         root=str(root), dry_run=True)
    watcher = Watcher(config, out=io.StringIO(), err=io.StringIO())
    assert watcher.nvml is not None
    line = KernelRecord(1, 2, 4, "NVRM: Xid (PCI:0000:52:00): 79, GPU has fallen off the bus.")
    watcher._kernel_record(line, 1.0)
    assert [e.foreign for e in _heard(watcher)] == ["not a GPU of this node"]
    watcher.nvml.labels = {"0000:1b:00": "gpu0", "0000:52:00": "gpu2"}  # an NVML session came up
    watcher._kernel_record(line, 2.0)
    (event,) = _heard(watcher)
    assert (event.foreign, event.label) == ("", "gpu2")
    watcher.nvml.labels = {"0000:1b:00": "gpu0"}  # a new session without it
    watcher._kernel_record(line, 3.0)
    assert [e.foreign for e in _heard(watcher)] == ["not a GPU of this node"]
    _gpu(root, "0000:52:00")
    watcher.devices = daemon.read_devices(str(root))  # what a rescan does
    watcher._kernel_record(line, 4.0)
    assert [e.foreign for e in _heard(watcher)] == [""]


def test_a_repeat_is_said_once_per_incident(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    for _ in range(4):
        watcher.handle(_xid(13, clock))
        clock.now += 1
    said = watcher.err.getvalue()  # type: ignore[attr-defined]
    assert said.count("heard again, same incident") == 1
    assert watcher.incidents.duplicates == 3


def test_journal_reason_only_for_a_drain_or_an_eviction(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(13, clock))
    watcher.handle(_xid(79, clock))
    record, evict = _journal(tmp_path)
    assert record["reason"] is None
    assert evict["reason"] == "burnin: GPU-04 gpu3 Xid 79 (GPU has fallen off the bus)"


def test_in_a_dry_run_a_repeat_is_the_same_incident_whatever_slurm_says(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"]), Clock()  # the node stays in the pool: a dry run drains nothing
    watcher, _ = _watcher(tmp_path, slurm, clock, dry_run=True)
    assert watcher.handle(_xid(79, clock)) is not None
    clock.now += 1
    assert watcher.handle(_xid(79, clock)) is None
    assert slurm.calls == []


def test_a_repeat_of_a_failed_eviction_waits_for_the_retry(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"], fail={"scontrol --oneliner"}), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(79, clock))
    calls = len(slurm.calls)
    clock.now += 0.5
    assert watcher.handle(_xid(79, clock, "nvml")) is None  # the retry schedule acts, not the repeat
    assert len(slurm.calls) == calls and len(watcher._retries) == 1


class UnreadableSlurm(FakeSlurm):
    """Slurm whose node state cannot be read at all once ``broken`` (the client raises)."""

    broken: bool = False

    def run(self, argv, *, timeout=10.0):  # type: ignore[no-untyped-def]
        if self.broken and list(argv[:2]) == ["scontrol", "--oneliner"]:
            raise RuntimeError("slurm client crashed")
        return super().run(argv, timeout=timeout)


def test_a_repeat_while_slurm_is_unreadable_is_the_same_incident(tmp_path: Path) -> None:
    slurm, clock = UnreadableSlurm(jobs=["41"]), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    assert watcher.handle(_xid(79, clock)) is not None
    slurm.broken = True
    clock.now += 1
    assert watcher.handle(_xid(79, clock)) is None
    assert slurm.commands().count("scontrol requeue") == 1


def test_a_retry_is_due_at_its_time_exactly_and_runs_once(tmp_path: Path) -> None:
    slurm, clock = FakeSlurm(jobs=["41"], fail={"scontrol --oneliner"}), Clock()
    watcher, _ = _watcher(tmp_path, slurm, clock)
    watcher.handle(_xid(79, clock))
    (retry,) = watcher._retries
    watcher._retry_due(retry.due)
    assert [e.get("retry") for e in _journal(tmp_path)] == [None, 1]
    assert [r.attempts for r in watcher._retries] == [2]


@pytest.mark.parametrize(("gpu", "nvml"), [(True, False), (False, True)])
def test_no_gpu_warning_only_when_neither_sysfs_nor_nvml_can_name_one(tmp_path: Path, gpu: bool,
                                                                     nvml: bool) -> None:
    root = tmp_path / "root"
    root.mkdir()
    if gpu:
        _gpu(root, "0000:1b:00")
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=nvml,
                         root=str(root), dry_run=True)
    watcher = Watcher(config, out=io.StringIO(), err=io.StringIO())
    stop = threading.Event()
    stop.set()
    assert watcher.run(stop) == 0
    said = watcher.err.getvalue()  # type: ignore[attr-defined]
    assert "no GPU listed" not in said and "watching (kernel log none;" in said


@pytest.mark.proc
def test_the_fallback_probe_reports_a_check_when_it_starts_failing_and_runs_when_due(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real fast probe, in-process, on a simulated node (its environment: the node's tools and tree)."""
    from burnin.sim import apply_fault, build_node
    from burnin.topology import find_topology

    node = build_node(tmp_path / "node", find_topology("hgx-h100-8gpu"), "sim01")
    for name, value in node.environment().items():
        monkeypatch.setenv(name, value)
    config = WatchConfig(node="sim01", state_dir=tmp_path / "state", kernel_log=None, use_nvml=False,
                         root=str(node.root), dry_run=True, probe_interval=60.0)
    watcher = Watcher(config, out=io.StringIO(), err=io.StringIO())
    assert watcher._maybe_probe(99.0, 100.0) == 100.0 and watcher.probes == 0  # not due yet
    assert watcher._maybe_probe(100.0, 100.0) == 160.0 and watcher.probes == 1  # due: a healthy node, no event
    apply_fault(node.dir, "numa-balancing-on")
    event = watcher.probe_once()
    assert event is not None and event.checks == ("TOP-08",) and event.kind is Kind.PROBE_FAIL
    assert event.text == "kernel.numa_balancing=1 (expected kernel.numa_balancing=0)"
    assert watcher.probe_once() is None  # still failing, the same checks: said once

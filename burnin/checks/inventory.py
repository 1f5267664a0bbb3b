"""Inventory and configuration checks (INV): what is installed and how it is set."""

from __future__ import annotations

from burnin.checks.base import (
    GPU_COUNT,
    GPU_MEMORY_MIB,
    bad,
    check,
    gpu_subject,
    judge,
    measured_count,
    ok,
    per_gpu,
    unknown,
)
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts, GpuFacts
from burnin.facts.gpu import (
    ECC_MODE,
    ECC_MODE_PENDING,
    FABRIC_STATE,
    FABRIC_STATUS,
    MIG_MODE,
    MIG_MODE_PENDING,
    PERSISTENCE,
)
from burnin.text import printable
from burnin.topology.model import Topology

FABRIC_STATE_COMPLETED = 3
NVML_SUCCESS = 0
MIG_DISABLED = 0


@check("INV-01", "GPU count, model and memory", sources=("nvml",), references=("gpu_memory_mib",))
def gpu_inventory(facts: Facts, topology: Topology) -> Verdict:
    spec = topology.gpus
    expected = f"{spec.count} x {spec.model}"
    nvml = facts.nvml()
    findings: list[Finding] = []
    count = measured_count(nvml.get("device_count"), "node", "NVML device count", GPU_COUNT)
    gpus = nvml.get("gpus")
    if not isinstance(gpus, list):
        raise Unmeasurable(f"NVML counted {count} GPUs but listed none")
    if len(gpus) != count:
        findings.append(unknown("node", f"NVML counted {count} GPUs but listed {len(gpus)}"))
    slots = {d.bus_id: d for d in spec.devices}
    seen_bus = {g.get("bus_id") for g in gpus if isinstance(g, dict) and g.get("bus_id")}
    missing = [d for d in spec.devices if d.bus_id not in seen_bus]
    if count != spec.count:
        where = ", ".join(f"gpu{d.index} ({d.bus_id})" for d in missing[: spec.count - count])
        findings.append(bad("node", f"{count} GPUs" + (f", missing {where}" if where else ""),
                            f"{spec.count} GPUs"))
    memory_ref = reference(topology, "gpu_memory_mib")
    for gpu in gpus:
        if not isinstance(gpu, dict):
            findings.append(unknown("node", f"NVML GPU entry unreadable: {gpu!r:.40}"))
            continue
        subject = gpu_subject(GpuFacts(gpu), topology)
        errors = gpu.get("errors") or {}
        if gpu.get("lost"):
            findings.append(bad(subject, "lost (NVML_ERROR_GPU_IS_LOST)", "present and answering"))
            continue
        if "handle" in errors:
            findings.append(unknown(subject, f"handle: {errors['handle']}"))
            continue
        name = gpu.get("name")
        if name is None:
            findings.append(unknown(subject, f"name: {errors.get('name', 'not reported')}"))
            continue
        if name != spec.model:
            findings.append(bad(subject, f"model {name!r}", spec.model))
            continue
        bus = gpu.get("bus_id")
        if bus is None:
            findings.append(unknown(subject, f"bus id: {errors.get('pci', 'not reported')}"))
            continue
        if bus not in slots:
            findings.append(bad(subject, f"at {bus}, not a GPU slot of the topology",
                                f"bus ids {', '.join(sorted(slots))}"))
            continue
        try:
            memory = measured_count(gpu.get("memory_total_mib"), subject, "memory (MiB)", GPU_MEMORY_MIB)
        except Unmeasurable as exc:
            note = errors.get("memory") if gpu.get("memory_total_mib") is None else None
            findings.append(unknown(subject, f"memory: {note}" if note else exc.reason))
            continue
        if not memory_ref.admits(memory):
            findings.append(bad(subject, f"memory {memory} MiB", memory_ref.describe()))
        else:
            findings.append(ok(subject, f"{name}", spec.model))
    return roll_up("INV-01", facts.node, findings, expected=expected, healthy=f"{count} x {spec.model}")


@check("INV-03", "Driver version consistent (NVML, kernel module, topology)", sources=("nvml", "kernel"))
def driver_version(facts: Facts, topology: Topology) -> Verdict:
    want = topology.host.driver_version
    nvml_version = facts.nvml().get("driver_version")
    kernel = facts.kernel()
    module_version = kernel.get("nvidia_module_version")
    findings: list[Finding] = []
    if nvml_version is None:
        findings.append(unknown("nvml", "NVML reported no driver version", want))
    else:
        findings.append(judge("nvml", nvml_version == want, f"NVML driver {nvml_version}", want))
    if module_version is None:
        findings.append(unknown("kernel-module", "/sys/module/nvidia/version not readable", want))
    elif nvml_version is None:
        findings.append(judge("kernel-module", module_version == want, f"kernel module {module_version}", want))
    else:
        findings.append(judge("kernel-module", module_version == nvml_version,
                              f"kernel module {module_version} vs NVML {nvml_version}", want))
    return roll_up("INV-03", facts.node, findings, expected=f"driver {want} everywhere",
                   healthy=f"driver {want}")


@check("INV-04", "Fabric Manager running and NVSwitch fabric registered",
       sources=("fabricmanager", "nvml", "dmesg"))
def fabric_manager(facts: Facts, topology: Topology) -> Verdict:
    expected = "nvidia-fabricmanager active, fabric state Completed/Success on every GPU, no fatal NVSwitch SXid"
    if not topology.host.fabric_manager:
        return roll_up("INV-04", facts.node, [ok("node", "not required by topology", "n/a")],
                       expected="not required")
    findings: list[Finding] = []
    record = facts.command_record("fabricmanager")
    if record is None or record.get("error"):
        reason = (record or {}).get("error") or "systemctl is-active was not collected"
        findings.append(unknown("fabricmanager", str(reason)))
    else:
        state = (record.get("stdout") or "").strip() or f"exit {record.get('exit_status')}"
        findings.append(judge("fabricmanager", state == "active", f"service {state}", "active"))

    def fabric(subject: str, gpu: GpuFacts) -> Finding:
        state = gpu.measured(FABRIC_STATE, subject)
        status = gpu.measured(FABRIC_STATUS, subject)
        healthy = state == FABRIC_STATE_COMPLETED and status == NVML_SUCCESS
        names = {0: "NotSupported", 1: "NotStarted", 2: "InProgress", 3: "Completed"}
        return judge(subject, healthy, f"fabric {names.get(state, state)}/status {status}", "Completed/0")

    findings += per_gpu(facts, topology, fabric)
    fatal, non_fatal = sxid_findings(facts)
    findings += fatal
    noted = f" ({non_fatal} non-fatal SXid line(s))" if non_fatal else ""
    return roll_up("INV-04", facts.node, findings, expected=expected,
                   healthy=f"fabric manager active, fabric Completed on all GPUs, no fatal SXid{noted}")


def sxid_findings(facts: Facts) -> tuple[list[Finding], int]:
    """NVSwitch errors in the kernel log since boot: a failing finding per fatal SXid, and how many were non-fatal.

    The driver prints one headline per error (``SXid (PCI:…): 24007, Fatal, <text>``) and continuation lines
    (``…: 24007, Severity 0 Engine instance …``, ``Data {…}``), which carry no severity and are not counted.
    """
    from burnin.checks.gpu import kernel_log_report

    report = kernel_log_report(facts)
    want = "no fatal NVSwitch SXid since boot"
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()
    non_fatal = 0
    for event in report.sxid_events:
        severity = (event.severity or "").lower()
        if severity == "non-fatal":
            non_fatal += 1
        if severity != "fatal":
            continue
        subject = event.device or f"NVSwitch PCI {event.pci}"
        if (subject, event.sxid) in seen:
            continue
        seen.add((subject, event.sxid))
        findings.append(bad(subject, printable(f"SXid {event.sxid} Fatal: {event.text}", limit=160), want))
    return findings, non_fatal


@check("INV-05", "GPUDirect RDMA peer-memory module loaded", sources=("kernel",))
def peermem(facts: Facts, topology: Topology) -> Verdict:
    if not topology.host.peermem:
        return roll_up("INV-05", facts.node, [ok("node", "not required", "n/a")], expected="not required")
    modules = facts.kernel().get("modules")
    if not isinstance(modules, dict) or not {"nvidia_peermem", "nv_peer_mem"} & set(modules):
        raise Unmeasurable("/sys/module: whether nvidia_peermem is loaded was not read")
    loaded = modules.get("nvidia_peermem") is True or modules.get("nv_peer_mem") is True
    finding = judge("node", loaded, "nvidia_peermem loaded" if loaded else "nvidia_peermem not loaded",
                    "nvidia_peermem loaded")
    return roll_up("INV-05", facts.node, [finding], expected="nvidia_peermem loaded")


@check("INV-06", "Persistence mode on", sources=("nvml",))
def persistence(facts: Facts, topology: Topology) -> Verdict:
    want = topology.host.persistence
    text = "on" if want else "off"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        mode = gpu.measured(PERSISTENCE, subject)
        return judge(subject, mode == want, f"persistence {'on' if mode else 'off'}", text)

    return roll_up("INV-06", facts.node, per_gpu(facts, topology, judge_gpu), expected=f"persistence {text}",
                   healthy=f"persistence {text} on all GPUs")


@check("INV-07", "MIG disabled (current and pending)", sources=("nvml",))
def mig(facts: Facts, topology: Topology) -> Verdict:
    want = 1 if topology.host.mig else MIG_DISABLED
    want_text = "enabled" if want else "disabled"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        current = gpu.measured(MIG_MODE, subject)
        pending = gpu.measured(MIG_MODE_PENDING, subject)
        names = {0: "disabled", 1: "enabled"}
        text = f"MIG {names.get(current, current)}/pending {names.get(pending, pending)}"
        return judge(subject, current == want and pending == want, text, f"MIG {want_text}")

    return roll_up("INV-07", facts.node, per_gpu(facts, topology, judge_gpu), expected=f"MIG {want_text}",
                   healthy=f"MIG {want_text} on all GPUs")


@check("INV-08", "ECC enabled (current and pending)", sources=("nvml",))
def ecc_mode(facts: Facts, topology: Topology) -> Verdict:
    want = topology.host.ecc
    want_text = "on" if want else "off"

    def judge_gpu(subject: str, gpu: GpuFacts) -> Finding:
        current = gpu.measured(ECC_MODE, subject)
        pending = gpu.measured(ECC_MODE_PENDING, subject)
        text = f"ECC {'on' if current else 'off'}/pending {'on' if pending else 'off'}"
        return judge(subject, current == want and pending == want, text, f"ECC {want_text}")

    return roll_up("INV-08", facts.node, per_gpu(facts, topology, judge_gpu), expected=f"ECC {want_text}",
                   healthy=f"ECC {want_text} on all GPUs")

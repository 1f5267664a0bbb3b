"""INV-02 GPU firmware: VBIOS and InfoROM versions alike on every GPU, and the topology's where it names them.

Mixed firmware after an RMA swap is a known cause of NVLink and fabric-manager
errors (check-catalog INV-02). A GPU is compared with the topology's qualified
version (``gpus.firmware``) when the topology names one, else with the version
most GPUs of the node run; when no version has a majority, every group is named.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from burnin.checks.base import bad, check, iter_gpus, ok, unknown, unlisted_gpus
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts, GpuFacts
from burnin.text import printable
from burnin.topology.model import Topology

NOT_SUPPORTED = "NVML_ERROR_NOT_SUPPORTED"
NOT_REPORTED = "N/A"
VERSION_SHOWN = 40
"""Characters of a node-reported version shown in a reason."""


@dataclass(frozen=True, slots=True)
class FirmwareField:
    label: str
    path: tuple[str, ...]
    """Where the collector puts it in a GPU's NVML facts; its error is filed under ``'_'.join(path)``."""
    topology_key: str | None
    """The attribute of ``topology.gpus.firmware`` that names the expected version (None: consistency only)."""
    optional: bool = False
    """NVML_ERROR_NOT_SUPPORTED reads as N/A (as nvidia-smi prints it): an InfoROM object a GPU does not have."""


FIELDS = (
    FirmwareField("VBIOS", ("vbios",), "vbios"),
    FirmwareField("InfoROM", ("inforom", "image"), "inforom_image"),
    FirmwareField("InfoROM OEM object", ("inforom", "oem"), None, optional=True),
    FirmwareField("InfoROM ECC object", ("inforom", "ecc"), None, optional=True),
    FirmwareField("InfoROM power object", ("inforom", "power"), None, optional=True),
)


def _read(gpu: GpuFacts, field: FirmwareField) -> str:
    """The version NVML reported for ``field``; Unmeasurable when it gave none."""
    value = gpu.get(*field.path)
    error = gpu.errors.get("_".join(field.path))
    if value is None and field.optional and error == NOT_SUPPORTED:
        return NOT_REPORTED
    if value is None:
        raise Unmeasurable(f"{field.label} version: {error or 'not reported'}")
    if not isinstance(value, str) or not value.strip():
        raise Unmeasurable(f"{field.label} version {printable(repr(value), limit=VERSION_SHOWN)} is not a version")
    return value


def _fold(subjects: list[str]) -> str:
    """gpu0, gpu1, gpu2, gpu4 .. gpu7 -> ``gpu0-2,4-7``; a subject without a number is named as it is."""
    runs: list[list[int]] = []
    for index in sorted(_index(s) for s in subjects if _index(s) >= 0):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    folded = ["gpu" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)] if runs else []
    return ",".join(folded + sorted(s for s in subjects if _index(s) < 0))


def _index(subject: str) -> int:
    return int(subject[3:]) if subject.startswith("gpu") and subject[3:].isdigit() else -1


def _shown(value: str) -> str:
    return printable(value, limit=VERSION_SHOWN)


def _wanted(topology: Topology, field: FirmwareField) -> str | None:
    firmware = topology.gpus.firmware
    if firmware is None or field.topology_key is None:
        return None
    value: str | None = getattr(firmware, field.topology_key)
    return value


def _judge_field(field: FirmwareField, read: dict[str, str], topology: Topology
                 ) -> tuple[dict[str, str], str]:
    """(deviating GPU -> its version, what was expected) for one field over the GPUs that reported it."""
    wanted = _wanted(topology, field)
    on: dict[str, list[str]] = {}
    for subject, value in read.items():
        on.setdefault(value, []).append(subject)
    if wanted is not None:
        alike = f" as on {_fold(on[wanted])} and" if wanted in on else ""
        expected = f"{field.label} {_shown(wanted)}{alike} per topology {topology.name}"
        return {s: v for s, v in read.items() if v != wanted}, expected
    counts = Counter(read.values()).most_common()
    if len(counts) <= 1:
        return {}, f"one {field.label} on every GPU"
    (top, top_count), (_, second_count) = counts[0], counts[1]
    if top_count == second_count:  # no majority: the node is mixed, but no one GPU is the odd one out
        return dict(read), f"one {field.label} on every GPU (no version runs on most of them)"
    named = "" if field.topology_key is None else f"; topology {topology.name} names no {field.label}"
    return {s: v for s, v in read.items() if v != top}, f"{field.label} {_shown(top)} as on {_fold(on[top])}{named}"


def _consistency_note(topology: Topology) -> str:
    """What the healthy reason says about the expected versions the topology does not name."""
    unnamed = [f.label for f in FIELDS if f.topology_key is not None and _wanted(topology, f) is None]
    if not unnamed:
        return f"as topology {topology.name} names"
    if len(unnamed) == len([f for f in FIELDS if f.topology_key is not None]):
        return f"alike; topology {topology.name} names no expected versions: consistency only"
    return f"alike; topology {topology.name} names no {' or '.join(unnamed)}: consistency only for it"


@check("INV-02", "GPU firmware (VBIOS, InfoROM) alike on every GPU and as qualified", sources=("nvml",))
def gpu_firmware(facts: Facts, topology: Topology) -> Verdict:
    findings: list[Finding] = []
    versions: dict[str, dict[str, str]] = {}  # GPU -> field label -> version, for GPUs that reported them all
    for subject, gpu, why in iter_gpus(facts, topology):
        if gpu is None:
            findings.append(unknown(subject, why))
            continue
        try:
            versions[subject] = {field.label: _read(gpu, field) for field in FIELDS}
        except Unmeasurable as exc:
            findings.append(unknown(subject, exc.reason))
    findings += unlisted_gpus(facts, topology)

    deviations: dict[str, list[str]] = {}  # GPU -> "VBIOS 96.00.74.00.0D", ...
    expectations: list[str] = []
    for field in FIELDS:
        read = {subject: got[field.label] for subject, got in versions.items()}
        if not read:
            continue
        odd, expected = _judge_field(field, read, topology)
        for subject, value in odd.items():
            deviations.setdefault(subject, []).append(f"{field.label} {_shown(value)}")
        if odd:
            expectations.append(expected)
    # GPUs that deviate alike are named together: gpu0-7 when the whole node runs an unqualified VBIOS.
    alike: dict[str, list[str]] = {}
    for subject, texts in deviations.items():
        alike.setdefault(", ".join(texts), []).append(subject)
    findings += [bad(_fold(subjects), text, "; ".join(expectations)) for text, subjects in alike.items()]
    findings += [ok(subject, "firmware as expected", "") for subject in versions if subject not in deviations]

    if any(f.status is Status.FAIL for f in findings):
        return roll_up("INV-02", facts.node, findings, expected="; ".join(expectations))
    sample = next(iter(versions.values()), None)
    shown = "" if sample is None else (
        f"VBIOS {_shown(sample['VBIOS'])}, InfoROM {_shown(sample['InfoROM'])} (objects OEM "
        f"{_shown(sample['InfoROM OEM object'])}, ECC {_shown(sample['InfoROM ECC object'])}, power "
        f"{_shown(sample['InfoROM power object'])}) on all {len(versions)} GPUs, {_consistency_note(topology)}")
    firmware = topology.gpus.firmware
    expected = "the same VBIOS and InfoROM on every GPU" + (
        f", VBIOS {firmware.vbios or 'any'} and InfoROM {firmware.inforom_image or 'any'} per topology"
        if firmware is not None else "")
    return roll_up("INV-02", facts.node, findings, expected=expected, healthy=shown)

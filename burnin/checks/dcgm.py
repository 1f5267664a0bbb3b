"""DCGM checks (check-catalog GPU-12, GPU-13): what NVIDIA's own GPU manager says about the node.

- GPU-12 reads ``dcgmi health -c`` (the collector's fast ``dcgmi-health`` source, also run by the probe):
  DCGM's passive health watches, set once at boot with ``dcgmi health -s a``. Pass: ``Overall Health``
  ``Healthy``; a ``Warning`` or ``Failure`` fails the check, naming the entity, the health system and DCGM's
  message (catalog: "Pass: overall Healthy").
- GPU-13 reads ``dcgmi diag -r 1`` (the ``dcgmi-diag`` source, in ``burnin run`` only: it takes seconds and
  wants idle GPUs). Level 1 runs DCGM's deployment tests. Pass: every test ``Pass``. A ``Fail`` fails the
  check, naming the test, the GPU (from the per-GPU result, else from DCGM's message) and DCGM's message.

Decisions:

- ``Warn`` in a deployment test is *incomplete*, not fail. DCGM's software plugin warns for conditions that
  stop it from vouching for the node, none of them a hardware signal: the CUDA main or toolkit libraries not
  found, fewer ``/dev/nvidia*`` nodes than GPUs, a CUDA performance-limiting environment variable, a
  graphics process on a GPU, persistence mode off (NVIDIA/DCGM ``nvvs/plugin_src/software/Software.cpp``:
  ``checkLibraries``, ``checkPermissions``, ``checkForBadEnvVaribles``, ``checkForGraphicsProcesses``,
  ``checkPersistenceMode``). Failing the node would blame the hardware for the environment; passing it would
  admit a node DCGM could not check. Incomplete keeps it out with DCGM's words as the cause.
- ``Skip`` passes only for the test DCGM skips where it does not apply: ``Inforom``, skipped when the GPU does
  not report InfoROM validity (``checkInforom``: ``DCGM_ST_NOT_SUPPORTED``). Any other skip is incomplete
  (``Persistence Mode`` skips only when someone passed ``require_persistence_mode=false``, which this check
  never does).

Where DCGM is absent: a node type says so in its topology (``dcgm: {required: false}``), and both checks are
*not applicable* with that reason (:func:`dcgm_not_applicable`). Where the topology expects DCGM (the default),
``dcgmi`` missing, ``nv-hostengine`` not answering, health watches never set, or output that cannot be read
make the check *incomplete* with that cause: fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from burnin.checks.base import bad, check, declare_applicability, ok, unknown
from burnin.errors import ParseError
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts
from burnin.parsers.dcgmi_errors import command_errors
from burnin.parsers.dcgmi_health import DcgmiHealth, parse_dcgmi_health
from burnin.text import printable
from burnin.topology.model import Topology

if TYPE_CHECKING:  # the diag parser only where a diag ran: the health probe never runs one
    from burnin.parsers.dcgmi import DcgmiDiag, DcgmiTest

DCGM_CHECKS = ("GPU-12", "GPU-13")
HEALTH_SOURCE = "dcgmi-health"
DIAG_SOURCE = "dcgmi-diag"
HEALTH_COMMAND = "dcgmi health -c"
DIAG_COMMAND = "dcgmi diag -r 1"
HEALTH_EXPECTED = "DCGM Overall Health Healthy (dcgmi health -c)"
DIAG_EXPECTED = "every DCGM deployment test Pass (dcgmi diag -r 1)"

#: Deployment tests DCGM skips where they do not apply, and why (a skip of any other test is not a pass).
NOT_APPLICABLE_SKIPS: dict[str, str] = {
    "Inforom": "DCGM skips it where the GPU does not report InfoROM validity",
}
#: What dcgmi prints when nv-hostengine does not answer (NVIDIA/DCGM dcgmi/Command.cpp), lower case.
_HOSTENGINE_DOWN = ("unable to connect to host engine", "unable to establish a connection",
                    "host engine connection invalid")
_WATCHES_OFF = "health watches not enabled"
_GPU_IN_MESSAGE = re.compile(r"\bGPU ?(\d{1,4})\b")
_MESSAGE_LIMIT = 300


def dcgm_not_applicable(topology: Topology) -> str | None:
    """Why GPU-12/13 do not apply to this node type (None: they do; the topology expects DCGM unless it says not)."""
    if not topology.dcgm.required:
        return f"topology {topology.name} declares no DCGM (dcgm: {{required: false}})"
    return None


declare_applicability(DCGM_CHECKS, dcgm_not_applicable)


def _text(value: object) -> str:
    return printable(" ".join(str(value).split()), limit=_MESSAGE_LIMIT)


def _dcgmi_stdout(facts: Facts, topology: Topology, source: str, command: str) -> tuple[str, int | None]:
    """What ``command`` printed and its exit status; Unmeasurable with the cause when DCGM could not answer."""
    reason = dcgm_not_applicable(topology)
    if reason is not None:
        raise Unmeasurable(reason)  # called anyway (the suite and the probe stand aside first)
    if facts.unreachable:
        raise Unmeasurable(facts.unreachable)
    record = facts.command_record(source)
    if not isinstance(record, dict):
        status = facts.data.get("sources", {}).get(source)
        error = status.get("error") if isinstance(status, dict) else None
        raise Unmeasurable(f"{source}: {_text(error)}" if error else f"source {source!r} was not collected")
    error = record.get("error")
    if error:
        if "command not found" in str(error):
            raise Unmeasurable(f"dcgmi is not installed ({_text(error)}); the topology expects DCGM")
        raise Unmeasurable(f"{command}: {_text(error)}")
    stdout = record.get("stdout")
    if not isinstance(stdout, str):
        raise Unmeasurable(f"{command}: no output recorded")
    for line in command_errors(stdout):
        lowered = line.lower()
        if any(marker in lowered for marker in _HOSTENGINE_DOWN):
            raise Unmeasurable(f"nv-hostengine is not answering ({command}: Error: {_text(line)})")
    status = record.get("exit_status")
    if not stdout.strip():
        tail = str(record.get("stderr") or "").strip().splitlines()[-1:]
        detail = f": {_text(tail[0])}" if tail else ""
        raise Unmeasurable(f"{command} printed nothing (exit status {status}){detail}")
    return stdout, status if isinstance(status, int) else None


# ------------------------------------------------------------------ GPU-12


def _entity_subject(group: str, entity: str) -> str:
    """``gpu3`` for DCGM's GPU 3 (DCGM numbers GPUs as NVML does), ``nvswitch1`` for its Switch 1."""
    names = {"gpu": "gpu", "switch": "nvswitch", "nvswitch": "nvswitch"}
    return f"{names.get(group.lower(), group.lower())}{entity}"


def health_findings(report: DcgmiHealth) -> list[Finding]:
    """One finding per incident DCGM lists, and the overall verdict when it lists none."""
    findings: list[Finding] = []
    for incident in report.incidents:
        subject = _entity_subject(incident.entity_group, incident.entity_id)
        measured = f"{incident.system} {incident.health}: {_text(incident.message) or 'no message'}"
        if incident.health in ("Warning", "Failure"):
            findings.append(bad(subject, measured, HEALTH_EXPECTED))
        elif incident.health == "Healthy":
            findings.append(ok(subject, measured, HEALTH_EXPECTED))
        else:
            findings.append(unknown(subject, f"DCGM reports {measured}", HEALTH_EXPECTED))
    overall = _text(report.overall)
    if overall == "Healthy":
        findings.append(ok("node", "Overall Health Healthy", HEALTH_EXPECTED))
    elif overall in ("Warning", "Failure"):
        if not any(f.subject != "node" for f in findings):
            findings.append(bad("node", f"Overall Health {overall} (no incident listed)", HEALTH_EXPECTED))
    else:
        findings.append(unknown("node", f"DCGM reports Overall Health {overall!r}", HEALTH_EXPECTED))
    if report.truncated:
        findings.append(unknown("node", f"{HEALTH_COMMAND} output cut short (no closing border)", HEALTH_EXPECTED))
    return findings


@check("GPU-12", "DCGM passive health: Overall Health Healthy", sources=(HEALTH_SOURCE,))
def dcgm_health(facts: Facts, topology: Topology) -> Verdict:
    stdout, status = _dcgmi_stdout(facts, topology, HEALTH_SOURCE, HEALTH_COMMAND)
    errors = command_errors(stdout)
    if any(_WATCHES_OFF in line.lower() for line in errors):
        raise Unmeasurable("DCGM health watches are not set (expected `dcgmi health -s a` at boot; "
                           f"{HEALTH_COMMAND}: Error: {_text(errors[0])})")
    if errors:
        raise Unmeasurable(f"{HEALTH_COMMAND} failed: Error: {_text('; '.join(errors))}")
    try:
        report = parse_dcgmi_health(stdout)
    except ParseError as exc:
        raise Unmeasurable(f"{HEALTH_COMMAND} output unreadable: {_text(exc)}") from None
    findings = health_findings(report)
    if status not in (0, None):
        findings.append(unknown("node", f"{HEALTH_COMMAND} exited {status} after its report", HEALTH_EXPECTED))
    return roll_up("GPU-12", facts.node, findings, expected=HEALTH_EXPECTED, healthy="Overall Health Healthy")


# ------------------------------------------------------------------ GPU-13


def _messages(test: DcgmiTest, gpu: int | None = None) -> str:
    """DCGM's error and warning texts of a test (those naming ``gpu`` when some do), escaped, joined."""
    texts = [d.text for d in test.details if d.kind in ("Error", "Warning")]
    if gpu is not None:
        naming = [t for t in texts if gpu in _gpus_named(t)]
        texts = naming or texts
    return _text("; ".join(texts)) or "no message"


def _gpus_named(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in _GPU_IN_MESSAGE.findall(text))


def _subjects(test: DcgmiTest, gpus: tuple[int, ...]) -> list[tuple[str, int | None]]:
    """Who a result is about: its GPUs as DCGM listed them, else the GPUs its messages name, else the node."""
    if not gpus:
        named = {g for d in test.details if d.kind in ("Error", "Warning") for g in _gpus_named(d.text)}
        gpus = tuple(sorted(named))
    return [(f"gpu{g}", g) for g in gpus] or [("node", None)]


def _outcomes(test: DcgmiTest) -> Iterable[tuple[str, tuple[int, ...]]]:
    """(result, GPUs) as printed: per GPU where DCGM lists them, and the test's own result when no GPU carries it."""
    yield from test.gpu_results.items()
    if test.result not in test.gpu_results:
        yield test.result, ()


def judge_test(test: DcgmiTest) -> list[Finding]:
    """The findings of one diag test: Pass is ok, Fail bad, Warn and any unexplained Skip not measured."""
    findings: list[Finding] = []
    name = _text(test.name)
    for result, gpus in _outcomes(test):
        if result == "Pass":
            findings.append(ok("node", f"{name} Pass", DIAG_EXPECTED))
            continue
        if result == "Skip" and test.name in NOT_APPLICABLE_SKIPS:
            findings.append(ok("node", f"{name} Skip ({NOT_APPLICABLE_SKIPS[test.name]})", DIAG_EXPECTED))
            continue
        for subject, gpu in _subjects(test, gpus):
            message = _messages(test, gpu)
            if result == "Fail":
                findings.append(bad(subject, f"{name} Fail: {message}", DIAG_EXPECTED))
            elif result == "Warn":
                findings.append(unknown(subject, f"DCGM deployment test {name} warned, not a hardware verdict: "
                                                 f"{message}", DIAG_EXPECTED))
            elif result == "Skip":
                findings.append(unknown(subject, f"DCGM skipped {name}: {message}", DIAG_EXPECTED))
            else:
                findings.append(unknown(subject, f"DCGM test {name} result {_text(result)!r}", DIAG_EXPECTED))
    return findings


def diag_findings(diag: DcgmiDiag, command_error_lines: tuple[str, ...] = ()) -> list[Finding]:
    findings = [f for test in diag.tests for f in judge_test(test)]
    if not diag.tests:
        findings.append(unknown("node", f"{DIAG_COMMAND} printed no test result", DIAG_EXPECTED))
    attached = {d.text for test in diag.tests for d in test.details}
    for error in diag.errors:
        if error not in attached:
            findings.append(unknown("node", f"DCGM error outside any test: {_text(error)}", DIAG_EXPECTED))
    for line in command_error_lines:
        findings.append(unknown("node", f"{DIAG_COMMAND}: Error: {_text(line)}", DIAG_EXPECTED))
    if diag.truncated:
        findings.append(unknown("node", f"{DIAG_COMMAND} result table cut short (no closing border)", DIAG_EXPECTED))
    return findings


@check("GPU-13", "DCGM quick diag (dcgmi diag -r 1): every deployment test passes", sources=(DIAG_SOURCE,),
       fast=False)
def dcgm_quick_diag(facts: Facts, topology: Topology) -> Verdict:
    from burnin.parsers.dcgmi import parse_dcgmi_diag

    stdout, status = _dcgmi_stdout(facts, topology, DIAG_SOURCE, DIAG_COMMAND)
    errors = command_errors(stdout)
    try:
        diag = parse_dcgmi_diag(stdout)
    except ParseError as exc:
        if errors:
            raise Unmeasurable(f"{DIAG_COMMAND} failed: Error: {_text('; '.join(errors))}") from None
        raise Unmeasurable(f"{DIAG_COMMAND} output unreadable: {_text(exc)}") from None
    findings = diag_findings(diag, errors)
    passed = [f for f in findings if f.status is Status.PASS]
    if status not in (0, None) and len(passed) == len(findings):
        findings.append(unknown("node", f"{DIAG_COMMAND} exited {status} though every test passed", DIAG_EXPECTED))
    count = len(diag.tests)
    return roll_up("GPU-13", facts.node, findings, expected=DIAG_EXPECTED,
                   healthy=f"{count} deployment test{'s' if count != 1 else ''} Pass")

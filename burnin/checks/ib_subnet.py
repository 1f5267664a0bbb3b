"""IB-05 subnet manager reachability and addressing (check-catalog 5).

A subnet manager (SM) sweeps the fabric, gives every InfiniBand port its LID and
tells it where the SM lives. A compute port that no SM has swept has no LID
(sysfs ``ports/1/lid`` 0x0) and no SM (``sm_lid`` 0x0) and stays in INIT; two
SM LIDs among the compute ports of one node mean split subnets or a rogue SM.
Pass: every compute InfiniBand port has ``lid != 0x0`` and ``sm_lid != 0x0``,
and every one of them names the same SM LID.

Each port is judged by its measured link layer (collector source ``infiniband``,
sysfs only, so the check is fast and in the probe):

- InfiniBand: judged;
- Ethernet on an HCA the topology declares Ethernet (a RoCE compute HCA): RoCE
  has no subnet manager, so the port is not judged, and the verdict names it;
- Ethernet on an HCA the topology declares InfiniBand: incomplete (IB-03 fails
  the port for its link layer);
- no physical link (``phys_state`` not LinkUp): incomplete, since no SM can
  reach a port without a link (IB-01 fails it).

A topology whose compute HCAs are all Ethernet declares IB-05 not applicable.
``sminfo`` (which asks the SM itself over the fabric) is not run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from burnin.checks.base import bad, check, declare_applicability, ok, per_hca
from burnin.evaluate.verdict import Finding, Status, Unmeasurable, Verdict, incomplete, roll_up
from burnin.facts import Facts, HcaFacts
from burnin.text import printable
from burnin.topology.model import Hca, Topology

CHECK_ID = "IB-05"
ONE_SM = "one subnet manager for all compute ports"
EXPECTED = "a subnet manager: LID != 0, SM LID != 0 on every compute InfiniBand port, " + ONE_SM
NOT_JUDGED = "Ethernet (RoCE): no subnet manager, not judged"
_LID = re.compile(r"^0x([0-9a-fA-F]{1,4})$")  # drivers/infiniband/core/sysfs.c prints "0x%x"; a LID is 16 bits
_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def subnet_not_applicable(topology: Topology) -> str | None:
    """IB-05 does not apply where the topology declares every compute HCA Ethernet (RoCE: no subnet manager)."""
    compute = topology.compute_hcas
    if compute and all(hca.link_layer == "Ethernet" for hca in compute):
        return (f"topology {topology.name} declares every compute HCA Ethernet (RoCE): "
                "no InfiniBand subnet manager to reach")
    return None


declare_applicability((CHECK_ID,), subnet_not_applicable)


def sysfs_lid(value: object, what: str) -> int:
    """A LID as sysfs prints it (``0x1``); Unmeasurable when it is missing or not a 16-bit hex number."""
    if value is None:
        raise Unmeasurable(f"port 1 {what} not readable")
    match = _LID.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise Unmeasurable(f"port 1 {what} {printable(repr(value), limit=40)} is not a LID")
    return int(match.group(1), 16)


def fold_names(names: Iterable[str]) -> str:
    """``mlx5_0 .. mlx5_6`` -> ``mlx5_0..6``; ``mlx5_0, mlx5_2, mlx5_3`` -> ``mlx5_0,2..3``."""
    numbered: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        match = _NUMBERED.match(name)
        if match is None:
            plain.append(name)
        else:
            numbered.setdefault(match.group(1), []).append(int(match.group(2)))
    parts: list[str] = []
    for prefix, numbers in numbered.items():
        runs: list[list[int]] = []
        for number in sorted(set(numbers)):
            if runs and number == runs[-1][1] + 1:
                runs[-1][1] = number
            else:
                runs.append([number, number])
        parts.append(prefix + ",".join(str(a) if a == b else f"{a}..{b}" for a, b in runs))
    return ", ".join(parts + plain)


@check(CHECK_ID, "Subnet manager: every compute InfiniBand port has a LID and one SM", sources=("infiniband",))
def subnet_manager(facts: Facts, topology: Topology) -> Verdict:
    sm_of: dict[str, int] = {}  # swept port's HCA -> its SM LID, in topology order
    roce: list[str] = []

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        subject = f"{hca.name} port 1"
        port = data.measured_port()
        layer = port.get("link_layer")
        if layer not in ("InfiniBand", "Ethernet"):
            raise Unmeasurable(f"port 1 link_layer {printable(repr(layer), limit=40)} unreadable")
        if layer == "Ethernet":
            if hca.link_layer != "Ethernet":
                raise Unmeasurable(f"port 1 link layer Ethernet where topology {topology.name} declares "
                                   "InfiniBand: no subnet manager to judge (see IB-03)")
            roce.append(subject)
            return ok(subject, NOT_JUDGED, "")
        phys = port.get("phys_state")
        if not isinstance(phys, str) or not phys.strip():
            raise Unmeasurable(f"port 1 phys_state {printable(repr(phys), limit=40)} unreadable")
        if not phys.endswith("LinkUp"):
            raise Unmeasurable(f"port 1 {printable(phys, limit=40)}: no link for a subnet manager to reach "
                               "(see IB-01)")
        lid, sm_lid = sysfs_lid(port.get("lid"), "lid"), sysfs_lid(port.get("sm_lid"), "sm_lid")
        zero = [what for what, value in (("LID", lid), ("SM LID", sm_lid)) if value == 0]
        if zero:
            return bad(subject, ", ".join(f"{what} 0x0" for what in zero),
                       "a subnet manager: " + ", ".join(f"{what} != 0" for what in zero))
        sm_of[hca.name] = sm_lid
        return ok(subject, f"LID 0x{lid:x}, SM LID 0x{sm_lid:x}", EXPECTED)

    findings = per_hca(facts, topology.compute_hcas, judge_hca)
    by_sm: dict[int, list[str]] = {}
    for name, sm_lid in sm_of.items():
        by_sm.setdefault(sm_lid, []).append(name)
    if len(by_sm) > 1:
        split = ", ".join(f"{fold_names(names)} 0x{sm_lid:x}" for sm_lid, names in by_sm.items())
        findings.append(bad("SM LID", f"differs: {split}", ONE_SM))
    failed = [f.expected for f in findings if f.status is Status.FAIL]
    if failed:
        return roll_up(CHECK_ID, facts.node, findings, expected="; ".join(dict.fromkeys(failed)))
    if not sm_of and not any(f.status is Status.INCOMPLETE for f in findings):
        # Nothing judged (every compute port RoCE, or no compute HCA): never a pass.
        return incomplete(CHECK_ID, facts.node, "no compute InfiniBand port to judge"
                          + (f" ({', '.join(roce)}: {NOT_JUDGED})" if roce else ""), EXPECTED)
    healthy = f"{len(sm_of)} compute ports with a LID, SM LID " + "/".join(f"0x{sm:x}" for sm in by_sm)
    if roce:
        healthy += f"; {fold_names(name.removesuffix(' port 1') for name in roce)} port 1 {NOT_JUDGED}"
    return roll_up(CHECK_ID, facts.node, findings, expected=EXPECTED, healthy=healthy)


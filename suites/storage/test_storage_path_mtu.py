"""Path MTU (STO-04): the storage suite's phase pinged every storage target with don't-fragment packets that fill
the storage MTU (8972 bytes for 9000); each was answered, and every BlueField netdev runs that MTU.

The node suite judges the same check from the interfaces alone (no pings); here the pings are required.
"""

import pytest

from burnin.checks.base import not_applicable_reason
from burnin.evaluate.verdict import Verdict
from burnin.facts import Facts
from burnin.storage.pathmtu_judge import SECTION
from burnin.suite import CheckIncomplete, assert_passed, not_applicable
from burnin.topology.model import Topology


@pytest.fixture
def pinged(facts: Facts, topology: Topology) -> None:
    """Stand aside where the node type has no storage fabric; without the phase's pings the check is not measured.

    Requested before ``verdict``.
    """
    reason = not_applicable_reason("STO-04", topology)
    if reason is not None:
        not_applicable(reason)
    if not facts.unreachable and facts.data.get(SECTION) is None:
        raise CheckIncomplete("STO-04 could not be measured: path MTU not collected: the storage suite's phase "
                              "did not ping the storage targets")


@pytest.mark.check("STO-04")
def test_storage_path_mtu(pinged: None, verdict: Verdict) -> None:
    """Every storage target answers a don't-fragment ping of the storage MTU; every BlueField netdev runs it."""
    assert_passed(verdict)

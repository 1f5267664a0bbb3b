"""InfiniBand compute-fabric checks (IB): port state, rate, link layer, error counters."""

from __future__ import annotations

from burnin.checks.base import (
    ERROR_COUNT,
    IB_RATE_GBPS,
    bad,
    check,
    judge,
    measured_count,
    measured_number,
    ok,
    per_hca,
)
from burnin.checks.references import reference
from burnin.evaluate.verdict import Finding, Unmeasurable, Verdict, roll_up
from burnin.facts import Facts, HcaFacts
from burnin.topology.model import Hca, Topology

FATAL_COUNTERS = (
    "link_downed", "excessive_buffer_overrun_errors", "local_link_integrity_errors",
    "port_rcv_remote_physical_errors",
)
ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "port_rcv_errors")


@check("IB-01", "Compute HCA ports Active / LinkUp", sources=("infiniband",))
def port_state(facts: Facts, topology: Topology) -> Verdict:
    expected = "4: ACTIVE / 5: LinkUp"

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        port = data.measured_port()
        state, phys = port.get("state"), port.get("phys_state")
        if not isinstance(state, str) or not isinstance(phys, str) or not state or not phys:
            raise Unmeasurable(f"state/phys_state unreadable ({state!r} / {phys!r})")
        healthy = state.endswith("ACTIVE") and phys.endswith("LinkUp")
        return judge(hca.name, healthy, f"{state} / {phys}", expected)

    return roll_up("IB-01", facts.node, per_hca(facts, topology.compute_hcas, judge_hca), expected=expected,
                   healthy="all compute ports ACTIVE/LinkUp")


@check("IB-02", "Compute HCA port rate", sources=("infiniband",), references=("ib_rate_gbps",))
def port_rate(facts: Facts, topology: Topology) -> Verdict:
    ref = reference(topology, "ib_rate_gbps")

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        port = data.measured_port()
        rate_text = port.get("rate")
        state = port.get("state")
        if not isinstance(state, str) or not state.endswith("ACTIVE"):
            # A port that is not up reports a meaningless rate: not measured (IB-01 fails the port).
            raise Unmeasurable(f"port {state}: no rate while the port is not ACTIVE (see IB-01)")
        rate = port.rate_gbps
        if rate is None:
            raise Unmeasurable(f"rate unreadable: {rate_text!r}")
        measured_number(rate, hca.name, "rate (Gb/s)", IB_RATE_GBPS)
        return judge(hca.name, ref.admits(rate), str(rate_text), ref.describe())

    return roll_up("IB-02", facts.node, per_hca(facts, topology.compute_hcas, judge_hca),
                   expected=ref.describe())


@check("IB-03", "Link layer per HCA role (compute InfiniBand, storage Ethernet)", sources=("infiniband",))
def link_layer(facts: Facts, topology: Topology) -> Verdict:
    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        layer = data.measured_port().get("link_layer")
        if not layer:
            raise Unmeasurable(f"link_layer unreadable ({layer!r})")
        return judge(hca.name, layer == hca.link_layer, f"{hca.role} {layer}", f"{hca.role} {hca.link_layer}")

    return roll_up("IB-03", facts.node, per_hca(facts, topology.hcas, judge_hca),
                   expected="compute InfiniBand, storage Ethernet",
                   healthy="compute InfiniBand, storage Ethernet")


@check("IB-04", "InfiniBand error counters within limits",
       sources=("infiniband",), references=("ib_fatal_counter", "ib_error_counter"))
def error_counters(facts: Facts, topology: Topology) -> Verdict:
    fatal_ref = reference(topology, "ib_fatal_counter")
    error_ref = reference(topology, "ib_error_counter")
    expected = (f"{', '.join(FATAL_COUNTERS)} {fatal_ref.describe()}; "
                f"{', '.join(ERROR_COUNTERS)} {error_ref.describe()}")

    def judge_hca(hca: Hca, data: HcaFacts) -> Finding:
        counters = data.measured_port().counters
        if not counters:
            raise Unmeasurable("no counters readable")
        unread = [name for name in (*FATAL_COUNTERS, *ERROR_COUNTERS) if counters.get(name) is None]
        if unread:
            raise Unmeasurable(f"counters not readable: {', '.join(unread)}")
        values = {name: measured_count(counters[name], hca.name, name, ERROR_COUNT)
                  for name in (*FATAL_COUNTERS, *ERROR_COUNTERS)}
        over = [f"{name}={values[name]}" for name in FATAL_COUNTERS if not fatal_ref.admits(values[name])]
        over += [f"{name}={values[name]}" for name in ERROR_COUNTERS if not error_ref.admits(values[name])]
        if over:
            since = facts.counter_baseline
            return bad(hca.name, ", ".join(over) + (f" since baseline {since}" if since else ""), expected)
        return ok(hca.name, "counters within limits", expected)

    return roll_up("IB-04", facts.node, per_hca(facts, topology.compute_hcas, judge_hca), expected=expected,
                   healthy="error counters within limits")

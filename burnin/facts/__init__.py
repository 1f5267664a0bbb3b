"""The facts document and its one typed reader.

:class:`Facts` is one node's document; :class:`GpuFacts`, :class:`HcaFacts`
and :class:`PortFacts` read its GPUs, HCAs and ports through named readings
(``burnin.facts.gpu``), and :mod:`burnin.facts.values` parses each value once:
read (the value or None) for the report, metrics and soak samples, measured
(the value or :class:`~burnin.evaluate.verdict.Unmeasurable`) for the checks.
"""

from burnin.facts.document import Facts, NonFiniteNumber, loads_facts
from burnin.facts.gpu import GpuFacts
from burnin.facts.hca import HcaFacts, PortFacts, rate_gbps

__all__ = ["Facts", "GpuFacts", "HcaFacts", "NonFiniteNumber", "PortFacts", "loads_facts", "rate_gbps"]

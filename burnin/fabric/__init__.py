"""Fabric acceptance: nccl-tests and nvbandwidth runs, and naming the node or rail that is slow.

The measurement phase (:mod:`burnin.fabric.phase`) runs before the pytest
suites judge anything: single-node ``all_reduce_perf`` and ``nvbandwidth`` on
every node, a multi-node all-reduce over the node set, and, when that comes in
below its reference (or with ``--localize``), pairwise localisation rounds
(:mod:`burnin.fabric.localize`) and single-rail runs that name the slow HCA.
Results are merged into each node's facts under ``fabric`` and written to
``OUT/fabric.json``; the checks in :mod:`burnin.checks.fabric` judge them.

Modules: ``settings`` (site settings), ``commands`` (argv and environment,
pure), ``measure`` (a finished launch -> a measurement, pure), ``judge``
(thresholds, medians, stragglers, rails; pure), ``localize`` (the planner,
pure), ``results`` (the run's results and each node's facts section, pure),
``launch`` (running argv lists through the dispatcher's transport), ``phase``
(the driver). See docs/fabric.md.
"""

"""The Megatron smoke run (MEG-01..04) and rank placement (PIN-01..04), without the phase that launches them.

- :mod:`burnin.megatron.config`: the site config (``--megatron-config FILE``), pydantic, read with the
  hardened YAML loader;
- :mod:`burnin.megatron.commands`: the argv burnin launches (srun or torchrun form, container or not) for
  the training run and the placement probe;
- :mod:`burnin.megatron.mfu`: Megatron's FLOP formula, TFLOP/s/GPU and MFU (pure);
- :mod:`burnin.megatron.logs`: per-rank logs out of a launcher's labelled output, NCCL error lines, tails;
- :mod:`burnin.megatron.record`: what a phase stores in a node's facts (``megatron`` and ``placement``);
- :mod:`burnin.megatron.judge` and :mod:`burnin.megatron.placement`: the MEG and PIN findings (pure).

The checks (burnin.checks.workload) read the facts sections; docs/megatron.md describes them.
"""

"""``burnin sweep``: the node suite on a Slurm fleet's idle nodes, one small preemptible job per node.

- :mod:`burnin.sweep.window`: the window (``--until HH:MM`` / ``--for 6h``), pure;
- :mod:`burnin.sweep.plan`: which nodes to start now and what each node's sweep came to, pure;
- :mod:`burnin.sweep.slurm_state`: what Slurm says of jobs, nodes and the partition (argv and parsers);
- :mod:`burnin.sweep.node_job`: one node's job (an allocation through the Slurm launcher, the collector in
  it, how the job ended);
- :mod:`burnin.sweep.judge`: a node's facts through the node suite and the gate, as ``burnin run`` does;
- :mod:`burnin.sweep.loop`: the sweep itself. docs/sweep.md.
"""

"""``burnin watch``: the node-side event daemon that evicts or drains within a second.

It listens to NVML events (``nvml``) and follows the kernel log (``follow``),
keeps only the kernel's own records (``records``) about this node's devices
(``devices``), turns what it hears into :class:`~burnin.watch.events.WatchEvent`
records (``kmsg``), hands drain and evict events out first (``lanes``),
classifies them with the checks' own tables (``events``), never acts
twice on one incident (``journal``), and acts through Slurm (``actions``):
evict (drain + requeue the node's jobs, started again within seconds), drain, or only
record. ``daemon`` ties them together; docs/watch.md tells the whole story.

Like the collector it needs only the standard library and pynvml on the node.
"""

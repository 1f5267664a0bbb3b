"""Fleet reliability from past runs (check-catalog REL-01/REL-02), computed on the controller.

``burnin history RUN...`` reads the ``gate.json`` of past runs (and the watch's
journal of drains and evictions), and computes per node the failures
attributed to it with their check ids and times, its outages and MTTR, its
availability over the period and whether it is a lemon; and the same for the
fleet. :mod:`.load` reads the files, :mod:`.metrics` computes (pure),
:mod:`.document` writes the JSON.
"""

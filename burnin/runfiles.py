"""The files of a run's output folder that the session, the plugin and the reports find by name.

A module of its own, importing nothing: :mod:`burnin.session` names them without importing pytest, which the
run imports while its facts are being gathered (:func:`burnin.session.prepare_judging`).
"""

from __future__ import annotations

RUN_FILE = "_run.json"
"""In the facts folder: the run's nodes and their node types, for the plugin."""
GATE_FILE = "gate.json"
VERDICTS_FILE = "verdicts.json"

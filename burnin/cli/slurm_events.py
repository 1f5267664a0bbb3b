"""Reading Slurm's node events for ``burnin reliability``: ``sacctmgr show event`` through the transport, parsed by
:mod:`burnin.parsers.sacctmgr`; :class:`EventsUnavailable` says in one line why they could not be read.
The folding into the fleet's figures is the history's (:mod:`burnin.history.slurm_events`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from burnin.errors import ParseError
from burnin.parsers.sacctmgr import EVENT_FORMAT, SlurmEvent, parse_sacctmgr_events
from burnin.text import printable
from burnin.transport.slurm import SlurmRunner, sacctmgr_events_argv

SACCTMGR_TIMEOUT_S = 60.0
"""A bound on one ``sacctmgr show event`` (slurmdbd answers from its database; a failure limit)."""
EVENTS_ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
"""sacctmgr prints local times: read in UTC, in the one format the parser reads."""
CONFIG_PATHS = (Path("/etc/slurm/slurm.conf"), Path("/run/slurm/conf/slurm.conf"))
"""Where Slurm's clients find their configuration without ``SLURM_CONF`` (Debian's; configless slurmd's copy)."""


class EventsUnavailable(Exception):
    """The Slurm events could not be read; the message says why (one line)."""


def config_found(environ: Mapping[str, str] | None = None) -> str | None:
    """Why Slurm's clients would find no configuration here (None: they would). Without one, sacctmgr
    retries for a minute before it gives up."""
    env = os.environ if environ is None else environ
    conf = env.get("SLURM_CONF")
    if conf:
        return None if Path(conf).is_file() else f"SLURM_CONF={conf} is not a file"
    if any(path.is_file() for path in CONFIG_PATHS):
        return None
    return f"no Slurm configuration ({' or '.join(str(p) for p in CONFIG_PATHS)}; set SLURM_CONF)"


def read_events(client: SlurmRunner, since: float, *, environ: Mapping[str, str] | None = None) -> list[SlurmEvent]:
    """Slurm's node events since ``since`` (``sacctmgr``, in UTC); :class:`EventsUnavailable` says why not."""
    env = os.environ if environ is None else environ
    if shutil.which("sacctmgr", path=env.get("PATH")) is None:
        raise EventsUnavailable("sacctmgr is not on PATH")
    missing = config_found(env)
    if missing is not None:
        raise EventsUnavailable(missing)
    start = datetime.fromtimestamp(since, timezone.utc)
    result = client.run(sacctmgr_events_argv(start, EVENT_FORMAT), timeout=SACCTMGR_TIMEOUT_S)
    if not result.ok:
        said = " ".join(line.strip() for line in f"{result.stderr}\n{result.stdout}".splitlines() if line.strip())
        raise EventsUnavailable(printable(said or result.describe_failure(), limit=300))
    try:
        return parse_sacctmgr_events(result.stdout).node_events()
    except ParseError as exc:
        raise EventsUnavailable(f"its output did not read: {printable(str(exc), limit=300)}") from exc

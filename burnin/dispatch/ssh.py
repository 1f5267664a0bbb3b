"""Dispatch over SSH: a rack that no scheduler knows yet (``burnin run --via ssh``).

Nodes come from ``--hosts NODESET`` or ``--inventory FILE`` (optionally narrowed
by ``--hosts``). Each node's collector runs agentless: the zipapp travels on the
SSH channel's stdin to the node's own python3, nothing is written there. A
bounded pool (``--fanout``) gathers the facts once per run; each node's
connection is closed as soon as its facts are in, so a 1,000-node run never
holds more than ``fanout`` connections. Per node the gather is bounded by
``timeout``; the whole gather by ``timeout`` times the number of waves.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from burnin.errors import UsageError

if TYPE_CHECKING:  # `burnin run --help` reads add_arguments only: the dispatcher's machinery is imported when used
    from burnin.dispatch.base import DispatchContext
    from burnin.facts import Facts
    from burnin.inventory import Inventory
    from burnin.launch.log import CommandLog
    from burnin.launch.ssh import SshLauncher
    from burnin.transport.ssh import SshTransport
    from burnin.transport.ssh_config import Endpoint

DEFAULT_FANOUT = 64
NODE_PYTHON = "python3"
USAGE = "--via ssh --hosts/--inventory"


def add_arguments(group: argparse._ArgumentGroup) -> None:
    from burnin.argtypes import positive_int

    group.add_argument("--hosts", metavar="NODESET", help="ssh: nodes to run on, e.g. rack12-n[01-32]")
    group.add_argument("--inventory", type=Path, metavar="FILE", help="ssh: inventory YAML (nodes, groups)")
    group.add_argument("--ssh-config", type=Path, metavar="FILE",
                       help="ssh: ssh_config to honour (default ~/.ssh/config)")
    group.add_argument("--accept-new-host-keys", action="store_true",
                       help="ssh: accept and record unknown host keys (like OpenSSH accept-new); "
                            "changed keys still fail")
    group.add_argument("--fanout", type=positive_int, default=DEFAULT_FANOUT, metavar="N",
                       help=f"ssh: nodes in flight at once (default {DEFAULT_FANOUT})")


def open_dispatcher(args: argparse.Namespace, context: DispatchContext) -> SshDispatcher:
    return SshDispatcher.from_args(args, context.topology_ref)


class SshDispatcher:
    """Gather facts from nodes over SSH; the Dispatcher protocol of ``burnin run``."""

    def __init__(self, endpoints: Mapping[str, Endpoint], *, fanout: int = DEFAULT_FANOUT,
                 topology_by_node: Mapping[str, str] | None = None, python: str = NODE_PYTHON) -> None:
        from burnin.transport.ssh import SshTransport

        if fanout < 1:
            raise UsageError("--fanout must be at least 1")
        self.nodes: list[str] = list(endpoints)
        self.topology_by_node: dict[str, str] = dict(topology_by_node or {})
        self.fanout = fanout
        self._python = python
        self._transport = SshTransport(dict(endpoints))

    @classmethod
    def from_args(cls, args: argparse.Namespace, topology_name: str) -> SshDispatcher:
        """Build from ``burnin run`` flags; every mistake is a UsageError/ConfigError before any connect."""
        from burnin.inventory import load_inventory

        hosts: str | None = getattr(args, "hosts", None)
        inventory_path: Path | None = getattr(args, "inventory", None)
        inventory = load_inventory(inventory_path) if inventory_path is not None else None
        ssh_config: Path | None = getattr(args, "ssh_config", None)
        return cls.for_nodes(
            inventory=inventory, hosts=hosts, ssh_config=ssh_config,
            accept_new=bool(getattr(args, "accept_new_host_keys", False)),
            fanout=DEFAULT_FANOUT if getattr(args, "fanout", None) is None else int(args.fanout),
            default_topology=topology_name,
        )

    @classmethod
    def for_nodes(cls, *, inventory: Inventory | None = None, hosts: str | None = None,
                  ssh_config: Path | None = None, accept_new: bool = False,
                  fanout: int = DEFAULT_FANOUT, default_topology: str | None = None) -> SshDispatcher:
        """Resolve the node list and every node's endpoint (ssh_config + inventory overrides).

        ``ssh_config`` defaults to the inventory's ``ssh_config:``, then ~/.ssh/config.
        """
        from burnin.nodes import expand, validate_name
        from burnin.transport.ssh_config import SshConfigResolver

        if ssh_config is None and inventory is not None:
            ssh_config = inventory.ssh_config
        if inventory is not None:
            names = inventory.select(hosts)
        elif hosts:
            names = expand(hosts)
        else:
            raise UsageError("--via ssh needs --hosts NODESET or --inventory FILE")
        resolver = SshConfigResolver(ssh_config, accept_new=accept_new)
        endpoints: dict[str, Endpoint] = {}
        topology_by_node: dict[str, str] = {}
        for name in names:
            validate_name(name)
            entry = inventory.nodes[name] if inventory is not None else None
            if entry is None:
                endpoints[name] = resolver.resolve(name)
                continue
            endpoints[name] = resolver.resolve(name, address=entry.address, user=entry.user, port=entry.port)
            if entry.topology and entry.topology != default_topology:
                topology_by_node[name] = entry.topology
        return cls(endpoints, fanout=fanout, topology_by_node=topology_by_node)

    def gather(self, *, sources: str = "all", timeout: float = 120.0,
               on_done: Callable[[str], None] | None = None) -> dict[str, Facts]:
        """Run the collector on every node once; unreachable/hung/garbled nodes become incomplete."""
        from burnin.launch.gather import gather

        return gather(self.launcher({}), self.nodes, sources=sources, timeout=timeout, on_done=on_done)

    def launcher(self, facts: Mapping[str, Facts], *, log: CommandLog | None = None) -> SshLauncher:
        """Commands over the SSH connections; jobs start on the nodes themselves (mpirun from the first node)."""
        from burnin.dispatch.base import preset_from_facts
        from burnin.launch.log import NO_LOG
        from burnin.launch.ssh import SshLauncher

        return SshLauncher(self._transport, preset=preset_from_facts(facts), fanout=self.fanout,
                           python=self._python, log=log or NO_LOG)


    @property
    def transport(self) -> SshTransport:
        return self._transport

    def close(self) -> None:
        self._transport.close()

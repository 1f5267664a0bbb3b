"""``burnin`` command line: run, probe, parse, topologies, faults, sim.

Sub-commands import their modules lazily: ``burnin probe`` runs every few
minutes on production nodes and must start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

# verb -> (module with add_arguments/run, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("burnin.cli.run_cmd", "run the suites on nodes and gate them into the pool"),
    "probe": ("burnin.cli.probe_cmd", "health probe: fast read-only checks on this node, one line out"),
    "parse": ("burnin.cli.parse_cmd", "parse a tool's output into JSON"),
    "topologies": ("burnin.cli.info_cmd", "list the known node types"),
    "faults": ("burnin.cli.faults_cmd", "list the simulator's faults and the check that catches each"),
    "checks": ("burnin.cli.checks_cmd", "the check catalog: what each check catches, its data, thresholds, probe"),
    "sim": ("burnin.cli.sim_cmd", "start, stop or fault simulated racks behind real sshd or Slurm"),
    "report": ("burnin.cli.report_cmd", "render a run's report.html again from its output folder"),
    "watch": ("burnin.cli.watch_cmd", "node daemon: evict or drain this node within a second of a GPU/IB fault"),
    "stalls": ("burnin.cli.stalls_cmd", "the watch's stalled collectives across nodes: whose counters stopped first"),
    "sweep": ("burnin.cli.sweep_cmd", "Slurm: the node suite on idle nodes only, one preemptible job per node, "
                                      "within a window"),
    "soak": ("burnin.cli.soak_cmd", "burn-in: hours of load on every node while every health signal is watched"),
    "history": ("burnin.cli.history_cmd", "a node's timeline, a check's failures and trends from the fleet's history"),
    "diff": ("burnin.cli.diff_cmd", "what changed between two runs: newly failing, admitted, incomplete, moved"),
    "reliability": ("burnin.cli.reliability_cmd", "failure rates, job MTTF, MTTR, availability, repeat offenders"),
    "breaker": ("burnin.cli.breaker_cmd", "the fleet-wide circuit breaker: how many nodes burnin may take out "
                                          "per window, status, allow N more"),
    "repair": ("burnin.cli.repair_cmd", "the repair ladder for nodes burnin drained: reset, reboot, vendor; "
                                        "back in service only after passing again"),
}

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


DEBUG_HELP = "on an internal error, print the traceback instead of writing a crash file"


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line usage error (exit 2), like every other user mistake."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(verb: str | None = None, *, options: bool = True) -> argparse.ArgumentParser:
    """The command line's parser: every verb's (``verb`` None) or one verb's only.

    ``options=False``: the verbs without their options, all that ``burnin --help`` shows and all an unknown
    verb's usage error needs, so neither imports a single command module.
    """
    parser = ArgumentParser(
        prog="burnin",
        description="Acceptance, burn-in and health probes for bare-metal NVIDIA H100 GPU nodes.",
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Also accepted after the verb (`burnin run --debug`); SUPPRESS keeps a leading --debug.
    common = ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # A known verb gets its own parser only: every other one costs argparse's gettext look-ups, and
    # `burnin probe` runs every few minutes on every node.
    for name, (module, help_text) in COMMANDS.items():
        if verb is None or verb == name:
            sub_parser = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
            if options:
                _command_module(module).add_arguments(sub_parser)
    return parser


def _command_module(name: str) -> ModuleType:
    """A verb's module, imported by an import statement's own path (``python -X importtime`` sees it)."""
    __import__(name)
    return sys.modules[name]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit 0/1 verdicts, 2 usage or configuration error, 3 interrupted or internal error.

    SIGINT, SIGTERM and SIGHUP stop the children, remove the scratch and exit 3
    (burnin.cli.interrupt); any unexpected exception is one line and exit 3
    (burnin.cli.crash). Called as the console script (``argv`` None), the command
    ends with ``os._exit`` once it has written and cleaned up everything (see
    :func:`_exit_now`).
    """
    from burnin.cli import interrupt

    args_list = list(sys.argv[1:] if argv is None else argv)
    interrupt.reset()
    previous = interrupt.install()
    prog = "burnin"
    code = EXIT_INTERNAL
    try:
        try:
            verb = next((a for a in args_list if not a.startswith("-")), None)
            if verb in COMMANDS:
                prog = f"burnin {verb}"
            code = _dispatch(args_list, verb, prog)
        except BrokenPipeError:  # the reader went away (`burnin faults | head`): nothing to say, nobody to say it to
            _cleanup()
            _silence_stdout()
            code = EXIT_INTERNAL
        except Exception as exc:  # noqa: BLE001 - the contract: exit 3 and one line, never a traceback
            interrupted = _interrupt_behind(exc)
            if interrupted is not None:
                code = _interrupted(prog, interrupted)
            else:
                from burnin.cli.crash import report

                _cleanup()
                print(report(prog, exc, debug="--debug" in args_list), file=sys.stderr)
                code = EXIT_INTERNAL
    except KeyboardInterrupt as exc:  # also one that lands while an error is being reported
        code = _interrupted(prog, exc)
    finally:
        interrupt.restore(previous)
    if argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """Out with ``code`` once stdout and stderr are flushed, without the interpreter's teardown.

    Every command writes its files (atomically, each closed where it was opened), releases its nodes and removes
    its scratch before it returns, so nothing is left for the teardown to do, and it is skipped: no thread still
    waiting on a hung node (or on the nodes of an interrupted command) holds the exit, and a command that judged
    with pytest does not pay a last collection over the ~58,000 objects it loaded (about 0.1 s of CPU, measured:
    the tests start thousands of commands, a health probe runs every few minutes on every node).
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away, or the stream is closed: nobody to tell
            pass
    os._exit(code)


def _dispatch(args_list: list[str], verb: str | None, prog: str) -> int:
    from burnin.cli import interrupt
    from burnin.errors import BurninError

    parser = build_parser(verb) if verb in COMMANDS else build_parser(options=False)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    module = _command_module(COMMANDS[args.command][0])
    try:
        code: int = module.run(args)
        interrupt.raise_if_received()  # pytest caught the first signal and returned
    except BurninError as exc:
        interrupt.raise_if_received()
        _cleanup()
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return code


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt that ``exc`` was raised in the wake of, if any: a signal's exception that lands inside
    ``threading``'s lock handling (a ``Condition.wait`` in ``Thread.start``) leaves the lock half-released,
    and the ``with`` around it raises ``RuntimeError: release unlocked lock`` in its place."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return link
        seen.add(id(link))
        link = link.__context__ or link.__cause__
    return None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (captured): nothing will be flushed to it
        pass


def _interrupted(prog: str, exc: KeyboardInterrupt) -> int:
    from burnin.cli import interrupt

    name = interrupt.received() or getattr(exc, "signal_name", "SIGINT")
    _cleanup()
    print(f"{prog}: interrupted ({name})", file=sys.stderr)
    return EXIT_INTERNAL


def _cleanup() -> None:
    """Whatever the command left: children killed, scratch folders removed (no-ops when none)."""
    local = sys.modules.get("burnin.transport.local")
    if local is not None and local.running_children():
        local.stop_children(force=True)
    sim = sys.modules.get("burnin.dispatch.sim")
    if sim is not None:
        sim.remove_scratch()


if __name__ == "__main__":
    raise SystemExit(main())

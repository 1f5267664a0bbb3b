"""``burnin probe``: the health-probe backend (Slurm HealthCheckProgram, node agents).

Exit 0 healthy, 1 a check failed, 2 something could not be measured.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnin.gate.registry import Gate
    from burnin.probe import ProbeResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The defaults are the resident probe's client's (burnin.cli.probe_ask): both must judge alike.
    from burnin.cli.probe_ask import DEFAULT_GATE, DEFAULT_TIMEOUT_S, DEFAULT_TOPOLOGY, TOPOLOGY_ENV

    parser.add_argument("--topology", default=os.environ.get(TOPOLOGY_ENV) or DEFAULT_TOPOLOGY,
                        metavar="NAME|FILE", help=f"node type (default: ${TOPOLOGY_ENV} or {DEFAULT_TOPOLOGY})")
    from burnin.argtypes import seconds

    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"per-source timeout (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--drain", action="store_true",
                        help="on a failure, take this node out of the pool (Slurm: drain it with reason "
                             "'burnin: <ids> <cause>')")
    parser.add_argument("--undrain", action="store_true",
                        help="when healthy, put this node back, but only from a drain that burnin set for "
                             "checks the probe runs")
    parser.add_argument("--gate", default=DEFAULT_GATE, metavar="NAME",
                        help=f"the gate --drain and --undrain act through (default {DEFAULT_GATE}; see "
                             "burnin.gate.registry)")
    parser.add_argument("--json", action="store_true", help="print every verdict as JSON instead of one line")
    parser.add_argument("--format", choices=("line", "json", "npd"), default=None,
                        help="line (default), json (as --json), or npd: node-problem-detector's custom plugin "
                             "protocol (one line of at most --max-output-length bytes; exit 0 OK, 1 problem, "
                             "2 unknown; docs/kubernetes.md)")
    parser.add_argument("--max-output-length", type=int, default=80, metavar="BYTES",
                        help="--format npd: the monitor config's max_output_length (default 80)")
    parser.add_argument("--baseline", action="store_true",
                        help="record the node's error counters now; later probes judge their growth since then "
                             "(until the next reboot)")
    parser.add_argument("--record", action="store_true",
                        help="also record the verdicts in the fleet's history as a probe run (docs/history.md; "
                             "$BURNIN_HISTORY or the state directory's)")
    parser.add_argument("--metrics", type=Path, metavar="FILE",
                        help="also write the verdicts and measurements as a Prometheus textfile "
                             "(e.g. node_exporter's textfile folder/burnin.prom), atomically")
    resident = parser.add_mutually_exclusive_group()
    resident.add_argument("--serve", action="store_true",
                          help="stay resident and probe whenever the client asks (a service; docs/probe.md)")
    resident.add_argument("--client", action="store_true",
                          help="print the client script that asks the resident probe; when it does not answer, "
                               "the script runs this one-shot probe with the --topology, --timeout, --gate and "
                               "--metrics given here (give the server's)")
    parser.add_argument("--address-file", type=Path, metavar="FILE",
                        help="where --serve writes its port and token, and the client reads them (default: "
                             "$BURNIN_PROBE_ADDRESS or /run/burnin/probe.addr)")


def run(args: argparse.Namespace) -> int:
    if args.max_output_length < 8:
        from burnin.errors import UsageError

        raise UsageError(f"--max-output-length {args.max_output_length}: at least 8 bytes")
    if args.client:
        print(client_script(args), end="")
        return 0
    if args.drain or args.undrain or args.serve:
        _check_gate(args.gate)  # a wrong name is a usage error before probing
    if args.serve:
        from burnin.cli.probe_serve import serve

        return serve(args, act)
    from burnin.probe import run_probe
    from burnin.topology.fast import find_topology_fast

    result = run_probe(find_topology_fast(args.topology), timeout=args.timeout, record_baseline=args.baseline)
    if args.format == "npd":
        from burnin.probe import npd_message

        print(npd_message(result, args.max_output_length))
    elif args.json or args.format == "json":
        import json

        print(json.dumps({"node": result.node, "exit": result.exit_code,
                          "verdicts": [v.to_json() for v in result.verdicts]}, indent=1))
    else:
        print(result.line())
    sys.stdout.flush()
    act(result, drain=args.drain, undrain=args.undrain, gate=args.gate, metrics=args.metrics, record=args.record)
    return result.exit_code


def act(result: ProbeResult, *, drain: bool, undrain: bool, gate: str, metrics: Path | None,
        record: bool = False) -> None:
    """What a probe does once judged, one-shot or resident: the drain or resume, then the textfile, then the
    history (``record``)."""
    from burnin.probe import EXIT_FAIL, EXIT_OK

    # Act before reporting: nothing the metrics writer meets may keep a failing node in the pool.
    if drain and result.exit_code == EXIT_FAIL:
        _gate(gate).drain(result.node, result.drain_reason())
    elif undrain and result.exit_code == EXIT_OK:
        # only for the checks the probe judged: a node drained for a check it does not run stays drained
        _gate(gate).resume(result.node, passed=[v.check_id for v in result.verdicts if v.passed])
    if metrics is not None:
        _write_metrics(metrics, result)
    if record:
        import time

        from burnin.history.actions import record_probe

        now = time.time()
        record_probe(result.node, [(v.check_id, v.status.value, v.measured, v.expected, v.reason)
                                   for v in result.verdicts], started=now - result.duration_s, finished=now)


def client_script(args: argparse.Namespace) -> str:
    """The client of ``burnin probe --serve``: this burnin, the address file, and the one-shot probe it runs
    when the server does not answer (the node type, timeout, gate and textfile given here: the server's)."""
    import shlex

    from burnin.cli.probe_serve import address_file

    console = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "burnin" else None
    burnin = str(console) if console is not None and console.is_file() else "burnin"
    one_shot = ["--topology", args.topology, "--timeout", f"{args.timeout:g}", "--gate", args.gate]
    if args.metrics is not None:
        one_shot += ["--metrics", str(args.metrics)]
    template = (Path(__file__).with_name("probe_client.sh")).read_text(encoding="utf-8")
    return (template.replace("@ADDRESS@", shlex.quote(str(address_file(args.address_file))))
            .replace("@BURNIN@", shlex.quote(burnin))
            .replace("@ONE_SHOT@", " ".join(shlex.quote(word) for word in one_shot)))


def _check_gate(name: str) -> None:
    from burnin.errors import UsageError
    from burnin.gate.registry import GATES

    if name not in GATES:
        raise UsageError(f"--gate {name!r}: unknown gate (known: {', '.join(GATES)})")


def _gate(name: str) -> Gate:
    """The gate, imported only once the probe has something for it to do."""
    from burnin.gate.registry import find_gate

    return find_gate(name)


def _write_metrics(path: Path, result: ProbeResult) -> None:
    """The textfile, written atomically, after the verdict was acted on; whatever stops it is reported on
    one line, and the verdict (the exit code) stands."""
    import time

    from burnin.probe import metrics_text
    from burnin.report.metrics import write_textfile
    from burnin.text import printable

    try:
        write_textfile(path, metrics_text(result, timestamp=time.time()))
    except OSError as exc:
        print(printable(f"burnin probe: --metrics {path}: cannot write it ({exc.strerror or exc})"), file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the textfile is a report: the verdict and the drain stand
        print(printable(f"burnin probe: --metrics {path}: not written ({type(exc).__name__}: {exc})"),
              file=sys.stderr)

"""``burnin parse TOOL [FILE|-]``: print a tool output's parsed record as JSON.

Exit status 0 with the JSON on stdout; 2 with one line on stderr when the file
cannot be read or the text cannot be parsed. The JSON keys are documented in
docs/parse-json.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from burnin.errors import ParseError, UsageError
from burnin.parsers import PARSERS, get_parser, iter_json
from burnin.text import printable

PROG = "burnin parse"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``parse`` verb's arguments to ``parser``."""
    parser.add_argument("tool", choices=sorted(PARSERS), help="which tool printed the text")
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        help="file holding the tool's output; '-' or nothing reads standard input",
    )
    parser.add_argument(
        "--columns",
        default=None,
        metavar="A,B,...",
        help="nvidia-smi-query only: comma-separated field names, for output printed with --format=csv,noheader",
    )
    from burnin.parsers.nccl_tests import COLLECTIVES

    parser.add_argument(
        "--collective",
        default=None,
        choices=COLLECTIVES,
        metavar="NAME",
        help="nccl-tests only: the collective (" + ", ".join(COLLECTIVES) + "); by default "
        "taken from the text, else from the file name, else inferred from the numbers",
    )


def _one_line(message: str) -> str:
    """One line, and what the tool printed shown escaped (``\\x1b``), never raw."""
    return printable(" ".join(message.split()))


def _read(path: str) -> str:
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text-only stand-in for stdin (tests, embedding)
            return str(sys.stdin.read())
        data = bytes(stream.read())
    else:
        data = Path(path).read_bytes()
    return data.decode("utf-8", errors="replace")


def _write_json(record: object) -> None:
    """The record as indented JSON on stdout, written as it is walked (in 64 KiB pieces)."""
    pending: list[str] = []
    size = 0
    for piece in iter_json(record):
        pending.append(piece)
        size += len(piece)
        if size >= 65536:
            sys.stdout.write("".join(pending))
            pending, size = [], 0
    pending.append("\n")
    sys.stdout.write("".join(pending))


def _collective_from_name(path: str) -> str | None:
    """``all_gather_perf-node01.log`` -> ``all_gather``."""
    from burnin.parsers.nccl_tests import COLLECTIVES

    name = Path(path).name if path != "-" else ""
    for coll in sorted(COLLECTIVES, key=len, reverse=True):
        if f"{coll}_perf" in name:
            return coll
    return None


def run(args: argparse.Namespace) -> int:
    """Parse ``args.file`` as ``args.tool`` output and print the record as JSON."""
    tool = str(args.tool)
    try:
        text = _read(str(args.file))
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        print(f"{PROG}: {tool}: cannot read {printable(args.file)}: {reason}", file=sys.stderr)
        return 2
    try:
        if tool == "nccl-tests":
            from burnin.parsers.nccl_tests import parse_nccl_tests

            explicit = getattr(args, "collective", None)
            record: object = parse_nccl_tests(
                text,
                collective=str(explicit) if explicit else None,
                name_hint=_collective_from_name(str(args.file)),
            )
        elif tool == "nvidia-smi-query" and getattr(args, "columns", None):
            from burnin.parsers.nvidia_smi import parse_query_csv

            names = tuple(c.strip() for c in str(args.columns).split(",") if c.strip())
            record = parse_query_csv(text, columns=names)
        else:
            record = get_parser(tool)(text)
    except ParseError as exc:
        message = str(exc)
        prefix = f"{tool}: "
        if message.startswith(prefix):
            message = message[len(prefix) :]
        print(f"{PROG}: {tool}: {_one_line(message)}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"{PROG}: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    try:
        _write_json(record)
        sys.stdout.flush()
    except BrokenPipeError:  # `burnin parse ... | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0

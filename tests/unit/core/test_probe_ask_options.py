"""burnin.cli.probe_ask: which command lines the resident probe may answer, and what makes two probes alike.

The client's options key must be the server's exactly when the one-shot probe would judge and act as the
server does: the server computes its key from the options argparse gave it, the client from the raw words.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnin.cli.main import build_parser
from burnin.cli.probe_ask import (
    client_options_key,
    options_key,
    parse_command_line,
    read_address,
    read_reply,
    reply_line,
    request_line,
    sign,
    wait_seconds,
)
from burnin.cli.probe_serve import parse_signed_request

TOKEN = "0123456789abcdef0123456789abcdef"


def _server_key(argv: list[str]) -> str:
    """The key a server started with ``burnin probe --serve ARGV`` computes (burnin.cli.probe_serve.Server)."""
    args = build_parser("probe").parse_args(["probe", *argv])
    return options_key(topology=args.topology, timeout=args.timeout, gate=args.gate,
                       metrics=str(args.metrics) if args.metrics is not None else None, record=args.record,
                       environ=os.environ)


def _client_key(argv: list[str]) -> str | None:
    parsed = parse_command_line(argv)
    assert parsed is not None
    return client_options_key(parsed[0])


@pytest.mark.parametrize(("argv", "expected"), [
    ([], ({}, ())),
    (["--drain"], ({}, ("drain",))),
    (["--undrain", "--drain", "--drain"], ({}, ("undrain", "drain"))),
    (["--timeout", "7", "--timeout=8"], ({"--timeout": "8"}, ())),
    (["--topology=a b.yaml", "--gate", "recording"], ({"--topology": "a b.yaml", "--gate": "recording"}, ())),
    (["--metrics", "m.prom", "--address-file", "/x"], ({"--metrics": "m.prom", "--address-file": "/x"}, ())),
    (["--json"], None),               # forms the resident probe does not answer: the one-shot probe's parser
    (["--format", "npd"], None),
    (["--baseline"], None),
    (["--record"], None),
    (["--serve"], None),
    (["--help"], None),
    (["--debug"], None),
    (["--top", "x"], None),           # argparse's abbreviations are its parser's to judge
    (["--drain=yes"], None),
    (["--timeout"], None),            # a missing value
    (["--topology="], None),          # an empty one: not the default, whatever argparse makes of it
    (["--metrics", ""], None),
    (["extra"], None),
    (["--"], None),
])
def test_only_the_words_the_resident_probe_serves_are_understood(
        argv: list[str], expected: tuple[dict[str, str], tuple[str, ...]] | None) -> None:
    assert parse_command_line(argv) == expected


@pytest.mark.parametrize(("server", "client"), [
    ([], []),
    ([], ["--drain", "--undrain"]),                            # flags are the request's, not the options'
    (["--timeout", "5"], ["--timeout=5.0"]),
    (["--timeout", "12.5"], ["--timeout", "12.50"]),
    ([], ["--topology", "hgx-h100-8gpu", "--gate", "slurm"]),  # the defaults, spelled out
    (["--metrics", "out/burnin.prom"], ["--metrics", "./out/../out/burnin.prom"]),
    (["--topology", "site/h100.yaml"], ["--topology", "./site/h100.yaml"]),
    (["--topology", "h100.yaml"], ["--topology", "./h100.yaml"]),   # a file in this folder, however spelled
    (["--topology", "site/h100"], ["--topology", "./site/h100"]),   # a path, whatever its suffix
])
def test_the_same_probe_is_the_same_key(server: list[str], client: list[str]) -> None:
    assert _client_key(client) == _server_key(server)


@pytest.mark.parametrize(("server", "client"), [
    (["--timeout", "5"], ["--timeout", "6"]),
    (["--timeout", "5"], ["--timeout", "5s"]),
    ([], ["--gate", "kubernetes"]),
    ([], ["--metrics", "burnin.prom"]),
    (["--metrics", "a.prom"], ["--metrics", "b.prom"]),
    ([], ["--topology", "dgx-h100"]),
    (["--topology", "hgx-h100-8gpu"], ["--topology", "./hgx-h100-8gpu.yaml"]),  # a file, not the built-in
    (["--record"], []),
])
def test_a_probe_that_would_judge_or_act_otherwise_is_another_key(server: list[str], client: list[str]) -> None:
    assert _client_key(client) != _server_key(server)


def test_the_default_node_type_is_the_environments_for_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BURNIN_TOPOLOGY", "dgx-h100")
    assert _client_key([]) == _server_key([]) == _client_key(["--topology", "dgx-h100"])
    assert _client_key(["--topology", "hgx-h100-8gpu"]) != _server_key([])


@pytest.mark.parametrize(("name", "changes"), [
    ("BURNIN_SIM_NODE", True),        # another simulated node on this machine
    ("BURNIN_ROOT", True),
    ("BURNIN_TOPOLOGY_PATH", True),   # site node types
    ("NCCL_IB_HCA", True),            # what STO-02 judges of the process's environment
    ("LD_LIBRARY_PATH", True),        # which NVML library loads
    ("BURNIN_PROBE_ADDRESS", False),  # the client's own knobs
    ("BURNIN_PROBE_WAIT", False),
    ("HOME", False),
])
def test_the_node_as_the_process_sees_it_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch, name: str,
                                                             changes: bool) -> None:
    monkeypatch.delenv(name, raising=False)
    before = _server_key([])
    monkeypatch.setenv(name, "/elsewhere")
    assert (_client_key([]) != before) is changes


def test_a_timeout_that_is_not_a_number_is_no_key() -> None:
    assert client_options_key({"--timeout": "five"}) is None


def test_a_signed_request_is_refused_unless_signed_for_these_options() -> None:
    options = _server_key([])
    nonce = "ab" * 16
    good = request_line(TOKEN, nonce, options, ("drain",)).encode()
    assert TOKEN not in good.decode()
    assert parse_signed_request(good, TOKEN, options) == (nonce, ("drain",))
    assert parse_signed_request(good, "f" * 32, options) == "wrong signature"
    assert parse_signed_request(good, TOKEN, _client_key(["--timeout", "9"]) or "") == "other options"
    tampered = good.replace(b" drain", b" undrain")
    assert parse_signed_request(tampered, TOKEN, options) == "wrong signature"
    odd = request_line(TOKEN, nonce, options, ("reboot",)).encode()
    assert parse_signed_request(odd, TOKEN, options) == "unknown flag 'reboot'"
    assert parse_signed_request(b"burnin-probe/1 " + TOKEN.encode(), TOKEN, options) == "not a burnin-probe/2 request"
    assert parse_signed_request(b"burnin-probe/2 \xff", TOKEN, options) == "not ASCII"


def test_only_an_answer_signed_for_this_request_is_read() -> None:
    nonce = "cd" * 16
    reply = reply_line(TOKEN, nonce, 1, "burnin: FAIL GPU-04 gpu2: Xid 79")
    assert read_reply(reply, TOKEN, nonce) == (1, "burnin: FAIL GPU-04 gpu2: Xid 79")
    assert read_reply(reply, TOKEN, "ef" * 16) is None                         # another request's answer
    assert read_reply(reply.replace("FAIL", "OK"), TOKEN, nonce) is None      # the line changed
    assert read_reply("0" + reply[1:], TOKEN, nonce) is None                  # the exit code changed
    assert read_reply("0 burnin: OK (39 checks)", TOKEN, nonce) is None       # unsigned
    three = f"3 {sign(TOKEN, f'{nonce} 3 x')} x"
    assert read_reply(three, TOKEN, nonce) is None                            # not a verdict's exit code


def test_relative_paths_are_the_servers_folder_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    server = _server_key(["--metrics", "burnin.prom"])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert _client_key(["--metrics", "burnin.prom"]) != server                # another file
    assert _client_key(["--metrics", str(tmp_path / "burnin.prom")]) == server


@pytest.mark.parametrize(("text", "port"), [("1 t0ken", 1), ("65535 t0ken\n", 65535), ("0 t0ken", None),
                                            ("65536 t0ken", None), ("-1 t0ken", None), ("80", None),
                                            ("80 tok-en", None), ("", None), ("x80 token", None)])
def test_the_address_file_names_a_port_and_a_token(tmp_path: Path, text: str, port: int | None) -> None:
    address = tmp_path / "probe.addr"
    address.write_text(text, encoding="utf-8")
    address.chmod(0o600)
    assert read_address(str(address)) == (None if port is None else (port, "t0ken"))


@pytest.mark.parametrize(("text", "seconds"), [(None, 60.0), ("", 60.0), ("1", 1.0), ("0.5", 0.5), ("0", 60.0),
                                               ("-3", 60.0), ("nan", 60.0), ("inf", 60.0), ("soon", 60.0),
                                               ("604799", 604799.0), ("604800", 60.0)])
def test_the_wait_for_an_answer_is_a_positive_number_of_seconds(text: str | None, seconds: float) -> None:
    assert wait_seconds(text) == seconds

"""Edges of STO-04's path judge that planted bugs slipped through (bench/mutants on
burnin/storage/pathmtu_judge.py).

Each test pins one decision: which exit statuses are ping's own answers (0, 1, 2:
what it printed is judged) and which mean it did not run, which line of a failing
run's output a reason quotes, the count of requests a partial answer is told
against, a black hole revealed by a single small reply, and a target named by a
host name (pinged over IPv4). The ping texts are the captured iputils
outputs of test_sto04_pathmtu.py, with replies taken out where a test needs fewer.
"""

from __future__ import annotations

import pytest
from test_sto04_pathmtu import FAIL, INCOMPLETE, PASS, REPLIES, SMALL_REPLIES, TOTAL_LOSS, judged, ping

from burnin.storage.pathmtu import ping_argv

TWO_OF_THREE = REPLIES.replace("8980 bytes from 10.20.0.10: icmp_seq=2 ttl=64 time=0.112 ms\n", "") \
    .replace("3 received, 0% packet loss", "2 received, 33.3333% packet loss")
ONE_SMALL_OF_THREE = SMALL_REPLIES.replace("64 bytes from 10.20.0.10: icmp_seq=2 ttl=64 time=0.112 ms\n", "") \
    .replace("64 bytes from 10.20.0.10: icmp_seq=3 ttl=64 time=0.105 ms\n", "") \
    .replace("3 received, 0% packet loss", "1 received, 66.6667% packet loss")


@pytest.mark.parametrize("status", [0, 1, 2])
def test_an_empty_output_of_a_ping_that_answered_is_unreadable(status: int) -> None:
    finding = judged(ping(status=status))
    assert finding.status is INCOMPLETE
    assert finding.note == "ping 10.20.0.10: output unreadable (ping: empty input)"


@pytest.mark.parametrize("status", [126, 137, -9, None])
def test_an_empty_output_with_another_status_is_a_ping_that_did_not_run(status: int | None) -> None:
    finding = judged(ping(status=status))
    assert finding.status is INCOMPLETE
    assert finding.note == f"ping 10.20.0.10: ping did not run (exit status {status})"


def test_another_status_with_output_is_judged_on_the_output() -> None:
    finding = judged(ping(REPLIES, status=137))
    assert finding.status is PASS and finding.measured == "MTU 9000 (8972-byte DF ping: 3/3 answered)"


def test_a_ping_that_did_not_run_is_quoted_by_its_last_line() -> None:
    stderr = ("bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)\n"
              "bash: line 1: ping: command not found\n")
    finding = judged(ping(stderr=stderr, status=127))
    assert finding.status is INCOMPLETE
    assert finding.note == "ping 10.20.0.10: ping did not run (bash: line 1: ping: command not found)"


def test_a_partial_answer_is_told_against_the_requests_sent() -> None:
    finding = judged(ping(TWO_OF_THREE, status=0))
    assert finding.status is PASS and finding.measured == "MTU 9000 (8972-byte DF ping: 2/3 answered)"


def test_replies_without_the_statistics_line_count_themselves() -> None:
    """ping stopped before its summary (killed by the phase's timeout): the reply lines are all there is."""
    cut = REPLIES.split("\n--- ")[0] + "\n"
    finding = judged(ping(cut, status=None))
    assert finding.status is PASS and finding.measured == "MTU 9000 (8972-byte DF ping: 3/3 answered)"


def test_one_small_reply_is_enough_to_reveal_a_black_hole() -> None:
    finding = judged(ping(TOTAL_LOSS.format(errors=""), small=ping(ONE_SMALL_OF_THREE, status=0)))
    assert finding.status is FAIL
    assert finding.measured == ("drops 9000-byte packets (8972-byte DF pings: 0 answered; small pings: 1 answered: "
                                "a hop drops jumbo frames without telling)")


def test_a_target_named_by_host_name_is_pinged_over_ipv4() -> None:
    assert ping_argv("nfs-home.storage.example", 9000)[:6] == ["ping", "-n", "-M", "do", "-s", "8972"]
    assert ping_argv("fd12::2", 9000)[:7] == ["ping", "-6", "-n", "-M", "do", "-s", "8952"]

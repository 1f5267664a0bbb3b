"""Folding node names for people and for gate.json: host names fold, any other name is shown as given."""

from __future__ import annotations

import pytest

from burnin.nodes import expand, fold


def test_host_names_fold_and_expand_back() -> None:
    names = ["sim01", "sim02", "sim04", "gpu-a.rack1"]
    assert fold(names) == "gpu-a.rack1,sim[01-02,04]"
    assert sorted(expand(fold(names))) == sorted(names)
    assert fold([]) == ""


@pytest.mark.parametrize(("names", "shown"), [
    (["a!b"], "a!b"),  # ClusterShell: a minus b, printed "a"
    (["gpu["], "gpu["),  # ClusterShell: a parse error (a crash)
    (["n1", "n2", "a!b", "gpu[", "x y"], "n[1-2],a!b,gpu[,x y"),
    (["n1\n", "n2"], "n2,n1\n"),  # a trailing newline is no host name
    (["@rack"], "@rack"),  # not a group to look up
    (["a" * 254], "a" * 254),  # longer than a host name
])
def test_names_that_are_no_host_names_are_shown_as_given(names: list[str], shown: str) -> None:
    assert fold(names) == shown

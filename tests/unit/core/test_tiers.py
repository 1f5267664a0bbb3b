"""The test tiers (tests/tiers.py): the fast tier's guard, and the order and groups it gives xdist."""

from __future__ import annotations

import pytest

# These tests start processes on purpose (the tests they run do): they are not fast themselves.
pytestmark = pytest.mark.proc

SPAWN = "import subprocess, sys\n\ndef spawn():\n    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_one=source)
    return pytester.runpytest("-p", "tiers", "-p", "no:cacheprovider", "--strict-markers", *args)


def test_a_fast_test_that_starts_a_process_fails_and_names_the_marker(pytester: pytest.Pytester) -> None:
    result = _run(pytester, SPAWN + "def test_spawns():\n    spawn()\n\ndef test_pure():\n    assert 1 + 1 == 2\n")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*a fast-tier test starts a process (*) during the test*@pytest.mark.proc*"])


def test_the_same_test_in_its_tier_passes(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "import pytest\n" + SPAWN + "@pytest.mark.proc\ndef test_spawns():\n    spawn()\n",
                  "-m", "proc")
    result.assert_outcomes(passed=1)


def test_a_fast_test_that_renders_a_simulated_node_fails(pytester: pytest.Pytester) -> None:
    source = ("from burnin.sim.sysfs import Tree\nfrom burnin.sim.writer import sync_tree\n\n"
              "def test_renders(tmp_path):\n    tree = Tree()\n    tree.file('a/b', 'x')\n"
              "    sync_tree(tmp_path, 'node', tree)\n")
    result = _run(pytester, source)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*a fast-tier test renders a simulated node (*)*"])


def test_every_fast_test_using_an_impure_module_fixture_fails_not_only_the_first(
        pytester: pytest.Pytester) -> None:
    source = ("import pytest\n" + SPAWN + "@pytest.fixture(scope='module')\ndef lab():\n    spawn()\n\n"
              "def test_one(lab):\n    pass\n\ndef test_two(lab):\n    pass\n\ndef test_pure():\n    pass\n")
    result = _run(pytester, source)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_two*", "*uses fixture 'lab', which starts a process*"])


def test_a_module_fixture_first_set_up_by_a_slower_tier_still_fails_the_fast_tests(
        pytester: pytest.Pytester) -> None:
    source = ("import pytest\n" + SPAWN + "@pytest.fixture(scope='module')\ndef lab():\n    spawn()\n\n"
              "@pytest.mark.rack\ndef test_rack(lab):\n    pass\n\ndef test_fast(lab):\n    pass\n")
    result = _run(pytester, source)
    result.assert_outcomes(passed=1, errors=1)


def test_a_session_fixture_is_an_input_built_once_and_not_charged(pytester: pytest.Pytester) -> None:
    source = ("import pytest\n" + SPAWN + "@pytest.fixture(scope='session')\ndef facts():\n    spawn()\n"
              "    return {}\n\ndef test_one(facts):\n    pass\n\ndef test_two(facts):\n    pass\n")
    _run(pytester, source).assert_outcomes(passed=2)


def test_every_test_gets_one_tier_and_the_slowest_modules_go_first(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a_fast="def test_a():\n    pass\n",
        test_b_rack="import pytest\npytestmark = pytest.mark.rack\n\ndef test_b():\n    pass\n",
        test_c_short="import pytest\n\n@pytest.mark.slow(minutes=1)\n@pytest.mark.proc\ndef test_c():\n    pass\n",
        test_d_long=("import pytest\n\n@pytest.fixture(scope='module')\ndef lab():\n    return 1\n\n"
                     "@pytest.mark.slow(minutes=6)\n@pytest.mark.rack\ndef test_d1(lab):\n    pass\n\n"
                     "@pytest.mark.rack\ndef test_d2(lab):\n    pass\n\ndef test_d3():\n    pass\n"),
    )
    recorder = pytester.inline_run("--collect-only", "-p", "tiers", "-p", "no:cacheprovider")
    items = recorder.getcalls("pytest_collection_finish")[0].session.items
    assert [item.name for item in items] == ["test_d1", "test_d2", "test_d3", "test_c", "test_b", "test_a"]
    assert [item.name for item in items if item.get_closest_marker("fast")] == ["test_d3", "test_a"]
    grouped = {item.name: mark.args[0] for item in items if (mark := item.get_closest_marker("xdist_group"))}
    assert grouped == {"test_d1": "module:test_d_long.py", "test_d2": "module:test_d_long.py"}


LAB_CONFTEST = """\
import pytest
from folder_labs import folder_lab

@pytest.fixture(scope="session")
def topology(log):
    yield "an input, not a lab: it lives to the end"
    log("input-down")

@folder_lab
def lab(log, topology):
    log("up")
    yield "lab"
    log("down")
"""
ROOT_CONFTEST = """\
import pytest

@pytest.fixture(scope="session")
def log(pytestconfig):
    path = pytestconfig.rootpath / "events.log"
    return lambda what: path.open("a").write(what + "\\n")
"""


def _lab_folders(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ROOT_CONFTEST)
    pytester.mkdir("lab")
    pytester.path.joinpath("lab", "conftest.py").write_text(LAB_CONFTEST)
    pytester.path.joinpath("lab", "test_one.py").write_text(
        "import pytest\npytestmark = pytest.mark.rack\n\n"
        "def test_1(lab, log):\n    log('test_1')\n\ndef test_2(lab, log):\n    log('test_2')\n")
    pytester.path.joinpath("lab", "test_three.py").write_text(
        "import pytest\npytestmark = pytest.mark.rack\n\ndef test_4(lab, log):\n    log('test_4')\n")
    pytester.mkdir("other")
    pytester.path.joinpath("other", "test_two.py").write_text("def test_3(log):\n    log('test_3')\n")


def test_a_folders_session_lab_ends_when_the_worker_leaves_the_folder(pytester: pytest.Pytester) -> None:
    _lab_folders(pytester)
    result = pytester.runpytest("-p", "tiers", "-p", "folder_labs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert (pytester.path / "events.log").read_text().split() == [
        "up", "test_1", "test_2", "test_4", "down", "test_3", "input-down"]


def test_a_folders_lab_asked_for_again_after_leaving_starts_again(pytester: pytest.Pytester) -> None:
    _lab_folders(pytester)
    result = pytester.runpytest("-p", "folder_labs", "-p", "no:cacheprovider",  # in this order, not tiers'
                                "lab/test_one.py::test_1", "other/test_two.py::test_3", "lab/test_three.py")
    result.assert_outcomes(passed=3)
    assert (pytester.path / "events.log").read_text().split() == [
        "up", "test_1", "down", "test_3", "up", "test_4", "down", "input-down"]


def test_a_folders_lab_users_are_one_xdist_group(pytester: pytest.Pytester) -> None:
    _lab_folders(pytester)
    recorder = pytester.inline_run("--collect-only", "-p", "tiers", "-p", "folder_labs", "-p", "no:cacheprovider")
    items = recorder.getcalls("pytest_collection_finish")[0].session.items
    grouped = {item.name: mark.args[0] for item in items if (mark := item.get_closest_marker("xdist_group"))}
    assert grouped == {"test_1": "folder:lab", "test_2": "folder:lab", "test_4": "folder:lab"}


def test_a_grouped_test_whose_parameter_id_holds_an_at_sign_keeps_its_group(pytester: pytest.Pytester) -> None:
    """xdist reads a test's group after the last "@" past its last "]": ``[pcie-x8@gpu3]`` alone would send each
    parameter to any worker, and each worker would build the module's rack again (it did: three times)."""
    pytester.makeconftest("def pytest_configure(config):\n    config.option.loadgroup = True  # as xdist's workers\n")
    pytester.makepyfile(test_rack=(
        "import pytest\npytestmark = pytest.mark.rack\n\n@pytest.fixture(scope='module')\ndef rack():\n    return 1\n\n"
        "@pytest.mark.parametrize('fault', ['pcie-x8@gpu3', 'xid:13@gpu1', 'plain'])\n"
        "def test_fault(rack, fault):\n    pass\n"))
    recorder = pytester.inline_run("--collect-only", "-p", "tiers", "-p", "no:cacheprovider")
    items = recorder.getcalls("pytest_collection_finish")[0].session.items
    assert [item.nodeid for item in items] == [
        f"test_rack.py::test_fault[{fault}]@module:test_rack.py" for fault in ("pcie-x8@gpu3", "xid:13@gpu1", "plain")]

"""The collector payload runs on a bare python3, from stdin or as a zipapp file."""

from __future__ import annotations

import importlib.util
import io
import json
import marshal
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from burnin.transport.payload import BOOTSTRAP, collector_zipapp, stdin_argv, stdin_command


def _bare_python() -> str:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no python3")


@pytest.mark.proc
def test_runs_from_stdin_and_writes_nothing(tmp_path: Path) -> None:
    argv = stdin_argv(_bare_python(), ("--sources", "numa,kernel", "--root", str(tmp_path)))
    proc = subprocess.run(argv, input=collector_zipapp(), capture_output=True, cwd=tmp_path, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert set(facts["sources"]) == {"numa", "kernel"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.proc
def test_runs_as_a_zipapp_file(tmp_path: Path) -> None:
    path = tmp_path / "collector.pyz"
    path.write_bytes(collector_zipapp())
    proc = subprocess.run([_bare_python(), str(path), "--sources", "numa"], capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sources"]["numa"]["ok"]


def test_payload_is_deterministic_and_shell_safe() -> None:
    assert collector_zipapp() == collector_zipapp()
    command = stdin_command(args=("--sources", "all"))
    assert command.startswith("python3 -c '") and command.endswith(" --sources all")


def _module_file_from(zip_bytes: bytes, tmp_path: Path, *, stdin: bool) -> str:
    """Where the collector's core module came from when a bare python3 imported it from ``zip_bytes``: the zip's
    ``.pyc`` or ``.py`` entry (zipimport names it in ``__file__``; the stdin loader is told to, below)."""
    if stdin:
        boot = BOOTSTRAP.replace("from burnin.collector.core import run\nrun(sys.argv[1:])\n",
                                 "import burnin.collector.core as c\nprint(c.__file__)\n")
        said = "  m.__file__=f+'c' if c[:4]==importlib.util.MAGIC_NUMBER else f\n"
        boot = boot.replace("  c=marshal", said + "  c=marshal")
        proc = subprocess.run([_bare_python(), "-c", boot], input=zip_bytes, capture_output=True, timeout=60,
                              check=False)
    else:
        path = tmp_path / "collector.pyz"
        path.write_bytes(zip_bytes)
        code = "import sys; sys.path.insert(0, sys.argv[1]); import burnin.collector.core as c; print(c.__file__)"
        proc = subprocess.run([_bare_python(), "-c", code, str(path)], capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode().strip()


def _with_foreign_bytecode(zip_bytes: bytes) -> bytes:
    """The same zip, its bytecode marked for another Python (a node whose python3 is older or newer)."""
    source = zipfile.ZipFile(io.BytesIO(zip_bytes))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            data = source.read(info)
            archive.writestr(info, b"\x00\x00\r\n" + data[4:] if info.filename.endswith(".pyc") else data)
    return buffer.getvalue()


def test_every_module_travels_with_its_bytecode_for_this_interpreter() -> None:
    archive = zipfile.ZipFile(io.BytesIO(collector_zipapp()))
    names = set(archive.namelist())
    sources = {name for name in names if name.endswith(".py")}
    assert {"pynvml.py", "burnin/collector/core.py", "__main__.py"} <= sources
    assert names == sources | {name + "c" for name in sources}
    for name in sources:
        compiled = archive.read(name + "c")
        assert compiled[:4] == importlib.util.MAGIC_NUMBER and compiled[4:8] == (1).to_bytes(4, "little"), name
        assert compiled[8:16] == importlib.util.source_hash(archive.read(name)), name
        assert marshal.loads(compiled[16:]).co_filename == name


@pytest.mark.proc
@pytest.mark.parametrize("stdin", [False, True], ids=["zipapp", "stdin"])
def test_a_node_python_of_the_same_version_runs_the_bytecode_and_another_compiles_the_sources(
        tmp_path: Path, stdin: bool) -> None:
    bare = subprocess.run([_bare_python(), "-c", "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    if bare != importlib.util.MAGIC_NUMBER.hex():
        pytest.skip(f"{_bare_python()} has another bytecode version than this interpreter")
    assert _module_file_from(collector_zipapp(), tmp_path, stdin=stdin).endswith("burnin/collector/core.pyc")
    assert _module_file_from(_with_foreign_bytecode(collector_zipapp()), tmp_path,
                             stdin=stdin).endswith("burnin/collector/core.py")


@pytest.mark.proc
def test_the_collector_imports_no_typing_and_no_shutil(tmp_path: Path) -> None:
    """Every gathering and every soak sample starts the collector: it leaves out what only annotations or
    ``shutil.which`` would pull in (typing ~5 ms, shutil's archive modules ~2.4 ms a start)."""
    path = tmp_path / "collector.pyz"
    path.write_bytes(collector_zipapp())
    code = (f"import sys; sys.path.insert(0, {str(path)!r}); import burnin.collector.core; "
            "print(' '.join(sorted(sys.modules)))")
    proc = subprocess.run([_bare_python(), "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    modules = set(proc.stdout.split())
    assert "burnin.collector.storage" in modules and "pynvml" not in modules  # pynvml loads with the nvml source
    assert not modules & {"typing", "shutil"}, sorted(modules & {"typing", "shutil"})


def _fresh_zipapp(monkeypatch: pytest.MonkeyPatch, cache: Path) -> bytes:
    from burnin.transport import payload

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    payload.collector_zipapp.cache_clear()
    try:
        return payload.collector_zipapp()
    finally:
        payload.collector_zipapp.cache_clear()


def test_the_built_zipapp_is_kept_in_the_cache_and_read_back(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from burnin.transport import payload

    built = _fresh_zipapp(monkeypatch, tmp_path)
    (kept,) = (tmp_path / "burnin" / "collector").glob("collector-*.pyz")
    assert kept.read_bytes() == built == payload._build(payload._sources())
    compiled: list[str] = []

    def compile_counted(name: str, source: bytes, **kw: bool) -> bytes:
        compiled.append(name)
        return b""

    monkeypatch.setattr(payload, "bytecode", compile_counted)
    assert _fresh_zipapp(monkeypatch, tmp_path) == built and not compiled  # read back, nothing compiled


@pytest.mark.parametrize("damage", ["truncated", "source changed", "bytecode header changed", "not a zip"])
def test_a_damaged_cached_zipapp_is_built_again_and_replaced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             damage: str) -> None:
    built = _fresh_zipapp(monkeypatch, tmp_path)
    (kept,) = (tmp_path / "burnin" / "collector").glob("collector-*.pyz")
    if damage == "truncated":
        kept.write_bytes(built[:len(built) // 2])
    elif damage == "not a zip":
        kept.write_bytes(b"#!/bin/sh\necho pwned\n")
    else:
        entries = {}
        with zipfile.ZipFile(io.BytesIO(built)) as archive:
            entries = {name: archive.read(name) for name in archive.namelist()}
        if damage == "source changed":
            entries["burnin/collector/core.py"] += b"\nprint('not what this burnin ships')\n"
        else:
            entries["pynvml.pyc"] = entries["pynvml.pyc"][:8] + bytes(8) + entries["pynvml.pyc"][16:]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, content in entries.items():
                archive.writestr(name, content)
        kept.write_bytes(buffer.getvalue())
    assert _fresh_zipapp(monkeypatch, tmp_path) == built
    assert kept.read_bytes() == built


def test_an_unwritable_cache_costs_only_the_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's folder would go")
    built = _fresh_zipapp(monkeypatch, blocker)
    assert zipfile.ZipFile(io.BytesIO(built)).read("__main__.py").startswith(b"from burnin.collector")
    assert blocker.read_text() == "a file where the cache's folder would go"


def test_a_new_zipapp_replaces_the_one_an_older_burnin_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "burnin" / "collector"
    folder.mkdir(parents=True)
    older = folder / "collector-0123456789abcdef0123456789abcdef.pyz"
    older.write_bytes(b"an older burnin's zipapp")
    built = _fresh_zipapp(monkeypatch, tmp_path)
    assert [p.read_bytes() for p in folder.glob("collector-*.pyz")] == [built]


def test_no_home_to_keep_it_in_costs_only_the_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from burnin.transport import payload

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    payload.collector_zipapp.cache_clear()
    try:
        assert payload.collector_zipapp() == payload._build(payload._sources())
    finally:
        payload.collector_zipapp.cache_clear()

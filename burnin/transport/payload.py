"""The collector as a self-contained payload for nodes that have only python3.

``collector_zipapp()`` is a zip of ``burnin.collector`` plus pynvml (pure
Python) with a ``__main__``: Slurm ships it as a file with sbcast and runs
``python3 FILE``. Over SSH nothing is written on the node: ``stdin_command()``
is a ``python3 -c`` bootstrap that reads the zip from stdin and imports from
memory (its loader also answers ``get_source``: the ``sdc`` source runs a module's text in a process of
its own).

Beside each module's source the zip holds its bytecode for the interpreter that built it (an unchecked
hash-based ``.pyc``, PEP 552): a node whose python3 has the same bytecode version imports that instead of
compiling the sources (pynvml alone is 8,000 lines: 58 ms of CPU on every gathering and every soak sample
over SSH or Slurm); any other python3 finds a foreign magic number and compiles the sources, as
``zipimport`` and the stdin loader both do.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import marshal
import shlex
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path

import burnin
from burnin import resources
from burnin.atomic import write_bytes_atomic

_MAIN = "from burnin.collector.core import run\nrun()\n"
_UNCHECKED = (0b01).to_bytes(4, "little")  # PEP 552 flags of the zip's bytecode: hash-based, not checked

# Runs on the node: import the collector from a zip held in memory, then run it.
BOOTSTRAP = """\
import sys,io,zipfile,marshal,importlib.abc,importlib.util
z=zipfile.ZipFile(io.BytesIO(sys.stdin.buffer.read()))
n=set(z.namelist())
class F(importlib.abc.MetaPathFinder,importlib.abc.Loader):
 def find_spec(s,name,path,target=None):
  b=name.replace('.','/')
  if b+'/__init__.py' in n:return importlib.util.spec_from_loader(name,s,is_package=True)
  if b+'.py' in n:return importlib.util.spec_from_loader(name,s)
  return None
 def create_module(s,spec):return None
 def get_source(s,name):
  b=name.replace('.','/');return z.read(b+'/__init__.py' if b+'/__init__.py' in n else b+'.py').decode()
 def exec_module(s,m):
  b=m.__name__.replace('.','/');f=b+'/__init__.py'
  if f in n:m.__path__=[]
  else:f=b+'.py'
  c=z.read(f+'c') if f+'c' in n else b''
  c=marshal.loads(c[16:]) if c[:4]==importlib.util.MAGIC_NUMBER else compile(z.read(f),'<burnin>/'+f,'exec')
  exec(c,m.__dict__)
sys.meta_path.insert(0,F())
from burnin.collector.core import run
run(sys.argv[1:])
"""


def _sources() -> list[tuple[str, bytes]]:
    spec = importlib.util.find_spec("pynvml")  # its file, not its import (~25 ms the controller never needs)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("pynvml is not installed: the collector payload carries it to the nodes")
    package = Path(burnin.__file__).resolve().parent
    files = [("burnin/__init__.py", (package / "__init__.py").read_bytes())]
    for path in sorted((package / "collector").glob("*.py")):
        files.append((f"burnin/collector/{path.name}", path.read_bytes()))
    files.append(("pynvml.py", Path(spec.origin).read_bytes()))
    files.append(("__main__.py", _MAIN.encode()))
    return files


def bytecode(name: str, source: bytes, *, checked: bool = False) -> bytes:
    """``source`` compiled by this interpreter, as a hash-based ``.pyc`` (PEP 552: magic number, flags, the
    source's hash, the marshalled code). Unchecked (flags 0b01), what ``zipimport`` and :data:`BOOTSTRAP` run in
    place of the source when the node's python3 has this magic number; ``checked`` (0b11), what the import system
    uses only while the source still has that hash (the simulator's tools, ``burnin.sim.bytecode``)."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    flags = (0b11).to_bytes(4, "little") if checked else _UNCHECKED
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source) + marshal.dumps(code)


@lru_cache(maxsize=1)
def collector_zipapp() -> bytes:
    """The collector zipapp's bytes (deterministic: same sources, same bytes).

    Building it compiles every module (~150 ms of CPU, pynvml most of it), once per burnin process; the
    result is kept in the user's cache (:func:`cache_file`, named by the interpreter's bytecode version and
    the sources' digest) and read back while it still holds these sources and their bytecode headers, its
    entries' CRCs intact. A cache that cannot be read or written only costs the build."""
    files = _sources()
    path = cache_file(files)
    cached = _read_cached(path, files) if path is not None else None
    if cached is not None:
        return cached
    built = _build(files)
    if path is not None:
        with contextlib.suppress(OSError):
            write_bytes_atomic(path, built)
            for other in path.parent.glob("collector-*.pyz"):  # another burnin's: kept until it is built again
                if other != path:
                    other.unlink(missing_ok=True)
    return built


def cache_file(files: list[tuple[str, bytes]]) -> Path | None:
    """Where the zipapp of ``files`` is kept (None: no home to keep it in)."""
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for name, data in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    try:
        folder = resources.cache_dir("collector")
    except RuntimeError:  # no HOME, and no passwd entry to find it
        return None
    return folder / f"collector-{digest.hexdigest()[:32]}.pyz"


def _read_cached(path: Path, files: list[tuple[str, bytes]]) -> bytes | None:
    try:
        data = path.read_bytes()
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if sorted(archive.namelist()) != sorted(n for name, _ in files for n in (name, name + "c")):
                return None
            for name, source in files:  # read() checks each entry's CRC
                header = importlib.util.MAGIC_NUMBER + _UNCHECKED + importlib.util.source_hash(source)
                if archive.read(name) != source or archive.read(name + "c")[:16] != header:
                    return None
    except (OSError, zipfile.BadZipFile, zlib.error, ValueError):
        return None
    return data


def _build(files: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            for entry, content in ((name, data), (name + "c", bytecode(name, data))):
                info = zipfile.ZipInfo(entry, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, content)
    return buffer.getvalue()


def zipapp_digest() -> str:
    return hashlib.sha256(collector_zipapp()).hexdigest()[:16]


def stdin_command(python: str = "python3", args: tuple[str, ...] = ()) -> str:
    """Shell command line that runs the collector from a zip sent on stdin."""
    return " ".join([shlex.quote(python), "-c", shlex.quote(BOOTSTRAP), *map(shlex.quote, args)])


def stdin_argv(python: str = "python3", args: tuple[str, ...] = ()) -> list[str]:
    """The same as an argv list, for transports that take argv."""
    return [python, "-c", BOOTSTRAP, *args]

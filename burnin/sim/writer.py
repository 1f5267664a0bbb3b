"""Write rendered trees to disk: fast for new nodes, incremental and atomic per file for live ones.

A new directory is created under a temporary name and renamed into place. An
existing one (a node a collector may be reading right now) is synchronised:
unchanged files are left alone, changed files and links are replaced with a
rename from a scratch directory outside the tree (so no temporary name ever
shows up in a directory listing), and paths the new state lacks are removed.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from burnin.sim.sysfs import Tree


def write_text(path: str, text: str | bytes, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, text.encode() if isinstance(text, str) else text)
    finally:
        os.close(fd)
    if mode != 0o644:
        os.chmod(path, mode)  # the umask may have trimmed the mode at creation


def replace_file(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    """Write ``path`` atomically (temporary file in the same directory, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    write_text(str(tmp), text, mode)
    os.replace(tmp, path)


def _dirs_of(tree: Tree) -> set[str]:
    dirs: set[str] = set()
    for path in (*tree.files, *tree.links, *(d + "/" for d in tree.dirs)):
        parent = path.rpartition("/")[0]
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    return dirs


def _materialize(base: Path, tree: Tree, mode: int) -> None:
    prefix = str(base) + "/"
    os.mkdir(base)
    for directory in sorted(_dirs_of(tree)):
        os.mkdir(prefix + directory)
    for path, text in tree.files.items():
        write_text(prefix + path, text, mode)
    for path, target in tree.links.items():
        os.symlink(target, prefix + path)


def _scan(base: str, rel: str, files: set[str], links: dict[str, str], dirs: set[str]) -> None:
    with os.scandir(os.path.join(base, rel) if rel else base) as entries:
        for entry in entries:
            if entry.name == "__pycache__":
                continue  # the tools' bytecode (burnin.sim.bytecode): written beside a tree, never part of it
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink():
                links[path] = os.readlink(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                dirs.add(path)
                _scan(base, path, files, links, dirs)
            else:
                files.add(path)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _sync(base: Path, tree: Tree, mode: int, scratch: Path) -> None:
    root = str(base)
    files: set[str] = set()
    links: dict[str, str] = {}
    dirs: set[str] = set()
    _scan(root, "", files, links, dirs)
    wanted_dirs = _dirs_of(tree)
    for path in sorted(wanted_dirs):
        if path in files or path in links:
            _remove(f"{root}/{path}")
        if path not in dirs:
            os.makedirs(f"{root}/{path}", exist_ok=True)
    # Stale entries go first: a directory that becomes a link (to a kernel file: a lab node's netdevs) is
    # removed before the link exists, so nothing is ever unlinked through it.
    for path in [*(p for p in files if p not in tree.files), *(p for p in links if p not in tree.links)]:
        _remove(f"{root}/{path}")
    for path in sorted(dirs - wanted_dirs, key=len, reverse=True):
        _remove(f"{root}/{path}")
    counter = 0
    for path, text in tree.files.items():
        full = f"{root}/{path}"
        if path in files and _read(full) == text:
            continue
        if path in dirs or path in links:
            _remove(full)
        counter += 1
        tmp = f"{scratch}/{counter}"
        write_text(tmp, text, mode)
        os.replace(tmp, full)
    for path, target in tree.links.items():
        full = f"{root}/{path}"
        if links.get(path) == target:
            continue
        if path in dirs or path in files:
            _remove(full)
        counter += 1
        tmp = f"{scratch}/{counter}"
        os.symlink(target, tmp)
        os.replace(tmp, full)


def sync_tree(parent: Path, name: str, tree: Tree, mode: int = 0o644) -> None:
    """Make ``parent/name`` hold exactly ``tree``."""
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    final = parent / name
    if not final.is_dir():
        fresh = parent / f".{name}.new-{tag}"
        _materialize(fresh, tree, mode)
        if final.exists() or final.is_symlink():
            _remove(str(final))
        os.rename(fresh, final)
        return
    scratch = parent / f".{name}.sync-{tag}"
    scratch.mkdir()
    try:
        _sync(final, tree, mode, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

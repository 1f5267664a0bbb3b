"""Where the tests' temporary trees go: tmpfs when the machine has room (tests/conftest.py)."""

from __future__ import annotations

import os

TMPFS_ROOT = "/dev/shm"
TMPFS_ROOM_NEEDED = 4 << 30


def tmpfs_temproot(root: str = TMPFS_ROOT, needed: int = TMPFS_ROOM_NEEDED) -> str | None:
    """``root`` when it is a writable folder with ``needed`` bytes free (a tmpfs), else None."""
    try:
        stats = os.statvfs(root)
    except OSError:
        return None
    return root if os.access(root, os.W_OK) and stats.f_bavail * stats.f_frsize >= needed else None

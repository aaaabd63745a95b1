"""File-system helpers shared by every writer of durable files (config, auth.json, seeds)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path | str, data: str | bytes, *, mode: int = 0o600) -> None:
    """Replace *path* with *data* so that readers see the old file or the new one, never half.

    The data goes to a temporary file in the same directory (same file system, so the
    rename is atomic), is flushed and fsynced, gets *mode* before it becomes visible, and
    is renamed over the target. On any failure the temporary file is removed and the
    original is left exactly as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself; best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

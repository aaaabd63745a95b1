"""The shared memory contract, run against the SQLite backend on a real file."""

from __future__ import annotations

from pathlib import Path

from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.testing import MemoryBackendContract


class TestSqliteMemoryContract(MemoryBackendContract):
    async def make_backend(self, tmp_path: Path) -> SqliteMemoryBackend:
        return await SqliteMemoryBackend.open(tmp_path / "memory.db")

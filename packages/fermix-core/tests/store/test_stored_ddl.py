"""The stored schema statements are exactly what the models compile to.

A fresh ``memory.db`` is created from :mod:`fermix_core.store.ddl` without SQLAlchemy;
these tests keep that file and :mod:`fermix_core.store.models` from drifting apart.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from fermix_core.store import ddl
from fermix_core.store.schema import create_current_schema


def _master(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
    return [tuple(row) for row in rows]


def test_the_stored_statements_are_the_models_compiled() -> None:
    assert ddl.compile_from_models() == ddl.STATEMENTS, (
        "the models changed: regenerate fermix_core/store/ddl.py from "
        "`python -m fermix_core.store.ddl`"
    )


def test_a_database_from_the_stored_statements_equals_one_from_the_models(tmp_path) -> None:
    stored = sqlite3.connect(tmp_path / "stored.db")
    create_current_schema(stored)
    compiled = sqlite3.connect(tmp_path / "compiled.db")
    for statement in ddl.compile_from_models():
        compiled.execute(statement)
    assert _master(stored) == _master(compiled)
    assert {name for kind, name, _ in _master(stored) if kind == "table"} >= {
        "conversations",
        "turns",
        "messages",
        "counters",
        "schema_version",
    }
    create_current_schema(stored)  # IF NOT EXISTS: running it again changes nothing
    assert _master(stored) == _master(compiled)


def test_opening_a_fresh_store_imports_no_sqlalchemy(tmp_path: Path) -> None:
    script = (
        "import sys, anyio\n"
        "from fermix_core.store import ConversationStore\n"
        "async def main():\n"
        f"    store = await ConversationStore.open({str(tmp_path / 'memory.db')!r})\n"
        "    await store.close()\n"
        "anyio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'sqlmodel')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    tables = sqlite3.connect(tmp_path / "memory.db").execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"
    )
    assert "messages" in {name for (name,) in tables}

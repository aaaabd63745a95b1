"""A damaged home ends `fermix ask` with one line saying what is wrong and what to do.

Each case ended in a Python traceback before. The CLI runs as a real process; the files
it complains about are left exactly as they were.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest


def fermix(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home.parent),
        "FERMIX_HOME": str(home),
        "LANG": "C.UTF-8",
    }
    return subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("fermix:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "fermix"
    home.mkdir(mode=0o700)
    return home


def _valid_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (component TEXT PRIMARY KEY, version INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES ('conversations', 1), ('memory', 1)")
    conn.execute("CREATE TABLE filler (x TEXT)")
    conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 200,)] * 200)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_memory_db(home, damage) -> None:
    db = home / "memory.db"
    if damage == "garbage":
        db.write_bytes(os.urandom(3000))
    else:
        _valid_db(db)
        db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    before = db.read_bytes()
    line = one_line(fermix(home, "ask", "hi"))
    assert "memory.db" in line and ("move it aside" in line or "backup" in line)
    assert db.read_bytes() == before


def test_a_newer_schema(home) -> None:
    db = home / "memory.db"
    _valid_db(db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    line = one_line(fermix(home, "ask", "hi"))
    assert "version 99" in line and "upgrade" in line
    assert db.read_bytes() == before


def test_memory_db_is_a_directory(home) -> None:
    (home / "memory.db").mkdir()
    (home / "memory.db" / "keep").write_text("mine")
    line = one_line(fermix(home, "ask", "hi"))
    assert "is a directory" in line and "mv " in line
    assert (home / "memory.db" / "keep").read_text() == "mine"


def test_auth_json_readable_by_others(home) -> None:
    auth = home / "auth.json"
    auth.write_text("{}\n")
    auth.chmod(0o644)
    line = one_line(fermix(home, "ask", "hi"))
    assert "chmod 600" in line
    assert auth.read_text() == "{}\n" and (auth.stat().st_mode & 0o777) == 0o644


def _frame(conn: socket.socket) -> dict:
    header = _exactly(conn, 4)
    return json.loads(_exactly(conn, struct.unpack(">I", header)[0]))


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        assert chunk, "the client hung up"
        data += chunk
    return data


def test_a_daemon_killed_mid_ask(home) -> None:
    """The daemon answers the handshake, takes the ask, then dies: the connection closes
    without an answer, as the kernel closes a SIGKILLed daemon's sockets."""
    from fermix_core.daemon.protocol import PROTOCOL_VERSION, encode

    path = home / "daemon.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    methods: list[str] = []

    def die_mid_request() -> None:
        conn, _ = server.accept()
        with conn:
            hello = _frame(conn)
            methods.append(hello["method"])
            result = {"protocol": PROTOCOL_VERSION, "version": "0", "pid": 1, "methods": ["ask"]}
            conn.sendall(encode({"v": PROTOCOL_VERSION, "id": hello["id"], "result": result}))
            methods.append(_frame(conn)["method"])

    thread = threading.Thread(target=die_mid_request, daemon=True)
    thread.start()
    try:
        line = one_line(fermix(home, "ask", "hi"))
    finally:
        server.close()
        thread.join(timeout=10)
    assert methods == ["hello", "ask"]
    assert "daemon stopped before it answered" in line and "fermix start" in line

"""A real process committing turns, killed with SIGKILL in the middle of a commit or a start.

The child pauses inside the commit transaction (after the reply rows are inserted, before
``COMMIT``) by blocking on its standard input, and says so on standard output; the parent
kills it on that line. No sleeps: every step waits on a line the child printed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message
from fermix_core.store import ConversationStore

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

TURNS = 12

CHILD = r"""
import sys
from pathlib import Path

import anyio
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message
from fermix_core.messages import Message, ToolCall, ToolResult, Usage
from fermix_core.store import ConversationStore


async def main() -> None:
    store = await ConversationStore.open(Path(sys.argv[1]))
    cid = await store.conversation_id(ConversationKey("cli", "durable"))
    for i in range(int(sys.argv[2])):
        handle = await store.begin_turn(
            cid, Message.user(f"q{i}"), speaker="owner", sender_id="me", session_id="main-1"
        )
        produced = [
            Message.assistant(tool_calls=[ToolCall(id=f"c{i}", name="echo")]),
            Message.tool(ToolResult(call_id=f"c{i}", name="echo", content=f"r{i}")),
            Message.assistant(f"a{i}"),
        ]
        await store.commit_turn(handle.turn_id, produced, usage=Usage(), model="m", provider="p")
        print(f"COMMITTED {handle.turn_id}", flush=True)
    handle = await store.begin_turn(
        cid, Message.user("doomed"), speaker="owner", sender_id="me", session_id="main-1"
    )
    print(f"BEGUN {handle.turn_id}", flush=True)

    def stall(ids: list[int]) -> None:
        print(f"INSIDE {len(ids)}", flush=True)
        sys.stdin.read()  # the parent never writes: we are killed here

    store._sync._after_insert = stall
    await store.commit_turn(
        handle.turn_id,
        [Message.assistant(f"never {n}") for n in range(5)],
        usage=Usage(),
        model="m",
        provider="p",
    )
    print("UNREACHABLE", flush=True)


anyio.run(main)
"""


@contextmanager
def _child(tmp_path: Path, source: str, db: Path) -> Iterator[subprocess.Popen[str]]:
    """The child *source* run on *db*, waited for and its pipes closed however the test ends."""
    script = tmp_path / "child.py"
    script.write_text(source)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(TURNS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_sigkill_mid_commit_loses_nothing_committed(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    with _child(tmp_path, CHILD, db) as proc:
        committed: list[int] = []
        doomed = None
        inside = None
        assert proc.stdout is not None
        for line in proc.stdout:
            word, _, value = line.strip().partition(" ")
            if word == "COMMITTED":
                committed.append(int(value))
            elif word == "BEGUN":
                doomed = int(value)
            elif word == "INSIDE":
                inside = int(value)
                break
        else:
            pytest.fail(f"child ended early: {proc.stderr.read() if proc.stderr else ''}")
        # While the child holds its transaction open, another reader sees none of it.
        reader = sqlite3.connect(db)
        try:
            visible = reader.execute(
                "SELECT COUNT(*) FROM messages WHERE turn_id = ?", (doomed,)
            ).fetchone()[0]
        finally:
            reader.close()
        assert visible == 1
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert len(committed) == TURNS and doomed is not None and inside == 5

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        statuses = dict(conn.execute("SELECT id, status FROM turns"))
        assert {t: statuses[t] for t in committed} == dict.fromkeys(committed, "committed")
        assert statuses[doomed] == "started"
        per_turn = dict(
            conn.execute("SELECT turn_id, COUNT(*) FROM messages GROUP BY turn_id").fetchall()
        )
        assert all(per_turn[t] == 4 for t in committed), "question, call, result, answer"
        assert per_turn[doomed] == 1, "only the user message of the half-done turn"
        assert (
            conn.execute("SELECT COUNT(*) FROM messages WHERE text LIKE 'never%'").fetchone()[0]
            == 0
        )
    finally:
        conn.close()

    async def reopen() -> None:
        async with await ConversationStore.open(db) as store:
            cid = await store.conversation_id(ConversationKey("cli", "durable"))
            window = await store.load_window(cid)
            answers = [
                m.message.text for m in window if m.message.role == "assistant" and m.message.text
            ]
            assert answers == [f"a{i}" for i in range(TURNS)]
            assert window[-1].message.text == "doomed"
            assert await store.append_marker(cid, "stopped") is True

    anyio.run(reopen)


START_CHILD = r"""
import sys
from pathlib import Path

import anyio
from fermix_core.channel import ConversationKey
from fermix_core.messages import Message
from fermix_core.messages import Message, ToolCall, ToolResult, Usage
from fermix_core.store import ConversationStore
from fermix_core.store.engine import SyncStore


async def main() -> None:
    store = await ConversationStore.open(Path(sys.argv[1]))
    cid = await store.conversation_id(ConversationKey("cli", "durable"))
    for i in range(int(sys.argv[2])):
        start = await store.start_turn(cid, Message.user(f"q{i}"), speaker="owner", sender_id="me")
        produced = [
            Message.assistant(tool_calls=[ToolCall(id=f"c{i}", name="echo")]),
            Message.tool(ToolResult(call_id=f"c{i}", name="echo", content=f"r{i}")),
            Message.assistant(f"a{i}"),
        ]
        await store.commit_turn(
            start.handle.turn_id, produced, usage=Usage(), model="m", provider="p"
        )
        print(f"COMMITTED {start.handle.turn_id}", flush=True)
    real = SyncStore._begin

    def stall(self, *args, **kwargs):
        opened = real(self, *args, **kwargs)
        print(f"INSIDE {opened[0].turn_id}", flush=True)
        sys.stdin.read()  # the parent never writes: we are killed here
        return opened

    SyncStore._begin = stall
    await store.start_turn(cid, Message.user("doomed"), speaker="owner", sender_id="me")
    print("UNREACHABLE", flush=True)


anyio.run(main)
"""


def test_sigkill_inside_a_turn_start_leaves_no_trace_of_it(tmp_path: Path) -> None:
    """start_turn's statements (state read, updated_at, turn row, user message) land together
    or not at all: killed after all of them ran but before its COMMIT, the file holds every
    committed turn whole, no row of the dying start and the updated_at of the last one."""
    db = tmp_path / "memory.db"
    with _child(tmp_path, START_CHILD, db) as proc:
        committed: list[int] = []
        doomed = None
        assert proc.stdout is not None
        for line in proc.stdout:
            word, _, value = line.strip().partition(" ")
            if word == "COMMITTED":
                committed.append(int(value))
            elif word == "INSIDE":
                doomed = int(value)
                break
        else:
            pytest.fail(f"child ended early: {proc.stderr.read() if proc.stderr else ''}")
        os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert len(committed) == TURNS and doomed is not None

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        statuses = dict(conn.execute("SELECT id, status FROM turns"))
        assert statuses == dict.fromkeys(committed, "committed")
        assert doomed not in statuses
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE text = 'doomed'").fetchone() == (
            0,
        )
        per_turn = dict(conn.execute("SELECT turn_id, COUNT(*) FROM messages GROUP BY turn_id"))
        assert per_turn == dict.fromkeys(committed, 4), "question, call, result, answer"
        (updated,) = conn.execute("SELECT updated_at FROM conversations").fetchone()
        (last_start,) = conn.execute(
            "SELECT started_at FROM turns WHERE id = ?", (committed[-1],)
        ).fetchone()
        assert updated == last_start, "the dying start's updated_at did not land"
    finally:
        conn.close()

    async def reopen() -> None:
        async with await ConversationStore.open(db) as store:
            cid = await store.conversation_id(ConversationKey("cli", "durable"))
            window = await store.load_window(cid)
            assert [m.message.text for m in window][-2:] == [f"r{TURNS - 1}", f"a{TURNS - 1}"]
            start = await store.start_turn(
                cid, Message.user("after"), speaker="owner", sender_id="me"
            )
            assert start.window == window

    anyio.run(reopen)

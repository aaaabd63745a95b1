"""The ``fermix`` console script's exit: a one-off ask ends without the interpreter's
teardown, after everything Python would have done first (threads, ``atexit``, flushed
output), and keeps what it committed; a reader that went away is exit 1, no traceback."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback, chat_completion

ANSWER = "Hello from the loopback model."
LEAVE = """
import atexit, os, sys, threading
from fermix_core.cli import entry
read_end, write_end = os.pipe()
def late_writer():
    os.read(read_end, 1)  # until the main thread is on its way out
    with open(sys.argv[1] + ".thread", "w") as out:
        out.write("written by a thread that is not a daemon")
threading.Thread(target=late_writer).start()
atexit.register(lambda: open(sys.argv[1] + ".atexit", "w").write("atexit ran"))
sys.stdout.write("buffered output, not yet flushed")
os.write(write_end, b"x")
entry._leave(3)
print("not reached")
"""


def test_leaving_does_first_what_the_interpreter_does_first(tmp_path: Path) -> None:
    """Threads that are not daemons finish, ``atexit`` callbacks run, buffered output is
    written; then the process ends with the given code and nothing after it runs."""
    marker = tmp_path / "m"
    result = subprocess.run(
        [sys.executable, "-c", LEAVE, str(marker)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3
    assert result.stdout == "buffered output, not yet flushed"
    assert (tmp_path / "m.atexit").read_text() == "atexit ran"
    assert (tmp_path / "m.thread").read_text().startswith("written by a thread")
    assert result.stderr == ""


TEARDOWN = """
import os, sys
from fermix_core.cli import entry
class Witness:  # says so when the interpreter's teardown frees it
    def __init__(self): self.write = os.write
    def __del__(self): self.write(1, b"torn down")
witness = Witness()
def ran_an_ask():
    entry._one_off_done = sys.argv[1] == "one-off"
    return 4
entry.main = ran_an_ask
entry.console()
"""


@pytest.mark.parametrize(("kind", "torn_down"), [("one-off", False), ("other", True)])
def test_only_a_one_off_ask_skips_the_teardown(kind: str, torn_down: bool) -> None:
    """After a plain console ask the interpreter's teardown does not run (an object freed
    by it never is); after any other command it does; the exit code is main()'s either way."""
    result = subprocess.run(
        [sys.executable, "-c", TEARDOWN, kind], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 4
    assert ("torn down" in result.stdout) is torn_down


def _completion(request: RecordedRequest) -> Reply:
    return chat_completion(ANSWER, model="qwen3")


@pytest.fixture
def asking(tmp_path: Path):
    fermix = Path(sys.executable).with_name("fermix")
    if not fermix.exists():
        pytest.skip("the fermix console script is not installed in this environment")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FERMIX_", "OLLAMA_"))}
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    with ThreadedLoopback(_completion) as model:
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\nprimary = true\n"
            f'base_url = "{model.url}/v1"\ndefault_model = "qwen3"\n'
        )
        yield fermix, home, env


def test_a_one_off_ask_keeps_its_reply_its_rows_and_its_log(asking) -> None:
    fermix, home, env = asking
    for session in ("first", "second"):  # the second one runs on warm caches
        result = subprocess.run(
            [str(fermix), "ask", "hi", "--session", session],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"{ANSWER}\n" and result.stderr == ""
    with sqlite3.connect(home / "memory.db") as db:
        rows = db.execute("SELECT role FROM messages ORDER BY id").fetchall()
    assert [role for (role,) in rows].count("assistant") == 2
    logs = "".join(p.read_text() for p in (home / "logs").glob("*.log"))
    # The first ask's last act, after the reply: the memory review (the loopback model does
    # not answer it with JSON, which is logged). Its line is in the file, whole.
    assert "fermix.memory.review" in logs and logs.endswith("\n")


def test_a_reader_that_went_away_is_exit_1_without_a_traceback(asking) -> None:
    fermix, _home, env = asking
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read the reply
    try:
        result = subprocess.run(
            [str(fermix), "ask", "hi", "--session", "gone"],
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr

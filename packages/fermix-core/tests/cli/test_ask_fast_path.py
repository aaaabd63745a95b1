"""``fermix ask`` skips the CLI framework, and ordinary commands keep log lines off stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fermix_core.cli.ask_core import parse_ask_args

PROBE = """
import json, sys
from fermix_core.cli.entry import main
code = main({args!r})
print(json.dumps({{"code": code, "typer": "typer" in sys.modules}}))
"""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["hi"], {"prompt": "hi", "session": "default", "stdin": False, "as_json": False}),
        (["-s", "work", "hi", "--json"], {"prompt": "hi", "session": "work", "as_json": True}),
        (["--session=x", "--stdin"], {"prompt": "", "session": "x", "stdin": True}),
        (["--", "--json"], {"prompt": "--json", "as_json": False}),
        (["-"], {"prompt": "-"}),
    ],
)
def test_plain_ask_arguments_are_parsed_without_typer(args, expected) -> None:
    parsed = parse_ask_args(args)
    assert parsed is not None
    assert {k: parsed[k] for k in expected} == expected


@pytest.mark.parametrize(
    "args", [["--help"], ["-h"], ["a", "b"], ["--session"], ["--verbose", "hi"], ["-x"]]
)
def test_anything_else_goes_through_typer(args) -> None:
    assert parse_ask_args(args) is None


@pytest.fixture
def fresh_home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FERMIX_", "OLLAMA_"))}
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    return env


def test_a_cold_ask_does_not_import_typer_and_prints_one_message(fresh_home) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=["ask", "hi"])],
        env=fresh_home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"code": 1, "typer": False}  # 1: no provider is configured
    assert "No provider is configured" in out.stdout
    # The CLI says it once; the log line stays in the file, and is not doubled there.
    assert out.stderr == ""
    log = (Path(fresh_home["FERMIX_HOME"]) / "logs" / "fermix.log").read_text()
    assert "WARNING fermix.service: no provider configured — run" in log
    assert "no provider configured: no provider configured" not in log


def test_ask_help_still_comes_from_typer(fresh_home) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=["ask", "--help"])],
        env=fresh_home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Usage: fermix ask" in out.stdout and "--session" in out.stdout


def test_ordinary_commands_keep_log_records_off_stderr(fresh_home) -> None:
    fermix = [sys.executable, "-m", "fermix_core.cli"]
    for args in (["providers", "list"], ["doctor"]):
        out = subprocess.run(
            [*fermix, *args], env=fresh_home, capture_output=True, text=True, timeout=60
        )
        assert " WARNING " not in out.stderr and " ERROR " not in out.stderr, (args, out.stderr)


def test_chat_help_names_exit(fresh_home) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "chat", "--session", "h"],
        env=fresh_home,
        input="/help\n/exit\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Commands you can use here:" in out.stdout
    assert "/exit — leave this chat" in out.stdout


def _stderr_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run fermix with stderr on a pseudo-terminal; return (rc, stdout, terminal text)."""
    import pty

    master, slave = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "fermix_core.cli", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        slave = -1
        chunks: list[bytes] = []

        def drain() -> None:  # on its own thread, so a full terminal buffer never blocks
            while True:
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: the child closed its end
                    return
                if not data:
                    return
                chunks.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        out = child.stdout.read().decode()
        child.stdout.close()
        code = child.wait(timeout=60)
        reader.join(timeout=60)
        return code, out, b"".join(chunks).decode("utf-8", "replace")
    finally:
        if slave != -1:
            os.close(slave)
        os.close(master)


def test_thinking_shows_on_a_terminal_and_is_wiped(fresh_home) -> None:
    code, out, terminal = _stderr_on_a_terminal(["ask", "hi"], fresh_home)
    assert code == 1 and "No provider is configured" in out  # the reply itself is on stdout
    assert "thinking…" in terminal
    assert terminal.endswith("\r\x1b[K")  # the line is cleared before the reply is read


def test_no_thinking_with_json_even_on_a_terminal(fresh_home) -> None:
    code, out, terminal = _stderr_on_a_terminal(["ask", "hi", "--json"], fresh_home)
    assert code == 1
    assert json.loads(out)["status"] == "no_provider"
    assert "thinking" not in terminal


def test_httpx_is_imported_without_its_own_command_line_client() -> None:
    code = (
        "import sys\n"
        "from fermix_core.cli import entry\n"
        "entry._skip_httpx_cli()\n"
        "import httpx\n"
        "heavy = [m for m in ('rich', 'click', 'pygments') if m in sys.modules]\n"
        "print(heavy, callable(httpx.main), httpx.AsyncClient.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[] True AsyncClient"

"""The README promises exactly two set-up commands; CI must run the test one verbatim."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands), "each set-up command is one pasteable line"


def test_ci_runs_the_readme_test_command() -> None:
    _, test_command = readme_commands()
    assert "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in [line.strip() for line in ci]


def test_readme_main_command_uses_real_cli_verbs() -> None:
    from fermix_core.cli.commands import BY_NAME

    main_command, _ = readme_commands()
    verbs = re.findall(r"fermix (\w[\w-]*)", main_command)
    assert verbs and all(v in BY_NAME for v in verbs), verbs


# --------------------------------------------------------------------------- running them


def _talk_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    # The paragraph that introduces the run command says how to talk to the daemon.
    intro = text.split("## Set up", 1)[1].split("```sh", 1)[0]
    return re.findall(r"`([^`]*\bfermix [^`]*)`", intro)


def test_every_command_the_set_up_section_names_is_runnable_from_the_clone() -> None:
    # The clone has no `fermix` on PATH: every command must say `uv run fermix`.
    talk = _talk_commands()
    assert talk, "the Set up section should say how to talk to the daemon"
    assert all(c.startswith("uv run fermix ") for c in talk), talk


@pytest.fixture
def scratch(tmp_path: Path) -> dict[str, str]:
    """A new user's shell: a scratch HOME, no OS keyring, no D-Bus, no Fermix settings."""
    real_cache = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FERMIX_", "DBUS_", "OLLAMA_", "OPENAI_", "ANTHROPIC_"))
        and k not in ("VIRTUAL_ENV", "PYTHON_KEYRING_BACKEND")
    }
    home = tmp_path / "user"
    home.mkdir()
    env.update(
        HOME=str(home),
        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
        # The environment is already synced; never reach an index from a test.
        UV_OFFLINE="1",
        UV_CACHE_DIR=real_cache,
    )
    return env


def test_the_readme_run_command_works_on_a_fresh_home_without_a_keyring(scratch, tmp_path) -> None:
    from fermix_core.testing.loopback import ThreadedLoopback

    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH (the README installs it with pip first)")
    main_command, _ = readme_commands()
    steps = [s.strip() for s in main_command.split("&&")]
    assert steps[0] == "pip install uv"  # already true wherever this test runs
    *before, run = steps[1:]
    assert run == "uv run fermix run"
    for step in before:
        done = subprocess.run(
            shlex.split(step),
            cwd=ROOT,
            env=scratch,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert done.returncode == 0, f"{step}: {done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr
    home = Path(scratch["HOME"]) / ".fermix"
    assert (home / "config.toml").exists()

    def completion(request):
        from fermix_core.testing.loopback import Reply

        return Reply(
            body={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "qwen3",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "hello back"},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
        )

    with ThreadedLoopback(completion) as model:
        # What a user answers at setup's provider question: a local (keyless) Ollama server.
        env = scratch
        answered = subprocess.run(
            [
                "uv",
                "run",
                "fermix",
                "setup",
                "--non-interactive",
                "--provider",
                "ollama",
                "--base-url",
                f"{model.url}/v1",
                "--model",
                "qwen3",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert answered.returncode == 0, answered.stderr
        daemon = subprocess.Popen(
            shlex.split(run),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        try:
            ready = daemon.stdout.readline()
            assert f"on {home / 'daemon.sock'}" in ready, daemon.stderr.read()
            assert '`uv run fermix ask "hello"`' in ready
            for command in _talk_commands():
                if " chat" in command:
                    continue  # interactive; `ask` proves the daemon answers
                said = subprocess.run(
                    shlex.split(command),
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    timeout=120,
                )
                assert said.returncode == 0, said.stderr
                assert "hello back" in said.stdout
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=60) == 0

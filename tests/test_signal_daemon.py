"""A real ``fermix start`` daemon with Signal enabled answers through the stub signal-cli.

The stub (``packages/fermix-channels/tests/signal/stub_signal_cli.py``) is the executable
``cli_path`` names; the daemon starts it as it would start signal-cli, and the test talks
to it through its control socket. An OpenAI-compatible loopback model on 127.0.0.1 answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from _daemon_kit import FERMIX, fermix, load_module
from fermix_core.testing.loopback import (
    RecordedRequest,
    Reply,
    ThreadedLoopback,
    chat_completion,
    chat_completion_stream,
)

_STUB = Path(__file__).parents[1] / "packages/fermix-channels/tests/signal/signal_stub.py"

ANSWER = "Hello from Fermix over Signal."


ss = load_module("fermix_e2e_signal_stub", _STUB)


class Model:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        #: When set, the first answer waits until this stub has seen a typing request:
        #: a turn that takes a while shows typing (an instant one shows none).
        self.typing_stub = None

    async def __call__(self, request: RecordedRequest) -> Reply:
        if not request.body:
            return Reply(status=404, body={"error": "not found"})
        body = request.json()
        self.requests.append(body)
        stub, self.typing_stub = self.typing_stub, None
        if stub is not None:
            import anyio.to_thread

            await anyio.to_thread.run_sync(lambda: stub.wait(lambda s: s.requests("sendTyping")))
        if body.get("stream"):
            return chat_completion_stream(ANSWER)
        return chat_completion(ANSWER)


@pytest.fixture
def model():
    fake = Model()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


def _env(tmp_path: Path, model, stub) -> dict:
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{model.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
        "[fermix_channels.signal]\nenabled = true\n"
        f'account = "{ss.ACCOUNT}"\n'
        f'owner_user_id = "{ss.OWNER}"\n'
        f'config_dir = "{tmp_path / "signal-data"}"\n'
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env["SIGNAL_CLI_PATH"] = str(stub.path)  # the env override, as a container would set it
    env["OPENAI_API_KEY"] = "sk-test-never-for-signal-cli"
    for name in ("FERMIX_LOAD_PLUGINS", "FERMIX_HTTP_BIND", "SIGNAL_ACCOUNT"):
        env.pop(name, None)
    return env


@pytest.fixture
def daemon(tmp_path, model):
    with ss.StubSignalCli(style="subscription") as stub:
        env = _env(tmp_path, model, stub)
        try:
            yield env, stub
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def _signal_status(env) -> dict:
    channels = json.loads(fermix(env, "status", "--json").stdout)["channels"]
    return {c["name"]: c for c in channels}["signal"]


def _until_state(env, state: str, containing: str = "") -> dict:
    deadline = time.monotonic() + 90
    while True:  # a failure bound on the daemon's own reporting, not a pacing wait
        status = _signal_status(env)
        if status["state"] == state and containing in (status.get("error") or ""):
            return status
        assert time.monotonic() < deadline, status


def _answers(stub) -> list[str]:
    return [t for t in stub.texts_to(ss.OWNER) if ANSWER in t]


def test_daemon_answers_signal_end_to_end(daemon, model) -> None:
    env, stub = daemon
    model.fake.typing_stub = stub
    fermix(env, "start")
    stub.wait_subscribed(1, timeout=90)
    _until_state(env, "ready")
    (hello,) = stub.named("hello")
    assert "OPENAI_API_KEY" not in hello["env"]  # signal-cli never sees provider keys

    stub.message("tell me something")
    stub.wait(lambda s: _answers(s), timeout=90)
    (send,) = [p for p in stub.sends() if ANSWER in p.get("message", "")]
    assert send["recipient"] == [ss.OWNER] and "quoteTimestamp" not in send
    assert stub.requests("sendTyping")  # the typing indicator ran while the turn did

    # A stranger gets nothing and costs no model call.
    calls = len(model.fake.requests)
    stub.message("let me in", sender=ss.STRANGER, uuid=None)
    stub.message("second question")
    stub.wait(lambda s: len(_answers(s)) >= 2, timeout=90)
    assert len(model.fake.requests) == calls + 1
    assert not stub.texts_to(ss.STRANGER)

    # /whoami answers with the id to put in owner_user_id.
    stub.message("/whoami")
    stub.wait(lambda s: any(ss.OWNER in t for t in s.texts_to(ss.OWNER) if ANSWER not in t))


def test_a_crash_is_restarted_and_a_redelivery_is_not_a_second_turn(daemon, model) -> None:
    env, stub = daemon
    fermix(env, "start")
    stub.wait_subscribed(1, timeout=90)
    first = stub.message("first")
    stub.wait(lambda s: len(_answers(s)) >= 1, timeout=90)

    stub.exit(9, "Exception in thread main: connection lost\n")
    stub.wait_subscribed(2, timeout=90)  # restarted by the adapter, daemon untouched
    status = _until_state(env, "ready")
    assert status["enabled"]
    # signal-cli printing the same message again (after a crash) runs no second turn.
    stub.envelope(first)
    stub.message("after the crash")
    stub.wait(lambda s: len(_answers(s)) >= 2, timeout=90)

    fermix(env, "stop")
    fermix(env, "start")
    stub.wait_subscribed(3, timeout=90)
    stub.envelope(first)
    stub.message("after the daemon restart")
    stub.wait(lambda s: len(_answers(s)) >= 3, timeout=90)
    fermix(env, "stop")
    assert len(model.fake.requests) == 3
    assert len(_answers(stub)) == 3


def test_an_unregistered_account_shows_in_status_and_doctor(tmp_path, model) -> None:
    with ss.StubSignalCli(startup="unregistered") as stub:
        env = _env(tmp_path, model, stub)
        try:
            fermix(env, "start")
            status = _until_state(env, "degraded", containing="not registered")
            assert f"signal-cli -a {ss.ACCOUNT} register" in status["error"]
            doctor = subprocess.run(
                [FERMIX, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=90
            )
            assert "not registered" in doctor.stdout
            assert "signal-cli 0.13.19-stub" in doctor.stdout  # the offline row ran --version
            url = json.loads(fermix(env, "status", "--json").stdout)["http"]["url"]
            ready = httpx.get(f"{url}/health/ready", timeout=30)
            assert ready.status_code == 503
            signal = {c["name"]: c for c in ready.json()["channels"]}["signal"]
            assert signal["state"] == "degraded" and "not registered" in signal["error"]
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)

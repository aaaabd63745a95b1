"""A real ``fermix`` daemon with Discord enabled answers the loopback Discord end to end.

The loopback Discord of the adapter tests (``fake_discord.py``: a real websocket gateway and
REST on 127.0.0.1) runs on its own event-loop thread; its REST server also plays an
OpenAI-compatible model that streams its answer, so the turn streams a draft that is edited
in place with ``PATCH``. The daemon finds the gateway the way it would on Discord: from
``GET /gateway/bot``.
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
from fermix_core.testing.loopback import RecordedRequest, Reply, chat_chunk, chat_completion_stream

pytest.importorskip("websockets", reason="the discord extra (websockets) is not installed")

_FAKE = Path(__file__).parents[1] / "packages/fermix-channels/tests/discord/fake_discord.py"

ANSWER = (
    "Here is a longer answer that streams into one Discord message, "
    "edited in place while the model is still writing, then finished."
)


fd = load_module("fermix_e2e_fake_discord", _FAKE)


def _said(body: dict) -> str:
    content = body["messages"][-1].get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class Model:
    """The loopback model: streams ANSWER in two halves, the second held until the draft
    with the first half is on Discord; or, with ``wanted`` set, asks for that folder."""

    def __init__(self) -> None:
        self.discord = None
        self.requests: list[dict] = []
        self.wanted: str | None = None
        self.asked = 0

    async def __call__(self, request: RecordedRequest) -> Reply:
        if not request.body:  # a provider probe (fermix doctor)
            return Reply(status=404, body={"error": "not found"})
        body = request.json()
        self.requests.append(body)
        if self.wanted is not None:
            return self._access(body)
        words = ANSWER.split(" ")
        half = len(words) // 2
        parts = [" ".join(words[:half]) + " ", " ".join(words[half:])]
        discord = self.discord

        async def hold(index: int) -> None:
            if index == 0:
                # A turn that takes a while shows typing (an instant one shows none): the
                # answer starts only once the typing indicator is on Discord.
                await discord.until(lambda: fd.DM_CHANNEL in discord.typing, 30)
            if index == 2:
                await discord.until(lambda: bool(discord.sent(fd.DM_CHANNEL)), 30)

        return Reply(
            before_item=hold,
            sse=[
                chat_chunk({"role": "assistant", "content": ""}),
                *(chat_chunk({"content": part}) for part in parts),
                chat_chunk({}, "stop"),
                "[DONE]",
            ],
        )

    def _access(self, body: dict) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            text = "I asked you for access to that folder."
        elif _said(body) == "please read my folder" and self.asked == 0:
            self.asked += 1
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "request_directory_access",
                    "arguments": json.dumps({"path": self.wanted, "reason": "your files"}),
                },
            }
            return Reply(
                sse=[
                    chat_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                    chat_chunk({}, "tool_calls"),
                    "[DONE]",
                ]
            )
        else:
            self.asked += 1
            text = "Now I can read it."
        return chat_completion_stream(text)


class Backend:
    """The fake Discord + model on a loop thread; ``call`` runs things on that loop."""

    def __init__(self) -> None:
        self.model = Model()
        self.discord = fd.FakeDiscord(fallback=self.model)
        self.model.discord = self.discord

    def __enter__(self) -> Backend:
        from anyio.from_thread import start_blocking_portal

        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._fake_cm = self.portal.wrap_async_context_manager(self.discord)
        self._fake_cm.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._fake_cm.__exit__(*exc)
        finally:
            self._portal_cm.__exit__(*exc)

    def call(self, func, *args):
        return self.portal.call(func, *args)

    def until(self, condition, timeout: float = 60) -> None:
        self.portal.call(self.discord.until, condition, timeout)

    def message(self, text: str, **kwargs) -> dict:
        return self.portal.call(lambda: self.discord.message(text, **kwargs))


@pytest.fixture
def backend():
    with Backend() as server:
        yield server


@pytest.fixture
def daemon_env(tmp_path, backend):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{backend.discord.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
        "[fermix_channels.discord]\nenabled = true\n"
        f'bot_token = "{fd.TOKEN}"\n'
        f'owner_user_id = "{fd.OWNER_ID}"\n'
        f'api_base_url = "{backend.discord.api_base_url}"\n'
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    for name in ("FERMIX_LOAD_PLUGINS", "FERMIX_HTTP_BIND", "DISCORD_BOT_TOKEN"):
        env.pop(name, None)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def _discord_status(env) -> dict:
    channels = json.loads(fermix(env, "status", "--json").stdout)["channels"]
    return {c["name"]: c for c in channels}["discord"]


def _ready(env) -> tuple[int, dict]:
    url = json.loads(fermix(env, "status", "--json").stdout)["http"]["url"]
    answer = httpx.get(f"{url}/health/ready", timeout=10)
    channels = {c["name"]: c for c in answer.json()["channels"]}
    return answer.status_code, channels["discord"]


def _wait_state(env, state: str) -> dict:
    deadline = time.monotonic() + 60
    while (found := _discord_status(env))["state"] != state:
        assert time.monotonic() < deadline, found  # a failure bound, not a pacing wait
    return found


def test_daemon_answers_a_discord_dm_with_a_streamed_draft(daemon_env, backend) -> None:
    discord = backend.discord
    fermix(daemon_env, "start")
    backend.until(lambda: discord.identifies == 1 and discord.connected)
    assert _wait_state(daemon_env, "ready")["enabled"]
    assert discord.requests[0] == ("GET", "/gateway/bot")
    code, health = _ready(daemon_env)
    assert code == 200 and health["state"] == "ready"

    backend.message("tell me something")
    backend.until(lambda: ANSWER in discord.texts(fd.DM_CHANNEL))
    assert backend.model.requests[-1].get("stream") is True
    (message,) = discord.sent(fd.DM_CHANNEL)  # one message, drafted and edited to the end
    assert discord.edits, "the draft was never edited in place"
    assert message["flags"] & (1 << 2)  # link previews off
    assert fd.DM_CHANNEL in discord.typing

    # A stranger and a bot get nothing and cost no model call; a server message not
    # addressed to the bot is ignored.
    models = len(backend.model.requests)
    backend.message("let me in", sender=fd.STRANGER_ID, channel=fd.STRANGER_DM)
    backend.message("bots talk", sender=fd.OTHER_BOT_ID, bot=True)
    backend.message("chatter", channel=fd.GUILD_CHANNEL, guild=fd.GUILD_ID)
    payload = backend.message("second")
    backend.until(lambda: len(discord.sent(fd.DM_CHANNEL)) >= 2)
    # Discord delivering the same message again runs nothing.
    backend.call(discord.dispatch, "MESSAGE_CREATE", payload)
    backend.message("third")
    backend.until(lambda: len(discord.sent(fd.DM_CHANNEL)) >= 3)
    assert len(backend.model.requests) == models + 2
    assert not discord.sent(fd.STRANGER_DM) and not discord.sent(fd.GUILD_CHANNEL)

    fermix(daemon_env, "stop")
    log = (Path(daemon_env["FERMIX_HOME"]) / "logs" / "fermix.log").read_text()
    assert fd.TOKEN not in log


def test_a_dropped_socket_and_a_restart_lose_and_repeat_nothing(daemon_env, backend) -> None:
    discord = backend.discord
    fermix(daemon_env, "start")
    backend.until(lambda: discord.connected)
    backend.message("first")
    backend.until(lambda: len(discord.sent(fd.DM_CHANNEL)) >= 1)
    backend.call(discord.drop)
    backend.message("while the socket was down")
    backend.until(lambda: len(discord.sent(fd.DM_CHANNEL)) >= 2)
    assert len(discord.resumes) == 1 and discord.identifies == 1

    fermix(daemon_env, "stop")
    backend.until(lambda: not discord.connected)
    backend.message("while the daemon was down")
    fermix(daemon_env, "start")
    backend.until(lambda: len(discord.sent(fd.DM_CHANNEL)) >= 3)
    fermix(daemon_env, "stop")
    assert discord.identifies == 1 and len(discord.resumes) == 2  # the restart resumed
    assert len(backend.model.requests) == 3
    assert len(discord.sent(fd.DM_CHANNEL)) == 3


def test_the_approve_button_grants_through_the_owners_confirm(daemon_env, backend, tmp_path):
    discord = backend.discord
    wanted = tmp_path / "outside-folder"
    wanted.mkdir()
    backend.model.wanted = str(wanted)
    fermix(daemon_env, "start")
    backend.until(lambda: discord.connected)
    backend.message("please read my folder")

    def prompt():
        return [m for m in discord.sent(fd.DM_CHANNEL) if m.get("components")]

    backend.until(lambda: bool(prompt()))
    (message,) = prompt()
    button = message["components"][0]["components"][0]
    assert button["label"] == "Approve" and button["custom_id"].startswith("fx-approve:")
    token = message["content"].split("/confirm ", 1)[1].split()[0]  # a DM shows the line
    assert token not in button["custom_id"]
    config_file = Path(daemon_env["FERMIX_HOME"]) / "config.toml"
    assert str(wanted) not in config_file.read_text()

    # Someone else's tap is refused, ephemerally, and consumes nothing.
    backend.call(lambda: discord.tap(button["custom_id"], sender=fd.GUEST_ID))
    backend.until(lambda: len(discord.callbacks) == 1)
    assert discord.callbacks[0]["data"] == {"content": "not authorized", "flags": 64}
    backend.call(lambda: discord.tap(button["custom_id"], sender=fd.OWNER_ID))
    backend.until(lambda: len(discord.callbacks) == 2)
    assert discord.callbacks[1]["data"]["content"] == "Approving…"
    backend.until(lambda: any("Now I can read it." in t for t in discord.texts(fd.DM_CHANNEL)))
    assert str(wanted) in config_file.read_text()
    # Single use: a second tap runs no turn.
    models = len(backend.model.requests)
    backend.call(lambda: discord.tap(button["custom_id"], sender=fd.OWNER_ID))
    backend.until(lambda: len(discord.callbacks) == 3)
    fermix(daemon_env, "stop")
    assert len(backend.model.requests) == models
    log = (Path(daemon_env["FERMIX_HOME"]) / "logs" / "fermix.log").read_text()
    assert not [t for t in discord.interactions.values() if t in log]  # callback URLs


def test_a_missing_message_content_intent_is_reported_with_the_fix(daemon_env, backend):
    discord = backend.discord
    discord.message_content_enabled = False
    fermix(daemon_env, "start")
    backend.until(lambda: 4014 in discord.closes)
    state = _wait_state(daemon_env, "degraded")
    assert "Message Content Intent" in state["error"] and "Developer Portal" in state["error"]
    code, health = _ready(daemon_env)
    assert code == 503 and "Message Content Intent" in health["error"]
    doctor = subprocess.run(
        [FERMIX, "doctor", "--json"], env=daemon_env, capture_output=True, text=True, timeout=60
    )
    assert "Message Content Intent" in doctor.stdout
    assert discord.identifies == 1  # reported, not hot-looped

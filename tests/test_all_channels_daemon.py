"""One real daemon with Telegram, Discord, Signal (the stub signal-cli) and ACP enabled at once.

Each channel's own end-to-end tests go deep; this one checks that they live together: one
``fermix start`` serves all four, each is ``ready`` in ``fermix status`` and
``/health/ready``, and a message on each is answered on that same channel — never on
another. The fakes are the adapters' own: the loopback Discord (websocket gateway + REST)
on a loop thread, whose REST server also plays the Telegram Bot API and the model; the stub
signal-cli as ``cli_path``; the official ACP client spawning ``fermix acp``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from _daemon_kit import CHANNEL_TESTS, FERMIX, fermix, load_module
from fermix_core.testing.loopback import (
    RecordedRequest,
    Reply,
    chat_completion,
    chat_completion_stream,
)

pytest.importorskip("websockets", reason="the discord extra (websockets) is not installed")
acp = pytest.importorskip("acp", reason="the agent-client-protocol SDK is not installed")

from acp import spawn_agent_process, text_block  # noqa: E402

fd = load_module("fermix_e2e_fake_discord", CHANNEL_TESTS / "discord/fake_discord.py")
ft = load_module("fermix_e2e_fake_telegram", CHANNEL_TESTS / "telegram/fake_telegram.py")
ss = load_module("fermix_e2e_signal_stub", CHANNEL_TESTS / "signal/signal_stub.py")


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class Backend:
    """Discord's REST server routes the Telegram Bot API and the model as its fallback."""

    def __init__(self) -> None:
        self.telegram = ft.FakeBotApi()
        self.discord = fd.FakeDiscord(fallback=self._other)
        self.said: list[str] = []

    async def _other(self, request: RecordedRequest) -> Reply:
        if request.path.startswith(("/bot", "/file/bot")):
            return await self.telegram._handle(request)
        if not request.body:  # a provider probe
            return Reply(status=404, body={"error": "not found"})
        body = request.json()
        said = _text(body["messages"][-1].get("content"))
        self.said.append(said)
        answer = f"echo: {said}"
        return chat_completion_stream(answer) if body.get("stream") else chat_completion(answer)

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


@pytest.fixture
def world(tmp_path):
    with Backend() as backend, ss.StubSignalCli(style="plain") as stub:
        home = tmp_path / "h"
        home.mkdir(mode=0o700)
        url = backend.discord.url
        (home / "config.toml").write_text(
            "[fermix_core.providers.ollama]\n"
            f'primary = true\nbase_url = "{url}/v1"\ndefault_model = "qwen3"\n'
            "[fermix_core.memory]\nreview_enabled = false\n"
            "[fermix_web]\nport = 0\n"
            "[fermix_channels.telegram]\nenabled = true\n"
            f'bot_token = "{ft.TOKEN}"\nowner_user_id = "{ft.OWNER_ID}"\n'
            f'api_base_url = "{url}"\npoll_timeout = 5\n'
            "[fermix_channels.discord]\nenabled = true\n"
            f'bot_token = "{fd.TOKEN}"\nowner_user_id = "{fd.OWNER_ID}"\n'
            f'api_base_url = "{backend.discord.api_base_url}"\n'
            "[fermix_channels.signal]\nenabled = true\n"
            f'account = "{ss.ACCOUNT}"\nowner_user_id = "{ss.OWNER}"\n'
            f'cli_path = "{stub.path}"\nconfig_dir = "{tmp_path / "signal-data"}"\n'
            "[fermix_channels.acp]\nenabled = true\n"
        )
        env = dict(os.environ)
        env["FERMIX_HOME"] = str(home)
        env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
        for name in (
            "FERMIX_LOAD_PLUGINS",
            "FERMIX_HTTP_BIND",
            "DISCORD_BOT_TOKEN",
            "SIGNAL_ACCOUNT",
            "SIGNAL_CLI_PATH",
        ):
            env.pop(name, None)
        try:
            yield env, backend, stub
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def _states(env) -> dict[str, str]:
    channels = json.loads(fermix(env, "status", "--json").stdout)["channels"]
    return {c["name"]: c["state"] for c in channels if c.get("enabled")}


def test_one_daemon_answers_telegram_discord_signal_and_acp(world, tmp_path) -> None:
    env, backend, stub = world
    fermix(env, "start")
    backend.call(backend.telegram.wait_polling, 1, 60)
    stub.wait_subscribed(1, timeout=90)
    deadline = time.monotonic() + 90
    wanted = {"telegram", "discord", "signal", "acp"}
    while {n for n, s in _states(env).items() if s == "ready"} != wanted:
        assert time.monotonic() < deadline, _states(env)  # a failure bound, not pacing
    url = json.loads(fermix(env, "status", "--json").stdout)["http"]["url"]
    ready = httpx.get(f"{url}/health/ready", timeout=10)
    assert ready.status_code == 200
    rows = {c["name"]: c["state"] for c in ready.json()["channels"] if c.get("enabled")}
    assert {n: rows.get(n) for n in wanted} == dict.fromkeys(wanted, "ready")

    # One message on each channel, each answered where it came from.
    telegram, discord = backend.telegram, backend.discord
    backend.call(lambda: telegram.message("from telegram"))
    backend.call(
        telegram.until,
        lambda: any(m.get("text") == "echo: from telegram" for m in telegram.sent(ft.OWNER_ID)),
        60,
    )
    backend.call(discord.message, "from discord")
    backend.call(discord.until, lambda: "echo: from discord" in discord.texts(fd.DM_CHANNEL), 60)
    stub.message("from signal")
    stub.wait(lambda s: "echo: from signal" in s.texts_to(ss.OWNER), timeout=90)

    async def editor() -> str:
        updates: list = []

        class Client:
            async def session_update(self, session_id, update, **_):
                updates.append(update)

            async def request_permission(self, *args, **kwargs):
                raise AssertionError("no permission is ever asked")

            def on_connect(self, conn):
                self.conn = conn

        async with spawn_agent_process(Client(), FERMIX, "acp", env=env) as (conn, _proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with anyio.fail_after(60):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("from acp")])
        return "".join(
            u.content.text
            for u in updates
            if u.session_update == "agent_message_chunk" and hasattr(u.content, "text")
        )

    assert anyio.run(editor) == "echo: from acp"

    # Nothing crossed over: each reply went only to its own channel.
    assert sorted(backend.said) == ["from acp", "from discord", "from signal", "from telegram"]
    assert all(m.get("text", "").endswith("telegram") for m in telegram.sent(ft.OWNER_ID))
    assert all(t.endswith("discord") for t in discord.texts(fd.DM_CHANNEL))
    assert all(t.endswith("signal") for t in stub.texts_to(ss.OWNER))
    log = (Path(env["FERMIX_HOME"]) / "logs" / "fermix.log").read_text()
    assert ft.TOKEN not in log and fd.TOKEN not in log

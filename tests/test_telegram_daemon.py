"""A real ``fermix run`` daemon with Telegram enabled answers the loopback Bot API.

One loopback server on 127.0.0.1 plays both sides: the Bot API (``/bot<token>/…``, the
fake from the Telegram adapter tests) and an OpenAI-compatible model that streams its
answer, so the channel turn streams a draft edited in place with ``editMessageText``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from _daemon_kit import FERMIX, fermix, load_module
from fermix_core.testing.loopback import (
    RecordedRequest,
    Reply,
    ThreadedLoopback,
    chat_chunk,
    chat_completion,
    chat_completion_stream,
)

_FAKE = Path(__file__).parents[1] / "packages/fermix-channels/tests/telegram/fake_telegram.py"

ANSWER = (
    "Here is a longer answer that streams into one Telegram message, "
    "edited in place while the model is still writing, then finished."
)


ft = load_module("fermix_e2e_fake_telegram", _FAKE)


def _tool_call_stream(name: str, arguments: dict) -> list:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        chat_chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
        chat_chunk({}, "tool_calls"),
        "[DONE]",
    ]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class Backend:
    def __init__(self) -> None:
        self.telegram = ft.FakeBotApi()
        self.model_requests: list[dict] = []
        #: When set, the first "please read my folder" asks for this directory.
        self.wanted: str | None = None
        self.asked = 0

    async def __call__(self, request: RecordedRequest) -> Reply:
        if request.path.startswith(("/bot", "/file/bot")):
            return await self.telegram._handle(request)
        if not request.body:  # a provider probe (fermix doctor): no models listed here
            return Reply(status=404, body={"error": "not found"})
        body = request.json()
        self.model_requests.append(body)
        if self.wanted is not None:
            return self._access_script(body)
        if body.get("stream"):
            words = ANSWER.split(" ")
            half = len(words) // 2
            parts = [" ".join(words[:half]) + " ", " ".join(words[half:])]
            telegram = self.telegram

            async def hold(index: int) -> None:
                # The second half waits until the draft with the first half is on Telegram.
                if index == 2:
                    await telegram.until(lambda: bool(telegram.sent(ft.OWNER_ID)), 30)

            return Reply(
                before_item=hold,
                sse=[
                    chat_chunk({"role": "assistant", "content": ""}),
                    *(chat_chunk({"content": part}) for part in parts),
                    chat_chunk({}, "stop"),
                    "[DONE]",
                ],
            )
        return chat_completion(ANSWER)

    def _access_script(self, body: dict) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            text = "I asked you for access to that folder."
        elif _text(last.get("content")) == "please read my folder" and self.asked == 0:
            self.asked += 1
            return Reply(
                sse=_tool_call_stream(
                    "request_directory_access",
                    {"path": self.wanted, "reason": "the files you asked about"},
                )
            )
        else:
            self.asked += 1
            text = "Now I can read it."
        return chat_completion_stream(text)


@pytest.fixture
def backend():
    fake = Backend()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


@pytest.fixture
def daemon_env(tmp_path, backend):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{backend.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = true\n"
        f'bot_token = "{ft.TOKEN}"\n'
        f'owner_user_id = "{ft.OWNER_ID}"\n'
        f'api_base_url = "{backend.url}"\n'
        "poll_timeout = 5\n"
        "[fermix_channels.acp]\nenabled = false\n"
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env.pop("FERMIX_LOAD_PLUGINS", None)
    env.pop("FERMIX_HTTP_BIND", None)
    env.pop("TELEGRAM_BOT_TOKEN", None)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def test_daemon_answers_telegram_with_a_streamed_draft(daemon_env, backend) -> None:
    telegram = backend.fake.telegram
    fermix(daemon_env, "start")
    backend.call(telegram.wait_polling, 1, 60)
    channels = {
        c["name"]: c for c in json.loads(fermix(daemon_env, "status", "--json").stdout)["channels"]
    }
    assert channels["telegram"]["enabled"] and channels["telegram"]["state"] == "ready"

    backend.call(lambda: telegram.message("tell me something"))
    backend.call(
        telegram.until,
        lambda: any(m.get("text") == ANSWER for m in telegram.sent(ft.OWNER_ID)),
        60,
    )
    assert backend.fake.model_requests[-1].get("stream") is True
    sent = telegram.sent(ft.OWNER_ID)
    assert len(sent) == 1, sent  # one message, streamed as a draft and edited to the end
    assert telegram.calls_to("sendMessage")[0].params.get("parse_mode") == "HTML"
    assert telegram.calls_to("editMessageText"), "the draft was never edited in place"

    # A stranger gets nothing and costs no model call.
    models = len(backend.fake.model_requests)
    backend.call(lambda: telegram.message("let me in", sender=ft.STRANGER_ID))
    backend.call(lambda: telegram.message("second", sender=ft.OWNER_ID))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 2, 60)
    assert len(backend.fake.model_requests) == models + 1
    assert not telegram.sent(ft.STRANGER_ID)

    fermix(daemon_env, "stop")
    home = Path(daemon_env["FERMIX_HOME"])
    offset = json.loads((home / "channels" / "telegram-offset.json").read_text())
    assert offset["bot_id"] == ft.BOT_ID
    log = (home / "logs" / "fermix.log").read_text()
    assert ft.TOKEN not in log


def test_restart_neither_replays_nor_loses(daemon_env, backend) -> None:
    telegram = backend.fake.telegram
    fermix(daemon_env, "start")
    backend.call(telegram.wait_polling, 1, 60)
    backend.call(lambda: telegram.message("first"))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 1, 60)
    fermix(daemon_env, "stop")
    backend.call(lambda: telegram.message("while down"))
    fermix(daemon_env, "start")
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 2, 60)
    fermix(daemon_env, "stop")
    assert len(backend.fake.model_requests) == 2
    assert len(telegram.sent(ft.OWNER_ID)) == 2


def test_the_approve_button_grants_through_the_owners_confirm(daemon_env, backend, tmp_path):
    telegram = backend.fake.telegram
    wanted = tmp_path / "outside-folder"
    wanted.mkdir()
    backend.fake.wanted = str(wanted)
    fermix(daemon_env, "start")
    backend.call(telegram.wait_polling, 1, 60)
    backend.call(lambda: telegram.message("please read my folder"))

    def prompt():
        return [m for m in telegram.sent(ft.OWNER_ID) if m.get("reply_markup")]

    backend.call(telegram.until, lambda: bool(prompt()), 60)
    (message,) = prompt()
    button = message["reply_markup"]["inline_keyboard"][0][0]
    assert button["text"] == "Approve" and button["callback_data"].startswith("fx-confirm:")
    token = button["callback_data"].split(":", 1)[1]
    assert f"/confirm {token}" in message["text"]  # a private chat shows the typed line too
    config_file = Path(daemon_env["FERMIX_HOME"]) / "config.toml"
    assert str(wanted) not in config_file.read_text()

    public = {k: v for k, v in message.items() if k != "_params"}
    backend.call(lambda: telegram.tap(button["callback_data"], sender=ft.OWNER_ID, on=public))
    backend.call(telegram.wait_call, "answerCallbackQuery", 1, 60)
    assert telegram.callback_answers[0]["text"] == "Approving…"
    backend.call(
        telegram.until,
        lambda: any("Now I can read it." in m.get("text", "") for m in telegram.sent(ft.OWNER_ID)),
        60,
    )
    assert str(wanted) in config_file.read_text()
    # The token was single-use: a second tap changes nothing and runs no turn.
    models = len(backend.fake.model_requests)
    backend.call(lambda: telegram.tap(button["callback_data"], sender=ft.OWNER_ID, on=public))
    backend.call(telegram.wait_call, "answerCallbackQuery", 2, 60)
    fermix(daemon_env, "stop")
    assert len(backend.fake.model_requests) == models


def _telegram_status(env) -> dict:
    channels = json.loads(fermix(env, "status", "--json").stdout)["channels"]
    return {c["name"]: c for c in channels}["telegram"]


def test_a_webhook_on_the_bot_is_reported_by_status_and_doctor(daemon_env, backend) -> None:
    telegram = backend.fake.telegram
    backend.call(lambda: telegram.set_webhook("https://example.invalid/hook"))
    fermix(daemon_env, "start")
    backend.call(telegram.wait_call, "getWebhookInfo", 1, 60)
    deadline = time.monotonic() + 60
    while (state := _telegram_status(daemon_env))["state"] != "degraded":
        assert time.monotonic() < deadline, state  # a failure bound, not a pacing wait
    assert "webhook" in state["error"] and "deleteWebhook" in state["error"]
    doctor = subprocess.run(
        [FERMIX, "doctor", "--json"], env=daemon_env, capture_output=True, text=True, timeout=60
    )
    assert "webhook" in doctor.stdout
    # Removing the webhook on Telegram's side brings the channel back without a restart.
    backend.call(lambda: telegram.set_webhook(""))
    deadline = time.monotonic() + 60  # the poller retries a conflict at least every 10 s
    while (state := _telegram_status(daemon_env))["state"] != "ready":
        assert time.monotonic() < deadline, state
    backend.call(lambda: telegram.message("hello again"))
    backend.call(telegram.until, lambda: bool(telegram.sent(ft.OWNER_ID)), 60)

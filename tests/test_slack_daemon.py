"""A real ``fermix run`` daemon with the Slack channel enabled, answering Slack end to end.

The loopback Slack of the adapter tests (Web API over HTTP, Socket Mode over a websocket)
runs on its own event-loop thread; the model is an OpenAI-compatible loopback server
configured as the keyless Ollama provider, echoing the last user message. In ``events``
mode the test POSTs deliveries signed with slack_sdk's signer to the daemon's
``/webhook/slack``; in ``socket`` mode it pushes ``events_api`` envelopes down the socket
the daemon opened. Either way the reply must reach the fake's ``chat.postMessage``. Waits
are on events, bounded by deadlines.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
FAKE = Path(__file__).parents[1] / "packages/fermix-channels/tests/slack/fake_slack.py"


def _load_fake() -> Any:
    name = "fermix_tests_fake_slack"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FAKE)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


fs = _load_fake()


def completion(text: str) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "qwen3",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def stream_chunks(text: str) -> list:
    """The Chat Completions SSE a streaming request gets (channel turns stream)."""

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "model": "qwen3",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text}),
        chunk({}, "stop"),
        "[DONE]",
    ]


MARKDOWN = "**Done** — see [the docs](https://example.com/docs) & `fermix status`."


class Model:
    """Echoes the last user message; counts calls so a test can prove none was made."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        if isinstance(user, list):
            user = "".join(p.get("text", "") for p in user if isinstance(p, dict))
        self.prompts.append(user)
        text = MARKDOWN if user == "markdown please" else f"echo: {user}"
        if body.get("stream"):
            return Reply(sse=stream_chunks(text))
        return Reply(body=completion(text))


class ThreadedSlack:
    """The loopback Slack on its own event-loop thread, driven with blocking calls."""

    def __enter__(self) -> ThreadedSlack:
        self._portal_cm = start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self.fake = fs.FakeSlack()
        self._fake_cm = self.portal.wrap_async_context_manager(self.fake)
        self._fake_cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._fake_cm.__exit__(*exc)
        finally:
            self._portal_cm.__exit__(*exc)

    def call(self, func: Any, *args: Any) -> Any:
        return self.portal.call(func, *args)

    def wait_replies(self, chat: str, count: int) -> list[str]:
        async def wait() -> None:
            await self.fake.wait_for(lambda: len(self.fake.texts(chat)) >= count, timeout=60)

        self.portal.call(wait)
        return self.fake.texts(chat)


@pytest.fixture
def model():
    fake = Model()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


@pytest.fixture
def slack():
    with ThreadedSlack() as threaded:
        yield threaded


def daemon_env(tmp_path: Path, model: Any, slack: ThreadedSlack, mode: str) -> dict[str, str]:
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    credentials = (
        f'signing_secret = "{fs.SIGNING_SECRET}"\n'
        if mode == "events"
        else f'app_token = "{fs.APP_TOKEN}"\n'
    )
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{model.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
        "[fermix_channels.slack]\n"
        "enabled = true\n"
        f'mode = "{mode}"\n'
        f'bot_token = "{fs.BOT_TOKEN}"\n'
        f"{credentials}"
        f'api_base_url = "{slack.fake.api_url}"\n'
        f'owner_user_id = "{fs.OWNER_ID}"\n'
    )
    (home / "config.toml").chmod(0o600)
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    for name in ("FERMIX_LOAD_PLUGINS", "FERMIX_HTTP_BIND", "OLLAMA_BASE_URL"):
        env.pop(name, None)
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        env.pop(name, None)
    return env


def fermix(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([FERMIX, *args], env=env, capture_output=True, text=True, timeout=90)
    if result.returncode != 0:
        raise AssertionError(f"fermix {args}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def slack_state(env: dict[str, str]) -> dict:
    state = json.loads(fermix(env, "status", "--json").stdout)
    return {c["name"]: c for c in state["channels"]}["slack"] | {"http": state.get("http")}


@pytest.fixture
def running_daemon():
    started: list[dict[str, str]] = []

    def start(env: dict[str, str]) -> None:
        started.append(env)
        fermix(env, "start")

    yield start
    for env in started:
        subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def post(url: str, event: dict, **headers: str) -> httpx.Response:
    body = json.dumps(event).encode()
    return httpx.post(
        f"{url}/webhook/slack", content=body, headers={**fs.sign(body), **headers}, timeout=30
    )


def test_events_mode_daemon_answers_a_signed_delivery(tmp_path, model, slack, running_daemon):
    env = daemon_env(tmp_path, model, slack, "events")
    running_daemon(env)
    state = slack_state(env)
    assert state["enabled"] is True
    url = state["http"]["url"]
    assert "POST /webhook/slack" in state["http"]["routes"]

    challenge = post(url, {"type": "url_verification", "challenge": "c-123", "token": "t"})
    assert (challenge.status_code, challenge.text) == (200, "c-123")

    hello = fs.message_event("hello", channel="D0DAEMON1")
    assert post(url, hello).status_code == 200
    assert slack.wait_replies("D0DAEMON1", 1) == ["echo: hello"]

    # Slack's retry of the same event, a stranger, a forged request and another bot: none
    # of them reaches the model; the next real message proves the queue moved past them.
    assert post(url, hello, **{"x-slack-retry-num": "1"}).status_code == 200
    stranger = fs.message_event("let me in", user=fs.STRANGER_ID, channel="D0STRANGE")
    assert post(url, stranger).status_code == 200
    forged = json.dumps(fs.message_event("forged", channel="D0DAEMON1")).encode()
    bad = httpx.post(
        f"{url}/webhook/slack",
        content=forged,
        headers=fs.sign(forged, secret="guessed"),
        timeout=30,
    )
    assert bad.status_code == 401
    bot = fs.message_event("beep", channel="D0DAEMON1", bot_id="B0OTHER")
    assert post(url, bot).status_code == 200
    assert post(url, fs.message_event("second", channel="D0DAEMON1")).status_code == 200
    assert slack.wait_replies("D0DAEMON1", 2) == ["echo: hello", "echo: second"]
    assert model.fake.prompts == ["hello", "second"]
    assert slack.fake.texts("D0STRANGE") == []
    posted = slack.fake.posted
    assert all(p.unfurl_links is False and p.unfurl_media is False for p in posted)

    # The reply is rendered in Slack mrkdwn by the core before the adapter posts it.
    assert post(url, fs.message_event("markdown please", channel="D0DAEMON1")).status_code == 200
    replies = slack.wait_replies("D0DAEMON1", 3)
    assert replies[-1] == "*Done* — see <https://example.com/docs|the docs> &amp; `fermix status`."
    assert slack.fake.posted[-1].mrkdwn is True

    # A thread is its own conversation and the reply goes into it.
    threaded = fs.message_event(
        f"<@{fs.BOT_USER_ID}> in thread",
        channel="C0CHANNEL",
        event_type="app_mention",
        thread_ts="1760000000.000777",
    )
    assert post(url, threaded).status_code == 200
    (reply,) = slack.wait_replies("C0CHANNEL", 1)
    # In a shared chat the gateway labels who is speaking; the mention itself is gone.
    assert reply.startswith("echo: ") and reply.endswith("in thread")
    assert f"<@{fs.BOT_USER_ID}>" not in reply
    assert slack.fake.posted[-1].thread_ts == "1760000000.000777"


def test_socket_mode_daemon_answers_over_the_websocket(tmp_path, model, slack, running_daemon):
    env = daemon_env(tmp_path, model, slack, "socket")
    running_daemon(env)
    state = slack_state(env)
    assert "POST /webhook/slack" not in (state["http"] or {}).get("routes", [])

    fake = slack.fake
    event = fs.message_event("over the socket", channel="D0SOCKET1")
    envelope = slack.call(fake.push_event, event)
    slack.call(fake.wait_ack, envelope)
    assert slack.wait_replies("D0SOCKET1", 1) == ["echo: over the socket"]

    # Slack refreshes the link: the daemon reconnects on a fresh URL and keeps answering;
    # a redelivery of the first envelope runs nothing twice.
    slack.call(fake.disconnect, "refresh_requested")
    slack.call(fake.wait_socket, 2)
    slack.call(fake.wait_ack, slack.call(fake.push_event, event))
    nxt = fs.message_event("after refresh", channel="D0SOCKET1")
    slack.call(fake.wait_ack, slack.call(fake.push_event, nxt))
    assert slack.wait_replies("D0SOCKET1", 2) == ["echo: over the socket", "echo: after refresh"]
    assert model.fake.prompts == ["over the socket", "after refresh"]
    assert fake.connections_opened >= 2

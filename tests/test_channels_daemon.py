"""A real ``fermix run`` daemon serving a third-party webhook channel end to end.

The channel comes from a separate on-disk distribution (entry points only, no core change).
One loopback server plays both sides: the model (OpenAI-compatible Chat Completions,
configured as the keyless Ollama provider) and the channel's platform API, where replies
are posted. The test drives the platform side by POSTing to the daemon's webhook route on
an ephemeral port and waits on events — never on time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"

ECHO_MODULES = {
    "fermix_echo.plugin": """
        from fermix_core.hookspecs import hookimpl
        from fermix_core.specs import ChannelSpec

        @hookimpl
        def fermix_channels():
            yield ChannelSpec(
                name="echo",
                label="Echo",
                factory="fermix_echo.adapter:EchoChannel",
                config_model="fermix_echo.adapter:EchoConfig",
            )
    """,
    "fermix_echo.adapter": """
        import json

        import anyio
        from pydantic import BaseModel, ConfigDict

        from fermix_core.channel import (
            Channel, ChannelError, ChannelTransientError, DeliveryUnavailable, InboundMessage,
            SentMessage, WebhookResponse, WebhookRoute,
        )


        class EchoConfig(BaseModel):
            model_config = ConfigDict(extra="forbid")
            enabled: bool = False
            owner_user_id: str | None = None
            api_base_url: str = ""


        class EchoChannel(Channel):
            name = "echo"

            def __init__(self, *, config, http, **_):
                self.config, self.http, self.host, self.crash = config, http, None, None

            async def start(self, host):
                self.host, self.crash = host, anyio.Event()
                host.task_group.start_soon(self._connection)

            async def _connection(self):
                await self.crash.wait()
                raise RuntimeError("echo platform connection lost")

            async def stop(self):
                self.host = None

            async def send(self, message):
                answer = await self.http.post(
                    f"{self.config.api_base_url}/send",
                    json={"chat": message.chat_id, "text": message.text},
                )
                if answer.status_code >= 500:
                    raise ChannelTransientError(f"echo platform answered {answer.status_code}")
                if answer.status_code >= 400:
                    raise ChannelError(f"echo platform refused: {answer.text}")
                return SentMessage(message_id=str(answer.json()["id"]))

            def webhook_routes(self):
                return [WebhookRoute("/webhook/echo", ("POST",), self._handle)]

            async def _handle(self, request):
                if self.host is None:
                    return WebhookResponse(503, b"not running")
                data = json.loads(request.body)
                if data.get("text") == "crash":
                    self.crash.set()
                    return WebhookResponse(200, b"crashing")
                try:
                    result = await self.host.deliver(InboundMessage(
                        channel="echo", chat_id=data["chat"], sender_id=data["from"],
                        text=data["text"], message_id=data["id"],
                    ))
                except DeliveryUnavailable:
                    return WebhookResponse(503, b"retry")
                return WebhookResponse(200, result.value.encode())
    """,
}


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


class Backend:
    """The model and the echo platform on one loopback server."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.attempts = 0
        self.model_requests: list[dict] = []
        self.changed = anyio.Event()

    async def __call__(self, request: RecordedRequest) -> Reply:
        if request.path == "/send":
            self.attempts += 1
            if request.json()["chat"] == "closed":
                self.changed.set()
                self.changed = anyio.Event()
                return Reply(status=400, body={"error": "window closed"})
            self.sent.append(request.json())
            self.changed.set()
            self.changed = anyio.Event()
            return Reply(body={"id": len(self.sent)})
        body = request.json()
        self.model_requests.append(body)
        self.changed.set()
        self.changed = anyio.Event()
        user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        if isinstance(user, list):
            user = "".join(p.get("text", "") for p in user)
        text = f"echo: {user}"
        if body.get("stream"):  # channel turns stream; answer with the wire's SSE chunks
            return Reply(sse=stream_chunks(text))
        return Reply(body=completion(text))

    async def wait_model(self, count: int) -> None:
        with anyio.fail_after(60):
            while len(self.model_requests) < count:
                await self.changed.wait()

    async def wait_sent(self, count: int) -> None:
        with anyio.fail_after(60):
            while len(self.sent) < count:
                await self.changed.wait()


@pytest.fixture
def backend():
    fake = Backend()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


@pytest.fixture
def daemon_env(tmp_path, backend, fake_distribution):
    dist = fake_distribution(
        "fermix-echo", "1.0.0", {"channels.echo": "fermix_echo.plugin"}, ECHO_MODULES
    )
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{backend.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.echo]\nenabled = true\n"
        f'owner_user_id = "alice"\napi_base_url = "{backend.url}"\n'
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(dist.path), env.get("PYTHONPATH")]))
    env.pop("FERMIX_LOAD_PLUGINS", None)
    env.pop("FERMIX_HTTP_BIND", None)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def fermix(env, *args, check=True):
    result = subprocess.run([FERMIX, *args], env=env, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"fermix {args}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def status(env) -> dict:
    return json.loads(fermix(env, "status", "--json").stdout)


def post(url: str, payload: dict) -> httpx.Response:
    return httpx.post(f"{url}/webhook/echo", json=payload, timeout=30)


def test_a_third_party_webhook_channel_answers_through_the_daemon(daemon_env, backend) -> None:
    fermix(daemon_env, "start")
    state = status(daemon_env)
    url = state["http"]["url"]
    assert url.startswith("http://127.0.0.1:")
    assert "POST /webhook/echo" in state["http"]["routes"]
    channels = {c["name"]: c for c in state["channels"]}
    assert channels["echo"]["enabled"] and channels["echo"]["source"].startswith("channels.echo")
    assert channels["telegram"]["state"] == "stopped" and not channels["telegram"]["enabled"]
    # Text status prints the URL and the channel.
    text = fermix(daemon_env, "status").stdout
    assert f"http: {url}" in text and "echo: " in text

    ready = httpx.get(f"{url}/health/ready", timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json()["ready"] is True

    first = post(url, {"id": "m1", "chat": "c1", "from": "alice", "text": "hello"})
    assert first.status_code == 200 and first.text == "accepted"
    backend.call(backend.fake.wait_sent, 1)
    assert backend.fake.sent == [{"chat": "c1", "text": "echo: hello"}]

    # A platform retry of the same message id runs nothing twice; a stranger gets nothing.
    assert post(url, {"id": "m1", "chat": "c1", "from": "alice", "text": "hello"}).text == (
        "duplicate"
    )
    assert post(url, {"id": "m2", "chat": "c9", "from": "mallory", "text": "hi"}).text == (
        "dropped"
    )

    # The adapter's connection crashes: the runtime restarts it, the daemon stays up.
    assert post(url, {"text": "crash"}).status_code == 200
    deadline = time.monotonic() + 60
    while True:  # polling the daemon's status (a failure bound, not a pacing wait)
        echo = {c["name"]: c for c in status(daemon_env)["channels"]}["echo"]
        if echo["restarts"] >= 1 and echo["state"] == "ready":
            break
        assert time.monotonic() < deadline, echo
    assert "connection lost" in (echo["error"] or "") or echo["error"] is None
    third = post(url, {"id": "m3", "chat": "c1", "from": "alice", "text": "still there?"})
    assert third.text == "accepted"
    backend.call(backend.fake.wait_sent, 2)
    assert backend.fake.sent[-1] == {"chat": "c1", "text": "echo: still there?"}
    assert len(backend.fake.sent) == 2

    # A reply the platform refuses is logged with its conversation and kept in history:
    # the next turn of that chat (FIFO, so after the first committed) sees it.
    models = len(backend.fake.model_requests)
    assert post(url, {"id": "m4", "chat": "closed", "from": "alice", "text": "one"}).text == (
        "accepted"
    )
    assert post(url, {"id": "m5", "chat": "closed", "from": "alice", "text": "two"}).text == (
        "accepted"
    )
    backend.call(backend.fake.wait_model, models + 2)
    history = backend.fake.model_requests[-1]["messages"]
    assert {"role": "assistant", "content": "echo: one"} in [
        {"role": m["role"], "content": m["content"]} for m in history
    ]

    echo = {c["name"]: c for c in status(daemon_env)["channels"]}["echo"]
    assert "window closed" in echo["last_delivery_error"]

    home = Path(daemon_env["FERMIX_HOME"])
    fermix(daemon_env, "stop")
    log = (home / "logs" / "fermix.log").read_text()
    assert "channel echo crashed" in log
    assert "reply undelivered on echo (chat closed" in log

    # A restart keeps the seen-ids record: the redelivered m1 still runs nothing.
    fermix(daemon_env, "start")
    url = status(daemon_env)["http"]["url"]
    assert post(url, {"id": "m1", "chat": "c1", "from": "alice", "text": "hello"}).text == (
        "duplicate"
    )


def test_a_scheduled_job_delivers_to_a_running_channel(daemon_env, backend) -> None:
    fermix(daemon_env, "start")
    added = json.loads(
        fermix(
            daemon_env,
            "jobs",
            "add",
            "--schedule",
            "0 9 * * *",
            "--prompt",
            "morning report",
            "--delivery",
            "channel",
            "--channel",
            "echo",
            "--chat-id",
            "c7",
            "--json",
        ).stdout
    )
    job = added["job"]
    assert job["delivery_target"] == {"channel": "echo", "chat_id": "c7", "thread_id": None}
    ran = json.loads(fermix(daemon_env, "jobs", "run-now", job["id"], "--wait", "--json").stdout)
    run = ran["run"]
    assert run["status"] == "succeeded", run
    assert run["delivery_status"] == "delivered", run
    assert {"chat": "c7", "text": "echo: morning report"} in backend.fake.sent

    # A channel that is not running: retried, then recorded on the run; the result is kept.
    refused = fermix(
        daemon_env,
        "jobs",
        "add",
        "-s",
        "0 9 * * *",
        "-p",
        "x",
        "--delivery",
        "channel",
        "--channel",
        "nowhere",
        "--chat-id",
        "1",
        check=False,
    )
    assert refused.returncode == 1
    assert "unknown channel 'nowhere'" in refused.stderr


def tool_call_reply(body: dict, name: str, arguments: str) -> Reply:
    """The model calling one tool, in whichever form (SSE or JSON) the request asked for."""
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    if body.get("stream"):

        def chunk(delta: dict, finish: str | None) -> dict:
            return {
                "id": "x",
                "object": "chat.completion.chunk",
                "model": "qwen3",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        return Reply(
            sse=[
                chunk({"role": "assistant", "tool_calls": [call]}, None),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        )
    reply = completion("")
    reply["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    reply["choices"][0]["finish_reason"] = "tool_calls"
    return Reply(body=reply)


def test_a_job_scheduled_from_a_channel_chat_delivers_back_to_it(daemon_env, backend) -> None:
    """origin is resolved once, at creation, to the chat the owner asked in."""
    real = backend.server.handler
    arguments = json.dumps({"task_prompt": "weekly summary", "schedule": "0 9 * * 1"})

    async def scripted(request: RecordedRequest) -> Reply:
        body = request.json() if request.path != "/send" else {}
        messages = body.get("messages") or []
        users = [m["content"] for m in messages if m["role"] == "user"]
        first_step = not any(m["role"] == "tool" for m in messages)
        if users and users[-1] == "every monday please" and first_step:
            backend.fake.model_requests.append(body)
            return tool_call_reply(body, "schedule_job", arguments)
        return await real(request)

    backend.server.handler = scripted
    fermix(daemon_env, "start")
    url = status(daemon_env)["http"]["url"]
    answer = post(url, {"id": "s1", "chat": "team", "from": "alice", "text": "every monday please"})
    assert answer.text == "accepted"
    backend.call(backend.fake.wait_sent, 1)
    (job,) = json.loads(fermix(daemon_env, "jobs", "list", "--json").stdout)["jobs"]
    assert job["delivery_mode"] == "origin"
    assert job["delivery_target"] == {"channel": "echo", "chat_id": "team", "thread_id": None}
    assert job["trust"] == "operator"
    sent = len(backend.fake.sent)
    ran = json.loads(fermix(daemon_env, "jobs", "run-now", job["id"], "--wait", "--json").stdout)
    assert ran["run"]["delivery_status"] == "delivered", ran
    assert backend.fake.sent[sent:] == [{"chat": "team", "text": "echo: weekly summary"}]

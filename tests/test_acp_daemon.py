"""``fermix acp`` as a real subprocess, driven by the official ``agent-client-protocol`` client.

A real daemon (``fermix start``) serves the ``acp`` channel on ``$FERMIX_HOME/acp.sock``;
the model is a loopback OpenAI-compatible server (the keyless Ollama provider) that streams
its answers as Chat Completions SSE. Prompts starting with ``hold:`` stream one chunk and
then wait at the model until the test releases them (or the turn is cancelled), which is
how these tests see a chunk arrive while the turn is still running — on events, never time.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

acp = pytest.importorskip("acp", reason="the agent-client-protocol SDK is not installed")

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block  # noqa: E402
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback  # noqa: E402

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "qwen3",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class FakeModel:
    """Streams ``echo: <text>`` in two pieces; ``hold:`` prompts wait after the first."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.requests: list[dict] = []

    async def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        self.requests.append(body)
        users = [text_of(m.get("content")) for m in body["messages"] if m["role"] == "user"]
        text = users[-1]
        pieces = ["echo: ", text]
        sse = [
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": p}) for p in pieces),
            chunk({}, "stop"),
            "[DONE]",
        ]
        if not body.get("stream"):
            return Reply(
                body={
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "qwen3",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(pieces)},
                            "finish_reason": "stop",
                        }
                    ],
                }
            )
        last = body["messages"][-1]
        if last["role"] == "tool":  # answer with what the tool read
            sse = [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": f"the file says {text_of(last['content']).strip()}"}),
                chunk({}, "stop"),
                "[DONE]",
            ]
        elif text.startswith("read:"):  # call file_read on a path relative to the cwd
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "file_read",
                    "arguments": json.dumps({"path": text.removeprefix("read:")}),
                },
            }
            sse = [
                chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
                chunk({}, "tool_calls"),
                "[DONE]",
            ]
        gate = self.gates.setdefault(text, anyio.Event()) if text.startswith("hold:") else None

        async def before(index: int) -> None:
            if gate is not None and index == 2:
                await gate.wait()

        return Reply(sse=sse, before_item=before)

    def release(self, key: str) -> None:  # runs on the loopback's loop (server.call)
        self.gates.setdefault(key, anyio.Event()).set()


class Recorder:
    """The editor's side: records every ``session/update``, wakes waiters."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Fermix asked the editor for a permission it never needs")

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text
            for s, u in self.updates
            if s == session_id and u.session_update == kind and hasattr(u.content, "text")
        )

    async def wait_text(self, session_id: str, needle: str) -> None:
        with anyio.fail_after(60):
            while needle not in self.text(session_id):
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
def model():
    fake = FakeModel()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server
        for key in list(fake.gates):  # never leave a held stream behind
            server.call(fake.release, key)


@pytest.fixture
def acp_env(tmp_path, model):
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
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env.pop("FERMIX_LOAD_PLUGINS", None)
    env.pop("FERMIX_HTTP_BIND", None)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def fermix(env, *args, check=True):
    result = subprocess.run([FERMIX, *args], env=env, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"fermix {args}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result


def start_daemon(env) -> None:
    fermix(env, "start")
    deadline = time.monotonic() + 60
    while True:  # the channel becomes ready after the daemon's control socket answers
        state = json.loads(fermix(env, "status", "--json").stdout)
        channels = {c["name"]: c for c in state.get("channels") or []}
        if channels.get("acp", {}).get("state") == "ready":
            return
        assert time.monotonic() < deadline, f"acp never became ready: {channels.get('acp')}"
        time.sleep(0.1)


def test_without_a_daemon_fermix_acp_says_how_to_start_one(acp_env) -> None:
    result = fermix(acp_env, "acp", check=False)
    assert result.returncode == 3
    assert "no Fermix daemon is running" in result.stderr
    assert "fermix start" in result.stderr
    assert result.stdout == ""  # nothing on the protocol stream


def test_prompt_streams_updates_and_a_slash_is_text(acp_env, model, tmp_path) -> None:
    start_daemon(acp_env)
    home = Path(acp_env["FERMIX_HOME"])
    mode = stat.S_IMODE(os.stat(home / "acp.sock").st_mode)
    assert mode == 0o600, oct(mode)
    work = tmp_path / "project"
    work.mkdir()

    async def scenario() -> None:
        recorder = Recorder()
        async with spawn_agent_process(recorder, FERMIX, "acp", env=acp_env) as (conn, _proc):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert init.protocol_version == PROTOCOL_VERSION
            assert init.agent_capabilities.load_session is True
            assert init.agent_info.name == "fermix"
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            sid = session.session_id

            answer = await conn.prompt(session_id=sid, prompt=[text_block("hello there")])
            assert answer.stop_reason == "end_turn"
            assert recorder.text(sid) == "echo: hello there"
            chunks = [u for s, u in recorder.updates if u.session_update == "agent_message_chunk"]
            assert len(chunks) >= 2  # streamed in pieces, not one final message

            # No slash commands: /stop is ordinary text that reaches the model.
            answer = await conn.prompt(session_id=sid, prompt=[text_block("/stop now")])
            assert answer.stop_reason == "end_turn"
            assert recorder.text(sid).endswith("echo: /stop now")
            assert text_of(model.fake.requests[-1]["messages"][-1]["content"]) == "/stop now"
            # The second turn saw the first one's history.
            users = [
                text_of(m["content"])
                for m in model.fake.requests[-1]["messages"]
                if m["role"] == "user"
            ]
            assert users == ["hello there", "/stop now"]

    anyio.run(scenario)


def test_cancel_stops_the_turn_after_the_first_chunk(acp_env, model, tmp_path) -> None:
    start_daemon(acp_env)

    async def scenario() -> None:
        recorder = Recorder()
        async with spawn_agent_process(recorder, FERMIX, "acp", env=acp_env) as (conn, _proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=sid, prompt=[text_block("hold: long answer")])
            )
            await recorder.wait_text(sid, "echo: ")  # the first chunk, mid-turn
            assert not prompt.done()
            await conn.cancel(session_id=sid)
            with anyio.fail_after(60):
                answer = await prompt
            assert answer.stop_reason == "cancelled"
            assert "long answer" not in recorder.text(sid)

            # The session still works after a cancel.
            answer = await conn.prompt(session_id=sid, prompt=[text_block("after")])
            assert answer.stop_reason == "end_turn"
            assert recorder.text(sid).endswith("echo: after")

    anyio.run(scenario)


def test_load_session_replays_history_in_a_new_connection(acp_env, model, tmp_path) -> None:
    start_daemon(acp_env)

    async def scenario() -> None:
        first = Recorder()
        async with spawn_agent_process(first, FERMIX, "acp", env=acp_env) as (conn, _proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("remember me")])

        second = Recorder()
        async with spawn_agent_process(second, FERMIX, "acp", env=acp_env) as (conn, _proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert second.text(sid, "user_message_chunk") == "remember me"
            assert second.text(sid) == "echo: remember me"
            with pytest.raises(acp.RequestError):
                await conn.load_session(cwd=str(tmp_path), session_id="acp-nope", mcp_servers=[])
            with pytest.raises(acp.RequestError):
                await conn.prompt(session_id="acp-unknown", prompt=[text_block("x")])

    anyio.run(scenario)


def test_tool_calls_are_reported_and_cwd_is_the_request_directory(acp_env, tmp_path) -> None:
    # The sandbox admits a request directory only inside the user's home directory.
    acp_env["HOME"] = str(tmp_path)
    start_daemon(acp_env)
    work = tmp_path / "project"
    work.mkdir()
    (work / "notes.txt").write_text("the-word-is-heliotrope\n")

    async def scenario() -> None:
        recorder = Recorder()
        async with spawn_agent_process(recorder, FERMIX, "acp", env=acp_env) as (conn, _proc):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            sid = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=sid, prompt=[text_block("read:notes.txt")])
            assert answer.stop_reason == "end_turn"
            tools = [u for _, u in recorder.updates if u.session_update == "tool_call"]
            assert [(t.title, t.kind, t.status) for t in tools] == [
                ("file_read", "read", "in_progress")
            ]
            assert tools[0].raw_input == {"path": "notes.txt"}
            done = [u for _, u in recorder.updates if u.session_update == "tool_call_update"]
            assert [(d.tool_call_id, d.status) for d in done] == [
                (tools[0].tool_call_id, "completed")
            ]
            # The relative path was read from the session's cwd.
            assert "heliotrope" in recorder.text(sid)

    anyio.run(scenario)


TS_CLIENT = Path(__file__).parent / "acp_ts"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
@pytest.mark.skipif(
    not (TS_CLIENT / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(),
    reason="the TypeScript ACP SDK is not installed: run `npm ci` in tests/acp_ts",
)
def test_the_typescript_sdk_drives_fermix_acp_too(acp_env, model, tmp_path) -> None:
    start_daemon(acp_env)
    result = subprocess.run(
        ["node", str(TS_CLIENT / "client.mjs"), FERMIX, str(tmp_path)],
        env=acp_env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=TS_CLIENT,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["agentName"] == "fermix" and seen["loadSession"] is True
    assert seen["firstStop"] == "end_turn"
    assert "".join(seen["streamed"]) == "echo: hello from typescript"
    assert len(seen["streamed"]) >= 2
    assert seen["cancelledStop"] == "cancelled"

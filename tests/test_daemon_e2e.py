"""A real daemon process, the real control socket, a loopback model speaking the real wire.

The model is an OpenAI-compatible Chat Completions server on 127.0.0.1 (configured as the
keyless Ollama provider). Prompts starting with ``block:`` wait at the model until the
test releases them, which is how these tests hold a turn "in flight" without sleeping.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from fermix_core.daemon.client import DaemonClient
from fermix_core.daemon.process import read_pidfile, wait_for_exit
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"


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


def directory_request(path: str) -> dict:
    """A completion calling request_directory_access for *path*."""
    body = completion("")
    body["choices"][0]["message"]["tool_calls"] = [
        {
            "id": "call_1",
            "type": "function",
            "function": {
                "name": "request_directory_access",
                "arguments": json.dumps({"path": path, "reason": "the report lives there"}),
            },
        }
    ]
    body["choices"][0]["finish_reason"] = "tool_calls"
    return body


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class FakeModel:
    """Echoes the last user message; ``block:`` prompts wait for :meth:`release`."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.arrived: dict[str, anyio.Event] = {}
        self.order: list[str] = []

    def _event(self, table: dict[str, anyio.Event], key: str) -> anyio.Event:
        return table.setdefault(key, anyio.Event())

    async def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        users = [text_of(m.get("content")) for m in body["messages"] if m["role"] == "user"]
        text = users[-1]
        self.order.append(text)
        self._event(self.arrived, text).set()
        if text.startswith("block:"):
            await self._event(self.gates, text).wait()
        if text == "say nothing":
            return Reply(body=completion(""))
        if body["messages"][-1]["role"] == "tool":
            return Reply(body=completion("Waiting for your approval."))
        if text.startswith("grant:"):
            return Reply(body=directory_request(text.removeprefix("grant:")))
        return Reply(body=completion(f"echo: {text}"))

    # Run on the server's loop thread through ThreadedLoopback.call:
    def release(self, key: str) -> None:
        self._event(self.gates, key).set()

    async def wait_arrived(self, key: str) -> None:
        with anyio.fail_after(30):
            await self._event(self.arrived, key).wait()


@pytest.fixture
def model():
    fake = FakeModel()
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


@pytest.fixture
def daemon_env(tmp_path, model):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{model.url}/v1"\n'
        'default_model = "qwen3"\n'
        # Background memory review makes its own model calls; these tests read the last one.
        "[fermix_core.memory]\nreview_enabled = false\n"
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env.pop("FERMIX_LOAD_PLUGINS", None)
    env.pop("OLLAMA_BASE_URL", None)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def fermix(env, *args, check=True, timeout=60):
    result = subprocess.run(
        [FERMIX, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"fermix {args} -> {result.returncode}\n{result.stdout}\n{result.stderr}"
        )
    return result


def ask_json(env, text, session="default"):
    return json.loads(fermix(env, "ask", text, "--session", session, "--json").stdout)


async def call(home: Path, method: str, params: dict) -> dict:
    async with DaemonClient(home / "daemon.sock") as client:
        return await client.call(method, params)


def test_lifecycle_status_ask_and_stop(daemon_env) -> None:
    assert fermix(daemon_env, "status", check=False).returncode == 3
    fermix(daemon_env, "start")
    status = json.loads(fermix(daemon_env, "status", "--json").stdout)
    assert status["running"] is True
    assert status["primary_provider"] == "ollama"
    assert status["fallback_providers"] == []
    assert status["version_mismatch"] is False
    assert fermix(daemon_env, "health").returncode == 0

    result = ask_json(daemon_env, "hello there")
    assert result["reply"] == "echo: hello there"
    assert result["provider"] == "ollama" and result["model"] == "qwen3"
    assert result["conversation_key"] == ["cli", "default", None]

    home = Path(daemon_env["FERMIX_HOME"])
    pid = read_pidfile(home / "daemon.pid").pid
    fermix(daemon_env, "stop")
    assert wait_for_exit(pid, 10)
    assert fermix(daemon_env, "status", check=False).returncode == 3
    assert not (home / "daemon.sock").exists() and not (home / "daemon.pid").exists()


def test_history_persists_across_turns_and_sessions_are_separate(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    ask_json(daemon_env, "remember apples", session="a")
    ask_json(daemon_env, "something else", session="b")
    ask_json(daemon_env, "what did I say?", session="a")
    last = model.requests[-1].json()["messages"]
    texts = [text_of(m.get("content")) for m in last if m["role"] != "system"]
    assert texts == ["remember apples", "echo: remember apples", "what did I say?"]


def test_fifo_per_conversation_and_concurrency_across(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    home = Path(daemon_env["FERMIX_HOME"])
    results: dict[str, dict] = {}

    async def scenario() -> None:
        async def one(text: str, session: str) -> None:
            results[text] = await call(home, "ask", {"text": text, "session": session})

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "block:first", "s")
            await anyio.to_thread.run_sync(model.call, model.fake.wait_arrived, "block:first")
            tg.start_soon(one, "second", "s")  # same conversation: must wait behind the first
            tg.start_soon(one, "elsewhere", "other")  # another conversation: runs now
            await anyio.to_thread.run_sync(model.call, model.fake.wait_arrived, "elsewhere")
            assert "second" not in model.fake.order
            model.call(model.fake.release, "block:first")

    anyio.run(scenario)
    assert model.fake.order.index("block:first") < model.fake.order.index("second")
    assert results["second"]["reply"] == "echo: second"
    assert results["block:first"]["reply"] == "echo: block:first"


def test_stop_cancels_the_turn_and_marks_history(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    home = Path(daemon_env["FERMIX_HOME"])
    results: dict[str, dict] = {}

    async def scenario() -> None:
        async def blocked() -> None:
            results["blocked"] = await call(home, "ask", {"text": "block:long job", "session": "s"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(blocked)
            await anyio.to_thread.run_sync(model.call, model.fake.wait_arrived, "block:long job")
            results["stop"] = await call(home, "ask", {"text": "/stop", "session": "s"})

    anyio.run(scenario)
    model.call(model.fake.release, "block:long job")
    assert "stop" in results["stop"]["reply"].lower()
    assert results["blocked"]["reply"] == ""  # a stopped turn delivers nothing
    assert results["blocked"]["status"] == "stopped"
    ask_json(daemon_env, "next", session="s")
    messages = model.requests[-1].json()["messages"]
    texts = [text_of(m.get("content")) for m in messages if m["role"] != "system"]
    assert texts[0] == "block:long job"
    assert "stopped before I finished" in texts[1]
    assert texts[-1] == "next"
    assert "echo: block:long job" not in texts


def test_empty_completion_is_answered_but_never_committed(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    empty = ask_json(daemon_env, "say nothing")
    assert empty["status"] == "empty" and "try again" in empty["reply"].lower()
    ask_json(daemon_env, "and now?")
    messages = model.requests[-1].json()["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert all(text_of(m.get("content")).strip() for m in assistant)


def test_sigkill_mid_turn_loses_no_committed_message(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    home = Path(daemon_env["FERMIX_HOME"])
    ask_json(daemon_env, "first fact")
    pid = read_pidfile(home / "daemon.pid").pid
    hung = subprocess.Popen(
        [FERMIX, "ask", "block:in flight", "--json"],
        env=daemon_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    model.call(model.fake.wait_arrived, "block:in flight")
    os.kill(pid, signal.SIGKILL)
    assert wait_for_exit(pid, 10)
    hung.communicate(timeout=60)
    model.call(model.fake.release, "block:in flight")

    database = sqlite3.connect(home / "memory.db")
    assert database.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    database.close()

    fermix(daemon_env, "start")  # stale socket and pid file are detected and cleaned
    ask_json(daemon_env, "after the crash")
    messages = model.requests[-1].json()["messages"]
    texts = [text_of(m.get("content")) for m in messages if m["role"] != "system"]
    assert texts[:2] == ["first fact", "echo: first fact"]
    assert "echo: block:in flight" not in texts
    assert texts[-1] == "after the crash"


def test_in_process_ask_without_a_daemon(daemon_env) -> None:
    result = ask_json(daemon_env, "no daemon here")
    assert result["reply"] == "echo: no daemon here"
    assert not (Path(daemon_env["FERMIX_HOME"]) / "daemon.sock").exists()


def test_no_provider_configured_still_starts_and_explains(tmp_path) -> None:
    env = dict(
        os.environ,
        FERMIX_HOME=str(tmp_path / "h"),
        PYTHON_KEYRING_BACKEND="fermix_core.keyring_backend.MemoryKeyring",
    )
    env.pop("OLLAMA_BASE_URL", None)
    try:
        fermix(env, "start")
        result = fermix(env, "ask", "hi", "--json", check=False)
        assert result.returncode == 1
        assert "run `fermix setup`" in json.loads(result.stdout)["reply"]
    finally:
        fermix(env, "stop", check=False)


def test_chat_session_in_process_and_through_the_daemon(daemon_env) -> None:
    script = "hello there\n/whoami\n\n/exit\n"
    local = subprocess.run(
        [FERMIX, "chat", "--session", "c"],
        env=daemon_env,
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert local.returncode == 0, local.stderr
    assert "(in-process)" in local.stdout
    assert "fermix> echo: hello there" in local.stdout
    assert "operator" in local.stdout  # /whoami answered by the gateway, not the model
    fermix(daemon_env, "start")
    remote = subprocess.run(
        [FERMIX, "chat", "--session", "c"],
        env=daemon_env,
        input="again\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert remote.returncode == 0, remote.stderr
    assert "(daemon)" in remote.stdout and "fermix> echo: again" in remote.stdout


def test_run_prints_one_ready_line_and_a_second_run_is_refused(daemon_env) -> None:
    home = Path(daemon_env["FERMIX_HOME"])
    env = {k: v for k, v in daemon_env.items() if k != "UV_RUN_RECURSION_DEPTH"}
    daemon = subprocess.Popen(
        [FERMIX, "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready = daemon.stdout.readline()  # blocks until the daemon says it is ready
        pid = read_pidfile(home / "daemon.pid").pid
        assert pid == daemon.pid
        assert f"ready (pid {pid}) on {home / 'daemon.sock'}" in ready
        # Nothing configured: only the on-by-default local ACP surface runs.
        assert "channels: acp ready" in ready or "channels: acp starting" in ready
        assert "provider: ollama" in ready
        assert '`fermix ask "hello"` or `fermix chat`' in ready

        second = fermix(env, "run", check=False)
        assert second.returncode == 1
        assert f"a daemon is already running (pid {pid})" in second.stderr
        assert "TaskGroup" not in second.stderr and "Traceback" not in second.stderr
        # The refused run left the live daemon's files alone.
        assert fermix(env, "health").returncode == 0

        again = fermix(env, "start")
        assert f"already running (pid {pid})" in again.stdout
        assert "`fermix restart` applies config changes" in again.stdout
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0


def test_ready_line_under_uv_run_says_uv_run_fermix(daemon_env) -> None:
    daemon = subprocess.Popen(
        [FERMIX, "run"],
        env={**daemon_env, "UV_RUN_RECURSION_DEPTH": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert '`uv run fermix ask "hello"`' in daemon.stdout.readline()
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0


def test_restart_with_a_config_typo_keeps_the_running_daemon(daemon_env) -> None:
    home = Path(daemon_env["FERMIX_HOME"])
    fermix(daemon_env, "start")
    pid = read_pidfile(home / "daemon.pid").pid
    config = home / "config.toml"
    good = config.read_text()
    config.write_text(good + "[fermix_core.agent]\ntimezon = 'Europe/Berlin'\n")

    refused = fermix(daemon_env, "restart", check=False)
    assert refused.returncode == 1
    assert "fermix_core.agent.timezon" in refused.stderr
    assert f"the running daemon (pid {pid}) was kept" in refused.stderr
    assert read_pidfile(home / "daemon.pid").pid == pid
    assert ask_json(daemon_env, "still here")["reply"] == "echo: still here"

    config.write_text(good)
    fermix(daemon_env, "restart")
    new_pid = read_pidfile(home / "daemon.pid").pid
    assert new_pid != pid and wait_for_exit(pid, 10)
    assert fermix(daemon_env, "health").returncode == 0


# --------------------------------------------------------------------------- scheduled jobs


def jobs_json(env, *args, check=True):
    result = fermix(env, "jobs", *args, "--json", check=check)
    return result.returncode, json.loads(result.stdout)


def test_jobs_through_the_daemon_add_run_inspect_and_stop(daemon_env, model) -> None:
    code, answer = jobs_json(daemon_env, "list", check=False)
    assert code == 3
    assert "no daemon is running" in answer["error"]
    plain = fermix(daemon_env, "jobs", "list", check=False)
    assert "fermix start" in plain.stderr

    fermix(daemon_env, "start")
    _, added = jobs_json(
        daemon_env,
        "add",
        "--schedule",
        "0 7 * * 1-5",
        "--prompt",
        "daily digest",
        "--timezone",
        "Europe/Berlin",
        "--delivery",
        "origin",
    )
    job = added["job"]
    assert job["schedule"] == "0 7 * * 1-5"
    assert job["delivery_mode"] == "local"  # the CLI has no chat to send to later
    assert added["notes"]
    code, refused = jobs_json(
        daemon_env, "add", "--schedule", "daily at 8am", "--prompt", "x", check=False
    )
    assert code == 1
    assert "0 8 * * *" in refused["error"]

    _, listed = jobs_json(daemon_env, "list")
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    _, ran = jobs_json(daemon_env, "run-now", job["id"], "--wait")
    run = ran["run"]
    assert run["status"] == "succeeded", run
    assert run["trigger"] == "manual"
    assert run["final_response"] == "echo: daily digest"
    assert run["session_id"].startswith(f"cron_{job['id']}_")
    request = model.requests[-1].json()
    system = text_of(request["messages"][0]["content"])
    assert "scheduled job" in system
    assert [m["role"] for m in request["messages"]] == ["system", "user"]

    _, shown = jobs_json(daemon_env, "show", "--run", str(run["id"]))
    assert shown["run"]["task_prompt"] == "daily digest"
    assert shown["run"]["delivery_status"] == "stored"
    _, history = jobs_json(daemon_env, "runs", job["id"])
    assert [r["id"] for r in history["runs"]] == [run["id"]]
    _, paused = jobs_json(daemon_env, "pause", job["id"])
    assert paused["job"]["status"] == "paused"
    code, refused = jobs_json(daemon_env, "run-now", job["id"], check=False)
    assert code == 1
    assert "paused" in refused["error"]
    _, resumed = jobs_json(daemon_env, "resume", job["id"])
    assert resumed["job"]["status"] == "scheduled"

    fermix(daemon_env, "stop")
    code, _ = jobs_json(daemon_env, "list", check=False)
    assert code == 3
    fermix(daemon_env, "start")  # the job survived the restart
    _, listed = jobs_json(daemon_env, "list")
    assert [j["status"] for j in listed["jobs"]] == ["scheduled"]
    _, removed = jobs_json(daemon_env, "remove", job["id"])
    assert removed["removed"] == job["id"]
    _, listed = jobs_json(daemon_env, "list")
    assert listed["jobs"] == []


def test_the_agent_schedules_a_job_with_its_tool(daemon_env, model) -> None:
    """The schedule_job tool reaches the daemon's job service through a real turn."""

    calls = {"n": 0}

    async def scripted(request: RecordedRequest) -> Reply:
        body = request.json()
        calls["n"] += 1
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        if calls["n"] == 1:
            assert "schedule_job" in tools
            arguments = json.dumps({"task_prompt": "water the plants", "schedule": "every 2 days"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "schedule_job", "arguments": arguments},
                    }
                ],
            }
            reply = completion("")
            reply["choices"][0]["message"] = message
            reply["choices"][0]["finish_reason"] = "tool_calls"
            return Reply(body=reply)
        return Reply(body=completion("Scheduled."))

    model.server.handler = scripted
    fermix(daemon_env, "start")
    result = ask_json(daemon_env, "remind me to water the plants every other day")
    assert result["reply"] == "Scheduled."
    assert [c["name"] for c in result["tool_calls"]] == ["schedule_job"]
    assert result["tool_calls"][0]["ok"] is True
    _, listed = jobs_json(daemon_env, "list")
    (job,) = listed["jobs"]
    assert job["task_prompt"] == "water the plants"
    assert job["schedule"] == "every 2 days"
    assert job["trust"] == "operator"


def test_a_daemon_killed_mid_job_run_settles_it_after_restart(daemon_env, model) -> None:
    fermix(daemon_env, "start")
    home = Path(daemon_env["FERMIX_HOME"])
    _, added = jobs_json(daemon_env, "add", "--schedule", "every 1 day", "--prompt", "block:job")
    job_id = added["job"]["id"]
    _, started = jobs_json(daemon_env, "run-now", job_id)
    run_id = started["run"]["id"]
    model.call(model.fake.wait_arrived, "block:job")  # the run is in flight at the model
    _, mid = jobs_json(daemon_env, "show", job_id)
    assert mid["job"]["status"] == "running"
    pid = read_pidfile(home / "daemon.pid").pid
    os.kill(pid, signal.SIGKILL)
    assert wait_for_exit(pid, 10)
    model.call(model.fake.release, "block:job")

    fermix(daemon_env, "start")  # the killed, not yet reaped daemon is not mistaken for live
    _, shown = jobs_json(daemon_env, "show", "--run", str(run_id))
    assert shown["run"]["status"] == "failed"
    assert "daemon stopped while this run was in progress" in shown["run"]["error"]
    _, job = jobs_json(daemon_env, "show", job_id)
    assert job["job"]["status"] == "scheduled"
    assert job["job"]["next_run_at"] is not None


class ChatProcess:
    """``fermix chat`` as a subprocess whose output is read line by line as it comes."""

    def __init__(self, env, session: str) -> None:
        import threading

        self.proc = subprocess.Popen(
            [FERMIX, "chat", "--session", session],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        # A safety net for a hung child, never a timing assertion.
        self._watchdog = threading.Timer(90, self.proc.kill)
        self._watchdog.start()
        self.output: list[str] = []

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def read_until(self, needle: str) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"chat ended before {needle!r}:\n{''.join(self.output)}")
            self.output.append(line)
            if needle in line:
                return line

    def close(self) -> int:
        self.send("/exit")
        rest, err = self.proc.communicate(timeout=60)
        self._watchdog.cancel()
        self.output.append(rest)
        self.stderr = err
        return self.proc.returncode


@pytest.mark.parametrize("through_daemon", [False, True], ids=["in-process", "daemon"])
def test_chat_prints_a_background_result_when_it_arrives(daemon_env, model, through_daemon):
    if through_daemon:
        fermix(daemon_env, "start")
    chat = ChatProcess(daemon_env, "bgchat")
    try:
        chat.send("/background block:report")
        chat.read_until("Started background task bg1")
        model.call(model.fake.release, "block:report")
        line = chat.read_until("fermix (later)>")
        assert "echo: block:report" in line
    finally:
        code = chat.close()
    assert code == 0, chat.stderr
    # Committed to the conversation's history: the next turn replays it.
    if through_daemon:
        ask_json(daemon_env, "and now?", session="bgchat")
        last = model.requests[-1].json()["messages"]
        texts = [text_of(m.get("content")) for m in last if m["role"] != "system"]
        assert texts[:2] == ["block:report", "echo: block:report"]


def test_in_process_ask_says_background_work_needs_the_daemon(daemon_env) -> None:
    result = fermix(daemon_env, "ask", "/background block:never released")
    assert "Started background task" in result.stdout
    assert "needs" not in result.stdout  # the notice goes to stderr, the reply to stdout
    assert "fermix start" in result.stderr and "bg1" in result.stderr


def test_ultra_answers_are_printed_by_ask_in_process_and_through_the_daemon(daemon_env) -> None:
    local = fermix(daemon_env, "ask", "/ultra compare the plans", "--session", "ul")
    assert "ultra mode" in local.stdout and "echo: compare the plans" in local.stdout
    fermix(daemon_env, "start")
    remote = ask_json(daemon_env, "/ultra and again", session="ul")
    assert remote["reply"].endswith("echo: and again") and remote["status"] == "ok"


def test_the_cli_owner_sees_the_approval_prompt_in_ask_and_confirms_in_chat(
    daemon_env, tmp_path
) -> None:
    import re

    wanted = tmp_path / "reports"
    wanted.mkdir()
    local = fermix(daemon_env, "ask", f"grant:{wanted}", "--session", "ap")
    assert str(wanted) in local.stdout and "Approve with /confirm" in local.stdout
    assert "fermix grant path" in local.stderr  # the in-process token dies with the process

    fermix(daemon_env, "start")
    asked = fermix(daemon_env, "ask", f"grant:{wanted}", "--session", "ap")
    assert "the report lives there" in asked.stdout and "Waiting" in asked.stdout
    assert "fermix grant path" not in asked.stderr

    chat = ChatProcess(daemon_env, "ap-chat")
    try:
        chat.send(f"grant:{wanted}")
        line = chat.read_until("Approve with /confirm")
        token = re.search(r"/confirm (\S+)", line).group(1)
        chat.send(f"/confirm {token}")
        assert "Done" in chat.read_until("Done")
    finally:
        assert chat.close() == 0, chat.stderr
    config = (Path(daemon_env["FERMIX_HOME"]) / "config.toml").read_text()
    assert str(wanted) in config


def test_an_in_process_ask_finishes_its_post_reply_work_before_exiting(daemon_env, model):
    """Without a daemon, the memory review the turn scheduled runs before the process ends."""
    from fermix_core.memory.review import ReviewState

    home = Path(daemon_env["FERMIX_HOME"])
    config = home / "config.toml"
    config.write_text(config.read_text().replace("review_enabled = false", "review_enabled = true"))
    result = fermix(daemon_env, "ask", "remember that I like tea", "--session", "pr")
    assert "echo: remember that I like tea" in result.stdout
    assert len(model.requests) >= 2, "the review made no model call"
    state = ReviewState.load(home / "memory" / "main" / ".review.json")
    assert state.last_run is not None


def test_a_reply_leaves_the_history_index_caught_up(daemon_env):
    """The post-reply work indexes the turn's messages, so the next recall has no backlog."""
    home = Path(daemon_env["FERMIX_HOME"])
    fermix(daemon_env, "ask", "zebra crossings at dusk", "--session", "hx")
    database = sqlite3.connect(home / "memory.db")
    try:
        (mark,) = database.execute(
            "SELECT value FROM memory_state WHERE name = 'history_indexed_id'"
        ).fetchone()
        assert int(mark) == database.execute("SELECT MAX(id) FROM messages").fetchone()[0]
        hits = database.execute(
            "SELECT COUNT(*) FROM memory_history_fts WHERE memory_history_fts MATCH 'zebra'"
        ).fetchone()[0]
        assert hits == 2, "the question and the echoed answer"
        (docs,) = database.execute(
            "SELECT docs FROM memory_history_terms WHERE term = 'zebra'"
        ).fetchone()
        assert docs == 2
    finally:
        database.close()


# --------------------------------------------------------------------------- skills


def skills_json(env, *args, check=True):
    result = fermix(env, "skills", *args, "--json", check=check)
    return result.returncode, json.loads(result.stdout)


def test_skills_cli_in_process_then_reload_in_the_running_daemon(daemon_env) -> None:
    home = Path(daemon_env["FERMIX_HOME"])
    _, listed = skills_json(daemon_env, "list")
    assert [s["name"] for s in listed["skills"]] == ["self-knowledge"]
    _, reloaded = skills_json(daemon_env, "reload")
    assert reloaded["daemon"] is False and reloaded["skills"] == ["self-knowledge"]
    code, missing = skills_json(daemon_env, "view", "nope", check=False)
    assert code == 1 and "available skills: self-knowledge" in missing["error"]

    fermix(daemon_env, "start")
    package = home / "skills" / "greeting"
    package.mkdir(parents=True)
    (package / "SKILL.md").write_text(
        "---\nname: greeting\ndescription: Use when greeting someone.\nlicense: MIT\n---\n"
        "Say hello warmly.\n"
    )
    (package / "phrases.md").write_text("hello, hi")
    bad = home / "skills" / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_text("no front matter here\n")
    _, report = skills_json(daemon_env, "reload")
    assert report["daemon"] is True
    assert report["added"] == ["greeting"] and report["removed"] == []
    assert any("broken/SKILL.md" in e for e in report["errors"])
    _, shown = skills_json(daemon_env, "view", "greeting")
    assert shown["body"] == "Say hello warmly.\n" and shown["extra"] == {"license": "MIT"}
    _, ref = skills_json(daemon_env, "view", "greeting", "--file", "phrases")
    assert ref["text"] == "hello, hi"
    plain = fermix(daemon_env, "skills", "list")
    assert "greeting" in plain.stdout and "broken" in plain.stderr

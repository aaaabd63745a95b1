"""Core's own command handlers, driven through the real router and registration."""

from __future__ import annotations

import pytest
from fermix_core.channel import Attachment
from fermix_core.commands.builtin import BACKGROUND_LIMIT_REPLY
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import StopReport
from fermix_core.tool import Trust

pytestmark = pytest.mark.anyio

KEY = ("tg", "chat", None)


async def test_help_for_owner_lists_everything_and_explains_pass_through(runner) -> None:
    await runner.run("/help")
    text = runner.last
    for name in ("help", "whoami", "new", "compact", "stop", "background", "tasks", "ultra"):
        assert f"/{name} — " in text
    assert "/sandbox — inspect and change the sandbox" in text
    assert "sent to the agent as ordinary text" in text
    assert "You are chatting as a guest" not in text


async def test_help_for_guest_lists_only_their_commands(runner) -> None:
    await runner.run("/help", sender="guest")
    text = runner.last
    assert "/help — " in text and "/whoami — " in text
    assert "/new" not in text and "/stop" not in text and "/sandbox" not in text
    assert "You are chatting as a guest" in text


async def test_whoami_owner(runner) -> None:
    await runner.run("/whoami")
    assert runner.last.splitlines() == [
        "Your tg user id: owner",
        "Role: operator (owner of this Fermix; the full tool surface).",
    ]


async def test_whoami_guest_with_and_without_command_allowlist(runner) -> None:
    await runner.run("/whoami", sender="guest")
    assert runner.last.startswith("Your tg user id: guest\nRole: guest")
    assert "command_allowlist" not in runner.last
    await runner.run("/whoami", sender="helper")
    assert "open to you through command_allowlist" in runner.last


async def test_whoami_without_owner_tells_how_to_become_it(runner) -> None:
    runner.policy = TrustPolicy(allowed_ids=["111", "222"], channel="telegram")
    await runner.run("/whoami", sender="222")
    assert 'owner_user_id = "222" in [fermix_channels.telegram]' in runner.last


async def test_whoami_local(runner) -> None:
    runner.policy = TrustPolicy.local_surface("cli")
    await runner.run("/whoami", sender="local-user")
    assert "operator (local caller" in runner.last


@pytest.mark.parametrize("text", ["/new", "/clear", "/NEW extra words"])
async def test_new_clears_the_window_and_says_what_is_kept(runner, text) -> None:
    await runner.run(text)
    assert runner.services.calls == [("clear", KEY)]
    assert "Long-term memory, resource revisions and scheduled jobs are preserved" in runner.last


async def test_compact_reports_what_the_runtime_did(runner) -> None:
    await runner.run("/compact")
    assert runner.services.calls == [("compact", KEY)]
    assert runner.last == "Compacted 10 messages."
    runner.services.compact_text = "   "
    await runner.run("/compact")
    assert runner.last.startswith("Compacted this conversation")


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (StopReport(False, 0), "Nothing was running in this conversation."),
        (
            StopReport(True, 0),
            "Stopped the running turn (its request stays in history as context only).",
        ),
        (StopReport(False, 1), "Dropped 1 queued message."),
        (
            StopReport(True, 3, 2),
            "Stopped the running turn (its request stays in history as context only); "
            "dropped 3 queued messages; stopped 2 background tasks.",
        ),
    ],
)
async def test_stop_says_what_it_stopped(runner, report, expected) -> None:
    runner.services.stop_report = report
    await runner.run("/stop")
    assert runner.services.calls == [("stop", KEY)]
    assert runner.last == expected


async def test_background_starts_a_detached_job_with_the_request_only(runner) -> None:
    await runner.run("/bg  summarize the repo\nin detail")
    ((verb, job),) = runner.services.calls
    assert verb == "background"
    assert job.background and job.run_profile == "normal"
    assert job.message.text == "summarize the repo\nin detail"
    assert job.message.chat_id == "chat" and job.trust is Trust.OPERATOR
    assert job.reply is runner.port
    assert "Started background task t1" in runner.last


async def test_background_at_the_cap_is_refused_not_queued(runner) -> None:
    runner.services.background_result = None
    await runner.run("/background do something")
    assert runner.last == BACKGROUND_LIMIT_REPLY
    assert "8 background tasks are already running — that is the limit" in BACKGROUND_LIMIT_REPLY
    assert [c[0] for c in runner.services.calls] == ["background"]


async def test_background_and_ultra_need_a_request(runner) -> None:
    await runner.run("/background")
    assert runner.last.startswith("Usage: /background")
    await runner.run("/ultra   ")
    assert runner.last.startswith("Usage: /ultra")
    assert runner.services.calls == []


async def test_background_with_only_an_attachment_is_a_request(runner) -> None:
    image = Attachment(kind="image", data=b"\x89PNG")
    await runner.run("/bg", attachments=[image])
    ((_, job),) = runner.services.calls
    assert job.message.attachments == [image] and job.message.text == ""


async def test_ultra_submits_a_foreground_turn_with_the_ultra_profile(runner) -> None:
    await runner.run("/ultra find every caller of parse()")
    ((verb, job),) = runner.services.calls
    assert verb == "submit"
    assert job.run_profile == "ultra" and not job.background
    assert job.message.text == "find every caller of parse()"
    assert "ultra mode" in runner.last


async def test_tasks_lists_background_work(runner) -> None:
    await runner.run("/tasks")
    assert runner.last == "No background tasks from this conversation."
    runner.services.tasks = [
        {"id": "t1", "status": "running", "prompt": "summarize\nthe   repo"},
        {"id": "t2", "status": "done", "prompt": "x" * 200},
        {"status": "failed"},
    ]
    await runner.run("/tasks")
    lines = runner.last.splitlines()
    assert lines[0] == "Background tasks:"
    assert lines[1] == "- t1 [running] summarize the repo"
    assert lines[2].startswith("- t2 [done] xxx") and lines[2].endswith("…")
    assert len(lines[2]) < 100
    assert lines[3] == "- ? [failed]"


@pytest.mark.parametrize("text", ["/sandbox", "/sandbox show", "/SANDBOX Show extra"])
async def test_sandbox_show_without_a_running_sandbox_says_so(runner, text) -> None:
    # These fakes run no sandbox; the real behaviour is covered in tests/sandbox/test_chat.py.
    await runner.run(text)
    assert "The sandbox is not running in this process" in runner.last


@pytest.mark.parametrize(
    "text",
    ["/sandbox grant ~/code", "/sandbox env allow PATH", "/grant ~/code", "/revoke ~/code"],
)
async def test_sandbox_mutations_without_a_running_sandbox_change_nothing(runner, text) -> None:
    await runner.run(text)
    assert "not running in this process" in runner.last
    assert runner.services.calls == []


async def test_sandbox_refuses_command_allowlisted_guests(runner) -> None:
    result = await runner.run("/sandbox show", sender="helper")
    assert result.refused
    assert "only the owner can run it" in runner.last

"""resolve_scope: the scope a caller gets is decided by the caller, the request only narrows."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.memory import MemoryFilter
from fermix_core.memory.scope import (
    JOB_ID_STATE_KEY,
    OWNER_SPEAKERS,
    SCOPES,
    MemoryAccessError,
    resolve_scope,
)
from fermix_core.tool import ToolContext, ToolError, Trust

KEY = ConversationKey("telegram", "42", None)


class Home:
    path = Path("/nonexistent")


def ctx(trust=Trust.OPERATOR, key=KEY, origin="main", job=None) -> ToolContext:
    state = {JOB_ID_STATE_KEY: job} if job is not None else {}
    return ToolContext(
        trust=trust, cwd=Path("/"), home=Home(), conversation_key=key, origin=origin, state=state
    )


@pytest.mark.parametrize("requested", SCOPES)
@pytest.mark.parametrize("trust", list(Trust))
def test_a_scheduled_run_reads_only_its_job_whatever_it_asks(requested, trust) -> None:
    scope = resolve_scope(
        ctx(trust=trust, key=ConversationKey("job", "j1", None), job="j1"), requested
    )
    assert scope.name == "job"
    assert scope.facts == MemoryFilter(job_id="j1")
    assert scope.history == MemoryFilter(
        speakers=frozenset({"job"}), conversation_key=("job", "j1", None)
    )
    assert scope.ceiling == scope.facts
    if trust is Trust.OPERATOR:
        assert scope.writer is not None and scope.writer.speaker == "job"
        assert scope.writer.job_id == "j1"
    else:
        assert scope.writer is None, "a guest-created job stays read-only"


def test_a_job_without_a_run_conversation_has_no_history() -> None:
    scope = resolve_scope(ctx(key=None, origin="job", job="j9"), "all")
    assert scope.history.empty
    assert scope.facts == MemoryFilter(job_id="j9")


@pytest.mark.parametrize("requested", SCOPES)
def test_a_job_origin_without_a_job_id_gets_nothing(requested) -> None:
    with pytest.raises(MemoryAccessError, match="no job id") as info:
        resolve_scope(ctx(origin="job"), requested)
    assert isinstance(info.value, ToolError)


def test_a_job_id_in_state_wins_over_any_origin() -> None:
    """A subagent spawned by a job carries the job id and stays inside the job."""
    scope = resolve_scope(ctx(origin="subagent", job="j2"), "all")
    assert scope.name == "job" and scope.facts.job_id == "j2"


@pytest.mark.parametrize("requested", SCOPES)
def test_a_guest_reads_only_guest_turns_of_its_conversation(requested) -> None:
    scope = resolve_scope(ctx(trust=Trust.GUEST), requested)
    expected = MemoryFilter(speakers=frozenset({"guest"}), conversation_key=KEY)
    assert scope.name == "current"
    assert scope.facts == scope.history == scope.ceiling == expected
    assert scope.writer is None
    assert scope.narrowed is (requested != "current")
    assert bool(scope.note) is (requested != "current")


@pytest.mark.parametrize("requested", SCOPES)
def test_a_guest_outside_a_conversation_gets_nothing(requested) -> None:
    with pytest.raises(MemoryAccessError, match="inside its conversation"):
        resolve_scope(ctx(trust=Trust.GUEST, key=None), requested)


@pytest.mark.parametrize("origin", ["main", "subagent", "background"])
def test_the_operator_gets_what_it_asks_for(origin) -> None:
    current = resolve_scope(ctx(origin=origin), "current")
    owner = resolve_scope(ctx(origin=origin), "owner")
    everything = resolve_scope(ctx(origin=origin), "all")
    assert current.facts == current.history == MemoryFilter(conversation_key=KEY)
    assert owner.facts == MemoryFilter(speakers=OWNER_SPEAKERS)
    assert owner.history == MemoryFilter(speakers=frozenset({"owner"}))
    assert everything.facts == everything.history == MemoryFilter()
    for scope in (current, owner, everything):
        assert not scope.narrowed
        assert scope.ceiling == MemoryFilter()
        assert scope.writer is not None and scope.writer.speaker == "owner"
        assert scope.writer.conversation_key == KEY


def test_the_operator_outside_a_conversation_has_no_current_memory() -> None:
    scope = resolve_scope(ctx(key=None), "current")
    assert scope.facts.empty and scope.history.empty
    assert "owner" in scope.note
    assert resolve_scope(ctx(key=None), "owner").writer is not None


@pytest.mark.parametrize("bad", ["everything", "", "ALL", "owner "])
def test_unknown_scopes_are_refused(bad) -> None:
    with pytest.raises(MemoryAccessError, match="unknown memory scope"):
        resolve_scope(ctx(), bad)


@pytest.mark.parametrize("odd", ["", "   ", None])
def test_a_blank_job_id_is_no_job_id(odd) -> None:
    context = ctx(origin="main")
    context.state[JOB_ID_STATE_KEY] = odd
    assert resolve_scope(context, "owner").name == "owner"


def test_as_dict_reports_request_and_result() -> None:
    scope = resolve_scope(ctx(trust=Trust.GUEST), "all")
    assert scope.as_dict() == {
        "requested": "all",
        "effective": "current",
        "note": "a guest reads only the conversation it is in",
    }

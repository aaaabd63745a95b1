"""The post-reply review gate: the reviewer is made only when a review is due."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fermix_core.memory.review_gate import ReviewOnDemand, ReviewState, next_due

pytestmark = pytest.mark.anyio

DAY = 86_400.0


class FakeReviewer:
    def __init__(self) -> None:
        self.calls: list[int | None] = []

    def may_be_due(self) -> bool:
        return False

    async def review_after_reply(self, conversation_id: int | None = None) -> str:
        self.calls.append(conversation_id)
        return "reviewed"


def gate(tmp_path: Path, now: list[float], made: list[FakeReviewer]) -> ReviewOnDemand:
    def make() -> FakeReviewer:
        made.append(FakeReviewer())
        return made[-1]

    return ReviewOnDemand(make, tmp_path / "memory" / "main" / ".review.json", DAY, lambda: now[0])


def test_next_due_is_the_later_of_interval_and_backoff() -> None:
    assert next_due(ReviewState(), DAY, 1000.0) is None  # never reviewed: due now
    assert next_due(ReviewState(last_success=1000.0), DAY, 2000.0) == 1000.0 + DAY
    assert next_due(ReviewState(last_success=0.0), DAY, 2 * DAY) is None
    state = ReviewState(last_success=0.0, backoff_until=3 * DAY)
    assert next_due(state, DAY, 2 * DAY) == 3 * DAY


async def test_a_closed_gate_never_makes_the_reviewer_and_is_not_read_again(
    tmp_path: Path,
) -> None:
    now, made = [10 * DAY], []
    hook = gate(tmp_path, now, made)
    hook.state_path.parent.mkdir(parents=True)
    ReviewState(last_success=now[0] - 60).save(hook.state_path)
    assert hook.may_be_due()  # nothing read yet
    assert await hook.review_after_reply(1) is None
    assert made == [] and not hook.may_be_due()
    hook.state_path.unlink()  # not read while known closed
    assert await hook.review_after_reply(2) is None and made == []
    now[0] += DAY  # the interval has passed: read again, no state now, so due
    assert hook.may_be_due()
    assert await hook.review_after_reply(3) == "reviewed"
    assert len(made) == 1 and made[0].calls == [3]
    # From then on the hook is the reviewer's own.
    assert await hook.review_after_reply(4) == "reviewed"
    assert len(made) == 1 and made[0].calls == [3, 4]
    assert not hook.may_be_due()  # the reviewer's answer


async def test_a_reviewer_that_cannot_be_made_does_not_reach_the_reply(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> FakeReviewer:
        raise RuntimeError("no model")

    hook = ReviewOnDemand(broken, tmp_path / ".review.json", DAY, lambda: 0.0)
    with caplog.at_level(logging.ERROR, logger="fermix.memory.review"):
        assert await hook.review_after_reply(1) is None
    assert "memory review hook failed" in caplog.text

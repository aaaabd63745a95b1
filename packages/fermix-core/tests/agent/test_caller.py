from __future__ import annotations

import pytest
from fermix_core.agent.caller import (
    ModelCaller,
    ProviderRoute,
    SingleProviderCaller,
    continuation_backoff,
    continuation_retryable,
)
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from fermix_core.testing import ScriptedProvider, reply

pytestmark = pytest.mark.anyio

REQUEST = ChatRequest(messages=[Message.user("hi")], initial=False)


class Sleeps:
    """An injected sleep: records the delays and returns at once (no real waiting)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def err(kind: ErrorKind, *, pre: bool = False, visible: bool = False, after=None):
    return ProviderError(
        kind, "it broke", pre_response=pre, visible_output=visible, retry_after_seconds=after
    )


# kind, pre_response, visible_output -> retried in place?
MATRIX = [
    (ErrorKind.TIMEOUT, True, False, True),
    (ErrorKind.TIMEOUT, False, False, False),
    (ErrorKind.TIMEOUT, True, True, False),
    (ErrorKind.TRANSPORT, False, False, True),
    (ErrorKind.TRANSPORT, False, True, False),
    (ErrorKind.OVERLOADED, False, False, True),
    (ErrorKind.OVERLOADED, True, True, False),
    (ErrorKind.CONNECTION_UNAVAILABLE, True, False, False),
    (ErrorKind.SERVER_ERROR, False, False, False),
    (ErrorKind.RATE_LIMIT, False, False, False),
    (ErrorKind.QUOTA, False, False, False),
    (ErrorKind.AUTH, False, False, False),
    (ErrorKind.OAUTH, False, False, False),
    (ErrorKind.CONTEXT_LENGTH, False, False, False),
    (ErrorKind.INVALID_REQUEST, False, False, False),
    (ErrorKind.CONTENT_FILTER, False, False, False),
    (ErrorKind.UNSUPPORTED_INPUT, False, False, False),
    (ErrorKind.UNKNOWN, False, False, False),
]


@pytest.mark.parametrize(("kind", "pre", "visible", "retried"), MATRIX)
async def test_continuation_retry_matrix(kind, pre, visible, retried):
    provider = ScriptedProvider([err(kind, pre=pre, visible=visible), reply("recovered")])
    sleeps = Sleeps()
    caller = SingleProviderCaller(provider, sleep=sleeps)
    route = ProviderRoute(provider="scripted")
    assert continuation_retryable(err(kind, pre=pre, visible=visible)) is retried
    if retried:
        turn = await caller.continuation(route, REQUEST)
        assert turn.content == "recovered"
        assert len(provider.requests) == 2 and len(sleeps.delays) == 1
        assert provider.requests[0] == provider.requests[1]  # the same request, re-sent
    else:
        with pytest.raises(ProviderError) as info:
            await caller.continuation(route, REQUEST)
        assert info.value.kind is kind
        assert len(provider.requests) == 1 and sleeps.delays == []


async def test_retry_budget_bounds_the_attempts_with_growing_backoff():
    failures = [err(ErrorKind.TRANSPORT) for _ in range(3)]
    provider = ScriptedProvider([*failures, reply("too late")])
    sleeps = Sleeps()
    caller = SingleProviderCaller(provider, sleep=sleeps, retry_budget=2)
    with pytest.raises(ProviderError):
        await caller.continuation(ProviderRoute("scripted"), REQUEST)
    assert len(provider.requests) == 3
    assert sleeps.delays == [0.25, 0.5]
    assert provider.remaining == 1


async def test_a_zero_budget_never_retries():
    provider = ScriptedProvider([err(ErrorKind.OVERLOADED), reply("x")])
    sleeps = Sleeps()
    with pytest.raises(ProviderError):
        await SingleProviderCaller(provider, sleep=sleeps, retry_budget=0).continuation(
            ProviderRoute("scripted"), REQUEST
        )
    assert sleeps.delays == []
    with pytest.raises(ValueError, match="negative"):
        SingleProviderCaller(provider, retry_budget=-1)


async def test_initial_calls_are_never_retried_here():
    provider = ScriptedProvider([err(ErrorKind.TRANSPORT), reply("x")])
    sleeps = Sleeps()
    with pytest.raises(ProviderError):
        await SingleProviderCaller(provider, sleep=sleeps).initial(REQUEST)
    assert len(provider.requests) == 1 and sleeps.delays == []


async def test_initial_pins_a_route_naming_provider_and_model():
    provider = ScriptedProvider([reply("hi", model="m-7")], name="primary")
    caller = SingleProviderCaller(provider)
    assert isinstance(caller, ModelCaller)
    turn, route = await caller.initial(REQUEST)
    assert turn.content == "hi"
    assert route == ProviderRoute(provider="primary", model="m-7")


async def test_continuation_refuses_a_foreign_route():
    caller = SingleProviderCaller(ScriptedProvider([reply("x")]))
    with pytest.raises(TypeError, match="its own initial"):
        await caller.continuation(object(), REQUEST)


async def test_retries_are_reported_through_emit():
    events = []
    provider = ScriptedProvider([err(ErrorKind.TIMEOUT, pre=True), reply("ok")], name="codex")
    caller = SingleProviderCaller(
        provider, sleep=Sleeps(), emit=lambda name, **data: events.append((name, data))
    )
    await caller.continuation(ProviderRoute("codex"), REQUEST)
    # The same event, with the same fields, as the route chain's (docs/routing.md).
    assert events == [
        (
            "provider.retry",
            {
                "provider": "codex",
                "model": None,
                "kind": "timeout",
                "status": None,
                "attempt": 1,
                "delay": 0.25,
                "phase": "continuation",
            },
        )
    ]


def test_backoff_is_exponential_and_capped_and_honours_short_retry_after():
    plain = err(ErrorKind.OVERLOADED)
    assert [continuation_backoff(n, plain) for n in range(5)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert continuation_backoff(0, err(ErrorKind.OVERLOADED, after=1.5)) == 1.5
    assert continuation_backoff(0, err(ErrorKind.OVERLOADED, after=60)) == 2.0
    assert continuation_backoff(2, err(ErrorKind.OVERLOADED, after=0.1)) == 1.0

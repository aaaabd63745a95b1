"""The route chain acting on the policy, with scripted providers and an injected sleep."""

from __future__ import annotations

from typing import Any

import pytest
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.routing import NoProviderConfigured, RouteChain
from fermix_core.routing.records import Route, RoutePlan
from fermix_core.specs import ProviderSpec
from fermix_core.testing import ScriptedProvider

pytestmark = pytest.mark.anyio

_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")
SPEC = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            name="openai",
            factory="x.y:Z",
            config_keys=frozenset({"api_key", "reasoning_effort"}),
            reasoning_efforts=_EFFORTS,
            default_model="gpt-new",
            order=20,
        ),
        ProviderSpec(
            name="anthropic",
            factory="x.y:Z",
            config_keys=frozenset({"api_key", "reasoning_effort"}),
            reasoning_efforts=_EFFORTS[1:],
            default_model="claude-a",
            order=30,
        ),
        ProviderSpec(name="gateway", factory="x.y:Z", default_model="vendor/model-1", order=50),
    )
}


def route(name: str, role: str, model: str | None = None, effort: str | None = None) -> Route:
    spec = SPEC[name]
    settings = ProviderSettings(
        name=name, default_model=model or spec.default_model, reasoning_effort=effort
    )
    return Route(name=name, spec=spec, settings=settings, role=role)  # type: ignore[arg-type]


def plan_of(*names: str) -> RoutePlan:
    primary, *rest = names
    return RoutePlan(
        route(primary, "primary", effort="high" if SPEC[primary].reasoning_efforts else None),
        tuple(route(n, "fallback") for n in rest),
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.sleeps: list[float] = []

    def emit(self, name: str, **data: Any) -> None:
        self.events.append((name, data))

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [data for n, data in self.events if n == name]


def fail(kind: ErrorKind, **kw: Any) -> ProviderError:
    return ProviderError(kind, f"{kind.value} happened", **kw)


def request(**kw: Any) -> ChatRequest:
    return ChatRequest(messages=[Message.user("hello")], **kw)


def chain_for(plan: RoutePlan, providers: dict[str, ScriptedProvider], rec: Recorder, **kw: Any):
    return RouteChain(plan, providers, rec.emit, sleep=rec.sleep, **kw)


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


# --------------------------------------------------------------------------- initial


async def test_a_brief_flake_self_heals_on_the_same_route(rec: Recorder) -> None:
    primary = ScriptedProvider(
        [fail(ErrorKind.SERVER_ERROR, status=502), fail(ErrorKind.TRANSPORT), "hi"],
        name="openai",
    )
    fallback = ScriptedProvider(name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    turn, won = await chain.initial(request())
    assert turn.content == "hi"
    assert won.name == "openai" and won.role == "primary"
    assert len(primary.requests) == 3 and fallback.requests == []
    assert rec.sleeps == [0.25, 0.5]  # short exponential backoff, never a real wait
    assert rec.named("provider.failover") == []
    retries = rec.named("provider.retry")
    assert [r["attempt"] for r in retries] == [1, 2]
    assert retries[0]["kind"] == "server_error" and retries[0]["phase"] == "initial"


async def test_the_budget_is_spent_before_the_hop_and_the_winner_is_returned(
    rec: Recorder,
) -> None:
    primary = ScriptedProvider([fail(ErrorKind.SERVER_ERROR)] * 3, name="openai")
    fallback = ScriptedProvider(["from the fallback"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    turn, won = await chain.initial(request())
    assert turn.content == "from the fallback"
    assert won.name == "anthropic"  # the caller pins this for the rest of the tool loop
    assert len(primary.requests) == 3 and len(fallback.requests) == 1
    [event] = rec.named("provider.failover")
    assert event["from"] == "openai" and event["to"] == "anthropic"
    assert event["kind"] == "server_error" and event["retries"] == 2
    assert event["from_model"] == "gpt-new" and event["to_model"] == "claude-a"


async def test_each_route_spends_its_own_budget(rec: Recorder) -> None:
    first = ScriptedProvider([fail(ErrorKind.TIMEOUT)] * 3, name="openai")
    second = ScriptedProvider([fail(ErrorKind.TRANSPORT)] * 3, name="anthropic")
    third = ScriptedProvider(["ok"], name="gateway")
    providers = {"openai": first, "anthropic": second, "gateway": third}
    chain = chain_for(plan_of("openai", "anthropic", "gateway"), providers, rec)
    _, won = await chain.initial(request())
    assert won.name == "gateway"
    assert [len(p.requests) for p in providers.values()] == [3, 3, 1]
    hops = [(e["from"], e["to"]) for e in rec.named("provider.failover")]
    assert hops == [("openai", "anthropic"), ("anthropic", "gateway")]
    assert rec.sleeps == [0.25, 0.5, 0.25, 0.5]


async def test_each_hop_sends_that_routes_own_model_and_effort(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.RATE_LIMIT, status=429)], name="openai")
    fallback = ScriptedProvider(["ok"], name="gateway")
    chain = chain_for(plan_of("openai", "gateway"), {"openai": primary, "gateway": fallback}, rec)
    await chain.initial(request(model="caller-model", reasoning_effort="low"))
    sent_primary, sent_fallback = primary.last_request, fallback.last_request
    assert (sent_primary.model, sent_primary.reasoning_effort) == ("gpt-new", "high")
    assert (sent_fallback.model, sent_fallback.reasoning_effort) == ("vendor/model-1", None)
    assert sent_primary.initial and sent_fallback.initial


async def test_rate_limit_fails_over_without_a_same_route_retry(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.RATE_LIMIT, retry_after_seconds=30)], name="openai")
    fallback = ScriptedProvider(["ok"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    _, won = await chain.initial(request())
    assert won.name == "anthropic" and len(primary.requests) == 1 and rec.sleeps == []


@pytest.mark.parametrize(
    "kind",
    [
        ErrorKind.AUTH,
        ErrorKind.CONTEXT_LENGTH,
        ErrorKind.INVALID_REQUEST,
        ErrorKind.CONTENT_FILTER,
        ErrorKind.UNSUPPORTED_INPUT,
    ],
)
async def test_non_transient_errors_surface_on_the_primary(rec: Recorder, kind) -> None:
    primary = ScriptedProvider([fail(kind)], name="openai")
    fallback = ScriptedProvider(["never"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    with pytest.raises(ProviderError) as info:
        await chain.initial(request())
    assert info.value.kind is kind
    assert fallback.requests == [] and rec.events == [] and rec.sleeps == []


async def test_visible_output_is_never_retried_or_failed_over(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.SERVER_ERROR, visible_output=True)], name="openai")
    fallback = ScriptedProvider(["never"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    with pytest.raises(ProviderError):
        await chain.initial(request())
    assert len(primary.requests) == 1 and fallback.requests == []


async def test_connection_unavailable_retries_same_and_never_fails_over(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.CONNECTION_UNAVAILABLE)] * 3, name="openai")
    fallback = ScriptedProvider(["never"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    with pytest.raises(ProviderError) as info:
        await chain.initial(request())
    assert info.value.kind is ErrorKind.CONNECTION_UNAVAILABLE
    assert len(primary.requests) == 3 and fallback.requests == []
    assert rec.named("provider.failover") == []


async def test_jobs_skip_the_inner_retry_and_fail_over_on_the_first_transient(
    rec: Recorder,
) -> None:
    primary = ScriptedProvider([fail(ErrorKind.TIMEOUT)], name="openai")
    fallback = ScriptedProvider(["ok"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    _, won = await chain.initial(request(inner_retry=False))
    assert won.name == "anthropic"
    assert len(primary.requests) == 1 and rec.sleeps == [] and rec.named("provider.retry") == []


async def test_a_job_surfaces_connection_unavailable_at_once(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.CONNECTION_UNAVAILABLE)], name="openai")
    fallback = ScriptedProvider(["never"], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    with pytest.raises(ProviderError) as info:
        await chain.initial(request(inner_retry=False))
    assert info.value.kind is ErrorKind.CONNECTION_UNAVAILABLE
    assert len(primary.requests) == 1 and fallback.requests == [] and rec.sleeps == []


async def test_the_last_routes_error_surfaces_chained_to_the_previous_hop(rec: Recorder) -> None:
    first_error = fail(ErrorKind.RATE_LIMIT, status=429)
    primary = ScriptedProvider([first_error], name="openai")
    fallback = ScriptedProvider([fail(ErrorKind.QUOTA)], name="anthropic")
    chain = chain_for(
        plan_of("openai", "anthropic"), {"openai": primary, "anthropic": fallback}, rec
    )
    with pytest.raises(ProviderError) as info:
        await chain.initial(request())
    assert info.value.kind is ErrorKind.QUOTA and info.value.provider == "anthropic"
    assert info.value.__cause__ is first_error


async def test_a_single_route_plan_surfaces_a_failover_class_error(rec: Recorder) -> None:
    primary = ScriptedProvider([fail(ErrorKind.OAUTH)], name="openai")
    chain = chain_for(plan_of("openai"), {"openai": primary}, rec)
    with pytest.raises(ProviderError) as info:
        await chain.initial(request())
    assert info.value.kind is ErrorKind.OAUTH and info.value.__cause__ is None


async def test_an_empty_plan_says_run_setup(rec: Recorder) -> None:
    chain = chain_for(
        RoutePlan(None, reason="no provider configured — run `fermix setup`"), {}, rec
    )
    with pytest.raises(NoProviderConfigured, match="fermix setup"):
        await chain.initial(request())


async def test_a_failing_telemetry_observer_never_takes_down_the_turn(rec: Recorder) -> None:
    def broken(name: str, **data: Any) -> None:
        raise RuntimeError("exporter down")

    primary = ScriptedProvider([fail(ErrorKind.TRANSPORT), "ok"], name="openai")
    chain = RouteChain(plan_of("openai"), {"openai": primary}, broken, sleep=rec.sleep)
    turn, _ = await chain.initial(request())
    assert turn.content == "ok"


async def test_default_backoff_is_short_exponential_and_capped() -> None:
    chain = RouteChain(RoutePlan(None), {}, base_delay=0.25, max_delay=1.0)
    assert [chain.delay(n) for n in range(5)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="retry_budget"):
        RouteChain(RoutePlan(None), {}, retry_budget=-1)


# --------------------------------------------------------------------------- continuation


@pytest.mark.parametrize(
    ("error", "counts_chunks"),
    [
        (fail(ErrorKind.TRANSPORT), False),
        (fail(ErrorKind.OVERLOADED, status=529), False),
        (fail(ErrorKind.TIMEOUT, pre_response=True), True),
    ],
)
async def test_continuation_reissues_the_listed_classes_in_place(
    rec: Recorder, error: ProviderError, counts_chunks: bool
) -> None:
    pinned = ScriptedProvider([error, "done"], name="anthropic", counts_chunks=counts_chunks)
    other = ScriptedProvider(name="openai")
    plan = plan_of("openai", "anthropic")
    chain = chain_for(plan, {"openai": other, "anthropic": pinned}, rec)
    turn = await chain.continuation(plan.get("anthropic"), request(initial=False))
    assert turn.content == "done"
    assert len(pinned.requests) == 2 and other.requests == []
    assert all(not r.initial for r in pinned.requests)
    assert rec.sleeps == [0.25]
    [event] = rec.named("provider.retry")
    assert event["phase"] == "continuation" and event["provider"] == "anthropic"
    assert rec.named("provider.failover") == []


@pytest.mark.parametrize(
    ("error", "counts_chunks"),
    [
        # A buffered adapter cannot prove a timeout was pre-response; its claim is dropped.
        (fail(ErrorKind.TIMEOUT, pre_response=True), False),
        (fail(ErrorKind.TIMEOUT), True),
        (fail(ErrorKind.CONNECTION_UNAVAILABLE), True),
        (fail(ErrorKind.RATE_LIMIT, retry_after_seconds=60), True),
        (fail(ErrorKind.SERVER_ERROR, status=500), True),
        (fail(ErrorKind.OAUTH), True),
        (fail(ErrorKind.TRANSPORT, visible_output=True), True),
        (fail(ErrorKind.OVERLOADED, visible_output=True), True),
    ],
)
async def test_continuation_surfaces_everything_else_on_the_first_failure(
    rec: Recorder, error: ProviderError, counts_chunks: bool
) -> None:
    pinned = ScriptedProvider([error, "never"], name="openai", counts_chunks=counts_chunks)
    fallback = ScriptedProvider(["never"], name="anthropic")
    plan = plan_of("openai", "anthropic")
    chain = chain_for(plan, {"openai": pinned, "anthropic": fallback}, rec)
    with pytest.raises(ProviderError) as info:
        await chain.continuation(plan.primary, request(initial=False))
    assert info.value is error  # the original error, not the policy's view of it
    assert len(pinned.requests) == 1 and fallback.requests == [] and rec.sleeps == []


async def test_continuation_retries_are_bounded(rec: Recorder) -> None:
    pinned = ScriptedProvider([fail(ErrorKind.TRANSPORT)] * 3 + ["never"], name="openai")
    plan = plan_of("openai")
    chain = chain_for(plan, {"openai": pinned}, rec)
    with pytest.raises(ProviderError):
        await chain.continuation(plan.primary, request(initial=False))
    assert len(pinned.requests) == 3 and rec.sleeps == [0.25, 0.5]


async def test_continuation_retries_on_scheduled_runs_too(rec: Recorder) -> None:
    pinned = ScriptedProvider([fail(ErrorKind.TRANSPORT), "ok"], name="openai")
    plan = plan_of("openai")
    chain = chain_for(plan, {"openai": pinned}, rec)
    turn = await chain.continuation(plan.primary, request(initial=False, inner_retry=False))
    assert turn.content == "ok" and len(pinned.requests) == 2


async def test_continuation_sends_the_pinned_routes_model(rec: Recorder) -> None:
    pinned = ScriptedProvider(["ok"], name="anthropic")
    plan = plan_of("openai", "anthropic")
    chain = chain_for(plan, {"anthropic": pinned}, rec)
    await chain.continuation(plan.get("anthropic"), request(model="gpt-new", initial=False))
    assert pinned.last_request.model == "claude-a"


async def test_the_whole_failover_trail_is_kept_in_the_causes(rec: Recorder) -> None:
    a, b, c = fail(ErrorKind.QUOTA), fail(ErrorKind.RATE_LIMIT), fail(ErrorKind.AUTH)
    providers = {
        "openai": ScriptedProvider([a], name="openai"),
        "anthropic": ScriptedProvider([b], name="anthropic"),
        "gateway": ScriptedProvider([c], name="gateway"),
    }
    chain = chain_for(plan_of("openai", "anthropic", "gateway"), providers, rec)
    with pytest.raises(ProviderError) as info:
        await chain.initial(request())
    assert info.value is c and c.__cause__ is b and b.__cause__ is a and a.__cause__ is None


def test_a_routed_request_is_the_copy_model_copy_would_make() -> None:
    async def on_event(event: Any) -> None:
        return None

    pinned = route("openai", "primary", model="gpt-pinned", effort="low")
    for request in (
        ChatRequest(messages=[Message.user("hi")]),
        ChatRequest(
            messages=[Message.system("rules"), Message.user("hi")],
            model="asked-for",
            stream=True,
            inner_retry=False,
            on_event=on_event,
        ),
    ):
        for initial in (True, False):
            made = RouteChain._request_for(pinned, request, initial=initial)
            wanted = request.model_copy(
                update={"model": "gpt-pinned", "reasoning_effort": "low", "initial": initial}
            )
            assert type(made) is ChatRequest and made is not request
            assert made.__dict__ == wanted.__dict__
            assert made.model_fields_set == wanted.model_fields_set
            assert made.model_dump() == wanted.model_dump() and made == wanted
            assert made.messages is request.messages and made.on_event is request.on_event
            assert request.model is None or request.model == "asked-for"  # left untouched

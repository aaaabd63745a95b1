"""Contract test suites that every provider, channel, tool and memory backend must pass.

Subclass one in a test module under a ``Test…`` name and supply the factory it asks for;
pytest collects the inherited tests. The contract classes themselves are not named
``Test…``, so importing them collects nothing. Tests are async and run under anyio (a
dependency of fermix-core, whose pytest plugin is therefore always present)::

    from fermix_core.testing.contracts import ProviderContract, Scenario

    class TestAcmeProvider(ProviderContract):
        secret = "sk-test-123"

        @pytest.fixture(autouse=True)
        def _server(self, acme_loopback):      # your own fixture: a loopback Acme API
            self.server = acme_loopback

        def make_provider(self, scenario):
            self.server.behave(scenario)        # text, tool call, or failure
            return AcmeProvider(base_url=self.server.url, api_key=self.secret)

Each ``make_*`` hook may be sync or async. Fixtures a subclass needs can be attached to
``self`` from an autouse fixture method, as above.

Every call into the implementation runs under a deadline (``step_timeout`` on the provider
and tool contracts, ``inbound_timeout`` on the channel contract), so a ``chat()`` or
``run()`` that never returns fails that one test with the rule it broke instead of hanging
the suite. Where an implementation breaks a rule with a bare exception — a factory needing
more than its spec, ``run()`` raising something other than ``ToolError``, ``chat()`` raising a
plain exception instead of ``ProviderError``, an empty ``Turn`` — the failure is a
:class:`ContractViolation` that states the rule and the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from fermix_core.channel import (
    Channel,
    ChannelCapabilityError,
    ChannelRateLimited,
    InboundMessage,
    OutboundMessage,
    SentMessage,
    WebhookRoute,
)
from fermix_core.memory.backend import (
    MemoryBackend,
    MemoryCategory,
    MemoryStoreError,
    Provenance,
)
from fermix_core.messages import ImagePart, Message, ToolDefinition, ToolResult, Turn, Usage
from fermix_core.provider import ChatRequest, ErrorKind, Provider, ProviderError, StreamEvent
from fermix_core.specs import NAME_RE, ToolSpec
from fermix_core.testing.channels import StubChannelHost
from fermix_core.tool import Tool, ToolContext, ToolOutput, Trust, build_tool

__all__ = [
    "CONTRACT_TOOL",
    "ChannelContract",
    "ContractViolation",
    "MemoryBackendContract",
    "ProviderContract",
    "Scenario",
    "ToolContract",
]


#: The dialects the presentation package renders (``telegram_html`` is ``telegram``).
CHANNEL_DIALECTS = ("telegram", "telegram_html", "discord", "slack", "whatsapp", "signal", "plain")


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ContractViolation(AssertionError):
    """An implementation broke a contract rule; the message names the rule and the fix."""


async def _rule(rule: str, call: Any, *, timeout: float | None, fix: str = "") -> Any:
    """Await *call* (or call and await it), naming *rule* if it fails.

    With a *timeout* the call runs under that deadline. Builders and ``aclose`` run without
    one: a ``make_*`` hook may open a task group (a loopback server) that outlives the call,
    which a cancel scope around it would break. ``AssertionError`` and pytest's own
    outcomes pass through untouched (they already say what went wrong); everything else
    becomes a :class:`ContractViolation`.
    """
    hint = f" {fix}" if fix else ""
    try:
        if timeout is None:
            return await _maybe_await(call() if callable(call) else call)
        with anyio.fail_after(timeout):
            return await _maybe_await(call() if callable(call) else call)
    except TimeoutError:
        raise ContractViolation(
            f"{rule}: no answer within {timeout:g} s.{hint} (Raise the class attribute that "
            "sets this deadline only if your backend is legitimately that slow in tests.)"
        ) from None
    except (AssertionError, pytest.skip.Exception, pytest.fail.Exception):
        raise
    except Exception as exc:
        raise ContractViolation(f"{rule}: it raised {type(exc).__name__}: {exc}.{hint}") from exc


# =========================================================================== providers


class Scenario(StrEnum):
    """What the backend behind a provider under contract test should do.

    * ``text`` — answer any request with a short, non-empty text.
    * ``tool_call`` — answer the first request with a call to ``contract_echo`` (arguments
      an object such as ``{"text": "ping"}``); answer a request that carries the tool's
      result with a short text.
    * ``error`` — fail the call (an HTTP 500, a refused key …); the adapter must turn it
      into a classified :class:`~fermix_core.provider.ProviderError`.
    """

    TEXT = "text"
    TOOL_CALL = "tool_call"
    ERROR = "error"


#: The tool offered in the ``tool_call`` scenario.
CONTRACT_TOOL = ToolDefinition(
    name="contract_echo",
    description="Echo the given text back to the user.",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to echo."}},
        "required": ["text"],
    },
)

# The smallest valid PNG: one transparent pixel.
_PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)


class ProviderContract:
    """The provider contract. Supply :meth:`make_provider`."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    #: The credential the provider is configured with; it must never appear in an error.
    secret: ClassVar[str | None] = None
    #: The model to request; ``None`` asks for the provider's default.
    model: ClassVar[str | None] = None
    #: Seconds one ``chat()`` call may take before its test fails with the rule it broke.
    step_timeout: ClassVar[float] = 30.0

    def make_provider(self, scenario: Scenario) -> Any:
        """Return a :class:`Provider` whose backend behaves as *scenario* says."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_provider()")

    async def _make(self, scenario: Scenario) -> Provider:
        provider = await _rule(
            f"make_provider({scenario.value!r}) builds a provider",
            lambda: self.make_provider(scenario),
            timeout=None,
        )
        if not isinstance(provider, Provider):
            raise ContractViolation(
                f"make_provider() must return a fermix_core.provider.Provider subclass "
                f"instance; it returned {provider!r}"
            )
        return provider

    @asynccontextmanager
    async def _provider(self, scenario: Scenario) -> AsyncIterator[Provider]:
        provider = await self._make(scenario)
        try:
            yield provider
        finally:
            await _rule(
                "aclose() releases the provider's resources",
                provider.aclose,
                timeout=None,
            )

    def _request(self, *messages: Message, **kwargs: Any) -> ChatRequest:
        return ChatRequest(messages=list(messages), model=self.model, **kwargs)

    async def _chat(self, provider: Provider, request: ChatRequest, scenario: str) -> Turn:
        """One ``chat()`` call that must answer with a non-empty :class:`Turn`."""
        turn = await _rule(
            f"chat() answers the {scenario!r} scenario",
            lambda: provider.chat(request),
            timeout=self.step_timeout,
            fix=(
                "A backend failure must be raised as ProviderError(kind, message, "
                "provider=...) so failover can classify it; anything else is a bug."
            ),
        )
        if not isinstance(turn, Turn):
            raise ContractViolation(
                f"chat() must return a fermix_core.messages.Turn; it returned "
                f"{type(turn).__name__}: {turn!r}"
            )
        if turn.is_empty:
            raise ContractViolation(
                f"chat() must not answer the {scenario!r} scenario with an empty Turn (no "
                "content and no tool calls): check that the adapter reads the text and tool "
                "calls from the right fields of the response, or raise ProviderError when the "
                "backend really sent nothing."
            )
        return turn

    async def test_name_is_a_registry_name(self) -> None:
        async with self._provider(Scenario.TEXT) as provider:
            assert isinstance(provider.name, str)
            assert NAME_RE.match(provider.name), (
                f"provider name {provider.name!r} must be a lowercase spec name"
            )

    async def test_plain_message_gets_a_text_turn(self) -> None:
        async with self._provider(Scenario.TEXT) as provider:
            turn = await self._chat(
                provider,
                self._request(Message.system("Be brief."), Message.user("Say hello.")),
                "text",
            )
        assert turn.content.strip()
        assert turn.tool_calls == []
        assert isinstance(turn.model, str)
        assert turn.model, "Turn.model names the answering model"
        assert isinstance(turn.usage, Usage)

    async def test_request_is_left_untouched(self) -> None:
        request = self._request(Message.user("Say hello."), tools=[CONTRACT_TOOL])
        before = request.model_dump()
        async with self._provider(Scenario.TEXT) as provider:
            await self._chat(provider, request, "text")
        assert request.model_dump() == before, "the provider must not mutate the request"

    async def test_tool_call_round_trip(self) -> None:
        async with self._provider(Scenario.TOOL_CALL) as provider:
            history = [Message.user("Echo 'ping' with the tool.")]
            first = await self._chat(
                provider, self._request(*history, tools=[CONTRACT_TOOL]), "tool_call"
            )
            assert first.tool_calls, "the tool_call scenario must produce a tool call"
            call = first.tool_calls[0]
            assert call.name == CONTRACT_TOOL.name
            assert isinstance(call.arguments, dict)
            assert isinstance(call.id, str)
            assert call.id
            result = ToolResult(call_id=call.id, name=call.name, content="ping")
            history += [first.to_message(), Message.tool(result)]
            final = await self._chat(
                provider,
                self._request(*history, tools=[CONTRACT_TOOL], initial=False),
                "tool_call (the answer to the tool result)",
            )
        assert final.content.strip() or final.tool_calls

    async def test_a_background_call_is_answered_like_a_turn(self) -> None:
        # Core's own background work (memory review, compaction) calls the primary route
        # with no tools and no streaming, a long system instruction and a user prompt, and
        # reads the answer as text: memory review asks for one JSON object.
        from fermix_core.memory.review import REVIEW_INSTRUCTION

        request = ChatRequest(
            messages=[
                Message.system(REVIEW_INSTRUCTION),
                Message.user(
                    "No facts are stored yet.\n\nThe owner's recent messages, oldest first:\n"
                    "- I prefer tea over coffee.\n\nAnswer with the JSON object now."
                ),
            ],
            tools=[],
            model=self.model,
        )
        async with self._provider(Scenario.TEXT) as provider:
            turn = await provider.chat(request)
        assert isinstance(turn, Turn), "a background call returns a Turn like any other call"
        assert turn.content.strip(), (
            "a background call (no tools, no streaming) must come back with its text in "
            "Turn.content; memory review parses that text as JSON"
        )
        assert turn.tool_calls == [], "a call offered no tools must not return tool calls"

    async def test_failure_is_a_classified_provider_error(self) -> None:
        async with self._provider(Scenario.ERROR) as provider:
            try:
                with anyio.fail_after(self.step_timeout):
                    answer = await provider.chat(self._request(Message.user("Say hello.")))
            except ProviderError as exc:
                error = exc
            except TimeoutError:
                raise ContractViolation(
                    f"chat() in the 'error' scenario must fail within {self.step_timeout:g} s "
                    "with ProviderError; it never returned. Put a timeout on the backend call."
                ) from None
            except Exception as exc:
                raise ContractViolation(
                    "a failing backend must surface as ProviderError(kind, message, "
                    f"provider=...), so failover can classify it; chat() raised "
                    f"{type(exc).__name__}: {exc}. Catch the backend's errors in the adapter "
                    "and map them to an ErrorKind."
                ) from exc
            else:
                raise ContractViolation(
                    "chat() in the 'error' scenario must raise ProviderError; it returned "
                    f"{answer!r}. Does make_provider() pass the scenario to the backend?"
                )
        assert isinstance(error.kind, ErrorKind)
        assert error.provider == provider.name, "ProviderError.provider names the provider"
        assert isinstance(error.message, str)
        assert error.message
        if self.secret:
            for text in (str(error), repr(error), error.message):
                assert self.secret not in text, "a credential leaked into the error"

    async def test_stream_deltas_add_up_to_the_answer(self) -> None:
        events: list[StreamEvent] = []

        async def collect(event: StreamEvent) -> None:
            events.append(event)

        async with self._provider(Scenario.TEXT) as provider:
            if not provider.supports_streaming:
                pytest.skip("provider does not stream")
            turn = await self._chat(
                provider,
                self._request(Message.user("Say hello."), stream=True, on_event=collect),
                "text (streamed)",
            )
        deltas = [e.text for e in events if e.kind == "text_delta"]
        assert deltas, "a streaming provider reports text deltas when asked to stream"
        assert "".join(deltas).strip() == turn.content.strip()

    async def test_images_reach_the_model_or_fail_loud(self) -> None:
        image = ImagePart(media_type="image/png", data=_PIXEL_PNG)
        request = self._request(Message.user("What is in this picture?", image))
        async with self._provider(Scenario.TEXT) as provider:
            if provider.vision(self.model):
                await self._chat(provider, request, "text (with an image)")
                return
            with pytest.raises(ProviderError) as info:
                with anyio.fail_after(self.step_timeout):
                    await provider.chat(request)
        assert info.value.kind == ErrorKind.UNSUPPORTED_INPUT, (
            "a model without vision must refuse images with ErrorKind.UNSUPPORTED_INPUT "
            "(Provider.unsupported_images(request) builds that error), never drop them"
        )

    async def test_aclose_is_idempotent(self) -> None:
        provider = await self._make(Scenario.TEXT)
        for attempt in ("first", "second"):
            await _rule(
                f"aclose() is safe to call more than once (the {attempt} call)",
                provider.aclose,
                timeout=None,
            )


# =========================================================================== channels


class ChannelContract:
    """The channel contract. Supply :meth:`make_channel`, :meth:`trigger_inbound` and
    :meth:`sent_texts` (the last two drive and observe your fake platform); optionally
    :meth:`provoke_rate_limit` to check that a platform's 429 comes out typed.

    Every call into the adapter runs under a deadline (:attr:`inbound_timeout`), so an
    adapter that hangs fails its test instead of hanging the suite.
    """

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    #: A chat the fake platform accepts sends to.
    chat_id: ClassVar[str] = "contract-chat"
    #: Upper bound for any one adapter call or an inbound message to arrive; a failure
    #: bound, never a wait.
    inbound_timeout: ClassVar[float] = 10.0

    async def provoke_rate_limit(self, channel: Channel, chat_id: str) -> bool:
        """Make the fake platform answer the next send to *chat_id* with its rate-limit
        response (HTTP 429, flood control); return ``True`` when done. The default returns
        ``False`` and the rate-limit check is skipped."""
        return False

    async def _within(self, call: Any) -> Any:
        with anyio.fail_after(self.inbound_timeout):
            return await call

    def make_channel(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement make_channel()")

    async def trigger_inbound(self, channel: Channel, text: str) -> None:
        """Make the platform deliver a message with *text* to the running *channel*."""
        raise NotImplementedError(f"{type(self).__name__} must implement trigger_inbound()")

    async def sent_texts(self, channel: Channel, chat_id: str) -> list[str]:
        """The texts the platform has received for *chat_id*, in order."""
        raise NotImplementedError(f"{type(self).__name__} must implement sent_texts()")

    def make_host(self, channel: Channel) -> StubChannelHost:
        """The host ``start`` receives; override to pass the adapter's config section."""
        return StubChannelHost(channel.name or "contract")

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[tuple[Channel, StubChannelHost]]:
        channel = await _maybe_await(self.make_channel())
        assert isinstance(channel, Channel), f"make_channel returned {channel!r}"
        async with self.make_host(channel) as host:
            with anyio.fail_after(self.inbound_timeout):
                await channel.start(host)
            try:
                yield channel, host
            finally:
                with anyio.fail_after(self.inbound_timeout):
                    await channel.stop()

    async def test_name_is_a_registry_name(self) -> None:
        channel = await _maybe_await(self.make_channel())
        assert isinstance(channel.name, str)
        assert NAME_RE.match(channel.name)

    async def test_inbound_message_is_normalized(self) -> None:
        async with self._running() as (channel, host):
            await self.trigger_inbound(channel, "contract hello 42")
            await host.wait_for_deliveries(1, timeout=self.inbound_timeout)
        message = host.deliveries[0]
        assert isinstance(message, InboundMessage)
        assert message.channel == channel.name
        assert message.text == "contract hello 42"
        assert message.chat_id
        assert message.sender_id
        assert message.conversation_key == (channel.name, message.chat_id, message.thread_id)

    async def test_send_returns_an_id_and_reaches_the_platform(self) -> None:
        async with self._running() as (channel, _):
            sent = await self._within(
                channel.send(OutboundMessage(chat_id=self.chat_id, text="contract ping"))
            )
            texts = await self.sent_texts(channel, self.chat_id)
        assert isinstance(sent, SentMessage)
        assert sent.message_id
        assert "contract ping" in texts

    async def test_optional_abilities_match_their_flags(self) -> None:
        async with self._running() as (channel, _):
            sent = await self._within(
                channel.send(OutboundMessage(chat_id=self.chat_id, text="contract draft"))
            )
            abilities = [
                (channel.supports_typing, lambda: channel.typing(self.chat_id)),
                (
                    channel.supports_reactions,
                    lambda: channel.react(self.chat_id, sent.message_id, "👍"),
                ),
                (
                    channel.supports_edit,
                    lambda: channel.edit(self.chat_id, sent.message_id, "contract draft, edited"),
                ),
                (channel.supports_delete, lambda: channel.delete(self.chat_id, sent.message_id)),
            ]
            for supported, call in abilities:
                if supported:
                    await self._within(call())
                else:
                    with pytest.raises(ChannelCapabilityError):
                        await self._within(call())

    async def test_declared_abilities_are_implemented(self) -> None:
        channel = await _maybe_await(self.make_channel())
        for flag, method in (
            ("supports_edit", "edit"),
            ("supports_delete", "delete"),
            ("supports_reactions", "react"),
            ("supports_typing", "typing"),
        ):
            if getattr(channel, flag):
                implemented = getattr(type(channel), method) is not getattr(Channel, method)
                assert implemented, f"{flag} is true but {method}() is not implemented"

    async def test_presentation_attributes_are_usable(self) -> None:
        channel = await _maybe_await(self.make_channel())
        assert channel.dialect in CHANNEL_DIALECTS or callable(
            getattr(channel, "channel_profile", None)
        ), f"unknown dialect {channel.dialect!r}; use one of {', '.join(CHANNEL_DIALECTS)}"
        assert isinstance(channel.max_text, int)
        assert channel.max_text >= 64
        assert channel.text_measure in ("chars", "utf16")
        for kind, cap in dict(channel.media_caps).items():
            assert kind in ("image", "audio", "video", "document", "voice"), kind
            assert isinstance(cap, int), (kind, cap)
            assert cap > 0, (kind, cap)
        allowed = channel.reactions_allowed
        assert allowed is None or (isinstance(allowed, tuple) and all(allowed))
        if allowed is not None:
            assert channel.supports_reactions, "reactions_allowed without supports_reactions"

    async def test_webhook_routes_are_well_formed(self) -> None:
        channel = await _maybe_await(self.make_channel())
        for route in channel.webhook_routes():
            assert isinstance(route, WebhookRoute)
            assert route.path.startswith("/")
            assert not route.path.startswith("/health")
            assert route.methods
            assert set(route.methods) <= {"GET", "POST", "PUT"}
            assert callable(route.handler)
            assert route.max_body_bytes > 0

    async def test_start_stop_twice_and_receive_after_a_restart(self) -> None:
        channel = await _maybe_await(self.make_channel())
        async with self.make_host(channel) as host:
            for round_ in (1, 2):  # the runtime restarts the same instance after a crash
                await self._within(channel.start(host))
                await self.trigger_inbound(channel, f"contract round {round_}")
                await host.wait_for_deliveries(round_, timeout=self.inbound_timeout)
                await self._within(channel.stop())
                await self._within(channel.stop())
        assert [m.text for m in host.deliveries] == ["contract round 1", "contract round 2"]

    async def test_rate_limits_are_typed(self) -> None:
        error: ChannelRateLimited | None = None
        async with self._running() as (channel, _):
            provoked = await self.provoke_rate_limit(channel, self.chat_id)
            if provoked:
                with pytest.raises(ChannelRateLimited) as info:
                    await self._within(
                        channel.send(OutboundMessage(chat_id=self.chat_id, text="too fast"))
                    )
                error = info.value
        if error is None:
            pytest.skip("provoke_rate_limit() not supplied for this platform")
        wait = error.retry_after
        assert wait is None or wait >= 0

    async def test_stop_is_idempotent(self) -> None:
        channel = await _maybe_await(self.make_channel())
        await channel.stop()  # before start
        async with self._running() as (running, _):
            pass
        await running.stop()


# =========================================================================== tools


class _Home:
    def __init__(self, path: Path) -> None:
        self.path = path


class ToolContract:
    """The tool contract. Supply :meth:`make_tool` and ``valid_args``; set ``invalid_args``
    (and ``invalid_field``, the field they get wrong) when the tool takes arguments."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    valid_args: ClassVar[dict[str, Any]] = {}
    invalid_args: ClassVar[dict[str, Any] | None] = None
    invalid_field: ClassVar[str | None] = None
    #: Whether running ``valid_args`` is expected to produce an error output.
    valid_output_is_error: ClassVar[bool] = False
    #: Seconds one ``invoke()``/``run()`` call may take before its test fails.
    step_timeout: ClassVar[float] = 30.0

    def make_tool(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement make_tool()")

    def make_context(self, tmp_path: Path) -> ToolContext:
        """An attended operator context in a scratch directory; override to change it."""
        home = tmp_path / "fermix-home"
        home.mkdir(exist_ok=True)
        return ToolContext(
            trust=Trust.OPERATOR,
            cwd=tmp_path,
            home=_Home(home),
            conversation_key=None,
            session_id="contract",
            attended=True,
        )

    async def _tool(self) -> Tool[Any]:
        tool = await _rule("make_tool() builds the tool", self.make_tool, timeout=None)
        if not isinstance(tool, Tool):
            raise ContractViolation(
                f"make_tool() must return a fermix_core.tool.Tool subclass instance; it "
                f"returned {tool!r}"
            )
        return tool

    async def _invoke(self, tool: Tool[Any], args: Any, tmp_path: Path) -> ToolOutput:
        output = await _rule(
            "run() reports failures by raising ToolError (or returning ToolOutput.error())",
            lambda: tool.invoke(args, self.make_context(tmp_path)),
            timeout=self.step_timeout,
            fix=(
                "Catch what your code can raise (HTTP errors, bad data) and raise ToolError "
                "with a message for the model: what went wrong and what to do instead. "
                "Fermix answers any other exception with a generic crash message."
            ),
        )
        if not isinstance(output, ToolOutput):
            raise ContractViolation(
                f"invoke() must return a ToolOutput; it returned {type(output).__name__}"
            )
        return output

    async def test_spec_is_valid(self) -> None:
        tool = await self._tool()
        assert isinstance(tool.spec, ToolSpec)
        assert tool.spec.problems() == [], (
            f"the tool's spec breaks registration rules: {tool.spec.problems()}"
        )
        assert tool.name == tool.spec.name

    async def test_definition_is_wire_ready(self) -> None:
        tool = await self._tool()
        definition = tool.definition()
        assert definition.name == tool.name
        assert definition.description
        assert definition.parameters.get("type") == "object"

    async def test_factory_builds_the_tool(self) -> None:
        tool = await self._tool()
        rebuilt = await _rule(
            f"the spec's factory {tool.spec.factory!r} builds the tool from the spec alone "
            "(Fermix calls factory(spec))",
            lambda: build_tool(tool.spec),
            timeout=None,
            fix=(
                "Give every other __init__ parameter a default (read settings from the "
                "context at run time), or point the spec's factory at a function that does."
            ),
        )
        assert type(rebuilt) is type(tool), (
            f"the spec's factory built {type(rebuilt).__name__}, but make_tool() returned "
            f"{type(tool).__name__}: point ToolSpec.factory at the tool class"
        )

    async def test_valid_arguments_run(self, tmp_path: Path) -> None:
        tool = await self._tool()
        output = await self._invoke(tool, dict(self.valid_args), tmp_path)
        assert output.is_error is self.valid_output_is_error, output.text

    async def test_invalid_arguments_become_a_readable_error(self, tmp_path: Path) -> None:
        if self.invalid_args is None:
            pytest.skip("the tool declares no invalid_args")
        tool = await self._tool()
        output = await self._invoke(tool, dict(self.invalid_args), tmp_path)
        assert output.is_error
        assert "invalid arguments" in output.text
        if self.invalid_field:
            assert self.invalid_field in output.text

    @pytest.mark.parametrize("garbage", [[1, 2], "city=Paris", 42, 3.5, True])
    async def test_non_object_arguments_never_raise(self, garbage: Any, tmp_path: Path) -> None:
        tool = await self._tool()
        output = await self._invoke(tool, garbage, tmp_path)
        assert output.is_error
        assert "JSON object" in output.text


# =========================================================================== memory

_OWNER = Provenance(speaker="owner")


class MemoryBackendContract:
    """The memory backend contract. Supply :meth:`make_backend` (given a scratch dir)."""

    pytestmark: ClassVar[Any] = pytest.mark.anyio

    def make_backend(self, tmp_path: Path) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement make_backend()")

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[MemoryBackend]:
        backend = await _maybe_await(self.make_backend(tmp_path))
        assert isinstance(backend, MemoryBackend), f"make_backend returned {backend!r}"
        try:
            yield backend
        finally:
            await backend.aclose()

    async def test_store_then_get(self, backend: MemoryBackend) -> None:
        prov = Provenance(speaker="guest", conversation_key=("memory", "c1", None))
        result = await backend.store("preference", "Likes green tea", provenance=prov)
        assert result.action == "added"
        fact = await backend.get(result.fact.id)
        assert fact is not None
        assert fact.content == "Likes green tea"
        assert fact.category is MemoryCategory.PREFERENCE
        assert fact.provenance == prov
        assert not fact.archived
        assert fact.updated_at >= fact.created_at
        assert await backend.get("no-such-id") is None

    async def test_key_updates_in_place(self, backend: MemoryBackend) -> None:
        first = await backend.store(
            "identity", "Lives in Lisbon", key="user.city", provenance=_OWNER
        )
        again = await backend.store(
            "identity", "Lives in Lisbon", key="user.city", provenance=_OWNER
        )
        assert again.action == "unchanged"
        assert again.fact.id == first.fact.id
        moved = await backend.store(
            "identity", "Lives in Porto", key="user.city", provenance=_OWNER
        )
        assert moved.action == "updated"
        assert moved.fact.id == first.fact.id
        assert moved.previous is not None
        assert moved.previous.content == "Lives in Lisbon"
        current = await backend.get_by_key("user.city")
        assert current is not None
        assert current.content == "Lives in Porto"
        assert await backend.get_by_key("user.unknown") is None

    async def test_repeated_fact_is_not_duplicated(self, backend: MemoryBackend) -> None:
        first = await backend.store("interest", "Enjoys  bouldering", provenance=_OWNER)
        again = await backend.store("interest", "enjoys bouldering ", provenance=_OWNER)
        assert again.action == "unchanged"
        assert again.fact.id == first.fact.id
        other = await backend.store("goal", "Enjoys bouldering", provenance=_OWNER)
        assert other.action == "added", "the same words in another category are another fact"
        assert len(await backend.list()) == 2

    async def test_replace_archives_the_old_fact(self, backend: MemoryBackend) -> None:
        old = await backend.store(
            "context", "Project uses Python 3.11", key="proj.py", provenance=_OWNER
        )
        new = await backend.store(
            "context", "Project uses Python 3.12", provenance=_OWNER, replace_id=old.fact.id
        )
        assert new.action == "replaced"
        assert new.fact.id != old.fact.id
        assert new.fact.key == "proj.py", "a replacement inherits the key"
        assert new.previous is not None
        assert new.previous.id == old.fact.id
        archived = await backend.get(old.fact.id)
        assert archived is not None
        assert archived.archived
        current = await backend.get_by_key("proj.py")
        assert current is not None
        assert current.id == new.fact.id
        with pytest.raises(MemoryStoreError):
            await backend.store("context", "x", provenance=_OWNER, replace_id="no-such-id")

    async def test_forget_archives_and_restore_returns(self, backend: MemoryBackend) -> None:
        fact = (await backend.store("directive", "Answer in French", provenance=_OWNER)).fact
        assert await backend.forget(fact.id) is True
        assert await backend.forget(fact.id) is False, "already archived"
        assert await backend.forget("no-such-id") is False
        kept = await backend.get(fact.id)
        assert kept is not None
        assert kept.archived, "forgetting archives, it does not delete"
        assert await backend.search("French") == []
        assert [f.id for f in await backend.search("French", include_archived=True)] == [fact.id]
        assert await backend.list() == []
        assert await backend.restore(fact.id) is True
        assert await backend.restore(fact.id) is False, "already active"
        assert [f.id for f in await backend.search("french")] == [fact.id]

    async def test_search_ranks_filters_and_limits(self, backend: MemoryBackend) -> None:
        both = await backend.store("preference", "Prefers dark roast coffee", provenance=_OWNER)
        one = await backend.store("interest", "Collects coffee mugs", provenance=_OWNER)
        await backend.store("goal", "Run a marathon", provenance=_OWNER)
        hits = await backend.search("dark coffee")
        assert [f.id for f in hits] == [both.fact.id, one.fact.id]
        only = await backend.search("coffee", categories=["interest"])
        assert [f.id for f in only] == [one.fact.id]
        assert len(await backend.search("coffee", limit=1)) == 1
        assert await backend.search("tennis") == []
        facts, history = await backend.search_both("dark coffee", limit=1)
        assert [f.id for f in facts] == [both.fact.id], "search_both is the two searches"
        assert history == await backend.search_history("dark coffee", limit=1)

    @pytest.mark.parametrize(
        "query",
        [
            '"',
            "*",
            "NOT",
            "coffee OR",
            "(",
            "'; DROP TABLE memories; --",
            "",
            "   ",
            "🙂",
            "x" * 5000,
        ],
    )
    async def test_odd_queries_never_raise(self, backend: MemoryBackend, query: str) -> None:
        await backend.store("preference", "Prefers dark roast coffee", provenance=_OWNER)
        hits = await backend.search(query)
        assert isinstance(hits, list)

    async def test_invalid_input_is_refused(self, backend: MemoryBackend) -> None:
        with pytest.raises(MemoryStoreError):
            await backend.store("mood", "Happy", provenance=_OWNER)
        with pytest.raises(MemoryStoreError):
            await backend.store("preference", "   ", provenance=_OWNER)
        assert await backend.list() == []

    async def test_list_is_newest_first_and_filters(self, backend: MemoryBackend) -> None:
        a = (await backend.store("goal", "Learn Portuguese", provenance=_OWNER)).fact
        b = (await backend.store("context", "Works on Fermix", provenance=_OWNER)).fact
        await backend.store("goal", "Learn Portuguese properly", key="goal.lang", provenance=_OWNER)
        listed = await backend.list()
        assert listed[-1].id == a.id
        assert {f.id for f in await backend.list(categories=["context"])} == {b.id}
        assert len(await backend.list(limit=2)) == 2

    async def test_concurrent_stores_all_land(self, backend: MemoryBackend) -> None:
        ids: list[str] = []

        async def one(i: int) -> None:
            result = await backend.store("context", f"Fact number {i}", provenance=_OWNER)
            ids.append(result.fact.id)

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
        assert len(set(ids)) == 20
        assert len(await backend.list()) == 20

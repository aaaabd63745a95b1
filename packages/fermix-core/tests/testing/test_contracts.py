"""The contract suites, run against the fakes and reference implementations core ships."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fermix_core.channel import Channel, ChannelRateLimited
from fermix_core.memory import InMemoryBackend
from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from fermix_core.specs import ToolSpec
from fermix_core.testing import (
    ChannelContract,
    ContractViolation,
    FunctionProvider,
    MemoryBackendContract,
    MemoryChannel,
    ProviderContract,
    Scenario,
    ScriptedProvider,
    ToolContract,
    reply,
    tool_call,
)
from fermix_core.tool import Tool, ToolContext, ToolOutput
from pydantic import BaseModel

SECRET = "sk-contract-test-0123456789"


class TestScriptedProviderContract(ProviderContract):
    secret = SECRET

    def make_provider(self, scenario: Scenario) -> ScriptedProvider:
        script = {
            Scenario.TEXT: [reply("Hello there.")],
            Scenario.TOOL_CALL: [tool_call("contract_echo", {"text": "ping"}), "ping"],
            Scenario.ERROR: [
                ProviderError(ErrorKind.SERVER_ERROR, "upstream returned 500", status=500)
            ],
        }[scenario]
        return ScriptedProvider(script)


class TestFunctionProviderContract(ProviderContract):
    """A text-only, non-streaming model, so the contract's other branches run too."""

    secret = SECRET
    model = "echo-1"

    def make_provider(self, scenario: Scenario) -> FunctionProvider:
        async def answer(request: ChatRequest) -> Turn | str:
            if scenario is Scenario.ERROR:
                raise ProviderError(ErrorKind.AUTH, "the API key was refused; run `fermix setup`")
            last = request.messages[-1]
            if scenario is Scenario.TOOL_CALL and last.role == "user":
                return tool_call("contract_echo", {"text": "ping"}, id="call-1")
            return f"echo: {last.text}"

        return FunctionProvider(answer, vision=False, supports_streaming=False)


class TestMemoryChannelContract(ChannelContract):
    def make_channel(self) -> MemoryChannel:
        return MemoryChannel()

    async def trigger_inbound(self, channel: MemoryChannel, text: str) -> None:  # type: ignore[override]
        await channel.inject(text, sender_id="u1", chat_id="c1")

    async def sent_texts(self, channel: MemoryChannel, chat_id: str) -> list[str]:  # type: ignore[override]
        return [m.text for m in channel.sent if m.chat_id == chat_id]

    async def provoke_rate_limit(self, channel: MemoryChannel, chat_id: str) -> bool:  # type: ignore[override]
        channel.fail_next(ChannelRateLimited(1.5))
        return True


class TestBareMemoryChannelContract(TestMemoryChannelContract):
    """The same channel with every optional ability off: each must refuse, typed."""

    def make_channel(self) -> MemoryChannel:
        return MemoryChannel(
            "bare",
            supports_edit=False,
            supports_delete=False,
            supports_reactions=False,
            supports_typing=False,
        )


class ShoutArgs(BaseModel):
    text: str
    times: int = 1


class Shout(Tool[ShoutArgs]):
    async def run(self, args: ShoutArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=" ".join([args.text.upper()] * args.times))


SHOUT = ToolSpec(name="shout", description="Say it louder.", factory=Shout, args_model=ShoutArgs)


class TestShoutToolContract(ToolContract):
    valid_args: ClassVar[dict[str, Any]] = {"text": "hi", "times": 2}
    invalid_args: ClassVar[dict[str, Any] | None] = {"times": "many"}
    invalid_field = "times"

    def make_tool(self) -> Shout:
        return Shout(SHOUT)


class TestInMemoryBackendContract(MemoryBackendContract):
    def make_backend(self, tmp_path: Path) -> InMemoryBackend:
        return InMemoryBackend()


def test_contract_bases_are_not_collected_on_their_own() -> None:
    for base in (ProviderContract, ChannelContract, ToolContract, MemoryBackendContract):
        assert not base.__name__.startswith("Test")


class _TemplatingProvider(FunctionProvider):
    """Fine for chat turns, but runs the system prompt through ``str.format``: the JSON
    example in memory review's instruction then blows up (a real-world adapter bug)."""

    async def chat(self, request: ChatRequest) -> Turn:
        system = "\n".join(m.text for m in request.messages if m.role == "system")
        system.format()  # KeyError on '"operations"' when the prompt holds JSON braces
        return await super().chat(request)


class _TemplatingContract(TestFunctionProviderContract):
    def make_provider(self, scenario: Scenario) -> FunctionProvider:
        return _TemplatingProvider(lambda request: "fine", name="templating", model="t-1")


@pytest.mark.anyio
async def test_the_contract_sends_a_background_call_shaped_like_memory_review() -> None:
    contract = _TemplatingContract()
    await contract.test_plain_message_gets_a_text_turn()  # ordinary turns work
    with pytest.raises(KeyError):
        await contract.test_a_background_call_is_answered_like_a_turn()


def test_unimplemented_hooks_say_what_to_supply() -> None:
    class Incomplete(ProviderContract):
        pass

    with pytest.raises(NotImplementedError, match="make_provider"):
        Incomplete().make_provider(Scenario.TEXT)


class _Hanging(MemoryChannel):
    async def send(self, message):  # type: ignore[override]
        import anyio

        await anyio.sleep_forever()


class _HangingContract(TestMemoryChannelContract):
    inbound_timeout = 0.2

    def make_channel(self) -> MemoryChannel:
        return _Hanging("hanging")


@pytest.mark.anyio
async def test_a_hanging_adapter_fails_the_contract_instead_of_hanging() -> None:
    contract = _HangingContract()
    with pytest.raises(Exception) as info:  # noqa: PT011 - a TimeoutError, maybe in a group
        await contract.test_send_returns_an_id_and_reaches_the_platform()
    assert isinstance(info.value, TimeoutError) or info.group_contains(TimeoutError)


class _Undeclared(MemoryChannel):
    """Claims to edit but inherits Channel's refusing edit()."""

    edit = Channel.edit  # type: ignore[assignment]


class _UndeclaredContract(TestMemoryChannelContract):
    def make_channel(self) -> MemoryChannel:
        return _Undeclared("liar")


@pytest.mark.anyio
async def test_a_declared_but_missing_ability_fails_the_contract() -> None:
    with pytest.raises(AssertionError, match="supports_edit is true but edit"):
        await _UndeclaredContract().test_declared_abilities_are_implemented()


# ----------------------------------------- broken implementations: each names its rule


def _provider_contract(answer: Any, *, timeout: float = 0.2) -> ProviderContract:
    class Broken(ProviderContract):
        step_timeout = timeout

        def make_provider(self, scenario: Scenario) -> FunctionProvider:
            async def call(request: ChatRequest) -> Any:
                return await answer(scenario, request)

            return FunctionProvider(call)

    return Broken()


@pytest.mark.anyio
async def test_a_chat_that_never_returns_fails_with_its_deadline() -> None:
    import anyio

    async def hang(scenario: Scenario, request: ChatRequest) -> str:
        await anyio.sleep_forever()
        return "unreachable"

    contract = _provider_contract(hang)
    with pytest.raises(
        ContractViolation, match=r"chat\(\) answers the 'text' scenario: no answer within 0.2 s"
    ):
        await contract.test_plain_message_gets_a_text_turn()
    with pytest.raises(ContractViolation, match=r"'error' scenario must fail within 0.2 s"):
        await contract.test_failure_is_a_classified_provider_error()


@pytest.mark.anyio
async def test_a_plain_exception_instead_of_provider_error_names_the_rule() -> None:
    async def boom(scenario: Scenario, request: ChatRequest) -> str:
        raise ValueError("backend said 500")

    contract = _provider_contract(boom)
    with pytest.raises(ContractViolation, match="must surface as ProviderError") as info:
        await contract.test_failure_is_a_classified_provider_error()
    assert "ValueError: backend said 500" in str(info.value)
    with pytest.raises(ContractViolation, match="must be raised as ProviderError"):
        await contract.test_plain_message_gets_a_text_turn()


@pytest.mark.anyio
async def test_an_empty_turn_and_a_non_turn_name_the_rule() -> None:
    async def empty(scenario: Scenario, request: ChatRequest) -> Turn:
        return Turn(content="", model="m")

    with pytest.raises(ContractViolation, match="empty Turn"):
        await _provider_contract(empty).test_plain_message_gets_a_text_turn()

    class NotATurn(ProviderContract):
        def make_provider(self, scenario: Scenario) -> Any:
            provider = FunctionProvider(lambda request: "x")

            async def chat(request: ChatRequest) -> Any:
                return {"content": "a dict"}

            provider.chat = chat  # type: ignore[method-assign]
            return provider

    with pytest.raises(ContractViolation, match=r"must return a fermix_core\.messages\.Turn"):
        await NotATurn().test_plain_message_gets_a_text_turn()


@pytest.mark.anyio
async def test_an_error_scenario_that_answers_says_so() -> None:
    async def fine(scenario: Scenario, request: ChatRequest) -> str:
        return "all good"

    with pytest.raises(ContractViolation, match="must raise ProviderError; it returned"):
        await _provider_contract(fine).test_failure_is_a_classified_provider_error()


@pytest.mark.anyio
async def test_make_provider_not_implemented_names_the_hook() -> None:
    class Incomplete(ProviderContract):
        pass

    with pytest.raises(ContractViolation, match="must implement make_provider"):
        await Incomplete().test_plain_message_gets_a_text_turn()


class _NeedsMore(Tool[ShoutArgs]):
    def __init__(self, spec: ToolSpec, api_client: object) -> None:
        super().__init__(spec)
        self.api_client = api_client

    async def run(self, args: ShoutArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=args.text)


class _Crashes(Tool[ShoutArgs]):
    async def run(self, args: ShoutArgs, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("KeyError deep inside")


class _Hangs(Tool[ShoutArgs]):
    async def run(self, args: ShoutArgs, ctx: ToolContext) -> ToolOutput:
        import anyio

        await anyio.sleep_forever()
        return ToolOutput(content="unreachable")


def _tool_contract(tool: Tool[Any]) -> ToolContract:
    class Broken(TestShoutToolContract):
        step_timeout = 0.2

        def make_tool(self) -> Tool[Any]:
            return tool

    return Broken()


@pytest.mark.anyio
async def test_a_factory_needing_more_than_the_spec_names_the_rule() -> None:
    spec = dataclasses.replace(SHOUT, factory=_NeedsMore)
    contract = _tool_contract(_NeedsMore(spec, api_client=object()))
    with pytest.raises(
        ContractViolation, match=r"from the spec alone \(Fermix calls factory\(spec\)\)"
    ) as info:
        await contract.test_factory_builds_the_tool()
    assert "Give every other __init__ parameter a default" in str(info.value)


@pytest.mark.anyio
async def test_run_raising_something_other_than_tool_error_names_the_rule(tmp_path: Path) -> None:
    contract = _tool_contract(_Crashes(dataclasses.replace(SHOUT, factory=_Crashes)))
    with pytest.raises(ContractViolation, match="raising ToolError") as info:
        await contract.test_valid_arguments_run(tmp_path)
    assert "RuntimeError: KeyError deep inside" in str(info.value)


@pytest.mark.anyio
async def test_a_run_that_never_returns_fails_with_its_deadline(tmp_path: Path) -> None:
    contract = _tool_contract(_Hangs(dataclasses.replace(SHOUT, factory=_Hangs)))
    with pytest.raises(ContractViolation, match=r"no answer within 0\.2 s"):
        await contract.test_valid_arguments_run(tmp_path)

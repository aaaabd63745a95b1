from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from fermix_core.messages import ImagePart, ToolCall
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import (
    NoArgs,
    Tool,
    ToolBuildError,
    ToolContext,
    ToolError,
    ToolOutput,
    Trust,
    build_tool,
)
from pydantic import BaseModel, Field

pytestmark = pytest.mark.anyio


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path


class ForecastArgs(BaseModel):
    city: str = Field(min_length=1)
    days: int = Field(default=1, ge=1, le=7)


class Forecast(Tool[ForecastArgs]):
    async def run(self, args: ForecastArgs, ctx: ToolContext) -> ToolOutput | str:
        if args.city == "Atlantis":
            raise ToolError("Atlantis has no weather station; pick a real city")
        if args.city == "Crash":
            raise RuntimeError("bug in the tool")
        if args.city == "Wrong":
            return 42  # type: ignore[return-value]
        ctx.state["calls"] = ctx.state.get("calls", 0) + 1
        if args.city == "Plain":
            return f"{args.city}: sunny"
        return ToolOutput(
            content=f"{args.city}: sunny for {args.days} day(s)", data={"days": args.days}
        )


def forecast_spec(**overrides: Any) -> ToolSpec:
    values: dict[str, Any] = {
        "name": "forecast",
        "description": "Weather forecast for a city.",
        "factory": Forecast,
        "args_model": ForecastArgs,
        "policy": PolicyClass.NETWORK,
    }
    values.update(overrides)
    return ToolSpec(**values)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(trust=Trust.GUEST, cwd=tmp_path, home=Home(tmp_path))


def test_context_defaults_are_the_restrictive_ones(ctx: ToolContext) -> None:
    assert ctx.attended is False
    assert ctx.is_operator is False
    assert ctx.capabilities == {}
    assert ctx.conversation_key is None


async def test_valid_arguments_run(ctx: ToolContext) -> None:
    tool = build_tool(forecast_spec())
    output = await tool.invoke({"city": "Oslo", "days": 3}, ctx)
    assert not output.is_error
    assert output.text == "Oslo: sunny for 3 day(s)"
    assert output.data == {"days": 3}
    assert ctx.state["calls"] == 1


async def test_string_results_become_outputs(ctx: ToolContext) -> None:
    output = await build_tool(forecast_spec()).invoke({"city": "Plain"}, ctx)
    assert output == ToolOutput(content="Plain: sunny")


async def test_invalid_arguments_list_every_bad_field(ctx: ToolContext) -> None:
    output = await build_tool(forecast_spec()).invoke({"days": 30}, ctx)
    assert output.is_error
    assert "invalid arguments for tool 'forecast'" in output.text
    assert "- city: Field required" in output.text
    assert "- days:" in output.text
    assert "calls" not in ctx.state, "run() must not be reached with bad arguments"


async def test_validation_message_does_not_echo_input(ctx: ToolContext) -> None:
    secret_like = "sk-" + "x" * 40
    output = await build_tool(forecast_spec()).invoke({"city": "Oslo", "days": secret_like}, ctx)
    assert output.is_error
    assert secret_like not in output.text


@pytest.mark.parametrize("raw", [[1, 2], "Oslo", 7, b"{}"])
async def test_non_object_arguments_become_an_error_output(raw: Any, ctx: ToolContext) -> None:
    output = await build_tool(forecast_spec()).invoke(raw, ctx)
    assert output.is_error
    assert "expected a JSON object" in output.text


async def test_tool_error_becomes_an_error_output(ctx: ToolContext) -> None:
    output = await build_tool(forecast_spec()).invoke({"city": "Atlantis"}, ctx)
    assert output.is_error
    assert output.text == "Atlantis has no weather station; pick a real city"


async def test_unexpected_exceptions_propagate(ctx: ToolContext) -> None:
    tool = build_tool(forecast_spec())
    with pytest.raises(RuntimeError, match="bug in the tool"):
        await tool.invoke({"city": "Crash"}, ctx)
    with pytest.raises(TypeError, match="must return a ToolOutput or a str"):
        await tool.invoke({"city": "Wrong"}, ctx)


async def test_tool_without_args_model_refuses_extra_keys(ctx: ToolContext) -> None:
    class Ping(Tool[NoArgs]):
        async def run(self, args: NoArgs, ctx: ToolContext) -> str:
            return "pong"

    tool = build_tool(ToolSpec(name="ping", description="Ping.", factory=Ping))
    assert tool.args_model is NoArgs
    assert (await tool.invoke(None, ctx)).text == "pong"
    assert (await tool.invoke({}, ctx)).text == "pong"
    extra = await tool.invoke({"loud": True}, ctx)
    assert extra.is_error
    assert "loud" in extra.text


def test_definition_comes_from_the_spec_and_args_model() -> None:
    definition = build_tool(forecast_spec()).definition()
    assert definition.name == "forecast"
    assert definition.description == "Weather forecast for a city."
    assert definition.parameters["required"] == ["city"]


def test_output_to_result_keeps_images_and_error_flag() -> None:
    image = ImagePart(media_type="image/png", data=b"\x89PNG")
    output = ToolOutput(content=["shot", image], is_error=False)
    result = output.to_result(ToolCall(id="c9", name="browser"))
    assert result.call_id == "c9"
    assert result.content == output.content
    assert ToolOutput.error("nope", code=3).to_result(ToolCall(id="c", name="x")).is_error


def test_build_tool_resolves_import_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fermix_test_tools_mod")
    module.Forecast = Forecast  # type: ignore[attr-defined]
    module.ForecastArgs = ForecastArgs  # type: ignore[attr-defined]
    module.NotATool = lambda spec: object()  # type: ignore[attr-defined]
    module.NotAModel = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fermix_test_tools_mod", module)

    spec = forecast_spec(
        factory="fermix_test_tools_mod:Forecast", args_model="fermix_test_tools_mod:ForecastArgs"
    )
    assert isinstance(build_tool(spec), Forecast)

    with pytest.raises(ToolBuildError, match=r"not a fermix_core\.tool\.Tool"):
        build_tool(forecast_spec(factory="fermix_test_tools_mod:NotATool"))
    with pytest.raises(ToolBuildError, match="BaseModel subclass"):
        build_tool(forecast_spec(args_model="fermix_test_tools_mod:NotAModel"))
    with pytest.raises(ToolBuildError, match="cannot be imported"):
        build_tool(forecast_spec(factory="fermix_test_tools_mod:Missing"))
    with pytest.raises(ToolBuildError, match="cannot be imported"):
        build_tool(forecast_spec(args_model="no_such_module_anywhere:Args"))
    with pytest.raises(ToolBuildError, match="no factory"):
        build_tool(forecast_spec(factory=None))


class Say(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> str:
        return ctx.state["say"]


class Loud(str):
    pass


async def test_a_plain_string_result_is_the_output_validation_would_build(ctx) -> None:
    tool = build_tool(forecast_spec(name="say", factory=Say, args_model=None))
    for said in ("done", "", "naïve\nline two", Loud("shout")):
        ctx.state["say"] = said
        made = await tool.invoke({}, ctx)
        wanted = ToolOutput(content=said)
        assert type(made) is ToolOutput and made == wanted
        assert made.model_dump_json() == wanted.model_dump_json()
        assert made.model_fields_set == wanted.model_fields_set
        assert made.model_copy(update={"is_error": True}).is_error

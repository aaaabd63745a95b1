from __future__ import annotations

import pytest
from fermix_core.api import Fermix
from fermix_core.config import ConfigError
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.sandbox.command_tools import command_tool_specs, tool_name
from fermix_core.specs import ProviderSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio


class Model:
    """Calls one tool, then answers with what the tool returned."""

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.requests = []
        self.provider = FunctionProvider(self.answer, name="scripted")

    def answer(self, request):
        self.requests.append(request)
        last = request.messages[-1]
        if last.tool_result is not None:
            return Turn(content=last.tool_result.content[0].text, model="m")
        return Turn(content="", tool_calls=[self.call], model="m")

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="scripted",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m",
        )


def config(commands: list[str]) -> dict:
    return {
        "fermix_core": {
            "providers": {"scripted": {"primary": True, "base_url": "http://127.0.0.1:9/x"}},
            "memory": {"review_enabled": False},
        },
        "sandbox": {"expose_commands": commands},
    }


async def test_an_exposed_program_is_a_tool_that_runs_without_a_shell(fermix_home) -> None:
    model = Model(ToolCall(id="c1", name="cmd_echo", arguments={"args": ["hello; rm -rf /"]}))
    plugins = [("providers.scripted", model)]
    async with Fermix.open(
        fermix_home, config=config(["echo"]), plugins=plugins, entry_points=False
    ) as fx:
        outcome = await fx.ask("run it")
    assert "cmd_echo" in {t.name for t in model.requests[0].tools}
    # One argv element: the ';' never reaches a shell, so nothing after it runs.
    assert "hello; rm -rf /" in outcome.text and "exit code: 0" in outcome.text


async def test_a_program_outside_the_profile_is_refused(fermix_home) -> None:
    model = Model(ToolCall(id="c1", name="cmd_sudo", arguments={"args": ["true"]}))
    plugins = [("providers.scripted", model)]
    async with Fermix.open(
        fermix_home, config=config(["sudo"]), plugins=plugins, entry_points=False
    ) as fx:
        outcome = await fx.ask("escalate")
    assert "does not allow sudo" in outcome.text


async def test_a_path_is_not_a_program_name(fermix_home) -> None:
    with pytest.raises(ConfigError) as info:
        async with Fermix.open(fermix_home, config=config(["../bin/sh"]), entry_points=False):
            pass
    assert "sandbox.expose_commands" in str(info.value)


def test_specs_are_owner_only_exec_and_deduplicated() -> None:
    specs = command_tool_specs(["jq", "jq", "pandoc"])
    assert [s.name for s in specs] == ["cmd_jq", "cmd_pandoc"]
    assert all(s.owner_only and s.policy == "exec" and s.problems() == [] for s in specs)
    assert tool_name("clang-format") == "cmd_clang_format"

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.testing import ToolContract
from fermix_core.tool import Trust, build_tool
from fermix_tools.meta.plugin import TOOL_HELP
from pydantic import BaseModel


class ShellArgs(BaseModel):
    command: str


SHELL = ToolSpec(
    name="shell",
    description="Run a command.",
    factory="fermix_tools.meta.tool_help:ToolHelp",
    args_model=f"{__name__}:ShellArgs",
    policy=PolicyClass.EXEC,
    owner_only=True,
    read_only=False,
    failure_modes=("timeout",),
)


class TestToolHelpContract(ToolContract):
    valid_args = {"name": "tool_help"}
    invalid_args = {"name": ""}
    invalid_field = "name"

    def make_tool(self):
        return build_tool(TOOL_HELP)

    def make_context(self, tmp_path: Path):
        ctx = super().make_context(tmp_path)
        ctx.capabilities = {"tool_help": TOOL_HELP}
        return ctx


@pytest.fixture
def tool():
    return build_tool(TOOL_HELP)


def context(tmp_path, trust, capabilities):
    ctx = TestToolHelpContract().make_context(tmp_path)
    ctx.trust = trust
    ctx.capabilities = capabilities
    return ctx


@pytest.mark.anyio
async def test_describes_schema_guidance_and_failure_modes(tool, tmp_path) -> None:
    out = await tool.invoke(
        {"name": "shell"},
        context(tmp_path, Trust.OPERATOR, {"shell": SHELL, "tool_help": TOOL_HELP}),
    )
    assert not out.is_error
    assert '"command"' in out.text and "- timeout" in out.text and "owner only" in out.text
    assert out.data["schema"]["required"] == ["command"]


@pytest.mark.anyio
async def test_tool_outside_the_snapshot_reads_as_unknown(tool, tmp_path) -> None:
    """A guest's snapshot lacks shell; asking about it must not reveal its schema or existence."""
    guest = context(tmp_path, Trust.GUEST, {"tool_help": TOOL_HELP})
    hidden = await tool.invoke({"name": "shell"}, guest)
    missing = await tool.invoke({"name": "no_such_tool"}, guest)
    assert hidden.is_error and missing.is_error
    assert '"command"' not in hidden.text
    assert hidden.text.replace("'shell'", "X") == missing.text.replace("'no_such_tool'", "X")


@pytest.mark.anyio
async def test_suggests_close_names(tool, tmp_path) -> None:
    out = await tool.invoke({"name": "shel"}, context(tmp_path, Trust.OPERATOR, {"shell": SHELL}))
    assert out.is_error and "Did you mean shell" in out.text


@pytest.mark.anyio
async def test_extra_arguments_are_refused(tool, tmp_path) -> None:
    out = await tool.invoke(
        {"name": "shell", "x": 1}, context(tmp_path, Trust.OPERATOR, {"shell": SHELL})
    )
    assert out.is_error

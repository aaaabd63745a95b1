"""Small real tools and spec sets shared by the agent tests.

The tools are genuine :class:`~fermix_core.tool.Tool` subclasses: they validate arguments,
run, and record what they were asked into ``ctx.state["calls"]`` so a test can prove a tool
did (or did not) execute.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import NoArgs, Tool, ToolContext, ToolError, ToolOutput, Trust
from pydantic import BaseModel, ConfigDict, Field


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path


class TextArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(default="", max_length=200)


class EmojiArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emoji: str = Field(min_length=1, max_length=8)


def _log(ctx: ToolContext, name: str, args: BaseModel) -> None:
    ctx.state.setdefault("calls", []).append((name, args.model_dump()))


class Echo(Tool[TextArgs]):
    async def run(self, args: TextArgs, ctx: ToolContext) -> str:
        _log(ctx, self.name, args)
        return f"{self.name}: {args.text}"


class Silent(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        _log(ctx, self.name, args)
        return ToolOutput()


class Crash(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> str:
        _log(ctx, self.name, args)
        raise RuntimeError("kaboom with token sk-should-not-reach-the-model")


class Refuse(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> str:
        _log(ctx, self.name, args)
        raise ToolError("the thing is not there; try another path")


class React(Tool[EmojiArgs]):
    async def run(self, args: EmojiArgs, ctx: ToolContext) -> str:
        _log(ctx, self.name, args)
        allowed = ctx.state.get("allowed_reactions")
        if allowed and args.emoji not in allowed:
            raise ToolError(f"{args.emoji} is not an allowed reaction here")
        if ctx.state.get("react_ends_turn"):
            return ToolOutput(content=f"reacted {args.emoji}", data={"end_turn": True})
        return f"reacted {args.emoji}"


class ListTools(Tool[NoArgs]):
    """What a discovery tool (like tool_help) sees: the run's snapshot through the context."""

    async def run(self, args: NoArgs, ctx: ToolContext) -> str:
        _log(ctx, self.name, args)
        return ", ".join(sorted(ctx.capabilities))


def make_spec(
    name: str,
    policy: PolicyClass = PolicyClass.READ_ONLY,
    *,
    tool: type[Tool[Any]] = Echo,
    description: str | None = None,
    **overrides: Any,
) -> ToolSpec:
    args_model = {Echo: TextArgs, React: EmojiArgs}.get(tool)
    values: dict[str, Any] = {
        "name": name,
        "description": description or f"The {name.replace('_', ' ')} tool.",
        "factory": tool,
        "args_model": args_model,
        "policy": policy,
        "read_only": policy in (PolicyClass.READ_ONLY, PolicyClass.OWNER_DATA_READ),
    }
    values.update(overrides)
    return ToolSpec(**values)


def standard_specs() -> list[ToolSpec]:
    """One tool per trust-relevant shape, plus a deferred first-party and a plugin tool."""
    return [
        make_spec("echo", description="Repeat the given text back.\nSecond line is ignored."),
        make_spec("list_tools", tool=ListTools, description="List the tools of this run."),
        make_spec("file_read", PolicyClass.OWNER_DATA_READ, description="Read a workspace file."),
        make_spec("file_write", PolicyClass.WRITE, description="Write a workspace file."),
        make_spec("shell", PolicyClass.EXEC, description="Run a shell command."),
        make_spec("web_fetch", PolicyClass.NETWORK, description="Fetch a web page."),
        make_spec("image_api", PolicyClass.EXTERNAL_API, description="Generate an image."),
        make_spec("secret_note", owner_only=True, description="Read the owner's pinned note."),
        make_spec(
            "send_attachment",
            PolicyClass.CHANNEL_SIDE_EFFECT,
            description="Send a local file through the active channel.",
        ),
        make_spec(
            "react",
            PolicyClass.CHANNEL_SIDE_EFFECT,
            tool=React,
            description="Acknowledge the user's message with a single emoji reaction.",
        ),
        make_spec(
            "weather_lookup",
            deferred=True,
            description="Look up the weather forecast for a city.",
            guidance="Use for rain, temperature or wind questions.",
        ),
        make_spec(
            "job_runs",
            PolicyClass.OWNER_DATA_READ,
            deferred=True,
            description="List recent runs of scheduled jobs.",
        ),
        make_spec(
            "gmail_search",
            description="Search the owner's email messages in Gmail.",
            guidance="Query mail by sender, subject or words.",
        ),
    ]


SOURCES = {
    "echo": "tools.meta (fermix-tools 0.1.0)",
    "gmail_search": "google (fermix-google 1.2.0)",
}


@pytest.fixture
def kit() -> SimpleNamespace:
    """The shared tool classes and spec builders, without cross-test imports."""
    return SimpleNamespace(
        Echo=Echo,
        Silent=Silent,
        Crash=Crash,
        Refuse=Refuse,
        React=React,
        ListTools=ListTools,
        TextArgs=TextArgs,
        spec=make_spec,
        standard_specs=standard_specs,
        sources=dict(SOURCES),
    )


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(trust=Trust.OPERATOR, cwd=tmp_path, home=Home(tmp_path), session_id="main-1")


@pytest.fixture
def guest_ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(trust=Trust.GUEST, cwd=tmp_path, home=Home(tmp_path), session_id="main-2")

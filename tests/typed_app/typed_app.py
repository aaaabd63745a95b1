"""A small app written against fermix-core's public API, type-checked under mypy --strict.

It is what an embedding app and a third-party plugin author write: a tool (returning
``ToolOutput(content=str)``), a provider, the hooks that register them, and an app that
opens the runtime in process and asks a question. ``tests/test_typed_api.py`` runs mypy
over this file; it is also imported and run there, so the types describe code that works.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import anyio
from fermix_core.api import Fermix, FermixClosedError
from fermix_core.channel import InboundMessage, OutboundMessage
from fermix_core.facade import ServiceHost
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import Turn
from fermix_core.provider import ChatRequest, ErrorKind, Provider, ProviderError, ProviderSettings
from fermix_core.specs import ModelInfo, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from fermix_core.turns import TurnOutcome
from pydantic import BaseModel, ConfigDict, Field


class ShoutArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, description="What to shout")


class Shout(Tool[ShoutArgs]):
    """Upper-cases the text; refuses to shout nothing but spaces."""

    async def run(self, args: ShoutArgs, ctx: ToolContext) -> ToolOutput:
        if not args.text.strip():
            raise ToolError("there is nothing to shout; pass some words")
        return ToolOutput(content=args.text.upper())


def error_output(message: str) -> ToolOutput:
    return ToolOutput.error(message, reason="example")


SHOUT = ToolSpec(
    name="shout",
    description="Upper-case some text.",
    factory="typed_app:Shout",
    args_model="typed_app:ShoutArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
)


class EchoProvider(Provider):
    """A keyless in-process model: answers with the last user message."""

    name = "app"

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        self.model = settings.default_model or spec.default_model or "m1"

    async def chat(self, request: ChatRequest) -> Turn:
        if not request.messages:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "no messages", provider=self.name)
        return Turn(content=f"you said: {request.messages[-1].text}", model=self.model)


class AppPlugin:
    """An in-process plugin object, registered with ``Fermix.open(plugins=...)``."""

    def __init__(self) -> None:
        self.started = False
        self.heard: list[str] = []
        self.greeted = anyio.Event()

    @hookimpl
    def fermix_startup(self, runtime: ServiceHost) -> None:
        self.started = runtime.home.path.is_dir()
        runtime.state["app"] = self
        runtime.task_group.start_soon(self.greet, runtime, name="app greeting")

    async def greet(self, runtime: ServiceHost) -> None:
        """Feed one message through the gateway, as an app's own source would."""

        async def heard(message: OutboundMessage) -> None:
            self.heard.append(message.text)

        note = InboundMessage(
            channel="cli", chat_id="app", sender_id="local", text="hi", local=True
        )
        outcome = await runtime.ingest(note, runtime.reply_port(heard))
        if outcome.job is not None:
            await outcome.job.done.wait()
        self.greeted.set()

    @hookimpl
    def fermix_tools(self) -> Iterator[ToolSpec]:
        yield SHOUT

    @hookimpl
    def fermix_providers(self) -> Iterator[ProviderSpec]:
        yield ProviderSpec(
            name="app",
            label="App",
            factory=EchoProvider,
            keyless=True,
            needs_server=False,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=8_000),),
        )


async def ask_once(home: Path, question: str) -> str:
    config = {
        "fermix_core": {
            "providers": {"app": {"primary": True}},
            "memory": {"review_enabled": False},
        }
    }
    plugin = AppPlugin()
    async with Fermix.open(
        home, config=config, plugins=[("app", plugin)], entry_points=False
    ) as fx:
        outcome: TurnOutcome = await fx.ask(question, session="typed")
        await plugin.greeted.wait()
        closed = fx
    assert plugin.started
    assert plugin.heard == ["you said: hi"]
    with contextlib.suppress(FermixClosedError):
        await closed.ask("after the block")
    return outcome.text

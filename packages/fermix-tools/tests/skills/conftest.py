"""A real delegation rig: capability registry, skill registry on disk, a scripted model.

The model is a :class:`FunctionProvider` whose answer depends on who is asking: the parent
(a system prompt without the sub-agent preamble) or a worker (which reads its task). The
parent's script is a queue of turns; each worker answers from ``worker(task, request)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.agent import AgentLoop, CapabilityRegistry, SingleProviderCaller
from fermix_core.agent.delegation import Delegator
from fermix_core.home import FermixHome
from fermix_core.messages import Message, Turn
from fermix_core.provider import ChatRequest
from fermix_core.skills import SkillRegistry, SkillRoot
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.testing import FunctionProvider
from fermix_core.testing.providers import reply
from fermix_core.tool import Tool, ToolContext, Trust
from fermix_core.traces import Tracer
from fermix_tools.skills.plugin import SKILL_TOOLS
from pydantic import BaseModel, ConfigDict


class TextArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""


class Note(Tool[TextArgs]):
    async def run(self, args: TextArgs, ctx: ToolContext) -> str:
        ctx.services["calls"].append((self.name, ctx.session_id, args.text))
        return f"{self.name}: {args.text}"


def spec(name: str, **kw: Any) -> ToolSpec:
    return ToolSpec(name=name, description=f"{name} tool", factory=Note, args_model=TextArgs, **kw)


EXTRA_TOOLS = (
    spec("note"),
    spec("owner_read", policy=PolicyClass.OWNER_DATA_READ, owner_only=True),
    spec("computer_use", policy=PolicyClass.EXEC, read_only=False, owner_only=True),
    spec("react", policy=PolicyClass.CHANNEL_SIDE_EFFECT, read_only=False),
)

WORKER_MARK = "You are a sub-agent of Fermix"


def is_worker(request: ChatRequest) -> bool:
    return WORKER_MARK in request.messages[0].text


def task_of(request: ChatRequest) -> str:
    return next(m.text for m in request.messages if m.role == "user")


@dataclass
class Rig:
    home: FermixHome
    capabilities: CapabilityRegistry
    skills: SkillRegistry
    parent: list[Any]
    worker: Callable[[str, ChatRequest], Any]
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    requests: list[ChatRequest] = field(default_factory=list)
    models: list[str | None] = field(default_factory=list)

    async def answer(self, request: ChatRequest) -> Any:
        self.requests.append(request)
        if is_worker(request):
            result = self.worker(task_of(request), request)
            if hasattr(result, "__await__"):
                result = await result
            return result
        item = self.parent.pop(0)
        return item(request) if callable(item) else item

    def delegator(self, callers: Any = None) -> Delegator:
        provider = FunctionProvider(self.answer)
        caller = SingleProviderCaller(provider)

        async def factory(model: str | None) -> Any:
            self.models.append(model)
            return caller

        return Delegator(self.capabilities, callers or factory, tracer=Tracer(self.home))

    def context(self, trust: Trust = Trust.OPERATOR, **state: Any) -> ToolContext:
        return ToolContext(
            trust=trust,
            cwd=self.home.path,
            home=self.home,
            session_id="main-1",
            state=dict(state),
            services={"skills": self.skills, "delegation": self.delegator(), "calls": self.calls},
        )

    async def turn(self, text: str, trust: Trust = Trust.OPERATOR, **state: Any) -> Any:
        ctx = self.context(trust, **state)
        provider = FunctionProvider(self.answer)
        loop = AgentLoop(SingleProviderCaller(provider), self.capabilities.snapshot(trust))
        return await loop.run([Message.system("You are Fermix."), Message.user(text)], ctx)

    def events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for path in sorted((self.home.path / "traces").rglob("agent_event.jsonl")):
            found += [json.loads(line) for line in path.read_text().splitlines()]
        return found


def last_tool_result(request: ChatRequest) -> dict[str, Any]:
    message = request.messages[-1]
    return json.loads(message.text) if message.text.startswith("{") else {"text": message.text}


def final(text: str = "done") -> Callable[[ChatRequest], Turn]:
    return lambda request: reply(text)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    home = FermixHome(tmp_path / "fermix")
    home.path.mkdir(parents=True)
    capabilities = CapabilityRegistry([*SKILL_TOOLS, *EXTRA_TOOLS], deferral=False)
    skills = SkillRegistry(
        [
            SkillRoot(home.path / "skills", Trust.OPERATOR, "local"),
            SkillRoot(tmp_path / "plugin-skills", Trust.GUEST, "plugin demo"),
        ],
        reserved=capabilities.specs,
    ).load()
    return Rig(home, capabilities, skills, [], lambda task, request: reply(f"did {task}"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


__all__ = ["Rig", "anyio", "final", "is_worker", "last_tool_result", "task_of"]

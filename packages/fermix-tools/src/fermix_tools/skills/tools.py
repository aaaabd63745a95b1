"""The skill tools and ``subagents``, over the service's skill registry and delegator.

``ctx.service("skills")`` is the :class:`~fermix_core.skills.SkillRegistry`;
``ctx.service("delegation")`` the :class:`~fermix_core.agent.delegation.Delegator`, which
owns the caps, the worker surfaces, the sub-agent route and the traces. The tools add the
argument rules and turn outcomes into one structured answer for the model.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from fermix_core.agent.delegation import (
    DEPTH_STATE,
    MAX_DEPTH,
    PROFILE_STATE,
    WORKER_ITERATIONS,
    WORKER_PROMPT,
    DelegationError,
    limits_for,
    summarize,
    worker_surface,
)
from fermix_core.skills import SkillError, render_skill, skill_surface
from fermix_core.skills.package import (
    DESCRIPTION_LIMIT,
    MAX_REFERENCE_BYTES,
    NAME_RE,
    SKILL_FILE,
)
from fermix_core.tool import NoArgs, Tool, ToolContext, ToolError, ToolOutput, Trust
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SkillCreate",
    "SkillCreateArgs",
    "SkillList",
    "SkillReload",
    "SkillRun",
    "SkillRunArgs",
    "SkillView",
    "SkillViewArgs",
    "Subagents",
    "SubagentsArgs",
]

_TASK_LIMIT = 8000


def _owner(ctx: ToolContext, what: str) -> None:
    if not ctx.is_operator:
        raise ToolError(f"Only the owner can use {what}.")


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)


class SkillViewArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="The skill's name.")
    file: str | None = Field(
        default=None,
        max_length=200,
        description="A reference file of the skill (e.g. 'plugins'); omit for the body.",
    )


class SkillView(Tool[SkillViewArgs]):
    async def run(self, args: SkillViewArgs, ctx: ToolContext) -> ToolOutput:
        import anyio.to_thread

        _owner(ctx, "skills")
        skills = ctx.service("skills")
        try:
            skill = skills.require(args.name)
            if args.file:
                text = await anyio.to_thread.run_sync(skill.read_reference, args.file)
                return ToolOutput(content=text, data={"skill": skill.name, "file": args.file})
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        files = ""
        if skill.references:
            files = "\n\nReference files (skill_view with file=…): " + ", ".join(skill.references)
        return ToolOutput(content=skill.body + files, data={"skill": skill.name})


class SkillList(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "skills")
        listing = ctx.service("skills").listing()
        return ToolOutput(content=_json(listing), data=listing)


class SkillReload(Tool[NoArgs]):
    async def run(self, args: NoArgs, ctx: ToolContext) -> ToolOutput:
        import anyio.to_thread

        _owner(ctx, "skills")
        report = await anyio.to_thread.run_sync(ctx.service("skills").reload)
        return ToolOutput(content=_json(report), data=report)


class SkillCreateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=64, description="Lowercase letters, digits and hyphens."
    )
    description: str = Field(
        min_length=1, max_length=DESCRIPTION_LIMIT, description="When the skill should be used."
    )
    body: str = Field(min_length=1, max_length=100_000, description="Markdown instructions.")
    allowed_tools: list[str] | None = Field(
        default=None,
        max_length=100,
        description="Tools skill_run may use ([] = none; omit = the trust default).",
    )
    references: dict[str, str] | None = Field(
        default=None,
        max_length=50,
        description="Optional reference files: relative path → text (e.g. 'api.md').",
    )


def _reference_path(relative: str) -> PurePosixPath:
    path = PurePosixPath(relative.replace("\\", "/"))
    if (
        not relative.strip()
        or path.is_absolute()
        or any(part in ("..", "") or part.startswith(".") for part in path.parts)
        or path.as_posix() == SKILL_FILE
    ):
        raise ToolError(
            f"reference path {relative!r} must be a relative file path inside the package "
            "(no '..', no leading '/' or '.', not SKILL.md)"
        )
    return path


class SkillCreate(Tool[SkillCreateArgs]):
    async def run(self, args: SkillCreateArgs, ctx: ToolContext) -> ToolOutput:
        import anyio.to_thread

        _owner(ctx, "skill_create")
        skills = ctx.service("skills")
        name = args.name.strip()
        if not NAME_RE.match(name):
            raise ToolError(
                f"name {name!r} must be 1-64 lowercase letters, digits and single hyphens"
            )
        if name in skills or name in skills.reserved:
            raise ToolError(f"the name {name!r} is already taken; choose another")
        root = skills.local_root
        if root is None:
            raise ToolError("no local skills directory is configured in this run")
        references = {_reference_path(rel): text for rel, text in (args.references or {}).items()}
        for rel, text in references.items():
            if len(text.encode("utf-8")) > MAX_REFERENCE_BYTES:
                raise ToolError(f"reference {rel} is over {MAX_REFERENCE_BYTES // 1024} KiB")
        text = render_skill(name, args.description, args.body, args.allowed_tools)
        report = await anyio.to_thread.run_sync(self._write, skills, root / name, text, references)
        if name not in skills:
            problem = next((e for e in report["errors"] if f"/{name}/" in e), "not loaded")
            raise ToolError(f"the skill was written but did not load: {problem}")
        return ToolOutput(
            content=f"Created skill {name!r} at {root / name}; it is loaded now.",
            data={"path": str(root / name), **report},
        )

    @staticmethod
    def _write(skills: Any, package: Any, text: str, references: dict[Any, str]) -> dict:
        from fermix_core.fsutil import atomic_write
        from fermix_core.skills import parse_skill_text

        parse_skill_text(text)  # what we write must read back
        try:
            package.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            package.mkdir(mode=0o700)
        except FileExistsError:
            raise ToolError(
                f"{package} already exists; pick another name or edit it and skill_reload"
            ) from None
        base = package.resolve()
        for rel, content in references.items():
            target = package / rel
            if not target.parent.resolve().is_relative_to(base):
                raise ToolError(f"reference {rel} would leave the package")
            atomic_write(target, content, mode=0o600)
        atomic_write(package / SKILL_FILE, text, mode=0o600)
        return skills.reload()


class SkillRunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, description="The skill to run.")
    task: str = Field(
        min_length=1,
        max_length=_TASK_LIMIT,
        description="What to do, with every fact needed (the sub-agent cannot see this chat).",
    )


class SkillRun(Tool[SkillRunArgs]):
    async def run(self, args: SkillRunArgs, ctx: ToolContext) -> ToolOutput:
        _owner(ctx, "skill_run")
        skills = ctx.service("skills")
        delegation = ctx.service("delegation")
        try:
            skill = skills.require(args.name)
        except SkillError as exc:
            raise ToolError(str(exc)) from None
        depth = int(ctx.state.get(DEPTH_STATE, 0))
        confined = skill_surface(skill, delegation.capabilities, ctx.capabilities, ctx.trust)
        surface = worker_surface(delegation.capabilities, confined.specs, confined.trust, depth + 1)
        system = f"{WORKER_PROMPT}\n\n## Skill: {skill.name}\n\n{skill.body}"
        if skill.references:
            system += "\n\nReference files of this skill: " + ", ".join(skill.references)
        try:
            (outcome,) = await delegation.run(
                [args.task],
                ctx,
                surface=surface,
                concurrency=1,
                iterations=WORKER_ITERATIONS,
                system=system,
                kind="skill_run",
                trust=confined.trust,
            )
        except DelegationError as exc:
            raise ToolError(str(exc)) from None
        data = {"skill": skill.name, **outcome.as_dict()}
        if outcome.status != "ok":
            return ToolOutput(
                content=f"skill {skill.name} did not finish: {outcome.error}\n{_json(data)}",
                is_error=True,
                data=data,
            )
        return ToolOutput(content=outcome.text, data=data)


class SubagentsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tasks: list[str] = Field(
        min_length=1,
        max_length=200,
        description="Independent, self-contained tasks (max 10; 50 in ultra mode).",
    )
    concurrency: int | None = Field(
        default=None, ge=1, description="How many run at once (default 4, max 8; ultra 12)."
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Run this call's workers on this model (primary provider); omit normally.",
    )


class Subagents(Tool[SubagentsArgs]):
    async def run(self, args: SubagentsArgs, ctx: ToolContext) -> ToolOutput:
        if ctx.trust is not Trust.OPERATOR:
            raise ToolError("Sub-agents are not available in this conversation.")
        delegation = ctx.service("delegation")
        limits = limits_for(ctx.state.get(PROFILE_STATE))
        if len(args.tasks) > limits.max_tasks:
            raise ToolError(
                f"{len(args.tasks)} tasks is over the cap of {limits.max_tasks} per call; "
                "merge related tasks or split the work across several calls"
            )
        long = [i + 1 for i, t in enumerate(args.tasks) if len(t) > _TASK_LIMIT or not t.strip()]
        if long:
            raise ToolError(
                f"task(s) {', '.join(map(str, long))} are empty or over {_TASK_LIMIT} characters"
            )
        concurrency = args.concurrency or limits.default_concurrency
        if concurrency > limits.max_concurrency:
            raise ToolError(
                f"concurrency {concurrency} is over the cap of {limits.max_concurrency}"
            )
        depth = int(ctx.state.get(DEPTH_STATE, 0))
        if depth >= MAX_DEPTH:
            raise ToolError(
                f"delegation is already nested {depth} deep (cap {MAX_DEPTH}); do it yourself"
            )
        surface = worker_surface(delegation.capabilities, ctx.capabilities, ctx.trust, depth + 1)
        try:
            outcomes = await delegation.run(
                args.tasks,
                ctx,
                surface=surface,
                concurrency=concurrency,
                iterations=limits.iterations,
                model=args.model,
            )
        except DelegationError as exc:
            raise ToolError(str(exc)) from None
        answer = summarize(outcomes)
        return ToolOutput(content=_json(answer), data=answer)

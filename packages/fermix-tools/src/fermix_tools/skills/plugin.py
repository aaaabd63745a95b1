"""Registers the skill and delegation tools. Registration imports nothing but spec records.

Every tool here is owner-only: a guest's surface has no skills and no delegation at all.
``subagents`` and ``skill_run`` are ``external_api`` (they spend model calls), which the
guest surface excludes by policy too.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import PolicyClass, ToolSpec

_M = "fermix_tools.skills.tools"

SKILL_VIEW = ToolSpec(
    name="skill_view",
    description=(
        "Load a skill's instructions (its SKILL.md body), or one of its reference files by "
        "name. Skills are listed in the ## Skills section of your prompt."
    ),
    factory=f"{_M}:SkillView",
    args_model=f"{_M}:SkillViewArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
    owner_only=True,
    guidance=(
        "Call it when a request matches a skill's description, then follow the body. The "
        "body lists the skill's reference files; load one with file='<name>' when needed."
    ),
    failure_modes=(
        "unknown skill: the error lists the loaded skills",
        "unknown reference file: the error lists the skill's files",
    ),
)

SKILL_LIST = ToolSpec(
    name="skill_list",
    description="List the loaded skills (name, description, trust, allowed tools) and load errors.",
    factory=f"{_M}:SkillList",
    args_model="fermix_core.tool:NoArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
    owner_only=True,
    guidance="The prompt already lists skills; use this for details or to see load errors.",
)

SKILL_CREATE = ToolSpec(
    name="skill_create",
    description=(
        "Write a new skill package (SKILL.md plus optional reference files) to "
        "$FERMIX_HOME/skills and load it at once."
    ),
    factory=f"{_M}:SkillCreate",
    args_model=f"{_M}:SkillCreateArgs",
    policy=PolicyClass.WRITE,
    read_only=False,
    owner_only=True,
    guidance=(
        "name is lowercase letters, digits and hyphens; description says WHEN to use the "
        "skill; body is the Markdown instructions. allowed_tools narrows what skill_run may "
        "use ([] = no tools, omitted = everything you have)."
    ),
    failure_modes=(
        "name taken by another skill, a capability or an existing directory",
        "a reference file path that is absolute or leaves the package",
        "an invalid name or an empty description/body",
    ),
)

SKILL_RELOAD = ToolSpec(
    name="skill_reload",
    description=(
        "Re-scan the skill directories after a SKILL.md was created or edited on disk; "
        "reports added, removed and changed skills and load errors. No restart needed."
    ),
    factory=f"{_M}:SkillReload",
    args_model="fermix_core.tool:NoArgs",
    policy=PolicyClass.READ_ONLY,
    read_only=True,
    owner_only=True,
)

SUBAGENT_DEADLINE_S = 3600.0

SKILL_RUN = ToolSpec(
    name="skill_run",
    description=(
        "Delegate a task to a skill: a sub-agent follows the skill's instructions inside the "
        "skill's confinement (its allowed_tools and trust) and returns its result."
    ),
    factory=f"{_M}:SkillRun",
    args_model=f"{_M}:SkillRunArgs",
    policy=PolicyClass.EXTERNAL_API,
    read_only=False,
    owner_only=True,
    guidance=(
        "Give the task with every fact the sub-agent needs: it cannot see this conversation. "
        "Delegation nests at most 4 deep."
    ),
    failure_modes=(
        "unknown skill",
        "nesting cap reached: do the work yourself",
        "the sub-agent route cannot run (mis-paired [fermix_core.routing] subagent_*)",
    ),  # A sub-agent runs a whole agent loop of its own (its own tool calls have deadlines).
    timeout_seconds=SUBAGENT_DEADLINE_S,
)

SUBAGENTS = ToolSpec(
    name="subagents",
    description=(
        "Run up to 10 independent tasks in parallel on temporary sub-agents (≤ 8 at once, "
        "default 4) and get every task's result back in one answer."
    ),
    factory=f"{_M}:Subagents",
    args_model=f"{_M}:SubagentsArgs",
    policy=PolicyClass.EXTERNAL_API,
    read_only=False,
    owner_only=True,
    guidance=(
        "Each task must stand alone with every fact it needs (workers cannot see this "
        "conversation or each other). Workers have your tools minus delegation at the nesting "
        "cap, computer use and chat side effects. model runs this one call on another model "
        "(on the primary provider). In ultra mode the caps widen to 50 tasks, 12 at once."
    ),
    failure_modes=(
        "more tasks than the cap: split the work across calls",
        "a worker failed: its entry says why; the others still report",
        "the sub-agent route cannot run (mis-paired provider/model): the error names the setting",
    ),  # A sub-agent runs a whole agent loop of its own (its own tool calls have deadlines).
    timeout_seconds=SUBAGENT_DEADLINE_S,
)

SKILL_TOOLS = (SKILL_VIEW, SKILL_LIST, SKILL_CREATE, SKILL_RELOAD, SKILL_RUN, SUBAGENTS)


@hookimpl
def fermix_tools() -> Iterable[ToolSpec]:
    return SKILL_TOOLS

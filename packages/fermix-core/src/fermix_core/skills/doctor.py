"""``fermix doctor``'s skills row: what loaded, from where, and every package that did not."""

from __future__ import annotations

from typing import Any

from fermix_core.doctor import CheckResult, Status

__all__ = ["check_skills"]


def check_skills(ctx: Any) -> list[CheckResult]:
    from fermix_core.skills import SkillRegistry, default_roots
    from fermix_core.specs import ToolSpec

    reserved = set(ctx.registry.typed(ToolSpec)) if ctx.registry is not None else set()
    skills = SkillRegistry(default_roots(ctx.home, ctx.registry), reserved=reserved)
    found, errors = skills.scan()
    names = ", ".join(sorted(found)) or "none"
    if errors:
        return [
            CheckResult(
                "skills",
                Status.WARN,
                f"{len(found)} loaded ({names}); {len(errors)} skipped: " + "; ".join(errors),
                fix="fix or rename the SKILL.md named above, then run `fermix skills reload`",
            )
        ]
    return [CheckResult("skills", Status.OK, f"{len(found)} loaded: {names}")]

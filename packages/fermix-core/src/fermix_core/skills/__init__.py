"""Skills: SKILL.md instruction packages, their roots, trust and confinement (docs/skills.md)."""

from fermix_core.skills.package import Skill, SkillError, load_skill, parse_skill_text, render_skill
from fermix_core.skills.registry import SkillRegistry, SkillRoot, default_roots, skill_surface

__all__ = [
    "Skill",
    "SkillError",
    "SkillRegistry",
    "SkillRoot",
    "default_roots",
    "load_skill",
    "parse_skill_text",
    "render_skill",
    "skill_surface",
]

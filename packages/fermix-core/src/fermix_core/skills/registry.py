"""The skill registry: every skill root scanned into one name → :class:`Skill` table.

Roots, in order (docs/skills.md):

* the bundled ``skills/`` that ships with fermix-core — operator trust;
* ``$FERMIX_HOME/skills`` — operator trust (``skill_create`` writes here);
* each directory a plugin declares with ``fermix_skill_dirs`` — **guest** trust whatever
  the caller's: a plugin's instructions are third-party text and must not steer the
  owner's full surface.

A package that does not load, or whose name collides with a capability or with another
skill, is skipped and reported (:attr:`SkillRegistry.errors`: the log, ``fermix doctor``
and ``skill_reload`` read it). Colliding skills are all dropped, like duplicate spec names:
picking one by scan order would silently change behaviour when a directory appears.
Nothing here ever stops the daemon from booting.

:meth:`SkillRegistry.reload` re-scans in place and swaps the table in one assignment, so a
turn that is reading the old table keeps a consistent view.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fermix_core.skills.package import SKILL_FILE, Skill, SkillError, load_skill
from fermix_core.tool import Trust

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.derived_cache import DerivedCache

__all__ = ["SkillRegistry", "SkillRoot", "default_roots", "skill_surface"]

log = logging.getLogger("fermix.skills")


@dataclass(frozen=True)
class SkillRoot:
    """A directory of skill packages and the trust its skills run at."""

    path: Path
    trust: Trust
    source: str


def default_roots(home: Any, registry: Any = None) -> list[SkillRoot]:
    """Bundled, ``$FERMIX_HOME/skills`` and every plugin-declared directory, in that order."""
    from fermix_core.skills_bundle import BundledSkillsMissingError, bundled_skills_dir

    roots: list[SkillRoot] = []
    try:
        roots.append(SkillRoot(bundled_skills_dir(), Trust.OPERATOR, "bundled"))
    except BundledSkillsMissingError as exc:
        log.error("%s", exc)
    roots.append(SkillRoot(Path(home.path) / "skills", Trust.OPERATOR, "local"))
    if registry is not None:
        from fermix_core.specs import SkillDirSpec

        for name, spec in registry.typed(SkillDirSpec).items():
            origin = registry.source_of(spec) or "a plugin"
            roots.append(SkillRoot(Path(spec.path), Trust.GUEST, f"plugin {name} ({origin})"))
    return roots


class SkillRegistry:
    """Loaded skills by name, the roots they came from and what failed to load."""

    def __init__(
        self,
        roots: Iterable[SkillRoot],
        *,
        reserved: Iterable[str] = (),
        front_cache: DerivedCache | None = None,
    ) -> None:
        self.roots = tuple(roots)
        #: Parsed front matter kept between processes (see ``parse_skill_text``).
        self.front_cache = front_cache
        #: Names a skill may not take (the registered capabilities).
        self.reserved = frozenset(reserved)
        self._skills: Mapping[str, Skill] = MappingProxyType({})
        self.errors: list[str] = []

    # ------------------------------------------------------------------ reading

    @property
    def skills(self) -> Mapping[str, Skill]:
        return self._skills

    def get(self, name: str) -> Skill | None:
        return self._skills.get(name)

    def require(self, name: str) -> Skill:
        skill = self._skills.get(name)
        if skill is None:
            known = ", ".join(sorted(self._skills)) or "none"
            raise SkillError(f"no skill named {name!r}; available skills: {known}")
        return skill

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    @property
    def local_root(self) -> Path | None:
        """``$FERMIX_HOME/skills``, where ``skill_create`` writes."""
        return next((r.path for r in self.roots if r.source == "local"), None)

    def prompt_section(self, trust: Trust) -> str:
        """The ``## Skills`` body for a run at *trust*; guests get none (no skills for them)."""
        if Trust(trust) is not Trust.OPERATOR or not self._skills:
            return ""
        lines = [
            "Skills are instruction packages. When a request matches one, load it with "
            'skill_view(name: "…") and follow it (or delegate it with skill_run).',
            "",
        ]
        for skill in sorted(self._skills.values(), key=lambda s: s.name):
            lines.append(f"- {skill.name} — {skill.description}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ scanning

    def scan(self) -> tuple[dict[str, Skill], list[str]]:
        """Read every root; (skills by name, problems). Reads the disk, touches no state."""
        found: dict[str, list[Skill]] = {}
        errors: list[str] = []
        for root in self.roots:
            if not root.path.is_dir():
                continue
            try:
                entries = sorted(p for p in root.path.iterdir() if not p.name.startswith("."))
            except OSError as exc:
                errors.append(f"{root.source} skills at {root.path}: cannot list: {exc}")
                continue
            for directory in entries:
                if not directory.is_dir():
                    continue
                if not (directory / SKILL_FILE).is_file():
                    errors.append(f"{directory}: no {SKILL_FILE} in this skill directory; skipped")
                    continue
                try:
                    skill = load_skill(
                        directory,
                        trust=root.trust,
                        source=root.source,
                        front_cache=self.front_cache,
                    )
                except SkillError as exc:
                    errors.append(f"{directory / SKILL_FILE}: {exc}; skipped")
                    continue
                except OSError as exc:
                    errors.append(f"{directory / SKILL_FILE}: cannot read: {exc}; skipped")
                    continue
                found.setdefault(skill.name, []).append(skill)
        if self.front_cache is not None:
            self.front_cache.save({str(s.root / SKILL_FILE) for c in found.values() for s in c})
        skills: dict[str, Skill] = {}
        for name, claimants in found.items():
            if name in self.reserved:
                where = ", ".join(str(s.root) for s in claimants)
                errors.append(
                    f"skill {name!r} ({where}) was skipped: a capability already has that "
                    "name; rename the skill"
                )
            elif len(claimants) > 1:
                where = ", ".join(f"{s.root} ({s.source})" for s in claimants)
                errors.append(
                    f"skill {name!r} is defined {len(claimants)} times ({where}); none of "
                    "them loaded — rename or remove all but one"
                )
            else:
                skills[name] = claimants[0]
        return skills, errors

    def load(self) -> SkillRegistry:
        """Scan and install the result (boot); problems are logged. Returns self."""
        skills, errors = self.scan()
        self._install(skills, errors)
        return self

    def reload(self) -> dict[str, Any]:
        """Re-scan in place; ``{added, removed, changed, errors, skills}`` for the caller."""
        before = self._skills
        skills, errors = self.scan()
        self._install(skills, errors)
        return {
            "added": sorted(set(skills) - set(before)),
            "removed": sorted(set(before) - set(skills)),
            "changed": sorted(
                n
                for n in set(skills) & set(before)
                if (skills[n].fingerprint, skills[n].references, skills[n].root)
                != (before[n].fingerprint, before[n].references, before[n].root)
            ),
            "errors": list(errors),
            "skills": sorted(skills),
        }

    def _install(self, skills: dict[str, Skill], errors: list[str]) -> None:
        for problem in errors:
            log.warning("skills: %s", problem)
        self._skills = MappingProxyType(dict(sorted(skills.items())))
        self.errors = errors

    def listing(self) -> dict[str, Any]:
        return {
            "skills": [s.summary() for s in self._skills.values()],
            "errors": list(self.errors),
            "roots": [
                {"path": str(r.path), "trust": str(r.trust), "source": r.source} for r in self.roots
            ],
        }


def skill_surface(skill: Skill, capabilities: Any, ceiling: Mapping[str, Any], trust: Trust) -> Any:
    """The snapshot a run of *skill* may use: never wider than the caller's *ceiling*.

    The trust is the lower of the skill's and the caller's (a plugin skill is always a guest
    run); the surface is that trust's snapshot ∩ the caller's own tools ∩ ``allowed_tools``.
    """
    from fermix_core.agent.delegation import narrowed

    effective = Trust.GUEST if Trust.GUEST in (skill.trust, Trust(trust)) else Trust.OPERATOR
    base = capabilities.snapshot(effective)
    names = set(ceiling)
    if skill.allowed_tools is not None:
        names &= set(skill.allowed_tools)
    return narrowed(base, names)

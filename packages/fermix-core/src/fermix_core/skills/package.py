"""One skill package: a directory holding ``SKILL.md`` and, optionally, reference files.

``SKILL.md`` follows the public Agent Skills format: YAML front matter between two ``---``
lines, then a Markdown body. ``name`` and ``description`` are required; ``allowed_tools``
(or the format's own ``allowed-tools``, a space-separated string) narrows what the skill
may use when it runs; every other key (``license``, ``metadata``, ``compatibility`` …) is
kept as-is in :attr:`Skill.extra`, so a public skill loads unchanged.

Reference files are every other regular file in the package (``plugins.md``,
``references/api.md``, ``scripts/check.py`` …). They are listed, never read up front, and
loaded on demand by name: the relative path, or the path without its ``.md`` suffix.
A reference that resolves outside the package (a symlink out, ``..``) is refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_core.tool import Trust

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.derived_cache import DerivedCache

__all__ = [
    "DESCRIPTION_LIMIT",
    "MAX_REFERENCE_BYTES",
    "NAME_RE",
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "load_skill",
    "parse_skill_text",
    "render_skill",
]

SKILL_FILE = "SKILL.md"
#: The Agent Skills naming rule: lowercase letters, digits and single hyphens, ≤ 64 chars.
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){0,63}$")
DESCRIPTION_LIMIT = 1024
MAX_SKILL_BYTES = 256 * 1024
MAX_REFERENCE_BYTES = 512 * 1024
_MAX_REFERENCES = 200
_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?$\n?", re.S | re.M)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class SkillError(ValueError):
    """A SKILL.md that cannot be loaded; the message says what to fix."""


@dataclass(frozen=True)
class Skill:
    """A loaded skill. ``allowed_tools`` ``None`` means the trust default, ``()`` means none."""

    name: str
    description: str
    body: str
    root: Path
    trust: Trust
    source: str
    allowed_tools: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    references: tuple[str, ...] = ()
    #: What the skill was loaded from (SKILL.md text), for change detection on reload.
    fingerprint: str = ""

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "allowed_tools": None if self.allowed_tools is None else list(self.allowed_tools),
            "trust": str(self.trust),
            "source": self.source,
            "path": str(self.root),
            "references": list(self.references),
        }

    def reference_path(self, name: str) -> Path:
        """The file behind reference *name*; :class:`SkillError` when unknown or escaping."""
        wanted = name.strip().replace("\\", "/")
        candidates = [wanted, f"{wanted}.md"]
        match = next((c for c in candidates if c in self.references), None)
        if match is None:
            stems = [r for r in self.references if Path(r).stem == wanted]
            match = stems[0] if len(stems) == 1 else None
        if match is None:
            known = ", ".join(self.references) or "none"
            raise SkillError(
                f"skill {self.name!r} has no reference file {name!r}; its references: {known}"
            )
        path = (self.root / match).resolve()
        if not path.is_relative_to(self.root.resolve()) or not path.is_file():
            raise SkillError(f"reference {name!r} of skill {self.name!r} is outside its package")
        return path

    def read_reference(self, name: str) -> str:
        path = self.reference_path(name)
        if path.stat().st_size > MAX_REFERENCE_BYTES:
            raise SkillError(
                f"reference {name!r} of skill {self.name!r} is larger than "
                f"{MAX_REFERENCE_BYTES // 1024} KiB; split it into smaller files"
            )
        return path.read_text("utf-8", errors="replace")


def _tools(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [part for part in re.split(r"[\s,]+", value) if part]
    elif isinstance(value, list | tuple):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise SkillError(f"{key} must list tool names as strings, got {item!r}")
            items.append(item.strip())
    else:
        raise SkillError(f"{key} must be a list of tool names (or [] for none)")
    bad = [item for item in items if not _TOOL_NAME.match(item)]
    if bad:
        raise SkillError(f"{key} holds invalid tool names: {', '.join(map(repr, bad))}")
    return tuple(dict.fromkeys(items))


def parse_skill_text(
    text: str, *, cache: DerivedCache | None = None, name: str = ""
) -> tuple[dict[str, Any], str]:
    """Split SKILL.md *text* into (front matter mapping, body); :class:`SkillError` if malformed.

    With a *cache* (``$FERMIX_HOME/cache/skill-front-matter.json``), a front matter parsed
    before is taken from it under *name* while its text is byte for byte the same (the
    key is its SHA-256), so an unchanged skill costs no YAML parse — nor the PyYAML import.
    """
    match = _FRONT.match(text)
    if match is None:
        raise SkillError(
            "SKILL.md must start with YAML front matter between two '---' lines "
            "(name and description at least)"
        )
    block = match.group(1)
    key = hashlib.sha256(block.encode("utf-8")).hexdigest() if cache is not None else ""
    stored = cache.get(name, key) if cache is not None else None
    if isinstance(stored, dict):
        return dict(stored), text[match.end() :]
    import yaml

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillError(f"the front matter is not valid YAML{where}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillError("the front matter must be a mapping of keys (name: …, description: …)")
    front = {str(k): v for k, v in data.items()}
    if cache is not None:
        cache.put(name, key, front)  # values JSON cannot hold (dates) are not cached
    return front, text[match.end() :]


def load_skill(
    root: Path, *, trust: Trust, source: str, front_cache: DerivedCache | None = None
) -> Skill:
    """Load the package in directory *root*; :class:`SkillError` says what is wrong.

    *front_cache* is passed to :func:`parse_skill_text`."""
    path = root / SKILL_FILE
    try:
        if path.stat().st_size > MAX_SKILL_BYTES:
            raise SkillError(f"SKILL.md is larger than {MAX_SKILL_BYTES // 1024} KiB")
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise SkillError("no SKILL.md in the directory") from None
    except UnicodeDecodeError:
        raise SkillError("SKILL.md is not UTF-8 text") from None
    front, body = parse_skill_text(text, cache=front_cache, name=str(path))
    name = front.pop("name", None)
    if not isinstance(name, str) or not NAME_RE.match(name.strip()):
        raise SkillError(
            f"name {name!r} must be 1-64 lowercase letters, digits and single hyphens "
            "(e.g. pdf-tools)"
        )
    name = name.strip()
    description = front.pop("description", None)
    if not isinstance(description, str) or not description.strip():
        raise SkillError("description is required: say when the skill should be used")
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_LIMIT:
        raise SkillError(f"description is longer than {DESCRIPTION_LIMIT} characters")
    allowed: tuple[str, ...] | None = None
    for key in ("allowed_tools", "allowed-tools"):
        if key in front:
            if allowed is not None:
                raise SkillError("give allowed_tools or allowed-tools, not both")
            raw = front.pop(key)
            allowed = () if raw is None else _tools(raw, key)
    if not body.strip():
        raise SkillError("the body is empty: write the instructions below the front matter")
    return Skill(
        name=name,
        description=description,
        body=body.strip() + "\n",
        root=root,
        trust=trust,
        source=source,
        allowed_tools=allowed,
        extra=front,
        references=_references(root),
        fingerprint=text,
    )


def _references(root: Path) -> tuple[str, ...]:
    base = root.resolve()
    found: list[str] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.as_posix() == SKILL_FILE or any(p.startswith(".") for p in relative.parts):
            continue
        if not path.is_file() or not path.resolve().is_relative_to(base):
            continue
        found.append(relative.as_posix())
        if len(found) >= _MAX_REFERENCES:
            break
    return tuple(found)


def render_skill(
    name: str, description: str, body: str, allowed_tools: list[str] | None = None
) -> str:
    """A valid SKILL.md for the given fields (what ``skill_create`` writes)."""
    import yaml

    front: dict[str, Any] = {"name": name, "description": description}
    if allowed_tools is not None:
        front["allowed_tools"] = list(allowed_tools)
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{header}---\n\n{body.strip()}\n"

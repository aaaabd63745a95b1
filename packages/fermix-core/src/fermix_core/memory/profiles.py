"""USER.md and MEMORY.md: prompt files rendered from the owner's live facts.

Both files are derived artifacts — the facts in the memory backend are the source of truth
— so a rebuild *replaces* each file with a fresh rendering instead of appending to it: a
fact that was corrected or forgotten disappears from the prompt at the next rebuild.

* USER.md holds the four user categories (identity, preference, interest, goal), after the
  owner's name, timezone and communication style from ``[fermix_core.agent]``.
* MEMORY.md holds the work categories (context, directive).

Only the owner's memory goes in (facts the owner stored, or that review consolidated from
the owner's messages): both files are shown to the operator on every turn, and a guest's
or a job's words must never read back as the owner's. Each file is bounded, newest facts
first, so the prompt cannot grow without limit; the rest stays reachable through recall.
Text is neutralised like any fenced memory (one line per fact, role and fence tags
escaped), and a fact whose text carries prompt-injection markers is held back altogether —
these files are read as the owner's profile and standing instructions, so flagged text
stays in memory, where recall shows it fenced and flagged, and never reaches them. Writes
are atomic, follow a symlinked file, keep its permissions, and happen only when the
rendering changed — an unchanged prompt prefix keeps provider caches warm.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fermix_core.fsutil import atomic_write
from fermix_core.memory.backend import (
    USER_CATEGORIES,
    WORK_CATEGORIES,
    MemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryFilter,
)
from fermix_core.memory.fence import neutralize, scan
from fermix_core.memory.scope import OWNER_SPEAKERS

__all__ = [
    "MAX_FACTS_PER_CATEGORY",
    "MAX_PROFILE_CHARS",
    "OwnerProfile",
    "ProfileRebuild",
    "rebuild_profiles",
    "render_memory_profile",
    "render_user_profile",
]

MAX_FACTS_PER_CATEGORY = 40
MAX_PROFILE_CHARS = 8000

_USER_SECTIONS: tuple[tuple[MemoryCategory, str], ...] = (
    (MemoryCategory.IDENTITY, "Identity"),
    (MemoryCategory.PREFERENCE, "Preferences"),
    (MemoryCategory.INTEREST, "Interests"),
    (MemoryCategory.GOAL, "Goals"),
)
_WORK_SECTIONS: tuple[tuple[MemoryCategory, str], ...] = (
    (MemoryCategory.CONTEXT, "Context"),
    (MemoryCategory.DIRECTIVE, "Standing instructions"),
)
_FOOTER = (
    "_Rebuilt from long-term memory by background review; edits here are replaced at the "
    "next review. Tell the assistant (or use the memory tools) to change a fact._"
)


@dataclass(frozen=True)
class OwnerProfile:
    """What setup recorded about the owner in ``[fermix_core.agent]``."""

    user_name: str | None = None
    timezone: str | None = None
    communication_style: str | None = None

    @classmethod
    def from_config(cls, config: Any) -> OwnerProfile:
        if config is None:
            return cls()
        agent = config.core.fermix_core.agent
        return cls(agent.user_name, agent.timezone, agent.communication_style)


@dataclass(frozen=True)
class ProfileRebuild:
    """Which files a rebuild rewrote (unchanged renderings are not written)."""

    user_path: Path
    memory_path: Path
    written: tuple[Path, ...]
    facts: int


def _one_line(value: str | None) -> str:
    return neutralize(value or "")[0]


def _sections(
    facts: Iterable[MemoryFact], sections: Sequence[tuple[MemoryCategory, str]]
) -> list[str]:
    by_category: dict[MemoryCategory, list[MemoryFact]] = {cat: [] for cat, _ in sections}
    for fact in facts:
        if fact.category in by_category and not fact.archived:
            by_category[fact.category].append(fact)
    out: list[str] = []
    budget = MAX_PROFILE_CHARS
    for category, title in sections:
        ranked = sorted(by_category[category], key=lambda f: f.updated_at, reverse=True)
        chosen = [f for f in ranked if not scan(f.content)]
        held = len(ranked) - len(chosen)
        lines: list[str] = []
        for fact in chosen[:MAX_FACTS_PER_CATEGORY]:
            line = f"- {_one_line(fact.content)}"
            if len(line) + 1 > budget:
                break
            budget -= len(line) + 1
            lines.append(line)
        left = len(chosen) - len(lines)
        if left > 0:
            lines.append(f"- ({left} more in memory; recall them when needed)")
        if held:
            lines.append(
                f"- ({held} held back: their text looks like injected instructions; "
                "recall shows them fenced)"
            )
        if lines:
            out += ["", f"## {title}", *lines]
    return out


def render_user_profile(facts: Iterable[MemoryFact], owner: OwnerProfile | None = None) -> str:
    """USER.md for *facts* (only the user categories are used)."""
    owner = owner or OwnerProfile()
    lines = ["# About the owner"]
    known = [
        f"- **{label}:** {_one_line(value)}"
        for label, value in (
            ("Name", owner.user_name),
            ("Timezone", owner.timezone),
            ("Communication style", owner.communication_style),
        )
        if value and value.strip()
    ]
    if known:
        lines += ["", *known]
    body = _sections([f for f in facts if f.category in USER_CATEGORIES], _USER_SECTIONS)
    lines += body or ["", "Nothing else is known yet."]
    return "\n".join([*lines, "", _FOOTER]) + "\n"


def render_memory_profile(facts: Iterable[MemoryFact]) -> str:
    """MEMORY.md for *facts* (only the work categories are used)."""
    body = _sections([f for f in facts if f.category in WORK_CATEGORIES], _WORK_SECTIONS)
    if not body:
        body = ["", "Nothing is recorded yet."]
    return "\n".join(["# Working memory", *body, "", _FOOTER]) + "\n"


def _write_if_changed(path: Path, text: str) -> bool:
    target = path.resolve() if path.is_symlink() else path
    try:
        if target.read_text("utf-8") == text:
            return False
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o600
    except (OSError, UnicodeDecodeError):
        mode = 0o600
    atomic_write(target, text, mode=mode)
    from fermix_core.prompt.bootstrap import prompt_files_written

    prompt_files_written()  # the next turn's system prompt reads it at once
    return True


async def rebuild_profiles(
    backend: MemoryBackend,
    home: Any,
    *,
    owner: OwnerProfile | None = None,
    agent_id: str = "main",
) -> ProfileRebuild:
    """Re-render ``memory/<agent_id>/USER.md`` and ``MEMORY.md`` from the owner's live facts."""
    from fermix_core.prompt.bootstrap import prompt_files

    root = Path(getattr(home, "path", home))
    files = {template: root / rel for rel, template in prompt_files(agent_id).items()}
    facts = await backend.list(where=MemoryFilter(speakers=OWNER_SPEAKERS))
    written: list[Path] = []
    user_text = render_user_profile(facts, owner)
    if _write_if_changed(files["USER.md"], user_text):
        written.append(files["USER.md"])
    if _write_if_changed(files["MEMORY.md"], render_memory_profile(facts)):
        written.append(files["MEMORY.md"])
    return ProfileRebuild(files["USER.md"], files["MEMORY.md"], tuple(written), len(facts))

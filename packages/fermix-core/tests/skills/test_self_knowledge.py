"""The bundled self-knowledge skill must stay true: every CLI verb and config section it
names exists, every reference file it lists is there, and what it calls unavailable is.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from fermix_core.skills import SkillRegistry, SkillRoot
from fermix_core.skills_bundle import bundled_skills_dir
from fermix_core.tool import Trust
from pydantic import BaseModel

SKILL_DIR = bundled_skills_dir() / "self-knowledge"
#: Verbs the skill names as NOT available; the test fails when one appears, so the skill
#: gets updated in the same change.
NOT_AVAILABLE = {"service", "upgrade", "traces"}
VERB = re.compile(r"`fermix ((?:[a-z][a-z-]*)(?:[ |][a-z][a-z-|]*)*)")
SECTION = re.compile(r"`\[([a-z_]+(?:\.[a-z_<>]+)*)\]`")


def texts() -> dict[str, str]:
    return {p.name: p.read_text("utf-8") for p in sorted(SKILL_DIR.glob("*.md"))}


def cli_tree() -> dict[str, set[str]]:
    from fermix_core.cli.commands import COMMANDS
    from fermix_core.specs import resolve_ref

    tree: dict[str, set[str]] = {}
    for entry in COMMANDS:
        target = resolve_ref(entry.target)
        subs = set()
        for command in getattr(target, "registered_commands", []):
            subs.add(command.name or command.callback.__name__.replace("_", "-"))
        for group in getattr(target, "registered_groups", []):
            subs.add(group.name)
        tree[entry.name] = subs
    return tree


def test_the_skill_and_every_listed_reference_load() -> None:
    skills = SkillRegistry([SkillRoot(SKILL_DIR.parent, Trust.OPERATOR, "bundled")]).load()
    assert skills.errors == []
    skill = skills.require("self-knowledge")
    listed = set(re.findall(r"^- `([a-z_]+)` — ", skill.body, re.M))
    assert listed == {"skills", "subagents", "jobs", "config", "cli"}
    for name in listed:
        assert skill.read_reference(name).startswith("# ")


def verb_problems(file: str, text: str, tree: dict[str, set[str]]) -> list[str]:
    problems = []
    for match in VERB.finditer(text):
        words = match.group(1).split(" ")
        verb = words[0]
        if verb in NOT_AVAILABLE:
            continue
        if verb not in tree:
            problems.append(f"{file}: `fermix {verb}` is not a command")
            continue
        if len(words) > 1 and tree[verb]:
            for sub in words[1].split("|"):
                if sub and sub not in tree[verb] and sub.upper() != sub:
                    problems.append(f"{file}: `fermix {verb} {sub}` is not a subcommand")
    return problems


def test_every_cli_verb_named_exists() -> None:
    tree = cli_tree()
    problems = [p for file, text in texts().items() for p in verb_problems(file, text, tree)]
    assert problems == []
    for verb in NOT_AVAILABLE:
        assert verb not in tree, f"`fermix {verb}` exists now: update the self-knowledge skill"


def _descend(model: typing.Any, parts: list[str]) -> bool:
    """Whether the dotted *parts* name a section of *model*; ``<name>`` matches any key."""
    current = model
    for part in parts:
        current = _unwrap(current)
        if typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            if part.startswith("<"):  # a placeholder: any named sub-section of this model
                fields = list(current.model_fields.values())
                if not fields:
                    return False
                current = fields[0].annotation
                continue
            field = current.model_fields.get(part)
            if field is None:
                return False
            current = field.annotation
            continue
        return False
    return True


def _unwrap(annotation: typing.Any) -> typing.Any:
    """``X | None`` → ``X``; anything else unchanged."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def test_every_config_section_named_exists() -> None:
    from fermix_core.config.models import FermixConfig

    problems = []
    found = 0
    for file, text in texts().items():
        for match in SECTION.finditer(text):
            found += 1
            parts = match.group(1).split(".")
            if not _descend(FermixConfig, parts):
                problems.append(f"{file}: [{match.group(1)}] is not a config section")
    assert problems == [] and found > 10


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("[fermix_core.routing]", True),
        ("[fermix_core.nope]", False),
        ("[sandbox]", True),
        ("[fermix_core.oauth.<provider>]", True),
        ("[fermix_core.agent.nope]", False),
    ],
)
def test_the_section_checker_catches_drift(text: str, ok: bool) -> None:
    from fermix_core.config.models import FermixConfig

    assert _descend(FermixConfig, text.strip("[]").split(".")) is ok


def test_the_verb_checker_catches_drift() -> None:
    tree = cli_tree()
    assert VERB.findall("`fermix skills list|view NAME|reload`") == ["skills list|view"]
    assert verb_problems("x", "`fermix skills list|view NAME`", tree) == []
    assert verb_problems("x", "`fermix teleport`", tree) == [
        "x: `fermix teleport` is not a command"
    ]
    assert verb_problems("x", "`fermix skills explode`", tree) == [
        "x: `fermix skills explode` is not a subcommand"
    ]
    assert Path(SKILL_DIR / "SKILL.md").is_file()

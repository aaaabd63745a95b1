"""Skill packages load from real directories: public SKILL.md shapes, hostile ones, roots."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.skills import SkillError, SkillRegistry, SkillRoot, load_skill, skill_surface
from fermix_core.skills.registry import default_roots
from fermix_core.specs import PolicyClass, SkillDirSpec, ToolSpec
from fermix_core.tool import Trust


def write(root: Path, name: str, text: str, **files: str) -> Path:
    package = root / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "SKILL.md").write_text(text, "utf-8")
    for relative, content in files.items():
        target = package / relative.replace("__", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, "utf-8")
    return package


ANTHROPIC_SHAPE = """---
name: pdf-tools
description: Extract text and tables from PDF files, fill forms, merge documents. Use when
  the user mentions PDFs, forms or document extraction.
license: Complete terms in LICENSE.txt
metadata:
  author: example
  version: "1.2"
---

# PDF tools

Read `reference.md` for the advanced options.
"""

FOLDED = """---
name: brand-guidelines
description: >-
  Applies the brand colours and typography
  to any artifact.
allowed-tools: file_read file_write
compatibility: Designed for agents with file access
---
Use the palette below.
"""

LISTED = """---
name: notes
description: "Keep meeting notes tidy"
allowed_tools: [file_read, content_search]
---
Body.
"""

NONE_ALLOWED = """---
name: facts
description: Answer from this file only.
allowed_tools: []
---
Body.
"""


def test_real_world_shapes_load_with_extra_keys_kept(tmp_path: Path) -> None:
    pkg = write(
        tmp_path, "pdf-tools", ANTHROPIC_SHAPE, **{"reference.md": "ref", "LICENSE.txt": "x"}
    )
    skill = load_skill(pkg, trust=Trust.OPERATOR, source="local")
    assert skill.name == "pdf-tools"
    assert skill.description.startswith("Extract text and tables from PDF files, fill forms")
    assert skill.allowed_tools is None  # absent: the trust default
    assert skill.extra == {
        "license": "Complete terms in LICENSE.txt",
        "metadata": {"author": "example", "version": "1.2"},
    }
    assert skill.references == ("LICENSE.txt", "reference.md")
    assert skill.read_reference("reference") == "ref"
    assert skill.body.startswith("# PDF tools")

    folded = load_skill(write(tmp_path, "brand", FOLDED), trust=Trust.OPERATOR, source="local")
    assert folded.description == "Applies the brand colours and typography to any artifact."
    assert folded.allowed_tools == ("file_read", "file_write")
    assert folded.extra == {"compatibility": "Designed for agents with file access"}

    listed = load_skill(write(tmp_path, "notes", LISTED), trust=Trust.OPERATOR, source="local")
    assert listed.allowed_tools == ("file_read", "content_search")
    none = load_skill(write(tmp_path, "facts", NONE_ALLOWED), trust=Trust.OPERATOR, source="x")
    assert none.allowed_tools == ()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("# no front matter\n", "must start with YAML front matter"),
        ("---\nname: [unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a\n- b\n---\nbody\n", "must be a mapping"),
        ("---\nname: Bad_Name\ndescription: d\n---\nbody\n", "lowercase letters"),
        ("---\nname: ok\n---\nbody\n", "description is required"),
        ("---\nname: ok\ndescription: d\nallowed_tools: 3\n---\nbody\n", "list of tool names"),
        ("---\nname: ok\ndescription: d\nallowed_tools: ['rm -rf']\n---\nb\n", "invalid tool"),
        ("---\nname: ok\ndescription: d\n---\n\n", "body is empty"),
        ("---\nname: ok\ndescription: !!python/object:os.system x\n---\nb\n", "not valid YAML"),
    ],
)
def test_malformed_packages_are_refused_with_a_reason(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(SkillError, match=fragment):
        load_skill(write(tmp_path, "bad", text), trust=Trust.OPERATOR, source="local")


def test_reference_files_cannot_escape_the_package(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("owner data", "utf-8")
    pkg = write(tmp_path / "root", "leaky", LISTED.replace("notes", "leaky"))
    os.symlink(secret, pkg / "link.md")
    skill = load_skill(pkg, trust=Trust.OPERATOR, source="local")
    assert "link.md" not in skill.references
    for name in ("link", "../../secret.txt", "/etc/passwd"):
        with pytest.raises(SkillError):
            skill.read_reference(name)


def registry_for(tmp_path: Path, reserved: tuple[str, ...] = ()) -> SkillRegistry:
    roots = [
        SkillRoot(tmp_path / "bundled", Trust.OPERATOR, "bundled"),
        SkillRoot(tmp_path / "home", Trust.OPERATOR, "local"),
        SkillRoot(tmp_path / "plugin", Trust.GUEST, "plugin demo"),
    ]
    return SkillRegistry(roots, reserved=reserved)


def test_bad_and_colliding_skills_are_skipped_and_reported_not_fatal(tmp_path: Path) -> None:
    write(tmp_path / "bundled", "notes", LISTED)
    write(tmp_path / "home", "notes-copy", LISTED)  # same name "notes" from another root
    write(tmp_path / "home", "shell", "---\nname: shell\ndescription: d\n---\nbody\n")
    write(tmp_path / "home", "broken", "no front matter")
    (tmp_path / "home" / "empty-dir").mkdir()
    write(tmp_path / "plugin", "facts", NONE_ALLOWED)
    skills = registry_for(tmp_path, reserved=("shell",)).load()
    assert sorted(skills.skills) == ["facts"]
    joined = "\n".join(skills.errors)
    assert "'notes' is defined 2 times" in joined
    assert "'shell'" in joined and "capability already has that name" in joined
    assert "broken/SKILL.md" in joined
    assert "empty-dir: no SKILL.md" in joined
    assert skills.get("facts").trust is Trust.GUEST


def test_reload_reports_added_removed_changed_without_restart(tmp_path: Path) -> None:
    write(tmp_path / "home", "notes", LISTED)
    write(tmp_path / "home", "facts", NONE_ALLOWED)
    skills = registry_for(tmp_path).load()
    assert skills.reload() == {
        "added": [],
        "removed": [],
        "changed": [],
        "errors": [],
        "skills": ["facts", "notes"],
    }
    (tmp_path / "home" / "facts" / "SKILL.md").unlink()
    (tmp_path / "home" / "facts").rmdir()
    write(tmp_path / "home", "notes", LISTED.replace("Body.", "New body."))
    write(tmp_path / "home", "pdf-tools", ANTHROPIC_SHAPE)
    write(tmp_path / "home", "oops", "---\nname: oops\n---\nx\n")
    report = skills.reload()
    assert report["added"] == ["pdf-tools"]
    assert report["removed"] == ["facts"]
    assert report["changed"] == ["notes"]
    assert len(report["errors"]) == 1 and "description is required" in report["errors"][0]
    assert skills.get("notes").body == "New body.\n"


def test_prompt_section_lists_name_and_description_for_the_operator_only(tmp_path: Path) -> None:
    write(tmp_path / "home", "notes", LISTED)
    skills = registry_for(tmp_path).load()
    section = skills.prompt_section(Trust.OPERATOR)
    assert "- notes — Keep meeting notes tidy" in section
    assert "skill_view" in section
    assert skills.prompt_section(Trust.GUEST) == ""


def tool(name: str, **kw: object) -> ToolSpec:
    return ToolSpec(name=name, description=f"{name} tool", factory="x.y:Z", **kw)


def test_plugin_skills_run_at_guest_trust_whatever_the_caller(tmp_path: Path) -> None:
    caps = CapabilityRegistry(
        [
            tool("file_read", policy=PolicyClass.OWNER_DATA_READ, owner_only=True),
            tool("tool_help"),
            tool("shell", policy=PolicyClass.EXEC, read_only=False),
        ],
        deferral=False,
    )
    write(tmp_path / "plugin", "helper", "---\nname: helper\ndescription: d\n---\nb\n")
    write(tmp_path / "home", "local-helper", "---\nname: local-helper\ndescription: d\n---\nb\n")
    write(tmp_path / "home", "facts", NONE_ALLOWED)
    write(
        tmp_path / "home",
        "reader",
        "---\nname: reader\ndescription: d\nallowed_tools: "
        "[file_read, shell, not_a_tool]\n---\nb\n",
    )
    skills = registry_for(tmp_path).load()
    operator = caps.snapshot(Trust.OPERATOR)
    ceiling = operator.specs
    plugin = skill_surface(skills.require("helper"), caps, ceiling, Trust.OPERATOR)
    assert set(plugin.specs) == {"tool_help"}  # guest surface, even for an operator caller
    local = skill_surface(skills.require("local-helper"), caps, ceiling, Trust.OPERATOR)
    assert set(local.specs) == {"file_read", "tool_help", "shell"}
    assert skill_surface(skills.require("facts"), caps, ceiling, Trust.OPERATOR).specs == {}
    reader = skill_surface(skills.require("reader"), caps, ceiling, Trust.OPERATOR)
    assert set(reader.specs) == {"file_read", "shell"}  # narrows; unknown names add nothing
    # Never wider than the caller's ceiling: a caller without shell gives a skill none.
    narrow = skill_surface(skills.require("reader"), caps, {"file_read": 1}, Trust.OPERATOR)
    assert set(narrow.specs) == {"file_read"}
    guest_local = skill_surface(skills.require("local-helper"), caps, ceiling, Trust.GUEST)
    assert set(guest_local.specs) == {"tool_help"}


def test_default_roots_bundled_local_and_plugin_dirs(tmp_path: Path) -> None:
    spec = SkillDirSpec(name="demo", path=str(tmp_path / "plugin"))
    registry = SimpleNamespace(
        typed=lambda kind: {"demo": spec} if kind is SkillDirSpec else {},
        source_of=lambda s: "demo (fermix-demo 1.0)",
    )
    roots = default_roots(SimpleNamespace(path=tmp_path / "home"), registry)
    assert [(r.source.split(" ")[0], r.trust) for r in roots] == [
        ("bundled", Trust.OPERATOR),
        ("local", Trust.OPERATOR),
        ("plugin", Trust.GUEST),
    ]
    assert roots[1].path == tmp_path / "home" / "skills"
    bundled = SkillRegistry(roots[:1]).load()
    assert "self-knowledge" in bundled.skills and bundled.errors == []
    assert bundled.get("self-knowledge").allowed_tools == ()


def test_skill_dir_spec_validation() -> None:
    assert SkillDirSpec(name="demo", path="/abs").problems() == []
    assert any("absolute" in p for p in SkillDirSpec(name="demo", path="rel").problems())
    assert any("required" in p for p in SkillDirSpec(name="demo").problems())


def test_doctor_row_reports_skipped_skills(tmp_path: Path, monkeypatch) -> None:
    from fermix_core.doctor import Status
    from fermix_core.skills.doctor import check_skills

    home = SimpleNamespace(path=tmp_path)
    ctx = SimpleNamespace(home=home, registry=None)
    (ok,) = check_skills(ctx)
    assert ok.status is Status.OK and "self-knowledge" in ok.detail
    write(tmp_path / "skills", "broken", "no front matter")
    (warn,) = check_skills(ctx)
    assert warn.status is Status.WARN and "broken/SKILL.md" in warn.detail
    assert "fermix skills reload" in warn.fix


def _cached_registry(tmp_path: Path, skills: Path) -> tuple[SkillRegistry, object]:
    from fermix_core.derived_cache import DerivedCache
    from fermix_core.home import FermixHome

    cache = DerivedCache(FermixHome(tmp_path / "home"), "skill-front-matter.json", 1)
    roots = [SkillRoot(skills, Trust.OPERATOR, "local")]
    return SkillRegistry(roots, front_cache=cache).load(), cache


def test_front_matter_is_cached_and_an_edit_is_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    skills = tmp_path / "skills"
    write(skills, "pdf-tools", ANTHROPIC_SHAPE)
    write(skills, "notes", LISTED)
    first, cache = _cached_registry(tmp_path, skills)
    assert cache.path.exists()
    assert first.require("notes").allowed_tools == ("file_read", "content_search")

    parses: list[str] = []
    real = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda text: parses.append(text) or real(text))
    again, _ = _cached_registry(tmp_path, skills)
    assert parses == []  # both came from the cache
    assert {n: s.description for n, s in again.skills.items()} == {
        n: s.description for n, s in first.skills.items()
    }
    assert again.require("notes").allowed_tools == ("file_read", "content_search")

    write(skills, "notes", LISTED.replace("Keep meeting notes tidy", "Tidy notes"))
    edited, _ = _cached_registry(tmp_path, skills)
    assert len(parses) == 1 and edited.require("notes").description == "Tidy notes"


def test_a_cached_front_matter_never_hides_a_broken_edit(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write(skills, "notes", LISTED)
    _cached_registry(tmp_path, skills)
    broken_text = LISTED.replace('description: "Keep meeting notes tidy"', "description: [")
    write(skills, "notes", broken_text)
    broken, _ = _cached_registry(tmp_path, skills)
    assert "notes" not in broken.skills
    assert any("not valid YAML" in e for e in broken.errors)


def test_the_turn_runner_rebuilds_its_skills_section_only_after_a_reload(tmp_path: Path) -> None:
    from fermix_core.turns import TurnRunner

    write(tmp_path / "home", "notes", LISTED)
    skills = registry_for(tmp_path).load()
    runner = TurnRunner(
        store=None,
        capabilities=None,
        composer=None,
        caller=None,
        home=None,
        config=None,
        emit=lambda *a, **k: None,
    )
    runner.skills = skills
    built: list[Trust] = []
    real = skills.prompt_section

    def counting(trust: Trust) -> str:
        built.append(trust)
        return real(trust)

    skills.prompt_section = counting  # type: ignore[method-assign]
    first = runner._skills_section(Trust.OPERATOR)
    assert "- notes" in first and runner._skills_section(Trust.OPERATOR) is first
    assert runner._skills_section(Trust.GUEST) == ""
    assert built == [Trust.OPERATOR, Trust.GUEST]
    write(tmp_path / "home", "pdf-tools", ANTHROPIC_SHAPE)
    skills.reload()
    again = runner._skills_section(Trust.OPERATOR)
    assert "- pdf-tools" in again and "- notes" in again
    assert runner._skills_section(Trust.GUEST) == ""
    runner.skills = None
    assert runner._skills_section(Trust.OPERATOR) == ""

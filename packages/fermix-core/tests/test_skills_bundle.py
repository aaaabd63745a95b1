"""The bundled skills are found in both install layouts, and the self-knowledge skill is sound.

The front matter is parsed with a deliberately strict reader (one ``key: value`` per line,
``allowed_tools`` as a flow list) so the bundled file stays within the subset every skill
loader — ours or a YAML one — reads the same way.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from fermix_core.skills_bundle import (
    INSTALLED_DIRNAME,
    BundledSkillsMissingError,
    bundled_skills_dir,
)

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "packages" / "fermix-core"


def parse_front_matter(text: str) -> tuple[dict[str, object], str]:
    """Split ``---``-fenced front matter from the body; raise ``ValueError`` on anything odd."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("SKILL.md must start with a '---' front-matter fence")
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        raise ValueError("front matter is not closed by a second '---' line") from None
    meta: dict[str, object] = {}
    for line in lines[1:end]:
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"front-matter line is not 'key: value': {line!r}")
        if key.strip() in meta:
            raise ValueError(f"front-matter key {key.strip()!r} appears twice")
        value = value.strip()
        meta[key.strip()] = json.loads(value) if value.startswith("[") else value
    return meta, "\n".join(lines[end + 1 :])


def test_the_workspace_install_finds_the_repository_skills() -> None:
    found = bundled_skills_dir()
    # Editable installs have no _bundled_skills copy; the repository directory is the answer.
    assert found == (REPO / "skills").resolve()
    assert (found / "self-knowledge" / "SKILL.md").is_file()


def test_the_installed_copy_wins_over_the_repository(tmp_path: Path) -> None:
    # A wheel install: <site-packages>/fermix_core/_bundled_skills/...
    package = tmp_path / "packages" / "fermix-core" / "src" / "fermix_core"
    installed = package / INSTALLED_DIRNAME / "self-knowledge"
    installed.mkdir(parents=True)
    (installed / "SKILL.md").write_text("---\nname: self-knowledge\n---\n", encoding="utf-8")
    (tmp_path / "skills").mkdir()  # a repository copy is present too and must lose
    assert bundled_skills_dir(package) == (package / INSTALLED_DIRNAME).resolve()


def test_a_source_tree_without_an_installed_copy_uses_its_skills_dir(tmp_path: Path) -> None:
    package = tmp_path / "packages" / "fermix-core" / "src" / "fermix_core"
    package.mkdir(parents=True)
    (tmp_path / "skills").mkdir()
    assert bundled_skills_dir(package) == (tmp_path / "skills").resolve()


def test_a_stray_file_named_like_the_bundle_is_not_taken_for_it(tmp_path: Path) -> None:
    package = tmp_path / "packages" / "fermix-core" / "src" / "fermix_core"
    package.mkdir(parents=True)
    (package / INSTALLED_DIRNAME).write_text("not a directory", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    assert bundled_skills_dir(package) == (tmp_path / "skills").resolve()


def test_a_broken_install_says_what_to_do(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "fermix_core"
    package.mkdir(parents=True)
    with pytest.raises(BundledSkillsMissingError, match="reinstall fermix-core") as caught:
        bundled_skills_dir(package)
    assert isinstance(caught.value, FileNotFoundError)
    assert INSTALLED_DIRNAME in str(caught.value)


def test_a_package_dir_near_the_filesystem_root_does_not_crash() -> None:
    with pytest.raises(BundledSkillsMissingError):
        bundled_skills_dir(Path("/fermix_core_that_does_not_exist"))


def test_self_knowledge_front_matter_parses() -> None:
    skill = bundled_skills_dir() / "self-knowledge" / "SKILL.md"
    meta, body = parse_front_matter(skill.read_text(encoding="utf-8"))
    assert meta["name"] == "self-knowledge"
    assert meta["name"] == skill.parent.name, "a skill's name must match its directory"
    assert isinstance(meta["description"], str)
    assert len(meta["description"]) > 40, "the description is how the agent decides to load it"
    assert meta["allowed_tools"] == []
    assert set(meta) == {"name", "description", "allowed_tools"}
    assert body.strip().startswith("#"), "the body should open with a heading"


def test_every_bundled_skill_has_parseable_front_matter() -> None:
    skills = sorted(bundled_skills_dir().glob("*/SKILL.md"))
    assert skills, "no bundled skills found"
    for skill in skills:
        meta, _ = parse_front_matter(skill.read_text(encoding="utf-8"))
        assert meta.get("name") == skill.parent.name, f"{skill}: name must match its directory"
        assert meta.get("description"), f"{skill}: description is required"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name: x\n", "must start with"),
        ("---\nname: x\n", "not closed"),
        ("---\njust words\n---\n", "not 'key: value'"),
        ("---\nname: a\nname: b\n---\n", "appears twice"),
    ],
)
def test_the_front_matter_reader_rejects_malformed_files(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_front_matter(text)


def _cli_section(body: str) -> str:
    match = re.search(r"^## The CLI today\n(?P<text>.*?)(?=^## )", body, flags=re.M | re.S)
    assert match, "SKILL.md lost its '## The CLI today' section"
    return match.group("text")


def skill_cli_verbs(body: str) -> tuple[set[str], set[str]]:
    """(verbs the skill lists as available, verbs it says are not available)."""
    section = _cli_section(body)
    available = set(re.findall(r"^- `fermix (\w[\w-]*)", section, flags=re.M))
    missing = re.search(
        r"^Everything else(?P<text>.*?)\*\*not available", section, flags=re.M | re.S
    )
    assert missing, "the CLI section must end by naming the verbs that are not available"
    unavailable = {
        word.removeprefix("fermix ").split()[0]
        for word in re.findall(r"`([^`]+)`", missing["text"])
    }
    return available, unavailable


def test_the_skill_lists_exactly_the_cli_commands_that_exist() -> None:
    # The agent must never promise a command that is not there, nor hide one that is: a new
    # built-in command fails this test until SKILL.md mentions it.
    from fermix_core.cli.commands import COMMANDS

    body = (bundled_skills_dir() / "self-knowledge" / "SKILL.md").read_text(encoding="utf-8")
    available, unavailable = skill_cli_verbs(body)
    real = {entry.name for entry in COMMANDS}
    assert real - available == set(), (
        f"skills/self-knowledge/SKILL.md: add `fermix {sorted(real - available)[0]}` to "
        "'## The CLI today' (and remove it from the not-available list)"
    )
    assert available - real == set(), (
        f"skills/self-knowledge/SKILL.md lists `fermix {sorted(available - real)[0]}` as available "
        "but it is not a built-in command; move it to the not-available list"
    )
    assert unavailable & real == set(), (
        f"skills/self-knowledge/SKILL.md says {sorted(unavailable & real)} are not available, "
        "but they are built-in commands now; describe them under '## The CLI today'"
    )


def test_the_cli_verb_reader_sees_drift() -> None:
    body = (
        "## The CLI today\n\n- `fermix setup` — x\n- `fermix teleport` — y\n\n"
        "Everything else — `fermix run`, `start`/`stop`, `auth login` — is **not available**.\n\n"
        "## Next\n"
    )
    assert skill_cli_verbs(body) == ({"setup", "teleport"}, {"run", "start", "stop", "auth"})


def test_a_built_wheel_ships_and_finds_the_skills(tmp_path: Path) -> None:
    # The real wheel layout: build fermix-core (offline, from the build cache), unpack it and
    # ask the installed copy where its skills are.
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH; the wheel build is covered by the nox 'wheels' session")
    built = subprocess.run(
        [uv, "build", "--wheel", "--offline", "--out-dir", str(tmp_path / "dist"), str(PACKAGE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=110,
    )
    if built.returncode != 0 and "offline" in (built.stderr + built.stdout).lower():
        pytest.skip(f"the build backend is not cached for an offline build:\n{built.stderr}")
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("fermix_core-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        assert "fermix_core/_bundled_skills/self-knowledge/SKILL.md" in archive.namelist()
        archive.extractall(site)
    probe = "from fermix_core.skills_bundle import bundled_skills_dir; print(bundled_skills_dir())"
    found = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    located = Path(found.stdout.strip())
    assert located == (site / "fermix_core" / INSTALLED_DIRNAME).resolve()
    meta, _ = parse_front_matter((located / "self-knowledge" / "SKILL.md").read_text("utf-8"))
    assert meta["name"] == "self-knowledge"

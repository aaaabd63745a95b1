"""The registry name ``fermix`` belongs to an unrelated project: every install line names
``fermix-agent``, and the meta distribution brings the built-in tools with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: An install line that names the bare ``fermix`` distribution (with or without extras).
BARE = re.compile(
    r"(pip install|uv (?:tool )?(?:install|add)|pipx install)\s+(?:--\S+\s+)*"
    r"""["']?fermix(?:\[|["'\s]|$)""",
    re.M,
)


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "noxfile.py", ROOT / "pyproject.toml"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "skills").rglob("*.md"))
    for package in (ROOT / "packages").iterdir():
        files += sorted((package / "src").rglob("*.py"))
        files += sorted((package / "src").rglob("*.md"))
        files.append(package / "README.md")
    return [f for f in files if f.is_file()]


def test_no_doc_or_message_installs_the_bare_fermix_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in scanned_files()
        for match in BARE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_pattern_catches_the_lines_that_used_to_ship() -> None:
    for line in (
        'pip install "fermix[telegram,anthropic]"',
        "uv tool install fermix --with-editable ./fermix-weather",
        "pip install fermix",
    ):
        assert BARE.search(line), line
    for line in ('pip install "fermix-agent[all]"', "pip install fermix-tools"):
        assert not BARE.search(line), line


def test_meta_distribution_is_fermix_agent_and_brings_the_tools() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "fermix-agent"
    deps = [re.split(r"[<>=\[ ]", d, maxsplit=1)[0] for d in project["dependencies"]]
    assert {"fermix-core", "fermix-tools"} <= set(deps)
    # `uv tool install` only links a distribution's own executables.
    assert project["scripts"]["fermix"] == "fermix_core.cli.entry:console"


def test_config_hint_names_the_meta_distribution() -> None:
    from fermix_core import install_hint

    assert install_hint("providers") == 'pip install "fermix-agent[providers]"'

"""Seeding prompt files, the seed record and drift, and the IDENTITY.md name reconciler."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from fermix_core.home import FermixHome
from fermix_core.prompt import (
    SEED_RECORD,
    SeedRecordError,
    prompt_files,
    reconcile_agent_name,
    seed_bootstrap,
    shipped_template,
    template_drift,
)

ALL_FILES = sorted(prompt_files())


@pytest.fixture
def home(tmp_path: Path) -> FermixHome:
    return FermixHome(tmp_path / "fermix")


def test_templates_ship_with_the_package_and_identity_has_a_name_line() -> None:
    for name in ("IDENTITY.md", "FERMIX.md", "SOUL.md", "REALTIME.md", "USER.md", "MEMORY.md"):
        assert shipped_template(name).strip(), name
    assert "**Name:** {name}" in shipped_template("IDENTITY.md")
    for name in ("FERMIX.md", "SOUL.md", "REALTIME.md"):
        assert "{" not in shipped_template(name), f"{name} must stay variable-free"
    with pytest.raises(ValueError, match="no shipped prompt template"):
        shipped_template("../pyproject.toml")


def test_seeding_writes_every_file_privately_and_records_templates(home: FermixHome) -> None:
    report = seed_bootstrap(
        home, agent_name="Ada", user_name="Sam", timezone="Europe/Oslo", communication_style=None
    )
    assert sorted(report.seeded) == ALL_FILES and report.existing == ()
    assert report.record == home.path / SEED_RECORD
    for relative in ALL_FILES:
        path = home.path / relative
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    identity = (home.bootstrap / "main" / "IDENTITY.md").read_text()
    assert "**Name:** Ada" in identity and "{name}" not in identity
    user = (home.memory_dir / "main" / "USER.md").read_text()
    assert "**Name:** Sam" in user and "Europe/Oslo" in user and "not set yet" in user
    record = json.loads((home.path / SEED_RECORD).read_text())
    soul_sha = hashlib.sha256(shipped_template("SOUL.md").encode()).hexdigest()
    assert record["files"]["bootstrap/main/SOUL.md"]["sha256"] == soul_sha
    assert set(record["files"]) == set(ALL_FILES)
    assert template_drift(home) == []


def test_seeding_never_overwrites_and_records_only_what_it_wrote(home: FermixHome) -> None:
    soul = home.bootstrap / "main" / "SOUL.md"
    soul.parent.mkdir(parents=True)
    soul.write_bytes(b"my own soul\r\n")
    empty = home.bootstrap / "main" / "FERMIX.md"
    empty.write_bytes(b"")
    report = seed_bootstrap(home, agent_name="Ada")
    assert set(report.existing) == {"bootstrap/main/SOUL.md", "bootstrap/main/FERMIX.md"}
    assert soul.read_bytes() == b"my own soul\r\n" and empty.read_bytes() == b""
    record = json.loads((home.path / SEED_RECORD).read_text())["files"]
    assert "bootstrap/main/SOUL.md" not in record and "bootstrap/main/REALTIME.md" in record

    identity = home.bootstrap / "main" / "IDENTITY.md"
    identity.write_text("edited by hand")
    again = seed_bootstrap(home, agent_name="Someone Else")
    assert again.seeded == () and again.record is None
    assert identity.read_text() == "edited by hand"


def test_no_seed_record_means_none(home: FermixHome) -> None:
    assert template_drift(home) is None
    for relative in ALL_FILES:  # an install seeded before records existed
        path = home.path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("old copy")
    assert seed_bootstrap(home, agent_name="x").record is None
    assert template_drift(home) is None


def test_drift_names_variable_free_templates_that_moved_on(home: FermixHome) -> None:
    seed_bootstrap(home, agent_name="Ada")
    path = home.path / SEED_RECORD
    record = json.loads(path.read_text())
    # Pretend this install was seeded by an older build whose templates differed.
    for relative in ("bootstrap/main/SOUL.md", "bootstrap/main/IDENTITY.md", "memory/main/USER.md"):
        record["files"][relative]["sha256"] = "0" * 64
    path.write_text(json.dumps(record))
    assert template_drift(home) == ["bootstrap/main/SOUL.md"], "IDENTITY/USER are excluded"
    # Editing a seeded file is the operator's right and is not drift.
    (home.bootstrap / "main" / "FERMIX.md").write_text("mine now")
    assert template_drift(home) == ["bootstrap/main/SOUL.md"]


@pytest.mark.parametrize("content", ["{not json", '{"files": []}', '{"files": {"a": 1}}', "[]"])
def test_unreadable_seed_record_is_a_typed_error(home: FermixHome, content: str) -> None:
    path = home.path / SEED_RECORD
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(SeedRecordError, match="delete it"):
        template_drift(home)
    # Seeding still works and replaces the broken record with a good one.
    seed_bootstrap(home, agent_name="Ada")
    assert template_drift(home) == []


def test_bad_agent_ids_cannot_escape_the_home(home: FermixHome) -> None:
    with pytest.raises(ValueError, match="agent id"):
        seed_bootstrap(home, agent_name="x", agent_id="../../etc")


# --------------------------------------------------------------------------- reconcile


def write_identity(home: FermixHome, data: bytes, mode: int = 0o640) -> Path:
    path = home.bootstrap / "main" / "IDENTITY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def test_reconcile_rewrites_only_the_name_value(home: FermixHome) -> None:
    original = (
        b"# Identity\r\n\r\n- **Name:**   Old Name  \r\nMy notes: **Name:** stays here too\r\n"
        b"\xe2\x9c\xa8 sparkle\r\n"
    )
    path = write_identity(home, original)
    assert reconcile_agent_name(home, "  Nova\n  Star ") is True
    assert path.read_bytes() == original.replace(b"   Old Name  ", b" Nova Star", 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640, "the file keeps its mode"
    mtime = path.stat().st_mtime_ns
    assert reconcile_agent_name(home, "Nova Star") is False, "already right: no write"
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("name", [None, "", "   "])
def test_blank_name_leaves_identity_untouched(home: FermixHome, name: str | None) -> None:
    path = write_identity(home, b"**Name:** Keep\n")
    assert reconcile_agent_name(home, name) is False
    assert path.read_bytes() == b"**Name:** Keep\n"


@pytest.mark.parametrize(
    "data",
    [b"# Identity\nNo name line here\n", b"Name: plain\n", b"\xff\xfe not utf-8 **Name:** x"],
    ids=["no-line", "not-bold", "not-utf8"],
)
def test_files_without_a_name_line_are_left_alone(home: FermixHome, data: bytes) -> None:
    path = write_identity(home, data)
    assert reconcile_agent_name(home, "Nova") is False
    assert path.read_bytes() == data


def test_missing_identity_is_not_created(home: FermixHome) -> None:
    assert reconcile_agent_name(home, "Nova") is False
    assert not (home.bootstrap / "main" / "IDENTITY.md").exists()


def test_reconcile_writes_through_a_symlink(home: FermixHome, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "IDENTITY.md"
    real.parent.mkdir()
    real.write_text("**Name:** Old\nrest\n")
    link = home.bootstrap / "main" / "IDENTITY.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert reconcile_agent_name(home, "New") is True
    assert link.is_symlink() and real.read_text() == "**Name:** New\nrest\n"


def test_seeded_identity_then_renamed(home: FermixHome) -> None:
    seed_bootstrap(home, agent_name="fermix")
    path = home.bootstrap / "main" / "IDENTITY.md"
    before = path.read_text()
    assert reconcile_agent_name(home, "Jarvis") is True
    assert path.read_text() == before.replace("**Name:** fermix", "**Name:** Jarvis")

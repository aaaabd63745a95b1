"""The doctor's "bootstrap templates" row, against real seeded files and real seed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fermix_core.boot import assemble
from fermix_core.doctor import CheckResult, DoctorContext, Status, run_checks
from fermix_core.doctor_checks import check_bootstrap
from fermix_core.home import FermixHome
from fermix_core.prompt import SEED_RECORD, seed_bootstrap, shipped_template


@pytest.fixture
def home(tmp_path: Path) -> FermixHome:
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    return home


def row(home: FermixHome) -> CheckResult:
    """The row as ``fermix doctor`` produces it: through the registry and ``run_checks``."""
    assembly = assemble(
        home,
        environ={"FERMIX_HOME": str(home.path)},
        entry_points=False,  # core's built-in plugin registers the row
    )
    assert assembly.registry.errors == []
    results = [r for r in run_checks(DoctorContext(assembly)) if r.check == "bootstrap"]
    assert len(results) == 1
    return results[0]


def age_record(home: FermixHome, relative: str) -> None:
    """Pretend *relative* was seeded from an older revision of its template."""
    path = home.path / SEED_RECORD
    record = json.loads(path.read_text())
    record["files"][relative]["sha256"] = "0" * 64
    path.write_text(json.dumps(record))


def test_a_home_that_was_never_set_up_is_told_to_run_setup(home) -> None:
    result = row(home)
    assert result.label == "bootstrap templates"
    assert result.status is Status.WARN
    assert result.detail.startswith("no seed record (setup never ran)")
    assert result.fix == "run `fermix setup` to seed them"


def test_a_home_that_does_not_exist_yet_does_not_crash(tmp_path: Path) -> None:
    ghost = FermixHome(tmp_path / "nowhere")
    context = DoctorContext(assemble(ghost, environ={}, entry_points=False))
    [result] = check_bootstrap(context)
    assert result.status is Status.WARN
    assert not ghost.path.exists()  # doctor reads, never creates


def test_freshly_seeded_templates_are_current(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    result = row(home)
    assert result.status is Status.OK
    assert "current" in result.detail
    assert result.fix is None


def test_hand_edits_are_not_drift(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    (home.path / "bootstrap/main/SOUL.md").write_text("entirely my own words\n")
    (home.path / "bootstrap/main/FERMIX.md").write_text("")
    assert row(home).status is Status.OK


def test_a_moved_on_template_is_named_with_a_diff_to_run(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    age_record(home, "bootstrap/main/SOUL.md")
    age_record(home, "bootstrap/main/REALTIME.md")
    result = row(home)
    assert result.status is Status.WARN
    first, *diffs = result.detail.splitlines()
    assert first == (
        "shipped templates changed since seeding: bootstrap/main/SOUL.md, "
        "bootstrap/main/REALTIME.md"
    )
    assert len(diffs) == 2
    command, mine, shipped = diffs[0].split(" ")
    assert command == "diff"
    assert Path(mine) == home.path / "bootstrap/main/SOUL.md"
    # The path handed to the user is this build's real template, ready to diff against.
    assert Path(shipped).read_text("utf-8") == shipped_template("SOUL.md")
    assert "never overwrites" in (result.fix or "")


def test_identity_and_user_files_are_never_reported_as_drift(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis", user_name="Ada")
    age_record(home, "bootstrap/main/IDENTITY.md")
    age_record(home, "memory/main/USER.md")
    assert row(home).status is Status.OK


def test_a_drifted_file_that_was_deleted_points_at_setup(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    age_record(home, "bootstrap/main/FERMIX.md")
    (home.path / "bootstrap/main/FERMIX.md").unlink()
    result = row(home)
    assert result.status is Status.WARN
    assert "bootstrap/main/FERMIX.md is gone; `fermix setup` seeds the current template" in (
        result.detail
    )
    assert "diff " not in result.detail


def test_files_seeded_before_revision_tracking_report_no_seed_record(home) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    (home.path / SEED_RECORD).unlink()
    result = row(home)
    assert result.status is Status.WARN
    assert result.detail.startswith(
        "no seed record (seeded before revision tracking, or setup never ran)"
    )
    assert result.fix is not None and result.fix.startswith("optional:")
    assert str(home.path / "bootstrap/main/SOUL.md") in result.fix


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_text("{not json"),
        lambda p: p.write_text(json.dumps({"version": 1, "files": {"x": "not an object"}})),
        lambda p: p.write_text(json.dumps(["a", "list"])),
        lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
        lambda p: (p.unlink(), p.mkdir()),
    ],
    ids=["truncated", "wrong-shape", "not-an-object", "not-utf8", "a-directory"],
)
def test_an_unreadable_seed_record_is_a_warning_with_the_fix(home, damage) -> None:
    seed_bootstrap(home, agent_name="Jarvis")
    record = home.path / SEED_RECORD
    damage(record)
    result = row(home)
    assert result.status is Status.WARN
    assert str(record) in result.detail
    assert result.fix == f"delete {record}; drift cannot be tracked without it"

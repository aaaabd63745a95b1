"""The doctor's streaming-mode mismatch row over the real channel specs and config.toml."""

from __future__ import annotations

import importlib

import pytest
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status, run_checks
from fermix_core.home import FermixHome

NAMES = ["telegram", "whatsapp", "slack", "discord", "signal", "acp"]


@pytest.fixture
def rows(tmp_path):
    home = FermixHome(tmp_path / "fermix")
    home.ensure()
    plugins = [
        (f"channels.{name}", importlib.import_module(f"fermix_channels.{name}.plugin"))
        for name in NAMES
    ]

    def run(toml: str):
        home.config_file.write_text(toml)
        assembly = assemble(
            home, environ={"FERMIX_HOME": str(home.path)}, plugins=plugins, entry_points=False
        )
        assert assembly.registry.errors == []
        context = DoctorContext(assembly, config=assembly.load_config())
        return [r for r in run_checks(context) if r.label.endswith(" streaming")]

    return run


def test_draft_on_a_channel_that_cannot_draft_is_flagged_with_the_fix(rows) -> None:
    [row] = rows(
        """
[fermix_channels.slack]
enabled = true
owner_user_id = "U1"
streaming = "draft"
"""
    )
    assert row.status is Status.WARN
    assert row.label == "channel slack streaming"
    assert "do not stream at all" in row.detail
    assert 'streaming = "block"' in (row.fix or "")


def test_draft_on_telegram_and_derived_modes_raise_nothing(rows) -> None:
    assert (
        rows(
            """
[fermix_channels.telegram]
owner_user_id = "1"
streaming = "draft"

[fermix_channels.slack]
enabled = true
owner_user_id = "U1"
"""
        )
        == []
    )

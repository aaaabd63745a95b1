"""``fermix doctor``'s telegram bot token row, from a real config file through assemble()."""

from __future__ import annotations

from typing import Any

import fermix_channels.telegram.plugin as plugin
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status, run_checks
from fermix_core.home import FermixHome

TOKEN = "123456789:AAH-doctor-test-token-value-0000000000"


def rows(home: FermixHome, config: str, environ: dict[str, str] | None = None) -> list[Any]:
    home.config_file.write_text(config)
    home.config_file.chmod(0o600)
    env = {"FERMIX_HOME": str(home.path), **(environ or {})}
    assembly = assemble(
        home, environ=env, plugins=[("channels.telegram", plugin)], entry_points=False
    )
    assert assembly.registry.errors == []
    context = DoctorContext(assembly, assembly.load_config())
    return [r for r in run_checks(context) if r.check == "telegram_token"]


BASE = '[fermix_channels.telegram]\nenabled = true\nowner_user_id = "1"\n'


def test_disabled_is_skipped(fermix_home) -> None:
    (row,) = rows(fermix_home, "[fermix_channels.telegram]\nenabled = false\n")
    assert row.status == Status.SKIP


def test_a_token_in_config_is_ok_and_never_shown(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE + f'bot_token = "{TOKEN}"\n')
    assert row.status == Status.OK
    assert TOKEN not in row.detail


def test_the_environment_variable_does_not_count(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE, {"TELEGRAM_BOT_TOKEN": TOKEN})
    assert row.status == Status.FAIL
    assert "never read" in row.detail
    assert "fermix setup" in row.fix


def test_a_malformed_token_fails(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE + 'bot_token = "xoxb-not-telegram"\n')
    assert row.status == Status.FAIL and "BotFather" in row.detail

"""``fermix doctor``'s discord bot token row, from a real config file through assemble()."""

from __future__ import annotations

from typing import Any

import fermix_channels.discord.plugin as plugin
from fermix_channels.discord.doctor import token_bot_id
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status, run_checks
from fermix_core.home import FermixHome

from .conftest import fd

BASE = f'[fermix_channels.discord]\nenabled = true\nowner_user_id = "{fd.OWNER_ID}"\n'


def rows(home: FermixHome, config: str, environ: dict[str, str] | None = None) -> list[Any]:
    home.config_file.write_text(config)
    home.config_file.chmod(0o600)
    env = {"FERMIX_HOME": str(home.path), **(environ or {})}
    assembly = assemble(
        home, environ=env, plugins=[("channels.discord", plugin)], entry_points=False
    )
    assert assembly.registry.errors == []
    context = DoctorContext(assembly, assembly.load_config())
    return [r for r in run_checks(context) if r.check == "discord_token"]


def test_the_token_names_its_bot() -> None:
    assert token_bot_id(fd.TOKEN) == fd.BOT_ID
    assert token_bot_id("not.a.token") is None
    assert token_bot_id("!!!!!!!!!!!!!!!!!!!!.abcdef.ghijklmnopqrstuvwxyz0123") is None


def test_disabled_is_skipped(fermix_home) -> None:
    (row,) = rows(fermix_home, "[fermix_channels.discord]\nenabled = false\n")
    assert row.status == Status.SKIP


def test_a_token_in_config_or_the_environment_is_ok_and_never_shown(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE + f'bot_token = "{fd.TOKEN}"\n')
    assert row.status == Status.OK and fd.BOT_ID in row.detail
    assert fd.TOKEN not in row.detail
    (row,) = rows(fermix_home, BASE, {"DISCORD_BOT_TOKEN": fd.TOKEN})
    assert row.status == Status.OK


def test_missing_or_malformed_tokens_fail_with_the_fix(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE)
    assert row.status == Status.FAIL and "DISCORD_BOT_TOKEN" in row.fix
    (row,) = rows(fermix_home, BASE + 'bot_token = "0123456789abcdef0123456789abcdef"\n')
    assert row.status == Status.FAIL and "client secret" in row.detail


def test_a_bot_user_id_of_another_bot_warns(fermix_home) -> None:
    config = BASE + f'bot_token = "{fd.TOKEN}"\nbot_user_id = "999999999999"\n'
    (row,) = rows(fermix_home, config)
    assert row.status == Status.WARN and fd.BOT_ID in row.fix

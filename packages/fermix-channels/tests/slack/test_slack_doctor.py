"""``fermix doctor``'s slack credentials row, from a real config file through assemble()."""

from __future__ import annotations

from typing import Any

import fermix_channels.slack.plugin as plugin
import pytest
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status, run_checks
from fermix_core.home import FermixHome


def rows(home: FermixHome, config: str, environ: dict[str, str] | None = None) -> list[Any]:
    home.config_file.write_text(config)
    home.config_file.chmod(0o600)
    env = {"FERMIX_HOME": str(home.path), **(environ or {})}
    assembly = assemble(home, environ=env, plugins=[("channels.slack", plugin)], entry_points=False)
    assert assembly.registry.errors == []
    context = DoctorContext(assembly, assembly.load_config())
    return [r for r in run_checks(context) if r.check == "slack_credentials"]


BASE = '[fermix_channels.slack]\nenabled = true\nowner_user_id = "U1"\n'


def test_a_disabled_channel_is_skipped(fermix_home) -> None:
    (row,) = rows(fermix_home, "[fermix_channels.slack]\n")
    assert row.status == Status.SKIP


def test_events_mode_with_both_secrets_is_ok_and_shows_no_value(fermix_home) -> None:
    (row,) = rows(
        fermix_home,
        BASE + 'bot_token = "xoxb-visible-never"\nsigning_secret = "s3cret-value"\n',
    )
    assert row.status == Status.OK
    assert "xoxb-visible-never" not in row.detail and "s3cret-value" not in row.detail


def test_a_missing_signing_secret_fails_with_the_key_and_env(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE + 'bot_token = "xoxb-1"\n')
    assert row.status == Status.FAIL
    assert "signing_secret" in row.detail
    assert "SLACK_SIGNING_SECRET" in row.fix


def test_socket_mode_wants_an_xapp_token_and_accepts_the_env(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE + 'mode = "socket"\nbot_token = "xoxb-1"\n')
    assert row.status == Status.FAIL and "app_token" in row.detail
    (row,) = rows(
        fermix_home,
        BASE + 'mode = "socket"\nbot_token = "xoxb-1"\n',
        {"SLACK_APP_TOKEN": "xoxb-wrong-kind"},
    )
    assert row.status == Status.FAIL and "should start with xapp-" in row.detail
    (row,) = rows(
        fermix_home,
        BASE + 'mode = "socket"\nbot_token = "xoxb-1"\n',
        {"SLACK_APP_TOKEN": "xapp-1-A-1-abc"},
    )
    assert row.status == Status.OK


@pytest.mark.parametrize("token", ["xoxp-user-token", "not-a-token"])
def test_a_bot_token_of_the_wrong_kind_fails(fermix_home, token) -> None:
    (row,) = rows(fermix_home, BASE + f'bot_token = "{token}"\nsigning_secret = "s"\n')
    assert row.status == Status.FAIL
    assert "xoxb-" in row.detail and token not in row.detail

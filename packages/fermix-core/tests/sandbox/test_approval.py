"""The agent must not widen its own sandbox by editing config.toml behind Fermix's back."""

from __future__ import annotations

import json
import logging

import pytest
from fermix_core.api import Fermix
from fermix_core.cli import sandbox_cmd
from fermix_core.config.writer import set_value
from fermix_core.plugins import PluginHost
from fermix_core.sandbox import approval

from .test_chat import chat, token_in  # noqa: F401 - the chat fixture
from .test_cli import cli  # noqa: F401 - the CLI fixture

pytestmark = pytest.mark.anyio

WIDER = '\n[sandbox]\nmode = "open"\ncommand_profile = "extended"\n'


def _append(layout, text: str) -> None:
    """What a shell command did: `printf ... >> ~/.fermix/config.toml`."""
    with layout.fermix.config_file.open("a") as handle:
        handle.write(text)


async def _booted_policy(layout):
    environ = {"HOME": str(layout.home), "PATH": "/usr/bin:/bin"}
    async with Fermix.open(layout.fermix.path, environ=environ, entry_points=False) as fermix:
        return fermix.service.runner.services["sandbox"]


async def test_an_appended_sandbox_section_is_not_applied_at_boot(layout, caplog) -> None:
    first = await _booted_policy(layout)  # records the approved [sandbox] (none: defaults)
    assert first.mode == "standard" and first.command_profile == "assistant"
    _append(layout, WIDER)
    with caplog.at_level(logging.WARNING, logger="fermix.service"):
        policy = await _booted_policy(layout)
    assert policy.mode == "standard" and policy.command_profile == "assistant"
    assert "changed outside Fermix" in caplog.text
    assert 'sandbox.mode: (unset) -> "open"' in caplog.text
    assert "fermix sandbox approve" in caplog.text


async def test_an_edit_of_allowed_roots_and_env_is_held_too(layout) -> None:
    layout.fermix.config_file.write_text('[sandbox]\nmode = "strict"\n')
    assert approval.check(layout.fermix).status == "first"
    layout.fermix.config_file.write_text(
        f'[sandbox]\nmode = "strict"\nallowed_roots = ["{layout.outside}"]\n'
        '[sandbox.env]\nallow = ["*"]\n'
    )
    state = approval.check(layout.fermix)
    assert state.pending
    assert any("allowed_roots" in line for line in state.changes())
    assert any("env.allow" in line for line in state.changes())
    policy = await _booted_policy(layout)
    assert policy.mode == "strict" and policy.allowed_roots == () and policy.env_allow == ()


def test_the_config_writer_records_the_owners_change(layout) -> None:
    registry = PluginHost().collect()
    approval.check(layout.fermix)
    set_value(layout.fermix, "sandbox.mode", "strict", registry, environ={})
    assert approval.check(layout.fermix).status == "approved"
    # An out-of-band edit stays pending even after an unrelated owner change to [sandbox].
    _append(layout, 'command_profile = "extended"\n')
    set_value(layout.fermix, "sandbox.network", "false", registry, environ={})
    state = approval.check(layout.fermix)
    assert state.pending
    assert state.changes() == ['sandbox.command_profile: (unset) -> "extended"']


def test_cli_show_and_approve(cli, layout) -> None:  # noqa: F811
    approval.check(layout.fermix)
    _append(layout, WIDER)
    shown = cli(sandbox_cmd.sandbox_app, "show", "--json")
    info = json.loads(shown.stdout)
    assert info["mode"] == "standard"
    assert 'sandbox.mode: (unset) -> "open"' in info["unapproved_changes"]
    text = cli(sandbox_cmd.sandbox_app, "show")
    assert "NOT APPLIED" in text.stdout
    refused = cli(sandbox_cmd.sandbox_app, "approve")  # no input: the prompt says no
    assert refused.exit_code == 1 and approval.check(layout.fermix).pending
    done = cli(sandbox_cmd.sandbox_app, "approve", "--yes")
    assert done.exit_code == 0, done.output
    assert not approval.check(layout.fermix).pending
    assert json.loads(cli(sandbox_cmd.sandbox_app, "show", "--json").stdout)["mode"] == "open"


async def test_chat_approve_needs_confirm_and_swaps_the_policy(chat) -> None:  # noqa: F811
    approval.check(chat.layout.fermix)
    _append(chat.layout, 'allowed_roots = ["/srv/elsewhere"]\n')
    shown = await chat.say("/sandbox show")
    assert "NOT APPLIED" in shown
    asked = await chat.say("/sandbox approve")
    assert "sandbox.allowed_roots" in asked
    assert approval.check(chat.layout.fermix).pending
    guest = await chat.say(f"/confirm {token_in(asked)}", sender="guest")
    assert not guest.startswith("Done")
    done = await chat.say(f"/confirm {token_in(asked)}")
    assert done.startswith("Done: the [sandbox] in config.toml is approved")
    assert not approval.check(chat.layout.fermix).pending

"""Registers the ``slack`` channel (separate from the Slack plugin that reads workspaces).

The adapter (``fermix_channels.slack.adapter``) and its SDK are imported only when the
channel is configured and started.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, DoctorCheckSpec, SetupStepSpec

SPEC = ChannelSpec(
    name="slack",
    label="Slack",
    factory="fermix_channels.slack.adapter:SlackChannel",
    config_model="fermix_channels.slack.config:SlackConfig",
    env={
        "SLACK_BOT_TOKEN": "bot_token",
        "SLACK_SIGNING_SECRET": "signing_secret",
        "SLACK_APP_TOKEN": "app_token",
        "SLACK_ALLOWED_USER_IDS": "allowed_user_ids",
    },
    remote=True,
    enabled_by_default=False,
    supports_draft=False,
    supports_reactions=True,
)


@hookimpl
def fermix_channels() -> Iterable[ChannelSpec]:
    return (SPEC,)


DOCTOR = DoctorCheckSpec(
    name="slack_credentials",
    label="slack credentials",
    check="fermix_channels.slack.doctor:check_slack",
    order=72,
)


@hookimpl
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    return (DOCTOR,)


@hookimpl
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    from fermix_channels.slack.setup_step import SLACK_STEP

    return (SLACK_STEP,)

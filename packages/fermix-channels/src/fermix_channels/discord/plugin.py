"""Registers the ``discord`` channel (separate from the Discord plugin that reads servers)."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, DoctorCheckSpec, SetupStepSpec

SPEC = ChannelSpec(
    name="discord",
    label="Discord",
    factory="fermix_channels.discord.adapter:DiscordChannel",
    config_model="fermix_channels.discord.config:DiscordConfig",
    env={
        "DISCORD_BOT_TOKEN": "bot_token",
        "DISCORD_BOT_USER_ID": "bot_user_id",
        "DISCORD_ALLOWED_USER_IDS": "allowed_user_ids",
    },
    remote=True,
    enabled_by_default=False,
    supports_draft=True,
    supports_reactions=True,
)


@hookimpl
def fermix_channels() -> Iterable[ChannelSpec]:
    return (SPEC,)


@hookimpl
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    from fermix_channels.setup import DISCORD_SETUP

    return (DISCORD_SETUP.spec("fermix_channels.setup:discord_step"),)


DOCTOR = DoctorCheckSpec(
    name="discord_token",
    label="discord bot token",
    check="fermix_channels.discord.doctor:check_discord",
    order=73,
)


@hookimpl
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    return (DOCTOR,)

"""Registers the ``telegram`` channel.

The env map deliberately leaves out ``TELEGRAM_BOT_TOKEN``: the bot token comes only from
setup or config, so a stray shell variable cannot point two installs at the same bot.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, DoctorCheckSpec, SetupStepSpec

SPEC = ChannelSpec(
    name="telegram",
    label="Telegram",
    factory="fermix_channels.telegram.adapter:TelegramChannel",
    config_model="fermix_channels.telegram.config:TelegramConfig",
    env={"TELEGRAM_ALLOWED_USER_IDS": "allowed_user_ids"},
    remote=True,
    enabled_by_default=True,
    supports_draft=True,
    supports_reactions=True,
)


@hookimpl
def fermix_channels() -> Iterable[ChannelSpec]:
    return (SPEC,)


@hookimpl
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    from fermix_channels.setup import TELEGRAM_SETUP

    return (TELEGRAM_SETUP.spec("fermix_channels.setup:telegram_step"),)


DOCTOR = DoctorCheckSpec(
    name="telegram_token",
    label="telegram bot token",
    check="fermix_channels.telegram.doctor:check_telegram",
    order=71,
)


@hookimpl
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    return (DOCTOR,)

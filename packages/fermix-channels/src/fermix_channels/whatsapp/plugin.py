"""Registers the ``whatsapp`` channel."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, SetupStepSpec

SPEC = ChannelSpec(
    name="whatsapp",
    label="WhatsApp",
    factory="fermix_channels.whatsapp.adapter:WhatsAppChannel",
    config_model="fermix_channels.whatsapp.config:WhatsAppConfig",
    env={
        "WHATSAPP_ACCESS_TOKEN": "access_token",
        "WHATSAPP_PHONE_NUMBER_ID": "phone_number_id",
        "WHATSAPP_VERIFY_TOKEN": "verify_token",
        "WHATSAPP_APP_SECRET": "app_secret",
        "WHATSAPP_ALLOWED_SENDER_IDS": "allowed_sender_ids",
    },
    remote=True,
    enabled_by_default=False,
    supports_draft=False,
    supports_reactions=True,
)


@hookimpl
def fermix_channels() -> Iterable[ChannelSpec]:
    return (SPEC,)


@hookimpl
def fermix_setup_steps() -> Iterable[SetupStepSpec]:
    from fermix_channels.setup import WHATSAPP_SETUP

    return (WHATSAPP_SETUP.spec("fermix_channels.setup:whatsapp_step"),)

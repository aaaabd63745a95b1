"""Registers the ``signal`` channel."""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, DoctorCheckSpec, SetupStepSpec

SPEC = ChannelSpec(
    name="signal",
    label="Signal",
    factory="fermix_channels.signal.adapter:SignalChannel",
    config_model="fermix_channels.signal.config:SignalConfig",
    env={
        "SIGNAL_ACCOUNT": "account",
        "SIGNAL_CLI_PATH": "cli_path",
        "SIGNAL_ALLOWED_SENDER_IDS": "allowed_sender_ids",
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
    from fermix_channels.setup import SIGNAL_SETUP

    return (SIGNAL_SETUP.spec("fermix_channels.setup:signal_step"),)


DOCTOR = DoctorCheckSpec(
    name="signal_cli",
    label="signal-cli",
    check="fermix_channels.signal.doctor:check_signal",
    order=74,
)


@hookimpl
def fermix_doctor_checks() -> Iterable[DoctorCheckSpec]:
    return (DOCTOR,)

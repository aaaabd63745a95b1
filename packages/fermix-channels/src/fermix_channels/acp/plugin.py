"""Registers the ``acp`` channel.

ACP is local: whoever reaches its socket is the operator, so it is not ``remote`` and maps
no allowlist from the environment.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec

SPEC = ChannelSpec(
    name="acp",
    label="ACP (Agent Client Protocol)",
    factory="fermix_channels.acp.adapter:AcpChannel",
    config_model="fermix_channels.acp.config:AcpConfig",
    env={},
    remote=False,
    enabled_by_default=True,
    supports_draft=False,
    supports_reactions=False,
)


@hookimpl
def fermix_channels() -> Iterable[ChannelSpec]:
    return (SPEC,)

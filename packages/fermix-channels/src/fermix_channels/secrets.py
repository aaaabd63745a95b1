"""Credentials from a ``[fermix_channels.<name>]`` section, resolved the way core does.

A section's secret slot holds plaintext, ``"@keyring"``, or an env/command reference; this
resolves any of them through core's :class:`~fermix_core.secrets.SecretResolver` (on a
worker thread: a keyring or a command may block) and says what to do when it cannot.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fermix_core.channel import ChannelError

__all__ = ["require_secret", "section_secret"]


async def section_secret(config: Any, channel: str, key: str, env: str) -> str | None:
    """The value of secret *key* of *channel*'s section, or ``None`` when it is unset."""
    value = getattr(config, key, None)
    if value is None or (isinstance(value, str) and value and value != "@keyring"):
        return value or None
    from fermix_core.config.secret import SecretField
    from fermix_core.secrets import SecretResolver

    field = SecretField(("fermix_channels", channel, key), env, value)
    resolved = await anyio.to_thread.run_sync(SecretResolver().resolve, field)
    if resolved.value is None:
        raise ChannelError(
            resolved.problem
            or f"[fermix_channels.{channel}] {key} could not be resolved; run `fermix doctor`"
        )
    return resolved.value


async def require_secret(config: Any, channel: str, key: str, env: str, why: str) -> str:
    """Like :func:`section_secret`, but an unset value is a :class:`ChannelError` with the fix."""
    value = await section_secret(config, channel, key, env)
    if not value:
        raise ChannelError(
            f"[fermix_channels.{channel}] {key} is not set ({why}); set it in config.toml, in "
            f"${env}, or run `fermix setup --reconfigure`"
        )
    return value

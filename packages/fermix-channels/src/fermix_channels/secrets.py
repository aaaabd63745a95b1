"""Credentials from a ``[fermix_channels.<name>]`` section, resolved the way core does.

A section's secret slot holds plaintext, ``"@keyring"``, or an env/command reference; this
resolves any of them through a :class:`~fermix_core.secrets.SecretResolver` (on a worker
thread: a keyring or a command may block) and says what to do when it cannot. Pass the
host's resolver (``resolver=host.secrets``, see :func:`resolver_of`) so plugins'
``fermix_resolve_secret`` hooks are consulted; without one a hook-less resolver is used.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fermix_core.channel import ChannelError

__all__ = ["require_secret", "resolve_field", "resolver_of", "section_secret"]


def resolver_of(host: Any) -> Any:
    """The secret resolver of a channel host (``host.secrets``), or ``None`` without one."""
    return getattr(host, "secrets", None) if host is not None else None


async def resolve_field(field: Any, resolver: Any = None) -> Any:
    """Resolve one secret slot on a worker thread with *resolver* (default: hook-less)."""
    if resolver is None:
        from fermix_core.secrets import SecretResolver

        resolver = SecretResolver()
    return await anyio.to_thread.run_sync(resolver.resolve, field)


async def section_secret(
    config: Any, channel: str, key: str, env: str, *, resolver: Any = None
) -> str | None:
    """The value of secret *key* of *channel*'s section, or ``None`` when it is unset."""
    value = getattr(config, key, None)
    if value is None or (isinstance(value, str) and value and value != "@keyring"):
        return value or None
    from fermix_core.config.secret import SecretField

    field = SecretField(("fermix_channels", channel, key), env, value)
    resolved = await resolve_field(field, resolver)
    if resolved.value is None:
        raise ChannelError(
            resolved.problem
            or f"[fermix_channels.{channel}] {key} could not be resolved; run `fermix doctor`"
        )
    return resolved.value


async def require_secret(
    config: Any, channel: str, key: str, env: str, why: str, *, resolver: Any = None
) -> str:
    """Like :func:`section_secret`, but an unset value is a :class:`ChannelError` with the fix."""
    value = await section_secret(config, channel, key, env, resolver=resolver)
    if not value:
        raise ChannelError(
            f"[fermix_channels.{channel}] {key} is not set ({why}); set it in config.toml, in "
            f"${env}, or run `fermix setup --reconfigure`"
        )
    return value

"""``fermix doctor``'s Discord row: the bot token, offline.

The channel runtime's own rows say whether the channel is enabled, authorizes anyone and
can be built, and — with a daemon running — its live health: a refused token (gateway close
4004) or a Message Content intent that is not enabled (close 4014, or READY's application
flags) shows there with the Developer Portal steps. This row checks what can be known
without Discord: a bot token is set (config, keyring or ``DISCORD_BOT_TOKEN``) and has a bot
token's shape — three dot-separated parts, the first the base64 of the bot's user id — and,
when ``bot_user_id`` is set, that it is the token's bot. No value is ever shown.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.doctor import CheckResult, DoctorContext

__all__ = ["check_discord", "token_bot_id"]

_LABEL = "discord bot token"
_SECTION = ("fermix_channels", "discord")
_SHAPE = re.compile(r"^[A-Za-z0-9_-]{16,40}\.[A-Za-z0-9_-]{4,10}\.[A-Za-z0-9_-]{20,}$")
_FIX = "run `fermix setup --reconfigure --step discord`; see docs/channels/discord.md"


def token_bot_id(token: str) -> str | None:
    """The bot's user id a bot token starts with (base64 of the id), or None."""
    if not _SHAPE.match(token):
        return None
    head = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return decoded if decoded.isdigit() else None


def check_discord(ctx: DoctorContext) -> list[CheckResult]:
    from fermix_core.config.slots import secret_fields
    from fermix_core.doctor import CheckResult, Status
    from fermix_core.secrets import SecretResolver

    config = ctx.config
    section: Any = config.section("fermix_channels.discord") if config is not None else None
    if section is None or not getattr(section, "enabled", False):
        return [CheckResult(_LABEL, Status.SKIP, "the discord channel is not enabled")]
    slot = next(
        (
            field
            for field in secret_fields(config, ctx.registry)
            if tuple(field.path) == (*_SECTION, "bot_token")
        ),
        None,
    )
    resolver = SecretResolver(environ=ctx.environ, host=ctx.host)
    resolved = resolver.resolve(slot) if slot is not None else None
    value = resolved.value if resolved is not None else None
    if not value:
        why = (resolved.problem if resolved is not None else None) or "not set"
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                f"bot_token: {why}",
                fix=f"set bot_token in [fermix_channels.discord] or $DISCORD_BOT_TOKEN, or {_FIX}",
            )
        ]
    bot_id = token_bot_id(value)
    if bot_id is None:
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                "bot_token does not look like a Discord bot token (three dot-separated parts "
                "from Developer Portal → Bot → Reset Token; not the application's client secret "
                "or public key)",
                fix=_FIX,
            )
        ]
    configured = getattr(section, "bot_user_id", None)
    if configured and configured != bot_id:
        return [
            CheckResult(
                _LABEL,
                Status.WARN,
                f"bot_user_id {configured} is not the bot this token belongs to ({bot_id}); "
                "mentions of the bot would not be recognised until the gateway names it",
                fix=f'set bot_user_id = "{bot_id}" in [fermix_channels.discord], or remove it',
            )
        ]
    return [
        CheckResult(
            _LABEL,
            Status.OK,
            f"bot token present (bot {bot_id}); the Message Content intent is checked when "
            "the gateway connects",
        )
    ]

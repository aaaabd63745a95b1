"""``fermix doctor``'s Telegram row: the bot token, offline.

The channel runtime's own rows say whether the channel is enabled, authorizes anyone and
can be built, and — with a daemon running — its live health (a webhook set on the bot, a
second poller on the token). This row checks what only the Telegram adapter knows: a bot
token is set (config or keyring; ``TELEGRAM_BOT_TOKEN`` is deliberately ignored, and the
row says so when that variable is set) and has the shape BotFather gives
(``<bot id>:<secret>``). No value is ever shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.doctor import CheckResult, DoctorContext

__all__ = ["check_telegram"]

_LABEL = "telegram bot token"
_SECTION = ("fermix_channels", "telegram")
_SHAPE = re.compile(r"^[0-9]{5,16}:[A-Za-z0-9_-]{30,}$")


def check_telegram(ctx: DoctorContext) -> list[CheckResult]:
    from fermix_core.config.slots import secret_fields
    from fermix_core.doctor import CheckResult, Status
    from fermix_core.secrets import SecretResolver

    config = ctx.config
    section: Any = config.section("fermix_channels.telegram") if config is not None else None
    if section is None or not getattr(section, "enabled", False):
        return [CheckResult(_LABEL, Status.SKIP, "the telegram channel is not enabled")]
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
    env_note = (
        " (TELEGRAM_BOT_TOKEN is set in the environment but is never read)"
        if (ctx.environ or {}).get("TELEGRAM_BOT_TOKEN")
        else ""
    )
    fix = "run `fermix setup --reconfigure --step telegram`; see docs/channels/telegram.md"
    if not value:
        why = (resolved.problem if resolved is not None else None) or "not set"
        return [CheckResult(_LABEL, Status.FAIL, f"bot_token: {why}{env_note}", fix=fix)]
    if not _SHAPE.match(value):
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                "bot_token does not look like a BotFather token (<bot id>:<secret>)" + env_note,
                fix=fix,
            )
        ]
    source = "keyring" if getattr(section, "bot_token", None) == "@keyring" else "config"
    return [CheckResult(_LABEL, Status.OK, f"bot token present ({source}){env_note}")]

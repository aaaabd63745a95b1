"""``fermix doctor``'s Slack credentials row: the tokens the chosen ``mode`` needs.

The channel runtime's own rows say whether the channel is enabled, authorizes anyone and
can be built; this row checks, offline, what only the Slack adapter knows: ``events`` mode
needs the bot token and the signing secret, ``socket`` mode the bot token and an app-level
``xapp-`` token, and a token of the wrong kind (a user token as the bot token, a bot token
as the app token) is caught before Slack refuses it. No value is ever shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.doctor import CheckResult, DoctorContext

__all__ = ["check_slack"]

_LABEL = "slack credentials"
_SECTION = ("fermix_channels", "slack")
#: key -> (expected prefix or None, what it is for)
_NEEDS = {
    "events": {"bot_token": ("xoxb-", "replies"), "signing_secret": (None, "webhook signatures")},
    "socket": {"bot_token": ("xoxb-", "replies"), "app_token": ("xapp-", "the Socket Mode link")},
}
_ENV = {
    "bot_token": "SLACK_BOT_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "app_token": "SLACK_APP_TOKEN",
}


def check_slack(ctx: DoctorContext) -> list[CheckResult]:
    from fermix_core.config.slots import secret_fields
    from fermix_core.doctor import CheckResult, Status
    from fermix_core.secrets import SecretResolver

    config = ctx.config
    section: Any = config.section("fermix_channels.slack") if config is not None else None
    if section is None or not getattr(section, "enabled", False):
        return [CheckResult(_LABEL, Status.SKIP, "the slack channel is not enabled")]
    mode = getattr(section, "mode", "events")
    slots = {
        field.path[-1]: field
        for field in secret_fields(config, ctx.registry)
        if tuple(field.path[:-1]) == _SECTION
    }
    resolver = SecretResolver(environ=ctx.environ, host=ctx.host)
    problems: list[str] = []
    for key, (prefix, purpose) in _NEEDS[mode].items():
        slot = slots.get(key)
        resolved = resolver.resolve(slot) if slot is not None else None
        value = resolved.value if resolved is not None else None
        if not value:
            why = (resolved.problem if resolved is not None else None) or "not set"
            problems.append(f"{key} ({purpose}): {why}")
        elif prefix and not value.startswith(prefix):
            problems.append(f"{key} ({purpose}) should start with {prefix}")
    if problems:
        keys = ", ".join(sorted({p.split(" ", 1)[0] for p in problems}))
        envs = ", ".join(f"${_ENV[k]}" for k in sorted({p.split(" ", 1)[0] for p in problems}))
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                f'mode = "{mode}": ' + "; ".join(problems),
                fix=(
                    f"set {keys} in [fermix_channels.slack] (or {envs}), or run "
                    "`fermix setup --reconfigure`; see docs/channels/slack.md"
                ),
            )
        ]
    detail = f'mode = "{mode}": ' + ", ".join(_NEEDS[mode]) + " present"
    return [CheckResult(_LABEL, Status.OK, detail)]

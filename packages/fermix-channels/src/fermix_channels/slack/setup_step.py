"""The ``slack`` step of ``fermix setup``: turn the Slack channel on and give it its tokens.

Interactive runs ask whether to set Slack up (default no; "reconfigure" when it is already
on), explain what the Slack app needs, then ask the mode, the tokens that mode needs and who
the owner is. Scripted runs act only when a ``--slack-*`` flag is given. Every answer is
checked here — a ``xoxb-`` bot token, a ``xapp-`` app token, a ``U…``/``W…`` member id — so a
mistake is reported against its own flag instead of surfacing later as a Slack refusal.

Tokens are written into the document as plaintext and ``run_setup`` moves them to the OS
keyring before anything reaches disk, so ``config.toml`` holds ``"@keyring"``. An empty
answer keeps what is configured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption, SetupStepSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.setup import SetupContext

__all__ = ["SLACK_FLAGS", "SLACK_STEP", "slack_step"]

SLACK_STEP = SetupStepSpec(
    name="slack",
    label="Slack",
    run="fermix_channels.slack.setup_step:slack_step",
    order=400,
    options=(
        SetupOption(flag="--slack-mode", help='"events" (webhook, default) or "socket".'),
        SetupOption(flag="--slack-bot-token", help="Bot User OAuth Token (xoxb-…).", secret=True),
        SetupOption(
            flag="--slack-signing-secret",
            help="Signing secret (events mode), from the app's Basic Information.",
            secret=True,
        ),
        SetupOption(
            flag="--slack-app-token",
            help="App-level token (xapp-…, connections:write) for socket mode.",
            secret=True,
        ),
        SetupOption(flag="--slack-owner-id", help="Your Slack member id (U…)."),
        SetupOption(
            flag="--slack-allowed-user-ids",
            help="Other member ids allowed to chat, comma-separated.",
        ),
        SetupOption(flag="--slack-disable", help="Turn the Slack channel off.", is_bool=True),
    ),
)
SLACK_FLAGS = tuple(option.flag for option in SLACK_STEP.options)

_MEMBER = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_ATTEMPTS = 5
_NEEDS = """\
  Slack needs an app for Fermix (https://api.slack.com/apps → Create New App):
  - Bot Token Scopes: chat:write, app_mentions:read, im:history, channels:history,
    reactions:write, files:write, files:read; App Home → Messages Tab on; install it and
    copy the Bot User OAuth Token (xoxb-…).
  - events mode: a public HTTPS URL forwarding to this daemon's /webhook/slack, set as the
    Event Subscriptions Request URL; the Signing Secret from Basic Information.
  - socket mode: no public URL; turn on Socket Mode and create an app-level token (xapp-…)
    with connections:write.
  Full steps: docs/channels/slack.md"""


class _Invalid(ValueError):
    """An answer that cannot be used; the message says what is accepted."""


def _mode(value: str) -> str:
    mode = value.strip().lower()
    if mode not in ("events", "socket"):
        raise _Invalid('the mode is "events" (Slack POSTs to /webhook/slack) or "socket"')
    return mode


def _prefixed(prefix: str, what: str):
    def check(value: str) -> str:
        token = value.strip()
        if not token.startswith(prefix) or any(ch.isspace() for ch in token):
            raise _Invalid(f"{what} starts with {prefix} and has no spaces")
        return token

    return check


def _secret_text(value: str) -> str:
    secret = value.strip()
    if not secret or any(ch.isspace() for ch in secret):
        raise _Invalid("the signing secret is one word, no spaces")
    return secret


def _member(value: str) -> str:
    member = value.strip().upper()
    if not _MEMBER.match(member):
        raise _Invalid("a Slack member id looks like U012AB3CD (profile → ⋮ → Copy member ID)")
    return member


def _members(value: str) -> list[str]:
    return [_member(part) for part in re.split(r"[,\s]+", value) if part]


#: The tokens each mode needs, and how each is asked for.
_TOKENS = {"events": ("bot_token", "signing_secret"), "socket": ("bot_token", "app_token")}
_TOKEN_ASKS = {
    "bot_token": ("--slack-bot-token", "Bot token (xoxb-…)", _prefixed("xoxb-", "a bot token")),
    "signing_secret": ("--slack-signing-secret", "Signing secret", _secret_text),
    "app_token": (
        "--slack-app-token",
        "App-level token (xapp-…)",
        _prefixed("xapp-", "an app-level token"),
    ),
}
_OWNER_PROMPT = "Your Slack member id (U…)"
_ALLOWED_PROMPT = "Other member ids allowed to chat, comma-separated"


def _answer(
    context: SetupContext, flag: str, prompt: str, check: Any, *, secret: bool, present: bool
) -> Any:
    """The checked value of *flag*, else of the user's answer; ``None`` (an empty answer,
    or no flag in a scripted run) leaves the setting as it is."""
    from fermix_core.setup import SetupError, SetupInputError

    if flag in context.options:
        try:
            return check(str(context.option(flag)))
        except _Invalid as exc:
            raise SetupInputError(f"{flag}: {exc}") from None
    if not context.interactive:
        return None
    shown = f"{prompt} ({'Enter keeps the current one' if present else 'Enter to skip'})"
    reader = context.io.secret_prompt if secret else context.io.prompt
    for _ in range(_ATTEMPTS):
        raw = reader(f"{shown}: ").strip()
        if not raw:
            return None
        try:
            return check(raw)
        except _Invalid as exc:
            context.io.echo(f"  {exc}")
    raise SetupError(f"no usable answer for {prompt!r}; run `fermix setup` again")


def _wants_slack(context: SetupContext, table: Any) -> bool:
    if any(flag in context.options for flag in SLACK_FLAGS):
        return True
    if not context.interactive:
        return False
    question = (
        "Reconfigure the Slack channel? [y/N]: "
        if table.get("enabled") is True
        else "Set up the Slack channel? [y/N]: "
    )
    return context.io.prompt(question).strip().lower() in ("y", "yes")


def slack_step(context: SetupContext) -> None:
    channels = context.document.get("fermix_channels")
    existing = channels.get("slack") if isinstance(channels, Mapping) else None
    if not _wants_slack(context, existing if isinstance(existing, Mapping) else {}):
        return  # nothing asked for: the document is left untouched
    table = context.table("fermix_channels", "slack")
    if context.option("--slack-disable"):
        table["enabled"] = False
        context.notes.append("Slack channel turned off; its tokens are kept")
        return
    if context.interactive:
        context.io.echo(_NEEDS)
    current = str(table.get("mode") or "events")
    prompt = f'Mode, "events" or "socket" [{current}]'
    mode = _answer(context, "--slack-mode", prompt, _mode, secret=False, present=True) or current
    table["mode"] = mode
    missing = []
    for key in _TOKENS[mode]:
        flag, prompt, check = _TOKEN_ASKS[key]
        present = table.get(key) not in (None, "")
        value = _answer(context, flag, prompt, check, secret=True, present=present)
        if value is not None:
            table[key] = value
        elif not present:
            missing.append(flag)
    owner_present = table.get("owner_user_id") not in (None, "")
    owner = _answer(
        context, "--slack-owner-id", _OWNER_PROMPT, _member, secret=False, present=owner_present
    )
    if owner is not None:
        table["owner_user_id"] = owner
    allowed_present = bool(table.get("allowed_user_ids"))
    allowed = _answer(
        context,
        "--slack-allowed-user-ids",
        _ALLOWED_PROMPT,
        _members,
        secret=False,
        present=allowed_present,
    )
    if allowed is not None:
        table["allowed_user_ids"] = allowed
    table["enabled"] = True
    if missing:
        context.notes.append(
            f"Slack is enabled but still needs {', '.join(missing)} (or the matching "
            "SLACK_* environment variables) before it can start"
        )
    if table.get("owner_user_id") in (None, "") and not table.get("allowed_user_ids"):
        context.notes.append(
            "Slack has no owner_user_id or allowlist yet, so it will refuse every sender; "
            "pass --slack-owner-id (send /whoami to the bot to read your id)"
        )
    if mode == "events":
        context.notes.append(
            "Slack events mode: point the app's Event Subscriptions Request URL at "
            "https://<public host>/webhook/slack (see docs/channels/slack.md)"
        )

"""The ``slack`` step of ``fermix setup``: turn the Slack channel on and give it its tokens.

Interactive runs offer Slack when it is off (default no) and leave it alone when it is set
up unless ``--reconfigure`` is given, as every channel step does; they explain what the
Slack app needs, then ask the mode, the tokens that mode needs and who the owner is.
Scripted runs act only when a ``--slack-*`` flag is given. Every answer is
checked here — a ``xoxb-`` bot token, a ``xapp-`` app token, a ``U…``/``W…`` member id — so a
mistake is reported against its own flag instead of surfacing later as a Slack refusal.

Tokens are written into the document as plaintext and ``run_setup`` moves them to the OS
keyring before anything reaches disk, so ``config.toml`` holds ``"@keyring"``. Without a
keyring the shared rules of :mod:`fermix_core.setup_secrets` apply: plaintext in config.toml
only with consent (``--secrets-in-config``), else ``--slack-<token>-env NAME`` or
``--slack-<token>-command CMD`` references. An empty answer keeps what is configured.
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
        *(
            SetupOption(flag=f"--slack-{name}-{kind}", help=help_text.format(what=what))
            for name, what in (
                ("bot-token", "the bot token"),
                ("signing-secret", "the signing secret"),
                ("app-token", "the app-level token"),
            )
            for kind, help_text in (
                ("env", "Read {what} from this environment variable at run time."),
                ("command", "Run this helper (no shell) and use what it prints as {what}."),
            )
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
_ENV = {
    "bot_token": "SLACK_BOT_TOKEN",
    "signing_secret": "SLACK_SIGNING_SECRET",
    "app_token": "SLACK_APP_TOKEN",
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
    for _ in range(_ATTEMPTS):
        raw = context.io.secret_prompt(f"{shown}: ") if secret else context.line(flag, shown)
        raw = raw.strip()
        if not raw:
            return None
        try:
            return check(raw)
        except _Invalid as exc:
            context.io.echo(f"  {exc}")
    raise SetupError(f"no usable answer for {prompt!r}; run `fermix setup` again")


def _token(context: SetupContext, key: str, *, present: bool) -> Any:
    """A token's new value: plaintext (moved to the keyring on save, or kept in config.toml
    with consent where there is no keyring), an ``env``/``command`` reference, or ``None``
    to leave it as it is."""
    from fermix_core.setup_secrets import (
        choose_storage,
        reference_from_flags,
        require_plaintext_storage,
    )

    flag, prompt, check = _TOKEN_ASKS[key]
    label = f"Slack {key.replace('_', ' ')}"
    reference = reference_from_flags(context, flag, label=label)
    if reference is not None:
        return reference
    if flag in context.options:
        value = _answer(context, flag, prompt, check, secret=True, present=present)
        require_plaintext_storage(context, flag, label=label)
        return value
    if not context.interactive:
        return None
    choice = choose_storage(context, flag, label=label, env_var=_ENV[key], can_keep=present)
    if choice.kind == "keep":
        return None
    if choice.kind == "reference":
        return choice.value
    return _answer(context, flag, prompt, check, secret=True, present=present)


def _wants_slack(context: SetupContext, table: Any) -> bool:
    if any(flag in context.options for flag in SLACK_FLAGS):
        return True
    if not context.interactive:
        return False
    if table.get("enabled") is True:
        # Set up already: asked again only with --reconfigure, like every channel step.
        if context.option("--reconfigure"):
            return True
        context.io.echo("Slack is set up; `fermix setup --reconfigure --step slack` changes it.")
        return False
    return context.confirm("slack: set up", "Set up the Slack channel?")


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
        present = table.get(key) not in (None, "")
        value = _token(context, key, present=present)
        if value is not None:
            table[key] = value
        elif not present:
            missing.append(_TOKEN_ASKS[key][0])
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
        from fermix_core.setup import SetupInputError

        raise SetupInputError(
            "the Slack channel would serve nobody: pass --slack-owner-id U… (your member id: "
            "profile → ⋮ → Copy member ID) or --slack-allowed-user-ids; nothing was written"
        )
    if mode == "events":
        context.notes.append(
            "Slack events mode: point the app's Event Subscriptions Request URL at "
            "https://<public host>/webhook/slack (see docs/channels/slack.md)"
        )

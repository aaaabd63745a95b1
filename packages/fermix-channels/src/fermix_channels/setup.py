"""Channel steps of ``fermix setup``: one step per channel, all of the same shape.

Each step explains what the platform needs (where to create the bot or app, the public URL a
webhook channel needs, the scopes), then asks for its credentials, the owner id and the
allowlist, and writes ``[fermix_channels.<name>]`` with ``enabled = true``. Credentials go
into the document as plaintext and ``run_setup`` moves them to the keyring before anything
is written, so config.toml holds ``"@keyring"``.

When it runs:

* interactive — a channel that is not enabled is offered ("Set up WhatsApp? [y/N]"); one
  that is enabled is left alone unless ``--reconfigure`` is given, in which case every value
  is asked again with the current one as the default (Enter keeps a stored secret);
* non-interactive — the step acts only when one of its flags is passed (``--whatsapp-…``,
  ``--telegram-…``); a required value still missing is an error naming its flag.
  ``--<name>-disable`` turns the channel off.

This module only declares the steps (cheap to import from the registration modules); the
setup machinery is imported when a step runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption, SetupStepSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.setup import SetupContext

__all__ = [
    "CHANNEL_SETUPS",
    "RECONFIGURE_FLAG",
    "ChannelField",
    "ChannelSetup",
    "discord_step",
    "run_channel_step",
    "signal_step",
    "telegram_step",
    "whatsapp_step",
]

RECONFIGURE_FLAG = "--reconfigure"
_KEEP = "@keep"


@dataclass(frozen=True)
class ChannelField:
    """One value a channel step asks for. ``choices`` limits a plain value."""

    key: str
    prompt: str
    secret: bool = False
    required: bool = True
    choices: tuple[str, ...] = ()
    #: Only asked when another key has this value, e.g. ``("mode", "events")``.
    when: tuple[str, str] | None = None
    default: str | None = None

    def flag(self, channel: str) -> str:
        return f"--{channel}-{self.key.replace('_', '-')}"


@dataclass(frozen=True)
class ChannelSetup:
    channel: str
    label: str
    #: What the platform needs, shown before the questions.
    explain: str
    fields: tuple[ChannelField, ...]
    allowlist_key: str
    owner_hint: str
    order: int

    @property
    def owner_flag(self) -> str:
        return f"--{self.channel}-owner"

    @property
    def allow_flag(self) -> str:
        return f"--{self.channel}-allow"

    @property
    def disable_flag(self) -> str:
        return f"--{self.channel}-disable"

    @property
    def enable_flag(self) -> str:
        return f"--{self.channel}-enable"

    def flags(self) -> list[str]:
        fields = [f.flag(self.channel) for f in self.fields]
        return [self.enable_flag, self.disable_flag, *fields, self.owner_flag, self.allow_flag]

    def spec(self, run: str) -> SetupStepSpec:
        options = [
            SetupOption(self.enable_flag, f"Set up the {self.label} channel.", is_bool=True),
            SetupOption(self.disable_flag, f"Turn the {self.label} channel off.", is_bool=True),
            *(
                SetupOption(field.flag(self.channel), field.prompt, secret=field.secret)
                for field in self.fields
            ),
            SetupOption(self.owner_flag, f"Your own {self.label} id ({self.owner_hint})."),
            SetupOption(
                self.allow_flag,
                f"Other {self.label} ids allowed to chat, comma-separated (guests).",
            ),
        ]
        return SetupStepSpec(
            name=self.channel,
            label=self.label,
            run=run,
            order=self.order,
            options=tuple(options),
        )


WHATSAPP_SETUP = ChannelSetup(
    channel="whatsapp",
    label="WhatsApp",
    explain=(
        "WhatsApp (Cloud API) needs a Meta developer app with the WhatsApp product, and a\n"
        "public HTTPS URL in front of this daemon (a tunnel such as `cloudflared tunnel --url\n"
        "http://127.0.0.1:4030`, or a reverse proxy): register\n"
        "https://<your host>/webhook/whatsapp as the app's webhook with your verify token and\n"
        'subscribe to "messages". From the app: the Phone number ID (WhatsApp > API Setup),\n'
        "a system-user access token with whatsapp_business_messaging, and the app secret\n"
        "(App settings > Basic). See docs/channels/whatsapp.md."
    ),
    fields=(
        ChannelField("phone_number_id", "Phone number ID (WhatsApp > API Setup)"),
        ChannelField("access_token", "Access token (system-user token)", secret=True),
        ChannelField("app_secret", "App secret (App settings > Basic)", secret=True),
        ChannelField("verify_token", "Verify token (any string; Meta echoes it once)", secret=True),
    ),
    allowlist_key="allowed_sender_ids",
    owner_hint="your WhatsApp number, digits only with country code, e.g. 15551230001",
    order=310,
)

TELEGRAM_SETUP = ChannelSetup(
    channel="telegram",
    label="Telegram",
    explain=(
        "Telegram needs a bot: message @BotFather, send /newbot, and copy the token it\n"
        "gives you. The daemon long-polls the Bot API, so no public URL is needed. The\n"
        "token is read only from config (never from TELEGRAM_BOT_TOKEN)."
    ),
    fields=(ChannelField("bot_token", "Bot token from @BotFather", secret=True),),
    allowlist_key="allowed_user_ids",
    owner_hint="your numeric Telegram user id, e.g. 123456789 (/whoami shows it)",
    order=300,
)

DISCORD_SETUP = ChannelSetup(
    channel="discord",
    label="Discord",
    explain=(
        "Discord needs an application with a bot at https://discord.com/developers/\n"
        "applications: copy the bot token (Bot > Reset Token), turn on the Message Content\n"
        "intent, and invite the bot with the bot scope and View Channels, Send Messages,\n"
        "Send Messages in Threads, Read Message History, Attach Files and Add Reactions.\n"
        "The daemon connects to the Gateway itself, so no public URL is needed."
    ),
    fields=(
        ChannelField("bot_token", "Bot token", secret=True),
        ChannelField("bot_user_id", "The bot's user id (to recognise mentions)", required=False),
    ),
    allowlist_key="allowed_user_ids",
    owner_hint="your Discord user id (Developer Mode > Copy User ID)",
    order=330,
)

SIGNAL_SETUP = ChannelSetup(
    channel="signal",
    label="Signal",
    explain=(
        "Signal runs through signal-cli on this machine (Java 21+): install it and register\n"
        "or link the number the bot answers from (signal-cli -a +15551234567 register, then\n"
        "verify CODE; or signal-cli link -n fermix to link it to your phone). Fermix starts\n"
        "signal-cli itself; no public URL is needed. See docs/channels/signal.md."
    ),
    fields=(
        ChannelField("account", "The number signal-cli is registered with (+15551234567)"),
        ChannelField("cli_path", "Path to signal-cli (Enter to find it on PATH)", required=False),
    ),
    allowlist_key="allowed_sender_ids",
    owner_hint="your own Signal number in international format, e.g. +15551230001",
    order=340,
)

CHANNEL_SETUPS: dict[str, ChannelSetup] = {
    s.channel: s for s in (TELEGRAM_SETUP, WHATSAPP_SETUP, DISCORD_SETUP, SIGNAL_SETUP)
}


def whatsapp_step(context: SetupContext) -> None:
    run_channel_step(WHATSAPP_SETUP, context)


def telegram_step(context: SetupContext) -> None:
    run_channel_step(TELEGRAM_SETUP, context)


def discord_step(context: SetupContext) -> None:
    run_channel_step(DISCORD_SETUP, context)


def signal_step(context: SetupContext) -> None:
    run_channel_step(SIGNAL_SETUP, context)


# --------------------------------------------------------------------------- running


def _current(context: SetupContext, channel: str) -> dict[str, Any]:
    section = context.document.get("fermix_channels", {}).get(channel, {})
    return dict(section.unwrap() if hasattr(section, "unwrap") else section)


def _wanted(setup: ChannelSetup, context: SetupContext, current: dict[str, Any]) -> bool:
    """Whether this run configures the channel at all."""
    passed = [flag for flag in setup.flags() if flag in context.options]
    if passed:
        return True
    if not context.interactive:
        return False
    if current.get("enabled"):
        if not context.option(RECONFIGURE_FLAG):
            context.io.echo(
                f"{setup.label} is set up; `fermix setup --reconfigure --step {setup.channel}` "
                "changes it."
            )
            return False
        return context.confirm(
            f"{setup.channel}: change", f"Change the {setup.label} settings?", default=True
        )
    return context.confirm(f"{setup.channel}: set up", f"Set up {setup.label}?")


def _ids(value: str) -> list[str]:
    from fermix_channels.config import parse_ids

    return parse_ids(value, "ids")


def run_channel_step(setup: ChannelSetup, context: SetupContext) -> None:
    from fermix_core.setup import SetupInputError
    from fermix_core.setup_secrets import require_plaintext_storage

    channel = setup.channel
    current = _current(context, channel)
    if context.option(setup.disable_flag):
        if current:
            context.table("fermix_channels", channel)["enabled"] = False
            context.notes.append(f"{setup.label} turned off")
        return
    if not _wanted(setup, context, current):
        return
    if context.interactive:
        context.io.echo(setup.explain)
    table = context.table("fermix_channels", channel)
    values: dict[str, str] = {}
    for field in setup.fields:
        if field.when is not None and values.get(field.when[0]) != field.when[1]:
            continue
        flag = field.flag(channel)
        existing = current.get(field.key)
        if field.secret:
            default = _KEEP if existing else None
            prompt = f"{field.prompt}{' (Enter keeps the stored one)' if existing else ''}"
            answer = context.ask(flag, prompt, default=default, secret=True)
            if answer == _KEEP:
                values[field.key] = str(existing)
                continue
            require_plaintext_storage(context, flag, label=f"{setup.label} {field.key}")
        else:
            default = str(existing) if existing not in (None, "") else field.default
            if not field.required and default is None:
                default = ""
            answer = context.ask(flag, field.prompt, default=default)
            if field.choices and answer not in field.choices:
                raise SetupInputError(
                    f"{flag}: {answer!r} is not one of {', '.join(field.choices)}"
                )
        if not answer and field.required:
            raise SetupInputError(f"{field.prompt} is required: pass {flag} VALUE")
        values[field.key] = answer
        if answer:
            table[field.key] = answer
        elif field.key in table:
            del table[field.key]
    owner_default = current.get("owner_user_id")
    owner = context.ask(
        setup.owner_flag,
        f"Your own {setup.label} id ({setup.owner_hint}; /whoami shows it later)",
        default=str(owner_default) if owner_default else "",
    )
    allowed_default = ",".join(str(i) for i in current.get(setup.allowlist_key) or [])
    allowed = context.ask(
        setup.allow_flag,
        "Others allowed to chat, comma-separated (Enter for nobody else)",
        default=allowed_default,
    )
    owner_ids = _ids(owner)
    if len(owner_ids) > 1:
        raise SetupInputError(f"{setup.owner_flag}: give one id, not {len(owner_ids)}")
    allowed_ids = _ids(allowed)
    if not owner_ids and not allowed_ids:
        raise SetupInputError(
            f"{setup.label} would serve nobody: pass {setup.owner_flag} ID (your own id) "
            f"or {setup.allow_flag} IDS"
        )
    if owner_ids:
        table["owner_user_id"] = owner_ids[0]
    elif "owner_user_id" in table:
        del table["owner_user_id"]
    table[setup.allowlist_key] = allowed_ids
    table["enabled"] = True
    context.notes.append(
        f"{setup.label} configured; `fermix restart` starts it (`fermix doctor` checks it)"
    )

"""The ``personalization`` step of ``fermix setup``: the owner, and the assistant's name.

The owner's name, timezone and communication style, and the assistant's own name, are
written to ``[fermix_core.agent]``. The assistant's name is identity rather than a
preference, which is why it lives in config: config is the source of truth that the daemon
reconciles into IDENTITY.md on every boot.

The step then seeds the prompt files (IDENTITY, FERMIX, SOUL, REALTIME, USER, MEMORY). Seeding
never overwrites, so running setup again is always safe; on a re-run the values already in
config.toml are the defaults, and a non-interactive run without flags changes nothing but
still seeds any prompt file that is missing.

Values are checked here, before the document is validated as a whole, so a bad answer is
asked again (interactive) or reported against its own flag (non-interactive) instead of
surfacing as a config error that names a key the user never typed.

Core's built-in plugin registers :data:`PERSONALIZATION_STEP` on every boot, so importing
this module costs only the spec record; the setup machinery is imported when the step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption, SetupStepSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.setup import SetupContext

__all__ = [
    "DEFAULT_AGENT_NAME",
    "DEFAULT_TIMEZONE",
    "PERSONALIZATION_STEP",
    "canonical_timezone",
    "personalization_step",
]

DEFAULT_TIMEZONE = "America/New_York"
DEFAULT_AGENT_NAME = "fermix"
#: How many wrong answers an interactive prompt takes before the step gives up.
_ATTEMPTS = 5
_MAX_NAME = 100
_MAX_STYLE = 500

PERSONALIZATION_STEP = SetupStepSpec(
    name="personalization",
    label="About you",
    run="fermix_core.setup_personalization:personalization_step",
    order=200,
    options=(
        SetupOption(flag="--user-name", help="How the assistant addresses you."),
        SetupOption(
            flag="--timezone",
            help=f"Your IANA timezone, e.g. Europe/Berlin (default {DEFAULT_TIMEZONE}).",
        ),
        SetupOption(
            flag="--communication-style",
            help='How you like replies, e.g. "terse, no emoji".',
        ),
        SetupOption(
            flag="--agent-name",
            help=f"The assistant's own name (default {DEFAULT_AGENT_NAME}).",
        ),
    ),
)


class _Invalid(ValueError):
    """An answer that cannot be used; the message says what would be accepted."""


# --------------------------------------------------------------------------- checks


def canonical_timezone(value: str) -> str:
    """The IANA key for *value*, or :class:`ValueError` saying what is accepted.

    Case is forgiven (``europe/berlin`` becomes ``Europe/Berlin``) because the zone database
    on Linux is case-sensitive while people type zone names from memory; the key written to
    config must be the exact one or the daemon would refuse it at boot.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

    key = value.strip()
    problem = (
        f'unknown timezone "{key}"; use an IANA name such as "{DEFAULT_TIMEZONE}" or '
        '"Europe/Berlin"'
    )
    if not key or len(key) > 64 or not key.isprintable():
        raise ValueError(problem)
    try:
        ZoneInfo(key)
        return key
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    matches = [zone for zone in available_timezones() if zone.lower() == key.lower()]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(problem)


def _text(limit: int, what: str) -> Callable[[str], str]:
    """A checker for a free-form one-line value: whitespace collapsed, no control characters.

    The values end up inside Markdown prompt files and TOML, one per line; a newline or an
    escape sequence there would change the structure of both.
    """

    def check(value: str) -> str:
        import unicodedata

        cleaned = " ".join(value.split())
        if any(unicodedata.category(ch)[0] == "C" for ch in cleaned):
            raise _Invalid(f"{what} cannot contain control characters")
        if len(cleaned) > limit:
            raise _Invalid(f"{what} is {len(cleaned)} characters long; keep it under {limit}")
        return cleaned

    return check


def _timezone_check(value: str) -> str:
    try:
        return canonical_timezone(value)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None


def _agent_name_check(value: str) -> str:
    cleaned = _text(_MAX_NAME, "the assistant's name")(value)
    if not cleaned:
        raise _Invalid("the assistant needs a name")
    return cleaned


# --------------------------------------------------------------------------- asking


@dataclass(frozen=True)
class _Field:
    key: str
    flag: str
    prompt: str
    check: Callable[[str], str]
    fallback: str | None = None


_FIELDS = (
    _Field(
        "user_name",
        "--user-name",
        "Your name (how the assistant addresses you)",
        _text(_MAX_NAME, "your name"),
    ),
    _Field("timezone", "--timezone", "Your timezone", _timezone_check, DEFAULT_TIMEZONE),
    _Field(
        "communication_style",
        "--communication-style",
        "How you like replies (e.g. terse, no emoji)",
        _text(_MAX_STYLE, "the communication style"),
    ),
    _Field("name", "--agent-name", "The assistant's name", _agent_name_check, DEFAULT_AGENT_NAME),
)


def _stored(table: Any, key: str) -> str | None:
    value = table.get(key)
    return str(value) if isinstance(value, str) and value.strip() else None


def _from_flag(context: SetupContext, field: _Field) -> str | None:
    from fermix_core.setup import SetupInputError

    try:
        return field.check(str(context.option(field.flag))) or None
    except _Invalid as exc:
        raise SetupInputError(f"{field.flag}: {exc}") from None


def _default(context: SetupContext, field: _Field, table: Any) -> str | None:
    """What config.toml holds (checked), else the field's fallback.

    A stored value that no longer passes its check is never kept silently: a scripted run
    is told which flag replaces it, and an interactive one is shown the fallback instead.
    """
    stored = _stored(table, field.key)
    if stored is None:
        return field.fallback
    try:
        return field.check(stored) or field.fallback
    except _Invalid as exc:
        if not context.interactive:
            from fermix_core.setup import SetupInputError

            raise SetupInputError(
                f"[fermix_core.agent] {field.key} in config.toml is not usable ({exc}); "
                f"pass {field.flag} VALUE"
            ) from None
        context.io.echo(f"  config.toml has {field.key} = {stored!r}, which is not usable: {exc}")
        return field.fallback


def _value(context: SetupContext, field: _Field, table: Any) -> str | None:
    """The flag, else the user's answer (interactive), else the default.

    An empty flag value clears an optional setting; an empty answer keeps the default shown
    in brackets.
    """
    if field.flag in context.options:
        return _from_flag(context, field)
    default = _default(context, field, table)
    if not context.interactive:
        return default
    for _ in range(_ATTEMPTS):
        answer = context.ask(field.flag, field.prompt, default=default or "")
        try:
            return field.check(answer) or None
        except _Invalid as exc:
            context.io.echo(f"  {exc}")
    from fermix_core.setup import SetupError

    raise SetupError(f"no usable answer for {field.prompt!r}; run `fermix setup` again")


# --------------------------------------------------------------------------- the step


def personalization_step(context: SetupContext) -> None:
    """Ask about the owner and the assistant's name, record them, and seed the prompt files."""
    agent = _agent_table(context)
    before = {field.key: _stored(agent, field.key) or field.fallback for field in _FIELDS}
    values = {field.key: _value(context, field, agent) for field in _FIELDS}
    for key, value in values.items():
        _put(agent, key, value)
    # Seeded only once config.toml is written: a setup that fails later (a secret that
    # cannot be stored, an invalid result) must not leave USER.md holding these answers.
    context.after_write.append(lambda: _seed(context, values, before))


def _agent_table(context: SetupContext) -> Any:
    """``[fermix_core.agent]``, refusing a document where that path is not a table.

    Writing into a string or number there would either crash deep inside tomlkit or produce
    a file the loader rejects for a reason far from the cause.
    """
    from fermix_core.setup import SetupError

    node: Any = context.document
    for key in ("fermix_core", "agent"):
        child = node.get(key) if isinstance(node, Mapping) else None
        if child is not None and not isinstance(child, Mapping):
            path = "fermix_core" if key == "fermix_core" else "fermix_core.agent"
            raise SetupError(
                f"{path} in config.toml is a {type(child).__name__.lower()}, not a table; "
                f"fix or remove it (`fermix config unset {path}`), then run `fermix setup` again"
            )
        node = child
    return context.table("fermix_core", "agent")


def _put(table: Any, key: str, value: str | None) -> None:
    """Set or remove *key*, touching the document only on a real change.

    Assigning an equal value would still replace the tomlkit item and drop a trailing
    comment on that line, and would make a no-op re-run rewrite config.toml.
    """
    if value is None:
        if key in table:
            del table[key]
    elif table.get(key) != value:
        table[key] = value


def _seed(
    context: SetupContext, values: dict[str, str | None], before: dict[str, str | None]
) -> None:
    from fermix_core.prompt import seed_bootstrap
    from fermix_core.setup import SetupError

    agent_name = values["name"] or DEFAULT_AGENT_NAME
    try:
        report = seed_bootstrap(
            context.home,
            agent_name=agent_name,
            user_name=values["user_name"],
            timezone=values["timezone"],
            communication_style=values["communication_style"],
        )
    except OSError as exc:
        raise SetupError(
            f"cannot write the prompt files under {context.home.path} ({exc.strerror or exc}); "
            f"make that directory yours and writable (`chmod 700 {context.home.path}`), then "
            "run `fermix setup` again"
        ) from exc
    if report.seeded:
        context.notes.append("Seeded prompt files: " + ", ".join(report.seeded))
    else:
        context.notes.append("Prompt files already exist; kept as they are")
    existing = set(report.existing)
    renamed = before["name"] != agent_name
    if renamed and "bootstrap/main/IDENTITY.md" in existing:
        context.notes.append(
            f"The assistant is now called {agent_name!r}; IDENTITY.md picks the name up when "
            "the daemon next starts (`fermix restart`)"
        )
    profile = ("user_name", "timezone", "communication_style")
    if "memory/main/USER.md" in existing and any(before[k] != values[k] for k in profile):
        context.notes.append(
            "memory/main/USER.md already exists and was not changed; tell the assistant what "
            "changed (memory review rebuilds that file) or edit it yourself"
        )

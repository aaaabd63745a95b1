"""Dialects: a renderer, a message-length cap and the way the platform counts length.

A third-party channel with its own markup builds a :class:`DialectProfile` around its own
:class:`~.render.Renderer` subclass and passes it wherever a :class:`Dialect` is accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from .render import (
    DiscordRenderer,
    PlainRenderer,
    Renderer,
    SlackRenderer,
    TelegramRenderer,
    WhatsAppRenderer,
)

__all__ = [
    "MEASURES",
    "Dialect",
    "DialectProfile",
    "channel_profile",
    "code_points",
    "counts_each_character",
    "dialect_profile",
    "register_dialect",
    "utf8_bytes",
    "utf16_units",
]


def utf16_units(text: str) -> int:
    """Length in UTF-16 code units: an astral character (most emoji) counts two."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def code_points(text: str) -> int:
    """Length in Unicode code points (Python's ``len``)."""
    return len(text)


def utf8_bytes(text: str) -> int:
    """Length in UTF-8 bytes."""
    return len(text.encode("utf-8", "surrogatepass"))


#: The measures a channel may declare as ``Channel.text_measure``, by name.
MEASURES: dict[str, tuple[Callable[[str], int], str]] = {
    "chars": (code_points, "characters"),
    "utf16": (utf16_units, "UTF-16 code units"),
    "utf8": (utf8_bytes, "UTF-8 bytes"),
}


class Dialect(StrEnum):
    """The built-in dialects, named as ``Channel.dialect`` names them."""

    TELEGRAM = "telegram_html"
    DISCORD = "discord"
    SLACK = "slack"
    WHATSAPP = "whatsapp"
    SIGNAL = "signal"
    PLAIN = "plain"

    @classmethod
    def _missing_(cls, value: object) -> Dialect | None:
        return cls.TELEGRAM if value == "telegram" else None


@dataclass(frozen=True)
class DialectProfile:
    """How one platform renders and measures a message.

    ``measure`` counts a rendered message the way the platform enforces ``limit``;
    ``measure_name`` says how, for docs and error messages.
    """

    name: str
    renderer: Renderer
    limit: int
    measure: Callable[[str], int] = field(default=utf16_units)
    measure_name: str = "UTF-16 code units"


_PLAIN = PlainRenderer()

#: Text caps from the channel table. Where a platform does not say how it counts, the
#: UTF-16 measure is used: it is never smaller than the code-point count, so it errs on the
#: side of a message that fits.
PROFILES: dict[Dialect, DialectProfile] = {
    # Bot API: 4096 characters of message text after entity parsing, counted in UTF-16.
    Dialect.TELEGRAM: DialectProfile("telegram_html", TelegramRenderer(), 4096),
    Dialect.WHATSAPP: DialectProfile("whatsapp", WhatsAppRenderer(), 4096),
    Dialect.SLACK: DialectProfile("slack", SlackRenderer(), 40_000),
    Dialect.DISCORD: DialectProfile("discord", DiscordRenderer(), 2000),
    # Signal clients fold a body over 2,000 UTF-8 bytes into a "long text" attachment that
    # some clients show only after a tap; chunks at 2,000 bytes stay ordinary messages.
    Dialect.SIGNAL: DialectProfile("signal", _PLAIN, 2000, utf8_bytes, "UTF-8 bytes"),
    Dialect.PLAIN: DialectProfile("plain", _PLAIN, 4096, code_points, "characters"),
}


#: Dialects third-party channels registered by name (:func:`register_dialect`).
_REGISTERED: dict[str, DialectProfile] = {}


def register_dialect(profile: DialectProfile) -> None:
    """Make *profile* known by its name, so an adapter can declare ``dialect = "<name>"``.

    A built-in name cannot be taken over, and one name cannot be given two profiles.
    Registering the same profile again is harmless (a module imported twice).
    """
    name = profile.name
    try:
        Dialect(name)
    except ValueError:
        pass
    else:
        raise ValueError(f"dialect {name!r} is built in; register yours under another name")
    known = _REGISTERED.get(name)
    if known is not None and known is not profile:
        raise ValueError(f"dialect {name!r} is already registered by another channel")
    _REGISTERED[name] = profile


def dialect_profile(
    dialect: Dialect | str | DialectProfile,
    *,
    limit: int | None = None,
    measure: Callable[[str], int] | str | None = None,
) -> DialectProfile:
    """The profile for *dialect* (a :class:`Dialect`, its name, or a profile as is), with
    *limit* and *measure* (a callable or a :data:`MEASURES` name) overriding its own."""
    if isinstance(dialect, DialectProfile):
        profile = dialect
    elif dialect in _REGISTERED:
        profile = _REGISTERED[dialect]
    else:
        try:
            profile = PROFILES[Dialect(dialect)]
        except ValueError:
            names = ", ".join([*(d.value for d in Dialect), *_REGISTERED])
            raise ValueError(
                f"unknown dialect {dialect!r}; use one of {names}, pass a DialectProfile, "
                "or register one with register_dialect()"
            ) from None
    if limit is not None:
        profile = replace(profile, limit=limit)
    if isinstance(measure, str):
        if measure not in MEASURES:
            raise ValueError(f"unknown text measure {measure!r}; use one of {', '.join(MEASURES)}")
        fn, name = MEASURES[measure]
        profile = replace(profile, measure=fn, measure_name=name)
    elif measure is not None:
        profile = replace(profile, measure=measure, measure_name=getattr(measure, "__name__", ""))
    return profile


def counts_each_character(measure: Callable[[str], int]) -> bool:
    """Whether *measure* counts every character at least once (all the built-in ones do),
    which lets the splitter skip rendering pieces with more characters than the cap."""
    return measure in (code_points, utf16_units, utf8_bytes) or bool(
        getattr(measure, "counts_each_character", False)
    )


class _Stricter:
    """The larger of two measures."""

    def __init__(self, first: Callable[[str], int], second: Callable[[str], int]) -> None:
        self.first, self.second = first, second
        self.counts_each_character = counts_each_character(first) or counts_each_character(second)

    def __call__(self, text: str) -> int:
        return max(self.first(text), self.second(text))


def channel_profile(channel: Any) -> DialectProfile:
    """The profile a channel adapter declares: its ``dialect``, its ``max_text`` cap, and
    the stricter of its ``text_measure`` and the dialect's own measure."""
    profile = dialect_profile(getattr(channel, "dialect", "plain"))
    declared = MEASURES.get(str(getattr(channel, "text_measure", "")))
    limit = int(getattr(channel, "max_text", profile.limit))
    if declared is None or declared[0] is profile.measure:
        return replace(profile, limit=limit)
    return replace(
        profile,
        limit=limit,
        measure=_Stricter(profile.measure, declared[0]),
        measure_name=f"{profile.measure_name} and {declared[1]}",
    )

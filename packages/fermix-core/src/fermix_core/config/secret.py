"""The one secret type every config model uses, and the rule that names a secret's slot.

A secret in ``config.toml`` is written one of four ways::

    api_key = "sk-..."                                     # plaintext
    api_key = "@keyring"                                   # stored in the OS keyring
    api_key = { source = "env", env = "WORK_OPENAI_KEY" }  # read from another env var
    api_key = { source = "command", command = ["pass", "show", "openai"], timeout = 10 }

Models declare such a field as :data:`Secret` (``api_key: Secret | None = None``). The type
carries a marker so that every secret slot — core or plugin — can be enumerated without a
hand-kept list; :mod:`fermix_core.secrets` uses that enumeration to resolve values, and
``fermix config show`` uses it to mask them.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
)

KEYRING = "@keyring"
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MASK = "********"

#: Tags pydantic inserts into error locations for the secret union; stripped from key paths.
SECRET_TAGS = frozenset({"secret:plain", "secret:env", "secret:command"})


class SecretMarker:
    """Metadata object that marks an annotated type as a secret slot."""

    def __repr__(self) -> str:
        return "SECRET"


SECRET_MARK = SecretMarker()


class EnvSecret(BaseModel):
    """``{ source = "env", env = "NAME" }``: the secret is whatever ``$NAME`` holds at use."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: Literal["env"]
    env: str

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not ENV_NAME_RE.match(value):
            raise ValueError(
                f"{value!r} is not an environment variable name (letters, digits, '_')"
            )
        return value


class CommandSecret(BaseModel):
    """``{ source = "command", command = [...] }``: the secret is the command's stdout.

    The command is an argument list, never a shell string, so nothing in it is interpreted
    by a shell.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: Literal["command"]
    command: list[str] = Field(min_length=1)
    #: Seconds before the helper is killed; a hung password manager must not hang boot.
    timeout: float = Field(default=10, gt=0, le=600)

    @field_validator("command")
    @classmethod
    def _program(cls, value: list[str]) -> list[str]:
        if not value[0].strip():
            raise ValueError("the first element must be the program to run")
        return value


def _plain_secret(value: str) -> str:
    text = value.strip()
    if not text:
        raise ValueError("is empty; remove the key (`fermix config unset KEY`) to leave it unset")
    if text.startswith("@") and text != KEYRING:
        raise ValueError(f'unknown secret reference; the only "@" form is "{KEYRING}"')
    return text


def _secret_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "secret:plain"
    if isinstance(value, EnvSecret | CommandSecret):
        return f"secret:{value.source}"
    if isinstance(value, dict) and value.get("source") in ("env", "command"):
        return f"secret:{value['source']}"
    return None


#: A secret config value. Use as ``api_key: Secret | None = None`` in any config model.
Secret = Annotated[
    Union[  # noqa: UP007 - the tagged members need the explicit Union form
        Annotated[str, AfterValidator(_plain_secret), Tag("secret:plain")],
        Annotated[EnvSecret, Tag("secret:env")],
        Annotated[CommandSecret, Tag("secret:command")],
    ],
    Discriminator(
        _secret_kind,
        custom_error_type="secret_type",
        custom_error_message=(
            'must be a string, "@keyring", or a table with source = "env" or source = "command"'
        ),
    ),
    SECRET_MARK,
]

SecretValue = str | EnvSecret | CommandSecret


def is_secret_annotation(annotation: Any) -> bool:
    """True when *annotation* is :data:`Secret`, possibly inside ``Optional``/``Annotated``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        if any(isinstance(m, SecretMarker) for m in annotation.__metadata__):
            return True
        return is_secret_annotation(annotation.__origin__)
    if origin is Union or origin is types.UnionType:
        return any(is_secret_annotation(a) for a in typing.get_args(annotation))
    return False


@dataclass(frozen=True)
class SecretField:
    """One secret slot: where it lives in config, its canonical ENV name, its stored value.

    ``env`` is both the environment variable that may override the slot and the keyring
    coordinate (``fermix:<ENV>``). ``value`` is what ``config.toml`` holds — never a value
    taken from the environment — or ``None`` when the slot is empty. ``overridable`` is
    false for the few secrets that must never come from the environment (a channel maps
    its own overlays; the Telegram bot token is never read from it).
    """

    path: tuple[str, ...]
    env: str
    value: SecretValue | None = None
    overridable: bool = True

    @property
    def dotted(self) -> str:
        from fermix_core.config.document import format_key

        return format_key(self.path)


def derived_env_name(path: tuple[str, ...]) -> str:
    """The documented fallback ENV name for a secret slot no spec names.

    ``fermix_core.transcription.openai_api_key`` -> ``FERMIX_TRANSCRIPTION_OPENAI_API_KEY``;
    ``fermix_weather.api_key`` -> ``FERMIX_WEATHER_API_KEY``; ``acme.token`` ->
    ``FERMIX_ACME_TOKEN``. Characters that cannot appear in an env name become ``_``.
    """
    parts = list(path)
    if parts and parts[0] == "fermix_core":
        parts = parts[1:]
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()
    return name if name.startswith("FERMIX_") else f"FERMIX_{name}"


def mask(value: Any) -> Any:
    """How a secret is shown: ``@keyring`` and env/command references as is, plaintext hidden."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if value == KEYRING else MASK
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value

"""Typed configuration errors.

A config mistake is reported as one :class:`ConfigError` carrying *every* problem found,
each pinned to the full dotted key path, because fixing one line, restarting, and learning
about the next line is the worst way to edit a config file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, order=True)
class ConfigProblem:
    """One problem (or warning) at one key path, phrased so the reader knows the fix."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class ConfigError(Exception):
    """``config.toml`` (or a requested change to it) is invalid; nothing was changed.

    ``str()`` is one ``path: message`` line per problem so it can be printed as is.
    """

    def __init__(self, problems: Iterable[ConfigProblem], *, file: Path | None = None) -> None:
        self.problems: list[ConfigProblem] = list(problems)
        self.file = file
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)

    @classmethod
    def single(cls, path: str, message: str, *, file: Path | None = None) -> ConfigError:
        return cls([ConfigProblem(path, message)], file=file)


class ConfigKeyError(ConfigError, KeyError):
    """A dotted key given to ``get``/``set``/``unset`` does not name a setting."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return ConfigError.__str__(self)

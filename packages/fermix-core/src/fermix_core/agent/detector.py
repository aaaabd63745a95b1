"""The repeated-tool-call detector: catch a model stuck calling the same thing forever.

A model that keeps issuing one identical call will usually keep doing so until the iteration
bound, burning a hundred model calls on nothing. Identity is the tool name plus the canonical
JSON of the arguments (key order and whitespace do not make two calls different), and only
an *unbroken* run counts: repeating a read between two writes is progress, not a loop.

The detector first warns (the model is told, inside the tool result, that it is repeating
itself — often enough to break the habit) and then stops the loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ABORT_AT", "WARN_AT", "Repeat", "RepeatedCallDetector", "canonical_arguments"]

WARN_AT = 3
ABORT_AT = 5

Action = Literal["ok", "warn", "abort"]


#: What ``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False,
#: default=repr)`` builds on every call, built once (an encoder keeps no state between calls).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
)


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """Arguments as sorted, compact JSON; values JSON cannot hold are compared by ``repr``."""
    return _CANONICAL.encode(arguments)


@dataclass(frozen=True, slots=True)
class Repeat:
    """How many times in a row this exact call has now been made, and what to do about it."""

    count: int
    action: Action


class RepeatedCallDetector:
    """Tracks the current run of identical calls across the whole loop (not per iteration)."""

    def __init__(self, *, warn_at: int = WARN_AT, abort_at: int = ABORT_AT) -> None:
        if not 1 < warn_at < abort_at:
            raise ValueError("the detector needs 1 < warn_at < abort_at")
        self.warn_at = warn_at
        self.abort_at = abort_at
        self._last: tuple[str, str] | None = None
        self._count = 0

    def observe(self, name: str, arguments: Mapping[str, Any]) -> Repeat:
        """Record one call about to be dispatched and say whether it may run."""
        key = (name, canonical_arguments(arguments))
        if key == self._last:
            self._count += 1
        else:
            self._last = key
            self._count = 1
        if self._count >= self.abort_at:
            return Repeat(self._count, "abort")
        if self._count >= self.warn_at:
            return Repeat(self._count, "warn")
        return Repeat(self._count, "ok")

    def reset(self) -> None:
        self._last = None
        self._count = 0

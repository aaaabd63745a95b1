"""Telemetry events and their emission to ``fermix_event`` observers.

Telemetry is best-effort by design: an observer that raises is logged and skipped, so a
metrics exporter can never take down a turn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("fermix.telemetry")


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """One event: a dotted ``name`` (``"provider.failover"``) plus measurements/metadata."""

    name: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


Observer = Callable[[TelemetryEvent], None]


class Telemetry:
    """Fans events out to observers; the plugin host adds the ``fermix_event`` hook."""

    def __init__(self) -> None:
        self._observers: list[Observer] = []

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        self._observers.append(observer)
        return lambda: self._observers.remove(observer)

    def emit(self, name: str, **data: Any) -> TelemetryEvent:
        event = TelemetryEvent(name, data, time.time())  # positionally: a third cheaper
        for observer in tuple(self._observers):
            try:
                observer(event)
            except Exception:
                log.exception("telemetry observer %r failed on %s", observer, name)
        return event

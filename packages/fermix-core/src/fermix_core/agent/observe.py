"""Best-effort telemetry and trace hooks for the agent loop.

Both are optional and duck-typed: ``emit(name, **data)`` is the runtime's telemetry fan-out,
and a tracer offers ``record(type, session_id=..., **fields)`` (or ``record_fields(type,
fields, session_id=...)``, preferred when present) and ``span(type, name, session_id=...,
**fields)`` (a sync or async context manager). Observability must never take
a turn down, so every failure here is logged and swallowed — except the work inside a span,
whose own exceptions (cancellation included) always propagate untouched.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["Observer"]

log = logging.getLogger("fermix.agent")


class Observer:
    """Wraps an optional ``emit`` callable and an optional tracer behind safe calls."""

    def __init__(self, emit: Callable[..., object] | None, tracer: object | None) -> None:
        self._emit = emit
        self._tracer = tracer
        # Looked up once: a record is written several times a turn. A tracer that takes the
        # fields as a mapping (``Tracer.record_fields``) gets this call's dict as it is.
        self._record_fields = getattr(tracer, "record_fields", None)
        self._record = None if self._record_fields else getattr(tracer, "record", None)

    def emit(self, event: str, /, **data: Any) -> None:
        """``emit(event, **data)``; never pass a ``name`` key — the runtime's emit takes it."""
        if self._emit is None:
            return
        try:
            self._emit(event, **data)
        except Exception:
            log.exception("telemetry emit %s failed", event)

    def record(self, kind: str, /, *, session_id: str, **fields: Any) -> None:
        try:
            if self._record_fields is not None:
                self._record_fields(kind, fields, session_id=session_id)
            elif self._record is not None:
                self._record(kind, session_id=session_id, **fields)
        except Exception:
            log.exception("trace record %s failed", kind)

    def annotate(self, handle: Any, **fields: Any) -> None:
        """Add late fields to an open span when the tracer's span handle takes them."""
        setter = getattr(handle, "set", None)
        if not callable(setter):
            return
        try:
            setter(**fields)
        except Exception:
            log.exception("trace span annotation failed")

    @asynccontextmanager
    async def span(
        self, kind: str, name: str, *, session_id: str, **fields: Any
    ) -> AsyncIterator[Any]:
        """Open a tracer span around the body; a broken tracer leaves the body running bare."""
        factory = getattr(self._tracer, "span", None)
        if factory is None:
            yield None
            return
        is_async = False
        try:
            manager = factory(kind, name, session_id=session_id, **fields)
            if hasattr(manager, "__aenter__"):
                is_async = True
                handle = await manager.__aenter__()
            else:
                handle = manager.__enter__()
        except Exception:
            log.exception("trace span %s(%s) could not be opened", kind, name)
            yield None
            return
        try:
            yield handle
        except BaseException as exc:
            # Shielded: a cancelled turn must still close its span, and the close must not
            # swallow or replace the cancellation that is on its way out.
            with anyio.CancelScope(shield=True):
                await self._close(manager, is_async, exc)
            raise
        else:
            await self._close(manager, is_async, None)

    async def _close(self, manager: Any, is_async: bool, exc: BaseException | None) -> None:
        info = (type(exc), exc, exc.__traceback__) if exc is not None else (None, None, None)
        try:
            if is_async:
                await manager.__aexit__(*info)
            else:
                manager.__exit__(*info)
        except Exception:
            log.exception("trace span could not be closed")

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
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio

from fermix_core.traces import Span, Tracer

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
        # The JSONL tracer's spans never raise on entry or exit (a failed write is its own
        # business), so the loop can run one as it is instead of behind a guard.
        self._plain_spans = type(tracer) is Tracer

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
        if type(handle) is Span:
            handle.fields.update(fields)
            return
        setter = getattr(handle, "set", None)
        if not callable(setter):
            return
        try:
            setter(**fields)
        except Exception:
            log.exception("trace span annotation failed")

    def span(self, kind: str, name: str, *, session_id: str, **fields: Any) -> Any:
        """``async with`` a tracer span around the body (the handle, or ``None``); a broken
        tracer leaves the body running bare."""
        if self._plain_spans:
            return Span(self._tracer, kind, name, session_id, fields)  # type: ignore[arg-type]
        return _ObservedSpan(self._tracer, kind, name, session_id, fields)


class _ObservedSpan:
    """The async context manager :meth:`Observer.span` returns (a class, not a generator:
    one is opened per tool call)."""

    __slots__ = ("_args", "_is_async", "_manager", "_tracer")

    def __init__(
        self, tracer: object | None, kind: str, name: str, session_id: str, fields: dict[str, Any]
    ) -> None:
        self._tracer = tracer
        self._args = (kind, name, session_id, fields)
        self._manager: Any = None
        self._is_async = False

    async def __aenter__(self) -> Any:
        factory = getattr(self._tracer, "span", None)
        if factory is None:
            return None
        kind, name, session_id, fields = self._args
        try:
            manager = factory(kind, name, session_id=session_id, **fields)
            if hasattr(manager, "__aenter__"):
                handle = await manager.__aenter__()
                self._is_async = True
            else:
                handle = manager.__enter__()
        except Exception:
            log.exception("trace span %s(%s) could not be opened", kind, name)
            return None
        self._manager = manager
        return handle

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if self._manager is None:
            return False
        if exc is None:
            await self._close(None)
        else:
            # Shielded: a cancelled turn must still close its span, and the close must not
            # swallow or replace the cancellation that is on its way out.
            with anyio.CancelScope(shield=True):
                await self._close(exc)
        return False  # the body's exception, if any, propagates untouched

    async def _close(self, exc: BaseException | None) -> None:
        manager, self._manager = self._manager, None
        info = (type(exc), exc, exc.__traceback__) if exc is not None else (None, None, None)
        try:
            if self._is_async:
                await manager.__aexit__(*info)
            else:
                manager.__exit__(*info)
        except Exception:
            log.exception("trace span could not be closed")

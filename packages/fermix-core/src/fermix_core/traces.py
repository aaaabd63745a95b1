"""Local JSONL traces: ``$FERMIX_HOME/traces/YYYY-MM-DD/<type>.jsonl``.

A trace is the one place to look when debugging a turn, so every model call, tool run,
agent event, channel message, error and sandbox decision can be written here. Two rules
shape this module:

* **Best-effort.** A trace write that fails (disk full, a file where the directory should
  be) is logged once per kind of failure and dropped; it never raises into a turn.
* **Body-free unless asked.** With content capture off (the default) a record keeps
  names, ids, counts, sizes and durations only: a *content field* (see
  :data:`CONTENT_FIELDS`, or any value wrapped in :class:`Body`) is replaced by its size,
  and other strings are capped at :data:`MAX_FIELD_CHARS`. ``FERMIX_TRACE_CONTENT=1`` (or
  ``FERMIX_OPIK_ENABLED=1`` without ``FERMIX_TRACE_CONTENT=0``) turns capture on, and then
  bodies are written whole — no truncation at all, because a trace that cut the one line
  that mattered would be useless.
* **Never a secret.** Capture on or off, every string of a record passes through the log
  redactor (:func:`fermix_core.logs.redact`: vendor token shapes plus the exact values of
  the configured secrets) before it is cut or written, so a provider error that echoes a
  key, or a captured request carrying one, stores ``[REDACTED:<vendor>]`` instead. (Span
  ids are the exception: random hex made here from no input, written as made.)

Each record is one line written with a single ``write(2)`` on an ``O_APPEND`` descriptor
under a lock, so concurrent writers (threads, or the CLI and the daemon) never interleave
within a line. That write is synchronous: a few hundred bytes land in the page cache in
microseconds and nothing is fsynced, so callers on the event loop do not offload it. The
date in the path is the UTC date of the record.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import json
import logging
import os
import random
import secrets
import threading
import time
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any

from fermix_core.home import FermixHome
from fermix_core.logs import redact, redact_short, redaction_memo, remember

__all__ = [
    "CONTENT_ENV",
    "CONTENT_FIELDS",
    "MAX_FIELD_CHARS",
    "OPIK_ENV",
    "TRACE_TYPES",
    "Body",
    "Span",
    "Tracer",
    "content_capture_from_env",
    "cron_session_id",
    "main_session_id",
    "subagent_session_id",
]

log = logging.getLogger("fermix.traces")

TRACE_TYPES: tuple[str, ...] = (
    "llm_call",
    "tool_exec",
    "agent_event",
    "channel_msg",
    "error",
    "sandbox_event",
)

CONTENT_ENV = "FERMIX_TRACE_CONTENT"
OPIK_ENV = "FERMIX_OPIK_ENABLED"

#: Field names whose values are bodies: message text, prompts, tool arguments and results.
CONTENT_FIELDS = frozenset(
    {
        "arguments",
        "body",
        "content",
        "details",
        "input",
        "messages",
        "output",
        "prompt",
        "request",
        "response",
        "result",
        "system_prompt",
        "text",
    }
)

#: With capture off, a non-content string longer than this is cut.
MAX_FIELD_CHARS = 256
_MAX_ITEMS = 32
_MAX_DEPTH = 4
_MAX_ERROR_CHARS = 500

_current_span: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fermix_trace_span", default=None
)
#: Span ids need to be unique, not secret: a pseudo-random generator of the module's own,
#: seeded from the OS at import (no system call per span, unlike ``secrets``), and seeded
#: afresh in a forked child so parent and child never share a sequence.
_span_ids = random.Random()  # noqa: S311 - ids, not secrets
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_span_ids.seed)


# --------------------------------------------------------------------------- session ids


def main_session_id(number: int) -> str:
    """``main-<n>``: a main-agent session (``n`` from ``ConversationStore.next_session_number``)."""
    return f"main-{number}"


def subagent_session_id() -> str:
    """A random hex id; record ``parent_session_id`` alongside it to link the parent."""
    return secrets.token_hex(8)


def cron_session_id(job: str, ts: float | None = None) -> str:
    """``cron_<job>_<unix seconds>`` for one scheduled-job run."""
    return f"cron_{job}_{int(time.time() if ts is None else ts)}"


def content_capture_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether bodies are captured, from ``FERMIX_TRACE_CONTENT`` / ``FERMIX_OPIK_ENABLED``."""
    env = os.environ if environ is None else environ
    explicit = env.get(CONTENT_ENV, "").strip().lower()
    if explicit in {"1", "true", "yes", "on"}:
        return True
    if explicit in {"0", "false", "no", "off"}:
        return False
    return env.get(OPIK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


# --------------------------------------------------------------------------- values


@dataclasses.dataclass(frozen=True, slots=True)
class Body:
    """Marks a value as content whatever its field is called (``query=Body(q)``)."""

    value: Any


def _plain(value: Any) -> Any:
    """A JSON-ready, redacted form of *value* without any bounding (pydantic, dataclasses)."""
    if isinstance(value, Body):
        return _plain(value.value)
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if hasattr(value, "model_dump") and callable(value.model_dump):
        try:
            dumped = value.model_dump(mode="json")
        except Exception:  # a model that cannot dump still gets a line
            return redact(repr(value))
        return _plain(dumped)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {redact(str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return {"bytes": len(value)}
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, BaseException):
        return _error_fields(value, bounded=False)
    return redact(repr(value))


def _size(value: Any) -> dict[str, Any]:
    """What a body is replaced with when capture is off: its shape, never its text."""
    if isinstance(value, Body):
        value = value.value
    shape: dict[str, Any] = {"omitted": True}
    if isinstance(value, list | tuple):
        shape["items"] = len(value)
    shape["chars"] = _measure(value)
    return shape


def _omitted(body: Any) -> str:
    """``_size(body)`` as the encoder spells it, for a *body* that is not a :class:`Body`."""
    chars = _measure(body)
    if isinstance(body, list | tuple):
        return f'{{"omitted":true,"items":{len(body)},"chars":{chars}}}'
    return f'{{"omitted":true,"chars":{chars}}}'


def _measure(value: Any, depth: int = 0) -> int:
    """Characters of text (and bytes of binary) in *value*, without serializing it.

    Walking instead of ``json.dumps`` matters: a history carrying a photo would otherwise be
    base64-encoded and dumped on every model call just to be counted.
    """
    kind = type(value)
    if kind is str:
        return len(value)
    if kind is dict and depth <= 32:  # tool arguments: counted without the general checks
        total = 0
        for item in value.values():
            total += _measure(item, depth + 1)
        return total
    if kind is int or kind is float or kind is bool or value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, bool | int | float) or depth > 32:
        return 0
    if hasattr(value, "model_dump") and callable(value.model_dump):
        try:
            return _measure(value.model_dump(), depth + 1)
        except Exception:
            return len(repr(value))
    if isinstance(value, Mapping):
        return sum(_measure(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return sum(_measure(v, depth + 1) for v in value)
    return len(str(value))


#: Exact types a bounded value passes through unchanged (subclasses take the long way).
_SCALARS = frozenset({int, float, bool, type(None)})


def _bounded(value: Any, depth: int = 0) -> Any:
    """Cap strings, containers and depth of a non-content value."""
    kind = type(value)
    if kind is str:  # most fields: checked first, as below
        value = redact_short(value)
        if len(value) > MAX_FIELD_CHARS:
            return f"{value[:MAX_FIELD_CHARS]}…[+{len(value) - MAX_FIELD_CHARS} chars]"
        return value
    if kind in _SCALARS:
        return value
    if isinstance(value, Body):
        return _size(value.value)
    if isinstance(value, str):
        value = redact_short(value)  # before cutting: half a key is still a leak
        if len(value) > MAX_FIELD_CHARS:
            return f"{value[:MAX_FIELD_CHARS]}…[+{len(value) - MAX_FIELD_CHARS} chars]"
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, BaseException):
        return _error_fields(value, bounded=True)
    if depth >= _MAX_DEPTH:
        return _size(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= _MAX_ITEMS:
                out["…"] = f"+{len(value) - _MAX_ITEMS} keys"
                break
            key = redact(str(k))
            out[key] = _size(v) if key in CONTENT_FIELDS else _bounded(v, depth + 1)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        out_list = [_bounded(v, depth + 1) for v in items[:_MAX_ITEMS]]
        if len(items) > _MAX_ITEMS:
            out_list.append(f"…+{len(items) - _MAX_ITEMS} items")
        return out_list
    plain = _plain(value)
    if plain is value or isinstance(plain, str):
        return _bounded(str(plain), depth + 1)
    return _bounded(plain, depth + 1)


def _error_fields(exc: BaseException, *, bounded: bool) -> dict[str, Any]:
    message = redact(str(exc))
    if bounded and len(message) > _MAX_ERROR_CHARS:
        message = f"{message[:_MAX_ERROR_CHARS]}…"
    fields: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    kind = getattr(exc, "kind", None)
    if kind is not None:
        fields["kind"] = str(getattr(kind, "value", kind))
    return fields


# --------------------------------------------------------------------------- tracer

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr)
#: The encoder's own string escaper (the C one where available): what ``_ENCODER`` uses.
_quote = json.encoder.encode_basestring
#: The last second formatted: (whole second, ``{"ts":"YYYY-MM-DDTHH:MM:SS.``, "YYYY-MM-DD").
_second: tuple[int, str, str] = (-1, "", "")
#: ``"000"`` … ``"999"``: the milliseconds of a timestamp.
_MILLIS = tuple(f"{n:03d}" for n in range(1000))
#: ``Z","type":"<type>"`` per trace type: the rest of a record's fixed head.
_HEADS = {t: f'Z","type":{_quote(t)}' for t in TRACE_TYPES}
#: Small counts (token counts, iterations, attachments) as JSON, spelled once.
_INTS = {n: str(n) for n in range(1024)}
#: Field names already spelled as JSON object keys (``"name":``); names come from code.
_KEYS: dict[str, str] = {}
_MAX_KEYS = 4096


def _formatted(now: float) -> tuple[int, str, str]:
    global _second
    whole = int(now)
    cached = _second
    if cached[0] != whole:
        moment = datetime.fromtimestamp(whole, UTC)
        cached = _second = (
            whole,
            '{"ts":"' + moment.strftime("%Y-%m-%dT%H:%M:%S."),
            moment.strftime("%Y-%m-%d"),
        )
    return cached


def _stamp(now: float) -> str:
    """``2026-01-31T12:00:00.123Z``: UTC, milliseconds (formatted once per second)."""
    return f"{_formatted(now)[1][7:]}{_MILLIS[int((now % 1) * 1000)]}Z"


def _key(name: str) -> str:
    """``,"name":`` — a field's separator and key, spelled once per name (names come from code)."""
    spelled = _KEYS.get(name)
    if spelled is None:
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        spelled = _KEYS[name] = "," + _quote(name) + ":"
    return spelled


def _cut_quoted(text: str) -> str:
    """A redacted non-content string, cut at :data:`MAX_FIELD_CHARS`, as JSON."""
    if len(text) > MAX_FIELD_CHARS:
        text = f"{text[:MAX_FIELD_CHARS]}…[+{len(text) - MAX_FIELD_CHARS} chars]"
    return _quote(text)


#: Short non-content strings as they are written (redacted, cut, quoted): trace fields repeat
#: the same event names, channels, models and statuses on every turn. The redactor empties
#: it whenever the known secrets change.
_QUOTED = redaction_memo()


def _string(text: str) -> str:
    """What a non-content ``str`` field is written as (redacted before it is cut: half a key
    is still a leak); remembered for short texts."""
    quoted = _QUOTED.get(text)
    if quoted is None:
        quoted = remember(_QUOTED, text, _cut_quoted)
    return quoted


def _encoded(value: Any, key: str, capture: bool) -> str:
    """One field's value as JSON, exactly as ``_ENCODER`` spells it inside the record.

    The common shapes (exact ``str``/``int``/``float``/``bool``/``None``, a string body)
    are spelled here without building an intermediate object; everything else goes through
    :func:`_plain`/:func:`_size`/:func:`_bounded` and the encoder.
    """
    kind = type(value)
    if capture:
        if kind is str:
            return _quote(redact(value))
        return _ENCODER.encode(_plain(value))
    if key in CONTENT_FIELDS or isinstance(value, Body):
        body = value.value if isinstance(value, Body) else value
        if type(body) is str:
            return f'{{"omitted":true,"chars":{len(body)}}}'
        return _ENCODER.encode(_size(value))
    if kind is str:
        return _string(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float:
        spelled = float.__repr__(value)
        if spelled[-1] not in "nf":  # nan, inf, -inf: the encoder's NaN/Infinity below
            return spelled
    return _ENCODER.encode(_bounded(value))


class _Spelled:
    """A value the tracer made itself and spelled as JSON already: a span's id.

    Span ids are random hex from :data:`_span_ids`, not derived from any input, so they
    carry nothing to redact and are written as they are (a redactor pass over a fresh id
    cost more than the rest of its field, and a fresh id is never remembered).
    """

    __slots__ = ("json",)

    def __init__(self, json: str) -> None:
        self.json = json


def _spelled_id(span_id: str | None) -> _Spelled | None:
    return None if span_id is None else _Spelled(_quote(span_id))


def _renamed(fields: Mapping[str, Any], with_session: bool) -> dict[str, Any]:
    """*fields* with names the record's head uses renamed ``field_<name>``.

    A renamed field that meets a field already so named replaces its value in place, as
    building the record as one dict did.
    """
    taken = {"ts", "type", "session_id"} if with_session else {"ts", "type"}
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key in taken or key in out:
            key = f"field_{key}"
        out[key] = value
    return out


class Tracer:
    """Writes trace records for one ``FERMIX_HOME``; safe to share across tasks and threads.

    *capture_content* ``None`` reads the environment once, here (see
    :func:`content_capture_from_env`).
    """

    def __init__(
        self,
        home: FermixHome | Path | str,
        *,
        capture_content: bool | None = None,
    ) -> None:
        self.home = home if isinstance(home, FermixHome) else FermixHome(Path(home))
        self.capture_content = (
            content_capture_from_env() if capture_content is None else capture_content
        )
        self._lock = threading.Lock()
        #: Open descriptors by trace type, all of the UTC day ``_day`` (day number since the
        #: epoch ``_day_number``; -1 before the first record).
        self._fds: dict[str, int] = {}
        self._day_number = -1
        self._day = ""
        self._failures: set[tuple[str, str]] = set()
        #: The session id last written and the record head spelled with it.
        self._session: tuple[object, str] = (None, "")

    # ------------------------------------------------------------------ writing

    def record(self, type: str, *, session_id: str | None = None, **fields: Any) -> None:
        """Append one record of *type*; never raises."""
        self.record_fields(type, fields, session_id=session_id)

    def record_fields(
        self, type: str, fields: Mapping[str, Any], *, session_id: str | None = None
    ) -> None:
        """:meth:`record` with the fields as a mapping (written in its order, not kept).

        For callers that already hold the fields in a dict (a ``**fields`` wrapper): passing
        it on saves unpacking it into keywords and packing it again.
        """
        try:
            now = time.time()
            line = self._line(type, now, session_id, fields)
            with self._lock:  # one write(2) per record, under the lock
                if int(now) // 86400 != self._day_number:  # a new UTC day: new files
                    self._rollover(now)
                fd = self._fds.get(type)
                if fd is None:
                    fd = self._open(type)
                written = os.write(fd, line)
                if written < len(line):  # a short write (a full disk): finish the line
                    view = memoryview(line)[written:]
                    while view:
                        view = view[os.write(fd, view) :]
        except Exception as exc:
            self._failed(type, exc)

    def span(self, type: str, name: str, *, session_id: str | None = None, **fields: Any) -> Span:
        """A ``with``/``async with`` block recorded as one *type* record when it ends.

        The record carries ``name`` (for ``tool_exec`` spans: exactly the tool's name),
        ``duration_ms``, ``status`` (``ok``, ``error`` or ``cancelled``), the exception's
        type and message on failure, and ``span_id``/``parent_span_id`` so nested spans
        reassemble into a tree. Exceptions always propagate.
        """
        return Span(self, type, name, session_id, fields)

    def error(self, exc: BaseException, *, session_id: str | None = None, **fields: Any) -> None:
        """Record *exc* under the ``error`` type."""
        self.record("error", session_id=session_id, error=exc, **fields)

    def close(self) -> None:
        """Close cached file descriptors; the tracer reopens them if used again."""
        with self._lock:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _line(
        self, trace_type: str, now: float, session_id: str | None, fields: Mapping[str, Any]
    ) -> bytes:
        """The record as one JSON line, byte for byte what encoding it as one dict gave:
        ``ts``, ``type``, ``session_id`` when given, then the fields in order."""
        head = _HEADS.get(trace_type)
        if head is None:
            known = ", ".join(TRACE_TYPES)
            raise ValueError(f"unknown trace type {trace_type!r}; use one of {known}")
        second = _second
        if second[0] != int(now):
            second = _formatted(now)
        if session_id is not None:
            # A turn's records all carry its session id: the last one spelled is kept.
            spelled = self._session
            if spelled[0] is not session_id:
                quoted = (
                    _quote(session_id) if type(session_id) is str else _ENCODER.encode(session_id)
                )
                spelled = self._session = (session_id, ',"session_id":' + quoted)
            parts = [second[1], _MILLIS[int((now % 1) * 1000)], head, spelled[1]]
            add = parts.append
            if "session_id" in fields or "ts" in fields or "type" in fields:
                fields = _renamed(fields, True)
        else:
            parts = [second[1], _MILLIS[int((now % 1) * 1000)], head]
            add = parts.append
            if "ts" in fields or "type" in fields:
                fields = _renamed(fields, False)
        if self.capture_content:
            for key, value in fields.items():
                add(_KEYS.get(key) or _key(key))
                add(value.json if type(value) is _Spelled else _encoded(value, key, True))
        else:
            keys = _KEYS
            quoted = _QUOTED
            content = CONTENT_FIELDS
            ints = _INTS
            for key, value in fields.items():
                add(keys.get(key) or _key(key))
                kind = type(value)
                # The common shapes inline, most frequent first; _encoded spells them alike.
                if key in content:
                    body = value.value if kind is Body else value
                    if type(body) is str:  # a text body: its size only, as _encoded spells it
                        add(f'{{"omitted":true,"chars":{len(body)}}}')
                    elif kind is Body or not isinstance(value, Body):
                        add(_omitted(body))  # tool arguments, results that are not text
                    else:
                        add(_encoded(value, key, False))
                elif kind is str:
                    add(quoted.get(value) or _string(value))
                elif kind is int:
                    add(ints.get(value) or str(value))  # as the encoder spells it
                elif value is None:
                    add("null")
                elif kind is bool:
                    add("true" if value else "false")
                elif kind is float and (spelled := str(value))[-1] not in "nf":
                    add(spelled)  # durations; nan and the infinities go the encoder's way
                elif kind is Body:  # a body under any name: as above
                    body = value.value
                    if type(body) is str:
                        add(f'{{"omitted":true,"chars":{len(body)}}}')
                    else:
                        add(_omitted(body))
                elif kind is _Spelled:
                    add(value.json)
                else:
                    add(_encoded(value, key, False))
        add("}\n")
        return "".join(parts).encode("utf-8", "replace")

    def _rollover(self, now: float) -> None:
        # Called with the lock held: descriptors of the previous day are closed.
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._day_number = int(now) // 86400
        self._day = _formatted(now)[2]

    def _open(self, trace_type: str) -> int:
        # Called with the lock held.
        directory = self.home.ensure_dir(f"traces/{self._day}")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(directory / f"{trace_type}.jsonl", flags, 0o600)
        self._fds[trace_type] = fd
        return fd

    def _failed(self, trace_type: str, exc: BaseException) -> None:
        kind = (str(trace_type), exc.__class__.__name__)
        with self._lock:
            first = kind not in self._failures
            self._failures.add(kind)
        if first:
            log.warning(
                "trace write for %r failed (%s: %s); further failures of this kind are not logged",
                trace_type,
                exc.__class__.__name__,
                exc,
            )


class Span:
    """One timed unit of work; use :meth:`Tracer.span` to make one."""

    def __init__(
        self,
        tracer: Tracer,
        type: str,
        name: str,
        session_id: str | None,
        fields: dict[str, Any],
    ) -> None:
        self.tracer = tracer
        self.type = type
        self.name = name
        self.session_id = session_id
        self.fields = dict(fields)
        self.span_id = f"{_span_ids.getrandbits(64):016x}"
        self.parent_span_id: str | None = None
        self._started = 0.0
        self._started_wall = 0.0
        self._token: contextvars.Token[str | None] | None = None

    def set(self, **fields: Any) -> None:
        """Add fields learnt while the span runs (tokens used, result size, output)."""
        self.fields.update(fields)

    def __enter__(self) -> Span:
        self.parent_span_id = _current_span.get()
        self._token = _current_span.set(self.span_id)
        self._started_wall = time.time()
        self._started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        duration_ms = (time.perf_counter() - self._started) * 1000.0
        if self._token is not None:
            try:
                _current_span.reset(self._token)
            except ValueError:  # exited in another context; the next span still parents right
                _current_span.set(self.parent_span_id)
            self._token = None
        # The span's fields first, then its own keys (a field of the same name keeps its
        # place and takes the span's value, as ``dict.update`` would).
        payload = {
            **self.fields,
            "name": self.name,
            "span_id": _spelled_id(self.span_id),
            "parent_span_id": _spelled_id(self.parent_span_id),
            "started_at": round(self._started_wall, 3),
            "duration_ms": round(duration_ms, 3),
            "status": "ok",
        }
        payload.pop("session_id", None)
        if exc is not None:
            payload["status"] = "error" if isinstance(exc, Exception) else "cancelled"
            payload["error"] = exc
        self.tracer.record_fields(self.type, payload, session_id=self.session_id)
        return False

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return self.__exit__(exc_type, exc, tb)

"""Turning HTTP failures into classified :class:`~fermix_core.provider.ProviderError`s.

Every wire shares these rules so that retry and failover see one vocabulary. Messages
quote the server's own sentence where there is one (a provider outage should read as the
provider's words, not as a Fermix defect) and never include headers or request bodies.
"""

from __future__ import annotations

import errno
import json
import re
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fermix_core.provider import ErrorKind, ProviderError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

_CONTEXT = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long|"
    r"reduce the length|exceeds the context|input is too long",
    re.I,
)
_QUOTA = re.compile(r"insufficient_quota|quota|billing|credit balance|usage limit", re.I)
_OVERLOAD = re.compile(
    r"overload|server_error|capacity|temporarily unavailable|try again later", re.I
)
#: A 404 that is about the model, not about the path (an unknown or unpulled model).
_MODEL = re.compile(r"model", re.I)
_FILTER = re.compile(r"content[_ ]filter|content[_ ]policy|safety system", re.I)
_RESET_KEYS = ("resets_in_seconds", "reset_in_seconds", "retry_after", "retry_after_seconds")
_MAX_QUOTED = 300


def server_sentence(body: str) -> str:
    """The human sentence in an error body (``error.message`` / ``message`` / ``detail``)."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        text = body.strip()
        return text[:_MAX_QUOTED] if text and "<html" not in text.lower() else ""
    return _find_message(data)[:_MAX_QUOTED]


def _find_message(data: Any) -> str:
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping):
            found = _find_message(error)
            if found:
                return found
        if isinstance(error, str) and error.strip():
            return error.strip()
        for key in ("message", "detail", "error_description"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
            # Validation errors (Mistral, FastAPI-style gateways) nest the sentence as
            # ``{"message": {"detail": [{"loc": [...], "msg": "..."}]}}``.
            found = _find_message(value) if isinstance(value, Mapping) else _detail_list(value)
            if found:
                return found
    return ""


def _detail_list(value: Any) -> str:
    """``[{"loc": ["body", "x"], "msg": "..."}]`` as ``"body.x: ..."`` sentences."""
    if not isinstance(value, list):
        return ""
    sentences = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("msg"), str):
            continue
        loc = item.get("loc")
        where = ".".join(str(p) for p in loc) if isinstance(loc, list) and loc else ""
        sentences.append(f"{where}: {item['msg']}" if where else item["msg"])
    return "; ".join(sentences)


def retry_after(headers: Mapping[str, str], body: str, *, now: float | None = None) -> float | None:
    """Seconds until the limit resets, from standard headers, vendor headers or the body."""
    now = time.time() if now is None else now
    value = headers.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            import email.utils  # an HTTP date: rare, and the email package is large

            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - now)
    for name, raw in headers.items():
        lname = name.lower()
        vendor_reset = lname.startswith("anthropic-ratelimit") and lname.endswith("-reset")
        if vendor_reset or lname.startswith("x-ratelimit-reset"):
            seconds = _reset_value(raw, now)
            if seconds is not None:
                return seconds
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return None
    return _reset_in_body(data, now)


def _reset_value(raw: str, now: float) -> float | None:
    raw = raw.strip()
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?", raw)
    if match and any(match.groups()):
        h, m, s, ms = match.groups()
        return int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0) + int(ms or 0) / 1000
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    from datetime import datetime

    try:
        return max(0.0, datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() - now)
    except ValueError:
        return None


def _reset_in_body(data: Any, now: float) -> float | None:
    if isinstance(data, Mapping):
        for key in _RESET_KEYS:
            value = data.get(key)
            if isinstance(value, int | float):
                return max(0.0, float(value))
        for key in ("resets_at", "reset_at"):
            value = data.get(key)
            if isinstance(value, int | float):
                return max(0.0, float(value) - now)
            if isinstance(value, str):
                seconds = _reset_value(value, now)
                if seconds is not None:
                    return seconds
        for value in data.values():
            if isinstance(value, Mapping):
                found = _reset_in_body(value, now)
                if found is not None:
                    return found
    return None


def error_from_response(
    provider: str, status: int, headers: Mapping[str, str], body: str, *, url: str | None = None
) -> ProviderError:
    """Classify a non-2xx response. *url* is the endpoint that answered."""
    sentence = server_sentence(body)
    text = f"{sentence} {body[:2000]}"
    message = sentence or f"HTTP {status} from {provider}"
    if status == 404 and url and not _MODEL.search(text):
        # Not "no such model": the path itself is not an API, i.e. base_url points elsewhere.
        return ProviderError(
            ErrorKind.INVALID_REQUEST,
            f"no API at {url} — check base_url",
            provider=provider,
            status=status,
            url=url,
        )
    kind: ErrorKind
    wait: float | None = None
    if status in (401, 403):
        kind = ErrorKind.AUTH
    elif status == 429:
        kind = ErrorKind.QUOTA if _QUOTA.search(text) else ErrorKind.RATE_LIMIT
        wait = retry_after(headers, body)
    elif status in (529, 503) or (status >= 500 and _OVERLOAD.search(sentence)):
        kind = ErrorKind.OVERLOADED
        wait = retry_after(headers, body)
    elif status >= 500:
        kind = ErrorKind.SERVER_ERROR
    elif status in (400, 413, 422) and _CONTEXT.search(text):
        kind = ErrorKind.CONTEXT_LENGTH
    elif status == 400 and _FILTER.search(text):
        kind = ErrorKind.CONTENT_FILTER
    elif status == 402:
        kind = ErrorKind.QUOTA
    elif status == 408:
        kind = ErrorKind.TIMEOUT
    else:
        kind = ErrorKind.INVALID_REQUEST
    return ProviderError(
        kind, message, provider=provider, status=status, retry_after_seconds=wait, url=url
    )


#: ``errno`` values meaning this machine has no usable network at all (the host has just
#: woken, the interface is not up yet) rather than that one provider's host is down.
_NETWORK_DOWN_ERRNOS = frozenset({errno.ENETUNREACH, errno.ENETDOWN})
#: Name resolution failing *temporarily* is the same race: the resolver is not reachable.
_NETWORK_DOWN_GAI = frozenset({socket.EAI_AGAIN})


def _network_down(exc: BaseException) -> bool:
    """Whether a connect failure came from a missing network rather than from one host.

    httpx chains the socket error through ``__cause__`` (httpx → httpcore → OSError, and an
    ``OSError("All connection attempts failed")`` above the per-address errors).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return current.errno in _NETWORK_DOWN_GAI
        if isinstance(current, OSError) and current.errno in _NETWORK_DOWN_ERRNOS:
            return True
        current = current.__cause__ or current.__context__
    return False


def error_from_exception(
    provider: str,
    exc: httpx.HTTPError,
    *,
    chunks_seen: int,
    counts_chunks: bool,
    visible_output: bool = False,
    url: str | None = None,
) -> ProviderError:
    """Classify a transport failure. Only a chunk-counting adapter may claim pre-response.

    *url* (the endpoint tried) goes into the connection messages: a wrong base_url is the
    usual reason a provider cannot be reached.
    """
    import httpx  # loaded already: the exception is one of its own

    pre = counts_chunks and chunks_seen == 0
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    at = f" at {url}" if url else ""
    if isinstance(exc, httpx.PoolTimeout):
        kind = ErrorKind.CONNECTION_UNAVAILABLE
        message = f"no connection to {provider}{at} could be opened ({detail})"
    elif isinstance(exc, httpx.ConnectError) and _network_down(exc):
        kind = ErrorKind.CONNECTION_UNAVAILABLE
        message = f"the network is not available to reach {provider}{at} ({detail})"
    elif isinstance(exc, httpx.ConnectError):
        # Refused, reset, no route to that host: one provider's host, not the network.
        kind = ErrorKind.TRANSPORT
        message = f"cannot reach {provider}{at} ({detail})"
    elif isinstance(exc, httpx.TimeoutException):
        kind = ErrorKind.TIMEOUT
        message = f"{provider} did not answer in time ({type(exc).__name__})"
        # A connect timeout happens before any response byte by construction.
        pre = counts_chunks and (chunks_seen == 0 or isinstance(exc, httpx.ConnectTimeout))
    else:
        kind = ErrorKind.TRANSPORT
        message = f"the connection to {provider}{at} broke ({detail})"
    return ProviderError(
        kind, message, provider=provider, pre_response=pre, visible_output=visible_output, url=url
    )

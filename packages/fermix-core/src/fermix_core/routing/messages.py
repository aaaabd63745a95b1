"""What the user is told when a model call fails for good.

A failed turn still owes the sender a reply, and the reply should say whose problem it is
and what to do: a usage limit with the time it resets, a provider outage in the provider's
own words (so it never reads as a Fermix defect), a rejected key with the command that
fixes it. Messages are built from the classified :class:`ProviderError` only, and pass
through the log redactor (token shapes and the configured secrets' values) on the way out:
a provider's error body is not ours to trust with a key.
"""

from __future__ import annotations

import math

from fermix_core.logs import redact
from fermix_core.provider import ErrorKind, ProviderError
from fermix_core.routing.records import NO_PROVIDER_MESSAGE, RoutingError

__all__ = ["format_wait", "user_message"]


def format_wait(seconds: float) -> str:
    """``~N min`` rounded up; ``~1 min`` under a minute; ``~N hours`` from 90 minutes on."""
    seconds = max(float(seconds), 0.0)
    minutes = max(1, math.ceil(seconds / 60))
    if minutes >= 90:
        hours = math.ceil(minutes / 60)
        return f"~{hours} hours"
    return f"~{minutes} min"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else f"{text}."


def user_message(error: BaseException, *, label: str | None = None) -> str:
    """A reply for the sender explaining *error* and the next step.

    *label* is the provider's display name (``ProviderSpec.label``); without it the
    provider's config name from the error is used. The text goes through the log
    redactor: a provider's error body may quote a key back, and the reply may land in a
    group chat.
    """
    return redact(_explain(error, label))


def _explain(error: BaseException, label: str | None) -> str:
    if isinstance(error, RoutingError):
        text = str(error) or NO_PROVIDER_MESSAGE
        return _sentence(text[:1].upper() + text[1:])
    if not isinstance(error, ProviderError):
        return "Something went wrong while calling the model — try again."
    name = error.provider or "the provider"
    who = label or name
    kind = error.kind
    detail = error.message.strip()

    if kind in (ErrorKind.RATE_LIMIT, ErrorKind.QUOTA):
        if error.retry_after_seconds is not None:
            return f"{who} usage limit — try again in {format_wait(error.retry_after_seconds)}."
        if kind is ErrorKind.QUOTA:
            return (
                f"{who} usage limit reached — check the plan or billing for this account, "
                "or try again later."
            )
        return f"{who} is rate-limiting requests right now — try again in a minute."
    if kind in (ErrorKind.OVERLOADED, ErrorKind.SERVER_ERROR):
        if detail:
            return f"{who} says: {_sentence(detail)} (a provider-side problem — try again shortly)"
        return f"{who} is unavailable right now (a provider-side problem) — try again shortly."
    if kind is ErrorKind.AUTH:
        return (
            f"The API key for {who} was rejected — run `fermix setup` to enter a working key "
            f"(or set it in the environment), then restart the daemon."
        )
    if kind is ErrorKind.OAUTH:
        return (
            f"The {who} login was rejected even after refreshing it — run "
            f"`fermix auth login --provider {name}` to sign in again."
        )
    if kind is ErrorKind.CONTEXT_LENGTH:
        return (
            f"This conversation no longer fits in {who}'s context window — send /compact to "
            "summarise it, or /new to start fresh."
        )
    if kind is ErrorKind.TIMEOUT:
        return f"{who} did not answer in time — try again."
    if kind in (ErrorKind.TRANSPORT, ErrorKind.CONNECTION_UNAVAILABLE):
        if error.url:
            return (
                f"Could not reach {who} at {error.url} (network problem) — check the "
                f"connection and [fermix_core.providers.{name}] base_url, then try again."
            )
        return f"Could not reach {who} (network problem) — check the connection and try again."
    if kind is ErrorKind.CONTENT_FILTER:
        return f"{who} declined to answer this (content filter) — rephrase the request."
    if kind is ErrorKind.UNSUPPORTED_INPUT:
        return _sentence(detail) if detail else f"{who} cannot take this input."
    if kind is ErrorKind.INVALID_REQUEST:
        if error.status == 404 and error.url and detail.startswith("no API at "):
            return (
                f"There is no {who} API at {error.url} — check [fermix_core.providers.{name}] "
                "base_url (`fermix config get` shows it)."
            )
        return f"{who} rejected the request: {_sentence(detail or 'no reason given')}"
    return f"{who} failed: {_sentence(detail or 'no reason given')} Try again."

"""The OpenAI Responses wire, shared by ``openai``, ``openai_codex`` and ``xai``.

Three providers speak this shape with small dialect differences (Codex always streams and
needs ``store: false``; Grok takes ``system`` turns and rejects some schema enums), so the
wire is one adapter base with hooks rather than three copies of the parsing rules.

The rules that matter most are about streams that do not end cleanly, because each one is
read differently by retry and failover:

* a stream that *declared* its failure (``response.failed`` / ``response.incomplete`` /
  ``error``) with nothing generated becomes a classified error quoting the server's own
  sentence, so a provider outage reads as the provider's words;
* a stream cut with no declared reason is a transport close (retryable on the same route);
* a stream that delivered output but never said it finished still returns that output,
  with a warning — output items stand on their own, and discarding them would kill a
  continuation that has no retry;
* a 200 that produced no output at all is never read as an empty answer — unless the
  response says it *completed*: then the model finished normally and said nothing, and the
  empty turn goes back to the agent loop, which answers the honest "try again" and commits
  nothing, as on the other wires.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, ClassVar

from fermix_core.messages import ImagePart, Message, TextPart, ToolCall, ToolDefinition, Turn, Usage
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    ProviderError,
    ProviderSettings,
    StreamEvent,
    StreamEventKind,
)
from fermix_core.specs import ProviderSpec
from pydantic import ValidationError

from fermix_providers.catalog import EffortError, clamp_effort
from fermix_providers.http import HttpProvider, SSEEvent, StreamStats, Timeouts
from fermix_providers.http.errors import retry_after
from fermix_providers.wires.schema import portable_schema

__all__ = [
    "OAuthBearer",
    "ResponseStream",
    "ResponsesProvider",
    "declared_error",
    "decode_event",
    "function_tools",
    "input_items",
    "parse_response",
    "split_instructions",
    "strip_slash_enums",
    "token_source",
]

log = logging.getLogger("fermix.providers.responses")

# --------------------------------------------------------------------------- request


def split_instructions(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """Leading system messages become ``instructions``; the rest stays conversation.

    The wire has a dedicated field for the system prompt, and keeping it there (rather than
    as an input item) is what prompt caching keys on.
    """
    index = 0
    while index < len(messages) and messages[index].role == "system":
        index += 1
    text = "\n\n".join(m.text for m in messages[:index] if m.text.strip())
    return text, list(messages[index:])


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "input_image", "image_url": part.url or part.data_url()}


def _user_content(parts: Iterable[TextPart | ImagePart]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            content.append(_image(part))
        elif part.text:
            content.append({"type": "input_text", "text": part.text})
    return content


def input_items(
    messages: Sequence[Message], *, provider: str, system_role: str = "developer"
) -> list[dict[str, Any]]:
    """Encode history as Responses input items.

    A tool result's images cannot ride in ``function_call_output``, so the output carries a
    placeholder and the pictures follow in one user message after the run of tool outputs
    (keeping the outputs contiguous, as the model produced the calls).
    """
    items: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        if pending:
            items.append({"type": "message", "role": "user", "content": list(pending)})
            pending.clear()

    for message in messages:
        if message.role != "tool":
            flush()
        if message.role == "system":
            if message.text.strip():
                text = {"type": "input_text", "text": message.text}
                items.append({"type": "message", "role": system_role, "content": [text]})
        elif message.role == "user":
            content = _user_content(message.content)
            if content:
                items.append({"type": "message", "role": "user", "content": content})
        elif message.role == "assistant":
            if message.images:
                raise ProviderError(
                    ErrorKind.UNSUPPORTED_INPUT,
                    "an assistant message carries an image, which the Responses wire cannot "
                    "replay; move the picture into a user message",
                    provider=provider,
                )
            if message.text.strip():
                text = {"type": "output_text", "text": message.text}
                items.append({"type": "message", "role": "assistant", "content": [text]})
            for call in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    }
                )
        else:
            result = message.tool_result
            assert result is not None  # guaranteed by Message validation
            images = [p for p in result.content if isinstance(p, ImagePart)]
            output = result.text or ("" if images else "(no output)")
            if result.is_error:
                output = f"Tool error: {output}"
            if images:
                note = f"[{len(images)} image(s) returned; they follow in the next user message]"
                output = f"{output}\n\n{note}" if output else note
                label = f"Image output of tool {result.name} (call {result.call_id}):"
                pending.append({"type": "input_text", "text": label})
                pending.extend(_image(p) for p in images)
            items.append(
                {"type": "function_call_output", "call_id": result.call_id, "output": output}
            )
    flush()
    return items


def function_tools(
    tools: Iterable[ToolDefinition],
    schema: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Tools as non-strict function tools (our schemas are not written for strict mode)."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": schema(portable_schema(tool.parameters))
            if schema
            else portable_schema(tool.parameters),
            "strict": False,
        }
        for tool in tools
    ]


def strip_slash_enums(schema: Any) -> Any:
    """A copy of *schema* without string enum values that contain ``/``.

    Grok's schema validator rejects such values. An enum left empty is dropped entirely
    (an empty enum would forbid every value).
    """
    if isinstance(schema, list):
        return [strip_slash_enums(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "enum" and isinstance(value, list):
            kept = [v for v in value if not (isinstance(v, str) and "/" in v)]
            if kept:
                cleaned[key] = kept
        else:
            cleaned[key] = strip_slash_enums(value)
    return cleaned


# --------------------------------------------------------------------------- response

_CONTEXT = re.compile(
    r"context[_ ]length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long|exceeds the context",
    re.I,
)
_QUOTA = re.compile(r"insufficient_quota|quota|usage[_ ]limit|usage_not_included|billing", re.I)
_RATE = re.compile(r"rate[_ ]limit|too many requests|slow_down", re.I)
_FILTER = re.compile(r"content[_ ]filter|content[_ ]policy|usage policy|flagged|safety", re.I)
_OVERLOAD = re.compile(
    r"overload|server_error|server error|capacity|temporarily unavailable|unavailable|"
    r"try again later",
    re.I,
)
_INVALID = re.compile(r"invalid|unsupported|not supported|not found|does not exist", re.I)
_TRY_AGAIN = re.compile(r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)\b")


def _wait_hint(error: Mapping[str, Any], sentence: str) -> float | None:
    seconds = retry_after({}, json.dumps(error, default=str))
    if seconds is not None:
        return seconds
    match = _TRY_AGAIN.search(sentence)
    if not match:
        return None
    value, unit = float(match.group(1)), match.group(2)
    if unit == "ms":
        return value / 1000
    return value * 60 if unit.startswith("m") else value


def declared_error(
    provider: str,
    error: Mapping[str, Any] | None,
    *,
    visible: bool = False,
) -> ProviderError:
    """Classify a failure the server declared in-band, quoting its sentence verbatim."""
    error = error if isinstance(error, Mapping) else {}
    nested = error.get("error")
    if isinstance(nested, Mapping):
        error = nested
    code = str(error.get("code") or error.get("type") or "").strip()
    sentence = str(error.get("message") or "").strip()
    text = f"{code} {sentence}"
    wait: float | None = None
    if _CONTEXT.search(text):
        kind = ErrorKind.CONTEXT_LENGTH
    elif _QUOTA.search(text):
        kind, wait = ErrorKind.QUOTA, _wait_hint(error, sentence)
    elif _RATE.search(text):
        kind, wait = ErrorKind.RATE_LIMIT, _wait_hint(error, sentence)
    elif _FILTER.search(text):
        kind = ErrorKind.CONTENT_FILTER
    elif _OVERLOAD.search(text):
        kind, wait = ErrorKind.OVERLOADED, _wait_hint(error, sentence)
    elif _INVALID.search(code):
        kind = ErrorKind.INVALID_REQUEST
    else:
        # A failure the server owned up to without saying why: treat it as its fault.
        kind = ErrorKind.SERVER_ERROR
    message = sentence or (
        f"{provider} reported the response failed"
        + (f" ({code})" if code else " without giving a reason")
        + "; try again, and if it persists check the provider's status page"
    )
    return ProviderError(
        kind, message, provider=provider, retry_after_seconds=wait, visible_output=visible
    )


#: ``incomplete_details.reason`` -> (kind, what happened and what to do).
_INCOMPLETE = {
    "content_filter": (
        ErrorKind.CONTENT_FILTER,
        "its content filter withheld the reply; rephrase the request",
    ),
    "max_output_tokens": (
        ErrorKind.INVALID_REQUEST,
        "it used its whole output budget (max_output_tokens); lower reasoning_effort or ask "
        "for less at once",
    ),
}


def _incomplete_error(
    provider: str, model: str, response: Mapping[str, Any], *, visible: bool
) -> ProviderError:
    details = response.get("incomplete_details")
    reason = str(details.get("reason") or "") if isinstance(details, Mapping) else ""
    kind, why = _INCOMPLETE.get(
        reason, (ErrorKind.SERVER_ERROR, f"incomplete: {reason or 'no reason given'}; try again")
    )
    return ProviderError(
        kind, f"{model} stopped before answering: {why}", provider=provider, visible_output=visible
    )


def _count(data: Any, *path: str) -> int:
    for key in path:
        data = data.get(key) if isinstance(data, Mapping) else None
    return data if isinstance(data, int) and not isinstance(data, bool) and data > 0 else 0


def _usage(data: Any) -> Usage:
    return Usage(
        input_tokens=_count(data, "input_tokens"),
        output_tokens=_count(data, "output_tokens"),
        cached_input_tokens=_count(data, "input_tokens_details", "cached_tokens"),
        reasoning_tokens=_count(data, "output_tokens_details", "reasoning_tokens"),
    )


def _turn(text: str, calls: list[ToolCall], response: Mapping[str, Any], model: str) -> Turn:
    response_id = response.get("id")
    return Turn(
        content=text,
        tool_calls=calls,
        usage=_usage(response.get("usage")),
        model=str(response.get("model") or model),
        provider_state={"response_id": response_id} if isinstance(response_id, str) else {},
    )


def _empty_output(provider: str, model: str) -> ProviderError:
    return ProviderError(
        ErrorKind.SERVER_ERROR,
        f"{model} finished without producing any answer or tool call; try again",
        provider=provider,
    )


def _message_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping):
            value = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
            if isinstance(value, str):
                pieces.append(value)
    return "".join(pieces)


def _summary_text(item: Mapping[str, Any]) -> str:
    summary = item.get("summary")
    parts = summary if isinstance(summary, list) else ()
    texts = [p.get("text") for p in parts if isinstance(p, Mapping)]
    return "\n\n".join(t for t in texts if isinstance(t, str) and t)


def _tool_call(item: Mapping[str, Any], provider: str) -> ToolCall:
    name = str(item.get("name") or "")
    call_id = str(item.get("call_id") or item.get("id") or "")
    try:
        return ToolCall(id=call_id, name=name, arguments=item.get("arguments"))
    except ValidationError as exc:
        problem = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
        raise ProviderError(
            ErrorKind.SERVER_ERROR,
            f"the model sent a malformed call to tool {name or '(unnamed)'} ({problem}); try again",
            provider=provider,
        ) from None


def _read_items(items: Iterable[Any], provider: str) -> tuple[str, list[ToolCall]]:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            text = _message_text(item)
            if text:
                texts.append(text)
        elif kind == "function_call":
            calls.append(_tool_call(item, provider))
    return "\n\n".join(texts), calls


def parse_response(data: Any, *, provider: str, model: str) -> Turn:
    """Read a buffered (non-streamed) Responses body into a turn."""
    if not isinstance(data, Mapping):
        raise ProviderError(
            ErrorKind.SERVER_ERROR,
            f"{provider} answered with a body that is not a response object; try again",
            provider=provider,
        )
    status = data.get("status")
    if status == "failed" or isinstance(data.get("error"), Mapping):
        raise declared_error(provider, data.get("error"))
    output = data.get("output")
    text, calls = _read_items(output if isinstance(output, list) else (), provider)
    answered = str(data.get("model") or model)
    if not text.strip() and not calls:
        if status == "incomplete":
            raise _incomplete_error(provider, answered, data, visible=False)
        if status == "completed":
            return _turn("", [], data, model)
        raise _empty_output(provider, answered)
    if status == "incomplete":
        log.warning("%s: response %s is incomplete; returning its output", provider, data.get("id"))
    return _turn(text, calls, data, model)


class ResponseStream:
    """Accumulates one streamed response and reports increments as :class:`StreamEvent`s.

    Completed output items are kept by output index as they finish, independently of the
    terminal event, which is what lets :meth:`finish` return them from a stream that never
    said it was done.
    """

    def __init__(self, provider: str, model: str, request: ChatRequest, stats: StreamStats) -> None:
        self.provider = provider
        self.model = model
        self.request = request
        self.stats = stats
        self.emit = request.stream and request.on_event is not None
        self.items: dict[int, dict[str, Any]] = {}
        self.added: dict[str, tuple[int, dict[str, Any]]] = {}
        self.partial: dict[str, list[str]] = {}
        self.arguments: dict[str, list[str]] = {}
        self.summaries: set[tuple[str, int]] = set()
        self.response: dict[str, Any] = {}
        self.terminal: str | None = None
        self.failure: Mapping[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.terminal is not None

    async def _send(self, kind: StreamEventKind, text: str = "", item_type: str | None = None):
        if not self.emit:
            return
        if kind == StreamEventKind.TEXT_DELTA or (item_type == "message" and text):
            self.stats.visible = True
        await self.request.emit(StreamEvent(kind=kind, text=text, item_type=item_type))

    def _note(self, response: Any) -> None:
        if isinstance(response, Mapping):
            self.response.update({k: v for k, v in response.items() if v is not None})

    async def feed(self, data: Mapping[str, Any]) -> None:
        kind = data.get("type")
        if kind in ("response.created", "response.in_progress"):
            self._note(data.get("response"))
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = data.get("delta")
            if isinstance(delta, str) and delta:
                self.partial.setdefault(str(data.get("item_id") or ""), []).append(delta)
                await self._send(StreamEventKind.TEXT_DELTA, delta)
        elif kind == "response.output_item.added":
            item = data.get("item")
            if isinstance(item, Mapping) and isinstance(item.get("id"), str):
                self.added[item["id"]] = (self._index(data), dict(item))
        elif kind == "response.function_call_arguments.delta":
            delta = data.get("delta")
            if isinstance(delta, str):
                self.arguments.setdefault(str(data.get("item_id") or ""), []).append(delta)
        elif kind == "response.function_call_arguments.done":
            self._arguments_done(data)
        elif kind == "response.reasoning_summary_text.done":
            key = (str(data.get("item_id") or ""), _int(data.get("summary_index")))
            text = data.get("text")
            if isinstance(text, str) and text and key not in self.summaries:
                self.summaries.add(key)
                await self._send(StreamEventKind.REASONING_SUMMARY, text)
        elif kind == "response.output_item.done":
            await self._item_done(data)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.terminal = kind.removeprefix("response.")
            response = data.get("response")
            self._note(response)
            if kind == "response.failed" and isinstance(response, Mapping):
                self.failure = response.get("error") if response.get("error") else {}
        elif kind == "error":
            self.terminal = "error"
            self.failure = data

    def _index(self, data: Mapping[str, Any]) -> int:
        index = data.get("output_index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        return 1_000_000 + len(self.items) + len(self.added)

    def _arguments_done(self, data: Mapping[str, Any]) -> None:
        """A call whose arguments are complete is usable even if its item never closes."""
        item_id = data.get("item_id")
        if not isinstance(item_id, str) or item_id not in self.added:
            return
        index, item = self.added[item_id]
        arguments = data.get("arguments")
        if not isinstance(arguments, str):
            arguments = "".join(self.arguments.get(item_id, ()))
        if index not in self.items and item.get("type") == "function_call":
            self.items[index] = {**item, "arguments": arguments}

    async def _item_done(self, data: Mapping[str, Any]) -> None:
        item = data.get("item")
        if not isinstance(item, Mapping):
            return
        self.items[self._index(data)] = dict(item)
        kind = item.get("type")
        if kind == "message":
            await self._send(StreamEventKind.ITEM_DONE, _message_text(item), "message")
        elif kind == "function_call":
            await self._send(StreamEventKind.ITEM_DONE, "", "tool_call")
        elif kind == "reasoning":
            summary = item.get("summary")
            for number, part in enumerate(summary if isinstance(summary, list) else ()):
                key = (str(item.get("id") or ""), number)
                text = part.get("text") if isinstance(part, Mapping) else None
                if isinstance(text, str) and text and key not in self.summaries:
                    self.summaries.add(key)
                    await self._send(StreamEventKind.REASONING_SUMMARY, text)
            await self._send(StreamEventKind.ITEM_DONE, _summary_text(item), "reasoning")

    def finish(self, cut: ProviderError | None = None) -> Turn:
        """The turn, or the error that describes why there is none."""
        final = self.response.get("output")
        unfinished: list[str] = []
        if self.terminal == "completed" and isinstance(final, list) and final:
            text, calls = _read_items(final, self.provider)
        else:
            done = [self.items[i] for i in sorted(self.items)]
            text, calls = _read_items(done, self.provider)
            finished_ids = {item.get("id") for item in done}
            for item_id, pieces in self.partial.items():
                piece = "".join(pieces)
                # An item that closed without its id still carries the text: no duplicate.
                if item_id not in finished_ids and piece not in text:
                    unfinished.append(piece)
        model = str(self.response.get("model") or self.model)
        visible = self.stats.visible
        if self.terminal in ("failed", "error") and not (text.strip() or calls):
            # Declared failure: text cut off inside an unfinished item is not an answer.
            raise declared_error(self.provider, self.failure, visible=visible)
        text = "\n\n".join(t for t in (text, *unfinished) if t)
        if text.strip() or calls:
            if self.terminal != "completed":
                log.warning(
                    "%s: the stream ended without completing (%s); returning the output it "
                    "delivered",
                    self.provider,
                    self.terminal or (cut.message if cut else "no terminal event"),
                )
            return _turn(text, calls, self.response, self.model)
        if self.terminal == "incomplete":
            raise _incomplete_error(self.provider, model, self.response, visible=visible)
        if self.terminal == "completed":
            return _turn("", [], self.response, self.model)
        if cut is not None:
            raise cut
        log.warning("%s: the stream closed without a terminal event or any output", self.provider)
        raise ProviderError(
            ErrorKind.TRANSPORT,
            f"the {self.provider} stream closed before the response finished, with no reason "
            "given; try again",
            provider=self.provider,
            pre_response=self.stats.chunks == 0,
            visible_output=visible,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_event(event: SSEEvent) -> dict[str, Any] | None:
    """The JSON payload of one SSE event, ``None`` for keep-alives and sentinels."""
    if not event.data.strip() or event.data.strip() == "[DONE]":
        return None
    try:
        data = json.loads(event.data)
    except ValueError:
        log.warning("skipping an SSE event whose data is not JSON (event %r)", event.event)
        return None
    if not isinstance(data, dict):
        return None
    if "type" not in data and event.event != "message":
        data["type"] = event.event
    return data


# --------------------------------------------------------------------------- auth

#: The bearer for the call in flight, per task: concurrent calls never see each other's.
_BEARER: ContextVar[tuple[object, str] | None] = ContextVar("fermix_oauth_bearer", default=None)


class OAuthBearer:
    """Runs calls with a token from a ``TokenSource``; on 401, refreshes once and retries.

    A second 401 is a residual OAuth failure (``ErrorKind.OAUTH``), which routing may fail
    over on — unlike a refused API key, which no other attempt can fix.
    """

    def __init__(self, source: Any, *, provider: str) -> None:
        self.source = source
        self.provider = provider

    def current(self) -> str | None:
        held = _BEARER.get()
        return held[1] if held is not None and held[0] is self else None

    async def _token(self, fetch: Callable[[], Awaitable[str]]) -> str:
        try:
            return await fetch()
        except ProviderError:
            raise
        except Exception as exc:
            raise ProviderError(
                ErrorKind.OAUTH,
                f"the {self.provider} login cannot be used ({type(exc).__name__}); run "
                f"`fermix auth login --provider {self.provider}`",
                provider=self.provider,
            ) from exc

    async def _with(self, token: str, call: Callable[[], Awaitable[Turn]]) -> Turn:
        reset = _BEARER.set((self, token))
        try:
            return await call()
        finally:
            _BEARER.reset(reset)

    async def run(self, call: Callable[[], Awaitable[Turn]]) -> Turn:
        token = await self._token(self.source.access_token)
        try:
            return await self._with(token, call)
        except ProviderError as exc:
            if exc.status != 401:
                raise
            log.info("%s answered 401; refreshing the login once", self.provider)
        token = await self._token(self.source.refresh)
        try:
            return await self._with(token, call)
        except ProviderError as exc:
            if exc.status != 401:
                raise
            raise ProviderError(
                ErrorKind.OAUTH,
                f"{self.provider} refused the login even after refreshing it ({exc.message}); "
                f"run `fermix auth login --provider {self.provider}`",
                provider=self.provider,
                status=401,
            ) from None


def token_source(settings: ProviderSettings, provider: str) -> Any:
    """The route's ``TokenSource``; ``settings.extra["token_source"]`` overrides it."""
    injected = settings.extra.get("token_source") if settings.extra else None
    if injected is not None:
        return injected
    from fermix_providers.oauth import PROVIDER_PROFILES, TokenSource

    return TokenSource(settings.auth_store, PROVIDER_PROFILES[provider])


# --------------------------------------------------------------------------- adapter


class ResponsesProvider(HttpProvider):
    """The Responses adapter; subclasses set the dialect through the attributes and hooks."""

    #: As Chat Completions: OpenAI fits "high" detail into 2048 x 2048; 20 MB per file.
    image_max_edge: ClassVar[int] = 2048
    image_max_bytes: ClassVar[int] = 20 * 1024 * 1024

    supports_streaming = True
    #: Appended to ``base_url``.
    path = "/responses"
    #: Stream on the wire even when the caller did not ask to (events are still only
    #: reported when it did).
    always_stream = False
    #: ``reasoning.summary`` to request, or ``None`` for none.
    reasoning_summary: str | None = None
    #: Role for system messages that appear after the conversation started.
    system_role = "developer"
    #: Send ``instructions`` even when there is no system prompt.
    send_empty_instructions = False

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        timeouts = settings.extra.get("timeouts") if settings.extra else None
        if isinstance(timeouts, Timeouts):
            self.timeouts = timeouts
        self.oauth: OAuthBearer | None = None

    # ------------------------------------------------------------------ hooks

    def effort(self, request: ChatRequest, model: str) -> str | None:
        """The ``reasoning.effort`` to send: requested, else configured, clamped to the model."""
        wanted = request.reasoning_effort or self.settings.reasoning_effort
        if wanted is None:
            return None
        try:
            return clamp_effort(self.spec, model, wanted)
        except EffortError as exc:
            raise ProviderError(ErrorKind.INVALID_REQUEST, str(exc), provider=self.name) from exc

    def tool_parameters(self, schema: dict[str, Any]) -> dict[str, Any]:
        return schema

    def build_body(self, request: ChatRequest, model: str, *, stream: bool) -> dict[str, Any]:
        instructions, rest = split_instructions(request.messages)
        body: dict[str, Any] = {"model": model}
        if instructions or self.send_empty_instructions:
            body["instructions"] = instructions
        body["input"] = input_items(rest, provider=self.name, system_role=self.system_role)
        if request.tools:
            body["tools"] = function_tools(request.tools, self.tool_parameters)
            body["tool_choice"] = "auto"
        reasoning: dict[str, Any] = {}
        effort = self.effort(request, model)
        if effort is not None:
            reasoning["effort"] = effort
        if self.reasoning_summary:
            reasoning["summary"] = self.reasoning_summary
        if reasoning:
            body["reasoning"] = reasoning
        body["stream"] = stream
        return body

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        token = self.oauth.current() if self.oauth is not None else None
        if token:
            headers["authorization"] = f"Bearer {token}"
        return headers

    # ------------------------------------------------------------------ calls

    async def chat(self, request: ChatRequest) -> Turn:
        request = await self.prepare_images(request)
        problem = self.unsupported_images(request)
        if problem is not None:
            raise problem
        if self.oauth is None and not self.settings.api_key:
            where = f"[fermix_core.providers.{self.name}] api_key"
            if self.spec.env_var:
                where = f"{self.spec.env_var} or {where}"
            raise ProviderError(
                ErrorKind.AUTH,
                f"no API key is configured for {self.name}; set {where}",
                provider=self.name,
            )
        model = self.model_id(request.model)
        stream = self.always_stream or request.stream
        body = self.build_body(request, model, stream=stream)

        async def call() -> Turn:
            return await self.exchange(request, body, model, stream=stream)

        if self.oauth is not None:
            return await self.oauth.run(call)
        return await call()

    async def exchange(
        self, request: ChatRequest, body: Mapping[str, Any], model: str, *, stream: bool
    ) -> Turn:
        """One HTTP exchange (no auth retry): buffered JSON, or SSE read as it arrives."""
        if not stream:
            data = await self.post_json(self.path, body)
            return parse_response(data, provider=self.name, model=model)
        stats = StreamStats()
        state = ResponseStream(self.name, model, request, stats)
        try:
            async with self.stream_sse(self.path, body, stats) as events:
                async for event in events:
                    data = decode_event(event)
                    if data is not None:
                        await state.feed(data)
                        if state.finished:
                            break
        except ProviderError as exc:
            if exc.status is not None:
                raise
            return state.finish(exc)
        return state.finish()

"""Model fakes for tests: a scripted provider and a function-backed one.

Both are real :class:`~fermix_core.provider.Provider` subclasses, so the code under test
goes through the same contract a wire adapter does — including the loud failure when an
image reaches a route that cannot see it, and streamed events when a request asks for them.
Both record every request, which is how a test asserts on what the agent actually sent.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from fermix_core.messages import ToolCall, Turn, Usage
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    Provider,
    ProviderError,
    StreamEvent,
    StreamEventKind,
)

__all__ = [
    "FunctionProvider",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedProvider",
    "reply",
    "tool_call",
    "tool_calls",
]

#: What a script may hold: a turn, a bare reply text, or an exception to raise.
ScriptItem = Turn | str | BaseException


class ScriptExhausted(AssertionError):
    """The code under test called the model more often than the test scripted."""


def reply(text: str, *, usage: Usage | None = None, model: str = "") -> Turn:
    """A final text answer. An empty ``model`` is filled in by the provider."""
    return Turn(content=text, usage=usage or Usage(), model=model)


def tool_call(
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    id: str | None = None,
    content: str = "",
    model: str = "",
) -> Turn:
    """A turn in which the model calls one tool (with optional commentary in ``content``)."""
    call = ToolCall(id=id or f"call_{name}", name=name, arguments=arguments or {})
    return Turn(content=content, tool_calls=[call], model=model)


def tool_calls(*calls: ToolCall | tuple[str, dict[str, Any]], content: str = "") -> Turn:
    """A turn calling several tools at once: ``tool_calls(("a", {}), ("b", {"x": 1}))``."""
    built = [
        c if isinstance(c, ToolCall) else ToolCall(id=f"call_{i}_{c[0]}", name=c[0], arguments=c[1])
        for i, c in enumerate(calls, start=1)
    ]
    return Turn(content=content, tool_calls=built, model="")


def _describe_last(request: ChatRequest) -> str:
    last = request.messages[-1]
    text = last.text.replace("\n", " ")
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{last.role}: {text!r}"


class _RecordingProvider(Provider):
    """Shared plumbing: request recording, the vision gate and streamed events."""

    def __init__(
        self,
        *,
        name: str,
        model: str,
        vision: bool,
        supports_streaming: bool,
        counts_chunks: bool,
    ) -> None:
        self.name = name
        self.model = model
        self._vision = vision
        self.supports_streaming = supports_streaming
        self.counts_chunks = counts_chunks
        self.requests: list[ChatRequest] = []
        self.closed = False

    def vision(self, model: str | None = None) -> bool:
        return self._vision

    async def aclose(self) -> None:
        self.closed = True

    #: Set False to keep no request log (a benchmark or soak whose memory and CPU should
    #: measure the runtime, not the fake); ``requests`` then stays empty.
    keep_requests: bool = True

    def _record(self, request: ChatRequest) -> None:
        if not isinstance(request, ChatRequest):
            raise TypeError(f"{self.name}.chat() takes a ChatRequest, not {type(request).__name__}")
        if self.closed:
            raise ProviderError(
                ErrorKind.CONNECTION_UNAVAILABLE,
                "provider was closed; build a new one",
                provider=self.name,
            )
        if not self.keep_requests:
            return
        # A shallow copy with its own lists: the caller may keep appending to the history
        # it passed, and a recording must show what was sent at the time.
        self.requests.append(
            request.model_copy(
                update={"messages": list(request.messages), "tools": list(request.tools)}
            )
        )
        refusal = self.unsupported_images(request)
        if refusal is not None:
            raise refusal

    def _finish(self, turn: Turn, request: ChatRequest) -> Turn:
        if not turn.model:
            turn = turn.model_copy(update={"model": request.model or self.model})
        return turn

    async def _stream(self, turn: Turn, request: ChatRequest) -> None:
        if not (request.stream and self.supports_streaming and request.on_event):
            return
        if turn.content:
            for piece in _chunks(turn.content):
                await request.emit(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=piece))
            await request.emit(
                StreamEvent(kind=StreamEventKind.ITEM_DONE, text=turn.content, item_type="message")
            )
        for _call in turn.tool_calls:
            await request.emit(StreamEvent(kind=StreamEventKind.ITEM_DONE, item_type="tool_call"))

    @property
    def last_request(self) -> ChatRequest:
        if not self.requests:
            raise AssertionError(f"provider {self.name!r} was never called")
        return self.requests[-1]


def _chunks(text: str) -> list[str]:
    """Split into word-sized deltas that join back to exactly *text*."""
    pieces: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch == " " and i > start:
            pieces.append(text[start:i])
            start = i
    pieces.append(text[start:])
    return [p for p in pieces if p]


class ScriptedProvider(_RecordingProvider):
    """Answers with the scripted items, in order, one per ``chat`` call.

    A string is a final text answer; a :class:`~fermix_core.messages.Turn` is returned as is
    (its model filled in when empty); an exception instance is raised. Running out of script
    raises :class:`ScriptExhausted`, which fails the test with the request it could not
    answer rather than hanging or inventing a reply.
    """

    def __init__(
        self,
        turns: Iterable[ScriptItem] = (),
        *,
        name: str = "scripted",
        model: str = "scripted-model",
        vision: bool = True,
        supports_streaming: bool = True,
        counts_chunks: bool = True,
    ) -> None:
        super().__init__(
            name=name,
            model=model,
            vision=vision,
            supports_streaming=supports_streaming,
            counts_chunks=counts_chunks,
        )
        self._script: deque[ScriptItem] = deque()
        self._scripted = 0
        self.add(*turns)

    def add(self, *items: ScriptItem) -> ScriptedProvider:
        """Append to the script; returns self so setup reads as one expression."""
        for item in items:
            if not isinstance(item, Turn | str | BaseException):
                raise TypeError(
                    f"a script item is a Turn, a str or an exception, not {type(item).__name__}"
                )
            self._script.append(item)
            self._scripted += 1
        return self

    @property
    def remaining(self) -> int:
        return len(self._script)

    async def chat(self, request: ChatRequest) -> Turn:
        self._record(request)
        if not self._script:
            raise ScriptExhausted(
                f"ScriptedProvider {self.name!r} got call {len(self.requests)} but only "
                f"{self._scripted} replies were scripted; the unanswered request ended with "
                f"{_describe_last(request)}. Add more with .add(...)."
            )
        item = self._script.popleft()
        if isinstance(item, BaseException):
            if isinstance(item, ProviderError) and item.provider is None:
                item.provider = self.name
            raise item
        turn = self._finish(reply(item) if isinstance(item, str) else item, request)
        await self._stream(turn, request)
        return turn


TurnFunction = Callable[[ChatRequest], "Turn | str | Awaitable[Turn | str]"]


class FunctionProvider(_RecordingProvider):
    """Computes each answer with ``fn(request)``, which may be sync or async.

    Use it when the reply depends on the request — echoing the last message, answering a
    tool result, failing only on the second call.
    """

    def __init__(
        self,
        fn: TurnFunction,
        *,
        name: str = "function",
        model: str = "function-model",
        vision: bool = True,
        supports_streaming: bool = True,
        counts_chunks: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError("FunctionProvider needs a callable taking a ChatRequest")
        super().__init__(
            name=name,
            model=model,
            vision=vision,
            supports_streaming=supports_streaming,
            counts_chunks=counts_chunks,
        )
        self.fn = fn

    async def chat(self, request: ChatRequest) -> Turn:
        self._record(request)
        try:
            result = self.fn(request)
            if inspect.isawaitable(result):
                result = await result
        except ProviderError as exc:
            if exc.provider is None:
                exc.provider = self.name
            raise
        if isinstance(result, str):
            result = reply(result)
        if not isinstance(result, Turn):
            raise TypeError(
                f"FunctionProvider {self.name!r}: the function returned "
                f"{type(result).__name__}; return a Turn or a str"
            )
        turn = self._finish(result, request)
        await self._stream(turn, request)
        return turn

"""The ``anthropic`` provider: Claude on the Messages wire, by API key or Claude subscription.

The wire codec (request bodies, buffered decoding, error classes) lives in
:mod:`fermix_providers.wires.anthropic_messages`; this module owns the exchange itself —
auth headers, the buffered or streamed HTTP call, and assembling a streamed message.

Limits: buffered calls cap output at 16384 tokens and wait up to 300 s for the whole body
(thinking plus answer fit that window); streamed calls cap at 32768 tokens and fail after
120 s without a chunk (the server pings while it thinks).

Two auth modes (``[fermix_core.providers.anthropic] auth_mode``):

* ``api_key`` — ``x-api-key`` plus ``anthropic-version``. A 401 is an
  :attr:`~fermix_core.provider.ErrorKind.AUTH` failure: a wrong key never fails over.
* ``oauth`` — a Claude subscription token from the ``anthropic_oauth`` profile of
  ``auth.json``. Subscription tokens are only honoured for Claude Code's own traffic, so
  requests emulate it: ``Authorization: Bearer``, the ``anthropic-beta`` flags
  ``claude-code-20250219,oauth-2025-04-20``, ``user-agent: claude-cli/<version> (external,
  cli)``, ``x-app: cli``, ``anthropic-dangerous-direct-browser-access: true``, a first
  system block identifying as Claude Code, and tool names prefixed ``mcp_`` (stripped again
  when calls come back). A 401 refreshes the token once and retries once; a second refusal
  is :attr:`~fermix_core.provider.ErrorKind.OAUTH`, which the router may fail over on.

Settings ``extra`` keys: ``token_source`` (an object with ``access_token()`` and
``refresh()``, replacing the auth.json one) and ``claude_code_version`` (the client version
the OAuth mode reports).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from fermix_core.messages import Turn
from fermix_core.provider import (
    ChatRequest,
    ErrorKind,
    ProviderError,
    ProviderSettings,
    StreamEvent,
    StreamEventKind,
)
from fermix_core.routing.effort import clamp_effort
from fermix_core.specs import ProviderSpec

from fermix_providers.http.base import HttpProvider, Timeouts
from fermix_providers.http.sse import StreamStats
from fermix_providers.wires.anthropic_messages import (
    ANTHROPIC_VERSION,
    MESSAGES_PATH,
    PARAGRAPH,
    AssistantEcho,
    ToolNames,
    WireOptions,
    build_body,
    build_turn,
    error_from_event,
    parse_message,
    refine_http_error,
    supports_adaptive_thinking,
    tool_call,
)

__all__ = ["CLAUDE_CODE_IDENTITY", "AnthropicProvider", "MessageStream"]

log = logging.getLogger(__name__)

OAUTH_PROFILE = "anthropic_oauth"
#: The first system block Claude Code sends; subscription tokens expect it.
CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
#: The Claude Code release the OAuth mode reports in its user agent.
CLAUDE_CODE_VERSION = "2.1.2"
OAUTH_BETAS = ("claude-code-20250219", "oauth-2025-04-20")
OAUTH_TOOL_PREFIX = "mcp_"
AUTH_MODES = ("api_key", "oauth")


class TokenSourceLike(Protocol):
    """What the OAuth mode needs from :class:`fermix_providers.oauth.tokens.TokenSource`."""

    async def access_token(self) -> str: ...

    async def refresh(self) -> str: ...


# --------------------------------------------------------------------------- streaming


@dataclass
class _Block:
    type: str
    start: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    closed: bool = False

    def wire(self) -> dict[str, Any] | None:
        """The block as the server would have sent it buffered (what an echo must replay)."""
        joined = "".join(self.parts)
        if self.type == "text":
            return {"type": "text", "text": joined} if joined else None
        if self.type == "thinking":
            signature = self.signature or self.start.get("signature") or ""
            return {"type": "thinking", "thinking": joined, "signature": signature}
        if self.type == "tool_use":
            block = {k: self.start.get(k) for k in ("type", "id", "name")}
            block["input"] = joined if joined.strip() else (self.start.get("input") or {})
            return block
        if self.type == "redacted_thinking":
            return dict(self.start)
        return None  # server-side tool blocks and future types are not ours to replay


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _index(value: Any) -> int:
    """A block index; anything malformed maps to -1, a slot no real block uses."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


class MessageStream:
    """Folds one streamed Messages response into a :class:`Turn`, emitting events as it goes.

    ``stats`` is handed to the SSE reader, so the chunk count it keeps and the ``visible``
    flag set here travel together into any error raised mid-stream.
    """

    def __init__(
        self, provider: str, request: ChatRequest, names: ToolNames, *, model: str
    ) -> None:
        self.provider = provider
        self.request = request
        self.names = names
        self.stats = StreamStats()
        self.content = ""
        #: The model that answered; the requested one until ``message_start`` says.
        self.model = model
        self.message_id: Any = None
        self.stop_reason: Any = None
        #: ``message_stop`` arrived: the server declared the message complete.
        self.stopped = False
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, _Block] = {}
        self._previous: str | None = None
        self._separate = False

    async def _emit(self, kind: StreamEventKind, text: str = "", item: str | None = None) -> None:
        await self.request.emit(StreamEvent(kind=kind, text=text, item_type=item))

    async def feed(self, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "message_start":
            message = _mapping(payload.get("message"))
            self.model = str(message.get("model") or self.model)
            self.message_id = message.get("id")
            self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            await self._start(payload)
        elif kind == "content_block_delta":
            await self._delta(payload)
        elif kind == "content_block_stop":
            await self._stop(payload.get("index"))
        elif kind == "message_delta":
            delta = _mapping(payload.get("delta"))
            self.stop_reason = delta.get("stop_reason") or self.stop_reason
            self._merge_usage(payload.get("usage"))
        elif kind == "message_stop":
            self.stopped = True

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    async def _start(self, payload: Mapping[str, Any]) -> None:
        start = dict(_mapping(payload.get("content_block")))
        block = _Block(type=str(start.get("type") or ""), start=start)
        self._blocks[_index(payload.get("index"))] = block
        self._separate = block.type == "text" and bool(self.content) and self._previous != "text"
        self._previous = block.type
        if block.type == "text" and start.get("text"):
            await self._text(block, str(start["text"]))
        elif block.type == "thinking" and start.get("thinking"):
            block.parts.append(str(start["thinking"]))

    async def _text(self, block: _Block, text: str) -> None:
        if self._separate:
            self._separate = False
            self.content += PARAGRAPH
            await self._emit(StreamEventKind.TEXT_DELTA, PARAGRAPH)
        block.parts.append(text)
        self.content += text
        self.stats.visible = True
        await self._emit(StreamEventKind.TEXT_DELTA, text)

    async def _delta(self, payload: Mapping[str, Any]) -> None:
        block = self._blocks.get(_index(payload.get("index")))
        delta = _mapping(payload.get("delta"))
        if block is None:
            return
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            await self._text(block, str(delta["text"]))
        elif kind == "input_json_delta":
            block.parts.append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block.parts.append(str(delta.get("thinking") or ""))
        elif kind == "signature_delta":
            block.signature += str(delta.get("signature") or "")

    async def _stop(self, index: Any) -> None:
        block = self._blocks.get(_index(index))
        if block is None or block.closed:
            return
        block.closed = True
        text = "".join(block.parts)
        if block.type == "text":
            await self._emit(StreamEventKind.ITEM_DONE, text, "message")
        elif block.type == "tool_use":
            await self._emit(StreamEventKind.ITEM_DONE, "", "tool_call")
        elif block.type == "thinking" and text.strip():
            await self._emit(StreamEventKind.REASONING_SUMMARY, text)
            await self._emit(StreamEventKind.ITEM_DONE, text, "reasoning")

    def blocks(self) -> list[dict[str, Any]]:
        """The content blocks in order, tool inputs decoded (for the echo memory)."""
        out = []
        for index in sorted(self._blocks):
            wire = self._blocks[index].wire()
            if wire is None:
                continue
            if wire["type"] == "tool_use" and isinstance(wire["input"], str):
                # A broken input stays a string; tool_call() reports it in plain words.
                with contextlib.suppress(ValueError):
                    wire["input"] = json.loads(wire["input"])
            out.append(wire)
        return out

    def finish(self) -> Turn:
        """The turn, or a typed error when the stream ended without the model finishing."""
        if not self.stopped and self.stop_reason is None:
            raise ProviderError(
                ErrorKind.TRANSPORT,
                f"the {self.provider} stream ended before the message was complete "
                "(no stop reason was sent)",
                provider=self.provider,
                pre_response=self.stats.chunks == 0,
                visible_output=self.stats.visible,
            )
        if not self.stopped:
            log.warning(
                "%s stream ended without message_stop after stop_reason %r; using the output",
                self.provider,
                self.stop_reason,
            )
        blocks = self.blocks()
        calls = []
        for block in blocks:
            if block["type"] != "tool_use":
                continue
            if self.stop_reason == "max_tokens" and not isinstance(block["input"], dict):
                raise ProviderError(
                    ErrorKind.UNKNOWN,
                    f"the answer hit the {self.provider} output cap in the middle of a call "
                    f"to {self.names.from_wire(str(block['name']))!r}; ask for a shorter step",
                    provider=self.provider,
                    visible_output=self.stats.visible,
                )
            calls.append(tool_call(self.provider, block, self.names, visible=self.stats.visible))
        return build_turn(
            self.provider,
            content=self.content,
            calls=calls,
            blocks=blocks,
            usage=self._usage,
            model=self.model,
            message_id=self.message_id,
            stop_reason=self.stop_reason,
            visible=self.stats.visible,
        )


# --------------------------------------------------------------------------- provider


@dataclass(frozen=True)
class _Call:
    headers: Mapping[str, str]
    stream: bool


#: Per-call auth headers and mode. A context variable rather than an attribute: one
#: provider serves many conversations at once, and a token refreshed for one call must not
#: leak into a request another task is building.
_CALL: ContextVar[_Call | None] = ContextVar("fermix_anthropic_call", default=None)


class AnthropicProvider(HttpProvider):
    """Claude models over the Messages wire (API key or Claude subscription OAuth)."""

    supports_streaming = True
    #: Buffered calls wait for the whole answer (up to 16384 tokens incl. thinking).
    buffered_timeouts: ClassVar[Timeouts] = Timeouts(read=300.0)
    #: Streamed calls: the longest silence between chunks (the server pings meanwhile).
    stream_timeouts: ClassVar[Timeouts] = Timeouts(read=120.0)
    #: Anthropic's vision docs: a base64 image may be 5 MB (three quarters of that raw),
    #: and anything past 1568 px on the long edge is scaled down server-side anyway (a
    #: many-image request refuses more than 2000 px outright).
    image_max_edge: ClassVar[int] = 1568
    image_max_bytes: ClassVar[int] = 5 * 1024 * 1024 * 3 // 4

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        mode = (settings.auth_mode or "api_key").strip().lower()
        if mode not in AUTH_MODES:
            raise ProviderError(
                ErrorKind.INVALID_REQUEST,
                f"auth_mode {settings.auth_mode!r} is not supported for {spec.name}; set "
                f'[fermix_core.providers.{spec.name}] auth_mode = "api_key" or "oauth"',
                provider=spec.name,
            )
        self.oauth = mode == "oauth"
        self.echo = AssistantEcho()
        self._token_source: TokenSourceLike | None = settings.extra.get("token_source")
        version = str(settings.extra.get("claude_code_version") or CLAUDE_CODE_VERSION)
        self._user_agent = f"claude-cli/{version} (external, cli)"

    # ------------------------------------------------------------------ wire choices

    @property
    def timeouts(self) -> Timeouts:  # type: ignore[override]
        call = _CALL.get()
        return self.stream_timeouts if call is not None and call.stream else self.buffered_timeouts

    def vision(self, model: str | None = None) -> bool:
        """Every Claude model reads images; the catalog decides for the models it lists."""
        if self.model_id(model) in self.settings.vision_models:
            return True
        info = self.model_info(model)
        if info is not None:
            return info.vision
        return self.model_id(model).startswith("claude-")

    def wire_options(self, request: ChatRequest, model: str) -> WireOptions:
        thinking = supports_adaptive_thinking(model)
        effort = request.reasoning_effort or self.settings.reasoning_effort
        if effort and thinking:
            # Routing clamps already; this only guards a direct caller ("none" -> "low").
            effort = clamp_effort(self.spec, model, effort)
        return WireOptions(
            model=model,
            stream=request.stream,
            effort=effort if thinking else None,
            thinking=thinking,
            identity=CLAUDE_CODE_IDENTITY if self.oauth else None,
        )

    # ------------------------------------------------------------------ headers

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        call = _CALL.get()
        if call is not None:
            headers.update(call.headers)
            if call.stream:
                headers["accept"] = "text/event-stream"
        return headers

    def _api_key_headers(self) -> dict[str, str]:
        if not self.settings.api_key:
            raise ProviderError(
                ErrorKind.AUTH,
                f"no API key for {self.name}; set ANTHROPIC_API_KEY, run `fermix setup`, or "
                "log in with a Claude subscription (`fermix auth login --provider anthropic`)",
                provider=self.name,
            )
        return {"x-api-key": self.settings.api_key}

    def _oauth_headers(self, token: str) -> dict[str, str]:
        return {
            "authorization": f"Bearer {token}",
            "anthropic-beta": ",".join(OAUTH_BETAS),
            "user-agent": self._user_agent,
            "x-app": "cli",
            "anthropic-dangerous-direct-browser-access": "true",
        }

    def _tokens(self) -> TokenSourceLike:
        if self._token_source is None:
            from fermix_providers.oauth.tokens import TokenSource

            self._token_source = TokenSource(self.settings.auth_store, OAUTH_PROFILE)
        return self._token_source

    # ------------------------------------------------------------------ calls

    async def chat(self, request: ChatRequest) -> Turn:
        request = await self.prepare_images(request)
        refused = self.unsupported_images(request)
        if refused is not None:
            raise refused
        model = self.model_id(request.model)
        names = ToolNames(OAUTH_TOOL_PREFIX if self.oauth else "", request.tools)
        body = build_body(request, self.wire_options(request, model), names, self.echo)
        if not self.oauth:
            return await self._call(request, body, names, self._api_key_headers())
        return await self._send_oauth(request, body, names)

    async def _send_oauth(
        self, request: ChatRequest, body: Mapping[str, Any], names: ToolNames
    ) -> Turn:
        tokens = self._tokens()
        token = await tokens.access_token()
        try:
            return await self._call(request, body, names, self._oauth_headers(token))
        except ProviderError as exc:
            if exc.status == 403:
                raise self._oauth_refused(exc, refreshed=False) from None
            if exc.status != 401:
                raise
        log.info("%s: the subscription token was refused (401); refreshing once", self.name)
        token = await tokens.refresh()
        try:
            return await self._call(request, body, names, self._oauth_headers(token))
        except ProviderError as exc:
            if exc.status in (401, 403):
                raise self._oauth_refused(exc, refreshed=True) from None
            raise

    def _oauth_refused(self, error: ProviderError, *, refreshed: bool) -> ProviderError:
        after = " even after refreshing the token" if refreshed else ""
        return ProviderError(
            ErrorKind.OAUTH,
            f"the Claude subscription login was refused{after} ({error.message}); run "
            "`fermix auth login --provider anthropic`, or switch to an API key",
            provider=self.name,
            status=error.status,
        )

    async def _call(
        self,
        request: ChatRequest,
        body: Mapping[str, Any],
        names: ToolNames,
        auth: Mapping[str, str],
    ) -> Turn:
        marker = _CALL.set(_Call(headers=dict(auth), stream=request.stream))
        try:
            if request.stream:
                return await self._streamed(request, body, names)
            data = await self.post_json(MESSAGES_PATH, body)
            return parse_message(self.name, data, names, self.echo, model=str(body["model"]))
        except ProviderError as exc:
            raise refine_http_error(exc) from exc.__cause__
        finally:
            _CALL.reset(marker)

    async def _streamed(
        self, request: ChatRequest, body: Mapping[str, Any], names: ToolNames
    ) -> Turn:
        stream = MessageStream(self.name, request, names, model=str(body["model"]))
        async with self.stream_sse(MESSAGES_PATH, body, stream.stats) as events:
            async for event in events:
                try:
                    payload = json.loads(event.data)
                except ValueError:
                    log.warning("%s sent an SSE event that is not JSON; skipped", self.name)
                    continue
                if not isinstance(payload, Mapping):
                    continue
                if payload.get("type") == "error" or event.event == "error":
                    raise error_from_event(self.name, payload, visible=stream.stats.visible)
                await stream.feed(payload)
                if stream.stopped:
                    break
        turn = stream.finish()
        if turn.tool_calls:
            self.echo.remember(stream.blocks())
        return turn

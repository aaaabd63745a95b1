"""The Chat Completions wire: ``POST {base_url}/chat/completions``, buffered or streamed.

Many backends speak this shape — OpenRouter, Mistral, Ollama, and any OpenAI-compatible
gateway the ``openai`` provider is routed to — and each bends it a little. The adapter
therefore encodes the one form every one of them accepts and leaves the vendor quirks to
small subclasses:

* an assistant turn that carries ``tool_calls`` has no ``content`` key at all (Mistral's
  validator rejects empty content beside tool calls; no server requires the key);
* a text-only user message is a plain string, so the request shape — and with it prompt
  caching — does not change just because some other turn carried a picture;
* a tool result with images becomes a placeholder tool message plus a user message with the
  images, placed after the whole run of tool messages (a user message in between would break
  the rule that tool answers directly follow the assistant turn that asked for them).

Streamed answers arrive as ``data:`` chunks with ``choices[0].delta`` and end with
``data: [DONE]``. Reasoning summaries (OpenRouter sends them as ``delta.reasoning_details``
entries of type ``reasoning.summary``, in pieces numbered by ``index``) are reported as one
``reasoning_summary`` event per finished summary; raw chain-of-thought fields are not.
A stream can also *declare* a failure after a 200 status by sending an
``error`` object; that is classified like an HTTP error, so a provider outage reads as the
provider's own sentence and retry/failover see the same kinds as for a non-2xx answer.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fermix_core.messages import (
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Turn,
    Usage,
)
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

from fermix_providers import catalog
from fermix_providers.http import HttpProvider, StreamStats, Timeouts
from fermix_providers.http.errors import error_from_response
from fermix_providers.wires.schema import portable_schema

__all__ = ["ChatCompletionsProvider", "content_text", "parse_usage"]

log = logging.getLogger(__name__)

_RATE_WORDS = re.compile(r"rate[_ -]?limit|too many requests", re.I)
_QUOTA_WORDS = re.compile(r"quota|credit|billing", re.I)
_CONTEXT_WORDS = re.compile(r"context[_ ]length|context window|too many tokens|too long", re.I)


def content_text(content: Any) -> str:
    """The visible text of a ``content`` value: a string, ``null``, or a list of parts.

    Some servers (Mistral's reasoning models) answer with a list that mixes ``thinking``
    and ``text`` parts; only the text parts are the answer.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    pieces.append(text)
        return "".join(pieces)
    return ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_usage(raw: Any) -> Usage:
    """Token counts from a ``usage`` object; absent or malformed fields count as zero."""
    if not isinstance(raw, Mapping):
        return Usage()
    prompt = raw.get("prompt_tokens_details")
    completion = raw.get("completion_tokens_details")
    return Usage(
        input_tokens=_count(raw.get("prompt_tokens")),
        output_tokens=_count(raw.get("completion_tokens")),
        cached_input_tokens=_count(prompt.get("cached_tokens"))
        if isinstance(prompt, Mapping)
        else 0,
        reasoning_tokens=_count(completion.get("reasoning_tokens"))
        if isinstance(completion, Mapping)
        else 0,
    )


def _declared_error(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The error a 200 body or stream chunk declares, in any of the shapes servers use."""
    error = payload.get("error")
    if isinstance(error, Mapping):
        return error
    if isinstance(error, str) and error.strip():
        return {"message": error.strip()}
    if payload.get("object") == "error":  # vLLM-style: the chunk itself is the error
        return payload
    return None


@dataclass
class _PartialCall:
    """A tool call being assembled from streamed fragments."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """A streamed Chat Completions answer as its deltas arrive."""

    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish: str | None = None
    choice_error: Mapping[str, Any] | None = None
    done: bool = False
    message_closed: bool = False
    #: The reasoning summary being streamed: its ``index`` and the pieces so far.
    summary_index: Any = None
    summary: list[str] = field(default_factory=list)


class ChatCompletionsProvider(HttpProvider):
    """A provider on the Chat Completions wire; usable as is for any compatible endpoint.

    Subclasses adjust class attributes rather than methods where they can: whether an
    effort field is sent, whether ``stream_options`` may be sent, and whether images may be
    passed by URL. ``settings.extra["timeouts"]`` (a :class:`Timeouts`) overrides the class
    timeouts for one instance.
    """

    supports_streaming = True
    path: ClassVar[str] = "/chat/completions"
    #: Send the effort as ``reasoning_effort``, clamped to what the catalog says the model
    #: takes. A spec without efforts never sends one either way.
    sends_effort: ClassVar[bool] = True
    #: Ask for usage in the last stream chunk. Servers that reject unknown keys (Mistral)
    #: and send usage unasked turn this off.
    stream_usage_option: ClassVar[bool] = True
    #: OpenAI's vision guide: "high" detail fits the image into 2048 x 2048, so a larger
    #: long edge only costs upload time; files up to 20 MB, PNG/JPEG/WebP/non-animated GIF.
    image_max_edge: ClassVar[int] = 2048
    image_max_bytes: ClassVar[int] = 20 * 1024 * 1024
    #: Whether an image given by URL may be passed through; otherwise only inline bytes.
    accepts_image_urls: ClassVar[bool] = True

    def __init__(self, spec: ProviderSpec, settings: ProviderSettings) -> None:
        super().__init__(spec, settings)
        override = settings.extra.get("timeouts") if settings.extra else None
        if isinstance(override, Timeouts):
            self.timeouts = override

    # ------------------------------------------------------------------ entry point

    async def chat(self, request: ChatRequest) -> Turn:
        request = await self.prepare_images(request)
        refused = self.unsupported_images(request)
        if refused is not None:
            raise refused
        model = self.model_id(request.model)
        body = self.build_body(request, model)
        if request.stream:
            return await self._chat_streamed(request, model, body)
        data = await self.post_json(self.path, body)
        return self.parse_completion(data, model)

    def unsupported_images(self, request: ChatRequest) -> ProviderError | None:
        refused = super().unsupported_images(request)
        if refused is not None or self.accepts_image_urls:
            return refused
        if any(image.url is not None for m in request.messages for image in m.images):
            return ProviderError(
                ErrorKind.UNSUPPORTED_INPUT,
                f"{self.name} only takes inline image bytes; download the image and send "
                "its bytes instead of a URL",
                provider=self.name,
            )
        return None

    # ------------------------------------------------------------------ request

    def build_body(self, request: ChatRequest, model: str) -> dict[str, Any]:
        """The JSON body for *request*; never touches the request itself."""
        body: dict[str, Any] = {"model": model, "messages": self.encode_messages(request.messages)}
        if request.tools:
            body["tools"] = [self.encode_tool(tool) for tool in request.tools]
        effort = self.effort_for(request, model)
        if effort is not None:
            body["reasoning_effort"] = effort
        if request.stream:
            body["stream"] = True
            if self.stream_usage_option:
                body["stream_options"] = {"include_usage": True}
        return body

    def effort_for(self, request: ChatRequest, model: str) -> str | None:
        if not self.sends_effort:
            return None
        wanted = request.reasoning_effort or self.settings.reasoning_effort
        if not wanted:
            return None
        try:
            return catalog.clamp_effort(self.spec, model, wanted)
        except catalog.EffortError as exc:
            raise ProviderError(ErrorKind.INVALID_REQUEST, str(exc), provider=self.name) from exc

    def wire_call_id(self, call_id: str) -> str:
        """The id a tool call is sent under; vendors with id rules override this."""
        return call_id

    def encode_tool(self, tool: ToolDefinition) -> dict[str, Any]:
        function: dict[str, Any] = {
            "name": tool.name,
            "parameters": portable_schema(tool.parameters),
        }
        if tool.description:
            function["description"] = tool.description
        return {"type": "function", "function": function}

    def encode_messages(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        wire: list[dict[str, Any]] = []
        held_images: list[dict[str, Any]] = []
        for message in messages:
            if message.role != "tool" and held_images:
                wire.extend(held_images)
                held_images = []
            if message.role == "tool":
                assert message.tool_result is not None  # guaranteed by Message
                answer, images = self._encode_tool_result(message.tool_result)
                wire.append(answer)
                if images is not None:
                    held_images.append(images)
            elif message.is_empty:
                continue  # several servers reject an empty turn, and it says nothing
            elif message.role == "system":
                wire.append({"role": "system", "content": message.text})
            elif message.role == "user":
                wire.append({"role": "user", "content": self._user_content(message.content)})
            else:
                wire.append(self._encode_assistant(message))
        wire.extend(held_images)
        return wire

    def _user_content(self, parts: Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
        if not any(isinstance(p, ImagePart) for p in parts):
            return "\n\n".join(p.text for p in parts if isinstance(p, TextPart) and p.text)
        encoded: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, ImagePart):
                encoded.append(self._image(part))
            elif part.text:
                encoded.append({"type": "text", "text": part.text})
        return encoded

    @staticmethod
    def _image(image: ImagePart) -> dict[str, Any]:
        url = image.url if image.url is not None else image.data_url()
        return {"type": "image_url", "image_url": {"url": url}}

    def _encode_assistant(self, message: Message) -> dict[str, Any]:
        if not message.tool_calls:
            return {"role": "assistant", "content": message.text}
        # No "content" key at all beside tool calls: see the module docstring.
        return {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": self.wire_call_id(call.id),
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ],
        }

    def _encode_tool_result(
        self, result: ToolResult
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        images = [p for p in result.content if isinstance(p, ImagePart)]
        text = result.text
        if result.is_error:
            text = f"Error: {text}" if text else "Error (the tool gave no details)"
        if images:
            count = "1 image" if len(images) == 1 else f"{len(images)} images"
            note = f"[{count} from this tool follow in the next message]"
            text = f"{text}\n\n{note}" if text else note
        answer = {
            "role": "tool",
            "tool_call_id": self.wire_call_id(result.call_id),
            "content": text or "(no output)",
        }
        if not images:
            return answer, None
        follow_up = {
            "role": "user",
            "content": [
                {"type": "text", "text": f"Image output of the {result.name} tool:"},
                *(self._image(image) for image in images),
            ],
        }
        return answer, follow_up

    # ------------------------------------------------------------------ buffered answer

    def parse_completion(self, data: Any, model: str) -> Turn:
        """A buffered ``chat.completion`` body as a :class:`Turn`."""
        if not isinstance(data, Mapping):
            raise ProviderError(
                ErrorKind.SERVER_ERROR,
                f"{self.name} answered with JSON that is not a completion object",
                provider=self.name,
            )
        declared = _declared_error(data)
        if declared is not None:
            raise self.declared_error(declared, visible=False)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ProviderError(
                ErrorKind.SERVER_ERROR,
                f"{self.name} answered without any choice; try again",
                provider=self.name,
            )
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
        text = content_text(message.get("content"))
        finish = choice.get("finish_reason")
        raw_calls = message.get("tool_calls")
        raw_calls = raw_calls if isinstance(raw_calls, list) else []
        self._check_finish(finish, text, bool(raw_calls), choice.get("error"), visible=False)
        calls: list[ToolCall] = []
        for raw in raw_calls:
            if not isinstance(raw, Mapping):
                continue
            function = raw.get("function") if isinstance(raw.get("function"), Mapping) else {}
            arguments = function.get("arguments")
            partial = _PartialCall(
                id=raw.get("id") if isinstance(raw.get("id"), str) else None,
                name=function.get("name") if isinstance(function.get("name"), str) else "",
                arguments=[arguments if isinstance(arguments, str) else json.dumps(arguments)]
                if arguments is not None
                else [],
            )
            calls.append(self._tool_call(partial, finish))
        answered = data.get("model")
        return Turn(
            content=text,
            tool_calls=calls,
            usage=parse_usage(data.get("usage")),
            model=answered if isinstance(answered, str) and answered else model,
        )

    # ------------------------------------------------------------------ streamed answer

    async def _chat_streamed(
        self, request: ChatRequest, model: str, body: Mapping[str, Any]
    ) -> Turn:
        stats = StreamStats()
        state = _StreamState(model=model)
        async with self.stream_sse(self.path, body, stats) as events:
            async for event in events:
                data = event.data.strip()
                if data == "[DONE]":
                    state.done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    log.warning("%s sent a stream event that is not JSON; skipped", self.name)
                    continue
                if isinstance(chunk, Mapping):
                    await self._apply_chunk(request, state, chunk, stats)
        return await self._finish_stream(request, state, stats)

    async def _apply_chunk(
        self,
        request: ChatRequest,
        state: _StreamState,
        chunk: Mapping[str, Any],
        stats: StreamStats,
    ) -> None:
        declared = _declared_error(chunk)
        if declared is not None:
            raise self.declared_error(declared, visible=stats.visible)
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            state.model = chunk["model"]
        if chunk.get("usage") is not None:
            state.usage = parse_usage(chunk.get("usage"))
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                await self._apply_delta(request, state, delta, stats)
            if choice.get("finish_reason"):
                state.finish = str(choice["finish_reason"])
            if isinstance(choice.get("error"), Mapping):
                state.choice_error = choice["error"]

    async def _apply_delta(
        self,
        request: ChatRequest,
        state: _StreamState,
        delta: Mapping[str, Any],
        stats: StreamStats,
    ) -> None:
        details = delta.get("reasoning_details")
        for detail in details if isinstance(details, list) else ():
            if not isinstance(detail, Mapping) or detail.get("type") != "reasoning.summary":
                continue
            piece = detail.get("summary")
            index = detail.get("index", 0)
            if state.summary and index != state.summary_index:
                await self._summary_done(request, state)
            state.summary_index = index
            if isinstance(piece, str) and piece:
                state.summary.append(piece)
        text = content_text(delta.get("content"))
        if (text or delta.get("tool_calls")) and state.summary:
            await self._summary_done(request, state)  # the answer began: the summary is whole
        if text:
            state.text.append(text)
            stats.visible = True
            await request.emit(StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=text))
        fragments = delta.get("tool_calls")
        if not isinstance(fragments, list) or not fragments:
            return
        if state.text and not state.message_closed:
            # Text before the first tool call is finished commentary: its own item.
            state.message_closed = True
            await request.emit(
                StreamEvent(
                    kind=StreamEventKind.ITEM_DONE, text="".join(state.text), item_type="message"
                )
            )
        for fragment in fragments:
            if isinstance(fragment, Mapping):
                self._merge_fragment(state, fragment)

    @staticmethod
    async def _summary_done(request: ChatRequest, state: _StreamState) -> None:
        summary = "".join(state.summary).strip()
        state.summary = []
        if summary:
            await request.emit(StreamEvent(kind=StreamEventKind.REASONING_SUMMARY, text=summary))

    @staticmethod
    def _merge_fragment(state: _StreamState, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index")
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) else None
        function = fragment.get("function")
        named = isinstance(function, Mapping) and bool(function.get("name"))
        last = state.calls[max(state.calls)] if state.calls else None
        slot: _PartialCall | None
        if isinstance(index, int) and not isinstance(index, bool):
            slot = state.calls.setdefault(index, _PartialCall())
        else:
            # Servers that omit ``index`` send each call whole: an id, or a name where the
            # last call already has one, starts the next call; anything else continues it.
            if call_id is not None:
                slot = next((c for c in state.calls.values() if c.id == call_id), None)
            else:
                slot = None if (last is None or (named and last.name)) else last
            if slot is None:
                slot = state.calls.setdefault(max(state.calls, default=-1) + 1, _PartialCall())
        if call_id and not slot.id:
            slot.id = call_id
        if not isinstance(function, Mapping):
            return
        name = function.get("name")
        if isinstance(name, str) and name and not slot.name:
            slot.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.arguments.append(arguments)
        elif isinstance(arguments, Mapping):
            slot.arguments = [json.dumps(arguments)]

    async def _finish_stream(
        self, request: ChatRequest, state: _StreamState, stats: StreamStats
    ) -> Turn:
        if state.summary:
            await self._summary_done(request, state)
        text = "".join(state.text)
        if state.finish is None and not text and not state.calls:
            # Nothing generated and no reason given: a cut, never an "empty answer".
            raise ProviderError(
                ErrorKind.TRANSPORT,
                f"the {self.name} stream closed before any answer arrived and without saying why",
                provider=self.name,
                visible_output=stats.visible,
            )
        if state.finish is None and not state.done:
            log.warning(
                "%s stream ended without a finish marker; keeping the %d characters and "
                "%d tool calls that arrived",
                self.name,
                len(text),
                len(state.calls),
            )
        self._check_finish(
            state.finish, text, bool(state.calls), state.choice_error, visible=stats.visible
        )
        calls = [self._tool_call(state.calls[index], state.finish) for index in sorted(state.calls)]
        if text and not state.message_closed:
            await request.emit(
                StreamEvent(kind=StreamEventKind.ITEM_DONE, text=text, item_type="message")
            )
        for _ in calls:
            await request.emit(StreamEvent(kind=StreamEventKind.ITEM_DONE, item_type="tool_call"))
        return Turn(content=text, tool_calls=calls, usage=state.usage, model=state.model)

    # ------------------------------------------------------------------ shared checks

    def _tool_call(self, partial: _PartialCall, finish: str | None) -> ToolCall:
        if not partial.name:
            raise ProviderError(
                ErrorKind.SERVER_ERROR,
                f"{self.name} sent a tool call without a function name; try again",
                provider=self.name,
            )
        raw = "".join(partial.arguments)
        try:
            return ToolCall(id=partial.id or uuid.uuid4().hex[:9], name=partial.name, arguments=raw)
        except ValidationError as exc:
            cut = " (the answer hit the output-token limit)" if finish == "length" else ""
            raise ProviderError(
                ErrorKind.SERVER_ERROR,
                f"{self.name} sent arguments for tool {partial.name!r} that are not a JSON "
                f"object{cut}; try again",
                provider=self.name,
            ) from exc

    def _check_finish(
        self,
        finish: str | None,
        text: str,
        has_calls: bool,
        error: Any,
        *,
        visible: bool,
    ) -> None:
        if finish == "error" or isinstance(error, Mapping):
            declared = error if isinstance(error, Mapping) else {"message": ""}
            raise self.declared_error(declared, visible=visible)
        if finish == "content_filter" and not text.strip() and not has_calls:
            raise ProviderError(
                ErrorKind.CONTENT_FILTER,
                f"{self.name} withheld the answer under its content policy; rephrase the request",
                provider=self.name,
                visible_output=visible,
            )

    def declared_error(self, error: Mapping[str, Any], *, visible: bool) -> ProviderError:
        """Classify an error the server declared inside a 200 body or stream.

        A numeric ``code`` is the HTTP status the error stands for (OpenRouter); otherwise
        the code, type and sentence decide, the same words an HTTP error would be read by.
        """
        code = error.get("code")
        status: int | None = None
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            status = code
        elif isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
            status = int(code)
        if status is None:
            words = " ".join(str(error.get(k) or "") for k in ("code", "type", "message"))
            if _RATE_WORDS.search(words) or _QUOTA_WORDS.search(words):
                status = 429
            elif _CONTEXT_WORDS.search(words):
                status = 400
            else:
                status = 500
        body = json.dumps({"error": dict(error)}, default=str)
        base = error_from_response(self.name, status, {}, body)
        message = base.message
        if message.startswith("HTTP "):
            message = f"{self.name} reported an error in its answer without saying why"
        return ProviderError(
            base.kind,
            message,
            provider=self.name,
            retry_after_seconds=base.retry_after_seconds,
            visible_output=visible,
        )

"""The Anthropic Messages wire: request encoding, response decoding, error classes.

Facts of the wire this module is built around (Anthropic's public API documentation):

* ``system`` is a top-level list of text blocks; ``messages`` alternate user/assistant and
  carry content blocks (``text``, ``image``, ``tool_use``, ``tool_result``, ``thinking``).
  A tool result lives in the *user* turn that follows the assistant's ``tool_use``, with
  its own ``content`` array — which is where a tool's image goes, so the model sees it.
* Prompt caching is opt-in per request with ``cache_control: {"type": "ephemeral"}`` on at
  most four blocks. We spend them on the last tool definition, the last system block and
  the last two messages: the cached prefix then grows with the conversation, and the
  second message mark keeps an earlier write inside the server's lookback window when a
  tool loop appends many blocks at once.
* Claude 4.6 and later take adaptive thinking (``thinking: {"type": "adaptive"}``), the
  model deciding when and how much to deliberate, calibrated by ``output_config.effort``
  (``low`` … ``max``; ``high`` is the server default). Older models (Haiku 4.5, Opus 4.5 …)
  get neither field: they would need a fixed thinking budget, which is not what the spec
  asks for.
* With thinking on, the assistant turn that asked for a tool must be sent back verbatim —
  thinking blocks and their signatures included — together with the tool's result. The
  agent loop only keeps normalized messages, so :class:`AssistantEcho` remembers each
  tool-calling turn as received, keyed by its tool-use ids, and the encoder replays it.
  When it cannot (the turn is unknown, e.g. after a restart mid-loop), the request drops
  the thinking field, which is what the API itself recommends in that situation.

Only the codec lives here; the ``anthropic`` adapter owns the HTTP exchange, the two auth
modes (API key, Claude subscription OAuth) and the assembly of a streamed message, which
reuses this module's decoding helpers so both modes produce the same :class:`Turn`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fermix_core.messages import (
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolDefinition,
    Turn,
    Usage,
)
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from pydantic import ValidationError

from fermix_providers.wires.schema import portable_schema

__all__ = [
    "ANTHROPIC_VERSION",
    "MAX_CACHE_BREAKPOINTS",
    "MAX_TOKENS_BUFFERED",
    "MAX_TOKENS_STREAMING",
    "MESSAGES_PATH",
    "PARAGRAPH",
    "THINKING_TYPES",
    "AssistantEcho",
    "ToolNames",
    "WireOptions",
    "apply_cache_breakpoints",
    "build_body",
    "build_turn",
    "content_text",
    "error_from_event",
    "model_version",
    "parse_message",
    "refine_http_error",
    "supports_adaptive_thinking",
    "tool_call",
    "usage_from",
]

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
MESSAGES_PATH = "/messages"
#: Buffered calls deliver nothing until the whole answer exists, so thinking plus the
#: visible answer must fit the buffered receive window; 16384 tokens does (the spec's cap).
MAX_TOKENS_BUFFERED = 16_384
#: A streamed call is only bounded by the silence between chunks, so it may run longer.
#: 32768 leaves room for deep thinking and a long answer while staying inside the output
#: ceiling of every current Claude model (64k and up).
MAX_TOKENS_STREAMING = 32_768
MAX_CACHE_BREAKPOINTS = 4
#: Breakpoints spent on the conversation tail (the rest go to tools and system).
_MESSAGE_BREAKPOINTS = 2
_EPHEMERAL = {"type": "ephemeral"}
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_ADAPTIVE_SINCE = (4, 6)
_MODEL_VERSION = re.compile(r"^claude-(?:[a-z]+-)?(\d+)(?:-(\d{1,2}))?(?=$|[-@])")


# --------------------------------------------------------------------------- models


def model_version(model: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Claude model id; ``None`` when the id has no version.

    Handles both naming schemes (``claude-sonnet-4-6``, ``claude-3-7-sonnet-20250219``) and
    a trailing date (``claude-opus-4-20250514`` is 4.0, not 4.20).
    """
    match = _MODEL_VERSION.match(model.strip().lower())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def supports_adaptive_thinking(model: str) -> bool:
    """Claude 4.6 and later; unknown ids get no thinking field (the server default)."""
    version = model_version(model)
    return version is not None and version >= _ADAPTIVE_SINCE


# --------------------------------------------------------------------------- tool names


class ToolNames:
    """Maps tool names to the wire and back, for modes that must rename them.

    The Claude subscription mode prefixes every tool with ``mcp_``, as Claude Code does
    for tools it did not define itself. Wire names are limited to 64 characters, so a long
    name is shortened with a stable hash suffix; the reverse map comes from the request's
    own tool list, so the agent always gets back exactly the name it offered.
    """

    LIMIT = 64

    def __init__(self, prefix: str = "", tools: Iterable[ToolDefinition] = ()) -> None:
        self.prefix = prefix
        self._back: dict[str, str] = {}
        for tool in tools:
            self._back[self.to_wire(tool.name)] = tool.name

    def to_wire(self, name: str) -> str:
        if not self.prefix:
            return name
        wired = self.prefix + name
        if len(wired) <= self.LIMIT:
            return wired
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        return f"{wired[: self.LIMIT - 9]}_{digest}"

    def from_wire(self, name: str) -> str:
        if name in self._back:
            return self._back[name]
        if self.prefix and name.startswith(self.prefix):
            return name[len(self.prefix) :]
        return name


# --------------------------------------------------------------------------- echo memory


class AssistantEcho:
    """Tool-calling assistant turns exactly as the server sent them, keyed by tool-use id.

    Bounded, because a daemon runs for weeks; an evicted turn only costs the thinking
    field on a continuation (see the module docstring), never a failed call.
    """

    def __init__(self, limit: int = 512) -> None:
        self.limit = limit
        self._turns: OrderedDict[str, tuple[dict[str, Any], ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._turns)

    def remember(self, blocks: Sequence[Mapping[str, Any]]) -> None:
        frozen = tuple(dict(block) for block in blocks)
        ids = [b["id"] for b in frozen if b.get("type") == "tool_use" and b.get("id")]
        for tool_id in ids:
            self._turns[tool_id] = frozen
            self._turns.move_to_end(tool_id)
        while len(self._turns) > self.limit:
            self._turns.popitem(last=False)

    def recall(self, tool_ids: Sequence[str]) -> list[dict[str, Any]] | None:
        """The stored turn whose tool uses are exactly *tool_ids*, as fresh copies."""
        if not tool_ids or tool_ids[0] not in self._turns:
            return None
        blocks = self._turns[tool_ids[0]]
        stored = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if stored != list(tool_ids):
            return None
        return [dict(block) for block in blocks]


# --------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class WireOptions:
    """Per-call choices the provider makes before encoding."""

    model: str
    stream: bool = False
    #: The canonical effort to send as ``output_config.effort`` (already clamped).
    effort: str | None = None
    #: Whether the model takes adaptive thinking.
    thinking: bool = False
    #: A first system block identifying the client (the Claude Code emulation).
    identity: str | None = None
    max_tokens: int | None = None


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.url is None:
        source = {"type": "base64", "media_type": part.media_type, "data": part.base64()}
    else:
        source = {"type": "url", "url": part.url}
    return {"type": "image", "source": source}


def _part_blocks(parts: Iterable[TextPart | ImagePart]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, ImagePart):
            blocks.append(_image_block(part))
        elif part.text.strip():  # the API rejects empty text blocks
            blocks.append({"type": "text", "text": part.text})
    return blocks


def _assistant_blocks(
    message: Message, names: ToolNames, echo: AssistantEcho
) -> tuple[list[dict[str, Any]], bool]:
    """The wire blocks of an assistant message, and whether they were replayed verbatim."""
    if any(isinstance(p, ImagePart) for p in message.content):
        raise ProviderError(
            ErrorKind.INVALID_REQUEST,
            "an assistant message in the history carries an image, which the Anthropic "
            "Messages API does not accept; move the image into a user message",
            provider="anthropic",
        )
    ids = [call.id for call in message.tool_calls]
    replay = echo.recall(ids) if ids else None
    if replay is not None:
        return replay, True
    blocks = _part_blocks(message.content)
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": names.to_wire(call.name),
                "input": call.arguments,
            }
        )
    return blocks, False


def _tool_result_block(message: Message) -> dict[str, Any]:
    result = message.tool_result
    assert result is not None
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    content = _part_blocks(result.content)
    if content:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


def _open_cycle(messages: Sequence[Message]) -> int | None:
    """Index of the assistant message whose tool calls the history ends answering."""
    answered = False
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "system":
            continue
        if message.role == "tool":
            answered = True
            continue
        if answered and message.role == "assistant" and message.tool_calls:
            return index
        return None
    return None


def _encode_messages(
    messages: Sequence[Message], names: ToolNames, echo: AssistantEcho
) -> tuple[list[str], list[dict[str, Any]], bool]:
    """System texts, wire messages, and whether the open tool cycle can keep thinking on."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    open_cycle = _open_cycle(messages)
    open_cycle_replayed = True
    for index, message in enumerate(messages):
        if message.role == "system":
            if message.text.strip():
                system.append(message.text)
            continue
        if message.role == "assistant":
            role = "assistant"
            blocks, replayed = _assistant_blocks(message, names, echo)
            if index == open_cycle:
                open_cycle_replayed = replayed
        elif message.role == "tool":
            role, blocks = "user", [_tool_result_block(message)]
        else:
            role, blocks = "user", _part_blocks(message.content)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # Tool results must open the user turn that answers a tool use.
            turn["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return system, turns, open_cycle_replayed


def _mark_last_cacheable(blocks: list[dict[str, Any]]) -> bool:
    for block in reversed(blocks):
        if block.get("type") not in THINKING_TYPES:
            block["cache_control"] = dict(_EPHEMERAL)
            return True
    return False


def apply_cache_breakpoints(body: dict[str, Any]) -> int:
    """Mark tools, system and the conversation tail; returns how many marks were placed."""
    budget = MAX_CACHE_BREAKPOINTS
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = dict(_EPHEMERAL)
        budget -= 1
    if body.get("system"):
        body["system"][-1]["cache_control"] = dict(_EPHEMERAL)
        budget -= 1
    marks = min(budget, _MESSAGE_BREAKPOINTS)
    for turn in reversed(body.get("messages", [])):
        if marks == 0:
            break
        if _mark_last_cacheable(turn["content"]):
            marks -= 1
            budget -= 1
    return MAX_CACHE_BREAKPOINTS - budget


def build_body(
    request: ChatRequest, options: WireOptions, names: ToolNames, echo: AssistantEcho
) -> dict[str, Any]:
    """The JSON body for one Messages call. Never mutates *request* or *echo*."""
    system_texts, messages, replayed = _encode_messages(request.messages, names, echo)
    if not messages:
        raise ProviderError(
            ErrorKind.INVALID_REQUEST,
            "the request has no user or assistant content to send (only system text or "
            "empty messages); add a user message",
            provider="anthropic",
        )
    system = [{"type": "text", "text": text} for text in system_texts]
    if options.identity:
        system.insert(0, {"type": "text", "text": options.identity})
    limit = options.max_tokens or (MAX_TOKENS_STREAMING if options.stream else MAX_TOKENS_BUFFERED)
    body: dict[str, Any] = {"model": options.model, "max_tokens": limit}
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        body["tools"] = [_tool(tool, names) for tool in request.tools]
    if options.thinking:
        if replayed:
            body["thinking"] = {"type": "adaptive"}
        else:
            log.info(
                "thinking is off for this continuation: the assistant turn that called the "
                "tool is not in memory (restart mid-loop?), and it must be echoed with thinking"
            )
        if options.effort:
            body["output_config"] = {"effort": options.effort}
    if options.stream:
        body["stream"] = True
    apply_cache_breakpoints(body)
    return body


def _tool(tool: ToolDefinition, names: ToolNames) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": names.to_wire(tool.name)}
    if tool.description:
        wire["description"] = tool.description
    wire["input_schema"] = portable_schema(tool.parameters)
    return wire


# --------------------------------------------------------------------------- decoding


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_from(usage: Mapping[str, Any]) -> Usage:
    """Normalized usage. Anthropic's ``input_tokens`` excludes cached input; ours includes
    it (as on the OpenAI wires), and ``cached_input_tokens`` counts cache reads and writes.
    """
    cached = _int(usage.get("cache_read_input_tokens")) + _int(
        usage.get("cache_creation_input_tokens")
    )
    return Usage(
        input_tokens=_int(usage.get("input_tokens")) + cached,
        output_tokens=_int(usage.get("output_tokens")),
        cached_input_tokens=cached,
    )


#: Text blocks separated by thinking or a tool use read as separate paragraphs; adjacent
#: text blocks (citation splits) are one run of text.
PARAGRAPH = "\n\n"


def content_text(blocks: Sequence[Mapping[str, Any]]) -> str:
    text = ""
    previous: Any = None
    for block in blocks:
        kind = block.get("type")
        piece = block.get("text") if kind == "text" else None
        if isinstance(piece, str) and piece:
            if text and previous != "text":
                text += PARAGRAPH
            text += piece
        previous = kind
    return text


def tool_call(
    provider: str, block: Mapping[str, Any], names: ToolNames, *, visible: bool = False
) -> ToolCall:
    """A normalized tool call from a ``tool_use`` block; a malformed one is a typed error."""
    name = names.from_wire(str(block.get("name") or ""))
    try:
        return ToolCall(id=str(block.get("id") or ""), name=name, arguments=block.get("input"))
    except ValidationError as exc:
        problem = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
        raise ProviderError(
            ErrorKind.SERVER_ERROR,
            f"Anthropic returned an unusable call to tool {name!r} ({problem})",
            provider=provider,
            visible_output=visible,
        ) from None


def parse_message(
    provider: str,
    data: Any,
    names: ToolNames,
    echo: AssistantEcho,
    *,
    model: str = "",
) -> Turn:
    """A buffered Messages response as a :class:`Turn` (*model*: the one requested)."""
    if not isinstance(data, Mapping):
        raise ProviderError(
            ErrorKind.SERVER_ERROR,
            f"{provider} answered with JSON that is not a message object",
            provider=provider,
        )
    if data.get("type") == "error":
        raise error_from_event(provider, data)
    content = data.get("content")
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    calls = [tool_call(provider, b, names) for b in blocks if b.get("type") == "tool_use"]
    if calls:
        echo.remember(blocks)
    return build_turn(
        provider,
        content=content_text(blocks),
        calls=calls,
        blocks=blocks,
        usage=usage if isinstance(usage := data.get("usage"), Mapping) else {},
        model=str(data.get("model") or model),
        message_id=data.get("id"),
        stop_reason=data.get("stop_reason"),
    )


def build_turn(
    provider: str,
    *,
    content: str,
    calls: list[ToolCall],
    blocks: Sequence[Mapping[str, Any]],
    usage: Mapping[str, Any],
    model: str,
    message_id: Any,
    stop_reason: Any,
    visible: bool = False,
) -> Turn:
    """Shared tail of buffered and streamed decoding: refusals, state, usage."""
    if stop_reason == "refusal" and not content.strip() and not calls:
        raise ProviderError(
            ErrorKind.CONTENT_FILTER,
            "Claude declined to answer this request (stop_reason: refusal); rephrase it",
            provider=provider,
            visible_output=visible,
        )
    state: dict[str, Any] = {}
    if message_id:
        state["message_id"] = message_id
    if stop_reason:
        state["stop_reason"] = stop_reason
    thinking = [dict(b) for b in blocks if b.get("type") in THINKING_TYPES]
    if thinking:
        state["thinking"] = thinking
    return Turn(
        content=content,
        tool_calls=calls,
        usage=usage_from(usage),
        model=model,
        provider_state=state,
    )


# --------------------------------------------------------------------------- errors


_EVENT_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": ErrorKind.OVERLOADED,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "api_error": ErrorKind.SERVER_ERROR,
    "timeout_error": ErrorKind.TIMEOUT,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.AUTH,
    "billing_error": ErrorKind.QUOTA,
    "not_found_error": ErrorKind.INVALID_REQUEST,
    "request_too_large": ErrorKind.INVALID_REQUEST,
    "invalid_request_error": ErrorKind.INVALID_REQUEST,
}
_CONTEXT = re.compile(r"prompt is too long|context (?:window|length)|too many tokens", re.I)
_BILLING = re.compile(r"credit balance|billing|usage limit", re.I)


def error_from_event(
    provider: str, payload: Mapping[str, Any], *, visible: bool = False
) -> ProviderError:
    """An ``error`` the server declared (SSE event or 200 body), quoting its own sentence."""
    error = payload.get("error") if isinstance(payload.get("error"), Mapping) else payload
    kind_name = str(error.get("type") or "")
    sentence = str(error.get("message") or "").strip()[:300]
    kind = _EVENT_KINDS.get(kind_name, ErrorKind.SERVER_ERROR)
    if kind is ErrorKind.INVALID_REQUEST and _CONTEXT.search(sentence):
        kind = ErrorKind.CONTEXT_LENGTH
    elif kind is ErrorKind.INVALID_REQUEST and _BILLING.search(sentence):
        kind = ErrorKind.QUOTA
    message = sentence or f"Anthropic reported {kind_name or 'an unnamed error'} mid-response"
    return ProviderError(kind, message, provider=provider, visible_output=visible)


def refine_http_error(error: ProviderError) -> ProviderError:
    """Anthropic-specific corrections to the shared HTTP classification."""
    if error.kind is ErrorKind.INVALID_REQUEST and _BILLING.search(error.message):
        # "Your credit balance is too low" arrives as a 400, but it is a quota problem
        # another provider can absorb, not a malformed request.
        return ProviderError(ErrorKind.QUOTA, error.message, **error._fields())
    return error

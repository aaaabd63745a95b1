"""The normalized conversation vocabulary every provider adapter speaks.

Agent code builds requests from these records and reads model results only through them, so
no provider's wire body ever leaks past its adapter. Each adapter encodes a neutral
:class:`ImagePart` at its own edge (Anthropic blocks, Responses input images, Chat
Completions data URLs), which keeps the text-only request shape — and with it prompt
caching — identical whether or not a turn carries pictures.

The records are pydantic models because they cross boundaries: they are persisted as
history, written to traces and sent over the daemon socket. They are frozen so that a
provider cannot quietly edit the history the agent loop hands it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolResult",
    "Turn",
    "Usage",
    "coerce_parts",
    "parts_text",
    "text_length",
    "text_part",
]

Role = Literal["system", "user", "assistant", "tool"]

#: Tool names every major wire accepts (OpenAI is the strictest: 64 chars of this set).
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: Core models are built (validator and serializer) on first use, not when defined: a
#: one-off ``fermix ask`` imports every message, channel and memory model and validates
#: or dumps only a few of them (docs/performance.md, "Seventh pass").
_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)

_new = object.__new__
_set = object.__setattr__


def built_instance(cls: Any, fields: dict[str, Any], fields_set: set[str]) -> Any:
    """An instance of *cls* holding *fields* as validation would store them, unvalidated.

    Only for values every field's validation would keep as they are (parts and calls
    that are already built, plain ``str``/``bool``): the result is equal to, hashes and
    serializes like, and has the same ``model_fields_set`` as the validated instance.
    """
    made = _new(cls)
    _set(made, "__dict__", fields)
    _set(made, "__pydantic_fields_set__", fields_set)
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


class TextPart(BaseModel):
    """A run of text inside a message or a tool result."""

    model_config = _FROZEN

    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """One picture, held inline (``data``), by reference (``url``) or as a local file (``path``).

    Exactly one of the three is set: an adapter must know whether it has bytes to encode or
    a URL to pass through, and two would leave it guessing which one is authoritative.
    ``path`` is how history keeps inbound images: the file lives under
    ``$FERMIX_HOME/media/images`` and the row stores only its name, so a conversation with
    pictures stays small in SQLite. :meth:`fermix_core.provider.Provider.prepare_images`
    reads and fits path images into inline bytes before a wire encodes them. Inline bytes
    travel as base64 in JSON so a trace round-trips losslessly.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        ser_json_bytes="base64",
        val_json_bytes="base64",
        defer_build=True,
    )

    type: Literal["image"] = "image"
    media_type: str
    data: bytes | None = Field(default=None, repr=False)
    url: str | None = None
    path: str | None = None

    @field_validator("media_type")
    @classmethod
    def _image_media_type(cls, value: str) -> str:
        value = value.strip().lower()
        if not value.startswith("image/") or value == "image/":
            raise ValueError(
                f"media_type must be an image/* type such as 'image/png', not {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ImagePart:
        sources = sum(value is not None for value in (self.data, self.url, self.path))
        if sources != 1:
            raise ValueError("an ImagePart needs exactly one of data (bytes), url or path")
        if self.data is not None and not self.data:
            raise ValueError("ImagePart.data is empty; pass the image bytes or a url instead")
        if self.path is not None and not self.path.strip():
            raise ValueError("ImagePart.path is empty; pass the file's absolute path")
        return self

    def read(self) -> bytes:
        """The image's bytes: inline data, or the file behind ``path`` (this blocks)."""
        if self.data is not None:
            return self.data
        if self.path is not None:
            with open(self.path, "rb") as handle:
                return handle.read()
        raise ValueError(
            "this ImagePart refers to a url; download it first or pass the url through"
        )

    def base64(self) -> str:
        """The image's bytes as standard base64, the form every vision wire asks for."""
        return base64.b64encode(self.read()).decode("ascii")

    def data_url(self) -> str:
        """A ``data:`` URL (what OpenAI-shaped wires take for inline images)."""
        return f"data:{self.media_type};base64,{self.base64()}"


#: A content part; ``type`` tells them apart when history is read back from JSON.
Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


def coerce_parts(value: Any) -> Any:
    """Accept ``"text"``, a single part, or a list mixing strings and parts.

    Callers write ``Message.user("hi")`` far more often than they build part lists; turning
    strings into :class:`TextPart` here keeps that convenience out of every call site.
    Anything else is passed on for pydantic to reject with its usual message.
    """
    if type(value) is list:
        # The common case (constructors and the store hand over lists of parts): kept as
        # it is unless it holds a string to wrap or drop.
        for item in value:
            if isinstance(item, str):
                break
        else:
            return value
    elif value is None:
        return []
    if isinstance(value, str):
        return [text_part(value)] if value else []
    if isinstance(value, TextPart | ImagePart | dict):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        return [
            text_part(item) if isinstance(item, str) else item
            for item in value
            if not (isinstance(item, str) and not item)
        ]
    return value


def parts_text(parts: Sequence[TextPart | ImagePart]) -> str:
    """The text of *parts* joined by blank lines; images contribute nothing."""
    if len(parts) == 1:  # most messages: one text part, no join to build
        part = parts[0]
        return part.text if isinstance(part, TextPart) else ""
    return "\n\n".join(p.text for p in parts if isinstance(p, TextPart) and p.text)


def text_length(message: Message) -> int:
    """``len(message.text)``, counted without building the joined text."""
    parts = message.tool_result.content if message.tool_result is not None else message.content
    total = joins = 0
    for part in parts:
        if isinstance(part, TextPart) and part.text:
            total += len(part.text)
            joins += 1
    return total + 2 * (joins - 1) if joins else 0


class ToolCall(BaseModel):
    """The model asking for one tool to run.

    ``arguments`` is always a dict. Wires that ship arguments as a JSON string are decoded
    here, once, so the agent loop never has to wonder which form it holds.
    """

    model_config = _FROZEN

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)

    @field_validator("arguments", mode="before")
    @classmethod
    def _decode_json_arguments(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"tool arguments are not valid JSON ({exc.msg})") from exc
            if not isinstance(decoded, dict):
                raise ValueError(
                    f"tool arguments must be a JSON object, got {type(decoded).__name__}"
                )
            return decoded
        return value


class ToolResult(BaseModel):
    """What a tool handed back for one :class:`ToolCall`; may carry images."""

    model_config = _FROZEN

    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    content: list[Part] = Field(default_factory=list)
    is_error: bool = False

    @field_validator("content", mode="before")
    @classmethod
    def _coerce_content(cls, value: Any) -> Any:
        return coerce_parts(value)

    @property
    def text(self) -> str:
        return parts_text(self.content)

    @classmethod
    def of(cls, call_id: str, name: str, content: list[Any], is_error: bool) -> ToolResult:
        """``ToolResult(call_id=…, name=…, content=…, is_error=…)`` for built parts.

        The agent loop answers each call with parts a :class:`~fermix_core.tool.ToolOutput`
        already validated; anything else goes through validation as usual.
        """
        if (
            type(call_id) is str
            and call_id
            and type(name) is str
            and name
            and type(is_error) is bool
            and _built_parts(content)
        ):
            return built_instance(
                cls,
                {"call_id": call_id, "name": name, "content": list(content), "is_error": is_error},
                {"call_id", "name", "content", "is_error"},
            )
        return cls(call_id=call_id, name=name, content=content, is_error=is_error)


def _built_parts(parts: Any) -> bool:
    """Whether *parts* is a list of built parts only (what ``list[Part]`` keeps as is)."""
    if type(parts) is not list:
        return False
    for part in parts:
        kind = type(part)
        if kind is not TextPart and kind is not ImagePart:
            return False
    return True


def text_part(text: str) -> TextPart:
    """``TextPart(text=text)``, without a validation round for a plain ``str``."""
    if type(text) is str:
        return built_instance(TextPart, {"type": "text", "text": text}, {"text"})
    return TextPart(text=text)


class Message(BaseModel):
    """One entry of conversation history as the agent loop sees it.

    The role decides which fields may be set: only an assistant message carries
    ``tool_calls``, only a tool message carries ``tool_result``, and a system message is
    text only. Violations are rejected on construction because an adapter given such a
    message would have to invent a wire shape for it.
    """

    model_config = _FROZEN

    role: Role
    content: list[Part] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_result: ToolResult | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _coerce_content(cls, value: Any) -> Any:
        return coerce_parts(value)

    def model_post_init(self, context: Any, /) -> None:
        """The role decides the shape (see the class docstring); checked once, when built.

        A post-init hook, not an ``after`` model validator: pydantic runs those again on
        every already-built message a container validates (each request's whole history),
        while this runs only when a message is made (constructed, or read from JSON).
        """
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r} ones")
        if self.role == "tool":
            if self.tool_result is None:
                raise ValueError(
                    "a tool message needs tool_result; build it with Message.tool(result)"
                )
            if self.content:
                raise ValueError("a tool message keeps its content in tool_result, not content")
        elif self.tool_result is not None:
            raise ValueError(f"only tool messages carry tool_result, not {self.role!r} ones")
        if self.role == "system" and any(isinstance(p, ImagePart) for p in self.content):
            raise ValueError("a system message is text only; send images in a user message")

    # ------------------------------------------------------------------ constructors

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, *content: str | TextPart | ImagePart) -> Message:
        """``Message.user("hi")`` or ``Message.user("what is this?", ImagePart(...))``."""
        return cls(role="user", content=list(content))

    @classmethod
    def assistant(
        cls, *content: str | TextPart | ImagePart, tool_calls: Iterable[ToolCall] = ()
    ) -> Message:
        return cls(role="assistant", content=list(content), tool_calls=list(tool_calls))

    @classmethod
    def tool(cls, result: ToolResult) -> Message:
        if type(result) is ToolResult:
            return built_instance(
                cls,
                {"role": "tool", "content": [], "tool_calls": [], "tool_result": result},
                {"role", "tool_result"},
            )
        return cls(role="tool", tool_result=result)

    @classmethod
    def of_parts(cls, role: Role, parts: list[TextPart | ImagePart]) -> Message:
        """``Message(role=role, content=parts)`` for a list of built parts.

        What the turn builds from an inbound message and the loop from a model's answer:
        the parts are built already, so only the role's rule (a system message is text
        only) is left to check. Anything else goes through validation as usual.
        """
        if (role == "user" or role == "assistant") and _built_parts(parts):
            return built_instance(
                cls,
                {"role": role, "content": list(parts), "tool_calls": [], "tool_result": None},
                {"role", "content"},
            )
        return cls(role=role, content=parts)

    # ------------------------------------------------------------------ reading

    @property
    def text(self) -> str:
        """The message's text; for a tool message, the text of its result."""
        if self.tool_result is not None:
            return self.tool_result.text
        return parts_text(self.content)

    @property
    def images(self) -> list[ImagePart]:
        parts = self.tool_result.content if self.tool_result is not None else self.content
        return [p for p in parts if isinstance(p, ImagePart)]

    @property
    def has_images(self) -> bool:
        """Whether :attr:`images` is non-empty, without building the list."""
        parts = self.tool_result.content if self.tool_result is not None else self.content
        if len(parts) == 1:  # most messages: one part, no generator to run
            return isinstance(parts[0], ImagePart)
        return any(isinstance(p, ImagePart) for p in parts)

    @property
    def is_empty(self) -> bool:
        """No visible text, no image, no tool call and no tool result.

        Such a message must never be persisted or replayed: several wires reject it and it
        teaches the model nothing.
        """
        if self.tool_calls or self.tool_result is not None:
            return False
        content = self.content
        if len(content) == 1:  # most messages: one part, no generator to run
            part = content[0]
            return not (isinstance(part, ImagePart) or part.text.strip())
        return not any(isinstance(p, ImagePart) or p.text.strip() for p in content)


class ToolDefinition(BaseModel):
    """A tool as the model sees it on the wire: name, description, JSON schema."""

    model_config = _FROZEN

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @field_validator("name")
    @classmethod
    def _wire_safe_name(cls, value: str) -> str:
        if not TOOL_NAME_RE.match(value):
            raise ValueError(
                f"tool name {value!r} must be 1-64 letters, digits, '_' or '-' "
                "(the strictest provider wire allows nothing else)"
            )
        return value

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError(
                "parameters must be a JSON schema whose top-level type is 'object' "
                "(every provider wire passes tool arguments as one object)"
            )
        return value

    @classmethod
    def from_model(cls, name: str, description: str, model: type[BaseModel]) -> ToolDefinition:
        """Derive the schema from a pydantic argument model."""
        return cls(name=name, description=description, parameters=model.model_json_schema())


class Usage(BaseModel):
    """Token accounting for one model call; add them up across a tool loop with ``+``."""

    model_config = _FROZEN

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)

    def _counts(self) -> bool:
        return bool(
            self.input_tokens
            or self.output_tokens
            or self.cached_input_tokens
            or self.reasoning_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def counts(self) -> dict[str, int]:
        """The four counts as a plain dict, in field order (what ``model_dump()`` gives)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        # Frozen, so a zero side can hand back the other unchanged (the loop's first call).
        if not self._counts():
            return other
        if not other._counts():
            return self
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class Turn(BaseModel):
    """The normalized result of one model call.

    ``provider_state`` is opaque to everyone but the adapter that wrote it (a Responses
    ``previous_response_id``, encrypted reasoning items …); the loop only carries it back.
    ``model`` is the model that actually answered, which after a failover is not the one
    that was asked for.
    """

    model_config = _FROZEN

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str
    provider_state: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        """Nothing to show and nothing to run: the "try again" case, never committed."""
        return not self.content.strip() and not self.tool_calls

    def to_message(self) -> Message:
        """The assistant message this turn adds to history.

        ``Message.assistant(self.content, tool_calls=self.tool_calls)``, built from the
        already validated text and calls without validating them again.
        """
        content, calls = self.content, self.tool_calls
        if type(content) is not str or type(calls) is not list:
            return Message.assistant(content, tool_calls=calls)
        for call in calls:
            if type(call) is not ToolCall:
                return Message.assistant(content, tool_calls=calls)
        return built_instance(
            Message,
            {
                "role": "assistant",
                "content": [text_part(content)] if content else [],
                "tool_calls": list(calls),
                "tool_result": None,
            },
            {"role", "content", "tool_calls"},
        )

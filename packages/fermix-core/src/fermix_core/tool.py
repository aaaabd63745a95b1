"""The tool contract: validated arguments in, a :class:`ToolOutput` out, never a crash on bad input.

Models produce malformed arguments routinely. Turning that into a readable error *output*
(rather than an exception) lets the model see what it got wrong and try again within the
same turn, which is why :meth:`Tool.invoke` — not each tool — owns validation.

Tools get everything they may touch through :class:`ToolContext`; there are no globals to
reach for, so the same tool behaves identically in a main turn, a subagent and a job.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fermix_core.channel import ConversationKey
from fermix_core.messages import (
    Part,
    ToolCall,
    ToolDefinition,
    ToolResult,
    built_instance,
    coerce_parts,
    parts_text,
    text_part,
)
from fermix_core.specs import ToolSpec, resolve_ref

SectionT = TypeVar("SectionT", bound=BaseModel)

__all__ = [
    "DEFERRED_STATE",
    "NoArgs",
    "ServiceTable",
    "Tool",
    "ToolBuildError",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "Trust",
    "build_tool",
    "format_validation_error",
    "resolve_deferred_state",
    "services_with",
]


class Trust(StrEnum):
    """Who a run acts for: the operator gets the full surface, a guest a read-only one."""

    OPERATOR = "operator"
    GUEST = "guest"


class HomeLike(Protocol):
    """Anything with the ``FERMIX_HOME`` directory as ``.path`` (``FermixHome`` in practice)."""

    @property
    def path(self) -> Path: ...


class _Once:
    """A service built by *factory* on first use; every table sharing it sees one instance
    (a tool running in a worker thread may be the first to ask, so the build is locked)."""

    __slots__ = ("built", "factory", "lock", "value")

    def __init__(self, factory: Callable[[], Any]) -> None:
        import threading

        self.factory = factory
        self.value: Any = None
        self.built = False
        self.lock = threading.Lock()

    def get(self) -> Any:
        if not self.built:
            with self.lock:
                if not self.built:
                    self.value = self.factory()
                    self.built = True
        return self.value


class ServiceTable(MutableMapping[str, Any]):
    """The runtime services tool calls reach (``ctx.service(name)``), some built on first use.

    A service registered with :meth:`provide` is built by its factory the first time it is
    looked up, then kept. Copies (:meth:`with_values`, :func:`services_with`) share those
    slots, so a turn's copy of the runner's table builds the sandbox policy once for every
    holder, and a copy never builds anything just by being made — unlike ``{**table}``,
    which looks every value up. Membership (``in``) and iteration never build either;
    ``items()``/``values()`` do. Assigning a name replaces its value in this table only,
    as with a dict copy.
    """

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = dict(values or {})
        self._lazy: dict[str, _Once] = {}

    def provide(self, name: str, factory: Callable[[], Any]) -> None:
        """Build *name* with *factory* when it is first looked up."""
        self._values.pop(name, None)
        self._lazy[name] = _Once(factory)

    def built(self, name: str) -> bool:
        """Whether *name* has a value without building anything."""
        if name in self._values:
            return True
        slot = self._lazy.get(name)
        return slot is not None and slot.built

    def with_values(self, **values: Any) -> ServiceTable:
        """A copy with *values* added; unbuilt services stay unbuilt and shared."""
        copy = ServiceTable.__new__(ServiceTable)  # one merged dict, not a copy of a copy
        copy._values = {**self._values, **values}
        lazy = self._lazy
        if lazy:
            lazy = dict(lazy)  # a copy of its own: provide() and assignment change it
            for name in values:
                lazy.pop(name, None)
        copy._lazy = lazy if lazy else {}
        return copy

    def without(self, *names: str) -> ServiceTable:
        """A copy without *names*."""
        copy = self.with_values()
        for name in names:
            copy._values.pop(name, None)
            copy._lazy.pop(name, None)
        return copy

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        slot = self._lazy.get(name)
        if slot is None:
            raise KeyError(name)
        return slot.get()

    def __setitem__(self, name: str, value: Any) -> None:
        self._lazy.pop(name, None)
        self._values[name] = value

    def __delitem__(self, name: str) -> None:
        if name in self._values:
            del self._values[name]
            self._lazy.pop(name, None)
        else:
            del self._lazy[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        yield from self._values
        yield from (name for name in self._lazy if name not in self._values)

    def __len__(self) -> int:
        return len(self._values) + sum(1 for name in self._lazy if name not in self._values)

    def __repr__(self) -> str:
        names = ", ".join(f"{n}{'' if self.built(n) else ' (unbuilt)'}" for n in self)
        return f"ServiceTable({names})"


def services_with(
    table: Mapping[str, Any], *, drop: Sequence[str] = (), **values: Any
) -> Mapping[str, Any]:
    """A copy of a services *table* with *values* added and *drop* removed, building
    nothing a :class:`ServiceTable` has not built yet (a plain mapping is copied as a dict)."""
    if isinstance(table, ServiceTable):
        return table.without(*drop).with_values(**values) if drop else table.with_values(**values)
    copy = {k: v for k, v in table.items() if k not in drop}
    copy.update(values)
    return copy


#: ``ToolContext.state`` key of entries worked out only if a tool runs: a dict mapping
#: each state key to a zero-argument callable. The agent loop stores every callable's
#: result under its key before the run's first tool call, so tools read plain values.
DEFERRED_STATE = "deferred_state"


def resolve_deferred_state(state: dict[str, Any]) -> None:
    """Replace :data:`DEFERRED_STATE` in *state* by the values it defers (once)."""
    deferred = state.pop(DEFERRED_STATE, None)
    if deferred:
        for key, make in deferred.items():
            state[key] = make()


@dataclass
class ToolContext:
    """What one tool call may know about the run it belongs to.

    ``capabilities`` is the per-run snapshot of tool specs (already filtered by trust), so
    meta tools such as ``tool_help`` describe exactly what this run may call. ``attended``
    defaults to false because the unattended case is the restrictive one: a run only gains
    interactive approval paths when its caller says someone is there.
    """

    trust: Trust
    cwd: Path
    home: HomeLike
    conversation_key: ConversationKey | None = None
    session_id: str = ""
    attended: bool = False
    state: dict[str, Any] = field(default_factory=dict)
    capabilities: Mapping[str, ToolSpec] = field(default_factory=dict)
    #: Where the request came from: a local caller (CLI, embedding) vs a remote channel.
    local: bool = False
    #: What the run is: "main" (a chat turn), "subagent", "job" (scheduled), "background".
    origin: str = "main"
    #: Runtime services handed to tools explicitly (no globals): ``sandbox`` (the
    #: :class:`~fermix_core.sandbox.SandboxPolicy`), ``memory`` (the memory backend),
    #: ``reply`` (the channel reply port), ``config`` (the loaded config), ``tracer``.
    services: Mapping[str, Any] = field(default_factory=dict)

    def service(self, name: str) -> Any:
        """A runtime service, or a clear error when this run does not have it."""
        try:
            return self.services[name]
        except KeyError:
            raise ToolError(f"{name} is not available in this context") from None

    def settings(self, path: str, model: type[SectionT]) -> SectionT:
        """The validated ``[path]`` section of config.toml as an instance of *model*.

        This is how a plugin's tool reads the section its ``ConfigSectionSpec`` owns
        (``ctx.settings("fermix_weather", WeatherConfig)``): the daemon validated it at boot,
        so an absent section is *model*'s defaults. A run with no loaded config (a tool
        invoked directly in a test) gets the defaults too; a model without full defaults
        then raises :class:`ToolError` naming the section.
        """
        config = self.services.get("config")
        section = config.section(path) if config is not None else None
        if isinstance(section, model):
            return section
        try:
            return model.model_validate(section if section is not None else {})
        except ValidationError as exc:
            first = exc.errors()[0]["msg"]
            raise ToolError(
                f"[{path}] is not configured (or not valid) for this tool: {first}; "
                "set it in config.toml"
            ) from None

    @property
    def is_operator(self) -> bool:
        return self.trust is Trust.OPERATOR


class ToolOutput(BaseModel):
    """A tool's answer: content the model reads, plus structured ``data`` for the runtime."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    content: list[Part] = Field(default_factory=list)
    is_error: bool = False
    data: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content", mode="before")
    @classmethod
    def _coerce_content(cls, value: Any) -> Any:
        return coerce_parts(value)

    if TYPE_CHECKING:
        # What the validator accepts, so ``ToolOutput(content="text")`` type-checks in a
        # plugin under mypy/pyright strict; at run time pydantic's own __init__ runs.
        def __init__(
            self,
            *,
            content: str | Part | Sequence[str | Part] = ...,
            is_error: bool = False,
            data: Mapping[str, Any] = ...,
        ) -> None: ...

    @classmethod
    def error(cls, message: str, **data: Any) -> ToolOutput:
        return cls(content=message, is_error=True, data=data)

    @property
    def text(self) -> str:
        return parts_text(self.content)

    def to_result(self, call: ToolCall) -> ToolResult:
        """The history record answering *call*."""
        return ToolResult.of(call.id, call.name, self.content, self.is_error)


class ToolError(Exception):
    """Raise from :meth:`Tool.run` for a failure the model should read and act on.

    The message becomes the error output verbatim, so write it for the model: what went
    wrong and what to do instead ("file is 40 MB; the cap is 20 MB — read a range").
    """


class ToolBuildError(TypeError):
    """A tool spec's factory or argument model does not produce a usable tool."""


class NoArgs(BaseModel):
    """Arguments of a tool that takes none; extra keys are reported back to the model."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


ArgsT = TypeVar("ArgsT", bound=BaseModel)


def format_validation_error(tool_name: str, exc: ValidationError) -> str:
    """One readable line per bad field, without echoing the (possibly large) input."""
    lines = [f"invalid arguments for tool {tool_name!r}:"]
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        lines.append(f"- {where}: {error['msg']}")
    lines.append("Fix these fields and call the tool again.")
    return "\n".join(lines)


class Tool(ABC, Generic[ArgsT]):
    """A capability built from a :class:`~fermix_core.specs.ToolSpec`.

    Subclasses implement :meth:`run` with already-validated arguments. The runtime calls
    :meth:`invoke`, which validates the raw model arguments first.
    """

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec
        self.args_model: type[ArgsT] = _resolve_args_model(spec)

    @property
    def name(self) -> str:
        return self.spec.name

    def definition(self) -> ToolDefinition:
        """The wire description the model sees."""
        return ToolDefinition(
            name=self.spec.name,
            description=self.spec.description,
            parameters=self.args_model.model_json_schema(),
        )

    @abstractmethod
    async def run(self, args: ArgsT, ctx: ToolContext) -> ToolOutput | str:
        """Do the work; raise :class:`ToolError` for failures the model should see."""

    async def invoke(self, raw_args: Any, ctx: ToolContext) -> ToolOutput:
        """Validate *raw_args* and run; bad input and :class:`ToolError` become error outputs.

        Any other exception propagates: it is a bug in the tool, and the caller decides how
        to log it and what the model is told.
        """
        if raw_args is None:
            raw_args = {}
        if not isinstance(raw_args, Mapping):
            return ToolOutput.error(
                f"invalid arguments for tool {self.name!r}: expected a JSON object, "
                f"got {type(raw_args).__name__}"
            )
        try:
            args = self.args_model.model_validate(dict(raw_args))
        except ValidationError as exc:
            return ToolOutput.error(format_validation_error(self.name, exc))
        try:
            result = await self.run(args, ctx)
        except ToolError as exc:
            return ToolOutput.error(str(exc) or f"tool {self.name!r} failed")
        if type(result) is str:
            # ToolOutput(content=result), without validating a plain string again.
            return built_instance(
                ToolOutput,
                {"content": [text_part(result)] if result else [], "is_error": False, "data": {}},
                {"content"},
            )
        if isinstance(result, str):
            return ToolOutput(content=result)
        if not isinstance(result, ToolOutput):
            raise TypeError(
                f"tool {self.name!r} returned {type(result).__name__}; "
                "run() must return a ToolOutput or a str"
            )
        return result


def _resolve_args_model(spec: ToolSpec) -> type[Any]:
    if spec.args_model is None:
        return NoArgs
    try:
        model = resolve_ref(spec.args_model)
    except ImportError as exc:
        raise ToolBuildError(f"tool {spec.name!r}: args_model cannot be imported: {exc}") from exc
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ToolBuildError(
            f"tool {spec.name!r}: args_model must be a pydantic BaseModel subclass, got {model!r}"
        )
    return model


def build_tool(spec: ToolSpec) -> Tool[Any]:
    """Resolve ``spec.factory`` and call it with *spec*; the result must be a :class:`Tool`.

    The factory is usually the ``Tool`` subclass itself, but any callable taking the spec
    works (a closure that injects a shared client, for example).
    """
    if spec.factory is None:
        raise ToolBuildError(f"tool {spec.name!r} has no factory; set ToolSpec.factory")
    try:
        factory = resolve_ref(spec.factory)
    except ImportError as exc:
        raise ToolBuildError(f"tool {spec.name!r}: factory cannot be imported: {exc}") from exc
    tool = factory(spec)
    if not isinstance(tool, Tool):
        raise ToolBuildError(
            f"tool {spec.name!r}: factory {spec.factory!r} returned {type(tool).__name__}, "
            "not a fermix_core.tool.Tool"
        )
    return tool

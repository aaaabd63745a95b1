"""The capability registry and the per-run, trust-filtered snapshot the agent loop runs from.

One rule decides everything a run can do with a tool: *is it in this run's snapshot?* The
prompt catalog, the wire definitions, dispatch by name and every discovery path
(``tool_help``, ``tool_search``, ``tool_describe``, ``tool_call``) all read the same
snapshot, so a tool filtered out for a guest is absent everywhere at once rather than hidden
in one place and reachable through another.

Trust is derived from what a spec declares, never from a per-tool allowlist that could drift:

* an **operator** sees every tool;
* a **guest** sees first-party ``PolicyClass.READ_ONLY`` tools that are ``read_only`` and not
  ``owner_only``. Owner-data reads, writes, exec, network and external APIs are out, and so is
  every third-party tool: a plugin's policy is self-declared and plugins front the owner's
  own integrations (mail, calendars, MCP servers), which a guest may not reach;
* ``react`` (the one channel side effect that answers the sender in place) is offered only
  when the channel supports reactions, and then to guests too unless it is owner-only: a
  reaction on the guest's own message in the guest's own chat affects nobody else.

Building a tool imports its module, so tools are built on first use and cached on the
registry, shared by every snapshot. Snapshots are cached per (trust, reactions) as well:
they are immutable, and a busy daemon takes one per turn.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from fermix_core.agent.bm25 import BM25Index
from fermix_core.agent.definition_cache import DefinitionCache
from fermix_core.config.models import DEFAULT_MAX_RESULT_CHARS, DEFAULT_TOOL_TIMEOUT_S
from fermix_core.messages import ToolDefinition
from fermix_core.plugins.discovery import FIRST_PARTY, distribution_of
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Tool, ToolBuildError, Trust, build_tool

__all__ = [
    "BRIDGE_NAMES",
    "CATALOG_HEADING",
    "PLUGINS_HEADING",
    "Capabilities",
    "CapabilityRegistry",
    "ToolUnavailable",
    "distribution_of",
    "is_third_party",
    "visible_to",
]

log = logging.getLogger("fermix.agent.capabilities")

#: Names core reserves for the deferral bridges; a plugin spec claiming one is ignored.
BRIDGE_NAMES: tuple[str, ...] = ("tool_search", "tool_describe", "tool_call")
REACT = "react"
CATALOG_HEADING = "## Built-in Capability Catalog"
PLUGINS_HEADING = "## Plugins"
_SNAPSHOT_CACHE_LIMIT = 64


class ToolUnavailable(LookupError):
    """A name that is not in this run's snapshot (unknown, or filtered out by trust)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"no tool named {name!r} is available on this turn; check the capability "
            "catalog (or tool_search) for the exact name"
        )


def is_third_party(source: str | None) -> bool:
    """Whether a tool from *source* comes from outside the four first-party distributions.

    ``None`` or ``""`` means no source was recorded: the caller built the registry straight
    from specs (an embedding app or a test vouching for its own tools), so first-party.
    An in-process plugin registered without a distribution is third-party, like any other
    unknown origin.
    """
    if not source:
        return False
    return distribution_of(source) not in FIRST_PARTY


def visible_to(
    spec: ToolSpec, trust: Trust, *, third_party: bool, reactions: Sequence[str] | None
) -> bool:
    """Whether *spec* belongs in a snapshot for *trust* (the whole trust policy in one place)."""
    if spec.name == REACT and spec.policy is PolicyClass.CHANNEL_SIDE_EFFECT:
        if reactions is None:
            return False
        if trust is Trust.OPERATOR:
            return True
        return not spec.owner_only and not third_party
    if trust is Trust.OPERATOR:
        return True
    return (
        not third_party
        and spec.policy is PolicyClass.READ_ONLY
        and spec.read_only
        and not spec.owner_only
    )


def first_line(text: str, limit: int = 160) -> str:
    """The first line of a description, cut at *limit* characters for one-line listings."""
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


class CapabilityRegistry:
    """Every registered tool spec, their origins, the deferral switch and the built tools.

    ``sources`` maps a tool name to its plugin's source string (``SpecRegistry.source_of``);
    ``deferral`` mirrors ``[fermix_core.tools.tool_search] enabled``.
    """

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        *,
        sources: Mapping[str, str] | None = None,
        deferral: bool = True,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_S,
        definition_cache: DefinitionCache | None = None,
    ) -> None:
        self.deferral = deferral
        #: Wire definitions kept between processes (see ``agent/definition_cache.py``).
        self.definition_cache = definition_cache
        #: ``[fermix_core.tools] max_result_chars`` and ``timeout_seconds``: every call's caps.
        self.max_result_chars = max_result_chars
        self.timeout_seconds = timeout_seconds
        self.errors: list[str] = []
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if not isinstance(spec, ToolSpec):
                raise TypeError(f"CapabilityRegistry takes ToolSpecs, not {type(spec).__name__}")
            if spec.name in BRIDGE_NAMES:
                origin = (sources or {}).get(spec.name, "an unknown source")
                message = (
                    f"tool {spec.name!r} from {origin} was ignored: the name is reserved "
                    "for core's tool-search bridge"
                )
                log.warning("%s", message)
                self.errors.append(message)
                continue
            if spec.name in self._specs:
                raise ValueError(f"tool {spec.name!r} was given twice; tool names are unique")
            self._specs[spec.name] = spec
        self._sources = dict(sources or {})
        self._third_party = frozenset(
            name for name in self._specs if is_third_party(self._sources.get(name))
        )
        self._tools: dict[str, Tool[Any]] = {}
        self._broken: dict[str, str] = {}
        self._definitions: dict[str, ToolDefinition] = {}
        self._snapshots: dict[tuple[Trust, tuple[str, ...] | None], Capabilities] = {}
        self._runtime: set[str] = set()

    # ------------------------------------------------------------------ reading

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        return MappingProxyType(self._specs)

    def source_of(self, name: str) -> str | None:
        return self._sources.get(name)

    def third_party(self, name: str) -> bool:
        return name in self._third_party

    def timeout_for(self, spec: ToolSpec) -> float:
        """The deadline of one call of *spec*: its own override, else the configured one."""
        return spec.timeout_seconds if spec.timeout_seconds is not None else self.timeout_seconds

    def deferred(self, spec: ToolSpec) -> bool:
        """Whether *spec*'s schema leaves the wire (only ever while deferral is on).

        The spec decides when it says (``deferred=True``/``False``); otherwise third-party
        tools are deferred and first-party ones are not. Run-time tools (MCP) always are.
        """
        if not self.deferral:
            return False
        if spec.name in self._runtime:
            return True
        if spec.deferred is not None:
            return spec.deferred
        return spec.name in self._third_party

    # ------------------------------------------------------------------ building

    def tool(self, name: str) -> Tool[Any]:
        """The built tool for a registered spec, built once; a failure is remembered."""
        built = self._tools.get(name)
        if built is not None:
            return built
        if name in self._broken:
            raise ToolBuildError(self._broken[name])
        spec = self._specs[name]
        try:
            built = build_tool(spec)
        except ToolBuildError as exc:
            self._broken[name] = str(exc)
            log.error("tool %r cannot be built: %s", name, exc)
            raise
        except Exception as exc:
            message = f"tool {name!r}: factory raised {type(exc).__name__}: {exc}"
            self._broken[name] = message
            log.exception("tool %r cannot be built", name)
            raise ToolBuildError(message) from exc
        self._tools[name] = built
        return built

    def definition(self, name: str) -> ToolDefinition:
        """The wire definition of a registered tool (cached: schema generation is not free)."""
        cached = self._definitions.get(name)
        if cached is not None:
            return cached
        disk = self.definition_cache if name not in self._runtime else None
        spec = self._specs[name]
        if disk is not None and name not in self._broken:
            cached = disk.get(spec)
        if cached is None:
            try:
                cached = self.tool(name).definition()
            except ValueError as exc:  # pydantic's ValidationError: not an object schema
                message = f"tool {name!r}: its argument schema is unusable: {exc}"
                self._broken[name] = message
                self._tools.pop(name, None)
                log.error("%s", message)
                raise ToolBuildError(message) from exc
            if disk is not None:
                disk.put(spec, cached)
        self._definitions[name] = cached
        return cached

    # ------------------------------------------------------------------ run-time tools

    def add_runtime_tool(self, tool: Tool[Any], *, source: str) -> None:
        """Register a tool that appeared after boot (an MCP server's tools, see docs/mcp.md).

        A run-time tool is third-party whatever *source* says (never in a guest's snapshot)
        and so deferred while deferral is on. A name already taken (a spec, a bridge, an
        earlier run-time tool) is refused with :class:`ValueError`. Snapshots taken before
        keep what they had; the next snapshot sees the change.
        """
        name = tool.name
        if name in self._specs or name in BRIDGE_NAMES:
            raise ValueError(f"tool name {name!r} is already taken; it was not registered")
        self._specs[name] = tool.spec
        self._sources[name] = source
        self._third_party = self._third_party | {name}
        self._runtime.add(name)
        self._tools[name] = tool
        self._snapshots.clear()

    def remove_runtime_tools(self, names: Iterable[str]) -> None:
        """Forget run-time tools (their server went away); other names are left alone."""
        for name in list(names):
            if name not in self._runtime:
                continue
            self._runtime.discard(name)
            for table in (self._specs, self._sources, self._tools, self._definitions):
                table.pop(name, None)
        self._snapshots.clear()

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, trust: Trust, *, reactions: Sequence[str] | None = None) -> Capabilities:
        """The capabilities one run may use.

        ``reactions`` is the channel's reaction support: ``None`` when it has none, an empty
        sequence when any single emoji is accepted, otherwise the allowed set.
        """
        if type(trust) is not Trust:  # Trust(...) on a member costs two Python calls
            trust = Trust(trust)
        allowed = None if reactions is None else tuple(reactions)
        key = (trust, allowed)
        cached = self._snapshots.get(key)
        if cached is not None:
            return cached
        visible = {
            name: spec
            for name, spec in self._specs.items()
            if visible_to(spec, trust, third_party=name in self._third_party, reactions=allowed)
        }
        snapshot = Capabilities(self, trust, visible, reactions=allowed)
        if len(self._snapshots) >= _SNAPSHOT_CACHE_LIMIT:
            self._snapshots.clear()
        self._snapshots[key] = snapshot
        return snapshot


class _LazyTools(Mapping[str, Tool[Any]]):
    """``Capabilities.tools``: a mapping over the snapshot that builds tools on access."""

    def __init__(self, owner: Capabilities) -> None:
        self._owner = owner

    def __getitem__(self, name: str) -> Tool[Any]:
        try:
            return self._owner.tool(name)
        except ToolUnavailable:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._owner.specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner.specs)

    def __len__(self) -> int:
        return len(self._owner.specs)


class Capabilities:
    """What one run may call: a read-only view, already filtered by trust.

    ``specs`` holds every tool of the run — inline, deferred and the bridges — because it is
    what discovery (``ToolContext.capabilities``) reads; ``definitions()`` is the subset
    that travels on the wire.
    """

    def __init__(
        self,
        registry: CapabilityRegistry,
        trust: Trust,
        specs: Mapping[str, ToolSpec],
        *,
        reactions: tuple[str, ...] | None = None,
    ) -> None:
        from fermix_core.agent import bridges

        self.registry = registry
        self.trust = trust
        self.reactions = reactions
        self.deferred: frozenset[str] = frozenset(
            name for name, spec in specs.items() if registry.deferred(spec)
        )
        all_specs = dict(specs)
        self._bridge_tools: dict[str, Tool[Any]] = {}
        if self.deferred:
            for spec in bridges.bridge_specs(self):
                all_specs[spec.name] = spec
        self.specs: Mapping[str, ToolSpec] = MappingProxyType(all_specs)
        self.tools: Mapping[str, Tool[Any]] = _LazyTools(self)
        self._definitions: list[ToolDefinition] | None = None
        self._index: BM25Index | None = None
        #: The prompt sections, built once: a snapshot never changes (a registry change
        #: makes new snapshots).
        self._catalog: str | None = None
        self._plugins_section: str | None = None

    # ------------------------------------------------------------------ lookups

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    @property
    def bridges_active(self) -> bool:
        return bool(self.deferred)

    def is_bridge(self, name: str) -> bool:
        return self.bridges_active and name in BRIDGE_NAMES

    def inline_names(self) -> list[str]:
        """Tools whose schema is on the wire, in registration order, bridges last."""
        return [name for name in self.specs if name not in self.deferred]

    def tool(self, name: str) -> Tool[Any]:
        """The tool to dispatch *name* to; :class:`ToolUnavailable` when not in the snapshot."""
        if name not in self.specs:
            raise ToolUnavailable(name)
        if self.is_bridge(name):
            built = self._bridge_tools.get(name)
            if built is None:
                built = self._bridge_tools[name] = build_tool(self.specs[name])
            return built
        return self.registry.tool(name)

    def definition(self, name: str) -> ToolDefinition:
        if name not in self.specs:
            raise ToolUnavailable(name)
        if self.is_bridge(name):
            return self.tool(name).definition()
        return self.registry.definition(name)

    # ------------------------------------------------------------------ the model's view

    def definitions(self) -> list[ToolDefinition]:
        """The wire tool list; a tool that cannot be built is left out (and logged once)."""
        if self._definitions is None:
            result: list[ToolDefinition] = []
            for name in self.inline_names():
                try:
                    result.append(self.definition(name))
                except ToolBuildError:
                    continue
            self._definitions = result
        return list(self._definitions)

    def catalog(self) -> str:
        """The ``## Built-in Capability Catalog`` prompt section for the inline tools."""
        if self._catalog is None:
            self._catalog = self._build_catalog()
        return self._catalog

    def _build_catalog(self) -> str:
        lines = [CATALOG_HEADING, ""]
        names = self.inline_names()
        if not names:
            lines.append("No tools are available on this turn; answer from the conversation.")
            return "\n".join(lines)
        for name in names:
            lines.append(f"- {name} — {first_line(self.specs[name].description)}{self._note(name)}")
        if "tool_help" in self.specs:
            lines += ["", "Call tool_help with a tool's name for its schema and failure modes."]
        return "\n".join(lines)

    def plugins_section(self) -> str:
        """The ``## Plugins`` section listing deferred tool names; ``""`` when none."""
        if self._plugins_section is None:
            self._plugins_section = self._build_plugins_section()
        return self._plugins_section

    def _build_plugins_section(self) -> str:
        if not self.deferred:
            return ""
        groups: dict[str, list[str]] = {}
        for name in self.specs:
            if name in self.deferred:
                groups.setdefault(self._plugin_label(name), []).append(name)
        lines = [
            PLUGINS_HEADING,
            "",
            "These tools are installed, but their schemas are not loaded up front. Find one "
            "with tool_search, read its schema with tool_describe, then run it with "
            "tool_call (or call it by name).",
            "",
        ]
        for label, names in groups.items():
            joined = ", ".join(names)
            lines.append(f"- {label}: {joined}" if label else f"- {joined}")
        return "\n".join(lines)

    def search(self, query: str, limit: int = 5) -> list[ToolSpec]:
        """Deferred tools of this snapshot ranked by BM25 against *query*."""
        if self._index is None:
            self._index = BM25Index(
                (name, self._search_text(self.specs[name]))
                for name in self.specs
                if name in self.deferred
            )
        return [self.specs[name] for name, _score in self._index.search(query, limit)]

    # ------------------------------------------------------------------ helpers

    def _note(self, name: str) -> str:
        if name != REACT or self.reactions is None:
            return ""
        if not self.reactions:
            return " (any single emoji)"
        return f" (allowed: {' '.join(self.reactions)})"

    def _plugin_label(self, name: str) -> str:
        source = self.registry.source_of(name)
        if not source:
            return ""
        return source.split(" (", 1)[0].strip()

    @staticmethod
    def _search_text(spec: ToolSpec) -> str:
        # The name counts twice: a query naming the tool should beat one merely mentioning it.
        words = spec.name.replace("_", " ")
        return f"{words} {words} {spec.description} {spec.guidance}"

"""``model_routing_config``: show or set the sub-agent model in ``[fermix_core.routing]``.

A change is validated as the *merged* routing — the keys already in ``config.toml`` with
the new values laid over them — exactly the way routing will read it at spawn time, before
a single byte is written:

* the whole file must still load (unknown provider, bad effort … are config errors);
* a provider paired with a model the catalog files under another provider is refused
  (an Ollama slug under OpenRouter would fail on every spawn with an error naming neither);
* the resolved sub-agent route must build (an explicit provider must be configured).

Writes go through :func:`fermix_core.config.writer.set_value`/``unset_value`` one key at a
time, so comments survive and each write is validated again; if a later key fails, the file
is restored to what it was. The agent never changes its *own* model with this tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from fermix_core.specs import ProviderSpec, ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ModelRoutingConfig", "ModelRoutingConfigArgs"]

Effort = Literal["none", "low", "medium", "high", "xhigh", "max"]
FIELDS = ("subagent_model", "subagent_provider", "subagent_reasoning_effort")
SECTION = ("fermix_core", "routing")


class ModelRoutingConfigArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["show", "set"] = Field(
        description="'show' reads the sub-agent routing; 'set' changes the fields you pass."
    )
    subagent_model: str | None = Field(
        default=None,
        max_length=200,
        description="Model id for sub-agents; empty string clears it (inherit the main model).",
    )
    subagent_provider: str | None = Field(
        default=None,
        max_length=64,
        description="Provider for sub-agents; empty string clears it (use the primary).",
    )
    subagent_reasoning_effort: Effort | Literal[""] | None = Field(
        default=None, description="Reasoning effort for sub-agents; empty string clears it."
    )

    @model_validator(mode="after")
    def _fits_action(self) -> ModelRoutingConfigArgs:
        given = [name for name in FIELDS if getattr(self, name) is not None]
        if self.action == "show" and given:
            raise ValueError(f"'show' takes no values (got {', '.join(given)}); use 'set'")
        if self.action == "set" and not given:
            raise ValueError("'set' needs at least one of " + ", ".join(FIELDS))
        return self


def _home(ctx: ToolContext, config: Any) -> Any:
    from fermix_core.home import FermixHome

    path = getattr(config, "path", None)
    return FermixHome(path.parent) if path is not None else FermixHome(ctx.home.path)


def _routing_values(loaded: Any) -> dict[str, str | None]:
    routing = loaded.core.fermix_core.routing
    return {name: getattr(routing, name) for name in FIELDS}


def _pairing_problem(specs: Mapping[str, ProviderSpec], provider: str, model: str) -> str | None:
    """The overlay's mis-pairing rule, decided from the catalogs alone (no credentials)."""
    from fermix_core.routing import find_model

    ordered = sorted(specs.values(), key=lambda s: (s.order, s.name))
    owners = [spec.name for spec in ordered if find_model(spec, model) is not None]
    if not owners or provider in owners:
        return None
    return (
        f'model "{model}" is a {owners[0]} model in the catalog, not a {provider} one; '
        f'set subagent_provider to "{owners[0]}" or choose a {provider} model'
    )


class ModelRoutingConfig(Tool[ModelRoutingConfigArgs]):
    """The ``model_routing_config`` tool; *environ* stands in for the process env in tests."""

    def __init__(self, spec: ToolSpec, *, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(spec)
        self.environ = environ

    async def run(self, args: ModelRoutingConfigArgs, ctx: ToolContext) -> ToolOutput:
        import anyio.to_thread

        if not ctx.is_operator:
            raise ToolError("Only the owner can read or change model routing.")
        config = ctx.service("config")
        registry = ctx.services.get("registry") or getattr(config, "registry", None)
        if registry is None:
            raise ToolError("The plugin registry is not available here; use `fermix config`.")
        if args.action == "show":
            return await anyio.to_thread.run_sync(self._show, ctx, config, registry)
        return await anyio.to_thread.run_sync(self._set, args, ctx, config, registry)

    # ------------------------------------------------------------------ show

    def _load(self, home: Any, registry: Any, document: Any = None) -> Any:
        from fermix_core.config import ConfigError, load_config

        try:
            return load_config(home, registry, environ=self.environ, document=document)
        except ConfigError as exc:
            raise ToolError(f"config.toml does not load: {exc}") from None

    def _route(self, loaded: Any, registry: Any) -> tuple[Any, str | None]:
        """The sub-agent route plan, or the reason it cannot be built."""
        from fermix_core.routing import RoutingError, resolve_routes

        try:
            plan = resolve_routes(loaded, registry, self.environ, purpose="subagent")
        except RoutingError as exc:
            return None, str(exc)
        return plan, None

    def _show(self, ctx: ToolContext, config: Any, registry: Any) -> ToolOutput:
        home = _home(ctx, config)
        loaded = self._load(home, registry)
        values = _routing_values(loaded)
        plan, problem = self._route(loaded, registry)
        lines = ["[fermix_core.routing] sub-agent settings:"]
        for name, value in values.items():
            lines.append(f"- {name}: {value if value is not None else '(not set)'}")
        effective: dict[str, Any] = {}
        if problem:
            lines.append(f"The sub-agent route cannot be built: {problem}")
        elif plan is not None and plan.primary is not None:
            head = plan.primary
            effective = {
                "provider": head.name,
                "model": head.model,
                "reasoning_effort": head.effort,
            }
            lines.append(
                f"Sub-agents run on {head.name} with model {head.model or '(provider default)'}"
                + (f" at effort {head.effort}" if head.effort else "")
                + "."
            )
        else:
            lines.append("No provider is configured, so sub-agents cannot run yet.")
        return ToolOutput(
            content="\n".join(lines),
            data={"routing": values, "effective": effective, "problem": problem},
        )

    # ------------------------------------------------------------------ set

    def _changes(self, args: ModelRoutingConfigArgs) -> dict[str, str | None]:
        """Field -> new value (``None`` = remove the key) for the fields the call names."""
        changes: dict[str, str | None] = {}
        for name in FIELDS:
            value = getattr(args, name)
            if value is None:
                continue
            text = str(value).strip()
            changes[name] = text or None
        return changes

    def _set(
        self, args: ModelRoutingConfigArgs, ctx: ToolContext, config: Any, registry: Any
    ) -> ToolOutput:
        import tomlkit
        from fermix_core.config.document import parse_document, read_document

        home = _home(ctx, config)
        changes = self._changes(args)
        current = _routing_values(self._load(home, registry))
        merged = {**current, **changes}
        provider, model = merged["subagent_provider"], merged["subagent_model"]
        if provider and model:
            problem = _pairing_problem(registry.typed(ProviderSpec), provider, model)
            if problem:
                raise ToolError(f"Not saved: {problem}.")

        original = read_document(home.config_file)
        original_text = original.as_string()
        edited = parse_document(original_text, home.config_file)
        table = edited
        for part in SECTION:
            if part not in table:
                table[part] = tomlkit.table()
            table = table[part]
        for name, value in changes.items():
            if value is None:
                table.pop(name, None)
            else:
                table[name] = value
        loaded = self._load(home, registry, document=edited)
        _, problem = self._route(loaded, registry)
        if problem:
            raise ToolError(f"Not saved: {problem}.")
        described = self._write(home, registry, changes, original_text)
        plan, _ = self._route(self._load(home, registry), registry)
        head = plan.primary if plan is not None else None
        lines = ["Saved to config.toml:", *[f"- {line}" for line in described]]
        if head is not None:
            lines.append(
                f"Sub-agents will run on {head.name} with model "
                f"{head.model or '(provider default)'}"
                + (f" at effort {head.effort}" if head.effort else "")
                + ". Restart the daemon (`fermix restart`) if running sub-agents must pick it up."
            )
        return ToolOutput(
            content="\n".join(lines),
            data={"routing": {**current, **changes}, "changed": sorted(changes)},
        )

    def _write(
        self, home: Any, registry: Any, changes: Mapping[str, str | None], original_text: str
    ) -> list[str]:
        import tomlkit
        from fermix_core.config import ConfigError
        from fermix_core.config.writer import set_value, unset_value, write_document

        described: list[str] = []
        try:
            for name, value in changes.items():
                key = ".".join((*SECTION, name))
                if value is None:
                    change = unset_value(home, key, registry, environ=self.environ)
                else:
                    raw = tomlkit.item(value).as_string()  # a quoted TOML string, always
                    change = set_value(home, key, raw, registry, environ=self.environ)
                described.append(change.describe())
        except ConfigError as exc:
            write_document(home, original_text)  # all or nothing
            raise ToolError(f"Not saved: {exc}") from None
        return described

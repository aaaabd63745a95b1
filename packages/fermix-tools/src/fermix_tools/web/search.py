"""``web_search``: a query in, a short list of titled links out, from the configured backend.

DuckDuckGo is the keyless default. A configured keyed backend (``[fermix_core.tools.
web_search] backend``) that is *broken* — a rejected key, no credits, unreachable, erroring
— degrades once, for that call, to DuckDuckGo, and says so loudly: a warning in the log, an
``agent_event`` in the trace, and ``degraded``/``primary_backend``/``fallback_reason`` in the
result, so a dead key cannot hide behind working answers. An empty result list is an
answer, not a failure, and never degrades.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fermix_core.specs import ToolSpec, WebSearchBackendSpec, resolve_ref
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

from fermix_tools.web.backends.base import DEFAULT_TIMEOUT, SearchBackendError, SearchHit

__all__ = ["DEFAULT_BACKEND", "WebSearch", "WebSearchArgs"]

log = logging.getLogger("fermix.tools.web_search")

DEFAULT_BACKEND = "duckduckgo"
SECTION = "fermix_core.tools.web_search"
_KEY_PATH = ("fermix_core", "tools", "web_search", "api_key")


class WebSearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=400, description="What to search the web for.")
    max_results: int | None = Field(
        default=None,
        ge=1,
        le=20,
        description="How many results to return (default: the configured max_results, 5).",
    )


def _settings(config: Any) -> tuple[str, Any, int]:
    """``(backend, api_key value, max_results)`` from the loaded config, or the defaults."""
    section = None
    if config is not None and hasattr(config, "section"):
        try:
            section = config.section(SECTION)
        except Exception:  # a config without this section behaves like no config
            section = None
    backend = getattr(section, "backend", None) or DEFAULT_BACKEND
    return backend, getattr(section, "api_key", None), int(getattr(section, "max_results", 5))


def _format(query: str, hits: list[SearchHit], backend: str, note: str | None) -> str:
    lines = [note, ""] if note else []
    if not hits:
        lines.append(f'No results for "{query}" ({backend}). Try other words.')
        return "\n".join(lines)
    lines.append(f'Results for "{query}" ({backend}):')
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. {hit.title}")
        lines.append(f"   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


class WebSearch(Tool[WebSearchArgs]):
    """The ``web_search`` tool.

    *base_urls* (backend name -> URL) and *environ* are for tests and embedding apps: they
    point backends at a loopback server and supply the keys' environment variables.
    """

    def __init__(
        self,
        spec: ToolSpec,
        *,
        base_urls: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(spec)
        self.base_urls = dict(base_urls or {})
        self.environ = environ
        self.timeout = timeout
        self._resolvers: dict[str, Any] = {}

    # ------------------------------------------------------------------ backends

    def _specs(self, config: Any) -> dict[str, WebSearchBackendSpec]:
        from fermix_tools.web.plugin import BACKENDS

        specs = {spec.name: spec for spec in BACKENDS}
        registry = getattr(config, "registry", None)
        if registry is not None:
            specs.update(registry.typed(WebSearchBackendSpec))
        return specs

    def _resolver(self, ctx: ToolContext, config: Any) -> Any:
        shared = ctx.services.get("secrets")
        if shared is not None and callable(getattr(shared, "value", None)):
            return shared
        profile = "general"
        core = getattr(config, "core", None)
        if core is not None:
            profile = core.fermix_core.profile or "general"
        resolver = self._resolvers.get(profile)
        if resolver is None:
            from fermix_core.secrets import SecretResolver

            resolver = SecretResolver(environ=self.environ, profile=profile)
            self._resolvers[profile] = resolver
        return resolver

    async def _api_key(
        self, spec: WebSearchBackendSpec, value: Any, ctx: ToolContext, config: Any
    ) -> str | None:
        if spec.keyless:
            return None
        import anyio.to_thread
        from fermix_core.config.secret import SecretField, derived_env_name

        slot = SecretField(_KEY_PATH, spec.env_var or derived_env_name(_KEY_PATH), value)
        resolver = self._resolver(ctx, config)
        # The keyring or a password-manager helper may block; never on the event loop.
        return await anyio.to_thread.run_sync(resolver.value, slot)

    def _build(self, spec: WebSearchBackendSpec, api_key: str | None) -> Any:
        try:
            factory = resolve_ref(spec.factory)  # type: ignore[arg-type]
            return factory(
                api_key=api_key, base_url=self.base_urls.get(spec.name), timeout=self.timeout
            )
        except Exception as exc:
            log.exception("web_search backend %s could not be built", spec.name)
            raise SearchBackendError(
                spec.name, "unavailable", f"the backend could not be built ({type(exc).__name__})"
            ) from None

    async def _search(self, name: str, backend: Any, query: str, count: int) -> list[SearchHit]:
        try:
            hits = await backend.search(query, max_results=count)
        except SearchBackendError:
            raise
        except Exception as exc:  # a plugin backend's bug must not cost the turn its search
            log.exception("web_search backend %s failed unexpectedly", name)
            raise SearchBackendError(
                name, "unavailable", f"the backend failed ({type(exc).__name__})"
            ) from None
        return list(hits)[:count]

    async def _primary(
        self, name: str, ctx: ToolContext, config: Any, key_value: Any, query: str, count: int
    ) -> list[SearchHit]:
        spec = self._specs(config).get(name)
        if spec is None:
            raise SearchBackendError(
                name,
                "unavailable",
                "no backend of that name is registered (its plugin may have failed to load)",
            )
        backend = self._build(spec, await self._api_key(spec, key_value, ctx, config))
        return await self._search(name, backend, query, count)

    async def _fallback(self, query: str, count: int) -> list[SearchHit]:
        from fermix_tools.web.backends.duckduckgo import DuckDuckGoSearch

        url = self.base_urls.get(DEFAULT_BACKEND)
        backend = DuckDuckGoSearch(base_url=url, timeout=self.timeout)
        return await self._search(DEFAULT_BACKEND, backend, query, count)

    # ------------------------------------------------------------------ the tool

    async def run(self, args: WebSearchArgs, ctx: ToolContext) -> ToolOutput:
        config = ctx.services.get("config")
        primary, key_value, default_count = _settings(config)
        count = args.max_results or default_count
        query = args.query.strip()
        if not query:
            raise ToolError("The query is blank; say what to search for.")
        data: dict[str, Any] = {"query": query, "primary_backend": primary, "degraded": False}
        note = None
        if primary == DEFAULT_BACKEND:
            try:
                hits = await self._fallback(query, count)
            except SearchBackendError as exc:
                raise ToolError(f"Web search failed — {exc}. Try again shortly.") from None
            backend = DEFAULT_BACKEND
        else:
            try:
                hits = await self._primary(primary, ctx, config, key_value, query, count)
                backend = primary
            except SearchBackendError as exc:
                if not exc.degrades:
                    raise ToolError(f"Web search failed — {exc}.") from None
                hits = await self._degrade(exc, query, count, ctx)
                backend = DEFAULT_BACKEND
                data.update(degraded=True, fallback_reason=exc.reason)
                note = (
                    f"Note: the configured search backend {primary!r} failed ({exc.reason}); "
                    "these results come from DuckDuckGo instead. Tell the operator so they "
                    "can fix the backend's key or plan."
                )
        data.update(backend=backend, results=[hit.as_dict() for hit in hits])
        return ToolOutput(content=_format(query, hits, backend, note), data=data)

    async def _degrade(
        self, exc: SearchBackendError, query: str, count: int, ctx: ToolContext
    ) -> list[SearchHit]:
        log.warning(
            "web_search backend %s failed (%s); degrading to %s for this call",
            exc.backend,
            exc.reason,
            DEFAULT_BACKEND,
        )
        tracer = ctx.services.get("tracer")
        record = getattr(tracer, "record", None)
        if callable(record):
            try:
                record(
                    "agent_event",
                    session_id=ctx.session_id or None,
                    event="web_search.degraded",
                    tool="web_search",
                    degraded=True,
                    primary_backend=exc.backend,
                    fallback_backend=DEFAULT_BACKEND,
                    fallback_reason=exc.reason,
                )
            except Exception:
                log.exception("could not trace the web_search degrade")
        try:
            return await self._fallback(query, count)
        except SearchBackendError as fallback:
            raise ToolError(
                f"Web search failed: the configured backend {exc.backend!r} failed "
                f"({exc.reason}) and the DuckDuckGo fallback failed too ({fallback.reason}). "
                "Try again shortly."
            ) from None

"""The plugin host: imports plugins in isolation, registers them with pluggy, collects specs.

We use pluggy for hook declaration and calling, but not its ``load_setuptools_entrypoints``:
that stops at the first broken plugin and cannot say which distribution a name came from.
Here each plugin is imported on its own; a failure is recorded on its
:class:`~fermix_core.plugins.discovery.PluginRecord` and the rest carry on.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
import traceback
import types
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

from fermix_core import hookspecs
from fermix_core.hookspecs import PROJECT, REGISTRATION_HOOKS
from fermix_core.plugins.discovery import (
    FIRST_PARTY,
    PluginRecord,
    canonical_dist_name,
    discover,
    load_filter_from_env,
)
from fermix_core.plugins.registry import SpecError, SpecRegistry
from fermix_core.specs import SPEC_KINDS, Spec
from fermix_core.telemetry import Telemetry, TelemetryEvent

if TYPE_CHECKING:  # importlib.metadata loads when a version is actually looked up
    from importlib import metadata

log = logging.getLogger("fermix.plugins")

KNOWN_HOOKS = frozenset(
    name
    for name in dir(hookspecs)
    if name.startswith("fermix_") and callable(getattr(hookspecs, name))
)


def _hook_names(obj: Any) -> list[str]:
    """Names of the functions on *obj* decorated with ``@hookimpl``, whatever their names.

    Every attribute is looked at, not only ``fermix_*`` ones, so a marked function whose name
    matches no hook (``weather_tools``) is reported instead of silently never called. The
    lookup is static: a plugin object's properties are not run.
    """
    marker = f"{PROJECT}_impl"
    # A plain module's non-dunder attributes are its namespace's entries (its type defines
    # none of them), so the static lookup is a dict lookup there.
    namespace = vars(obj) if type(obj) is types.ModuleType else None
    names = []
    for attr in dir(obj):
        if attr.startswith("__"):
            continue
        if namespace is not None:
            if attr not in namespace:
                continue
            value = namespace[attr]
        else:
            try:
                value = inspect.getattr_static(obj, attr)
            except AttributeError:
                continue
        # The marker sits on the function, or on a staticmethod/classmethod decorated after.
        if (
            getattr(value, marker, None) is not None
            or getattr(getattr(value, "__func__", None), marker, None) is not None
        ):
            names.append(attr)
    return sorted(names)


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, told which attributes of the plugin being registered are marked.

    ``register`` asks :meth:`parse_hookimpl_opts` about every attribute of the plugin
    object (each a static lookup: ~20 per plugin, 400+ in a cold ``fermix ask``), while
    :func:`_hook_names` has already found the marked ones; every other attribute is
    answered "not a hook" at once. pluggy still parses and verifies the marked ones.
    """

    def __init__(self, project_name: str) -> None:
        super().__init__(project_name)
        self.candidates: frozenset[str] | None = None

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if self.candidates is not None and name not in self.candidates:
            return None
        return super().parse_hookimpl_opts(plugin, name)


@functools.cache
def _first_party_of(module: str) -> tuple[str, str] | None:
    """``(distribution, version)`` when *module* ships in a first-party distribution.

    Each first-party distribution holds exactly the package of its own name
    (``fermix_tools`` is ``fermix-tools``), which also holds for editable installs, where
    ``packages_distributions()`` sees nothing.
    """
    dist = canonical_dist_name(module.partition(".")[0])
    if dist not in FIRST_PARTY:
        return None
    from importlib import metadata

    try:
        return dist, metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _call(impl: Any, **kwargs: Any) -> Any:
    """Call one hook implementation with the subset of arguments it declares (as pluggy does)."""
    return impl.function(*[kwargs[name] for name in impl.argnames])


def _short_error(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


class PluginHost:
    """Owns the pluggy manager and the record of every plugin, loaded or not."""

    def __init__(self, spec_cache: Any = None) -> None:
        #: A :class:`~fermix_core.plugins.spec_cache.SpecCache`: first-party plugins found
        #: there are not imported; their cached specs are collected in their place.
        self.spec_cache = spec_cache
        #: Plugin name -> what each of its registration hooks registered (cached plugins).
        self._cached: dict[str, dict[str, list[Any]]] = {}
        self.pm = _PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []
        self.telemetry = Telemetry()
        self.telemetry.subscribe(self._dispatch_event)

    # ------------------------------------------------------------------ loading

    def load_entry_points(
        self,
        *,
        only: frozenset[str] | object | None = ...,
        disabled: Iterable[str] = (),
        entry_points: Sequence[metadata.EntryPoint] | None = None,
    ) -> list[PluginRecord]:
        """Discover ``fermix`` entry points and import every plugin that may load.

        ``only`` defaults to ``FERMIX_LOAD_PLUGINS`` from the environment.
        """
        load_only = load_filter_from_env() if only is ... else only
        records = discover(entry_points=entry_points, only=load_only, disabled=disabled)  # type: ignore[arg-type]
        for record in records:
            if record.status == "pending" and not self._restore(record):
                if self.spec_cache is not None and record.first_party:
                    before = set(sys.modules)
                    self._import(record)
                    if record.status == "loaded":
                        from fermix_core.plugins.spec_cache import hookimpls_of

                        impls = hookimpls_of(self.pm, record.module)
                        self.spec_cache.store(record, impls, set(sys.modules) - before)
                else:
                    self._import(record)
            self.records.append(record)
        if self.spec_cache is not None:
            self.spec_cache.save()
            self.spec_cache = None  # its parsed file is garbage now; the specs are kept
        return records

    def _restore(self, record: PluginRecord) -> bool:
        """Record *record* as loaded from the spec cache, if it holds it (not imported)."""
        if self.spec_cache is None:
            return False
        if any(r.name == record.name and r.status == "loaded" for r in self.records):
            return False  # a name clash: importing it reports the conflict as before
        cached = self.spec_cache.restore(record)
        if cached is None:
            return False
        record.hooks, self._cached[record.name] = cached
        record.status = "loaded"
        return True

    def register(
        self,
        plugin: Any,
        name: str,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> PluginRecord:
        """Register an in-process plugin object (embedding apps and tests use this).

        A first-party plugin *module* registered this way (an app choosing some of the
        built-ins with ``entry_points=False``) keeps its first-party standing — its tools
        are not deferred and its names stay reserved — because its distribution is read
        from the installed metadata when none is given.
        """
        value = getattr(plugin, "__name__", type(plugin).__name__)
        if distribution is None and inspect.ismodule(plugin):
            distribution, version = _first_party_of(plugin.__name__) or (None, version)
        record = PluginRecord(name=name, value=value, distribution=distribution, version=version)
        clash = next((r for r in self.records if r.name == name and r.status == "loaded"), None)
        if clash is not None:
            record.status = "conflict"
            record.error = f"plugin name {name!r} is already registered by {clash.source}"
        else:
            self._activate(record, plugin)
        self.records.append(record)
        return record

    def _import(self, record: PluginRecord) -> None:
        module_name, _, attr = record.value.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            if attr:
                for part in attr.split("."):
                    obj = getattr(obj, part)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plugin's SystemExit must not end the daemon either
            record.status = "failed"
            record.error = f"import failed: {_short_error(exc)}"
            log.error("plugin %s failed to load: %s", record.source, record.error)
            return
        self._activate(record, obj)

    def _activate(self, record: PluginRecord, obj: Any) -> None:
        hooks = _hook_names(obj)
        unknown = [h for h in hooks if h not in KNOWN_HOOKS]
        if unknown:
            import difflib

            hints = []
            for h in unknown:
                guess = h if h.startswith("fermix_") else f"fermix_{h}"
                close = difflib.get_close_matches(guess, KNOWN_HOOKS, n=1)
                hints.append(f"{h!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            record.status = "failed"
            record.error = "implements unknown hook " + ", ".join(hints)
            log.error("plugin %s rejected: %s", record.source, record.error)
            return
        try:
            self.pm.candidates = frozenset(hooks)
            try:
                self.pm.register(obj, name=record.name)
            finally:
                self.pm.candidates = None
        except Exception as exc:
            record.status = "failed"
            record.error = f"hook validation failed: {exc}"
            log.error("plugin %s rejected: %s", record.source, record.error)
            return
        record.module = obj
        record.hooks = hooks
        record.status = "loaded"
        if not hooks:
            record.warning = (
                "implements no hook, so it adds nothing: decorate its functions with "
                "@hookimpl (from fermix_core.hookspecs) and name them after a hook, e.g. "
                "fermix_tools"
            )
            log.warning("plugin %s %s", record.source, record.warning)

    # ------------------------------------------------------------------ queries

    def loaded(self) -> list[PluginRecord]:
        return [r for r in self.records if r.status == "loaded"]

    def record_for(self, plugin: Any) -> PluginRecord | None:
        return next((r for r in self.records if r.module is plugin), None)

    def unavailable(self) -> list[PluginRecord]:
        """Plugins that exist but are not active: failed, blocked, disabled or conflicting."""
        return [r for r in self.records if r.status != "loaded"]

    # ------------------------------------------------------------------ specs

    def collect(self, kinds: Iterable[str] | None = None) -> SpecRegistry:
        """Call the registration hooks of every loaded plugin and validate the result.

        Each implementation is called on its own so that one plugin raising, or returning
        something that is not a spec, is an error attributed to that plugin alone.
        """
        wanted = set(kinds) if kinds is not None else set(REGISTRATION_HOOKS.values())
        collected: list[tuple[Spec, str]] = []
        errors: list[SpecError] = []
        if self._cached and not self._cache_order_holds():
            self._import_cached()
        position = {id(r): i for i, r in enumerate(self.records)}
        for hook_name, kind in REGISTRATION_HOOKS.items():
            if kind not in wanted:
                continue
            expected = SPEC_KINDS[kind]
            caller = getattr(self.pm.hook, hook_name)
            # Registration order (pluggy calls LIFO), which is the order of the records; a
            # cached plugin's specs come where its import would have put them.
            entries: list[tuple[int, PluginRecord | None, Any]] = []
            for impl in caller.get_hookimpls():
                record = self.record_for(impl.plugin)
                entries.append((position[id(record)] if record else -1, record, impl))
            for name, produced_by in self._cached.items():
                if hook_name in produced_by:
                    record = next(r for r in self.records if r.name == name)
                    entries.append((position[id(record)], record, produced_by[hook_name]))
            if self._cached:
                entries.sort(key=lambda entry: entry[0])
            for _, record, impl in entries:
                source = record.source if record else impl.plugin_name
                try:
                    produced = impl if isinstance(impl, list) else impl.function()
                    items = list(produced) if produced is not None else []
                except Exception as exc:
                    errors.append(
                        SpecError(
                            kind, None, f"{hook_name}() raised {_short_error(exc)}", (source,)
                        )
                    )
                    continue
                for item in items:
                    if not isinstance(item, expected):
                        errors.append(
                            SpecError(
                                kind,
                                getattr(item, "name", None),
                                f"{hook_name}() yielded {type(item).__name__}, "
                                f"expected {expected.__name__}",
                                (source,),
                            )
                        )
                        continue
                    collected.append((item, source))
        registry = SpecRegistry.build(collected, errors)
        for error in registry.errors:
            log.error("plugin spec error: %s", error)
        return registry

    def _cache_order_holds(self) -> bool:
        """Whether every registration hook's implementations run in record order (no
        ordering options, every implementation's plugin recorded): then cached specs can
        take their plugin's place; otherwise the cached plugins are imported after all."""
        from fermix_core.plugins.spec_cache import ORDER_OPTIONS

        for hook_name in REGISTRATION_HOOKS:
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if self.record_for(impl.plugin) is None:
                    return False
                if any(impl.opts.get(option) for option in ORDER_OPTIONS):
                    return False
        return True

    def _import_cached(self) -> None:
        """Import the plugins restored from the spec cache, as if it had not held them.

        pluggy orders implementations by registration, so every loaded plugin is registered
        again, in record order, with a fresh manager: the order is the one an import of
        every plugin at load time gives."""
        cached = set(self._cached)
        self._cached.clear()
        self.pm = _PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        for record in self.records:
            if record.name in cached:
                record.status, record.hooks = "pending", []
                self._import(record)
            elif record.status == "loaded":
                self.pm.candidates = frozenset(record.hooks)
                try:
                    self.pm.register(record.module, name=record.name)
                finally:
                    self.pm.candidates = None

    # ------------------------------------------------------------------ lifecycle

    async def startup(self, runtime: Any) -> list[tuple[str, str]]:
        return await self._lifecycle("fermix_startup", runtime, reverse=False)

    async def shutdown(self, runtime: Any) -> list[tuple[str, str]]:
        return await self._lifecycle("fermix_shutdown", runtime, reverse=True)

    async def _lifecycle(
        self, hook_name: str, runtime: Any, *, reverse: bool
    ) -> list[tuple[str, str]]:
        """Run one lifecycle hook per plugin, awaiting async ones; return failures."""
        impls = list(getattr(self.pm.hook, hook_name).get_hookimpls())
        if reverse:
            impls.reverse()
        failures = []
        for impl in impls:
            try:
                result = _call(impl, runtime=runtime)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                log.exception("%s of plugin %s failed", hook_name, impl.plugin_name)
                failures.append((impl.plugin_name, _short_error(exc)))
        return failures

    def extend_cli(self, app: Any) -> None:
        for impl in self.pm.hook.fermix_cli.get_hookimpls():
            try:
                _call(impl, app=app)
            except Exception:
                log.exception("fermix_cli of plugin %s failed", impl.plugin_name)

    # ------------------------------------------------------------------ service hooks

    def resolve_secret(self, request: Any) -> str | None:
        try:
            return self.pm.hook.fermix_resolve_secret(request=request)
        except Exception:
            log.exception(
                "a fermix_resolve_secret hook failed for %s", getattr(request, "env", "?")
            )
            return None

    def emit(self, name: str, **data: Any) -> TelemetryEvent:
        return self.telemetry.emit(name, **data)

    def _dispatch_event(self, event: TelemetryEvent) -> None:
        for impl in self.pm.hook.fermix_event.get_hookimpls():
            try:
                _call(impl, event=event)
            except Exception:
                log.exception(
                    "fermix_event of plugin %s failed on %s", impl.plugin_name, event.name
                )

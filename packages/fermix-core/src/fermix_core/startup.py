"""A cheaper start for a one-off command (``fermix ask``): two costs of loading Python code
that bytecode caching does not remove.

* **Code Python generates at run time** — dataclass methods, forward references, named
  tuples, regular expressions — comes from :mod:`fermix_core.codecache` instead of being
  compiled again in every process.
* **No cyclic collection while the runtime loads.** Importing and booting allocate a few
  hundred thousand objects that live as long as the process (modules, classes, functions,
  pydantic schemas). The collector's older generations re-walked all of them again and
  again during a cold ask (13 middle- and one full collection, 30–40 ms of CPU) and freed
  almost nothing; the young collections that remained walked each of them once more
  (about 2% of the ask's instructions, 4% of its CPU time measured side by side) to free
  the few short-lived cycles, about 0.3 MiB, that now stay until the process ends.
  :func:`begin` turns the collector off; :func:`booted` moves everything made so far into
  the permanent generation (:func:`gc.freeze`) and turns it on again, so the turn is
  collected as usual and never re-walks the start-up objects.
* **No docstrings that nothing reads.** From the first step of :func:`begin`, every module
  is loaded from bytecode whose module and function docstrings are ``None``
  (:mod:`fermix_core.leancode`): about 1.5 MiB a cold ask held and never read. An ask
  that goes through typer calls :func:`keep_docstrings` first (its help texts are the
  commands' docstrings).
* **No second scan of every installed distribution for pydantic's plugins.** The first
  model pydantic builds makes it import its plugin loader, which imports
  :mod:`importlib.metadata` (and the e-mail parser, ``zipfile``, ``csv`` behind it: about
  2 MiB and 10 ms) to look for ``pydantic`` entry points. Fermix's own scan, kept in the
  home's cache while nothing installed changes, records that group too; when it says the
  group is empty, :class:`PydanticPluginLoader` gives pydantic a loader that finds none,
  which is what the real one would find.

:func:`begin` is called by the console entry point before anything else is imported;
:func:`booted` by the command once the runtime is up; :func:`end` when the command
returns (it calls :func:`booted` if the command never got that far, and writes what the
code cache learned). Without :func:`begin` both are no-ops, so library code may call
:func:`booted` unconditionally.
"""

from __future__ import annotations

import gc
import sys

TYPE_CHECKING = False  # typing is imported after the lean-code finder is in place
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any

_state: dict[str, Any] | None = None


def begin(environ: Any = None) -> None:
    """Turn the cyclic collector off, load modules without docstrings and serve generated
    code from the home's cache (until :func:`booted` and :func:`end`)."""
    global _state
    if _state is not None:
        return

    _state = {
        "collecting": gc.isenabled(),
        "booted": False,
        "cache": None,
        "finder": None,
        "lean": None,
    }
    gc.disable()
    _state["lean"] = _lean_code(environ)  # first: what the next lines import is lean too
    from fermix_core.codecache import for_home

    try:
        _state["cache"] = for_home(environ).install()
    except (OSError, RuntimeError, ValueError):  # no home directory to name: no cache
        _state["cache"] = None
    if PydanticPluginLoader.NAME not in sys.modules:
        _state["finder"] = PydanticPluginLoader(environ)
        sys.meta_path.insert(0, _state["finder"])


def _lean_code(environ: Any) -> Any:
    """The installed :class:`fermix_core.leancode.LeanFinder`, or ``None``."""
    from fermix_core.leancode import for_home

    try:
        finder = for_home(environ)
    except (OSError, RuntimeError, ValueError):  # no home directory to name
        return None
    return finder.install() if finder is not None else None


def keep_docstrings() -> None:
    """Load the modules imported from now on with their docstrings (typer's help texts)."""
    if _state is not None and _state["lean"] is not None:
        _state["lean"].finish()
        _state["lean"] = None


def active() -> bool:
    """Whether :func:`begin` started this command (the console ``fermix ask``) and it has
    not ended: the one-off command's caches (:mod:`fermix_core.plugins.spec_cache`) apply."""
    return _state is not None


def once(name: str, compute: Any) -> Any:
    """``compute()``, computed once while the one-off command runs (see :func:`active`)
    and every time otherwise (a long-lived process must see changes)."""
    if _state is None:
        return compute()
    memo = _state.setdefault("once", {})
    if name not in memo:
        memo[name] = compute()
    return memo[name]


def booted() -> None:
    """Start-up is over: freeze what survived it and collect every generation again."""
    if _state is None or _state["booted"]:
        return
    _state["booted"] = True
    if _state["cache"] is not None:
        _state["cache"].release()
    gc.freeze()
    if _state["collecting"]:
        gc.enable()


def end() -> None:
    """The command is done: finish :func:`booted`, save and remove the code cache."""
    global _state
    if _state is None:
        return
    booted()
    cache, finder, lean = _state["cache"], _state["finder"], _state["lean"]
    _state = None
    if lean is not None:
        lean.finish()
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)
    if cache is not None:
        cache.uninstall()
        cache.save()


class PydanticPluginLoader:
    """A :data:`sys.meta_path` finder for ``pydantic.plugin._loader`` alone, used once.

    When pydantic first asks for its plugin loader, and the home's entry-point scan cache
    (:func:`fermix_core.plugins.discovery.pydantic_plugins_absent`) says that no
    ``pydantic`` entry point is installed, the module it gets has the real one's
    interface and finds no plugins — what the real one would have found after reading
    every distribution's metadata. In any other case (no cache yet, something installed
    since, a pydantic other than 2.x) the finder steps aside and the real loader runs.
    """

    NAME = "pydantic.plugin._loader"

    def __init__(self, environ: Any = None) -> None:
        self.environ = environ

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.NAME:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # one question, one answer
        if not self._no_plugins():
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self, origin="fermix_core.startup")

    def _no_plugins(self) -> bool:
        version = getattr(sys.modules.get("pydantic.version"), "VERSION", "")
        if not version.startswith("2."):
            return False
        try:
            from fermix_core.home import FermixHome
            from fermix_core.plugins.discovery import pydantic_plugins_absent, scan_cache

            return pydantic_plugins_absent(scan_cache(FermixHome.resolve(self.environ)))
        except (OSError, RuntimeError, ValueError):
            return False

    def create_module(self, spec: Any) -> None:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        module.PYDANTIC_ENTRY_POINT_GROUP = "pydantic"
        module._plugins = {}
        module._loading_plugins = False
        module.get_plugins = _no_pydantic_plugins


def _no_pydantic_plugins() -> tuple[()]:
    """``pydantic.plugin._loader.get_plugins`` when no pydantic plugin is installed."""
    return ()

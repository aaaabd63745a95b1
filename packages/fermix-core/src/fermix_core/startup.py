"""A cheaper start for a one-off command (``fermix ask``): two costs of loading Python code
that bytecode caching does not remove.

* **Code Python generates at run time** — dataclass methods, forward references, named
  tuples, regular expressions — comes from :mod:`fermix_core.codecache` instead of being
  compiled again in every process.
* **Only young objects are collected while the runtime loads.** Importing and booting
  allocate a few hundred thousand objects that live as long as the process (modules,
  classes, functions, pydantic schemas). The collector's older generations re-walked all of
  them again and again during a cold ask (13 middle- and one full collection, 30–40 ms of
  CPU) and freed almost nothing. :func:`begin` keeps the cheap young collections (which
  free the short-lived cycles, about 1 MiB) and stops the older ones; :func:`booted`
  moves everything that survived into the permanent generation (:func:`gc.freeze`) and
  restores the thresholds, so the turn is collected as usual and never re-walks the
  start-up objects.

:func:`begin` is called by the console entry point before anything else is imported;
:func:`booted` by the command once the runtime is up; :func:`end` when the command
returns (it calls :func:`booted` if the command never got that far, and writes what the
code cache learned). Without :func:`begin` both are no-ops, so library code may call
:func:`booted` unconditionally.
"""

from __future__ import annotations

import gc
from typing import Any

_state: dict[str, Any] | None = None


#: Collections of the middle and old generations wait for this many younger ones: never,
#: in a process that lives a few hundred milliseconds.
_NEVER = 1 << 30


def begin(environ: Any = None) -> None:
    """Collect only young objects and serve dataclass code from the home's cache."""
    global _state
    if _state is not None:
        return
    from fermix_core.codecache import for_home

    _state = {"thresholds": gc.get_threshold(), "booted": False, "cache": None}
    gc.set_threshold(_state["thresholds"][0], _NEVER, _NEVER)
    try:
        _state["cache"] = for_home(environ).install()
    except (OSError, RuntimeError, ValueError):  # no home directory to name: no cache
        _state["cache"] = None


def booted() -> None:
    """Start-up is over: freeze what survived it and collect every generation again."""
    if _state is None or _state["booted"]:
        return
    _state["booted"] = True
    gc.freeze()
    gc.set_threshold(*_state["thresholds"])


def end() -> None:
    """The command is done: finish :func:`booted`, save and remove the code cache."""
    global _state
    if _state is None:
        return
    booted()
    cache = _state["cache"]
    _state = None
    if cache is not None:
        cache.uninstall()
        cache.save()

"""Small JSON files of derived data in ``$FERMIX_HOME/cache``, safe to lose at any time.

Each cache is one file of ``{"format": N, "entries": {name: {"key": …, "value": …}}}``. An
entry is used only while its key — whatever fully determines the value — matches; a file
that is missing, unreadable or of another format counts as empty and is rewritten. Writes
are atomic and private (0600 in a 0700 directory); a failed write is logged at debug level
and otherwise ignored, since the value can always be computed again.

Values derived from code (tool schemas, config models' shapes) are keyed with
:func:`code_key`: a stamp (path, size, mtime) of every ``.py`` file of the packages
involved, plus the Python and pydantic versions — the reasoning Python's bytecode cache
follows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.home import FermixHome

log = logging.getLogger("fermix.cache")

#: A package tree larger than this is not stamped (and what depends on it is not cached):
#: walking it on every start would cost more than computing the few values it has.
MAX_STAMPED_FILES = 4000

_stamps: dict[str, str | None] = {}


def code_key(text: str, tops: Iterable[str]) -> str | None:
    """A cache key for a value derived from *text* and from code: a digest of *text*, the
    Python and pydantic versions and the stamp of ``fermix_core`` and of each top-level
    package in *tops*; ``None`` when one of them cannot be stamped (then do not cache)."""
    stamps = []
    for top in sorted({"fermix_core", *tops}):
        stamp = tree_stamp(top)
        if stamp is None:
            return None
        stamps.append(f"{top}={stamp}")
    from pydantic import VERSION as pydantic_version

    material = "\n".join([text, sys.version, pydantic_version, *stamps])
    return hashlib.sha256(material.encode()).hexdigest()


def tree_stamp(top: str) -> str | None:
    """A digest of (path, size, mtime) of every ``.py`` file of top-level package *top*;
    ``None`` when it cannot be located or is too large. Computed once per process."""
    if top in _stamps:
        return _stamps[top]
    stamp: str | None = None
    try:
        roots = _package_roots(top)
        if roots:
            digest = hashlib.sha256()
            count = 0
            for root in roots:
                for path, size, mtime in _walk_sources(root):
                    count += 1
                    if count > MAX_STAMPED_FILES:
                        raise OverflowError(top)
                    digest.update(f"{path}\0{size}\0{mtime}\n".encode())
            stamp = digest.hexdigest()
    except (OSError, ImportError, ValueError, OverflowError):
        stamp = None
    _stamps[top] = stamp
    return stamp


def _package_roots(top: str) -> list[str]:
    module = sys.modules.get(top)
    if module is not None:
        paths = list(getattr(module, "__path__", []) or [])
        file = getattr(module, "__file__", None)
        return paths or ([file] if file else [])
    import importlib.util

    found = importlib.util.find_spec(top)  # a top-level name: finds, imports nothing
    if found is None:
        return []
    if found.submodule_search_locations:
        return list(found.submodule_search_locations)
    return [found.origin] if found.origin and found.origin.endswith(".py") else []


def _walk_sources(root: str) -> list[tuple[str, int, int]]:
    if os.path.isfile(root):
        st = os.stat(root)
        return [(root, st.st_size, st.st_mtime_ns)]
    found: list[tuple[str, int, int]] = []
    pending = [root]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append(entry.path)
                elif entry.name.endswith(".py"):
                    st = entry.stat()
                    found.append((entry.path, st.st_size, st.st_mtime_ns))
    found.sort()
    return found


class DerivedCache:
    def __init__(self, home: FermixHome, file_name: str, format: int) -> None:
        self.home = home
        self.path = home.cache / file_name
        self.format = format
        self._entries: dict[str, dict[str, Any]] | None = None
        self._dirty = False

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            entries: dict[str, dict[str, Any]] = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and data.get("format") == self.format:
                    stored = data.get("entries")
                    if isinstance(stored, dict):
                        entries = {k: v for k, v in stored.items() if isinstance(v, dict)}
            except (OSError, ValueError):
                pass
            self._entries = entries
        return self._entries

    def get(self, name: str, key: str) -> Any:
        """The value stored under *name* if it was stored with *key*, else ``None``."""
        entry = self._load().get(name)
        if entry is None or entry.get("key") != key:
            return None
        return entry.get("value")

    def put(self, name: str, key: str, value: Any) -> None:
        """Store a JSON-serialisable *value*; anything else is silently not cached."""
        try:
            stored = json.loads(json.dumps(value))  # a copy, as a later process reads it
        except (TypeError, ValueError):
            return
        self._load()[name] = {"key": key, "value": stored}
        self._dirty = True

    def save(self, keep: set[str] | None = None) -> None:
        """Write the file if an entry changed; *keep* drops every other name."""
        if not self._dirty:
            return
        from fermix_core.fsutil import atomic_write

        entries = self._load()
        if keep is not None:
            entries = {name: e for name, e in entries.items() if name in keep}
        payload = json.dumps({"format": self.format, "entries": entries}, sort_keys=True)
        try:
            self.home.ensure_dir("cache")
            atomic_write(self.path, payload)
        except OSError as exc:
            log.debug("cache %s not written: %s", self.path, exc)
            return
        self._dirty = False

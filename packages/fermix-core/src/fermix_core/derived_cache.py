"""Small JSON files of derived data in ``$FERMIX_HOME/cache``, safe to lose at any time.

Each cache is one file of ``{"format": N, "entries": {name: {"key": …, "value": …}}}``. An
entry is used only while its key — whatever fully determines the value — matches; a file
that is missing, unreadable or of another format counts as empty and is rewritten. Writes
are atomic and private (0600 in a 0700 directory); a failed write is logged at debug level
and otherwise ignored, since the value can always be computed again.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.home import FermixHome

log = logging.getLogger("fermix.cache")


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

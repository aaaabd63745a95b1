"""Find plugin entry points and decide which of them may load.

This is deliberately separate from importing: discovery reads installed distribution
metadata only, so ``fermix plugins list`` can report a blocked or conflicting plugin
without ever executing its code.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # importlib.metadata (and the email parser behind it) loads on a real scan
    from importlib import metadata

ENTRY_POINT_GROUP = "fermix"
LOAD_PLUGINS_ENV = "FERMIX_LOAD_PLUGINS"

#: Distributions that ship with Fermix; their plugins load first.
FIRST_PARTY = frozenset({"fermix-core", "fermix-providers", "fermix-channels", "fermix-tools"})

Status = Literal["loaded", "failed", "blocked", "disabled", "conflict", "pending"]


def _dist_identity(
    ep: Any, memo: dict[int, tuple[str, str | None]]
) -> tuple[str, str | None] | None:
    """The (name, version) of *ep*'s distribution, or ``None`` without one.

    ``Distribution.name`` and ``.version`` each re-read and re-parse METADATA with the
    email parser, and entry points of one distribution share its object: ask it once
    (*memo* is keyed by the distribution object's id).
    """
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    identity = memo.get(id(dist))
    if identity is None:
        identity = memo[id(dist)] = (dist.name, dist.version)
    return identity


def canonical_dist_name(name: str) -> str:
    """PEP 503 normalisation, so ``Fermix_Weather`` and ``fermix-weather`` compare equal."""
    return re.sub(r"[-_.]+", "-", name).lower()


_SOURCE_DIST = re.compile(r"\(([^\s()]+)\s[^()]*\)\s*$")


def distribution_of(source: str) -> str | None:
    """The distribution in a plugin source string ``"name (dist version)"``, if it names one."""
    match = _SOURCE_DIST.search(source)
    return canonical_dist_name(match.group(1)) if match else None


@dataclass
class PluginRecord:
    """What the loader knows about one plugin, whether or not it loaded."""

    name: str
    value: str
    distribution: str | None = None
    version: str | None = None
    status: Status = "pending"
    error: str | None = None
    #: A loaded plugin that is probably not what its author meant (it implements no hook).
    warning: str | None = None
    hooks: list[str] = field(default_factory=list)
    module: ModuleType | Any | None = field(default=None, repr=False)

    @property
    def first_party(self) -> bool:
        return self.distribution is not None and self.distribution in FIRST_PARTY

    @property
    def source(self) -> str:
        """``name (distribution version)`` — how errors name where something came from."""
        if self.distribution:
            return f"{self.name} ({self.distribution} {self.version or '?'})"
        return f"{self.name} (in-process)"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.value,
            "status": self.status,
            "hooks": list(self.hooks),
            "error": self.error,
            "warning": self.warning,
        }


def parse_load_filter(raw: str | None) -> frozenset[str] | None:
    """``FERMIX_LOAD_PLUGINS``: unset → no filter, empty → load nothing, else the names."""
    if raw is None:
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _matches(record: PluginRecord, names: Iterable[str]) -> bool:
    wanted = set(names)
    if record.name in wanted:
        return True
    dist = record.distribution
    return dist is not None and dist in {canonical_dist_name(n) for n in wanted}


def discover(
    *,
    entry_points: Sequence[metadata.EntryPoint] | None = None,
    only: frozenset[str] | None = None,
    disabled: Iterable[str] = (),
) -> list[PluginRecord]:
    """Return one record per ``fermix`` entry point, with blocking and conflicts decided.

    * ``only`` (from ``FERMIX_LOAD_PLUGINS``) keeps just the named plugins — by entry-point
      name or distribution name; everything else is ``blocked``.
    * ``disabled`` (from ``[fermix_core.plugins] disabled``) marks plugins ``disabled``.
    * The same entry-point name from two distributions that are both still in play is a
      ``conflict`` for all of them, with an error naming every distribution and the remedy.
      Blocking or disabling one of them *by distribution name* resolves it: blocking and
      disabling are decided first, so the remaining one loads.

    First-party plugins come first, then the rest by name, so registration order is stable.
    """
    if entry_points is None:
        from importlib import metadata

        entry_points = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    records: list[PluginRecord] = []
    identities: dict[int, tuple[str, str | None]] = {}
    for ep in entry_points:
        identity = _dist_identity(ep, identities)
        if identity is not None:
            identity = (canonical_dist_name(identity[0]), identity[1])
        records.append(
            PluginRecord(
                name=ep.name,
                value=ep.value,
                distribution=identity[0] if identity else None,
                version=identity[1] if identity else None,
            )
        )
    records.sort(key=lambda r: (not r.first_party, r.name, r.distribution or ""))

    disabled = tuple(disabled)
    for record in records:
        if only is not None and not _matches(record, only):
            record.status = "blocked"
            record.error = f"not listed in {LOAD_PLUGINS_ENV}"
        elif disabled and _matches(record, disabled):
            record.status = "disabled"
            record.error = "disabled by [fermix_core.plugins] disabled"

    by_name: dict[str, list[PluginRecord]] = defaultdict(list)
    for record in records:
        if record.status == "pending":
            by_name[record.name].append(record)
    for name, same in by_name.items():
        dists = {r.distribution for r in same}
        if len(dists) < 2:
            continue
        first = [r for r in same if r.first_party]
        if len(first) == 1:
            # A first-party plugin name is reserved, as first-party spec names are: the
            # built-in keeps working and only the newcomer is refused.
            for record in same:
                if record is not first[0]:
                    record.status = "conflict"
                    record.error = (
                        f"plugin name {name!r} is reserved by first-party "
                        f"{first[0].distribution}; rename the entry point in {record.distribution}"
                    )
            continue
        if len(dists) > 1:
            providers = ", ".join(f"{r.distribution} {r.version}" for r in same)
            example = next((r.distribution for r in same if not r.first_party), None)
            example = example or same[-1].distribution
            for record in same:
                record.status = "conflict"
                record.error = (
                    f"plugin name {name!r} is provided by several distributions: {providers}. "
                    f"Keep one: uninstall the others, or disable them by distribution name "
                    f'([fermix_core.plugins] disabled = ["{example}"])'
                )
    return records


# --------------------------------------------------------------------------- the scan cache

#: What the scan cache keeps of each entry point: name, value, distribution name, version.
_Row = tuple[str, str, str | None, str | None]


@dataclass(frozen=True)
class _Dist:
    """A distribution's name and version, read from its metadata once per scan."""

    name: str
    version: str | None


@dataclass(frozen=True)
class CachedEntryPoint:
    """An entry point as the scan cache remembers it (what :func:`discover` reads)."""

    name: str
    value: str
    dist: _Dist | None


def installed_stamp(path: Sequence[str] | None = None) -> str:
    """A digest of what is installed on *path* (``sys.path``): every ``*.dist-info`` and
    ``*.egg-info`` entry of each directory, with the size and modification time of its
    ``entry_points.txt``; archives by size and mtime. Installing, removing, upgrading or
    re-declaring any distribution changes it.

    A one-off command (:func:`fermix_core.startup.active`) computes the ``sys.path`` stamp
    once (about 1 ms; pydantic's plugin finder and the entry-point scan both ask)."""
    if path is None:
        from fermix_core import startup

        return startup.once("installed_stamp", lambda: _installed_stamp(None))  # type: ignore[no-any-return]
    return _installed_stamp(path)


def _installed_stamp(path: Sequence[str] | None) -> str:
    import hashlib
    import sys

    digest = hashlib.sha256()
    for entry in sys.path if path is None else path:
        where = entry or "."
        try:
            if os.path.isfile(where):
                st = os.stat(where)
                digest.update(f"{where}\0file\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
                continue
            with os.scandir(where) as found:
                names = sorted(
                    e.name for e in found if e.name.endswith((".dist-info", ".egg-info"))
                )
        except OSError:
            digest.update(f"{where}\0absent\n".encode())
            continue
        digest.update(f"{where}\0dir\n".encode())
        for name in names:
            try:
                st = os.stat(os.path.join(where, name, "entry_points.txt"))
                mark = f"{st.st_size}:{st.st_mtime_ns}"
            except OSError:
                mark = "-"
            digest.update(f"{name}\0{mark}\n".encode())
    return digest.hexdigest()


#: The scan cache: ``$FERMIX_HOME/cache/<file>``, in this format.
SCAN_CACHE_FILE = "entry-points.json"
SCAN_CACHE_FORMAT = 2
#: The entry-point group pydantic loads its own plugins from; the scan records it too, so
#: a one-off command can tell pydantic there are none without a second scan
#: (:mod:`fermix_core.startup`).
PYDANTIC_GROUP = "pydantic"


def scan_cache(home: Any) -> Any:
    """The scan cache of *home* (a :class:`~fermix_core.home.FermixHome`); ``None`` before
    the home exists (read-only commands run before setup do not create it)."""
    from fermix_core.derived_cache import DerivedCache

    return DerivedCache(home, SCAN_CACHE_FILE, SCAN_CACHE_FORMAT) if home.path.is_dir() else None


def scan_entry_points(cache: Any = None) -> list[Any]:
    """The ``fermix`` entry points installed now; with *cache* (a
    :class:`~fermix_core.derived_cache.DerivedCache`), the rows kept for the same
    :func:`installed_stamp` instead of reading every distribution's metadata again.

    A scan that fills the cache also records the ``pydantic`` group's entry points
    (:func:`pydantic_plugins_absent` reads them)."""
    key = installed_stamp() if cache is not None else None
    if cache is not None:
        rows = cache.get(ENTRY_POINT_GROUP, key)
        if _valid_rows(rows):
            return [
                CachedEntryPoint(n, v, _Dist(d, ver) if d is not None else None)
                for n, v, d, ver in rows
            ]
    from importlib import metadata

    if cache is None:
        return list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    installed = metadata.entry_points()
    found = list(installed.select(group=ENTRY_POINT_GROUP))
    rows_out: list[_Row] = []
    identities: dict[int, tuple[str, str | None]] = {}
    for ep in found:
        identity = _dist_identity(ep, identities)
        rows_out.append((ep.name, ep.value, *(identity or (None, None))))
    cache.put(ENTRY_POINT_GROUP, key, rows_out)
    pydantic = [[ep.name, ep.value] for ep in installed.select(group=PYDANTIC_GROUP)]
    cache.put(PYDANTIC_GROUP, key, pydantic)
    cache.save()
    return found


def pydantic_plugins_absent(cache: Any) -> bool:
    """Whether the scan *cache* knows that no ``pydantic`` entry point is installed now
    (``False`` when it cannot tell: no entry, another :func:`installed_stamp`)."""
    if cache is None:
        return False
    return cache.get(PYDANTIC_GROUP, installed_stamp()) == []


def _valid_rows(rows: Any) -> bool:
    if not isinstance(rows, list):
        return False
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4):
            return False
        name, value, dist, version = row
        if not (isinstance(name, str) and isinstance(value, str)):
            return False
        if not all(x is None or isinstance(x, str) for x in (dist, version)):
            return False
    return True


def load_filter_from_env(
    environ: dict[str, str] | os._Environ[str] | None = None,
) -> frozenset[str] | None:
    env = os.environ if environ is None else environ
    return parse_load_filter(env.get(LOAD_PLUGINS_ENV))

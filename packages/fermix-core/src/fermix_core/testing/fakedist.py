"""A fake installed distribution, for plugin-loader tests that install nothing.

``fake_distribution`` writes what an installer leaves behind — a ``<name>-<version>.dist-info``
directory with ``METADATA``, ``entry_points.txt`` and ``RECORD`` — next to the plugin's
module files, in a directory of its own. Putting that directory on ``sys.path`` is all
``importlib.metadata`` needs to report the distribution, its version and its entry points,
so the real discovery code runs unchanged. A subprocess sees the same distribution through
``PYTHONPATH=<dist.path>``.

Each distribution gets its own directory so two of them can be activated independently
(the duplicate-name case needs exactly that).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import re
import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path, PurePosixPath

from fermix_core.plugins.discovery import ENTRY_POINT_GROUP

__all__ = ["FakeDistribution", "fake_distribution"]

_DIST_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")


@dataclass
class FakeDistribution:
    """A distribution written to disk but not yet importable; see :meth:`activate`."""

    name: str
    version: str
    #: The directory to put on ``sys.path`` (or ``PYTHONPATH``).
    path: Path
    dist_info: Path
    entry_point_map: dict[str, str]
    group: str
    files: list[PurePosixPath] = field(default_factory=list)

    def distribution(self) -> metadata.Distribution:
        """The distribution as ``importlib.metadata`` reads it, without touching ``sys.path``."""
        return metadata.PathDistribution(self.dist_info)

    def entry_points(self) -> list[metadata.EntryPoint]:
        """This distribution's entry points in its group, bound to the distribution."""
        return list(self.distribution().entry_points.select(group=self.group))

    @contextmanager
    def activate(self) -> Iterator[FakeDistribution]:
        """Make the distribution importable and discoverable for the ``with`` block.

        On exit ``sys.path`` is restored and every module imported from this distribution's
        directory is dropped from ``sys.modules``, so the next test imports a fresh copy —
        or fails to import it at all, as it should once the distribution is gone.
        """
        root = str(self.path)
        sys.path.insert(0, root)
        importlib.invalidate_caches()
        try:
            yield self
        finally:
            with suppress(ValueError):
                sys.path.remove(root)
            sys.path_importer_cache.pop(root, None)
            self._forget_modules()
            importlib.invalidate_caches()

    def _forget_modules(self) -> None:
        prefixes = {str(self.path), str(self.path.resolve())}
        prefixes = {p.rstrip("/\\") + "/" for p in prefixes} | {
            p.rstrip("/\\") + "\\" for p in prefixes
        }

        def inside(location: object) -> bool:
            return isinstance(location, str) and location.startswith(tuple(prefixes))

        for name, module in list(sys.modules.items()):
            locations = [getattr(module, "__file__", None)]
            with suppress(Exception):
                locations.extend(getattr(module, "__path__", None) or [])
            if any(inside(loc) for loc in locations):
                sys.modules.pop(name, None)


def fake_distribution(
    base: Path,
    name: str,
    version: str = "1.0.0",
    entry_points: Mapping[str, str] | None = None,
    modules: Mapping[str, str] | None = None,
    *,
    group: str = ENTRY_POINT_GROUP,
) -> FakeDistribution:
    """Write a distribution under *base* and return it (not yet active).

    *entry_points* maps entry-point names to targets (``{"tools.weather":
    "fermix_weather.tools"}``), all in *group*. *modules* maps a dotted module name
    (``"fermix_weather.tools"``) or a relative file path (``"fermix_weather/tools.py"``) to
    its source; sources are dedented, and missing package ``__init__.py`` files are created.
    """
    if not _DIST_NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a valid distribution name")
    if not _VERSION_RE.match(version):
        raise ValueError(f"{version!r} is not a usable version string")
    entry_points = dict(entry_points or {})
    for ep_name, target in entry_points.items():
        if not ep_name or any(c in ep_name for c in "=[]\n\r") or ep_name != ep_name.strip():
            raise ValueError(f"entry-point name {ep_name!r} cannot be written to entry_points.txt")
        if "\n" in target or "\r" in target or not target.strip():
            raise ValueError(f"entry-point target {target!r} for {ep_name!r} is not a single line")

    stem = re.sub(r"[-_.]+", "_", name)
    root = Path(base) / f"fakedist-{stem}-{version}"
    if root.exists():
        raise FileExistsError(
            f"{root} already exists; give each fake distribution its own name and version"
        )
    files = _module_files(modules or {})
    root.mkdir(parents=True)
    written: list[tuple[PurePosixPath, bytes]] = []
    for rel, source in files.items():
        target_path = root.joinpath(*rel.parts)
        target_path.parent.mkdir(parents=True, exist_ok=True)
        data = source.encode("utf-8")
        target_path.write_bytes(data)
        written.append((rel, data))

    info_rel = PurePosixPath(f"{stem}-{version}.dist-info")
    dist_info = root / info_rel.name
    dist_info.mkdir()
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: Fake {name}\n"
    lines = [f"[{group}]"] + [f"{k} = {v.strip()}" for k, v in entry_points.items()]
    for file_name, text in (("METADATA", meta), ("entry_points.txt", "\n".join(lines) + "\n")):
        data = text.encode("utf-8")
        (dist_info / file_name).write_bytes(data)
        written.append((info_rel / file_name, data))
    record = [f"{rel},sha256={_digest(data)},{len(data)}" for rel, data in written]
    record.append(f"{info_rel}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")

    return FakeDistribution(
        name=name,
        version=version,
        path=root,
        dist_info=dist_info,
        entry_point_map=entry_points,
        group=group,
        files=[rel for rel, _ in written],
    )


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _module_files(modules: Mapping[str, str]) -> dict[PurePosixPath, str]:
    """Map module keys to relative file paths, adding package ``__init__.py`` files."""
    dotted = {k for k in modules if not (k.endswith(".py") or "/" in k)}
    files: dict[PurePosixPath, str] = {}
    for key, source in modules.items():
        if key in dotted:
            parts = key.split(".")
            if not all(p.isidentifier() for p in parts):
                raise ValueError(f"module name {key!r} is not a dotted Python identifier")
            as_dir = key.replace(".", "/") + "/"
            is_package = any(o.startswith(key + ".") for o in dotted) or any(
                o.startswith(as_dir) for o in modules if o not in dotted
            )
            rel = (
                PurePosixPath(*parts, "__init__.py")
                if is_package
                else PurePosixPath(*parts[:-1], parts[-1] + ".py")
            )
        else:
            rel = PurePosixPath(key)
            if (
                rel.is_absolute()
                or ".." in rel.parts
                or "\\" in key
                or not rel.name.endswith(".py")
            ):
                raise ValueError(
                    f"module path {key!r} must be a relative .py path inside the distribution"
                )
        if rel in files:
            raise ValueError(f"module {key!r} is given twice")
        files[rel] = textwrap.dedent(source)
    for rel in list(files):
        for parent in list(rel.parents)[:-1]:
            init = parent / "__init__.py"
            files.setdefault(init, "")
    return files

"""The path of the Fermix home, without the rest of :mod:`fermix_core.home`.

:meth:`fermix_core.home.FermixHome.resolve` uses this; so does the console entry point,
which needs the path (for :mod:`fermix_core.leancode` and :mod:`fermix_core.codecache`)
before any dataclass is defined — and before :mod:`pathlib` is imported, so that
:func:`home_dir` works with plain strings.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing and pathlib are imported after the lean-code finder is in
if TYPE_CHECKING:  # pragma: no cover - typing only
    from collections.abc import Mapping
    from pathlib import Path

HOME_ENV = "FERMIX_HOME"
DEFAULT_DIRNAME = ".fermix"


def home_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$FERMIX_HOME`` (``~`` expanded) or ``~/.fermix``, as an absolute path.

    An empty ``FERMIX_HOME`` counts as unset, the way shells treat ``VAR=``. A relative
    value is anchored at the current directory now, so a daemon that later changes its
    working directory still points at the same place.
    """
    from pathlib import Path

    return Path(home_dir(environ))


def home_dir(environ: Mapping[str, str] | None = None) -> str:
    """:func:`home_path` as a string, computed without :mod:`pathlib` (with its rules: a
    ``~`` that cannot be expanded raises :class:`RuntimeError`)."""
    env = os.environ if environ is None else environ
    raw = (env.get(HOME_ENV) or "").strip()
    if raw and not raw.startswith(os.sep):  # as pathlib reads it: no empty or "." parts
        raw = os.sep.join(part for part in raw.split(os.sep) if part not in ("", ".")) or "."
    path = os.path.expanduser(raw or "~")
    if path[:1] == "~":
        raise RuntimeError("Could not determine home directory.")
    if not raw:
        path = os.path.join(path, DEFAULT_DIRNAME)
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    return path

"""The path of the Fermix home, without the rest of :mod:`fermix_core.home`.

:meth:`fermix_core.home.FermixHome.resolve` uses this; so does the console entry point,
which needs the path (for :mod:`fermix_core.codecache`) before any dataclass is defined.
"""

from __future__ import annotations

import os
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
    env = os.environ if environ is None else environ
    raw = (env.get(HOME_ENV) or "").strip()
    path = Path(raw).expanduser() if raw else Path.home() / DEFAULT_DIRNAME
    if not path.is_absolute():
        path = Path.cwd() / path
    return path

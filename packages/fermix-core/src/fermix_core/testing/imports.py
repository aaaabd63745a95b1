"""What a piece of code imports, seen from a fresh interpreter.

Keeping a module light — a plugin's registration that must not pull in its SDK, a client
that must not load a library until it is used — is checked by running the code in a new
Python process (this one has imported everything already) and asking which of the named
modules it left in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable

_REPORT = (
    "\nimport json as _j, sys as _s\n"
    "print(_j.dumps(sorted(m for m in {names!r} if m in _s.modules)))\n"
)


def loaded_after(code: str, modules: Iterable[str]) -> list[str]:
    """The names among *modules* that running *code* in a fresh interpreter imported
    (sorted); the code's own output is ignored, a failure raises
    :class:`subprocess.CalledProcessError` with its stderr."""
    names = sorted(set(modules))
    result = subprocess.run(
        [sys.executable, "-c", code + _REPORT.format(names=names)],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(result.stdout.strip().splitlines()[-1]))

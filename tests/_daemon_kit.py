"""What the real-daemon tests share: loading a channel fake by path, and running ``fermix``.

The channel fakes live beside each adapter's tests (``packages/fermix-channels/tests/…``),
which are not importable packages, so the daemon tests load them by path once per process.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
CHANNEL_TESTS = Path(__file__).parents[1] / "packages/fermix-channels/tests"


def load_module(name: str, path: Path) -> ModuleType:
    """Import the file at *path* as module *name* (once; later calls return the same one)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def fermix(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Run the installed ``fermix`` with *env*; a non-zero exit fails with its output."""
    result = subprocess.run(
        [FERMIX, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise AssertionError(f"fermix {args}: {result.returncode}\n{result.stdout}{result.stderr}")
    return result

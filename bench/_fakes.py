"""Load a platform stand-in from the channel test suites by file path.

The loopback fakes live beside the adapter tests (they are test code, not a package), so the
benchmarks import them by path, once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_fake(name: str, path: Path) -> ModuleType:
    """The module at *path*, imported once under *name*."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]

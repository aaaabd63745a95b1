from __future__ import annotations

import sys
import textwrap

import pytest

#: Module names the plugin tests write and import; removed again after each test.
TEST_MODULE_PREFIXES = ("fx_test_", "fx_spec_")


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Write importable plugin modules into a temp dir on sys.path."""

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in [m for m in sys.modules if m.startswith(TEST_MODULE_PREFIXES)]:
        del sys.modules[name]

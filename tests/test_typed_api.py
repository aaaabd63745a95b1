"""The public API type-checks under ``mypy --strict`` in the code a plugin or app writes.

``tests/typed_app/typed_app.py`` is that code: a tool returning ``ToolOutput(content=str)``,
a provider, the hooks that register them, and an app embedding the runtime. Every
distribution ships ``py.typed``, so mypy reads fermix's own annotations instead of treating
the imports as ``Any`` — the wrong-type probe below fails only because it does.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests/typed_app/typed_app.py"
PACKAGES = {
    "fermix-core": "fermix_core",
    "fermix-providers": "fermix_providers",
    "fermix-channels": "fermix_channels",
    "fermix-tools": "fermix_tools",
}

pytest.importorskip("mypy", reason="mypy is in the dev dependency group")


def mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_every_distribution_ships_a_py_typed_marker(dist: str) -> None:
    marker = ROOT / "packages" / dist / "src" / PACKAGES[dist] / "py.typed"
    assert marker.is_file(), f"{dist} must ship {PACKAGES[dist]}/py.typed"


def test_the_example_app_passes_mypy_strict(tmp_path: Path) -> None:
    result = mypy(APP, tmp_path / "cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_sees_fermix_types_rather_than_any(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from fermix_core.tool import ToolOutput\n"
        "from fermix_core.specs import PolicyClass\n"
        "out = ToolOutput(content=42)\n"
        "policy = PolicyClass.READ\n"
    )
    result = mypy(wrong, tmp_path / "cache")
    assert result.returncode == 1
    assert 'Argument "content" to "ToolOutput" has incompatible type "int"' in result.stdout
    assert 'has no attribute "READ"' in result.stdout


@pytest.mark.anyio
async def test_the_example_app_runs(fermix_home, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(APP.parent))
    import typed_app

    assert await typed_app.ask_once(fermix_home.path, "hello") == "you said: hello"

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fermix_core.home import FermixHome
from fermix_core.tool import ToolContext, Trust


@pytest.fixture
def make_context(tmp_path: Path) -> Callable[..., ToolContext]:
    """``make_context(services={...})``: an attended operator context in a scratch home."""

    def build(**overrides: Any) -> ToolContext:
        home = FermixHome(tmp_path / "home")
        home.ensure()
        values: dict[str, Any] = {
            "trust": Trust.OPERATOR,
            "cwd": tmp_path,
            "home": home,
            "session_id": "main-1",
            "attended": True,
        }
        values.update(overrides)
        return ToolContext(**values)

    return build

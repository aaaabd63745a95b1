"""A throwaway OS home with a FERMIX_HOME inside it, and policies built on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.home import FermixHome
from fermix_core.sandbox import SandboxPolicy
from fermix_core.tool import ToolContext, Trust

KEY = ConversationKey("tg", "chat", None)


@dataclass
class Layout:
    """``home`` plays $HOME; ``fermix`` is ``home/.fermix``; ``project`` a folder in home."""

    home: Path
    fermix: FermixHome
    workspace: Path
    project: Path
    outside: Path

    def policy(self, mode: str = "standard", **kw: Any) -> SandboxPolicy:
        kw.setdefault("environ", {"PATH": "/usr/bin:/bin", "HOME": str(self.home)})
        return SandboxPolicy(
            mode=mode,  # type: ignore[arg-type]
            os_home=self.home,
            fermix_home=self.fermix.path,
            workspace=self.workspace,
            **kw,
        )

    def ctx(
        self,
        *,
        trust: Trust = Trust.OPERATOR,
        local: bool = True,
        cwd: Path | None = None,
        attended: bool = True,
        origin: str = "main",
        services: dict[str, Any] | None = None,
        key: ConversationKey | None = KEY,
        capabilities: dict[str, Any] | None = None,
    ) -> ToolContext:
        return ToolContext(
            trust=trust,
            cwd=cwd or self.project,
            home=self.fermix,
            conversation_key=key,
            session_id="test-session",
            attended=attended,
            local=local,
            origin=origin,
            services=services or {},
            capabilities=capabilities or {},
        )


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    home = tmp_path / "home"
    fermix = FermixHome(home / ".fermix")
    fermix.ensure()
    workspace = fermix.ensure_dir("workspace")
    project = home / "code" / "app"
    project.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# shell\n")
    fermix.config_file.write_text("# my settings\n")
    return Layout(home, fermix, workspace, project, outside)


@pytest.fixture
def make_ctx(layout: Layout) -> Callable[..., ToolContext]:
    return layout.ctx


class RecordingTracer:
    """Records what ``Tracer.record`` receives (a unit-test stand-in for our own tracer)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, dict[str, Any]]] = []

    def record(self, type: str, **fields: Any) -> None:
        self.records.append((type, fields))


@pytest.fixture
def tracer() -> RecordingTracer:
    return RecordingTracer()

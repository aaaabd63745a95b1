"""Fixtures shared by the file and shell tool tests: a real sandbox over a temporary home."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from fermix_core.sandbox.policy import SandboxPolicy
from fermix_core.tool import ToolContext, Trust


@dataclass
class _Home:
    path: Path


def build_policy(
    base: Path, mode: str = "strict", allowed: tuple[Path, ...] = (), **kw
) -> SandboxPolicy:
    """A sandbox under *base*: an OS home with ~/.ssh, a FERMIX_HOME and its workspace."""
    os_home = base / "home"
    (os_home / ".ssh").mkdir(parents=True, exist_ok=True)
    key = os_home / ".ssh" / "id_rsa"
    if not key.exists():
        key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    fermix_home = os_home / ".fermix"
    (fermix_home / "workspace").mkdir(parents=True, exist_ok=True)
    (fermix_home / "config.toml").write_text("# config\n")
    return SandboxPolicy(
        mode=mode,
        os_home=os_home,
        fermix_home=fermix_home,
        workspace=fermix_home / "workspace",
        allowed_roots=tuple(allowed),
        **{"environ": {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}, **kw},
    )


def make_ctx(policy, cwd: Path | None = None, *, trust: Trust = Trust.OPERATOR, **kw):
    return ToolContext(
        trust=trust,
        cwd=cwd or policy.workspace,
        home=_Home(policy.fermix_home),
        session_id="t",
        attended=kw.pop("attended", True),
        local=kw.pop("local", True),
        services={"sandbox": policy},
        **kw,
    )


@pytest.fixture
def sandbox_kit():
    """The factories, for contract classes whose make_context has no fixtures."""
    return build_policy, make_ctx


@pytest.fixture
def policy(tmp_path: Path):
    return build_policy(tmp_path)


@pytest.fixture
def workspace(policy) -> Path:
    return policy.workspace


@pytest.fixture
def os_home(policy) -> Path:
    return policy.os_home


@pytest.fixture
def ctx(policy) -> ToolContext:
    return make_ctx(policy)

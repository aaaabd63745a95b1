"""``fermix doctor``'s signal-cli row, from a real config file through assemble()."""

from __future__ import annotations

import os
from typing import Any

import fermix_channels.signal.plugin as plugin
from fermix_core.boot import assemble
from fermix_core.doctor import DoctorContext, Status, run_checks
from fermix_core.home import FermixHome

from .conftest import ss

BASE = f'[fermix_channels.signal]\nenabled = true\nowner_user_id = "{ss.OWNER}"\n'


def rows(home: FermixHome, config: str, environ: dict[str, str] | None = None) -> list[Any]:
    home.config_file.write_text(config)
    home.config_file.chmod(0o600)
    env = {"FERMIX_HOME": str(home.path), "PATH": os.environ.get("PATH", ""), **(environ or {})}
    assembly = assemble(
        home, environ=env, plugins=[("channels.signal", plugin)], entry_points=False
    )
    assert assembly.registry.errors == []
    context = DoctorContext(assembly, assembly.load_config())
    return [r for r in run_checks(context) if r.check == "signal_cli"]


def test_disabled_is_skipped(fermix_home) -> None:
    (row,) = rows(fermix_home, "[fermix_channels.signal]\nenabled = false\n")
    assert row.status == Status.SKIP


def test_no_account_fails_with_the_fix(fermix_home) -> None:
    (row,) = rows(fermix_home, BASE)
    assert row.status == Status.FAIL and "account is not set" in row.detail
    assert "SIGNAL_ACCOUNT" in row.fix


def test_a_missing_executable_fails(fermix_home, tmp_path) -> None:
    config = BASE + f'account = "{ss.ACCOUNT}"\ncli_path = "{tmp_path}/nope/signal-cli"\n'
    (row,) = rows(fermix_home, config)
    assert row.status == Status.FAIL and "not found at" in row.detail
    assert "docs/channels/signal.md" in row.fix


def test_the_version_is_shown_and_env_overrides_apply(fermix_home, stub) -> None:
    environ = {"SIGNAL_ACCOUNT": ss.ACCOUNT, "SIGNAL_CLI_PATH": str(stub.path)}
    (row,) = rows(fermix_home, BASE, environ)
    assert row.status == Status.OK, row
    assert "signal-cli 0.13.19-stub" in row.detail and ss.ACCOUNT in row.detail


def test_a_failing_executable_is_reported(fermix_home, tmp_path) -> None:
    broken = tmp_path / "signal-cli"
    broken.write_text("#!/bin/sh\necho 'Error: could not find or load main class' >&2\nexit 1\n")
    broken.chmod(0o755)
    config = BASE + f'account = "{ss.ACCOUNT}"\ncli_path = "{broken}"\n'
    (row,) = rows(fermix_home, config)
    assert row.status == Status.FAIL and "exit 1" in row.detail
    assert "Java 21" in row.fix

"""FERMIX_HOME: resolution, the layout, private creation on demand, permission problems."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fermix_core.home import LAYOUT_DIRS, FermixHome


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_resolve_prefers_fermix_home(tmp_path) -> None:
    assert FermixHome.resolve({"FERMIX_HOME": str(tmp_path / "h")}).path == tmp_path / "h"


def test_resolve_expands_user_and_defaults_to_dot_fermix(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert FermixHome.resolve({}).path == tmp_path / ".fermix"
    assert FermixHome.resolve({"FERMIX_HOME": ""}).path == tmp_path / ".fermix"
    assert FermixHome.resolve({"FERMIX_HOME": "~/.fermix-dev"}).path == tmp_path / ".fermix-dev"


def test_resolve_reads_the_process_environment_by_default(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FERMIX_HOME", str(tmp_path / "from-env"))
    assert FermixHome.resolve().path == tmp_path / "from-env"


def test_relative_home_is_anchored_at_the_current_directory(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    home = FermixHome.resolve({"FERMIX_HOME": "rel/home"})
    assert home.path == tmp_path / "rel" / "home"
    assert home.path.is_absolute()


def test_layout_paths(tmp_path) -> None:
    home = FermixHome(tmp_path)
    files = {
        "config_file": "config.toml",
        "auth_file": "auth.json",
        "memory_db": "memory.db",
        "daemon_sock": "daemon.sock",
        "realtime_sock": "realtime.sock",
        "acp_sock": "acp.sock",
        "pid_file": "daemon.pid",
    }
    for attr, name in files.items():
        assert getattr(home, attr) == tmp_path / name
    dirs = {
        "workspace": "workspace",
        "bootstrap": "bootstrap",
        "memory_dir": "memory",
        "skills": "skills",
        "plugins": "plugins",
        "browser": "browser",
        "journals": "journals",
        "realtime": "realtime",
        "traces": "traces",
        "logs": "logs",
        "grants": "grants",
        "cache": "cache",
        "media": "media",
    }
    for attr, name in dirs.items():
        assert getattr(home, attr) == tmp_path / name
    assert sorted(dirs.values()) == sorted(LAYOUT_DIRS)


def test_resolving_and_reading_create_nothing(tmp_path) -> None:
    home = FermixHome.resolve({"FERMIX_HOME": str(tmp_path / "h")})
    _ = (home.config_file, home.traces, home.permission_problems())
    assert not home.path.exists()


def test_ensure_creates_a_private_home_despite_umask(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        home = FermixHome(tmp_path / "a" / "b" / "home")
        assert home.ensure() == home.path
    finally:
        os.umask(old)
    assert mode(home.path) == 0o700
    assert mode(tmp_path / "a") == 0o700  # parents it had to create are private too
    assert list(home.path.iterdir()) == []


def test_ensure_leaves_an_existing_home_alone(tmp_path) -> None:
    existing = tmp_path / "home"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    FermixHome(existing).ensure()
    assert mode(existing) == 0o755


def test_ensure_dir_creates_one_private_subdir_on_demand(tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    traces = home.ensure_dir("traces")
    assert traces == home.traces
    assert mode(traces) == 0o700
    assert mode(home.path) == 0o700
    nested = home.ensure_dir("bootstrap/main")
    assert nested == home.bootstrap / "main"
    assert mode(nested) == 0o700
    assert sorted(p.name for p in home.path.iterdir()) == ["bootstrap", "traces"]
    assert home.ensure_dir("traces") == traces  # idempotent


@pytest.mark.parametrize("name", ["", "/etc", "../outside", "traces/../../x", "secrets"])
def test_ensure_dir_refuses_names_outside_the_layout(tmp_path, name) -> None:
    home = FermixHome(tmp_path / "home")
    with pytest.raises(ValueError, match="FERMIX_HOME"):
        home.ensure_dir(name)
    assert not (tmp_path / "outside").exists()


def test_ensure_refuses_a_file_in_the_way(tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure()
    home.traces.write_text("not a dir")
    with pytest.raises((NotADirectoryError, FileExistsError)):
        home.ensure_dir("traces")


def test_a_private_home_has_no_permission_problems(tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure()
    home.config_file.write_text("")
    home.config_file.chmod(0o600)
    assert home.permission_problems() == []


def test_permission_problems_name_the_fix(tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure()
    home.path.chmod(0o755)
    home.config_file.write_text("")
    home.config_file.chmod(0o644)
    home.auth_file.write_text("{}")
    home.auth_file.chmod(0o660)
    problems = home.permission_problems()
    assert [str(p) for p in problems] == [
        f"{home.path}: directory is accessible by group and other users (mode 0755); "
        f"fix with `chmod 700 {home.path}`",
        f"{home.config_file}: file is accessible by group and other users (mode 0644); "
        f"fix with `chmod 600 {home.config_file}`",
        f"{home.auth_file}: file is accessible by group (mode 0660); fix with `chmod 600 "
        f"{home.auth_file}`",
    ]
    assert problems[0].fix == f"chmod 700 {home.path}"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root to chown")
def test_files_owned_by_someone_else_are_a_problem(tmp_path) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure()
    home.config_file.write_text("")
    home.config_file.chmod(0o600)
    os.chown(home.config_file, 12345, -1)
    (problem,) = home.permission_problems()
    assert problem.path == home.config_file
    assert problem.problem == f"is owned by uid 12345, not by you (uid {os.getuid()})"
    assert problem.fix == f"chown {os.getuid()} {home.config_file}"


def _pathlib_home(raw: str) -> Path:
    """The home path computed with pathlib, as ``home_path`` did before ``home_dir``."""
    path = Path(raw).expanduser() if raw else Path.home() / ".fermix"
    return path if path.is_absolute() else Path.cwd() / path


@pytest.mark.parametrize(
    "raw",
    ["", "~/x", "rel/dir/", "/a//b/./c/", "./~", ".//~/x", ".", "a/./b", "a/../b", "~", "/~", "x~"],
)
def test_home_dir_follows_pathlibs_rules_without_pathlib(raw: str) -> None:
    from fermix_core.homedir import home_dir, home_path

    env = {"FERMIX_HOME": raw}
    assert home_path(env) == _pathlib_home(raw)
    assert Path(home_dir(env)) == _pathlib_home(raw)


def test_home_dir_cannot_expand_an_unknown_user() -> None:
    from fermix_core.homedir import home_dir

    with pytest.raises(RuntimeError):
        Path("~no-such-user-fermix/x").expanduser()
    with pytest.raises(RuntimeError):
        home_dir({"FERMIX_HOME": "~no-such-user-fermix/x"})

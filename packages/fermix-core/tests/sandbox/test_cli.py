"""``fermix grant|revoke path`` and ``fermix sandbox show`` on a real home and config.toml."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import tomlkit
from fermix_core.cli import sandbox_cmd
from fermix_core.plugins import PluginHost
from typer.testing import CliRunner

runner = CliRunner()


@pytest.fixture
def cli(monkeypatch, layout):
    from fermix_core.cli import context

    registry = PluginHost().collect()
    environ = {"HOME": str(layout.home), "PATH": "/usr/bin"}

    def load_for_cli(*, validate: bool = False):
        return SimpleNamespace(
            home=layout.fermix, host=None, registry=registry, unavailable=[], environ=environ
        )

    monkeypatch.setattr(context, "load_for_cli", load_for_cli)
    monkeypatch.chdir(layout.home / "code")

    def invoke(app, *args: str):
        return runner.invoke(app, list(args))

    return invoke


def roots(layout) -> list[str]:
    data = tomlkit.parse(layout.fermix.config_file.read_text()).unwrap()
    return data.get("sandbox", {}).get("allowed_roots", [])


def test_grant_canonicalises_writes_and_reminds_to_restart(cli, layout) -> None:
    result = cli(sandbox_cmd.grant_app, "path", "./app/../app/")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"granted: {layout.project}"
    assert "fermix restart" in result.stdout
    assert roots(layout) == [str(layout.project)]
    assert "# my settings" in layout.fermix.config_file.read_text()

    again = cli(sandbox_cmd.grant_app, "path", str(layout.project))
    assert again.exit_code == 1 and "already granted" in again.output


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("~", "whole home directory"),
        ("..", "whole home directory"),
        ("/", "whole file system"),
        ("~/.ssh", "SSH keys"),
        ("~/.fermix", "Fermix's own state"),
        ("/etc", "operating-system"),
        ("/usr/bin", "operating-system"),
        ("nowhere", "does not exist"),
    ],
)
def test_grant_refuses_what_no_grant_may_name(cli, layout, target, message) -> None:
    result = cli(sandbox_cmd.grant_app, "path", target)
    assert result.exit_code == 1
    assert message in result.output
    assert roots(layout) == []


def test_revoke(cli, layout) -> None:
    cli(sandbox_cmd.grant_app, "path", "app")
    result = cli(sandbox_cmd.revoke_app, "path", "~/code/app")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"revoked: {layout.project}"
    assert roots(layout) == []
    missing = cli(sandbox_cmd.revoke_app, "path", "app")
    assert missing.exit_code == 1 and "not a granted folder" in missing.output


def test_show_text_and_json(cli, layout) -> None:
    cli(sandbox_cmd.grant_app, "path", "app")
    text = cli(sandbox_cmd.sandbox_app, "show")
    assert text.exit_code == 0, text.output
    assert "mode:            standard" in text.stdout
    assert f"granted folders: {layout.project}" in text.stdout
    assert "command profile: assistant" in text.stdout
    verbose = cli(sandbox_cmd.sandbox_app, "show", "--verbose").stdout
    assert f"{layout.home / '.ssh'} — SSH keys" in verbose
    data = json.loads(cli(sandbox_cmd.sandbox_app, "show", "--json").stdout)
    assert data["allowed_roots"] == [str(layout.project)]
    assert data["command_profile"] == "assistant"
    assert any(p["path"] == str(layout.fermix.config_file) for p in data["protected"])


def test_show_lists_grants_it_ignores(cli, layout) -> None:
    layout.fermix.config_file.write_text(f'[sandbox]\nallowed_roots = ["{layout.home}"]\n')
    text = cli(sandbox_cmd.sandbox_app, "show").stdout
    assert f"ignored grant:   {layout.home} — that is your whole home directory" in text


def test_an_invalid_config_is_reported_not_overwritten(cli, layout) -> None:
    layout.fermix.config_file.write_text('[sandbox]\nmode = "lenient"\n')
    result = cli(sandbox_cmd.grant_app, "path", "app")
    assert result.exit_code == 1
    assert "sandbox.mode" in result.output
    assert layout.fermix.config_file.read_text() == '[sandbox]\nmode = "lenient"\n'


def test_groups_show_help_without_arguments(cli) -> None:
    for app in (sandbox_cmd.grant_app, sandbox_cmd.revoke_app, sandbox_cmd.sandbox_app):
        result = cli(app)
        assert "Usage" in result.output


def test_show_labels_exact_entries_as_paths_not_files(cli, layout) -> None:
    text = cli(sandbox_cmd.sandbox_app, "show", "--verbose").stdout
    assert "(this file)" not in text
    assert "/ (this path only, not below) — the root of the file system" in text


def test_a_long_confinement_hint_is_wrapped_to_the_summary_width(cli, layout) -> None:
    """Without bubblewrap the install hint runs past 250 characters: it wraps under itself."""
    info = json.loads(cli(sandbox_cmd.sandbox_app, "show", "--json").stdout)
    hint = "install bubblewrap (Debian/Ubuntu: `sudo apt install bubblewrap`; " * 4
    info["confinement"].update(detail="bubblewrap (bwrap) is not installed; " * 3, fix=hint)
    lines = sandbox_cmd._render(info).splitlines()
    fix = next(i for i, line in enumerate(lines) if line.startswith("  to fix:"))
    assert all(len(line) <= 100 for line in lines[: fix + 4])
    assert lines[fix + 1].startswith(" " * 17)
    assert "`sudo apt install bubblewrap`;" in lines[fix + 1]
    joined = " ".join(line.strip() for line in lines[fix : fix + 4])
    assert joined.split(None, 2)[2] == hint.strip()


def test_show_is_a_summary_that_fits_a_screen(cli, layout) -> None:
    cli(sandbox_cmd.grant_app, "path", "app")
    text = cli(sandbox_cmd.sandbox_app, "show").stdout
    lines = text.splitlines()
    assert len(lines) <= 24, text
    # The width is the summary's own, not that of the (long) temporary paths.
    assert max(len(line.replace(str(layout.home), "~")) for line in lines) <= 100, text
    assert f"granted folders: {layout.project}" in text
    data = json.loads(cli(sandbox_cmd.sandbox_app, "show", "--json").stdout)
    # Every protected path is accounted for in the summary's counts …
    assert f"{len(data['protected'])} paths" in text
    assert f"{len(data['write_protected'])} paths" in text
    assert f"Fermix's own state: {layout.fermix.path}" in text
    assert "~/.ssh" in text  # … with examples, home-relative
    # … and the full list is one flag away.
    assert "fermix sandbox show --verbose" in text
    verbose = cli(sandbox_cmd.sandbox_app, "show", "--verbose").stdout
    assert len(verbose.splitlines()) > len(data["protected"])
    assert ", ".join(data["profile_programs"]) in verbose


def test_show_lists_an_unusual_protected_path_by_itself(cli, layout, monkeypatch) -> None:
    info = {"path": "/srv/secrets", "reason": "a path the operator protected", "kind": "tree"}
    real = sandbox_cmd._render

    def with_extra(data, **kwargs):
        data["protected"].append(info)
        return real(data, **kwargs)

    monkeypatch.setattr(sandbox_cmd, "_render", with_extra)
    text = cli(sandbox_cmd.sandbox_app, "show").stdout
    assert "/srv/secrets — a path the operator protected" in text

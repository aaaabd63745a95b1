"""SandboxPolicy.resolve / roots / protected on a real directory tree with real symlinks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tomlkit
from fermix_core.config import load_config
from fermix_core.plugins import PluginHost
from fermix_core.sandbox import SandboxDenied, SandboxPolicy
from fermix_core.sandbox.paths import is_disk_device, path_key, true_case
from fermix_core.tool import ToolError, Trust
from fermix_core.traces import Tracer

# --------------------------------------------------------------------------- modes


def test_strict_admits_workspace_and_grants_only(layout, make_ctx) -> None:
    policy = layout.policy("strict", allowed_roots=(layout.outside,))
    ctx = make_ctx()
    assert policy.roots(ctx) == [layout.workspace, layout.outside]
    assert policy.resolve(layout.workspace / "notes.md", ctx) == layout.workspace / "notes.md"
    assert policy.resolve(layout.outside / "a.txt", ctx) == layout.outside / "a.txt"
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.project / "main.py", ctx)
    assert denied.value.reason == "outside_roots"
    assert denied.value.path == str(layout.project / "main.py")
    assert "/sandbox grant PATH" in str(denied.value)
    assert "fermix grant path PATH" in str(denied.value)


def test_standard_admits_the_request_directory_for_a_local_operator_only(layout, make_ctx) -> None:
    policy = layout.policy("standard")
    local = make_ctx(local=True)
    assert policy.roots(local)[0] == layout.project
    assert policy.resolve("main.py", local) == layout.project / "main.py"

    for ctx in (
        make_ctx(local=False),  # a remote channel
        make_ctx(trust=Trust.GUEST, local=True),  # a guest
    ):
        assert layout.project not in policy.roots(ctx)
        with pytest.raises(SandboxDenied):
            policy.resolve(layout.project / "main.py", ctx)
        # relative paths fall back to the workspace for them
        assert policy.resolve("main.py", ctx) == layout.workspace / "main.py"


def test_standard_does_not_admit_home_itself_or_dirs_outside_it(layout, make_ctx) -> None:
    policy = layout.policy("standard")
    assert policy.roots(make_ctx(cwd=layout.home)) == [layout.workspace]
    assert policy.roots(make_ctx(cwd=layout.outside)) == [layout.workspace]
    assert policy.roots(make_ctx(cwd=layout.home / ".ssh")) == [layout.workspace]
    assert policy.roots(make_ctx(cwd=layout.fermix.path)) == [layout.workspace]


def test_open_admits_home_except_protected(layout, make_ctx) -> None:
    policy = layout.policy("open")
    ctx = make_ctx(local=False)
    assert policy.resolve(layout.project / "x.py", ctx) == layout.project / "x.py"
    assert policy.resolve(layout.home / "Documents" / "new.txt", ctx, write=True)
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.home / ".ssh" / "id_ed25519", ctx)
    assert denied.value.reason == "protected"
    assert "SSH keys" in str(denied.value)
    with pytest.raises(SandboxDenied):
        policy.resolve(layout.outside / "x", ctx)


# --------------------------------------------------------------------------- protected


@pytest.mark.parametrize(
    "relative",
    [
        ".ssh",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".gnupg/private-keys-v1.d/x.key",
        ".config/gcloud/credentials.db",
        ".kube/config",
        ".docker/config.json",
        ".netrc",
        ".git-credentials",
        ".password-store/email.gpg",
        ".mozilla/firefox/profile/cookies.sqlite",
        ".config/google-chrome/Default/Login Data",
        "Library/Keychains/login.keychain-db",
        ".local/share/keyrings/login.keyring",
    ],
)
def test_protected_home_paths_are_denied_in_every_mode_even_when_granted(
    layout, make_ctx, relative
) -> None:
    for mode in ("strict", "standard", "open"):
        policy = layout.policy(mode, allowed_roots=(layout.project,))
        with pytest.raises(SandboxDenied) as denied:
            policy.resolve(layout.home / relative, make_ctx(cwd=layout.home / "code"))
        assert denied.value.reason == "protected", (mode, relative)


@pytest.mark.parametrize(
    "name", ["config.toml", "auth.json", "memory.db", "memory.db-wal", "memory.db-shm"]
)
def test_fermix_internals_are_protected(layout, make_ctx, name) -> None:
    policy = layout.policy("open")
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.fermix.path / name, make_ctx())
    assert "Fermix" in str(denied.value)


@pytest.mark.parametrize(
    "relative", ["daemon.sock", "grants/g.json", "skills/x/SKILL.md", "traces", "anything-new"]
)
def test_everything_in_fermix_home_but_the_workspace_is_protected(
    layout, make_ctx, relative
) -> None:
    policy = layout.policy("open")
    with pytest.raises(SandboxDenied):
        policy.resolve(layout.fermix.path / relative, make_ctx(), write=True)
    assert policy.resolve(layout.workspace / "deep" / "file.txt", make_ctx(), write=True)


@pytest.mark.parametrize(
    "path", ["/", "/etc/passwd", "/usr/bin/env", "/proc/self/environ", "/dev/sda"]
)
def test_os_roots_are_protected(layout, make_ctx, path) -> None:
    policy = layout.policy("open", allowed_roots=(layout.outside,))
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(path, make_ctx())
    assert denied.value.reason == "protected"


def test_root_home_is_protected_when_it_is_not_the_os_home(layout) -> None:
    policy = layout.policy("open")
    assert "operating-system" in (policy.protected_reason(Path("/root/.profile")) or "")


def test_os_home_inside_an_os_tree_stays_usable(tmp_path) -> None:
    """A service account's home such as /var/lib/x: its own files are not OS files."""
    policy = SandboxPolicy(
        mode="open",
        os_home=Path("/var/lib/fermix-test-home"),
        fermix_home=Path("/var/lib/fermix-test-home/.fermix"),
        workspace=Path("/var/lib/fermix-test-home/.fermix/workspace"),
        environ={},
    )
    assert policy.home_usable
    assert policy.protected_reason(Path("/var/lib/fermix-test-home/code/a.py")) is None
    assert policy.protected_reason(Path("/var/lib/fermix-test-home/.ssh/id_rsa"))
    assert policy.protected_reason(Path("/var/lib/other"))


def test_home_that_is_an_os_root_or_slash_is_never_a_root(layout) -> None:
    for home in ("/", "/usr"):
        policy = SandboxPolicy(
            mode="open",
            os_home=Path(home),
            fermix_home=layout.fermix.path,
            workspace=layout.workspace,
            environ={},
        )
        assert not policy.home_usable
        assert Path(home) not in policy.roots(None)


def test_write_protected_files_may_be_read_but_not_written(layout, make_ctx) -> None:
    policy = layout.policy("open")
    ctx = make_ctx()
    assert policy.resolve(layout.home / ".bashrc", ctx) == layout.home / ".bashrc"
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.home / ".bashrc", ctx, write=True)
    assert "never written" in str(denied.value)


# --------------------------------------------------------------------------- canonicalisation


def test_dotdot_cannot_climb_out_of_a_root(layout, make_ctx) -> None:
    policy = layout.policy("strict")
    ctx = make_ctx()
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.workspace / ".." / "config.toml", ctx)
    assert denied.value.path == str(layout.fermix.config_file)
    with pytest.raises(SandboxDenied):
        policy.resolve("../../.ssh/id_ed25519", ctx)


def test_symlink_inside_a_granted_root_into_a_protected_path_is_denied(layout, make_ctx) -> None:
    policy = layout.policy("strict", allowed_roots=(layout.project,))
    (layout.project / "keys").symlink_to(layout.home / ".ssh")
    (layout.project / "key").symlink_to(layout.home / ".ssh" / "id_ed25519")
    (layout.workspace / "settings").symlink_to(layout.fermix.config_file)
    ctx = make_ctx()
    for path in (
        layout.project / "keys" / "id_ed25519",
        layout.project / "key",
        layout.workspace / "settings",
    ):
        with pytest.raises(SandboxDenied) as denied:
            policy.resolve(path, ctx)
        assert denied.value.reason == "protected", path


def test_symlink_out_of_the_roots_is_denied_and_one_inside_is_followed(layout, make_ctx) -> None:
    policy = layout.policy("strict")
    (layout.workspace / "out").symlink_to(layout.outside)
    (layout.workspace / "alias").symlink_to(layout.workspace / "real", target_is_directory=True)
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.workspace / "out" / "x", make_ctx())
    assert denied.value.reason == "outside_roots"
    assert policy.resolve(layout.workspace / "alias" / "f", make_ctx()) == (
        layout.workspace / "real" / "f"
    )


def test_dangling_symlink_is_judged_by_its_target(layout, make_ctx) -> None:
    policy = layout.policy("strict")
    (layout.workspace / "plant").symlink_to(layout.home / ".ssh" / "authorized_keys")
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.workspace / "plant", make_ctx(), write=True)
    assert denied.value.reason == "protected"


def test_symlink_loop_is_refused(layout, make_ctx) -> None:
    policy = layout.policy("strict")
    (layout.workspace / "a").symlink_to(layout.workspace / "b")
    (layout.workspace / "b").symlink_to(layout.workspace / "a")
    with pytest.raises(SandboxDenied) as denied:
        policy.resolve(layout.workspace / "a" / "x", make_ctx())
    assert denied.value.reason == "symlink_loop"


def test_a_write_target_that_does_not_exist_resolves_through_its_parent(layout, make_ctx) -> None:
    policy = layout.policy("strict")
    (layout.workspace / "link").symlink_to(layout.outside)
    target = policy.resolve("new/dir/file.txt", make_ctx(local=False), write=True)
    assert target == layout.workspace / "new" / "dir" / "file.txt"
    with pytest.raises(SandboxDenied):
        policy.resolve(layout.workspace / "link" / "new" / "f.txt", make_ctx(), write=True)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "invalid_path"),
        ("   ", "invalid_path"),
        ("a\x00b", "invalid_path"),
        ("~root/x", "invalid_path"),
    ],
)
def test_malformed_paths_are_refused_with_a_reason(layout, make_ctx, raw, reason) -> None:
    with pytest.raises(SandboxDenied) as denied:
        layout.policy("open").resolve(raw, make_ctx())
    assert denied.value.reason == reason


def test_overlong_paths_are_refused(layout, make_ctx) -> None:
    with pytest.raises(SandboxDenied):
        layout.policy("open").resolve("a/" * 3000, make_ctx())


def test_tilde_means_the_policy_home(layout, make_ctx) -> None:
    policy = layout.policy("open")
    assert policy.resolve("~/code/app/x", make_ctx()) == layout.project / "x"
    with pytest.raises(SandboxDenied):
        policy.resolve("~/.ssh/id_ed25519", make_ctx())


def test_sandbox_denied_is_a_tool_error(layout, make_ctx) -> None:
    with pytest.raises(ToolError):
        layout.policy("strict").resolve("/etc/shadow", make_ctx())


def test_case_folding_on_case_insensitive_file_systems(layout, make_ctx) -> None:
    """Forced on here (Linux is case-sensitive): ~/.SSH must be the protected ~/.ssh."""
    policy = layout.policy("open", case_insensitive=True)
    for variant in (".SSH/id_ed25519", ".Ssh", ".AWS/credentials"):
        assert policy.protected_reason(layout.home / variant), variant
    assert policy.protected_reason(layout.fermix.path / "CONFIG.TOML")
    assert path_key("/A/Straße", fold=True) == path_key("/a/STRASSE", fold=True)
    assert (
        layout.policy("open", case_insensitive=False).protected_reason(layout.home / ".SSH" / "x")
        is None
    )


def test_true_case_spells_existing_components_as_listed(layout) -> None:
    (layout.home / "Projects").mkdir()
    spelled = true_case(layout.home / "projects" / "missing")
    assert spelled == layout.home / "Projects" / "missing"


def test_disk_devices() -> None:
    for path in (
        "/dev/sda",
        "/dev/sdb1",
        "/dev/nvme0n1",
        "/dev//sda",
        "/dev/../dev/sda",
        "/dev/disk2",
    ):
        assert is_disk_device(path), path
    for path in ("/dev/null", "/dev/stdout", "/dev/tty", "/dev/shm/x", "/dev/zero"):
        assert not is_disk_device(path), path


# --------------------------------------------------------------------------- config


def test_from_config_reads_the_sandbox_section(layout) -> None:
    registry = PluginHost().collect()
    text = f"""
[sandbox]
mode = "strict"
allowed_roots = ["{layout.outside}", "{layout.home}", "{layout.home}/.ssh", "/etc"]
command_profile = "bare"

[sandbox.env]
allow = ["NODE_*"]
deny = ["NODE_DEBUG"]
set = {{ PAGER = "cat" }}
"""
    loaded = load_config(layout.fermix, registry, document=tomlkit.parse(text), environ={})
    policy = SandboxPolicy.from_config(loaded, layout.fermix.path, os_home=layout.home, environ={})
    assert policy.mode == "strict"
    assert policy.workspace == layout.workspace
    assert policy.allowed_roots == (layout.outside,)
    assert [str(p) for p, _ in policy.ignored_roots] == [
        str(layout.home),
        str(layout.home / ".ssh"),
        "/etc",
    ]
    assert policy.command_profile == "bare"
    assert policy.env_allow == ("NODE_*",) and policy.env_deny == ("NODE_DEBUG",)
    assert policy.env_set == {"PAGER": "cat"}
    described = policy.describe()
    json.dumps(described)  # plain data
    assert described["ignored_roots"][0]["reason"].startswith("that is your whole home")


def test_evolve_recomputes_and_keeps_the_original_untouched(layout) -> None:
    policy = layout.policy("strict")
    wider = policy.evolve(allowed_roots=(layout.outside,), command_profile="extended")
    assert wider.allowed_roots == (layout.outside,) and wider.command_profile == "extended"
    assert policy.allowed_roots == () and policy.command_profile == "assistant"


def test_invalid_mode_or_profile_is_refused(layout) -> None:
    with pytest.raises(ValueError, match="mode"):
        layout.policy("lenient")
    with pytest.raises(ValueError, match="profile"):
        layout.policy("strict", command_profile="root")


# --------------------------------------------------------------------------- traces


def test_decisions_are_traced_as_sandbox_events(layout, make_ctx) -> None:
    tracer = Tracer(layout.fermix, capture_content=False)
    policy = layout.policy("strict", tracer=tracer)
    policy.resolve(layout.workspace / "ok.txt", make_ctx())
    with pytest.raises(SandboxDenied):
        policy.resolve(layout.home / ".ssh" / "id_ed25519", make_ctx())
    tracer.close()
    files = list(layout.fermix.traces.glob("*/sandbox_event.jsonl"))
    assert len(files) == 1
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [(r["decision"], r.get("reason")) for r in records] == [
        ("allow", None),
        ("deny", "protected"),
    ]
    assert records[0]["session_id"] == "test-session"
    assert records[1]["path"] == str(layout.home / ".ssh" / "id_ed25519")


def test_a_broken_tracer_never_breaks_a_decision(layout, make_ctx) -> None:
    class Broken:
        def record(self, *a, **k):
            raise OSError("disk full")

    policy = layout.policy("strict", tracer=Broken())
    assert policy.resolve("x", make_ctx(local=False)) == layout.workspace / "x"


def test_the_tracer_service_is_used_when_the_policy_has_none(layout, make_ctx, tracer) -> None:
    policy = layout.policy("strict")
    policy.resolve("x", make_ctx(local=False, services={"tracer": tracer}))
    assert tracer.records[0][0] == "sandbox_event"


def test_ensure_workspace_creates_a_private_directory(tmp_path, layout) -> None:
    policy = SandboxPolicy(
        mode="strict",
        os_home=layout.home,
        fermix_home=layout.fermix.path,
        workspace=tmp_path / "ws",
        environ={},
    )
    created = policy.ensure_workspace()
    assert created.is_dir() and (os.stat(created).st_mode & 0o077) == 0

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fermix_core.authfile import (
    AuthFileCorruptError,
    AuthFileError,
    AuthFileModeError,
    AuthStore,
)

TOKEN = {"access_token": "sk-ant-oat01-FAKE0access0000000000000001", "expires_at": 1_900_000_000}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_missing_file_reads_empty_and_is_not_created(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    assert store.read() == {}
    assert store.get("codex") is None
    assert store.delete("codex") is False
    assert not store.path.exists()


def test_put_get_delete_round_trip(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put("anthropic_oauth", TOKEN)
    store.put("codex", {"access_token": "codex-1", "account_id": "acct"})
    assert store.get("anthropic_oauth") == TOKEN
    assert store.profiles() == ["anthropic_oauth", "codex"]
    assert json.loads(store.path.read_text()) == {
        "anthropic_oauth": TOKEN,
        "codex": {"access_token": "codex-1", "account_id": "acct"},
    }
    assert store.delete("anthropic_oauth") is True
    assert store.profiles() == ["codex"]
    assert AuthStore(store.path).get("codex") == {"access_token": "codex-1", "account_id": "acct"}


def test_update_merges_a_refresh(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put("xai_oauth", {"access_token": "a-1", "refresh_token": "r-1"})
    merged = store.update("xai_oauth", access_token="a-2", expires_at=5)
    assert merged == {"access_token": "a-2", "refresh_token": "r-1", "expires_at": 5}
    assert store.get("xai_oauth") == merged


def test_get_returns_a_copy(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put("codex", {"access_token": "a-1"})
    copy = store.get("codex")
    assert copy is not None
    copy["access_token"] = "changed"
    assert store.get("codex") == {"access_token": "a-1"}


def test_every_write_is_0600(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    old_umask = os.umask(0o000)  # even a permissive umask must not widen the file
    try:
        store.put("codex", {"access_token": "a-1"})
        assert mode_of(store.path) == 0o600
        store.update("codex", access_token="a-2")
        assert mode_of(store.path) == 0o600
        store.delete("codex")
        assert mode_of(store.path) == 0o600
    finally:
        os.umask(old_umask)
    assert not list(tmp_path.glob(".auth.json.*.tmp"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o666])
def test_wide_mode_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"codex": {"access_token": "a-1"}}))
    path.chmod(mode)
    store = AuthStore(path)
    with pytest.raises(AuthFileModeError) as caught:
        store.read()
    assert f"chmod 600 {path}" in str(caught.value)
    assert "a-1" not in str(caught.value)
    with pytest.raises(AuthFileModeError):
        store.put("other", {"x": 1})
    assert mode_of(path) == mode  # refused, not silently repaired
    path.chmod(0o600)
    assert store.get("codex") == {"access_token": "a-1"}


@pytest.mark.parametrize(
    "content",
    [
        '{"codex": {"access_token": "a-1"',  # truncated
        "not json at all",
        "[1, 2, 3]",
        '{"codex": "just-a-string"}',
        b"\xff\xfe{}",
    ],
)
def test_corrupt_file_is_a_clear_error_and_never_overwritten(
    tmp_path: Path, content: str | bytes
) -> None:
    path = tmp_path / "auth.json"
    raw = content if isinstance(content, bytes) else content.encode()
    path.write_bytes(raw)
    path.chmod(0o600)
    store = AuthStore(path)
    with pytest.raises(AuthFileCorruptError) as caught:
        store.read()
    assert str(path) in str(caught.value)
    assert "a-1" not in str(caught.value)
    with pytest.raises(AuthFileCorruptError):
        store.put("xai_oauth", {"access_token": "new"})
    with pytest.raises(AuthFileCorruptError):
        store.delete("codex")
    assert path.read_bytes() == raw


def test_a_directory_in_its_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "auth.json").mkdir()
    with pytest.raises(AuthFileError, match="not a regular file"):
        AuthStore(tmp_path / "auth.json").read()


@pytest.mark.parametrize("profile", ["", "   "])
def test_profile_needs_a_name(tmp_path: Path, profile: str) -> None:
    with pytest.raises(AuthFileError, match="non-empty name"):
        AuthStore(tmp_path / "auth.json").put(profile, {"a": 1})


def test_values_json_cannot_hold_are_refused_before_writing(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    store.put("codex", {"access_token": "a-1"})
    before = store.path.read_bytes()
    with pytest.raises(AuthFileError, match="JSON cannot store"):
        store.put("xai_oauth", {"when": object()})
    with pytest.raises(AuthFileError, match="JSON cannot store"):
        store.update("codex", when={1, 2})
    assert store.path.read_bytes() == before


def test_concurrent_writers_in_one_process_serialize(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    start = threading.Barrier(8)

    def writer(n: int) -> None:
        store = AuthStore(path)  # separate instances share the per-file lock
        start.wait()
        for i in range(25):
            store.put(f"p{n}-{i}", {"n": n, "i": i})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    profiles = AuthStore(path).read()
    assert len(profiles) == 8 * 25
    assert profiles["p7-24"] == {"n": 7, "i": 24}


def test_concurrent_writers_in_separate_processes_serialize(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    script = (
        "import sys\n"
        "from fermix_core.authfile import AuthStore\n"
        "store = AuthStore(sys.argv[1])\n"
        "for i in range(30):\n"
        "    store.update('shared', **{f'{sys.argv[2]}-{i}': i})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"w{n}"]) for n in range(4)]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0, 0, 0]
    shared = AuthStore(path).get("shared")
    assert shared is not None
    assert len(shared) == 4 * 30  # no read-modify-write lost another process's update
    assert mode_of(path) == 0o600

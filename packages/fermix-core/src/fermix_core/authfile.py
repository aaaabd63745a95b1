"""``auth.json``: OAuth token profiles (``anthropic_oauth``, ``xai_oauth``, ``codex`` …).

OAuth tokens refresh themselves, so unlike config secrets they are rewritten while the
daemon runs, by the daemon and by ``fermix auth login`` at the same time. Hence: every write
is a read-modify-write under a lock (a thread lock inside the process, ``flock`` on a
sidecar file across processes) and lands atomically with mode 0600.

The file is refused, not repaired, when it is readable by others (the tokens may already
have leaked, and the owner should know) or when it is not valid JSON (overwriting it would
destroy logins the user can only recreate by signing in again).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fermix_core.fsutil import atomic_write

try:  # POSIX; on Windows the in-process lock is all there is.
    import fcntl
except ImportError:  # pragma: no cover - platform specific
    fcntl = None  # type: ignore[assignment]


class AuthFileError(Exception):
    """auth.json cannot be used as it is; the message says how to fix it."""


class AuthFileModeError(AuthFileError):
    """auth.json grants access to group or others."""


class AuthFileCorruptError(AuthFileError):
    """auth.json is not a JSON object of profiles."""


_locks_guard = threading.Lock()
_locks: dict[str, threading.RLock] = {}


def _lock_for(path: Path) -> threading.RLock:
    """One lock per file, shared by every AuthStore on it in this process."""
    key = os.path.realpath(path)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock


class AuthStore:
    """Read and update the OAuth profiles held in one ``auth.json``."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = _lock_for(self.path)

    def __repr__(self) -> str:
        return f"AuthStore({str(self.path)!r})"

    # ------------------------------------------------------------------ checks

    def check_mode(self) -> None:
        """Raise :class:`AuthFileModeError` if the file grants anything to group or others."""
        if os.name == "nt":  # pragma: no cover - POSIX permission bits only
            return
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode):
            raise AuthFileCorruptError(
                f"{self.path} is not a regular file; move it aside and log in again"
            )
        if mode & 0o077:
            raise AuthFileModeError(
                f"{self.path} is readable or writable by other users "
                f"(mode {stat.S_IMODE(mode):04o}); "
                f"run `chmod 600 {self.path}` and, if others could read it, log in again to "
                "replace the tokens"
            )

    # ------------------------------------------------------------------ reads

    def read(self) -> dict[str, Any]:
        """All profiles, ``{}`` when the file does not exist yet."""
        with self._lock:
            return self._read_unlocked()

    def get(self, profile: str) -> dict[str, Any] | None:
        value = self.read().get(profile)
        return dict(value) if isinstance(value, dict) else None

    def profiles(self) -> list[str]:
        return sorted(self.read())

    def _read_unlocked(self) -> dict[str, Any]:
        self.check_mode()
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
            raise AuthFileCorruptError(
                f"{self.path} is not valid JSON{where}; it was left untouched. Fix it by hand, or "
                "move it aside and run `fermix auth login` again"
            ) from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise AuthFileCorruptError(
                f"{self.path} must hold a JSON object of profiles (name -> object); it was left "
                "untouched. Move it aside and run `fermix auth login` again"
            )
        return data

    # ------------------------------------------------------------------ writes

    def put(self, profile: str, data: Mapping[str, Any]) -> None:
        """Create or replace one profile, keeping the others."""
        _check_profile(profile)
        payload = _serializable(profile, dict(data))
        with self._transaction() as profiles:
            profiles[profile] = payload

    def update(self, profile: str, **changes: Any) -> dict[str, Any]:
        """Merge *changes* into one profile (a token refresh) and return the result."""
        _check_profile(profile)
        with self._transaction() as profiles:
            merged = _serializable(profile, {**profiles.get(profile, {}), **changes})
            profiles[profile] = merged
        return dict(merged)

    def delete(self, profile: str) -> bool:
        """Remove one profile; ``False`` when it was not there (nothing is written then)."""
        with self._lock, self._file_lock():
            profiles = self._read_unlocked()
            if profile not in profiles:
                return False
            del profiles[profile]
            self._write_unlocked(profiles)
            return True

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[dict[str, Any]]:
        with self._lock, self._file_lock():
            profiles = self._read_unlocked()
            yield profiles
            self._write_unlocked(profiles)

    def _write_unlocked(self, profiles: Mapping[str, Any]) -> None:
        text = json.dumps(profiles, indent=2, sort_keys=True) + "\n"
        atomic_write(self.path, text, mode=0o600)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """Serialize writers in other processes through ``flock`` on ``auth.json.lock``.

        The lock lives on a sidecar file because ``auth.json`` itself is replaced by rename
        on every write, and a lock on a replaced inode protects nothing.
        """
        if fcntl is None:  # pragma: no cover - platform specific
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _check_profile(profile: str) -> None:
    if not isinstance(profile, str) or not profile.strip():
        raise AuthFileError(
            "an auth profile needs a non-empty name such as 'codex' or 'anthropic_oauth'"
        )


def _serializable(profile: str, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        json.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise AuthFileError(
            f"profile {profile!r} holds a value JSON cannot store ({type(exc).__name__}); "
            "store strings, numbers, booleans, lists and objects only"
        ) from None
    return payload

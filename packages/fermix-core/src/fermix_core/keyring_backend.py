"""Keyring backends that live in memory: for tests and for apps that embed Fermix.

Tests must never touch the developer's real keychain, and an embedding app may want
secrets held only for the life of the process. Install one with
``keyring.set_keyring(MemoryKeyring())``.

Both classes report a negative priority on purpose: keyring registers every backend
subclass it sees and, when it auto-detects, picks the highest priority. A negative one
guarantees that merely importing this module can never make a real install store its
secrets in memory (and lose them at exit).
"""

from __future__ import annotations

import threading

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import KeyringLocked, PasswordDeleteError


class MemoryKeyring(KeyringBackend):
    """A dict-backed keyring; thread-safe because the resolver calls it from worker threads."""

    @properties.classproperty
    def priority(cls) -> float:
        return -10

    def __init__(self) -> None:
        super().__init__()
        self._items: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def get_password(self, service: str, username: str) -> str | None:
        with self._lock:
            return self._items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        with self._lock:
            self._items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        with self._lock:
            if self._items.pop((service, username), None) is None:
                raise PasswordDeleteError(f"no password stored for service {service!r}")

    def services(self) -> list[tuple[str, str]]:
        """The ``(service, username)`` pairs held, for assertions; never the passwords."""
        with self._lock:
            return sorted(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class LockedKeyring(KeyringBackend):
    """A keyring that is present but locked: every call raises ``KeyringLocked``.

    This is what a Secret Service looks like on a headless machine whose login keyring was
    never unlocked; code that reads secrets must degrade, not crash, when it meets one.
    """

    @properties.classproperty
    def priority(cls) -> float:
        return -10

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("the keyring is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("the keyring is locked")

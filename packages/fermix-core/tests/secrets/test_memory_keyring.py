from __future__ import annotations

import threading

import keyring
import pytest
from fermix_core.keyring_backend import LockedKeyring, MemoryKeyring
from keyring.backend import get_all_keyring
from keyring.backends import chainer, fail
from keyring.errors import KeyringLocked, PasswordDeleteError


def test_memory_keyring_round_trip() -> None:
    ring = MemoryKeyring()
    assert ring.get_password("fermix:A", "fermix") is None
    ring.set_password("fermix:A", "fermix", "value-1")
    ring.set_password("fermix:A", "other", "value-2")
    assert ring.get_password("fermix:A", "fermix") == "value-1"
    assert ring.get_password("fermix:A", "other") == "value-2"
    ring.set_password("fermix:A", "fermix", "value-3")
    assert ring.get_password("fermix:A", "fermix") == "value-3"
    ring.delete_password("fermix:A", "fermix")
    assert ring.get_password("fermix:A", "fermix") is None
    assert ring.services() == [("fermix:A", "other")]


def test_deleting_an_absent_entry_raises_keyrings_error() -> None:
    ring = MemoryKeyring()
    with pytest.raises(PasswordDeleteError):
        ring.delete_password("fermix:NOPE", "fermix")


def test_instances_do_not_share_state() -> None:
    first, second = MemoryKeyring(), MemoryKeyring()
    first.set_password("s", "u", "only-in-first")
    assert second.get_password("s", "u") is None


def test_works_as_keyrings_global_backend() -> None:
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    try:
        keyring.set_password("fermix:G", "fermix", "global-1")
        assert keyring.get_password("fermix:G", "fermix") == "global-1"
        assert ring.get_password("fermix:G", "fermix") == "global-1"
    finally:
        keyring.set_keyring(previous)


def test_concurrent_writers_lose_nothing() -> None:
    ring = MemoryKeyring()

    def write(n: int) -> None:
        for i in range(200):
            ring.set_password(f"svc-{n}-{i}", "fermix", str(i))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ring.services()) == 8 * 200


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.get_password("s", "u"),
        lambda r: r.set_password("s", "u", "p"),
        lambda r: r.delete_password("s", "u"),
    ],
)
def test_locked_keyring_raises_on_every_call(call: object) -> None:
    with pytest.raises(KeyringLocked):
        call(LockedKeyring())  # type: ignore[operator]


def test_importing_the_module_never_changes_keyrings_automatic_choice() -> None:
    # keyring auto-detects by priority; ours must lose to the "no keyring" backend and be
    # left out of the chainer, or a real install could silently keep secrets in memory.
    assert MemoryKeyring.priority < fail.Keyring.priority
    assert LockedKeyring.priority < fail.Keyring.priority
    detected = max(get_all_keyring(), key=lambda ring: ring.priority)
    assert not isinstance(detected, MemoryKeyring | LockedKeyring)
    assert not any(
        isinstance(r, MemoryKeyring | LockedKeyring) for r in chainer.ChainerBackend.backends
    )

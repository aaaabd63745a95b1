from __future__ import annotations

import sys
from collections.abc import Iterator

import keyring
import pytest
from fermix_core.keyring_backend import MemoryKeyring
from fermix_core.logs import forget_known_secrets


@pytest.fixture(autouse=True)
def _forget_redactions() -> Iterator[None]:
    """Resolving a secret teaches the log redactor its value; keep tests independent."""
    yield
    forget_known_secrets()


@pytest.fixture
def memory_keyring() -> MemoryKeyring:
    return MemoryKeyring()


@pytest.fixture
def default_keyring(memory_keyring: MemoryKeyring) -> Iterator[MemoryKeyring]:
    """Install a MemoryKeyring as keyring's process-wide backend, restoring the old one after."""
    previous = keyring.get_keyring()
    keyring.set_keyring(memory_keyring)
    yield memory_keyring
    keyring.set_keyring(previous)


@pytest.fixture
def py() -> str:
    return sys.executable

"""Both memory backends behind one interface, with history written the way the runtime writes it.

``memory_env`` runs a test once on the in-memory backend and once on SQLite. On SQLite,
history goes through a real :class:`ConversationStore` on the same ``memory.db`` — the
memory backend only ever reads what the store wrote.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.memory import InMemoryBackend, MemoryBackend
from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.messages import Message, Usage
from fermix_core.store import ConversationStore


@dataclass
class MemoryEnv:
    kind: str
    backend: MemoryBackend
    store: ConversationStore | None
    path: Path

    async def say(
        self, key: tuple[str, str, str | None], speaker: str, user: str, reply: str = ""
    ) -> None:
        """One turn in conversation *key*: the user's message and (optionally) the reply."""
        key = ConversationKey(*key)
        if self.store is None:
            assert isinstance(self.backend, InMemoryBackend)
            self.backend.add_message(key, "user", speaker, user)  # type: ignore[arg-type]
            if reply:
                self.backend.add_message(key, "assistant", speaker, reply)  # type: ignore[arg-type]
            return
        cid = await self.store.conversation_id(key)
        handle = await self.store.begin_turn(
            cid, Message.user(user), speaker=speaker, sender_id="someone", session_id="main-1"
        )
        if reply:
            await self.store.commit_turn(
                handle.turn_id, [Message.assistant(reply)], usage=Usage(), model="m", provider="p"
            )


async def open_env(kind: str, tmp_path: Path) -> MemoryEnv:
    path = tmp_path / "home" / "memory.db"
    if kind == "inmemory":
        return MemoryEnv(kind, InMemoryBackend(), None, path)
    store = await ConversationStore.open(path)
    backend = await SqliteMemoryBackend.open(path)
    return MemoryEnv(kind, backend, store, path)


@pytest.fixture(params=["inmemory", "sqlite"])
async def memory_env(request: Any, tmp_path: Path) -> AsyncIterator[MemoryEnv]:
    env = await open_env(request.param, tmp_path)
    try:
        yield env
    finally:
        await env.backend.aclose()
        if env.store is not None:
            await env.store.close()

"""A populated memory on both backends, and contexts for every kind of caller.

The world: an owner and a guest share a group chat (A); a guest has a DM (G); the owner
uses the CLI (B); scheduled job j1 has a run conversation (J); job j2 has none. Every fact
and every message mentions "zebra" and names itself, so one search shows exactly what a
caller can see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fermix_core.channel import ConversationKey
from fermix_core.memory import InMemoryBackend, MemoryBackend, Provenance
from fermix_core.memory.scope import JOB_ID_STATE_KEY
from fermix_core.memory.sqlite import SqliteMemoryBackend
from fermix_core.messages import Message, Usage
from fermix_core.store import ConversationStore
from fermix_core.tool import ToolContext, Trust

A = ConversationKey("telegram", "group", None)
G = ConversationKey("telegram", "dm-guest", None)
B = ConversationKey("cli", "default", None)
J = ConversationKey("job", "j1", None)

FACTS: dict[str, Provenance] = {
    "owner_A": Provenance(speaker="owner", conversation_key=A),
    "owner_B": Provenance(speaker="owner", conversation_key=B),
    "system": Provenance(speaker="system"),
    "guest_A": Provenance(speaker="guest", conversation_key=A),
    "guest_G": Provenance(speaker="guest", conversation_key=G),
    "job1": Provenance(speaker="job", job_id="j1", conversation_key=J),
    "job2": Provenance(speaker="job", job_id="j2"),
}
#: label -> (conversation, turn speaker)
HISTORY: dict[str, tuple[ConversationKey, str]] = {
    "owner_A": (A, "owner"),
    "guest_A": (A, "guest"),
    "guest_G": (G, "guest"),
    "owner_B": (B, "owner"),
    "job1": (J, "job"),
}


class Home:
    def __init__(self, path: Path) -> None:
        self.path = path


@dataclass
class World:
    backend: MemoryBackend
    home: Home
    fact_ids: dict[str, str] = field(default_factory=dict)
    message_ids: dict[int, str] = field(default_factory=dict)

    def context(self, caller: str, **services: Any) -> ToolContext:
        trust, key, origin, job = CALLERS[caller]
        return ToolContext(
            trust=trust,
            cwd=self.home.path,
            home=self.home,
            conversation_key=key,
            origin=origin,
            state={JOB_ID_STATE_KEY: job} if job else {},
            session_id="test",
            services={"memory": self.backend, **services},
        )

    def fact_labels(self, ids) -> set[str]:
        by_id = {v: k for k, v in self.fact_ids.items()}
        return {by_id[i] for i in ids}

    def message_labels(self, ids) -> set[str]:
        return {self.message_ids[i] for i in ids}


#: caller -> (trust, conversation, origin, job id)
CALLERS: dict[str, tuple[Trust, ConversationKey | None, str, str | None]] = {
    "operator_A": (Trust.OPERATOR, A, "main", None),
    "operator_none": (Trust.OPERATOR, None, "main", None),
    "subagent_A": (Trust.OPERATOR, A, "subagent", None),
    "guest_A": (Trust.GUEST, A, "main", None),
    "guest_G": (Trust.GUEST, G, "main", None),
    "job1": (Trust.OPERATOR, J, "job", "j1"),
    "guest_job2": (Trust.GUEST, None, "job", "j2"),
}


async def build_world(kind: str, tmp_path: Path) -> tuple[World, list[Any]]:
    home = Home(tmp_path / "home")
    home.path.mkdir()
    closers: list[Any] = []
    store = None
    if kind == "inmemory":
        backend: MemoryBackend = InMemoryBackend()
    else:
        store = await ConversationStore.open(home.path / "memory.db")
        backend = await SqliteMemoryBackend.open(home.path / "memory.db")
        closers.append(store.close)
    closers.append(backend.aclose)
    world = World(backend, home)
    for label, prov in FACTS.items():
        result = await backend.store("context", f"zebra fact {label}", provenance=prov)
        world.fact_ids[label] = result.fact.id
    for label, (key, speaker) in HISTORY.items():
        texts = (f"zebra said {label}", f"zebra reply {label}")
        if store is None:
            for role, text in zip(("user", "assistant"), texts, strict=True):
                message = backend.add_message(key, role, speaker, text)  # type: ignore[attr-defined]
                world.message_ids[message.id] = label
            continue
        cid = await store.conversation_id(key)
        handle = await store.begin_turn(
            cid, Message.user(texts[0]), speaker=speaker, sender_id="x", session_id="s"
        )
        ids = await store.commit_turn(
            handle.turn_id, [Message.assistant(texts[1])], usage=Usage(), model="m", provider="p"
        )
        world.message_ids[handle.user_message_id] = label
        world.message_ids[ids[0]] = label
    return world, closers


@pytest.fixture(params=["inmemory", "sqlite"])
async def world(request: Any, tmp_path: Path) -> AsyncIterator[World]:
    built, closers = await build_world(request.param, tmp_path)
    try:
        yield built
    finally:
        for close in reversed(closers):
            await close()

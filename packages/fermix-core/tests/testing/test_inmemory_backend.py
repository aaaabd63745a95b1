"""InMemoryBackend details beyond the shared contract (which test_contracts.py runs)."""

from __future__ import annotations

import pytest
from fermix_core.memory import (
    USER_CATEGORIES,
    WORK_CATEGORIES,
    InMemoryBackend,
    MemoryCategory,
    MemoryFact,
    MemoryStoreError,
    Provenance,
)
from pydantic import ValidationError

pytestmark = pytest.mark.anyio

OWNER = Provenance(speaker="owner")


def test_categories_split_between_user_and_work() -> None:
    assert {c.value for c in MemoryCategory} == {
        "identity",
        "preference",
        "interest",
        "goal",
        "context",
        "directive",
    }
    assert set(MemoryCategory) == USER_CATEGORIES | WORK_CATEGORIES
    assert not USER_CATEGORIES & WORK_CATEGORIES


def test_provenance_must_be_scoped_for_guests_and_jobs() -> None:
    with pytest.raises(ValidationError, match="conversation_key"):
        Provenance(speaker="guest")
    with pytest.raises(ValidationError, match="job_id"):
        Provenance(speaker="job")
    with pytest.raises(ValidationError):
        Provenance(speaker="stranger")  # type: ignore[arg-type]
    guest = Provenance(speaker="guest", conversation_key=("telegram", "42", None))
    assert guest.conversation_key == ("telegram", "42", None)
    assert Provenance(speaker="job", job_id="j1").job_id == "j1"


async def test_fact_json_round_trip() -> None:
    backend = InMemoryBackend()
    prov = Provenance(speaker="guest", conversation_key=("slack", "C1", "1700000000.1"))
    fact = (await backend.store("goal", "Ship v1", provenance=prov)).fact
    assert MemoryFact.model_validate_json(fact.model_dump_json()) == fact


async def test_update_records_the_new_writer() -> None:
    backend = InMemoryBackend()
    await backend.store("identity", "Name is Ana", key="user.name", provenance=OWNER)
    job = Provenance(speaker="job", job_id="nightly")
    updated = await backend.store("identity", "Name is Ana Lima", key="user.name", provenance=job)
    assert updated.fact.provenance == job
    assert updated.previous is not None
    assert updated.previous.provenance == OWNER


async def test_restore_refuses_when_its_key_was_taken() -> None:
    backend = InMemoryBackend()
    old = (
        await backend.store("context", "Deploys on Fridays", key="deploy.day", provenance=OWNER)
    ).fact
    await backend.forget(old.id)
    await backend.store("context", "Deploys on Mondays", key="deploy.day", provenance=OWNER)
    with pytest.raises(MemoryStoreError, match="now held by"):
        await backend.restore(old.id)


async def test_replace_refusals() -> None:
    backend = InMemoryBackend()
    a = (await backend.store("context", "A", key="k.a", provenance=OWNER)).fact
    b = (await backend.store("context", "B", key="k.b", provenance=OWNER)).fact
    with pytest.raises(MemoryStoreError, match="held by memory"):
        await backend.store("context", "B2", key="k.a", provenance=OWNER, replace_id=b.id)
    await backend.forget(a.id)
    with pytest.raises(MemoryStoreError, match="archived"):
        await backend.store("context", "A2", provenance=OWNER, replace_id=a.id)
    same = await backend.store("context", "B", provenance=OWNER, replace_id=b.id)
    assert same.action == "unchanged"


async def test_bad_arguments() -> None:
    backend = InMemoryBackend()
    with pytest.raises(MemoryStoreError, match="blank"):
        await backend.store("goal", "x", key="  ", provenance=OWNER)
    with pytest.raises(MemoryStoreError, match="provenance"):
        await backend.store("goal", "x", provenance={"speaker": "owner"})  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError, match="unknown memory category"):
        await backend.list(categories=["moods"])
    assert await backend.get_by_key("") is None
    assert await backend.search("x", limit=0) == []


async def test_single_category_string_filters() -> None:
    backend = InMemoryBackend()
    await backend.store("goal", "Learn Rust", provenance=OWNER)
    await backend.store("interest", "Rust belts", provenance=OWNER)
    hits = await backend.search("rust", categories="goal")
    assert [f.content for f in hits] == ["Learn Rust"]


async def test_aclose_marks_closed() -> None:
    backend = InMemoryBackend()
    await backend.aclose()
    assert backend.closed

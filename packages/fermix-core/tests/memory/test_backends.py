"""What both backends do beyond the shared contract: filters, batches, history, counts."""

from __future__ import annotations

import pytest
from fermix_core.memory import (
    AddOp,
    ArchiveOp,
    MemoryFilter,
    MemoryStoreError,
    Provenance,
    ReplaceOp,
)

pytestmark = pytest.mark.anyio

OWNER = Provenance(speaker="owner", conversation_key=("cli", "a", None))
SYSTEM = Provenance(speaker="system")
GUEST_A = Provenance(speaker="guest", conversation_key=("telegram", "a", None))
GUEST_B = Provenance(speaker="guest", conversation_key=("telegram", "b", None))
JOB_1 = Provenance(speaker="job", job_id="j1")
JOB_2 = Provenance(speaker="job", job_id="j2", conversation_key=("job", "j2", None))


async def seed(backend) -> dict[str, str]:
    ids = {}
    for name, prov in [
        ("owner", OWNER),
        ("system", SYSTEM),
        ("guest_a", GUEST_A),
        ("guest_b", GUEST_B),
        ("job_1", JOB_1),
        ("job_2", JOB_2),
    ]:
        result = await backend.store("context", f"zebra note from {name}", provenance=prov)
        ids[name] = result.fact.id
    return ids


@pytest.mark.parametrize(
    ("where", "visible"),
    [
        (None, {"owner", "system", "guest_a", "guest_b", "job_1", "job_2"}),
        (MemoryFilter(), {"owner", "system", "guest_a", "guest_b", "job_1", "job_2"}),
        (MemoryFilter(speakers=frozenset({"owner", "system"})), {"owner", "system"}),
        (
            MemoryFilter(speakers=frozenset({"guest"}), conversation_key=("telegram", "a", None)),
            {"guest_a"},
        ),
        (MemoryFilter(conversation_key=("cli", "a", None)), {"owner"}),
        (MemoryFilter(job_id="j2"), {"job_2"}),
        (MemoryFilter(job_id="nope"), set()),
        (MemoryFilter(empty=True), set()),
        (MemoryFilter(speakers=frozenset()), set()),
    ],
)
async def test_where_narrows_search_and_list(memory_env, where, visible) -> None:
    ids = await seed(memory_env.backend)
    expected = {ids[name] for name in visible}
    found = await memory_env.backend.search("zebra", limit=50, where=where)
    listed = await memory_env.backend.list(where=where)
    assert {f.id for f in found} == expected
    assert {f.id for f in listed} == expected


async def test_limit_counts_only_visible_facts(memory_env) -> None:
    backend = memory_env.backend
    for i in range(5):
        await backend.store("goal", f"zebra guest goal {i}", provenance=GUEST_B)
    mine = await backend.store("goal", "zebra owner goal", provenance=OWNER)
    found = await backend.search(
        "zebra", limit=1, where=MemoryFilter(speakers=frozenset({"owner"}))
    )
    assert [f.id for f in found] == [mine.fact.id]


async def test_repeats_are_detected_within_one_writers_memory(memory_env) -> None:
    backend = memory_env.backend
    owner = await backend.store("directive", "Deploy on Fridays", provenance=OWNER)
    again = await backend.store("directive", "deploy on  fridays", provenance=SYSTEM)
    assert again.action == "unchanged", "the owner's memory includes review's facts"
    job = await backend.store("directive", "Deploy on Fridays", provenance=JOB_1)
    assert job.action == "added", "a job keeps its own copy it can recall"
    assert job.fact.id != owner.fact.id
    guest_a = await backend.store("directive", "Deploy on Fridays", provenance=GUEST_A)
    guest_b = await backend.store("directive", "Deploy on Fridays", provenance=GUEST_B)
    assert guest_a.action == guest_b.action == "added"
    assert (await backend.store("directive", "Deploy on Fridays", provenance=GUEST_A)).action == (
        "unchanged"
    )


async def test_apply_batch_applies_every_op_in_order(memory_env) -> None:
    backend = memory_env.backend
    old = (await backend.store("identity", "Lives in Lisbon", provenance=OWNER)).fact
    gone = (await backend.store("interest", "Collects stamps", provenance=OWNER)).fact
    results = await backend.apply_batch(
        [
            AddOp(category="goal", content="Run a marathon"),
            ReplaceOp(id=old.id, category="identity", content="Lives in Porto"),
            ArchiveOp(id=gone.id),
        ],
        provenance=SYSTEM,
    )
    assert [r if isinstance(r, bool) else r.action for r in results] == [
        "added",
        "replaced",
        True,
    ]
    live = {f.content for f in await backend.list()}
    assert live == {"Run a marathon", "Lives in Porto"}
    added = results[0]
    assert added.fact.provenance.speaker == "system"


async def test_apply_batch_is_all_or_nothing(memory_env) -> None:
    backend = memory_env.backend
    keep = (await backend.store("identity", "Lives in Lisbon", provenance=OWNER)).fact
    with pytest.raises(MemoryStoreError):
        await backend.apply_batch(
            [
                AddOp(category="goal", content="Learn the cello"),
                ArchiveOp(id=keep.id),
                ReplaceOp(id="999999", category="goal", content="x"),
            ],
            provenance=SYSTEM,
        )
    facts = await backend.list(include_archived=True)
    assert [(f.id, f.archived) for f in facts] == [(keep.id, False)]
    assert await backend.search("cello") == []


async def test_history_search_and_filters(memory_env) -> None:
    await memory_env.say(("cli", "a", None), "owner", "the zebra crossing is closed", "noted")
    await memory_env.say(("telegram", "g", None), "guest", "my zebra is called Ziggy", "nice")
    await memory_env.say(("job", "j1", None), "job", "zebra report ready", "")
    backend = memory_env.backend
    assert backend.history_available
    everything = await backend.search_history("zebra")
    assert {m.text for m in everything} == {
        "the zebra crossing is closed",
        "my zebra is called Ziggy",
        "zebra report ready",
    }
    owner = await backend.search_history("zebra", where=MemoryFilter(speakers=frozenset({"owner"})))
    assert [m.text for m in owner] == ["the zebra crossing is closed"]
    assert owner[0].conversation_key == ("cli", "a", None)
    assert owner[0].role == "user"
    guest = await backend.search_history(
        "zebra ziggy",
        where=MemoryFilter(speakers=frozenset({"guest"}), conversation_key=("telegram", "g", None)),
    )
    assert [m.text for m in guest] == ["my zebra is called Ziggy"]
    assert await backend.search_history("zebra", where=MemoryFilter(empty=True)) == []
    assert await backend.search_history("zebra", where=MemoryFilter(job_id="j1")) == []
    assert await backend.search_history("   ") == []
    assert [m.text for m in await backend.search_history("noted")] == ["noted"]


async def test_recent_messages_are_owner_only_and_after_the_watermark(memory_env) -> None:
    await memory_env.say(("cli", "a", None), "owner", "first owner message", "reply one")
    await memory_env.say(("telegram", "g", None), "guest", "guest secret message", "reply two")
    await memory_env.say(("cli", "b", None), "owner", "second owner message", "")
    backend = memory_env.backend
    rows = await backend.recent_messages()
    assert [m.text for m in rows] == ["first owner message", "reply one", "second owner message"]
    assert all(m.speaker == "owner" for m in rows)
    later = await backend.recent_messages(after_id=rows[1].id)
    assert [m.text for m in later] == ["second owner message"]
    newest = await backend.recent_messages(limit=1)
    assert [m.text for m in newest] == ["second owner message"]
    assert await backend.recent_messages(after_id=rows[-1].id) == []


async def test_describe_counts_visible_facts(memory_env) -> None:
    ids = await seed(memory_env.backend)
    await memory_env.backend.forget(ids["owner"])
    report = await memory_env.backend.describe()
    assert report["active"] == 5
    assert report["archived"] == 1
    assert report["by_category"]["context"] == 5
    owner_only = await memory_env.backend.describe(
        where=MemoryFilter(speakers=frozenset({"owner", "system"}))
    )
    assert owner_only["active"] == 1
    assert owner_only["archived"] == 1

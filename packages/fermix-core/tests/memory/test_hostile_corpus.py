"""The hostile-input corpus (``tests/hostile/memory_*.json``) against memory.

Injection samples are stored, recalled and fenced: the fence must hold, every expected
marker must be flagged, and the text must still be there as data. Hostile query strings
must never make a search raise, on either backend, for facts or history.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fermix_core.memory import Provenance
from fermix_core.memory.fence import FENCE_CLOSE, FENCE_OPEN, fence_memory, scan

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).resolve().parents[4] / "tests" / "hostile"
INJECTIONS = json.loads((CORPUS / "memory_injection.json").read_text("utf-8"))
QUERIES = json.loads((CORPUS / "memory_queries.json").read_text("utf-8"))
_WORD = re.compile(r"[A-Za-z]{4,}")


def test_corpus_is_present_and_varied() -> None:
    assert len(INJECTIONS) >= 20
    assert any(not s["markers"] for s in INJECTIONS), "benign controls are part of the corpus"
    assert len(QUERIES) >= 40


@pytest.mark.parametrize("sample", INJECTIONS, ids=[s["name"] for s in INJECTIONS])
def test_scan_finds_exactly_the_expected_markers(sample) -> None:
    assert sorted(scan(sample["text"])) == sorted(sample["markers"])


@pytest.mark.parametrize("sample", INJECTIONS, ids=[s["name"] for s in INJECTIONS])
async def test_stored_then_recalled_sample_stays_fenced_data(memory_env, sample) -> None:
    backend = memory_env.backend
    stored = await backend.store("context", sample["text"], provenance=Provenance(speaker="owner"))
    assert stored.action == "added"
    kept = await backend.get(stored.fact.id)
    assert kept is not None and kept.content == sample["text"].strip(), "memory keeps the data"
    fenced = fence_memory([kept])
    assert fenced.startswith(FENCE_OPEN + "\n") and fenced.endswith("\n" + FENCE_CLOSE)
    inside = fenced[len(FENCE_OPEN) : -len(FENCE_CLOSE)]
    structural = {"fence_tag", "fake_tag", "special_token"}
    assert not structural & set(scan(inside)), "no live tag survives inside the fence"
    assert len(inside.strip().splitlines()) == 2, "preamble plus one line per item"
    flagged = {m for f in fenced.flags for m in f.markers}
    assert flagged == set(sample["markers"])
    words = _WORD.findall(sample["text"])
    if words:  # still searchable as the data it is
        hits = await backend.search(words[-1])
        assert stored.fact.id in {f.id for f in hits}


@pytest.mark.parametrize("query", QUERIES)
async def test_hostile_queries_never_raise(memory_env, query: str) -> None:
    backend = memory_env.backend
    await backend.store("preference", "Prefers green tea", provenance=Provenance(speaker="owner"))
    await memory_env.say(("cli", "q", None), "owner", "we talked about tea", "yes, tea")
    facts = await backend.search(query, limit=5)
    history = await backend.search_history(query, limit=5)
    archived = await backend.search(query, include_archived=True, categories=["preference"])
    assert isinstance(facts, list) and isinstance(history, list) and isinstance(archived, list)
    assert len(facts) <= 5 and len(history) <= 5

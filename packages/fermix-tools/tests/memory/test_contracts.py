"""Every memory tool passes the shared tool contract, with a memory service in its context."""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.memory import InMemoryBackend, Provenance
from fermix_core.testing import ToolContract
from fermix_core.tool import build_tool
from fermix_tools.memory.plugin import (
    MEMORY_FORGET,
    MEMORY_RECALL,
    MEMORY_SOURCES_LIST,
    MEMORY_STORE,
)


class WithMemory:
    """Supplies ``services={"memory": ...}`` holding one owner fact with id "1"."""

    @pytest.fixture(autouse=True)
    async def _memory(self) -> None:
        self.backend = InMemoryBackend()
        stored = await self.backend.store(
            "preference", "Likes green tea", provenance=Provenance(speaker="owner")
        )
        assert stored.fact.id == "1"

    def make_context(self, tmp_path: Path):
        ctx = super().make_context(tmp_path)  # type: ignore[misc]
        ctx.services = {"memory": self.backend}
        return ctx


class TestMemoryStoreContract(WithMemory, ToolContract):
    valid_args = {"category": "preference", "content": "Prefers window seats"}
    invalid_args = {"category": "mood", "content": "Happy"}
    invalid_field = "category"

    def make_tool(self):
        return build_tool(MEMORY_STORE)


class TestMemoryForgetContract(WithMemory, ToolContract):
    valid_args = {"id": "1"}
    invalid_args = {"id": ""}
    invalid_field = "id"

    def make_tool(self):
        return build_tool(MEMORY_FORGET)


class TestMemoryRecallContract(WithMemory, ToolContract):
    valid_args = {"query": "tea"}
    invalid_args = {"query": "tea", "limit": 0}
    invalid_field = "limit"

    def make_tool(self):
        return build_tool(MEMORY_RECALL)


class TestMemorySourcesListContract(WithMemory, ToolContract):
    valid_args = {}
    invalid_args = {"verbose": True}
    invalid_field = "verbose"

    def make_tool(self):
        return build_tool(MEMORY_SOURCES_LIST)

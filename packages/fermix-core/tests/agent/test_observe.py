"""The agent loop's Observer over a real JSONL tracer: records, spans, failures, cancellation."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.agent.observe import Observer
from fermix_core.traces import Span, Tracer

pytestmark = pytest.mark.anyio


def lines(home: Path, kind: str) -> list[dict[str, Any]]:
    files = sorted((home / "traces").glob(f"*/{kind}.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


async def test_records_go_through_record_fields_with_the_fields_in_order(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any], str]] = []

    class MappingTracer:
        def record_fields(self, kind: str, fields: dict[str, Any], *, session_id: str) -> None:
            seen.append((kind, fields, session_id))

        def record(self, *a: Any, **k: Any) -> None:
            raise AssertionError("record_fields is preferred when the tracer has it")

    Observer(None, MappingTracer()).record("llm_call", session_id="main-1", b=2, a=1)
    assert seen == [("llm_call", {"b": 2, "a": 1}, "main-1")]
    assert list(seen[0][1]) == ["b", "a"]

    tracer = Tracer(tmp_path, capture_content=False)
    Observer(None, tracer).record("llm_call", session_id="main-2", status="ok", output="hi")
    tracer.close()
    (line,) = (tmp_path / "traces").glob("*/llm_call.jsonl")
    record = json.loads(line.read_text())
    assert list(record) == ["ts", "type", "session_id", "status", "output"]
    assert record["output"] == {"omitted": True, "chars": 2}


async def test_a_record_only_tracer_still_gets_keywords() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    class KeywordTracer:
        def record(self, kind: str, **fields: Any) -> None:
            seen.append((kind, fields))

    observe = Observer(None, KeywordTracer())
    observe.record("agent_event", session_id="s", event="turn_start")
    assert seen == [("agent_event", {"session_id": "s", "event": "turn_start"})]
    Observer(None, None).record("agent_event", session_id="s", event="ignored")
    Observer(None, object()).record("agent_event", session_id="s", event="ignored")
    async with Observer(None, object()).span("tool_exec", "x", session_id="s") as handle:
        assert handle is None


async def test_a_failing_body_propagates_untouched_and_its_span_says_error(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path, capture_content=False)
    observe = Observer(None, tracer)
    boom = KeyError("boom")
    handles: list[Any] = []

    async def failing_tool() -> None:
        async with observe.span("tool_exec", "shell", session_id="main-3", call_id="c1") as span:
            handles.append(span)
            observe.annotate(span, ok=False)
            raise boom

    with pytest.raises(KeyError) as raised:
        await failing_tool()
    assert raised.value is boom and isinstance(handles[0], Span)
    async with observe.span("tool_exec", "read_file", session_id="main-3") as span:
        observe.annotate(span, ok=True, result="file text")
    tracer.close()
    failed, ok = lines(tmp_path, "tool_exec")
    assert failed["name"] == "shell" and failed["status"] == "error"
    assert failed["call_id"] == "c1" and failed["ok"] is False
    assert failed["error"] == {"type": "KeyError", "message": "'boom'"}
    assert ok["status"] == "ok" and ok["result"] == {"omitted": True, "chars": 9}
    assert ok["span_id"] != failed["span_id"]


async def test_a_cancelled_body_still_closes_its_span_and_stays_cancelled(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path, capture_content=False)
    observe = Observer(None, tracer)
    reached_after = False
    with anyio.CancelScope() as scope:
        async with observe.span("tool_exec", "web_fetch", session_id="main-4"):
            scope.cancel()
            await anyio.sleep_forever()
        reached_after = True
    assert scope.cancelled_caught and not reached_after
    tracer.close()
    (span,) = lines(tmp_path, "tool_exec")
    assert span["status"] == "cancelled" and span["name"] == "web_fetch"


async def test_broken_span_managers_leave_the_body_running(caplog) -> None:
    class OpensBadly:
        def span(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("trace store is down")

    class ClosesBadly:
        class Manager:
            async def __aenter__(self) -> str:
                return "handle"

            async def __aexit__(self, *exc: object) -> bool:
                raise RuntimeError("cannot close")

        def span(self, *a: Any, **k: Any) -> Any:
            return self.Manager()

    ran = []
    with caplog.at_level(logging.ERROR, logger="fermix.agent"):
        async with Observer(None, OpensBadly()).span("tool_exec", "a", session_id="s") as h:
            ran.append(h)
        async with Observer(None, ClosesBadly()).span("tool_exec", "b", session_id="s") as h:
            ran.append(h)
        with pytest.raises(ValueError, match="the body's own"):
            async with Observer(None, ClosesBadly()).span("tool_exec", "c", session_id="s"):
                raise ValueError("the body's own")
    assert ran == [None, "handle"]
    assert "trace span tool_exec(a) could not be opened" in caplog.text
    assert caplog.text.count("trace span could not be closed") == 2


def test_span_ids_differ_between_a_parent_and_its_forked_child(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path, capture_content=False)
    ids = {tracer.span("tool_exec", "x").span_id for _ in range(1000)}
    assert len(ids) == 1000
    if not hasattr(os, "fork"):
        pytest.skip("no fork() on this platform")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        try:
            os.write(write, tracer.span("tool_exec", "x").span_id.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    os.waitpid(pid, 0)
    parent = tracer.span("tool_exec", "x").span_id
    assert len(child) == 16 and child != parent, "a forked child draws its own ids"

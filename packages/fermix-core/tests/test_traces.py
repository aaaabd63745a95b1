"""JSONL traces on a real FERMIX_HOME: layout, modes, capture rules, spans, failures."""

from __future__ import annotations

import json
import re
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from fermix_core.home import FermixHome
from fermix_core.messages import ImagePart, Message
from fermix_core.traces import (
    CONTENT_ENV,
    MAX_FIELD_CHARS,
    OPIK_ENV,
    TRACE_TYPES,
    Body,
    Tracer,
    content_capture_from_env,
    cron_session_id,
    main_session_id,
    subagent_session_id,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SECRET_TEXT = "my bank PIN is 4921 and the meeting is about the merger"


def today_dir(home: FermixHome) -> Path:
    return home.traces / datetime.now(UTC).strftime("%Y-%m-%d")


def lines(home: FermixHome, trace_type: str) -> list[dict]:
    path = today_dir(home) / f"{trace_type}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def home(tmp_path: Path) -> FermixHome:
    return FermixHome(tmp_path / "fermix")


def test_every_type_lands_in_its_own_private_file(home: FermixHome) -> None:
    with Tracer(home, capture_content=False) as tracer:
        for trace_type in TRACE_TYPES:
            tracer.record(trace_type, session_id="main-1", n=1)
    directory = today_dir(home)
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{t}.jsonl" for t in TRACE_TYPES)
    assert stat.S_IMODE(home.traces.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record = lines(home, "llm_call")[0]
    assert record["type"] == "llm_call" and record["session_id"] == "main-1" and record["n"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"])


def test_capture_off_keeps_records_body_free_and_bounded(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    messages = [Message.user(SECRET_TEXT), Message.assistant("sure")]
    tracer.record(
        "llm_call",
        session_id="main-2",
        model="gpt-x",
        input_tokens=120,
        messages=messages,
        output=SECRET_TEXT,
        query=Body(SECRET_TEXT),
        note="x" * (MAX_FIELD_CHARS + 50),
        nested={"arguments": {"q": SECRET_TEXT}, "count": 3, "deep": [[[[["end"]]]]]},
        many=list(range(100)),
    )
    tracer.close()
    raw = (today_dir(home) / "llm_call.jsonl").read_text()
    assert SECRET_TEXT not in raw and "4921" not in raw
    record = json.loads(raw)
    assert record["model"] == "gpt-x" and record["input_tokens"] == 120
    assert record["messages"]["omitted"] is True and record["messages"]["items"] == 2
    assert record["messages"]["chars"] >= len(SECRET_TEXT) + len("sure")
    assert record["output"] == {"omitted": True, "chars": len(SECRET_TEXT)}
    assert record["query"] == {"omitted": True, "chars": len(SECRET_TEXT)}
    assert record["note"].startswith("x" * MAX_FIELD_CHARS) and record["note"].endswith(
        "[+50 chars]"
    )
    assert record["nested"]["arguments"]["omitted"] is True
    assert record["nested"]["count"] == 3
    assert len(record["many"]) == 33 and record["many"][-1] == "…+68 items"


def test_sizes_count_image_bytes_without_encoding_them(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    photo = ImagePart(media_type="image/jpeg", data=b"\xff" * 300_000)
    tracer.record("llm_call", messages=[Message.user("look", photo)])
    tracer.close()
    record = lines(home, "llm_call")[0]
    assert 300_000 <= record["messages"]["chars"] < 300_100, "bytes, not base64 characters"
    raw = (today_dir(home) / "llm_call.jsonl").read_text()
    assert len(raw) < 500 and "/////" not in raw


def test_capture_on_writes_whole_bodies_without_truncation(home: FermixHome) -> None:
    long_text = "paragraph " * 1000  # 10k chars: far past any truncation limit
    image = ImagePart(media_type="image/png", data=b"\x89PNG-bytes")
    tracer = Tracer(home, capture_content=True)
    tracer.record(
        "llm_call",
        session_id="main-3",
        messages=[Message.user(long_text, image)],
        output=long_text,
        note="y" * 5000,
    )
    tracer.close()
    record = lines(home, "llm_call")[0]
    assert record["output"] == long_text
    assert record["note"] == "y" * 5000
    sent = Message.model_validate(record["messages"][0])
    assert sent.text == long_text and sent.images[0].data == b"\x89PNG-bytes"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({CONTENT_ENV: "1"}, True),
        ({CONTENT_ENV: "0"}, False),
        ({OPIK_ENV: "1"}, True),
        ({OPIK_ENV: "1", CONTENT_ENV: "0"}, False),
        ({CONTENT_ENV: "maybe"}, False),
    ],
)
def test_capture_switch_follows_the_environment(env: dict[str, str], expected: bool) -> None:
    assert content_capture_from_env(env) is expected


def test_tracer_reads_the_environment_when_not_told(
    home: FermixHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(OPIK_ENV, raising=False)
    monkeypatch.setenv(CONTENT_ENV, "1")
    assert Tracer(home).capture_content is True
    monkeypatch.setenv(CONTENT_ENV, "0")
    assert Tracer(home).capture_content is False
    assert Tracer(home, capture_content=True).capture_content is True


def test_sync_span_records_duration_status_and_propagates_errors(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    with tracer.span("tool_exec", "read_file", session_id="main-4", path_count=1) as span:
        span.set(result=SECRET_TEXT, bytes_read=42)
    with pytest.raises(KeyError), tracer.span("tool_exec", "shell", session_id="main-4"):
        raise KeyError("boom")
    ok, failed = lines(home, "tool_exec")
    assert ok["name"] == "read_file", "a tool span is named exactly after the tool"
    assert ok["status"] == "ok" and ok["duration_ms"] >= 0 and ok["bytes_read"] == 42
    assert ok["result"] == {"omitted": True, "chars": len(SECRET_TEXT)}
    assert ok["parent_span_id"] is None and re.fullmatch(r"[0-9a-f]{16}", ok["span_id"])
    assert failed["name"] == "shell" and failed["status"] == "error"
    assert failed["error"] == {"type": "KeyError", "message": "'boom'"}


@pytest.mark.anyio
async def test_async_spans_nest_and_record_cancellation(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    async with tracer.span("agent_event", "turn", session_id="main-5") as outer:
        async with tracer.span("llm_call", "initial", session_id="main-5") as inner:
            await anyio.lowlevel.checkpoint()
        with anyio.CancelScope() as scope:
            async with tracer.span("tool_exec", "web_fetch", session_id="main-5"):
                scope.cancel()
                await anyio.lowlevel.checkpoint()
    llm = lines(home, "llm_call")[0]
    turn = lines(home, "agent_event")[0]
    tool = lines(home, "tool_exec")[0]
    assert llm["span_id"] == inner.span_id and llm["parent_span_id"] == outer.span_id
    assert turn["parent_span_id"] is None
    assert tool["parent_span_id"] == outer.span_id and tool["status"] == "cancelled"


def test_span_fields_cannot_clobber_its_own_keys(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    with tracer.span("agent_event", "turn", session_id="main-6") as span:
        span.set(status="mine", session_id="other", ts="bogus")
    record = lines(home, "agent_event")[0]
    assert record["status"] == "ok" and record["session_id"] == "main-6"
    assert record["ts"] != "bogus" and record["field_ts"] == "bogus"


def test_write_failures_never_raise_and_are_logged_once(
    home: FermixHome, caplog: pytest.LogCaptureFixture
) -> None:
    home.ensure()
    home.traces.write_text("a file where the directory should be")
    tracer = Tracer(home, capture_content=False)
    with caplog.at_level("WARNING", logger="fermix.traces"):
        for _ in range(5):
            tracer.record("error", session_id="main-7", n=1)
        with tracer.span("tool_exec", "shell"):
            pass
        tracer.record("not_a_type", n=1)
        tracer.record("not_a_type", n=2)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("'error'" in m for m in messages) == 1
    assert sum("'tool_exec'" in m for m in messages) == 1
    assert sum("unknown trace type" in m for m in messages) == 1


def test_unserializable_values_still_produce_a_line(home: FermixHome) -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    tracer = Tracer(home, capture_content=True)
    tracer.record("agent_event", thing=Odd(), blob=b"\x00\x01", path=Path("/x"), items={1, 2})
    tracer.close()
    record = lines(home, "agent_event")[0]
    assert record["thing"] == "<odd>" and record["blob"] == {"bytes": 2}
    assert record["path"] == "/x" and sorted(record["items"]) == [1, 2]


def test_concurrent_writers_never_interleave_lines(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=True)
    payload = "z" * 20_000  # far above any atomic-pipe-write size

    def writer(n: int) -> None:
        for i in range(25):
            tracer.record("channel_msg", session_id=f"w{n}", i=i, text=payload)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = lines(home, "channel_msg")
    assert len(records) == 100
    assert all(r["text"] == payload for r in records)


def test_a_second_tracer_appends_to_the_same_file(home: FermixHome) -> None:
    Tracer(home, capture_content=False).record("sandbox_event", decision="deny")
    Tracer(home, capture_content=False).record("sandbox_event", decision="allow")
    assert [r["decision"] for r in lines(home, "sandbox_event")] == ["deny", "allow"]


def test_error_records_carry_type_message_and_kind(home: FermixHome) -> None:
    class Classified(Exception):
        kind = "rate_limit"

    tracer = Tracer(home, capture_content=False)
    tracer.error(Classified("slow down" + "!" * 1000), session_id="cron_digest_1700000000")
    record = lines(home, "error")[0]
    assert record["error"]["type"] == "Classified" and record["error"]["kind"] == "rate_limit"
    assert len(record["error"]["message"]) <= 501
    assert record["session_id"] == "cron_digest_1700000000"


def test_session_id_shapes() -> None:
    assert main_session_id(12) == "main-12"
    sub = subagent_session_id()
    assert re.fullmatch(r"[0-9a-f]{16}", sub) and sub != subagent_session_id()
    assert cron_session_id("digest", 1700000000.9) == "cron_digest_1700000000"
    assert re.fullmatch(r"cron_daily_\d+", cron_session_id("daily"))


# --------------------------------------------------------------------------- secrets


TOKEN_CORPUS = json.loads((Path(__file__).parent / "data" / "token_corpus.json").read_text())
SHAPED = [entry["token"] for entry in TOKEN_CORPUS["positive"]]
PLAIN_KEY = 'k3y"with\\quote-9x7'


@pytest.fixture
def known_key():
    from fermix_core import logs

    logs.forget_known_secrets()
    logs.add_known_secret(PLAIN_KEY)
    yield PLAIN_KEY
    logs.forget_known_secrets()


def _raw(home: FermixHome) -> str:
    return "".join(p.read_text() for p in today_dir(home).glob("*.jsonl"))


@pytest.mark.parametrize("capture", [False, True], ids=["capture-off", "capture-on"])
def test_no_record_carries_a_secret(home: FermixHome, known_key: str, capture: bool) -> None:
    from fermix_core.provider import ErrorKind, ProviderError

    leak = f"echo {known_key} " + " ".join(SHAPED)
    with Tracer(home, capture_content=capture) as tracer:
        tracer.error(ProviderError(ErrorKind.SERVER_ERROR, leak, provider="p"), session_id="s")
        tracer.record("llm_call", session_id="s", request=Message.user(leak), note=leak)
        tracer.record("tool_exec", session_id="s", args={"header": leak, leak: 1})
        # A key straddling the cut of a long field: the cut must never keep half of it.
        tracer.record("agent_event", session_id="s", detail="x" * (MAX_FIELD_CHARS - 10) + leak)
    raw = _raw(home)
    for secret in (known_key, *SHAPED):
        assert secret not in raw
        assert secret[:12] not in raw
    assert json.dumps(known_key)[1:-1] not in raw, "the JSON spelling is caught too"
    for line in raw.splitlines():
        json.loads(line)
    assert "[REDACTED:secret]" in raw


# --------------------------------------------------------------------------- line format


def reference_line(tracer: Tracer, trace_type: str, now: float, session_id, fields) -> bytes:
    """A record built as one dict and encoded whole: the format the traces have always had."""
    from fermix_core import traces

    second = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    record = {"ts": f"{second}.{int((now % 1) * 1000):03d}Z", "type": trace_type}
    if session_id is not None:
        record["session_id"] = session_id
    for key, value in fields.items():
        if key in record:
            key = f"field_{key}"
        if tracer.capture_content:
            record[key] = traces._plain(value)
        elif key in traces.CONTENT_FIELDS or isinstance(value, Body):
            record[key] = traces._size(value)
        else:
            record[key] = traces._bounded(value)
    return (traces._ENCODER.encode(record) + "\n").encode("utf-8", "replace")


_texts = st.one_of(
    st.sampled_from(["", "ok", "turn_start", "gpt-x", "naïve ☃ 🙂", 'q"uo\\te\n\t\x00', "x" * 300]),
    st.sampled_from([*SHAPED, f"key {PLAIN_KEY} here", "\ud800 lone surrogate"]),
    st.text(max_size=40),
    st.text(st.characters(codec="utf-8"), min_size=120, max_size=300),
)
_scalars = st.one_of(
    _texts,
    st.integers(),
    st.floats(),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0, 1e300, True, False, None]),
)
_values = st.recursive(
    st.one_of(_scalars, st.builds(Body, _scalars), st.binary(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=40),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_texts, st.sampled_from(["text", "result"])), inner, max_size=5),
    ),
    max_leaves=12,
)
_names = st.one_of(
    st.sampled_from(
        [
            *("ts", "type", "session_id", "field_ts", "field_type", "field_session_id"),
            *("text", "output", "arguments", "model", "tool_calls", "duration_ms"),
        ]
    ),
    st.text(min_size=1, max_size=12),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trace_type=st.sampled_from(TRACE_TYPES),
    now=st.floats(min_value=0, max_value=4e9),
    session_id=st.one_of(st.none(), _texts, st.integers()),
    fields=st.dictionaries(_names, _values, max_size=8),
    capture=st.booleans(),
)
def test_lines_are_byte_identical_to_encoding_the_record_whole(
    tmp_path_factory: pytest.TempPathFactory,
    trace_type: str,
    now: float,
    session_id,
    fields: dict,
    capture: bool,
) -> None:
    from fermix_core import logs

    logs.add_known_secret(PLAIN_KEY)
    try:
        tracer = Tracer(tmp_path_factory.getbasetemp() / "unused", capture_content=capture)
        expected = reference_line(tracer, trace_type, now, session_id, fields)
        assert tracer._line(trace_type, now, session_id, fields) == expected
        assert tracer._line(trace_type, now, session_id, fields) == expected, "memoised alike"
    finally:
        logs.forget_known_secrets()


def test_the_common_field_shapes_are_written_as_before(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    now = 1_767_225_600.0625  # 2026-01-01T00:00:00.062Z
    fields = {
        "direction": "inbound",
        "text": Body("hello"),
        "output": "a reply",
        "result": 7,  # a content field holding a number: still only its size
        "attachments": 0,
        "initial": True,
        "iterations": None,
        "duration_ms": 0.1,
        "ratio": float("nan"),
        "ts": "mine",
        "field_ts": "theirs",
    }
    line = tracer._line("channel_msg", now, "main-1", fields)
    assert line == (
        b'{"ts":"2026-01-01T00:00:00.062Z","type":"channel_msg","session_id":"main-1",'
        b'"direction":"inbound","text":{"omitted":true,"chars":5},'
        b'"output":{"omitted":true,"chars":7},"result":{"omitted":true,"chars":0},'
        b'"attachments":0,"initial":true,"iterations":null,"duration_ms":0.1,"ratio":NaN,'
        b'"field_ts":"mine","field_field_ts":"theirs"}\n'
    )
    assert line == reference_line(tracer, "channel_msg", now, "main-1", fields)


def test_a_secret_learnt_later_is_redacted_from_a_field_written_before(home: FermixHome) -> None:
    from fermix_core import logs

    value = "Lp3vN8qZ2wX5rT9yB4mK7cH1jF6dG0sQ"
    logs.forget_known_secrets()
    try:
        with Tracer(home, capture_content=False) as tracer:
            tracer.record("agent_event", session_id="s", event=f"auth {value}")
            logs.add_known_secret(value)
            tracer.record("agent_event", session_id="s", event=f"auth {value}")
    finally:
        logs.forget_known_secrets()
    first, second = lines(home, "agent_event")
    assert first["event"] == f"auth {value}", "not a secret yet when it was written"
    assert second["event"] == "auth [REDACTED:secret]"


def test_a_span_line_is_the_record_encoded_whole_with_its_ids_as_made(home: FermixHome) -> None:
    """Span ids skip the redactor (random hex made here); the line is otherwise unchanged,
    capture on and off, with a known secret that is itself lowercase hex."""
    from fermix_core import logs, traces

    logs.add_known_secret("0123456789abcdef0123")
    try:
        for capture in (False, True):
            tracer = Tracer(home, capture_content=capture)
            outer = tracer.span("agent_event", "turn", session_id="main-7")
            inner = tracer.span(
                "tool_exec", "read_file", session_id="main-7", arguments={"path": "a.txt"}
            )
            with outer, inner:
                inner.set(ok=True, result=["x", "yz"])
            tool = (today_dir(home) / "tool_exec.jsonl").read_text().splitlines()[-1]
            record = json.loads(tool)
            assert record["span_id"] == inner.span_id
            assert record["parent_span_id"] == outer.span_id
            stamp = datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
            now = stamp.timestamp() + 0.0004  # inside the written millisecond
            fields = {k: v for k, v in record.items() if k not in ("ts", "type", "session_id")}
            fields["arguments"] = {"path": "a.txt"}
            fields["result"] = ["x", "yz"]
            expected = reference_line(tracer, "tool_exec", now, "main-7", fields)
            assert tool.encode() + b"\n" == expected
            if not capture:
                assert record["arguments"] == {"omitted": True, "chars": 5}
                assert record["result"] == {"omitted": True, "items": 2, "chars": 3}
            assert traces._QUOTED.get(inner.span_id) is None, "a fresh id is not remembered"
    finally:
        logs.forget_known_secrets()


def test_container_bodies_are_spelled_as_their_shape(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    now = 1_767_225_600.5
    fields = {
        "arguments": {"path": "notes.txt", "lines": [1, 2], "deep": {"q": "abc"}},
        "result": ("a", b"\x00\x01", 3),
        "output": Body([{"text": "hi"}]),
        "text": Body({"k": "v"}),
        "messages": [],
        "content": {},
    }
    line = tracer._line("llm_call", now, None, fields)
    assert line == reference_line(tracer, "llm_call", now, None, fields)
    assert json.loads(line)["arguments"] == {"omitted": True, "chars": 12}
    assert json.loads(line)["result"] == {"omitted": True, "items": 3, "chars": 3}
    assert json.loads(line)["messages"] == {"omitted": True, "items": 0, "chars": 0}


def test_records_of_interleaved_sessions_keep_their_own_ids(home: FermixHome) -> None:
    tracer = Tracer(home, capture_content=False)
    order = ["main-1", "main-2", "main-2", 7, "main-1", None, "main-1"]
    for n, session_id in enumerate(order):
        tracer.record("agent_event", session_id=session_id, event="e", n=n)
    written = lines(home, "agent_event")
    assert [r.get("session_id") for r in written] == order
    assert [r["n"] for r in written] == list(range(len(order)))

"""What writing one trace record costs, and the redactor's share of it.

Every string of a record passes through the log redactor (vendor token shapes plus the
configured secrets' exact values) before it is written, capture on or off. Cases:

- ``llm_call_capture_off`` — a typical model-call record (ids, counts, a usage dict, a
  20-message history as a content field, so only its size is kept);
- ``llm_call_capture_on`` — the same record with the history written whole;
- ``error_record`` — a provider error whose 2 KB body echoes a key;
- ``redact_4kb`` — the redactor alone over 4 KB of ordinary text, with 5 known secrets;
- ``turn_mix`` — the five records a minimal text turn writes, with the fields the turn
  runner and the agent loop pass (``channel_msg`` in, ``agent_event`` turn_start, an
  ``llm_call`` through the agent loop's ``Observer``, ``channel_msg`` out, ``agent_event``
  turn_commit): wall time per turn, and CPU per turn (``time.process_time`` over all of
  them; the process-wide CPU clock, so it counts the ``write(2)`` calls too);
- ``tool_span`` — one ``tool_exec`` span opened and closed through the ``Observer``, as
  the agent loop runs a tool.

Numbers are per record (per turn, per span), in microseconds, on whatever else the machine
is doing.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

RECORDS = 2000


def _stats(samples_s: list[float]) -> dict[str, float]:
    us = sorted(s * 1e6 for s in samples_s)
    return {
        "n": len(us),
        "p50_us": round(statistics.median(us), 1),
        "p99_us": round(us[int(0.99 * (len(us) - 1))], 1),
        "min_us": round(us[0], 1),
    }


def _time(fn: Any, n: int = RECORDS) -> dict[str, float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return _stats(samples)


def run() -> dict[str, Any]:
    from fermix_core import logs
    from fermix_core.home import FermixHome
    from fermix_core.messages import Message
    from fermix_core.provider import ErrorKind, ProviderError
    from fermix_core.traces import Tracer

    for n in range(5):
        logs.add_known_secret(f"configured-plain-key-{n:02d}-x7Qw")
    history = [
        Message.user(f"message {i}: " + "the quick brown fox jumps over the lazy dog " * 6)
        if i % 2 == 0
        else Message.assistant(f"answer {i}: " + "a reply that says something useful " * 8)
        for i in range(20)
    ]
    error = ProviderError(
        ErrorKind.SERVER_ERROR,
        "upstream said: " + "x" * 2000 + " key configured-plain-key-03-x7Qw",
        provider="openai",
    )
    text = "ordinary log and trace text with ids 3f2a9c and numbers 12345 " * 64
    results: dict[str, Any] = {"records": RECORDS}
    with tempfile.TemporaryDirectory() as tmp:
        home = FermixHome(Path(tmp) / "fermix")
        for capture in (False, True):
            tracer = Tracer(home, capture_content=capture)

            def record(tracer: Tracer = tracer) -> None:
                tracer.record(
                    "llm_call",
                    session_id="main-1",
                    provider="openai",
                    model="gpt-x",
                    request=history,
                    usage={"input_tokens": 1200, "output_tokens": 80},
                    duration_ms=812.5,
                )

            key = "llm_call_capture_on" if capture else "llm_call_capture_off"
            results[key] = _time(record)
            tracer.close()
        tracer = Tracer(home, capture_content=False)
        results["error_record"] = _time(lambda: tracer.error(error, session_id="main-1"))
        tracer.close()
    results["redact_4kb"] = _time(lambda: logs.redact(text))
    with tempfile.TemporaryDirectory() as tmp:
        results.update(_turn_mix(FermixHome(Path(tmp) / "fermix")))
    logs.forget_known_secrets()
    return results


def mix_turn(tracer: Any, observe: Any) -> Any:
    """``turn(n)``: write the five records of minimal turn *n* (``main-<n>``)."""
    from fermix_core.traces import Body

    inbound = "what is on my calendar tomorrow, and do I need an umbrella?"
    reply = "Two meetings (10:00 and 15:30), and yes: rain from noon."

    def turn(n: int) -> None:
        # The fields of turns.py's and agent/loop.py's calls, in their order.
        session_id = f"main-{n}"
        tracer.record(
            "channel_msg",
            session_id=session_id,
            direction="inbound",
            channel="telegram",
            trust="operator",
            text=Body(inbound),
            attachments=0,
        )
        tracer.record("agent_event", session_id=session_id, event="turn_start", run_profile=None)
        observe.record(
            "llm_call",
            session_id=session_id,
            iteration=1,
            initial=True,
            status="ok",
            model="gpt-5.1-mini",
            provider="openai",
            input_tokens=1834,
            output_tokens=41,
            cached_input_tokens=1536,
            reasoning_tokens=0,
            tool_calls=0,
            output=reply,
            duration_ms=812.4375,
        )
        tracer.record(
            "channel_msg",
            session_id=session_id,
            direction="outbound",
            channel="telegram",
            text=Body(reply),
        )
        tracer.record(
            "agent_event",
            session_id=session_id,
            event="turn_commit",
            model="gpt-5.1-mini",
            provider="openai",
            tool_calls=0,
            iterations=1,
        )

    return turn


def _turn_mix(home: Any) -> dict[str, Any]:
    import anyio
    from fermix_core.agent.observe import Observer
    from fermix_core.traces import Tracer

    tracer = Tracer(home, capture_content=False)
    observe = Observer(None, tracer)
    turn = mix_turn(tracer, observe)
    for n in range(200):
        turn(n)
    samples = []
    cpu_started = time.process_time()
    for n in range(RECORDS):
        started = time.perf_counter()
        turn(n)
        samples.append(time.perf_counter() - started)
    cpu_us = (time.process_time() - cpu_started) / RECORDS * 1e6
    mix = {**_stats(samples), "records_per_turn": 5, "cpu_us_per_turn": round(cpu_us, 1)}

    async def spans() -> list[float]:
        out = []
        for _ in range(RECORDS):
            started = time.perf_counter()
            async with observe.span("tool_exec", "read_file", session_id="main-1") as handle:
                observe.annotate(handle, ok=True, result="Two meetings (10:00 and 15:30).")
            out.append(time.perf_counter() - started)
        return out

    span_samples = anyio.run(spans)
    tracer.close()
    return {"turn_mix": mix, "tool_span": _stats(span_samples)}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))

"""What writing one trace record costs, and the redactor's share of it.

Every string of a record passes through the log redactor (vendor token shapes plus the
configured secrets' exact values) before it is written, capture on or off. Cases:

- ``llm_call_capture_off`` — a typical model-call record (ids, counts, a usage dict, a
  20-message history as a content field, so only its size is kept);
- ``llm_call_capture_on`` — the same record with the history written whole;
- ``error_record`` — a provider error whose 2 KB body echoes a key;
- ``redact_4kb`` — the redactor alone over 4 KB of ordinary text, with 5 known secrets.

Numbers are per record, in microseconds, on whatever else the machine is doing.
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
    logs.forget_known_secrets()
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))

"""What live streaming costs us per reply: the stream controller's own time.

An ~8 KB Markdown answer (headings, paragraphs, bold, links, a list, a code block) is fed
to a :class:`~fermix_core.channels.streaming.StreamController` as 4-character text deltas,
the way a wire reports them, into a MemoryChannel reply port. The clock is the controller's
injected one, advanced 50 ms per delta (a model writing ~80 characters a second), so draft
mode edits about once a second of "model time" exactly as it would live. ``tick()`` runs
after every delta — the worst case, a driver woken by each event.

Reported per mode and dialect:

- ``on_event_ns`` — p50/p99 of queueing one event (what the provider's stream waits for);
- ``tick_us`` — p50/p99/max of one tick (applying the event, the cut decisions — rendered in
  a worker thread — and the platform calls to the in-memory channel);
- ``reply_ms`` — the whole answer from first delta to ``finish()``, p50 over the runs;
- ``messages`` / ``edits`` — what the chat saw.
"""

from __future__ import annotations

import statistics
import time

import anyio
from fermix_core.channels.streaming import StreamController
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.provider import StreamEvent, StreamEventKind
from fermix_core.testing import MemoryChannel, StubChannelHost

RUNS = 5
DELTA = 4
STEP_S = 0.05


def answer() -> str:
    para = (
        "Streaming keeps **the reply** moving while the model writes, with [a link]"
        "(https://example.com/docs) now and then and `inline code` too. "
    ) * 4
    sections = []
    for n in range(8):
        sections.append(f"## Section {n}\n\n{para}\n\n- one item\n- another item\n\n{para}")
    sections.insert(4, "```python\n" + "print('hello')\n" * 20 + "```")
    return "\n\n".join(sections)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_reply(mode: str, dialect: str, text: str) -> dict:
    channel = MemoryChannel("bench", supports_edit=mode == "draft")
    await channel.start(StubChannelHost("bench"))
    clock = Clock()
    stream = StreamController(
        ChannelReplyPort(channel, features_of(channel)),
        chat_id="chat",
        mode=mode,
        clock=clock,
        dialect=dialect,
    )
    on_event: list[float] = []
    ticks: list[float] = []
    started = time.perf_counter()
    for start in range(0, len(text), DELTA):
        event = StreamEvent(kind=StreamEventKind.TEXT_DELTA, text=text[start : start + DELTA])
        t0 = time.perf_counter_ns()
        stream.on_event(event)
        on_event.append(time.perf_counter_ns() - t0)
        clock.now += STEP_S
        t1 = time.perf_counter()
        await stream.tick()
        ticks.append((time.perf_counter() - t1) * 1e6)
    stream.on_event(StreamEvent(kind=StreamEventKind.ITEM_DONE, text=text, item_type="message"))
    rest = await stream.finish(text)
    total = (time.perf_counter() - started) * 1000
    return {
        "on_event": on_event,
        "ticks": ticks,
        "total_ms": total,
        "messages": len(channel.sent),
        "edits": len(channel.edits),
        "handed_back": rest is not None,
    }


def run() -> dict:
    text = answer()
    scenarios = {}

    async def main() -> None:
        for mode in ("draft", "block"):
            for dialect in ("plain", "telegram"):
                runs = [await one_reply(mode, dialect, text) for _ in range(RUNS)]
                on_event = [v for r in runs for v in r["on_event"]]
                ticks = [v for r in runs for v in r["ticks"]]
                scenarios[f"{mode}_{dialect}"] = {
                    "answer_chars": len(text),
                    "deltas": len(runs[0]["ticks"]),
                    "on_event_ns": {
                        "p50": round(percentile(on_event, 0.5)),
                        "p99": round(percentile(on_event, 0.99)),
                    },
                    "tick_us": {
                        "p50": round(percentile(ticks, 0.5), 1),
                        "p99": round(percentile(ticks, 0.99), 1),
                        "max": round(max(ticks), 1),
                    },
                    "reply_ms_p50": round(statistics.median(r["total_ms"] for r in runs), 1),
                    "messages": runs[0]["messages"],
                    "edits": runs[0]["edits"],
                    "handed_back": runs[0]["handed_back"],
                }

    anyio.run(main)
    return {
        "note": "shared, loaded 2-core machine: numbers are pessimistic",
        "runs_per_scenario": RUNS,
        "scenarios": scenarios,
    }

"""Presentation cost: render + split a 100 KB Markdown reply, per dialect.

A reply that long is rare (models answer in a few KB), so this is the worst case a channel
pays once per reply: ``present()`` parses the Markdown once, renders it in the dialect and
cuts it on the boundary ladder so each rendered chunk fits the platform's cap. The reply is
generated from a fixed seed and mixes what models write: sections, styled paragraphs with
links and inline code, lists, quotes, a table, code fences (one too big for a Discord or
Signal message, so it is taken out as an attachment there).

    uv run python bench/run.py presentation
"""

from __future__ import annotations

import random
import statistics
import time

RUNS = 15
TARGET_BYTES = 100_000
VOCABULARY = (
    "the model answers with a plan and then the details of each step so that "
    "you can check it against your own notes before running anything"
)


def reply(seed: int = 7) -> str:
    rng = random.Random(seed)
    words = VOCABULARY.split()

    def sentence() -> str:
        parts = [rng.choice(words) for _ in range(rng.randint(6, 18))]
        styled = rng.random()
        if styled < 0.2:
            parts[1] = f"**{parts[1]}**"
        elif styled < 0.35:
            parts[2] = f"_{parts[2]}_"
        elif styled < 0.45:
            parts[0] = f"`{parts[0]}()`"
        elif styled < 0.55:
            parts[-1] = f"[{parts[-1]}](https://example.com/docs/{rng.randint(1, 999)}?a=1&b=2)"
        if rng.random() < 0.1:
            parts.append("😀")
        return " ".join(parts).capitalize() + rng.choice([".", ".", ".", "?", "!"])

    out: list[str] = []
    section = 0
    while sum(len(p) + 2 for p in out) < TARGET_BYTES:
        section += 1
        out.append(f"## Step {section}: {rng.choice(words)} {rng.choice(words)}")
        for _ in range(rng.randint(2, 5)):
            out.append(" ".join(sentence() for _ in range(rng.randint(2, 7))))
        kind = rng.random()
        if kind < 0.25:
            out.append("\n".join(f"- {sentence()}" for _ in range(rng.randint(3, 7))))
        elif kind < 0.4:
            out.append("\n".join(f"{n}. {sentence()}" for n in range(1, rng.randint(3, 6))))
        elif kind < 0.5:
            out.append("> " + " ".join(sentence() for _ in range(3)))
        elif kind < 0.55:
            rows = "\n".join(f"| {rng.choice(words)} | {rng.randint(1, 999)} |" for _ in range(8))
            out.append(f"| name | value |\n|---|--:|\n{rows}")
        elif kind < 0.8:
            lines = rng.randint(4, 30)
            body = "\n".join(f"result_{i} = compute({i}, limit={i * 3})" for i in range(lines))
            out.append(f"```python\n{body}\n```")
        if section == 3:
            body = "\n".join(f"    step_{i}()  # {rng.choice(words)}" for i in range(120))
            out.append(f"```python\ndef long_job():\n{body}\n```")
    return "\n\n".join(out)


def run() -> dict:
    from fermix_core.channels.presentation import Dialect, dialect_profile, present
    from fermix_core.channels.presentation.parse import parse

    markdown = reply()
    results: dict = {
        "input_bytes": len(markdown.encode()),
        "runs": RUNS,
        "note": (
            "one call = parse + render + split the whole reply; wall times are pessimistic "
            "on a shared 2-core machine, cpu_p50_ms is this process's CPU time"
        ),
    }
    parse_ms, parse_cpu = [], []
    for _ in range(RUNS):
        started, cpu = time.perf_counter(), time.process_time()
        parse(markdown)
        parse_ms.append((time.perf_counter() - started) * 1e3)
        parse_cpu.append((time.process_time() - cpu) * 1e3)
    results["parse_only"] = {
        "p50_ms": round(statistics.median(parse_ms), 1),
        "cpu_p50_ms": round(statistics.median(parse_cpu), 1),
    }
    for dialect in Dialect:
        profile = dialect_profile(dialect)
        present(markdown, dialect)  # warm-up
        samples, cpu_samples = [], []
        for _ in range(RUNS):
            started, cpu = time.perf_counter(), time.process_time()
            presentation = present(markdown, dialect)
            samples.append((time.perf_counter() - started) * 1e3)
            cpu_samples.append((time.process_time() - cpu) * 1e3)
        samples.sort()
        results[dialect.value] = {
            "limit": profile.limit,
            "measure": profile.measure_name,
            "chunks": len(presentation.chunks),
            "attachments": len(presentation.attachments),
            "largest_chunk": max(profile.measure(c.text) for c in presentation.chunks),
            "p50_ms": round(statistics.median(samples), 1),
            "p99_ms": round(samples[min(len(samples) - 1, int(0.99 * len(samples)))], 1),
            # CPU time of this process: less sensitive than wall time to the other jobs on
            # a shared machine.
            "cpu_p50_ms": round(statistics.median(cpu_samples), 1),
        }
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))

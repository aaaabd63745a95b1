"""Transcription overhead: what the gateway's audio step adds to a voice note, per backend.

One ``Gateway.ingest`` of a voice note from the owner, through the real step (size check,
the backend's request encoding — multipart for openai/xai, raw body for deepgram — one HTTP
round trip to a loopback fake that answers at once, the turn text rebuilt) until the turn
is queued. The service's own transcription time is not in it: the fake answers at once
without parsing the upload. Two
files: a real espeak-ng/sox Ogg voice note (a few KB, the common case) and 8 MB (a long
recording, which shows the cost of encoding and moving the bytes).

    uv run python bench/run.py transcription
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import anyio

RUNS = 40
BIG_RUNS = 8
KEY = "bench-stt-key-000000000000"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _measure(backend: str, files: dict[str, bytes]) -> dict:
    from fermix_core.boot import assemble
    from fermix_core.channel import Attachment, InboundMessage
    from fermix_core.commands.router import CommandRouter
    from fermix_core.config import load_config
    from fermix_core.gateway.gateway import Gateway
    from fermix_core.gateway.queue import ConversationQueue
    from fermix_core.gateway.reply import ChannelReplyPort, features_of
    from fermix_core.gateway.trust import TrustPolicy
    from fermix_core.home import FermixHome
    from fermix_core.testing import MemoryChannel, StubChannelHost
    from fermix_core.testing.loopback import LoopbackServer, Reply
    from fermix_core.transcription.engine import Transcriber

    class Drop:
        async def run_turn(self, job) -> None:
            pass

        async def on_stopped(self, job) -> None:
            pass

    # Answers every wire at once without parsing the upload, so the figure is the client's
    # side (the tests' SpeechToTextFake checks the shapes; its multipart parsing would
    # dominate here).
    answer = {
        "text": "hello there",
        "results": {"channels": [{"alternatives": [{"transcript": "hello there"}]}]},
    }
    results: dict = {}
    async with LoopbackServer(lambda request: Reply(body=answer)) as server:
        with tempfile.TemporaryDirectory() as tmp:
            home = FermixHome(Path(tmp) / "home")
            home.ensure()
            home.config_file.write_text(
                f'[fermix_core.transcription]\nbackend = "{backend}"\n'
                f'base_url = "{server.url}/v1"\n{backend}_api_key = "{KEY}"\n'
            )
            assembly = assemble(home, environ={})
            config = load_config(home, assembly.registry, environ={})
            transcriber = Transcriber(config, assembly.registry, environ={})
            channel = MemoryChannel("tg")
            await channel.start(StubChannelHost("tg"))
            port = ChannelReplyPort(channel, features_of(channel))
            async with ConversationQueue(Drop()) as queue:
                gateway = Gateway(
                    policies={"tg": TrustPolicy(owner_id="owner", allowed_ids=(), channel="tg")},
                    commands=CommandRouter(()),
                    queue=queue,
                    services=None,
                    emit=lambda name, **data: None,
                    transcriber=transcriber,
                )
                for label, data in files.items():
                    runs = RUNS if len(data) < 1_000_000 else BIG_RUNS
                    samples = []
                    for index in range(runs + 2):
                        message = InboundMessage(
                            channel="tg",
                            chat_id=f"c{index}",
                            sender_id="owner",
                            attachments=[
                                Attachment(kind="audio", data=data, mime_type="audio/ogg")
                            ],
                        )
                        started = time.perf_counter()
                        outcome = await gateway.ingest(message, port)
                        elapsed = (time.perf_counter() - started) * 1000
                        assert outcome.job is not None, outcome
                        if index >= 2:  # the first builds the backend and warms the pool
                            samples.append(elapsed)
                    results[label] = {
                        "bytes": len(data),
                        "runs": runs,
                        "p50_ms": round(statistics.median(samples), 2),
                        "p99_ms": round(_percentile(samples, 0.99), 2),
                    }
            await transcriber.aclose()
    return results


def run() -> dict:
    from fermix_core.testing.speech import speech, speech_tools_missing

    problem = speech_tools_missing()
    if problem:
        return {"skipped": problem}
    voice = speech("remind me to call the dentist tomorrow at nine", "ogg")
    files = {"voice_note": voice, "eight_mb": voice + bytes(8 * 1024 * 1024 - len(voice))}
    out: dict = {
        "note": (
            "Gateway.ingest of an owner's voice note until the turn is queued, against a "
            "loopback speech-to-text fake that answers at once (the service's own time is "
            "not included); wall times on a shared, loaded 2-core machine are pessimistic"
        )
    }
    for backend in ("openai", "xai", "deepgram"):
        out[backend] = anyio.run(_measure, backend, files)
    return out

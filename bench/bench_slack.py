"""The Slack adapter's own cost: inbound webhook handling and outbound sends.

* ``verify`` — one ``X-Slack-Signature`` check (slack_sdk's HMAC plus our header checks);
* ``parse`` — one Events API body to an ``InboundMessage``;
* ``webhook`` — ``SlackChannel.handle_webhook`` end to end (size cap, verify, parse,
  ``host.deliver`` on a :class:`~fermix_core.testing.StubChannelHost`, response), for
  distinct messages across 100 chats: the time the adapter spends before Slack gets its 200;
* ``send`` — ``SlackChannel.send`` of a short mrkdwn reply over httpx to the loopback Slack
  of the tests, which runs in this process (its CPU time is included, so the figure is an
  upper bound of the adapter's share);
* ``rss`` — the resident memory of an idle ``fermix run`` daemon with the Slack channel
  enabled (events mode) against one with no channel, median of three runs each.

    uv run python bench/run.py slack
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

INBOUND = 5_000
SENDS = 300
WARMUP = 50
CHATS = 100
FAKE = Path(__file__).parents[1] / "packages/fermix-channels/tests/slack/fake_slack.py"


def _fake() -> Any:
    from _fakes import load_fake

    return load_fake("fermix_channels_bench_fake_slack", FAKE)


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1e6

    return {
        "n": len(ordered),
        "p50_us": round(pct(0.50), 1),
        "p95_us": round(pct(0.95), 1),
        "p99_us": round(pct(0.99), 1),
        "mean_us": round(statistics.fmean(ordered) * 1e6, 1),
    }


async def _measure() -> dict[str, Any]:
    from fermix_channels.slack.adapter import WEBHOOK_PATH, SlackChannel
    from fermix_channels.slack.config import SlackConfig
    from fermix_channels.slack.parse import parse_body, to_inbound
    from fermix_channels.slack.verify import SlackVerifier
    from fermix_core.channel import OutboundMessage, WebhookRequest
    from fermix_core.testing import StubChannelHost

    fs = _fake()
    bodies = [
        json.dumps(
            fs.message_event(f"message number {n} with a sentence of text", channel=f"D{n % CHATS}")
        ).encode()
        for n in range(INBOUND + WARMUP)
    ]
    requests = [WebhookRequest("POST", WEBHOOK_PATH, {}, fs.sign(b), b) for b in bodies]

    verifier = SlackVerifier(fs.SIGNING_SECRET)
    verify: list[float] = []
    parse: list[float] = []
    for request in requests:
        t0 = time.perf_counter()
        verifier.verify(request.headers, request.body)
        t1 = time.perf_counter()
        to_inbound(parse_body(request.body).data, channel_name="slack", bot_user_id="UBOT0001")
        t2 = time.perf_counter()
        verify.append(t1 - t0)
        parse.append(t2 - t1)

    async with fs.FakeSlack() as fake:
        config = SlackConfig(
            enabled=True,
            bot_token=fs.BOT_TOKEN,
            signing_secret=fs.SIGNING_SECRET,
            api_base_url=fake.api_url,
            owner_user_id=fs.OWNER_ID,
        )
        channel = SlackChannel(config=config)
        async with StubChannelHost("slack", config=config) as host:
            await channel.start(host)
            webhook: list[float] = []
            started = time.perf_counter()
            for request in requests:
                t0 = time.perf_counter()
                response = await channel.handle_webhook(request)
                webhook.append(time.perf_counter() - t0)
                assert response.status == 200
            elapsed = time.perf_counter() - started
            assert len(host.deliveries) == len(requests)

            send: list[float] = []
            for n in range(SENDS + WARMUP):
                message = OutboundMessage(chat_id=f"D{n % CHATS}", text=f"*reply* {n}")
                t0 = time.perf_counter()
                await channel.send(message)
                send.append(time.perf_counter() - t0)
            await channel.stop()

    return {
        "verify": _summary(verify[WARMUP:]),
        "parse": _summary(parse[WARMUP:]),
        "webhook": _summary(webhook[WARMUP:]),
        "webhook_per_second": round(len(requests) / elapsed),
        "send_loopback": _summary(send[WARMUP:]),
        "chats": CHATS,
        "note": (
            "shared 2-core machine under load from other work: pessimistic; send includes "
            "the in-process loopback Slack's own CPU time"
        ),
    }


def _daemon_rss(slack: bool, api_url: str, tmp: Path) -> int:
    """VmRSS (KiB) of an idle ``fermix run`` daemon, with or without the Slack channel."""
    import os
    import shutil
    import subprocess

    from fermix_core.daemon.process import read_pidfile

    fs = _fake()
    home = tmp / ("slack" if slack else "none")
    home.mkdir(mode=0o700, parents=True)
    config = (
        "[fermix_core.providers.ollama]\nprimary = true\n"
        'base_url = "http://127.0.0.1:9/v1"\ndefault_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = false\n"
        "[fermix_channels.acp]\nenabled = false\n"
    )
    if slack:
        config += (
            "[fermix_channels.slack]\nenabled = true\n"
            f'bot_token = "{fs.BOT_TOKEN}"\nsigning_secret = "{fs.SIGNING_SECRET}"\n'
            f'api_base_url = "{api_url}"\nowner_user_id = "{fs.OWNER_ID}"\n'
        )
    (home / "config.toml").write_text(config)
    env = {**os.environ, "FERMIX_HOME": str(home)}
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    fermix = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"
    subprocess.run([fermix, "start"], env=env, check=True, capture_output=True, timeout=120)
    try:
        info = read_pidfile(home / "daemon.pid")
        assert info is not None
        status = Path(f"/proc/{info.pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0])
    finally:
        subprocess.run([fermix, "stop"], env=env, capture_output=True, timeout=60)


async def _rss() -> dict[str, Any]:
    import tempfile

    fs = _fake()
    async with fs.FakeSlack() as fake:
        with tempfile.TemporaryDirectory() as tmp:
            samples: dict[str, list[int]] = {"none": [], "slack": []}
            for _ in range(3):
                for key in ("none", "slack"):
                    rss = await asyncio.to_thread(
                        _daemon_rss,
                        key == "slack",
                        fake.api_url,
                        Path(tmp) / str(len(samples[key])),
                    )
                    samples[key].append(rss)
    none, slack = statistics.median(samples["none"]), statistics.median(samples["slack"])
    return {
        "idle_daemon_rss_kib": {"none": none, "slack_events": slack},
        "slack_delta_mib": round((slack - none) / 1024, 1),
    }


def run() -> dict[str, Any]:
    result = asyncio.run(_measure())
    result["rss"] = asyncio.run(_rss())
    return result


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))

"""Secrets never reach a chat or a trace, end to end through the in-process runtime.

The provider answers with a 5xx whose body echoes credentials — the vendor-shaped tokens
of the redaction corpus and the provider's own configured key, a plain string that matches
no token shape. The reply the sender gets (on a group chat, where everyone reads it) and
every trace record, with content capture off and on, must carry none of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fermix_core import logs
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway import ChannelFeatures
from fermix_core.hookspecs import hookimpl
from fermix_core.provider import ErrorKind, ProviderError
from fermix_core.service import CollectingReply
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio

CORPUS = json.loads(
    (
        Path(__file__).resolve().parents[1] / "packages/fermix-core/tests/data/token_corpus.json"
    ).read_text("utf-8")
)
TOKENS = [entry["token"] for entry in CORPUS["positive"]]
#: A configured key with no vendor shape at all: only knowing the value can catch it.
PLAIN_KEY = "q7Hw2ZkX9vLm4Rt8Np3"
#: A channel secret set in config, echoed by nobody yet: known from boot, not from use.
BOT_TOKEN = "plain bot secret 5521"


class Harness:
    def __init__(self) -> None:
        self.seen_keys: list[str | None] = []
        self.provider = FunctionProvider(self._answer, name="harness")

    async def _answer(self, request):
        body = " ".join(TOKENS)
        raise ProviderError(
            ErrorKind.SERVER_ERROR,
            f"upstream 503: invalid request for key {PLAIN_KEY} (also tried {body}); "
            f"proxy said {BOT_TOKEN}",
            provider="harness",
            status=503,
        )

    @hookimpl
    def fermix_providers(self):
        def factory(spec, settings):
            self.seen_keys.append(getattr(settings, "api_key", None))
            return self.provider

        yield ProviderSpec(
            name="harness",
            label="Harness",
            factory=factory,
            env_var="HARNESS_API_KEY",
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=100_000),),
        )


CONFIG = {
    "fermix_core": {
        "providers": {
            "harness": {
                "primary": True,
                "base_url": "http://127.0.0.1:9/unused",
                "api_key": PLAIN_KEY,
            }
        },
        "memory": {"review_enabled": False},
    },
    "fermix_channels": {
        "telegram": {"owner_user_id": "1", "allowed_user_ids": ["1", "2"], "bot_token": BOT_TOKEN}
    },
}


def _leaks(text: str) -> list[str]:
    return [secret for secret in (PLAIN_KEY, BOT_TOKEN, *TOKENS) if secret in text]


@pytest.fixture(autouse=True)
def _fresh_redactor():
    logs.forget_known_secrets()
    yield
    logs.forget_known_secrets()


@pytest.mark.parametrize("capture", ["0", "1"], ids=["capture-off", "capture-on"])
async def test_provider_error_echoing_keys_reaches_neither_chat_nor_trace(
    fermix_home, monkeypatch, capture
) -> None:
    monkeypatch.setenv("FERMIX_TRACE_CONTENT", capture)
    harness = Harness()
    async with Fermix.open(
        fermix_home, config=CONFIG, plugins=[("providers.harness", harness)]
    ) as fx:
        reply = CollectingReply(ChannelFeatures())
        message = InboundMessage(
            channel="telegram",
            chat_id="-100group",
            sender_id="1",
            sender_name="Dana",
            is_group=True,
            text=f"my token is {TOKENS[0]}, my key is {PLAIN_KEY}; why does it fail?",
        )
        outcome = await fx.service.gateway.ingest(message, reply)
        await outcome.job.done.wait()
        local = await fx.ask(f"try again with {TOKENS[1]}")

    chat = reply.text
    assert "says: upstream 503" in chat and "provider-side problem" in chat, chat
    assert _leaks(chat) == [], "the group chat saw a secret"
    assert "[REDACTED:" in chat, "the reply says something was withheld"
    assert _leaks(local.text) == []

    traces = list((fermix_home.path / "traces").rglob("*.jsonl"))
    assert {p.stem for p in traces} >= {"error", "channel_msg"}
    for path in traces:
        text = path.read_text("utf-8")
        assert _leaks(text) == [], path.name
        for line in text.splitlines():
            json.loads(line)  # redaction never breaks a record
    errors = (next(p for p in traces if p.stem == "error")).read_text("utf-8")
    assert "[REDACTED:secret]" in errors
    if capture == "1":
        inbound = [
            json.loads(line)
            for path in traces
            if path.stem == "channel_msg"
            for line in path.read_text("utf-8").splitlines()
        ]
        assert any("[REDACTED:" in str(r.get("text")) for r in inbound), "captured, redacted"

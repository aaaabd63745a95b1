"""An empty completion is the honest "try again" on every wire, not a server error.

A real runtime (installed plugins, real adapters and routing) talks to a loopback server
that answers one well-formed, finished completion with nothing in it — in each wire's own
shape. The turn must answer once (no same-route retries), with status ``empty``, and
commit nothing to the conversation's history.
"""

from __future__ import annotations

import pytest
from fermix_core.agent import EMPTY_REPLY
from fermix_core.api import Fermix
from fermix_core.testing.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.anyio

EMPTY = {
    "openai": Reply(
        body={
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-5.5",
            "output": [{"type": "reasoning", "id": "rs_1", "summary": []}],
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
    ),
    "openrouter": Reply(
        body={
            "id": "gen-1",
            "object": "chat.completion",
            "model": "openai/gpt-5",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ""},
                    "finish_reason": "stop",
                }
            ],
        }
    ),
    "anthropic": Reply(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
    ),
}


@pytest.mark.parametrize("provider", sorted(EMPTY))
async def test_an_empty_completion_answers_try_again_and_commits_nothing(
    fermix_home, provider
) -> None:
    async with LoopbackServer() as server:
        server.queue(EMPTY[provider], EMPTY[provider], EMPTY[provider])
        config = {
            "fermix_core": {
                "providers": {
                    provider: {"primary": True, "api_key": "sk-loopback", "base_url": server.url}
                },
                "memory": {"review_enabled": False},
            }
        }
        async with Fermix.open(fermix_home, config=config, entry_points=True) as fx:
            outcome = await fx.ask("hello?", session="empty-check")
            store = fx.service.store
            window = await store.load_window(await store.conversation_id(outcome.conversation_key))
        assert len(server.requests) == 1, "an empty answer is not a flake to retry"
    assert outcome.status == "empty"
    assert outcome.text == EMPTY_REPLY
    # Nothing committed: the window keeps only the (uncommitted) user message, no answer.
    assert [row.message.role for row in window] == ["user"]

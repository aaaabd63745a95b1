"""pywa — a real, independent WhatsApp Cloud API implementation — checks our two halves.

* Signatures: pywa's webhook validator and ours agree on every signed, tampered and
  re-signed body, so a delivery Meta signs is one we accept and a forgery is not.
* The loopback Graph API stand-in: pywa's client sends a text and a reaction to it and reads
  the answers; a stand-in drifting from Meta's request or answer shapes fails here first.
"""

from __future__ import annotations

import sys

import anyio.to_thread
import httpx
import pytest
from fermix_channels.whatsapp.verify import SignatureError, sign, verify_signature
from pywa import WhatsApp
from pywa.utils import webhook_updates_validator

pytestmark = pytest.mark.anyio

fg = sys.modules["fermix_channels_tests_fake_graph"]

BODIES = [
    b"{}",
    fg.delivery(fg.value([fg.text_message(fg.OWNER, "hi \u00e9\u2603 \U0001f600", "wamid.1")])),
    b'{"object":"whatsapp_business_account","entry":[]}\n',
    bytes(range(256)),
]


@pytest.mark.parametrize("body", BODIES)
def test_signatures_agree_with_pywa(body: bytes) -> None:
    header = sign(fg.APP_SECRET, body)
    assert webhook_updates_validator(fg.APP_SECRET, body, header)
    verify_signature(fg.APP_SECRET, {"x-hub-signature-256": header}, body)
    tampered = body + b" "
    assert not webhook_updates_validator(fg.APP_SECRET, tampered, header)
    with pytest.raises(SignatureError):
        verify_signature(fg.APP_SECRET, {"x-hub-signature-256": header}, tampered)
    other = sign("another-secret", body)
    assert not webhook_updates_validator(fg.APP_SECRET, body, other)
    with pytest.raises(SignatureError):
        verify_signature(fg.APP_SECRET, {"x-hub-signature-256": other}, body)


class ToLoopback(httpx.BaseTransport):
    """Sends pywa's graph.facebook.com requests to the loopback stand-in instead."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


async def test_pywa_talks_to_the_graph_stand_in(graph) -> None:
    session = httpx.Client(transport=ToLoopback(graph.server.port))
    client = WhatsApp(
        phone_id=fg.PHONE_NUMBER_ID,
        token=fg.ACCESS_TOKEN,
        session=session,
        api_version=fg.VERSION.removeprefix("v"),
    )
    try:
        sent = await anyio.to_thread.run_sync(
            lambda: client.send_message(to=fg.OWNER, text="from pywa")
        )
        assert sent.id.startswith("wamid.out.")
        reacted = await anyio.to_thread.run_sync(
            lambda: client.send_reaction(to=fg.OWNER, emoji="👍", message_id=sent.id)
        )
        assert reacted.id.startswith("wamid.out.")
    finally:
        await anyio.to_thread.run_sync(session.close)
    text, reaction = graph.messages
    assert text["to"] == fg.OWNER and text["type"] == "text"
    assert text["text"]["body"] == "from pywa"
    assert reaction["reaction"] == {"message_id": sent.id, "emoji": "👍"}

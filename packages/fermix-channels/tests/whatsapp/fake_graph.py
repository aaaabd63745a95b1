"""A loopback WhatsApp Cloud API (Graph API) and signed webhook deliveries for tests.

The fake answers the calls the adapter makes, in Meta's JSON shapes: ``POST
/v21.0/<phone_number_id>/messages`` (text, media, reactions, read receipts), ``POST
/v21.0/<phone_number_id>/media`` (multipart upload), ``GET /v21.0/<media_id>`` (media
lookup with a download URL) and ``GET /download/<media_id>`` (the bytes). Every call must
carry ``Authorization: Bearer <ACCESS_TOKEN>``. Failures are scripted per recipient with
:meth:`FakeGraph.fail`, in Meta's error body. Waiting is on events, never on sleeps.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict, deque
from typing import Any

import anyio
from fermix_channels.whatsapp.verify import sign
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply

ACCESS_TOKEN = "EAAG-test-access-token"
APP_SECRET = "0123456789abcdef0123456789abcdef"
VERIFY_TOKEN = "fermix-verify-me"
PHONE_NUMBER_ID = "106540352242922"
OWNER = "15551230001"
GUEST = "15551230002"
STRANGER = "15559990000"
VERSION = "v21.0"


def graph_error(code: int, message: str, status: int = 400) -> Reply:
    return Reply(
        status=status,
        body={
            "error": {
                "message": message,
                "type": "OAuthException",
                "code": code,
                "error_data": {"messaging_product": "whatsapp", "details": message},
                "fbtrace_id": "Atest",
            }
        },
    )


class FakeGraph:
    def __init__(self) -> None:
        self.server = LoopbackServer(self._handle)
        self.messages: list[dict[str, Any]] = []
        self.uploads: list[dict[str, Any]] = []
        self.media: dict[str, tuple[bytes, str, int | None]] = {}
        self.lookups: list[str] = []
        self.downloads: list[str] = []
        self.failures: dict[str, deque[Reply]] = defaultdict(deque)
        self._ids = itertools.count(1)
        self.changed = anyio.Event()
        #: Text messages received per recipient, and in all (cheap to poll).
        self.text_counts: dict[str, int] = defaultdict(int)
        self.text_total = 0

    async def __aenter__(self) -> FakeGraph:
        await self.server.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.__aexit__(*exc)

    @property
    def url(self) -> str:
        return f"{self.server.url}/{VERSION}"

    def fail(self, recipient: str, *replies: Reply) -> None:
        self.failures[recipient].extend(replies)

    def add_media(self, media_id: str, data: bytes, mime: str, declared: int | None = None) -> None:
        self.media[media_id] = (data, mime, declared)

    def texts(self, to: str | None = None) -> list[str]:
        return [
            m["text"]["body"]
            for m in self.messages
            if m.get("type") == "text" and (to is None or m["to"] == to)
        ]

    async def wait_texts(self, count: int, to: str | None = None, timeout: float = 60) -> None:
        with anyio.fail_after(timeout):
            while len(self.texts(to)) < count:
                await self.changed.wait()

    async def wait_messages(self, count: int, timeout: float = 10) -> None:
        with anyio.fail_after(timeout):
            while len(self.messages) < count:
                await self.changed.wait()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def _handle(self, request: RecordedRequest) -> Reply:
        if request.header("authorization") != f"Bearer {ACCESS_TOKEN}":
            return graph_error(190, "Invalid OAuth access token.", 401)
        path = request.path.split("?", 1)[0]
        if request.method == "GET" and path.startswith("/download/"):
            media_id = path.removeprefix("/download/")
            self.downloads.append(media_id)
            data, mime, _ = self.media[media_id]
            return Reply(body=data, headers={"content-type": mime})
        prefix = f"/{VERSION}/"
        if not path.startswith(prefix):
            return graph_error(100, f"Unknown path {path}", 404)
        rest = path.removeprefix(prefix)
        if request.method == "GET" and "/" not in rest:
            self.lookups.append(rest)
            if rest not in self.media:
                return graph_error(100, "Unsupported get request.", 400)
            data, mime, declared = self.media[rest]
            return Reply(
                body={
                    "messaging_product": "whatsapp",
                    "url": f"{self.server.url}/download/{rest}",
                    "mime_type": mime,
                    "sha256": "0" * 64,
                    "file_size": declared if declared is not None else len(data),
                    "id": rest,
                }
            )
        if request.method == "POST" and rest == f"{PHONE_NUMBER_ID}/messages":
            body = request.json()
            if body.get("messaging_product") != "whatsapp":
                return graph_error(100, "messaging_product is required")
            if body.get("status") == "read":
                self.messages.append(body)
                self._notify()
                return Reply(body={"success": True})
            to = body.get("to", "")
            queued = self.failures.get(to)
            if queued:
                return queued.popleft()
            self.messages.append(body)
            if body.get("type") == "text":
                self.text_counts[to] += 1
                self.text_total += 1
            self._notify()
            return Reply(
                body={
                    "messaging_product": "whatsapp",
                    "contacts": [{"input": to, "wa_id": to}],
                    "messages": [{"id": f"wamid.out.{next(self._ids)}"}],
                }
            )
        if request.method == "POST" and rest == f"{PHONE_NUMBER_ID}/media":
            content_type = request.header("content-type") or ""
            if not content_type.startswith("multipart/form-data"):
                return graph_error(100, "multipart upload expected")
            match = re.search(rb'filename="([^"]+)"', request.body)
            media_id = f"media.{next(self._ids)}"
            self.uploads.append(
                {
                    "id": media_id,
                    "filename": match.group(1).decode() if match else None,
                    "size": len(request.body),
                    "has_product": b'name="messaging_product"' in request.body,
                }
            )
            return Reply(body={"id": media_id})
        return graph_error(100, f"Unsupported {request.method} {path}", 400)


# ----------------------------------------------------------------------------- deliveries


def value(
    messages: list[dict] | None = None,
    statuses: list[dict] | None = None,
    phone_number_id: str = PHONE_NUMBER_ID,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_number_id},
    }
    if messages is not None:
        out["contacts"] = [
            {"profile": {"name": f"User {m['from'][-4:]}"}, "wa_id": m["from"]} for m in messages
        ]
        out["messages"] = messages
    if statuses is not None:
        out["statuses"] = statuses
    return out


def delivery(*values: dict[str, Any], field: str = "messages") -> bytes:
    body = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA1", "changes": [{"value": v, "field": field} for v in values]}],
    }
    return json.dumps(body).encode()


def text_message(sender: str, text: str, message_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "from": sender,
        "id": message_id,
        "timestamp": "1733050000",
        "type": "text",
        "text": {"body": text},
        **extra,
    }


def media_message(sender: str, kind: str, media_id: str, message_id: str, **item: Any) -> dict:
    return {
        "from": sender,
        "id": message_id,
        "timestamp": "1733050000",
        "type": kind,
        kind: {"id": media_id, "mime_type": item.pop("mime_type", "image/jpeg"), **item},
    }


def signed_headers(body: bytes, secret: str = APP_SECRET) -> dict[str, str]:
    return {"x-hub-signature-256": sign(secret, body), "content-type": "application/json"}

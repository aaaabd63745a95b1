"""A loopback Slack: the Web API over real HTTP and Socket Mode over a real websocket.

The Web API half answers in Slack's JSON shapes (``ok``, ``error``, ``ts``, ``channel``)
on ``/api/<method>``, reads parameters the way Slack does (query string, JSON body or form
body; the token from ``Authorization: Bearer``), and implements the three steps of
``files_upload_v2`` (``files.getUploadURLExternal``, a POST of the bytes to the returned
upload URL, ``files.completeUploadExternal``). Failures are queued per method with
:meth:`FakeSlack.fail`.

The Socket Mode half is a websocket server speaking Slack's envelope protocol:
``apps.connections.open`` (with the ``xapp-`` token) returns its ``ws://`` URL; each
connection gets ``{"type": "hello"}``; :meth:`FakeSlack.push_event` sends an ``events_api``
envelope and :meth:`FakeSlack.wait_ack` waits for the client's ``{"envelope_id"}`` ack;
:meth:`FakeSlack.disconnect` sends ``{"type": "disconnect"}`` and closes the connection.

Waiting is on events, never on sleeps; every wait has a failure deadline.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import anyio
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply
from slack_sdk.signature import SignatureVerifier
from websockets.asyncio.server import ServerConnection, serve

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-1-A0TEST-1-test-app-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_USER_ID = "UBOT0001"
OWNER_ID = "U0OWNER1"
STRANGER_ID = "U0STRANGE"
TEAM_ID = "T0TEAM01"


def sign(body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict:
    """Headers Slack would send with *body*, signed by slack_sdk's own signer."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return {
        "content-type": "application/json",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }


def manual_signature(body: bytes, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    """The v0 signature computed from Slack's documented recipe (cross-checks the SDK)."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


_ts_counter = itertools.count(1)


def make_ts() -> str:
    n = next(_ts_counter)
    return f"{1_760_000_000 + n}.{n:06d}"


def message_event(
    text: str,
    *,
    user: str = OWNER_ID,
    channel: str = "D0DIRECT1",
    channel_type: str = "im",
    ts: str | None = None,
    thread_ts: str | None = None,
    event_type: str = "message",
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """An ``event_callback`` body as Slack sends it for one message."""
    ts = ts or make_ts()
    event: dict[str, Any] = {
        "type": event_type,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel": channel,
        "client_msg_id": f"cmid-{ts}",
    }
    if event_type == "message":
        event["channel_type"] = channel_type
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return {
        "token": "verification-token-unused",
        "team_id": TEAM_ID,
        "api_app_id": "A0TEST",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{ts.replace('.', '')}",
        "event_time": int(float(ts)),
        "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
    }


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    mrkdwn: Any = None
    unfurl_links: Any = None
    unfurl_media: Any = None
    blocks: Any = None
    deleted: bool = False
    edits: list[str] = field(default_factory=list)
    reactions: list[str] = field(default_factory=list)


@dataclass
class UploadedFile:
    id: str
    filename: str
    length: int
    data: bytes | None = None
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    deleted: bool = False


class FakeSlack:
    """Slack's Web API and Socket Mode on ``127.0.0.1``; use as ``async with``."""

    def __init__(self, *, bot_user_id: str = BOT_USER_ID) -> None:
        self.bot_user_id = bot_user_id
        self.http = LoopbackServer(self._handle)
        self.posted: list[Posted] = []
        self.files: dict[str, UploadedFile] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failures: dict[str, deque[Reply]] = defaultdict(deque)
        self.missing_channels: set[str] = set()
        #: Files users shared (id → bytes) and every download request path.
        self.shared: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self.connections_opened = 0
        #: Socket Mode connections, newest last.
        self.sockets: list[ServerConnection] = []
        self.acks: list[str] = []
        self._envelopes = itertools.count(1)
        self._files = itertools.count(1)
        self._changed = anyio.Event()
        self._ws_server: Any = None
        self.ws_port = 0

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeSlack:
        await self.http.__aenter__()
        self._ws_server = await serve(self._ws_handler, "127.0.0.1", 0)
        self.ws_port = next(iter(self._ws_server.sockets)).getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._ws_server.close()
        await self._ws_server.wait_closed()
        await self.http.__aexit__(*exc)

    @property
    def api_url(self) -> str:
        return f"{self.http.url}/api/"

    # ------------------------------------------------------------------ waiting

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Any, *, timeout: float = 10.0) -> None:
        """Until ``predicate()`` holds; fails after *timeout* (a bound, not a pace)."""
        with anyio.fail_after(timeout):
            while not predicate():
                await self._changed.wait()

    # ------------------------------------------------------------------ Web API

    def fail(self, method: str, *replies: Reply) -> None:
        """Answer the next calls of *method* with *replies* instead of succeeding."""
        self.failures[method].extend(replies)

    def texts(self, channel: str) -> list[str]:
        return [p.text for p in self.posted if p.channel == channel and not p.deleted]

    def find(self, channel: str, ts: str) -> Posted | None:
        for posted in self.posted:
            if posted.channel == channel and posted.ts == ts:
                return posted
        return None

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    @staticmethod
    def _params(request: RecordedRequest) -> dict[str, Any]:
        split = urllib.parse.urlsplit(request.path)
        params: dict[str, Any] = dict(urllib.parse.parse_qsl(split.query))
        content_type = (request.header("content-type") or "").lower()
        if request.body and "json" in content_type:
            params.update(json.loads(request.body))
        elif request.body and "x-www-form-urlencoded" in content_type:
            params.update(urllib.parse.parse_qsl(request.body.decode()))
        # Form values are strings: read them the way Slack does.
        for key in ("mrkdwn", "unfurl_links", "unfurl_media"):
            if isinstance(params.get(key), str):
                params[key] = params[key] in ("true", "1")
        for key in ("blocks", "files"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        return params

    async def _handle(self, request: RecordedRequest) -> Reply:
        path = urllib.parse.urlsplit(request.path).path
        if path.startswith("/upload/"):
            return self._upload(path.removeprefix("/upload/"), request.body)
        if path.startswith("/files-pri/"):
            return self._download(path, request.header("authorization") or "")
        if not path.startswith("/api/"):
            return Reply(status=404, body="not found")
        method = path.removeprefix("/api/")
        params = self._params(request)
        self.calls.append((method, params))
        self._notify()
        queued = self.failures.get(method)
        if queued:
            return queued.popleft()
        auth = request.header("authorization") or ""
        token = auth.removeprefix("Bearer ").strip()
        wanted = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != wanted:
            return self._error("invalid_auth" if token else "not_authed")
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return self._error("unknown_method")
        return handler(params)

    @staticmethod
    def _ok(**data: Any) -> Reply:
        return Reply(body={"ok": True, **data})

    @staticmethod
    def _error(code: str) -> Reply:
        return Reply(body={"ok": False, "error": code})

    def _m_auth_test(self, params: dict[str, Any]) -> Reply:
        return self._ok(
            url="https://fermix-test.slack.com/",
            team="Fermix Test",
            user="fermix",
            team_id=TEAM_ID,
            user_id=self.bot_user_id,
            bot_id="B0BOT0001",
        )

    def _m_apps_connections_open(self, params: dict[str, Any]) -> Reply:
        self.connections_opened += 1
        return self._ok(url=f"ws://127.0.0.1:{self.ws_port}/link/?ticket={self.connections_opened}")

    def _m_chat_postMessage(self, params: dict[str, Any]) -> Reply:
        channel = params.get("channel")
        if not channel or channel in self.missing_channels:
            return self._error("channel_not_found")
        text = params.get("text") or ""
        if not text and not params.get("blocks"):
            return self._error("no_text")
        if len(text) > 40_000:
            return self._error("msg_too_long")
        posted = Posted(
            channel=channel,
            ts=make_ts(),
            text=text,
            thread_ts=params.get("thread_ts"),
            mrkdwn=params.get("mrkdwn"),
            unfurl_links=params.get("unfurl_links"),
            unfurl_media=params.get("unfurl_media"),
            blocks=params.get("blocks"),
        )
        self.posted.append(posted)
        self._notify()
        message = {"type": "message", "text": text, "user": self.bot_user_id, "ts": posted.ts}
        return self._ok(channel=channel, ts=posted.ts, message=message)

    def _m_chat_update(self, params: dict[str, Any]) -> Reply:
        posted = self.find(params.get("channel", ""), params.get("ts", ""))
        if posted is None or posted.deleted:
            return self._error("message_not_found")
        posted.edits.append(posted.text)
        posted.text = params.get("text") or ""
        posted.blocks = params.get("blocks")
        self._notify()
        return self._ok(channel=posted.channel, ts=posted.ts, text=posted.text)

    def _m_chat_delete(self, params: dict[str, Any]) -> Reply:
        posted = self.find(params.get("channel", ""), params.get("ts", ""))
        if posted is None or posted.deleted:
            return self._error("message_not_found")
        posted.deleted = True
        self._notify()
        return self._ok(channel=posted.channel, ts=posted.ts)

    def _m_reactions_add(self, params: dict[str, Any]) -> Reply:
        posted = self.find(params.get("channel", ""), params.get("timestamp", ""))
        if posted is None:
            return self._error("message_not_found")
        name = params.get("name", "")
        if not name or ":" in name:
            return self._error("invalid_name")
        if name in posted.reactions:
            return self._error("already_reacted")
        posted.reactions.append(name)
        self._notify()
        return self._ok()

    def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> Reply:
        filename, length = params.get("filename"), params.get("length")
        if not filename or length is None:
            return self._error("invalid_arguments")
        file_id = f"F{next(self._files):08d}"
        self.files[file_id] = UploadedFile(file_id, filename, int(length))
        return self._ok(upload_url=f"{self.http.url}/upload/{file_id}", file_id=file_id)

    def _upload(self, file_id: str, body: bytes) -> Reply:
        file = self.files.get(file_id)
        if file is None:
            return Reply(status=404, body="no such upload", headers={"content-type": "text/plain"})
        if len(body) != file.length:
            return Reply(status=400, body="length mismatch", headers={"content-type": "text/plain"})
        file.data = body
        return Reply(body=f"OK - {len(body)}", headers={"content-type": "text/plain"})

    def private_file(self, name: str, data: bytes, mimetype: str, **extra: Any) -> dict:
        """A file a user shared: Slack's file object, its bytes served to the bot token."""
        file_id = f"F{next(self._files):08d}"
        self.shared[file_id] = data
        base = f"{self.http.url}/files-pri/{TEAM_ID}-{file_id}"
        file = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "size": len(data),
            "mode": "hosted",
            "url_private": f"{base}/{name}",
            "url_private_download": f"{base}/download/{name}",
        }
        file.update(extra)
        return file

    def _download(self, path: str, auth: str) -> Reply:
        self.downloads.append(path)
        self._notify()
        if auth != f"Bearer {BOT_TOKEN}":
            # Slack answers an unauthenticated file URL with its sign-in page, not the file.
            return Reply(status=302, headers={"location": "https://slack.com/signin"})
        file_id = path.split("/")[2].split("-", 1)[1]
        data = self.shared.get(file_id)
        if data is None:
            return Reply(status=404, body="file not found")
        return Reply(body=data, headers={"content-type": "application/octet-stream"})

    def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> Reply:
        items = params.get("files")
        done = []
        for item in items or ():
            file = self.files.get(item.get("id", ""))
            if file is None or file.data is None:
                return self._error("file_not_found")
            file.title = item.get("title")
            file.channel = params.get("channel_id")
            file.thread_ts = params.get("thread_ts")
            file.initial_comment = params.get("initial_comment")
            done.append({"id": file.id, "title": file.title, "name": file.filename})
        self._notify()
        return self._ok(files=done)

    def _m_files_delete(self, params: dict[str, Any]) -> Reply:
        file = self.files.get(params.get("file", ""))
        if file is None or file.deleted:
            return self._error("file_not_found")
        file.deleted = True
        return self._ok()

    # ------------------------------------------------------------------ Socket Mode

    async def _ws_handler(self, connection: ServerConnection) -> None:
        self.sockets.append(connection)
        await connection.send(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": "A0TEST"},
                }
            )
        )
        self._notify()
        try:
            async for frame in connection:
                message = json.loads(frame)
                envelope_id = message.get("envelope_id")
                if isinstance(envelope_id, str):
                    self.acks.append(envelope_id)
                    self._notify()
        except Exception:  # noqa: S110 - a client going away is not the fake's failure
            pass
        finally:
            self._notify()

    @property
    def live_socket(self) -> ServerConnection | None:
        for connection in reversed(self.sockets):
            if connection.close_code is None:
                return connection
        return None

    async def wait_socket(self, count: int = 1) -> ServerConnection:
        """Until *count* Socket Mode connections have been greeted; the newest open one."""
        await self.wait_for(lambda: len(self.sockets) >= count and self.live_socket is not None)
        socket = self.live_socket
        assert socket is not None
        return socket

    async def push_event(self, callback: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Send an ``events_api`` envelope on the live connection; its envelope id."""
        socket = await self.wait_socket()
        envelope_id = f"env-{next(self._envelopes)}"
        await socket.send(
            json.dumps(
                {
                    "envelope_id": envelope_id,
                    "type": "events_api",
                    "accepts_response_payload": False,
                    "retry_attempt": retry_attempt,
                    "retry_reason": "timeout" if retry_attempt else "",
                    "payload": callback,
                }
            )
        )
        return envelope_id

    async def push_raw(self, frame: str) -> None:
        socket = await self.wait_socket()
        await socket.send(frame)

    async def wait_ack(self, envelope_id: str) -> None:
        await self.wait_for(lambda: envelope_id in self.acks)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's announced disconnect: the message, then the close."""
        socket = await self.wait_socket()
        await socket.send(
            json.dumps({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}})
        )
        await socket.close()

"""A loopback Telegram Bot API: real HTTP on 127.0.0.1, the Bot API's own wire.

* ``POST|GET /bot<token>/<method>`` with parameters in the query string, a JSON body, a
  form-encoded body or ``multipart/form-data`` (nested values JSON-encoded, as the Bot API
  documents); ``GET /file/bot<token>/<file_path>`` serves files named by ``getFile``.
* Every answer is the envelope: ``{"ok": true, "result": …}`` or ``{"ok": false,
  "error_code": …, "description": …, "parameters": {…}}``; a wrong token is 401
  "Unauthorized", an unknown method 404 "Not Found".
* ``getUpdates`` long-polls: it answers at once when unconfirmed updates exist, else blocks
  on an event until one is pushed or ``timeout`` seconds pass. An offset confirms (forgets)
  every update before it, as on Telegram. A webhook set with :meth:`set_webhook` makes it
  answer 409 "can't use getUpdates method while webhook is active"; a second concurrent
  poll ends the first with 409 "terminated by other getUpdates request".
* Messages carry seconds-based ``date``, ``from`` with ``is_bot``, ``chat`` with ``type``.
  HTML is checked the way Telegram checks it (known tags, balanced), so a bad body gets
  400 "can't parse entities"; text over 4096 UTF-16 units is 400 "message is too long";
  an edit to identical text is 400 "message is not modified"; a reaction outside the
  fixed set is 400 "REACTION_INVALID"; uploads are size-checked per method.
* :meth:`fail` queues an error answer for a method (429 with ``retry_after``, 5xx …).

Waiting is on events, never on sleeps.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import re
import time
import urllib.parse
from collections import defaultdict, deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import anyio
from fermix_core.testing.loopback import LoopbackServer, RecordedRequest, Reply

TOKEN = "123456789:AAH-test-bot-token-for-loopback-only-000"
BOT_ID = 123456789
BOT_USERNAME = "fermix_test_bot"
OWNER_ID = 4242001
GUEST_ID = 4242002
STRANGER_ID = 6666001
GROUP_ID = -1001234567890

_MB = 1024 * 1024
UPLOAD_CAPS = {
    "sendPhoto": ("photo", 10 * _MB),
    "sendDocument": ("document", 50 * _MB),
    "sendAudio": ("audio", 50 * _MB),
    "sendVideo": ("video", 50 * _MB),
    "sendVoice": ("voice", 1 * _MB),
}
REACTIONS = frozenset(
    [
        "👍",
        "👎",
        "❤",
        "🔥",
        "🥰",
        "👏",
        "😁",
        "🤔",
        "🤯",
        "😱",
        "🤬",
        "😢",
        "🎉",
        "🤩",
        "🤮",
        "💩",
        "🙏",
        "👌",
        "🕊",
        "🤡",
        "🥱",
        "🥴",
        "😍",
        "🐳",
        "❤\u200d🔥",
        "🌚",
        "🌭",
        "💯",
        "🤣",
        "⚡",
        "🍌",
        "🏆",
        "💔",
        "🤨",
        "😐",
        "🍓",
        "🍾",
        "💋",
        "🖕",
        "😈",
        "😴",
        "😭",
        "🤓",
        "👻",
        "👨\u200d💻",
        "👀",
        "🎃",
        "🙈",
        "😇",
        "😨",
        "🤝",
        "✍",
        "🤗",
        "🫡",
        "🎅",
        "🎄",
        "☃",
        "💅",
        "🤪",
        "🗿",
        "🆒",
        "💘",
        "🙉",
        "🦄",
        "😘",
        "💊",
        "🙊",
        "😎",
        "👾",
        "🤷\u200d♂",
        "🤷",
        "🤷\u200d♀",
        "😡",
    ]
)
_HTML_TAGS = frozenset(
    [
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ]
)


_ENTITY_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "a": "text_link",
}


class _TelegramHtml(HTMLParser):
    """Telegram's HTML rules (known tags only, properly nested), and what Telegram makes
    of a valid body: the plain text plus ``entities`` with UTF-16 offsets."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, int, dict[str, str | None]]] = []
        self.error: str | None = None
        self.text = ""
        self.entities: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HTML_TAGS:
            self.error = self.error or f'unsupported start tag "{tag}"'
        self.stack.append((tag, utf16_len(self.text), dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1][0] != tag:
            self.error = self.error or f'unmatched end tag "{tag}"'
            return
        _, start, attrs = self.stack.pop()
        kind = _ENTITY_TYPES.get(tag)
        if tag == "span" and attrs.get("class") == "tg-spoiler":
            kind = "spoiler"
        if tag == "blockquote" and "expandable" in attrs:
            kind = "expandable_blockquote"
        length = utf16_len(self.text) - start
        if kind is None or length == 0:
            return
        entity: dict[str, Any] = {"type": kind, "offset": start, "length": length}
        if kind == "text_link":
            entity["url"] = attrs.get("href") or ""
        self.entities.append(entity)

    def handle_data(self, data: str) -> None:
        self.text += data


def parse_html(text: str) -> tuple[str | None, str, list[dict[str, Any]]]:
    """``(error, plain text, entities)`` for an HTML body."""
    parser = _TelegramHtml()
    parser.feed(text)
    parser.close()
    if parser.error is None and parser.stack:
        return (
            f'can\'t find end tag corresponding to start tag "{parser.stack[-1][0]}"',
            "",
            [],
        )
    entities = sorted(parser.entities, key=lambda e: (e["offset"], -e["length"]))
    return parser.error, parser.text, entities


def html_error(text: str) -> str | None:
    return parse_html(text)[0]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class ApiError(Exception):
    def __init__(self, code: int, description: str, parameters: dict | None = None) -> None:
        self.code, self.description, self.parameters = code, description, parameters


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    content_type: str = ""


def _decode_value(value: str) -> Any:
    """Form and multipart fields: nested values arrive JSON-encoded."""
    if value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def parse_params(request: RecordedRequest) -> tuple[dict[str, Any], dict, str]:
    query = urllib.parse.urlsplit(request.path).query
    params: dict[str, Any] = {
        k: _decode_value(v) for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)
    }
    files: dict[str, tuple[str, bytes]] = {}
    ctype = request.header("content-type") or ""
    body = request.body
    if not body:
        return params, files, ctype
    if ctype.startswith("application/json"):
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ApiError(400, "Bad Request: the JSON body must be an object")
        params.update(data)
    elif ctype.startswith("application/x-www-form-urlencoded"):
        for key, value in urllib.parse.parse_qsl(body.decode(), keep_blank_values=True):
            params[key] = _decode_value(value)
    elif ctype.startswith("multipart/form-data"):
        raw = b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename()
            payload = part.get_payload(decode=True) or b""
            if filename is not None:
                files[name] = (filename, payload)
            else:
                params[name] = _decode_value(payload.decode())
    else:
        raise ApiError(400, f"Bad Request: unsupported content type {ctype!r}")
    return params, files, ctype


class FakeBotApi:
    """The loopback Bot API. Use as ``async with FakeBotApi() as fake:``."""

    def __init__(self, *, token: str = TOKEN) -> None:
        self.token = token
        self.server = LoopbackServer(self._handle)
        self.bot = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Fermix",
            "username": BOT_USERNAME,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1000)
        self._message_ids: dict[int, itertools.count] = defaultdict(lambda: itertools.count(1))
        self._update_event = anyio.Event()
        self._changed = anyio.Event()
        self._poll_generation = 0
        self.confirmed_offset = 0
        self.webhook_url = ""
        self.failures: dict[str, deque[ApiError]] = defaultdict(deque)
        #: chat id -> message id -> the message as Telegram holds it
        self.messages: dict[int, dict[int, dict[str, Any]]] = defaultdict(dict)
        self.reactions: list[tuple[int, int, list]] = []
        self.callback_answers: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.downloads: list[str] = []
        self.file_requests: list[str] = []
        self.polls = 0
        self.last_allowed_updates: Any = None

    @property
    def url(self) -> str:
        return self.server.url

    async def __aenter__(self) -> FakeBotApi:
        await self.server.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._wake_polls()
        await self.server.__aexit__(*exc)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _wake_polls(self) -> None:
        self._update_event.set()
        self._update_event = anyio.Event()

    async def until(self, condition: Any, timeout: float = 10) -> None:
        """Wait (on events) until *condition()* holds; *timeout* is a failure bound."""
        with anyio.fail_after(timeout):
            while True:
                changed = self._changed
                if condition():
                    return
                await changed.wait()

    # ------------------------------------------------------------------ driving

    def fail(self, method: str, code: int, description: str, **parameters: Any) -> None:
        self.failures[method].append(ApiError(code, description, parameters or None))

    def set_webhook(self, url: str) -> None:
        self.webhook_url = url

    def push(self, **update: Any) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids), **update}
        self.updates.append(update)
        self._wake_polls()
        self._notify()
        return update

    def user(self, user_id: int = OWNER_ID, **extra: Any) -> dict[str, Any]:
        return {
            "id": user_id,
            "is_bot": False,
            "first_name": extra.pop("first_name", "Ada"),
            "last_name": extra.pop("last_name", "Lovelace"),
            "language_code": "en",
            **extra,
        }

    def chat(self, chat_id: int = OWNER_ID, kind: str | None = None) -> dict[str, Any]:
        kind = kind or ("private" if chat_id > 0 else "supergroup")
        chat: dict[str, Any] = {"id": chat_id, "type": kind}
        if kind == "private":
            chat.update(first_name="Ada", last_name="Lovelace")
        else:
            chat["title"] = "Test group"
        return chat

    def message(
        self,
        text: str | None = "hello",
        *,
        sender: int = OWNER_ID,
        chat_id: int | None = None,
        chat_type: str | None = None,
        sender_is_bot: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        """Push a ``message`` update as Telegram would deliver it; returns the update."""
        chat_id = sender if chat_id is None else chat_id
        author = self.user(sender, is_bot=sender_is_bot)
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids[chat_id]),
            "from": author,
            "chat": self.chat(chat_id, chat_type),
            "date": int(time.time()),
        }
        if text is not None:
            msg["text"] = text
            command = re.match(r"^/\S+", text)
            if command:
                msg["entities"] = [
                    {"type": "bot_command", "offset": 0, "length": utf16_len(command.group())}
                ]
        msg.update(extra)
        self.messages[chat_id][msg["message_id"]] = msg
        return self.push(message=msg)

    def add_file(self, data: bytes, *, path: str = "documents/file_0.bin") -> str:
        file_id = f"FILE{len(self.files) + 1:04d}"
        self.files[file_id] = (path, data)
        return file_id

    def tap(self, data: str, *, sender: int = OWNER_ID, on: dict[str, Any]) -> dict[str, Any]:
        """Push a ``callback_query`` for a button on the bot message *on*."""
        return self.push(
            callback_query={
                "id": f"cbq{next(self._update_ids)}",
                "from": self.user(sender),
                "message": on,
                "chat_instance": "1234567890",
                "data": data,
            }
        )

    def sent_html(self, chat_id: int | str) -> list[str]:
        """The bodies as the bot sent them (with markup), oldest first."""
        return [m["_params"].get("text", "") for m in self.sent(chat_id)]

    def sent(self, chat_id: int | str) -> list[dict[str, Any]]:
        return [m for m in self.messages[int(chat_id)].values() if m["from"]["id"] == BOT_ID]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_sent(self, chat_id: int | str, count: int = 1, timeout: float = 10) -> list:
        await self.until(lambda: len(self.sent(chat_id)) >= count, timeout)
        return self.sent(chat_id)

    async def wait_call(self, method: str, count: int = 1, timeout: float = 10) -> list[Call]:
        await self.until(lambda: len(self.calls_to(method)) >= count, timeout)
        return self.calls_to(method)

    async def wait_confirmed(self, offset: int, timeout: float = 10) -> None:
        """Until a getUpdates confirmed every update below *offset*."""
        await self.until(lambda: self.confirmed_offset >= offset, timeout)

    async def wait_polling(self, count: int = 1, timeout: float = 10) -> None:
        """Until *count* getUpdates calls are waiting or done."""
        await self.until(lambda: self.polls >= count, timeout)

    # ------------------------------------------------------------------ serving

    async def _handle(self, request: RecordedRequest) -> Reply:
        path = urllib.parse.unquote(urllib.parse.urlsplit(request.path).path)
        if path.startswith("/file/bot"):
            return self._file(path)
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", path)
        if match is None:
            return self._error(ApiError(404, "Not Found"))
        if match.group(1) != self.token:
            return self._error(ApiError(401, "Unauthorized"))
        method = match.group(2)
        try:
            params, files, ctype = parse_params(request)
            self.calls.append(Call(method, params, files, ctype))
            queued = self.failures.get(method)
            if queued:
                raise queued.popleft()
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            result = handler(params, files)
            if hasattr(result, "__await__"):
                result = await result
        except ApiError as exc:
            return self._error(exc)
        finally:
            self._notify()
        return Reply(body={"ok": True, "result": result})

    @staticmethod
    def _error(exc: ApiError) -> Reply:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": exc.code,
            "description": exc.description,
        }
        if exc.parameters:
            body["parameters"] = exc.parameters
        return Reply(status=exc.code, body=body)

    def _file(self, path: str) -> Reply:
        prefix = f"/file/bot{self.token}/"
        self.file_requests.append(path)
        if not path.startswith(prefix):
            return Reply(
                status=401, body={"ok": False, "error_code": 401, "description": "Unauthorized"}
            )
        wanted = path[len(prefix) :]
        for stored_path, data in self.files.values():
            if stored_path == wanted:
                self.downloads.append(wanted)
                return Reply(body=data, headers={"content-type": "application/octet-stream"})
        return Reply(status=404, body={"ok": False, "error_code": 404, "description": "Not Found"})

    # ------------------------------------------------------------------ methods

    @staticmethod
    def _int(params: dict[str, Any], key: str, *, required: bool = True) -> int | None:
        value = params.get(key)
        if value is None or value == "":
            if required:
                raise ApiError(400, f"Bad Request: {key} is empty")
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ApiError(400, f"Bad Request: invalid {key} specified") from None

    @staticmethod
    def _bool(params: dict[str, Any], key: str) -> bool:
        value = params.get(key)
        return value is True or value in ("true", "True", "1")

    def _chat(self, params: dict[str, Any]) -> int:
        chat_id = self._int(params, "chat_id")
        assert chat_id is not None
        if chat_id not in self.messages and chat_id > 0 and chat_id not in (OWNER_ID, GUEST_ID):
            raise ApiError(400, "Bad Request: chat not found")
        return chat_id

    def _m_getMe(self, params: dict, files: dict) -> dict:
        return self.bot

    def _m_getWebhookInfo(self, params: dict, files: dict) -> dict:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.updates),
        }

    def _m_deleteWebhook(self, params: dict, files: dict) -> bool:
        self.webhook_url = ""
        return True

    async def _m_getUpdates(self, params: dict, files: dict) -> list:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; use "
                "deleteWebhook to delete the webhook first",
            )
        self._poll_generation += 1
        generation = self._poll_generation
        self._wake_polls()  # an older poll still waiting ends with 409, as on Telegram
        offset = self._int(params, "offset", required=False)
        timeout = self._int(params, "timeout", required=False) or 0
        limit = self._int(params, "limit", required=False) or 100
        allowed = params.get("allowed_updates")
        self.last_allowed_updates = allowed
        if offset is not None and offset > 0:
            self.confirmed_offset = max(self.confirmed_offset, offset)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        self.polls += 1
        self._notify()
        with anyio.move_on_after(timeout):
            while True:
                woken = self._update_event
                if generation != self._poll_generation:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request; make sure that "
                        "only one bot instance is running",
                    )
                pending = [u for u in self.updates if not allowed or any(k in u for k in allowed)]
                if pending:
                    return pending[:limit]
                await woken.wait()
        return []

    def _store(self, chat_id: int, params: dict, **content: Any) -> dict:
        message_id = next(self._message_ids[chat_id])
        msg: dict[str, Any] = {
            "message_id": message_id,
            "from": {k: self.bot[k] for k in ("id", "is_bot", "first_name", "username")},
            "chat": self.chat(chat_id),
            "date": int(time.time()),
            **content,
        }
        thread = self._int(params, "message_thread_id", required=False)
        if thread is not None:
            msg["message_thread_id"] = thread
            msg["is_topic_message"] = True
        reply = params.get("reply_parameters")
        if isinstance(reply, dict) and reply.get("message_id") is not None:
            target = self.messages[chat_id].get(int(reply["message_id"]))
            if target is None and not reply.get("allow_sending_without_reply"):
                raise ApiError(400, "Bad Request: message to be replied not found")
            if target is not None:
                msg["reply_to_message"] = target
        if "reply_markup" in params:
            msg["reply_markup"] = params["reply_markup"]
        msg["_params"] = params
        self.messages[chat_id][message_id] = msg
        return {k: v for k, v in msg.items() if k != "_params"}

    def _check_text(self, text: Any, parse_mode: Any) -> dict[str, Any]:
        """The ``text``/``entities`` Telegram stores for a body (markup parsed away)."""
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        entities: list[dict[str, Any]] = []
        if parse_mode == "HTML":
            problem, text, entities = parse_html(text)
            if problem:
                raise ApiError(
                    400, f"Bad Request: can't parse entities: {problem} at byte offset 0"
                )
            if not text.strip():
                raise ApiError(400, "Bad Request: message text is empty")
        elif parse_mode not in (None, ""):
            raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")
        if utf16_len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        return {"text": text, **({"entities": entities} if entities else {})}

    def _m_sendMessage(self, params: dict, files: dict) -> dict:
        chat_id = self._chat(params)
        content = self._check_text(params.get("text"), params.get("parse_mode"))
        return self._store(chat_id, params, **content)

    def _m_editMessageText(self, params: dict, files: dict) -> dict:
        chat_id = self._chat(params)
        message_id = self._int(params, "message_id")
        msg = self.messages[chat_id].get(message_id or 0)
        if msg is None or msg["from"]["id"] != BOT_ID:
            raise ApiError(400, "Bad Request: message to edit not found")
        content = self._check_text(params.get("text"), params.get("parse_mode"))
        same_markup = params.get("reply_markup") == msg.get("reply_markup")
        if (
            content["text"] == msg.get("text")
            and content.get("entities") == msg.get("entities")
            and (same_markup or "reply_markup" not in params)
        ):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup of "
                "the message",
            )
        msg.pop("entities", None)
        msg.update(content)
        msg["_params"] = {**msg["_params"], **params}
        msg["edit_date"] = int(time.time())
        return {k: v for k, v in msg.items() if k != "_params"}

    def _m_deleteMessage(self, params: dict, files: dict) -> bool:
        chat_id = self._chat(params)
        message_id = self._int(params, "message_id")
        if self.messages[chat_id].pop(message_id or 0, None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        return True

    def _m_setMessageReaction(self, params: dict, files: dict) -> bool:
        chat_id = self._chat(params)
        message_id = self._int(params, "message_id")
        if message_id not in self.messages[chat_id]:
            raise ApiError(400, "Bad Request: message to react not found")
        reaction = params.get("reaction") or []
        for item in reaction:
            if item.get("type") != "emoji" or item.get("emoji") not in REACTIONS:
                raise ApiError(400, "Bad Request: REACTION_INVALID")
        self.reactions.append((chat_id, message_id, reaction))
        return True

    def _m_sendChatAction(self, params: dict, files: dict) -> bool:
        self._chat(params)
        if params.get("action") not in ("typing", "upload_photo", "upload_document"):
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        self.actions.append(params)
        return True

    def _m_answerCallbackQuery(self, params: dict, files: dict) -> bool:
        if not params.get("callback_query_id"):
            raise ApiError(400, "Bad Request: query is too old and response timeout expired")
        self.callback_answers.append(params)
        return True

    def _m_getFile(self, params: dict, files: dict) -> dict:
        file_id = params.get("file_id")
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        path, data = self.files[file_id]
        if len(data) > 20 * _MB:
            raise ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"U{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    def _upload(self, method: str, params: dict, files: dict) -> dict:
        chat_id = self._chat(params)
        field_name, cap = UPLOAD_CAPS[method]
        if field_name not in files:
            raise ApiError(400, f"Bad Request: there is no {field_name} in the request")
        filename, data = files[field_name]
        if len(data) > cap:
            raise ApiError(413, "Request Entity Too Large")
        file_id = self.add_file(data, path=f"{field_name}s/{filename}")
        item = {"file_id": file_id, "file_unique_id": f"U{file_id}", "file_size": len(data)}
        content: dict[str, Any] = {field_name: item}
        if method == "sendPhoto":
            content["photo"] = [{**item, "width": 1, "height": 1}]
        elif method == "sendVideo":
            item.update(duration=1, width=1, height=1)
        elif method in ("sendVoice", "sendAudio"):
            item["duration"] = 1
        if params.get("caption"):
            content["caption"] = params["caption"]
        return self._store(chat_id, params, **content)

    def _m_sendPhoto(self, params: dict, files: dict) -> dict:
        return self._upload("sendPhoto", params, files)

    def _m_sendDocument(self, params: dict, files: dict) -> dict:
        return self._upload("sendDocument", params, files)

    def _m_sendAudio(self, params: dict, files: dict) -> dict:
        return self._upload("sendAudio", params, files)

    def _m_sendVideo(self, params: dict, files: dict) -> dict:
        return self._upload("sendVideo", params, files)

    def _m_sendVoice(self, params: dict, files: dict) -> dict:
        return self._upload("sendVoice", params, files)

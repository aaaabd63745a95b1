"""The Slack channel: Events API webhooks or Socket Mode in, Web API replies out.

Inbound, both transports end in :meth:`SlackChannel.handle_callback`: an Events API
``event_callback`` body is normalized by :mod:`.parse` and handed to ``host.deliver``, whose
idempotency record (keyed on ``<channel>:<ts>``) makes Slack's retries — a webhook
redelivery with ``X-Slack-Retry-Num``, an unacknowledged Socket Mode envelope — run once.
The webhook answers as soon as the hand-off returns (Slack retries answers slower than three
seconds); a failed hand-off answers 503 so Slack retries it.

Outbound text arrives rendered in Slack mrkdwn (``dialect = "slack"``) and is posted with
``chat.postMessage``, link and media unfurling off; ``plain`` text is posted with
``mrkdwn: false``. Slack cannot mute one message (``silent`` has no effect) and gives bots
no typing indicator over the Web API, so ``supports_typing`` is false.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import anyio
import httpx
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    Channel,
    ChannelError,
    ChannelHost,
    ChannelTransientError,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    SentMessage,
    WebhookRequest,
    WebhookResponse,
    WebhookRoute,
    inbound_cap,
)
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.transcription.inbound import withheld

from fermix_channels.slack.client import MAX_UPLOAD_BYTES, SlackApi, SlackRefused
from fermix_channels.slack.config import SlackConfig
from fermix_channels.slack.parse import (
    MalformedPayload,
    Skip,
    SlackRef,
    classify,
    parse_body,
    to_inbound,
)
from fermix_channels.slack.socket import SocketModeClient
from fermix_channels.slack.verify import SignatureError, SlackVerifier

__all__ = ["REACTIONS", "WEBHOOK_PATH", "SlackChannel"]

log = logging.getLogger("fermix_channels.slack")

WEBHOOK_PATH = "/webhook/slack"
#: Events API bodies are a few kilobytes; anything near this is not from Slack.
MAX_WEBHOOK_BODY = 1_048_576
#: How long start() waits for the first Socket Mode hello before returning anyway.
SOCKET_HELLO_WAIT = 10.0
#: Largest file taken from an inbound message; larger ones are named in the text instead.
MAX_INBOUND_FILE = 25 * 1024 * 1024

#: Slack built-in emoji shortcodes offered to the model for reactions (``reactions.add``
#: takes the name without colons). Any other built-in or custom shortcode works too.
REACTIONS: tuple[str, ...] = (
    "thumbsup",
    "thumbsdown",
    "white_check_mark",
    "heavy_check_mark",
    "x",
    "eyes",
    "heart",
    "tada",
    "pray",
    "raised_hands",
    "clap",
    "ok_hand",
    "muscle",
    "wave",
    "fire",
    "rocket",
    "sparkles",
    "star",
    "100",
    "bulb",
    "thinking_face",
    "joy",
    "smile",
    "slightly_smiling_face",
    "warning",
    "hourglass_flowing_sand",
)

#: Unicode emoji a caller may pass instead of the shortcode.
_EMOJI_SHORTCODES = {
    "👍": "thumbsup",
    "👎": "thumbsdown",
    "✅": "white_check_mark",
    "✔️": "heavy_check_mark",
    "✔": "heavy_check_mark",
    "❌": "x",
    "👀": "eyes",
    "❤️": "heart",
    "❤": "heart",
    "🎉": "tada",
    "🙏": "pray",
    "🙌": "raised_hands",
    "👏": "clap",
    "👌": "ok_hand",
    "💪": "muscle",
    "👋": "wave",
    "🔥": "fire",
    "🚀": "rocket",
    "✨": "sparkles",
    "⭐": "star",
    "💯": "100",
    "💡": "bulb",
    "🤔": "thinking_face",
    "😂": "joy",
    "😄": "smile",
    "🙂": "slightly_smiling_face",
    "⚠️": "warning",
    "⚠": "warning",
    "⏳": "hourglass_flowing_sand",
}

_SHORTCODE = re.compile(r"^[a-z0-9_+'\-]{1,100}$")
#: ``chat.update`` has no ``mrkdwn`` switch: a plain edit goes out as plain_text sections,
#: each at most Slack's 3,000 characters.
_SECTION_CHARS = 3000
_FILE_PREFIX = "file:"


def _escape(text: str) -> str:
    """Slack's three control characters, escaped so plain text shows as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shortcode(emoji: str) -> str:
    """The ``reactions.add`` name for *emoji*: a shortcode (colons optional) or a known emoji."""
    value = emoji.strip()
    if value in _EMOJI_SHORTCODES:
        return _EMOJI_SHORTCODES[value]
    value = value.strip(":").lower()
    if _SHORTCODE.match(value):
        return value
    raise ChannelError(
        f"Slack reactions take an emoji shortcode such as {', '.join(REACTIONS[:4])}, not {emoji!r}"
    )


def _response(status: int, body: str = "") -> WebhookResponse:
    return WebhookResponse(status=status, body=body.encode())


class SlackChannel(Channel):
    """The ``slack`` channel (built by the runtime from ``fermix_channels.slack.plugin``)."""

    name = "slack"
    supports_edit = True
    supports_delete = True
    supports_reactions = True
    supports_typing = False
    dialect = "slack"
    max_text = 40_000
    text_measure = "chars"
    media_caps = MappingProxyType({"document": MAX_UPLOAD_BYTES})
    max_inbound_media = MAX_INBOUND_FILE
    reactions_allowed = REACTIONS
    #: Slack lets an app post about one message per second to one channel (short bursts
    #: aside); the core's outbound port paces each chat to it instead of meeting 429s.
    send_interval = 1.0

    def __init__(
        self,
        config: SlackConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        home: Any = None,
        now: Callable[[], float] = time.time,
        **_: Any,
    ) -> None:
        self.config = config if config is not None else SlackConfig()
        self._http = http
        self._now = now
        self.host: ChannelHost | None = None
        #: Whether start() ever ran: a route hit before any start belongs to a channel the
        #: runtime refused (no owner, no allowlist), whose routes deny every sender.
        self._ever_started = False
        self.bot_user_id: str | None = self.config.bot_user_id
        self.api: SlackApi | None = None
        self._verifier: SlackVerifier | None = None
        self._socket: SocketModeClient | None = None
        self._scope: anyio.CancelScope | None = None
        #: Platform ids being delivered right now (their files still downloading).
        self._fetching: set[str] = set()
        self._trust = TrustPolicy.from_section(self.config, channel=self.name)

    # ------------------------------------------------------------------ secrets

    async def _secret(self, key: str, env: str) -> str | None:
        """A credential from the section: plaintext as is; keyring/env/command resolved."""
        value = getattr(self.config, key)
        if value is None or (isinstance(value, str) and value and value != "@keyring"):
            return value or None
        from fermix_core.config.secret import SecretField

        from fermix_channels.secrets import resolve_field, resolver_of

        field = SecretField(("fermix_channels", "slack", key), env, value)
        resolved = await resolve_field(field, resolver_of(self.host))
        if resolved.value is None:
            raise ChannelError(
                resolved.problem
                or f"[fermix_channels.slack] {key} could not be resolved; run `fermix doctor`"
            )
        return resolved.value

    async def _require(self, key: str, env: str, why: str) -> str:
        value = await self._secret(key, env)
        if not value:
            raise ChannelError(
                f"[fermix_channels.slack] {key} is not set ({why}); set it in config.toml, "
                f"in ${env}, or run `fermix setup --reconfigure`"
            )
        return value

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: ChannelHost) -> None:
        self.host = host
        self._ever_started = True
        host.report("starting")
        token = await self._require("bot_token", "SLACK_BOT_TOKEN", "replies need it")
        self.api = SlackApi(token, self.config.api_base_url, http=self._http or host.http)
        if self.config.mode == "events":
            await self._ensure_verifier()
        else:
            app_token = await self._require(
                "app_token", "SLACK_APP_TOKEN", 'mode = "socket" connects with it'
            )
            if not app_token.startswith("xapp-"):
                raise ChannelError(
                    "[fermix_channels.slack] app_token must be an app-level token (xapp-…) "
                    "from the app's Basic Information page, not a bot or user token"
                )
        if self.bot_user_id is None:
            identity = await self.api.auth_test()
            user_id = identity.get("user_id")
            self.bot_user_id = user_id if isinstance(user_id, str) and user_id else None
        if self.config.mode == "socket":
            self._socket = SocketModeClient(
                self.api, app_token, self._on_envelope, on_state=self._on_socket_state
            )
            # The scope exists before the task runs, so a stop() right after start() holds.
            self._scope = anyio.CancelScope()
            host.task_group.start_soon(self._run_socket, self._socket, self._scope)
            # Running means connected: wait (bounded) for Slack's hello, which reports ready.
            # Past the bound the loop keeps trying and the channel shows as degraded.
            with anyio.move_on_after(SOCKET_HELLO_WAIT):
                await self._socket.greeted.wait()
            if not self._socket.greeted.is_set():
                host.report("degraded", "no Socket Mode hello from Slack yet; still trying")
        else:
            host.report("ready")

    @staticmethod
    async def _run_socket(socket: SocketModeClient, scope: anyio.CancelScope) -> None:
        with scope:
            await socket.run()

    def _on_socket_state(self, state: str, error: str | None) -> None:
        if self.host is not None:
            self.host.report(state, error)

    async def stop(self) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.cancel()
        socket, self._socket = self._socket, None
        if socket is not None:
            with anyio.CancelScope(shield=True):
                await socket.close()
        api, self.api = self.api, None
        if api is not None:
            with anyio.CancelScope(shield=True):
                await api.aclose()
        self.host = None

    # ------------------------------------------------------------------ inbound

    def webhook_routes(self) -> Sequence[WebhookRoute]:
        if self.config.mode != "events":
            return ()
        return (
            WebhookRoute(
                path=WEBHOOK_PATH,
                methods=("POST",),
                handler=self.handle_webhook,
                max_body_bytes=MAX_WEBHOOK_BODY,
            ),
        )

    async def _ensure_verifier(self) -> SlackVerifier:
        if self._verifier is None:
            secret = await self._require(
                "signing_secret", "SLACK_SIGNING_SECRET", 'mode = "events" verifies requests'
            )
            self._verifier = SlackVerifier(secret, now=self._now)
        return self._verifier

    async def handle_webhook(self, request: WebhookRequest) -> WebhookResponse:
        """``POST /webhook/slack``: verify → parse → hand off → answer."""
        if len(request.body) > MAX_WEBHOOK_BODY:
            return _response(413, "body too large")
        try:
            verifier = await self._ensure_verifier()
        except ChannelError as exc:
            log.error("slack webhook refused: %s", exc)
            return _response(503, "signing secret not configured")
        try:
            verifier.verify(request.headers, request.body)
        except SignatureError as exc:
            log.warning("slack webhook: rejected a request: %s", exc)
            return _response(401, "invalid signature")
        try:
            parsed = parse_body(request.body)
        except MalformedPayload as exc:
            log.warning("slack webhook: rejected a signed request: %s", exc)
            return _response(400, "malformed payload")
        if parsed.kind == "url_verification":
            return _response(200, parsed.challenge)
        if parsed.kind != "event_callback":
            self._log_other(parsed.type, parsed.data)
            return _response(200)
        retry = request.headers.get("x-slack-retry-num")
        if retry is not None:
            log.info(
                "slack webhook: retry %s (%s)",
                retry,
                request.headers.get("x-slack-retry-reason", "unknown reason"),
            )
        outcome = await self.handle_callback(parsed.data)
        if outcome == "unavailable":
            return WebhookResponse(status=503, body=b"try again", headers={"retry-after": "1"})
        if outcome == "restarting":
            return WebhookResponse(status=503, body=b"restarting", headers={"retry-after": "5"})
        return _response(200)

    @staticmethod
    def _log_other(kind: str, data: dict[str, Any]) -> None:
        if kind == "app_rate_limited":
            log.warning(
                "Slack is rate-limiting event deliveries to this app (minute %s); events in "
                "that minute are not delivered",
                data.get("minute_rate_limited"),
            )
        else:
            log.info("slack: ignored a %r payload", kind[:64])

    async def handle_callback(self, callback: dict[str, Any]) -> str:
        """One ``event_callback`` from either transport. Answers what happened:
        ``accepted``, ``duplicate``, ``dropped``, ``skipped`` (not a turn), ``refused`` (the
        channel never started), ``restarting`` or ``unavailable`` (retry later)."""
        host = self.host
        if host is None:
            if self._ever_started:
                return "restarting"
            log.info("slack: dropped an event; the channel is not serving (see fermix doctor)")
            return "refused"
        bot_user_id = self.bot_user_id or _authorized_bot(callback)
        message = to_inbound(callback, channel_name=self.name, bot_user_id=bot_user_id)
        if isinstance(message, Skip):
            log.debug("slack: skipped an event: %s", message.reason)
            return "skipped"
        platform_id = message.message_id or ""
        if platform_id in self._fetching:
            return "duplicate"  # a retry while the first delivery still downloads its files
        self._fetching.add(platform_id)
        try:
            ref = message.raw_ref
            if isinstance(ref, SlackRef) and ref.files:
                message = await self._with_files(host, message, ref.files)
            result = await host.deliver(message)
        except (DeliveryUnavailable, ChannelTransientError) as exc:
            log.warning("slack: hand-off failed, Slack will retry: %s", exc)
            return "unavailable"
        finally:
            self._fetching.discard(platform_id)
        return str(result.value)

    async def _with_files(
        self, host: ChannelHost, message: InboundMessage, files: list[dict[str, Any]]
    ) -> InboundMessage:
        """The message with its Slack files downloaded — only for an allowed sender and a
        message not delivered before, so a stranger or a retry costs no download."""
        if self._trust.authorize(message.sender_id) is None:
            return message  # the gateway drops it; nothing is fetched on a stranger's behalf
        if message.message_id and await host.seen(message.message_id):
            return message
        api = self._api()
        attachments: list[Attachment] = []
        notes: list[str] = []
        for file in files:
            name = str(file.get("name") or file.get("title") or "file")[:200]
            url = file.get("url_private_download") or file.get("url_private")
            size = file.get("size")
            if not isinstance(url, str) or not url:
                notes.append(f"[attachment not received: {name} is not available to the bot]")
                continue
            mime = file.get("mimetype") if isinstance(file.get("mimetype"), str) else None
            cap = inbound_cap(host, _kind(mime), mime)
            if cap is not None and isinstance(size, int) and size > cap:
                # The gateway answers "too large" (the transcription cap); nothing is fetched.
                attachments.append(withheld(size, kind=_kind(mime), mime_type=mime, filename=name))
                continue
            if isinstance(size, int) and size > MAX_INBOUND_FILE:
                if _kind(mime) is AttachmentKind.IMAGE:  # the gateway answers naming the cap
                    attachments.append(_withheld(mime, name, size))
                    continue
                notes.append(f"[attachment not received: {name} is over {_mb(MAX_INBOUND_FILE)}]")
                continue
            try:
                data = await api.download(url, limit=MAX_INBOUND_FILE)
            except ChannelTransientError:
                raise
            except ChannelError as exc:
                log.warning("slack: could not fetch a file: %s", exc)
                notes.append(f"[attachment not received: {name} could not be fetched]")
                continue
            if data is None:
                if _kind(mime) is AttachmentKind.IMAGE:
                    attachments.append(_withheld(mime, name, None))
                    continue
                notes.append(f"[attachment not received: {name} is over {_mb(MAX_INBOUND_FILE)}]")
                continue
            attachments.append(
                Attachment(kind=_kind(mime), data=data, mime_type=mime, filename=name)
            )
        text = "\n".join([message.text, *notes]).strip() if notes else message.text
        return message.model_copy(update={"attachments": attachments, "text": text})

    async def _on_envelope(self, payload: dict[str, Any]) -> bool:
        try:
            parsed = classify(payload)
        except MalformedPayload as exc:
            log.warning("slack socket mode: ignored a malformed envelope payload: %s", exc)
            return True
        if parsed.kind != "event_callback":
            self._log_other(parsed.type, parsed.data)
            return True
        return await self.handle_callback(parsed.data) not in ("unavailable", "restarting")

    # ------------------------------------------------------------------ outbound

    def _api(self) -> SlackApi:
        if self.api is None:
            raise ChannelError("the slack channel is not running; start it first")
        return self.api

    async def send(self, message: OutboundMessage) -> SentMessage:
        api = self._api()
        sent: str | None = None
        if message.text.strip():
            text = _escape(message.text) if message.plain else message.text
            data = await api.post_message(
                message.chat_id, text, thread_ts=message.thread_id, mrkdwn=not message.plain
            )
            sent = _ts(data, "chat.postMessage")
        for attachment in message.attachments:
            file_id = await self._upload(api, message, attachment)
            sent = sent or f"{_FILE_PREFIX}{file_id}"
        assert sent is not None  # OutboundMessage guarantees text or an attachment
        return SentMessage(message_id=sent)

    async def _upload(self, api: SlackApi, message: OutboundMessage, item: Attachment) -> str:
        size = item.size
        if size is None and item.path is not None:
            size = (await anyio.Path(item.path).stat()).st_size
        if size is not None and size > MAX_UPLOAD_BYTES:
            raise ChannelError(
                f"Slack takes files up to {MAX_UPLOAD_BYTES // (1024 * 1024)} MB; "
                f"{item.filename or 'this file'} is {size / (1024 * 1024):.1f} MB"
            )
        data = await anyio.to_thread.run_sync(item.read_bytes)
        filename = item.filename or (item.path.name if item.path is not None else item.kind.value)
        result = await api.upload(
            message.chat_id,
            data,
            filename=filename,
            title=filename,
            initial_comment=item.caption,
            thread_ts=message.thread_id,
        )
        file = result.get("file")
        if not isinstance(file, dict):
            files = result.get("files")
            file = files[0] if isinstance(files, list) and files else {}
        file_id = file.get("id") if isinstance(file, dict) else None
        if not isinstance(file_id, str) or not file_id:
            raise ChannelError("Slack files.completeUploadExternal returned no file id")
        return file_id

    async def edit(self, chat_id: str, message_id: str, text: str, *, plain: bool = False) -> None:
        if message_id.startswith(_FILE_PREFIX):
            raise ChannelError("a file posted to Slack cannot be edited; send a new message")
        blocks = None
        if plain:
            blocks = [
                {
                    "type": "section",
                    "text": {"type": "plain_text", "text": text[i : i + _SECTION_CHARS]},
                }
                for i in range(0, len(text), _SECTION_CHARS)
            ]
        await self._api().update(chat_id, message_id, text, blocks=blocks)

    async def delete(self, chat_id: str, message_id: str) -> None:
        api = self._api()
        try:
            if message_id.startswith(_FILE_PREFIX):
                await api.delete_file(message_id[len(_FILE_PREFIX) :])
            else:
                await api.delete(chat_id, message_id)
        except SlackRefused as exc:
            if exc.code not in ("message_not_found", "file_deleted", "file_not_found"):
                raise
            # already gone: what the delete was for holds

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        if message_id.startswith(_FILE_PREFIX):
            raise ChannelError("reactions go on messages, not on uploaded files")
        try:
            await self._api().react(chat_id, message_id, shortcode(emoji))
        except SlackRefused as exc:
            if exc.code != "already_reacted":
                raise


def _mb(size: int) -> str:
    return f"{size // (1024 * 1024)} MB"


def _withheld(mime: str | None, name: str, size: int | None) -> Attachment:
    """An image over the inbound cap: announced, not downloaded (the gateway refuses it)."""
    return Attachment(
        kind=AttachmentKind.IMAGE, withheld=True, mime_type=mime, filename=name, size=size
    )


def _kind(mime: str | None) -> AttachmentKind:
    major = (mime or "").split("/", 1)[0]
    return {
        "image": AttachmentKind.IMAGE,
        "audio": AttachmentKind.AUDIO,
        "video": AttachmentKind.VIDEO,
    }.get(major, AttachmentKind.DOCUMENT)


def _ts(data: dict[str, Any], method: str) -> str:
    ts = data.get("ts")
    if not isinstance(ts, str) or not ts:
        raise ChannelError(f"Slack {method} answered without a message ts")
    return ts


def _authorized_bot(callback: dict[str, Any]) -> str | None:
    """The bot user id Slack lists in the callback's ``authorizations`` (when auth.test
    gave none)."""
    for entry in callback.get("authorizations") or ():
        if (
            isinstance(entry, dict)
            and entry.get("is_bot")
            and isinstance(entry.get("user_id"), str)
        ):
            return entry["user_id"]
    return None

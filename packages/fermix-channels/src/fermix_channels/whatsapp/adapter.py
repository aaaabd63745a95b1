"""The WhatsApp channel: Cloud API webhooks in, Graph API replies out.

Inbound, ``GET /webhook/whatsapp`` answers Meta's subscription handshake and ``POST
/webhook/whatsapp`` takes deliveries: verify the ``X-Hub-Signature-256`` HMAC over the raw
bytes → parse → for each message: drop what is not a turn (status callbacks, reactions,
other numbers' traffic, unsupported types), drop strangers and already-seen ids *before*
any media download, fetch media (inbound cap 25 MB), and hand it to ``host.deliver``. The
answer is 200 once every message is accepted; a failed hand-off answers 503, so Meta
retries (the idempotency record makes the retry run only what did not run).

Outbound text arrives rendered in WhatsApp's markup (``dialect = "whatsapp"``) and goes to
``/<phone_number_id>/messages`` with link previews off; media are uploaded first, then sent
by id. WhatsApp cannot edit or delete a sent message, accepts any single emoji as a
reaction, and shows a typing indicator (with a read receipt) on the last message of a chat.
A send outside the 24-hour customer-service window (131047) is a clear permanent error; a
failed status callback is logged and recorded in the channel's health.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import anyio
import anyio.to_thread
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    Channel,
    ChannelError,
    ChannelHost,
    ChannelTransientError,
    DeliveryResult,
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

from fermix_channels.secrets import require_secret, resolver_of
from fermix_channels.whatsapp.client import WINDOW_CLOSED, WhatsAppApi
from fermix_channels.whatsapp.config import WhatsAppConfig
from fermix_channels.whatsapp.parse import (
    MEDIA_TYPES,
    MalformedPayload,
    ParsedMessage,
    Status,
    parse_webhook,
)
from fermix_channels.whatsapp.verify import SignatureError, challenge_answer, verify_signature

__all__ = ["MAX_INBOUND_MEDIA", "MEDIA_CAPS", "WEBHOOK_PATH", "WhatsAppChannel"]

log = logging.getLogger("fermix_channels.whatsapp")

WEBHOOK_PATH = "/webhook/whatsapp"
#: Cloud API deliveries are a few kilobytes; anything near this is not from Meta.
MAX_WEBHOOK_BODY = 1_048_576
MAX_INBOUND_MEDIA = 25 * 1024 * 1024
_MB = 1024 * 1024
MEDIA_CAPS = MappingProxyType(
    {
        "image": 5 * _MB,
        "audio": 16 * _MB,
        "video": 16 * _MB,
        "voice": 16 * _MB,
        "document": 100 * _MB,
    }
)
_TEXT_TYPES = ("text", "button", "interactive", "location")
_KINDS = {
    "image": AttachmentKind.IMAGE,
    "sticker": AttachmentKind.IMAGE,
    "audio": AttachmentKind.AUDIO,
    "video": AttachmentKind.VIDEO,
    "document": AttachmentKind.DOCUMENT,
}
_LAST_INBOUND_LIMIT = 10_000


def _text(status: int, body: str = "") -> WebhookResponse:
    return WebhookResponse(status=status, body=body.encode("utf-8"))


@dataclass(eq=False)
class _Album:
    """The images of one chat held for merging, and how their hand-off ended."""

    parts: list[InboundMessage] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    #: Set once the merged message was handed off or failed; ``error`` says which.
    done: anyio.Event = field(default_factory=anyio.Event)
    error: Exception | None = None
    handed_off: bool = False
    #: No more parts join (debounce over, another message from the chat, stop).
    closed: bool = False
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def poke(self) -> None:
        """A part arrived (or the album was closed): restart the debounce wait."""
        self.changed.set()
        self.changed = anyio.Event()

    def close(self) -> None:
        self.closed = True
        self.poke()


def merge_album(parts: Sequence[InboundMessage]) -> InboundMessage:
    """One message for the images of an album: the first part's ids, every caption in
    order, every image in order (WhatsApp puts each picture's caption on that picture)."""
    ordered = sorted(
        enumerate(parts),
        key=lambda item: (getattr(item[1].raw_ref, "timestamp", None) or 0, item[0]),
    )
    messages = [message for _, message in ordered]
    first = messages[0]
    if len(messages) == 1:
        return first
    return first.model_copy(
        update={
            "text": "\n".join(m.text for m in messages if m.text.strip()),
            "attachments": [a for m in messages for a in m.attachments],
        }
    )


def _withheld(media: Any, size: int | None) -> Attachment:
    """An image over the inbound cap: announced, not downloaded (the gateway refuses it)."""
    return Attachment(
        kind=AttachmentKind.IMAGE,
        withheld=True,
        mime_type=media.mime_type,
        filename=media.filename,
        size=size,
    )


class WhatsAppChannel(Channel):
    """The ``whatsapp`` channel (built by the runtime from ``fermix_channels.whatsapp.plugin``)."""

    name = "whatsapp"
    supports_edit = False
    supports_delete = False
    supports_reactions = True
    supports_typing = True
    dialect = "whatsapp"
    max_text = 4096
    text_measure = "chars"
    media_caps = MEDIA_CAPS
    max_inbound_media = MAX_INBOUND_MEDIA
    reactions_allowed = None
    #: The indicator shows for up to 25 s or until the reply lands.
    typing_interval = 20.0

    def __init__(self, config: WhatsAppConfig | None = None, *, http: Any = None, **_: Any) -> None:
        self.config = config if config is not None else WhatsAppConfig()
        self._http = http
        self.host: ChannelHost | None = None
        self.api: WhatsAppApi | None = None
        self._app_secret: str | None = None
        self._verify_token: str | None = None
        self._trust = TrustPolicy.from_section(self.config, channel=self.name)
        #: The last inbound message id per chat: what a typing indicator is attached to.
        self._last_inbound: OrderedDict[str, str] = OrderedDict()
        #: Ids being delivered right now (a retry arriving during a media download).
        self._in_flight: set[str] = set()
        #: The album being held per chat (images waiting for the rest of their message).
        self._albums: dict[str, _Album] = {}
        #: Set (and replaced) whenever an image is held, for tests and the benchmark.
        self.held_changed = anyio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: ChannelHost) -> None:
        host.report("starting")
        config = self.config
        resolver = resolver_of(host)
        try:
            token = await require_secret(
                config,
                self.name,
                "access_token",
                "WHATSAPP_ACCESS_TOKEN",
                "replies need it",
                resolver=resolver,
            )
            self._app_secret = await require_secret(
                config,
                self.name,
                "app_secret",
                "WHATSAPP_APP_SECRET",
                "webhooks are verified",
                resolver=resolver,
            )
            self._verify_token = await require_secret(
                config,
                self.name,
                "verify_token",
                "WHATSAPP_VERIFY_TOKEN",
                "Meta's webhook handshake needs it",
                resolver=resolver,
            )
            if not config.phone_number_id:
                raise ChannelError(
                    "[fermix_channels.whatsapp] phone_number_id is not set (replies are sent "
                    "from it); copy the Phone number ID from the app's WhatsApp API setup page, "
                    "or run `fermix setup --reconfigure`"
                )
        except ChannelError as exc:
            # Not a crash to retry: nothing changes until the config does. The routes
            # answer 503 meanwhile, so Meta keeps its deliveries for later.
            log.error("whatsapp cannot serve: %s", exc)
            host.report("degraded", str(exc))
            return
        http = self._http if self._http is not None else host.http
        self.api = WhatsAppApi(http, config.api_base_url, config.phone_number_id, token)
        self.host = host
        host.report("ready")

    async def stop(self) -> None:
        # Held albums are not delivered now (the gateway is stopping too): their webhook
        # requests answer 503, and Meta redelivers every part to the next start.
        for album in list(self._albums.values()):
            album.scope.cancel()
        self.host = None
        self.api = None

    # ------------------------------------------------------------------ inbound

    def webhook_routes(self) -> Sequence[WebhookRoute]:
        return (
            WebhookRoute(
                path=WEBHOOK_PATH,
                methods=("GET", "POST"),
                handler=self.handle_webhook,
                max_body_bytes=MAX_WEBHOOK_BODY,
            ),
        )

    async def handle_webhook(self, request: WebhookRequest) -> WebhookResponse:
        if request.method == "GET":
            return self._handshake(request)
        host, secret = self.host, self._app_secret
        if host is None or secret is None:
            return WebhookResponse(503, b"not serving yet", headers={"retry-after": "5"})
        if len(request.body) > MAX_WEBHOOK_BODY:
            return _text(413, "body too large")
        try:
            verify_signature(secret, request.headers, request.body)
        except SignatureError as exc:
            log.warning("whatsapp webhook: rejected a request: %s", exc)
            return _text(401 if exc.missing else 403, "invalid signature")
        try:
            webhook = parse_webhook(request.body)
        except MalformedPayload as exc:
            log.warning("whatsapp webhook: rejected a signed request: %s", exc)
            return _text(400, "malformed payload")
        for ignored in webhook.ignored:
            log.info("whatsapp webhook: ignored %s", ignored)
        for status in webhook.statuses:
            self._on_status(host, status)
        held: list[_Album] = []
        try:
            for message in webhook.messages:
                album = await self._on_message(host, message)
                if album is not None:
                    held.append(album)
            # Album parts are answered once their merged turn is handed off: until then Meta
            # holds the only durable copy, so a stop during the debounce loses nothing.
            for album in held:
                await album.done.wait()
                if album.error is not None:
                    raise album.error
        except (DeliveryUnavailable, ChannelTransientError) as exc:
            log.warning("whatsapp: hand-off failed, Meta will retry: %s", exc)
            return WebhookResponse(503, b"try again", headers={"retry-after": "1"})
        return _text(200, "ok")

    def _handshake(self, request: WebhookRequest) -> WebhookResponse:
        token = self._verify_token
        if token is None:
            return WebhookResponse(503, b"not serving yet", headers={"retry-after": "5"})
        challenge = challenge_answer(token, request.query)
        if challenge is None:
            log.warning("whatsapp webhook: refused a verification request (wrong verify_token?)")
            return _text(403, "verification failed")
        log.info("whatsapp webhook: subscription verified")
        return _text(200, challenge)

    def _on_status(self, host: ChannelHost, status: Status) -> None:
        """Status callbacks are not turns; a failed one is logged and kept in health."""
        if status.status != "failed":
            log.debug("whatsapp: message %s is %s", status.id, status.status)
            return
        codes = [code for code, _ in status.errors]
        reasons = "; ".join(f"{code}: {text}" for code, text in status.errors) or "no reason"
        if WINDOW_CLOSED in codes:
            reasons = (
                "the 24-hour customer-service window is closed (error 131047): the user must "
                "write again before Fermix can reply"
            )
        log.error("whatsapp: a reply to %s was not delivered: %s", status.recipient or "?", reasons)
        host.emit("channel.delivery_failed", chat_id=status.recipient, error=reasons)

    async def _on_message(self, host: ChannelHost, parsed: ParsedMessage) -> _Album | None:
        """Deliver one message, or hold an image for its album (returned, to wait on)."""
        configured = self.config.phone_number_id
        if parsed.phone_number_id and configured and parsed.phone_number_id != configured:
            log.info("whatsapp: ignored a message for another number (%s)", parsed.phone_number_id)
            return
        if parsed.type not in _TEXT_TYPES and parsed.type not in MEDIA_TYPES:
            log.info("whatsapp: ignored a %r message from %s", parsed.type[:32], parsed.sender)
            return
        if self._trust.authorize(parsed.sender) is None:
            log.debug("whatsapp: dropped a message from a stranger")
            return  # nothing fetched, nothing delivered on a stranger's behalf
        if parsed.id in self._in_flight:
            return
        # A redelivery is refused before anything is fetched for it, and before it can end
        # its chat's held album. Otherwise the runtime's claim (one statement) is the check:
        # a text redelivered is answered as a duplicate there, with no query of its own.
        if (parsed.media is not None or parsed.sender in self._albums) and await host.seen(
            parsed.id
        ):
            return
        self._in_flight.add(parsed.id)
        try:
            attachments, notes = await self._media(parsed)
        except BaseException:
            self._in_flight.discard(parsed.id)
            raise
        text = "\n".join(part for part in (parsed.text, *notes) if part)
        message = InboundMessage(
            channel=self.name,
            chat_id=parsed.sender,
            sender_id=parsed.sender,
            text=text,
            attachments=attachments,
            message_id=parsed.id,
            raw_ref=parsed,
        )
        if parsed.type == "image" and self.config.album_debounce_ms > 0:
            return self._hold(host, message)
        pending = self._albums.get(parsed.sender)
        try:
            if pending is not None:
                # Anything else from the chat ends its album first, so turns keep their order.
                pending.close()
                await pending.done.wait()
            await self._hand_off(host, message)
        finally:
            self._in_flight.discard(parsed.id)
        return None

    async def _hand_off(self, host: ChannelHost, message: InboundMessage) -> DeliveryResult:
        result = await host.deliver(message)
        if result is DeliveryResult.ACCEPTED and message.message_id:
            chat = message.chat_id
            self._last_inbound[chat] = message.message_id
            self._last_inbound.move_to_end(chat)
            while len(self._last_inbound) > _LAST_INBOUND_LIMIT:
                self._last_inbound.popitem(last=False)
        return result

    # ------------------------------------------------------------------ albums

    def _hold(self, host: ChannelHost, message: InboundMessage) -> _Album:
        """Keep an image until no other image of its chat arrived for ``album_debounce_ms``
        (Cloud API sends every picture of a multi-image message as its own webhook)."""
        album = self._albums.get(message.chat_id)
        if album is None or album.closed:
            album = self._albums[message.chat_id] = _Album()
            host.task_group.start_soon(self._flush_album, host, message.chat_id, album)
        album.parts.append(message)
        album.poke()
        self.held_changed.set()
        self.held_changed = anyio.Event()
        return album

    def held(self, chat_id: str) -> int:
        """How many images of *chat_id* are being held for their album right now."""
        album = self._albums.get(chat_id)
        return len(album.parts) if album is not None and not album.closed else 0

    async def _flush_album(self, host: ChannelHost, chat: str, album: _Album) -> None:
        try:
            with album.scope:
                wait = self.config.album_debounce_ms / 1000
                while not album.closed:
                    changed = album.changed
                    with anyio.move_on_after(wait) as timer:
                        await changed.wait()
                    if timer.cancelled_caught:
                        break
                album.closed = True
                if self._albums.get(chat) is album:
                    del self._albums[chat]
                merged = merge_album(album.parts)
                result = await self._hand_off(host, merged)
                album.handed_off = True
                if result is DeliveryResult.ACCEPTED:
                    # The merged turn carries the first part's id; record the others too, so
                    # a redelivered part is a duplicate and never a turn of its own.
                    remember = getattr(host, "remember", None)
                    for part in album.parts[1:]:
                        if part.message_id and callable(remember):
                            await remember(part.message_id)
        except (DeliveryUnavailable, ChannelTransientError) as exc:
            album.error = exc
        except Exception as exc:
            log.exception("whatsapp: an album could not be handed off")
            album.error = DeliveryUnavailable(f"the album hand-off failed ({exc})")
        finally:
            if not album.handed_off and album.error is None:
                album.error = DeliveryUnavailable(
                    "the channel stopped while an album was held; Meta redelivers it"
                )
            album.closed = True
            if self._albums.get(chat) is album:
                del self._albums[chat]
            for part in album.parts:
                if part.message_id:
                    self._in_flight.discard(part.message_id)
            album.done.set()

    async def _media(self, parsed: ParsedMessage) -> tuple[list[Attachment], list[str]]:
        media = parsed.media
        if media is None:
            return [], []
        api = self.api
        if api is None:
            raise ChannelTransientError("the channel stopped during the delivery")
        label = media.filename or media.kind
        kind = _KINDS[media.kind]
        size: Any = None
        try:
            info = await api.media_info(media.id)
            size = info.get("file_size")
            mime = media.mime_type or (info.get("mime_type") if isinstance(info, dict) else None)
            mime = mime if isinstance(mime, str) else None
            cap = inbound_cap(self.host, _KINDS[media.kind], mime)
            if cap is not None and isinstance(size, int) and size > cap:
                # The gateway answers "too large" (the transcription cap); nothing is fetched.
                kind = _KINDS[media.kind]
                return [withheld(size, kind=kind, mime_type=mime, filename=media.filename)], []
            if isinstance(size, int) and size > MAX_INBOUND_MEDIA:
                if kind is AttachmentKind.IMAGE:  # the gateway answers naming the cap
                    return [_withheld(media, size)], []
                return [], [f"[attachment not received: {label} is over 25 MB]"]
            data = await api.download(info["url"], MAX_INBOUND_MEDIA)
        except ChannelTransientError:
            raise
        except ChannelError as exc:
            log.warning("whatsapp: could not fetch media %s: %s", media.id, exc)
            return [], [f"[attachment not received: {label} could not be fetched]"]
        if data is None:
            if kind is AttachmentKind.IMAGE:
                return [_withheld(media, size if isinstance(size, int) else None)], []
            return [], [f"[attachment not received: {label} is over 25 MB]"]
        attachment = Attachment(
            kind=_KINDS[media.kind],
            data=data,
            mime_type=mime,
            filename=media.filename,
        )
        return [attachment], []

    # ------------------------------------------------------------------ outbound

    def _api(self) -> WhatsAppApi:
        if self.api is None:
            raise ChannelTransientError("the WhatsApp channel is not running (restarting?)")
        return self.api

    async def send(self, message: OutboundMessage) -> SentMessage:
        api = self._api()
        to = message.chat_id
        if message.attachments:
            last = ""
            for index, attachment in enumerate(message.attachments):
                last = await self._send_attachment(
                    api, to, attachment, message.reply_to if index == 0 else None
                )
            return SentMessage(message_id=last)
        if len(message.text) > self.max_text:
            raise ChannelError(
                f"a WhatsApp message holds at most {self.max_text} characters, not "
                f"{len(message.text)}"
            )
        message_id = await api.send_text(to, message.text, reply_to=message.reply_to)
        return SentMessage(message_id=message_id)

    async def _send_attachment(
        self, api: WhatsAppApi, to: str, attachment: Attachment, reply_to: str | None
    ) -> str:
        kind = str(attachment.kind)
        if kind not in ("image", "audio", "video", "document"):
            kind = "document"
        data = await anyio.to_thread.run_sync(attachment.read_bytes)
        cap = MEDIA_CAPS[kind]
        if len(data) > cap:
            raise ChannelError(
                f"{attachment.filename or 'the file'} is over WhatsApp's {cap // _MB} MB cap "
                f"for {kind} files"
            )
        mime = attachment.mime_type or "application/octet-stream"
        filename = attachment.filename or (
            attachment.path.name if attachment.path is not None else f"file.{kind}"
        )
        media_id = await api.upload(data, mime, filename)
        return await api.send_media(
            to,
            kind,
            media_id,
            caption=attachment.caption,
            filename=filename,
            reply_to=reply_to,
        )

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        if not emoji.strip():
            raise ChannelError("a reaction needs an emoji")
        await self._api().send_reaction(chat_id, message_id, emoji)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        message_id = self._last_inbound.get(chat_id)
        if message_id is not None:
            await self._api().mark_read(message_id, typing=True)

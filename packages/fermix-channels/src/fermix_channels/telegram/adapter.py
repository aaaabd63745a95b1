"""The Telegram channel: Bot API long-poll in, Bot API replies out.

Inbound, one supervised task long-polls ``getUpdates`` (``allowed_updates`` = ``message``
and ``callback_query``, the two kinds handled here). Each update of a batch is parsed
(:mod:`.parse`), its media downloaded for an authorized sender only, and handed to
``host.deliver``. After the batch the next offset is written durably to
``$FERMIX_HOME/channels/telegram-offset.json`` (atomic replace, keyed by the bot id) *before*
the next ``getUpdates`` confirms the batch to Telegram. A crash between the hand-off and
the write re-fetches the same updates on restart, and the durable idempotency record keyed
on ``<chat>:<message_id>`` turns them into duplicates — so a restart neither replays nor
loses an update. A hand-off that fails (the gateway is stopping) keeps that update
unconfirmed; it is fetched again.

Network errors and 5xx answers are retried with capped, jittered backoff while the channel
reports ``degraded``. A webhook set on the bot (seen by ``getWebhookInfo`` at start, or
Telegram's 409 "can't use getUpdates method while webhook is active") and a second poller
on the same token (409 "terminated by other getUpdates request") are reported as
``degraded`` with what to do; the poller keeps trying, so fixing it on Telegram's side
brings the channel back without a restart.

Outbound text arrives rendered as Telegram HTML (``dialect = "telegram_html"``) and goes out
with ``parse_mode=HTML`` (none for ``plain``), link previews off, ``disable_notification``
for ``silent``, the topic's ``message_thread_id`` and a reply to the inbound message.
Media go out as multipart ``sendPhoto``/``sendDocument``/``sendAudio``/``sendVideo``/
``sendVoice``. Draft streaming edits with ``editMessageText`` ("message is not modified" is
success). The sandbox approval prompt carries an inline Approve button (see
:meth:`TelegramChannel.send_approval`).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from fermix_core.channel import (
    Attachment,
    AttachmentKind,
    Channel,
    ChannelError,
    ChannelHost,
    ChannelRateLimited,
    ChannelTransientError,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    SentMessage,
    inbound_cap,
)
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.transcription.inbound import withheld

from fermix_channels.telegram.client import TelegramApi, TelegramConflict, TelegramRefused
from fermix_channels.telegram.config import TelegramConfig
from fermix_channels.telegram.parse import (
    CallbackTap,
    MediaRef,
    Skip,
    TelegramRef,
    parse_callback,
    parse_message,
)

__all__ = [
    "ALLOWED_UPDATES",
    "CONFIRM_PREFIX",
    "MAX_INBOUND_FILE",
    "MEDIA_CAPS",
    "OFFSET_FILE",
    "REACTIONS",
    "TelegramChannel",
]

log = logging.getLogger("fermix_channels.telegram")

#: The update kinds this adapter handles; Telegram sends no others.
ALLOWED_UPDATES = ["message", "callback_query"]
#: Where the next getUpdates offset is kept, relative to FERMIX_HOME.
OFFSET_FILE = "channels/telegram-offset.json"
#: The Bot API's own download limit for getFile.
MAX_INBOUND_FILE = 20 * 1024 * 1024
_MB = 1024 * 1024
MEDIA_CAPS = {
    "image": 10 * _MB,
    "document": 50 * _MB,
    "audio": 50 * _MB,
    "video": 50 * _MB,
    "voice": 1 * _MB,
}
#: Callback data of the sandbox Approve button: this prefix, then the confirmation token.
CONFIRM_PREFIX = "fx-confirm:"
_CAPTION_LIMIT = 1024
_BACKOFF_START = 1.0
_BACKOFF_CAP = 60.0
#: A webhook or a second poller can be removed at any moment; retry at least this often.
_CONFLICT_BACKOFF_CAP = 10.0

#: Telegram's fixed reaction set (``ReactionTypeEmoji.emoji``) for bots.
REACTIONS: tuple[str, ...] = (
    "👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱", "🤬", "😢", "🎉", "🤩",
    "🤮", "💩", "🙏", "👌", "🕊", "🤡", "🥱", "🥴", "😍", "🐳", "❤‍🔥", "🌚", "🌭", "💯",
    "🤣", "⚡", "🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈", "😴", "😭",
    "🤓", "👻", "👨‍💻", "👀", "🎃", "🙈", "😇", "😨", "🤝", "✍", "🤗", "🫡", "🎅", "🎄",
    "☃", "💅", "🤪", "🗿", "🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷‍♂",
    "🤷", "🤷‍♀", "😡",
)  # fmt: skip
#: Common spellings with the emoji variation selector, mapped to Telegram's form.
_REACTION_ALIASES = {"❤️": "❤", "✍️": "✍", "☃️": "☃", "🕊️": "🕊", "❤️‍🔥": "❤‍🔥"}


def _message_number(message_id: str) -> int:
    """``"<chat>:<id>"`` or ``"<id>"`` → the Bot API's integer message id."""
    tail = str(message_id).rsplit(":", 1)[-1]
    try:
        return int(tail)
    except ValueError:
        raise ChannelError(f"{message_id!r} is not a Telegram message id") from None


def _thread(thread_id: str | None) -> int | None:
    if thread_id is None:
        return None
    try:
        return int(thread_id)
    except ValueError:
        raise ChannelError(f"{thread_id!r} is not a Telegram topic id") from None


def _is_group_chat(chat_id: str) -> bool:
    """Group and supergroup ids are negative; private chats are the user's positive id."""
    return str(chat_id).startswith("-")


def _mb(size: int) -> str:
    return f"{size // _MB} MB"


@dataclass
class _Album:
    """The parts of one album (updates sharing a ``media_group_id``) seen so far."""

    parts: list[tuple[int, InboundMessage]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    #: Cancelled by stop(): the parts stay in the state file for the next start.
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


def _merge_album(messages: list[InboundMessage]) -> InboundMessage:
    """One message for a whole album: the first part's ids (so a re-fetched album is a
    duplicate of the one delivered), every caption, every file."""
    ordered = sorted(messages, key=lambda m: m.raw_ref.message_id)
    first = ordered[0]
    ref: TelegramRef = first.raw_ref
    texts = [m.text for m in ordered if m.text.strip()]
    media = tuple(item for m in ordered for item in m.raw_ref.media)
    return first.model_copy(
        update={
            "text": "\n".join(texts),
            "raw_ref": TelegramRef(
                chat_id=ref.chat_id,
                message_id=ref.message_id,
                chat_type=ref.chat_type,
                media=media,
                media_group_id=ref.media_group_id,
            ),
        }
    )


class TelegramChannel(Channel):
    """The ``telegram`` channel (built by the runtime from ``fermix_channels.telegram.plugin``)."""

    name = "telegram"
    supports_edit = True
    supports_delete = True
    supports_reactions = True
    supports_typing = True
    dialect = "telegram_html"
    max_text = 4096
    text_measure = "utf16"
    media_caps = MEDIA_CAPS
    max_inbound_media = MAX_INBOUND_FILE
    reactions_allowed = REACTIONS
    #: Telegram allows about one message per second in one chat.
    send_interval = 1.0

    def __init__(
        self,
        config: TelegramConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        home: Any = None,
        jitter: Callable[[], float] = random.random,
        **_: Any,
    ) -> None:
        self.config = config if config is not None else TelegramConfig()
        self._http = http
        self._home = home
        self._jitter = jitter
        self.host: ChannelHost | None = None
        self.api: TelegramApi | None = None
        self.bot_id: int | None = None
        self.bot_username: str | None = None
        self._scope: anyio.CancelScope | None = None
        self._trust = TrustPolicy.from_section(self.config, channel=self.name)
        #: The health problem currently reported, so a repeat is not logged every poll.
        self._problem: str | None = None
        #: Set once the first getUpdates answered (for tests and the benchmark).
        self.polling = anyio.Event()
        self._offset: int | None = None
        #: update_id -> raw update of album parts not delivered yet (saved with the offset).
        self._held: dict[int, dict[str, Any]] = {}
        self._albums: dict[tuple[str, str], _Album] = {}
        self._state_lock = anyio.Lock()

    # ------------------------------------------------------------------ secrets

    async def _token(self) -> str:
        value = self.config.bot_token
        token = value if isinstance(value, str) and value != "@keyring" else ""
        if value is not None and not token:
            from fermix_core.config.secret import SecretField

            from fermix_channels.secrets import resolve_field, resolver_of

            # Not overridable: the bot token never comes from TELEGRAM_BOT_TOKEN.
            field = SecretField(
                ("fermix_channels", "telegram", "bot_token"),
                "TELEGRAM_BOT_TOKEN",
                value,
                overridable=False,
            )
            resolved = await resolve_field(field, resolver_of(self.host))
            token = resolved.value or ""
            if not token:
                raise ChannelError(
                    resolved.problem
                    or "[fermix_channels.telegram] bot_token could not be resolved from the "
                    "keyring; run `fermix doctor`"
                )
        if not token:
            raise ChannelError(
                "[fermix_channels.telegram] bot_token is not set; create a bot with @BotFather "
                "and run `fermix setup --reconfigure` (or set bot_token in config.toml). "
                "TELEGRAM_BOT_TOKEN is deliberately not read"
            )
        from fermix_core.logs import add_known_secret

        add_known_secret(token)  # the token rides in every request URL httpx logs
        return token

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: ChannelHost) -> None:
        self.host = host
        host.report("starting")
        token = await self._token()
        self.api = TelegramApi(token, self.config.api_base_url, http=self._http or host.http)
        me = await self.api.get_me()
        if not me.get("is_bot", True):
            raise ChannelError("the configured Telegram token is not a bot token")
        self.bot_id = int(me["id"])
        username = me.get("username")
        self.bot_username = username if isinstance(username, str) and username else None
        webhook = await self.api.get_webhook_info()
        if webhook.get("url"):
            self._degraded(
                "a webhook is set on this bot, and Telegram refuses getUpdates while it is; "
                "Fermix polls (webhook transport is not supported). Remove the webhook with "
                f"{self.config.api_base_url.rstrip('/')}/bot<token>/deleteWebhook, or stop "
                "the other service that uses this bot"
            )
        self._scope = anyio.CancelScope()
        host.task_group.start_soon(self._run, self.api, self._scope)
        if self._problem is None:
            host.report("ready")

    async def _run(self, api: TelegramApi, scope: anyio.CancelScope) -> None:
        with scope:
            await self.poll_forever(api)

    async def stop(self) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.cancel()
        # Album parts still held are in the state file; the next start merges them.
        for album in self._albums.values():
            album.scope.cancel()
        self._albums.clear()
        self._held.clear()
        self.api = None
        self.host = None

    # ------------------------------------------------------------------ health

    def _degraded(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("telegram: %s", problem)
        self._problem = problem
        if self.host is not None:
            self.host.report("degraded", problem)

    def _recovered(self) -> None:
        if self._problem is not None:
            log.info("telegram: polling again")
            self._problem = None
            if self.host is not None:
                self.host.report("ready")

    # ------------------------------------------------------------------ offset

    def _offset_path(self) -> Path | None:
        home = self._home if self._home is not None else getattr(self.host, "home", None)
        path = getattr(home, "path", None)
        return Path(path) / OFFSET_FILE if path is not None else None

    def load_state(self) -> tuple[int | None, list[dict[str, Any]]]:
        """The saved offset and the album updates held when the channel last stopped."""
        path = self._offset_path()
        if path is None:
            return None, []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, []
        except (OSError, ValueError):
            log.warning("telegram: %s is unreadable; starting from Telegram's queue", path)
            return None, []
        if not isinstance(data, dict) or data.get("bot_id") != self.bot_id:
            return None, []  # another bot's offset (the token changed)
        offset = data.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool):
            offset = None
        held = data.get("held")
        held = [u for u in held if isinstance(u, dict)] if isinstance(held, list) else []
        return offset, held

    def load_offset(self) -> int | None:
        return self.load_state()[0]

    def save_offset(self, offset: int | None) -> None:
        """Write the offset and the held album updates (atomic replace)."""
        path = self._offset_path()
        if path is None:
            return
        from fermix_core.fsutil import atomic_write

        state: dict[str, Any] = {"bot_id": self.bot_id, "offset": offset}
        if self._held:
            state["held"] = [self._held[k] for k in sorted(self._held)]
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, json.dumps(state, ensure_ascii=False) + "\n")

    async def _save_state(self) -> None:
        async with self._state_lock:
            await anyio.to_thread.run_sync(self.save_offset, self._offset)

    # ------------------------------------------------------------------ polling

    async def poll_forever(self, api: TelegramApi) -> None:
        offset, held = await anyio.to_thread.run_sync(self.load_state)
        self._offset = offset
        for update in held:  # album parts held when the channel last stopped
            await self.handle_update(update)
        backoff = _BACKOFF_START
        while True:
            cap = _BACKOFF_CAP
            try:
                updates = await api.get_updates(
                    offset,
                    timeout=self.config.poll_timeout,
                    allowed_updates=ALLOWED_UPDATES,
                )
            except TelegramConflict as exc:
                # Fixed on Telegram's side at any moment: look again soon.
                cap = _CONFLICT_BACKOFF_CAP
                self._degraded(self._conflict_advice(exc))
            except ChannelRateLimited as exc:
                await anyio.sleep(exc.retry_after or backoff)
                continue
            except ChannelTransientError as exc:
                self._degraded(f"cannot reach the Bot API ({exc}); retrying")
            except TelegramRefused as exc:
                self._degraded(str(exc))
            else:
                self._recovered()
                self.polling.set()
                backoff = _BACKOFF_START
                if updates:
                    offset = await self._handle_batch(updates, offset)
                continue
            backoff = min(backoff, cap)
            await anyio.sleep(backoff * (0.5 + self._jitter() / 2))
            backoff = min(backoff * 2, cap)

    def _conflict_advice(self, exc: TelegramConflict) -> str:
        if exc.webhook_active:
            return (
                "Telegram refuses getUpdates because a webhook is set on this bot; Fermix "
                "polls (webhook transport is not supported). Remove the webhook "
                "(the Bot API's deleteWebhook method) or stop the service that set it"
            )
        return (
            "another program is polling this bot token (Telegram: terminated by other "
            "getUpdates request); stop the other Fermix install or bot that uses it, or give "
            "this install its own bot from @BotFather"
        )

    async def _handle_batch(self, updates: list[dict[str, Any]], offset: int | None) -> int | None:
        """Handle *updates* in order; the offset to poll from next (durably saved)."""
        next_offset = offset
        try:
            for update in sorted(updates, key=lambda u: u.get("update_id", 0)):
                update_id = update.get("update_id")
                if not isinstance(update_id, int) or isinstance(update_id, bool):
                    continue
                if offset is not None and update_id < offset:
                    continue
                await self.handle_update(update)
                next_offset = update_id + 1
        except (DeliveryUnavailable, ChannelTransientError, ChannelRateLimited) as exc:
            log.warning("telegram: hand-off failed, the update is fetched again: %s", exc)
            await anyio.sleep(_BACKOFF_START)
        if next_offset is not None and next_offset != offset:
            self._offset = next_offset
            await self._save_state()
        return next_offset

    async def handle_update(self, update: dict[str, Any]) -> str:
        """One update: ``accepted``, ``duplicate``, ``dropped``, ``skipped`` or ``tapped``."""
        if "callback_query" in update:
            tap = parse_callback(update["callback_query"])
            if isinstance(tap, Skip):
                log.debug("telegram: skipped a callback: %s", tap.reason)
                return "skipped"
            await self._on_tap(tap)
            return "tapped"
        message = parse_message(
            update.get("message"),
            channel=self.name,
            bot_id=self.bot_id or 0,
            bot_username=self.bot_username,
        )
        if isinstance(message, Skip):
            log.debug("telegram: skipped an update: %s", message.reason)
            return "skipped"
        ref = message.raw_ref
        if (
            isinstance(ref, TelegramRef)
            and ref.media_group_id
            and self.config.album_debounce_ms > 0
            and self._trust.authorize(message.sender_id) is not None
            and isinstance(update.get("update_id"), int)
        ):
            self._hold(update, message, ref)
            return "held"
        return await self._deliver(message)

    async def _deliver(self, message: InboundMessage) -> str:
        host = self._host()
        ref = message.raw_ref
        if isinstance(ref, TelegramRef) and ref.media:
            message = await self._with_media(host, message, ref.media)
        result = await host.deliver(message)
        return str(result.value)

    # ------------------------------------------------------------------ albums

    def _hold(self, update: dict[str, Any], message: InboundMessage, ref: TelegramRef) -> None:
        """Keep an album part until its album is complete (no new part for
        ``album_debounce_ms``); the raw update is saved with the offset, so a restart in
        the meantime loses nothing."""
        update_id = int(update["update_id"])
        key = (message.chat_id, str(ref.media_group_id))
        self._held[update_id] = update
        album = self._albums.get(key)
        if album is None:
            album = self._albums[key] = _Album()
            self._host().task_group.start_soon(self._flush_album, key, album)
        if all(uid != update_id for uid, _ in album.parts):
            album.parts.append((update_id, message))
        album.changed.set()
        album.changed = anyio.Event()

    async def _flush_album(self, key: tuple[str, str], album: _Album) -> None:
        with album.scope:
            await self._flush_album_now(key, album)

    async def _flush_album_now(self, key: tuple[str, str], album: _Album) -> None:
        wait = self.config.album_debounce_ms / 1000
        while True:
            changed = album.changed
            with anyio.move_on_after(wait) as timer:
                await changed.wait()
            if timer.cancelled_caught:
                break
        self._albums.pop(key, None)
        merged = _merge_album([m for _, m in album.parts])
        backoff = _BACKOFF_START
        while True:
            try:
                await self._deliver(merged)
                break
            except (DeliveryUnavailable, ChannelTransientError, ChannelRateLimited) as exc:
                log.warning("telegram: album hand-off failed, retrying: %s", exc)
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_CAP)
        for update_id, _ in album.parts:
            self._held.pop(update_id, None)
        await self._save_state()

    async def _with_media(
        self, host: ChannelHost, message: InboundMessage, media: tuple[MediaRef, ...]
    ) -> InboundMessage:
        """The message with its files downloaded — only for an allowed sender and a message
        not delivered before, so a stranger or a redelivery costs no download."""
        if self._trust.authorize(message.sender_id) is None:
            return message  # the gateway drops it; nothing is fetched for a stranger
        if message.message_id and await host.seen(message.message_id):
            return message
        api = self._api()
        attachments: list[Attachment] = []
        notes: list[str] = []
        for item in media:
            label = item.filename or item.kind.value
            # The gateway's own cap (audio: the transcription cap) is answered there; the
            # oversized file is never fetched.
            cap = inbound_cap(host, item.kind, item.mime_type)
            if cap is not None and item.size is not None and item.size > cap:
                attachments.append(
                    withheld(
                        item.size, kind=item.kind, mime_type=item.mime_type, filename=item.filename
                    )
                )
                continue
            held = Attachment(
                kind=item.kind,
                withheld=True,
                mime_type=item.mime_type,
                filename=item.filename,
                size=item.size,
            )
            if item.size is not None and item.size > MAX_INBOUND_FILE:
                if item.kind is AttachmentKind.IMAGE:  # the gateway answers naming the cap
                    attachments.append(held)
                    continue
                notes.append(f"[attachment not received: {label} is over {_mb(MAX_INBOUND_FILE)}]")
                continue
            try:
                info = await api.get_file(item.file_id)
                size = info.get("file_size")
                path = info.get("file_path")
                if cap is not None and isinstance(size, int) and size > cap:
                    attachments.append(
                        withheld(
                            size, kind=item.kind, mime_type=item.mime_type, filename=item.filename
                        )
                    )
                    continue
                if isinstance(size, int) and size > MAX_INBOUND_FILE:
                    data = None
                elif not isinstance(path, str) or not path:
                    raise ChannelError("getFile gave no file_path")
                else:
                    data = await api.download(path, limit=MAX_INBOUND_FILE)
            except ChannelTransientError:
                raise
            except ChannelError as exc:
                log.warning("telegram: could not fetch a file: %s", exc)
                notes.append(f"[attachment not received: {label} could not be fetched]")
                continue
            if data is None:
                if item.kind is AttachmentKind.IMAGE:
                    attachments.append(held)
                    continue
                notes.append(f"[attachment not received: {label} is over {_mb(MAX_INBOUND_FILE)}]")
                continue
            attachments.append(
                Attachment(
                    kind=item.kind,
                    data=data,
                    mime_type=item.mime_type,
                    filename=item.filename,
                )
            )
        text = "\n".join([message.text, *notes]).strip() if notes else message.text
        return message.model_copy(update={"attachments": attachments, "text": text})

    # ------------------------------------------------------------------ approval button

    async def _on_tap(self, tap: CallbackTap) -> None:
        api = self._api()
        if not tap.data.startswith(CONFIRM_PREFIX) or tap.chat_id is None:
            await self._answer(api, tap.query_id, "This button is no longer active.")
            return
        owner = self._trust.effective_owner
        if tap.sender_is_bot or owner is None or tap.sender_id != owner:
            # Refused before anything reaches the confirmation store: the token stays
            # unconsumed for the owner.
            log.info("telegram: refused an Approve tap from a non-owner")
            await self._answer(api, tap.query_id, "not authorized")
            return
        token = tap.data[len(CONFIRM_PREFIX) :].strip()
        inbound = InboundMessage(
            channel=self.name,
            chat_id=tap.chat_id,
            thread_id=tap.thread_id,
            sender_id=tap.sender_id,
            sender_name=tap.sender_name,
            text=f"/confirm {token}",
            message_id=f"callback:{tap.query_id}",
            is_group=tap.is_group,
        )
        try:
            result = await self._host().deliver(inbound)
        except DeliveryUnavailable:
            await self._answer(api, tap.query_id, "Fermix is restarting; tap again shortly.")
            return
        text = "Approving…" if result is DeliveryResult.ACCEPTED else "Already handled."
        await self._answer(api, tap.query_id, text)

    @staticmethod
    async def _answer(api: TelegramApi, query_id: str, text: str) -> None:
        try:
            await api.call("answerCallbackQuery", {"callback_query_id": query_id, "text": text})
        except ChannelError as exc:
            log.info("telegram: answerCallbackQuery failed: %s", exc)

    async def send_approval(
        self, chat_id: str, thread_id: str | None, proposal: Any
    ) -> SentMessage:
        """The sandbox approval prompt with a one-tap Approve button.

        The button's callback data carries the token; in a group chat the typed
        ``/confirm TOKEN`` line is left out of the visible text (approve from the button, a
        direct message or the CLI). A tap runs the owner-only ``/confirm`` path.
        """
        text = proposal.prompt(include_token=not _is_group_chat(chat_id))
        markup = {
            "inline_keyboard": [
                [{"text": "Approve", "callback_data": f"{CONFIRM_PREFIX}{proposal.token}"}]
            ]
        }
        result = await self._api().call(
            "sendMessage",
            {
                "chat_id": chat_id,
                "message_thread_id": _thread(thread_id),
                "text": text,
                "link_preview_options": {"is_disabled": True},
                "reply_markup": markup,
            },
        )
        return self._sent(chat_id, result, "sendMessage")

    # ------------------------------------------------------------------ outbound

    def _api(self) -> TelegramApi:
        if self.api is None:
            raise ChannelError("the telegram channel is not running; start it first")
        return self.api

    def _host(self) -> ChannelHost:
        if self.host is None:
            raise DeliveryUnavailable("the telegram channel is stopping")
        return self.host

    @staticmethod
    def _sent(chat_id: str, result: Any, method: str) -> SentMessage:
        number = result.get("message_id") if isinstance(result, dict) else None
        if not isinstance(number, int):
            raise ChannelError(f"Telegram {method} answered without a message_id")
        return SentMessage(message_id=f"{chat_id}:{number}")

    @staticmethod
    def _common(message: OutboundMessage) -> dict[str, Any]:
        params: dict[str, Any] = {
            "chat_id": message.chat_id,
            "message_thread_id": _thread(message.thread_id),
        }
        if message.silent:
            params["disable_notification"] = True
        if message.reply_to:
            params["reply_parameters"] = {
                "message_id": _message_number(message.reply_to),
                "allow_sending_without_reply": True,
            }
        return params

    async def send(self, message: OutboundMessage) -> SentMessage:
        api = self._api()
        sent: SentMessage | None = None
        common = self._common(message)
        if message.text.strip():
            params = {
                **common,
                "text": message.text,
                "link_preview_options": {"is_disabled": True},
            }
            if not message.plain:
                params["parse_mode"] = "HTML"
            sent = self._sent(message.chat_id, await api.call("sendMessage", params), "sendMessage")
        for item in message.attachments:
            media = await self._send_media(api, message, item, common)
            sent = sent or media
            common.pop("reply_parameters", None)
        assert sent is not None  # OutboundMessage guarantees text or an attachment
        return sent

    async def _send_media(
        self, api: TelegramApi, message: OutboundMessage, item: Attachment, common: dict[str, Any]
    ) -> SentMessage:
        size = item.size
        if size is None and item.path is not None:
            size = (await anyio.Path(item.path).stat()).st_size
        method, field, cap = self._media_method(item, size)
        if size is not None and size > cap:
            raise ChannelError(
                f"Telegram bots can send {field} files up to {_mb(cap)}; "
                f"{item.filename or 'this file'} is {size / _MB:.1f} MB — send a link instead"
            )
        data = await anyio.to_thread.run_sync(item.read_bytes)
        filename = item.filename or (item.path.name if item.path is not None else field)
        mime = item.mime_type or "application/octet-stream"
        params = dict(common)
        if item.caption:
            params["caption"] = item.caption[:_CAPTION_LIMIT]
        result = await api.call(method, params, files={field: (filename, data, mime)})
        return self._sent(message.chat_id, result, method)

    @staticmethod
    def _media_method(item: Attachment, size: int | None) -> tuple[str, str, int]:
        kind = item.kind
        if kind is AttachmentKind.IMAGE:
            return "sendPhoto", "photo", MEDIA_CAPS["image"]
        if kind is AttachmentKind.VIDEO:
            return "sendVideo", "video", MEDIA_CAPS["video"]
        if kind is AttachmentKind.AUDIO:
            voice = (item.mime_type or "").startswith("audio/ogg")
            if voice and size is not None and size <= MEDIA_CAPS["voice"]:
                return "sendVoice", "voice", MEDIA_CAPS["voice"]
            return "sendAudio", "audio", MEDIA_CAPS["audio"]
        return "sendDocument", "document", MEDIA_CAPS["document"]

    async def edit(self, chat_id: str, message_id: str, text: str, *, plain: bool = False) -> None:
        params: dict[str, Any] = {
            "chat_id": chat_id,
            "message_id": _message_number(message_id),
            "text": text,
            "link_preview_options": {"is_disabled": True},
        }
        if not plain:
            params["parse_mode"] = "HTML"
        try:
            await self._api().call("editMessageText", params)
        except TelegramRefused as exc:
            if "message is not modified" not in exc.description.lower():
                raise

    async def delete(self, chat_id: str, message_id: str) -> None:
        try:
            await self._api().call(
                "deleteMessage", {"chat_id": chat_id, "message_id": _message_number(message_id)}
            )
        except TelegramRefused as exc:
            if "message to delete not found" not in exc.description.lower():
                raise
            # already gone: what the delete was for holds

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        value = _REACTION_ALIASES.get(emoji.strip(), emoji.strip())
        if value not in REACTIONS:
            raise ChannelError(
                f"Telegram accepts only its fixed reaction set ({' '.join(REACTIONS[:8])} …); "
                f"{emoji!r} is not in it"
            )
        await self._api().call(
            "setMessageReaction",
            {
                "chat_id": chat_id,
                "message_id": _message_number(message_id),
                "reaction": [{"type": "emoji", "emoji": value}],
            },
        )

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._api().call(
            "sendChatAction",
            {"chat_id": chat_id, "message_thread_id": _thread(thread_id), "action": "typing"},
        )

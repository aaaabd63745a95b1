"""The Discord channel: the Gateway websocket in, REST replies out.

Inbound, one supervised task keeps the gateway session (:mod:`.gateway`): ``MESSAGE_CREATE``
events are parsed (:mod:`.parse`), their attachments downloaded for an authorized sender
only, and handed to ``host.deliver``; ``INTERACTION_CREATE`` events are Approve-button taps.
A hand-off that fails (the gateway is restarting) is retried with backoff before the next
event, so order holds and nothing is skipped. The session (id, resume URL, last handled
sequence) is written to ``$FERMIX_HOME/channels/discord-session.json`` after each handled
message, so a daemon restarted within Discord's resume window RESUMEs and receives what was
sent while it was down; the durable idempotency record keyed on the message id turns any
replay of a message already handed off into a duplicate.

Health: ``ready`` once READY (or RESUMED) arrived; ``degraded`` with the reason while
reconnecting, and with the fix for a fatal close (4004 bad token, 4014 Message Content
intent not enabled) or when READY's application flags show the Message Content intent off.

Outbound text is Discord Markdown, passed through (``dialect = "discord"``), at most 2,000
characters a message; link previews are suppressed (``SUPPRESS_EMBEDS``), ``silent`` sends
``SUPPRESS_NOTIFICATIONS``, and no reply can ping ``@everyone`` or a role
(``allowed_mentions``). Media go out as multipart ``files[n]`` with ``payload_json``, 10 MB
each. Draft streaming edits with ``PATCH``; reactions take any emoji (URL-encoded); typing is
``POST /channels/{id}/typing``. The sandbox approval prompt carries an Approve button (see
:meth:`DiscordChannel.send_approval`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import secrets
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio
import httpx
from fermix_core.channel import (
    Attachment,
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

from fermix_channels.discord.config import DiscordConfig
from fermix_channels.discord.gateway import Dispatch, GatewayClient, GatewaySession
from fermix_channels.discord.parse import (
    ComponentTap,
    DiscordRef,
    MediaRef,
    Skip,
    Threads,
    parse_interaction,
    parse_message,
)
from fermix_channels.discord.rest import DiscordRefused, DiscordRest

__all__ = [
    "APPROVE_PREFIX",
    "CDN_HOSTS",
    "MAX_FILES",
    "MAX_INBOUND_FILE",
    "MEDIA_CAP",
    "SESSION_FILE",
    "DiscordChannel",
]

log = logging.getLogger("fermix_channels.discord")

_MB = 1024 * 1024
#: Discord's upload limit for a bot without a boosted server.
MEDIA_CAP = 10 * _MB
#: The largest inbound attachment downloaded.
MAX_INBOUND_FILE = 25 * _MB
#: Files one message can carry.
MAX_FILES = 10
MAX_TEXT = 2000
SESSION_FILE = "channels/discord-session.json"
#: custom_id of the Approve button: this prefix, then a nonce the adapter maps to the token.
APPROVE_PREFIX = "fx-approve:"
#: Where Discord serves attachments; anything else (bar api_base_url's own host) is refused.
CDN_HOSTS = frozenset({"cdn.discordapp.com", "media.discordapp.net"})
#: How long an Approve button's nonce is kept (the confirmation itself expires sooner).
_NONCE_TTL = 600.0
_SUPPRESS_EMBEDS = 1 << 2
_SUPPRESS_NOTIFICATIONS = 1 << 12
_EPHEMERAL = 1 << 6
#: Interaction callback types.
_CHANNEL_MESSAGE = 4
_BACKOFF_START = 1.0
_BACKOFF_CAP = 60.0
#: Events after which the session's sequence is saved.
_PERSIST = frozenset({"MESSAGE_CREATE", "INTERACTION_CREATE"})
_TRANSFER_TIMEOUT = httpx.Timeout(300.0, connect=15.0)


def _split_id(message_id: str, chat_id: str) -> tuple[str, str]:
    """``"<channel>:<message>"`` or ``"<message>"`` → ``(channel, message)``."""
    channel, _, number = str(message_id).rpartition(":")
    if not number.isdigit() or (channel and not channel.isdigit()):
        raise ChannelError(f"{message_id!r} is not a Discord message id")
    return (channel or chat_id), number


def _snowflake(value: str, what: str) -> str:
    if not str(value).isdigit():
        raise ChannelError(f"{value!r} is not a Discord {what} id")
    return str(value)


def _chunks(text: str, limit: int = MAX_TEXT) -> list[str]:
    """A last-resort cut at *limit* code points (the presentation layer splits on
    boundaries first; this only keeps a direct send from being refused)."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    if text.strip():
        pieces.append(text)
    return pieces


class DiscordChannel(Channel):
    """The ``discord`` channel (built by the runtime from ``fermix_channels.discord.plugin``)."""

    name = "discord"
    supports_edit = True
    supports_delete = True
    supports_reactions = True
    supports_typing = True
    dialect = "discord"
    max_text = MAX_TEXT
    #: Discord does not say how it counts; UTF-16 units never undercount (as presentation).
    text_measure = "utf16"
    media_caps = MappingProxyType(
        {kind: MEDIA_CAP for kind in ("image", "audio", "video", "document", "voice")}
    )
    #: Any single emoji (Unicode, or a custom ``name:id``).
    reactions_allowed = None
    #: Discord's typing indicator lasts about 10 seconds.
    typing_interval = 8.0

    def __init__(
        self,
        config: DiscordConfig | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        home: Any = None,
        jitter: Callable[[], float] = random.random,
        fatal_retry: float = 300.0,
        ready_wait: float = 10.0,
        **_: Any,
    ) -> None:
        self.config = config if config is not None else DiscordConfig()
        self._http = http
        self._home = home
        self._jitter = jitter
        self._fatal_retry = fatal_retry
        self._ready_wait = ready_wait
        self.host: ChannelHost | None = None
        self.rest: DiscordRest | None = None
        self.gateway: GatewayClient | None = None
        self.bot_id: str | None = self.config.bot_user_id
        self._token_tag = ""
        self._scope: anyio.CancelScope | None = None
        self._trust = TrustPolicy.from_section(self.config, channel=self.name)
        self.threads = Threads()
        #: DM channel ids seen; a prompt there may show the typed /confirm line.
        self._dm_channels: set[str] = set()
        #: nonce -> (token, expires at) of Approve buttons sent
        self._nonces: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._problem: str | None = None
        self._settled = anyio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def _token(self) -> str:
        from fermix_channels.secrets import require_secret

        token = await require_secret(
            self.config,
            "discord",
            "bot_token",
            "DISCORD_BOT_TOKEN",
            "the bot token from the Developer Portal, Bot → Reset Token",
        )
        from fermix_core.logs import add_known_secret

        add_known_secret(token)
        return token

    async def start(self, host: ChannelHost) -> None:
        self.host = host
        self._settled = anyio.Event()
        host.report("starting")
        token = await self._token()
        self._token_tag = hashlib.sha256(token.encode()).hexdigest()[:16]
        self.rest = DiscordRest(token, self.config.api_base_url, http=self._http or host.http)
        session = await anyio.to_thread.run_sync(self.load_session)
        self.gateway = GatewayClient(
            self.rest,
            token,
            self._on_dispatch,
            on_state=self._on_state,
            on_session=self._on_session,
            session=session,
            jitter=self._jitter,
            fatal_retry=self._fatal_retry,
            persist=_PERSIST,
        )
        self._scope = anyio.CancelScope()
        host.task_group.start_soon(self._run, self.gateway, self._scope)
        with anyio.move_on_after(self._ready_wait):
            await self._settled.wait()
        if not self._settled.is_set():
            self._degraded("connecting to the Discord gateway")

    async def _run(self, gateway: GatewayClient, scope: anyio.CancelScope) -> None:
        with scope:
            await gateway.run()

    async def stop(self) -> None:
        scope, self._scope = self._scope, None
        gateway, self.gateway = self.gateway, None
        if gateway is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(3):
                try:
                    await gateway.close()
                except Exception as exc:  # a socket already gone
                    log.debug("discord: close failed: %s", exc)
            if gateway.session is not None:
                await self._on_session(gateway.session)
        if scope is not None:
            scope.cancel()
        self.rest = None
        self.host = None

    # ------------------------------------------------------------------ health

    def _on_state(self, state: str, error: str | None) -> None:
        if state == "ready":
            if self._problem is not None:
                log.info("discord: connected to the gateway")
            self._problem = None
            if self.host is not None:
                self.host.report("ready")
        else:
            self._degraded(error or "gateway connection lost")
        if self.gateway is not None and self.gateway.user is not None:
            user_id = self.gateway.user.get("id")
            if isinstance(user_id, str) and user_id.isdigit() and user_id != self.bot_id:
                if self.config.bot_user_id and self.config.bot_user_id != user_id:
                    log.warning(
                        "discord: bot_user_id %s in config is not this token's bot (%s); "
                        "using the gateway's",
                        self.config.bot_user_id,
                        user_id,
                    )
                self.bot_id = user_id
        self._settled.set()

    def _degraded(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("discord: %s", problem)
        self._problem = problem
        if self.host is not None:
            self.host.report("degraded", problem)

    # ------------------------------------------------------------------ session file

    def _session_path(self) -> Path | None:
        home = self._home if self._home is not None else getattr(self.host, "home", None)
        path = getattr(home, "path", None)
        return Path(path) / SESSION_FILE if path is not None else None

    def load_session(self) -> GatewaySession | None:
        path = self._session_path()
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("discord: %s is unreadable; identifying afresh", path)
            return None
        if not isinstance(data, dict) or data.get("token") != self._token_tag:
            return None  # another bot's session (the token changed)
        session_id, url, seq = data.get("session_id"), data.get("resume_url"), data.get("seq")
        if not isinstance(session_id, str) or not isinstance(url, str):
            return None
        if not url.startswith(("wss://", "ws://")):
            return None
        seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        return GatewaySession(session_id, url, seq)

    def save_session(self, session: GatewaySession | None) -> None:
        path = self._session_path()
        if path is None:
            return
        from fermix_core.fsutil import atomic_write

        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if session is None:
            path.unlink(missing_ok=True)
            return
        state = {
            "token": self._token_tag,
            "session_id": session.session_id,
            "resume_url": session.resume_url,
            "seq": session.seq,
        }
        atomic_write(path, json.dumps(state) + "\n")

    async def _on_session(self, session: GatewaySession | None) -> None:
        try:
            await anyio.to_thread.run_sync(self.save_session, session)
        except OSError as exc:
            # Not fatal: a restart identifies afresh instead of resuming.
            log.warning("discord: could not save the gateway session: %s", exc)

    # ------------------------------------------------------------------ inbound

    async def _on_dispatch(self, event: Dispatch) -> None:
        """One gateway event, in order. Never raises for a bad payload: it is logged."""
        try:
            self.threads.event(event.name, event.data)
            if event.name == "MESSAGE_CREATE":
                await self._retrying(self.handle_message, event.data)
            elif event.name == "INTERACTION_CREATE":
                await self._retrying(self.handle_interaction, event.data)
        except (DeliveryUnavailable, ChannelTransientError, ChannelRateLimited):
            raise
        except Exception:
            log.exception("discord: could not handle a %s event; skipped", event.name)

    async def _retrying(self, handler: Callable[[Any], Any], data: Any) -> None:
        """Hand off until it is accepted: a failed hand-off is retried, not skipped."""
        backoff = _BACKOFF_START
        while True:
            try:
                await handler(data)
                return
            except (DeliveryUnavailable, ChannelTransientError, ChannelRateLimited) as exc:
                log.warning("discord: hand-off failed, retrying: %s", exc)
                await anyio.sleep(backoff * (0.5 + self._jitter() / 2))
                backoff = min(backoff * 2, _BACKOFF_CAP)

    async def handle_message(self, data: Any) -> str:
        """One ``MESSAGE_CREATE``: ``accepted``, ``duplicate``, ``dropped`` or ``skipped``."""
        message = parse_message(data, channel=self.name, bot_id=self.bot_id, threads=self.threads)
        if isinstance(message, Skip):
            log.debug("discord: skipped a message: %s", message.reason)
            return "skipped"
        ref: DiscordRef = message.raw_ref
        if ref.guild_id is None:
            self._dm_channels.add(ref.channel_id)
        host = self._host()
        if ref.media:
            message = await self._with_media(host, message, ref.media)
        result = await host.deliver(message)
        return str(result.value)

    def _download_allowed(self, url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" and host in CDN_HOSTS:
            return True
        api = urllib.parse.urlsplit(self.config.api_base_url)
        return (parts.scheme, parts.netloc) == (api.scheme, api.netloc)

    async def _with_media(
        self, host: ChannelHost, message: InboundMessage, media: tuple[MediaRef, ...]
    ) -> InboundMessage:
        """The message with its files downloaded — only for an allowed sender and a message
        not delivered before, so a stranger or a replay costs no download."""
        if self._trust.authorize(message.sender_id) is None:
            return message
        if message.message_id and await host.seen(message.message_id):
            return message
        attachments: list[Attachment] = []
        notes: list[str] = []
        for item in media:
            label = item.filename or item.kind.value
            cap = inbound_cap(host, item.kind, item.mime_type)
            if cap is not None and item.size is not None and item.size > cap:
                # The gateway answers "too large" (the transcription cap); nothing is fetched.
                kind, mime, name = item.kind, item.mime_type, item.filename
                attachments.append(withheld(item.size, kind=kind, mime_type=mime, filename=name))
                continue
            if item.size is not None and item.size > MAX_INBOUND_FILE:
                notes.append(f"[attachment not received: {label} is over 25 MB]")
                continue
            if not self._download_allowed(item.url):
                log.warning("discord: refused an attachment URL outside Discord's CDN")
                notes.append(f"[attachment not received: {label} is not on Discord's CDN]")
                continue
            try:
                data = await self._download(host, item.url)
            except ChannelTransientError:
                raise
            except ChannelError as exc:
                log.warning("discord: could not fetch an attachment: %s", exc)
                notes.append(f"[attachment not received: {label} could not be fetched]")
                continue
            if data is None:
                notes.append(f"[attachment not received: {label} is over 25 MB]")
                continue
            attachments.append(
                Attachment(
                    kind=item.kind,
                    data=data,
                    mime_type=item.mime_type,
                    filename=item.filename,
                    size=len(data),
                )
            )
        text = "\n".join([message.text, *notes]).strip() if notes else message.text
        return message.model_copy(update={"attachments": attachments, "text": text})

    async def _download(self, host: ChannelHost, url: str) -> bytes | None:
        http = self._http or host.http
        try:
            async with http.stream(
                "GET", url, timeout=_TRANSFER_TIMEOUT, follow_redirects=False
            ) as response:
                status = response.status_code
                if status == 429 or status >= 500:
                    raise ChannelTransientError(f"Discord CDN answered HTTP {status}")
                if status != 200:
                    raise ChannelError(f"Discord CDN refused a download: HTTP {status}")
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_INBOUND_FILE:
                        return None
                return bytes(data)
        except httpx.HTTPError as exc:
            raise ChannelTransientError(
                f"a Discord attachment download did not complete ({type(exc).__name__})"
            ) from None

    # ------------------------------------------------------------------ approval button

    def _conversation(self, channel_id: str) -> tuple[str, str | None]:
        parent = self.threads.parent(channel_id)
        return (parent, channel_id) if parent is not None else (channel_id, None)

    async def handle_interaction(self, data: Any) -> str:
        """One ``INTERACTION_CREATE``: ``tapped``, ``refused``, ``stale`` or ``skipped``."""
        tap = parse_interaction(data)
        if isinstance(tap, Skip):
            log.debug("discord: skipped an interaction: %s", tap.reason)
            return "skipped"
        return await self._on_tap(tap)

    async def _on_tap(self, tap: ComponentTap) -> str:
        self._expire_nonces()
        if not tap.custom_id.startswith(APPROVE_PREFIX):
            await self._answer(tap, "This button is no longer active.")
            return "stale"
        owner = self._trust.effective_owner
        if tap.sender_is_bot or owner is None or tap.sender_id != owner:
            # Refused before anything reaches the confirmation store: the token stays
            # unconsumed for the owner.
            log.info("discord: refused an Approve tap from a non-owner")
            await self._answer(tap, "not authorized")
            return "refused"
        nonce = tap.custom_id[len(APPROVE_PREFIX) :]
        entry = self._nonces.pop(nonce, None)
        if entry is None:
            await self._answer(tap, "This button is no longer active.")
            return "stale"
        token, expires = entry
        chat_id, thread_id = self._conversation(tap.channel_id)
        inbound = InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            thread_id=thread_id,
            sender_id=tap.sender_id,
            sender_name=tap.sender_name,
            text=f"/confirm {token}",
            message_id=f"interaction:{tap.interaction_id}",
            is_group=tap.guild_id is not None,
        )
        try:
            result = await self._host().deliver(inbound)
        except DeliveryUnavailable:
            self._nonces[nonce] = (token, expires)  # not consumed: a later tap works
            await self._answer(tap, "Fermix is restarting; tap again shortly.")
            return "stale"
        await self._answer(
            tap, "Approving…" if result is DeliveryResult.ACCEPTED else "Already handled."
        )
        return "tapped"

    async def _answer(self, tap: ComponentTap, text: str) -> None:
        """Acknowledge the interaction with a note only the tapper sees."""
        from fermix_core.logs import add_known_secret

        # The interaction token is in the callback URL that httpx logs; it lets anyone
        # answer for the bot in that conversation for 15 minutes.
        add_known_secret(tap.token)
        try:
            await self._rest().interaction_callback(
                tap.interaction_id,
                tap.token,
                {"type": _CHANNEL_MESSAGE, "data": {"content": text, "flags": _EPHEMERAL}},
            )
        except ChannelError as exc:
            log.info("discord: interaction callback failed: %s", exc)

    def _expire_nonces(self) -> None:
        now = time.monotonic()
        for nonce in [n for n, (_, expires) in self._nonces.items() if expires < now]:
            del self._nonces[nonce]
        while len(self._nonces) > 1000:
            self._nonces.popitem(last=False)

    async def send_approval(
        self, chat_id: str, thread_id: str | None, proposal: Any
    ) -> SentMessage:
        """The sandbox approval prompt with an Approve button.

        The button's ``custom_id`` holds a nonce the adapter maps to the token, so the token
        itself never travels in the component (which every member's client receives). In a
        server channel the typed ``/confirm TOKEN`` line is left out of the visible text; in a
        direct message it stays. A tap runs the owner-only ``/confirm`` path.
        """
        self._expire_nonces()
        nonce = secrets.token_urlsafe(12)
        self._nonces[nonce] = (str(proposal.token), time.monotonic() + _NONCE_TTL)
        target = thread_id or chat_id
        private = chat_id in self._dm_channels and thread_id is None
        payload = {
            "content": proposal.prompt(include_token=private)[:MAX_TEXT],
            "flags": _SUPPRESS_EMBEDS,
            "allowed_mentions": {"parse": []},
            "components": [
                {
                    "type": 1,
                    "components": [
                        {
                            "type": 2,
                            "style": 3,
                            "label": "Approve",
                            "custom_id": f"{APPROVE_PREFIX}{nonce}",
                        }
                    ],
                }
            ],
        }
        data = await self._rest().create_message(_snowflake(target, "channel"), payload)
        return SentMessage(message_id=f"{target}:{data['id']}")

    # ------------------------------------------------------------------ outbound

    def _rest(self) -> DiscordRest:
        if self.rest is None:
            raise ChannelError("the discord channel is not running; start it first")
        return self.rest

    def _host(self) -> ChannelHost:
        if self.host is None:
            raise DeliveryUnavailable("the discord channel is stopping")
        return self.host

    @staticmethod
    def _payload(message: OutboundMessage, content: str, *, first: bool) -> dict[str, Any]:
        flags = _SUPPRESS_EMBEDS | (_SUPPRESS_NOTIFICATIONS if message.silent else 0)
        payload: dict[str, Any] = {
            "content": content,
            "flags": flags,
            "allowed_mentions": {"parse": [], "replied_user": not message.silent},
        }
        if first and message.reply_to:
            _, reply_id = _split_id(message.reply_to, message.chat_id)
            payload["message_reference"] = {"message_id": reply_id, "fail_if_not_exists": False}
        return payload

    async def send(self, message: OutboundMessage) -> SentMessage:
        rest = self._rest()
        target = _snowflake(message.thread_id or message.chat_id, "channel")
        sent: SentMessage | None = None
        if message.text.strip():
            for piece in _chunks(message.text):
                data = await rest.create_message(
                    target, self._payload(message, piece, first=sent is None)
                )
                sent = sent or SentMessage(message_id=f"{target}:{data['id']}")
        if message.attachments:
            # A failure here reaches the outbound port, which emits channel.media_send_error
            # for every channel alike.
            media = await self._send_media(rest, target, message, first=sent is None)
            sent = sent or media
        assert sent is not None  # OutboundMessage guarantees text or an attachment
        return sent

    async def _send_media(
        self, rest: DiscordRest, target: str, message: OutboundMessage, *, first: bool
    ) -> SentMessage:
        items = list(message.attachments)
        for item in items:
            size = item.size
            if size is None and item.path is not None:
                size = (await anyio.Path(item.path).stat()).st_size
            if size is not None and size > MEDIA_CAP:
                raise ChannelError(
                    f"Discord bots can upload files up to 10 MB; {item.filename or 'this file'} "
                    f"is {size / _MB:.1f} MB — send a link instead"
                )
        sent: SentMessage | None = None
        for start in range(0, len(items), MAX_FILES):
            group = items[start : start + MAX_FILES]
            files: list[tuple[str, bytes, str]] = []
            for index, item in enumerate(group):
                data = await anyio.to_thread.run_sync(item.read_bytes)
                filename = item.filename or (
                    item.path.name if item.path is not None else f"file{index}"
                )
                files.append((filename, data, item.mime_type or "application/octet-stream"))
            caption = next((i.caption for i in group if i.caption), None) or ""
            payload = self._payload(message, caption[:MAX_TEXT], first=first and sent is None)
            payload["attachments"] = [
                {"id": index, "filename": name} for index, (name, _, _) in enumerate(files)
            ]
            result = await rest.create_message(target, payload, files)
            sent = sent or SentMessage(message_id=f"{target}:{result['id']}")
        assert sent is not None
        return sent

    async def edit(self, chat_id: str, message_id: str, text: str, *, plain: bool = False) -> None:
        channel, number = _split_id(message_id, chat_id)
        await self._rest().edit_message(
            _snowflake(channel, "channel"), number, {"content": _chunks(text)[0]}
        )

    async def delete(self, chat_id: str, message_id: str) -> None:
        channel, number = _split_id(message_id, chat_id)
        try:
            await self._rest().delete_message(_snowflake(channel, "channel"), number)
        except DiscordRefused as exc:
            if exc.code != 10008:  # Unknown Message: already gone, which is what was wanted
                raise

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        value = emoji.strip()
        if not value or len(value) > 64:
            raise ChannelError(f"{emoji!r} is not one emoji")
        channel, number = _split_id(message_id, chat_id)
        await self._rest().add_reaction(_snowflake(channel, "channel"), number, value)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._rest().typing(_snowflake(thread_id or chat_id, "channel"))

"""The gateway's audio step: voice notes become text before the turn is queued.

Which attachments are audio is decided from the :class:`~fermix_core.channel.Attachment`
alone, so every channel gets it without code of its own: kind ``audio``, or any
``audio/*`` MIME type (Telegram sends some audio as documents). A channel that wants a
clip's speech transcribed although it is a video container (Telegram's round video notes)
marks it kind ``audio`` and keeps the real ``video/mp4`` MIME type; the MP4 goes to the
service as it is.

:func:`transcribe_inbound` checks each audio attachment against ``max_file_mb`` — the
declared size first (``Attachment.size``), so an adapter that did not fetch an oversized
file (:func:`withheld`) is answered without bytes — sends it to the backend, and returns
the message with the caption first and each transcript below it under
``[voice note transcript]``; the audio attachments are removed, every other attachment is
kept. On any failure the sender gets one specific reply and ``None`` is returned: no turn.
Each attempt emits ``transcription.message`` (``channel``, ``status``, ``duration_ms``,
``backend``, ``bytes``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from fermix_core.channel import Attachment, AttachmentKind, InboundMessage
from fermix_core.transcription.contract import (
    AudioClip,
    NoSpeech,
    TranscriptionError,
    TranscriptionFailed,
    TranscriptionNotConfigured,
    TranscriptionTooLarge,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.gateway.types import ReplyPort
    from fermix_core.transcription.engine import Transcriber

__all__ = [
    "FAILED_REPLY",
    "NOT_CONFIGURED_REPLY",
    "NO_SPEECH_REPLY",
    "TRANSCRIPT_DELIMITER",
    "failure_reply",
    "needs_transcription",
    "transcribe_inbound",
    "withheld",
]

log = logging.getLogger("fermix.transcription")

TRANSCRIPT_DELIMITER = "[voice note transcript]"
NOT_CONFIGURED_REPLY = (
    "Voice notes need a transcription backend — run `fermix setup` (Transcription step). "
    "Until then, please send your message as text."
)
FAILED_REPLY = "Transcription failed — please try again in a moment, or send it as text."
NO_SPEECH_REPLY = "I couldn't hear any speech in that recording — please try again or type it."

#: Filename extensions for MIME types :mod:`mimetypes` does not map the way speech-to-text
#: services expect (they detect the format from the name).
_EXTENSIONS = {
    "audio/ogg": ".ogg",
    "audio/opus": ".opus",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/aac": ".aac",
    "audio/amr": ".amr",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "video/mp4": ".mp4",
}


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def needs_transcription(attachment: Attachment) -> bool:
    """Audio, however the platform labelled it (Telegram sends some as documents)."""
    if attachment.kind is AttachmentKind.AUDIO:
        return True
    return (attachment.mime_type or "").lower().startswith("audio/")


def withheld(
    size: int,
    *,
    kind: AttachmentKind = AttachmentKind.AUDIO,
    mime_type: str | None = None,
    filename: str | None = None,
) -> Attachment:
    """An audio attachment an adapter did not download because its declared *size* is over
    the gateway's cap (``ChannelHost.inbound_cap``): no bytes, the declared size kept, so
    the gateway answers "too large" without anything being fetched."""
    return Attachment(kind=kind, withheld=True, size=size, mime_type=mime_type, filename=filename)


def _mb(size: int) -> str:
    value = size / (1024 * 1024)
    return f"{value:.0f} MB" if value >= 10 or value == int(value) else f"{value:.1f} MB"


def failure_reply(error: TranscriptionError) -> str:
    """What the sender is told for *error*."""
    if isinstance(error, TranscriptionNotConfigured):
        return NOT_CONFIGURED_REPLY
    if isinstance(error, TranscriptionTooLarge):
        return (
            f"That recording is {_mb(error.size)}; audio up to {_mb(error.cap)} can be "
            "transcribed. Please send a shorter one, or type it."
        )
    if isinstance(error, NoSpeech):
        return NO_SPEECH_REPLY
    return FAILED_REPLY


def _clip_of(attachment: Attachment, data: bytes) -> AudioClip:
    mime = (attachment.mime_type or "").split(";", 1)[0].strip().lower()
    mime = mime or "application/octet-stream"
    # The platform's filename is the sender's choice: only its last part, in plain
    # characters, goes into the upload (the service reads the format from the extension).
    name = _SAFE_NAME.sub("_", (attachment.filename or "").replace("\\", "/").rsplit("/", 1)[-1])
    name = name.strip("._")[-80:]
    if not name or "." not in name:
        extension = _EXTENSIONS.get(mime)
        if extension is None:
            import mimetypes  # only for a type the table does not know

            extension = mimetypes.guess_extension(mime) or ".bin"
        name = f"{name or 'voice'}{extension}"
    return AudioClip(data=data, mime_type=mime, filename=name)


async def _size_of(attachment: Attachment) -> int | None:
    if attachment.size is not None:
        return attachment.size
    if attachment.path is not None:
        return (await anyio.Path(attachment.path).stat()).st_size
    return None


async def _transcribe_one(transcriber: Transcriber, attachment: Attachment) -> tuple[str, int]:
    # The declared (or stat'ed) size first: an oversized file is never read.
    size = await _size_of(attachment)
    transcriber.check_size(size)
    if attachment.withheld or (attachment.data is None and attachment.path is None):
        # Announced but not downloaded by the adapter (over a size cap): nothing to send.
        raise TranscriptionTooLarge(size or 0, transcriber.cap_bytes)
    await transcriber.backend()  # "not configured" before the file is read
    if attachment.data is not None:
        data = attachment.data
    else:
        assert attachment.path is not None
        data = await anyio.Path(attachment.path).read_bytes()
    text = await transcriber.transcribe(_clip_of(attachment, data))
    if not text:
        raise NoSpeech("the service heard no speech")
    return text, len(data)


async def transcribe_inbound(
    transcriber: Transcriber | None,
    message: InboundMessage,
    reply: ReplyPort,
    *,
    emit: Callable[..., Any],
) -> InboundMessage | None:
    """*message* with its audio replaced by transcripts, or ``None`` after replying why not."""
    from fermix_core.gateway.reply import try_reply_text

    transcripts: list[str] = []
    kept: list[Attachment] = []
    for attachment in message.attachments:
        if not needs_transcription(attachment):
            kept.append(attachment)
            continue
        started = time.perf_counter()
        backend = transcriber.backend_name if transcriber is not None else None
        try:
            if transcriber is None:
                raise TranscriptionNotConfigured("this runtime has no transcriber")
            try:
                text, size = await _transcribe_one(transcriber, attachment)
            except OSError as exc:  # a path attachment that vanished or cannot be read
                raise TranscriptionFailed(f"the audio file could not be read: {exc}") from exc
        except TranscriptionError as exc:
            log.warning(
                "transcription of a %s attachment on %s: %s (%s)",
                attachment.mime_type or attachment.kind.value,
                message.channel,
                exc.status,
                exc,
            )
            emit(
                "transcription.message",
                channel=message.channel,
                status=exc.status,
                backend=backend,
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
                bytes=attachment.size,
            )
            await try_reply_text(reply, message, failure_reply(exc))
            return None
        emit(
            "transcription.message",
            channel=message.channel,
            status="ok",
            backend=backend,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
            bytes=size,
        )
        transcripts.append(text)
    parts = [message.text.strip()] if message.text.strip() else []
    parts += [f"{TRANSCRIPT_DELIMITER}\n{text}" for text in transcripts]
    return message.model_copy(update={"text": "\n\n".join(parts), "attachments": kept})

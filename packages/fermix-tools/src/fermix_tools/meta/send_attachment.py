"""``send_attachment``: one local file out through the chat the turn is answering.

The file is named by a path the sandbox resolves *before* anything is opened, so the tool
can send exactly what the file tools could read and nothing else; the canonical path it
returns is then opened without following symlinks, so a link swapped in after the check
is refused rather than followed. URLs are refused outright: this tool sends files the agent
has, it does not download.

Models retry. A send that already went out in the last 60 seconds — same channel, chat,
kind, caption, file name, MIME type and file content (SHA-256) — is not posted again; the
tool answers that it was already sent. The cache lives on the tool instance, which the
capability registry builds once per runtime, so it spans turns.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import stat
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from fermix_core.channel import Attachment, AttachmentKind, OutboundMessage
from fermix_core.specs import ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEDUPE_WINDOW",
    "MAX_ATTACHMENT_BYTES",
    "SendAttachment",
    "SendAttachmentArgs",
    "kind_for",
]

DEDUPE_WINDOW = 60.0
MAX_ATTACHMENT_BYTES = 50 * 1024 * 1024
_CACHE_LIMIT = 512
_URLISH = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//|[^\\/])")
_CHUNK = 1024 * 1024


class SendAttachmentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        max_length=4096,
        description="Path of a local file in the sandbox (workspace or a granted root).",
    )
    caption: str | None = Field(
        default=None, max_length=1024, description="Optional text shown with the file."
    )
    kind: Literal["image", "audio", "video", "document"] | None = Field(
        default=None,
        description="How to send it; omit to decide from the file type (document otherwise).",
    )


def kind_for(mime_type: str) -> AttachmentKind:
    """The attachment kind a MIME type is sent as by default."""
    major = mime_type.split("/", 1)[0]
    if major in ("image", "audio", "video"):
        return AttachmentKind(major)
    return AttachmentKind.DOCUMENT


def _hash_file(path: Path, limit: int) -> tuple[str, int]:
    """SHA-256 and size of the regular file at *path*, opened without following symlinks."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ToolError(f"No file at {path}; check the path (glob_search can find it).") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; send one file (zip it first if needed).") from None
    except OSError as exc:
        raise ToolError(f"Cannot open {path} ({exc.strerror or type(exc).__name__}).") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path} is a directory; send one file (zip it first if needed).")
        raise ToolError(f"{path} is not a regular file (a device, pipe or socket).")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size == 0:
            raise ToolError(f"{path} is empty; platforms reject empty files.")
        if info.st_size > limit:
            raise ToolError(
                f"{path} is {info.st_size / 1_048_576:.1f} MB; the cap is "
                f"{limit / 1_048_576:.0f} MB. Compress it or send a smaller file."
            )
        digest = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
        return digest.hexdigest(), info.st_size


class SendAttachment(Tool[SendAttachmentArgs]):
    """The ``send_attachment`` tool; *clock* (monotonic seconds) is injectable for tests."""

    def __init__(
        self,
        spec: ToolSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int = MAX_ATTACHMENT_BYTES,
    ) -> None:
        super().__init__(spec)
        self.clock = clock
        self.max_bytes = max_bytes
        self._sent: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._in_flight: set[tuple[str, ...]] = set()

    def _resolve(self, raw: str, ctx: ToolContext) -> Path:
        policy = ctx.services.get("sandbox")
        if policy is None:
            raise ToolError(
                "send_attachment needs the sandbox to check the path, and this run has none; "
                "no file can be sent from here."
            )
        # Raises SandboxDenied (a ToolError) with what to do, e.g. /sandbox grant.
        return Path(policy.resolve(raw, ctx, write=False))

    def _recently_sent(self, key: tuple[str, ...], now: float) -> bool:
        for old_key, sent_at in list(self._sent.items()):
            if now - sent_at < DEDUPE_WINDOW:
                break
            del self._sent[old_key]  # oldest first: everything before this is expired too
        sent_at = self._sent.get(key)
        return key in self._in_flight or (sent_at is not None and now - sent_at < DEDUPE_WINDOW)

    async def run(self, args: SendAttachmentArgs, ctx: ToolContext) -> ToolOutput:
        import anyio.to_thread

        raw = args.path.strip()
        if _URLISH.match(raw):
            raise ToolError(
                "send_attachment sends local files only, not URLs. Save the file into the "
                "workspace first, then send its path."
            )
        if ctx.conversation_key is None:
            raise ToolError("This run has no chat to send to (a sub-agent or a job).")
        reply = ctx.service("reply")
        path = self._resolve(raw, ctx)
        sha256, size = await anyio.to_thread.run_sync(_hash_file, path, self.max_bytes)
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        natural = kind_for(mime)
        kind = AttachmentKind(args.kind) if args.kind else natural
        if kind is not AttachmentKind.DOCUMENT and kind is not natural:
            raise ToolError(
                f"{path.name} is {mime}, which cannot be sent as {kind.value}; omit kind, or "
                "use kind='document' to send it as a file."
            )
        caption = (args.caption or "").strip() or None
        key_ = ctx.conversation_key
        key = (key_.channel, key_.chat_id, kind.value, caption or "", path.name, mime, sha256)
        facts: dict[str, Any] = {
            "filename": path.name,
            "mime_type": mime,
            "kind": kind.value,
            "size": size,
            "sha256": sha256,
        }
        if self._recently_sent(key, self.clock()):
            return ToolOutput(
                content=(
                    f"{path.name} was already sent to this chat in the last "
                    f"{DEDUPE_WINDOW:.0f} seconds with the same caption; not sending it again."
                ),
                data={"sent": False, "duplicate": True, **facts},
            )
        attachment = Attachment(
            kind=kind, path=path, mime_type=mime, filename=path.name, size=size, caption=caption
        )
        message = OutboundMessage(
            chat_id=key_.chat_id, thread_id=key_.thread_id, attachments=[attachment]
        )
        self._in_flight.add(key)
        try:
            sent = await reply.send(message)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                f"The channel refused {path.name}: {exc}. Check the file type and size, or "
                "tell the user it could not be sent."
            ) from None
        finally:
            self._in_flight.discard(key)
        self._sent[key] = self.clock()
        self._sent.move_to_end(key)
        while len(self._sent) > _CACHE_LIMIT:
            self._sent.popitem(last=False)
        message_id = getattr(sent, "message_id", None)
        return ToolOutput(
            content=f"Sent {path.name} ({mime}, {size} bytes) to the chat.",
            data={"sent": True, "duplicate": False, "message_id": message_id, **facts},
        )

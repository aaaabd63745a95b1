"""Images: admitted at the gateway, kept as files for history, fitted to each provider.

Three stages, each in its own place:

1. **Admit** (:class:`ImageIntake`, the gateway's media step). Every image attachment of
   an authorized message is checked against the channel's inbound cap (the adapter's
   ``max_inbound_media``, else :data:`DEFAULT_INBOUND_CAP`), sniffed from its first bytes
   (a file that is not a picture is refused, whatever its declared MIME type says) and
   written once to ``$FERMIX_HOME/media/images/<sha256>.<ext>`` (0600, atomic). The message
   continues with path attachments; an image that cannot be admitted is answered with a
   reply that says why, and no turn runs.
2. **Keep.** The turn runner turns path attachments into ``ImagePart(path=...)``, so a
   history row stores the file's name, never the bytes as base64.
3. **Fit** (:func:`prepare_request`, called by every provider adapter through
   :meth:`fermix_core.provider.Provider.prepare_images`). Right before a wire encodes a
   request, each image is read and, when it is larger than the provider's
   :class:`~fermix_core.media.limits.ImageLimits` (long edge, bytes, formats), downscaled
   and re-encoded with Pillow in a worker thread. Results are cached, so the tool loop and
   later turns do not decode the same photo again. A route whose model cannot see images
   fails loud for the new message's images, naming the model; images of *earlier* turns
   are replaced by a one-line note, so one picture never locks a conversation out of a
   text-only model.

Pillow is imported only inside :func:`fit_image`; nothing here runs on a text-only turn.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fermix_core.channel import Attachment, AttachmentKind, InboundMessage
from fermix_core.media.limits import DEFAULT_IMAGE_LIMITS, MB, ImageLimits
from fermix_core.messages import ImagePart, Message, TextPart

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.provider import ChatRequest, Provider

__all__ = [
    "DEFAULT_INBOUND_CAP",
    "INBOUND_IMAGE_TYPES",
    "ImageError",
    "ImageIntake",
    "ImageStore",
    "check_local_image",
    "fit_image",
    "is_image",
    "model_label",
    "prepare_request",
    "sniff_image",
]

log = logging.getLogger("fermix.media.images")

#: The image cap of a surface that declares none (local CLI and embedding included).
DEFAULT_INBOUND_CAP = 20 * MB
#: What Fermix admits; the ones no wire takes (BMP, TIFF) are re-encoded as PNG or JPEG.
INBOUND_IMAGE_TYPES: tuple[str, ...] = (
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/bmp",
    "image/tiff",
)
_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/bmp": "bmp",
    "image/tiff": "tiff",
}
_READABLE = "PNG, JPEG, GIF, WebP, BMP or TIFF"
#: Fitted images kept in memory (bytes), so a tool loop re-sends without re-decoding.
_FIT_CACHE_BYTES = 64 * MB
#: A picture this small on its long edge after shrinking is no longer worth sending.
_MIN_EDGE = 256


class ImageError(ValueError):
    """An image that cannot be admitted or fitted; the message is for the sender."""


def sniff_image(head: bytes) -> str | None:
    """The image type the first bytes announce, or ``None`` (HEIC/AVIF: not readable here)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:2] == b"BM" and len(head) >= 26:
        return "image/bmp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    return None


def _is_heif(head: bytes) -> bool:
    return head[4:8] == b"ftyp" and head[8:12] in (b"heic", b"heix", b"mif1", b"avif", b"hevc")


def is_image(attachment: Attachment) -> bool:
    """An image however the platform labelled it (an image/* document counts)."""
    if attachment.kind is AttachmentKind.IMAGE:
        return True
    return (attachment.mime_type or "").lower().startswith("image/")


def _mb(size: int) -> str:
    if size < MB:
        return f"{max(1, size // 1024)} KB"
    value = size / MB
    return f"{value:.0f} MB" if value >= 10 or value == int(value) else f"{value:.1f} MB"


def _name(attachment: Attachment) -> str:
    if attachment.filename:
        return attachment.filename
    if attachment.path is not None:
        return attachment.path.name
    return "that image"


def _unreadable(name: str, head: bytes) -> ImageError:
    if _is_heif(head):
        return ImageError(
            f"{name} is a HEIC/AVIF picture, which Fermix cannot read yet — send it as JPEG "
            "or PNG (on iPhone: Settings → Camera → Formats → Most Compatible)."
        )
    return ImageError(
        f"{name} does not look like a picture Fermix can read ({_READABLE}) — send it as "
        "one of those."
    )


def check_local_image(path: str | os.PathLike[str], *, cap: int = DEFAULT_INBOUND_CAP) -> str:
    """Check a local file before it is sent as an image; its sniffed media type.

    Raises :class:`ImageError` saying what is wrong (missing, a directory, unreadable, over
    *cap*, not a picture). Reads only the first bytes, so the CLI can call it cheaply.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if not file.is_file():
            raise ImageError(f"{file} is not a file — pass the path of an image file")
        with file.open("rb") as handle:
            head = handle.read(32)
    except FileNotFoundError:
        raise ImageError(f"{file} does not exist — check the path") from None
    except PermissionError:
        raise ImageError(f"{file} cannot be read (permission denied)") from None
    except OSError as exc:
        raise ImageError(f"{file} cannot be read ({exc.strerror or exc})") from None
    if size == 0:
        raise ImageError(f"{file} is empty — pass an image file")
    if size > cap:
        raise ImageError(f"{file} is {_mb(size)}, over the {_mb(cap)} limit for images")
    media_type = sniff_image(head)
    if media_type is None:
        raise _unreadable(str(file), head)
    return media_type


# ----------------------------------------------------------------------------- keep


class ImageStore:
    """Content-addressed image files under ``$FERMIX_HOME/media/images`` (0700 / 0600).

    The name is the SHA-256 of the bytes, so the same picture sent twice is one file and a
    stored name can never point at different content later.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_home(cls, home: Any) -> ImageStore:
        return cls(Path(home.media) / "images")

    def save(self, data: bytes, media_type: str) -> Path:
        """Write *data* (once) and return its path; blocking."""
        from fermix_core.fsutil import atomic_write

        digest = hashlib.sha256(data).hexdigest()
        path = self.root / f"{digest}.{_EXTENSIONS.get(media_type, 'img')}"
        if path.is_file() and path.stat().st_size == len(data):
            return path
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, data, mode=0o600)
        return path


# ----------------------------------------------------------------------------- admit


def inbound_cap(reply: Any, default: int = DEFAULT_INBOUND_CAP) -> int:
    """The image cap of the surface behind *reply*: its channel's ``max_inbound_media``."""
    channel = getattr(reply, "channel", None)
    declared = getattr(channel, "max_inbound_media", None)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return declared
    return default


def _where(message: InboundMessage) -> str:
    return "here" if message.local else f"on {message.channel}"


class ImageIntake:
    """The gateway's image step: cap, sniff and store every image of a message."""

    def __init__(
        self,
        store: ImageStore,
        *,
        default_cap: int = DEFAULT_INBOUND_CAP,
        emit: Callable[..., object] | None = None,
    ) -> None:
        self.store = store
        self.default_cap = default_cap
        self._emit = emit

    async def admit(self, message: InboundMessage, reply: Any) -> InboundMessage | str:
        """*message* with its images stored as files, or the reply that refuses it."""
        if not any(is_image(a) for a in message.attachments):
            return message
        import anyio.to_thread

        cap = inbound_cap(reply, self.default_cap)
        try:
            attachments = await anyio.to_thread.run_sync(self._admit_all, message, cap)
        except ImageError as exc:
            self._notify("refused", message, str(exc))
            return str(exc)
        self._notify("admitted", message, None, count=sum(map(is_image, attachments)))
        return message.model_copy(update={"attachments": attachments})

    def _admit_all(self, message: InboundMessage, cap: int) -> list[Attachment]:
        admitted: list[Attachment] = []
        for attachment in message.attachments:
            admitted.append(
                self._admit(message, attachment, cap) if is_image(attachment) else attachment
            )
        return admitted

    def _admit(self, message: InboundMessage, attachment: Attachment, cap: int) -> Attachment:
        name = _name(attachment)
        limit = f"the {_mb(cap)} limit for images {_where(message)}"
        declared = attachment.size
        if attachment.withheld or (declared is not None and declared > cap):
            size = f" ({_mb(declared)})" if declared else ""
            raise ImageError(
                f"{name}{size} is over {limit}, so I did not download it — send a smaller "
                "or compressed copy."
            )
        try:
            if attachment.path is not None:
                # Check a file before reading it: a local caller may name anything.
                info = attachment.path.stat()
                if not attachment.path.is_file():
                    raise ImageError(f"{name} is not a file — send an image file")
                if info.st_size > cap:
                    raise ImageError(
                        f"{name} ({_mb(info.st_size)}) is over {limit} — send a smaller copy."
                    )
            data = attachment.read_bytes()
        except FileNotFoundError:
            raise ImageError(f"{name} does not exist (any more) — check the path") from None
        except OSError as exc:
            raise ImageError(f"{name} could not be read ({exc.strerror or exc})") from None
        if not data:
            raise ImageError(f"{name} arrived empty — send it again.")
        if len(data) > cap:
            raise ImageError(f"{name} ({_mb(len(data))}) is over {limit} — send a smaller copy.")
        media_type = sniff_image(data[:32])
        if media_type is None:
            raise _unreadable(name, data[:32])
        path = self.store.save(data, media_type)
        return Attachment(
            kind=AttachmentKind.IMAGE,
            path=path,
            mime_type=media_type,
            filename=attachment.filename,
            size=len(data),
            caption=attachment.caption,
        )

    def _notify(self, status: str, message: InboundMessage, error: str | None, **data: Any) -> None:
        if self._emit is None:
            return
        try:
            self._emit("media.image", channel=message.channel, status=status, error=error, **data)
        except Exception:
            log.exception("telemetry emit of media.image failed")


# ----------------------------------------------------------------------------- fit


def _decoded_size(image: Any) -> tuple[int, int]:
    return int(image.size[0]), int(image.size[1])


def fit_image(data: bytes, media_type: str, limits: ImageLimits) -> tuple[bytes, str]:
    """*data* made to fit *limits*: ``(bytes, media_type)``; the input itself when it does.

    Downscales (keeping the aspect ratio) to ``max_long_edge``, applies the EXIF rotation,
    flattens animations to their first frame, and re-encodes (PNG for pictures with
    transparency or PNG sources that fit, JPEG otherwise), shrinking further until the
    bytes fit ``max_bytes``. Raises :class:`ImageError` for bytes Pillow cannot decode.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        image = Image.open(BytesIO(data))
        width, height = _decoded_size(image)
    except Image.DecompressionBombError:
        raise ImageError("the image has too many pixels to decode safely") from None
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        if media_type in limits.media_types and len(data) <= limits.max_bytes:
            # Nothing to shrink that we can see: the provider is the judge of these bytes.
            log.debug("passing an undecodable %s image through as it is", media_type)
            return data, media_type
        raise ImageError(f"the image could not be decoded ({type(exc).__name__})") from None
    with image:
        animated = bool(getattr(image, "is_animated", False))
        rotated = image.getexif().get(0x0112, 1) not in (1, None)
        fits = (
            media_type in limits.media_types
            and max(width, height) <= limits.max_long_edge
            and len(data) <= limits.max_bytes
            and not (animated and media_type == "image/gif")
            and not rotated
        )
        if fits:
            return data, media_type
        edge = min(limits.max_long_edge, max(width, height))
        if image.format == "JPEG":
            # Let libjpeg decode at a reduced scale: a 12-megapixel photo costs a fraction.
            scale = edge / max(width, height)
            image.draft("RGB", (max(1, int(width * scale)), max(1, int(height * scale))))
        try:
            image.seek(0)
            frame = ImageOps.exif_transpose(image)
            frame.load()
        except (OSError, ValueError) as exc:
            raise ImageError(f"the image could not be decoded ({type(exc).__name__})") from None
    alpha = frame.mode in ("RGBA", "LA", "PA") or (
        frame.mode == "P" and "transparency" in frame.info
    )
    png_first = alpha or media_type in ("image/png", "image/gif", "image/bmp", "image/tiff")
    while True:
        candidate = frame.copy()
        candidate.thumbnail((edge, edge), Image.Resampling.LANCZOS)
        out, out_type = _encode(candidate, png_first and "image/png" in limits.media_types)
        if len(out) <= limits.max_bytes:
            return out, out_type
        if png_first and "image/jpeg" in limits.media_types:
            out, out_type = _encode(candidate, False)
            if len(out) <= limits.max_bytes:
                return out, out_type
        if edge <= _MIN_EDGE:
            raise ImageError(
                f"the image cannot be brought under {_mb(limits.max_bytes)} without losing it"
            )
        edge = max(_MIN_EDGE, int(edge * 0.75))


def _encode(image: Any, png: bool) -> tuple[bytes, str]:
    buffer = BytesIO()
    if png:
        if image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
            image = image.convert("RGBA")
        image.save(buffer, format="PNG")
        return buffer.getvalue(), "image/png"
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        from PIL import Image

        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, (255, 255, 255))
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    elif image.mode != "RGB":
        image = image.convert("RGB")
    image.save(buffer, format="JPEG", quality=85, optimize=True)
    return buffer.getvalue(), "image/jpeg"


class _FitCache:
    """Fitted parts by (source, limits), bounded by their total bytes (LRU)."""

    def __init__(self, max_bytes: int = _FIT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], ImagePart] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> ImagePart | None:
        with self._lock:
            part = self._items.get(key)
            if part is not None:
                self._items.move_to_end(key)
            return part

    def put(self, key: tuple[Any, ...], part: ImagePart) -> None:
        size = len(part.data or b"")
        if size > self.max_bytes // 4:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = part
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= len(dropped.data or b"")


_CACHE = _FitCache()


def _source_key(part: ImagePart) -> tuple[Any, ...] | None:
    if part.path is not None:
        try:
            stat = os.stat(part.path)
        except OSError:
            return None
        return ("path", part.path, stat.st_size, stat.st_mtime_ns)
    assert part.data is not None
    return ("data", hashlib.sha1(part.data, usedforsecurity=False).digest(), len(part.data))


def _missing(part: ImagePart) -> TextPart:
    name = Path(part.path).name if part.path else "an image"
    return TextPart(text=f"[image not available any more: {name} was removed from this machine]")


def fit_part(part: ImagePart, limits: ImageLimits) -> ImagePart | TextPart:
    """One part ready for a wire: inline bytes inside *limits* (blocking; cached)."""
    if part.url is not None:
        return part  # a provider-side fetch; nothing to fit here
    key = _source_key(part)
    if key is None:
        return _missing(part)
    cache_key = (*key, limits)
    cached = _CACHE.get(cache_key)
    if cached is not None:
        return cached
    try:
        data = part.read()
    except FileNotFoundError:
        return _missing(part)
    try:
        fitted, media_type = fit_image(data, part.media_type, limits)
    except ImageError as exc:
        log.warning("an image could not be prepared for the model: %s", exc)
        return TextPart(text=f"[an image could not be sent: {exc}]")
    if fitted is data and part.data is not None:
        result = part
    else:
        result = ImagePart(media_type=media_type, data=fitted)
    _CACHE.put(cache_key, result)
    return result


def model_label(provider: Any, model: str | None) -> str:
    """The model a request to *provider* goes to, by name (for messages to people)."""
    resolve = getattr(provider, "model_id", None)
    if callable(resolve):
        with contextlib.suppress(Exception):  # no model chosen: fall back to the names below
            return str(resolve(model))
    own = getattr(provider, "model", None)
    return model or (own if isinstance(own, str) and own else "the configured model")


def _parts_of(message: Message) -> Sequence[TextPart | ImagePart]:
    return message.tool_result.content if message.tool_result is not None else message.content


def _with_parts(message: Message, parts: list[TextPart | ImagePart]) -> Message:
    if message.tool_result is not None:
        return message.model_copy(
            update={"tool_result": message.tool_result.model_copy(update={"content": parts})}
        )
    return message.model_copy(update={"content": parts})


def _fit_all(messages: list[Message], limits: ImageLimits) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        parts = _parts_of(message)
        if not any(isinstance(p, ImagePart) for p in parts):
            out.append(message)
            continue
        fitted = [fit_part(p, limits) if isinstance(p, ImagePart) else p for p in parts]
        out.append(_with_parts(message, fitted))
    return out


async def prepare_request(provider: Provider, request: ChatRequest) -> ChatRequest:
    """*request* with every image ready for *provider*'s wire (see the module docstring).

    Raises :class:`~fermix_core.provider.ProviderError` (``unsupported_input``) naming the
    model when the newest user message, or a tool result after it, carries an image and
    the route's model has no vision.
    """
    from fermix_core.provider import ErrorKind, ProviderError

    messages = list(request.messages)
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    current = users[-1] if users else 0
    if not provider.vision(request.model):
        if any(m.images for m in messages[current:]):
            model = model_label(provider, request.model)
            where = f"[fermix_core.providers.{provider.name}]" if provider.name else "the route"
            raise ProviderError(
                ErrorKind.UNSUPPORTED_INPUT,
                f"{model} cannot read images, so the picture was not sent to it — switch to "
                f"a vision-capable model (`fermix setup`), or, if {model} does read images, "
                f"list it in {where} vision_models",
                provider=provider.name or None,
            )
        note = TextPart(
            text=f"[an earlier image is not shown: {model_label(provider, request.model)} "
            "cannot read images]"
        )
        messages = [
            _with_parts(m, [note if isinstance(p, ImagePart) else p for p in _parts_of(m)])
            if m.images
            else m
            for m in messages
        ]
        return request.model_copy(update={"messages": messages})
    import anyio.to_thread

    limits = getattr(provider, "image_limits", None)
    if not isinstance(limits, ImageLimits):
        limits = DEFAULT_IMAGE_LIMITS
    fitted = await anyio.to_thread.run_sync(_fit_all, messages, limits)
    return request.model_copy(update={"messages": fitted})

"""What a provider accepts per image, as one record the fitter reads.

Providers declare the numbers as plain class attributes (``Provider.image_max_edge``,
``image_max_bytes``, ``image_types``) so that adapter modules, which load on the cold
``fermix ask`` path, import nothing of this package; ``Provider.image_limits`` builds the
record when an image is actually fitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_IMAGE_LIMITS", "MB", "WIRE_IMAGE_TYPES", "ImageLimits"]

MB = 1024 * 1024

#: What every vision wire Fermix speaks takes (OpenAI, Anthropic, xAI, Mistral, Ollama).
WIRE_IMAGE_TYPES: frozenset[str] = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class ImageLimits:
    """The largest image a provider takes: long edge in pixels, encoded bytes, formats.

    ``max_bytes`` is the raw (pre-base64) size; a provider whose cap is on the base64 text
    declares three quarters of it. An image inside all three limits is sent untouched;
    anything else is re-encoded (and downscaled when needed) by
    :func:`fermix_core.media.images.fit_image`.
    """

    max_long_edge: int = 2048
    max_bytes: int = 20 * MB
    media_types: frozenset[str] = field(default=WIRE_IMAGE_TYPES)

    def __post_init__(self) -> None:
        if self.max_long_edge < 64:
            raise ValueError("ImageLimits.max_long_edge must be at least 64 pixels")
        if self.max_bytes < 64 * 1024:
            raise ValueError("ImageLimits.max_bytes must be at least 64 KiB")
        if not self.media_types or not {"image/png", "image/jpeg"} & self.media_types:
            raise ValueError("ImageLimits.media_types must include image/png or image/jpeg")


#: For a provider that declares nothing: OpenAI's "high detail" box and a 20 MB file.
DEFAULT_IMAGE_LIMITS = ImageLimits()

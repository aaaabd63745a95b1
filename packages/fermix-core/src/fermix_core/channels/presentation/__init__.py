"""Presentation: the agent's Markdown as each platform should receive it.

Markdown is parsed once (markdown-it-py) into a small intermediate form (:mod:`.ir`), each
dialect renders that form (:mod:`.render`), and long replies are cut on the boundary ladder
(:mod:`.split`) so that every *rendered* message fits the platform's cap in the platform's
own measure (:mod:`.dialect`). Pure: no I/O, no platform clients; third-party channels use
it as is, with their own :class:`DialectProfile` where their markup differs.

The entry points:

- :func:`present` — a whole reply → :class:`Presentation` (chunks, plus oversized code
  blocks as text-file attachments);
- :func:`seal_point`, :func:`block_cut`, :func:`rendered_length` — the cutters the stream
  controller uses on partial Markdown (draft cards, block mode);
- :func:`send_with_plain_fallback` — send one chunk, resending it once as plain text when
  the platform rejects the formatting.
"""

from .dialect import (
    MEASURES,
    Dialect,
    DialectProfile,
    channel_profile,
    code_points,
    dialect_profile,
    register_dialect,
    utf8_bytes,
    utf16_units,
)
from .fallback import is_channel_format_error, send_with_plain_fallback
from .present import MIN_LIMIT, Presentation, RenderedChunk, present, snippet_filename
from .render import Renderer
from .stream import block_cut, rendered_length, seal_point

__all__ = [
    "MEASURES",
    "MIN_LIMIT",
    "Dialect",
    "DialectProfile",
    "Presentation",
    "RenderedChunk",
    "Renderer",
    "block_cut",
    "channel_profile",
    "code_points",
    "dialect_profile",
    "is_channel_format_error",
    "present",
    "register_dialect",
    "rendered_length",
    "seal_point",
    "send_with_plain_fallback",
    "snippet_filename",
    "utf8_bytes",
    "utf16_units",
]

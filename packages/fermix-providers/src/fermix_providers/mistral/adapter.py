"""Mistral on the Chat Completions wire.

Mistral validates strictly, which shapes three choices here: no ``stream_options`` key (it
is rejected as an unknown input; usage arrives in the last chunk unasked), no effort field,
and tool-call ids of exactly nine letters or digits. Ids minted by another provider — after
a failover, or in history from an earlier primary — are mapped onto that form by a stable
hash, so a call and its result still pair up and a replayed history maps the same way
every time.
"""

from __future__ import annotations

import hashlib
import re
from typing import ClassVar

from fermix_providers.wires.chat_completions import ChatCompletionsProvider

__all__ = ["MistralProvider", "mistral_call_id"]

_VALID_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mistral_call_id(call_id: str) -> str:
    """*call_id* if Mistral accepts it, else a stable nine-character alphanumeric stand-in."""
    if _VALID_ID.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(chars)


class MistralProvider(ChatCompletionsProvider):
    sends_effort: ClassVar[bool] = False
    stream_usage_option: ClassVar[bool] = False
    #: Mistral's vision docs: at most 10 MB per image.
    image_max_bytes: ClassVar[int] = 10 * 1024 * 1024

    def wire_call_id(self, call_id: str) -> str:
        return mistral_call_id(call_id)

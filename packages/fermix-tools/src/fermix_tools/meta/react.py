"""``react``: acknowledge the user's message with one emoji instead of a filler reply.

The capability registry offers ``react`` only when the channel has reactions, and the
agent loop puts the channel's allowed set in ``ctx.state["allowed_reactions"]``: an empty
set means any single emoji (Discord, WhatsApp, Signal), a non-empty one is the platform's
fixed list (Telegram's emoji, Slack's shortcode names). A reaction *is* the answer, so the
tool ends the turn: it returns ``data={"end_turn": True}`` and the loop must stop there
without asking the model for a closing text bubble.

"One emoji" is checked structurally (a flag pair, a keycap, or one pictograph with its
modifiers and zero-width-joined parts) so that "ok 👍" or three hearts are refused with a
reason the model can act on, instead of failing at the platform.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from fermix_core.tool import Tool, ToolContext, ToolError, ToolOutput
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["INBOUND_MESSAGE_ID", "React", "ReactArgs", "is_single_emoji"]

#: ``ctx.state`` key holding the platform id of the message this turn answers.
INBOUND_MESSAGE_ID = "inbound_message_id"

_VS16, _VS15, _ZWJ, _KEYCAP, _TAG_END = 0xFE0F, 0xFE0E, 0x200D, 0x20E3, 0xE007F
_KEYCAP_BASES = frozenset(map(ord, "0123456789#*"))
_MAX_CODEPOINTS = 32


def _regional(cp: int) -> bool:
    return 0x1F1E6 <= cp <= 0x1F1FF


def _skin_tone(cp: int) -> bool:
    return 0x1F3FB <= cp <= 0x1F3FF


def _tag(cp: int) -> bool:
    return 0xE0020 <= cp <= 0xE007E


def _pictograph(cp: int) -> bool:
    """A code point that can start an emoji (a symbol, not a letter, digit or space)."""
    if 0x1F000 <= cp <= 0x1FAFF or 0x2600 <= cp <= 0x27BF or 0x2B00 <= cp <= 0x2BFF:
        return True
    if 0x2190 <= cp <= 0x23FF or cp in (0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139):
        return True
    if cp in (0x3030, 0x303D, 0x3297, 0x3299, 0x24C2, 0x25AA, 0x25AB, 0x25B6, 0x25C0):
        return True
    return 0x25FB <= cp <= 0x25FE or unicodedata.category(chr(cp)) == "So"


def _element(cps: list[int], i: int) -> int | None:
    """Parse one emoji element at *i*; the index after it, or ``None`` if there is none."""
    if i >= len(cps) or not _pictograph(cps[i]) or _skin_tone(cps[i]):
        return None
    i += 1
    if i < len(cps) and cps[i] in (_VS16, _VS15):
        i += 1
    if i < len(cps) and _skin_tone(cps[i]):
        i += 1
    if i < len(cps) and _tag(cps[i]):  # subdivision flags: tag letters, then a cancel tag
        while i < len(cps) and _tag(cps[i]):
            i += 1
        if i >= len(cps) or cps[i] != _TAG_END:
            return None
        i += 1
    return i


def is_single_emoji(text: str) -> bool:
    """Whether *text* is exactly one emoji as a user would see it (one grapheme)."""
    cps = [ord(ch) for ch in text]
    if not cps or len(cps) > _MAX_CODEPOINTS:
        return False
    if _regional(cps[0]):
        return len(cps) == 2 and _regional(cps[1])
    if cps[0] in _KEYCAP_BASES:
        return cps[1:] in ([_VS16, _KEYCAP], [_KEYCAP])
    i = _element(cps, 0)
    while i is not None and i < len(cps):
        if cps[i] != _ZWJ:
            return False
        i = _element(cps, i + 1)
    return i == len(cps)


def _variants(text: str) -> set[str]:
    """Spellings that platforms treat as the same reaction (VS16 and Slack colons)."""
    plain = text.strip()
    forms = {plain, plain.replace(chr(_VS16), "")}
    if len(plain) > 2 and plain.startswith(":") and plain.endswith(":"):
        forms.add(plain[1:-1])
    return forms


class ReactArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emoji: str = Field(
        min_length=1,
        max_length=64,
        description=(
            "One emoji (or, where the catalog lists names, one of those names) to put on "
            "the user's message."
        ),
    )


class React(Tool[ReactArgs]):
    async def run(self, args: ReactArgs, ctx: ToolContext) -> ToolOutput:
        emoji = self._validate(args.emoji, ctx.state.get("allowed_reactions"))
        key = ctx.conversation_key
        message_id = ctx.state.get(INBOUND_MESSAGE_ID)
        if key is None or not message_id:
            raise ToolError(
                "There is no incoming message to react to on this run; answer with text."
            )
        reply = ctx.service("reply")
        react = getattr(reply, "react", None)
        if not callable(react):
            channel = getattr(reply, "channel", None)
            react = getattr(channel, "react", None)
        features = getattr(reply, "features", None)
        if not callable(react) or getattr(features, "reactions", ()) is None:
            raise ToolError("This channel cannot show reactions; answer with a short text instead.")
        try:
            await react(key.chat_id, str(message_id), emoji)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                f"The channel refused the reaction {emoji}: {exc}. Answer with a short text."
            ) from None
        data: dict[str, Any] = {"end_turn": True, "emoji": emoji, "message_id": str(message_id)}
        return ToolOutput(content=f"Reacted with {emoji}. The turn ends here.", data=data)

    @staticmethod
    def _validate(raw: str, allowed: Any) -> str:
        forms = _variants(raw)
        if allowed:
            for option in allowed:
                if forms & _variants(str(option)):
                    return str(option)
            listed = " ".join(str(a) for a in allowed)
            raise ToolError(
                f"{raw.strip()!r} is not a reaction this channel accepts. Pick one of: {listed}"
            )
        emoji = raw.strip()
        if not is_single_emoji(emoji):
            raise ToolError(
                f"{emoji!r} is not a single emoji. Send exactly one emoji (like 👍), or answer "
                "with text if a reaction does not fit."
            )
        return emoji

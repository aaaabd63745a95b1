"""Finding fence tags however they are spelled, so untrusted text cannot close a fence.

Fermix wraps text it does not trust — recalled memory, a guest's words in a group chat —
in a tag pair such as ``<memory-context>`` … ``</memory-context>`` and tells the model
that what is inside is data. That only holds while the text inside cannot produce a
closing tag the model would read as the real one. Models read generously: ``</memory‐context>``
with a Unicode hyphen, ``</memory.context>``, ``&lt;/memory-context&gt;``, a Cyrillic ``е``
or ``о`` inside the word, full-width brackets or a zero-width space all look like the
closer to a reader. :func:`tag_pattern` builds one pattern per tag that matches every such
spelling, and :func:`find_tags` runs it over a *probe* — the text normalised (NFKC,
invisible controls removed) with look-alike letters, brackets and slashes folded to ASCII —
whose characters line up one to one with the normalised text, so a match can be replaced
in place.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["find_tags", "normalized", "probe", "replace_tags", "tag_pattern"]

#: Soft hyphen, zero-width and bidi controls, word joiners, BOM: invisible in a reader.
INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

# Look-alikes NFKC leaves alone. Only one character each way, so a probe keeps the length
# of the text it was made from. Letters: the Cyrillic and Greek homoglyphs of Latin ones.
_LOOKALIKES = {
    # brackets
    "\u2039": "<",  # ‹
    "\u203a": ">",  # ›
    "\u2329": "<",  # 〈 (NFKC gives 〈)
    "\u232a": ">",
    "\u3008": "<",  # 〈
    "\u3009": ">",
    "\u27e8": "<",  # ⟨
    "\u27e9": ">",
    "\u276c": "<",  # ❬
    "\u276d": ">",
    "\u02c2": "<",  # ˂
    "\u02c3": ">",
    "\u1438": "<",  # ᐸ
    "\u1433": ">",
    "\u00ab": "<",  # «
    "\u00bb": ">",
    # slashes
    "\u2215": "/",  # ∕
    "\u2044": "/",  # ⁄
    "\u29f8": "/",  # ⧸
    "\u2571": "/",  # ╱
    "\u30fb": ".",  # ・
    # Cyrillic
    "\u0430": "a",
    "\u0435": "e",
    "\u0451": "e",
    "\u043e": "o",
    "\u0440": "p",
    "\u0441": "c",
    "\u0443": "y",
    "\u0445": "x",
    "\u0456": "i",
    "\u0458": "j",
    "\u0455": "s",
    "\u043c": "m",
    "\u0442": "t",
    "\u043d": "h",
    "\u043f": "n",
    "\u0501": "d",
    "\u0261": "g",
    "\u04bb": "h",
    "\u0410": "A",
    "\u0412": "B",
    "\u0415": "E",
    "\u041a": "K",
    "\u041c": "M",
    "\u041d": "H",
    "\u041e": "O",
    "\u0420": "P",
    "\u0421": "C",
    "\u0422": "T",
    "\u0423": "Y",
    "\u0425": "X",
    "\u0406": "I",
    # Greek
    "\u03bf": "o",
    "\u03b1": "a",
    "\u03b5": "e",
    "\u03b9": "i",
    "\u03ba": "k",
    "\u03bd": "v",
    "\u03c1": "p",
    "\u03c4": "t",
    "\u03c5": "u",
    "\u03c7": "x",
    "\u0391": "A",
    "\u0392": "B",
    "\u0395": "E",
    "\u0397": "H",
    "\u0399": "I",
    "\u039a": "K",
    "\u039c": "M",
    "\u039d": "N",
    "\u039f": "O",
    "\u03a1": "P",
    "\u03a4": "T",
    "\u03a5": "Y",
    "\u03a7": "X",
    "\u0396": "Z",
    # Latin small capitals and dotless forms
    "\u1d0d": "m",
    "\u1d07": "e",
    "\u1d0f": "o",
    "\u0280": "r",
    "\u028f": "y",
    "\u1d04": "c",
    "\u0274": "n",
    "\u1d1b": "t",
    "\u0131": "i",
}
_FOLD = str.maketrans(_LOOKALIKES)

# An opening bracket as a reader may take it: the character, or an HTML/URL/JSON escape.
_OPEN = r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?|%3c|\\u003c|\\x3c)"
_CLOSE = r"(?:>|&gt;?|&#0*62;?|&#x0*3e;?|%3e|\\u003e|\\x3e)"
_SLASH = r"(?:/|&sol;|&#0*47;?|&#x0*2f;?|%2f|\\u002f|\\/)"
# Between the words of a tag: nothing, or up to three non-letters (hyphens of every kind,
# dots, spaces, underscores, colons).
_JOIN = r"[^A-Za-z0-9<>]{0,3}"


def normalized(text: str) -> str:
    """NFKC with invisible controls removed: what a reader effectively sees."""
    return INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def probe(plain: str) -> str:
    """*plain* (already :func:`normalized`) with look-alikes folded; same length."""
    return plain.translate(_FOLD)


def tag_pattern(*words: str, bare: bool = True) -> re.Pattern[str]:
    """Every opening or closing spelling of the tag made of *words* (``"memory", "context"``).

    The tag may be opened by ``<`` or an escape of it, carry a slash (or an escape of one),
    join its words with any short run of non-letters, and carry attributes up to its
    closing bracket. With *bare*, the words alone after a slash (``/memory-context``) count
    too: a reader takes that for a closer.
    """
    name = _JOIN.join(re.escape(w) for w in words)
    tag = rf"{_OPEN}\s*(?:{_SLASH}\s*)?{name}\b[^<>]{{0,64}}?(?:{_CLOSE}|(?=<)|$)"
    if bare:
        # Not a path component: ``src/memory_context.py`` is a file name, not a tag.
        tag = rf"(?:{tag}|(?<![\w.~-]){_SLASH}\s*{name}\b(?!\.\w)(?:\s*{_CLOSE})?)"
    return re.compile(tag, re.IGNORECASE)


def find_tags(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """Spans of *pattern* in the probe of *text*; *text* must already be :func:`normalized`."""
    return [m.span() for m in pattern.finditer(probe(text))]


def replace_tags(pattern: re.Pattern[str], text: str, replace: Callable[[str], str]) -> str:
    """*text* (normalised first) with every match of *pattern* replaced by ``replace(span)``."""
    plain = normalized(text)
    spans = find_tags(pattern, plain)
    if not spans:
        return plain
    out: list[str] = []
    last = 0
    for start, end in spans:
        out.append(plain[last:start])
        out.append(replace(plain[start:end]))
        last = end
    out.append(plain[last:])
    return "".join(out)

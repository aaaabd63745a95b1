"""A small Okapi BM25 index for ranking deferred tools against a free-text query.

The deferred catalog is tens to a few hundred short documents (a name, a description, some
guidance), rebuilt at most once per capability snapshot. At that size an in-memory BM25 is
exact, instant and dependency-free, and its ranking is predictable enough to test — which a
fuzzy matcher or an embedding model would not be.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = ["BM25Index", "tokenize"]

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

#: Words that appear in nearly every tool description and would only add noise.
_STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how",
        "i", "in", "into", "is", "it", "its", "of", "on", "or", "the", "this", "to", "use",
        "used", "with", "you", "your", "what", "when", "which",
    }
)  # fmt: skip


def _normalize(token: str) -> str:
    """Fold simple plurals so "emails" finds "email" and "entries" finds "entry"."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    """Lowercase word tokens; ``snake_case`` and ``camelCase`` split into their words."""
    spaced = _CAMEL.sub(" ", text).lower()
    return [_normalize(t) for t in _WORD.findall(spaced) if t not in _STOPWORDS]


class BM25Index:
    """Rank documents (``key``, ``text``) against a query with Okapi BM25.

    ``k1`` and ``b`` are the customary defaults. IDF uses the "plus one" form, which stays
    positive for terms present in most documents, so a query that matches everything still
    ranks by term frequency instead of scoring zero.
    """

    def __init__(self, documents: Iterable[tuple[str, str]], *, k1: float = 1.2, b: float = 0.75):
        self.k1 = k1
        self.b = b
        self._keys: list[str] = []
        self._freqs: list[Counter[str]] = []
        self._lengths: list[int] = []
        df: Counter[str] = Counter()
        for key, text in documents:
            tokens = tokenize(text)
            freqs = Counter(tokens)
            self._keys.append(key)
            self._freqs.append(freqs)
            self._lengths.append(len(tokens))
            df.update(freqs.keys())
        count = len(self._keys)
        self._avg_length = (sum(self._lengths) / count) if count else 0.0
        self._idf = {term: math.log(1.0 + (count - n + 0.5) / (n + 0.5)) for term, n in df.items()}

    def __len__(self) -> int:
        return len(self._keys)

    def search(self, query: str, limit: int = 5) -> list[tuple[str, float]]:
        """The best ``limit`` keys with a positive score, best first (ties by key)."""
        terms = [t for t in dict.fromkeys(tokenize(query)) if t in self._idf]
        if not terms or limit <= 0:
            return []
        scored: list[tuple[str, float]] = []
        for key, freqs, length in zip(self._keys, self._freqs, self._lengths, strict=True):
            score = self._score(terms, freqs, length)
            if score > 0.0:
                scored.append((key, score))
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:limit]

    def _score(self, terms: Sequence[str], freqs: Counter[str], length: int) -> float:
        norm = self.k1 * (
            1.0 - self.b + self.b * (length / self._avg_length if self._avg_length else 0.0)
        )
        score = 0.0
        for term in terms:
            tf = freqs.get(term, 0)
            if tf:
                score += self._idf[term] * (tf * (self.k1 + 1.0)) / (tf + norm)
        return score

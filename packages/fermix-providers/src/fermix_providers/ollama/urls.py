"""An Ollama server's two URL forms: the OpenAI-compatible base (``…/v1``) a chat turn
uses, and the server root of its native ``/api`` routes (model listing, probes).

Kept apart from :mod:`fermix_providers.listing` (which re-exports them) so that a chat
turn through Ollama does not load the listing and probing code, its records and its
HTTP helpers.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["OLLAMA_DEFAULT_ROOT", "ollama_compat_base", "ollama_native_root"]

OLLAMA_DEFAULT_ROOT = "http://localhost:11434"


def ollama_native_root(base_url: str | None) -> str:
    """The server root for the native ``/api`` routes, from the OpenAI-compatible base URL."""
    base = (base_url or OLLAMA_DEFAULT_ROOT).rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def ollama_compat_base(base_url: str | None) -> str:
    """The OpenAI-compatible base (``…/v1``), also when given a bare server address.

    ``OLLAMA_BASE_URL=http://gpu-box:11434`` is how people write an Ollama host; without
    the ``/v1`` every chat call would 404, so a URL with no path gets it added.
    """
    base = (base_url or OLLAMA_DEFAULT_ROOT).rstrip("/")
    return f"{base}/v1" if urlsplit(base).path in ("", "/") else base

"""The one error a login raises; its message is shown to the person logging in as is."""

from __future__ import annotations

__all__ = ["LoginError"]


class LoginError(Exception):
    """A login could not finish. The message says why and what to do; it never holds a token."""

"""Failures the user can fix, printed as one line instead of a traceback.

Kept free of typer and of heavy imports: both the fast ``fermix ask`` path and the typer
app use it.
"""

from __future__ import annotations


def user_error(exc: BaseException) -> str | None:
    """The one line to print for a failure the user can fix (a damaged or newer
    ``memory.db``, ``auth.json`` readable by others, a daemon that went away mid-request),
    or ``None`` for a bug, which keeps its traceback. Task groups may wrap the error."""
    from fermix_core.authfile import AuthFileError
    from fermix_core.daemon.client import DaemonUnavailable
    from fermix_core.store.records import StoreError

    if isinstance(exc, BaseExceptionGroup):
        parts = [user_error(inner) for inner in exc.exceptions]
        return None if not parts or None in parts else "; ".join(dict.fromkeys(parts))  # type: ignore[arg-type]
    if isinstance(exc, StoreError | AuthFileError | DaemonUnavailable):
        return str(exc)
    return None

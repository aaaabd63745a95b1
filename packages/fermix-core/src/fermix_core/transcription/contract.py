"""The speech-to-text backend contract.

A ``TranscriptionBackendSpec.factory`` is called once, on the first audio message, as
``factory(settings)`` with :class:`BackendSettings`, and returns a
:class:`TranscriptionBackend`. ``transcribe`` gets one :class:`AudioClip` — the file's real
bytes, the container's MIME type and a filename whose extension matches it (some services
detect the format from the name) — and returns the transcript text.

A backend raises :class:`TranscriptionFailed` for anything the service or the network
did wrong (the sender is asked to try again); every other exception is treated the same
way and logged as a bug. An empty transcript is not an error here: the gateway answers it
as "no speech heard".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

__all__ = [
    "AudioClip",
    "BackendSettings",
    "NoSpeech",
    "TranscriptionBackend",
    "TranscriptionError",
    "TranscriptionFailed",
    "TranscriptionNotConfigured",
    "TranscriptionTooLarge",
]


@dataclass(frozen=True)
class AudioClip:
    """One audio file to transcribe."""

    data: bytes = field(repr=False)
    mime_type: str
    filename: str

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class BackendSettings:
    """What a backend is built with. ``model`` is ``None`` for modelless backends;
    ``base_url`` is ``None`` for the service's own; ``http`` is the runtime's shared client."""

    name: str
    http: httpx.AsyncClient
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    base_url: str | None = None


@runtime_checkable
class TranscriptionBackend(Protocol):
    name: str

    async def transcribe(self, clip: AudioClip) -> str:
        """The transcript of *clip*; raises :class:`TranscriptionFailed` on failure."""
        ...


class TranscriptionError(Exception):
    """Base of every transcription failure; ``status`` is its telemetry/outcome name."""

    status = "failed"


class TranscriptionNotConfigured(TranscriptionError):
    """No usable backend: unknown or unloadable, or its credential is missing."""

    status = "not_configured"


class TranscriptionTooLarge(TranscriptionError):
    """The file is over ``max_file_mb``; ``size`` is what was declared or measured."""

    status = "too_large"

    def __init__(self, size: int, cap: int) -> None:
        super().__init__(f"audio of {size} bytes is over the {cap}-byte cap")
        self.size = size
        self.cap = cap


class TranscriptionFailed(TranscriptionError):
    """The service or the network failed; worth trying again."""

    status = "failed"


class NoSpeech(TranscriptionError):
    """The service answered with an empty transcript."""

    status = "no_speech"

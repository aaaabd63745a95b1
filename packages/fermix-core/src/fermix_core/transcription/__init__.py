"""Speech-to-text for inbound audio: the backend contract, the engine and the gateway step.

* :mod:`.contract` — what a ``fermix_transcription_backends`` factory builds
  (:class:`TranscriptionBackend`), what it is given (:class:`BackendSettings`,
  :class:`AudioClip`) and the errors it raises;
* :mod:`.engine` — :class:`Transcriber`: ``[fermix_core.transcription]`` → the selected
  backend, its model and its credential (own key, else the reused chat-provider key);
* :mod:`.inbound` — the gateway's media step for audio: size cap, transcript into the turn
  text, a specific reply to the sender when it cannot be done;
* :mod:`.doctor`, :mod:`.setup_step` — the ``transcription`` doctor row and setup step.
"""

from __future__ import annotations

from fermix_core.transcription.contract import (
    AudioClip,
    BackendSettings,
    NoSpeech,
    TranscriptionBackend,
    TranscriptionError,
    TranscriptionFailed,
    TranscriptionNotConfigured,
    TranscriptionTooLarge,
)

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

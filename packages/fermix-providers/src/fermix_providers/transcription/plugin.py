"""Registers the ``openai``, ``xai`` and ``deepgram`` speech-to-text backends.

Named by import path, so loading this plugin imports no HTTP code.
"""

from __future__ import annotations

from collections.abc import Iterable

from fermix_core.hookspecs import hookimpl
from fermix_core.specs import TranscriptionBackendSpec

SPECS = (
    TranscriptionBackendSpec(
        name="openai",
        factory="fermix_providers.transcription.backends:OpenAITranscription",
        default_model="gpt-4o-mini-transcribe",
        key_field="openai_api_key",
        reuse_provider="openai",
    ),
    TranscriptionBackendSpec(
        name="xai",
        factory="fermix_providers.transcription.backends:XaiTranscription",
        default_model=None,  # modelless
        key_field="xai_api_key",
        # An xAI API key from the chat provider works; its OAuth login does not.
        reuse_provider="xai",
    ),
    TranscriptionBackendSpec(
        name="deepgram",
        factory="fermix_providers.transcription.backends:DeepgramTranscription",
        default_model="nova-3",
        key_field="deepgram_api_key",
        key_required=True,
    ),
)


@hookimpl
def fermix_transcription_backends() -> Iterable[TranscriptionBackendSpec]:
    return SPECS

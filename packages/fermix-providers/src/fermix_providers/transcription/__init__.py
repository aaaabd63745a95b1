"""Speech-to-text backends for inbound audio: ``openai``, ``xai`` and ``deepgram``.

Registered through ``fermix_transcription_backends`` (:mod:`.plugin`); built by core's
:class:`fermix_core.transcription.engine.Transcriber` on the first voice note.
"""

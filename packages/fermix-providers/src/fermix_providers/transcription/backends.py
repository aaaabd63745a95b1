"""The three speech-to-text wires, over the runtime's shared httpx client.

* ``openai`` — ``POST {base}/audio/transcriptions``, multipart ``model`` + ``file``
  (``response_format=json``); answer ``{"text": ...}``.
* ``xai`` — ``POST {base}/stt``, multipart with ``file`` as the only (and so the last)
  field, no model (the service is modelless); answer ``{"text", "language", "duration",
  "words"}``. An API key is required: xAI's OAuth login does not authorize it.
* ``deepgram`` — ``POST {base}/listen?model=<model>&smart_format=true`` with the raw file
  as the body, its MIME type as ``Content-Type`` and ``Authorization: Token <key>``; answer
  ``results.channels[0].alternatives[0].transcript``.

``base`` is the service's own (``https://api.openai.com/v1``, ``https://api.x.ai/v1``,
``https://api.deepgram.com/v1``) unless ``[fermix_core.transcription] base_url`` names
another, version segment included. Every failure — transport, HTTP status, an answer of
the wrong shape — is a :class:`TranscriptionFailed` whose message says what happened and
never carries the key.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from fermix_core.transcription.contract import (
    AudioClip,
    BackendSettings,
    TranscriptionFailed,
)

from fermix_providers.http.base import normalize_base_url

__all__ = ["DeepgramTranscription", "OpenAITranscription", "XaiTranscription"]

log = logging.getLogger("fermix_providers.transcription")

#: Uploads of up to ``max_file_mb`` and a service that transcribes before answering.
TIMEOUT = httpx.Timeout(connect=10.0, read=180.0, write=120.0, pool=10.0)
_SHOWN_ERROR = 300


def _error_text(response: httpx.Response) -> str:
    """The service's own error message: OpenAI ``error.message``, Deepgram ``err_msg``,
    xAI ``error``; else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:_SHOWN_ERROR]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_SHOWN_ERROR]
        for key in ("err_msg", "error", "message", "detail"):
            if isinstance(body.get(key), str):
                return body[key][:_SHOWN_ERROR]
    return json.dumps(body)[:_SHOWN_ERROR]


class _HttpTranscription:
    name = ""
    default_base_url = ""
    path = ""

    def __init__(self, settings: BackendSettings) -> None:
        if not settings.api_key:
            raise ValueError(f"the {self.name} speech-to-text backend needs an API key")
        self.settings = settings
        self.http = settings.http
        self.model = settings.model
        self.base_url = normalize_base_url(
            settings.base_url or self.default_base_url, self.default_base_url
        )

    @property
    def url(self) -> str:
        return self.base_url + self.path

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.settings.api_key}"}

    async def _post(self, **request: Any) -> Any:
        headers = {**self.auth_headers(), **request.pop("headers", {})}
        try:
            response = await self.http.post(self.url, headers=headers, timeout=TIMEOUT, **request)
        except httpx.HTTPError as exc:
            raise TranscriptionFailed(
                f"{self.name} speech-to-text at {self.base_url} could not be reached "
                f"({type(exc).__name__})"
            ) from None
        if response.status_code >= 400:
            hint = ""
            if response.status_code in (401, 403):
                hint = " — the API key was refused; check it with `fermix setup`"
            raise TranscriptionFailed(
                f"{self.name} speech-to-text answered HTTP {response.status_code}: "
                f"{_error_text(response)}{hint}"
            )
        try:
            return response.json()
        except ValueError:
            raise TranscriptionFailed(
                f"{self.name} speech-to-text answered with a body that is not JSON"
            ) from None

    def _shape_error(self, body: Any) -> TranscriptionFailed:
        shown = json.dumps(body)[:_SHOWN_ERROR] if body is not None else "nothing"
        return TranscriptionFailed(
            f"{self.name} speech-to-text answered without a transcript: {shown}"
        )

    def _text_field(self, body: Any) -> str:
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise self._shape_error(body)
        return text


class OpenAITranscription(_HttpTranscription):
    """OpenAI ``/v1/audio/transcriptions`` (``gpt-4o-mini-transcribe`` by default)."""

    name = "openai"
    default_base_url = "https://api.openai.com/v1"
    path = "/audio/transcriptions"

    async def transcribe(self, clip: AudioClip) -> str:
        body = await self._post(
            data={"model": self.model or "gpt-4o-mini-transcribe", "response_format": "json"},
            files={"file": (clip.filename, clip.data, clip.mime_type)},
        )
        return self._text_field(body)


class XaiTranscription(_HttpTranscription):
    """xAI ``/v1/stt``: modelless; the file is the last (only) multipart field."""

    name = "xai"
    default_base_url = "https://api.x.ai/v1"
    path = "/stt"

    async def transcribe(self, clip: AudioClip) -> str:
        body = await self._post(files={"file": (clip.filename, clip.data, clip.mime_type)})
        return self._text_field(body)


class DeepgramTranscription(_HttpTranscription):
    """Deepgram pre-recorded ``/v1/listen`` (``nova-3`` by default), raw body."""

    name = "deepgram"
    default_base_url = "https://api.deepgram.com/v1"
    path = "/listen"

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Token {self.settings.api_key}"}

    async def transcribe(self, clip: AudioClip) -> str:
        body = await self._post(
            params={"model": self.model or "nova-3", "smart_format": "true"},
            content=clip.data,
            headers={"content-type": clip.mime_type},
        )
        try:
            transcript = body["results"]["channels"][0]["alternatives"][0]["transcript"]
        except (KeyError, IndexError, TypeError):
            raise self._shape_error(body) from None
        if not isinstance(transcript, str):
            raise self._shape_error(body)
        return transcript

"""Real speech audio and loopback fakes of three speech-to-text services, for tests.

:func:`speech` synthesizes a spoken sentence with ``espeak-ng`` and converts it with
``sox`` (``wav``, ``ogg``/Vorbis, ``flac``), so a test uploads a real audio file rather than
placeholder bytes; :func:`speech_tools_missing` names what is not installed (tests skip
with that reason).

:class:`SpeechToTextFake` is a :class:`~fermix_core.testing.LoopbackServer` handler that
speaks each service's documented wire and refuses anything else with that service's error
shape:

* OpenAI — ``POST /v1/audio/transcriptions``, multipart with ``model`` and ``file``,
  ``Authorization: Bearer``; answers ``{"text": ...}``;
* xAI — ``POST /v1/stt``, multipart whose last field is ``file`` and that has no model,
  ``Authorization: Bearer``; answers ``{"text", "language", "duration", "words"}``;
* Deepgram — ``POST /v1/listen?model=...``, the raw file as the body with an audio/video
  ``Content-Type``, ``Authorization: Token``; answers the full pre-recorded shape
  (``metadata`` and ``results.channels[0].alternatives[0].transcript``).

It knows the transcript of each file it may receive (``transcripts``: exact bytes →
text), so a test proves the uploaded bytes are the real file; other bytes get a 400.
Every accepted upload is kept in :attr:`SpeechToTextFake.uploads`.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from fermix_core.testing.loopback import RecordedRequest, Reply

__all__ = ["SpeechToTextFake", "Upload", "speech", "speech_tools_missing"]


def speech_tools_missing() -> str | None:
    """Why :func:`speech` cannot run here, or ``None``."""
    missing = [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (apt-get install espeak-ng sox)"
    return None


def speech(text: str, fmt: str = "ogg") -> bytes:
    """*text* spoken by espeak-ng, as a real ``wav``/``ogg``/``flac`` file's bytes."""
    problem = speech_tools_missing()
    if problem is not None:
        raise RuntimeError(problem)
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "speech.wav"
        subprocess.run(
            ["espeak-ng", "-s", "160", "-w", str(wav), text], check=True, capture_output=True
        )
        if fmt == "wav":
            return wav.read_bytes()
        out = Path(tmp) / f"speech.{fmt}"
        # 16 kHz mono, as phones record voice notes.
        subprocess.run(
            ["sox", str(wav), "-r", "16000", "-c", "1", str(out)], check=True, capture_output=True
        )
        return out.read_bytes()


@dataclass(frozen=True)
class Upload:
    """One accepted request: which service's wire, what file, with which fields."""

    service: str
    data: bytes = field(repr=False)
    content_type: str
    filename: str | None
    fields: dict[str, str]
    authorization: str | None
    query: dict[str, str]


def _multipart(request: RecordedRequest) -> list[tuple[str, str | None, str, bytes]]:
    """``(name, filename, content type, bytes)`` of each part, in order."""
    header = request.header("content-type") or ""
    if not header.startswith("multipart/form-data"):
        raise ValueError(f"expected multipart/form-data, got {header!r}")
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + header.encode() + b"\r\n\r\n" + request.body
    )
    parts = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        parts.append((str(name), part.get_filename(), part.get_content_type(), data))
    if not parts:
        raise ValueError("the multipart body has no parts")
    return parts


class SpeechToTextFake:
    """A loopback handler for the OpenAI, xAI and Deepgram speech-to-text wires."""

    def __init__(
        self, transcripts: Mapping[bytes, str], *, api_key: str, fail_with: int | None = None
    ) -> None:
        self.transcripts = dict(transcripts)
        self.api_key = api_key
        #: Answer every request with this HTTP status (the service is down).
        self.fail_with = fail_with
        self.uploads: list[Upload] = []
        self.refused: list[str] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        split = urlsplit(request.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        route = {
            "/v1/audio/transcriptions": self._openai,
            "/v1/stt": self._xai,
            "/v1/listen": self._deepgram,
        }.get(split.path)
        if request.method != "POST" or route is None:
            return self._refuse(404, "openai", f"no route {request.method} {split.path}")
        return route(request, query)

    # ------------------------------------------------------------------ helpers

    def _refuse(self, status: int, service: str, message: str) -> Reply:
        self.refused.append(f"{service}: {message}")
        if service == "deepgram":
            body: object = {"err_code": "Bad Request", "err_msg": message, "request_id": "r1"}
        elif service == "xai":
            body = {"code": "Client specified an invalid argument", "error": message}
        else:
            body = {"error": {"message": message, "type": "invalid_request_error"}}
        return Reply(status=status, body=body)

    def _transcript(self, service: str, data: bytes) -> str | Reply:
        text = self.transcripts.get(data)
        if text is None:
            return self._refuse(400, service, f"unexpected audio ({len(data)} bytes)")
        return text

    def _check_auth(self, request: RecordedRequest, scheme: str) -> bool:
        return request.header("authorization") == f"{scheme} {self.api_key}"

    # ------------------------------------------------------------------ the wires

    def _openai(self, request: RecordedRequest, query: dict[str, str]) -> Reply:
        if not self._check_auth(request, "Bearer"):
            return self._refuse(401, "openai", "Incorrect API key provided")
        if self.fail_with:
            return self._refuse(self.fail_with, "openai", "The server had an error")
        try:
            parts = _multipart(request)
        except ValueError as exc:
            return self._refuse(400, "openai", str(exc))
        fields = {name: data.decode() for name, filename, _, data in parts if filename is None}
        files = [(filename, ctype, data) for name, filename, ctype, data in parts if name == "file"]
        if not fields.get("model") or len(files) != 1 or not files[0][0]:
            return self._refuse(400, "openai", "model and one named file are required")
        filename, ctype, data = files[0]
        text = self._transcript("openai", data)
        if isinstance(text, Reply):
            return text
        self.uploads.append(
            Upload("openai", data, ctype, filename, fields, request.header("authorization"), query)
        )
        return Reply(body={"text": text})

    def _xai(self, request: RecordedRequest, query: dict[str, str]) -> Reply:
        if not self._check_auth(request, "Bearer"):
            return self._refuse(401, "xai", "Incorrect API key provided")
        if self.fail_with:
            return self._refuse(self.fail_with, "xai", "internal error")
        try:
            parts = _multipart(request)
        except ValueError as exc:
            return self._refuse(400, "xai", str(exc))
        if parts[-1][0] != "file":
            return self._refuse(400, "xai", "file must be the last field in the multipart form")
        fields = {name: data.decode() for name, filename, _, data in parts[:-1]}
        if "model" in fields:
            return self._refuse(400, "xai", "unknown field: model")
        _, filename, ctype, data = parts[-1]
        text = self._transcript("xai", data)
        if isinstance(text, Reply):
            return text
        self.uploads.append(
            Upload("xai", data, ctype, filename, fields, request.header("authorization"), query)
        )
        words = [
            {"text": word, "start": i * 0.4, "end": i * 0.4 + 0.35}
            for i, word in enumerate(text.split())
        ]
        body = {"text": text, "language": "", "duration": round(len(words) * 0.4, 2)}
        if words:
            body["words"] = words
        return Reply(body=body)

    def _deepgram(self, request: RecordedRequest, query: dict[str, str]) -> Reply:
        if not self._check_auth(request, "Token"):
            return self._refuse(401, "deepgram", "Invalid credentials.")
        if self.fail_with:
            return self._refuse(self.fail_with, "deepgram", "internal server error")
        ctype = (request.header("content-type") or "").split(";")[0].strip()
        if not query.get("model"):
            return self._refuse(400, "deepgram", "model is required")
        if not ctype.startswith(("audio/", "video/")) or ctype.startswith("multipart/"):
            return self._refuse(400, "deepgram", f"unsupported content type {ctype!r}")
        text = self._transcript("deepgram", request.body)
        if isinstance(text, Reply):
            return text
        self.uploads.append(
            Upload(
                "deepgram", request.body, ctype, None, {}, request.header("authorization"), query
            )
        )
        words = [
            {"word": w.lower(), "start": i * 0.4, "end": i * 0.4 + 0.35, "confidence": 0.97}
            for i, w in enumerate(text.split())
        ]
        return Reply(
            body={
                "metadata": {
                    "request_id": "c0ffee00-0000-4000-8000-000000000001",
                    "duration": round(len(words) * 0.4, 2),
                    "channels": 1,
                    "models": ["30089e05-99d1-4376-b32e-c263170674af"],
                    "model_info": {
                        "30089e05-99d1-4376-b32e-c263170674af": {
                            "name": "general-nova-3",
                            "version": "2024-12-20.0",
                            "arch": "nova-3",
                        }
                    },
                },
                "results": {
                    "channels": [
                        {"alternatives": [{"transcript": text, "confidence": 0.97, "words": words}]}
                    ]
                },
            }
        )

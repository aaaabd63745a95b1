"""The openai, xai and deepgram speech-to-text backends against loopback fakes of each
service's wire (multipart for OpenAI and xAI, raw body for Deepgram), uploading real audio
made by espeak-ng/sox and a real MP4 video note."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fermix_core.specs import TranscriptionBackendSpec, resolve_ref
from fermix_core.testing.loopback import LoopbackServer, Reply
from fermix_core.testing.speech import SpeechToTextFake, speech, speech_tools_missing
from fermix_core.transcription import AudioClip, BackendSettings, TranscriptionFailed
from fermix_providers.transcription.plugin import SPECS

pytestmark = pytest.mark.anyio

KEY = "stt-test-key-0123456789"
VIDEO_NOTE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "video_note.mp4"
SPOKEN = "please remind me to buy oat milk"

needs_speech = pytest.mark.skipif(
    speech_tools_missing() is not None, reason=str(speech_tools_missing())
)


def _spec(name: str) -> TranscriptionBackendSpec:
    return next(spec for spec in SPECS if spec.name == name)


def _backend(name: str, http: httpx.AsyncClient, base: str, *, key: str = KEY, model=None):
    spec = _spec(name)
    settings = BackendSettings(
        name=name,
        http=http,
        api_key=key,
        model=model if model is not None else spec.default_model,
        base_url=base + "/v1",
    )
    return resolve_ref(spec.factory)(settings)


@pytest.fixture(scope="module")
def ogg() -> bytes:
    if speech_tools_missing():
        pytest.skip(str(speech_tools_missing()))
    return speech(SPOKEN, "ogg")


def test_the_specs_say_what_each_backend_needs() -> None:
    openai, xai, deepgram = (_spec(n) for n in ("openai", "xai", "deepgram"))
    assert openai.default_model == "gpt-4o-mini-transcribe"
    assert openai.key_field == "openai_api_key"
    assert openai.reuse_provider == "openai"
    assert xai.default_model is None  # modelless
    assert (xai.key_field, xai.reuse_provider) == ("xai_api_key", "xai")
    assert deepgram.default_model == "nova-3"
    assert deepgram.key_required
    assert deepgram.reuse_provider is None
    assert all(not spec.problems() for spec in SPECS)


@needs_speech
async def test_openai_uploads_the_real_file_as_multipart_with_the_model(ogg: bytes) -> None:
    fake = SpeechToTextFake({ogg: SPOKEN}, api_key=KEY)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend("openai", http, server.url)
        text = await backend.transcribe(AudioClip(ogg, "audio/ogg", "voice.ogg"))
    assert text == SPOKEN
    (upload,) = fake.uploads
    assert upload.service == "openai"
    assert upload.data == ogg
    assert upload.data[:4] == b"OggS"  # a real Ogg file, not placeholder bytes
    assert (upload.filename, upload.content_type) == ("voice.ogg", "audio/ogg")
    assert upload.fields == {"model": "gpt-4o-mini-transcribe", "response_format": "json"}


@needs_speech
async def test_openai_takes_the_configured_model() -> None:
    wav = speech("testing one two three", "wav")
    fake = SpeechToTextFake({wav: "testing one two three"}, api_key=KEY)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend("openai", http, server.url, model="gpt-4o-transcribe")
        assert await backend.transcribe(AudioClip(wav, "audio/wav", "a.wav")) == (
            "testing one two three"
        )
    assert fake.uploads[0].fields["model"] == "gpt-4o-transcribe"
    assert fake.uploads[0].data[:4] == b"RIFF"


@needs_speech
async def test_xai_sends_the_file_as_the_last_field_and_no_model(ogg: bytes) -> None:
    fake = SpeechToTextFake({ogg: SPOKEN}, api_key=KEY)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend("xai", http, server.url)
        text = await backend.transcribe(AudioClip(ogg, "audio/ogg", "voice.ogg"))
    assert text == SPOKEN
    (upload,) = fake.uploads
    assert upload.service == "xai"
    assert upload.data == ogg
    assert upload.fields == {}
    assert upload.authorization == f"Bearer {KEY}"
    assert fake.refused == []


@needs_speech
async def test_deepgram_posts_the_raw_file_with_a_token_and_the_model(ogg: bytes) -> None:
    fake = SpeechToTextFake({ogg: SPOKEN}, api_key=KEY)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend("deepgram", http, server.url)
        text = await backend.transcribe(AudioClip(ogg, "audio/ogg", "voice.ogg"))
    assert text == SPOKEN
    (upload,) = fake.uploads
    assert upload.service == "deepgram"
    assert upload.data == ogg
    assert upload.content_type == "audio/ogg"
    assert upload.authorization == f"Token {KEY}"
    assert upload.query["model"] == "nova-3"


@pytest.mark.parametrize("name", ["openai", "xai", "deepgram"])
async def test_a_video_note_goes_up_as_its_mp4(name: str) -> None:
    mp4 = VIDEO_NOTE.read_bytes()
    assert mp4[4:8] == b"ftyp"
    fake = SpeechToTextFake({mp4: "remind me to water the plants"}, api_key=KEY)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend(name, http, server.url)
        text = await backend.transcribe(AudioClip(mp4, "video/mp4", "video_note.mp4"))
    assert text == "remind me to water the plants"
    assert fake.uploads[0].data == mp4
    assert fake.uploads[0].content_type == "video/mp4"


@pytest.mark.parametrize("name", ["openai", "xai", "deepgram"])
async def test_a_server_error_is_a_failure_naming_the_status(name: str) -> None:
    fake = SpeechToTextFake({}, api_key=KEY, fail_with=500)
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend(name, http, server.url)
        with pytest.raises(TranscriptionFailed) as caught:
            await backend.transcribe(AudioClip(b"RIFF....WAVE", "audio/wav", "a.wav"))
    assert "HTTP 500" in str(caught.value)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("name", ["openai", "xai", "deepgram"])
async def test_a_refused_key_says_to_check_it(name: str) -> None:
    fake = SpeechToTextFake({}, api_key="the-right-key")
    async with LoopbackServer(fake) as server, httpx.AsyncClient() as http:
        backend = _backend(name, http, server.url, key="a-wrong-key-123")
        with pytest.raises(TranscriptionFailed) as caught:
            await backend.transcribe(AudioClip(b"OggS", "audio/ogg", "v.ogg"))
    message = str(caught.value)
    assert "HTTP 401" in message
    assert "refused" in message
    assert "a-wrong-key-123" not in message


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("openai", {"transcript": "wrong field"}),
        ("xai", {"words": []}),
        ("deepgram", {"results": {"channels": []}}),
    ],
)
async def test_an_answer_without_a_transcript_is_a_failure(name: str, body: object) -> None:
    async with LoopbackServer() as server, httpx.AsyncClient() as http:
        server.queue(Reply(body=body))
        backend = _backend(name, http, server.url)
        with pytest.raises(TranscriptionFailed, match="without a transcript"):
            await backend.transcribe(AudioClip(b"OggS", "audio/ogg", "v.ogg"))


async def test_an_unreachable_service_is_a_failure() -> None:
    async with LoopbackServer() as server:
        closed = server.url
    async with httpx.AsyncClient() as http:
        backend = _backend("deepgram", http, closed)
        with pytest.raises(TranscriptionFailed, match="could not be reached"):
            await backend.transcribe(AudioClip(b"OggS", "audio/ogg", "v.ogg"))


async def test_a_backend_without_a_key_is_not_built() -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(ValueError, match="needs an API key"):
            _backend("openai", http, "http://127.0.0.1:9", key="")


async def test_the_default_base_urls_are_the_services() -> None:
    async with httpx.AsyncClient() as http:
        urls = {}
        for name in ("openai", "xai", "deepgram"):
            spec = _spec(name)
            settings = BackendSettings(name=name, http=http, api_key=KEY)
            urls[name] = resolve_ref(spec.factory)(settings).url
    assert urls == {
        "openai": "https://api.openai.com/v1/audio/transcriptions",
        "xai": "https://api.x.ai/v1/stt",
        "deepgram": "https://api.deepgram.com/v1/listen",
    }

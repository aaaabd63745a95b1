"""A real ``fermix run`` daemon transcribes Telegram voice notes before the model sees them.

One loopback server plays the Bot API (the Telegram adapter tests' fake), the OpenAI
speech-to-text service (:class:`SpeechToTextFake`, which knows the transcript of each real
file and refuses any other bytes) and an OpenAI-compatible chat model that records what it
was asked. The audio is real: espeak-ng speech converted by sox to Ogg, and a shipped MP4
video note.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _daemon_kit import FERMIX, fermix, load_module
from fermix_core.testing.loopback import (
    RecordedRequest,
    Reply,
    ThreadedLoopback,
    chat_completion,
    chat_completion_stream,
)
from fermix_core.testing.speech import SpeechToTextFake, speech, speech_tools_missing

pytestmark = pytest.mark.skipif(
    speech_tools_missing() is not None, reason=str(speech_tools_missing())
)

_FAKE = Path(__file__).parents[1] / "packages/fermix-channels/tests/telegram/fake_telegram.py"
VIDEO_NOTE = Path(__file__).parent / "fixtures" / "video_note.mp4"
STT_KEY = "sk-transcription-test-0123456789"
SPOKEN = "remind me to call the dentist tomorrow at nine"
NOTE_SPOKEN = "remind me to water the plants"
ANSWER = "Noted."


ft = load_module("fermix_e2e_fake_telegram", _FAKE)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


class Backend:
    def __init__(self, ogg: bytes) -> None:
        self.telegram = ft.FakeBotApi()
        self.ogg = ogg
        self.mp4 = VIDEO_NOTE.read_bytes()
        self.stt = SpeechToTextFake({ogg: SPOKEN, self.mp4: NOTE_SPOKEN}, api_key=STT_KEY)
        self.model_requests: list[dict] = []

    async def __call__(self, request: RecordedRequest) -> Reply:
        if request.path.startswith(("/bot", "/file/bot")):
            return await self.telegram._handle(request)
        if request.path.startswith(("/v1/audio/", "/v1/stt", "/v1/listen")):
            return self.stt(request)
        if not request.body:
            return Reply(status=404, body={"error": "not found"})
        body = request.json()
        self.model_requests.append(body)
        if body.get("stream"):
            return chat_completion_stream(ANSWER)
        return chat_completion(ANSWER)

    def last_user_text(self) -> str:
        messages = self.model_requests[-1]["messages"]
        return _text(next(m for m in reversed(messages) if m["role"] == "user")["content"])


@pytest.fixture(scope="module")
def ogg() -> bytes:
    return speech(SPOKEN, "ogg")


@pytest.fixture
def backend(ogg):
    fake = Backend(ogg)
    with ThreadedLoopback(fake) as server:
        server.fake = fake
        yield server


@pytest.fixture
def daemon_env(tmp_path, backend):
    home = tmp_path / "h"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        "[fermix_core.providers.ollama]\n"
        "primary = true\n"
        f'base_url = "{backend.url}/v1"\n'
        'default_model = "qwen3"\n'
        "[fermix_core.memory]\nreview_enabled = false\n"
        "[fermix_core.transcription]\n"
        'backend = "openai"\n'
        f'base_url = "{backend.url}/v1"\n'
        f'openai_api_key = "{STT_KEY}"\n'
        "max_file_mb = 2\n"
        "[fermix_web]\nport = 0\n"
        "[fermix_channels.telegram]\nenabled = true\n"
        f'bot_token = "{ft.TOKEN}"\n'
        f'owner_user_id = "{ft.OWNER_ID}"\n'
        f'api_base_url = "{backend.url}"\n'
        'streaming = "off"\n'
        "poll_timeout = 5\n"
        "[fermix_channels.acp]\nenabled = false\n"
    )
    env = dict(os.environ)
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    for name in ("FERMIX_LOAD_PLUGINS", "FERMIX_HTTP_BIND", "TELEGRAM_BOT_TOKEN"):
        env.pop(name, None)
    for name in list(env):
        if name.startswith(("FERMIX_TRANSCRIPTION_", "OPENAI_")):
            env.pop(name)
    yield env
    subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=60)


def _voice(telegram, data: bytes, *, size: int | None = None, path: str = "voice/file_1.oga"):
    file_id = telegram.add_file(data, path=path)
    voice = {
        "file_id": file_id,
        "file_unique_id": f"U{file_id}",
        "duration": 3,
        "mime_type": "audio/ogg",
        "file_size": len(data) if size is None else size,
    }
    return file_id, voice


def test_voice_notes_reach_the_model_as_transcripts(daemon_env, backend, ogg) -> None:
    fake = backend.fake
    telegram = fake.telegram
    fermix(daemon_env, "start")
    backend.call(telegram.wait_polling, 1, 60)

    # A captioned voice note: caption first, then the transcript.
    _, voice = _voice(telegram, ogg)
    backend.call(lambda: telegram.message(None, voice=voice, caption="what do you think?"))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 1, 60)
    assert telegram.sent(ft.OWNER_ID)[-1]["text"] == ANSWER
    assert fake.last_user_text() == (f"what do you think?\n\n[voice note transcript]\n{SPOKEN}")
    (upload,) = fake.stt.uploads
    assert upload.data == ogg  # the real file, byte for byte
    assert upload.fields["model"] == "gpt-4o-mini-transcribe"
    assert upload.filename.endswith(".ogg")

    # A round video note goes up as its MP4.
    file_id = telegram.add_file(fake.mp4, path="video_notes/file_2.mp4")
    note = {
        "file_id": file_id,
        "file_unique_id": "Unote",
        "length": 240,
        "duration": 2,
        "file_size": len(fake.mp4),
    }
    backend.call(lambda: telegram.message(None, video_note=note))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 2, 60)
    assert fake.last_user_text() == f"[voice note transcript]\n{NOTE_SPOKEN}"
    assert fake.stt.uploads[-1].data == fake.mp4
    assert fake.stt.uploads[-1].content_type == "video/mp4"

    # A stranger's voice note is never downloaded, transcribed or answered.
    models, uploads = len(fake.model_requests), len(fake.stt.uploads)
    stranger_file, stranger_voice = _voice(telegram, ogg, path="voice/stranger.oga")
    backend.call(lambda: telegram.message(None, voice=stranger_voice, sender=ft.STRANGER_ID))
    # Too large by its declared size: answered with the cap, never fetched.
    big_file, big_voice = _voice(telegram, ogg, size=3 * 1024 * 1024, path="voice/big.oga")
    backend.call(lambda: telegram.message(None, voice=big_voice))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 3, 60)
    refusal = telegram.sent(ft.OWNER_ID)[-1]["text"]
    assert "2 MB" in refusal and "3 MB" in refusal
    fetched = [c.params.get("file_id") for c in telegram.calls_to("getFile")]
    assert stranger_file not in fetched
    assert big_file not in fetched
    assert "voice/stranger.oga" not in telegram.downloads
    assert "voice/big.oga" not in telegram.downloads
    assert not telegram.sent(ft.STRANGER_ID)
    assert (len(fake.model_requests), len(fake.stt.uploads)) == (models, uploads)

    # The service failing: the sender is asked to try again, and no turn runs.
    fake.stt.fail_with = 500
    _, voice = _voice(telegram, ogg, path="voice/file_3.oga")
    backend.call(lambda: telegram.message(None, voice=voice))
    backend.call(telegram.until, lambda: len(telegram.sent(ft.OWNER_ID)) >= 4, 60)
    assert "try again" in telegram.sent(ft.OWNER_ID)[-1]["text"]
    assert len(fake.model_requests) == models

    fermix(daemon_env, "stop")
    log = (Path(daemon_env["FERMIX_HOME"]) / "logs" / "fermix.log").read_text()
    assert STT_KEY not in log
    assert "HTTP 500" in log  # the operator learns why; the sender got "try again"


def test_doctor_reports_the_transcription_credential(daemon_env) -> None:
    import json

    result = subprocess.run(
        [FERMIX, "doctor", "--json"], env=daemon_env, capture_output=True, text=True, timeout=60
    )
    rows = json.loads(result.stdout)
    rows = rows["checks"] if isinstance(rows, dict) else rows
    (row,) = [r for r in rows if r["check"] == "transcription"]
    assert row["status"] == "ok"
    assert "openai (gpt-4o-mini-transcribe)" in row["detail"]
    assert "fermix_core.transcription.openai_api_key (plaintext)" in row["detail"]
    assert STT_KEY not in result.stdout

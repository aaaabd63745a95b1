"""Transcription in process: which key a backend gets, the gateway's audio step with the
real backends against a loopback speech-to-text fake, the setup step, ``config set``'s
model snap and the doctor row. Real config files, real plugins, real audio.

The daemon test (``test_transcription_daemon.py``) drives the same path through Telegram.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.boot import assemble
from fermix_core.channel import Attachment, InboundMessage
from fermix_core.commands.plugin import fermix_commands
from fermix_core.commands.router import CommandRouter
from fermix_core.config import load_config
from fermix_core.doctor import DoctorContext, Status
from fermix_core.gateway.gateway import Gateway
from fermix_core.gateway.queue import ConversationQueue
from fermix_core.gateway.reply import ChannelReplyPort, features_of
from fermix_core.gateway.trust import TrustPolicy
from fermix_core.gateway.types import IngestStatus
from fermix_core.home import FermixHome
from fermix_core.secrets import SecretResolver
from fermix_core.testing import MemoryChannel, StubChannelHost
from fermix_core.testing.loopback import LoopbackServer
from fermix_core.testing.speech import SpeechToTextFake, speech, speech_tools_missing
from fermix_core.transcription.doctor import check_transcription
from fermix_core.transcription.engine import Transcriber, select_backend
from fermix_core.transcription.inbound import (
    FAILED_REPLY,
    NO_SPEECH_REPLY,
    NOT_CONFIGURED_REPLY,
    TRANSCRIPT_DELIMITER,
    withheld,
)

KEY = "sk-own-transcription-key-000111"
CHAT_KEY = "sk-chat-provider-key-222333444"
SPOKEN = "book a table for two at seven"
VIDEO_NOTE = Path(__file__).parent / "fixtures" / "video_note.mp4"

needs_speech = pytest.mark.skipif(
    speech_tools_missing() is not None, reason=str(speech_tools_missing())
)


def _home(tmp_path: Path, text: str) -> FermixHome:
    home = FermixHome(tmp_path / "home")
    home.ensure()
    home.config_file.write_text(text)
    return home


def _loaded(home: FermixHome, environ: dict[str, str] | None = None):
    environ = environ or {}
    assembly = assemble(home, environ=environ)
    return assembly, load_config(home, assembly.registry, environ=environ)


def _select(tmp_path: Path, text: str, environ: dict[str, str] | None = None):
    home = _home(tmp_path, text)
    assembly, config = _loaded(home, environ)
    return select_backend(
        config,
        assembly.registry,
        resolver=SecretResolver(environ=environ or {}),
        environ=environ or {},
    )


# --------------------------------------------------------------------------- which key


def test_the_own_key_overrides_the_reused_chat_key(tmp_path) -> None:
    chosen = _select(
        tmp_path,
        f'[fermix_core.providers.openai]\napi_key = "{CHAT_KEY}"\n'
        f'[fermix_core.transcription]\nopenai_api_key = "{KEY}"\n',
    )
    assert chosen.usable
    assert chosen.api_key == KEY
    assert chosen.key_source == "fermix_core.transcription.openai_api_key (plaintext)"
    assert chosen.model == "gpt-4o-mini-transcribe"


def test_openai_reuses_the_chat_providers_key(tmp_path) -> None:
    chosen = _select(tmp_path, f'[fermix_core.providers.openai]\napi_key = "{CHAT_KEY}"\n')
    assert chosen.api_key == CHAT_KEY
    assert chosen.key_source.startswith("reused from [fermix_core.providers.openai]")


def test_the_own_key_may_come_from_the_environment(tmp_path) -> None:
    chosen = _select(tmp_path, "", {"FERMIX_TRANSCRIPTION_OPENAI_API_KEY": KEY})
    assert chosen.api_key == KEY
    assert chosen.key_source.endswith("(env)")


def test_xai_on_oauth_needs_its_own_key(tmp_path) -> None:
    text = '[fermix_core.providers.xai]\nauth_mode = "oauth"\n[fermix_core.transcription]\n'
    chosen = _select(tmp_path, text + 'backend = "xai"\n')
    assert not chosen.usable
    assert "OAuth" in chosen.problem and "xai_api_key" in chosen.problem
    assert chosen.model is None  # modelless
    with_key = _select(tmp_path / "b", text + f'backend = "xai"\nxai_api_key = "{KEY}"\n')
    assert with_key.api_key == KEY


def test_xai_reuses_an_api_key_provider_and_ignores_a_model(tmp_path) -> None:
    chosen = _select(
        tmp_path,
        f'[fermix_core.providers.xai]\napi_key = "{CHAT_KEY}"\n'
        '[fermix_core.transcription]\nbackend = "xai"\nmodel = "grok-stt"\n',
    )
    assert chosen.api_key == CHAT_KEY
    assert chosen.model is None
    assert chosen.ignored_model == "grok-stt"


def test_deepgram_never_reuses_a_chat_key(tmp_path) -> None:
    chosen = _select(
        tmp_path,
        f'[fermix_core.providers.openai]\napi_key = "{CHAT_KEY}"\n'
        '[fermix_core.transcription]\nbackend = "deepgram"\n',
    )
    assert not chosen.usable
    assert "deepgram_api_key" in chosen.problem and "fermix setup" in chosen.problem
    assert chosen.model == "nova-3"


def test_an_unresolvable_own_key_is_reported_not_replaced(tmp_path) -> None:
    chosen = _select(
        tmp_path,
        f'[fermix_core.providers.openai]\napi_key = "{CHAT_KEY}"\n'
        "[fermix_core.transcription]\n"
        'openai_api_key = { source = "env", env = "MY_STT_KEY" }\n',
    )
    assert not chosen.usable
    assert "MY_STT_KEY" in chosen.problem


def test_unknown_backend_and_bad_cap_fail_config_load(tmp_path) -> None:
    from fermix_core.config import ConfigError

    for number, (text, expected) in enumerate(
        [
            ('backend = "whisper"', "fermix_core.transcription.backend: must be one of"),
            ("max_file_mb = 0", "fermix_core.transcription.max_file_mb: must be greater than 0"),
            ("max_file_mb = -3", "fermix_core.transcription.max_file_mb: must be greater than 0"),
        ]
    ):
        home = _home(tmp_path / str(number), f"[fermix_core.transcription]\n{text}\n")
        with pytest.raises(ConfigError) as caught:
            _loaded(home)
        assert expected in str(caught.value)


# --------------------------------------------------------------------------- the gateway


class Recorder:
    """A turn executor that records what the agent would have been given."""

    def __init__(self) -> None:
        self.jobs = []

    async def run_turn(self, job) -> None:
        self.jobs.append(job)

    async def on_stopped(self, job) -> None:
        pass


class Rig:
    def __init__(self, gateway, channel, port, executor, events, queue) -> None:
        self.gateway, self.channel, self.port = gateway, channel, port
        self.executor, self.events, self.queue = executor, events, queue

    async def ingest(self, text: str = "", *, sender: str = "owner", attachments=()):
        message = InboundMessage(
            channel="tg",
            chat_id="chat",
            sender_id=sender,
            text=text,
            attachments=list(attachments),
        )
        outcome = await self.gateway.ingest(message, self.port)
        if outcome.job is not None:
            await outcome.job.done.wait()
        return outcome

    def transcription_events(self) -> list[dict]:
        return [data for name, data in self.events if name == "transcription.message"]


async def _rig(tmp_path: Path, server_url: str, text: str):
    home = _home(
        tmp_path,
        f'[fermix_core.transcription]\nbase_url = "{server_url}/v1"\n{text}',
    )
    assembly, config = _loaded(home)
    transcriber = Transcriber(config, assembly.registry, environ={})
    channel = MemoryChannel("tg")
    await channel.start(StubChannelHost("tg"))
    events: list = []
    executor = Recorder()
    queue = ConversationQueue(executor)
    gateway = Gateway(
        policies={"tg": TrustPolicy(owner_id="owner", allowed_ids=(), channel="tg")},
        commands=CommandRouter(fermix_commands()),
        queue=queue,
        services=None,
        emit=lambda name, **data: events.append((name, data)),
        transcriber=transcriber,
    )
    port = ChannelReplyPort(channel, features_of(channel))
    return Rig(gateway, channel, port, executor, events, queue), transcriber


@pytest.fixture(scope="module")
def ogg() -> bytes:
    if speech_tools_missing():
        pytest.skip(str(speech_tools_missing()))
    return speech(SPOKEN, "ogg")


@needs_speech
@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["openai", "xai", "deepgram"])
async def test_caption_first_then_the_transcript_and_other_media_kept(
    tmp_path, ogg, backend
) -> None:
    fake = SpeechToTextFake({ogg: SPOKEN}, api_key=KEY)
    image = Attachment(kind="image", data=b"\x89PNG\r\n", mime_type="image/png")
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(
            tmp_path,
            server.url,
            f'backend = "{backend}"\n{backend}_api_key = "{KEY}"\n',
        )
        async with rig.queue:
            voice = Attachment(kind="audio", data=ogg, mime_type="audio/ogg")
            outcome = await rig.ingest("what do you think?", attachments=[image, voice])
        await transcriber.aclose()
    assert outcome.status is IngestStatus.QUEUED
    (job,) = rig.executor.jobs
    assert job.message.text == f"what do you think?\n\n{TRANSCRIPT_DELIMITER}\n{SPOKEN}"
    assert job.message.attachments == [image]
    assert fake.uploads[0].service == backend
    assert fake.uploads[0].data == ogg
    (event,) = rig.transcription_events()
    assert event["status"] == "ok" and event["channel"] == "tg" and event["backend"] == backend
    assert event["bytes"] == len(ogg) and event["duration_ms"] >= 0


@pytest.mark.anyio
async def test_an_audio_document_and_a_video_note_from_disk_are_transcribed(tmp_path) -> None:
    mp4 = VIDEO_NOTE.read_bytes()
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 4
    fake = SpeechToTextFake({mp4: "first", mp3: "second"}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        note = Attachment(kind="audio", path=VIDEO_NOTE, mime_type="video/mp4")
        memo = Attachment(kind="document", data=mp3, mime_type="audio/mpeg", filename="memo")
        async with rig.queue:
            await rig.ingest("", attachments=[note, memo])
        await transcriber.aclose()
    (job,) = rig.executor.jobs
    assert job.message.text == (f"{TRANSCRIPT_DELIMITER}\nfirst\n\n{TRANSCRIPT_DELIMITER}\nsecond")
    assert job.message.attachments == []
    assert [u.filename for u in fake.uploads] == ["voice.mp4", "memo.mp3"]


@pytest.mark.anyio
async def test_a_missing_key_says_run_fermix_setup_and_schedules_nothing(tmp_path) -> None:
    fake = SpeechToTextFake({}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, "")  # no openai key anywhere
        async with rig.queue:
            ghost = Attachment(kind="audio", path=Path("/nonexistent/v.ogg"), size=10)
            outcome = await rig.ingest("caption", attachments=[ghost])
        await transcriber.aclose()
        assert server.requests == []
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    assert rig.channel.texts == [NOT_CONFIGURED_REPLY]
    assert "fermix setup" in NOT_CONFIGURED_REPLY
    assert rig.executor.jobs == []
    assert rig.transcription_events()[0]["status"] == "not_configured"


@pytest.mark.anyio
async def test_too_large_by_declared_size_is_never_read(tmp_path) -> None:
    fake = SpeechToTextFake({}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(
            tmp_path, server.url, f'openai_api_key = "{KEY}"\nmax_file_mb = 5\n'
        )
        # A path that does not exist: reading it would raise, so refusing proves no read.
        declared = Attachment(kind="audio", path=Path("/nonexistent/big.ogg"), size=7 * 1024 * 1024)
        async with rig.queue:
            first = await rig.ingest("", attachments=[declared])
            second = await rig.ingest("", attachments=[withheld(6 * 1024 * 1024)])
            measured = await rig.ingest(
                "", attachments=[Attachment(kind="audio", data=b"\0" * (5 * 1024 * 1024 + 1))]
            )
        await transcriber.aclose()
        assert server.requests == []
    assert first.status is second.status is measured.status is IngestStatus.MEDIA_REFUSED
    assert "7 MB" in rig.channel.texts[0] and "5 MB" in rig.channel.texts[0]
    assert "6 MB" in rig.channel.texts[1]
    assert "5 MB" in rig.channel.texts[2]
    assert rig.executor.jobs == []
    assert {e["status"] for e in rig.transcription_events()} == {"too_large"}


@pytest.mark.anyio
async def test_a_failing_service_asks_to_try_again(tmp_path) -> None:
    fake = SpeechToTextFake({}, api_key=KEY, fail_with=500)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        async with rig.queue:
            outcome = await rig.ingest("", attachments=[Attachment(kind="audio", data=b"OggS")])
        await transcriber.aclose()
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    assert rig.channel.texts == [FAILED_REPLY]
    assert "try again" in FAILED_REPLY
    assert rig.transcription_events()[0]["status"] == "failed"


@pytest.mark.anyio
async def test_silence_is_answered_not_sent_to_the_agent(tmp_path) -> None:
    fake = SpeechToTextFake({b"OggS-silence": ""}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        async with rig.queue:
            await rig.ingest("", attachments=[Attachment(kind="audio", data=b"OggS-silence")])
        await transcriber.aclose()
    assert rig.channel.texts == [NO_SPEECH_REPLY]
    assert rig.executor.jobs == []


@pytest.mark.anyio
async def test_a_stranger_is_dropped_before_any_transcription(tmp_path) -> None:
    fake = SpeechToTextFake({b"OggS": "hi"}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        async with rig.queue:
            outcome = await rig.ingest(
                "", sender="stranger", attachments=[Attachment(kind="audio", data=b"OggS")]
            )
        await transcriber.aclose()
        assert server.requests == []
    assert outcome.status is IngestStatus.DROPPED
    assert rig.channel.sent == [] and rig.events == []


@pytest.mark.anyio
async def test_a_key_stored_after_the_first_voice_note_is_used_by_the_next(tmp_path) -> None:
    fake = SpeechToTextFake({b"OggS": "hello there"}, api_key=KEY)
    environ: dict[str, str] = {}
    async with LoopbackServer(fake) as server:
        home = _home(tmp_path, f'[fermix_core.transcription]\nbase_url = "{server.url}/v1"\n')
        assembly, config = _loaded(home)
        transcriber = Transcriber(config, assembly.registry, environ=environ)
        from fermix_core.transcription import AudioClip, TranscriptionNotConfigured

        clip = AudioClip(b"OggS", "audio/ogg", "v.ogg")
        with pytest.raises(TranscriptionNotConfigured):
            await transcriber.transcribe(clip)
        environ["FERMIX_TRANSCRIPTION_OPENAI_API_KEY"] = KEY
        assert await transcriber.transcribe(clip) == "hello there"
        await transcriber.aclose()


# --------------------------------------------------------------------------- setup, config


def _setup(home: FermixHome, *flags: str):
    from fermix_core.setup import parse_step_args, run_setup

    assembly = assemble(home, environ={})
    options = parse_step_args(assembly, list(flags))
    return run_setup(assembly, interactive=False, options=options, only=["transcription"])


def test_setup_switches_backend_snaps_the_model_and_keychains_the_key(fermix_home) -> None:
    import keyring

    fermix_home.config_file.write_text(
        '[fermix_core.transcription]\nmodel = "gpt-4o-transcribe"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
    )
    result = _setup(
        fermix_home, "--transcription-backend", "deepgram", "--transcription-api-key", KEY
    )
    text = fermix_home.config_file.read_text()
    assert 'backend = "deepgram"' in text
    assert 'model = "nova-3"' in text  # snapped from gpt-4o-transcribe
    assert "base_url" not in text
    assert 'deepgram_api_key = "@keyring"' in text
    assert KEY not in text
    assert "fermix_core.transcription.deepgram_api_key" in result.moved_secrets
    from fermix_core.secrets.base import KEYRING_ACCOUNT, keyring_service

    service = keyring_service("FERMIX_TRANSCRIPTION_DEEPGRAM_API_KEY")
    assert keyring.get_password(service, KEYRING_ACCOUNT) == KEY

    # Back to xai: modelless, so the model key goes; the key lands in xai's own slot.
    _setup(fermix_home, "--transcription-backend", "xai", "--transcription-api-key", "xai-k-1")
    text = fermix_home.config_file.read_text()
    assert 'backend = "xai"' in text and "model" not in text
    assert 'xai_api_key = "@keyring"' in text
    assert 'deepgram_api_key = "@keyring"' in text  # the other slot is kept


def test_setup_refuses_what_cannot_work(fermix_home) -> None:
    from fermix_core.setup import SetupError

    cases = [
        (("--transcription-backend", "whisper"), "not one of"),
        (("--transcription-backend", "xai", "--transcription-model", "x"), "modelless"),
        (("--transcription-backend", "deepgram"), "needs its own key"),
    ]
    for flags, expected in cases:
        with pytest.raises(SetupError, match=expected):
            _setup(fermix_home, *flags)
    assert not fermix_home.config_file.exists()


def test_setup_sets_a_model_and_an_env_reference(fermix_home) -> None:
    _setup(
        fermix_home,
        "--transcription-model",
        "gpt-4o-transcribe",
        "--transcription-api-key-env",
        "MY_STT",
    )
    text = fermix_home.config_file.read_text()
    assert 'model = "gpt-4o-transcribe"' in text
    assert 'openai_api_key = {source = "env", env = "MY_STT"}' in text
    assert "backend" not in text  # openai is the default: nothing to write


def test_config_set_backend_snaps_the_model(fermix_home) -> None:
    from fermix_core.config.writer import set_value

    assembly = assemble(fermix_home, environ={})
    fermix_home.config_file.write_text('[fermix_core.transcription]\nmodel = "gpt-4o-transcribe"\n')
    key = "fermix_core.transcription.backend"
    change = set_value(fermix_home, key, "deepgram", assembly.registry)
    assert change.also == ['fermix_core.transcription.model: -> "nova-3" (deepgram default)']
    assert 'model = "nova-3"' in fermix_home.config_file.read_text()
    set_value(fermix_home, key, "xai", assembly.registry)
    assert "model" not in fermix_home.config_file.read_text()
    # Setting the backend it already has changes nothing else.
    fermix_home.config_file.write_text('[fermix_core.transcription]\nmodel = "custom"\n')
    set_value(fermix_home, key, "openai", assembly.registry)
    assert 'model = "custom"' in fermix_home.config_file.read_text()


# --------------------------------------------------------------------------- doctor


def _doctor(home: FermixHome, environ: dict[str, str] | None = None):
    assembly, config = _loaded(home, environ)
    context = DoctorContext(assembly, config=config)
    return check_transcription(context)


def test_doctor_row_is_an_offline_credential_check(tmp_path) -> None:
    row = _doctor(_home(tmp_path / "a", '[fermix_core.transcription]\nbackend = "deepgram"\n'))
    assert row.status is Status.WARN
    assert "deepgram (nova-3)" in row.detail and "deepgram_api_key" in row.detail
    assert row.fix and "--transcription-backend deepgram" in row.fix

    row = _doctor(
        _home(tmp_path / "b", f'[fermix_core.providers.openai]\napi_key = "{CHAT_KEY}"\n')
    )
    assert row.status is Status.OK
    assert "reused from [fermix_core.providers.openai]" in row.detail
    assert "files up to 20 MB" in row.detail
    assert CHAT_KEY not in row.detail


def test_interactive_setup_offers_the_step_and_reuses_the_chat_key(fermix_home) -> None:
    from fermix_core.setup import SetupIO, run_setup

    fermix_home.config_file.write_text(f'[fermix_core.providers.xai]\napi_key = "{CHAT_KEY}"\n')
    answers = iter(["y", "xai"])
    secrets = iter([""])  # Enter: reuse the xai chat key
    shown: list[str] = []
    io = SetupIO(
        prompt=lambda text: (shown.append(text), next(answers))[1],
        secret_prompt=lambda text: (shown.append(text), next(secrets))[1],
        echo=shown.append,
    )
    assembly = assemble(fermix_home, environ={})
    run_setup(assembly, interactive=True, options={}, io=io, only=["transcription"])
    text = fermix_home.config_file.read_text()
    assert 'backend = "xai"' in text and "xai_api_key" not in text and "model" not in text
    assert any("Enter reuses the xai chat key" in line for line in shown)
    assert not any(line.startswith("Model") for line in shown)  # xai is modelless

    # Declining leaves the file alone.
    before = fermix_home.config_file.read_text()
    io = SetupIO(prompt=lambda text: "n", secret_prompt=lambda text: "", echo=lambda text: None)
    assembly = assemble(fermix_home, environ={})
    run_setup(assembly, interactive=True, options={}, io=io, only=["transcription"])
    assert fermix_home.config_file.read_text() == before


@pytest.mark.anyio
async def test_a_senders_filename_cannot_steer_the_upload(tmp_path) -> None:
    fake = SpeechToTextFake({b"OggS-named": "named"}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        evil = Attachment(
            kind="audio",
            data=b"OggS-named",
            mime_type="audio/ogg",
            filename='..\\..\\etc/pass\r\nContent-Type: text/html; x="y.ogg',
        )
        async with rig.queue:
            await rig.ingest("", attachments=[evil])
        await transcriber.aclose()
    (upload,) = fake.uploads
    assert upload.filename == "html_x_y.ogg"  # the last path part, in plain characters
    assert upload.content_type == "audio/ogg"
    assert rig.executor.jobs[0].message.text.endswith("named")


@pytest.mark.anyio
async def test_an_audio_file_that_vanished_is_a_failure_not_a_crash(tmp_path) -> None:
    fake = SpeechToTextFake({}, api_key=KEY)
    async with LoopbackServer(fake) as server:
        rig, transcriber = await _rig(tmp_path, server.url, f'openai_api_key = "{KEY}"\n')
        gone = Attachment(kind="audio", path=tmp_path / "gone.ogg", mime_type="audio/ogg")
        async with rig.queue:
            outcome = await rig.ingest("", attachments=[gone])
        await transcriber.aclose()
        assert server.requests == []
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    assert rig.channel.texts == [FAILED_REPLY]

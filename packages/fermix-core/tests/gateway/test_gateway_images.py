"""The gateway's image step: cap per channel, sniffed type, stored as a file, refusals answered."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from fermix_core.channel import Attachment
from fermix_core.gateway.types import IngestStatus
from fermix_core.media.images import DEFAULT_INBOUND_CAP, ImageIntake, ImageStore

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\0" * 64


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "home" / "media" / "images")


@pytest.fixture
def images(rig, store):
    rig.gateway.images = ImageIntake(store, emit=rig.events)
    return rig


async def test_images_are_stored_once_as_private_files_and_reach_the_turn(images, store) -> None:
    first = Attachment(kind="image", data=JPEG, mime_type="image/png", filename="a.jpg")
    outcome = await images.ingest("two of the same", attachments=[first, first])
    assert outcome.status is IngestStatus.QUEUED
    await outcome.job.done.wait()
    stored = outcome.job.message.attachments
    assert [a.path for a in stored] == [stored[0].path] * 2  # content-addressed: one file
    path = stored[0].path
    assert path.parent == store.root and path.suffix == ".jpg"
    assert path.read_bytes() == JPEG
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stored[0].mime_type == "image/jpeg"  # sniffed from the bytes, not the label
    assert stored[0].data is None and stored[0].filename == "a.jpg"
    assert images.events.named("media.image")[-1]["status"] == "admitted"


async def test_an_image_over_the_channels_cap_is_refused_with_a_reply(images, store) -> None:
    images.channel.max_inbound_media = 1024
    big = Attachment(kind="image", data=PNG + b"\0" * 2048, mime_type="image/png")
    outcome = await images.ingest("look", attachments=[big])
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    (reply,) = images.channel.texts
    assert "over the 0.0 MB" not in reply and "limit for images on tg" in reply
    assert images.executor.started == [] and not store.root.exists()


async def test_a_withheld_image_names_the_cap_without_any_bytes(images) -> None:
    withheld = Attachment(kind="image", withheld=True, size=30 * 1024 * 1024, filename="huge.jpg")
    outcome = await images.ingest("", attachments=[withheld])
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    (reply,) = images.channel.texts
    assert reply.startswith("huge.jpg (30 MB) is over the 20 MB limit for images on tg")
    assert "did not download it" in reply
    assert images.executor.started == []


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"%PDF-1.7 not a picture", "does not look like a picture"),
        (b"\0\0\0\x18ftypheic" + b"\0" * 16, "HEIC/AVIF"),
    ],
)
async def test_a_file_that_is_not_a_readable_picture_is_refused(images, data, expected) -> None:
    fake = Attachment(kind="image", data=data, mime_type="image/jpeg", filename="x.jpg")
    outcome = await images.ingest("what is it", attachments=[fake])
    assert outcome.status is IngestStatus.MEDIA_REFUSED
    assert expected in images.channel.texts[0]


async def test_a_stranger_never_reaches_the_image_step(images, store) -> None:
    ghost = Attachment(kind="image", path=Path("/nonexistent/p.png"), mime_type="image/png")
    outcome = await images.ingest("", sender="stranger", attachments=[ghost])
    assert outcome.status is IngestStatus.DROPPED
    assert images.channel.sent == [] and not store.root.exists()
    assert images.events.named("media.image") == []


async def test_non_image_attachments_pass_through_untouched(images) -> None:
    doc = Attachment(kind="document", data=b"%PDF", mime_type="application/pdf")
    outcome = await images.ingest("read this", attachments=[doc])
    await outcome.job.done.wait()
    assert outcome.job.message.attachments == [doc]


def test_the_default_cap_is_the_telegram_sized_twenty_megabytes() -> None:
    assert DEFAULT_INBOUND_CAP == 20 * 1024 * 1024


async def test_a_local_path_is_checked_before_it_is_read(images, tmp_path) -> None:
    images.channel.max_inbound_media = 4096
    big = tmp_path / "big.png"
    big.write_bytes(PNG + b"\0" * 8192)
    for attachment, expected in (
        (Attachment(kind="image", path=big), "over the 4 KB limit"),
        (Attachment(kind="image", path=tmp_path), "is not a file"),
        (Attachment(kind="image", path=tmp_path / "gone.png"), "does not exist"),
    ):
        outcome = await images.ingest("see", attachments=[attachment])
        assert outcome.status is IngestStatus.MEDIA_REFUSED
        assert expected in images.channel.texts[-1]
    assert images.executor.started == []

"""Fitting images to a provider's limits with real pictures made here, and the request pass
every adapter runs (vision gate naming the model, earlier images as notes, missing files)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from fermix_core.media.images import (
    ImageError,
    check_local_image,
    fit_image,
    fit_part,
    prepare_request,
    sniff_image,
)
from fermix_core.media.limits import MB, ImageLimits
from fermix_core.messages import ImagePart, Message, TextPart, ToolResult
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError
from fermix_core.testing import ScriptedProvider

Image = pytest.importorskip("PIL.Image", reason="Pillow is a fermix-core dependency")

ANTHROPIC_LIKE = ImageLimits(max_long_edge=1568, max_bytes=5 * MB * 3 // 4)


def noise(size: tuple[int, int], mode: str = "RGB") -> Image.Image:
    channels = len(mode)
    return Image.frombytes(mode, size, os.urandom(size[0] * size[1] * channels))


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def opened(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def test_a_large_jpeg_is_downscaled_to_the_long_edge_and_the_byte_cap() -> None:
    data = encoded(noise((4032, 3024)), "JPEG", quality=95)  # a 12-megapixel phone photo
    assert len(data) > ANTHROPIC_LIKE.max_bytes
    fitted, media_type = fit_image(data, "image/jpeg", ANTHROPIC_LIKE)
    assert media_type == "image/jpeg"
    assert len(fitted) <= ANTHROPIC_LIKE.max_bytes < len(data)
    assert opened(fitted).size == (1568, 1176)  # aspect ratio kept


def test_a_large_png_shrinks_and_falls_back_to_jpeg_when_png_cannot_fit() -> None:
    data = encoded(noise((1800, 1400)), "PNG")  # noise does not compress: ~7.6 MB
    assert len(data) > 7 * MB
    fitted, media_type = fit_image(data, "image/png", ANTHROPIC_LIKE)
    assert len(fitted) <= ANTHROPIC_LIKE.max_bytes
    assert max(opened(fitted).size) <= 1568
    assert media_type == "image/jpeg"  # a noisy PNG at 1568 px is still over 3.75 MB


def test_a_transparent_png_that_fits_after_scaling_stays_png() -> None:
    image = Image.new("RGBA", (3000, 1000), (0, 128, 255, 0))
    fitted, media_type = fit_image(encoded(image, "PNG"), "image/png", ANTHROPIC_LIKE)
    assert media_type == "image/png"
    out = opened(fitted)
    assert out.size == (1568, 523) and out.mode == "RGBA"


def test_an_image_inside_every_limit_is_returned_untouched() -> None:
    data = encoded(noise((640, 480)), "JPEG")
    fitted, media_type = fit_image(data, "image/jpeg", ANTHROPIC_LIKE)
    assert fitted is data and media_type == "image/jpeg"


def test_a_format_the_wire_does_not_take_is_re_encoded() -> None:
    only_jpeg_png = ImageLimits(media_types=frozenset({"image/jpeg", "image/png"}))
    bmp = encoded(noise((100, 80)), "BMP")
    fitted, media_type = fit_image(bmp, "image/bmp", only_jpeg_png)
    assert media_type == "image/png" and opened(fitted).size == (100, 80)


def test_an_animated_gif_becomes_its_first_frame() -> None:
    frames = [Image.new("RGB", (40, 30), colour) for colour in ("red", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=50)
    fitted, media_type = fit_image(buffer.getvalue(), "image/gif", ANTHROPIC_LIKE)
    assert media_type == "image/png"
    out = opened(fitted)
    assert not getattr(out, "is_animated", False)
    assert out.convert("RGB").getpixel((0, 0)) == (255, 0, 0)


def test_exif_rotation_is_applied() -> None:
    image = noise((400, 200))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    data = encoded(image, "JPEG", exif=exif.tobytes())
    fitted, _ = fit_image(data, "image/jpeg", ANTHROPIC_LIKE)
    assert opened(fitted).size == (200, 400)


def test_sniffing_reads_the_magic_not_the_label() -> None:
    assert sniff_image(encoded(noise((8, 8)), "PNG")[:32]) == "image/png"
    assert sniff_image(encoded(noise((8, 8)), "JPEG")[:32]) == "image/jpeg"
    assert sniff_image(encoded(noise((8, 8)), "WEBP")[:32]) == "image/webp"
    assert sniff_image(b"%PDF-1.7") is None


def test_check_local_image_says_what_is_wrong(tmp_path: Path) -> None:
    good = tmp_path / "ok.png"
    good.write_bytes(encoded(noise((8, 8)), "PNG"))
    assert check_local_image(good) == "image/png"
    with pytest.raises(ImageError, match="does not exist"):
        check_local_image(tmp_path / "missing.png")
    with pytest.raises(ImageError, match="is not a file"):
        check_local_image(tmp_path)
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageError, match="is empty"):
        check_local_image(tmp_path / "empty.png")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ImageError, match="does not look like a picture"):
        check_local_image(tmp_path / "notes.txt")
    big = tmp_path / "big.png"
    big.write_bytes(encoded(noise((64, 64)), "PNG"))  # ~12 KB of noise
    with pytest.raises(ImageError, match="over the 1 KB limit"):
        check_local_image(big, cap=1024)


def test_fit_part_reads_files_caches_and_reports_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "p.jpg"
    path.write_bytes(encoded(noise((3000, 1000)), "JPEG"))
    part = ImagePart(media_type="image/jpeg", path=str(path))
    first = fit_part(part, ANTHROPIC_LIKE)
    assert isinstance(first, ImagePart) and first.data is not None
    assert fit_part(part, ANTHROPIC_LIKE) is first  # cached: not decoded twice
    path.unlink()
    gone = fit_part(part, ANTHROPIC_LIKE)
    assert isinstance(gone, TextPart) and "p.jpg was removed" in gone.text


@pytest.mark.anyio
async def test_a_text_model_refuses_the_new_image_naming_the_model() -> None:
    provider = ScriptedProvider([], vision=False, model="tiny-text-1")
    image = ImagePart(media_type="image/png", data=b"\x89PNG\r\n\x1a\nx")
    request = ChatRequest(messages=[Message.user("what is this?", image)], model="tiny-text-1")
    with pytest.raises(ProviderError) as info:
        await prepare_request(provider, request)
    assert info.value.kind is ErrorKind.UNSUPPORTED_INPUT
    assert info.value.message.startswith("tiny-text-1 cannot read images")


@pytest.mark.anyio
async def test_a_tool_image_after_the_last_user_message_also_fails_loud() -> None:
    provider = ScriptedProvider([], vision=False)
    shot = ToolResult(
        call_id="c1", name="browser", content=[ImagePart(media_type="image/png", data=b"x")]
    )
    request = ChatRequest(messages=[Message.user("screenshot it"), Message.tool(shot)])
    with pytest.raises(ProviderError):
        await prepare_request(provider, request)


@pytest.mark.anyio
async def test_earlier_images_become_notes_for_a_text_model() -> None:
    provider = ScriptedProvider([], vision=False, model="tiny-text-1")
    image = ImagePart(media_type="image/png", data=b"\x89PNG\r\n\x1a\nx")
    request = ChatRequest(
        messages=[
            Message.user("see", image),
            Message.assistant("I cannot."),
            Message.user("then just say hi"),
        ]
    )
    prepared = await prepare_request(provider, request)
    assert not prepared.has_images
    assert "tiny-text-1 cannot read images" in prepared.messages[0].text

"""Image costs: Pillow's import, fitting real photos to provider limits, the gateway's image
step, and proof that a text-only cold ``fermix ask`` imports none of it.

* ``pillow_import``: a fresh interpreter importing ``PIL.Image`` against one that does not
  (medians of fresh processes). This is paid once per process, on the first picture only.
* ``cold_path``: the modules a cold text ask loads (CLI, service, the three wires) checked
  for ``PIL`` and ``fermix_core.media.images`` — they must be absent.
* ``fit``: ``fit_image`` on a 12-megapixel phone photo (JPEG, 4032 x 3024, noise so it does
  not compress away) for Anthropic's and OpenAI's limits, a 2880 x 1800 PNG screenshot, and
  a picture already inside the limits (header read only); plus cache hits of ``fit_part``
  for inline bytes (hashed) and for a history file (keyed by path, size and mtime).
* ``admit``: ``ImageIntake``'s per-image work (sniff, SHA-256, atomic 0600 write) for a
  5 MB photo.

    uv run python bench/run.py images

Numbers come from a shared, loaded machine: read them as upper bounds.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7
PROCESS_RUNS = 9


def _median_ms(fn, runs: int = RUNS) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(samples), 2)


def _process_ms(code: str) -> float:
    samples = []
    for _ in range(PROCESS_RUNS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(samples), 1)


def _pillow_import() -> dict:
    bare = _process_ms("pass")
    pillow = _process_ms("import PIL.Image")
    return {
        "bare_python_ms": bare,
        "import_pil_image_ms": pillow,
        "added_ms": round(pillow - bare, 1),
    }


def _cold_path() -> dict:
    probe = (
        "import sys\n"
        "import fermix_core.cli.ask_core, fermix_core.service, fermix_core.api\n"
        "import fermix_providers.wires.chat_completions, fermix_providers.wires.responses\n"
        "import fermix_providers.anthropic.adapter\n"
        "print(int('PIL' in sys.modules), int('fermix_core.media.images' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    pil, images = (bool(int(x)) for x in out.stdout.split())
    return {"PIL_loaded": pil, "media_images_loaded": images}


def _fit() -> dict:
    from fermix_core.media.images import _CACHE, fit_image, fit_part
    from fermix_core.media.limits import MB, ImageLimits
    from fermix_core.messages import ImagePart
    from PIL import Image, ImageDraw

    anthropic = ImageLimits(max_long_edge=1568, max_bytes=5 * MB * 3 // 4)
    openai = ImageLimits(max_long_edge=2048, max_bytes=20 * MB)

    buffer = io.BytesIO()
    Image.frombytes("RGB", (4032, 3024), os.urandom(4032 * 3024 * 3)).save(
        buffer, format="JPEG", quality=92
    )
    photo = buffer.getvalue()

    screen = Image.new("RGB", (2880, 1800), (245, 245, 245))
    draw = ImageDraw.Draw(screen)
    for row in range(0, 1800, 24):
        draw.text((40, row), "def fit_image(data, media_type, limits): ..." * 3, fill=(20, 20, 20))
    buffer = io.BytesIO()
    screen.save(buffer, format="PNG")
    screenshot = buffer.getvalue()

    buffer = io.BytesIO()
    Image.new("RGB", (800, 600), (10, 120, 200)).save(buffer, format="JPEG")
    small = buffer.getvalue()

    fitted, _ = fit_image(photo, "image/jpeg", anthropic)
    part = ImagePart(media_type="image/jpeg", data=photo)
    fit_part(part, anthropic)  # fill the cache
    stored = tempfile.NamedTemporaryFile(suffix=".jpg", delete=False)  # noqa: SIM115
    stored.write(photo)
    stored.close()
    on_disk = ImagePart(media_type="image/jpeg", path=stored.name)
    fit_part(on_disk, anthropic)
    path_hit = _median_ms(lambda: fit_part(on_disk, anthropic), 21)
    os.unlink(stored.name)
    return {
        "photo_12mp_bytes": len(photo),
        "photo_to_anthropic_ms": _median_ms(lambda: fit_image(photo, "image/jpeg", anthropic)),
        "photo_to_anthropic_bytes": len(fitted),
        "photo_to_openai_ms": _median_ms(lambda: fit_image(photo, "image/jpeg", openai)),
        "screenshot_png_bytes": len(screenshot),
        "screenshot_to_anthropic_ms": _median_ms(
            lambda: fit_image(screenshot, "image/png", anthropic)
        ),
        "already_fits_ms": _median_ms(lambda: fit_image(small, "image/jpeg", anthropic), 21),
        "cached_fit_part_inline_ms": _median_ms(lambda: fit_part(part, anthropic), 21),
        "cached_fit_part_history_file_ms": path_hit,
        "cache_entries": len(_CACHE._items),
    }


def _admit() -> dict:
    from fermix_core.channel import Attachment, InboundMessage
    from fermix_core.media.images import ImageIntake, ImageStore

    data = b"\xff\xd8\xff\xe0" + os.urandom(5 * 1024 * 1024)
    with tempfile.TemporaryDirectory() as tmp:
        intake = ImageIntake(ImageStore(Path(tmp) / "images"))
        counter = iter(range(10_000))

        def once() -> None:
            unique = data + next(counter).to_bytes(4, "big")  # a new file every time
            message = InboundMessage(
                channel="bench",
                chat_id="c",
                sender_id="s",
                attachments=[Attachment(kind="image", data=unique)],
            )
            intake._admit_all(message, 20 * 1024 * 1024)

        return {"admit_5mb_photo_ms": _median_ms(once)}


def run() -> dict:
    result = {
        "pillow_import": _pillow_import(),
        "cold_path": _cold_path(),
        "fit": _fit(),
        "admit": _admit(),
        "load_average": os.getloadavg(),
    }
    print(result)
    return result


if __name__ == "__main__":
    run()

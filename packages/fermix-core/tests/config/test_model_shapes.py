"""Plugin config models' secret slots and list keys, cached on disk: a new process lists the
secret slots and environment overlays without importing any channel's config module, and
any change to the code is a miss, never a stale slot."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from fermix_core import derived_cache
from fermix_core.config import load_config, secret_fields
from fermix_core.config.env import env_overlays
from fermix_core.config.slots import ModelShapes, model_secret_paths, secret_shape
from fermix_core.home import FermixHome
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins import PluginHost
from fermix_core.specs import ChannelSpec

MODEL_SOURCE = """
from pydantic import BaseModel, ConfigDict
from fermix_core.config import Secret

class Hop(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: Secret | None = None

class PagerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: Secret | None = None
    allowed_user_ids: list[str] = []
    room: str = "main"
    hops: dict[str, Hop] = {}
    headers: dict[str, Secret] = {}
"""

REF = "shapedemo_pkg.config:PagerConfig"
MODULE = "shapedemo_pkg.config"


class PagerPlugin:
    @hookimpl
    def fermix_channels(self):
        yield ChannelSpec(
            name="pager",
            factory="shapedemo_pkg.adapter:Pager",
            config_model=REF,
            env={"PAGER_API_KEY": "api_key", "PAGER_ALLOWED_USER_IDS": "allowed_user_ids"},
        )


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "src" / "shapedemo_pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "config.py").write_text(textwrap.dedent(MODEL_SOURCE))
    monkeypatch.syspath_prepend(str(root.parent))
    monkeypatch.setattr(derived_cache, "_stamps", {})
    yield root
    for name in [m for m in sys.modules if m.startswith("shapedemo_pkg")]:
        del sys.modules[name]


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what this process imported and stamped, as a new ``fermix ask`` would."""
    for name in [m for m in sys.modules if m.startswith("shapedemo_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(derived_cache, "_stamps", {})


def registry():
    host = PluginHost()
    host.register(PagerPlugin(), "channels.pager")
    return host.collect()


DOCUMENT = {"fermix_channels": {"pager": {"hops": {"a": {}}, "headers": {"X-Key": "@keyring"}}}}


def survey(home: FermixHome) -> tuple[list, list]:
    """(secret slot paths and env names, channel overlays) as the loader computes them."""
    reg = registry()
    shapes = ModelShapes(home)
    slots = [s for s in secret_fields(DOCUMENT, reg, shapes=shapes) if s.path[0] != "fermix_core"]
    overlays = [o for o in env_overlays(reg, slots, shapes=shapes) if o.kind == "channel"]
    shapes.save()
    return (
        [(s.path, s.env, s.overridable) for s in slots if s.path[0] == "fermix_channels"],
        [(o.env, o.path, o.split_list) for o in overlays],
    )


EXPECTED_SLOTS = [
    (("fermix_channels", "pager", "api_key"), "PAGER_API_KEY", True),
    (("fermix_channels", "pager", "hops", "a", "token"), "PAGER_HOPS_A_TOKEN", False),
    (("fermix_channels", "pager", "headers", "X-Key"), "PAGER_HEADERS_X_KEY", False),
]
EXPECTED_OVERLAYS = [
    ("PAGER_ALLOWED_USER_IDS", ("fermix_channels", "pager", "allowed_user_ids"), True),
]


def test_a_second_process_lists_slots_without_importing_the_model(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    first = survey(home)
    assert first == (EXPECTED_SLOTS, EXPECTED_OVERLAYS)
    assert (home.cache / ModelShapes.FILE_NAME).exists()

    new_process(monkeypatch)
    assert survey(home) == first
    assert MODULE not in sys.modules  # nothing imported the channel's config module


def test_a_changed_model_is_a_miss(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    survey(home)
    source = package / "config.py"
    source.write_text(
        textwrap.dedent(MODEL_SOURCE).replace('room: str = "main"', "room: Secret | None = None")
    )
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    new_process(monkeypatch)
    slots, _ = survey(home)
    assert (("fermix_channels", "pager", "room"), "PAGER_ROOM", False) in slots
    assert MODULE in sys.modules  # the changed model was imported to learn its shape


@pytest.mark.parametrize(
    "content",
    [
        "not json at all",
        json.dumps({"format": 99, "entries": {}}),
        json.dumps({"format": 1, "entries": []}),
    ],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_rewritten(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure_dir("cache")
    cache_file = home.cache / ModelShapes.FILE_NAME
    cache_file.write_text(content)
    assert survey(home) == (EXPECTED_SLOTS, EXPECTED_OVERLAYS)
    assert json.loads(cache_file.read_text())["format"] == ModelShapes.FORMAT


def test_a_tampered_entry_under_a_matching_key_is_not_trusted(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    survey(home)
    cache_file = home.cache / ModelShapes.FILE_NAME
    data = json.loads(cache_file.read_text())
    for name, entry in data["entries"].items():
        entry["value"] = [["api_key", "eval", "os.system"]] if "secrets" in name else "yes"
    cache_file.write_text(json.dumps(data))

    new_process(monkeypatch)
    assert survey(home) == (EXPECTED_SLOTS, EXPECTED_OVERLAYS)
    assert MODULE in sys.modules


def test_shapes_walk_like_the_model(package: Path) -> None:
    from shapedemo_pkg.config import PagerConfig

    shape = secret_shape(PagerConfig)
    assert json.loads(json.dumps(shape)) == shape  # plain data, as the cache keeps it
    paths = list(model_secret_paths(PagerConfig, ("x",), {"x": {"hops": {"b": {}}}}))
    assert paths == [("x", "api_key"), ("x", "hops", "b", "token")]


def test_a_loaded_config_lists_its_slots_once(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    reg = registry()
    loaded = load_config(home, reg, environ={}, document=None)
    first = secret_fields(loaded, reg)
    # A second survey for the same registry reuses the list loading made (no model walk).
    monkeypatch.setattr("fermix_core.config.slots.shape_paths", None)
    assert secret_fields(loaded, reg) == first
    assert secret_fields(loaded, reg) is not loaded.secret_slots  # a copy each time

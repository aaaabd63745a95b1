"""The generated-code cache: dataclasses built from cached code behave exactly as compiled
ones, and an unusable file (corrupt, foreign, too open, a link) is never used."""

from __future__ import annotations

import collections
import dataclasses
import marshal
import os
import random
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest
from fermix_core import codecache, leancode
from fermix_core.codecache import FILE_NAME, GeneratedCodeCache


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return home


def _cache(home: Path) -> GeneratedCodeCache:
    return GeneratedCodeCache(home / "cache" / FILE_NAME)


def _define():
    """A frozen dataclass and a plain one, with field names no other class uses."""

    @dataclasses.dataclass(frozen=True)
    class Point:
        x_cc: int
        y_cc: int = 2
        tags_cc: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    @dataclasses.dataclass(order=True)
    class Box:
        label_cc: str
        size_cc: float = 1.0

    return Point, Box


def _exercise(point_cls, box_cls) -> None:
    p = point_cls(1)
    assert (p.x_cc, p.y_cc, p.tags_cc) == (1, 2, ())
    assert p == point_cls(1, 2, ()) and p != point_cls(3)
    assert hash(p) == hash(point_cls(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x_cc = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.y_cc  # type: ignore[misc]
    assert "x_cc=1" in repr(p)
    assert box_cls("a") < box_cls("b")
    assert box_cls("a", 2.0) == box_cls("a", 2.0)
    with pytest.raises(TypeError):
        point_cls()  # the required field is still required


def test_classes_from_cached_code_behave_like_compiled_ones(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = _cache(home).install()
    try:
        _exercise(*_define())
    finally:
        first.uninstall()
    assert first.compiled_here > 0 and first.hits == 0
    assert first.save()
    stored = home / "cache" / FILE_NAME
    assert stored.stat().st_mode & 0o777 == 0o600
    assert (home / "cache").stat().st_mode & 0o777 == 0o700

    second = _cache(home).install()
    try:
        _exercise(*_define())
    finally:
        second.uninstall()
    assert second.hits >= first.compiled_here and second.compiled_here == 0
    assert not second.save()  # nothing new: the file is not rewritten
    assert "exec" not in vars(dataclasses)
    assert "compile" not in vars(typing)
    assert "eval" not in vars(collections)


def test_processes_merge_what_each_compiled(tmp_path: Path) -> None:
    home = _home(tmp_path)
    a = _cache(home).install()
    try:
        _define()
    finally:
        a.uninstall()
    b = _cache(home).install()  # reads the file before a saved: it knows none of a's entries
    try:

        @dataclasses.dataclass
        class Other:
            only_in_b_cc: int
    finally:
        b.uninstall()
    assert b.compiled_here == 3  # Other's __init__, __repr__ and __eq__
    n_a = a.compiled_here
    assert a.save() and b.save()
    assert len(_cache(home)._read()) == n_a + 3


def _write(home: Path, data: bytes, mode: int = 0o600) -> Path:
    path = home / "cache" / FILE_NAME
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)
    return path


def _entry(value) -> bytes:
    return marshal.dumps(value)


_CODE = compile("1", "<s>", "exec")
_KEY = (0, "exec", "1")
_GOOD = codecache._pack({_KEY: _entry(_CODE)})
_START = len(codecache._header()) + 8


def _with_index(raw: bytes) -> bytes:
    return codecache._header() + len(raw).to_bytes(8, "little") + raw + _entry(_CODE)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not a cache at all",
        codecache._FORMAT + b"\x00\x00\r\n" + _GOOD[len(codecache._header()) :],  # magic
        codecache._header() + b"\xff" * 8 + b"garbage",  # an index larger than the file
        _with_index(b"\x01" * 24),  # an index that does not unmarshal
        _with_index(marshal.dumps([(_KEY, 0)])),  # an index that is not a dictionary
        _with_index(bytes(16) * 8 + bytes(8) * 8),  # format 7's slot table
        codecache._header() + marshal.dumps({b"k" * 16: _CODE}),  # an older format
    ],
    ids=["empty", "text", "foreign-magic", "garbage", "not-marshal", "list", "slots", "old"],
)
def test_an_unusable_file_counts_as_empty_and_is_rewritten(tmp_path: Path, payload: bytes) -> None:
    home = _home(tmp_path)
    path = _write(home, payload)
    cache = _cache(home).install()
    try:
        _exercise(*_define())
    finally:
        cache.uninstall()
    compiled = cache.compiled_here
    assert cache.hits == 0 and compiled > 0
    assert cache.save()
    assert path.read_bytes().startswith(codecache._header())
    assert len(_cache(home)._read()) == compiled


def _reindexed(data: bytes, place) -> bytes:
    """*data* (a valid file) with every entry's place replaced by ``place(where, size)``."""
    size = int.from_bytes(data[len(codecache._header()) : _START], "little")
    index = marshal.loads(data[_START : _START + size])  # noqa: S302
    items = data[_START + size :]
    raw = marshal.dumps({key: place(where, len(items)) for key, where in index.items()})
    return codecache._header() + len(raw).to_bytes(8, "little") + raw + items


@pytest.mark.parametrize(
    "place",
    [
        lambda where, size: codecache._where(size, 5),  # past the last item
        lambda where, size: codecache._where(0, size + 1),  # runs past the end
        lambda where, size: where & ~codecache._LENGTH_MASK,  # an empty item
        lambda where, size: -1,  # negative
        lambda where, size: str(where),  # not a number
        lambda where, size: codecache._where(1, (where & codecache._LENGTH_MASK)),  # shifted
    ],
    ids=["outside", "overrun", "zero-length", "negative", "not-int", "misaligned"],
)
def test_damaged_places_count_as_absent(tmp_path: Path, place) -> None:
    """Every entry of a real file pointed somewhere wrong: no lookup is served from it,
    every class still works, and the next save writes a good file again."""
    home = _home(tmp_path)
    path = _valid_file(home)
    path.write_bytes(_reindexed(path.read_bytes(), place))
    cache = _cache(home).install()
    try:
        _exercise(*_define())
    finally:
        cache.uninstall()
    assert cache.hits == 0 and cache.compiled_here > 0
    assert cache.save() and _cache(home)._read()


def test_a_valid_index_with_an_invalid_item_counts_it_absent(tmp_path: Path) -> None:
    home = _home(tmp_path)
    _write(home, codecache._pack({_KEY: _entry("not code"), (0, "exec", "2"): _entry(_CODE)}))
    assert list(_cache(home)._read()) == [(0, "exec", "2")]


def _valid_file(home: Path) -> Path:
    cache = _cache(home).install()
    try:
        _define()
    finally:
        cache.uninstall()
    cache.save()
    return home / "cache" / FILE_NAME


def test_a_file_others_may_write_is_not_used(tmp_path: Path) -> None:
    home = _home(tmp_path)
    path = _valid_file(home)
    assert _cache(home)._read()
    os.chmod(path, 0o622)  # noqa: S103 - the hostile case under test
    assert _cache(home)._read() == {}


def test_a_link_is_not_followed(tmp_path: Path) -> None:
    home = _home(tmp_path)
    path = _valid_file(home)
    real = tmp_path / "elsewhere.bin"
    path.rename(real)
    path.symlink_to(real)
    assert _cache(home)._read() == {}


def test_no_home_means_no_file(tmp_path: Path) -> None:
    cache = GeneratedCodeCache(tmp_path / "missing-home" / "cache" / FILE_NAME).install()
    try:
        _define()
    finally:
        cache.uninstall()
    assert cache.compiled_here > 0
    assert not cache.save()
    assert not (tmp_path / "missing-home").exists()


def test_a_full_table_starts_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path)
    _valid_file(home)
    before = len(_cache(home)._read())
    monkeypatch.setattr(codecache, "MAX_ENTRIES", before + 1)
    cache = _cache(home).install()
    try:

        @dataclasses.dataclass
        class Fresh:
            fresh_cc: int
    finally:
        cache.uninstall()
    assert cache.save()
    assert len(_cache(home)._read()) == 3  # only this process's entries


def test_startup_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """begin/booted/end as the console entry point runs them: collector, freeze, file."""
    home = _home(tmp_path)
    script = textwrap.dedent(
        """
        import dataclasses, gc, json, sys
        from fermix_core import startup
        before = [gc.isenabled(), gc.get_threshold()]
        startup.begin()
        during = [gc.isenabled(), gc.get_threshold()]
        @dataclasses.dataclass(frozen=True)
        class Probe:
            probe_field_cc: int
        assert Probe(1) == Probe(1)
        startup.booted()
        after = [gc.isenabled(), gc.get_threshold()]
        frozen = gc.get_freeze_count()
        startup.end()
        startup.booted()  # no-op after end
        print(json.dumps({"before": before, "during": during, "after": after,
                          "frozen": frozen, "exec_left": "exec" in vars(dataclasses)}))
        """
    )
    env = {**os.environ, "FERMIX_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    import json

    seen = json.loads(out.stdout)
    assert seen["before"][0] and not seen["during"][0]  # no collection while loading
    assert seen["after"] == seen["before"]  # collecting again, thresholds as they were
    assert seen["frozen"] > 0
    assert seen["exec_left"] is False
    assert (home / "cache" / FILE_NAME).exists()


def test_a_text_used_twice_in_one_process_stays_in_the_table(tmp_path: Path) -> None:
    home = _home(tmp_path)

    def twins():
        @dataclasses.dataclass
        class One:
            twin_cc: int

        @dataclasses.dataclass
        class Two:
            twin_cc: int

        return One, Two

    first = _cache(home).install()
    try:
        twins()
    finally:
        first.uninstall()
    assert first.compiled_here == 3  # the texts of Two equal those of One: compiled once
    first.save()
    second = _cache(home).install()
    try:
        one, two = twins()
    finally:
        second.uninstall()
    assert second.compiled_here == 0 and second.hits == 6
    assert one(1) == one(1) and two(2).twin_cc == 2 and repr(two(3)).endswith("Two(twin_cc=3)")
    assert not second.save()


def test_code_is_compiled_with_the_served_modules_future_flags() -> None:
    """A module compiled with ``from __future__ import annotations`` gets string
    annotations from ``exec``; code from the table must too (and keys differ by flags)."""
    import __future__

    import types

    flag = __future__.annotations.compiler_flag
    modules = {}
    for name, text in (
        ("plain_mod", "def f(): pass"),
        ("future_mod", "from __future__ import annotations\ndef f(): pass"),
    ):
        module = types.ModuleType(name)
        exec(compile(text, "<m>", "exec", dont_inherit=True), module.__dict__)
        module.f.__module__ = name
        modules[name] = module
    plain, future = modules["plain_mod"], modules["future_mod"]
    assert codecache._future_flags(plain) == 0
    assert codecache._future_flags(future) == flag

    source = "def g(x: int) -> int:\n    return x\n"
    cache = GeneratedCodeCache(Path("/nonexistent/cache") / FILE_NAME)
    cache._index = {}
    ns: dict = {}
    cache._flags = {"dataclasses": flag}
    cache.exec(source, {}, ns)
    assert ns["g"].__annotations__ == {"x": "int", "return": "int"}
    cache._flags = {"dataclasses": 0}
    ns = {}
    cache.exec(source, {}, ns)
    assert ns["g"].__annotations__ == {"x": int, "return": int}
    assert len(cache._new) == 2  # one entry per (flags, text)


@pytest.mark.skipif(not leancode.SUPPORTED, reason="location tables are rewritten on 3.11")
def test_generated_code_keeps_its_lines_without_columns() -> None:
    """Generated text has no source file to point ``^^^`` markers into: the table keeps
    the code with line numbers only, the same line for every instruction."""
    source = (
        "def __create_fn__(a):\n    def f(x):\n        return (x + a) * (x - a)\n    return f\n"
    )
    cache = GeneratedCodeCache(Path("/nonexistent/cache") / FILE_NAME)
    cache._index = {}
    served = cache.compiled(source)
    plain = compile(source, "<string>", "exec", dont_inherit=True)
    inner = next(c for c in served.co_consts[0].co_consts if isinstance(c, type(served)))
    plain_inner = next(c for c in plain.co_consts[0].co_consts if isinstance(c, type(plain)))
    assert [p[0] for p in inner.co_positions()] == [p[0] for p in plain_inner.co_positions()]
    assert all(p[2] is None for p in inner.co_positions())
    ns: dict = {}
    exec(served, ns)
    assert ns["__create_fn__"](2)(5) == 21


def test_forward_references_compile_from_the_table(tmp_path: Path) -> None:
    home = _home(tmp_path)
    texts = ["list[int] | None", "dict[str, 'Point_fr']"]
    first = _cache(home).install()
    try:
        refs = [typing.ForwardRef(t) for t in texts]
        with pytest.raises(SyntaxError):  # as the built-in compile reports it
            typing.ForwardRef("not a valid ) expression")
    finally:
        first.uninstall()
    assert first.compiled_here == 2
    assert first.save()
    second = _cache(home).install()
    try:
        again = [typing.ForwardRef(t) for t in texts]
        # a call typing never makes goes to the built-in, untouched by the table
        direct = typing.compile("1 + 1", "<other>", "eval")  # type: ignore[attr-defined]
    finally:
        second.uninstall()
    assert second.hits == 2 and second.compiled_here == 0
    assert eval(direct) == 2  # noqa: S307
    assert [r.__forward_code__.co_code for r in again] == [r.__forward_code__.co_code for r in refs]


def test_named_tuples_build_from_the_table(tmp_path: Path) -> None:
    home = _home(tmp_path)
    runs = []
    for _ in range(2):
        cache = _cache(home).install()
        try:
            pair = collections.namedtuple("Pair_cc", ["left_cc", "right_cc"])
        finally:
            cache.uninstall()
        runs.append((cache.hits, cache.compiled_here))
        cache.save()
        p = pair(1, right_cc=2)
        assert p == (1, 2) and p.left_cc == 1 and repr(p) == "Pair_cc(left_cc=1, right_cc=2)"
        with pytest.raises(TypeError):
            pair(1)
    assert runs[0][1] >= 1 and runs[1] == (runs[0][1], 0)


def test_regular_expressions_compile_from_the_table(tmp_path: Path) -> None:
    import re
    import warnings

    home = _home(tmp_path)
    patterns = [
        (r"^(?P<name_cc>[a-z_]+)=(\d{1,3})$", re.IGNORECASE),
        (rb"^\x00[\x01-\x7f]+(?:end_cc)?$", 0),
        (r"caf\u00e9_cc\s+(?:x|y)*", re.MULTILINE | re.VERBOSE),
    ]

    def use() -> list:
        re.purge()  # past re's own per-process cache, as in a new process
        return [re.compile(p, f) for p, f in patterns]

    first = _cache(home).install()
    try:
        made = use()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            re.compile("[[a]_cc")  # the parser warns: never served from the table
        with pytest.raises(re.error):
            re.compile("(unclosed_cc")
    finally:
        first.uninstall()
    assert [w.category for w in seen] == [FutureWarning]
    assert first.compiled_here == 3
    first.save()

    second = _cache(home).install()
    try:
        again = use()
        with warnings.catch_warnings(record=True) as seen_again:
            warnings.simplefilter("always")
            re.compile("[[a]_cc")
    finally:
        second.uninstall()
    assert second.hits == 3 and second.compiled_here == 0
    assert [w.category for w in seen_again] == [FutureWarning]
    assert import_re_compiler_restored()

    def shape(p: re.Pattern) -> tuple:
        return (p.pattern, p.flags, p.groups, dict(p.groupindex))

    assert [shape(p) for p in again] == [shape(p) for p in made]
    assert again[0].match("Key_Cc=42").group("name_cc", 2) == ("Key_Cc", "42")
    assert again[1].match(b"\x00ab\x80") is None and again[1].match(b"\x00abcend_cc")
    assert again[2].search("caf\u00e9_cc  xyx")


def import_re_compiler_restored() -> bool:
    import re

    compiler = re._compiler
    served = compiler.compile.__module__ != "re._compiler"
    return type(compiler._sre).__name__ == "module" and not served


def _box_only():
    @dataclasses.dataclass(order=True)
    class Box:
        label_cc: str
        size_cc: float = 1.0

    return Box


def test_a_process_reads_only_the_entries_it_uses(tmp_path: Path, monkeypatch) -> None:
    home = _home(tmp_path)
    _valid_file(home)  # Point's and Box's texts
    stored = len(_cache(home)._read())
    loads = []
    original = GeneratedCodeCache._load
    monkeypatch.setattr(
        GeneratedCodeCache,
        "_load",
        lambda self, where: loads.append(where) or original(self, where),
    )
    cache = _cache(home).install()
    try:
        box = _box_only()
    finally:
        cache.uninstall()
    assert cache.compiled_here == 0 and cache.hits == len(loads)
    assert 0 < len(loads) < stored  # Point's entries were never read
    assert box("a") < box("b")


def test_a_small_file_is_read_once_and_dropped_when_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lookup reads the whole file (one read, not one per item); after
    ``release()`` (the runtime is up) the bytes are gone and items are read as asked. A
    file over :data:`READ_WHOLE_BYTES` is never read whole."""
    home = _home(tmp_path)
    path = _valid_file(home)
    reads: list[tuple[int, int]] = []
    original = os.pread
    monkeypatch.setattr(
        codecache.os,
        "pread",
        lambda fd, n, offset: reads.append((n, offset)) or original(fd, n, offset),
    )
    cache = _cache(home).install()
    try:
        point, _box = _define()
        assert cache._whole is not None and len(cache._whole) == path.stat().st_size
        whole_reads = len(reads)
        cache.release()
        assert cache._whole is None
        box = _box_only()
    finally:
        cache.uninstall()
    assert reads[whole_reads - 1] == (path.stat().st_size, 0)
    assert len(reads) > whole_reads  # after release: one read per item again
    assert cache.compiled_here == 0
    assert point(1).y_cc == 2 and box("a") < box("b")
    monkeypatch.setattr(codecache, "READ_WHOLE_BYTES", 16)
    big = _cache(home).install()
    try:
        _define()
        assert big._whole is None and big.compiled_here == 0
    finally:
        big.uninstall()


def test_a_second_use_is_served_again_and_the_file_learns_it(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = _cache(home).install()
    try:
        _box_only()
    finally:
        first.uninstall()
    first.save()
    second = _cache(home).install()
    try:
        one, two = _box_only(), _box_only()  # the same texts twice in one process
    finally:
        second.uninstall()
    assert second.compiled_here == 0 and one("a") < one("b") and two("a") == two("a")
    assert second.save()  # the file learns these texts repeat
    third = _cache(home).install()
    try:
        _box_only(), _box_only()
    finally:
        third.uninstall()
    assert third.compiled_here == 0 and not third.save()


def test_the_index_finds_every_key_and_no_other() -> None:
    """Keys are the texts themselves (with flags and mode): every stored key leads to its
    own item, the same text under another mode or flags, or as bytes, is another key, and
    keys not stored (or not shaped like keys) lead nowhere."""
    rng = random.Random(7)
    texts = [
        "".join(rng.choice("abc(): \n") for _ in range(rng.randrange(1, 80))) for _ in range(1500)
    ]
    keys = list(dict.fromkeys((0, "exec", t) for t in texts))
    keys += [(0, "eval", keys[0][2]), (1, "exec", keys[0][2]), (0, "re", keys[0][2].encode())]
    keys += [(0, "re", "\ud800 lone surrogate")]
    items = {key: marshal.dumps(i) for i, key in enumerate(keys)}
    bad = {("not", "a key"): b"x", (0, "exec", 5): b"y", (0, "exec", "empty"): b""}
    data = codecache._pack({**items, **bad})
    size = int.from_bytes(data[len(codecache._header()) : _START], "little")
    index = marshal.loads(data[_START : _START + size])  # noqa: S302
    assert set(index) == set(keys)  # malformed keys and empty items are not written
    for i, key in enumerate(keys):
        offset, length = codecache._place(index[key], _START + size, len(data))
        assert marshal.loads(data[offset : offset + length]) == i  # noqa: S302
    assert all(index.get((0, "exec", t + "!")) is None for t in texts)

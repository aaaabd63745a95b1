"""Lean bytecode: modules loaded without module and function docstrings — class docstrings,
asserts and behaviour unchanged — cached under the home and never used when stale,
damaged, foreign or not private."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import textwrap
import traceback
from pathlib import Path

import pytest
from fermix_core import leancode
from fermix_core.leancode import LeanFinder, LeanLoader

pytestmark = pytest.mark.skipif(not leancode.SUPPORTED, reason="lean bytecode is for 3.11")

SOURCE = '''\
"""The module's docstring."""

from __future__ import annotations

WORDS = ["doc", "other"]


def documented(x):
    """A function's docstring."""
    return [w for w in WORDS if w != "doc"] + [x]


def undocumented(x):
    text = "not a docstring"
    return text + x


async def coroutine():
    """A coroutine's docstring."""
    return 1


def generator():
    """A generator's docstring."""
    yield from (w.upper() for w in WORDS if w == "doc")


def guarded(x):
    """Checks its argument."""
    assert x > 0, "positive only"
    return (lambda y: y * 2)(x)


class Model:
    """A class's docstring, which pydantic reads for a JSON schema."""

    def method(self):
        """A method's docstring."""

        def inner():
            """An inner function's docstring."""
            return "inner"

        return inner()

    @property
    def value(self):
        """A property's docstring."""
        return 3
'''


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """(source directory on sys.path, home, import function) with the finder installed
    for each import only."""
    src = tmp_path / "src"
    src.mkdir()
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    imported: list[str] = []

    def load(name: str, finder: LeanFinder | None = None):
        finder = finder or LeanFinder(str(home / "cache" / leancode.DIR_NAME), packages=None)
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        finder.install()
        try:
            module = importlib.import_module(name)
        finally:
            finder.uninstall()
        imported.append(name)
        return module, finder

    yield src, home, load
    for name in imported:
        sys.modules.pop(name, None)


def test_module_and_function_docstrings_go_class_docstrings_and_asserts_stay(tree) -> None:
    src, _home, load = tree
    (src / "lean_sample.py").write_text(SOURCE)
    module, finder = load("lean_sample")
    assert isinstance(module.__spec__.loader, LeanLoader)
    assert module.__doc__ is None
    for function in (
        module.documented,
        module.undocumented,
        module.coroutine,
        module.generator,
        module.guarded,
        module.Model.method,
        module.Model.value.fget,
    ):
        assert function.__doc__ is None, function
    assert module.Model.__doc__ == "A class's docstring, which pydantic reads for a JSON schema."
    # Behaviour is the same: constants that are not docstrings, comprehensions, lambdas,
    # nested functions, asserts.
    assert module.documented("x") == ["other", "x"]
    assert module.undocumented("!") == "not a docstring!"
    assert list(module.generator()) == ["DOC"]
    assert module.Model().method() == "inner"
    assert module.Model().value == 3
    assert module.guarded(2) == 4
    with pytest.raises(AssertionError, match="positive only"):
        module.guarded(0)
    assert finder.written == 1 and finder.hits == 0


def test_the_second_import_comes_from_the_home_cache(tree) -> None:
    src, home, load = tree
    (src / "lean_cached.py").write_text(SOURCE)
    _module, first = load("lean_cached")
    cached = Path(first.cache_path(str(src / "lean_cached.py")))
    assert cached.is_file()
    assert cached.is_relative_to(home / "cache" / leancode.DIR_NAME)
    assert cached.stat().st_mode & 0o077 == 0
    module, second = load("lean_cached")
    assert second.hits == 1 and second.written == 0
    assert module.__cached__ == str(cached)
    assert module.documented.__doc__ is None
    assert module.documented("y") == ["other", "y"]


def test_a_changed_source_is_compiled_again(tree) -> None:
    src, _home, load = tree
    path = src / "lean_changed.py"
    path.write_text(SOURCE)
    load("lean_changed")
    path.write_text(SOURCE.replace("return 3\n", "return 30\n"))
    module, finder = load("lean_changed")
    assert finder.hits == 0 and finder.written == 1
    assert module.Model().value == 30


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other interpreter", "empty"])
def test_a_damaged_cache_file_is_ignored_and_rewritten(tree, damage: str) -> None:
    src, _home, load = tree
    (src / "lean_damaged.py").write_text(SOURCE)
    _module, first = load("lean_damaged")
    cached = Path(first.cache_path(str(src / "lean_damaged.py")))
    data = cached.read_bytes()
    cached.write_bytes(
        {
            "truncated": data[: len(data) // 2],
            "garbage": data[:16] + b"\x00not marshal data" * 10,
            "other interpreter": b"\x00\x00\r\n" + data[4:],
            "empty": b"",
        }[damage]
    )
    module, finder = load("lean_damaged")
    assert finder.hits == 0 and finder.written == 1
    assert module.documented("z") == ["other", "z"]
    _module, third = load("lean_damaged")  # the rewritten file is served
    assert third.hits == 1


@pytest.mark.parametrize("unsafe", ["group-writable", "symlink"])
def test_a_cache_file_others_could_write_is_never_used(tree, tmp_path: Path, unsafe: str) -> None:
    src, _home, load = tree
    (src / "lean_unsafe.py").write_text(SOURCE)
    _module, first = load("lean_unsafe")
    cached = Path(first.cache_path(str(src / "lean_unsafe.py")))
    if unsafe == "group-writable":
        cached.chmod(0o664)
    else:
        elsewhere = tmp_path / "planted.pyc"
        elsewhere.write_bytes(cached.read_bytes())
        cached.unlink()
        cached.symlink_to(elsewhere)
    finder = LeanFinder(first.root, write=False, packages=None)
    module, _ = load("lean_unsafe", finder)
    assert finder.hits == 0
    assert module.documented("w") == ["other", "w"]


def test_a_module_with_annotations_loses_its_docstring_too(tree) -> None:
    src, _home, load = tree
    (src / "lean_annotated.py").write_text('"""Annotated."""\nLIMIT: int = 3\n')
    module, _finder = load("lean_annotated")
    assert module.__doc__ is None
    assert module.__annotations__ == {"LIMIT": int} and module.LIMIT == 3


def test_a_docstring_text_used_again_in_the_module_keeps_its_docstring(tree) -> None:
    src, _home, load = tree
    (src / "lean_shared.py").write_text('"""Same text."""\nCOPY = """Same text."""\n')
    module, _finder = load("lean_shared")
    assert module.COPY == "Same text."
    assert module.__doc__ == "Same text."  # one constant for both: left as it is


def test_nothing_is_written_without_a_home_or_with_bytecode_writes_off(
    tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, _home, load = tree
    (src / "lean_nowrite.py").write_text(SOURCE)
    missing = tmp_path / "no-home"
    finder = leancode.for_home({"FERMIX_HOME": str(missing)})
    assert finder is not None and not finder.write
    assert finder.root == str(missing / "cache" / leancode.DIR_NAME / leancode.RULES)
    module, _ = load("lean_nowrite", finder)
    # Nothing keeps lean code here, so the module loads as usual.
    assert module.documented.__doc__ == "A function's docstring."
    assert module.documented("v") == ["other", "v"]
    assert not missing.exists()

    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    finder = LeanFinder(str(tmp_path / "home" / "cache" / leancode.DIR_NAME), packages=None)
    module, _ = load("lean_nowrite", finder)
    assert finder.written == 0
    assert module.__doc__ == "The module's docstring."
    assert not any((tmp_path / "home").rglob("lean_nowrite*.pyc"))


def test_a_home_that_cannot_be_written_stops_the_lean_code(tree, tmp_path: Path) -> None:
    src, _home, load = tree
    (src / "lean_readonly.py").write_text(SOURCE)
    (src / "lean_readonly2.py").write_text(SOURCE)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    finder = LeanFinder(str(blocked / "bytecode"), packages=None)
    first, _ = load("lean_readonly", finder)
    assert finder.written == 0 and not finder.writable
    assert first.documented("u") == ["other", "u"]
    second, _ = load("lean_readonly2", finder)
    assert second.documented.__doc__ == "A function's docstring."  # loaded as usual


def test_the_finder_stands_in_front_of_the_path_finder_only_while_installed(tree) -> None:
    _src, home, _load = tree
    finder = LeanFinder(str(home / "cache" / leancode.DIR_NAME), packages=None)
    before = list(sys.meta_path)
    finder.install()
    try:
        path_finder = next(f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder")
        assert sys.meta_path.index(finder) == sys.meta_path.index(path_finder) - 1
        finder.install()  # once
        assert sys.meta_path.count(finder) == 1
    finally:
        finder.uninstall()
    assert sys.meta_path == before
    assert finder.cache_path("/a/b/c.py") == os.path.join(
        finder.root, "a", "b", f"c.{sys.implementation.cache_tag}.pyc"
    )


def test_the_stripped_code_is_what_a_source_without_docstrings_compiles_to() -> None:
    with_docs = compile(textwrap.dedent(SOURCE), "<lean>", "exec")
    lean = leancode.lean(with_docs)
    namespace: dict = {}
    exec(lean, namespace)
    assert namespace["__doc__"] is None
    assert namespace["documented"].__doc__ is None
    assert namespace["Model"].__doc__.startswith("A class's docstring")
    assert namespace["documented"]("a") == ["other", "a"]


def _code_objects(code):
    yield code
    for value in code.co_consts:
        if isinstance(value, type(code)):
            yield from _code_objects(value)


@pytest.mark.parametrize(
    "module", ["json.decoder", "asyncio.base_events", "dataclasses", "fermix_core.leancode"]
)
def test_location_tables_lose_columns_and_keep_every_line(module: str) -> None:
    spec = importlib.util.find_spec(module)
    source = Path(spec.origin).read_text(encoding="utf-8")
    code = compile(source, spec.origin, "exec")
    stripped = leancode.lean(code)
    before = list(_code_objects(code))
    after = list(_code_objects(stripped))
    assert len(before) == len(after)
    assert sum(len(c.co_linetable) for c in after) < sum(len(c.co_linetable) for c in before) / 2
    for old, new in zip(before, after, strict=True):
        assert [p[0] for p in new.co_positions()] == [p[0] for p in old.co_positions()]
        assert all(p[2] is None and p[3] is None for p in new.co_positions())


def test_a_traceback_through_lean_code_names_the_right_lines(tree) -> None:
    src, _home, load = tree
    (src / "lean_raises.py").write_text(
        "def outer(x):\n"
        "    values = {'a': 1}\n"
        "    return inner(values,\n"
        "                 x)\n"
        "\n"
        "def inner(values, key):\n"
        "    total = sum(v for v in values.values())\n"
        "    return total + values[key]\n"
    )
    module, _finder = load("lean_raises")
    with pytest.raises(KeyError) as caught:
        module.outer("missing")
    frames = [(f.name, f.lineno) for f in traceback.extract_tb(caught.value.__traceback__)]
    assert frames[-2:] == [("outer", 3), ("inner", 8)]
    assert traceback.extract_tb(caught.value.__traceback__)[-1].colno is None


def test_no_columns_merges_same_line_entries_and_keeps_missing_locations() -> None:
    """Every entry form of a 3.11 location table, read through ``co_lines``."""
    # Three short-form entries on one line, a line step of +2 (one-line form, with
    # columns), a no-location entry, then a long-form entry moving back 3 lines.
    entries = [
        [0x80 | 0 << 3 | 1, 0x12],  # code 0: 2 units, same line
        [0x80 | 1 << 3 | 0, 0x01],  # code 1: 1 unit, same line
        [0x80 | 2 << 3 | 7, 0x00],  # code 2: 8 units, same line
        [0x80 | 12 << 3 | 0, 4, 9],  # one-line form: +2 lines, columns 4-9
        [0x80 | 15 << 3 | 2],  # no location, 3 units
        [0x80 | 14 << 3 | 0, (3 << 1) | 1, 0, 5, 9],  # long form: -3 lines
    ]
    expected = [
        [0x80 | 13 << 3 | 7, 0],  # 8 units on the same line …
        [0x80 | 13 << 3 | 2, 0],  # … and the other 3
        [0x80 | 13 << 3 | 0, 4],  # +2 lines (zigzag 4)
        [0x80 | 15 << 3 | 2],
        [0x80 | 13 << 3 | 0, 7],  # -3 lines (zigzag 7)
    ]
    code = compile("x = 1\n" * 20, "<table>", "exec")
    code = code.replace(co_linetable=b"".join(bytes(entry) for entry in entries))
    table, lines = leancode.no_columns(code)
    assert table == b"".join(bytes(entry) for entry in expected)
    assert lines == [(0, 22, 1), (22, 24, 3), (24, 30, None), (30, 32, 0)]


def test_a_module_outside_the_lean_packages_keeps_its_docstrings(tree) -> None:
    # A third-party plugin may describe a tool by its function's docstring: only the
    # standard library and the packages the finder names load lean.
    src, home, load = tree
    (src / "fermix_weather_plugin.py").write_text(SOURCE)
    (src / "lean_named.py").write_text(SOURCE)
    _settle(src)
    root = str(home / "cache" / leancode.DIR_NAME)
    plugin, finder = load("fermix_weather_plugin", LeanFinder(root))
    assert not isinstance(plugin.__spec__.loader, LeanLoader)
    assert plugin.__doc__ == "The module's docstring."
    assert plugin.documented.__doc__ == "A function's docstring."
    assert finder.written == 0 and finder.hits == 0
    assert not finder.save_specs()  # where it is is not remembered either
    named, finder = load("lean_named", LeanFinder(root, packages=frozenset({"lean_named"})))
    assert isinstance(named.__spec__.loader, LeanLoader)
    assert named.documented.__doc__ is None


def test_the_standard_library_and_our_packages_are_served_but_not_site_packages() -> None:
    import json.decoder

    import fermix_core.messages

    finder = LeanFinder("/nonexistent")
    assert finder.serves("json.decoder", json.decoder.__file__)
    assert finder.serves("fermix_core.messages", fermix_core.messages.__file__)
    assert finder.serves("pydantic.main", "/anywhere/site-packages/pydantic/main.py")
    stdlib = os.path.dirname(os.__file__)
    # A package installed into the interpreter's own site-packages is not the standard library.
    assert not finder.serves("someplugin", os.path.join(stdlib, "site-packages", "someplugin.py"))
    assert not finder.serves("someplugin", "/anywhere/site-packages/someplugin/__init__.py")


# --------------------------------------------------------------- remembered module locations

PAST = 1_600_000_000  # seconds: a directory last changed long before the test


def _settle(*directories: Path) -> None:
    """Give *directories* an old modification time, as an installed tree has (with its
    ``__pycache__`` there already, so importing writes nothing into them)."""
    for directory in directories:
        (directory / "__pycache__").mkdir(exist_ok=True)
        os.utime(directory, (PAST, PAST))


def _package(src: Path, name: str) -> None:
    package = src / name
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 'package'\n")
    (package / "part.py").write_text("VALUE = 'part'\n")
    _settle(package, src)


def test_modules_are_located_from_what_the_last_process_found(tree) -> None:
    src, home, load = tree
    _package(src, "lean_located")
    root = str(home / "cache" / leancode.DIR_NAME)
    first = LeanFinder(root, packages=None)
    load("lean_located", first)
    sys.modules.pop("lean_located.part", None)
    load("lean_located.part", first)
    assert first.located == 0 and first.save_specs()
    expected = {
        name: importlib.machinery.PathFinder.find_spec(name, path)
        for name, path in (
            ("lean_located", None),
            ("lean_located.part", [str(src / "lean_located")]),
        )
    }

    second = LeanFinder(root, packages=None)
    package, _ = load("lean_located", second)
    sys.modules.pop("lean_located.part", None)
    part, _ = load("lean_located.part", second)
    assert second.located == 2 and not second.save_specs()  # nothing new to write
    for module in (package, part):
        spec, plain = module.__spec__, expected[module.__name__]
        assert isinstance(spec.loader, LeanLoader) and spec.loader.path == plain.origin
        assert (spec.origin, spec.submodule_search_locations, spec.has_location, spec.parent) == (
            plain.origin,
            plain.submodule_search_locations,
            plain.has_location,
            plain.parent,
        )
        assert spec.cached == second.cache_path(plain.origin) == module.__cached__
    assert (package.VALUE, part.VALUE) == ("package", "part")


def test_a_module_added_earlier_on_the_path_or_removed_is_seen(tree, tmp_path: Path) -> None:
    src, home, load = tree
    later = tmp_path / "later"
    later.mkdir()
    (later / "lean_shadowed.py").write_text("WHERE = 'later'\n")
    (later / "lean_removed.py").write_text("WHERE = 'later'\n")
    _settle(later, src)
    sys.path.append(str(later))
    try:
        root = str(home / "cache" / leancode.DIR_NAME)
        first = LeanFinder(root, packages=None)
        assert load("lean_shadowed", first)[0].WHERE == "later"
        assert load("lean_removed", first)[0].WHERE == "later"
        assert first.save_specs()

        (src / "lean_shadowed.py").write_text("WHERE = 'earlier'\n")  # changes src's mtime
        (later / "lean_removed.py").unlink()
        second = LeanFinder(root, packages=None)
        assert load("lean_shadowed", second)[0].WHERE == "earlier"
        with pytest.raises(ModuleNotFoundError):
            load("lean_removed", second)
        assert second.located == 0
        assert second.save_specs()  # the stale locations are dropped from the file
        third = LeanFinder(root, packages=None)
        assert all(key[0] != "lean_removed" for key in third._load_specs())
    finally:
        sys.path.remove(str(later))


def test_a_directory_changed_just_now_is_not_remembered(tree) -> None:
    src, home, load = tree
    (src / "lean_fresh.py").write_text("X = 1\n")  # src was modified a moment ago
    finder = LeanFinder(str(home / "cache" / leancode.DIR_NAME), packages=None)
    load("lean_fresh", finder)
    assert not finder.save_specs()
    assert not os.path.exists(finder.specs_path)


def _remembered(tree, name: str, source: str) -> tuple[str, LeanFinder]:
    """Module *name* written to the settled source directory and imported once by a finder
    that saved where it found it: (the lean root, that finder)."""
    src, home, load = tree
    (src / f"{name}.py").write_text(source)
    _settle(src)
    root = str(home / "cache" / leancode.DIR_NAME)
    first = LeanFinder(root, packages=None)
    load(name, first)
    assert first.save_specs()
    return root, first


@pytest.mark.parametrize("damage", ["garbage", "other format", "not a dict", "others may write"])
def test_a_damaged_or_foreign_locations_file_is_ignored(tree, damage: str) -> None:
    root, first = _remembered(tree, "lean_spec_damaged", "X = 1\n")
    load = tree[2]
    path = Path(first.specs_path)
    head = leancode._SPECS_FORMAT + importlib.util.MAGIC_NUMBER
    if damage == "garbage":
        path.write_bytes(head + b"\xff\x00 not marshal")
    elif damage == "other format":
        path.write_bytes(b"fermix-module-specs-0\n" + path.read_bytes()[len(head) - 4 :])
    elif damage == "not a dict":
        import marshal

        path.write_bytes(head + marshal.dumps(["lean_spec_damaged"]))
    else:
        path.chmod(0o666)
    second = LeanFinder(root, packages=None)
    module, _ = load("lean_spec_damaged", second)
    assert module.X == 1 and second.located == 0


def test_invalidate_caches_looks_at_the_directories_again(tree) -> None:
    src, _home, load = tree
    root, _first = _remembered(tree, "lean_invalidated", "WHERE = 'first'\n")
    second = LeanFinder(root, packages=None)
    assert load("lean_invalidated", second)[0].WHERE == "first" and second.located == 1
    (src / "lean_invalidated.py").unlink()
    (src / "lean_invalidated").mkdir()
    (src / "lean_invalidated" / "__init__.py").write_text("WHERE = 'package'\n")
    second.install()
    try:
        importlib.invalidate_caches()  # what the fixture's load also calls
    finally:
        second.uninstall()
    assert second._mtimes == {}
    assert load("lean_invalidated", second)[0].WHERE == "package"

"""Module bytecode without the docstrings and column positions nothing reads, for the
one-off ``fermix ask``.

Every function's docstring is a string constant of its code object, and every module's is
kept as ``module.__doc__``: a cold ask holds about 1.5 MiB of them (pydantic, asyncio,
anyio, e-mail, httpx, Fermix's own …) for code whose documentation nobody reads while it
runs. ``python -OO`` drops them, but it also drops ``assert`` statements and class
docstrings (pydantic takes a model's JSON-schema description from its class docstring,
and tool argument models are sent to the model that way), and it cannot be chosen from
inside a process that has started.

While installed — by :func:`fermix_core.startup.begin`, the console ask's first step, until
the ask's arguments turn out to need typer, whose help texts are docstrings —
:class:`LeanFinder` hands every module of the standard library and of
:data:`LEAN_PACKAGES` (ours and the locked libraries an ask runs) that the path-based
finder would load from source a :class:`LeanLoader`, whose code is the usual code with the
docstrings of the module and of its functions replaced by ``None``: what the compiler
produces for a function without one. Class docstrings, ``assert`` statements and
everything else are left as they are, and so is every other module: a third-party plugin
may read its own docstrings.

Every code object's location table loses its column positions too (:func:`no_columns`):
PEP 657's start and end columns are about three quarters of ``co_linetable``, another
megabyte held for the ``^^^`` markers under a traceback's lines. Line numbers stay exact.

The lean code is cached as ``__pycache__`` caches bytecode (same header: the
interpreter's magic number, the source's modification time and size), under
``$FERMIX_HOME/cache/bytecode/<rules version>`` mirroring the source's absolute path, so
a read-only installation is served too. A file that is missing, stale, damaged, not a
private regular file of this user, or from another interpreter is ignored and written
again from the module's ordinary bytecode. Nothing is written before the home exists, nor
when ``sys.dont_write_bytecode`` is set; a module with no lean file is then loaded as
usual, since making its lean code costs more than it saves when nothing keeps it.

Where a module is, too, is remembered between processes (``module-specs.<tag>.bin`` in the
same directory): finding ~400 modules through the path finder — a directory listing and a
path hook for every package, a probe for each file suffix in each ``sys.path`` entry — cost
about a twentieth of a cold ask. A remembered location is used only while every directory
the path finder would have searched up to it still has the modification time it had (a
file added, removed or renamed in any of them changes it), and only for modules this
finder serves; a directory changed in the last few seconds is not remembered, since a file
added within the file system's timestamp granularity could leave its time as it was.

The rule for finding a docstring is the compiler's own in CPython 3.11 (the first
constant of a function's code object is its docstring or ``None``; comprehension and
lambda code objects hold none); on another interpreter the finder is not installed.
"""

from __future__ import annotations

# The import system's own modules (always loaded): importing ``importlib``, ``pathlib`` or
# ``typing`` here would load them before the finder is in place, with their docstrings.
import _frozen_importlib as _bootstrap  # type: ignore[import-not-found]
import _frozen_importlib_external as _bootstrap_external  # type: ignore[import-not-found]
import marshal
import os
import stat
import sys
import time

PathFinder = _bootstrap_external.PathFinder
SourceFileLoader = _bootstrap_external.SourceFileLoader

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing import Any

#: Where a home keeps the lean bytecode:
#: ``$FERMIX_HOME/cache/<DIR_NAME>/<RULES>/<source dir>/``.
DIR_NAME = "bytecode"
#: The version of what is stripped: files written under other rules are never read.
RULES = "2"
#: The interpreters whose compiler follows the docstring rule above.
SUPPORTED = sys.version_info[:2] == (3, 11)
#: Installed packages loaded lean (top-level import names), besides the standard library:
#: ours and the locked libraries a one-off ask runs, none of which reads a function's or a
#: module's ``__doc__`` at run time. Anything else — a third-party ``fermix-<thing>``
#: plugin, a library it brings — loads as usual, so code that does read its docstrings
#: (a tool describing itself by one, a module formatting its own) sees them.
LEAN_PACKAGES = frozenset(
    {
        "fermix_core",
        "fermix_providers",
        "fermix_channels",
        "fermix_tools",
        "pydantic",
        "pydantic_core",
        "annotated_types",
        "typing_inspection",
        "typing_extensions",
        "anyio",
        "sniffio",
        "httpx",
        "httpcore",
        "h11",
        "h2",
        "hpack",
        "hyperframe",
        "idna",
        "certifi",
        "socksio",
        "pluggy",
    }
)
#: The standard library's directory; its ``site-packages`` (an install without a virtual
#: environment) is not the standard library.
_STDLIB = os.path.dirname(os.__file__) + os.sep
_SITE_DIRS = ("site-packages", "dist-packages")

#: The remembered module locations: the format, then this interpreter's magic number.
_SPECS_FORMAT = b"fermix-module-specs-1\n"
#: More remembered locations than this and only this process's are kept.
MAX_SPECS = 4000

_CODE_TYPE = type((lambda: None).__code__)  # not compile(): it would set up the parser
_FUNCTION_FLAGS = 0x1 | 0x2  # CO_OPTIMIZED | CO_NEWLOCALS: functions, not class bodies
#: Code objects with no docstring slot: their first constant is whatever they use first.
_NO_DOCSTRING = frozenset({"<listcomp>", "<genexpr>", "<setcomp>", "<dictcomp>", "<lambda>"})
#: Location table entry codes (``Objects/locations.md``): a line without columns, no line.
_NO_COLUMNS, _NO_LOCATION = 13, 15
#: CPython 3.11's opcodes (``opcode.opmap``) for reading a module's first instructions.
_LOAD_CONST, _STORE_NAME, _EXTENDED_ARG = 100, 90, 144
#: What may come before a module stores its docstring: CACHE, NOP, SETUP_ANNOTATIONS, RESUME.
_SKIPPED = frozenset({0, 9, 85, 151})


def lean(code: Any) -> Any:
    """*code* (a module's) with its own docstring and its functions' set to ``None``, and
    every location table without columns (:func:`no_columns`)."""
    return _strip(code, module=True)


def without_columns(code: Any) -> Any:
    """*code* and the code objects inside it with location tables that have no columns
    (for code compiled from generated text, e.g. :mod:`fermix_core.codecache`'s)."""
    return _strip(code, docstrings=False)


def _strip(code: Any, *, module: bool = False, docstrings: bool = True) -> Any:
    consts = code.co_consts
    new: list[Any] | None = None
    for i, value in enumerate(consts):
        if type(value) is _CODE_TYPE:
            stripped = _strip(value, docstrings=docstrings)
            if stripped is not value:
                new = new if new is not None else list(consts)
                new[i] = stripped
    if docstrings and consts and type(consts[0]) is str:
        if module:
            docstring = _module_docstring(code)
        else:
            docstring = (
                code.co_flags & _FUNCTION_FLAGS == _FUNCTION_FLAGS
                and code.co_name not in _NO_DOCSTRING
            )
        if docstring:
            new = new if new is not None else list(consts)
            new[0] = None
    changes: dict[str, Any] = {} if new is None else {"co_consts": tuple(new)}
    table, lines = no_columns(code)
    if len(table) < len(code.co_linetable):
        candidate = code.replace(co_linetable=table)
        if _merged(candidate.co_lines()) == lines:  # every instruction keeps its line
            changes["co_linetable"] = table
    return code.replace(**changes) if changes else code


def no_columns(code: Any) -> tuple[bytes, list[tuple[int, int, int | None]]]:
    """*code*'s location table with only line numbers — what the compiler writes under
    ``-X no_debug_ranges`` — and the code's line ranges, neighbours on one line merged.

    The table is written from :meth:`~types.CodeType.co_lines`: each entry covers 1–8
    code units and moves the line by a signed delta from the line before (CPython's
    ``Objects/locations.md``: code 13, "no column info"; code 15 for units with no
    line). PEP 657's column and end positions made up most of the old table. Tracebacks
    then show their lines without the ``^^^`` markers; line numbers (tracebacks,
    warnings, logging) are the same, which :func:`_strip` checks for every code object
    it rewrites.
    """
    out = bytearray()
    ranges = _merged(code.co_lines())
    line = code.co_firstlineno
    for start, end, lineno in ranges:
        kind = _NO_LOCATION if lineno is None else _NO_COLUMNS
        move = 0 if lineno is None else lineno - line
        line = line if lineno is None else lineno
        left = (end - start) >> 1
        while left > 0:
            part = min(left, 8)
            out.append(0x80 | kind << 3 | (part - 1))
            if kind == _NO_COLUMNS:
                value = (-move << 1) | 1 if move < 0 else move << 1
                while value >= 64:
                    out.append((value & 63) | 64)
                    value >>= 6
                out.append(value)
            left, move = left - part, 0
    return bytes(out), ranges


def _merged(lines: Any) -> list[tuple[int, int, int | None]]:
    """``co_lines()`` ranges with adjacent ranges on the same line joined."""
    ranges: list[tuple[int, int, int | None]] = []
    for start, end, lineno in lines:
        if ranges and ranges[-1][2] == lineno and ranges[-1][1] == start:
            ranges[-1] = (ranges[-1][0], end, lineno)
        else:
            ranges.append((start, end, lineno))
    return ranges


def _module_docstring(code: Any) -> bool:
    """Whether the module's first constant is its docstring and used for nothing else:
    the module starts by storing it as ``__doc__`` and loads it nowhere else.

    Read from the 3.11 bytecode directly (two bytes an instruction): importing :mod:`dis`
    here would bring it through this very loader.
    """
    raw = code.co_code
    units = [(raw[i], raw[i + 1]) for i in range(0, len(raw), 2)]
    loads = [
        i
        for i, (op, arg) in enumerate(units)
        if op == _LOAD_CONST and arg == 0 and (i == 0 or units[i - 1][0] != _EXTENDED_ARG)
    ]
    ops = [unit for unit in units if unit[0] not in _SKIPPED]
    return (
        len(loads) == 1
        and len(ops) >= 2
        and ops[0] == (_LOAD_CONST, 0)
        and ops[1][0] == _STORE_NAME
        and code.co_names[ops[1][1]] == "__doc__"
    )


class LeanFinder:
    """A :data:`sys.meta_path` finder placed before :class:`~importlib.machinery.PathFinder`:
    its specs are the path finder's, with a :class:`LeanLoader` for source modules."""

    #: A directory modified less than this long ago (ns) is not trusted to show the next
    #: change in its modification time, so what was found in it is not remembered.
    RECENT_NS = 3_000_000_000

    def __init__(
        self, root: str, *, write: bool = True, packages: frozenset[str] | None = LEAN_PACKAGES
    ) -> None:
        self.root = root
        self.write = write
        #: Top-level names of installed packages loaded lean; ``None``: every module.
        self.packages = packages
        self.tag = sys.implementation.cache_tag
        self.hits = 0
        self.written = 0
        self.specs_path = os.path.join(root, f"module-specs.{self.tag}.bin")
        #: (name, search path) -> (origin, is a package, ((directory, mtime_ns or -1), …)).
        self._specs: dict[Any, Any] | None = None
        self._found: dict[Any, Any] = {}
        self._stale: set[Any] = set()
        #: Modules located from what an earlier process remembered.
        self.located = 0
        #: Directories' modification times as first seen by this process (the import
        #: system's own caches assume a directory does not change under a running import
        #: either; :meth:`invalidate_caches` forgets them).
        self._mtimes: dict[str, int] = {}

    def invalidate_caches(self) -> None:
        """``importlib.invalidate_caches()``: look at the directories again."""
        self._mtimes.clear()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        key = (name, tuple(sys.path if path is None else path))
        if target is None:
            specs = self._specs if self._specs is not None else self._load_specs()
            known = specs.get(key)
            if known is not None:
                spec = self._located(name, known)
                if spec is not None:
                    return spec
                self._stale.add(key)
        spec = PathFinder.find_spec(name, path, target)
        if spec is None or type(spec.loader) is not SourceFileLoader or not spec.origin:
            return spec
        if not self.serves(name, spec.origin):
            return spec
        spec.cached = self.cache_path(spec.origin)
        spec.loader = LeanLoader(spec.loader.name, spec.loader.path, self, spec.cached)
        self._remember(key, spec)
        return spec

    def _located(self, name: str, known: Any) -> Any:
        """The spec the path finder would give for a remembered location, or ``None`` when
        a directory it searched has changed since."""
        origin, package, checks = known
        for directory, mtime in checks:
            if self._mtime(directory) != mtime:
                return None
        lean_path = self.cache_path(origin)
        spec = _bootstrap_external.spec_from_file_location(
            name,
            origin,
            loader=LeanLoader(name, origin, self, lean_path),
            submodule_search_locations=[os.path.dirname(origin)] if package else None,
        )
        spec.cached = lean_path
        self.located += 1
        return spec

    def _remember(self, key: Any, spec: Any) -> None:
        """Keep where *spec* was found with the directories searched to find it: every entry
        of the search path up to the one that holds it (which must be absolute)."""
        if not self.writable:
            return
        origin = spec.origin
        package = spec.submodule_search_locations is not None
        holder = os.path.dirname(os.path.dirname(origin) if package else origin)
        checks = []
        recent = time.time_ns() - self.RECENT_NS
        for entry in key[1]:
            if not isinstance(entry, str) or not os.path.isabs(entry):
                return  # the working directory, or not a path: depends on more than files
            mtime = self._mtime(entry)
            if mtime > recent:
                return
            checks.append((entry, mtime))
            if entry.rstrip(os.sep) == holder:
                self._found[key] = (origin, package, tuple(checks))
                return

    def _mtime(self, path: str) -> int:
        """*path*'s modification time in ns (``-1``: absent), as first seen by this process."""
        mtime = self._mtimes.get(path)
        if mtime is None:
            try:
                mtime = os.stat(path).st_mtime_ns
            except OSError:
                mtime = -1
            self._mtimes[path] = mtime
        return mtime

    def _load_specs(self) -> dict[Any, Any]:
        specs: Any = {}
        data = self.read(self.specs_path)
        head = _SPECS_FORMAT + _bootstrap_external.MAGIC_NUMBER
        if data is not None and data.startswith(head):
            try:
                specs = marshal.loads(memoryview(data)[len(head) :])  # noqa: S302
            except (EOFError, ValueError, TypeError):
                specs = {}
        self._specs = specs if type(specs) is dict else {}
        return self._specs

    def save_specs(self) -> bool:
        """Write what this process found and forget what it found changed (never raising);
        ``True`` when the file was written."""
        if not (self._found or self._stale) or not self.writable:
            return False
        specs = dict(self._specs if self._specs is not None else self._load_specs())
        for key in self._stale:
            specs.pop(key, None)
        specs.update(self._found)
        if len(specs) > MAX_SPECS:
            specs = dict(self._found)
        head = _SPECS_FORMAT + _bootstrap_external.MAGIC_NUMBER
        if not self.store(self.specs_path, head + marshal.dumps(specs), count=False):
            return False
        self._specs, self._found, self._stale = specs, {}, set()
        return True

    def serves(self, name: str, origin: str) -> bool:
        """Whether module *name*, loaded from *origin*, gets lean code: a module of the
        standard library or of one of :attr:`packages`."""
        if self.packages is None or name.partition(".")[0] in self.packages:
            return True
        if not origin.startswith(_STDLIB):
            return False
        return not any(part in _SITE_DIRS for part in origin[len(_STDLIB) :].split(os.sep))

    def cache_path(self, source: str) -> str:
        """Where the lean bytecode of *source* is kept (``sys.pycache_prefix``'s layout)."""
        head, tail = os.path.split(source)
        stem = tail.rpartition(".")[0] or tail
        return os.path.join(self.root, head.lstrip(os.sep), f"{stem}.{self.tag}.pyc")

    def read(self, path: str) -> bytes | None:
        """The file's bytes when it is a regular file of this user that others cannot
        write (not followed through a link), else ``None``."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return None
            data = os.read(fd, info.st_size)
            return data if len(data) == info.st_size else None
        except OSError:
            return None
        finally:
            os.close(fd)

    @property
    def writable(self) -> bool:
        """Whether lean files may be written: a home that exists, bytecode writes on, and
        no write of this process failed (a read-only home)."""
        return self.write and not sys.dont_write_bytecode

    def store(self, path: str, data: bytes, *, count: bool = True) -> bool:
        """Write *data* to *path* atomically (as ``__pycache__`` files are), never raising;
        after a failed write, stop writing (and making lean code) for this process."""
        if not self.writable:
            return False
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            _bootstrap_external._write_atomic(path, data, 0o600)
        except OSError:
            self.write = False
            return False
        self.written += count
        return True

    def install(self) -> LeanFinder:
        """Go in front of the path finder in :data:`sys.meta_path` (once)."""
        if self not in sys.meta_path:
            try:
                at = sys.meta_path.index(PathFinder)
            except ValueError:
                return self  # no path finder to stand in front of
            sys.meta_path.insert(at, self)
        return self

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def finish(self) -> None:
        """Step aside and keep where this process found its modules (:meth:`save_specs`)."""
        self.uninstall()
        self.save_specs()


class LeanLoader(SourceFileLoader):
    """A source file loader whose code comes without docstrings (see the module text)."""

    def __init__(self, fullname: str, path: str, finder: LeanFinder, lean_path: str) -> None:
        super().__init__(fullname, path)
        self.finder = finder
        self.lean_path = lean_path  # where the lean code of *path* is kept

    def get_code(self, fullname: str) -> Any:
        source = self.get_filename(fullname)
        try:
            stats = self.path_stats(source)
        except OSError:
            return super().get_code(fullname)
        mtime, size = int(stats["mtime"]), stats.get("size")
        lean_path = self.lean_path if source == self.path else self.finder.cache_path(source)
        data = self.finder.read(lean_path)
        if data is not None:
            details = {"name": fullname, "path": lean_path}
            try:
                flags = _bootstrap_external._classify_pyc(data, fullname, details)
                if flags == 0:  # timestamp-based, the only kind written here
                    _bootstrap_external._validate_timestamp_pyc(
                        data, mtime, size, fullname, details
                    )
                    _bootstrap._verbose_message("{} matches {}", lean_path, source)
                    code = _bootstrap_external._compile_bytecode(
                        memoryview(data)[16:], fullname, lean_path, source
                    )
                    self.finder.hits += 1
                    return code
            except (ImportError, EOFError, ValueError, TypeError):
                pass  # stale or damaged: made again below
        code = super().get_code(fullname)
        if size is None or not self.finder.writable:
            return code  # making lean code pays only when it is kept for the next process
        code = lean(code)
        self.finder.store(lean_path, _bootstrap_external._code_to_timestamp_pyc(code, mtime, size))
        return code


def for_home(environ: Any = None) -> LeanFinder | None:
    """The finder for the home ``FERMIX_HOME`` names, or ``None`` where it does not apply
    (another interpreter, no cache tag). It writes only into a home that exists."""
    if not SUPPORTED or sys.implementation.cache_tag is None:
        return None
    from fermix_core.homedir import home_dir

    home = home_dir(environ)
    root = os.path.join(home, "cache", DIR_NAME, RULES)
    return LeanFinder(root, write=os.path.isdir(home))

"""Compiled code for source that Python writes at run time, kept between processes.

``@dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__`` (and for a frozen
class ``__setattr__``/``__delattr__``) and compiles it with ``exec`` every time a class is
defined. The runtime's modules define about 180 dataclasses, so a cold ``fermix ask`` spent
60–90 ms of CPU compiling those few hundred small functions — more than any other single
thing it did. :class:`typing.ForwardRef` likewise compiles each string annotation it is
made from (about a thousand in a cold ask, 300 distinct: pydantic-core's ``TypedDict``
schemas are written with postponed annotations). Bytecode caching (``__pycache__``) covers
neither: the source is made at run time.

:class:`GeneratedCodeCache` does for that source what ``.pyc`` files do for modules. While
it is installed, the ``exec`` that :mod:`dataclasses` calls, the ``compile`` that
:mod:`typing` calls and the ``eval`` that :func:`collections.namedtuple` calls look the
source text up in a table of code objects loaded with
:mod:`marshal` from one file, and compile (and remember) only what the table lacks. The
text, the compile mode and the ``__future__`` flags the call would inherit are the whole
key (the text itself, so a lookup is one dictionary probe and a match is exact): the same
text compiled the same way by the same interpreter gives the same code, so an entry cannot
go stale — a changed class produces a different text. The file records the interpreter's
bytecode magic number; a file from another Python, a truncated or otherwise unreadable
file, or one that is not a private regular file of this user counts as empty and is
rewritten. Nothing else changes: the callers run the same ``exec``/``eval`` with the same
globals and namespace, only on code compiled earlier; a call the table cannot serve exactly
(another file name, explicit flags) goes to the built-in unchanged. Regular expressions are
served the same way one level down (:meth:`GeneratedCodeCache.compile_pattern`).
"""

from __future__ import annotations

import builtins
import marshal
import os
import stat
import sys
from pathlib import Path
from typing import Any

#: Where a home keeps it: ``$FERMIX_HOME/cache/<FILE_NAME>``.
FILE_NAME = "generated-code.bin"
#: A file larger than this, or with more entries, is not used and is rebuilt (an old
#: release's classes pile up otherwise; the runtime needs about a thousand entries).
MAX_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 6000
#: A file up to this size is read in one go by the first lookup and kept until
#: :meth:`GeneratedCodeCache.release` (the runtime is up): a cold ask takes ~1,100 of its
#: items, each one ``pread`` apart otherwise. Read while the process is small, the buffer is
#: gone before the process reaches its peak size.
READ_WHOLE_BYTES = 2 * 1024 * 1024
#: The modules served from the table, and the built-in each one's calls go through.
MODULES = {"dataclasses": "exec", "typing": "compile", "collections": "eval"}
_FORMAT = b"fermix-generated-code-8\n"


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return _FORMAT + MAGIC_NUMBER


_CODE_TYPE = type(_header.__code__)


def _columns_remover() -> Any:
    """:func:`fermix_core.leancode.without_columns` where it applies: generated code has
    no source to point carets into, so its location tables keep only line numbers."""
    from fermix_core import leancode

    return leancode.without_columns if leancode.SUPPORTED else None


_without_columns = _columns_remover()


class GeneratedCodeCache:
    """A table of code objects keyed by their source text, backed by one file.

    The file is an index (key → where the item's marshalled bytes are) followed by the
    items; an item is read from the file when a process first asks for it, so a process
    holds only what it uses, however many entries other commands have added. A text one
    process compiles more than once (two classes with the same fields) is stored as a
    1-tuple and kept in memory after its first use. What this process had to compile is
    kept apart and merged into the file by :meth:`save`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        #: key (``(flags, mode, text)``, see :func:`_valid_key`) -> where the item's bytes
        #: are (:func:`_where`, from the start of the items): the file's index (``{}``
        #: without one); ``None`` until read.
        self._index: dict[Any, int] | None = None
        #: Where the file's items start and end.
        self._start = self._end = 0
        self._fd: int | None = None
        #: The whole file, while it is kept (see :data:`READ_WHOLE_BYTES`).
        self._whole: memoryview | None = None
        self._repeats: dict[Any, Any] = {}
        self._used: set[Any] = set()
        self._new: dict[Any, Any] = {}
        self._compiled = 0
        self._installed: list[tuple[Any, str]] = []
        self._flags: dict[str, int] = {}
        self._re_installed: Any = None
        self.hits = 0

    # ------------------------------------------------------------------ the file

    def _open(self) -> tuple[int, dict[Any, int], int, int] | None:
        """The file's descriptor, index, and where its items start and end, when it is a
        usable cache file, else ``None``.

        Usable: a regular file (not followed through a link) of this user that others
        cannot write, no larger than :data:`MAX_BYTES`, with this interpreter's header
        and an index that is a dictionary (an entry whose place lies outside the file's
        items, or whose key is not shaped like one, counts as absent).
        """
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            header = _header()
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or info.st_mode & 0o022
                or info.st_size > MAX_BYTES
            ):
                raise ValueError("not a private regular file")
            head = os.pread(fd, len(header) + 8, 0)
            if len(head) != len(header) + 8 or not head.startswith(header):
                raise ValueError("another format or interpreter")
            size = int.from_bytes(head[len(header) :], "little")
            start = len(header) + 8
            if size > info.st_size - start:
                raise ValueError("truncated")
            raw = os.pread(fd, size, start)
            index = marshal.loads(raw) if len(raw) == size else None  # noqa: S302
            if type(index) is not dict:
                raise ValueError("not an index")
        except (OSError, EOFError, ValueError, TypeError):
            os.close(fd)
            return None
        return fd, index, start + size, info.st_size

    def _load(self, where: Any) -> Any:
        """The item stored at *where* (see :func:`_where`), or ``None`` when its bytes are
        not a valid item or lie outside the file's items."""
        place = _place(where, self._start, self._end)
        if place is None:
            return None
        offset, length = place
        whole = self._whole
        if whole is not None:
            return _item(whole[offset : offset + length], length)
        try:
            return _item(os.pread(self._fd, length, offset), length)  # type: ignore[arg-type]
        except OSError:
            return None

    def _close(self) -> None:
        self._whole = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Drop the file's bytes read in one go; later lookups read each item as asked."""
        self._whole = None

    def _read(self) -> dict[Any, Any]:
        """Every valid item of the file (``{}`` when the file is unusable); an item whose
        bytes are not a valid item counts as absent, as it does when a process asks."""
        return {
            key: value
            for key, data in self._raw().items()
            if (value := _item(data, len(data))) is not None
        }

    def _raw(self) -> dict[Any, bytes]:
        """Every entry of the file with a valid key and place, as its stored bytes (``{}``
        when the file is unusable)."""
        opened = self._open()
        if opened is None:
            return {}
        fd, index, start, end = opened
        raw: dict[Any, bytes] = {}
        try:
            for key, where in index.items():
                place = _place(where, start, end)
                if place is not None and _valid_key(key):
                    raw[key] = os.pread(fd, place[1], place[0])
        except OSError:
            return {}
        finally:
            os.close(fd)
        return raw

    # ------------------------------------------------------------------ the table

    def _take(self, key: Any) -> Any:
        """The stored item under *key* (``None`` if absent); a single-use entry is read from
        the file, one this process needs again stays in memory."""
        if self._index is None:
            opened = self._open()
            if opened is None:
                self._fd, self._index = None, {}
            else:
                self._fd, self._index, self._start, self._end = opened
                size = self._end
                if size <= READ_WHOLE_BYTES:
                    try:
                        data = os.pread(self._fd, size, 0)
                    except OSError:
                        data = b""
                    self._whole = memoryview(data) if len(data) == size else None
        item = self._repeats.get(key)
        if item is not None:
            self.hits += 1
            return item
        where = self._index.get(key)
        value = self._load(where) if where is not None and self._fd is not None else None
        if value is not None:
            self.hits += 1
            if type(value) is tuple and len(value) == 1:
                self._repeats[key] = value[0]  # an item this process needs again
                return value[0]
            if key in self._used:  # a second use: keep it, and tell the file
                self._repeats[key] = value
                self._new[key] = (value,)
            self._used.add(key)
            return value
        known = self._new.get(key)
        if known is not None:  # made earlier in this process: an item that repeats
            item = known[0] if type(known) is tuple and len(known) == 1 else known
            self._repeats[key] = item
            self._new[key] = (item,)
            return item
        return None

    def _keep(self, key: Any, item: Any) -> None:
        """Remember *item*, compiled here because the file lacked it, for :meth:`save`."""
        self._new[key] = item
        self._compiled += 1

    def compiled(self, source: str, mode: str = "exec", flags: int | None = None) -> Any:
        """The code of *source* as ``compile(source, "<string>", mode, flags,
        dont_inherit=True)`` gives it; *flags* default to the ``__future__`` flags of the
        served :mod:`dataclasses` (which ``exec`` of a string there inherits; none today)."""
        if flags is None:
            flags = self._flags.get("dataclasses", 0)
        key = (flags, mode, source)
        code = self._take(key)
        if code is None:
            code = compile(source, "<string>", mode, flags=flags, dont_inherit=True)
            if _without_columns is not None:
                code = _without_columns(code)
            self._keep(key, code)
        return code

    def exec(self, source: Any, /, *args: Any, **kwargs: Any) -> None:
        """``exec`` with a string compiled from the table; everything else passes through."""
        if type(source) is str:
            source = self.compiled(source)
        return builtins.exec(source, *args, **kwargs)  # noqa: S102 - the caller's own exec

    def eval(self, source: Any, /, *args: Any, **kwargs: Any) -> Any:
        """``eval`` (:func:`collections.namedtuple` builds ``__new__`` with it) with a string
        compiled from the table; everything else passes through."""
        if type(source) is str:
            source = self.compiled(source, "eval", self._flags.get("collections", 0))
        return builtins.eval(source, *args, **kwargs)  # noqa: S307 - the caller's own eval

    def compile(
        self,
        source: Any,
        filename: Any,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,
        optimize: int = -1,
        **kwargs: Any,
    ) -> Any:
        """``compile`` as :mod:`typing` calls it, from the table when the call is the plain
        ``compile(text, "<string>", mode)``; any other call goes to the built-in."""
        if (
            type(source) is str
            and filename == "<string>"
            and mode in ("eval", "exec")
            and not flags
            and optimize == -1
            and not kwargs
        ):
            inherited = 0 if dont_inherit else self._flags.get("typing", 0)
            return self.compiled(source, mode, inherited)
        return builtins.compile(source, filename, mode, flags, dont_inherit, optimize, **kwargs)

    def compile_pattern(self, pattern: Any, flags: int = 0) -> Any:
        """``re._compiler.compile`` from the table: the arguments a miss passed to
        ``_sre.compile`` are stored and passed again, so the parser and code generator
        (Python code, the expensive part) do not run. Patterns the parser may warn about,
        ``re.DEBUG`` and anything but a ``str``/``bytes`` pattern go to the original."""
        original = self._re_original
        if type(pattern) not in (str, bytes) or flags & _RE_DEBUG or _may_warn(pattern):
            return original(pattern, flags)
        key = (flags, "re", pattern)
        args = self._take(key)
        if args is not None and args[0] == pattern:
            from array import array

            code = array("I")
            try:
                code.frombytes(args[2])
                return self._sre.compile(args[0], args[1], code.tolist(), *args[3:])
            except (RuntimeError, TypeError, ValueError, OverflowError):
                pass  # a damaged entry: compile it the usual way below
        recorder = self._recorder
        recorder.last = None
        compiled = original(pattern, flags)
        args = recorder.last
        if args is not None and args[0] == pattern:
            from array import array

            # The opcodes, as 32-bit words (SRE_CODE): compact in the file and in memory.
            code = array("I", [int(c) for c in args[2]]).tobytes()
            self._keep(key, (args[0], int(args[1]), code, *args[3:]))
        return compiled

    @property
    def compiled_here(self) -> int:
        """How many texts this process compiled because the file lacked them."""
        return self._compiled

    # ------------------------------------------------------------------ lifetime

    def install(self) -> GeneratedCodeCache:
        """Serve the calls of :data:`MODULES` from the table (a module that already has its
        own ``exec``/``compile`` is left alone)."""
        for name, builtin in MODULES.items():
            module = sys.modules.get(name) or __import__(name)
            if builtin not in vars(module):
                self._flags[name] = _future_flags(module)
                setattr(module, builtin, getattr(self, builtin))
                self._installed.append((module, builtin))
        self._install_re()
        return self

    def _install_re(self) -> None:
        import re
        from array import array

        compiler = getattr(re, "_compiler", None)
        sre = getattr(compiler, "_sre", None)
        original = getattr(compiler, "compile", None)
        if (
            sre is None
            or original is None
            or isinstance(sre, _SreRecorder)
            or getattr(sre, "CODESIZE", None) != 4
            or array("I").itemsize != 4
        ):
            return  # another layout of the re package, or already served: leave it
        self._sre, self._re_original = sre, original
        self._recorder = _SreRecorder(sre)
        compiler._sre = self._recorder  # type: ignore[union-attr]
        compiler.compile = self.compile_pattern  # type: ignore[union-attr]
        self._re_installed = compiler

    def uninstall(self) -> None:
        for module, builtin in self._installed:
            if vars(module).get(builtin) == getattr(self, builtin):
                delattr(module, builtin)
        self._installed.clear()
        compiler = self._re_installed
        if compiler is not None:
            if compiler.compile == self.compile_pattern:
                compiler.compile = self._re_original
            if compiler._sre is self._recorder:
                compiler._sre = self._sre
            self._re_installed = None
        self._close()

    def save(self) -> bool:
        """Add what this process compiled to the file, if the home exists; never raises.

        The file is read again and merged, so processes that each defined different
        classes (an ask, a doctor run) do not overwrite each other's entries; a table that
        would outgrow :data:`MAX_ENTRIES` starts over with this process's entries.
        """
        if not self._new:
            return False
        from fermix_core.fsutil import atomic_write

        home = self.path.parent.parent
        try:
            if not home.is_dir():
                return False  # nothing else made the home: a cache does not either
            table = self._raw()
            if len(table) + len(self._new) > MAX_ENTRIES:
                table = {}
            table.update((key, marshal.dumps(item)) for key, item in self._new.items())
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            atomic_write(self.path, _pack(table))
        except (OSError, ValueError):
            return False
        self._new.clear()
        return True


_RE_DEBUG = 128  # re.DEBUG, without importing re here
#: Texts the regex parser may warn about (possible nested sets and set operations, named
#: conditions; in bytes patterns also non-ASCII group names): compiled the usual way every
#: time, so the warning is still shown where it was.
_MAY_WARN = ("[[", "--", "&&", "~~", "||", "(?(")


def _may_warn(pattern: str | bytes) -> bool:
    if type(pattern) is bytes:
        return b"(?P" in pattern or any(w.encode() in pattern for w in _MAY_WARN)
    return any(w in pattern for w in _MAY_WARN)


def _where(offset: int, length: int) -> int:
    """An item's place as one int (``offset << 32 | length``; the offset counts from the
    first item, so the index's own size does not move it)."""
    return offset << 32 | length


_LENGTH_MASK = (1 << 32) - 1


def _place(where: Any, start: int, end: int) -> tuple[int, int] | None:
    """The file offset and length *where* stands for, or ``None`` when it is not an int or
    names bytes outside the items (which lie between *start* and *end*)."""
    if type(where) is not int or where < 0:
        return None
    offset, length = start + (where >> 32), where & _LENGTH_MASK
    if length <= 0 or offset + length > end:
        return None
    return offset, length


def _valid_key(key: Any) -> bool:
    """The shape of a key: ``(flags, mode, text)`` — the compile flags, the mode
    (``"exec"``, ``"eval"``, or ``"re"`` for a pattern) and the text (``bytes`` only for a
    bytes pattern)."""
    return (
        type(key) is tuple
        and len(key) == 3
        and type(key[0]) is int
        and type(key[1]) is str
        and type(key[2]) in (str, bytes)
    )


def _pack(items: dict[Any, bytes]) -> bytes:
    """The file: header, the index's size, the index (a marshalled dictionary of each key
    and the :func:`_where` of its item), then the items' marshalled bytes."""
    entries = [(key, data) for key, data in items.items() if _valid_key(key) and data]
    index: dict[Any, int] = {}
    offset = 0
    for key, data in entries:
        index[key] = _where(offset, len(data))
        offset += len(data)
    raw = marshal.dumps(index)
    return b"".join([_header(), len(raw).to_bytes(8, "little"), raw, *(d for _, d in entries)])


def _item(data: bytes | memoryview, length: int) -> Any:
    """The item in *data* (an entry's *length* stored bytes), or ``None`` when they are
    short or not a valid item: a code object or ``_sre.compile``'s arguments, or a 1-tuple
    of one (an item that repeats)."""
    try:
        value = marshal.loads(data) if len(data) == length else None  # noqa: S302
    except (EOFError, ValueError, TypeError):
        return None
    item = value[0] if type(value) is tuple and len(value) == 1 else value
    if type(item) is not _CODE_TYPE and not _is_sre_arguments(item):
        return None
    return value


def _is_sre_arguments(item: Any) -> bool:
    """The shape of ``_sre.compile``'s arguments (its own validation checks the code)."""
    return (
        type(item) is tuple
        and len(item) == 6
        and type(item[0]) in (str, bytes)
        and type(item[1]) is int
        and type(item[2]) is bytes
        and type(item[3]) is int
        and type(item[4]) is dict
        and type(item[5]) is tuple
    )


class _SreRecorder:
    """Stands in for ``_sre`` inside ``re._compiler`` and remembers the last arguments
    its ``compile`` was called with (per thread); everything else is the real module."""

    def __init__(self, sre: Any) -> None:
        import threading

        self._sre = sre
        self._local = threading.local()

    @property
    def last(self) -> Any:
        return getattr(self._local, "args", None)

    @last.setter
    def last(self, value: Any) -> None:
        self._local.args = value

    def compile(self, *args: Any) -> Any:
        self._local.args = args
        return self._sre.compile(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sre, name)


def _future_flags(module: Any) -> int:
    """The ``__future__`` compiler flags *module* was compiled with, read off one of its
    functions (``exec`` of a string inside the module inherits exactly these)."""
    import __future__

    mask = 0
    for feature in __future__.all_feature_names:
        mask |= getattr(__future__, feature).compiler_flag
    for value in vars(module).values():
        code = getattr(value, "__code__", None)
        if code is not None and getattr(value, "__module__", None) == module.__name__:
            return int(code.co_flags & mask)
    return 0


def for_home(environ: Any = None) -> GeneratedCodeCache:
    """The cache of the home ``FERMIX_HOME`` names (resolved as :class:`FermixHome` does)."""
    from fermix_core.homedir import home_path

    return GeneratedCodeCache(home_path(environ) / "cache" / FILE_NAME)

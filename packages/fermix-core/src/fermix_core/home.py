"""Where Fermix keeps its state: the ``FERMIX_HOME`` directory and its fixed layout.

Every module that touches a file under the home asks :class:`FermixHome` for the path
instead of joining strings itself, so the layout lives in one place and tests can point a
whole runtime at a temporary directory with one ``FERMIX_HOME``.

Resolving or reading never creates anything: ``fermix --help`` or ``fermix config get`` on
a fresh machine must not litter ``~/.fermix``. Directories appear only when a writer asks
for them through :meth:`FermixHome.ensure` / :meth:`FermixHome.ensure_dir`, and they are
created private (0700) because the home holds credentials, memory and chat history.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fermix_core.homedir import home_path

#: Subdirectories the layout names; :meth:`FermixHome.ensure_dir` accepts these and below.
LAYOUT_DIRS: tuple[str, ...] = (
    "workspace",
    "bootstrap",
    "memory",
    "skills",
    "plugins",
    "browser",
    "journals",
    "realtime",
    "traces",
    "logs",
    "grants",
    "cache",
    "media",
)

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


class PermissionProblem(str):
    """One way the home is exposed to other users, with the command that fixes it.

    It *is* its readable sentence (a ``str``), so callers can print or join problems
    directly, and it keeps the parts (``path``, ``problem``, ``fix``) for callers that
    want to offer the fix on its own.
    """

    path: Path
    problem: str
    fix: str

    def __new__(cls, path: Path, problem: str, fix: str) -> PermissionProblem:
        self = super().__new__(cls, f"{path}: {problem}; fix with `{fix}`")
        self.path, self.problem, self.fix = path, problem, fix
        return self


@dataclass(frozen=True)
class FermixHome:
    """The resolved home directory; a value object, cheap to build and compare."""

    path: Path

    # ------------------------------------------------------------------ resolving

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None) -> FermixHome:
        """``$FERMIX_HOME`` (``~`` expanded) or ``~/.fermix``.

        An empty ``FERMIX_HOME`` counts as unset, the way shells treat ``VAR=``. A relative
        value is anchored at the current directory now, so a daemon that later changes its
        working directory still points at the same place.
        """
        return cls(home_path(environ))

    # ------------------------------------------------------------------ files

    @property
    def config_file(self) -> Path:
        return self.path / "config.toml"

    @property
    def auth_file(self) -> Path:
        return self.path / "auth.json"

    @property
    def memory_db(self) -> Path:
        return self.path / "memory.db"

    @property
    def daemon_sock(self) -> Path:
        return self.path / "daemon.sock"

    @property
    def realtime_sock(self) -> Path:
        return self.path / "realtime.sock"

    @property
    def acp_sock(self) -> Path:
        return self.path / "acp.sock"

    @property
    def pid_file(self) -> Path:
        return self.path / "daemon.pid"

    # ------------------------------------------------------------------ directories

    @property
    def workspace(self) -> Path:
        return self.path / "workspace"

    @property
    def bootstrap(self) -> Path:
        return self.path / "bootstrap"

    @property
    def memory_dir(self) -> Path:
        return self.path / "memory"

    @property
    def skills(self) -> Path:
        return self.path / "skills"

    @property
    def plugins(self) -> Path:
        return self.path / "plugins"

    @property
    def browser(self) -> Path:
        return self.path / "browser"

    @property
    def journals(self) -> Path:
        return self.path / "journals"

    @property
    def realtime(self) -> Path:
        return self.path / "realtime"

    @property
    def traces(self) -> Path:
        return self.path / "traces"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def grants(self) -> Path:
        return self.path / "grants"

    @property
    def cache(self) -> Path:
        """Derived data a process may rebuild at any time (tool definitions)."""
        return self.path / "cache"

    @property
    def media(self) -> Path:
        """Inbound media kept for history (``media/images/<sha256>.<ext>``)."""
        return self.path / "media"

    # ------------------------------------------------------------------ creating

    def ensure(self) -> Path:
        """Create the home (0700) if it is missing; an existing home keeps its mode.

        An existing directory is not chmod-ed behind the operator's back: a too-open home
        is reported by :meth:`permission_problems` (and ``fermix doctor``) instead.
        """
        _make_private_dirs(self.path)
        return self.path

    def ensure_dir(self, name: str) -> Path:
        """Create one subdirectory of the home (and the home itself) on demand.

        *name* is a layout directory (``"traces"``) or a relative path below one
        (``"bootstrap/main"``). Anything that would escape the home is refused, because
        callers sometimes build the name from data (an agent id, a date).
        """
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or any(p in ("..", ".") for p in parts):
            raise ValueError(f"{name!r} is not a relative directory inside FERMIX_HOME")
        if parts[0] not in LAYOUT_DIRS:
            allowed = ", ".join(LAYOUT_DIRS)
            raise ValueError(f"{parts[0]!r} is not a FERMIX_HOME directory; use one of: {allowed}")
        self.ensure()
        return _make_private_dirs(self.path.joinpath(*parts))

    # ------------------------------------------------------------------ checking

    def permission_problems(self) -> list[PermissionProblem]:
        """Ways other local users could read or change what the home holds.

        Checks the home directory and the two files that hold credentials
        (``config.toml`` may carry plaintext keys, ``auth.json`` OAuth tokens). Missing
        paths are not problems: a fresh install simply has nothing to expose yet.
        """
        if os.name != "posix":
            return []
        problems: list[PermissionProblem] = []
        uid = os.getuid()
        for path, wanted, kind in (
            (self.path, PRIVATE_DIR_MODE, "directory"),
            (self.config_file, PRIVATE_FILE_MODE, "file"),
            (self.auth_file, PRIVATE_FILE_MODE, "file"),
        ):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems.append(
                    PermissionProblem(
                        path, f"cannot be inspected ({exc.strerror})", f"ls -ld {path}"
                    )
                )
                continue
            if st.st_uid != uid:
                problems.append(
                    PermissionProblem(
                        path,
                        f"is owned by uid {st.st_uid}, not by you (uid {uid})",
                        f"chown {uid} {path}",
                    )
                )
            exposed = stat.S_IMODE(st.st_mode) & 0o077
            if exposed:
                who = _who(exposed)
                problems.append(
                    PermissionProblem(
                        path,
                        f"{kind} is accessible by {who} (mode {stat.S_IMODE(st.st_mode):04o})",
                        f"chmod {wanted:o} {path}",
                    )
                )
        return problems


def _who(bits: int) -> str:
    parts = []
    if bits & 0o070:
        parts.append("group")
    if bits & 0o007:
        parts.append("other users")
    return " and ".join(parts)


def _make_private_dirs(path: Path) -> Path:
    """``mkdir -p`` where every directory this call creates ends up 0700 regardless of umask."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, PRIVATE_DIR_MODE)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} exists but is not a directory; move it aside")
    return path

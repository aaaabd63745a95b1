"""The sandbox policy: which paths a tool may touch, which commands it may run, with what env.

One :class:`SandboxPolicy` is built per runtime from ``[sandbox]`` and handed to tools as
``ctx.service("sandbox")``. It is immutable: a grant produces a new policy
(:meth:`SandboxPolicy.evolve`) that the runtime swaps in, so a decision in flight is never
made against half-applied settings.

Every decision follows the same order: canonicalise first (see :mod:`.paths`), then
*protected* (denied in every mode, even inside a granted root), then *roots*. Each allow or
deny is traced as a ``sandbox_event`` when a tracer is attached, best-effort.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fermix_core.sandbox.commands import CommandChecker, CommandRefused
from fermix_core.sandbox.confine import (
    HOST_SOCKETS,
    Launch,
    Plan,
    existing,
    probe,
    probed,
    wrap,
)
from fermix_core.sandbox.exec import CommandResult, run_command
from fermix_core.sandbox.paths import (
    FERMIX_INTERNALS,
    HOME_PROTECTED,
    HOME_WRITE_PROTECTED,
    HOME_WRITE_PROTECTED_NAMES,
    OS_ROOTS,
    PathProblem,
    Protected,
    canonical,
    case_insensitive_fs,
    is_within,
    path_key,
    system_temp_dirs,
    unique,
)
from fermix_core.sandbox.profiles import PROFILES, program_allowed
from fermix_core.tool import ToolContext, ToolError, Trust

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.config.loader import LoadedConfig

__all__ = [
    "BASE_ENV",
    "DEFAULT_PATH",
    "Mode",
    "SandboxDenied",
    "SandboxPolicy",
]

log = logging.getLogger("fermix.sandbox")

Mode = Literal["strict", "standard", "open"]

#: What every child process starts from; nothing else of the daemon's environment leaks.
BASE_ENV: tuple[str, ...] = ("PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Variables a glob in ``[sandbox.env] allow`` never matches: they need their exact name.
_CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|CREDS|AUTH|COOKIE|SESSION|PRIVATE|SIGNING"
    r"|DSN|WEBHOOK|BEARER|JWT|SALT|_PWD$|_PW$|_PIN$"
    r"|(?:DATABASE|DB|REDIS|MONGO(?:DB)?|AMQP|RABBITMQ|POSTGRES(?:QL)?|MYSQL|BROKER)_?UR[LI]",
    re.IGNORECASE,
)
#: Values that carry a credential whatever the variable is called: a URL with a password
#: (``postgres://app:hunter2@db/app``), a webhook URL, or a token shape the log redactor
#: knows (``sk-…``, ``ghp_…``, ``xoxb-…``, JWTs, AWS key ids, …).
_CREDENTIAL_VALUE = re.compile(
    r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:[^/?#@\s]+@"
    r"|^https://hooks\.slack\.com/|^https://discord(?:app)?\.com/api/webhooks/"
    r"|^https://[^/]*\.(?:webhook\.office|logic\.azure)\.com/"
    r"|^https://[0-9a-f]{16,}@[^/]*sentry\.io/",
    re.IGNORECASE,
)


class SandboxDenied(ToolError):
    """A path the sandbox will not let a tool touch; the message says what to do instead.

    ``reason`` is ``"protected"``, ``"outside_roots"``, ``"invalid_path"`` or
    ``"symlink_loop"``; ``path`` is the canonical path when there is one.
    """

    def __init__(self, reason: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path


@dataclass(frozen=True, eq=False)
class SandboxPolicy:
    """The ``[sandbox]`` settings, canonicalised, plus the protected list derived from them.

    Build it with :meth:`from_config`; tests and embedding apps may construct it directly.
    Paths given here are canonicalised on construction. ``environ`` is the host
    environment child processes may draw from (``None``: this process's).
    """

    mode: Mode
    os_home: Path
    fermix_home: Path
    workspace: Path
    allowed_roots: tuple[Path, ...] = ()
    command_profile: str = "assistant"
    env_allow: tuple[str, ...] = ()
    env_deny: tuple[str, ...] = ()
    env_set: Mapping[str, Any] = field(default_factory=dict)
    tracer: Any = None
    environ: Mapping[str, str] | None = None
    #: A :class:`~fermix_core.secrets.SecretResolver` for ``env_set`` secrets (``"@keyring"``
    #: and ``{ source = ... }`` forms); one is made from ``environ`` when needed.
    resolver: Any = None
    #: ``None`` probes the file system holding the OS home.
    case_insensitive: bool | None = None
    #: ``"auto"`` confines children when a backend works, ``"required"`` refuses to start
    #: them otherwise, ``"off"`` only screens (see :mod:`.confine`).
    confinement: str = "auto"
    #: Network inside confined children; ``None``: only the ``extended`` profile has it.
    network: bool | None = None
    #: Granted roots that were dropped because no grant may name them, with the reason.
    ignored_roots: tuple[tuple[Path, str], ...] = field(init=False, default=())
    protected: tuple[Protected, ...] = field(init=False, default=())
    write_protected: tuple[Protected, ...] = field(init=False, default=())
    _state: dict[str, Any] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in ("strict", "standard", "open"):
            raise ValueError(f"sandbox mode must be strict, standard or open (got {self.mode!r})")
        if self.command_profile not in PROFILES:
            names = ", ".join(PROFILES)
            raise ValueError(
                f"command profile must be one of {names} (got {self.command_profile!r})"
            )
        if self.confinement not in ("auto", "required", "off"):
            raise ValueError(
                f"confinement must be auto, required or off (got {self.confinement!r})"
            )
        setattr_ = object.__setattr__
        root = Path("/")
        os_home = canonical(str(self.os_home), root, root)
        setattr_(self, "os_home", os_home)
        setattr_(self, "fermix_home", canonical(str(self.fermix_home), root, os_home))
        setattr_(self, "workspace", canonical(str(self.workspace), root, os_home))
        if self.case_insensitive is None:
            setattr_(self, "case_insensitive", case_insensitive_fs(str(os_home)))
        setattr_(self, "env_allow", tuple(self.env_allow))
        setattr_(self, "env_deny", tuple(self.env_deny))
        setattr_(self, "env_set", dict(self.env_set))
        self._state["temp_dirs"] = system_temp_dirs()
        protected, write_protected = self._protected_lists()
        setattr_(self, "protected", protected)
        setattr_(self, "write_protected", write_protected)
        kept: list[Path] = []
        ignored: list[tuple[Path, str]] = []
        for raw in self.allowed_roots:
            try:
                path = canonical(str(raw), root, os_home)
            except PathProblem as exc:
                ignored.append((Path(str(raw)), str(exc)))
                continue
            refusal = self.grant_refusal(path)
            if refusal is not None:
                ignored.append((path, refusal))
                log.warning("sandbox: ignoring allowed root %s: %s", path, refusal)
            elif path not in kept:
                kept.append(path)
        setattr_(self, "allowed_roots", tuple(kept))
        setattr_(self, "ignored_roots", tuple(ignored))

    # ------------------------------------------------------------------ building

    @classmethod
    def from_config(
        cls,
        config: LoadedConfig,
        fermix_home: Path,
        *,
        os_home: Path | None = None,
        environ: Mapping[str, str] | None = None,
        tracer: Any = None,
        resolver: Any = None,
        section: Any = None,
    ) -> SandboxPolicy:
        """The policy ``[sandbox]`` of *config* describes (or *section*, a
        ``SandboxConfig`` to use instead: the approved one while a change is pending).

        *os_home* defaults to ``$HOME`` of *environ* (then of this process): protected paths
        key off the OS home, never off ``FERMIX_HOME``.
        """
        section = config.core.sandbox if section is None else section
        env = os.environ if environ is None else environ
        if os_home is None:
            os_home = Path(env.get("HOME") or Path.home())
        workspace = section.workspace_root or Path(fermix_home) / "workspace"
        return cls(
            mode=section.mode,
            os_home=Path(os_home),
            fermix_home=Path(fermix_home),
            workspace=Path(workspace),
            allowed_roots=tuple(section.allowed_roots),
            command_profile=section.command_profile,
            env_allow=tuple(section.env.allow),
            env_deny=tuple(section.env.deny),
            env_set=dict(section.env.set),
            confinement=section.confinement,
            network=section.network,
            tracer=tracer,
            environ=environ,
            resolver=resolver,
        )

    def evolve(self, **changes: Any) -> SandboxPolicy:
        """A copy with *changes* applied (``allowed_roots=...``, ``command_profile=...``)."""
        return dataclasses.replace(self, **changes)

    def ensure_workspace(self) -> Path:
        """Create the workspace (0700) if missing; tools write there by default."""
        self.workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.workspace

    # ------------------------------------------------------------------ keys

    def _key(self, path: Path | str) -> str:
        return path_key(path, fold=bool(self.case_insensitive))

    def _within(self, child: Path | str, parent: Path | str) -> bool:
        return is_within(self._key(child), self._key(parent))

    @property
    def home_usable(self) -> bool:
        """Whether ``$HOME`` may be a root and is carved out of the OS trees.

        Not when it is ``/`` or an OS tree itself (``HOME=/usr``); yes for ``/root`` and for
        a service account's home inside an OS tree such as ``/var/lib/fermix``.
        """
        key = self._key(self.os_home)
        if key == "/":
            return False
        return key == self._key("/root") or key not in {self._key(r) for r in OS_ROOTS}

    # ------------------------------------------------------------------ protected

    def _protected_lists(self) -> tuple[tuple[Protected, ...], tuple[Protected, ...]]:
        home, fermix = self.os_home, self.fermix_home
        protected: list[Protected] = [Protected(Path("/"), "the root of the file system", "exact")]
        for name, reason, kind in FERMIX_INTERNALS:
            protected.append(Protected(fermix / name, reason, kind))
        protected.append(Protected(fermix, "Fermix's own state (FERMIX_HOME)", "tree"))
        for rel, reason in HOME_PROTECTED:
            protected.append(Protected(home / rel, reason, "tree"))
        for root in OS_ROOTS:
            if Path(root) == home:
                continue
            protected.append(Protected(Path(root), f"an operating-system directory ({root})"))
        write_protected = tuple(
            Protected(home / rel, reason) for rel, reason in HOME_WRITE_PROTECTED
        )
        return tuple(protected), write_protected

    def protected_reason(self, path: Path | str, *, write: bool = False) -> str | None:
        """Why *path* (canonical) is protected, or ``None``.

        Order matters only for the message: the most specific reason is named. Fermix's
        own state is everything under ``FERMIX_HOME`` except the workspace; OS trees do not
        cover the OS home or the system temp directories when those live inside one.
        """
        key = self._key(path)
        workspace = self._key(self.workspace)
        fermix = self._key(self.fermix_home)
        home = self._key(self.os_home)
        os_roots = self._os_root_keys()
        if key == "/":
            return "the root of the file system"
        in_workspace = is_within(key, workspace)
        for entry_key, entry in self._protected_keys():
            if entry_key == "/":
                continue
            hit = key == entry_key if entry.kind == "exact" else is_within(key, entry_key)
            if not hit:
                continue
            if entry_key == fermix and in_workspace:
                continue
            if entry_key in os_roots and self._outside_os_trees(key, home, workspace):
                continue
            return entry.reason
        if write:
            for entry in self.write_protected:
                if is_within(key, self._key(entry.path)):
                    return f"{entry.reason}; it may be read but never written"
            if is_within(key, home):
                name = key.rsplit("/", 1)[-1]
                for pattern, reason in HOME_WRITE_PROTECTED_NAMES:
                    if fnmatch.fnmatchcase(name, pattern):
                        return f"{reason}; it may be read but never written"
        return None

    def _protected_keys(self) -> list[tuple[str, Protected]]:
        cached = self._state.get("protected_keys")
        if cached is None:
            cached = [(self._key(entry.path), entry) for entry in self.protected]
            self._state["protected_keys"] = cached
        return cached

    def _os_root_keys(self) -> frozenset[str]:
        cached = self._state.get("os_root_keys")
        if cached is None:
            cached = frozenset(self._key(root) for root in OS_ROOTS)
            self._state["os_root_keys"] = cached
        return cached

    def _outside_os_trees(self, key: str, home: str, workspace: str) -> bool:
        """Carve-outs from OS trees: the OS home, the workspace under it or FERMIX_HOME,
        and the system temp directories (macOS keeps them under /private/var)."""
        if self.home_usable and is_within(key, home):
            return True
        if is_within(key, workspace) and (
            is_within(workspace, home) or is_within(workspace, self._key(self.fermix_home))
        ):
            return True
        return any(is_within(key, self._key(t)) for t in self._state["temp_dirs"])

    def grant_refusal(self, path: Path | str) -> str | None:
        """Why no grant (config, CLI, chat or the approval loop) may name *path* (canonical)."""
        key = self._key(path)
        home = self._key(self.os_home)
        fermix = self._key(self.fermix_home)
        if key == "/":
            return "that is the whole file system"
        if key == home:
            return "that is your whole home directory; grant a project folder inside it instead"
        if is_within(home, key):
            return "that folder contains your whole home directory"
        if is_within(key, fermix):
            return "that is Fermix's own state (FERMIX_HOME); it is never granted"
        if is_within(fermix, key):
            return "that folder contains Fermix's own state (FERMIX_HOME)"
        reason = self.protected_reason(path)
        if reason is not None:
            return f"it is protected ({reason})"
        return None

    # ------------------------------------------------------------------ roots

    def roots(self, ctx: ToolContext | None = None) -> list[Path]:
        """The directories this run may touch, most specific first: the request directory
        (standard mode, local operator), the workspace, the grants, then ``$HOME`` (open)."""
        found: list[Path] = []
        cwd = self._admitted_cwd(ctx)
        if cwd is not None:
            found.append(cwd)
        found.append(self.workspace)
        found.extend(self.allowed_roots)
        if self.mode == "open" and self.home_usable:
            found.append(self.os_home)
        return unique(found)

    def _admitted_cwd(self, ctx: ToolContext | None) -> Path | None:
        if self.mode != "standard" or ctx is None:
            return None
        if ctx.trust is not Trust.OPERATOR or not ctx.local or not self.home_usable:
            return None
        try:
            cwd = canonical(str(ctx.cwd), self.workspace, self.os_home)
        except PathProblem:
            return None
        key, home = self._key(cwd), self._key(self.os_home)
        if key == home or not is_within(key, home):
            return None
        if self.protected_reason(cwd) is not None:
            return None
        return cwd

    def contains(self, path: Path, ctx: ToolContext | None = None) -> bool:
        """Whether canonical *path* lies inside one of this run's roots."""
        return any(self._within(path, root) for root in self.roots(ctx))

    # ------------------------------------------------------------------ paths

    def resolve(self, path: str | Path, ctx: ToolContext, *, write: bool = False) -> Path:
        """The canonical path a tool may use, or :class:`SandboxDenied`.

        Relative paths are taken from the request directory when it is a root of this run,
        else from the workspace. Call this before any I/O, and then use the returned path
        (not the input) for the I/O itself.
        """
        base = self._admitted_cwd(ctx) or self.workspace
        shown = os.fspath(path) if isinstance(path, str | os.PathLike) else repr(path)
        try:
            target = canonical(path, base, self.os_home)
        except PathProblem as exc:
            self._trace("deny", ctx, path=shown[:256], reason=exc.reason, write=write)
            raise SandboxDenied(exc.reason, str(exc)) from None
        except TypeError:
            self._trace("deny", ctx, path=shown[:256], reason="invalid_path", write=write)
            raise SandboxDenied("invalid_path", "the path must be text") from None
        reason = self.protected_reason(target, write=write)
        if reason is not None:
            self._trace("deny", ctx, path=str(target), reason="protected", write=write)
            raise SandboxDenied(
                "protected",
                f"{target} is protected ({reason}). The agent may never "
                f"{'write' if write else 'read or write'} it, in any sandbox mode and even "
                "inside a granted folder; do the task without it or ask the owner to do this "
                "step themselves.",
                str(target),
            )
        if not self.contains(target, ctx):
            self._trace("deny", ctx, path=str(target), reason="outside_roots", write=write)
            raise SandboxDenied("outside_roots", self._outside_message(target, ctx), str(target))
        self._trace("allow", ctx, path=str(target), write=write)
        return target

    def _outside_message(self, target: Path, ctx: ToolContext | None) -> str:
        roots = ", ".join(str(r) for r in self.roots(ctx))
        text = (
            f"{target} is outside the sandbox ({self.mode} mode; this run may use: {roots}). "
            f"If the task really needs it, the owner can grant the folder with "
            f"`/sandbox grant PATH` in chat or `fermix grant path PATH` in a terminal"
        )
        if (
            ctx is not None
            and ctx.attended
            and ctx.trust is Trust.OPERATOR
            and ctx.origin == "main"
            and "request_directory_access" in ctx.capabilities
        ):
            text += "; or call request_directory_access with the folder and the reason"
        return text + "."

    # ------------------------------------------------------------------ commands

    def check_command(self, command: str | Sequence[str], *, cwd: Path | None = None) -> None:
        """Refuse catastrophic commands (every mode and profile) and programs outside the
        command profile. *command* is a shell string or an argv list; *cwd* (the directory it
        will run in) lets ``rm -rf *`` be judged."""
        checker = CommandChecker(
            home=self.os_home,
            fermix_home=self.fermix_home,
            workspace=self.workspace,
            profile=self.command_profile,
            cwd=cwd,
            temp_dirs=self._state["temp_dirs"],
            key=self._key,
        )
        programs: list[str] = []
        try:
            checker.check(command)
        except CommandRefused as exc:
            programs = sorted(set(checker.programs))
            self._trace_command("refuse", programs, reason=exc.reason, program=exc.program)
            raise
        programs = sorted(set(checker.programs))
        self._trace_command("allow", programs)

    def command_allowed(self, argv0: str) -> bool:
        """Whether the command profile lets the agent start *argv0*."""
        return program_allowed(self.command_profile, argv0)

    # ------------------------------------------------------------------ confinement

    @property
    def network_allowed(self) -> bool:
        """Whether confined children get the network (``[sandbox] network``, else only the
        ``extended`` profile)."""
        if self.network is not None:
            return bool(self.network)
        return self.command_profile == "extended"

    def confinement_plan(
        self, cwd: Path, ctx: ToolContext | None = None, *, write: bool = True
    ) -> Plan:
        """What a child started from *cwd* in this run may see and write."""
        roots = existing(self.roots(ctx))
        home = self.os_home
        masked = existing(
            [home / rel for rel, _reason in HOME_PROTECTED]
            + [self.fermix_home]
            + [Path(p) for p in HOST_SOCKETS]
        )
        rebind = [
            root
            for root in roots
            if any(root != m and is_within(str(root), str(m)) for m in masked)
        ]
        masked = [m for m in masked if m not in roots]
        read_only = [
            path
            for path in existing(self.write_protected_paths())
            if write and any(is_within(str(path), str(root)) for root in roots)
        ]
        return Plan(
            cwd=Path(cwd),
            roots=tuple(roots),
            write=write,
            masked=tuple(masked),
            rebind=tuple(rebind),
            read_only=tuple(read_only),
            network=self.network_allowed,
        )

    def write_protected_paths(self) -> list[Path]:
        """The existing write-protected files and folders (globs such as ``.local/bin/*``
        expanded)."""
        return [entry.path for entry in self.write_protected]

    def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        ctx: ToolContext | None = None,
        write: bool = True,
    ) -> Launch:
        """The argv and env that start *argv* confined (or screened only, when confinement
        is off or unavailable in ``auto``). The one entry point for every child the agent
        starts — tools through :meth:`run`, long-lived servers (MCP stdio) directly.
        ``write=False`` binds every root read-only. Raises ``ConfinementUnavailable`` when
        ``confinement = "required"`` and no backend works."""
        plan = self.confinement_plan(cwd, ctx, write=write)
        return wrap(argv, env, plan, setting=self.confinement)  # type: ignore[arg-type]

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        ctx: ToolContext | None = None,
        write: bool = True,
        **options: Any,
    ) -> CommandResult:
        """:func:`run_command` of *argv* under :meth:`launch` (options pass through)."""
        import anyio

        if self.confinement != "off" and not probed():
            await anyio.to_thread.run_sync(probe)  # a few ms, once per process
        started = self.launch(argv, cwd=cwd, env=env, ctx=ctx, write=write)
        return await run_command(started.argv, cwd=cwd, env=started.env, **options)

    def confinement_status(self) -> dict[str, Any]:
        """For ``fermix sandbox show``, ``fermix doctor`` and the boot log."""
        if self.confinement == "off":
            return {
                "setting": "off",
                "active": False,
                "backend": None,
                "detail": 'confinement = "off": commands are screened only, not confined',
                "fix": 'set [sandbox] confinement = "auto"',
                "network": self.network_allowed,
            }
        found = probe()
        if found.available:
            detail = f"every command runs inside {found.detail}"
        elif self.confinement == "required":
            detail = f"{found.detail}; confinement is required, so no command will run"
        else:
            detail = f"{found.detail}; commands are screened only, NOT confined"
        return {
            "setting": self.confinement,
            "active": found.available,
            "backend": found.backend,
            "detail": detail,
            "fix": None if found.available else found.fix,
            "network": self.network_allowed,
        }

    # ------------------------------------------------------------------ environment

    def child_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a child process: a minimal base, then ``[sandbox.env]``.

        Order: :data:`BASE_ENV` from the host (``HOME`` is always the OS home), then host
        variables ``allow`` names (a glob never matches a credential-like name — those need
        their exact name), minus ``deny`` (which cannot remove ``PATH`` or ``HOME``), then
        ``set`` values (``"@keyring"`` and ``{ source = ... }`` resolved), then *extra*.
        The first call may block on a keyring or password helper; call it from a worker
        thread in async code.
        """
        host = os.environ if self.environ is None else self.environ
        env: dict[str, str] = {name: host[name] for name in BASE_ENV if host.get(name)}
        env["HOME"] = str(self.os_home)
        env.setdefault("PATH", DEFAULT_PATH)
        env.setdefault("LANG", "C.UTF-8")
        for name, value in host.items():
            if self._env_allowed(name, value):
                env[name] = value
        for name in list(env):
            if name not in ("PATH", "HOME") and self._env_denied(name):
                del env[name]
        env.update(self._set_values())
        if extra:
            env.update({str(k): str(v) for k, v in extra.items()})
        return env

    def _env_allowed(self, name: str, value: str = "") -> bool:
        for pattern in self.env_allow:
            if pattern == name:
                return True
            globbed = any(ch in pattern for ch in "*?[")
            if globbed and fnmatch.fnmatchcase(name, pattern) and not credential_like(name, value):
                return True
        return False

    def _env_denied(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.env_deny)

    def _set_values(self) -> dict[str, str]:
        cached = self._state.get("set_values")
        if cached is not None:
            return cached
        values: dict[str, str] = {}
        for name, value in self.env_set.items():
            resolved = self._resolve_set(name, value)
            if resolved is not None:
                values[name] = resolved
        self._state["set_values"] = values
        return values

    def _resolve_set(self, name: str, value: Any) -> str | None:
        from fermix_core.config.secret import KEYRING, SecretField

        if isinstance(value, str) and value != KEYRING:
            return value
        resolver = self.resolver
        if resolver is None:
            from fermix_core.secrets import SecretResolver

            resolver = SecretResolver(environ=os.environ if self.environ is None else self.environ)
            object.__setattr__(self, "resolver", resolver)
        slot = SecretField(("sandbox", "env", "set", name), name, value, overridable=False)
        try:
            result = resolver.resolve(slot)
        except Exception as exc:  # a resolver must not take a command down
            log.warning("sandbox.env.set.%s could not be resolved (%s)", name, type(exc).__name__)
            return None
        if result.value is None:
            log.warning(
                "sandbox.env.set.%s is not passed to commands: %s",
                name,
                result.problem or "no value",
            )
        return result.value

    # ------------------------------------------------------------------ reporting

    def describe(self) -> dict[str, Any]:
        """Plain data for ``fermix sandbox show`` and ``/sandbox show`` (no secret values)."""
        programs = PROFILES.get(self.command_profile)
        return {
            "mode": self.mode,
            "os_home": str(self.os_home),
            "fermix_home": str(self.fermix_home),
            "workspace": str(self.workspace),
            "allowed_roots": [str(p) for p in self.allowed_roots],
            "ignored_roots": [{"path": str(p), "reason": r} for p, r in self.ignored_roots],
            "request_directory": (
                "admitted for local operator turns when under $HOME"
                if self.mode == "standard"
                else "not admitted"
            ),
            "protected": [
                {"path": str(p.path), "reason": p.reason, "kind": p.kind} for p in self.protected
            ],
            "write_protected": [
                {"path": str(p.path), "reason": p.reason} for p in self.write_protected
            ]
            + [
                {"path": f"{self.os_home}/**/{pattern}", "reason": reason}
                for pattern, reason in HOME_WRITE_PROTECTED_NAMES
            ],
            "command_profile": self.command_profile,
            "profile_programs": "any program" if programs is None else sorted(programs),
            "env": {
                "base": list(BASE_ENV),
                "allow": list(self.env_allow),
                "deny": list(self.env_deny),
                "set": {name: _masked(name, value) for name, value in self.env_set.items()},
            },
            "case_insensitive": bool(self.case_insensitive),
            "confinement": self.confinement_status(),
        }

    # ------------------------------------------------------------------ traces

    def _trace(self, decision: str, ctx: ToolContext | None, **fields: Any) -> None:
        tracer = self.tracer
        if tracer is None and ctx is not None:
            tracer = ctx.services.get("tracer") if isinstance(ctx.services, Mapping) else None
        if tracer is None:
            return
        try:
            tracer.record(
                "sandbox_event",
                session_id=(ctx.session_id or None) if ctx is not None else None,
                kind="path",
                decision=decision,
                mode=self.mode,
                **fields,
            )
        except Exception:  # traces are best-effort by contract
            log.debug("sandbox trace failed", exc_info=True)

    def _trace_command(self, decision: str, programs: list[str], **fields: Any) -> None:
        if self.tracer is None:
            return
        try:
            self.tracer.record(
                "sandbox_event",
                kind="command",
                decision=decision,
                profile=self.command_profile,
                programs=programs,
                **fields,
            )
        except Exception:
            log.debug("sandbox trace failed", exc_info=True)


def credential_like(name: str, value: str = "") -> bool:
    """Whether a variable looks like it holds a credential, by its name or its value; a
    glob in ``[sandbox.env] allow`` never passes one (only its exact name does)."""
    if _CREDENTIAL_NAME.search(name):
        return True
    if not value:
        return False
    if _CREDENTIAL_VALUE.search(value.strip()):
        return True
    from fermix_core.logs import redact

    return redact(value) != value


def log_confinement(policy: SandboxPolicy) -> dict[str, Any]:
    """Say at boot how commands will run: confined (info), screened only (a loud warning),
    or not at all (``required`` without a backend: an error)."""
    status = policy.confinement_status()
    if status["active"]:
        log.info("sandbox: %s", status["detail"])
    elif status["setting"] == "required":
        log.error("sandbox: %s. To fix: %s", status["detail"], status["fix"])
    else:
        log.warning(
            "sandbox: %s; a command the screen lets through can read and write whatever "
            "you can. To fix: %s",
            status["detail"],
            status["fix"],
        )
    return status


def _masked(name: str, value: Any) -> Any:
    if isinstance(value, str):
        if value == "@keyring" or not _CREDENTIAL_NAME.search(name):
            return value
        return "********"
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value

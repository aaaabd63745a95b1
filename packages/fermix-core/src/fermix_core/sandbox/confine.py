"""Confinement: every program the agent starts runs inside an OS sandbox.

Screening (:mod:`.commands`) refuses the obviously catastrophic with a good message; this
module is the boundary. On Linux each child runs under **bubblewrap** with new PID, IPC
and UTS namespaces, a fresh ``/proc`` and a minimal ``/dev``, the root file system bound
read-only, read-write binds only for the roots this run may write, every protected path
masked, ``FERMIX_HOME`` masked except the workspace, no network unless allowed, all
capabilities dropped and ``--die-with-parent``. On macOS the same rules become a
``sandbox-exec`` profile (untested here; see ``docs/sandbox.md``).

:func:`wrap` is the one entry point: it takes an argv and an environment and returns the
argv and environment to start instead (a :class:`Launch`). Tools reach it through
:meth:`SandboxPolicy.launch` / :meth:`SandboxPolicy.run`; anything else that starts a
long-lived child (an MCP stdio server) calls :meth:`SandboxPolicy.launch` the same way.

Where no backend works, ``confinement = "auto"`` falls back to screening only and says so
(boot log, ``fermix doctor``, ``fermix sandbox show``); ``"required"`` refuses to start
children; ``"off"`` never confines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fermix_core.tool import ToolError

__all__ = [
    "INSTALL_HINT",
    "Confinement",
    "ConfinementUnavailable",
    "Launch",
    "Plan",
    "Probe",
    "probe",
    "wrap",
]

Confinement = Literal["auto", "required", "off"]

#: Unix sockets outside FERMIX_HOME that hand out more than the owner's file access
#: (container engines, the session bus, agent sockets under /run/user). Masked when present.
HOST_SOCKETS: tuple[str, ...] = (
    "/run/user",
    "/run/dbus",
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/systemd/private",
    "/var/run/docker.sock",
)

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `sudo apt install bubblewrap`; Fedora: "
    "`sudo dnf install bubblewrap`; Arch: `sudo pacman -S bubblewrap`) and make sure "
    "unprivileged user namespaces are enabled (`sysctl kernel.unprivileged_userns_clone=1`)"
)


class ConfinementUnavailable(ToolError):
    """``confinement = "required"`` and no sandbox backend works on this machine."""


@dataclass(frozen=True)
class Probe:
    """Whether a confinement backend works here, and what to do when it does not."""

    backend: str | None  # "bubblewrap", "sandbox-exec", or None
    program: str | None
    detail: str
    fix: str | None = None

    @property
    def available(self) -> bool:
        return self.backend is not None


@dataclass(frozen=True)
class Plan:
    """What one child may see: the policy's answer for one run, backend-neutral."""

    cwd: Path
    #: The roots of this run, bound read-write (``write``) or read-only.
    roots: tuple[Path, ...]
    #: Paths to hide entirely (directories become an empty tmpfs, files ``/dev/null``).
    masked: tuple[Path, ...]
    #: Roots that lie inside a masked path (the workspace inside FERMIX_HOME): bound
    #: again after the masks.
    rebind: tuple[Path, ...]
    #: Existing paths inside writable roots that must stay read-only (start-up files).
    read_only: tuple[Path, ...]
    network: bool
    write: bool = True


@dataclass(frozen=True)
class Launch:
    """The argv and env to start; ``confined`` says whether a sandbox wraps them."""

    argv: list[str]
    env: dict[str, str]
    confined: bool
    backend: str | None = None
    #: Why it is not confined (``confinement = "off"``, or the probe's detail).
    note: str | None = None


_lock = threading.Lock()
_probed: dict[str, Probe] = {}

_BWRAP_BASE: tuple[str, ...] = (
    "--die-with-parent",
    "--unshare-pid",
    # The command itself is PID 1 of its namespace: when it exits the kernel kills whatever
    # it left behind, and bwrap reaps it directly (no orphaned reaper for init to collect).
    "--as-pid-1",
    "--unshare-ipc",
    "--unshare-uts",
    "--cap-drop",
    "ALL",
    "--hostname",
    "fermix-sandbox",
)


def probe(*, refresh: bool = False, platform: str | None = None) -> Probe:
    """Find and test the backend for this platform once per process (a few milliseconds:
    one ``bwrap … true``). Blocking; async code calls it from a worker thread."""
    platform = platform or sys.platform
    with _lock:
        if not refresh and platform in _probed:
            return _probed[platform]
        found = _probe_darwin() if platform == "darwin" else _probe_linux()
        _probed[platform] = found
        return found


def probed(platform: str | None = None) -> bool:
    """Whether :func:`probe` has already run (so calling it will not block)."""
    return (platform or sys.platform) in _probed


def _probe_linux() -> Probe:
    program = os.environ.get("FERMIX_BWRAP") or shutil.which("bwrap")
    if program is None:
        return Probe(None, None, "bubblewrap (bwrap) is not installed", INSTALL_HINT)
    argv = [program, *_BWRAP_BASE, "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc"]
    argv += ["--dev", "/dev", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(None, program, f"bubblewrap could not start ({exc})", INSTALL_HINT)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return Probe(
            None,
            program,
            f"bubblewrap is installed but cannot create namespaces here ({said[0]})",
            "enable unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, "
            "or on Ubuntu 24.04+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0`), "
            "or run Fermix outside a container that forbids them",
        )
    return Probe("bubblewrap", program, f"bubblewrap ({program})")


def _probe_darwin() -> Probe:
    program = shutil.which("sandbox-exec") or (
        "/usr/bin/sandbox-exec" if Path("/usr/bin/sandbox-exec").exists() else None
    )
    if program is None:
        return Probe(None, None, "sandbox-exec is missing", "use a stock macOS install")
    return Probe("sandbox-exec", program, f"sandbox-exec ({program}; untested profile)")


def wrap(
    argv: Sequence[str],
    env: Mapping[str, str],
    plan: Plan,
    *,
    setting: Confinement = "auto",
    found: Probe | None = None,
) -> Launch:
    """The command to start for *argv* under *plan*, or :class:`ConfinementUnavailable`."""
    argv = [str(a) for a in argv]
    child_env = dict(env)
    if setting == "off":
        return Launch(argv, child_env, False, note='[sandbox] confinement = "off"')
    found = found or probe()
    if not found.available or found.program is None:
        if setting == "required":
            raise ConfinementUnavailable(
                f'[sandbox] confinement = "required", but {found.detail}, so no command may '
                f'run. To fix: {found.fix or INSTALL_HINT}; or set confinement = "auto" to '
                "fall back to screening only."
            )
        return Launch(argv, child_env, False, note=found.detail)
    if found.backend == "sandbox-exec":
        profile = sandbox_exec_profile(plan)
        return Launch(
            [found.program, "-p", profile, *argv], child_env, True, backend="sandbox-exec"
        )
    child_env["TMPDIR"] = "/tmp"  # noqa: S108 - a private tmpfs inside the sandbox
    # Caches (pip, uv, go, …) default to ~/.cache, which is read-only outside open mode:
    # give them the private /tmp unless the configured one is writable here.
    cache = child_env.get("XDG_CACHE_HOME", "")
    writable = plan.roots if plan.write else ()
    if not cache or not any(_inside(Path(cache), root) for root in writable):
        child_env["XDG_CACHE_HOME"] = "/tmp/.cache"  # noqa: S108
    return Launch(
        [found.program, *bwrap_args(plan), "--", *argv], child_env, True, backend="bubblewrap"
    )


def bwrap_args(plan: Plan) -> list[str]:
    """bubblewrap options for *plan* (order matters: later mounts cover earlier ones)."""
    args = list(_BWRAP_BASE)
    if not plan.network:
        args.append("--unshare-net")
    # Private temporary directories: the host's hold other programs' sockets and files.
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--tmpfs", "/tmp"]  # noqa: S108
    args += ["--tmpfs", "/var/tmp"] if Path("/var/tmp").is_dir() else []  # noqa: S108
    bind = "--bind" if plan.write else "--ro-bind"
    for root in _shallow_first(plan.roots):
        args += [bind, str(root), str(root)]
    for path in _shallow_first(plan.masked):
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    for root in _shallow_first(plan.rebind):
        args += [bind, str(root), str(root)]
    for path in plan.read_only:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--chdir", str(plan.cwd)]
    return args


def sandbox_exec_profile(plan: Plan) -> str:
    """A macOS Seatbelt profile with the rules of *plan* (later rules win)."""
    lines = ["(version 1)", "(allow default)", "(deny file-write*)"]
    allowed = [Path("/private/tmp"), Path("/private/var/folders")]
    allowed += [*plan.roots, *plan.rebind] if plan.write else []
    lines.append(
        "(allow file-write* "
        + " ".join(f"(subpath {_sb(p)})" for p in allowed)
        + ' (literal "/dev/null") (literal "/dev/tty"))'
    )
    for path in plan.masked:
        lines.append(f"(deny file-read* file-write* (subpath {_sb(path)}))")
    for root in plan.rebind:
        access = "file-read* file-write*" if plan.write else "file-read*"
        lines.append(f"(allow {access} (subpath {_sb(root)}))")
    for path in plan.read_only:
        lines.append(f"(deny file-write* (subpath {_sb(path)}))")
    if not plan.network:
        lines.append('(deny network* (remote ip) (remote unix-socket (path-regex #"^/")))')
    return "\n".join(lines)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _sb(path: Path) -> str:
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _shallow_first(paths: Iterable[Path]) -> list[Path]:
    return sorted(dict.fromkeys(paths), key=lambda p: (len(p.parts), str(p)))


def existing(paths: Iterable[Path]) -> list[Path]:
    """The real locations of *paths* that exist (symlinks followed; a masked link target
    hides what the link shows)."""
    found: list[Path] = []
    for path in paths:
        try:
            if not os.path.lexists(path):
                continue
            real = Path(os.path.realpath(path))
        except (OSError, ValueError):
            continue
        if real.exists() and real != Path("/") and real not in found:
            found.append(real)
    return found

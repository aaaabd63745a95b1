"""Canonical paths and the protected list: the facts every sandbox decision is made from.

A decision about a path is only as good as the path it is made on. ``../``, a symlink
planted inside a granted folder, or ``~/.SSH`` on a case-insensitive disk all name the same
file as something the policy would refuse, so every decision here is made on the
*canonical* path — symlinks followed, dots collapsed, case folded where the file system
ignores case — and a path that does not exist yet (a write target) is canonicalised
through its nearest existing parent.

The protected list is data, not code, so ``fermix sandbox show`` and ``docs/sandbox.md``
can print exactly what the checks use.
"""

from __future__ import annotations

import os
import posixpath
import re
import tempfile
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "FERMIX_INTERNALS",
    "HOME_PROTECTED",
    "HOME_WRITE_PROTECTED",
    "HOME_WRITE_PROTECTED_NAMES",
    "MAX_PATH_CHARS",
    "OS_ROOTS",
    "PathProblem",
    "Protected",
    "canonical",
    "case_insensitive_fs",
    "expand_user",
    "is_within",
    "path_key",
    "system_temp_dirs",
    "true_case",
]

#: Longer inputs are refused outright: no real path is this long, and a model that sends
#: one is confused or being steered.
MAX_PATH_CHARS = 4096


class PathProblem(ValueError):
    """A path that cannot be canonicalised (NUL byte, symlink loop, too long, ``~user``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Protected:
    """One protected location: a tree (the path and everything below) or one file."""

    path: Path
    reason: str
    #: "tree" protects the path and everything under it; "exact" only the path itself.
    kind: str = "tree"


#: Under the OS home: credentials, keys, browser profiles and keychains. Denied in every
#: mode, even inside a granted root, for reads and writes alike.
HOME_PROTECTED: tuple[tuple[str, str], ...] = (
    (".ssh", "SSH keys and known hosts"),
    (".aws", "AWS credentials"),
    (".gnupg", "GnuPG keys"),
    (".config/gcloud", "Google Cloud credentials"),
    (".azure", "Azure credentials"),
    (".kube", "Kubernetes credentials"),
    (".docker/config.json", "Docker registry credentials"),
    (".netrc", "network login credentials"),
    (".git-credentials", "stored Git credentials"),
    (".password-store", "the pass password store"),
    (".config/gh", "the GitHub CLI token"),
    (".config/hub", "the hub GitHub token"),
    (".config/op", "1Password CLI state"),
    (".npmrc", "the npm registry token"),
    (".pypirc", "the PyPI upload token"),
    (".cargo/credentials", "the crates.io token"),
    (".cargo/credentials.toml", "the crates.io token"),
    (".gem/credentials", "the RubyGems token"),
    (".terraform.d/credentials.tfrc.json", "Terraform Cloud credentials"),
    (".vault-token", "the HashiCorp Vault token"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL credentials"),
    (".s3cfg", "S3 credentials"),
    (".boto", "cloud storage credentials"),
    (".config/rclone", "rclone cloud credentials"),
    (".local/share/keyrings", "the desktop keyring"),
    (".mozilla", "Firefox profiles (cookies, saved passwords)"),
    (".thunderbird", "Thunderbird mail profiles"),
    ("snap/firefox", "Firefox profiles (cookies, saved passwords)"),
    (".config/google-chrome", "Chrome profiles (cookies, saved passwords)"),
    (".config/chromium", "Chromium profiles (cookies, saved passwords)"),
    (".config/BraveSoftware", "Brave profiles (cookies, saved passwords)"),
    (".config/microsoft-edge", "Edge profiles (cookies, saved passwords)"),
    (".config/vivaldi", "Vivaldi profiles (cookies, saved passwords)"),
    (".config/opera", "Opera profiles (cookies, saved passwords)"),
    ("Library/Keychains", "macOS keychains"),
    ("Library/Cookies", "macOS cookies"),
    ("Library/Safari", "Safari data"),
    ("Library/Application Support/Google/Chrome", "Chrome profiles (cookies, saved passwords)"),
    ("Library/Application Support/Chromium", "Chromium profiles (cookies, saved passwords)"),
    ("Library/Application Support/Firefox", "Firefox profiles (cookies, saved passwords)"),
    ("Library/Application Support/BraveSoftware", "Brave profiles (cookies, saved passwords)"),
    ("Library/Application Support/Microsoft Edge", "Edge profiles (cookies, saved passwords)"),
    (".bitcoin", "a cryptocurrency wallet"),
    (".ethereum", "a cryptocurrency wallet"),
    (".electrum", "a cryptocurrency wallet"),
    (".config/git/credentials", "stored Git credentials"),
    (".bash_history", "shell history (often holds pasted secrets)"),
    (".zsh_history", "shell history (often holds pasted secrets)"),
    (".local/share/fish/fish_history", "shell history (often holds pasted secrets)"),
    (".python_history", "Python history (often holds pasted secrets)"),
    (".psql_history", "psql history (often holds pasted secrets)"),
    (".mysql_history", "MySQL history (often holds pasted secrets)"),
    (".config/sops", "SOPS/age private keys"),
    (".m2/settings.xml", "Maven repository credentials"),
    (".pulumi/credentials.json", "the Pulumi token"),
    (".config/glab-cli", "the GitLab CLI token"),
    (".config/hcloud", "the Hetzner Cloud token"),
    (".config/doctl", "the DigitalOcean token"),
    (".gradle/gradle.properties", "Gradle repository credentials"),
)

#: Under the OS home: files that run code at login or on every shell start. Reading them
#: is harmless; writing them would let one turn plant something that runs forever after.
HOME_WRITE_PROTECTED: tuple[tuple[str, str], ...] = (
    (".bashrc", "a shell start-up file"),
    (".bash_profile", "a shell start-up file"),
    (".bash_login", "a shell start-up file"),
    (".profile", "a shell start-up file"),
    (".zshrc", "a shell start-up file"),
    (".zshenv", "a shell start-up file"),
    (".zprofile", "a shell start-up file"),
    (".zlogin", "a shell start-up file"),
    (".config/fish/config.fish", "a shell start-up file"),
    (".config/fish/conf.d", "shell start-up files"),
    (".bash_logout", "a shell log-out file"),
    (".bashrc.d", "shell start-up files"),
    (".zshrc.d", "shell start-up files"),
    (".vimrc", "the Vim start-up file (it can run commands)"),
    (".config/nvim/init.vim", "the Neovim start-up file (it can run commands)"),
    (".config/nvim/init.lua", "the Neovim start-up file (it can run commands)"),
    (".gitconfig", "the global Git configuration (it can name programs Git runs)"),
    (".config/git/config", "the global Git configuration (it can name programs Git runs)"),
    (".local/bin", "programs on your PATH (they run under the names you type)"),
    (".config/autostart", "desktop autostart entries"),
    (".config/systemd/user", "systemd user services"),
    (".local/share/systemd/user", "systemd user services"),
    ("Library/LaunchAgents", "macOS launch agents"),
)

#: File names that run code whenever Python starts, wherever they are under the OS home
#: (``.pth`` files in a site-packages directory; ``sitecustomize``/``usercustomize``):
#: readable, never written.
HOME_WRITE_PROTECTED_NAMES: tuple[tuple[str, str], ...] = (
    ("*.pth", "a Python start-up hook (.pth files run code when Python starts)"),
    ("sitecustomize.py", "a Python start-up hook"),
    ("usercustomize.py", "a Python start-up hook"),
)

#: Inside FERMIX_HOME. Everything else there outside the workspace is protected as well;
#: these names only make the refusal say *what* the file is.
FERMIX_INTERNALS: tuple[tuple[str, str, str], ...] = (
    ("config.toml", "Fermix's configuration", "exact"),
    ("auth.json", "Fermix's OAuth tokens", "exact"),
    ("memory.db", "Fermix's memory and history database", "exact"),
    ("memory.db-wal", "Fermix's memory and history database", "exact"),
    ("memory.db-shm", "Fermix's memory and history database", "exact"),
    ("memory.db-journal", "Fermix's memory and history database", "exact"),
    ("daemon.sock", "the daemon's control socket", "exact"),
    ("daemon.pid", "the daemon's pid file", "exact"),
    ("realtime.sock", "the voice companion socket", "exact"),
    ("acp.sock", "the ACP socket", "exact"),
    ("setup-answers.json", "answers of an unfinished `fermix setup`", "exact"),
    ("grants", "Fermix's directory grants", "tree"),
    ("bootstrap", "Fermix's prompt files (identity, soul, rules)", "tree"),
    ("memory", "Fermix's memory profiles", "tree"),
    ("skills", "Fermix's local skills", "tree"),
    ("plugins", "installed Fermix plugins", "tree"),
    ("browser", "the managed browser's profiles", "tree"),
    ("logs", "Fermix's logs", "tree"),
    ("traces", "Fermix's traces", "tree"),
    ("journals", "Fermix's run journals", "tree"),
    ("realtime", "the voice companion's state", "tree"),
    ("cache", "Fermix's caches (tool definitions)", "tree"),
)

#: Operating-system trees. Denied in every mode; ``/`` itself is denied exactly (its
#: children that are not listed here, such as ``/home`` or ``/tmp``, are decided by the
#: roots). ``/root`` is dropped from the list when it is the OS home.
OS_ROOTS: tuple[str, ...] = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/usr",
    "/var",
    "/System",
    "/Library",
    "/private",
    "/Applications",
    "/cores",
)


# --------------------------------------------------------------------------- canonical form


def expand_user(raw: str, os_home: Path) -> str:
    """``~`` and ``~/x`` against the *policy's* OS home; ``~user`` is refused.

    The policy's home (not ``$HOME`` of the process) is used so tests and embedding apps
    decide against the home they configured. ``~user`` would need the password database
    and names someone else's files, which no root admits anyway.
    """
    if raw == "~" or raw.startswith("~/"):
        return str(os_home) + raw[1:]
    if raw.startswith("~"):
        raise PathProblem(
            "invalid_path",
            f"{raw!r}: paths of the form ~user are not supported; give the full path",
        )
    return raw


def _reject_bad_input(raw: str) -> None:
    if not raw or not raw.strip():
        raise PathProblem("invalid_path", "the path is empty; give a file or directory path")
    if "\x00" in raw:
        raise PathProblem("invalid_path", "the path contains a NUL byte; that is never a file")
    if len(raw) > MAX_PATH_CHARS:
        raise PathProblem(
            "invalid_path", f"the path is longer than {MAX_PATH_CHARS} characters; shorten it"
        )


def canonical(raw: str | os.PathLike[str], base: Path, os_home: Path) -> Path:
    """The canonical absolute form of *raw*: ``~`` expanded, relative to *base*, symlinks
    followed (dangling ones too), ``..`` collapsed.

    ``os.path.realpath`` leaves a symlink loop in place instead of failing, so the result is
    checked for a surviving link: anything still a symlink after resolution cannot be
    resolved and is refused rather than guessed at.
    """
    text = os.fspath(raw)
    if not isinstance(text, str):
        raise PathProblem("invalid_path", "the path must be text")
    _reject_bad_input(text)
    text = expand_user(text, os_home)
    joined = text if posixpath.isabs(text) else os.path.join(os.fspath(base), text)
    try:
        resolved = os.path.realpath(joined)
    except (OSError, ValueError) as exc:
        raise PathProblem("invalid_path", f"{text!r} cannot be resolved ({exc})") from None
    _refuse_leftover_links(resolved)
    return Path(resolved)


def _refuse_leftover_links(resolved: str) -> None:
    current = "/"
    for part in resolved.split("/"):
        if not part:
            continue
        current = posixpath.join(current, part)
        try:
            if os.path.islink(current):
                raise PathProblem(
                    "symlink_loop",
                    f"{current} is a symlink that cannot be resolved (a loop?); "
                    "fix or remove the link",
                )
        except OSError:
            return
        if not os.path.lexists(current):
            return


# --------------------------------------------------------------------------- case


@lru_cache(maxsize=64)
def case_insensitive_fs(directory: str) -> bool:
    """Whether the file system holding *directory* ignores case (macOS, Windows volumes).

    Probed by looking the same directory up under a case-swapped name; a directory whose
    path has no letters cannot be probed and is taken as case-sensitive.
    """
    path = directory.rstrip("/") or "/"
    head, tail = posixpath.split(path)
    while tail and tail.swapcase() == tail:
        path = head
        head, tail = posixpath.split(path)
    if not tail:
        return False
    swapped = posixpath.join(head, tail.swapcase())
    try:
        return os.path.samefile(path, swapped)
    except OSError:
        return False


def path_key(path: Path | str, *, fold: bool) -> str:
    """The string decisions compare: NFC and case-folded on case-insensitive systems."""
    text = os.fspath(path)
    if fold:
        return unicodedata.normalize("NFC", text).casefold()
    return text


def is_within(child: str, parent: str) -> bool:
    """``child`` is ``parent`` or below it (both keys from :func:`path_key`)."""
    if parent == "/":
        return child.startswith("/")
    return child == parent or child.startswith(parent + "/")


def true_case(path: Path) -> Path:
    """*path* with each existing component spelled as the directory lists it.

    Only needed on case-insensitive systems, where ``~/Projects`` and ``~/projects`` are one
    folder: a grant stores the on-disk spelling so the config reads the way Finder shows it.
    """
    parts = path.parts
    if not parts:
        return path
    current = Path(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        try:
            names = os.listdir(current)
        except OSError:
            return current.joinpath(*parts[index:])
        if part in names:
            current = current / part
            continue
        folded = part.casefold()
        match = next((n for n in names if n.casefold() == folded), None)
        current = current / (match or part)
    return current


def system_temp_dirs() -> tuple[Path, ...]:
    """Canonical temporary directories, carved out of the OS roots.

    On macOS the per-user temp directory lives under ``/private/var/folders``; without the
    carve-out every temp file would look like an OS file.
    """
    found: list[Path] = []
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):  # noqa: S108 - fixed system dirs
        try:
            resolved = Path(os.path.realpath(candidate))
        except (OSError, ValueError):
            continue
        if resolved not in found:
            found.append(resolved)
    return tuple(found)


_DEVICE_RE = re.compile(
    r"^/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|r?disk\d|disk/|md\d|md/|dm-\d"
    r"|mapper/|loop\d|nbd\d|zram\d|bcache\d|ram\d|sr\d|fd\d|ubd|root$|mem$|kmem$|port$)"
)


def is_disk_device(path: str) -> bool:
    """A raw disk or memory device, where a write destroys a file system."""
    collapsed = re.sub(r"/+", "/", path)
    normal = posixpath.normpath(collapsed) if collapsed.startswith("/") else collapsed
    return bool(_DEVICE_RE.match(normal))


def unique(paths: Iterable[Path]) -> list[Path]:
    seen: list[Path] = []
    for path in paths:
        if path not in seen:
            seen.append(path)
    return seen

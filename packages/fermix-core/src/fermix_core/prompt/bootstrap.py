"""The prompt files under ``FERMIX_HOME``: seeding them once, and the name reconciler.

``bootstrap/main/{IDENTITY,FERMIX,SOUL,REALTIME}.md`` and ``memory/main/{USER,MEMORY}.md``
belong to the operator once they exist. Seeding copies a shipped template only where no
file is, and never again: an upgrade that improved a template must not overwrite what
the operator wrote. To still let ``fermix doctor`` point at improvements, seeding records
the sha256 of each template it copied in ``bootstrap/.seeded.json``; comparing that
record with the templates of the running build shows which shipped templates moved on.
Only the variable-free templates (FERMIX, SOUL, REALTIME) are compared — IDENTITY and USER
embed names, so their text differs per install by design.

The one file Fermix itself rewrites is IDENTITY.md, and only its ``**Name:**`` line: the
configured ``[fermix_core.agent].name`` is the source of truth for the assistant's name,
so a rename in config plus a restart is all it takes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fermix_core.fsutil import atomic_write
from fermix_core.home import FermixHome

__all__ = [
    "DEFAULT_AGENT_ID",
    "SEED_RECORD",
    "VARIABLE_FREE_TEMPLATES",
    "SeedRecordError",
    "SeedReport",
    "prompt_files",
    "reconcile_agent_name",
    "render_template",
    "seed_bootstrap",
    "shipped_template",
    "template_drift",
    "template_sha256",
]

DEFAULT_AGENT_ID = "main"
DEFAULT_AGENT_NAME = "fermix"

#: Relative to FERMIX_HOME.
SEED_RECORD = "bootstrap/.seeded.json"

#: Templates with no per-install variables: the only ones whose drift means anything.
VARIABLE_FREE_TEMPLATES = frozenset({"FERMIX.md", "SOUL.md", "REALTIME.md"})

_UNSET = "not set yet"

#: ``**Name:** value`` on its own line, optionally as a list item. Group 1 is everything up
#: to and including the label, group 2 the value up to the line ending.
_NAME_LINE = re.compile(r"^([ \t]*(?:[-*+][ \t]+)?\*\*Name:\*\*)([^\r\n]*)", re.MULTILINE)


class SeedRecordError(ValueError):
    """``bootstrap/.seeded.json`` exists but cannot be read as a seed record."""


@dataclass(frozen=True)
class SeedReport:
    """What one :func:`seed_bootstrap` call did, as paths relative to FERMIX_HOME."""

    seeded: tuple[str, ...]
    existing: tuple[str, ...]
    #: The seed record, when this call wrote one (it does only when it seeded something).
    record: Path | None = None


#: How many prompt files this process has written (see :func:`prompt_files_written`).
WRITES = [0]


def prompt_files_written() -> None:
    """Tell every :class:`~fermix_core.prompt.PromptComposer` in this process that a prompt
    file was just written, so the next turn re-checks the files at once instead of up to
    ``RECHECK_SECONDS`` later. Code that writes prompt files calls it after writing."""
    WRITES[0] += 1


def prompt_files(agent_id: str = DEFAULT_AGENT_ID) -> dict[str, str]:
    """``{path relative to FERMIX_HOME: template name}`` for one agent's prompt files."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", agent_id):
        raise ValueError(f"agent id {agent_id!r} must be 1-64 letters, digits, '_' or '-'")
    return {
        f"bootstrap/{agent_id}/IDENTITY.md": "IDENTITY.md",
        f"bootstrap/{agent_id}/FERMIX.md": "FERMIX.md",
        f"bootstrap/{agent_id}/SOUL.md": "SOUL.md",
        f"bootstrap/{agent_id}/REALTIME.md": "REALTIME.md",
        f"memory/{agent_id}/USER.md": "USER.md",
        f"memory/{agent_id}/MEMORY.md": "MEMORY.md",
    }


@functools.cache
def shipped_template(name: str) -> str:
    """The text of template *name* as this build ships it (``"SOUL.md"``)."""
    if name not in {"IDENTITY.md", "FERMIX.md", "SOUL.md", "REALTIME.md", "USER.md", "MEMORY.md"}:
        raise ValueError(f"no shipped prompt template called {name!r}")
    try:
        # A package installed as files (wheels, editable installs): read it next to this
        # module; importlib.resources would load its readers and zipfile for that.
        return (Path(__file__).parent / "templates" / name).read_text("utf-8")
    except OSError:  # a zipped install: its files are only reachable through the loader
        from importlib import resources  # (tempfile, shutil and the compressors behind it)

        return (resources.files("fermix_core.prompt") / "templates" / name).read_text("utf-8")


def template_sha256(name: str) -> str:
    return hashlib.sha256(shipped_template(name).encode("utf-8")).hexdigest()


def _one_line(value: str | None) -> str:
    return " ".join((value or "").split())


def render_template(
    name: str,
    *,
    agent_name: str | None = None,
    user_name: str | None = None,
    timezone: str | None = None,
    communication_style: str | None = None,
) -> str:
    """A template with its placeholders filled (only IDENTITY.md and USER.md have any)."""
    text = shipped_template(name)
    if name == "IDENTITY.md":
        return text.replace("{name}", _one_line(agent_name) or DEFAULT_AGENT_NAME)
    if name == "USER.md":
        for key, value in (
            ("{user_name}", user_name),
            ("{timezone}", timezone),
            ("{communication_style}", communication_style),
        ):
            text = text.replace(key, _one_line(value) or _UNSET)
    return text


def _as_home(home: FermixHome | Path | str) -> FermixHome:
    return home if isinstance(home, FermixHome) else FermixHome(Path(home))


# --------------------------------------------------------------------------- seeding


def seed_bootstrap(
    home: FermixHome | Path | str,
    *,
    agent_name: str,
    user_name: str | None = None,
    timezone: str | None = None,
    communication_style: str | None = None,
    agent_id: str = DEFAULT_AGENT_ID,
) -> SeedReport:
    """Write each prompt file that does not exist yet; never touch one that does.

    Setup calls this once. Existing files — edited, emptied or untouched — are left byte
    for byte as they are. Each file written is recorded (template name and sha256) in
    :data:`SEED_RECORD`, merged with what earlier seeding recorded.
    """
    home = _as_home(home)
    seeded: list[str] = []
    existing: list[str] = []
    entries: dict[str, dict[str, str]] = {}
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    for relative, template in prompt_files(agent_id).items():
        target = home.path / relative
        if target.exists() or target.is_symlink():
            existing.append(relative)
            continue
        home.ensure_dir(str(Path(relative).parent))
        text = render_template(
            template,
            agent_name=agent_name,
            user_name=user_name,
            timezone=timezone,
            communication_style=communication_style,
        )
        atomic_write(target, text)
        prompt_files_written()
        seeded.append(relative)
        entries[relative] = {
            "template": template,
            "sha256": template_sha256(template),
            "seeded_at": now,
        }
    record_path: Path | None = None
    if entries:
        record_path = home.path / SEED_RECORD
        try:
            previous = _read_record(record_path) or {}
        except SeedRecordError:
            previous = {}  # unreadable: start a fresh record rather than fail setup
        previous.update(entries)
        home.ensure_dir("bootstrap")
        payload = {"version": 1, "files": dict(sorted(previous.items()))}
        atomic_write(record_path, json.dumps(payload, indent=2) + "\n")
    return SeedReport(tuple(seeded), tuple(existing), record_path)


def _read_record(path: Path) -> dict[str, dict[str, str]] | None:
    try:
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SeedRecordError(
            f"cannot read the seed record {path} ({exc}); delete it, and doctor will report "
            "'no seed record'"
        ) from exc
    try:
        data = json.loads(raw)
        files = data["files"]
        if not isinstance(files, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("sha256"), str) for v in files.values()
        ):
            raise TypeError("files must map paths to {'sha256': ...}")
    except (ValueError, KeyError, TypeError) as exc:
        raise SeedRecordError(
            f"the seed record {path} is not valid ({exc}); delete it, and doctor will report "
            "'no seed record'"
        ) from exc
    return files


def template_drift(
    home: FermixHome | Path | str, *, agent_id: str = DEFAULT_AGENT_ID
) -> list[str] | None:
    """Prompt files whose shipped template changed since they were seeded.

    ``None`` means there is no seed record (an install seeded before records existed, or
    never seeded); ``[]`` means every recorded variable-free template is still current.
    The operator's edits are not inspected: a hand-edited file is fine. Raises
    :class:`SeedRecordError` when the record exists but is unreadable.
    """
    home = _as_home(home)
    record = _read_record(home.path / SEED_RECORD)
    if record is None:
        return None
    drifted = []
    for relative, template in prompt_files(agent_id).items():
        entry = record.get(relative)
        if template not in VARIABLE_FREE_TEMPLATES or entry is None:
            continue
        if entry["sha256"] != template_sha256(template):
            drifted.append(relative)
    return drifted


# --------------------------------------------------------------------------- reconciling


def reconcile_agent_name(
    home: FermixHome | Path | str, name: str | None, *, agent_id: str = DEFAULT_AGENT_ID
) -> bool:
    """Make IDENTITY.md's ``**Name:**`` line say *name*; returns whether the file changed.

    The daemon calls this on boot with ``[fermix_core.agent].name``. A blank or unset
    name, a missing file, or a file without a ``**Name:**`` line is left alone, and so is
    every byte outside the first such line's value (line endings included). The file
    keeps its permissions.
    """
    wanted = _one_line(name)
    if not wanted:
        return False
    path = _as_home(home).path / "bootstrap" / agent_id / "IDENTITY.md"
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return False
    match = _NAME_LINE.search(text)
    if match is None or match.group(2).strip() == wanted:
        return False
    updated = f"{text[: match.start(2)]} {wanted}{text[match.end(2) :]}"
    # Write through a symlink (a prompt kept in a dotfiles repo) instead of replacing it.
    real = path.resolve()
    mode = stat.S_IMODE(os.stat(real).st_mode)
    atomic_write(real, updated.encode("utf-8"), mode=mode)
    prompt_files_written()
    return True

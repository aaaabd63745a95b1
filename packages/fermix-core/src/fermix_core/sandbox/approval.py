"""The agent must not widen its own sandbox by editing ``config.toml``.

Every way the owner changes ``[sandbox]`` — ``fermix grant|revoke path``, ``fermix config
set|unset``, ``/sandbox`` with ``/confirm``, ``fermix setup`` — goes through the config
writer, which records the section it approved in ``$FERMIX_HOME/grants/sandbox-approved.json``
(protected: no file tool reaches it, and confined commands cannot see ``FERMIX_HOME``).
At boot the daemon compares ``[sandbox]`` as written with that record. A difference was made
some other way (an editor, or a command that appended ``mode = "open"`` in fallback mode):
it is **not applied** — the daemon runs with the approved section — until the owner
confirms it with ``fermix sandbox approve`` or ``/sandbox approve`` + ``/confirm``, and the
boot log, ``fermix doctor``, ``fermix sandbox show`` and ``/sandbox show`` say so.

No record yet (a fresh home, or an upgrade from a version without one) means the section
as written is taken as approved and recorded (trust on first use).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.config.loader import LoadedConfig
    from fermix_core.config.models import SandboxConfig
    from fermix_core.home import FermixHome

__all__ = [
    "RECORD",
    "Approval",
    "approve_current",
    "check",
    "effective_section",
    "record_edit",
]

log = logging.getLogger("fermix.sandbox")

RECORD = "grants/sandbox-approved.json"
_ABSENT = object()


@dataclass(frozen=True)
class Approval:
    """How ``[sandbox]`` as written compares with the last one the owner approved."""

    status: str  # "approved", "first" (just recorded), "pending" (changed elsewhere)
    current: dict[str, Any]
    approved: dict[str, Any]

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def changes(self) -> list[str]:
        """One line per key that differs: ``sandbox.mode: "standard" -> "open"``."""
        before, after = _flatten(self.approved), _flatten(self.current)
        lines = []
        for key in sorted(set(before) | set(after)):
            old, new = before.get(key, _ABSENT), after.get(key, _ABSENT)
            if old != new:
                lines.append(f"sandbox.{key}: {_show(old)} -> {_show(new)}")
        return lines

    def message(self) -> str:
        return (
            "config.toml's [sandbox] was changed outside Fermix (not through fermix grant, "
            "fermix config set or /sandbox + /confirm), so the change is NOT applied: "
            + "; ".join(self.changes())
            + ". If you made it, approve it with `fermix sandbox approve` (or /sandbox approve "
            "in chat); otherwise undo it in config.toml."
        )


def _record_path(home: FermixHome):
    return home.path / RECORD


def _read_record(home: FermixHome) -> dict[str, Any] | None:
    path = _record_path(home)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        log.warning("sandbox: %s is unreadable; the approved [sandbox] is unknown", path)
        return {}
    table = data.get("sandbox") if isinstance(data, dict) else None
    return table if isinstance(table, dict) else {}


def _write_record(home: FermixHome, table: dict[str, Any]) -> None:
    from fermix_core.fsutil import atomic_write

    path = _record_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "sandbox": table}, indent=2, sort_keys=True, default=str)
    atomic_write(path, text + "\n", mode=0o600)


def _table(home: FermixHome) -> dict[str, Any]:
    from fermix_core.sandbox.grants import read_sandbox_table

    try:
        return _plain(read_sandbox_table(home))
    except Exception:  # an unreadable file is the loader's error to report
        return {}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def check(home: FermixHome, *, record: bool = True) -> Approval:
    """Compare ``[sandbox]`` in ``config.toml`` with the approved record (recording it on
    first use unless *record* is false: ``fermix doctor`` only looks)."""
    current = _table(home)
    approved = _read_record(home)
    if approved is None:
        if record:
            _write_record(home, current)
        return Approval("first", current, current)
    if _plain(approved) == current:
        return Approval("approved", current, approved)
    return Approval("pending", current, approved)


def record_edit(home: FermixHome, parts: Sequence[str], before: dict[str, Any]) -> None:
    """The config writer changed ``sandbox.<parts>``: carry exactly that key from the file
    into the approved record (other unapproved differences stay pending). *before* is the
    section as written before this edit (the record on first use)."""
    approved = _read_record(home)
    base = _plain(before) if approved is None else approved
    after = _table(home)
    keys = list(parts[1:])
    if not keys:
        _write_record(home, after)
        return
    value = _dig(after, keys)
    _set(base, keys, value)
    _write_record(home, base)


def approve_current(home: FermixHome) -> Approval:
    """The owner approves ``[sandbox]`` as written now."""
    current = _table(home)
    previous = _read_record(home)
    _write_record(home, current)
    return Approval("approved", current, current if previous is None else previous)


def effective_section(config: LoadedConfig, approval: Approval) -> SandboxConfig:
    """The ``[sandbox]`` to run with: as loaded, or the approved one while a change is
    pending (an approved table that no longer validates falls back to the defaults)."""
    from fermix_core.config.models import SandboxConfig

    section = config.core.sandbox
    if not approval.pending:
        return section
    try:
        return SandboxConfig.model_validate(approval.approved)
    except Exception:
        log.warning("sandbox: the approved [sandbox] record no longer validates; using defaults")
        return SandboxConfig()


def _flatten(table: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(table, dict):
        for key, value in table.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                out.update(_flatten(value, name + "."))
            else:
                out[name] = value
    return out


def _show(value: Any) -> str:
    return "(unset)" if value is _ABSENT else json.dumps(value)


def _dig(table: dict[str, Any], keys: list[str]) -> Any:
    node: Any = table
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return _ABSENT
        node = node[key]
    return node


def _set(table: dict[str, Any], keys: list[str], value: Any) -> None:
    node = table
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            if value is _ABSENT:
                return
            child = node[key] = {}
        node = child
    if value is _ABSENT:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value

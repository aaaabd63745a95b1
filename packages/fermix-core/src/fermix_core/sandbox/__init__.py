"""The sandbox: which paths the file tools may touch, which commands the shell may run.

Tools reach the policy as ``ctx.service("sandbox")``:

* tools that touch files call :meth:`SandboxPolicy.resolve` **before any I/O** and use the
  canonical path it returns (or let its :class:`SandboxDenied` become the tool's error);
* tools that run commands call :meth:`SandboxPolicy.check_command` (which raises
  :class:`CommandRefused`), then :meth:`SandboxPolicy.run` with ``env=policy.child_env()``,
  which confines the child (:mod:`.confine`) and runs it with :func:`run_command`; a
  long-lived child (an MCP stdio server) gets its confined argv and env from
  :meth:`SandboxPolicy.launch`.

``docs/sandbox.md`` describes the modes, the protected list, the command profiles and the
limits of the checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fermix_core.lazyexports import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.sandbox.commands import CommandRefused as CommandRefused
    from fermix_core.sandbox.confine import ConfinementUnavailable as ConfinementUnavailable
    from fermix_core.sandbox.confine import Launch as Launch
    from fermix_core.sandbox.exec import CommandResult as CommandResult
    from fermix_core.sandbox.exec import run_command as run_command
    from fermix_core.sandbox.grants import ConfirmationError as ConfirmationError
    from fermix_core.sandbox.grants import ConfirmationStore as ConfirmationStore
    from fermix_core.sandbox.grants import GrantError as GrantError
    from fermix_core.sandbox.grants import PendingChange as PendingChange
    from fermix_core.sandbox.grants import Proposal as Proposal
    from fermix_core.sandbox.grants import propose_grant as propose_grant
    from fermix_core.sandbox.policy import SandboxDenied as SandboxDenied
    from fermix_core.sandbox.policy import SandboxPolicy as SandboxPolicy

#: Exported name -> its module. Names resolve on first access, so a run that only keeps
#: confirmations (``grants``) does not import the policy, the command screen and the
#: confinement code until a tool needs the policy.
_LAZY: dict[str, str] = {
    "CommandRefused": "commands",
    "CommandResult": "exec",
    "ConfinementUnavailable": "confine",
    "ConfirmationError": "grants",
    "ConfirmationStore": "grants",
    "GrantError": "grants",
    "Launch": "confine",
    "PendingChange": "grants",
    "Proposal": "grants",
    "SandboxDenied": "policy",
    "SandboxPolicy": "policy",
    "propose_grant": "grants",
    "run_command": "exec",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_exports(__name__, _LAZY, globals())

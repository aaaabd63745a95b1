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

from fermix_core.sandbox.commands import CommandRefused
from fermix_core.sandbox.confine import ConfinementUnavailable, Launch
from fermix_core.sandbox.exec import CommandResult, run_command
from fermix_core.sandbox.grants import (
    ConfirmationError,
    ConfirmationStore,
    GrantError,
    PendingChange,
    Proposal,
    propose_grant,
)
from fermix_core.sandbox.policy import SandboxDenied, SandboxPolicy

__all__ = [
    "CommandRefused",
    "CommandResult",
    "ConfinementUnavailable",
    "ConfirmationError",
    "ConfirmationStore",
    "GrantError",
    "Launch",
    "PendingChange",
    "Proposal",
    "SandboxDenied",
    "SandboxPolicy",
    "propose_grant",
    "run_command",
]

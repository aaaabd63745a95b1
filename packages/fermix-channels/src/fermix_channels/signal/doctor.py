"""``fermix doctor``'s Signal row: the account and the signal-cli executable.

The channel runtime's own rows say whether the channel is enabled, authorizes anyone and
can be built, and — with a daemon running — its live health (signal-cli missing, the
account not registered, crashes and restarts). This row checks, without a daemon, what
only the Signal adapter knows: ``account`` is set, the executable (``cli_path`` /
``SIGNAL_CLI_PATH``, else ``signal-cli`` on ``PATH``) exists, and it runs: ``signal-cli
--version`` with the same minimal environment the channel gives it (Java included).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.doctor import CheckResult, DoctorContext

__all__ = ["check_signal"]

_LABEL = "signal-cli"
_FIX = "install signal-cli and register or link the account; see docs/channels/signal.md"
#: The JVM starts in a few seconds; a loaded machine may need more.
VERSION_TIMEOUT = 60.0


def check_signal(ctx: DoctorContext) -> list[CheckResult]:
    import os

    from fermix_core.doctor import CheckResult, Status

    from fermix_channels.signal.adapter import child_env, find_executable

    config = ctx.config
    section: Any = config.section("fermix_channels.signal") if config is not None else None
    if section is None or not getattr(section, "enabled", False):
        return [CheckResult(_LABEL, Status.SKIP, "the signal channel is not enabled")]
    if not section.account:
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                "[fermix_channels.signal] account is not set",
                fix="set account (or SIGNAL_ACCOUNT) to the number signal-cli is registered "
                "with, or run `fermix setup --reconfigure --step signal`",
            )
        ]
    environ = ctx.environ if ctx.environ is not None else os.environ
    executable, problem = find_executable(section.cli_path, environ)
    if executable is None:
        return [CheckResult(_LABEL, Status.FAIL, str(problem), fix=_FIX)]
    try:
        done = subprocess.run(
            [executable, "--version"],
            env=child_env(environ),
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [
            CheckResult(
                _LABEL,
                Status.WARN,
                f"{executable} --version did not finish within {VERSION_TIMEOUT:g}s",
                fix="check that Java 21+ is installed (JAVA_HOME) and the machine is not stuck",
            )
        ]
    except OSError as exc:
        return [CheckResult(_LABEL, Status.FAIL, f"{executable} cannot run: {exc}", fix=_FIX)]
    output = (done.stdout or done.stderr or "").strip().splitlines()
    first = output[0][:200] if output else "no output"
    if done.returncode != 0 or not first.lower().startswith("signal-cli"):
        return [
            CheckResult(
                _LABEL,
                Status.FAIL,
                f"{executable} --version failed (exit {done.returncode}): {first}",
                fix="signal-cli needs Java 21 or newer on PATH or in JAVA_HOME; "
                "see docs/channels/signal.md",
            )
        ]
    return [
        CheckResult(
            _LABEL,
            Status.OK,
            f"{first} at {executable}; account {section.account} (whether signal-cli knows "
            "the account shows in the channel's live row once the daemon runs)",
        )
    ]

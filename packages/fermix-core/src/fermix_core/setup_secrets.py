"""Where a secret typed during ``fermix setup`` is kept, decided before it is asked for.

Saving moves plaintext secrets into the OS keyring. A machine with no keyring writer (any
headless server: no Secret Service, no D-Bus session) cannot take them, so the setup steps
ask here first and, when there is none, say so and offer the forms that work without one:

* ``config`` — keep the secret in plaintext in config.toml (written with mode 0600), only
  after an explicit confirmation (interactive) or ``--secrets-in-config`` (scripted);
* ``env`` — write ``{ source = "env", env = "NAME" }`` and read the variable at run time;
* ``command`` — write ``{ source = "command", command = [...] }`` (a password manager).

A step calls :func:`reference_from_flags` for its ``--<flag>-env`` / ``--<flag>-command``
options, :func:`require_plaintext_storage` before taking a plaintext value from a flag, and
:func:`choose_storage` before prompting for one. All three name flags in what they raise.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.setup import SetupContext

__all__ = [
    "SECRETS_IN_CONFIG_FLAG",
    "SECRETS_IN_CONFIG_OPTION",
    "StorageChoice",
    "choose_storage",
    "keyring_unavailable",
    "reference_from_flags",
    "require_plaintext_storage",
]

SECRETS_IN_CONFIG_FLAG = "--secrets-in-config"
SECRETS_IN_CONFIG_OPTION = SetupOption(
    flag=SECRETS_IN_CONFIG_FLAG,
    help="Without an OS keyring, keep new secrets in config.toml (mode 0600, only you can read).",
    is_bool=True,
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ATTEMPTS = 5
_CONFIRM = "yes"


@dataclass(frozen=True)
class StorageChoice:
    """``keyring`` or ``config``: prompt for the value; ``reference``: write :attr:`value`;
    ``keep``: leave the stored value as it is."""

    kind: str
    value: Any = None


def keyring_unavailable(context: SetupContext) -> str | None:
    """Why no keyring can store a secret on this machine, or ``None`` when one can.

    Probed once per setup run, without writing anything.
    """
    state = context.keyring_state
    if "problem" not in state:
        from fermix_core.secrets import keyring_writer_problem

        _, state["problem"] = keyring_writer_problem()
    return state["problem"]


def _env_table(name: str) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    table.update({"source": "env", "env": name})
    return table


def _command_table(argv: list[str]) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    table.update({"source": "command", "command": argv})
    return table


def _checked_env_name(value: str, flag: str) -> str:
    from fermix_core.setup import SetupInputError

    name = value.strip()
    if not _ENV_NAME.match(name):
        raise SetupInputError(
            f"{flag}: {name!r} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
    return name


def _checked_command(value: str, flag: str) -> list[str]:
    from fermix_core.setup import SetupInputError

    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise SetupInputError(f"{flag}: cannot split {value!r} into arguments ({exc})") from None
    if not argv:
        raise SetupInputError(f'{flag} is empty; pass the helper, e.g. "pass show fermix/key"')
    return argv


def _command_note(context: SetupContext, label: str, argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        context.notes.append(
            f"{label}: {argv[0]!r} is not on PATH here; the daemon runs it each time it needs "
            "the secret (`fermix doctor` checks it)"
        )


def _env_note(context: SetupContext, label: str, name: str) -> None:
    if not context.assembly.environ.get(name, "").strip():
        context.notes.append(
            f"{label} is read from ${name}; export it in the daemon's environment "
            "(a systemd EnvironmentFile, your shell profile) before `fermix run`"
        )


def reference_from_flags(context: SetupContext, flag: str, *, label: str) -> Any | None:
    """The ``{ source = ... }`` table ``--<flag>-env NAME`` or ``--<flag>-command CMD`` asks
    for, or ``None`` when neither was passed."""
    from fermix_core.setup import SetupInputError

    env_flag, command_flag = f"{flag}-env", f"{flag}-command"
    given = [f for f in (flag, env_flag, command_flag) if f in context.options]
    if len(given) > 1:
        raise SetupInputError(f"{' and '.join(given)} say different things; pass only one")
    if env_flag in context.options:
        name = _checked_env_name(str(context.option(env_flag)), env_flag)
        _env_note(context, label, name)
        return _env_table(name)
    if command_flag in context.options:
        argv = _checked_command(str(context.option(command_flag)), command_flag)
        _command_note(context, label, argv)
        return _command_table(argv)
    return None


def _choices_text(flag: str) -> str:
    return (
        f"pass {SECRETS_IN_CONFIG_FLAG} to keep it in config.toml (mode 0600, readable only "
        f"by you), or {flag}-env NAME to read it from an environment variable, or "
        f'{flag}-command "pass show fermix/key" to run a helper that prints it; or install '
        "and unlock an OS keyring (on Linux a Secret Service such as gnome-keyring, with a "
        "D-Bus session) and run setup again"
    )


def require_plaintext_storage(context: SetupContext, flag: str, *, label: str) -> None:
    """Before a plaintext value from *flag* goes into the document: it must have a home."""
    from fermix_core.setup import SetupInputError

    problem = keyring_unavailable(context)
    if problem is None or context.plaintext_consent:
        return
    if context.option(SECRETS_IN_CONFIG_FLAG):
        context.plaintext_consent = True
        return
    raise SetupInputError(
        f"no OS keyring can store the {label} on this machine ({problem}), so nothing was "
        f"written. Choose where it goes: {_choices_text(flag)}"
    )


def choose_storage(
    context: SetupContext,
    flag: str,
    *,
    label: str,
    env_var: str | None,
    can_keep: bool,
) -> StorageChoice:
    """Interactive: where the secret the step is about to ask for will be kept.

    With a keyring writer this asks nothing (``keyring``). Without one it explains why and
    offers config.toml (after a typed confirmation), an environment variable or a helper
    command, and keeping the stored value when there is one.
    """
    problem = keyring_unavailable(context)
    if problem is None:
        return StorageChoice("keyring")
    if context.plaintext_consent or context.option(SECRETS_IN_CONFIG_FLAG):
        context.plaintext_consent = True
        return StorageChoice("config")
    echo = context.io.echo
    echo(f"No OS keyring can store secrets on this machine ({problem}).")
    echo(f"Where should Fermix keep the {label}?")
    echo("  1. in config.toml, in plaintext, readable only by you (mode 0600)")
    example = env_var or "MY_SECRET"
    echo(f"  2. in an environment variable, read when the daemon starts (e.g. {example})")
    echo("  3. from a command that prints it, e.g. a password manager (pass show fermix/key)")
    options = {"1": "config", "2": "env", "3": "command"}
    if can_keep:
        echo("  4. keep what is configured now")
        options["4"] = "keep"
    for _ in range(_ATTEMPTS):
        answer = context.line(f"{flag} storage", "Choice", shown_default="2") or "2"
        kind = options.get(answer)
        if kind is None:
            echo(f"  type one of {', '.join(options)}")
            continue
        if kind == "keep":
            return StorageChoice("keep")
        if kind == "config":
            typed = context.io.prompt(
                f"The {label} will be readable by anyone who can read config.toml as you. "
                f"Type {_CONFIRM} to keep it there: "
            )
            if typed.strip().lower() != _CONFIRM:
                echo("  not confirmed; choose again")
                continue
            context.plaintext_consent = True
            return StorageChoice("config")
        if kind == "env":
            reference = _ask_env(context, flag, label, env_var)
        else:
            reference = _ask_command(context, flag, label)
        if reference is not None:
            return StorageChoice("reference", reference)
    from fermix_core.setup import SetupError

    raise SetupError(
        f"no place to keep the {label} was chosen; nothing was written. "
        + _choices_text(flag).capitalize()
    )


def _ask_env(context: SetupContext, flag: str, label: str, env_var: str | None) -> Any | None:
    from fermix_core.setup import SetupInputError

    answer = context.line(f"{flag} variable", "Environment variable", shown_default=env_var)
    answer = answer or (env_var or "")
    try:
        name = _checked_env_name(answer, "the variable")
    except SetupInputError as exc:
        context.io.echo(f"  {exc}")
        return None
    _env_note(context, label, name)
    return _env_table(name)


def _ask_command(context: SetupContext, flag: str, label: str) -> Any | None:
    from fermix_core.setup import SetupInputError

    answer = context.line(f"{flag} command", "Command that prints the secret (no shell)")
    try:
        argv = _checked_command(answer, "the command")
    except SetupInputError as exc:
        context.io.echo(f"  {exc}")
        return None
    _command_note(context, label, argv)
    return _command_table(argv)

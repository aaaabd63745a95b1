"""``fermix setup``: a registry of steps contributed through ``fermix_setup_steps``.

A step edits the config document held by the :class:`SetupContext`. Nothing is written until
every step has run; then plaintext secrets move to the keyring, the whole result is
validated, and config.toml is replaced atomically. A step that fails, or a result that does
not validate, leaves the existing file exactly as it was. Writes outside config.toml (the
prompt files) are queued on :attr:`SetupContext.after_write` and run only after that.

Interactive and non-interactive runs share one code path: :meth:`SetupContext.ask` returns a
flag value when the user passed one, prompts when interactive, and otherwise raises
:class:`SetupInputError` naming the flag to pass.
"""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption, SetupStepSpec, resolve_ref

if TYPE_CHECKING:  # pragma: no cover
    from fermix_core.boot import Assembly


class SetupError(Exception):
    """Setup cannot continue; the message says what to do."""


class SetupInputError(SetupError):
    """A value is needed that a non-interactive run did not get."""


class SetupStoreError(SetupError):
    """A secret could not be stored (a keyring refused it); nothing was written."""


@dataclass
class SetupIO:
    """Terminal interaction, swappable in tests."""

    prompt: Callable[[str], str] = input
    secret_prompt: Callable[[str], str] = getpass.getpass
    echo: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stdout))


@dataclass
class SetupContext:
    assembly: Assembly
    document: Any
    interactive: bool
    options: Mapping[str, Any]
    io: SetupIO = field(default_factory=SetupIO)
    notes: list[str] = field(default_factory=list)
    #: The operator agreed to keep new secrets in plaintext in config.toml (mode 0600)
    #: because no keyring can store them (``--secrets-in-config`` or the prompt).
    plaintext_consent: bool = False
    #: Work that writes outside config.toml (prompt files), run only once config.toml has
    #: been validated and written, so a failed setup leaves nothing half-done behind.
    after_write: list[Callable[[], None]] = field(default_factory=list)
    #: ``fermix_core.setup_secrets`` caches its keyring probe here (one probe per run).
    keyring_state: dict[str, Any] = field(default_factory=dict)
    #: Answers of an earlier interactive run that did not finish, by flag: offered as the
    #: default of the same question (see :mod:`fermix_core.setup_answers`).
    remembered: dict[str, str] = field(default_factory=dict)
    #: What was answered in this run, by flag (never a secret); kept if the run fails.
    answers: dict[str, str] = field(default_factory=dict)
    _offered: set[str] = field(default_factory=set)

    @property
    def home(self) -> Any:
        return self.assembly.home

    @property
    def registry(self) -> Any:
        return self.assembly.registry

    def option(self, flag: str, default: Any = None) -> Any:
        return self.options.get(flag, default)

    def ask(
        self, flag: str, prompt: str, *, default: str | None = None, secret: bool = False
    ) -> str:
        """A value from ``--flag``, else the user (interactive), else the default, else an error."""
        if flag in self.options:
            return str(self.options[flag])
        if self.interactive:
            if secret:
                self.answers.pop(flag, None)
                answer = self.io.secret_prompt(f"{prompt}: ").strip()
            else:
                answer = self.line(flag, prompt, shown_default=default)
            if answer:
                return answer
        if default is not None:
            return default
        raise SetupInputError(f"{prompt}: pass {flag} VALUE (running non-interactively)")

    def line(self, key: str, prompt: str, *, shown_default: str | None = None) -> str:
        """One typed line for *key* (a flag, or a step's own name for a menu or a yes/no
        question), recorded so a run that fails offers it next time.

        The answer of an unfinished earlier run is offered in brackets in place of
        *shown_default*, once: asked again (the answer was refused), the step's own
        default comes back. Enter takes the offered answer; ``""`` when there is none.
        Never for secrets: use ``io.secret_prompt``.
        """
        self.answers.pop(key, None)  # asked again: only the last answer counts
        earlier = None if key in self._offered else self.remembered.get(key)
        offered = shown_default
        if earlier is not None:
            self._offered.add(key)
            offered = earlier
        suffix = f" [{offered}]" if offered else ""
        answer = self.io.prompt(f"{prompt}{suffix}: ").strip()
        if not answer and earlier is not None:
            answer = earlier
        if answer:
            from fermix_core.setup_answers import worth_keeping

            if worth_keeping(answer):
                self.answers[key] = answer
        return answer

    def confirm(self, key: str, question: str, *, default: bool = False) -> bool:
        """A yes/no answer from the user, remembered like :meth:`line` under *key*."""
        answer = self.line(key, question, shown_default="Y/n" if default else "y/N").lower()
        if not answer:
            return default
        return answer in ("y", "yes")

    def table(self, *path: str) -> Any:
        """The tomlkit table at *path*, created (as a real ``[a.b]`` table) when missing."""
        import tomlkit

        node = self.document
        for key in path:
            if key not in node:
                node[key] = (
                    tomlkit.table(is_super_table=True) if key != path[-1] else tomlkit.table()
                )
            node = node[key]
        return node


def setup_steps(assembly: Assembly) -> list[SetupStepSpec]:
    return sorted(assembly.registry.typed(SetupStepSpec).values(), key=lambda s: (s.order, s.name))


def setup_options(assembly: Assembly) -> dict[str, tuple[SetupStepSpec, SetupOption]]:
    return {opt.flag: (step, opt) for step in setup_steps(assembly) for opt in step.options}


def parse_step_args(assembly: Assembly, args: Sequence[str]) -> dict[str, Any]:
    """Parse ``--flag VALUE`` / ``--flag=VALUE`` / boolean ``--flag`` against declared options."""
    known = setup_options(assembly)
    values: dict[str, Any] = {}
    items = list(args)
    while items:
        raw = items.pop(0)
        flag, eq, inline = raw.partition("=")
        if flag not in known:
            valid = ", ".join(sorted(known)) or "none"
            raise SetupError(
                f"unknown setup option {flag!r}; options contributed by setup steps: {valid}"
            )
        option = known[flag][1]
        if option.is_bool:
            values[flag] = True
            continue
        if eq:
            values[flag] = inline
        elif items:
            values[flag] = items.pop(0)
        else:
            raise SetupError(f"{flag} needs a value")
    return values


@dataclass
class SetupResult:
    steps: list[str]
    notes: list[str]
    moved_secrets: list[str]
    written: bool


def run_setup(
    assembly: Assembly,
    *,
    interactive: bool,
    options: Mapping[str, Any],
    io: SetupIO | None = None,
    only: Sequence[str] | None = None,
) -> SetupResult:
    """Run every step (or the steps named in *only*) against a copy of config.toml, then
    validate and write it once."""
    import tomlkit

    if assembly.document_error is not None:
        raise SetupError(f"config.toml cannot be read, fix it first:\n{assembly.document_error}")
    previous = assembly.document if assembly.document is not None else tomlkit.document()
    document = tomlkit.parse(tomlkit.dumps(previous))
    context = SetupContext(assembly, document, interactive, dict(options), io or SetupIO())
    assembly.home.ensure()
    from fermix_core import setup_answers

    if interactive:
        context.remembered = setup_answers.load(assembly.home)
        if context.remembered:
            context.io.echo(setup_answers.OFFERED_NOTE)
    try:
        result = _run_steps(assembly, context, previous, document, only)
    except BaseException:
        if interactive:
            setup_answers.keep(assembly.home, {**context.remembered, **context.answers})
        raise
    if interactive:
        done = {
            opt.flag
            for step in setup_steps(assembly)
            if step.name in result.steps
            for opt in step.options
        }
        setup_answers.finished(assembly.home, done | set(context.answers))
    return result


def _run_steps(
    assembly: Assembly,
    context: SetupContext,
    previous: Any,
    document: Any,
    only: Sequence[str] | None,
) -> SetupResult:
    import tomlkit

    from fermix_core.config import ConfigError, load_config, secret_fields
    from fermix_core.config.writer import write_document
    from fermix_core.secrets import SecretStoreError, store_plaintext_secrets
    from fermix_core.setup_secrets import SECRETS_IN_CONFIG_FLAG

    ran = []
    steps = setup_steps(assembly)
    if only:
        unknown = sorted(set(only) - {step.name for step in steps})
        if unknown:
            names = ", ".join(step.name for step in steps)
            raise SetupError(f"no setup step named {', '.join(unknown)}; the steps are: {names}")
        steps = [step for step in steps if step.name in set(only)]
    for step in steps:
        if context.interactive:
            context.io.echo(f"== {step.label or step.name} ==")
        resolve_ref(step.run)(context)
        ran.append(step.name)

    try:
        loaded = load_config(
            assembly.home,
            assembly.registry,
            unavailable=assembly.unavailable,
            environ=assembly.environ,
            document=document,
        )
    except ConfigError as exc:
        raise SetupError(
            f"the new configuration is not valid; nothing was written:\n{exc}"
        ) from exc
    profile = loaded.core.fermix_core.profile
    try:
        migration = store_plaintext_secrets(
            document,
            secret_fields(loaded, assembly.registry),
            profile=profile,
            previous_document=previous,
            keep_new_plaintext=context.plaintext_consent,
        )
    except SecretStoreError as exc:
        raise SetupStoreError(
            f"{exc}; or run `fermix setup` again and choose where the secret is kept "
            f"({SECRETS_IN_CONFIG_FLAG} keeps it in config.toml, mode 0600)"
        ) from exc
    context.notes.extend(migration.warnings)
    changed = (
        tomlkit.dumps(document) != tomlkit.dumps(previous) or not assembly.home.config_file.exists()
    )
    if changed:
        write_document(assembly.home, document)
    for action in context.after_write:
        try:
            action()
        except SetupError as exc:
            done = "config.toml was written" if changed else "config.toml was unchanged"
            raise SetupError(f"{done}, but {exc}") from exc
    return SetupResult(ran, context.notes, list(migration.moved), changed)

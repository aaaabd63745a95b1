"""Resolution: from a secret slot to its value, in a fixed order, never raising."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fermix_core.secrets.base import (
    DEFAULT_KEYRING_TIMEOUT,
    KEYRING_ACCOUNT,
    KEYRING_MARKER,
    ResolvedSecret,
    SecretRequest,
    as_table,
    bounded_call,
    default_backend,
    describe_value,
    dotted,
    field_parts,
    keyring_problem,
    keyring_service,
    log,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.plugins.host import PluginHost

DEFAULT_COMMAND_TIMEOUT = 10.0
#: Upper bound for a command timeout, the same the config model enforces; a value above it
#: (only possible when a caller bypasses validation) is clamped rather than trusted.
MAX_COMMAND_TIMEOUT = 600.0
#: A secret is a line, not a file; more output than this means the helper printed the wrong thing.
MAX_COMMAND_OUTPUT = 64 * 1024


class SecretResolver:
    """Resolves secret slots for one configuration load, caching each answer.

    The cache is per instance on purpose: a keyring unlock or a password-manager helper is
    slow and may prompt, so one boot asks once; a reload builds a new resolver.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        profile: str | None = "general",
        host: PluginHost | None = None,
        keyring_backend: Any = None,
        *,
        keyring_timeout: float | None = DEFAULT_KEYRING_TIMEOUT,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.profile = profile or "general"
        self.host = host
        self.keyring_backend = keyring_backend
        self.keyring_timeout = keyring_timeout
        self._cache: dict[tuple[tuple[str, ...], str], ResolvedSecret] = {}
        self._lock = threading.RLock()

    def resolve(self, secret_field: Any) -> ResolvedSecret:
        path, env, value = field_parts(secret_field)
        overridable = bool(getattr(secret_field, "overridable", True))
        key = (path, env)
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._resolve(path, env, value, overridable=overridable)
                self._cache[key] = cached
                if cached.value is not None:
                    _register_for_redaction(cached.value)
        return cached

    def value(self, secret_field: Any) -> str | None:
        return self.resolve(secret_field).value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    # ------------------------------------------------------------------ steps

    def _resolve(
        self, path: tuple[str, ...], env: str, value: object, *, overridable: bool = True
    ) -> ResolvedSecret:
        # A slot that is not overridable (a channel maps its own overlays) ignores its ENV
        # name here; the name still serves as the keyring coordinate.
        from_env = self.environ.get(env) if env and overridable else None
        if from_env:
            return ResolvedSecret(from_env, "env")
        if self.host is not None:
            request = SecretRequest(env=env, path=path, value=value, profile=self.profile)
            answer = self.host.resolve_secret(request)
            if isinstance(answer, str) and answer:
                return ResolvedSecret(answer, "plugin")
            if answer is not None and not isinstance(answer, str):
                log.warning(
                    "a fermix_resolve_secret hook returned %s for %s; ignored (return str or None)",
                    type(answer).__name__,
                    env or dotted(path),
                )
        return self._from_stored(path, env, value)

    def _from_stored(self, path: tuple[str, ...], env: str, value: object) -> ResolvedSecret:
        where = dotted(path) or env
        if value is None or value == "":
            return ResolvedSecret(None, "missing")
        if value == KEYRING_MARKER:
            return self._from_keyring(env, where)
        if isinstance(value, str):
            return ResolvedSecret(str(value), "plaintext")
        table = as_table(value)
        source = table.get("source") if table is not None else None
        if source == "env":
            return self._from_env_reference(table or {}, where)
        if source == "command":
            return run_secret_command(table or {}, where)
        return ResolvedSecret(
            None,
            "missing",
            f"{where}: unrecognised secret form {describe_value(value)}; use a string, "
            f'"@keyring", {{ source = "env", env = "NAME" }} or '
            f'{{ source = "command", command = ["helper", "arg"] }}',
        )

    def _from_keyring(self, env: str, where: str) -> ResolvedSecret:
        if not env:
            return ResolvedSecret(
                None,
                "missing",
                f'{where}: "@keyring" needs a slot with an environment variable name',
            )
        service = keyring_service(env, self.profile)
        backend = self.keyring_backend
        try:
            if backend is None:
                backend = bounded_call(default_backend, self.keyring_timeout)
            found = bounded_call(
                lambda: backend.get_password(service, KEYRING_ACCOUNT), self.keyring_timeout
            )
        except Exception as exc:  # locked, absent, D-Bus down, timed out: never raise
            problem = keyring_problem(backend, exc)
            log.warning("%s: %s", where, problem)
            return ResolvedSecret(None, "missing", f"{problem}; unlock the keyring or set {env}")
        if not found:
            return ResolvedSecret(
                None,
                "missing",
                f"keyring has no entry for service {service!r} (account {KEYRING_ACCOUNT!r}); "
                f"re-enter it with `fermix setup` or set {env}",
            )
        return ResolvedSecret(found, "keyring")

    def _from_env_reference(self, table: Mapping[str, Any], where: str) -> ResolvedSecret:
        name = table.get("env")
        if not isinstance(name, str) or not name:
            return ResolvedSecret(
                None, "missing", f'{where}: {{ source = "env" }} needs env = "NAME"'
            )
        found = self.environ.get(name)
        if not found:
            return ResolvedSecret(None, "missing", f"environment variable {name} is not set")
        return ResolvedSecret(found, "env")


def run_secret_command(table: Mapping[str, Any], where: str = "secret") -> ResolvedSecret:
    """Run a ``{ source = "command" }`` helper and take its stripped stdout as the secret.

    The argv runs without a shell, with no stdin, in its own process group so a timeout
    kills the helper and anything it spawned. Failures name the program and the exit code
    but never its output: a helper that prints the secret and then fails must not leak it.
    """
    argv = table.get("command")
    if isinstance(argv, str) or not isinstance(argv, list | tuple) or not argv:
        return ResolvedSecret(
            None,
            "missing",
            f'{where}: command must be a non-empty argv list such as ["pass", "show", "fermix/key"]'
            " (no shell strings)",
        )
    if not all(isinstance(part, str) for part in argv):
        return ResolvedSecret(None, "missing", f"{where}: every command argument must be a string")
    argv = [str(part) for part in argv]
    timeout = _command_timeout(table.get("timeout"))
    if isinstance(timeout, str):
        return ResolvedSecret(None, "missing", f"{where}: {timeout}")
    program = argv[0]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except FileNotFoundError:
        return ResolvedSecret(
            None, "missing", f"secret command {program!r} was not found; check PATH"
        )
    except OSError as exc:
        return ResolvedSecret(
            None, "missing", f"secret command {program!r} could not start: {type(exc).__name__}"
        )
    with proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return ResolvedSecret(
                None,
                "missing",
                f"secret command {program!r} timed out after {timeout:g}s and was killed",
            )
    if proc.returncode != 0:
        return ResolvedSecret(
            None, "missing", f"secret command {program!r} exited with code {proc.returncode}"
        )
    if len(out) > MAX_COMMAND_OUTPUT:
        return ResolvedSecret(
            None,
            "missing",
            f"secret command {program!r} printed more than {MAX_COMMAND_OUTPUT} bytes",
        )
    try:
        text = out.decode("utf-8").strip()
    except UnicodeDecodeError:
        return ResolvedSecret(
            None, "missing", f"secret command {program!r} printed bytes that are not UTF-8"
        )
    if not text:
        return ResolvedSecret(None, "missing", f"secret command {program!r} printed nothing")
    return ResolvedSecret(text, "command")


def _command_timeout(raw: object) -> float | str:
    if raw is None:
        return DEFAULT_COMMAND_TIMEOUT
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        return f"timeout must be a positive number of seconds (at most {MAX_COMMAND_TIMEOUT:g})"
    return min(float(raw), MAX_COMMAND_TIMEOUT)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _register_for_redaction(value: str) -> None:
    """Teach the log redactor this exact value, for secrets whose shape no pattern knows."""
    from fermix_core.logs import add_known_secret

    add_known_secret(value)


def remember_configured_secrets(
    config: Any, registry: Any, environ: Mapping[str, str] | None = None
) -> int:
    """Teach the redactor every secret the config names that is cheap to know now.

    Plain values in ``config.toml`` and the environment variables of every secret slot
    are registered at once — a plain key matches no token shape, and a provider may echo it
    in an error before anything resolved it. Keyring entries and command helpers are slow
    or may prompt, so they are registered when :class:`SecretResolver` resolves them.
    Returns how many values were handed to the redactor.
    """
    from fermix_core.config.slots import secret_fields

    env = os.environ if environ is None else environ
    count = 0
    for slot in secret_fields(config, registry):
        for value in (slot.value, env.get(slot.env) if slot.env else None):
            if isinstance(value, str) and value and value != KEYRING_MARKER:
                _register_for_redaction(value)
                count += 1
    return count

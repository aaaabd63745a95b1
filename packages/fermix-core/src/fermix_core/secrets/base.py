"""The vocabulary shared by secret resolution and storage: records, errors, coordinates.

Nothing here imports ``keyring`` at module level; the CLI's fast path imports this package
and must not pay for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

log = logging.getLogger("fermix.secrets")

#: Keyring account under which every Fermix secret is stored.
KEYRING_ACCOUNT = "fermix"
#: The config value that says "this secret lives in the OS keyring".
KEYRING_MARKER = "@keyring"
#: Profiles that map to the bare ``fermix:<ENV>`` service, so existing installs keep working.
DEFAULT_PROFILES = frozenset({"", "general"})
#: A keyring call that has not answered by then is treated as unavailable (a Secret Service
#: waiting on an unlock prompt nobody will see, a hung D-Bus).
DEFAULT_KEYRING_TIMEOUT = 20.0

Source = Literal["env", "plugin", "keyring", "command", "plaintext", "missing"]
T = TypeVar("T")


class SecretError(Exception):
    """Base class for secret handling errors; messages never contain secret values."""


class SecretStoreError(SecretError):
    """A new plaintext secret could not be moved out of config.toml, so the save must stop."""


@dataclass(frozen=True)
class SecretRequest:
    """What a ``fermix_resolve_secret`` hook is asked: which slot, and what config.toml holds."""

    env: str
    path: tuple[str, ...]
    value: object
    profile: str

    def __repr__(self) -> str:
        return (
            f"SecretRequest(env={self.env!r}, path={self.path!r}, "
            f"value={describe_value(self.value)}, profile={self.profile!r})"
        )


@dataclass(frozen=True)
class ResolvedSecret:
    """The outcome of resolving one slot. ``problem`` explains a ``missing`` that needs fixing.

    ``missing`` with no problem simply means "not configured"; with a problem it means the
    slot is configured but its source failed, which is what ``fermix doctor`` reports.
    """

    value: str | None
    source: Source
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        shown = "None" if self.value is None else "'***'"
        return f"ResolvedSecret(value={shown}, source={self.source!r}, problem={self.problem!r})"

    __str__ = __repr__


@dataclass
class SecretMigration:
    """What saving did with plaintext secrets. Paths are dotted strings; values never appear."""

    moved: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    backend: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.moved)


# --------------------------------------------------------------------------- coordinates


def keyring_service(env: str, profile: str | None = None) -> str:
    """The keyring service name for a secret.

    The default profile keeps the bare ``fermix:<ENV>`` so installs made before profiles
    existed need no migration; any other profile namespaces its entries so two homes on one
    machine (``~/.fermix`` and ``~/.fermix-dev``) never overwrite each other's secrets.
    """
    if not env:
        raise ValueError("a keyring coordinate needs the secret's environment variable name")
    if profile is None or profile.strip() in DEFAULT_PROFILES:
        return f"fermix:{env}"
    return f"fermix:{profile.strip()}:{env}"


def profile_from_document(document: Mapping[str, Any] | None) -> str:
    """``[fermix_core] profile`` from a raw config document, ``general`` when unset."""
    core = document.get("fermix_core") if isinstance(document, Mapping) else None
    profile = core.get("profile") if isinstance(core, Mapping) else None
    return str(profile) if isinstance(profile, str) and profile.strip() else "general"


def backend_name(backend: object) -> str:
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


def keyring_problem(backend: object | None, exc: BaseException) -> str:
    name = backend_name(backend) if backend is not None else "keyring"
    return f"keyring unavailable: {name}: {type(exc).__name__}"


def default_backend() -> Any:
    import keyring

    return keyring.get_keyring()


def bounded_call(call: Callable[[], T], timeout: float | None) -> T:
    """Run a keyring call with a deadline.

    Keyring backends can block indefinitely (an unlock prompt on a headless machine, a D-Bus
    peer that never answers). The call runs on a daemon thread so a hang costs the caller at
    most *timeout* seconds and then surfaces as :class:`TimeoutError`.
    """
    if timeout is None:
        return call()
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # re-raised on the caller's thread
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="fermix-keyring", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"keyring did not answer within {timeout:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def keyring_writer_available(backend: Any = None) -> bool:
    """Whether *backend* (default: keyring's choice) can actually store a secret.

    keyring falls back to backends that accept nothing (``fail`` raises on every call,
    ``null`` silently drops writes, a chainer with nothing to chain does the latter); saving
    into one of those would lose the secret, so they count as "no writer".
    """
    try:
        from keyring.backends import chainer, fail, null

        chosen = backend if backend is not None else default_backend()
        if isinstance(chosen, fail.Keyring | null.Keyring):
            return False
        if isinstance(chosen, chainer.ChainerBackend):
            return any(keyring_writer_available(b) for b in chosen.backends)
    except Exception as exc:
        log.debug("keyring writer probe failed: %s", type(exc).__name__)
        return False
    return True


def keyring_writer_problem(
    backend: Any = None, timeout: float | None = DEFAULT_KEYRING_TIMEOUT
) -> tuple[Any, str | None]:
    """``(backend, None)`` when a keyring can store secrets, else ``(backend, reason)``.

    The reason names the backend keyring chose (or why choosing one failed) and never a
    value. Cheap: it only inspects the backend, it writes nothing.
    """
    chosen = backend
    try:
        if chosen is None:
            chosen = bounded_call(default_backend, timeout)
    except Exception as exc:
        return None, keyring_problem(None, exc)
    if not keyring_writer_available(chosen):
        return chosen, f"no keyring writer ({backend_name(chosen)})"
    return chosen, None


# --------------------------------------------------------------------------- value forms


def is_plaintext(value: object) -> bool:
    return isinstance(value, str) and value != "" and value != KEYRING_MARKER


def as_table(value: object) -> dict[str, Any] | None:
    """A reference table as a plain dict, whether it is a dict, a tomlkit table or a model."""
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, dict) else None
    return None


def describe_value(value: object) -> str:
    """A repr-safe description of a stored value: the form, never the secret itself."""
    if value is None:
        return "None"
    if value == KEYRING_MARKER:
        return repr(KEYRING_MARKER)
    if isinstance(value, str):
        return "<plaintext>" if value else "''"
    table = as_table(value)
    if table is not None:
        return f"<{table.get('source', 'table')} reference>"
    return f"<{type(value).__name__}>"


def field_parts(item: Any) -> tuple[tuple[str, ...], str, object]:
    """Accept a ``SecretField``-like object, or a ``(path, env[, value])`` tuple."""
    if isinstance(item, tuple):
        path, env, *rest = item
        value = rest[0] if rest else None
    else:
        path, env, value = item.path, item.env, getattr(item, "value", None)
    return tuple(str(p) for p in path), str(env or ""), value


def dotted(path: Iterable[str]) -> str:
    return ".".join(path)

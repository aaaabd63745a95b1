"""The speech-to-text engine: ``[fermix_core.transcription]`` → one ready backend.

:func:`select_backend` decides, offline, what a voice note would be sent to: the backend
named by ``backend`` (registered through ``fermix_transcription_backends``), its model
(``model``, else the spec's default; ``None`` for a modelless backend) and its credential.
The credential is the backend's own key slot (``TranscriptionBackendSpec.key_field``,
e.g. ``openai_api_key``) when that resolves — it overrides everything — else, for a
backend that names a ``reuse_provider`` and does not set ``key_required``, that chat
provider's API key. An OAuth login is never reused: no speech-to-text service here
accepts one. The doctor row and the daemon use the same function, so what ``fermix
doctor`` reports is what the daemon does.

:class:`Transcriber` is what the daemon holds: it checks sizes against ``max_file_mb``
and builds the backend on the first audio message (resolving a key may consult the
keyring, so that happens off the event loop, once).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from fermix_core.specs import TranscriptionBackendSpec, resolve_ref
from fermix_core.transcription.contract import (
    AudioClip,
    BackendSettings,
    TranscriptionBackend,
    TranscriptionFailed,
    TranscriptionNotConfigured,
    TranscriptionTooLarge,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import httpx

    from fermix_core.config import LoadedConfig
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.secrets import SecretResolver

__all__ = ["MB", "Selection", "Transcriber", "select_backend", "setup_command"]

log = logging.getLogger("fermix.transcription")

MB = 1024 * 1024
SECTION = ("fermix_core", "transcription")


def setup_command(backend: str) -> str:
    return f"fermix setup --transcription-backend {backend} --transcription-api-key KEY"


@dataclass(frozen=True)
class Selection:
    """What ``[fermix_core.transcription]`` selects. ``problem`` is set when it is unusable."""

    backend: str
    spec: TranscriptionBackendSpec | None
    model: str | None
    base_url: str | None
    max_file_mb: int
    #: ``"fermix_core.transcription.openai_api_key (keyring)"``, ``"reused from ..."``.
    key_source: str | None = None
    problem: str | None = None
    api_key: str | None = field(default=None, repr=False)
    #: Set when a ``model`` is configured for a backend that takes none.
    ignored_model: str | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None

    @property
    def cap_bytes(self) -> int:
        return self.max_file_mb * MB


def _own_slot(config: LoadedConfig, registry: SpecRegistry, key_field: str) -> Any:
    from fermix_core.config import secret_fields

    path = (*SECTION, key_field)
    return next((slot for slot in secret_fields(config, registry) if slot.path == path), None)


def select_backend(
    config: LoadedConfig,
    registry: SpecRegistry,
    *,
    resolver: SecretResolver,
    environ: Mapping[str, str] | None = None,
    auth_store: Any = None,
    host: Any = None,
) -> Selection:
    """The selected backend, model and credential; never raises for a missing piece."""
    section = config.core.fermix_core.transcription
    name = section.backend
    spec = registry.typed(TranscriptionBackendSpec).get(name)
    common: dict[str, Any] = {
        "backend": name,
        "spec": spec,
        "base_url": section.base_url,
        "max_file_mb": section.max_file_mb,
    }
    if spec is None:
        return Selection(
            model=section.model,
            problem=(
                f'no transcription backend "{name}" is loaded; the plugin that provides it '
                "may be missing or disabled (see `fermix plugins list`)"
            ),
            **common,
        )
    modelless = spec.default_model is None
    model = None if modelless else (section.model or spec.default_model)
    ignored = section.model if modelless and section.model else None
    common.update(model=model, ignored_model=ignored)
    own_problem: str | None = None
    if spec.key_field:
        slot = _own_slot(config, registry, spec.key_field)
        if slot is not None:
            resolved = resolver.resolve(slot)
            if resolved.value:
                where = ".".join((*SECTION, spec.key_field))
                return Selection(
                    key_source=f"{where} ({resolved.source})", api_key=resolved.value, **common
                )
            if slot.value not in (None, ""):
                # Configured but not resolvable (locked keyring, unset variable).
                own_problem = resolved.problem or f"{slot.env} did not resolve"
    if spec.key_field is None and spec.reuse_provider is None:
        return Selection(key_source="none needed", **common)
    key_name = ".".join((*SECTION, spec.key_field)) if spec.key_field else None
    if own_problem is not None:
        return Selection(problem=f"{key_name}: {own_problem}", **common)
    reuse = spec.reuse_provider
    if reuse and not spec.key_required:
        from fermix_core.routing.survey import survey

        state = survey(
            config, registry, environ, resolver=resolver, auth_store=auth_store, host=host
        ).get(reuse)
        if state is not None and state.auth_mode == "oauth":
            return Selection(
                problem=(
                    f"the {reuse} provider signs in with OAuth, which does not authorize "
                    f"speech-to-text; set {key_name} — run `{setup_command(name)}`"
                ),
                **common,
            )
        if state is not None and state.credential.configured and state.credential.api_key:
            return Selection(
                key_source=(
                    f"reused from [fermix_core.providers.{reuse}] ({state.credential.source})"
                ),
                api_key=state.credential.api_key,
                **common,
            )
        return Selection(
            problem=(
                f"the {name} backend has no API key: set {key_name} or the {reuse} provider's "
                f"api_key — run `{setup_command(name)}`"
            ),
            **common,
        )
    return Selection(
        problem=f"the {name} backend needs {key_name} — run `{setup_command(name)}`", **common
    )


class Transcriber:
    """The daemon's speech-to-text: the size cap, and the backend built on first use."""

    def __init__(
        self,
        config: LoadedConfig,
        registry: SpecRegistry,
        *,
        environ: Mapping[str, str] | None = None,
        host: Any = None,
        auth_store: Any = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.environ = environ
        self.host = host
        self.auth_store = auth_store
        self._http = http
        self._owns_http = False
        self._backend: TranscriptionBackend | None = None
        self._lock = anyio.Lock()
        section = config.core.fermix_core.transcription
        self.backend_name = section.backend
        self.cap_bytes = section.max_file_mb * MB
        self.max_file_mb = section.max_file_mb

    def check_size(self, size: int | None) -> None:
        """Refuse a file over ``max_file_mb`` (declared or measured); ``None`` passes."""
        if size is not None and size > self.cap_bytes:
            raise TranscriptionTooLarge(size, self.cap_bytes)

    async def transcribe(self, clip: AudioClip) -> str:
        self.check_size(clip.size)
        backend = await self.backend()
        try:
            text = await backend.transcribe(clip)
        except TranscriptionFailed:
            raise
        except Exception as exc:
            log.exception("transcription backend %s failed unexpectedly", self.backend_name)
            raise TranscriptionFailed(f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(text, str):
            raise TranscriptionFailed(
                f"backend {self.backend_name} returned {type(text).__name__}, not str"
            )
        return text.strip()

    async def backend(self) -> TranscriptionBackend:
        """The backend, built once; raises :class:`TranscriptionNotConfigured` until it can be."""
        if self._backend is not None:
            return self._backend
        async with self._lock:
            if self._backend is None:
                selection = await anyio.to_thread.run_sync(self._select)
                if selection.problem is not None:
                    log.warning("transcription is not configured: %s", selection.problem)
                    raise TranscriptionNotConfigured(selection.problem)
                self._backend = self._build(selection)
        return self._backend

    def _select(self) -> Selection:
        from fermix_core.secrets import SecretResolver

        # A fresh resolver each attempt: a key stored since the last voice note is found.
        resolver = SecretResolver(
            environ=self.environ,
            profile=self.config.core.fermix_core.profile,
            host=self.host,
        )
        return select_backend(
            self.config,
            self.registry,
            resolver=resolver,
            environ=self.environ,
            auth_store=self.auth_store,
            host=self.host,
        )

    def _build(self, selection: Selection) -> TranscriptionBackend:
        spec = selection.spec
        assert spec is not None
        assert spec.factory is not None
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                limits=httpx.Limits(keepalive_expiry=15.0), follow_redirects=False
            )
            self._owns_http = True
        settings = BackendSettings(
            name=selection.backend,
            http=self._http,
            api_key=selection.api_key,
            model=selection.model,
            base_url=selection.base_url,
        )
        try:
            backend = resolve_ref(spec.factory)(settings)
        except Exception as exc:
            log.exception("could not build transcription backend %s", selection.backend)
            raise TranscriptionNotConfigured(
                f"the {selection.backend} backend could not be built ({type(exc).__name__}); "
                "reinstall its plugin or check `fermix doctor`"
            ) from None
        log.info(
            "transcription: %s%s, key %s",
            selection.backend,
            f" ({selection.model})" if selection.model else "",
            selection.key_source,
        )
        return backend

    async def aclose(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.aclose()

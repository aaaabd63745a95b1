"""Live model lists for setup, and the Ollama context probe for ``fermix doctor``.

The static catalog stays authoritative for defaults and context windows; a live list only
widens what setup can offer. So a listing never raises: on any failure it returns the
error text (for setup to show beside a free-form model input) and an empty list.

* OpenRouter: ``GET {base}/models`` — the whole upstream catalog, kept to models that
  accept tools (the agent loop cannot work without them), newest first.
* Ollama: ``GET {root}/api/tags`` — the models pulled on that server, nothing else.

The probe exists because Ollama truncates silently: a model whose catalog window is 128k
may be served with a 4k ``num_ctx``, and compaction budgets computed from the catalog would
then overflow without any error. ``POST /api/show`` tells what the model pins; when it pins
nothing, ``GET /api/ps`` tells what a loaded model was actually given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from fermix_core.specs import ModelInfo

from fermix_providers import catalog
from fermix_providers.http.base import new_client
from fermix_providers.http.errors import server_sentence
from fermix_providers.ollama.urls import ollama_compat_base, ollama_native_root

__all__ = [
    "OPENROUTER_BASE_URL",
    "ListedModel",
    "ModelListing",
    "ProbeResult",
    "list_models",
    "list_ollama_models",
    "list_openrouter_models",
    "ollama_catalog_entry",
    "ollama_compat_base",
    "ollama_native_root",
    "probe_ollama",
]

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
#: Listing and probing are interactive; a slow answer is reported, not waited out.
LOOKUP_TIMEOUT_SECONDS = 10.0
_OLLAMA_HELP = "start it with `ollama serve`, or install it from https://ollama.com/download"


@dataclass(frozen=True)
class ListedModel:
    """One model a live catalog offers."""

    id: str
    label: str = ""
    #: From the live catalog when it says, else from the static one, else unknown.
    context_window: int | None = None
    vision: bool | None = None
    #: Unix time the upstream catalog lists the model as created (OpenRouter only).
    created: int | None = None


@dataclass(frozen=True)
class ModelListing:
    """A live model list, or why there is none (``error``, meant for people)."""

    models: tuple[ListedModel, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.models]


@dataclass(frozen=True)
class ProbeResult:
    """The Ollama doctor row: pass or fail, what was seen, and what to do about it."""

    ok: bool
    message: str
    fix: str | None = None
    #: The context window the server serves the model with, when it could be read.
    served_context: int | None = None
    #: False when the served window could not be read at all (nothing pinned, model not
    #: loaded); ``ok`` is then False too, since Ollama's default is far below most windows.
    verified: bool = True


# --------------------------------------------------------------------------- URLs


def _strip_latest(name: str) -> str:
    return name[: -len(":latest")] if name.endswith(":latest") else name


def _with_tag(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _describe(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --------------------------------------------------------------------------- listings


async def _get_json(
    client: httpx.AsyncClient | None,
    url: str,
    *,
    method: str = "GET",
    body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = LOOKUP_TIMEOUT_SECONDS,
) -> httpx.Response:
    """One request with the lookup timeout, on the shared client or a short-lived one."""
    if client is not None:
        return await client.request(method, url, json=body, headers=headers, timeout=timeout)
    async with new_client() as own:
        return await own.request(method, url, json=body, headers=headers, timeout=timeout)


def _failure(who: str, response: httpx.Response) -> str:
    sentence = server_sentence(response.text)
    return f"{who} answered HTTP {response.status_code}" + (f": {sentence}" if sentence else "")


async def list_openrouter_models(
    client: httpx.AsyncClient | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = LOOKUP_TIMEOUT_SECONDS,
) -> ModelListing:
    """OpenRouter's tool-capable models, newest first.

    The list is public; the key is sent only when given (so a restricted key's own view
    is what setup shows). It never appears in the returned error.
    """
    base = (base_url or OPENROUTER_BASE_URL).rstrip("/")
    headers = {"authorization": f"Bearer {api_key}"} if api_key else None
    try:
        response = await _get_json(client, f"{base}/models", headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        return ModelListing(error=f"could not fetch the OpenRouter model list ({_describe(exc)})")
    if response.status_code >= 400:
        return ModelListing(error=_failure("OpenRouter", response))
    try:
        data = response.json()
    except ValueError:
        return ModelListing(error="OpenRouter answered with a model list that is not JSON")
    rows = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(rows, list):
        return ModelListing(error="OpenRouter answered without a model list (no 'data' array)")
    models = [m for m in (_openrouter_model(row) for row in rows) if m is not None]
    models.sort(key=lambda m: (-(m.created or 0), m.id))
    return ModelListing(models=tuple(models))


def _openrouter_model(row: Any) -> ListedModel | None:
    if not isinstance(row, Mapping):
        return None
    model_id = row.get("id")
    params = row.get("supported_parameters")
    if not isinstance(model_id, str) or not model_id or not isinstance(params, list):
        return None
    if "tools" not in params:
        return None
    known = next((m for m in catalog.OPENROUTER_MODELS if m.id == model_id), None)
    architecture = row.get("architecture")
    modalities = architecture.get("input_modalities") if isinstance(architecture, Mapping) else None
    vision = "image" in modalities if isinstance(modalities, list) else None
    window = row.get("context_length")
    created = row.get("created")
    name = row.get("name")
    return ListedModel(
        id=model_id,
        label=name if isinstance(name, str) else "",
        context_window=known.context_window
        if known
        else (window if isinstance(window, int) and window > 0 else None),
        vision=vision if vision is not None else (known.vision if known else None),
        created=created if isinstance(created, int) else None,
    )


async def list_ollama_models(
    base_url: str | None = None,
    client: httpx.AsyncClient | None = None,
    *,
    timeout: float = LOOKUP_TIMEOUT_SECONDS,
) -> ModelListing:
    """The models pulled on the Ollama server at *base_url*, by name."""
    root = ollama_native_root(base_url)
    try:
        response = await _get_json(client, f"{root}/api/tags", timeout=timeout)
    except httpx.HTTPError as exc:
        return ModelListing(
            error=f"cannot reach Ollama at {root} ({_describe(exc)}); {_OLLAMA_HELP}"
        )
    if response.status_code >= 400:
        return ModelListing(error=f"{_failure('Ollama', response)}; is {root} an Ollama server?")
    try:
        data = response.json()
    except ValueError:
        return ModelListing(error=f"{root} answered /api/tags with something that is not JSON")
    rows = data.get("models") if isinstance(data, Mapping) else None
    if not isinstance(rows, list):
        return ModelListing(error=f"{root} answered /api/tags without a model list")
    seen: dict[str, ListedModel] = {}
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        raw = row.get("name") or row.get("model")
        if not isinstance(raw, str) or not raw:
            continue
        model_id = _strip_latest(raw)
        known = ollama_catalog_entry(model_id)
        details = row.get("details")
        size = details.get("parameter_size") if isinstance(details, Mapping) else None
        seen[model_id] = ListedModel(
            id=model_id,
            label=f"{model_id} ({size})" if isinstance(size, str) and size else model_id,
            context_window=known.context_window if known else None,
            vision=known.vision if known else None,
        )
    return ModelListing(models=tuple(seen[k] for k in sorted(seen)))


def ollama_catalog_entry(model_id: str) -> ModelInfo | None:
    """The catalog entry for a tag, falling back to its family (``gemma3:12b`` → ``gemma3``)."""
    exact = next((m for m in catalog.OLLAMA_MODELS if m.id == model_id), None)
    if exact is not None:
        return exact
    family = model_id.split(":", 1)[0]
    return next((m for m in catalog.OLLAMA_MODELS if m.id == family), None)


async def list_models(
    provider: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    client: httpx.AsyncClient | None = None,
    timeout: float = LOOKUP_TIMEOUT_SECONDS,
) -> ModelListing | None:
    """The live list for *provider*, or ``None`` when it has none (the catalog is the list)."""
    if provider == "openrouter":
        return await list_openrouter_models(
            client, base_url=base_url, api_key=api_key, timeout=timeout
        )
    if provider == "ollama":
        return await list_ollama_models(base_url, client, timeout=timeout)
    return None


# --------------------------------------------------------------------------- Ollama probe


def _parameters(raw: Any) -> dict[str, str]:
    """``/api/show`` ``parameters``: one ``name value`` per line (names may repeat)."""
    found: dict[str, str] = {}
    if not isinstance(raw, str):
        return found
    for line in raw.splitlines():
        name, _, value = line.strip().partition(" ")
        if name:
            found.setdefault(name, value.strip())
    return found


def _trained_context(model_info: Any) -> int | None:
    if not isinstance(model_info, Mapping):
        return None
    arch = model_info.get("general.architecture")
    value = model_info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    if value is None:
        value = next((v for k, v in model_info.items() if k.endswith(".context_length")), None)
    return value if isinstance(value, int) and value > 0 else None


async def _loaded_context(
    client: httpx.AsyncClient | None, root: str, model: str, timeout: float
) -> int | None:
    """The window a *loaded* model was given, from ``/api/ps``; ``None`` if not loaded."""
    try:
        response = await _get_json(client, f"{root}/api/ps", timeout=timeout)
        data = response.json() if response.status_code < 400 else None
    except (httpx.HTTPError, ValueError):
        return None
    rows = data.get("models") if isinstance(data, Mapping) else None
    wanted = _with_tag(model)
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping):
            continue
        names = {_with_tag(n) for n in (row.get("name"), row.get("model")) if isinstance(n, str)}
        size = row.get("context_length")
        if wanted in names and isinstance(size, int) and size > 0:
            return size
    return None


def _context_fix(model: str, window: int) -> str:
    return (
        f"serve at least {window} tokens: set OLLAMA_CONTEXT_LENGTH={window} where "
        f"`ollama serve` runs, or create a variant with `PARAMETER num_ctx {window}` in a "
        f"Modelfile (`ollama create {model}-{window // 1024}k -f Modelfile`) and use it"
    )


async def probe_ollama(
    base_url: str | None,
    model: str,
    catalog_window: int | None,
    client: httpx.AsyncClient | None = None,
    *,
    timeout: float = LOOKUP_TIMEOUT_SECONDS,
) -> ProbeResult:
    """Check that Ollama serves *model* with at least its catalog context window."""
    root = ollama_native_root(base_url)
    try:
        response = await _get_json(
            client, f"{root}/api/show", method="POST", body={"model": model}, timeout=timeout
        )
    except httpx.HTTPError as exc:
        return ProbeResult(
            False,
            f"cannot reach Ollama at {root} ({_describe(exc)})",
            fix=f"{_OLLAMA_HELP}; or point OLLAMA_BASE_URL at the host that runs it",
        )
    if response.status_code == 404:
        return ProbeResult(
            False, f"model {model!r} is not pulled on {root}", fix=f"ollama pull {model}"
        )
    if response.status_code >= 400:
        return ProbeResult(False, f"{_failure('Ollama', response)} for /api/show")
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, Mapping):
        return ProbeResult(False, f"{root} answered /api/show with something that is not JSON")

    trained = _trained_context(data.get("model_info"))
    pinned = _parameters(data.get("parameters")).get("num_ctx", "")
    served = int(pinned) if re.fullmatch(r"\d+", pinned) else None
    source = "its Modelfile num_ctx"
    if served is None:
        served = await _loaded_context(client, root, model, timeout)
        source = "the loaded model (ollama ps)"

    if catalog_window is None:
        seen = f"served with {served} tokens" if served else "pulled"
        return ProbeResult(
            True,
            f"{model} is {seen} on {root}; the catalog has no window to compare against",
            served_context=served,
            verified=served is not None,
        )
    if trained is not None and trained < catalog_window:
        return ProbeResult(
            False,
            f"{model} on {root} supports only {trained} tokens, below the "
            f"{catalog_window}-token catalog window; longer conversations will be truncated",
            fix="pull the model variant the catalog describes, or choose another model",
            served_context=served,
        )
    if served is None:
        return ProbeResult(
            False,
            f"{model} on {root} pins no num_ctx and is not loaded, so it will get the "
            f"server's default context (OLLAMA_CONTEXT_LENGTH, else 4k-256k by VRAM), "
            f"which may be below the {catalog_window}-token catalog window and is truncated "
            "silently",
            fix=_context_fix(model, catalog_window),
            verified=False,
        )
    if served < catalog_window:
        return ProbeResult(
            False,
            f"{model} on {root} is served with num_ctx {served} ({source}), below the "
            f"{catalog_window}-token catalog window; Ollama truncates longer prompts silently",
            fix=_context_fix(model, catalog_window),
            served_context=served,
        )
    return ProbeResult(
        True,
        f"{model} on {root} is served with {served} tokens ({source}); catalog window "
        f"{catalog_window}",
        served_context=served,
    )

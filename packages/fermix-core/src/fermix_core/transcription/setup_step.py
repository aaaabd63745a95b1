"""The ``transcription`` step of ``fermix setup``, and the model snap on a backend switch.

Scripted runs act only when a ``--transcription-*`` flag is given; interactive runs ask for
the backend, its model (not for a modelless backend) and its key. ``model`` is one shared
key, so switching backends — here or with ``fermix config set
fermix_core.transcription.backend`` — snaps it to the new backend's default (removes it for
a modelless one) and drops a ``base_url`` that pointed at the old service
(:func:`snap_to_backend`).

``--transcription-api-key`` stores under the selected backend's own slot
(``openai_api_key``, ``xai_api_key``, ``deepgram_api_key``); ``run_setup`` moves it to the
OS keyring before anything is written, so config.toml holds ``"@keyring"``. Without a
keyring the rules of :mod:`fermix_core.setup_secrets` apply (``--secrets-in-config``, or
``--transcription-api-key-env NAME`` / ``--transcription-api-key-command CMD``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fermix_core.specs import SetupOption, SetupStepSpec, TranscriptionBackendSpec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fermix_core.plugins.registry import SpecRegistry
    from fermix_core.setup import SetupContext

__all__ = ["TRANSCRIPTION_STEP", "snap_to_backend", "transcription_step"]

BACKEND_FLAG = "--transcription-backend"
MODEL_FLAG = "--transcription-model"
KEY_FLAG = "--transcription-api-key"

TRANSCRIPTION_STEP = SetupStepSpec(
    name="transcription",
    label="Transcription",
    run="fermix_core.transcription.setup_step:transcription_step",
    order=500,
    options=(
        SetupOption(
            flag=BACKEND_FLAG, help="Speech-to-text for voice notes: openai, xai or deepgram."
        ),
        SetupOption(
            flag=MODEL_FLAG,
            help="Transcription model (default: the backend's; xai takes none).",
        ),
        SetupOption(
            flag=KEY_FLAG,
            help="API key for the selected transcription backend (overrides the chat key).",
            secret=True,
        ),
        SetupOption(
            flag=f"{KEY_FLAG}-env",
            help="Read the transcription key from this environment variable at run time.",
        ),
        SetupOption(
            flag=f"{KEY_FLAG}-command",
            help="Run this helper (no shell) and use what it prints as the transcription key.",
        ),
    ),
)
_FLAGS = tuple(option.flag for option in TRANSCRIPTION_STEP.options)
_KEEP = "\0keep"
_EXPLAIN = """\
  Voice notes and audio files sent to Fermix are transcribed before the agent reads them.
  openai (gpt-4o-mini-transcribe) and xai reuse the chat provider's API key unless you give
  one here (xAI's OAuth login does not work for speech-to-text); deepgram needs its own key."""


def snap_to_backend(table: Any, backend: str, registry: SpecRegistry) -> list[str]:
    """After a switch to *backend*: ``model`` becomes its default (removed for a modelless
    backend) and ``base_url`` is removed. Returns what changed, one line each."""
    spec = registry.typed(TranscriptionBackendSpec).get(backend)
    changed: list[str] = []
    default = spec.default_model if spec is not None else None
    if default is not None:
        if table.get("model") != default:
            table["model"] = default
            changed.append(f'fermix_core.transcription.model: -> "{default}" ({backend} default)')
    elif "model" in table:
        del table["model"]
        changed.append(f"fermix_core.transcription.model: removed ({backend} takes no model)")
    if "base_url" in table:
        del table["base_url"]
        changed.append("fermix_core.transcription.base_url: removed (it named the old service)")
    return changed


def _current(context: SetupContext) -> dict[str, Any]:
    from fermix_core.config.document import dig, plain

    found = dig(plain(context.document), ("fermix_core", "transcription"), None)
    return dict(found) if isinstance(found, dict) else {}


def transcription_step(context: SetupContext) -> None:
    from fermix_core.setup import SetupInputError
    from fermix_core.setup_secrets import (
        choose_storage,
        reference_from_flags,
        require_plaintext_storage,
    )

    flagged = any(flag in context.options for flag in _FLAGS)
    if not context.interactive and not flagged:
        return
    specs = context.registry.typed(TranscriptionBackendSpec)
    if not specs:
        if not flagged:
            return  # nothing to offer (fermix-providers is not installed or not loaded)
        raise SetupInputError(
            "no transcription backend is loaded (fermix-providers registers openai, xai and "
            "deepgram); see `fermix plugins list`"
        )
    current = _current(context)
    was = str(current.get("backend") or "openai")
    if context.interactive and not flagged:
        context.io.echo(_EXPLAIN)
        question = (
            "Change the transcription settings?"
            if current
            else "Set up voice-note transcription now?"
        )
        if not context.confirm("transcription: set up", question):
            return
    names = ", ".join(sorted(specs))
    backend = context.ask(BACKEND_FLAG, f"Backend ({names})", default=was).strip().lower()
    spec = specs.get(backend)
    if spec is None:
        raise SetupInputError(f"{BACKEND_FLAG}: {backend!r} is not one of {names}")
    table = context.table("fermix_core", "transcription")
    if backend != was:
        table["backend"] = backend
        snap_to_backend(table, backend, context.registry)
    elif backend != "openai" or "backend" in current:
        table["backend"] = backend

    if spec.default_model is None:
        if MODEL_FLAG in context.options:
            raise SetupInputError(f"{MODEL_FLAG}: the {backend} backend is modelless; drop it")
        model = None
    else:
        effective = str(table.get("model") or spec.default_model)
        model = context.ask(MODEL_FLAG, "Model", default=effective).strip()
        if model and model != effective:
            table["model"] = model
        model = model or effective

    key_field = spec.key_field
    if key_field is None:
        if any(f in context.options for f in (KEY_FLAG, f"{KEY_FLAG}-env", f"{KEY_FLAG}-command")):
            raise SetupInputError(f"{KEY_FLAG}: the {backend} backend takes no key")
    else:
        label = f"{backend} transcription key"
        reference = reference_from_flags(context, KEY_FLAG, label=label)
        stored = table.get(key_field)
        if reference is not None:
            table[key_field] = reference
        elif KEY_FLAG in context.options:
            key = str(context.option(KEY_FLAG)).strip()
            if not key or any(ch.isspace() for ch in key):
                raise SetupInputError(f"{KEY_FLAG}: an API key is one word, no spaces")
            require_plaintext_storage(context, KEY_FLAG, label=label)
            table[key_field] = key
        elif context.interactive:
            reuse = (
                f"Enter reuses the {spec.reuse_provider} chat key"
                if spec.reuse_provider and not spec.key_required and not stored
                else "Enter keeps the stored one"
                if stored
                else "required"
            )
            choice = choose_storage(
                context, KEY_FLAG, label=label, env_var=None, can_keep=bool(stored)
            )
            if choice.kind == "reference":
                table[key_field] = choice.value
            elif choice.kind != "keep":
                answer = context.ask(
                    KEY_FLAG, f"API key ({reuse})", default=_KEEP, secret=True
                ).strip()
                if answer != _KEEP:
                    table[key_field] = answer
        if spec.key_required and not table.get(key_field):
            raise SetupInputError(
                f"the {backend} backend needs its own key: pass {KEY_FLAG} KEY "
                f"(or {KEY_FLAG}-env NAME)"
            )
    if not table:  # nothing differs from the defaults: leave no empty table behind
        del context.document["fermix_core"]["transcription"]
    shown = f"{backend} ({model})" if model else backend
    context.notes.append(
        f"transcription: {shown}; `fermix doctor` checks its key, `fermix restart` applies it"
    )

"""Reasoning effort: one vocabulary, narrowed per provider and per model, never a 400.

Effort is configured in one canonical vocabulary (``none`` … ``max``) but each provider
accepts a contiguous slice of it (``ProviderSpec.reasoning_efforts``) and a catalog model may
lower the ceiling further (``ModelInfo.max_effort``). Rather than letting an over-reaching
setting fail at the provider on every turn, routing maps it onto what the route can take:
above the ceiling clamps down, below the floor rises (Anthropic has no ``none``), and a
provider that takes no effort gets none at all. The rules work from spec data only, so
core applies them to any provider plugin without knowing it.

This module imports nothing beyond :mod:`fermix_core.specs`: provider registration modules
re-export these functions and must stay cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass

from fermix_core.specs import REASONING_EFFORTS, ModelInfo, ProviderSpec

__all__ = [
    "REASONING_EFFORTS",
    "EffortError",
    "EffortResolution",
    "accepted_efforts",
    "clamp_effort",
    "find_model",
    "resolve_effort",
]


class EffortError(ValueError):
    """A reasoning effort outside the canonical vocabulary."""


def find_model(spec: ProviderSpec, model_id: str) -> ModelInfo | None:
    """The catalog entry for *model_id*, or ``None`` for a model the catalog does not know.

    Matching is exact: ids are what goes on the wire, and a near miss (``GPT-5.6``) is a
    different string to the provider too.
    """
    return next((m for m in spec.models if m.id == model_id), None)


def _rank(effort: str) -> int:
    return REASONING_EFFORTS.index(effort)


def accepted_efforts(spec: ProviderSpec, model_id: str | None = None) -> tuple[str, ...]:
    """Efforts a provider — narrowed to one model when given — accepts, lowest first.

    Setup lists exactly these, so the operator is never offered a level the selected model
    would refuse. A model without a catalog ceiling accepts the whole provider subset.
    """
    efforts = spec.reasoning_efforts
    model = find_model(spec, model_id) if model_id else None
    if model is None or model.max_effort is None or model.max_effort not in REASONING_EFFORTS:
        return efforts
    ceiling = _rank(model.max_effort)
    return tuple(e for e in efforts if _rank(e) <= ceiling)


def clamp_effort(spec: ProviderSpec, model_id: str | None, effort: str) -> str | None:
    """Map a configured effort onto what the route can take, instead of letting it 400.

    Returns ``None`` for a provider that takes no effort (nothing is sent). A level above the
    ceiling clamps down to the highest accepted level; a level below the floor (``none`` on
    Anthropic) rises to the lowest. Only a word outside the canonical vocabulary is an error.
    """
    if effort not in REASONING_EFFORTS:
        raise EffortError(
            f"unknown reasoning effort {effort!r}; use one of: {', '.join(REASONING_EFFORTS)}"
        )
    accepted = accepted_efforts(spec, model_id)
    if not accepted:
        return None
    if effort in accepted:
        return effort
    below = [e for e in accepted if _rank(e) < _rank(effort)]
    return below[-1] if below else accepted[0]


@dataclass(frozen=True, slots=True)
class EffortResolution:
    """What a route will send, and why it differs from what was configured (if it does)."""

    #: The effort to send; ``None`` sends nothing and the provider's default applies.
    effort: str | None
    requested: str | None
    #: A human sentence when the configured level was changed; ``None`` when it was kept.
    note: str | None = None

    @property
    def changed(self) -> bool:
        return self.note is not None


def resolve_effort(
    spec: ProviderSpec, model_id: str | None, effort: str | None
) -> EffortResolution:
    """:func:`clamp_effort` plus an explanation, for the log line and ``fermix doctor``.

    Routing self-heals an over-reaching level rather than failing, but a silent change is
    one the operator cannot learn from, so every adjustment comes back as a note.
    """
    if effort is None:
        return EffortResolution(None, None)
    sent = clamp_effort(spec, model_id, effort)
    if sent == effort:
        return EffortResolution(sent, effort)
    # Name what set the limit: the provider's own range, or the model's catalog ceiling.
    by_model = model_id and effort in spec.reasoning_efforts
    where = f"model {model_id}" if by_model else f"provider {spec.name}"
    if sent is None:
        note = f"{spec.name} takes no reasoning effort; {effort!r} is not sent"
    elif _rank(sent) < _rank(effort):
        note = f"reasoning_effort {effort!r} is above what {where} accepts; using {sent!r}"
    else:
        note = f"reasoning_effort {effort!r} is below what {where} accepts; using {sent!r}"
    return EffortResolution(sent, effort, note)

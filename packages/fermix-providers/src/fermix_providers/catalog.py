"""The static model catalog shared by the first-party providers, and the effort rules on it.

The catalog is a snapshot, refreshed by hand when vendors ship or retire models
(``CATALOG_AS_OF`` says when it was last checked). It is authoritative for two things the
runtime cannot ask a provider cheaply at boot: which model a provider uses when none is
configured, and how large each model's context window is (compaction budgets from it). A
model id missing from the catalog still works — it is sent as given, with no known window
and no effort ceiling — so a stale catalog never blocks a new model.

Only plain data lives here: importing it costs nothing beyond :mod:`fermix_core.specs`.
The effort rules that read this data (``find_model``, ``accepted_efforts``,
``clamp_effort``) belong to core, which applies them at route resolution without knowing any
provider; they are re-exported here for code that reads them next to the catalog.
"""

from __future__ import annotations

from fermix_core.routing.effort import (  # noqa: F401 - re-exported, see above
    EffortError,
    accepted_efforts,
    clamp_effort,
    find_model,
)
from fermix_core.specs import REASONING_EFFORTS, ModelInfo, SetupField

#: When the model lists below were last checked against the vendors' published catalogs.
CATALOG_AS_OF = "2026-11"

#: Deterministic fallback order: a hop never depends on plugin load order. Ollama is last on
#: purpose — a local model is the last-resort hop.
FALLBACK_ORDER: tuple[str, ...] = (
    "openai_codex",
    "openai",
    "anthropic",
    "xai",
    "openrouter",
    "mistral",
    "ollama",
)

#: Registration module of each first-party provider (the value of its ``fermix`` entry point).
PLUGIN_MODULES: dict[str, str] = {
    name: f"fermix_providers.{name}.plugin" for name in FALLBACK_ORDER
}

#: Wires the OpenAI provider can be routed onto with its ``wire`` key (first is the default).
OPENAI_WIRES: tuple[str, ...] = ("responses", "chat_completions")

#: Keys every provider block accepts.
BASE_KEYS: frozenset[str] = frozenset({"primary", "default_model", "base_url", "vision_models"})

EFFORTS_OPENAI: tuple[str, ...] = REASONING_EFFORTS  # none .. max
EFFORTS_ANTHROPIC: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
EFFORTS_XAI: tuple[str, ...] = ("none", "low", "medium", "high")


def order_of(name: str) -> int:
    """Fallback position of a first-party provider: 10, 20, … in catalog order."""
    return (FALLBACK_ORDER.index(name) + 1) * 10


def config_keys(
    *,
    api_key: bool,
    effort: bool = False,
    auth_mode: bool = False,
    fast: bool = False,
    wire: bool = False,
) -> frozenset[str]:
    """Build a provider's key allowlist, so the rules for each optional key live in one place."""
    optional = {
        "api_key": api_key,
        "reasoning_effort": effort,
        "auth_mode": auth_mode,
        "fast": fast,
        "wire": wire,
    }
    return BASE_KEYS | {key for key, wanted in optional.items() if wanted}


def api_key_field(label: str, *, required: bool = True) -> SetupField:
    return SetupField(key="api_key", prompt=f"{label} API key", secret=True, required=required)


def model_field(default_model: str) -> SetupField:
    return SetupField(key="default_model", prompt="Model", required=False, default=default_model)


# --------------------------------------------------------------------------- model lists

#: OpenAI Platform models (``openai``). ``max`` effort is a GPT-5.6-family capability; the
#: older models top out at ``xhigh`` and a higher configured effort clamps to that.
OPENAI_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gpt-5.6", 400_000, vision=True, max_effort="max", label="GPT-5.6"),
    ModelInfo("gpt-5.6-mini", 400_000, vision=True, max_effort="max", label="GPT-5.6 mini"),
    ModelInfo("gpt-5.5", 400_000, vision=True, max_effort="xhigh", label="GPT-5.5"),
    ModelInfo("gpt-5.4", 400_000, vision=True, max_effort="xhigh", label="GPT-5.4"),
    ModelInfo("gpt-5.4-mini", 400_000, vision=True, max_effort="xhigh", label="GPT-5.4 mini"),
)

#: Models served through a ChatGPT subscription (``openai_codex``). The Codex backend accepts
#: a smaller input window than the Platform API, so its windows are listed separately.
CODEX_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("gpt-5.6-codex", 272_000, vision=True, max_effort="max", label="GPT-5.6 Codex"),
    ModelInfo("gpt-5.6", 272_000, vision=True, max_effort="max", label="GPT-5.6"),
    ModelInfo("gpt-5.5", 272_000, vision=True, max_effort="xhigh", label="GPT-5.5"),
    ModelInfo("gpt-5.4", 272_000, vision=True, max_effort="xhigh", label="GPT-5.4"),
    ModelInfo("gpt-5.4-mini", 272_000, vision=True, max_effort="xhigh", label="GPT-5.4 mini"),
)

#: Anthropic models carry no ceiling: per-model nuance is left to the API's own error.
ANTHROPIC_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("claude-opus-4-6", 200_000, vision=True, label="Claude Opus 4.6"),
    ModelInfo("claude-sonnet-4-6", 200_000, vision=True, label="Claude Sonnet 4.6"),
    ModelInfo("claude-haiku-4-5", 200_000, vision=True, label="Claude Haiku 4.5"),
)

#: xAI Grok models. Models that reject an effort have it omitted by the adapter, not here.
XAI_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("grok-4", 256_000, vision=True, label="Grok 4"),
    ModelInfo("grok-4-1-fast-reasoning", 2_000_000, vision=True, label="Grok 4.1 Fast"),
    ModelInfo(
        "grok-4-1-fast-non-reasoning",
        2_000_000,
        vision=True,
        label="Grok 4.1 Fast (non-reasoning)",
    ),
    ModelInfo("grok-code-fast-1", 256_000, vision=False, label="Grok Code Fast 1"),
)

#: OpenRouter ids are vendor-prefixed and use dots in version numbers, not dashes.
#: The setup page lists the live upstream catalog; this list only seeds defaults and windows.
OPENROUTER_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("anthropic/claude-sonnet-4.6", 200_000, vision=True),
    ModelInfo("anthropic/claude-opus-4.6", 200_000, vision=True),
    ModelInfo("anthropic/claude-haiku-4.5", 200_000, vision=True),
    ModelInfo("openai/gpt-5.5", 400_000, vision=True),
    ModelInfo("x-ai/grok-4", 256_000, vision=True),
    ModelInfo("google/gemini-2.5-pro", 1_048_576, vision=True),
    ModelInfo("meta-llama/llama-3.3-70b-instruct", 131_072, vision=False),
)

#: Mistral's three rolling tiers; each ``-latest`` alias follows the vendor's newest model.
MISTRAL_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("mistral-large-latest", 256_000, vision=True, label="Mistral Large"),
    ModelInfo("mistral-medium-latest", 128_000, vision=True, label="Mistral Medium"),
    ModelInfo("mistral-small-latest", 128_000, vision=True, label="Mistral Small"),
)

#: Common local models. Windows are model capability; the server may serve far less
#: (``num_ctx``), which the doctor probe checks against these numbers.
OLLAMA_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo("qwen3", 40_960, vision=False, label="Qwen3"),
    ModelInfo("llama3.2", 131_072, vision=False, label="Llama 3.2"),
    ModelInfo("llama3.2-vision", 131_072, vision=True, label="Llama 3.2 Vision"),
    ModelInfo("gemma3", 131_072, vision=True, label="Gemma 3"),
    ModelInfo("gpt-oss:20b", 131_072, vision=False, label="gpt-oss 20B"),
)
